"""The frozen finder's floor on many threads: one pass a frame over the bytes its step must
move, with none of its decision.

    python benchmarks/frozen_state_floor.py [--frames 300] [--threads 1 16] [--repeats 5]

Each pixel of each frame: its count read, ``s`` and ``s2`` read and written (the push),
the fixed rms read (the threshold), ``v = x - s / N`` compared with it: 42 bytes a pixel
in float64, every pixel pushed, in one parallel region a frame over bands of rows, as the
frozen finder's bands go (`aare_lab.finders._frozen`). Printed: frames/s and the bytes a
second that makes, beside the frozen finder's own frames/s on the same frames (3x3, fixed
noise, `find` and its compiled chunk loop alone; the run and the timing of
``frozen_scaling.py``).
"""
import argparse
import time

import numba
import numpy as np
from numba import njit, prange

from aare_lab import FrozenFinder
from aare_lab.finders import frozen
from frozen_scaling import SECONDS, moench_run, timed

BYTES_PER_PIXEL = 2 + 8 + 8 + 8 + 8 + 8


@njit(parallel=True, nogil=True, cache=True)
def state_pass(frames, s, s2, rms, N, nsig, n_bands):
    """Every frame in turn, its rows in ``n_bands`` bands: each pixel below its threshold
    pushed, as good as every pixel in a frame of a few photons."""
    ny, nx = s.shape
    for f in range(frames.shape[0]):
        for band in prange(n_bands):
            for i in range(band * ny // n_bands, (band + 1) * ny // n_bands):
                x, si, s2i, ri = frames[f, i], s[i], s2[i], rms[i]
                for j in range(nx):
                    value = x[j] - si[j] / N
                    if value < nsig * ri[j]:
                        si[j] += x[j]
                        s2i[j] += x[j] * x[j]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--threads", type=int, nargs="+",
                        default=[1, numba.config.NUMBA_NUM_THREADS])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ped, frames, _ = moench_run(args.frames)
    frozen.frozen_chunk = timed(frozen.frozen_chunk, "loop")
    pixels = frames.shape[1] * frames.shape[2]
    # Compiled (or loaded from Numba's cache) before any repeat is timed.
    state_pass(frames[:1], ped.s.copy(), ped.s2.copy(), ped.rms_fixed, float(ped.N), 5.0, 1)
    for n in args.threads:
        numba.set_num_threads(n)
        floor, found, chunk = np.inf, np.inf, np.inf
        for _ in range(args.repeats):
            s, s2 = ped.s.copy(), ped.s2.copy()
            start = time.perf_counter()
            state_pass(frames, s, s2, ped.rms_fixed, float(ped.N), 5.0, min(n, 400))
            floor = min(floor, time.perf_counter() - start)
            finder = FrozenFinder(ped.copy(), 5.0, 3, threads=n)
            finder.find(frames[:2], progress=False)
            SECONDS["loop"] = 0.0
            start = time.perf_counter()
            finder.find(frames, progress=False)
            found, chunk = min(found, time.perf_counter() - start), min(chunk, SECONDS["loop"])
        rate = args.frames / floor
        print(f"{n:3d} threads: state pass {rate:7.0f} frames/s "
              f"({rate * pixels * BYTES_PER_PIXEL / 1e9:5.1f} GB/s); frozen 3x3 find "
              f"{args.frames / found:7.0f}, chunk loop {args.frames / chunk:7.0f} frames/s "
              f"({args.frames / chunk / rate:.0%} of the state pass)", flush=True)


if __name__ == "__main__":
    main()
