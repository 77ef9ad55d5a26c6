"""Copying into fresh host memory: what bounds `find()`'s result assembly (issue 10).

`benchmarks/find_breakdown.py` found the copy of each batch into the result's arrays at
65–75 % of `find()`'s time, at 9–12 GB/s, against 54 GB/s into memory already mapped. This
measures, with NumPy alone, the ways of writing a run's results into memory no process has
touched yet:

- ``fresh``: `np.empty`, copied into by T threads (the pages are mapped, zeroed, on the
  first write: NumPy asks for transparent huge pages on large arrays);
- ``fresh_4k``: the same with ``MADV_NOHUGEPAGE`` (4 KiB pages only);
- ``warm``: a second copy into the same memory (the bandwidth bound);
- ``populate_then_copy``: ``madvise(MADV_POPULATE_WRITE)`` by T threads first (Linux ≥ 5.14),
  each part timed apart;
- ``populate_ahead``: one thread populates 64 MiB pieces ahead of the T copying threads,
  as a sink could while the GPU works on the next batch;
- with CuPy, the GPU's ways round the copy: ``cudaHostRegister`` of fresh memory (then a
  device-to-host copy straight into it) and ``cudaHostAlloc`` of the same size.

Usage: ``python benchmarks/fresh_memory.py [--gib 2] [--threads 8,16] [--repeats 3]``;
writes ``benchmarks/results/fresh_memory_<time>.json`` (or under ``--out``).
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import mmap
import os
import platform
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from records import git_commit, write_record  # noqa: E402

MADV_HUGEPAGE = 14
MADV_NOHUGEPAGE = 15
MADV_POPULATE_WRITE = 23
PIECE = 64 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def madvise(array: np.ndarray, advice: int, start: int = 0, stop: int | None = None) -> None:
    """madvise on the whole pages inside ``array``'s bytes ``start:stop``."""
    base = array.ctypes.data
    stop = array.nbytes if stop is None else stop
    lo = (base + start + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
    hi = (base + stop) // mmap.PAGESIZE * mmap.PAGESIZE
    if hi > lo and _libc.madvise(lo, hi - lo, advice) != 0:
        raise OSError(ctypes.get_errno(), f"madvise({advice}) failed")


def bounds(n: int, parts: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, n, parts + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def copy(pool: ThreadPoolExecutor, threads: int, src: np.ndarray, dst: np.ndarray) -> float:
    t0 = time.perf_counter()
    list(pool.map(lambda ab: np.copyto(dst[ab[0]:ab[1]], src[ab[0]:ab[1]]),
                  bounds(src.size, threads)))
    return time.perf_counter() - t0


def populate(pool: ThreadPoolExecutor, threads: int, dst: np.ndarray) -> float:
    t0 = time.perf_counter()
    list(pool.map(lambda ab: madvise(dst, MADV_POPULATE_WRITE, *ab), bounds(dst.nbytes, threads)))
    return time.perf_counter() - t0


def populate_ahead(pool: ThreadPoolExecutor, threads: int, src: np.ndarray,
                   dst: np.ndarray) -> float:
    """Pieces copied in order by ``threads`` threads while one more populates ahead."""
    pieces = bounds(src.size, max(1, src.nbytes // PIECE))
    ready = [threading.Event() for _ in pieces]

    def ahead():
        for (a, b), event in zip(pieces, ready):
            madvise(dst, MADV_POPULATE_WRITE, a, b)
            event.set()

    t0 = time.perf_counter()
    helper = threading.Thread(target=ahead)
    helper.start()
    for (a, b), event in zip(pieces, ready):
        event.wait()
        list(pool.map(lambda cd: np.copyto(dst[cd[0]:cd[1]], src[cd[0]:cd[1]]),
                      [(a + c, a + d) for c, d in bounds(b - a, threads)]))
    helper.join()
    return time.perf_counter() - t0


def cuda_cases(n: int, repeats: int) -> dict:
    """Pinning fresh memory (register, alloc) and copying the GPU's bytes straight in."""
    import cupy as cp

    device = cp.zeros(n, np.uint8)
    runs: dict[str, list] = {}
    for _ in range(repeats):
        dst = np.empty(n, np.uint8)
        t0 = time.perf_counter()
        cp.cuda.runtime.hostRegister(dst.ctypes.data, n, 0)
        t1 = time.perf_counter()
        device.get(out=dst)
        t2 = time.perf_counter()
        cp.cuda.runtime.hostUnregister(dst.ctypes.data)
        runs.setdefault("register_fresh", []).append(
            {"register_s": t1 - t0, "d2h_s": t2 - t1, "total_s": t2 - t0})
        del dst
        # The runtime's call, not CuPy's pinned pool, which would hand the block back.
        t0 = time.perf_counter()
        pointer = cp.cuda.runtime.hostAlloc(n, 0)
        t1 = time.perf_counter()
        cp.cuda.runtime.freeHost(pointer)
        runs.setdefault("alloc_pinned", []).append(t1 - t0)
    return runs


def read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--threads", default="8,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cuda", action="store_true", help="also the CuPy cases")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    n = int(args.gib * (1 << 30))
    src = np.ones(n, np.uint8)
    cases: dict = {}
    populate_works = True
    for threads in [int(t) for t in args.threads.split(",")]:
        with ThreadPoolExecutor(threads) as pool:
            copy(pool, threads, src, np.empty(n, np.uint8))  # threads started, source warm
            runs: dict[str, list] = {}
            for _ in range(args.repeats):
                dst = np.empty(n, np.uint8)
                runs.setdefault("fresh", []).append(copy(pool, threads, src, dst))
                runs.setdefault("warm", []).append(copy(pool, threads, src, dst))
                del dst
                dst = np.empty(n, np.uint8)
                madvise(dst, MADV_NOHUGEPAGE)
                runs.setdefault("fresh_4k", []).append(copy(pool, threads, src, dst))
                del dst
                if populate_works:
                    dst = np.empty(n, np.uint8)
                    try:
                        p = populate(pool, threads, dst)
                    except OSError as err:
                        populate_works = False
                        cases["populate_error"] = str(err)
                    else:
                        c = copy(pool, threads, src, dst)
                        runs.setdefault("populate_then_copy", []).append(
                            {"populate_s": p, "copy_s": c, "total_s": p + c})
                        del dst
                        dst = np.empty(n, np.uint8)
                        runs.setdefault("populate_ahead", []).append(
                            populate_ahead(pool, threads, src, dst))
                    del dst
            summary = {}
            for name, values in runs.items():
                totals = [v["total_s"] if isinstance(v, dict) else v for v in values]
                best = min(totals)
                summary[name] = {"best_s": best, "GB_per_s": n / best / 1e9, "runs": values}
            cases[f"{threads}_threads"] = summary
            print(threads, "threads:", {k: round(v["GB_per_s"], 1) for k, v in summary.items()})
    if args.cuda:
        runs = cuda_cases(n, args.repeats)
        cases["cuda"] = {name: {"best_s": min(v["total_s"] if isinstance(v, dict) else v
                                              for v in values),
                                "runs": values} for name, values in runs.items()}
        for summary in cases["cuda"].values():
            summary["GB_per_s"] = n / summary["best_s"] / 1e9
        print("cuda:", {k: round(v["GB_per_s"], 1) for k, v in cases["cuda"].items()})
    record = {
        "benchmark": "fresh_memory",
        "date": datetime.now(UTC).isoformat(),
        "git_commit": git_commit(),
        "host": {"kernel": platform.release(), "cpus": len(os.sched_getaffinity(0)),
                 "thp_enabled": read("/sys/kernel/mm/transparent_hugepage/enabled"),
                 "thp_defrag": read("/sys/kernel/mm/transparent_hugepage/defrag"),
                 "numpy": np.__version__},
        "parameters": {"bytes": n, "repeats": args.repeats, "piece_bytes": PIECE},
        "cases": cases,
    }
    write_record(record, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
