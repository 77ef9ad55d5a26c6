"""The frozen finder's frame step region by region, by thread count: which of its three
parallel regions (`load_edges`, `classify_frame`, `write_frame`) stops scaling.

    python benchmarks/frozen_regions.py [--frames 200] [--threads 1 8 16] [--repeats 3]

The regions of each frame are called one by one from Python, as
`aare_lab.finders._frozen.frozen_frames` calls them in compiled code, each timed on its
own (its Python dispatch included: ``write_frame`` of a frame without clusters gives that
floor, with the region's start and end); the clusters are checked against ``find``'s. The
same simulated MÖNCH run as ``frozen_scaling.py`` (400x400, ~2300 photons per frame, fixed
noise, float64), 3x3 and 9x9. Prints microseconds a frame (median over the frames, best of
the repeats) and, for each region, its threads' share of one thread's rate.
"""
import argparse
import time

import numba
import numpy as np
from frozen_scaling import moench_run

from aare_lab import FrozenFinder
from aare_lab.detector.arith import zero_offsets
from aare_lab.finders._bands import even_bands, rebalance
from aare_lab.finders._frozen import classify_frame, fixed_thresholds, load_edges, write_frame
from aare_lab.model.params import INTEGER_WINDOW_DTYPES

REGIONS = ("load_edges", "classify_frame", "write_frame", "empty write_frame")


def step_state(finder, n_frames):
    """What the frame step's regions take for ``finder``, as `frozen_frames` has them: its
    kernel arguments (``off`` None where all 0), the stores' scratch, the chunk's fixed
    thresholds, whether windows are rounded, and output buffers with room for ``n_frames``
    busy frames, written before any clock starts, as the finder's own are after its first
    chunk (fresh pages would charge their faults to ``write_frame``)."""
    off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx = finder._kernel_args()
    v = finder._v
    thresholds = np.empty_like(v)
    fixed_thresholds(s, s2, rms_fixed, N, nsig, thresholds)
    dtype = finder.spec.window_dtype
    room = 2 * n_frames * v.size // 50
    out = (np.ones((room, *finder.spec.cluster_size), dtype), np.ones(room, np.int32),
           np.ones(room, np.int32))
    return ((zero_offsets(off), s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx),
            np.empty(v.shape, np.int32), thresholds, dtype in INTEGER_WINDOW_DTYPES, out)


def region_times(finder, frames, n_threads):
    """Microseconds of each region for every frame, and the clusters found."""
    args, stores, thresholds, rounded, (win, ys, xs) = step_state(finder, len(frames))
    off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx = args
    v, codes, counts, start = finder._v, finder._codes, finder._row_counts, finder._row_start
    bands = even_bands(min(n_threads, v.shape[0]), v.shape[0])
    bounds, ticks, _ = bands
    times, n_out = np.zeros((len(frames), len(REGIONS))), 0
    no_clusters = np.zeros_like(counts)
    for f, frame in enumerate(frames):
        t0 = time.perf_counter()
        load_edges(frame, off, s, N, v, None, None, ry, bounds)
        t1 = time.perf_counter()
        classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                       counts, stores, None, None, thresholds, fixed, None, bounds, ticks)
        t2 = time.perf_counter()
        rebalance(*bands)
        np.cumsum(counts, out=start)
        kept = int(start[-1])
        start -= counts
        t3 = time.perf_counter()
        write_frame(v, counts, start, stores, kept, ry, rx, rounded, win, ys, xs, n_out)
        t4 = time.perf_counter()
        write_frame(v, no_clusters, start, stores, 0, ry, rx, rounded, win, ys, xs, n_out)
        t5 = time.perf_counter()
        times[f] = t1 - t0, t2 - t1, t4 - t3, t5 - t4
        n_out += kept
    return times * 1e6, (win[:n_out], ys[:n_out], xs[:n_out])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    top = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or sorted({1, 2, 4, 8, top} & set(range(1, top + 1)))
    ped, frames, _ = moench_run(args.frames)
    FrozenFinder(ped.copy(), 5.0, 3).find(frames[:2], progress=False)
    print(f"threading layer {numba.threading_layer()}, {top} threads; microseconds a frame "
          f"(median over {args.frames} frames, best of {args.repeats})", flush=True)
    for size in (3, 9):
        expected = FrozenFinder(ped.copy(), 5.0, size).find(frames, progress=False)
        one = None
        for n in threads:
            numba.set_num_threads(n)
            best = np.full(len(REGIONS), np.inf)
            for _ in range(args.repeats):
                finder = FrozenFinder(ped.copy(), 5.0, size, threads=n)
                finder.warmup()
                times, (win, ys, xs) = region_times(finder, frames, n)
                best = np.minimum(best, np.median(times, axis=0))
            np.testing.assert_array_equal(win, expected["window"].values)
            np.testing.assert_array_equal(ys, expected["y"].values)
            np.testing.assert_array_equal(xs, expected["x"].values)
            one = best if one is None else one
            share = " ".join(f"{name} {t:7.1f} ({one[k] / t / n:4.0%})"
                             for k, (name, t) in enumerate(zip(REGIONS[:3], best)))
            print(f"{size}x{size} {n:3d} threads: {share}; sum {best[:3].sum():7.1f}; "
                  f"{REGIONS[3]} {best[3]:5.1f}", flush=True)


if __name__ == "__main__":
    main()
