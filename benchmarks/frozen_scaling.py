"""The frozen finder's frames/s by thread count, and the shares of ``find`` spent in its
compiled chunk loop (`aare_lab.finders._frozen.frozen_chunk`) and in copying each chunk's
clusters into the result (`aare_lab.finders._assembly.MemorySink.add`): where scaling
stops, whether the loop or the work around it is the bound.

    python benchmarks/frozen_scaling.py [--frames 200] [--threads 1 2 4 8 16] [--repeats 3] [--aare]

One simulated MÖNCH run (400x400, ~2300 photons per frame, fixed noise, float64), 3x3 and
9x9, best of the repeats; every thread count gives the clusters of one thread (checked).
With ``--aare``, PSI aare 2026.9.30's ``ClusterFinderMT`` on the same frames by the same
thread counts (``aare_timing.py`` in aare's interpreter, `aare_env`), each thread's share
of one thread's rate beside ours: how far each finder's threads scale on this host.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


HERE = Path(__file__).resolve().parent
AARE_VERSION = "2026.9.30"
#: aare's pedestal window: its finders find nothing before that many dark frames.
AARE_PEDESTAL = 1000


def moench_run(n_frames):
    """The trained pedestal, ``n_frames`` frames of the simulated run above and the dark
    frames it was trained on."""
    sim = Simulator(Detector(frame_shape=(400, 400)), Beam(photons_per_frame=2300), seed=1)
    ped = Pedestal((400, 400), 300, noise="fixed")
    dark = sim.dark(300)
    ped.push_dark(dark)
    return ped, sim.frames(n_frames)[0], dark


def aare_scaling(dark, frames, threads, repeats):
    """aare's ``ClusterFinderMT`` frames/s (best of ``repeats``) by thread count and size."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from aare_env import aare_python  # noqa: PLC0415 (tests/ holds the interpreter finder)
    python = aare_python(AARE_VERSION)
    if python is None:
        raise SystemExit(f"--aare: no interpreter with aare {AARE_VERSION} (set "
                         f"AARE_PYTHON_{AARE_VERSION.replace('.', '_')})")
    with tempfile.TemporaryDirectory() as tmp:
        # The dark frames again and again up to aare's window: the same mean and rms.
        np.save(Path(tmp) / "dark.npy", np.resize(dark, (AARE_PEDESTAL, *dark.shape[1:])))
        np.save(Path(tmp) / "frames.npy", frames)
        for size in (3, 9):
            one = None
            for n in threads:
                run = subprocess.run(
                    [python, str(HERE / "aare_timing.py"), f"{tmp}/dark.npy",
                     f"{tmp}/frames.npy", str(size), str(size), "5", str(repeats), str(n), "mt"],
                    capture_output=True, text=True, check=True)
                # aare prints its collector's start and stop on stdout too.
                timing = json.loads(run.stdout.strip().splitlines()[-1])
                rate = len(frames) / min(timing["ClusterFinderMT"])
                one = one or rate
                print(f"{size}x{size} {n:3d} threads: aare ClusterFinderMT {rate:7.0f} "
                      f"frames/s, each thread {rate / one / n:.0%} of one thread's", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--threads", type=int, nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--aare", action="store_true",
                        help=f"also aare {AARE_VERSION}'s ClusterFinderMT by thread count")
    args = parser.parse_args()
    top = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or sorted({1, 2, 4, 8, top} & set(range(1, top + 1)))
    ped, frames, dark = moench_run(args.frames)
    frozen.frozen_chunk = timed(frozen.frozen_chunk, "loop")
    _assembly.MemorySink.add = timed(_assembly.MemorySink.add, "sink")
    FrozenFinder(ped.copy(), 5.0, 3).find(frames[:2], progress=False)
    print(f"threading layer {numba.threading_layer()}, {top} threads", flush=True)
    for size in (3, 9):
        reference, one = None, None
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
            one = one or best
            print(f"{size}x{size} {n:3d} threads: {args.frames / best:7.0f} frames/s (each "
                  f"thread {one / best / n:.0%} of one thread's), chunk loop "
                  f"{args.frames / loop:7.0f} frames/s ({loop / best:.0%} of find), "
                  f"result assembly {sink / best:.0%} of find", flush=True)
    if args.aare:
        aare_scaling(dark, frames, threads, args.repeats)


if __name__ == "__main__":
    main()
