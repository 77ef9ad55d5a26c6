"""Frames per second of the serial and frozen finders against PSI aare on the same host.

Run: ``python benchmarks/cpu_finders.py [--frames 300] [--repeats 3]``. One simulated
MÖNCH03 run (400x400, ~2300 photons per frame, 1000 dark frames: aare's fixed pedestal
window) is timed, in this one invocation, with

- aare_lab ``serial`` (one thread) against aare 2026.3.17 ``ClusterFinder``;
- aare_lab ``frozen`` on one thread against aare 2026.9.30 ``ClusterFinder``;
- aare_lab ``frozen`` on all cores against aare 2026.9.30 ``ClusterFinderMT`` with as many
  threads (each of its threads keeps its own pedestal; ours share one);

for 3x3 and 9x9 clusters, float64 pedestals, n_sigma 5; plus ``frozen`` with a float32
pedestal on one thread, for information (aare's pedestal is float64). Pedestal training and compilation
are excluded: every timed repetition starts from a trained pedestal and runs warm. Best and
median of the repetitions are reported; the raw timings go to the JSON under
``benchmarks/results/``. It also times a fresh process that imports aare_lab and finds
clusters in one small frame, to check Numba's on-disk cache (target: under 2 s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numba
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from aare_env import aare_python  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab import FrozenFinder, Pedestal, SerialFinder  # noqa: E402
from aare_lab.simulate import Simulator  # noqa: E402

N_PEDESTAL = 1000
COLD_START = (
    "import numpy as np, aare_lab\n"
    "p = aare_lab.Pedestal((64, 64), 2); p.push_dark(np.zeros((2, 64, 64), np.uint16))\n"
    "aare_lab.{finder}(p, 5.0, {size}).find(np.zeros((1, 64, 64), np.uint16), progress=False)\n"
)


def git_commit() -> str:
    """HEAD, with ``+dirty`` when the working tree differs from it.

    ``$AARE_LAB_COMMIT`` overrides it, for copies of the tree without ``.git`` (the GPU
    machine).
    """
    if os.environ.get("AARE_LAB_COMMIT"):
        return os.environ["AARE_LAB_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=HERE, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty.strip() else "")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def time_ours(finder_cls, pedestal, frames, size, repeats, **kwargs):
    warm = finder_cls(pedestal.copy(), 5.0, size, **kwargs)
    warm.find(frames[:4], progress=False)
    seconds, clusters = [], 0
    for _ in range(repeats):
        finder = finder_cls(pedestal.copy(), 5.0, size, **kwargs)
        start = time.perf_counter()
        result = finder.find(frames, progress=False)
        seconds.append(time.perf_counter() - start)
        clusters = result.sizes["cluster"]
    return {"seconds": seconds, "clusters": clusters}


def time_aare(version, folder, size, repeats, threads):
    python = aare_python(version)
    if python is None:
        return {"skipped": f"aare {version} not installed"}
    out = subprocess.run(
        [python, str(HERE / "aare_timing.py"), str(folder / "dark.npy"),
         str(folder / "frames.npy"), str(size[0]), str(size[1]), "5.0", str(repeats),
         str(threads)], capture_output=True, text=True, check=True, timeout=3600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cold_start(finder: str, size, repeats: int) -> list[float]:
    """Seconds of fresh processes that import aare_lab and find clusters once."""
    code = COLD_START.format(finder=finder, size=tuple(size))
    subprocess.run([sys.executable, "-c", code], check=True)  # fills the cache
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def summary(seconds, n_frames):
    return {"best_fps": n_frames / min(seconds), "median_fps": n_frames / statistics.median(seconds)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="3x3,9x9")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    threads = numba.config.NUMBA_NUM_THREADS
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]

    sim = Simulator(seed=1)
    dark = sim.dark(N_PEDESTAL)
    frames, truth = sim.frames(args.frames)
    record = {
        "benchmark": "cpu_finders", "date": datetime.now(timezone.utc).isoformat(),
        "git_commit": git_commit(), "aare_lab_version": aare_lab.__version__,
        "host": {"cpu": cpu_name(), "cores": os.cpu_count(), "numba_threads": threads,
                 "python": platform.python_version(), "numpy": np.__version__,
                 "numba": numba.__version__, "threading_layer": None},
        "parameters": {"frame_shape": list(frames.shape[1:]), "n_frames": args.frames,
                       "n_pedestal": N_PEDESTAL, "n_sigma": 5.0, "pedestal_dtype": "float64",
                       "photons": len(truth), "repeats": args.repeats},
        "cases": [],
    }
    pedestals = {"running": Pedestal(frames.shape[1:], N_PEDESTAL, noise="running"),
                 "fixed": Pedestal(frames.shape[1:], N_PEDESTAL, noise="fixed"),
                 "fixed32": Pedestal(frames.shape[1:], N_PEDESTAL, "float32", "fixed")}
    for pedestal in pedestals.values():
        pedestal.push_dark(dark)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "dark.npy", dark)
        np.save(folder / "frames.npy", frames)
        for size in sizes:
            ours = {
                "serial": time_ours(SerialFinder, pedestals["running"], frames, size,
                                    args.repeats),
                "frozen_1_thread": time_ours(FrozenFinder, pedestals["fixed"], frames, size,
                                             args.repeats, threads=1),
                f"frozen_{threads}_threads": time_ours(FrozenFinder, pedestals["fixed"],
                                                        frames, size, args.repeats,
                                                        threads=threads),
                "frozen_1_thread_float32": time_ours(FrozenFinder, pedestals["fixed32"],
                                                     frames, size, args.repeats, threads=1),
            }
            theirs = {v: time_aare(v, folder, size, args.repeats, threads)
                      for v in ("2026.3.17", "2026.9.30")}
            case = {"cluster_size": f"{size[0]}x{size[1]}", "aare_lab": ours, "aare": theirs}
            for name, run in ours.items():
                run.update(summary(run["seconds"], args.frames))
            for run in theirs.values():
                for finder in ("ClusterFinder", "ClusterFinderMT"):
                    if finder in run:
                        run[f"{finder}_summary"] = summary(run[finder], args.frames)
            record["cases"].append(case)
            print_case(case, threads)
    record["host"]["threading_layer"] = numba.threading_layer()
    record["cold_start_seconds"] = {f: cold_start(f, (3, 3), args.repeats)
                                    for f in ("SerialFinder", "FrozenFinder")}
    for finder, seconds in record["cold_start_seconds"].items():
        print(f"fresh process, import + first find with {finder}: best {min(seconds):.2f} s, "
              f"median {statistics.median(seconds):.2f} s")
    write_record(record, args.out)


def write_record(record: dict, folder: Path) -> None:
    """Write a benchmark record as ``<benchmark>_<UTC time>.json`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['benchmark']}_{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps(record, indent=1))
    print(f"wrote {path}")


def print_case(case, threads):
    ours, theirs = case["aare_lab"], case["aare"]

    def fps(run, key="best_fps"):
        return run[key] if key in run else float("nan")

    def aare_fps(version, finder):
        return theirs[version].get(f"{finder}_summary", {}).get("best_fps", float("nan"))

    rows = [
        ("serial", fps(ours["serial"]), "aare 2026.3.17 ClusterFinder",
         aare_fps("2026.3.17", "ClusterFinder")),
        ("frozen, 1 thread", fps(ours["frozen_1_thread"]), "aare 2026.9.30 ClusterFinder",
         aare_fps("2026.9.30", "ClusterFinder")),
        (f"frozen, {threads} threads", fps(ours[f"frozen_{threads}_threads"]),
         f"aare 2026.9.30 ClusterFinderMT ({threads} threads)",
         aare_fps("2026.9.30", "ClusterFinderMT")),
        ("frozen, 1 thread, f32", fps(ours["frozen_1_thread_float32"]),
         "aare 2026.9.30 ClusterFinder (float64)", aare_fps("2026.9.30", "ClusterFinder")),
    ]
    print(f"cluster size {case['cluster_size']} (best of repeats, frames/s)")
    for ours_name, ours_fps, their_name, their_fps in rows:
        print(f"  {ours_name:<20} {ours_fps:8.0f}   vs {their_name:<42} {their_fps:8.0f}"
              f"   ratio {ours_fps / their_fps:5.2f}")


if __name__ == "__main__":
    main()
