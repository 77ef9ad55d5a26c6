"""What counting the pixels with gain bits (`aare_lab.detector.jungfrau.GainBitsTally`) costs the
cuda finder on frames already on the GPU, where nothing else hides it.

Run on a machine with an NVIDIA GPU: ``python benchmarks/gain_bits_cost.py``. One process:
dense MÖNCH03 frames (400x400, 2300 photons per frame) on the device, ``spectrum`` of
3x3 clusters (float32 pedestal) with the count and without it (the finder's ``gain_bits``
set to None), alternately, ``--repeats`` times each; writes
``benchmarks/results/gain_bits_cost_<time>.json``. Since 3efd290 the kernel counts in any
case (``n_gain_bits``), so the two differ by the host's tally alone; the kernel's share is
timed by ``kernel_variants.py --baseline`` against a source without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from records import git_commit, write_record  # noqa: E402

from aare_lab import Pedestal  # noqa: E402
from aare_lab.finders import CudaFinder  # noqa: E402
from aare_lab.gpu import cupy_or_raise, device_info  # noqa: E402
from aare_lab.simulate import Beam, Simulator  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10000)
    parser.add_argument("--unique", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    cp = cupy_or_raise()
    sim = Simulator(beam=Beam(photons_per_frame=2300), seed=1)
    ped = Pedestal((400, 400), 1000, "float32")
    ped.push_dark(sim.dark(1000))
    unique, _ = sim.frames(args.unique)
    dev = cp.asarray(np.resize(unique, (args.frames, 400, 400)))
    seconds = {"counted": [], "not_counted": []}
    for _ in range(args.repeats):
        for name in seconds:
            finder = CudaFinder(ped.copy(), 5.0, 3)
            if name == "not_counted":
                finder.gain_bits = None
            finder.spectrum(dev[:1024], progress=False)
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            finder.spectrum(dev, progress=False)
            cp.cuda.Device().synchronize()
            seconds[name].append(time.perf_counter() - t0)
    fps = {name: args.frames / min(s) for name, s in seconds.items()}
    print({name: f"{v:.0f} frames/s" for name, v in fps.items()},
          f"count costs {1 - fps['counted'] / fps['not_counted']:.1%}")
    write_record({"benchmark": "gain_bits_cost", "date": datetime.now(UTC).isoformat(),
                  "git_commit": git_commit(), "gpu": device_info(),
                  "parameters": vars(args) | {"out": str(args.out)}, "seconds": seconds,
                  "best_fps": fps}, args.out)


if __name__ == "__main__":
    main()
