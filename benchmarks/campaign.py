"""A campaign on Dask against a loop in one process over the same runs.

Simulated runs (one detector, each run its own frames) are written as ``.npy`` files with
one dark, read once into the page cache, then timed, alternately, ``--repeats`` times:

- ``loop``: the campaign's per-run task (`aare_lab.campaign.task.process_run`: train the
  pedestal, ``find(out=)``, the spectrum, the run's folder) called run after run in this
  process;
- ``campaign``: `Campaign.run(client, force=True)` on a cluster started before (its start
  and the workers' first compilation timed apart, as ``cold``).

Dask's overhead per run is the campaign's wall time less the busiest worker's task seconds
(the sum of its runs' ``seconds``), over that worker's runs.

CPU (the 2-core VM; serial finder, one thread per process for everything, goal >= 1.7x
with 2 workers)::

    python benchmarks/campaign.py --mode cpu --workers 2 --runs 8

GPU (one worker per GPU, pinned by CUDA_VISIBLE_DEVICES; cuda finder, results to disk),
against the same loop, and a plain ``find(out=)`` per run for the find-only rate::

    python benchmarks/campaign.py --mode gpu --runs 8 --frames 5000 --unique 1000 \\
        --shape 400x400 --photons 230 --n-pedestal 1000 --dir /tmp

The JSON record goes to ``benchmarks/results/`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import cpu_name, git_commit, write_record  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab.campaign import Campaign  # noqa: E402
from aare_lab.campaign.cluster import gpu_cluster, local_cluster, visible_gpus  # noqa: E402
from aare_lab.campaign.task import process_run  # noqa: E402
from aare_lab.detector.pedestal import Pedestal  # noqa: E402
from aare_lab.finders import make_finder
from aare_lab.model.spec import FinderSpec  # noqa: E402
from aare_lab.simulate import Beam, Detector, Simulator  # noqa: E402


def write_runs(folder: Path, runs: int, frames: int, shape, photons: float,
               n_dark: int, unique: int | None) -> list[Path]:
    """The runs' files and ``dark.npy``; with ``unique``, each run repeats one block of that
    many simulated frames, rolled by the run's number (simulating MÖNCH frames takes ~6 ms
    each)."""
    sim = Simulator(Detector(frame_shape=shape), Beam(photons_per_frame=photons), seed=3)
    np.save(folder / "dark.npy", sim.dark(n_dark))
    block = None if unique is None else sim.frames(unique)[0]
    paths = []
    for k in range(runs):
        path = folder / f"run{k:03d}.npy"
        stack = np.lib.format.open_memmap(path, "w+", np.uint16, (frames, *shape))
        for start in range(0, frames, 500):
            n = min(500, frames - start)
            if block is None:
                stack[start:start + n], _ = sim.frames(n, start=k * frames + start)
            else:
                stack[start:start + n] = block[(np.arange(start, start + n) + k) % unique]
        stack.flush()
        del stack
        paths.append(path)
    return paths


def read_into_cache(paths) -> float:
    """Read every file once (the page cache keeps them); returns the seconds."""
    start = time.perf_counter()
    for path in paths:
        with open(path, "rb") as file:
            while file.read(1 << 24):
                pass
    return time.perf_counter() - start


def timed_loop(campaign: Campaign) -> dict:
    shutil.rmtree(campaign.out, ignore_errors=True)
    campaign.out.mkdir(parents=True)
    start = time.perf_counter()
    rows = [process_run(run, None, campaign.task) for run in campaign.runs]
    wall = time.perf_counter() - start
    assert all(row["status"] == "done" for row in rows), [r["reason"] for r in rows]
    return {"wall_s": wall, "task_s": [row["seconds"] for row in rows]}


def timed_campaign(campaign: Campaign, client) -> dict:
    shutil.rmtree(campaign.out, ignore_errors=True)
    start = time.perf_counter()
    result = campaign.run(client, force=True, progress=False)
    wall = time.perf_counter() - start
    assert set(result["status"].to_numpy()) == {"done"}, dict(zip(
        result["run"].to_numpy(), result["reason"].to_numpy()))
    workers = result["worker"].to_numpy()
    seconds = result["seconds"].to_numpy()
    busiest = max(set(workers), key=lambda w: seconds[workers == w].sum())
    busy = float(seconds[workers == busiest].sum())
    n_busiest = int((workers == busiest).sum())
    return {"wall_s": wall, "task_s": seconds.tolist(), "workers": workers.tolist(),
            "overhead_per_run_s": (wall - busy) / n_busiest,
            "overhead_fraction": (wall - busy) / busy}


def timed_find(paths, dark: Path, spec: FinderSpec, folder: Path, options: dict) -> dict:
    """``find(out=)`` alone per run, the pedestal trained before the clock starts."""
    trained = Pedestal(np.load(dark, mmap_mode="r").shape[1:], spec.n_pedestal,
                       spec.pedestal_dtype, spec.noise)
    trained.push_dark(np.load(dark))
    seconds = []
    for k, path in enumerate(paths):
        finder = make_finder(spec, trained.copy(), **options)
        out = folder / f"find{k}.nc"
        start = time.perf_counter()
        finder.find(str(path), progress=False, out=out).close()
        seconds.append(time.perf_counter() - start)
        out.unlink()
    return {"wall_s": sum(seconds), "task_s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--workers", type=int, default=2, help="CPU workers")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--frames", type=int, default=6000, help="frames per run")
    parser.add_argument("--shape", default="64x64")
    parser.add_argument("--photons", type=float, default=10.0, help="photons per frame")
    parser.add_argument("--n-pedestal", type=int, default=200)
    parser.add_argument("--unique", type=int, help="simulate this many frames and repeat "
                                                   "them in every run (default: all unique)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where the runs go (default: a temporary "
                                                 "folder)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        record = run(args, shape, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    write_record(record, args.out)


def one_thread_each() -> None:
    """One thread per process for the finder, the pedestal and the result file's pools,
    here and in the workers (which inherit the environment): the loop and each worker
    then use one core each."""
    import numba

    os.environ["AARE_LAB_COPY_THREADS"] = os.environ["NUMBA_NUM_THREADS"] = "1"
    numba.set_num_threads(1)


def run(args, shape, folder: Path) -> dict:
    gpu = args.mode == "gpu"
    if not gpu:
        one_thread_each()
    load_before = os.getloadavg()
    spec = FinderSpec("cuda" if gpu else "serial", n_pedestal=args.n_pedestal)
    paths = write_runs(folder, args.runs, args.frames, shape, args.photons, args.n_pedestal,
                       args.unique)
    cache_s = read_into_cache([*paths, folder / "dark.npy"])
    campaign = Campaign([str(p) for p in paths], spec, dark=str(folder / "dark.npy"),
                        out=folder / "out")
    n_frames = args.runs * args.frames
    start = time.perf_counter()
    cluster = gpu_cluster(visible_gpus()) if gpu else local_cluster(args.workers)
    from distributed import Client

    client = Client(cluster)
    started_s = time.perf_counter() - start
    cold = timed_campaign(campaign, client)
    cold_loop = timed_loop(campaign)      # this process's first finder compiles here
    loops, campaigns, finds = [], [], []
    for _ in range(args.repeats):
        loops.append(timed_loop(campaign))
        campaigns.append(timed_campaign(campaign, client))
        if gpu:
            finds.append(timed_find(paths, folder / "dark.npy", spec, folder, {}))
    n_workers = len(client.scheduler_info()["workers"])
    client.close()
    cluster.close()
    ratios = [loop["wall_s"] / c["wall_s"] for loop, c in zip(loops, campaigns)]
    summary = {
        "speedup_over_loop": [min(ratios), max(ratios)],
        "campaign_frames_per_s": [n_frames / c["wall_s"] for c in campaigns],
        "loop_frames_per_s": [n_frames / loop["wall_s"] for loop in loops],
        "overhead_per_run_s": [c["overhead_per_run_s"] for c in campaigns],
        "overhead_fraction": [c["overhead_fraction"] for c in campaigns],
    }
    if gpu:
        summary["find_out_frames_per_s"] = [n_frames / f["wall_s"] for f in finds]
        summary["campaign_over_find_out"] = [
            f["wall_s"] / c["wall_s"] for f, c in zip(finds, campaigns)]
    print("\n".join(f"{name}: {', '.join(f'{v:.4g}' for v in values)}"
                    for name, values in summary.items()))
    return {
        "benchmark": "campaign", "mode": args.mode, "commit": git_commit(HERE.parent),
        "host": {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
                 # Other work on the host: the workers' task seconds grow with it.
                 "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "versions": {"aare_lab": aare_lab.__version__, "python": platform.python_version(),
                     "numpy": np.__version__,
                     "dask": __import__("dask").__version__,
                     "distributed": __import__("distributed").__version__},
        "parameters": {"runs": args.runs, "frames_per_run": args.frames, "shape": list(shape),
                       "photons_per_frame": args.photons, "n_pedestal": args.n_pedestal,
                       "unique_frames": args.unique,
                       "finder": spec.finder, "workers": n_workers,
                       "repeats": args.repeats},
        "cache_read_s": cache_s, "cluster_start_s": started_s, "cold_campaign": cold,
        "cold_loop": cold_loop,
        "loop": loops, "campaign": campaigns, "find_out": finds, "summary": summary,
    }


if __name__ == "__main__":
    main()
