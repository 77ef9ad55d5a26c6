"""Where ``find(out=...)``'s main thread spends its time (cProfile), per compression.

For finding the bound of `benchmarks/result_write.py`'s file runs; prints the top functions
by own time and by cumulative time. On the GPU machine::

    python benchmarks/result_write_profile.py --finder cuda --frames 30000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from find_to_disk import RepeatedSource  # noqa: E402

from aare_lab import Pedestal, get_finder  # noqa: E402
from aare_lab.simulate import Beam, Detector, Simulator  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finder", default="frozen")
    parser.add_argument("--shape", default="400x400")
    parser.add_argument("--photons", type=float, default=2300.0)
    parser.add_argument("--frames", type=int, default=30000)
    parser.add_argument("--unique", type=int, default=256)
    parser.add_argument("--compressions", default="deflate,none")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    ny, nx = (int(v) for v in args.shape.split("x"))
    cls = get_finder(args.finder)
    sim = Simulator(Detector(frame_shape=(ny, nx)), Beam(photons_per_frame=args.photons), seed=2)
    ped = Pedestal((ny, nx), 1000, "float32")
    ped.push_dark(sim.dark(1000))
    unique = np.ascontiguousarray(sim.frames(args.unique)[0])
    cls(ped.copy(), 5.0, "3x3").find(unique, progress=False)
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    for compression in args.compressions.split(","):
        finder = cls(ped.copy(), 5.0, "3x3")
        profile = cProfile.Profile()
        t0 = time.perf_counter()
        profile.enable()
        with finder.find(RepeatedSource(unique, args.frames), progress=False,
                         out=folder / f"{compression}.nc", compression=compression):
            pass
        profile.disable()
        seconds = time.perf_counter() - t0
        (folder / f"{compression}.nc").unlink()
        print(f"== {compression}: {args.frames / seconds:.0f} frames/s under the profiler")
        for key in ("tottime", "cumulative"):
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats(key).print_stats(18)
            print("\n".join(line for line in text.getvalue().splitlines()
                            if line.strip() and not line.startswith(("   Ordered", "         "))))


if __name__ == "__main__":
    main()
