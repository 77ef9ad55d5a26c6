"""PSI aare's own ClusterFile reader, writer and finder; run by an interpreter that has aare.

Usage: python clusterfile_runner.py JOBS.json

Each job is a dict with ``"task"``:

- ``"read"``: ``path``, ``size``, ``dtype``, ``out``: aare reads the cluster file and
  ``out`` (.npz) gets per frame ``frame`` and ``count``, per cluster ``x``, ``y``, ``data``.
- ``"write"``: ``npz`` (those same arrays), ``size``, ``dtype``, ``path``: aare writes them.
- ``"find"``: ``dark``, ``frames`` (.npy), ``size``, ``n_sigma``, ``path``: aare's
  ClusterFinder finds clusters in every frame and aare's ClusterFile writes them.
"""

import json
import os
import sys

import aare
import numpy as np


def read(job):
    cf = aare.ClusterFile(job["path"], tuple(job["size"]), np.dtype(job["dtype"]))
    end = os.path.getsize(job["path"])
    frames, counts, clusters = [], [], []
    # 2026.3.17 raises at the end of the file instead of returning None; tell() says where.
    while cf.tell() < end:
        vector = cf.read_frame()
        frames.append(vector.frame_number)
        counts.append(vector.size)
        clusters.append(np.array(vector))
    cf.close()
    found = np.concatenate(clusters) if clusters else np.zeros(0)
    np.savez(job["out"], frame=np.array(frames, np.int64), count=np.array(counts, np.int64),
             x=found["x"], y=found["y"], data=found["data"])


def write(job):
    given = np.load(job["npz"])
    dtype = np.dtype(job["dtype"])
    cf = aare.ClusterFile(job["path"], tuple(job["size"]), dtype, mode="w")
    at = 0
    for frame, count in zip(given["frame"], given["count"]):
        vector = aare.ClusterVector(tuple(job["size"]), dtype)
        vector.frame_number = int(frame)
        for i in range(at, at + count):
            vector.push_back(aare.Cluster(int(given["x"][i]), int(given["y"][i]),
                                          given["data"][i].ravel().astype(dtype),
                                          tuple(job["size"]), dtype))
        cf.write_frame(vector)
        at += count
    cf.close()


def find(job):
    dark, frames = np.load(job["dark"]), np.load(job["frames"])
    finder = aare.ClusterFinder(frames.shape[1:], cluster_size=tuple(job["size"]),
                                n_sigma=float(job["n_sigma"]), dtype=np.int32)
    for frame in dark:
        finder.push_pedestal_frame(frame)
    cf = aare.ClusterFile(job["path"], tuple(job["size"]), np.int32, mode="w")
    for k, frame in enumerate(frames):
        finder.find_clusters(frame, k)
        cf.write_frame(finder.steal_clusters())
    cf.close()


if __name__ == "__main__":
    with open(sys.argv[1]) as file:
        for job in json.load(file):
            {"read": read, "write": write, "find": find}[job["task"]](job)
