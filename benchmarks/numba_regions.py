"""What one Numba parallel region costs by thread count, and how fast Numba's threads copy
working sets from L2-sized to DRAM-sized: the two bounds of the frozen finder's frame step
on many cores (parallel regions per frame over a pedestal state of a few MB).

    python benchmarks/numba_regions.py

Prints the threading layer and the OpenMP library loaded, microseconds per empty region
(20 000 calls) and GB/s (read + write) of a copy split over the threads.
"""
import time

import numba
import numpy as np
from numba import njit, prange


@njit(parallel=True, nogil=True)
def empty_region(a):
    for i in prange(len(a)):
        a[i] += 1.0


@njit(parallel=True, nogil=True)
def split_copy(src, dst, pieces):
    n = len(src)
    for p in prange(pieces):
        for k in range(p * n // pieces, (p + 1) * n // pieces):
            dst[k] = src[k]


def main():
    top = numba.config.NUMBA_NUM_THREADS
    counts = sorted({1, 2, 4, 8, 16, top} & set(range(1, top + 1)))
    a = np.zeros(top)
    empty_region(a)
    print("threading layer", numba.threading_layer(), top)
    maps = open("/proc/self/maps").read()
    print("omp libs:", sorted({line.split()[-1] for line in maps.splitlines()
                               if "omp" in line.lower()}))
    for n in counts:
        numba.set_num_threads(n)
        empty_region(a)
        start = time.perf_counter()
        for _ in range(20000):
            empty_region(a)
        print(f"empty region {n:2d} threads: "
              f"{(time.perf_counter() - start) / 20000 * 1e6:.1f} us")
    for mib in (2, 8, 32, 128, 256):
        src = np.ones(mib << 17)
        dst = np.zeros_like(src)
        for n in counts if mib == 256 else [top]:
            numba.set_num_threads(n)
            split_copy(src, dst, n)
            reps = max(10, 4000 // mib)
            start = time.perf_counter()
            for _ in range(reps):
                split_copy(src, dst, n)
            seconds = (time.perf_counter() - start) / reps
            print(f"copy {mib} MiB {n:2d} threads: {2 * src.nbytes / seconds / 1e9:.1f} GB/s "
                  "(read+write)")


if __name__ == "__main__":
    main()
