"""The frozen finder's frames/s by thread count, and the shares of ``find`` spent in its
compiled chunk loop (`aare_lab.finders._frozen.frozen_chunk`) and in copying each chunk's
clusters into the result (`aare_lab.finders._assembly.MemorySink.add`): where scaling
stops, whether the loop or the work around it is the bound.

    python benchmarks/frozen_scaling.py [--frames 200] [--threads 1 2 4 8 16] [--repeats 3]

One simulated MÖNCH run (400x400, ~2300 photons per frame, fixed noise, float64), 3x3 and
9x9, best of the repeats; every thread count gives the clusters of one thread (checked).
"""
import argparse
import time

import numba
import numpy as np

from aare_lab import FrozenFinder, Pedestal
from aare_lab.finders import _assembly, frozen
from aare_lab.simulate import Beam, Detector, Simulator

SECONDS = {"loop": 0.0, "sink": 0.0}


def timed(original, stage):
    def call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            SECONDS[stage] += time.perf_counter() - start
    return call


def moench_run(n_frames):
    """The trained pedestal and ``n_frames`` frames of the simulated run above."""
    sim = Simulator(Detector(frame_shape=(400, 400)), Beam(photons_per_frame=2300), seed=1)
    ped = Pedestal((400, 400), 300, noise="fixed")
    ped.push_dark(sim.dark(300))
    return ped, sim.frames(n_frames)[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    top = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or sorted({1, 2, 4, 8, top} & set(range(1, top + 1)))
    ped, frames = moench_run(args.frames)
    frozen.frozen_chunk = timed(frozen.frozen_chunk, "loop")
    _assembly.MemorySink.add = timed(_assembly.MemorySink.add, "sink")
    FrozenFinder(ped.copy(), 5.0, 3).find(frames[:2], progress=False)
    print(f"threading layer {numba.threading_layer()}, {top} threads", flush=True)
    for size in (3, 9):
        reference = None
        for n in threads:
            best, loop, sink = np.inf, np.inf, np.inf
            for _ in range(args.repeats):
                finder = FrozenFinder(ped.copy(), 5.0, size, threads=n)
                finder.find(frames[:2], progress=False)
                SECONDS.update(loop=0.0, sink=0.0)
                start = time.perf_counter()
                result = finder.find(frames, progress=False)
                best = min(best, time.perf_counter() - start)
                loop, sink = min(loop, SECONDS["loop"]), min(sink, SECONDS["sink"])
            digest = [result[k].to_numpy().tobytes() for k in ("window", "y", "x", "n_found")]
            reference = reference or digest
            assert digest == reference, (size, n)
            print(f"{size}x{size} {n:3d} threads: {args.frames / best:7.0f} frames/s, chunk "
                  f"loop {args.frames / loop:7.0f} frames/s ({loop / best:.0%} of find), "
                  f"result assembly {sink / best:.0%} of find", flush=True)


if __name__ == "__main__":
    main()
