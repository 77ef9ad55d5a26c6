"""Does staging pageable frames on a thread pool of its own help ``find()``? A/B in one process.

Run on a machine with an NVIDIA GPU: ``OUT=dir python benchmarks/staging_pool_ab.py``.
20 000 dense MÖNCH frames (as ``gpu_pipeline.py``), float32, 3x3 and 9x9: ``find()`` from
the NumPy array and the staged batches alone, best of 3, with the staging copies on their
own pool (as shipped), on the default pool the results are copied with (as before ab15e25;
that pool has had up to 16 threads since 469dd2e), and on their own again (to see the
drift of the host). Writes ``$OUT/staging_pool_ab.json``.
"""
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import cupy as cp
import numpy as np

import aare_lab.runtime.parallel as par
from aare_lab import Pedestal
from aare_lab.finders import CudaFinder
from aare_lab.simulate import Beam, Simulator

sim = Simulator(beam=Beam(photons_per_frame=2300.0), seed=1); dark = sim.dark(1000); u, _ = sim.frames(500)
frames = np.ascontiguousarray(np.resize(u, (20000, *u.shape[1:])))
ped = Pedestal(frames.shape[1:], 1000, "float32"); ped.push_dark(dark)
out = {}
def timed(fn, reps=3):
    best = 1e9
    for _ in range(reps):
        cp.cuda.Device().synchronize(); t = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t)
    return round(len(frames) / best)
for mode in ("own pool", "shared pool", "own pool again"):
    if mode == "shared pool":
        par._pools["staging"] = par._pool("default")
    elif mode == "own pool again":
        par._pools["staging"] = (ThreadPoolExecutor(par.pool_threads("staging")),
                                 par.pool_threads("staging"))
    for size in ("3x3", "9x9"):
        f = CudaFinder(ped.copy(), 5.0, size); f.find(frames[:1024], progress=False)
        a = timed(lambda: f.find(frames, progress=False))
        b = timed(lambda: sum(len(x.cluster_y) for x in f.find_batches(frames)))
        out[f"{mode} {size}"] = {"find_numpy_fps": a, "batches_staged_fps": b}
        print(mode, size, "find()", a, "batches", b, flush=True)
json.dump(out, open(os.environ["OUT"] + "/staging_pool_ab.json", "w"), indent=1)
