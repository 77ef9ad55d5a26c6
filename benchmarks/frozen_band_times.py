"""Where a frame of the frozen finder's `classify_frame` goes on many threads: each band's
start, length and end inside the parallel region, read from the time-stamp counter.

    python benchmarks/frozen_band_times.py [--frames 200] [--threads 1 8 16] [--sizes 3 9]

`frozen_regions.py` times the region as a whole, from Python: the slowest band, the
region's start and end and the dispatch together. Here the same band body
(`aare_lab.finders._frozen.classify_band`) runs in a parallel loop of this script's, which
reads the counter as each band starts and ends and which CPU ran it, so that a frame's
region splits into

- start: from the call to the first band's start, and the spread of the bands' starts;
- band: each band's own time, against the same band's on one thread (the bands run one
  after another there, ``--threads 1``); and
- wait: from the last band's end to the return.

Each thread count runs with even bands (``thr``) and with bands cut again after each frame
by their lengths, as the finder cuts them (``bal``, `aare_lab.finders._bands`; each band's
median rows printed too), and with the even bands one after another on one thread
(``1x<n>``): the bands' own cost with no parallel run beside them. The frames are the
simulated MÖNCH run of ``frozen_scaling.py`` (400x400, ~2300 photons a frame, fixed noise,
float64); the clusters are checked against ``find``'s. Prints medians over the frames, best
of the repeats, in µs, and each band's own median length (band 0 runs on the calling
thread), and how many CPUs the busiest-moving band ran on over the frames.
"""
import argparse
import ctypes
import time

import numba
import numpy as np
from frozen_regions import step_state
from frozen_scaling import moench_run
from numba import njit, prange

from aare_lab import FrozenFinder
from aare_lab.finders._bands import counter, even_bands, rebalance
from aare_lab.finders._frozen import classify_band, load_edges, write_frame

_libc = ctypes.CDLL(None)
sched_getcpu = _libc.sched_getcpu
sched_getcpu.restype, sched_getcpu.argtypes = ctypes.c_int, []


@njit(parallel=True, nogil=True, error_model="numpy")
def timed_classify(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                   row_counts, stores, thresholds, bounds, marks):
    """`classify_frame` without common mode or gain bits, each band's start and end
    counter and CPU in ``marks[band]``."""
    for b in prange(len(bounds) - 1):
        band = np.int64(b)
        marks[band, 0] = counter()
        classify_band(band, frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                      codes, row_counts, stores, None, None, thresholds, fixed, None, bounds)
        marks[band, 1] = counter()
        marks[band, 2] = sched_getcpu()


def cycles_per_us():
    c0, t0 = counter(), time.perf_counter()
    time.sleep(0.2)
    return (counter() - c0) / (time.perf_counter() - t0) / 1e6


def band_marks(finder, frames, n_bands, balanced):
    """Per frame: the call's start and end counter and each band's start, end and CPU; and
    each band's rows. ``balanced``: the bands cut again after each frame by their lengths,
    as the finder cuts them (`_bands.rebalance`), else even."""
    args, stores, thresholds, rounded, (win, ys, xs) = step_state(finder, len(frames))
    off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx = args
    v, codes, counts, start = finder._v, finder._codes, finder._row_counts, finder._row_start
    calls = np.zeros((len(frames), 2), np.int64)
    marks = np.zeros((len(frames), n_bands, 3), np.int64)
    rows = np.zeros((len(frames), n_bands), np.int64)
    bands = even_bands(n_bands, v.shape[0])
    bounds, ticks, _ = bands
    n_out = 0
    for f, frame in enumerate(frames):
        rows[f] = np.diff(bounds)
        load_edges(frame, off, s, N, v, None, None, ry, bounds)
        calls[f, 0] = counter()
        timed_classify(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                       counts, stores, thresholds, bounds, marks[f])
        calls[f, 1] = counter()
        if balanced:
            ticks[:] = marks[f, :, 1] - marks[f, :, 0]
            rebalance(*bands)
        np.cumsum(counts, out=start)
        kept = int(start[-1])
        start -= counts
        write_frame(v, counts, start, stores, kept, ry, rx, rounded, win, ys, xs, n_out)
        n_out += kept
    return calls, marks, rows, (win[:n_out], ys[:n_out], xs[:n_out])


def summary(calls, marks, per_us):
    """Medians over the frames, in µs: start, start spread, band min/median/max, wait."""
    begin, end = calls[:, :1], calls[:, 1]
    starts, ends = marks[:, :, 0] - begin, marks[:, :, 1] - begin
    lengths = marks[:, :, 1] - marks[:, :, 0]
    rows = {"call": end - begin[:, 0], "first start": starts.min(1),
            "start spread": starts.max(1) - starts.min(1), "band min": lengths.min(1),
            "band median": np.median(lengths, 1), "band max": lengths.max(1),
            "wait": (end - begin[:, 0]) - ends.max(1)}
    return {k: float(np.median(x)) / per_us for k, x in rows.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 9])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    top = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or sorted({1, 2, 8, top} & set(range(1, top + 1)))
    ped, frames, _ = moench_run(args.frames)
    FrozenFinder(ped.copy(), 5.0, 3).find(frames[:2], progress=False)
    per_us = cycles_per_us()
    print(f"threading layer {numba.threading_layer()}, {top} threads, counter "
          f"{per_us:.0f} MHz; µs a frame (median over {args.frames} frames, best of "
          f"{args.repeats})", flush=True)
    keys = ("call", "first start", "start spread", "band min", "band median", "band max",
            "wait")
    print(f"{'':14s}" + "".join(f"{k:>13s}" for k in keys) + "  CPUs a band")
    for size in args.sizes:
        expected = FrozenFinder(ped.copy(), 5.0, size).find(frames, progress=False)
        for n in threads:
            # n threads with even bands and with balanced ones; the even bands one after
            # another on one thread.
            runs = [(n, False), (n, True), (1, False)] if n > 1 else [(1, False)]
            for run_threads, balanced in runs:
                numba.set_num_threads(run_threads)
                best, cpus, by_band, band_rows = None, 0, None, None
                for _ in range(args.repeats):
                    finder = FrozenFinder(ped.copy(), 5.0, size, threads=run_threads)
                    finder.warmup()
                    calls, marks, rows, (win, ys, xs) = band_marks(finder, frames, n, balanced)
                    row = summary(calls, marks, per_us)
                    if best is None or row["call"] < best["call"]:
                        best = row
                        cpus = max(len(set(marks[:, b, 2])) for b in range(n))
                        by_band = np.median(marks[:, :, 1] - marks[:, :, 0], 0) / per_us
                        band_rows = np.median(rows, 0)
                np.testing.assert_array_equal(win, expected["window"].values)
                np.testing.assert_array_equal(ys, expected["y"].values)
                np.testing.assert_array_equal(xs, expected["x"].values)
                label = (f"{size}x{size} {run_threads}x{n}" if run_threads != n else
                         f"{size}x{size} {n:2d} {'bal' if balanced else 'thr'}")
                print(f"{label:14s}" + "".join(f"{best[k]:13.1f}" for k in keys) +
                      f"  {cpus}", flush=True)
                print(f"{'':14s}each band's median: " + " ".join(f"{t:.0f}" for t in by_band))
                if balanced:
                    print(f"{'':14s}each band's rows:   " +
                          " ".join(f"{r:.0f}" for r in band_rows))

if __name__ == "__main__":
    main()
