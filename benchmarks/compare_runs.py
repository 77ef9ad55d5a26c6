"""Seconds to compare finder results of a simulated 2000-frame MÖNCH03 run.

Run: ``python benchmarks/compare_runs.py``. Serial, frozen and frozen-float32 results with
branch maps of every frame are made once (not timed), then `aare_lab.analysis.compare.compare` is
timed for serial vs frozen and frozen float64 vs float32, best and median of the
repetitions; the record goes to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from records import HERE, cpu_name, git_commit, write_record

import aare_lab
from aare_lab import FrozenFinder, SerialFinder
from aare_lab.analysis.compare import compare
from aare_lab.pipeline import train_pedestal
from aare_lab.simulate import Simulator


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--n-pedestal", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)

    sim = Simulator(seed=0)
    dark = sim.dark(args.n_pedestal)
    frames, _ = sim.frames(args.frames)
    pedestals = {d: train_pedestal(dark, args.n_pedestal, dtype=d, progress=False)
                 for d in ("float64", "float32")}
    runs = {
        "serial": SerialFinder(pedestals["float64"].copy()).find(frames, branch_maps=True,
                                                                 progress=False),
        "frozen": FrozenFinder(pedestals["float64"].copy()).find(frames, branch_maps=True,
                                                                 progress=False),
        "frozen32": FrozenFinder(pedestals["float32"].copy()).find(frames, branch_maps=True,
                                                                   progress=False),
    }
    record = {"benchmark": "compare_runs", "date": datetime.now(timezone.utc).isoformat(),
              "git_commit": git_commit(), "aare_lab_version": aare_lab.__version__,
              "host": {"cpu": cpu_name()},
              "parameters": {"frame_shape": list(frames.shape[1:]), "n_frames": args.frames,
                             "n_pedestal": args.n_pedestal, "repeats": args.repeats},
              "pairs": {}}
    for a, b in (("serial", "frozen"), ("frozen", "frozen32")):
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = compare(runs[a], runs[b], labels=[a, b])
            seconds.append(time.perf_counter() - start)
        record["pairs"][f"{a} vs {b}"] = {"seconds": seconds, "summary": result.summary(),
                                          "cause": result.counts("cause")}
        print(f"{result.summary()}; compared in {min(seconds):.2f} s (best), "
              f"{statistics.median(seconds):.2f} s (median); causes {result.counts('cause')}")
    write_record(record, args.out)


if __name__ == "__main__":
    main()
