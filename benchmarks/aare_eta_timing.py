"""Time PSI aare's η functions and Interpolator; run by an interpreter that has aare.

Usage: python aare_eta_timing.py CLUSTERS.clust N MAPS.npz REPEATS

Reads N 3x3 int32 clusters from the aare cluster file (not timed), builds an
Interpolator from the histogram in MAPS.npz (``cube``, ``xbins``, ``ybins``, ``ebins``;
not timed) and prints one JSON object: aare's version and, per function, the seconds of
every repetition over all N clusters.
"""

import json
import sys
import time
from importlib.metadata import version

import aare
import numpy as np


def main(path, n, maps_path, repeats):
    clusters = aare.ClusterFile(path, (3, 3), np.int32).read_clusters(int(n))
    maps = np.load(maps_path)
    interpolator = aare.Interpolator(*(np.ascontiguousarray(maps[k], np.float64)
                                       for k in ("xbins", "ybins", "ebins")))
    interpolator.rosenblatttransform(np.ascontiguousarray(maps["cube"], np.float64))
    work = {"eta2": lambda: aare.calculate_eta2(clusters),
            "full_eta2": lambda: aare.calculate_full_eta2(clusters),
            "eta3": lambda: aare.calculate_eta3(clusters),
            "cross_eta3": lambda: aare.calculate_cross_eta3(clusters),
            "interpolate_eta2": lambda: interpolator.interpolate(clusters)}
    seconds = {}
    for name, call in work.items():
        seconds[name] = []
        for _ in range(int(repeats)):
            start = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)
    print(json.dumps({"aare_version": version("aare"), "clusters": clusters.size,
                      "seconds": seconds}))


if __name__ == "__main__":
    main(*sys.argv[1:])
