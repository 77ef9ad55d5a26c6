"""Writing a run's results into a file, alone: what bounds ``find(..., out="run.nc")``.

Finds the clusters of ``--unique`` dense MÖNCH03 frames once (frozen finder, 3x3, float32),
then times `aare_lab.finders._assembly.FileSink` taking those batches ``--repeats`` times
over (``--frames`` frames in all), best of ``--runs``: the energies, the file's layout, the
appends and the close. Runs on any machine (no GPU). Writes
``benchmarks/results/file_sink_<time>.json`` (or under ``--out``).

Usage: ``python benchmarks/file_sink.py [--frames 3840] [--dir /tmp]``
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import h5netcdf
import h5py

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import git_commit, write_record  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab import FrozenFinder, Pedestal  # noqa: E402
from aare_lab.detector.dark.quality import assess_dark  # noqa: E402
from aare_lab.finders._assembly import CLUSTER_FIELDS, FileSink  # noqa: E402
from aare_lab.simulate import Beam, Simulator  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unique", type=int, default=64)
    parser.add_argument("--frames", type=int, default=3840)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    sim = Simulator(beam=Beam(photons_per_frame=2300.0), seed=1)
    dark = sim.dark(100)
    frames, _ = sim.frames(args.unique)
    pedestal = Pedestal(frames.shape[1:], 100, "float32")
    pedestal.push_dark(dark)
    finder = FrozenFinder(pedestal, 5.0, "3x3")
    batches = list(finder.find_batches(frames))
    make = finder._result_maker(assess_dark(finder.pedestal, 5.0))
    repeats = max(1, args.frames // args.unique)
    path = args.dir / f"file_sink_{os.getpid()}.nc"
    nbytes = repeats * sum(getattr(b, name).nbytes for b in batches for name in CLUSTER_FIELDS)
    clusters = repeats * sum(len(b.cluster_y) for b in batches)
    seconds = []
    try:
        for _ in range(args.runs):
            path.unlink(missing_ok=True)
            t0 = time.perf_counter()
            with FileSink(path, finder._empty_batch(), make, False) as sink:
                for _ in range(repeats):
                    for batch in batches:
                        sink.add(batch)
            seconds.append(time.perf_counter() - t0)
        size = path.stat().st_size
    finally:
        path.unlink(missing_ok=True)
    n_frames = repeats * args.unique
    best = min(seconds)
    record = {
        "benchmark": "file_sink", "date": datetime.now(timezone.utc).isoformat(),
        "git_commit": git_commit(), "aare_lab_version": aare_lab.__version__,
        "host": {"machine": platform.node(), "cpus": len(os.sched_getaffinity(0)),
                 "h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version,
                 "h5netcdf": h5netcdf.__version__, "dir": str(args.dir)},
        "parameters": {"frames": n_frames, "unique": args.unique, "clusters": clusters,
                       "batch_frames": len(batches[0].frame_numbers), "cluster_size": "3x3"},
        "seconds": seconds, "frames_per_s": n_frames / best,
        "cluster_bytes_per_s": nbytes / best, "file_bytes": size,
    }
    print(f"{n_frames} frames, {clusters:,} clusters: {n_frames / best:.0f} frames/s, "
          f"{nbytes / best / 1e9:.2f} GB/s of cluster fields, file {size / 1e6:.0f} MB")
    write_record(record, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
