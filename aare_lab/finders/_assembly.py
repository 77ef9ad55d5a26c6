"""From a finder's batches to its result: in memory, or chunk by chunk into a file.

Both sinks take each `ClusterBatch` as it comes and keep no reference to it, so a batch may
hold views of a finder's reused buffers (the GPU's pinned output) until the next one is
asked for. The memory sink copies each batch into arrays that grow by doubling, sized from
the first batch's cluster density, and hands views of them to the Dataset: one copy per
value, no concatenation, no fresh allocation per chunk once the run's density is known.
It writes each cluster's frame number straight into its column, from the batch's clusters
per frame, sums the energies and, for int16 windows, counts the taps at the limits, all in
the one pass that copies the clusters (`aare_lab.finders._assembly_loops`), on Numba's
threads after a CPU finder, on the result pool's after the GPU's. The file sink writes each batch
(`aare_lab.storage.result_store`), with the energies summed on a few threads and the taps at the
limits counted by `aare_lab.model.clipping.clipped_taps`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Self

import numpy as np
import xarray as xr

from aare_lab.model.clipping import (
    CLIPPED_VARIABLE,
    clipped_taps,
    counts_clipping,
    tap_count_dtype,
    tap_limits,
    taps_per_frame,
)
from aare_lab.model.results import window_energies
from aare_lab.runtime import result_memory
from aare_lab.runtime.parallel import parallel_copy, parallel_ranges
from aare_lab.runtime.repeat import repeat
from aare_lab.storage.result_store import DEFAULT_COMPRESSION, ResultWriter

from ._assembly_loops import copy_cluster_range, copy_clusters, piece_count

#: Fields of a `ClusterBatch` with a row per kept cluster, and per branch map; every other
#: field (not None) has a row per frame.
CLUSTER_FIELDS = ("cluster_frame", "cluster_y", "cluster_x", "windows")
MAP_FIELDS = ("branch_maps", "branch_frames")
#: The result variable each batch field fills, where the names differ (`make_result`).
VARIABLES = {"frame_numbers": "frame", "cluster_frame": "frame_number", "cluster_y": "y",
             "cluster_x": "x", "windows": "window", "branch_maps": "branch_map",
             "branch_frames": "branch_frame"}
#: Room kept beyond the clusters the first batch's density predicts for the run.
DENSITY_MARGIN = 1.1
#: `copy_clusters`' ``at_limits`` when nothing is counted.
_NO_COUNT = np.zeros(0, np.uint8)


class GrowingRows:
    """Rows appended in place to one array whose capacity grows by doubling.

    Parameters
    ----------
    like
        An array of the rows' dtype and shape ``(any, *row_shape)``.

    Examples
    --------
    >>> rows = GrowingRows(np.zeros((0, 2), np.int32))
    >>> rows.take(3)[...] = 7
    >>> rows.data.shape, rows.capacity
    ((3, 2), 3)
    """

    def __init__(self, like: np.ndarray):
        self._data = np.empty((0, *like.shape[1:]), like.dtype)
        self.size = 0

    @property
    def capacity(self) -> int:
        """Rows the array holds before it must grow."""
        return len(self._data)

    @property
    def data(self) -> np.ndarray:
        """The rows appended so far (a view)."""
        return self._data[:self.size]

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` more rows, at least doubling the capacity if it grows.

        Untouched capacity costs address space only: the pages are mapped when written, unless
        the memory is reused (`aare_lab.runtime.result_memory`), whose pages are mapped already.
        """
        need = self.size + rows
        if need > len(self._data):
            grown = result_memory.empty((max(need, 2 * len(self._data)),
                                         *self._data.shape[1:]), self._data.dtype)
            parallel_copy(self.data, grown[:self.size])
            self._data = grown

    def take(self, rows: int) -> np.ndarray:
        """The next ``rows`` rows, appended, for the caller to fill."""
        self.reserve(rows)
        view = self._data[self.size:self.size + rows]
        self.size += rows
        return view

    def take_over(self, rows: int) -> np.ndarray:
        """The first ``rows`` rows, for the caller to fill anew: one batch's scratch, whose
        memory the next batch reuses."""
        self.size = 0
        return self.take(rows)


def _flat(windows: np.ndarray) -> np.ndarray:
    """Windows ``(n, wy, wx)`` as ``(n, wy * wx)`` (a view of contiguous ones)."""
    return windows.reshape(len(windows), int(np.prod(windows.shape[1:])))


def copy_arguments(batch, targets: dict[str, np.ndarray], energies: np.ndarray,
                   at_limits: np.ndarray) -> tuple:
    """What `copy_cluster_range` and `copy_clusters` take before the range or pieces: the
    batch's clusters, the result's rows ``targets`` (by `CLUSTER_FIELDS`) and ``energies``
    to fill, and ``at_limits`` (empty: taps at the limits not counted)."""
    windows = batch.windows
    integer = windows.dtype.kind == "i"
    low, high = tap_limits(windows.dtype) if integer else (0, 0)
    return (batch.frame_numbers, batch.kept_ends(), batch.cluster_y, batch.cluster_x,
            _flat(windows), targets["cluster_frame"], targets["cluster_y"],
            targets["cluster_x"], _flat(targets["windows"]), energies, integer, low, high,
            at_limits)


def _fields(batch, want: bool | set[int]) -> dict[str, np.ndarray]:
    """The fields of a batch that fill result variables (branch maps only if asked); the
    clusters' frame numbers are not among them (`ClusterBatch.cluster_frame`)."""
    return {name: value for name, value in batch._asdict().items()
            if value is not None and (want or name not in MAP_FIELDS)}


def _layout(empty, want: bool | set[int]) -> dict[str, np.ndarray]:
    """Every result field's dtype and row shape, from a finder's empty batch."""
    return {**_fields(empty, want), "cluster_frame": np.zeros(0, np.int64)}


class MemorySink:
    """A run's batches copied into growing arrays, then the result Dataset.

    Parameters
    ----------
    empty
        A batch of no frames with every field's dtype and row shape (None: not produced).
    make
        `aare_lab.model.results.make_result` with the run's parameters bound: takes the fields
        by name and ``energy``.
    want
        The branch maps asked for: True (all), False, or frame numbers.
    n_frames, n_clusters
        The frames and clusters expected, when known (None: grown as they come).
    on_numba_threads
        Copy each batch in a parallel region on Numba's threads (after a CPU finder, whose
        threads those are) rather than on the result pool (`aare_lab.runtime.parallel`).
    """

    def __init__(self, empty, make: Callable[..., xr.Dataset], want: bool | set[int],
                 n_frames: int | None = None, n_clusters: int | None = None,
                 on_numba_threads: bool = False):
        self._make = make
        self._on_numba_threads = on_numba_threads
        self._fields = {name: GrowingRows(value) for name, value in _layout(empty, want).items()}
        self._energy = GrowingRows(np.zeros(0))
        # Per frame, int16 windows' taps at the limits: counted per window in the pass that
        # copies them (into a buffer reused from batch to batch), summed per frame.
        self._clipped = self._at_limits = None
        if counts_clipping(empty.windows.dtype.name):
            self._clipped = GrowingRows(np.zeros(0, np.int64))
            taps = int(np.prod(empty.windows.shape[1:]))
            self._at_limits = GrowingRows(np.zeros(0, tap_count_dtype(taps)))
        self._n_frames = n_frames
        n_maps = len(want) if isinstance(want, set) else n_frames if want else 0
        for name, rows in self._fields.items():
            rows.reserve((n_clusters if name in CLUSTER_FIELDS else
                          n_maps if name in MAP_FIELDS else n_frames) or 0)
        self._energy.reserve(n_clusters or 0)

    def add(self, batch) -> np.ndarray:
        """Copy one batch in; returns its clusters' energies (a view of the result's)."""
        fields = self._fields
        k = len(batch.cluster_y)
        energy = self._energy
        if energy.capacity == 0 and k and self._n_frames:
            # Sized once from the density of the first clusters: the doubling afterwards
            # only serves runs whose density rises.
            expected = int(k / len(batch.frame_numbers) * self._n_frames * DENSITY_MARGIN)
            for name in (*CLUSTER_FIELDS, None):
                (energy if name is None else fields[name]).reserve(max(expected, k))
        targets = {name: fields[name].take(k) for name in CLUSTER_FIELDS}
        row = sum(target[:1].nbytes for target in targets.values())
        at_limits = _NO_COUNT if self._at_limits is None else self._at_limits.take_over(k)
        energies = energy.take(k)
        columns = copy_arguments(batch, targets, energies, at_limits)
        if self._on_numba_threads:
            copy_clusters(*columns, piece_count(k * row))
        else:
            parallel_ranges(lambda a, b: copy_cluster_range(*columns, a, b), k, k * row)
        for name, rows in fields.items():
            if name not in CLUSTER_FIELDS:
                src = getattr(batch, name)
                parallel_copy(src, rows.take(len(src)))
        if self._at_limits is not None:
            self._clipped.take(len(batch.n_kept))[...] = taps_per_frame(at_limits, batch.n_kept)
        return energies

    def result(self) -> xr.Dataset:
        """The result Dataset; its arrays are views of the grown buffers."""
        clipped = {} if self._clipped is None else {CLIPPED_VARIABLE: self._clipped.data}
        return self._make(energy=self._energy.data, **clipped,
                          **{name: rows.data for name, rows in self._fields.items()})

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        """Nothing to release: a run stopped early leaves no result."""


class FileSink:
    """A run's batches written chunk by chunk (`aare_lab.storage.result_store.ResultWriter`).

    Parameters
    ----------
    out
        The result file, or a `aare_lab.storage.destination.Destination` claimed for it.
    empty, make, want
        As for `MemorySink`: the result of the empty batch is the file's layout.
    overwrite, compression, frames_expected
        As for `ResultWriter`.
    frame_variables
        More variables with a value per frame, by name: their dtypes (a live run's
        ``acquisition``); `add` takes their values as ``frame_columns``.
    """

    def __init__(self, out, empty, make: Callable[..., xr.Dataset], want: bool | set[int], *,
                 overwrite: bool = False, compression: str = DEFAULT_COMPRESSION,
                 frames_expected: int | None = None,
                 frame_variables: Mapping[str, np.dtype] | None = None):
        self._want = want
        template = make(**_layout(empty, want))
        self._frame_variables = dict(frame_variables or {})
        for name, dtype in self._frame_variables.items():
            template[name] = ("frame", np.zeros(0, dtype))
        self._writer = ResultWriter(out, template, overwrite=overwrite,
                                    compression=compression, frames_expected=frames_expected)
        # Energies and frame numbers of one batch, reused: the file holds them, memory need not.
        self._energy = GrowingRows(np.zeros(0))
        self._frames = GrowingRows(np.zeros(0, np.int64))

    @property
    def writer(self) -> ResultWriter:
        """The file's writer (its path, partial path and frames written)."""
        return self._writer

    def add(self, batch, energy: np.ndarray | None = None, clipped: np.ndarray | None = None,
            frame_columns: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Write one batch; returns its clusters' energies (valid until the next batch).

        Parameters
        ----------
        energy, clipped
            The batch's `aare_lab.model.results.window_energies` and, for int16 windows,
            `aare_lab.model.clipping.clipped_taps`, where the caller has them already (a live
            run's spectrum): each window is summed once. None: computed here.
        frame_columns
            The values of the ``frame_variables`` for the batch's frames.
        """
        windows = batch.windows
        k = len(windows)
        if energy is None:
            energy = self._energy.take_over(k)
            parallel_ranges(lambda a, b: window_energies(windows[a:b], out=energy[a:b]), k,
                            windows.nbytes)
        columns = {VARIABLES.get(name, name): value
                   for name, value in _fields(batch, self._want).items()}
        columns["energy"] = energy
        columns["frame_number"] = repeat(batch.frame_numbers, batch.kept_ends(),
                                         self._frames.take_over(k))
        if counts_clipping(windows.dtype.name):
            columns[CLIPPED_VARIABLE] = (clipped_taps(windows, batch.n_kept) if clipped is None
                                         else clipped)
        given = dict(frame_columns or {})
        if set(given) != set(self._frame_variables):
            raise ValueError(f"frame_columns must give {sorted(self._frame_variables)}, "
                             f"got {sorted(given)}")
        columns.update(given)
        self._writer.append(columns)
        return energy

    def checkpoint(self) -> None:
        """Put every batch added so far into the file on disk (`ResultWriter.checkpoint`)."""
        self._writer.checkpoint()

    def close(self, complete: bool) -> None:
        """Close the file, marked complete or not (`ResultWriter.close`)."""
        self._writer.close(complete)

    def __enter__(self) -> Self:
        self._writer.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._writer.__exit__(*exc)


class RunTally:
    """What the end of a run reports on, kept per batch in memory that does not grow with
    the run: frames seen, the truncated frames, and which asked-for branch maps came."""

    def __init__(self, wanted: bool | set[int]):
        self.n_frames = 0
        self._wanted = wanted if isinstance(wanted, set) else set()
        self.mapped: set[int] = set()
        self._over: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, batch) -> None:
        """Count one batch."""
        self.n_frames += len(batch.frame_numbers)
        over = batch.truncated
        if over.any():
            self._over.append((batch.frame_numbers[over], batch.n_found[over],
                               batch.n_kept[over]))
        if self._wanted:
            self.mapped.update(self._wanted.intersection(batch.branch_frames.tolist()))

    @property
    def missing_maps(self) -> list[int]:
        """Frame numbers whose branch maps were asked for but that the run did not have."""
        return sorted(self._wanted - self.mapped)

    @property
    def truncated(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(frame_numbers, n_found, n_kept)`` of the truncated frames."""
        if not self._over:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        return tuple(np.concatenate(parts) for parts in zip(*self._over))
