"""Where the slider's re-find spends its time beside the kernel: ``finder.spectrum()`` of
device-resident frames, profiled on the host.

Run on a machine with an NVIDIA GPU: ``python benchmarks/spectrum_profile.py``. In one
process:

- the kernel alone (`gpu_pipeline.kernel_seconds`), without and with the device spectrum;
- the wall time of ``finder.spectrum(frames)`` (`gpu_pipeline.repeat`, the finder's state
  restored before each run);
- one call's timeline: CUDA events on the compute stream around every `FrozenEngine._run`
  (a launch's zeroing and kernel; the state copies queued before it fall in the gaps, and
  a chunk repeated after a region overflow counts as one more launch) and host clocks at
  each, so the call splits into the host's time before the first launch, the launches' GPU
  time, the gaps between them, and the host's time after the last;
- one more call under ``cProfile``, whose functions by own and by cumulative time show what
  the host does per call and per launch.

The record (``spectrum_profile_*.json``) holds the times, the timeline and the profile's top
lines.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_pipeline import kernel_seconds, repeat  # noqa: E402
from kernel_variants import MOENCH_PHOTONS, device_frames  # noqa: E402
from records import git_commit, write_record  # noqa: E402

from aare_lab import Pedestal  # noqa: E402
from aare_lab.finders import CudaFinder  # noqa: E402
from aare_lab.gpu import cupy_or_raise, device_info  # noqa: E402
from aare_lab.model.params import parse_cluster_size  # noqa: E402


def profile_lines(profiler: cProfile.Profile, key: str, lines: int) -> str:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(lines)
    return out.getvalue()


def timeline(cp, finder, dev) -> dict:
    """One ``spectrum()`` call split by CUDA events around each `FrozenEngine._run` (the
    zeroing and the kernel) and host clocks."""
    engine = finder._engine
    marks = []
    run = engine._run

    def timed_run(*args):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        queued = time.perf_counter()
        start.record(engine.compute)
        run(*args)
        stop.record(engine.compute)
        marks.append((queued, start, stop))

    engine._run = timed_run
    try:
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        finder.spectrum(dev, progress=False)
        wall = time.perf_counter() - t0
    finally:
        del engine._run
    kernels = [cp.cuda.get_elapsed_time(a, b) / 1e3 for _, a, b in marks]
    gaps = [cp.cuda.get_elapsed_time(marks[k][2], marks[k + 1][1]) / 1e3
            for k in range(len(marks) - 1)]
    span = cp.cuda.get_elapsed_time(marks[0][1], marks[-1][2]) / 1e3
    return {"wall_seconds": wall, "launches": len(marks),
            "host_before_first_launch_seconds": marks[0][0] - t0,
            "gpu_span_seconds": span, "launch_seconds": kernels, "gap_seconds": gaps,
            "host_queue_offsets_seconds": [q - t0 for q, _, _ in marks]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10240)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", default="3x3", help="cluster size")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--chunk-frames", type=int, default=CudaFinder.default_chunk_frames)
    parser.add_argument("--lines", type=int, default=30, help="profile lines kept per order")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    cp = cupy_or_raise()
    _, dark, dev = device_frames(cp, (400, 400), args.frames)
    ped = Pedestal((400, 400), 1000, args.dtype)
    ped.push_dark(dark)
    finder = CudaFinder(ped, 5.0, parse_cluster_size(args.size),
                        chunk_frames=args.chunk_frames)
    finder._to_device()
    kernel = kernel_seconds(cp, finder, dev, args.repeats)
    edges = np.linspace(0.0, 2000.0, 201)
    finder._engine.set_spectrum(edges, False)
    try:
        kernel_hist = kernel_seconds(cp, finder, dev, args.repeats)
    finally:
        finder._engine.set_spectrum(None, False)
    snap = finder.snapshot()
    call = repeat(cp, lambda: finder.spectrum(dev, progress=False), args.repeats,
                  lambda: finder.restore(snap))
    finder.restore(snap)
    line = timeline(cp, finder, dev)
    finder.restore(snap)
    profiler = cProfile.Profile()
    profiler.enable()
    finder.spectrum(dev, progress=False)
    cp.cuda.Device().synchronize()
    profiler.disable()
    by_own = profile_lines(profiler, "tottime", args.lines)
    by_total = profile_lines(profiler, "cumulative", args.lines)
    launches = -(-args.frames // args.chunk_frames)
    after = line["wall_seconds"] - line["host_before_first_launch_seconds"] \
        - line["gpu_span_seconds"]
    print(f"{args.size} {args.dtype}, {args.frames} frames in {launches} launches: kernel "
          f"alone {min(kernel) * 1e3:.2f} ms, with the spectrum {min(kernel_hist) * 1e3:.2f} ms, "
          f"spectrum() {min(call['seconds']) * 1e3:.2f} ms")
    print(f"one call {line['wall_seconds'] * 1e3:.2f} ms: host before the first launch "
          f"{line['host_before_first_launch_seconds'] * 1e3:.2f} ms, launches "
          f"{sum(line['launch_seconds']) * 1e3:.2f} ms, gaps {sum(line['gap_seconds']) * 1e3:.2f} "
          f"ms (largest {max(line['gap_seconds'], default=0) * 1e6:.0f} us), after the last "
          f"{after * 1e3:.2f} ms (host queueing and GPU start included)")
    print(by_own)
    print(by_total)
    write_record({
        "benchmark": "spectrum_profile", "date": datetime.now(timezone.utc).isoformat(),
        "git_commit": git_commit(), "gpu": device_info(),
        "parameters": {"frames": args.frames, "repeats": args.repeats, "cluster_size": args.size,
                       "pedestal_dtype": args.dtype, "chunk_frames": args.chunk_frames,
                       "launches": launches, "photons_per_frame": MOENCH_PHOTONS},
        "kernel_seconds": kernel, "kernel_with_spectrum_seconds": kernel_hist,
        "spectrum_seconds": call["seconds"], "timeline": line,
        "profile_by_own_time": by_own, "profile_by_cumulative_time": by_total,
    }, args.out)


if __name__ == "__main__":
    main()
