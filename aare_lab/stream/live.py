"""Headless live mode: a detector stream through a finder into files that grow with the run.

`LiveRun` takes the chunks of a live source (`aare_lab.sources.sls_stream.StreamSource`, or
anything with its ``stats``, ``mark_processed`` and ``chunks``), trains the pedestal on the
first frames or starts from a trained one, finds clusters and keeps, in an output folder:

- ``spectrum.nc``: the cluster-energy spectrum, a DataArray on fixed bins (an open-ended run
  cannot choose its bins from data it has not seen; clusters outside are counted in the
  ``underflow`` and ``overflow`` attributes), as `aare_lab.model.results.spectrum` makes it: in
  ADU, or in keV when the spec has a JUNGFRAU calibration;
- ``stats.json``: the source's counts, exactly the keys of ``stats.as_dict()``, its
  refused messages by kind under ``messages_refused`` (``{}`` when none), where the
  stream's frames changed shape while the pedestal was training on them
  ``dark_frames_discarded`` (the frames taken before, processed and not used), and with a
  calibration ``n_flagged``, the pixels of the data frames flagged so far (never photons),
  with int16 windows ``n_window_clipped``, their taps at the int16 limits so far;
- with ``clusters=True``, ``clusters.nc``: the result file of ``find(..., out=...)``, with
  each frame's ``acquisition`` (the stream's count, from 1), appended at every write
  (`aare_lab.finders.base.Finder.open_result_file`: ``cluster`` and ``frame`` grow), so
  memory holds one interval's clusters however long the run; moved into place, marked
  complete, when the run ends or is stopped; an interrupted or failed run leaves it as
  ``clusters.partial.nc``, ``complete = 0``.

They are written every ``interval`` seconds, when the stream ends and when the run is
stopped (`LiveRun.stop`, which the CLI calls on the first SIGINT or SIGTERM) or
interrupted (`LiveRun.interrupt`, the second), and always reflect the same frames:
everything processed so far. At the end the source is halted first
(``source.halt()``, where it has one), so that the last ``stats.json`` counts every
frame that reached the process and was not processed in ``frames_queued``.
``spectrum.nc`` and ``stats.json`` are replaced atomically (a temporary file, then
`os.replace`), so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from aare_lab.analysis.fit import line_energies
from aare_lab.analysis.spectra import fit_or_none, peak_fit
from aare_lab.detector.dark.quality import assess_dark
from aare_lab.detector.pedestal import Pedestal
from aare_lab.finders import make_finder
from aare_lab.finders.base import ClusterBatch, Finder
from aare_lab.model.binning import count, integer_edges
from aare_lab.model.capacity import ON_TRUNCATION, report_truncation
from aare_lab.model.clipping import (
    CLIPPED_VARIABLE,
    SHOWN_FRAMES,
    WindowClippedWarning,
    clipped_taps,
    clipped_text,
    counts_clipping,
)
from aare_lab.model.results import counts_spectrum, window_energies
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import DarkChecks
from aare_lab.runtime.readahead import read_ahead
from aare_lab.sources.base import counts_text
from aare_lab.storage.atomic import replace_atomically
from aare_lab.storage.netcdf import write_netcdf

#: The default ``(low, high, width)`` of a live spectrum's bins in each unit of energy.
DEFAULT_BINNING = {"ADU": (0, 2000, 10), "keV": (0.0, 50.0, 0.1)}


def fixed_edges(low: float | None = None, high: float | None = None,
                width: float | None = None, *, units: str = "ADU") -> np.ndarray:
    """The fixed bins of a live spectrum, ``width`` wide from ``low`` to ``high``.

    In ADU the bins are integer-aligned (`aare_lab.model.binning`), edges from ``low - 0.5`` to
    ``high - 0.5``, all three whole numbers; in keV (a JUNGFRAU calibration) the edges go
    from ``low`` to ``high``. What is left out takes its `DEFAULT_BINNING`.

    Raises
    ------
    ValueError
        Unless ``high - low`` is a positive multiple of ``width`` (in ADU: of whole numbers).

    Examples
    --------
    >>> fixed_edges(0, 30, 10).tolist()
    [-0.5, 9.5, 19.5, 29.5]
    >>> fixed_edges(10, 11, 0.25, units="keV").tolist()
    [10.0, 10.25, 10.5, 10.75, 11.0]
    """
    if units not in DEFAULT_BINNING:
        raise ValueError(f"units must be one of {sorted(DEFAULT_BINNING)}, got {units!r}")
    low, high, width = (default if value is None else value for value, default
                        in zip((low, high, width), DEFAULT_BINNING[units]))
    if not all(np.isfinite([low, high, width])):
        raise ValueError(f"the energy range {low:g}..{high:g} {units} and the bin width "
                         f"{width:g} {units} must be finite")
    n = round((high - low) / width) if width > 0 else 0
    if not (high > low and n >= 1 and np.isclose(n * width, high - low, rtol=1e-9, atol=0)):
        raise ValueError(f"the energy range {low:g}..{high:g} {units} must be a positive "
                         f"multiple of the bin width {width:g} {units}")
    if units == "keV":
        return np.linspace(low, high, n + 1)
    if any(value != int(value) for value in (low, high, width)):
        raise ValueError(f"the energy range {low:g}..{high:g} ADU and the bin width "
                         f"{width:g} ADU must be whole numbers")
    return integer_edges(int(low), int(high) - 1, int(width))


#: The default bins of a live spectrum: 10 ADU wide, edges at -0.5 ... 1999.5 ADU.
DEFAULT_EDGES = fixed_edges()
#: The default bins of a calibrated (keV) live spectrum: 0.1 keV wide from 0 to 50 keV.
DEFAULT_KEV_EDGES = fixed_edges(units="keV")


class LiveRun:
    """Consume a live source until it ends, ``duration`` passes or `stop` is called.

    Parameters
    ----------
    source
        A live source: ``chunks(with_acquisition=True, until=...)``, ``stats.as_dict()``,
        ``mark_processed(n)``, ``unread(chunks)``, ``describe()``; ``halt()`` and
        ``stats.refused`` where it has them (`aare_lab.sources.StreamSource` does).
    spec
        The finder and its parameters (``n_pedestal`` set when training on the stream).
        With a JUNGFRAU calibration (``spec.calibration``) the frames are raw with gain
        bits, dark frames from the stream must all read G0 (as `aare_lab.train_pedestal`
        with ``g0_only`` checks them) and the spectrum is in keV.
    out
        The output folder (created).
    pedestal
        A trained pedestal to start from (copied), instead of ``n_dark``.
    n_dark
        Train on the first ``n_dark`` frames of the stream (at least ``spec.n_pedestal``;
        the frames beyond N update the trained pedestal, as `aare_lab.train_pedestal`
        does). They count as processed and are not in the spectrum. Frames of another
        shape before the training is done start it again (`report` says so).
    edges
        Fixed bin edges of the spectrum, in the spec's units (`FinderSpec.units`); default
        `DEFAULT_EDGES` in ADU, `DEFAULT_KEV_EDGES` in keV (`fixed_edges`).
    clusters
        Also write ``clusters.nc``.
    interval
        Seconds between writes of the outputs (and status reports).
    duration
        Stop after this many seconds (None: run until the stream ends or `stop`).
    report
        Called with a status line at every write (`status_line`).
    on_truncation
        What frames over the cap do at the end of the run: ``"warn"`` (a
        `TruncationWarning`) or ``"error"`` (`aare_lab.TruncationError`); the run goes on
        either way and its outputs are written first.
    calibration_name
        How messages name the spec's calibration (the CLI: its file).
    fit_window, lines
        The peak fit that each status line ends with, as for
        `aare_lab.widgets.LiveSpectrum`: ``(low, high)`` in the spec's units (default:
        around the highest bin), and the Kα and Kβ energies in keV for the doublet
        (default: one gaussian). Nothing is written while no peak fits
        (`aare_lab.analysis.spectra.fit_or_none`).
    **finder_options
        Passed to the finder (``threads``...).

    Raises
    ------
    ValueError
        For both or neither of ``pedestal`` and ``n_dark``, or ``n_dark`` below N. While
        running (`run`): for frames of another shape than the calibration's or the
        pedestal's, or, with a calibration, a dark frame that is not all G0.

    Warns
    -----
    aare_lab.detector.jungfrau.GainBitsWarning
        Without a calibration, when the dark frames are taken if they hold values above
        14 bits (raw JUNGFRAU pixels that switched gain), and at the first data chunk that
        does.
    aare_lab.detector.dark.photons.IlluminatedDarkWarning
        When the dark frames are taken with ``n_dark``, if they hold photon hits (as
        `aare_lab.train_pedestal` checks them).
    aare_lab.detector.dark.quality.DarkFrameWarning
        Once the pedestal is trained (or given), if its dark frames are too few for
        ``n_sigma`` (as `Finder.find` warns).
    """

    def __init__(self, source, spec: FinderSpec, out: str | os.PathLike, *,
                 pedestal: Pedestal | None = None, n_dark: int | None = None,
                 edges: np.ndarray | None = None, clusters: bool = False,
                 interval: float = 2.0, duration: float | None = None,
                 report: Callable[[str], None] = print, on_truncation: str = "warn",
                 calibration_name: str = "the calibration",
                 fit_window: tuple[float, float] | None = None, lines=None,
                 **finder_options):
        if (pedestal is None) == (n_dark is None):
            raise ValueError("give a trained pedestal or n_dark frames to train on, not both")
        if n_dark is not None and n_dark < spec.n_pedestal:
            raise ValueError(f"{n_dark} dark frames cannot train a pedestal of "
                             f"n_pedestal={spec.n_pedestal}: take at least as many")
        self.source, self.spec, self.out = source, spec, Path(out)
        self.edges = np.asarray(fixed_edges(units=spec.units) if edges is None else edges,
                                float)
        self.calibration_name = calibration_name
        self.fit_window = checked_fit_window(fit_window)
        self.lines = line_energies(lines)
        if on_truncation not in ON_TRUNCATION:
            raise ValueError(f"on_truncation must be 'warn' or 'error', got {on_truncation!r}")
        self.interval, self.duration, self.report = interval, duration, report
        self.on_truncation = on_truncation
        self.ended_by: str | None = None
        self.interrupted: str | None = None
        self._options = {**finder_options, "on_truncation": "warn"}
        self._pedestal = None if pedestal is None else pedestal.copy()
        self._n_dark = n_dark
        self._dark_left = n_dark or 0
        self._dark_checks = DarkChecks(source, spec.calibration is not None, n_dark)
        self.dark_discarded = 0
        self.finder: Finder | None = None
        if self._pedestal is not None:
            self._make_finder(stacklevel=2)
        self._stop = threading.Event()
        self._clusters = ClusterFile(self.out / "clusters.nc") if clusters else None
        self.counts = np.zeros(len(self.edges) - 1, np.int64)
        self.underflow = self.overflow = self.frames = self.n_clusters = self.taken = 0
        self.n_flagged = 0
        self._started = self._written = time.monotonic()
        self._taken_written = 0
        self.truncated = self._cut = 0
        # Window taps at the int16 limits: how many, in how many frames, the first frames.
        self._clipped = (0, 0, [])
        self._worst = (0, None)  # the most clusters found in a frame over the cap, and where

    def stop(self, reason: str = "stopped") -> None:
        """End the run at the next chunk (safe from a signal handler or another thread).

        ``reason`` becomes `ended_by`.
        """
        if self.ended_by is None:
            self.ended_by = reason
        self._stop.set()

    def interrupt(self, reason: str = "interrupted") -> None:
        """End the run as `stop` does, leaving ``clusters.nc`` as ``clusters.partial.nc``
        (``complete = 0``); every output still counts the same frames. ``reason``
        becomes `interrupted` (safe from a signal handler or another thread)."""
        if self.interrupted is None:
            self.interrupted = reason
        self.stop(reason)

    @property
    def stopping(self) -> bool:
        """Whether `stop` was called (or the run is over)."""
        return self._stop.is_set()

    def _make_finder(self, stacklevel: int) -> None:
        """The finder on the trained pedestal, warning, as `Finder.find` does, when too
        few dark frames raise the false-cluster rate (`DarkFrameWarning`)."""
        self.finder = make_finder(self.spec, self._pedestal, **self._options)
        assess_dark(self._pedestal, self.spec.n_sigma).warn(stacklevel=stacklevel + 1)

    def run(self) -> dict[str, int]:
        """Consume the source, writing the outputs as it goes; returns the final counts.

        The outputs are written once more at the end, whatever ended the run (an error
        too), so nothing processed is lost; `ended_by` says what ended it. Frames over
        the cap are reported at the end as ``on_truncation`` says.
        """
        self.out.mkdir(parents=True, exist_ok=True)
        self._started = self._written = time.monotonic()
        chunks = self.source.chunks(with_acquisition=True, until=self._stop)
        try:
            for item in read_ahead(chunks, self._stop, tick=True, unread=self.source.unread):
                if self._stop.is_set():
                    break  # what is left is counted as queued by the source
                if item is not None:
                    self._take(*item)
                now = time.monotonic()
                if self.duration is not None and now - self._started >= self.duration:
                    self.stop(f"{self.duration:g} s passed")
                    break
                if now - self._written >= self.interval:
                    self._write()
            else:
                self.stop("the stream ended")
        except BaseException:
            self._finish(complete=False)
            raise
        counts = self._finish(complete=self.interrupted is None)
        message = clipped_text(*self._clipped[:2], self.frames, self._clipped[2],
                               self.spec.window_dtype)
        if message is not None:
            warnings.warn(message, WindowClippedWarning, stacklevel=2)
        if self.truncated:
            found, number = self._worst
            report_truncation(
                f"max_clusters_per_frame={self.spec.max_clusters_per_frame} truncated "
                f"{self.truncated:,} of {self.frames:,} frames ({self._cut:,} clusters "
                f"dropped); the largest count was {found} in frame {number}. Raise the cap, "
                "or see n_found/n_kept in clusters.nc.", self.on_truncation)
        return counts

    # ---------------------------------------------------------------- helpers
    def _take(self, chunk, acquisition: int) -> None:
        numbers, frames = chunk
        if self._dark_left and self._pedestal is not None \
                and frames.shape[1:] != self._pedestal.frame_shape:
            self._train_again(frames.shape[1:])
        self._check_shape(frames.shape[1:])
        if self._dark_left:
            if self._pedestal is None:
                self._pedestal = Pedestal(frames.shape[1:], self.spec.n_pedestal,
                                          self.spec.pedestal_dtype, self.spec.noise)
            k = min(self._dark_left, len(numbers))
            self._dark_checks.add(chunk._replace(numbers=numbers[:k], frames=frames[:k]))
            self._pedestal.push_dark(frames[:k])
            self._dark_left -= k
            numbers, frames = numbers[k:], frames[k:]
            if not self._dark_left:
                self._dark_checks.report(self._pedestal, stacklevel=3)
                self._make_finder(stacklevel=3)
        if len(numbers):
            # A GPU finder takes at most its chunk_frames at a time.
            step = self.finder.chunk_frames
            for first in range(0, len(numbers), step):
                self._add(self.finder.process_chunk(frames[first:first + step],
                                                    numbers[first:first + step]),
                          acquisition)
            # At once, not at the end: a beamtime can still act on it.
            self.finder.report_gain_bits(self.source.describe(), stacklevel=3)
        self.source.mark_processed(len(chunk.numbers))
        self.taken += len(chunk.numbers)

    def _train_again(self, shape: tuple[int, int]) -> None:
        """The stream's frames changed shape before the pedestal was trained: the frames
        taken so far were not the run's (stray frames of another format, a whole short
        acquisition of them), so training starts again on the frames that follow."""
        old = self._pedestal.frame_shape
        taken = self._n_dark - self._dark_left
        self.dark_discarded += taken
        self.report(f"live: {self.source.describe()} now sends {shape[0]}x{shape[1]} frames, "
                    f"not {old[0]}x{old[1]}: the {taken:,} dark frames taken so far are "
                    f"discarded, the pedestal is trained on the next {self._n_dark:,}")
        self._pedestal = None
        self._dark_left = self._n_dark
        self._dark_checks = DarkChecks(self.source, self.spec.calibration is not None,
                                       self._n_dark)

    def _check_shape(self, shape: tuple[int, int]) -> None:
        """Refuse frames of another shape than the calibration's or the pedestal's."""
        sends = f"{self.source.describe()} sends {shape[0]}x{shape[1]} frames"
        calibration = self.spec.calibration
        if calibration is not None and shape != calibration.frame_shape:
            cy, cx = calibration.frame_shape
            raise ValueError(f"{sends} but {self.calibration_name} is for {cy}x{cx} "
                             "(ny x nx): give the calibration of this module")
        if self._pedestal is not None and shape != self._pedestal.frame_shape:
            py, px = self._pedestal.frame_shape
            raise ValueError(f"{sends} but the pedestal is {py}x{px} (ny x nx)")

    def _add(self, batch: ClusterBatch, acquisition: int) -> None:
        energy = window_energies(batch.windows)
        part, low, high = count(energy, self.edges)
        self.counts += part
        self.underflow += low
        self.overflow += high
        self.frames += len(batch.frame_numbers)
        self.n_clusters += len(batch.windows)
        if batch.n_flagged is not None:
            self.n_flagged += int(batch.n_flagged.sum())
        over = batch.truncated
        if over.any():
            self.truncated += int(over.sum())
            self._cut += int((batch.n_found - batch.n_kept).sum())
            worst = int(np.argmax(batch.n_found))
            if batch.n_found[worst] > self._worst[0]:
                self._worst = (int(batch.n_found[worst]), int(batch.frame_numbers[worst]))
        clipped = None
        if counts_clipping(self.spec.window_dtype):
            clipped = clipped_taps(batch.windows, batch.n_kept)
            hit = np.flatnonzero(clipped)
            taps, frames, first = self._clipped
            first = first + batch.frame_numbers[hit[:SHOWN_FRAMES - len(first)]].tolist()
            self._clipped = (taps + int(clipped.sum()), frames + len(hit), first)
        if self._clusters is not None:
            self._clusters.add(batch, energy, clipped, acquisition)

    def spectrum(self):
        """The spectrum of every data frame processed so far (a DataArray)."""
        return counts_spectrum(self.counts, self.edges, self.spec, self.frames,
                               self.underflow, self.overflow)

    @property
    def clusters_file(self) -> Path | None:
        """Where ``clusters.nc`` was left once the run is over: the file, or its partial
        file (``clusters.partial.nc``) after an interrupt or an error; None without one."""
        return None if self._clusters is None else self._clusters.left

    def _finish(self, complete: bool) -> dict[str, int]:
        self._stop.set()
        halt = getattr(self.source, "halt", None)
        if halt is not None:
            halt()  # what came and was not processed is counted before the last write
        try:
            return self._write()
        finally:
            if self._clusters is not None:
                self._clusters.close(complete)

    def _write(self) -> dict[str, int]:
        stats = self.source.stats
        stream = stats.as_dict()
        refused = dict(getattr(stats, "refused", {}))
        counts = {**stream, "messages_refused": refused}
        if self.dark_discarded:
            counts["dark_frames_discarded"] = self.dark_discarded
        if self.spec.calibration is not None:
            counts["n_flagged"] = self.n_flagged
        if counts_clipping(self.spec.window_dtype):
            counts[CLIPPED_VARIABLE] = self._clipped[0]
        spectrum = self.spectrum()
        write_netcdf(spectrum, self.out / "spectrum.nc")
        replace_atomically(self.out / "stats.json",
                           lambda path: Path(path).write_text(json.dumps(counts, indent=1)))
        if self._clusters is not None and self.finder is not None:
            self._clusters.write(self.finder)
        now = time.monotonic()
        rate = (self.taken - self._taken_written) / max(now - self._written, 1e-9)
        self._written, self._taken_written = now, self.taken
        line = status_line(now - self._started, rate, stream, self.n_clusters, spectrum,
                           refused)
        if self.spec.calibration is not None:
            line += f"; {self.n_flagged:,} pixels flagged"
        if self.truncated:
            line += f", {self.truncated:,} frames over the cap"
        fits = fit_or_none(spectrum, self.spec.finder, self.fit_window, self.lines)
        if fits is not None:
            line += f"; {peak_fit(fits, self.spec.finder).summary(1.0, self.spec.units)}"
        self.report(line)
        return counts


class ClusterFile:
    """``clusters.nc``, laid out as ``find(..., out=...)`` writes it
    (`aare_lab.finders.base.Finder.open_result_file`) with each frame's ``acquisition``,
    grown by the batches added since the last `write`; only those batches are held in
    memory, with the energies and clipped taps the live run computed for its spectrum, so
    that no window is summed twice."""

    def __init__(self, path: Path):
        self.path = path
        self._batches: list[tuple[ClusterBatch, np.ndarray, np.ndarray | None, int]] = []
        self._sink = None
        self.left: Path | None = None

    def add(self, batch: ClusterBatch, energy: np.ndarray, clipped: np.ndarray | None,
            acquisition: int) -> None:
        """Keep ``batch``, its window energies, (int16 windows) its clipped taps per
        frame and the acquisition of its frames, for the next `write`."""
        self._batches.append((batch, energy, clipped, acquisition))

    def write(self, finder: Finder) -> None:
        """Append the kept batches (on the first call: create the file, even empty)."""
        if self._sink is None:
            self._sink = finder.open_result_file(
                self.path, frame_variables={"acquisition": np.int64})
        for batch, energy, clipped, acquisition in self._batches:
            frames = np.full(len(batch.frame_numbers), acquisition, np.int64)
            self._sink.add(batch, energy, clipped, frame_columns={"acquisition": frames})
        self._batches = []

    def close(self, complete: bool) -> None:
        """Close the file: complete, moved into place; else left as the partial file,
        ``complete = 0`` (it keeps what was written either way); `left` says where."""
        if self._sink is not None:
            self._sink.close(complete)
            writer = self._sink.writer
            self.left = writer.path if complete else writer.partial


def checked_fit_window(window) -> tuple[float, float] | None:
    """A peak fit's ``(low, high)`` as floats, or None.

    Raises
    ------
    ValueError
        Unless both are finite and ``low < high``: a bad window would only ever give no
        fit, silently.
    """
    if window is None:
        return None
    low, high = (float(v) for v in window)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"the fit window must be (low, high) with low < high, got {window!r}")
    return low, high


def status_line(elapsed: float, rate: float, counts: dict[str, int], clusters: int,
                spectrum, refused: dict[str, int] | None = None) -> str:
    """One line of rate, the source's counts (and its messages ``refused`` by kind, where
    there are any), the clusters found and how many of them the ``spectrum`` (a
    `LiveRun.spectrum`) holds, with its range in its units.

    Examples
    --------
    >>> from aare_lab.model.results import counts_spectrum
    >>> from aare_lab.model.spec import FinderSpec
    >>> spectrum = counts_spectrum([3, 4], fixed_edges(0, 20, 10), FinderSpec("frozen"),
    ...                            2, 0, 1)
    >>> status_line(1.0, 2.0, {"frames_received": 2}, 8, spectrum)
    '    1.0 s: 2 frames/s; received 2; 8 clusters, 7 in -0.5..19.5 ADU'
    >>> status_line(1.0, 2.0, {"frames_received": 2, "messages_malformed": 3}, 8, spectrum,
    ...             {"format": 3})
    '    1.0 s: 2 frames/s; received 2, malformed 3 (format 3); 8 clusters, 7 in -0.5..19.5 ADU'
    """
    low, high = float(spectrum["energy_lo"][0]), float(spectrum["energy_hi"][-1])
    text = counts_text(counts)
    if refused:
        text += f" ({', '.join(f'{kind} {n:,}' for kind, n in sorted(refused.items()))})"
    return (f"{elapsed:7.1f} s: {rate:,.0f} frames/s; {text}; "
            f"{clusters:,} clusters, "
            f"{int(spectrum.sum()):,} in {low:g}..{high:g} {spectrum['energy'].attrs['units']}")
