"""Copying one batch of clusters into the result: which part costs, on how many threads.

`benchmarks/find_breakdown.py` times ``MemorySink.add`` as a whole. This takes one batch of
dense MÖNCH clusters (``--clusters`` per batch, about 512 frames' worth) in memory that is
already mapped, as the GPU's pinned output is, and times, with T threads of
`aare_lab.runtime.parallel`, each part of what the sink does per batch: the copies of the four
per-cluster fields, the energies (`aare_lab.model.results.window_energies` over the copied
windows), both one after the other (the sink before b8b8d08), and the sink's own work
(`aare_lab.finders._assembly_loops.copy_cluster_range`: the windows copied and summed in one
pass and the frame numbers written from the clusters per frame), on the pool as after the
GPU finder (``sink``) and as one parallel region on T of Numba's threads, as after a CPU
finder (``sink_numba``); each into result memory that is fresh
(`aare_lab.runtime.result_memory` given back first) or reused.

``bytes`` and GB/s count the four fields of each cluster, the frame number among them,
which the sink now writes without reading (its GB/s are 8 bytes per cluster generous).

Usage: ``python benchmarks/result_copy.py [--sizes 3x3,9x9] [--threads 4,8,16]``; writes
``benchmarks/results/result_copy_<time>.json`` (or under ``--out``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numba
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from records import git_commit, write_record  # noqa: E402

from aare_lab.runtime import parallel, result_memory  # noqa: E402
from aare_lab.finders import _assembly  # noqa: E402
from aare_lab.finders._assembly_loops import copy_cluster_range, copy_clusters  # noqa: E402
from aare_lab.finders.base import ClusterBatch  # noqa: E402
from aare_lab.model.params import parse_cluster_size  # noqa: E402
from aare_lab.model.results import window_energies  # noqa: E402

#: Frames per batch: the cuda finder's chunk.
FRAMES = 512


def batch(n: int, size: tuple[int, int]) -> tuple[dict[str, np.ndarray], ClusterBatch]:
    """The four per-cluster fields of ``n`` clusters over `FRAMES` frames, and the batch
    that holds them."""
    rng = np.random.default_rng(1)
    numbers = np.arange(FRAMES)
    n_kept = np.bincount(rng.integers(0, FRAMES, n), minlength=FRAMES)
    out = {"cluster_frame": np.repeat(numbers, n_kept),
           "cluster_y": rng.integers(0, 400, n).astype(np.int32),
           "cluster_x": rng.integers(0, 400, n).astype(np.int32),
           "windows": rng.integers(-50, 400, (n, *size)).astype(np.int32)}
    return out, ClusterBatch(numbers, n_kept, n_kept, out["cluster_y"], out["cluster_x"],
                             out["windows"], None, None)


def variants(src: dict, clusters: ClusterBatch, dst: dict, energy: np.ndarray) -> dict:
    def copies(a, b):
        for name, value in src.items():
            np.copyto(dst[name][a:b], value[a:b])

    def energies(a, b):
        window_energies(dst["windows"][a:b], out=energy[a:b])

    def copy_then_sum(a, b):
        copies(a, b)
        energies(a, b)

    def sink(a, b):
        copy_cluster_range(*sink_columns(clusters, dst, energy), a, b)

    return {"copies": copies, "energies": energies, "copy_then_sum": copy_then_sum,
            "sink": sink}


def sink_columns(clusters: ClusterBatch, dst: dict, energy: np.ndarray) -> tuple:
    """What `MemorySink.add` hands the compiled copy (no taps at the limits counted)."""
    return _assembly.copy_arguments(clusters, dst, energy, _assembly._NO_COUNT)


def timed(work, n, nbytes, threads, memory, src, clusters, repeats):
    seconds = []
    for _ in range(repeats):
        if memory == "fresh":
            result_memory.release()
        dst = {name: result_memory.empty(value.shape, value.dtype) for name, value in src.items()}
        energy = result_memory.empty(n, np.float64)
        if work == "energies":
            parallel.parallel_copy(src["windows"], dst["windows"])
        if work == "sink_numba":
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            t0 = time.perf_counter()
            copy_clusters(*sink_columns(clusters, dst, energy), threads)
        else:
            fn = variants(src, clusters, dst, energy)[work]
            t0 = time.perf_counter()
            parallel.parallel_ranges(fn, n, nbytes, pool=f"bench{threads}")
        seconds.append(time.perf_counter() - t0)
        del dst, energy
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1_100_000)
    parser.add_argument("--sizes", default="3x3,9x9")
    parser.add_argument("--threads", default="4,8,16")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    record = {"benchmark": "result_copy", "date": datetime.now(UTC).isoformat(),
              "git_commit": git_commit(), "cores": len(os.sched_getaffinity(0)),
              "parameters": vars(args) | {"out": str(args.out)}, "cases": []}
    for size in args.sizes.split(","):
        src, clusters = batch(args.clusters, parse_cluster_size(size))
        nbytes = sum(v.nbytes for v in src.values())
        for threads in map(int, args.threads.split(",")):
            parallel.MAX_THREADS[f"bench{threads}"] = threads
            for memory in ("fresh", "reused"):
                for work in ("copies", "energies", "copy_then_sum", "sink", "sink_numba"):
                    s = timed(work, args.clusters, nbytes, threads, memory, src, clusters,
                              args.repeats)
                    case = {"cluster_size": size, "threads": threads, "memory": memory,
                            "work": work, "bytes": nbytes, "seconds": s,
                            "GB_per_s": nbytes / min(s) / 1e9,
                            "clusters_per_s": args.clusters / min(s)}
                    record["cases"].append(case)
                    print(f"{size} {threads:2d} threads {memory:6s} {work:13s} "
                          f"{min(s) * 1e3:7.2f} ms  {case['GB_per_s']:6.1f} GB/s", flush=True)
    write_record(record, args.out)


if __name__ == "__main__":
    main()
