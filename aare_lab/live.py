"""Headless live mode: a detector stream through a finder into files that grow with the run.

`LiveRun` takes the chunks of a live source (`aare_lab.sources.sls_stream.StreamSource`, or
anything with its ``stats``, ``mark_processed`` and ``chunks``), trains the pedestal on the
first frames or starts from a trained one, finds clusters and keeps, in an output folder:

- ``spectrum.nc``: the cluster-energy spectrum, a DataArray on fixed bins (an open-ended run
  cannot choose its bins from data it has not seen; clusters outside are counted in the
  ``underflow`` and ``overflow`` attributes), as `aare_lab.results.spectrum` makes it;
- ``stats.json``: the source's counts, exactly the keys of ``stats.as_dict()``;
- with ``clusters=True``, ``clusters.nc``: the usual result Dataset (`Finder.assemble`),
  appended at every write (`aare_lab.result_store.ResultWriter`: ``cluster`` and ``frame``
  grow), so memory holds one interval's clusters however long the run; marked complete
  when the run ends, also on a signal (``complete = 0`` only after an error).

They are written every ``interval`` seconds, when the stream ends and when the run is
stopped (`LiveRun.stop`, which the CLI calls on SIGINT and SIGTERM), and always reflect
the same frames: everything processed so far. ``spectrum.nc`` and ``stats.json`` are
replaced atomically (a temporary file, then `os.replace`), so a reader never sees half a
file; ``clusters.nc`` is extended in place.
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

from .atomic import replace_atomically
from .binning import count, integer_edges
from .capacity import ON_TRUNCATION, report_truncation
from .finders.base import ClusterBatch, Finder
from .pedestal import Pedestal
from .readahead import read_ahead
from .result_store import GROWING, ResultWriter
from .results import counts_spectrum, window_energies, write_netcdf
from .spec import FinderSpec


def fixed_edges(low: int = 0, high: int = 2000, width: int = 10) -> np.ndarray:
    """Integer-aligned bins of ``width`` ADU, edges from ``low - 0.5`` to ``high - 0.5``.

    Raises
    ------
    ValueError
        Unless ``high - low`` is a positive multiple of ``width``.

    Examples
    --------
    >>> edges = fixed_edges(0, 30, 10)
    >>> edges.tolist()
    [-0.5, 9.5, 19.5, 29.5]
    """
    if not (high > low and (high - low) % width == 0):
        raise ValueError(f"the energy range {low}..{high} ADU must be a positive multiple "
                         f"of the bin width {width} ADU")
    return integer_edges(low, high - 1, width)


#: The default bins of a live spectrum: 10 ADU wide, edges at -0.5 ... 1999.5 ADU.
DEFAULT_EDGES = fixed_edges()


class LiveRun:
    """Consume a live source until it ends, ``duration`` passes or `stop` is called.

    Parameters
    ----------
    source
        A live source: ``chunks()``, ``stats.as_dict()``, ``mark_processed(n)``,
        ``describe()``.
    spec
        The finder and its parameters (``n_pedestal`` set when training on the stream).
    out
        The output folder (created).
    pedestal
        A trained pedestal to start from (copied), instead of ``n_dark``.
    n_dark
        Train on the first ``n_dark`` frames of the stream (at least ``spec.n_pedestal``;
        the frames beyond N update the trained pedestal, as `aare_lab.train_pedestal`
        does). They count as processed and are not in the spectrum.
    edges
        Fixed bin edges of the spectrum (ADU); default `DEFAULT_EDGES`.
    clusters
        Also write ``clusters.nc``.
    interval
        Seconds between writes of the outputs (and status reports).
    duration
        Stop after this many seconds (None: run until the stream ends or `stop`).
    report
        Called with a status line at every write.
    on_truncation
        What frames over the cap do at the end of the run: ``"warn"`` (a
        `TruncationWarning`) or ``"error"`` (`aare_lab.TruncationError`); the run goes on
        either way and its outputs are written first.
    **finder_options
        Passed to the finder (``threads``...).

    Raises
    ------
    ValueError
        For both or neither of ``pedestal`` and ``n_dark``, or ``n_dark`` below N.
    """

    def __init__(self, source, spec: FinderSpec, out: str | os.PathLike, *,
                 pedestal: Pedestal | None = None, n_dark: int | None = None,
                 edges: np.ndarray | None = None, clusters: bool = False,
                 interval: float = 2.0, duration: float | None = None,
                 report: Callable[[str], None] = print, on_truncation: str = "warn",
                 **finder_options):
        if (pedestal is None) == (n_dark is None):
            raise ValueError("give a trained pedestal or n_dark frames to train on, not both")
        if n_dark is not None and n_dark < spec.n_pedestal:
            raise ValueError(f"{n_dark} dark frames cannot train a pedestal of "
                             f"n_pedestal={spec.n_pedestal}: take at least as many")
        self.source, self.spec, self.out = source, spec, Path(out)
        self.edges = np.asarray(DEFAULT_EDGES if edges is None else edges, float)
        if on_truncation not in ON_TRUNCATION:
            raise ValueError(f"on_truncation must be 'warn' or 'error', got {on_truncation!r}")
        self.interval, self.duration, self.report = interval, duration, report
        self.on_truncation = on_truncation
        self.ended_by: str | None = None
        self._options = {**finder_options, "on_truncation": "warn"}
        self._pedestal = None if pedestal is None else pedestal.copy()
        self._dark_left = n_dark or 0
        self.finder: Finder | None = None
        if self._pedestal is not None:
            self.finder = spec.make_finder(self._pedestal, **self._options)
        self._stop = threading.Event()
        self._clusters = ClusterFile(self.out / "clusters.nc") if clusters else None
        self.counts = np.zeros(len(self.edges) - 1, np.int64)
        self.underflow = self.overflow = self.frames = self.n_clusters = self.taken = 0
        self._started = self._written = time.monotonic()
        self._taken_written = 0
        self.truncated = self._cut = 0
        self._worst = (0, None)  # the most clusters found in a frame over the cap, and where

    def stop(self, reason: str = "stopped") -> None:
        """End the run at the next chunk (safe from a signal handler or another thread).

        ``reason`` becomes `ended_by`.
        """
        if self.ended_by is None:
            self.ended_by = reason
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether `stop` was called (or the run is over)."""
        return self._stop.is_set()

    def run(self) -> dict[str, int]:
        """Consume the source, writing the outputs as it goes; returns the final counts.

        The outputs are written once more at the end, whatever ended the run (an error
        too), so nothing processed is lost; `ended_by` says what ended it. Frames over
        the cap are reported at the end as ``on_truncation`` says.
        """
        self.out.mkdir(parents=True, exist_ok=True)
        self._started = self._written = time.monotonic()
        try:
            for chunk in read_ahead(self.source.chunks(), self._stop, tick=True):
                if self._stop.is_set():
                    break
                if chunk is not None:
                    self._take(chunk)
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
        counts = self._finish(complete=True)
        if self.truncated:
            found, number = self._worst
            report_truncation(
                f"max_clusters_per_frame={self.spec.max_clusters_per_frame} truncated "
                f"{self.truncated:,} of {self.frames:,} frames ({self._cut:,} clusters "
                f"dropped); the largest count was {found} in frame {number}. Raise the cap, "
                "or see n_found/n_kept in clusters.nc.", self.on_truncation)
        return counts

    # ---------------------------------------------------------------- helpers
    def _take(self, chunk) -> None:
        numbers, frames = chunk
        if self._dark_left:
            if self._pedestal is None:
                self._pedestal = Pedestal(frames.shape[1:], self.spec.n_pedestal,
                                          self.spec.pedestal_dtype, self.spec.noise)
            k = min(self._dark_left, len(numbers))
            self._pedestal.push_dark(frames[:k])
            self._dark_left -= k
            numbers, frames = numbers[k:], frames[k:]
            if not self._dark_left:
                self.finder = self.spec.make_finder(self._pedestal, **self._options)
        elif frames.shape[1:] != self._pedestal.frame_shape:
            raise ValueError(
                f"{self.source.describe()} sends {frames.shape[1]}x{frames.shape[2]} frames "
                f"but the pedestal is {self._pedestal.frame_shape[0]}x"
                f"{self._pedestal.frame_shape[1]} (ny x nx)")
        if len(numbers):
            # A GPU finder takes at most its chunk_frames at a time.
            step = self.finder.chunk_frames
            for first in range(0, len(numbers), step):
                self._add(self.finder.process_chunk(frames[first:first + step],
                                                    numbers[first:first + step]))
        self.source.mark_processed(len(chunk.numbers))
        self.taken += len(chunk.numbers)

    def _add(self, batch: ClusterBatch) -> None:
        part, low, high = count(window_energies(batch.windows), self.edges)
        self.counts += part
        self.underflow += low
        self.overflow += high
        self.frames += len(batch.frame_numbers)
        self.n_clusters += len(batch.windows)
        over = batch.n_found > batch.n_kept
        if over.any():
            self.truncated += int(over.sum())
            self._cut += int((batch.n_found - batch.n_kept).sum())
            worst = int(np.argmax(batch.n_found))
            if batch.n_found[worst] > self._worst[0]:
                self._worst = (int(batch.n_found[worst]), int(batch.frame_numbers[worst]))
        if self._clusters is not None:
            self._clusters.add(batch)

    def spectrum(self):
        """The spectrum of every data frame processed so far (a DataArray)."""
        return counts_spectrum(self.counts, self.edges, self.spec, self.frames,
                               self.underflow, self.overflow)

    def _finish(self, complete: bool) -> dict[str, int]:
        self._stop.set()
        try:
            return self._write()
        finally:
            if self._clusters is not None:
                self._clusters.close(complete)

    def _write(self) -> dict[str, int]:
        counts = self.source.stats.as_dict()
        write_netcdf(self.spectrum(), self.out / "spectrum.nc")
        replace_atomically(self.out / "stats.json",
                           lambda path: Path(path).write_text(json.dumps(counts, indent=1)))
        if self._clusters is not None and self.finder is not None:
            self._clusters.write(self.finder)
        now = time.monotonic()
        rate = (self.taken - self._taken_written) / max(now - self._written, 1e-9)
        self._written, self._taken_written = now, self.taken
        line = status_line(now - self._started, rate, counts, self.n_clusters)
        self.report(line + (f", {self.truncated:,} frames over the cap" if self.truncated
                            else ""))
        return counts


class ClusterFile:
    """``clusters.nc`` (`aare_lab.result_store.ResultWriter`), grown by the result of the
    batches added since the last `write`; only those batches are held in memory."""

    def __init__(self, path: Path):
        self.path = path
        self._batches: list[ClusterBatch] = []
        self._writer: ResultWriter | None = None

    def add(self, batch: ClusterBatch) -> None:
        """Keep ``batch`` for the next `write`."""
        self._batches.append(batch)

    def write(self, finder: Finder) -> None:
        """Append the kept batches (on the first call: create the file, even empty)."""
        with warnings.catch_warnings():
            # Truncation is reported once, at the end of the run; the dark's quality is
            # in the file's attributes.
            warnings.simplefilter("ignore")
            part = finder.assemble(self._batches)
        if self._writer is None:
            self._writer = ResultWriter(self.path, part.isel(cluster=slice(0), frame=slice(0)))
        self._writer.append({name: variable.to_numpy()
                             for name, variable in part.variables.items()
                             if variable.dims and variable.dims[0] in GROWING})
        self._batches = []

    def close(self, complete: bool) -> None:
        """Close the file, marked complete or not (it keeps what was written either way)."""
        if self._writer is not None:
            self._writer.close(complete)


def status_line(elapsed: float, rate: float, counts: dict[str, int], clusters: int) -> str:
    """One line of rate, the source's counts and the clusters found."""
    names = ", ".join(f"{key.split('_', 1)[1]} {value:,}" for key, value in counts.items())
    return f"{elapsed:7.1f} s: {rate:,.0f} frames/s; {names}; {clusters:,} clusters"
