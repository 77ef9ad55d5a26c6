"""Where a frozen ``find`` spends the time its compiled chunk loop does not: the profile of
one call, as a user makes it (a fresh finder on a trained pedestal), on many threads.

    python benchmarks/frozen_find_profile.py [--frames 300] [--threads 16] [--top 25]

The simulated run of ``frozen_scaling.py``, 3x3 and 9x9. Each size: three timed calls
(the best printed, beside the chunk loop's share), then one under ``cProfile``, printed
by cumulative time. Python's profiler sees the calls from Python only: the chunk loop is
one line (``frozen_frames``), everything around it is broken down.
"""
import argparse
import cProfile
import io
import pstats
import time

import numba

from aare_lab import FrozenFinder
from aare_lab.finders import frozen
from frozen_scaling import SECONDS, moench_run, timed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--threads", type=int, default=numba.config.NUMBA_NUM_THREADS)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    ped, frames, _ = moench_run(args.frames)
    frozen.frozen_chunk = timed(frozen.frozen_chunk, "loop")
    for size in (3, 9):
        FrozenFinder(ped.copy(), 5.0, size, threads=args.threads).find(frames[:2],
                                                                      progress=False)
        best, loop = float("inf"), float("inf")
        for _ in range(3):
            finder = FrozenFinder(ped.copy(), 5.0, size, threads=args.threads)
            SECONDS["loop"] = 0.0
            start = time.perf_counter()
            finder.find(frames, progress=False)
            best = min(best, time.perf_counter() - start)
            loop = min(loop, SECONDS["loop"])
        print(f"\n{size}x{size}, {args.threads} threads: find {best * 1e3:.1f} ms "
              f"({args.frames / best:.0f} frames/s), chunk loop {loop * 1e3:.1f} ms, the rest "
              f"{(best - loop) * 1e3:.1f} ms", flush=True)
        finder = FrozenFinder(ped.copy(), 5.0, size, threads=args.threads)
        profile = cProfile.Profile()
        profile.enable()
        finder.find(frames, progress=False)
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(args.top)
        print(text.getvalue(), flush=True)


if __name__ == "__main__":
    main()
