"""Where the time of ``CudaFinder.find`` into the result Dataset goes, stage by stage.

Run on a machine with an NVIDIA GPU: ``python benchmarks/find_breakdown.py``. For dense
MÖNCH03 frames (as in ``gpu_pipeline.py``) and each cluster size and window dtype it times
``find`` from GPU memory and from a NumPy array, and, inside the same calls, the seconds the
calling thread spends in each stage (wrappers around the methods, summed over the run):

- ``wait_kernel``: waiting for a chunk's launch, and the copies queued behind it, to finish
  (``FrozenEngine._wait_fetched``);
- ``collect``: the rest of ``FrozenEngine.collect`` (the compact clusters over PCIe into
  pinned buffers, the per-frame arrays);
- ``sink_add``: copying a batch into the result's growing arrays with its energies
  (``MemorySink.add``);
- ``launch``: queueing a chunk's kernel and the copies behind it (``FrozenEngine.launch``);
- ``gain_count``: queueing the count of gain bits (``CudaFinder._count_gain_bits_queued``),
  in trees before the kernel counted them itself (since 3efd290 this stage is None);
- ``frame_numbers``: each cluster's frame number (``aare_lab.runtime.repeat.repeat``), in trees
  before the sink wrote them itself (since 58d40af they are part of
  ``sink_add``, and this stage is None);
- ``tally``: ``RunTally.add``; ``report``: the checks at the end (``Finder._report``);
- ``to_host``: the pedestal back to the host (``CudaFinder._to_host``);
- ``make_result``: building the Dataset (``MemorySink.result``);
- ``other``: the rest (staging hand-over, batch assembly, the progress bar).

Each ``find`` runs twice over: into fresh result memory (the pool of
`aare_lab.runtime.result_memory` given back first, as in a process's first run) and into the memory
of the previous run's dropped result (a process's later runs).

Then ``sink_add`` once more on the batches of ``--replay-frames`` frames replayed into a fresh sink with the GPU idle,
so the host's own cost is seen apart from any contention with the running pipeline.
Writes ``benchmarks/results/find_breakdown_<date>.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import git_commit, write_record  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab import Pedestal, result_memory  # noqa: E402
from aare_lab.finders import CudaFinder, _assembly  # noqa: E402
from aare_lab.finders import cuda as cuda_module  # noqa: E402
from aare_lab.gpu import cupy_or_raise, device_info  # noqa: E402
from aare_lab.gpu import engine as engine_module  # noqa: E402
from aare_lab.runtime.parallel import _pool  # noqa: E402
from aare_lab.simulate import Beam, Simulator  # noqa: E402

N_PEDESTAL = 1000
# A stage's methods in order of preference: the first the installed tree has is timed, so
# that the script times older trees too (`device_run.sh ab`); a stage none of whose
# methods exists is left out (None in the record).
STAGES = {"wait_kernel": (engine_module.FrozenEngine, ("_wait_fetched", "_fetch_meta")),
          "collect": (engine_module.FrozenEngine, "collect"),
          "launch": (engine_module.FrozenEngine, "launch"),
          "gain_count": (CudaFinder, "_count_gain_bits_queued"),
          "frame_numbers": (cuda_module, "repeat"),
          "sink_add": (_assembly.MemorySink, "add"),
          "tally": (_assembly.RunTally, "add"),
          "make_result": (_assembly.MemorySink, "result"),
          "report": (CudaFinder, "_report"),
          "to_host": (CudaFinder, "_to_host")}


class StageClock:
    """Seconds spent in each of `STAGES` on the calling thread, while installed."""

    def __init__(self):
        self.seconds = {}
        self._saved = []

    def __enter__(self):
        for name, (cls, attrs) in STAGES.items():
            attr = next((a for a in ((attrs,) if isinstance(attrs, str) else attrs)
                         if hasattr(cls, a)), None)
            if attr is None:
                continue
            self.seconds[name] = 0.0
            original = getattr(cls, attr)
            self._saved.append((cls, attr, original))
            setattr(cls, attr, self._timed(name, original))
        return self

    def __exit__(self, *exc):
        for cls, attr, original in self._saved:
            setattr(cls, attr, original)

    def _timed(self, name, original):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
        return timed


def breakdown(cp, finder, source, n_frames, memory):
    """One timed ``find`` with its stages; ``collect`` excludes the kernel wait inside it.

    ``memory``: ``"fresh"`` gives the result memory pool back first, so the result is
    written into pages mapped afresh (a process's first run); ``"reused"`` leaves the pool
    holding the previous run's dropped result (a process's later runs).
    """
    if memory == "fresh":
        result_memory.release()
    cp.cuda.Device().synchronize()
    with StageClock() as clock:
        t0 = time.perf_counter()
        n = finder.find(source, progress=False).sizes["cluster"]
        total = time.perf_counter() - t0
    s = clock.seconds
    s["collect"] -= s["wait_kernel"]
    s["other"] = total - sum(s.values())
    return {"seconds": total, "fps": n_frames / total, "clusters": n,
            "stages_s": {k: round(v, 4) for k, v in s.items()}}


def replay_sink(finder, frames, memory):
    """``MemorySink.add`` alone over a run's batches (they own their arrays), the GPU idle,
    into ``memory`` as for `breakdown`: the pool is filled by a first sink, dropped."""
    batches = list(finder.find_batches(frames))
    empty = finder._empty_batch()
    result_memory.release()
    if memory == "reused":
        warm = _assembly.MemorySink(empty, lambda **kw: None, False, n_frames=len(frames))
        for b in batches:
            warm.add(b)
        del warm
    sink = _assembly.MemorySink(empty, lambda **kw: None, False, n_frames=len(frames))
    t0 = time.perf_counter()
    for b in batches:
        sink.add(b)
    add = time.perf_counter() - t0
    nbytes = sum(getattr(b, k).nbytes for b in batches for k in _assembly.CLUSTER_FIELDS)
    return {"seconds": add, "bytes": nbytes, "GB_per_s": nbytes / add / 1e9}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--unique", type=int, default=500)
    parser.add_argument("--photons", type=float, default=2300.0)
    parser.add_argument("--sizes", default="3x3,9x9")
    parser.add_argument("--window-dtypes", default="int32,int16")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--replay-frames", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    cp = cupy_or_raise()
    sim = Simulator(beam=Beam(photons_per_frame=args.photons), seed=1)
    dark = sim.dark(N_PEDESTAL)
    unique, _ = sim.frames(args.unique)
    frames = np.ascontiguousarray(np.resize(unique, (args.frames, *unique.shape[1:])))
    dev = cp.asarray(frames)
    ped = Pedestal(frames.shape[1:], N_PEDESTAL, "float32")
    ped.push_dark(dark)
    record = {"benchmark": "find_breakdown", "date": datetime.now(timezone.utc).isoformat(),
              "git_commit": git_commit(), "aare_lab_version": aare_lab.__version__,
              "gpu": device_info(), "parameters": vars(args) | {"out": str(args.out),
                                               "threads": {p: _pool(p)[1] for p in ("default", "staging")}},
              "cases": []}
    for size in args.sizes.split(","):
        for window_dtype in args.window_dtypes.split(","):
            finder = CudaFinder(ped.copy(), 5.0, size, window_dtype=window_dtype)
            finder.find(dev[:1024], progress=False)    # warm: kernels, buffers, pools
            case = {"cluster_size": size, "window_dtype": window_dtype}
            for name, source in (("device", dev), ("numpy", frames)):
                for memory in ("fresh", "reused"):
                    runs = [breakdown(cp, finder, source, args.frames, memory)
                            for _ in range(args.repeats)]
                    key = name if memory == "fresh" else f"{name}_reused"
                    case[key] = min(runs, key=lambda r: r["seconds"])
                    print(size, window_dtype, key, f"{case[key]['fps']:.0f} frames/s",
                          case[key]["stages_s"], flush=True)
            for memory in ("fresh", "reused"):
                key = "sink_add_replayed" + ("" if memory == "fresh" else "_reused")
                case[key] = replay_sink(finder, frames[:args.replay_frames], memory)
                print(f"   sink.add replayed ({memory}):", case[key], flush=True)
            record["cases"].append(case)
    write_record(record, args.out)


if __name__ == "__main__":
    main()
