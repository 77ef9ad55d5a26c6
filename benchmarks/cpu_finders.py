"""Frames per second of the serial and frozen finders against PSI aare on the same host.

Run: ``python benchmarks/cpu_finders.py [--frames 300] [--repeats 5] [--ab OTHER_TREE]``.
One simulated MÖNCH03 run (400x400, ~2300 photons per frame, 1000 dark frames: aare's
fixed pedestal window) is timed, in this one invocation, per cluster size (3x3 and 9x9,
n_sigma 5), in these cases:

- ``serial`` (one thread, float64, running noise) against aare 2026.3.17 ``ClusterFinder``;
- ``frozen_1_thread`` (float64, fixed noise) against aare 2026.9.30 ``ClusterFinder``;
- ``frozen_all_threads`` on all of Numba's threads against aare 2026.9.30
  ``ClusterFinderMT`` with as many threads (each of its threads keeps its own pedestal;
  ours share one);
- ``serial`` and ``frozen_1_thread`` with ``moench03`` common mode and with int16 windows,
  against the plain case (the goal: within 15 %);
- ``frozen_1_thread_float32``, for information (aare's pedestal is float64).

Each case runs in a worker process of its own tree: this script's tree, and with ``--ab``
another checkout (``git worktree add /tmp/ab_base <commit>``) whose ``aare_lab`` the worker
imports, so that a change is measured against its base under the same noise. aare runs in
workers of its own interpreters (`aare_env`). Every repetition times every case of every
tree and every aare finder once, in turns (the two trees' order swapped every repetition),
so the ratios of one repetition share the machine's state; the summary quotes min..max over
the repetitions of the frames per second and of those per-repetition ratios, and for the
A/B also of the ratio of the process's CPU time (on a shared machine, the code's own cost). The trees'
results are compared by a digest of their clusters (they must agree).

Pedestal training and compilation are excluded: every timed repetition starts from a copy
of a trained pedestal and runs warm. The JSON under ``benchmarks/results/`` holds every
timing, the git commit of each tree, the host and the versions. It also times a fresh
process that imports aare_lab and finds clusters in one small frame, to check Numba's
on-disk cache (target: under 2 s).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import TREE, cpu_name, git_commit, write_record  # noqa: E402

N_PEDESTAL = 1000
N_SIGMA = 5.0
AARE_VERSIONS = ("2026.3.17", "2026.9.30")
COLD_START = (
    "import numpy as np, aare_lab\n"
    "p = aare_lab.Pedestal((64, 64), 2); p.push_dark(np.zeros((2, 64, 64), np.uint16))\n"
    "aare_lab.{finder}(p, 5.0, {size}).find(np.zeros((1, 64, 64), np.uint16), progress=False)\n"
)
#: Case name -> (finder, pedestal, threads: 1 or None for all, finder keyword arguments).
CASES = {
    "serial": ("SerialFinder", "running", 1, {}),
    "serial_common_mode": ("SerialFinder", "running", 1, {"common_mode": "moench03"}),
    "serial_int16": ("SerialFinder", "running", 1, {"window_dtype": "int16"}),
    "frozen_1_thread": ("FrozenFinder", "fixed", 1, {}),
    "frozen_1_thread_common_mode": ("FrozenFinder", "fixed", 1, {"common_mode": "moench03"}),
    "frozen_1_thread_int16": ("FrozenFinder", "fixed", 1, {"window_dtype": "int16"}),
    "frozen_all_threads": ("FrozenFinder", "fixed", None, {}),
    "frozen_1_thread_float32": ("FrozenFinder", "fixed32", 1, {}),
}
#: Case -> what it is compared with: ("aare", version, finder) or ("case", plain case).
REFERENCES = {
    "serial": ("aare", "2026.3.17", "ClusterFinder"),
    "serial_common_mode": ("case", "serial"),
    "serial_int16": ("case", "serial"),
    "frozen_1_thread": ("aare", "2026.9.30", "ClusterFinder"),
    "frozen_1_thread_common_mode": ("case", "frozen_1_thread"),
    "frozen_1_thread_int16": ("case", "frozen_1_thread"),
    "frozen_all_threads": ("aare", "2026.9.30", "ClusterFinderMT"),
    "frozen_1_thread_float32": ("aare", "2026.9.30", "ClusterFinder"),
}
#: The goals of issue 34: the least ratio against the reference.
GOALS = {("serial", "3x3"): 1.4, ("serial", "9x9"): 1.4,
         ("frozen_1_thread", "3x3"): 1.5, ("frozen_1_thread", "9x9"): 2.0,
         ("frozen_all_threads", "3x3"): 1.5, ("frozen_all_threads", "9x9"): 2.0}


# ---------------------------------------------------------------------------------------
# Workers: one process per tree (aare_lab) and per aare version, fed one command per line.

def serve(handle) -> None:
    """Answer JSON commands from stdin, one per line, with ``handle(command)``'s JSON.

    The answers go to the original stdout; anything else written to it (aare's C++ logs)
    goes to stderr, so that it cannot break the protocol.
    """
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for line in sys.stdin:
        print(json.dumps(handle(json.loads(line))), file=answers, flush=True)


def digest(result) -> str:
    """A hash of a result's clusters: frame numbers, centres and windows."""
    h = hashlib.sha256()
    for name in ("frame_number", "y", "x", "window"):
        h.update(np.ascontiguousarray(result[name].to_numpy()).tobytes())
    return h.hexdigest()[:16]


def aare_lab_worker(folder: Path) -> None:
    """Time aare_lab's finders on the run in ``folder`` (the importable aare_lab's tree)."""
    import warnings

    import numba

    import aare_lab

    warnings.simplefilter("ignore")
    dark, frames = np.load(folder / "dark.npy"), np.load(folder / "frames.npy")
    pedestals = {"running": aare_lab.Pedestal(frames.shape[1:], N_PEDESTAL, noise="running"),
                 "fixed": aare_lab.Pedestal(frames.shape[1:], N_PEDESTAL, noise="fixed"),
                 "fixed32": aare_lab.Pedestal(frames.shape[1:], N_PEDESTAL, "float32",
                                              "fixed")}
    for pedestal in pedestals.values():
        pedestal.push_dark(dark)
    threads = numba.config.NUMBA_NUM_THREADS

    def finder(case, size):
        cls, ped, n_threads, kwargs = CASES[case]
        extra = {} if cls == "SerialFinder" else {"threads": n_threads or threads}
        return getattr(aare_lab, cls)(pedestals[ped].copy(), N_SIGMA, tuple(size),
                                      **extra, **kwargs)

    def handle(command):
        if command["what"] == "info":
            return {"aare_lab": str(Path(aare_lab.__file__).parent), "threads": threads,
                    "numba": numba.__version__, "numpy": np.__version__,
                    "python": platform.python_version(),
                    "threading_layer": warm_layer()}
        case, size = command["case"], command["size"]
        finder(case, size).find(frames[:4], progress=False)  # compiled or loaded, warm
        run = finder(case, size)
        start, cpu = time.perf_counter(), time.process_time()
        result = run.find(frames, progress=False)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        return {"seconds": seconds, "cpu_seconds": cpu,
                "clusters": int(result.sizes["cluster"]), "digest": digest(result)}

    def warm_layer():
        finder("frozen_all_threads", (3, 3)).find(frames[:2], progress=False)
        return numba.threading_layer()

    serve(handle)


def aare_worker(folder: Path) -> None:
    """Time aare's finders (`aare_timing`) on the run in ``folder``; run by aare's Python."""
    from importlib.metadata import version

    import aare_timing

    dark, frames = np.load(folder / "dark.npy"), np.load(folder / "frames.npy")
    warmed = set()

    def handle(command):
        size, finder = tuple(command["size"]), command["finder"]
        if size not in warmed:
            aare_timing.single(dark, frames[:5], size, N_SIGMA)
            warmed.add(size)
        if finder == "ClusterFinder":
            seconds, found = aare_timing.single(dark, frames, size, N_SIGMA)
        else:
            seconds, found = aare_timing.multi(dark, frames, size, N_SIGMA,
                                               command["threads"])
        return {"seconds": seconds, "clusters": found, "aare_version": version("aare")}

    serve(handle)


class Worker:
    """A worker process: `ask` sends one command and returns its answer."""

    def __init__(self, argv: list[str], env: dict | None = None):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)
        self._read()

    def _read(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark worker {self.process.args} stopped (see stderr)")
        return json.loads(line)

    def ask(self, **command):
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def tree_worker(tree: Path, folder: Path) -> Worker:
    """A worker that imports ``tree``'s aare_lab (ahead of the installed one)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tree)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return Worker([sys.executable, str(Path(__file__).resolve()), "--worker", str(folder)],
                  env)


# ---------------------------------------------------------------------------------------
# The run.

def cold_start(finder: str, size, repeats: int) -> list[float]:
    """Seconds of fresh processes that import aare_lab and find clusters once."""
    code = COLD_START.format(finder=finder, size=tuple(size))
    subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True)  # fills the cache
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def spread(values) -> dict:
    return {"min": min(values), "max": max(values), "median": float(np.median(values))}


def summarise(record: dict) -> None:
    """Frames per second and per-repetition ratios (reference seconds / ours) per case."""
    n = record["parameters"]["n_frames"]
    for size, case in record["cases"].items():
        for tree, runs in case["aare_lab"].items():
            summary = case.setdefault("summary", {}).setdefault(tree, {})
            for name, run in runs.items():
                seconds = run["seconds"]
                ref = REFERENCES[name]
                ref_seconds = (case["aare"].get(ref[1], {}).get(ref[2], {}).get("seconds")
                               if ref[0] == "aare" else runs[ref[1]]["seconds"])
                entry = {"fps": spread([n / s for s in seconds]), "reference": list(ref)}
                if ref_seconds:
                    entry["ratio"] = spread([r / s for r, s in zip(ref_seconds, seconds)])
                    goal = GOALS.get((name, size))
                    if goal is not None:
                        entry["goal"] = goal
                summary[name] = entry
        if len(case["aare_lab"]) == 2:
            (a, ra), (b, rb) = case["aare_lab"].items()
            case["ab_ratio"] = {name: spread([sb / sa for sa, sb in
                                              zip(ra[name]["seconds"], rb[name]["seconds"])])
                                for name in ra}
            # CPU time of the process: on a shared machine, what the code costs whatever
            # the other users take (meaningful for the one-thread cases).
            case["ab_cpu_ratio"] = {name: spread([sb / sa for sa, sb in
                                                  zip(ra[name]["cpu_seconds"],
                                                      rb[name]["cpu_seconds"])])
                                    for name in ra}
        for version, finders in case["aare"].items():
            for name, run in finders.items():
                run["fps"] = spread([n / s for s in run["seconds"]])


def print_summary(record: dict) -> None:
    for size, case in record["cases"].items():
        print(f"cluster size {size}: frames/s min..max over repeats; ratio per repeat "
              f"(reference time / ours), min..max")
        for version, finders in case["aare"].items():
            for name, run in finders.items():
                print(f"  aare {version} {name:<16} {run['fps']['min']:7.0f}..{run['fps']['max']:<7.0f}")
        for tree, summary in case["summary"].items():
            print(f"  [{tree}]")
            for name, entry in summary.items():
                ref = entry["reference"]
                what = f"aare {ref[1]} {ref[2]}" if ref[0] == "aare" else ref[1]
                ratio = entry.get("ratio")
                text = (f"{ratio['min']:5.2f}..{ratio['max']:<5.2f}" if ratio else "   n/a")
                goal = f" (goal {entry['goal']})" if "goal" in entry else ""
                print(f"    {name:<28} {entry['fps']['min']:7.0f}..{entry['fps']['max']:<7.0f}"
                      f" vs {what:<31} {text}{goal}")
        if "ab_ratio" in case:
            print("  A/B, the other tree's time / this tree's per repeat, min..max "
                  "(wall; process CPU):")
            for name, ratio in case["ab_ratio"].items():
                cpu = case["ab_cpu_ratio"][name]
                print(f"    {name:<28} {ratio['min']:5.2f}..{ratio['max']:<5.2f}  "
                      f"{cpu['min']:5.2f}..{cpu['max']:<5.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="3x3,9x9")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--no-aare", action="store_true", help="time aare_lab only")
    parser.add_argument("--ab", type=Path, metavar="OTHER_TREE",
                        help="a checkout of another commit, timed in turns with this tree")
    parser.add_argument("--ab-commit", metavar="COMMIT",
                        help="the commit OTHER_TREE holds, for the record, where git cannot "
                             "tell (a `git archive` of it, a copy on another machine)")
    parser.add_argument("--no-cold-start", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--aare-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return aare_lab_worker(args.worker)
    if args.aare_worker:
        return aare_worker(args.aare_worker)
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}: give some of {', '.join(CASES)}")
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    trees = {"this": TREE}
    if args.ab:
        if not (args.ab / "aare_lab" / "__init__.py").is_file():
            parser.error(f"--ab {args.ab}: not a checkout of aare_lab (no aare_lab/__init__.py)"
                         "; make one with: git worktree add /tmp/ab_base <commit>")
        trees["other"] = args.ab.resolve()

    sys.path.insert(0, str(TREE / "tests"))
    from aare_env import aare_python

    from aare_lab.simulate import Simulator

    sim = Simulator(seed=1)
    dark = sim.dark(N_PEDESTAL)
    frames, truth = sim.frames(args.frames)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "dark.npy", dark)
        np.save(folder / "frames.npy", frames)
        workers = {name: tree_worker(path, folder) for name, path in trees.items()}
        aare = {}
        if not args.no_aare:
            for version in AARE_VERSIONS:
                python = aare_python(version)
                if python is not None:
                    aare[version] = Worker([python, str(Path(__file__).resolve()),
                                            "--aare-worker", str(folder)])
        info = {name: w.ask(what="info") for name, w in workers.items()}
        threads = info["this"]["threads"]
        record = {
            "benchmark": "cpu_finders", "date": datetime.now(timezone.utc).isoformat(),
            "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
            "trees": {name: {"path": str(path),
                             "git_commit": (args.ab_commit if name == "other" and args.ab_commit
                                            else git_commit(path)), **info[name]}
                      for name, path in trees.items()},
            "host": {"cpu": cpu_name(), "cores": os.cpu_count(),
                     "load_average_at_start": os.getloadavg(), "platform": platform.platform()},
            "parameters": {"frame_shape": list(frames.shape[1:]), "n_frames": args.frames,
                           "n_pedestal": N_PEDESTAL, "n_sigma": N_SIGMA,
                           "photons": len(truth), "repeats": args.repeats,
                           "cases": {c: {"finder": CASES[c][0], "pedestal": CASES[c][1],
                                         "threads": CASES[c][2] or threads,
                                         "options": CASES[c][3]} for c in cases}},
            "cases": {f"{y}x{x}": {"aare_lab": {t: {c: {"seconds": []} for c in cases}
                                                for t in trees},
                                   "aare": {}} for y, x in sizes},
        }
        order = list(trees)
        for repeat in range(args.repeats):
            for size in sizes:
                case_record = record["cases"][f"{size[0]}x{size[1]}"]
                for case in cases:
                    for tree in order:
                        got = workers[tree].ask(what="time", case=case, size=size)
                        run = case_record["aare_lab"][tree][case]
                        run["seconds"].append(got["seconds"])
                        run.setdefault("cpu_seconds", []).append(got["cpu_seconds"])
                        run["clusters"] = got["clusters"]
                        run.setdefault("digests", []).append(got["digest"])
                for version, worker in aare.items():
                    finders = (["ClusterFinder"] if version == "2026.3.17"
                               else ["ClusterFinder", "ClusterFinderMT"])
                    for finder in finders:
                        got = worker.ask(size=size, finder=finder, threads=threads)
                        run = case_record["aare"].setdefault(version, {}).setdefault(
                            finder, {"seconds": [], "threads": 1 if finder == "ClusterFinder"
                                     else threads})
                        run["seconds"].append(got["seconds"])
                        run["clusters"] = got["clusters"]
                        record.setdefault("aare_versions", {})[version] = got["aare_version"]
            order.reverse()
            print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
        for worker in [*workers.values(), *aare.values()]:
            worker.close()
    mismatch = check_digests(record)
    summarise(record)
    print_summary(record)
    if not args.no_cold_start:
        record["cold_start_seconds"] = {f: cold_start(f, (3, 3), 3)
                                        for f in ("SerialFinder", "FrozenFinder")}
        for finder, seconds in record["cold_start_seconds"].items():
            print(f"fresh process, import + first find with {finder}: "
                  f"{min(seconds):.2f}..{max(seconds):.2f} s")
    write_record(record, args.out)
    if mismatch:
        sys.exit("clusters differ: " + "; ".join(mismatch))


def check_digests(record: dict) -> list[str]:
    """Where a case's clusters differ between repeats or trees (recorded in ``record``)."""
    mismatch = []
    for size, case in record["cases"].items():
        for name in next(iter(case["aare_lab"].values())):
            seen = {d for runs in case["aare_lab"].values() for d in runs[name]["digests"]}
            if len(seen) > 1:
                mismatch.append(f"{size} {name}")
    record["digests_agree"] = not mismatch
    return mismatch


if __name__ == "__main__":
    main()
