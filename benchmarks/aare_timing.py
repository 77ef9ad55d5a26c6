"""Time PSI aare's cluster finders on .npy frames; run by an interpreter that has aare.

Usage: python aare_timing.py DARK.npy FRAMES.npy NY NX N_SIGMA REPEATS THREADS [WHICH]

Prints one JSON object: aare's version and, per finder, the seconds of every repetition
(``find_clusters`` over all frames, pedestal training excluded, clusters collected).
WHICH is ``both`` (default), or ``mt`` for ``ClusterFinderMT`` alone.
"""

import json
import sys
import time
from importlib.metadata import version

import aare
import numpy as np


def single(dark, frames, cluster_size, n_sigma):
    finder = aare.ClusterFinder(frames.shape[1:], cluster_size=cluster_size, n_sigma=n_sigma)
    for frame in dark:
        finder.push_pedestal_frame(frame)
    start = time.perf_counter()
    found = 0
    for k, frame in enumerate(frames):
        finder.find_clusters(frame, k)
        found += finder.steal_clusters().size
    return time.perf_counter() - start, found


def multi(dark, frames, cluster_size, n_sigma, threads):
    finder = aare.ClusterFinderMT(frames.shape[1:], cluster_size=cluster_size,
                                  n_sigma=n_sigma, n_threads=threads)
    collector = aare.ClusterCollector(finder)
    for frame in dark:
        finder.push_pedestal_frame(frame)
    finder.sync()
    start = time.perf_counter()
    for k, frame in enumerate(frames):
        finder.find_clusters(frame, k)
    finder.sync()
    elapsed = time.perf_counter() - start
    finder.stop()
    collector.stop()
    found = sum(v.size for v in collector.steal_clusters())
    return elapsed, found


def main(dark_path, frames_path, ny, nx, n_sigma, repeats, threads, which="both"):
    dark = np.load(dark_path)
    frames = np.load(frames_path)
    size = (int(ny), int(nx))
    out = {"aare_version": version("aare"), "ClusterFinder": [], "ClusterFinderMT": [],
           "threads": int(threads)}
    single(dark, frames[:5], size, float(n_sigma))
    for _ in range(int(repeats)):
        if which == "both":
            seconds, found = single(dark, frames, size, float(n_sigma))
            out["ClusterFinder"].append(seconds)
            out["ClusterFinder_clusters"] = found
        seconds, found = multi(dark, frames, size, float(n_sigma), int(threads))
        out["ClusterFinderMT"].append(seconds)
        out["ClusterFinderMT_clusters"] = found
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
