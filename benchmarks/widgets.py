"""Widget latency and overhead: a parameter change to the updated figure, and a live spectrum
against the finder alone.

Run: ``python benchmarks/widgets.py [--frames 1000] [--changes 5] [--cpu-threads 2]`` (CPU
cases; on a GPU machine the cuda cases run too, ``--gpu-frames 10000``). One simulated
MÖNCH03 run (`aare_lab.simulate.Simulator(seed=0)`, 400x400, ~2300 photons per frame,
1000 dark frames) is used throughout.

- **Latency** (`aare_lab.widgets.FinderControls`): set nσ as a user would, then run the UI
  queue (`wait`) until the pump's redraw counter (``widget.pump.redraws``) increments, i.e.
  the run finished on the worker, the spectrum view's artists were updated and the figure
  redrawn. The figure is the static PNG host (a full Agg render and PNG encode per redraw,
  the costlier of the two hosts; ipympl's ``draw_idle`` only asks the browser to draw). Each
  change starts rested (more than one pump period after the previous redraw), so the
  throttle never delays it. Cases: CPU ``frozen`` on ``--frames`` frames (2 threads, with
  and without keeping clusters); cuda on ``--gpu-frames`` frames (spectrum only, on the GPU
  from the device snapshot; target < 0.2 s) and on ``--frames`` frames with clusters.
- **Live-spectrum throughput** (`aare_lab.widgets.LiveSpectrum`): frames/s of the widget
  consuming a ``.npy`` file source (memory-mapped, in the page cache after the first pass)
  from start to the last snapshot on screen, against the same finder consuming the same
  source chunk by chunk and histogramming the energies with nothing else (the widget must
  cost < 10 % of that rate). Skipped, with a note, while the widget module is missing.

The raw timings go to ``benchmarks/results/widgets_<UTC time>.json`` with the git commit,
host and versions.
"""

from __future__ import annotations

import argparse
import os
import sys

PARSER = argparse.ArgumentParser(description=__doc__.splitlines()[0])
PARSER.add_argument("--frames", type=int, default=1000, help="stack of the latency cases")
PARSER.add_argument("--gpu-frames", type=int, default=10000,
                    help="stack of the cuda spectrum-only latency case")
PARSER.add_argument("--unique", type=int, default=500,
                    help="simulated frames, repeated to fill the larger stacks")
PARSER.add_argument("--changes", type=int, default=5, help="nσ changes per latency case")
PARSER.add_argument("--live-frames", type=int, default=None,
                    help="frames of the live-spectrum file (default 2000 CPU, 10000 GPU)")
PARSER.add_argument("--repeats", type=int, default=3, help="live-spectrum repetitions")
PARSER.add_argument("--cpu-threads", type=int, default=2)
PARSER.add_argument("--no-gpu", action="store_true", help="CPU cases only")
PARSER.add_argument("--no-cpu", action="store_true", help="GPU cases only")
PARSER.add_argument("--out", default=None)
ARGS = PARSER.parse_args() if __name__ == "__main__" else None
if ARGS is not None:
    # Numba reads its thread count once, at import: the frozen finder's threads.
    os.environ.setdefault("NUMBA_NUM_THREADS", str(ARGS.cpu_threads))
os.environ.setdefault("MPLBACKEND", "agg")

import importlib.util  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import cpu_name, git_commit, write_record  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab.finders import available_finders, make_finder  # noqa: E402
from aare_lab.model.spec import FinderSpec  # noqa: E402
from aare_lab.simulate import Simulator  # noqa: E402
from aare_lab.widgets.figures import RELAYOUT_AFTER  # noqa: E402
from aare_lab.widgets.loop import wait_until  # noqa: E402

N_PEDESTAL = 1000
#: Spectrum bin edges of the spectrum-only runs: 200 integer-aligned bins of 10 ADU.
EDGES = np.arange(0, 2001, 10, dtype=float)
GPU_TARGET_S = 0.2
OVERHEAD_LIMIT = 0.10


def stats(seconds: list[float]) -> dict:
    return {"seconds": seconds, "median_s": statistics.median(seconds), "min_s": min(seconds),
            "max_s": max(seconds)}


def tiled(frames: np.ndarray, n: int) -> np.ndarray:
    """``n`` frames: ``frames`` repeated (a pedestal run over them stays realistic)."""
    reps = -(-n // len(frames))
    return np.concatenate([frames] * reps)[:n] if reps > 1 else frames[:n].copy()


def latency(label: str, frames, pedestal, spec: FinderSpec, changes: int, *,
            clusters: bool, interactive: bool = False) -> dict:
    """Seconds from an nσ change to the redrawn figure, ``changes`` times.

    On the static host a redraw renders the figure into a PNG; on the ipympl host
    (``interactive``) it ends when the draw request is sent, and the browser then has the
    kernel render the figure when it asks.
    """
    from aare_lab.widgets import FinderControls

    setup = time.perf_counter()
    widget = FinderControls(frames, pedestal=pedestal, spec=spec, preview_frames=None,
                            clusters=clusters, bins=None if clusters else EDGES,
                            interactive=interactive)
    widget.wait(timeout=1200)
    if widget.error:
        raise RuntimeError(f"{label}: {widget.error}")
    first = time.perf_counter() - setup
    values = [spec.n_sigma + d for d in (-1.0, 1.0, -0.5, 0.5, -1.5, 1.5, -0.25, 0.25)]
    values = (values * (1 + changes // len(values)))[:changes]
    seconds, finder_seconds, redraw_counts = [], [], []
    for value in values:
        # Rested, as between two moves of a user: the throttle does not delay the change,
        # and the figure's own layout pass (due RELAYOUT_AFTER after a redraw) has run, as
        # the kernel's loop would have run it meanwhile.
        rest_until = time.monotonic() + max(widget.pump.period, RELAYOUT_AFTER) * 1.2
        wait_until(widget.ui, lambda: time.monotonic() > rest_until, timeout=60)
        before = widget.pump.redraws
        start = time.perf_counter()
        widget.set(n_sigma=value)
        wait_until(widget.ui, lambda: widget.pump.redraws > before, timeout=600)
        seconds.append(time.perf_counter() - start)
        widget.wait(timeout=600)
        if widget.error:
            raise RuntimeError(f"{label}: {widget.error}")
        assert widget.spec.n_sigma == value and widget.outcome.spec.n_sigma == value
        finder_seconds.append(widget.outcome.seconds)
        redraw_counts.append(widget.pump.redraws - before)
    outcome = widget.outcome
    widget.close()
    case = {"case": label, "finder": spec.finder, "frames": outcome.frames,
            "clusters_kept": clusters, "figure_host": "ipympl" if interactive else "static PNG", "n_sigma_values": values,
            "first_run_s": first, "latency": stats(seconds),
            "finder_run": stats(finder_seconds), "redraws_per_change": redraw_counts,
            "last_n_found": outcome.n_found}
    print(f"{label}: nσ change → figure, median {case['latency']['median_s']:.3f} s, "
          f"min {case['latency']['min_s']:.3f} s (finder {case['finder_run']['median_s']:.3f} s) "
          f"over {len(seconds)} changes; first run {first:.2f} s")
    return case


def live_throughput(label: str, path: str, n_frames: int, pedestal, spec: FinderSpec,
                    repeats: int) -> dict:
    """Frames/s of LiveSpectrum on a file against the finder alone on the same file."""
    if importlib.util.find_spec("aare_lab.widgets.live_spectrum") is None:
        print(f"{label}: skipped, aare_lab/widgets/live_spectrum.py is not there yet")
        return {"case": label, "skipped": "aare_lab.widgets.live_spectrum missing"}
    from aare_lab.sources import open_source
    from aare_lab.widgets import LiveSpectrum

    chunk = 512 if spec.finder == "cuda" else 64

    def alone() -> tuple[float, int]:
        finder = make_finder(spec, pedestal.copy(), on_truncation="warn")
        if spec.finder == "cuda":
            finder.warmup()
        counts = np.zeros(len(EDGES) - 1, np.int64)
        start = time.perf_counter()
        for part in open_source(path).chunks(chunk):
            if spec.finder == "cuda":
                out = finder.spectrum(part.frames, bins=len(EDGES) - 1,
                                      range=(EDGES[0], EDGES[-1]),
                                      frame_numbers=part.numbers, progress=False)
                counts += out["counts"].to_numpy()
            else:
                batch = finder.process_chunk(part.frames, part.numbers)
                energies = batch.windows.reshape(len(batch.windows), -1).sum(
                    axis=1, dtype=np.float64)
                counts += np.histogram(energies, bins=EDGES)[0]
        return time.perf_counter() - start, int(counts.sum())

    def widget() -> tuple[float, int, int, int]:
        live = LiveSpectrum(path, pedestal=pedestal, spec=spec, bins=EDGES,
                            chunk_frames=chunk, autostart=False, interactive=False)
        start = time.perf_counter()
        live.start()
        live.wait_finished(timeout=1200)
        seconds = time.perf_counter() - start
        if live.error:
            raise RuntimeError(f"{label}: {live.error}")
        processed, redraws = live.frames_processed, live.pump.redraws
        total = int(live.spectrum.sum())
        live.close()
        return seconds, processed, redraws, total

    try:
        widget_probe = LiveSpectrum(path, pedestal=pedestal, spec=spec, bins=EDGES,
                                    autostart=False, interactive=False)
    except Exception as err:  # the widget is still being written: note it, go on
        print(f"{label}: skipped, LiveSpectrum cannot be built: {type(err).__name__}: {err}")
        return {"case": label, "skipped": f"LiveSpectrum failed: {type(err).__name__}: {err}"}
    widget_probe.close()
    alone()  # warm: compiled code, page cache, GPU context
    finder_s, widget_s, redraws, totals = [], [], [], set()
    for _ in range(repeats):
        seconds, total = alone()
        finder_s.append(seconds)
        seconds, processed, n_redraws, shown = widget()
        if processed != n_frames:
            raise RuntimeError(f"{label}: the widget processed {processed} of {n_frames} frames")
        widget_s.append(seconds)
        redraws.append(n_redraws)
        totals.add((total, shown))
    finder_fps = n_frames / min(finder_s)
    widget_fps = n_frames / min(widget_s)
    cost = 1 - widget_fps / finder_fps
    case = {"case": label, "finder": spec.finder, "frames": n_frames, "chunk_frames": chunk,
            "finder_alone": stats(finder_s), "widget": stats(widget_s),
            "finder_alone_best_fps": finder_fps, "widget_best_fps": widget_fps,
            "finder_alone_median_fps": n_frames / statistics.median(finder_s),
            "widget_median_fps": n_frames / statistics.median(widget_s),
            "widget_cost_fraction": cost, "within_limit": cost < OVERHEAD_LIMIT,
            "redraws": redraws, "clusters_in_spectrum": sorted(totals)}
    print(f"{label}: finder alone {finder_fps:,.0f} frames/s, LiveSpectrum {widget_fps:,.0f} "
          f"frames/s (best of {repeats}): the widget costs {100 * cost:.1f} % "
          f"({'within' if cost < OVERHEAD_LIMIT else 'OVER'} the 10 % limit); "
          f"{min(redraws)}–{max(redraws)} redraws")
    return case


def main(args) -> None:
    gpu = "cuda" in available_finders() and not args.no_gpu
    sim = Simulator(seed=0)
    t0 = time.perf_counter()
    dark = sim.dark(N_PEDESTAL)
    unique, truth = sim.frames(args.unique)
    simulate_s = time.perf_counter() - t0
    pedestal = aare_lab.Pedestal(unique.shape[1:], N_PEDESTAL, noise="running")
    pedestal.push_dark(dark)
    live_frames = args.live_frames or (10000 if gpu else 2000)
    record = {
        "benchmark": "widgets", "date": datetime.now(timezone.utc).isoformat(),
        "git_commit": git_commit(), "aare_lab_version": aare_lab.__version__,
        "host": {"cpu": cpu_name(), "cores": os.cpu_count(),
                 "numba_threads": numba.config.NUMBA_NUM_THREADS,
                 "python": platform.python_version(), "numpy": np.__version__,
                 "numba": numba.__version__, "matplotlib": _version("matplotlib"),
                 "ipywidgets": _version("ipywidgets"), "gpu": None,
                 "load_average_at_start": list(os.getloadavg())},
        "parameters": {"frame_shape": list(unique.shape[1:]), "n_pedestal": N_PEDESTAL,
                       "unique_frames": args.unique, "photons": len(truth),
                       "n_sigma": 5.0, "cluster_size": "3x3", "pedestal_dtype": "float64",
                       "noise": "running", "changes": args.changes, "frames": args.frames,
                       "gpu_frames": args.gpu_frames, "live_frames": live_frames,
                       "repeats": args.repeats, "edges": [EDGES[0], EDGES[-1], len(EDGES) - 1],
                       "figure_host": "static PNG", "simulate_seconds": simulate_s},
        "latency": [], "live_spectrum": [],
    }
    if gpu:
        from aare_lab.gpu import device_info

        record["host"]["gpu"] = device_info()
    frames = tiled(unique, args.frames)
    cpu = FinderSpec("frozen")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "frames.npy")
        np.save(path, tiled(unique, live_frames))
        if not args.no_cpu:
            record["latency"].append(latency(f"frozen ({args.cpu_threads} threads), "
                                             f"{len(frames)} frames, clusters kept", frames,
                                             pedestal, cpu, args.changes, clusters=True))
            record["latency"].append(latency(f"frozen ({args.cpu_threads} threads), "
                                             f"{len(frames)} frames, spectrum only", frames,
                                             pedestal, cpu, args.changes, clusters=False))
        if gpu:
            cuda = FinderSpec("cuda")
            big = tiled(unique, args.gpu_frames)
            case = latency(f"cuda, {len(big)} frames, spectrum only", big, pedestal, cuda,
                           args.changes, clusters=False)
            case["target_s"] = GPU_TARGET_S
            case["within_target"] = case["latency"]["median_s"] < GPU_TARGET_S
            print(f"  target < {GPU_TARGET_S} s: "
                  f"{'met' if case['within_target'] else 'MISSED'} (median)")
            record["latency"].append(case)
            record["latency"].append(latency(
                f"cuda, {len(big)} frames, spectrum only, ipympl host (until the draw "
                "request)", big, pedestal, cuda, args.changes, clusters=False,
                interactive=True))
            del big
            record["latency"].append(latency(f"cuda, {len(frames)} frames, clusters kept",
                                             frames, pedestal, cuda, args.changes,
                                             clusters=True))
        if not args.no_cpu:
            record["live_spectrum"].append(live_throughput(
                f"LiveSpectrum frozen ({args.cpu_threads} threads), {live_frames}-frame .npy",
                path, live_frames, pedestal, cpu, args.repeats))
        if gpu:
            record["live_spectrum"].append(live_throughput(
                f"LiveSpectrum cuda, {live_frames}-frame .npy", path, live_frames, pedestal,
                FinderSpec("cuda"), args.repeats))
    try:
        record["host"]["threading_layer"] = numba.threading_layer()
    except ValueError:  # no parallel region ran (GPU cases only)
        record["host"]["threading_layer"] = None
    record["host"]["load_average_at_end"] = list(os.getloadavg())
    write_record(record, Path(args.out) if args.out else HERE / "results")


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None


if __name__ == "__main__":
    main(ARGS)
