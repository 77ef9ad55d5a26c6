"""Finder runs for the widgets: one spec on a fixed stack, always from the same start.

A `FinderRunner` lives on one worker thread (a finder is not thread-safe). It keeps the
finder of the last compiled shape and re-configures it for a new nσ or cap instead of
building another; on the GPU the frames stay on the device and each run restores the
starting pedestal from a device snapshot, so a slider move costs one kernel pass.

Nothing a run finds out is silent, yet a warning raised on the worker thread would reach
nobody (and ``warnings.catch_warnings`` is not thread-safe): what `find` warns about, the
runs here hand back as text, `RunOutcome.notes` and `run_notes`, for the UI thread to show.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import xarray as xr

from aare_lab.detector.dark.quality import assess_dark
from aare_lab.detector.pedestal import Pedestal
from aare_lab.finders import get_finder, make_finder
from aare_lab.model.binning import count
from aare_lab.model.capacity import TruncationError
from aare_lab.model.clipping import clipping_message, refuse_clipping
from aare_lab.model.results import counts_spectrum, window_energies
from aare_lab.model.results import spectrum as result_spectrum
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import train_pedestal
from aare_lab.sources import open_source


class RunOutcome(NamedTuple):
    """What one run produced, ready for the views (NumPy data only).

    Attributes
    ----------
    spec
        The specification that ran.
    result
        The result Dataset (None when only a spectrum was asked for).
    spectrum
        ``counts(energy)`` DataArray on the runner's bins, or None.
    n_found, n_kept
        Totals over the frames.
    frames
        Frames processed.
    seconds
        Wall time of the finder (pedestal training excluded).
    truncation
        The truncation message, None if no frame exceeded the cap.
    notes
        What `find` would have warned about, as its warnings word it (`run_notes`): gain
        bits in the dark or data frames, int16 windows at their limits, too few dark
        frames.
    fits
        The peak fit of ``spectrum`` (`aare_lab.analysis.spectra.fit_or_none`), when the widget
        asked for one.
    """

    spec: FinderSpec
    result: xr.Dataset | None
    spectrum: xr.DataArray | None
    n_found: int
    n_kept: int
    frames: int
    seconds: float
    truncation: str | None
    notes: tuple[str, ...] = ()
    fits: xr.Dataset | None = None

    @property
    def rate(self) -> float:
        """Frames per second."""
        return self.frames / self.seconds if self.seconds > 0 else float("inf")

    def describe(self) -> str:
        """One status line: finder, frames, time, rate, counts and truncation."""
        return f"{spec_text(self.spec)}: {self.figures()}"

    def figures(self) -> str:
        """What the run gave: frames, time, rate, counts and truncation."""
        text = (f"{self.frames} frames in {self.seconds:.3g} s ({self.rate:,.0f} frames/s); "
                f"n_found {self.n_found:,}, n_kept {self.n_kept:,}")
        return text + (f" — TRUNCATED: {self.truncation}" if self.truncation else "")


def spec_text(spec: FinderSpec) -> str:
    """The controls' part of a spec in words: finder, pedestal dtype and noise, nσ,
    cluster size, cap."""
    cap = "no cap" if spec.max_clusters_per_frame is None \
        else f"cap {spec.max_clusters_per_frame}"
    return (f"{spec.finder} ({spec.pedestal_dtype}, noise={spec.noise}), nσ={spec.n_sigma:g}, "
            f"{spec.cluster_size[0]}x{spec.cluster_size[1]}, {cap}")


def run_notes(finder, start: Pedestal, result: xr.Dataset | None = None,
              what: str = "the frames") -> tuple[str, ...]:
    """What `find` would warn about after a run, as text, in its words: the pixels with gain
    bits the finder counted (taken: it counts afresh), the result's int16 windows at their
    limits, and too few dark frames behind the starting pedestal.

    Parameters
    ----------
    finder
        The finder that ran (on this thread: its count is taken).
    start
        The pedestal the run started from.
    result
        The result Dataset; None for a spectrum-only run, which keeps no windows (and
        refuses int16 ones, `aare_lab.model.clipping.refuse_clipping`).
    what
        How the gain-bit note names the frames (a file).
    """
    notes = (finder.take_gain_bits(what),
             None if result is None else clipping_message(result),
             assess_dark(start, finder.spec.n_sigma).warning)
    return tuple(note for note in notes if note is not None)


class FinderRunner:
    """Runs finder specs on one stack of frames from one starting pedestal per dtype/noise.

    Parameters
    ----------
    frames
        The frames (array, file spec or source); the first ``preview_frames`` are read
        into memory once.
    dark
        Dark frames, to train a pedestal for each pedestal dtype and noise asked for.
    pedestal
        Instead of (or besides) ``dark``: a trained pedestal; copied, never advanced.
    n_pedestal
        The pedestal window when training from ``dark`` (default: the pedestal's, else
        all dark frames up to 1000).
    preview_frames
        Use at most this many frames (a bounded preview keeps CPU re-runs interactive).
    """

    def __init__(self, frames, *, dark=None, pedestal: Pedestal | None = None,
                 n_pedestal: int | None = None, preview_frames: int | None = None):
        if dark is None and pedestal is None:
            raise ValueError("give dark frames (dark=...) or a trained pedestal (pedestal=...)")
        source = open_source(frames)
        stop = source.n_frames if preview_frames is None else min(
            preview_frames, source.n_frames or preview_frames)
        chunk = source.read(0, stop)
        self.frames, self.numbers = chunk.frames, chunk.numbers
        self.what = source.describe()
        self.dark = None if dark is None else open_source(dark)
        self._pedestals: dict[tuple[str, str], Pedestal] = {}
        # Per pedestal, what its training found in the dark frames (photons, gain bits).
        self._dark_notes: dict[tuple[str, str], tuple[str, ...]] = {}
        if pedestal is not None:
            pedestal.require_ready()
            self._pedestals[(pedestal.dtype.name, pedestal.noise)] = pedestal.copy()
            n_pedestal = n_pedestal or pedestal.n_pedestal
        if dark is not None and n_pedestal is None:
            n_pedestal = default_n_pedestal(self.dark)
        self.n_pedestal = n_pedestal
        self._finder = None
        self._key = None
        self._start = None
        self._device_frames = None

    @property
    def n_frames(self) -> int:
        """Frames each run processes."""
        return len(self.numbers)

    def pedestal_for(self, spec: FinderSpec) -> Pedestal:
        """The starting pedestal of ``spec``'s dtype and noise (trained once, then kept),
        from dark frames that must all read G0 if ``spec`` has a calibration."""
        key = (spec.pedestal_dtype, spec.noise)
        if key not in self._pedestals:
            if self.dark is None:
                have = ", ".join(f"{d}/{n}" for d, n in self._pedestals)
                raise ValueError(f"no dark frames to train a {key[0]} pedestal with "
                                 f"{key[1]} noise; the pedestal given is {have}")
            notes = []
            self._pedestals[key] = train_pedestal(self.dark, self.n_pedestal, dtype=key[0],
                                                  noise=key[1], progress=False,
                                                  g0_only=spec.calibration is not None,
                                                  notes=notes)
            self._dark_notes[key] = tuple(notes)
        return self._pedestals[key]

    def run(self, job, spec: FinderSpec, *, clusters: bool = True,
            edges: np.ndarray | None = None) -> RunOutcome:
        """Run ``spec`` on the frames from the starting pedestal (on the worker thread).

        Parameters
        ----------
        job
            The worker's `aare_lab.widgets.loop.Job` (cancellation between chunks,
            progress).
        spec
            What to run.
        clusters
            Keep the clusters (a result Dataset); False histograms on the fly (on the GPU
            without shipping clusters) and needs ``edges``.
        edges
            Spectrum bin edges (ADU); with clusters, the spectrum is the result's
            histogram on them.
        """
        get_finder(spec.finder).require_available()
        if not clusters:
            refuse_clipping(spec.window_dtype, "a spectrum-only run", "keep the clusters")
            if edges is None:
                raise ValueError("a spectrum-only run needs bin edges")
        start = self.pedestal_for(spec)
        finder = self._finder_for(spec, start)
        frames = self._device_frames if spec.finder == "cuda" else self.frames
        job.check()
        t0 = time.perf_counter()
        if not clusters:
            n_found, n_kept, counts, *outside = self._histogram_only(job, finder, frames, edges)
            seconds = time.perf_counter() - t0
            spectrum = counts_spectrum(counts, edges, spec, self.n_frames, *outside)
            truncated = n_found > n_kept
            message = (f"{int(truncated.sum())} of {len(n_found)} frames exceeded "
                       f"max_clusters_per_frame={spec.max_clusters_per_frame}"
                       if truncated.any() else None)
            return RunOutcome(spec, None, spectrum, int(n_found.sum()), int(n_kept.sum()),
                              self.n_frames, seconds, message, self._notes(start, finder))
        batches, done = [], 0
        for batch in finder.find_batches(frames, self.numbers):
            job.check()
            batches.append(batch)
            done += len(batch.frame_numbers)
            job.progress(done / self.n_frames)
        try:
            result, message = finder.assemble(batches, warn=False), None
        except TruncationError as err:
            result, message = err.result, str(err)
        seconds = time.perf_counter() - t0
        spectrum = None if edges is None else result_spectrum(result, bins=edges)
        return RunOutcome(spec, result, spectrum, int(result["n_found"].sum()),
                          int(result["n_kept"].sum()), self.n_frames, seconds, message,
                          self._notes(start, finder, result))

    def _notes(self, start: Pedestal, finder, result: xr.Dataset | None = None):
        """The run's `run_notes`, after those on the dark frames of ``start``."""
        dark = self._dark_notes.get((start.dtype.name, start.noise), ())
        return (*dark, *run_notes(finder, start, result, self.what))

    def _finder_for(self, spec: FinderSpec, start: Pedestal):
        key = (spec.compiled_key, id(start))
        if self._finder is None or key != self._key:
            # on_truncation="error": the result comes back on the exception, and no warning
            # is raised on a worker thread, where it could not be seen (nor any other: the
            # runs report what they found as notes).
            self._finder = make_finder(spec, start.copy(), on_truncation="error")
            self._key = key
            # Compiling (or loading the kernel) is not part of the run's time.
            self._finder.warmup()
            if spec.finder == "cuda":
                import cupy

                self._start = self._finder.snapshot()
                if self._device_frames is None:
                    self._device_frames = cupy.asarray(self.frames)
        else:
            self._finder.reconfigure(n_sigma=spec.n_sigma,
                                     max_clusters_per_frame=spec.max_clusters_per_frame)
        if spec.finder == "cuda":
            self._finder.restore(self._start)
        else:
            self._finder.pedestal = start.copy()
        return self._finder

    def _histogram_only(self, job, finder, frames, edges):
        if finder.name == "cuda":
            lo, hi = float(edges[0]), float(edges[-1])
            try:
                out = finder.spectrum(frames, bins=len(edges) - 1, range=(lo, hi),
                                      frame_numbers=self.numbers, progress=False, warn=False)
            except TruncationError as err:  # reported by the caller, from n_found/n_kept
                out = err.result
            counts, n_kept = out["counts"].to_numpy(), out["n_kept"].to_numpy()
            return (out["n_found"].to_numpy(), n_kept, counts, None, None,
                    int(n_kept.sum() - counts.sum()))
        counts = np.zeros(len(edges) - 1, np.int64)
        under = over = 0
        n_found, n_kept = [], []
        for batch in finder.find_batches(frames, self.numbers):
            job.check()
            part, low, high = count(window_energies(batch.windows), edges)
            counts += part
            under, over = under + low, over + high
            n_found.append(batch.n_found)
            n_kept.append(batch.n_kept)
        return np.concatenate(n_found), np.concatenate(n_kept), counts, under, over, None


def default_n_pedestal(dark) -> int:
    """The pedestal window a widget trains with when none is given: every dark frame, up
    to 1000."""
    n_dark = open_source(dark).n_frames
    return min(1000, n_dark) if n_dark else 1000
