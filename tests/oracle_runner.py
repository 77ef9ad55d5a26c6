"""Run PSI aare's ClusterFinder on .npy frames; executed by an interpreter that has aare.

Usage: python oracle_runner.py DARK.npy FRAMES.npy NY NX N_SIGMA OUT.npz

Writes, per cluster in output order: frame index, x, y and the int32 window.
"""

import sys

import aare
import numpy as np


def main(dark_path, frames_path, ny, nx, n_sigma, out_path):
    dark = np.load(dark_path)
    frames = np.load(frames_path)
    finder = aare.ClusterFinder(frames.shape[1:], cluster_size=(int(ny), int(nx)),
                                n_sigma=float(n_sigma), dtype=np.int32)
    for frame in dark:
        finder.push_pedestal_frame(frame)
    frame_index, xs, ys, windows = [], [], [], []
    for k, frame in enumerate(frames):
        finder.find_clusters(frame, k)
        found = np.array(finder.steal_clusters())
        frame_index.append(np.full(len(found), k, np.int64))
        xs.append(found["x"].astype(np.int64))
        ys.append(found["y"].astype(np.int64))
        windows.append(found["data"].reshape(len(found), int(ny), int(nx)))
    np.savez(out_path, frame=np.concatenate(frame_index), x=np.concatenate(xs),
             y=np.concatenate(ys), window=np.concatenate(windows))


if __name__ == "__main__":
    main(*sys.argv[1:])
