"""Frames per second of the cuda finder against the PCIe floor and PSI aare on the same host.

Run on a machine with an NVIDIA GPU: ``python benchmarks/gpu_pipeline.py [--frames 20000]``.
In one process and one run it measures, for MÖNCH03 frames (400x400; ``--unique`` simulated
frames repeated to ``--frames``), 3x3 and 9x9 clusters, float32 and float64 pedestals:

- the floor: bulk copies of the same frames from page-locked host memory to the GPU, in
  chunks of ``--chunk`` frames back to back on one stream (CUDA events), and what
  page-locking the frames (``cudaHostRegister``) costs;
- host-resident end to end: ``CudaFinder.find_batches`` over the NumPy array until every
  chunk's clusters are NumPy arrays on the host, with ``host_memory="register"`` and
  ``"stage"``, and from frames already in page-locked memory (``pinned_frames``); and the
  host's own copy rate into page-locked memory;
- the user's path, ``find`` into the result Dataset: from the NumPy array (``"auto"``,
  ``"stage"``, ``"register"``), from pinned frames and from GPU memory, each into fresh
  result memory (a process's first run) and, as ``*_reused``, into the memory of the
  previous run's dropped result (`aare_lab.runtime.result_memory`: a process's later runs), and
  ``find(out=...)`` writing the result file chunk by chunk (on ``--out-frames`` frames);
- device-resident end to end: the same from a CuPy array, clusters to the host, and
  ``spectrum`` (device histogram, no clusters shipped): the re-find of a slider;
- kernel time per frame: CUDA events around the chunk kernel alone, on an otherwise idle
  stream, with the finder's default threads per block and with every other block size;
- minor page faults (``getrusage``) during every timed region, beside it;
- the CPU peer: aare ``ClusterFinderMT`` on all host cores, in a subprocess (an interpreter
  with aare: ``$AARE_PYTHON_2026_9_30``, see ``tests/aare_env.py``), on the first
  ``--aare-frames`` frames;
- per-pixel spectra (global atomics) against the plain spectrum on sparse and dense beams,
  over ``--unique`` frames and, in every case, over the whole run; repeated calls reuse the
  device counters.

Every path's rate is also given as its share of the same run's H2D floor. The whole run
stops with every thread's traceback after ``--time-limit`` seconds (default 235, so that
``device_run.sh bench`` ends within 4 minutes) rather than hang, and the JSON is rewritten
after every case, so a cut run keeps the cases it finished.

Every timed region is warm (kernels loaded, buffers allocated by a first run) and repeated
``--repeats`` times; best and median are reported, raw seconds go to the JSON under
``benchmarks/results/`` with the GPU, driver, CuPy version and parameters.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from aare_env import aare_python  # noqa: E402
from records import cpu_name, git_commit, summary  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab import Pedestal, result_memory  # noqa: E402
from aare_lab.finders import CudaFinder  # noqa: E402
from aare_lab.gpu import cupy_or_raise, device_info, pinned_frames  # noqa: E402
from aare_lab.gpu.kernels import BLOCK_THREADS, DEFAULT_BLOCK_THREADS  # noqa: E402
from aare_lab.model.params import parse_cluster_size  # noqa: E402
from aare_lab.runtime.parallel import parallel_copy, pool_threads  # noqa: E402
from aare_lab.simulate import Beam, Simulator  # noqa: E402

N_PEDESTAL = 1000
N_SIGMA = 5.0
AARE_VERSION = "2026.9.30"


class Timed:
    """Wall-clock seconds and minor page faults of a block (after a device sync)."""

    def __init__(self, cp):
        self.cp = cp

    def __enter__(self):
        self.cp.cuda.Device().synchronize()
        self.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cp.cuda.Device().synchronize()
        self.seconds = time.perf_counter() - self.start
        self.minor_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - self.faults


def repeat(cp, fn, repeats, setup=None):
    """Run ``fn`` once to warm up, then ``repeats`` timed times, each after ``setup()``
    (untimed) if given."""
    fn()
    seconds, faults, extra = [], [], None
    for _ in range(repeats):
        if setup is not None:
            setup()
        with Timed(cp) as t:
            extra = fn()
        seconds.append(t.seconds)
        faults.append(t.minor_faults)
    return {"seconds": seconds, "minor_faults": faults, "result": extra}


def h2d_floor(cp, frames, dev, chunk, repeats):
    """Bulk page-locked copies of ``frames`` into ``dev``, chunk by chunk, one stream."""
    stream = cp.cuda.Stream(non_blocking=True)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    t0 = time.perf_counter()
    cp.cuda.runtime.hostRegister(frames.ctypes.data, frames.nbytes, 0)
    register_seconds = time.perf_counter() - t0
    seconds = []
    try:
        for _ in range(repeats + 1):
            start.record(stream)
            for a in range(0, len(frames), chunk):
                part = frames[a:a + chunk]
                cp.cuda.runtime.memcpyAsync(dev[a:a + chunk].data.ptr, part.ctypes.data,
                                            part.nbytes, cp.cuda.runtime.memcpyHostToDevice,
                                            stream.ptr)
            stop.record(stream)
            stop.synchronize()
            seconds.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    finally:
        t0 = time.perf_counter()
        cp.cuda.runtime.hostUnregister(frames.ctypes.data)
        unregister_seconds = time.perf_counter() - t0
    return {"seconds": seconds[1:], "register_seconds": register_seconds,
            "unregister_seconds": unregister_seconds,
            "bytes": int(frames.nbytes)}


def kernel_seconds(cp, finder, dev, repeats):
    """CUDA-event time of the finder's chunk kernel alone, chunk after chunk on an idle stream.

    One untimed pass first; the state is scratch, so the finder's pedestal is not advanced.
    """
    engine = finder._engine
    finder._to_device()
    chunk = finder.chunk_frames
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    state = (engine.s.copy(), engine.s2.copy())
    engine._ensure_outputs(0)
    totals = []
    for _ in range(repeats + 1):
        total = 0.0
        for a in range(0, len(dev), chunk):
            part = dev[a:a + chunk]
            start.record(engine.compute)
            engine._run(part, len(part), 0, state[0], state[1], engine.no_maps[:len(part)],
                        engine.no_map_buffer)
            stop.record(engine.compute)
            stop.synchronize()
            total += cp.cuda.get_elapsed_time(start, stop) / 1e3
        totals.append(total)
    return totals[1:]


def aare_mt(dark, frames, size, repeats, threads):
    python = aare_python(AARE_VERSION)
    if python is None:
        return {"skipped": f"no interpreter with aare {AARE_VERSION} "
                           f"(set AARE_PYTHON_{AARE_VERSION.replace('.', '_')})"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "dark.npy", dark)
        np.save(folder / "frames.npy", frames)
        out = subprocess.run(
            [python, str(HERE / "aare_timing.py"), str(folder / "dark.npy"),
             str(folder / "frames.npy"), str(size[0]), str(size[1]), str(N_SIGMA),
             str(repeats), str(threads), "mt"],
            capture_output=True, text=True, check=True, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def clusters_of(batches):
    return sum(len(b.cluster_y) for b in batches)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--unique", type=int, default=500)
    parser.add_argument("--photons", type=float, default=2300.0)
    parser.add_argument("--sparse-photons", type=float, default=230.0)
    parser.add_argument("--chunk", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sizes", default="3x3,9x9")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--aare-frames", type=int, default=2000)
    parser.add_argument("--slider-frames", type=int, default=10000)
    parser.add_argument("--out-frames", type=int, default=4000,
                        help="frames of the find(out=...) runs (9x9 writes 0.7 MB per frame)")
    parser.add_argument("--time-limit", type=float, default=235.0,
                        help="seconds after which the run stops with every thread's traceback")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    # Fails loudly rather than hang (a stuck copy, a GPU that stopped answering).
    faulthandler.dump_traceback_later(args.time_limit, exit=True)
    cp = cupy_or_raise()
    sizes = [parse_cluster_size(s) for s in args.sizes.split(",")]
    threads = len(os.sched_getaffinity(0))  # the cores this process may use, not the host's

    t0 = time.perf_counter()
    sim = Simulator(beam=Beam(photons_per_frame=args.photons), seed=1)
    dark = sim.dark(N_PEDESTAL)
    unique, truth = sim.frames(args.unique)
    frames = np.ascontiguousarray(np.resize(unique, (args.frames, *unique.shape[1:])))
    sparse = Simulator(beam=Beam(photons_per_frame=args.sparse_photons), seed=1).frames(
        min(args.unique, args.frames))[0]
    print(f"simulated in {time.perf_counter() - t0:.1f} s", flush=True)

    record = {
        "benchmark": "gpu_pipeline", "date": datetime.now(timezone.utc).isoformat(),
        "git_commit": git_commit(), "aare_lab_version": aare_lab.__version__,
        "gpu": device_info(),
        "host": {"cpu": cpu_name(), "cores": threads, "python": platform.python_version(),
                 "numpy": np.__version__},
        "parameters": {"frame_shape": list(frames.shape[1:]), "n_frames": args.frames,
                       "unique_frames": args.unique, "photons_per_frame": args.photons,
                       "sparse_photons_per_frame": args.sparse_photons,
                       "n_pedestal": N_PEDESTAL, "n_sigma": N_SIGMA, "noise": "running",
                       "chunk_frames": args.chunk, "repeats": args.repeats,
                       "aare_frames": args.aare_frames, "slider_frames": args.slider_frames,
                       "out_frames": args.out_frames, "time_limit_s": args.time_limit},
        "cases": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    record_path = args.out / f"gpu_pipeline_{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.json"
    scratch = Path(tempfile.mkdtemp(prefix="gpu_pipeline_"))
    dev = cp.empty(frames.shape, cp.uint16)
    floor = h2d_floor(cp, frames, dev, args.chunk, args.repeats)
    floor.update(summary(floor["seconds"], args.frames))
    floor["GB_per_s"] = floor["bytes"] / min(floor["seconds"]) / 1e9
    record["h2d_floor"] = floor
    print(f"H2D floor: {floor['best_fps']:.0f} frames/s ({floor['GB_per_s']:.1f} GB/s); "
          f"registering {floor['bytes'] >> 20} MiB took {floor['register_seconds']:.2f} s",
          flush=True)
    assert cp.array_equal(dev[-1], cp.asarray(frames[-1]))
    pinned = pinned_frames(len(frames), frames.shape[1:])
    copies = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        parallel_copy(frames, pinned, pool="staging")   # as the feed stages frames
        copies.append(time.perf_counter() - t0)
    # Not ``threads``: that is the cores aare's finder gets below.
    copy_threads = pool_threads("staging")
    record["host_copy"] = {"seconds": copies, "GB_per_s": frames.nbytes / min(copies) / 1e9,
                           "threads": copy_threads, "pool": "staging"}
    print(f"host copy into pinned memory ({copy_threads} threads): "
          f"{record['host_copy']['GB_per_s']:.1f} GB/s", flush=True)

    for dtype in args.dtypes.split(","):
        ped = Pedestal(frames.shape[1:], N_PEDESTAL, dtype)
        ped.push_dark(dark)
        for size in sizes:
            case = {"cluster_size": f"{size[0]}x{size[1]}", "pedestal_dtype": dtype}

            def finder(**options):
                options.setdefault("chunk_frames", args.chunk)
                return CudaFinder(ped.copy(), N_SIGMA, size, **options)

            runs = {}
            for mode in ("register", "stage"):
                f = finder(host_memory=mode)
                runs[f"host_{mode}"] = repeat(cp, lambda f=f: clusters_of(f.find_batches(frames)),
                                              args.repeats)
            f = finder()
            runs["host_pinned"] = repeat(cp, lambda: clusters_of(f.find_batches(pinned)),
                                         args.repeats)
            # The user's path: find() into the result Dataset.
            for name, mode, source in (("find_numpy", "auto", frames),
                                       ("find_numpy_stage", "stage", frames),
                                       ("find_numpy_register", "register", frames),
                                       ("find_pinned", "auto", pinned),
                                       ("find_device", "auto", dev)):
                f = finder(host_memory=mode)
                # Fresh: the result written into pages mapped afresh, as in a process's
                # first run; reused: into the previous run's dropped result's
                # (`aare_lab.runtime.result_memory`), as in a process's later runs.
                for memory, setup in (("", result_memory.release), ("_reused", None)):
                    runs[name + memory] = repeat(cp, lambda f=f, source=source: f.find(
                        source, progress=False).sizes["cluster"], args.repeats, setup)
            f = finder()
            part = frames[:args.out_frames]

            def to_disk(f=f, part=part):
                path = scratch / "run.nc"
                with f.find(part, progress=False, out=path) as result:
                    n = result.sizes["cluster"]
                size = path.stat().st_size
                path.unlink()
                return {"clusters": n, "file_bytes": size}

            runs["find_out"] = repeat(cp, to_disk, args.repeats)
            f = finder()
            runs["device_clusters"] = repeat(cp, lambda: clusters_of(f.find_batches(dev)),
                                             args.repeats)
            f = finder()
            runs["device_spectrum"] = repeat(
                cp, lambda: int(f.spectrum(dev, progress=False)["counts"].sum()), args.repeats)
            slider = finder()
            snap = slider.snapshot()

            def refind():
                slider.restore(snap)
                return int(slider.spectrum(dev[:args.slider_frames],
                                           progress=False)["counts"].sum())

            runs["slider_refind"] = repeat(cp, refind, args.repeats)
            f = finder()
            snap_pp = f.snapshot()

            def per_pixel_run(f=f, snap_pp=snap_pp):
                f.restore(snap_pp)
                return int(f.spectrum(dev, per_pixel=True, progress=False)["counts"].sum())

            runs["device_spectrum_per_pixel"] = repeat(cp, per_pixel_run, args.repeats)
            for name, run in runs.items():
                n = {"slider_refind": args.slider_frames,
                     "find_out": len(part)}.get(name, args.frames)
                run.update(summary(run["seconds"], n))
            default = DEFAULT_BLOCK_THREADS
            for block in (default, *(t for t in BLOCK_THREADS if t != default)):
                kernel = kernel_seconds(cp, finder(block_threads=block), dev, args.repeats)
                runs["kernel" if block == default else f"kernel_{block}_threads"] = {
                    "seconds": kernel, **summary(kernel, args.frames), "block_threads": block,
                    "us_per_frame_best": min(kernel) / args.frames * 1e6}
            for run in runs.values():
                run["share_of_h2d_floor"] = run["best_fps"] / floor["best_fps"]
            case["aare_lab"] = runs
            if dtype == "float64" and args.aare_frames:
                case["aare_ClusterFinderMT"] = aare_mt(dark, frames[:args.aare_frames], size,
                                                       args.repeats, threads)
                mt = case["aare_ClusterFinderMT"]
                if "ClusterFinderMT" in mt:
                    mt.update(summary(mt["ClusterFinderMT"], args.aare_frames))
            record["cases"].append(case)
            print_case(case, floor)
            save(record, record_path)

    shutil.rmtree(scratch, ignore_errors=True)
    record["per_pixel_spectra"] = per_pixel_spectra(cp, dark, unique, sparse, args)
    record["complete"] = True
    save(record, record_path)


def save(record, path):
    """(Re)write the JSON record: a run cut by the time limit keeps the cases it finished."""
    path.write_text(json.dumps(record, indent=1))
    print(f"wrote {path}", flush=True)


def per_pixel_spectra(cp, dark, dense, sparse, args):
    """Device spectra with and without the per-pixel scatter-add, sparse and dense beams."""
    out = {}
    for name, frames in (("dense", dense), ("sparse", sparse)):
        dev = cp.asarray(frames)
        ped = Pedestal(frames.shape[1:], N_PEDESTAL, "float32")
        ped.push_dark(dark)
        for per_pixel in (False, True):
            f = CudaFinder(ped.copy(), N_SIGMA, 3, chunk_frames=args.chunk)
            snap = f.snapshot()

            def run():
                f.restore(snap)
                return int(f.spectrum(dev, per_pixel=per_pixel, progress=False)["counts"].sum())

            timed = repeat(cp, run, args.repeats)
            timed.update(summary(timed["seconds"], len(frames)))
            out[f"{name}_{'per_pixel' if per_pixel else 'plain'}"] = timed
            print(f"spectrum {name:6s} per_pixel={per_pixel!s:5s}: {timed['best_fps']:9.0f} "
                  f"frames/s, {timed['result'] / len(frames):.0f} clusters/frame", flush=True)
    return out


def print_case(case, floor):
    ours = case["aare_lab"]
    head = f"{case['cluster_size']} {case['pedestal_dtype']}"
    mt = case.get("aare_ClusterFinderMT")
    peer = mt["best_fps"] if mt and "best_fps" in mt else None
    for name, run in ours.items():
        faults = run.get("minor_faults")
        print(f"{head} {name:27s} best {run['best_fps']:9.0f}  median {run['median_fps']:9.0f}"
              f" frames/s  ({run['share_of_h2d_floor']:.0%} of H2D floor)"
              + (f"  {run['best_fps'] / peer:.1f}x aare MT" if peer else "")
              + (f"  minor faults {faults}" if faults else ""), flush=True)
    def share(a, b):
        return f"{ours[a]['best_fps'] / ours[b]['best_fps']:.0%}"

    print(f"{head} per-pixel spectrum over the run at "
          f"{share('device_spectrum_per_pixel', 'device_spectrum')} of the plain device "
          f"spectrum; staged NumPy batches at {share('host_stage', 'host_pinned')} and NumPy "
          f"find() at {share('find_numpy', 'host_pinned')} of the pinned batches", flush=True)
    if peer:
        print(f"{head} aare ClusterFinderMT ({mt['threads']} threads) best {peer:.0f} frames/s",
              flush=True)
    elif mt:
        print(f"{head} aare: {mt['skipped']}")


if __name__ == "__main__":
    main()
