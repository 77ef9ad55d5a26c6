"""The frozen finder's frames/s by thread count: its bands (`frozen_bands`, each band
through the frames at its own pace) against one barrier-bound step per frame
(`frozen_chunk`, every band in step), with the same clusters.

    python benchmarks/frozen_scaling.py [--frames 200] [--threads 1 2 4 8 16]
"""
import argparse
import time

import numba
import numpy as np

from aare_lab import FrozenFinder, Pedestal
from aare_lab.finders import frozen
from aare_lab.simulate import Beam, Detector, Simulator


class InStep(FrozenFinder):
    """Every frame's bands in step (the compiled `frozen_chunk`) at every thread count."""

    def _run(self, frames, *, cap, round_values, win, ys, xs, n_found, n_kept,
             map_slot, maps, cm, gs):
        previous = numba.get_num_threads()
        numba.set_num_threads(self.threads)
        try:
            return frozen.frozen_chunk(
                frames, *self._kernel_args(), cap, round_values, self._v, self._codes,
                self._row_counts, self._row_start, win, ys, xs, 0, n_found, n_kept,
                map_slot, maps, cm, gs)
        finally:
            numba.set_num_threads(previous)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    top = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or sorted({1, 2, 4, 8, top} & set(range(1, top + 1)))
    sim = Simulator(Detector(frame_shape=(400, 400)), Beam(photons_per_frame=2300), seed=1)
    ped = Pedestal((400, 400), 300, noise="fixed")
    ped.push_dark(sim.dark(300))
    frames, _ = sim.frames(args.frames)
    FrozenFinder(ped.copy(), 5.0, 3).find(frames[:2], progress=False)
    print(f"threading layer {numba.threading_layer()}, {top} threads", flush=True)
    for size in (3, 9):
        reference = None
        for n in threads:
            rates = {}
            for kind in (FrozenFinder, InStep):
                best = np.inf
                for _ in range(args.repeats):
                    finder = kind(ped.copy(), 5.0, size, threads=n)
                    finder.find(frames[:2], progress=False)
                    start = time.perf_counter()
                    result = finder.find(frames, progress=False)
                    best = min(best, time.perf_counter() - start)
                digest = [result[k].values.tobytes() for k in ("window", "y", "x", "n_found")]
                reference = reference or digest
                assert digest == reference, (size, n, kind.__name__)
                rates[kind.__name__] = args.frames / best
            print(f"{size}x{size} {n:3d} threads: bands {rates['FrozenFinder']:7.0f} fps, "
                  f"in step {rates['InStep']:7.0f} fps, same clusters", flush=True)


if __name__ == "__main__":
    main()
