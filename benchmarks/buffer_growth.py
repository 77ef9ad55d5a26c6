"""What a CPU finder's first chunk spends growing its output buffers, one thread's work that
no other thread shares: doubling from `aare_lab.finders.base.INITIAL_CLUSTER_ROWS` rows, as
before, against growing to the chunk's estimate (`aare_lab.finders._buffers.reserve`).

    python benchmarks/buffer_growth.py [--frames 64] [--clusters 2300] [--repeats 5]

A compiled loop goes through a chunk's frames as the frozen finder does: room for the
frame's clusters (``reserve``, with the estimate the finder passes, or 0: doubling only),
then the frame's windows written once (int32, 3x3 and 9x9), fresh buffers each repeat.
Printed: the best time of each, and the difference, the growth's own cost.
"""
import argparse
import time

import numpy as np
from numba import njit

from aare_lab.finders._buffers import reserve
from aare_lab.finders.base import INITIAL_CLUSTER_ROWS


@njit(cache=True)
def first_chunk(win, ys, xs, nf, per_frame, estimated):
    n_out = 0
    for f in range(nf):
        need = n_out + per_frame
        win, ys, xs = reserve(win, ys, xs, n_out, need, need * nf // (f + 1) if estimated else 0)
        win[n_out:need] = 1
        n_out = need
    return n_out


def fresh(size):
    rows = INITIAL_CLUSTER_ROWS
    return (np.empty((rows, size, size), np.int32), np.empty(rows, np.int32),
            np.empty(rows, np.int32))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--clusters", type=int, default=2300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for size in (3, 9):
        best = {}
        for estimated in (False, True):
            first_chunk(*fresh(size), 2, 10, estimated)
        for _ in range(args.repeats):
            for estimated in (False, True):
                start = time.perf_counter()
                first_chunk(*fresh(size), args.frames, args.clusters, estimated)
                seconds = time.perf_counter() - start
                best[estimated] = min(best.get(estimated, np.inf), seconds)
        print(f"{size}x{size}, {args.frames} frames of {args.clusters} clusters: doubling "
              f"{best[False] * 1e3:.1f} ms, to the estimate {best[True] * 1e3:.1f} ms, the "
              f"growth's own cost {(best[False] - best[True]) * 1e3:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
