"""Where a frame of the frozen finder's `classify_frame` goes on many threads: each band's
start, length and end inside the parallel region, read from the time-stamp counter, and
what each thread took.

    python benchmarks/frozen_band_times.py [--frames 200] [--threads 1 8 16] [--sizes 3 9]
        [--bands-per-thread 1 4]

`frozen_regions.py` times the region as a whole, from Python: the slowest thread, the
region's start and end and the dispatch together. Here the same band body
(`aare_lab.finders._frozen.classify_band`) runs in a parallel loop of this script's that
shares the bands out as `classify_frame` does (each thread its own bands first, then
those of others not yet taken, `next_band`) and reads the counter as each band starts and ends, and which CPU ran it, so
that a frame's region splits into

- start: from the call to the first band's start;
- band: each band's own time, against the same bands' with every band on one thread
  (``1x<n>``, no parallel run beside them);
- busy: each thread's bands together (its fewest and most), and how many bands a thread
  took (fewest and most); and
- wait: from the last band's end to the return.

``--bands-per-thread`` sets `aare_lab.finders._frozen.BANDS_PER_THREAD` for `band_count`
(1: one band a thread, as the finder had before it shared bands out). The frames are the
simulated MÖNCH run of ``frozen_scaling.py`` (400x400, ~2300 photons a frame, fixed noise,
float64); the clusters are checked against ``find``'s. Prints medians over the frames,
best of the repeats, in µs, and each CPU's median band length where a band ran on it
(the cores of a virtual machine need not be alike).
"""
import argparse
import ctypes
import time

import numba
import numpy as np
from frozen_scaling import moench_run
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from aare_lab import FrozenFinder
from aare_lab.detector.arith import zero_offsets
from aare_lab.finders import _frozen
from aare_lab.finders._frozen import (
    band_count,
    classify_band,
    fixed_thresholds,
    load_edges,
    next_band,
    share_counters,
    write_frame,
)
from aare_lab.model.params import INTEGER_WINDOW_DTYPES

_libc = ctypes.CDLL(None)
sched_getcpu = _libc.sched_getcpu
sched_getcpu.restype, sched_getcpu.argtypes = ctypes.c_int, []


@intrinsic
def _cycles(typingctx):
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


@njit(nogil=True)
def cycles():
    """The time-stamp counter (constant rate on these hosts: ``constant_tsc``)."""
    return _cycles()


@njit(parallel=True, nogil=True, error_model="numpy")
def timed_classify(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                   row_counts, stores, thresholds, bands, marks):
    """`classify_frame` without common mode or gain bits, each band's start and end
    counter, CPU and thread in ``marks[band]``."""
    n_bands, n_tasks = bands
    taken = share_counters(n_tasks)
    for t in prange(n_tasks):
        task = np.int64(t)
        band = next_band(taken, task, n_bands)
        while band >= 0:
            marks[band, 0] = _cycles()
            classify_band(band, frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                          codes, row_counts, stores, None, None, thresholds, fixed, None,
                          n_bands)
            marks[band, 1] = _cycles()
            marks[band, 2] = sched_getcpu()
            marks[band, 3] = task
            band = next_band(taken, task, n_bands)


def cycles_per_us():
    c0, t0 = cycles(), time.perf_counter()
    time.sleep(0.2)
    return (cycles() - c0) / (time.perf_counter() - t0) / 1e6


def band_marks(finder, frames, bands, run_threads):
    """Per frame: the call's start and end counter and each band's start, end, CPU and
    thread; the bands as ``bands`` (`band_count`), taken by ``run_threads`` threads."""
    off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx = finder._kernel_args()
    off = zero_offsets(off)
    v, codes, counts, start = finder._v, finder._codes, finder._row_counts, finder._row_start
    stores = np.empty(v.shape, np.int32)
    thresholds = np.empty_like(v)
    fixed_thresholds(s, s2, rms_fixed, N, nsig, thresholds)
    dtype = finder.spec.window_dtype
    rounded = dtype in INTEGER_WINDOW_DTYPES
    room = 2 * len(frames) * v.size // 50
    win = np.ones((room, *finder.spec.cluster_size), dtype)
    ys, xs = np.ones(room, np.int32), np.ones(room, np.int32)
    calls = np.zeros((len(frames), 2), np.int64)
    marks = np.zeros((len(frames), bands[0], 4), np.int64)
    taken = (bands[0], run_threads)
    n_out = 0
    for f, frame in enumerate(frames):
        load_edges(frame, off, s, N, v, None, None, ry, taken)
        calls[f, 0] = cycles()
        timed_classify(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                       counts, stores, thresholds, taken, marks[f])
        calls[f, 1] = cycles()
        np.cumsum(counts, out=start)
        kept = int(start[-1])
        start -= counts
        write_frame(v, counts, start, stores, kept, ry, rx, rounded, win, ys, xs, n_out, taken)
        n_out += kept
    return calls, marks, (win[:n_out], ys[:n_out], xs[:n_out])


def summary(calls, marks, per_us, threads):
    """Medians over the frames, in µs (and bands): start, band min/median/max, each
    thread's busy time and bands (fewest, most), wait."""
    begin, end = calls[:, :1], calls[:, 1]
    starts, ends = marks[:, :, 0] - begin, marks[:, :, 1] - begin
    lengths = marks[:, :, 1] - marks[:, :, 0]
    task = marks[:, :, 3]
    busy = np.stack([np.where(task == t, lengths, 0).sum(1) for t in range(threads)], 1)
    taken = np.stack([(task == t).sum(1) for t in range(threads)], 1)
    rows = {"call": end - begin[:, 0], "first start": starts.min(1),
            "band min": lengths.min(1), "band median": np.median(lengths, 1),
            "band max": lengths.max(1), "busy min": busy.min(1), "busy max": busy.max(1),
            "wait": (end - begin[:, 0]) - ends.max(1)}
    out = {k: float(np.median(x)) / per_us for k, x in rows.items()}
    out["bands min"] = float(np.median(taken.min(1)))
    out["bands max"] = float(np.median(taken.max(1)))
    return out


def by_cpu(marks, per_us):
    """Each CPU's median band length, in µs, over the bands it ran."""
    lengths = (marks[:, :, 1] - marks[:, :, 0]).ravel() / per_us
    cpus = marks[:, :, 2].ravel()
    return {int(c): float(np.median(lengths[cpus == c])) for c in np.unique(cpus)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 9])
    parser.add_argument("--bands-per-thread", type=int, nargs="+",
                        default=[_frozen.BANDS_PER_THREAD])
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
    keys = ("call", "first start", "band min", "band median", "band max", "busy min",
            "busy max", "wait", "bands min", "bands max")
    print(f"{'':22s}" + "".join(f"{k:>12s}" for k in keys))
    for size in args.sizes:
        expected = FrozenFinder(ped.copy(), 5.0, size).find(frames, progress=False)
        ry = (size - 1) // 2
        for n in threads:
            for per_thread in args.bands_per_thread if n > 1 else [1]:
                _frozen.BANDS_PER_THREAD = per_thread
                bands = band_count(ped.frame_shape[0], ry, n)
                for run_threads in sorted({1, n}, reverse=True):
                    numba.set_num_threads(run_threads)
                    best, cpus = None, None
                    for _ in range(args.repeats):
                        finder = FrozenFinder(ped.copy(), 5.0, size, threads=run_threads)
                        finder.warmup()
                        calls, marks, (win, ys, xs) = band_marks(finder, frames, bands,
                                                                 run_threads)
                        row = summary(calls, marks, per_us, run_threads)
                        if best is None or row["call"] < best["call"]:
                            best, cpus = row, by_cpu(marks, per_us)
                    np.testing.assert_array_equal(win, expected["window"].values)
                    np.testing.assert_array_equal(ys, expected["y"].values)
                    np.testing.assert_array_equal(xs, expected["x"].values)
                    label = (f"{size}x{size} {run_threads}x{bands[0]} bands"
                             if run_threads != n else f"{size}x{size} {n}thr {bands[0]} bands")
                    print(f"{label:22s}" + "".join(f"{best[k]:12.1f}" for k in keys),
                          flush=True)
                    if run_threads > 1:
                        print(f"{'':22s}median band by CPU: " +
                              " ".join(f"{c}:{t:.0f}" for c, t in cpus.items()), flush=True)


if __name__ == "__main__":
    main()
