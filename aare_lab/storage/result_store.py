"""Results written to disk chunk by chunk while a run goes: memory stays flat, and a file is
either whole or visibly partial, never destroyed.

A run of a million dense frames does not fit in memory (about 130 kB of 3x3 clusters per
MÖNCH frame), so ``Finder.find(..., out="run.nc")`` hands every chunk's clusters to a
`ResultWriter` and drops them. The file is netCDF4 (HDF5, laid out through h5netcdf) with
the variables, dimensions and attributes of the result Dataset (`aare_lab.model.results`);
``cluster``, ``frame`` and ``branch_frame`` are unlimited dimensions that grow with every
chunk, so ``xarray.open_dataset(path)`` opens it lazily, with any netCDF4 reader.

What makes it safe (`aare_lab.storage.destination`): the writer claims the destination (one writer
at a time), writes ``<stem>.partial.nc`` beside it, and renames it over the destination
only when the run ended and the file is flushed and on the disk. A reader holding the old
file keeps a valid file. A run that stops early (an error, a full disk, Ctrl-C, SIGTERM)
leaves ``<stem>.partial.nc`` with every frame appended before (none cut in half), readable,
marked ``complete = 0``; a full disk or a failed write raises `ResultWriteError`, which
says how many frames were saved and how much space the run needs.

What makes it fast and small: each growing variable is stored in chunks of about
`CHUNK_BYTES` with HDF5's built-in filters, encoded on a pool of threads and written as they
fill, while the finder goes on. By default (``"scaleoffset"``) integer windows are packed
by HDF5's scale-offset filter (`aare_lab.storage.scale_offset`: about 3x fewer bytes than
raw for a MÖNCH frame's windows, at several times deflate's speed), and the other columns
shuffled and deflated (`aare_lab.storage.chunk_codec`: frame numbers and energies 10-200x
fewer bytes); ``"deflate"`` deflates the windows too, for readers that do not use the HDF5
library (benchmarks/result_write.py). Two attributes say how far the run got: ``complete`` (0 while
the run goes and after it stopped early, 1 once it ended) and ``frames_written``;
`open_result` drops them, so what it gives equals what ``find`` returns in memory.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path
from typing import Self

import h5netcdf
import h5py
import numpy as np
import xarray as xr

from aare_lab.runtime.parallel import pool_threads
from aare_lab.storage import chunk_codec, scale_offset
from aare_lab.storage.atomic import fsync_path, move_into_place
from aare_lab.storage.destination import Destination, claim, free_bytes, human_bytes, partial_path
from aare_lab.storage.netcdf import NETCDF_ENGINE

#: The dimensions that grow as chunks are written.
GROWING = ("cluster", "frame", "branch_frame")
#: How far the run got; not part of the result.
STATE_ATTRS = ("complete", "frames_written")
#: About this many bytes per HDF5 chunk of a growing variable (before encoding).
CHUNK_BYTES = 1 << 20
#: The encodings a result file may have: ``"scaleoffset"``, integer windows packed by
#: HDF5's scale-offset filter and the other columns shuffled and deflated (decoded by every
#: reader built on the HDF5 library); ``"deflate"``, every variable shuffled or not and
#: deflated (decoded by any netCDF4 reader, netCDF-Java included); ``"none"``, the raw values
#: in whole chunks (a result of a few clusters then takes a megabyte per variable).
COMPRESSIONS = ("scaleoffset", "deflate", "none")
#: The encoding chosen by measurement (docs/results.md).
DEFAULT_COMPRESSION = "scaleoffset"
#: The variables that ``"scaleoffset"`` packs (when integer): a cluster's taps spread over a
#: few thousand ADU, which deflate shrinks no better at a fraction of the speed; the other
#: columns repeat and deflate 3-900x.
PACKED_VARIABLES = ("window",)
#: Seconds between two checkpoints of a long run: the file on disk then holds every frame
#: appended, so that even a killed process leaves a readable partial file.
CHECKPOINT_SECONDS = 10.0


def _deflated(chunk: np.ndarray, padded: bool, shuffled: bool) -> tuple[bytes, int]:
    """A chunk of a deflated variable, and its filter mask (every filter applied)."""
    return chunk_codec.encode(chunk, shuffled), 0


def interrupted(error: BaseException | None) -> bool:
    """Whether ``error`` is Ctrl-C or SIGTERM (`KeyboardInterrupt`), also where a compiled
    function turned it into another error (Numba raises a SystemError with it as context)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


@contextlib.contextmanager
def _quiet_netcdf_features():
    """Silence h5netcdf's warning, at each flush, that a .nc file holds features
    netCDF-C cannot create (the scale-offset filter): the docs say what reads it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "You are writing invalid netcdf features",
                                UserWarning)
        yield


class IncompleteResultWarning(UserWarning):
    """A result file holds an interrupted run: the frames completed before it stopped."""


class ResultWriteError(OSError):
    """Writing a result file failed (a full disk, an I/O error).

    Its message is one line: the file, the cause, and, once the writer has closed the
    partial file, how many frames it holds and how much more space the run needs.

    Attributes
    ----------
    frames_saved
        Frames kept in the partial file (None until the writer closed it).
    partial
        The partial file.
    bytes_needed
        About how many more bytes the whole run needs (None if unknown).
    """

    def __init__(self, code: int | None, reason: str, path: Path, partial: Path,
                 bytes_needed: int | None = None):
        super().__init__(code, reason)
        self.path, self.partial, self.reason = path, partial, reason
        self.frames_saved: int | None = None
        self.bytes_needed = bytes_needed

    def __str__(self) -> str:
        text = f"could not write {self.path}: {self.reason}"
        if self.frames_saved is not None:
            text += (f"; {self.frames_saved} frames saved in {self.partial} (complete=0)"
                     if self.frames_saved else "; no frame was saved")
        if self.bytes_needed:
            text += f"; the run needs about {human_bytes(self.bytes_needed)} more free space"
        return text


def silence_hdf5_errors() -> None:
    """Stop HDF5 printing its error stack from this thread (the writer's): a failed write
    is reported once, as `ResultWriteError`.

    h5py does this for the thread that imports it; under a thread-safe HDF5 each thread
    has its own setting. ``h5py._errors.silence_errors`` enters HDF5 without h5py's lock,
    and HDF5 as h5py's wheels build it is not thread-safe: beside another thread's call
    (the run's next resize) it corrupts that call's state, and a chunk write fails with
    "Can't write unprocessed chunk data (addr undefined)" (tests/test_result_safety.py).
    """
    with h5py._objects.phil:
        h5py._errors.silence_errors()


class _Column:
    """One growing variable: its dataset, and the chunk being filled in memory."""

    def __init__(self, name: str, dim: str, dataset: h5py.Dataset, chunk_rows: int,
                 encoder: Callable[[np.ndarray, bool], tuple[bytes | np.ndarray, int]] | None):
        self.name, self.dim, self.dataset = name, dim, dataset
        #: Encodes a chunk (``padded`` or not) into its bytes and filter mask.
        self.chunk_rows, self.encoder = chunk_rows, encoder
        self.row_shape, self.dtype = dataset.shape[1:], dataset.dtype
        #: Chunk buffers whose contents reached the file (encoded, or written raw): reused,
        #: since fresh memory costs a page fault per page at first touch.
        self.free: collections.deque[np.ndarray] = collections.deque()
        self.staged = self._new_chunk()
        self.n_staged = 0
        #: The index of the chunk being filled; those before it are whole and handed off.
        self.chunk = 0
        #: Whole chunks in the file, and rows of the filled chunk that are (its tail).
        self.written: set[int] = set()
        self.tail_written = 0
        #: The first chunk whose write failed: HDF5 may not read back what a later write
        #: of it wrote, so it is never written again and the file keeps the rows before it.
        self.broken: int | None = None

    def _new_chunk(self) -> np.ndarray:
        try:
            return self.free.pop()
        except IndexError:
            return np.empty((self.chunk_rows, *self.row_shape), self.dtype)

    def tail(self) -> np.ndarray:
        """A copy of the chunk being filled, zeros past its rows (a short encoding)."""
        tail = np.zeros_like(self.staged)
        tail[:self.n_staged] = self.staged[:self.n_staged]
        return tail

    def offset(self, chunk: int) -> tuple[int, ...]:
        return (chunk * self.chunk_rows,) + (0,) * len(self.row_shape)

    def skip(self) -> int:
        """The index of a whole chunk that comes from elsewhere (the caller's array), with
        nothing staged before it."""
        self.chunk += 1
        return self.chunk - 1

    def take_full(self) -> tuple[int, np.ndarray]:
        """The filled chunk, handed off; a new one is started."""
        full = self.chunk, self.staged
        self.staged, self.n_staged, self.chunk = self._new_chunk(), 0, self.chunk + 1
        self.tail_written = 0
        return full

    def rows_on_disk(self) -> int:
        """Rows written without a gap from the first."""
        k = 0
        while k in self.written and k != self.broken:
            k += 1
        rows = k * self.chunk_rows
        return rows + self.tail_written if k == self.chunk != self.broken else rows


class ResultWriter:
    """Append a run's variables to a result file, chunk by chunk.

    Use it as a context manager: leaving the block normally makes the file complete and
    renames it into place; an exception (KeyboardInterrupt included) leaves
    ``<stem>.partial.nc`` holding every chunk appended before, marked ``complete = 0``, and
    warns (`IncompleteResultWarning`).

    Parameters
    ----------
    out
        The result file, or a `aare_lab.storage.destination.Destination` claimed for it already.
    template
        A result Dataset of no frames (`aare_lab.model.results.make_result` of empty arrays): the
        file gets its variables, dimensions and attributes, and the values of those that
        do not grow (window offsets, label maps).
    overwrite
        Whether an existing result at ``out`` may be replaced (with a path; a
        `Destination` was asked when it was claimed).
    compression
        ``"scaleoffset"`` (default), ``"deflate"`` or ``"none"`` (`COMPRESSIONS`).
    frames_expected
        The frames the run will append, when known: once the first chunks are encoded,
        a run that would not fit on the disk stops before it fills it.

    Raises
    ------
    aare_lab.storage.destination.DestinationExists, aare_lab.storage.destination.DestinationBusy
        When ``out`` exists (without ``overwrite``) or another process writes it.
    ResultWriteError
        When the file cannot be made (no space, a folder that cannot be written).
    """

    def __init__(self, out: str | os.PathLike | Destination, template: xr.Dataset, *,
                 overwrite: bool = False, compression: str = DEFAULT_COMPRESSION,
                 frames_expected: int | None = None):
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
        self._destination, self._owns_destination = claim(out, overwrite)
        self.path, self.partial = self._destination.path, self._destination.partial
        self._compression = compression
        self._compressed = compression != "none"
        self._frames_expected = frames_expected
        self._sizes = {dim: 0 for dim in GROWING if dim in template.sizes}
        self._extent = dict(self._sizes)
        self._bounds: list[dict[str, int]] = [dict(self._sizes)]
        self._pending: collections.deque[Future] = collections.deque()
        self._failure: BaseException | None = None
        #: Why the run was stopped before a write failed (a disk too small for it).
        self._refusal: str | None = None
        self._raw_done = self._encoded_done = self._raw_appended = 0
        self._space_checked = False
        self._frames_on_disk = 0
        self._last_checkpoint = time.monotonic()
        self._closed = False
        self._h5 = self._file = self._encoders = self._writer = None
        threads = pool_threads("result_file")
        self._max_pending = 4 * threads
        #: Seconds spent, by what: for benchmarks/result_write.py's account of the bound.
        self.seconds = collections.Counter()
        self._clock = threading.Lock()
        try:
            self._destination.hold_back_space()
            # An earlier run's partial file: a reader holding it keeps its copy.
            self.partial.unlink(missing_ok=True)
            self._h5 = h5py.File(self.partial, "w-", track_order=True)
            # h5netcdf refuses HDF5 filters that netCDF-C cannot create (netCDF-C reads
            # them: tests/test_result_store.py) unless told, and then leaves out the
            # _NCProperties attribute of files netCDF-C made.
            self._file = h5netcdf.File(self._h5, "w",
                                       invalid_netcdf=compression == "scaleoffset")
            self._columns = self._create(template)
            with _quiet_netcdf_features():
                self._file.flush()
            self._h5.flush()
        except BaseException as err:
            self._close_files()
            self.partial.unlink(missing_ok=True)
            self._release()
            if isinstance(err, OSError) and not isinstance(err, (ResultWriteError,
                                                                  FileExistsError)):
                self._failure = err
                raise self._error() from None
            raise
        # Chunks are encoded on many threads and written by one, in order: HDF5 takes one
        # call at a time anyway (h5py's lock), and one writer never waits for another.
        self._encoders = ThreadPoolExecutor(threads, thread_name_prefix="aare_lab-encode")
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="aare_lab-result-file",
                                          initializer=silence_hdf5_errors)

    # ------------------------------------------------------------------ layout
    def _create(self, template: xr.Dataset) -> dict[str, _Column]:
        f = self._file
        f.dimensions = {dim: None if dim in GROWING else size
                        for dim, size in template.sizes.items()}
        columns = {}
        for name, var in template.variables.items():
            growing = bool(var.dims) and var.dims[0] in GROWING
            if not growing:
                out = f.create_variable(name, var.dims, var.dtype)
                out.attrs.update(var.attrs)
                out[...] = var.values
                continue
            row = var.dtype.itemsize * int(np.prod(var.shape[1:], dtype=np.int64))
            rows = max(1, CHUNK_BYTES // max(row, 1))
            packed = (self._compression == "scaleoffset" and name in PACKED_VARIABLES
                      and var.dtype.kind == "i")
            # Windows gain nothing from the shuffle (their bytes vary alike); the other
            # columns (coordinates, counts, energies) shrink several times more with it.
            shuffled = var.ndim == 1
            if not self._compressed:
                filters = {}
            elif packed:
                filters = chunk_codec.PACKED_FILTERS
            else:
                filters = dict(compression="gzip", shuffle=shuffled,
                               compression_opts=chunk_codec.HDF5_DEFLATE_LEVEL)
            out = f.create_variable(name, var.dims, var.dtype, chunks=(rows, *var.shape[1:]),
                                    **filters)
            out.attrs.update(var.attrs)
            if not self._compressed:
                encoder = None
            elif packed:
                encoder = partial(chunk_codec.encode_packed,
                                  fill=scale_offset.fill_value(out._h5ds))
            else:
                encoder = partial(_deflated, shuffled=shuffled)
            columns[name] = _Column(name, var.dims[0], out._h5ds, rows, encoder)
        f.attrs.update(template.attrs)
        f.attrs.update(complete=0, frames_written=0)
        return columns

    @property
    def frames_written(self) -> int:
        """Frames whose results are in the file: as of the last `checkpoint` while the run
        goes, all that the file keeps once it is closed."""
        return self._frames_on_disk

    @property
    def frames_appended(self) -> int:
        """Frames appended so far."""
        return self._sizes["frame"]

    # ------------------------------------------------------------------ writing
    def append(self, columns: Mapping[str, np.ndarray]) -> None:
        """Append one chunk: every growing variable's new rows, by variable name.

        The rows are copied (the caller may reuse its arrays at once) and written as their
        chunks fill, on the writer's threads.

        Raises
        ------
        ValueError
            When ``columns`` does not name exactly the growing variables, or variables of
            one dimension disagree in length.
        ResultWriteError
            When an earlier write failed (a full disk): nothing more is appended.
        """
        self._raise_failure()
        if set(columns) != set(self._columns):
            raise ValueError(f"a chunk must give {sorted(self._columns)}, got {sorted(columns)}")
        rows: dict[str, int] = {}
        arrays = {name: np.asarray(data) for name, data in columns.items()}
        # Checked whole before any row is staged: a chunk is appended entirely or not at all.
        for name, data in arrays.items():
            column = self._columns[name]
            n = rows.setdefault(column.dim, len(data))
            if n != len(data):
                raise ValueError(f"{name} has {len(data)} rows, other variables along "
                                 f"{column.dim} have {n}")
            if data.shape[1:] != column.row_shape:
                raise ValueError(f"{name} has rows of shape {data.shape[1:]}, the file's "
                                 f"are {column.row_shape}")
            if not np.can_cast(data.dtype, column.dtype, "same_kind"):
                raise TypeError(f"{name} is {data.dtype}, the file's is {column.dtype}")
        t0 = time.perf_counter()
        direct: list[Future] = []
        for name, data in arrays.items():
            self._stage(self._columns[name], data, direct)
            self._raw_appended += data.nbytes
        # Whole chunks were encoded straight from the caller's arrays: done before the
        # caller may reuse them.
        wait(direct)
        self.seconds["appending (the caller's thread)"] += time.perf_counter() - t0
        for dim, n in rows.items():
            self._sizes[dim] += n
        self._bounds.append(dict(self._sizes))
        self._check_space()
        if time.monotonic() - self._last_checkpoint > CHECKPOINT_SECONDS:
            self.checkpoint()

    def _stage(self, column: _Column, data: np.ndarray, direct: list[Future]) -> None:
        """Copy ``data`` into the column's chunks, handing off each one filled; compressed,
        the whole chunks that lie in ``data`` are encoded from it, uncopied (their encodings
        join ``direct``)."""
        done = 0
        rows = column.chunk_rows
        while done < len(data):
            if self._compressed and not column.n_staged and len(data) - done >= rows:
                chunk = column.skip()
                self._grow(column.dim, (chunk + 1) * rows)
                direct.append(self._submit(column, chunk, data[done:done + rows], owned=False))
                done += rows
                continue
            take = min(column.chunk_rows - column.n_staged, len(data) - done)
            column.staged[column.n_staged:column.n_staged + take] = data[done:done + take]
            column.n_staged += take
            done += take
            if column.n_staged == column.chunk_rows:
                chunk, buffer = column.take_full()
                self._grow(column.dim, (chunk + 1) * column.chunk_rows)
                self._submit(column, chunk, buffer)

    def _grow(self, dim: str, rows: int) -> None:
        """Make the file's ``dim`` at least ``rows`` long (a chunk is written only inside
        its variable's extent), doubling it: resizing touches every variable of the
        dimension, and rows beyond the data cost nothing until the exact size is set."""
        if rows > self._extent[dim]:
            grown = max(rows, 2 * self._extent[dim])
            self._file.resize_dimension(dim, grown)
            self._extent[dim] = grown

    def _submit(self, column: _Column, chunk: int, buffer: np.ndarray, tail: int = 0,
                owned: bool = True) -> Future | None:
        """Encode (on the pool) and write (on the writer's thread) one chunk; ``owned``
        buffers go back to the column once they are no longer read. Returns the encoding's
        future (None uncompressed)."""
        reuse = owned and not tail
        encoded = self._encoders.submit(self._encode, column, buffer, reuse, bool(tail)) \
            if self._compressed else None
        self._pending.append(self._writer.submit(self._write_chunk, column, chunk, buffer,
                                                 encoded, tail, reuse))
        if len(self._pending) > self._max_pending:
            t0 = time.perf_counter()
            while len(self._pending) > self._max_pending:
                self._settle(self._pending.popleft())
            self.seconds["waiting for the writer"] += time.perf_counter() - t0
        return encoded

    def _count(self, what: str, t0: float) -> None:
        with self._clock:
            self.seconds[what] += time.perf_counter() - t0

    def _encode(self, column: _Column, buffer: np.ndarray, reuse: bool,
                padded: bool) -> tuple[bytes | np.ndarray, int]:
        t0 = time.perf_counter()
        encoded = column.encoder(buffer, padded)
        if reuse:
            column.free.append(buffer)
        self._count("encoding (all threads)", t0)
        return encoded

    def _write_chunk(self, column: _Column, chunk: int, buffer: np.ndarray,
                     encoded: Future | None, tail: int, reuse: bool):
        t0 = time.perf_counter()
        try:
            data, mask = (buffer, 0) if encoded is None else encoded.result()
            t0 = time.perf_counter()
            column.dataset.id.write_direct_chunk(column.offset(chunk), data, mask)
        except Exception as err:
            return column, chunk, tail, err
        finally:
            self._count("writing", t0)
        if encoded is None and reuse:
            column.free.append(buffer)
        return column, chunk, tail, len(data)

    def _settle(self, future: Future) -> None:
        column, chunk, tail, outcome = future.result()
        if isinstance(outcome, Exception):
            column.broken = chunk if column.broken is None else min(column.broken, chunk)
            if self._failure is None:
                self._failure = outcome
            return
        if tail:
            column.tail_written = tail
        else:
            column.written.add(chunk)
            self._raw_done += column.staged.nbytes
            self._encoded_done += outcome

    def _settle_all(self) -> None:
        while self._pending:
            self._settle(self._pending.popleft())

    def _raise_failure(self) -> None:
        for future in [f for f in self._pending if f.done()]:
            self._pending.remove(future)
            self._settle(future)
        if self._failure is not None or self._refusal is not None:
            raise self._error()

    def _error(self) -> ResultWriteError:
        """The error of the failed write (or of the refusal to go on)."""
        if self._failure is None:
            return ResultWriteError(errno.ENOSPC, self._refusal, self.path, self.partial)
        code = getattr(self._failure, "errno", None)
        text = str(self._failure)
        # HDF5 reports the errno of a failed write inside its message only.
        if code == errno.ENOSPC or "No space left" in text or "errno = 28" in text:
            code, reason = errno.ENOSPC, "the disk is full"
        else:
            reason = text.splitlines()[0] if text else type(self._failure).__name__
        return ResultWriteError(code, reason, self.path, self.partial, self._bytes_needed())

    def _bytes_needed(self) -> int | None:
        """About the bytes the frames not yet on disk will take, from the encoded sizes of
        the chunks written so far."""
        frames = self._sizes.get("frame", 0)
        if not (self._frames_expected and frames and self._raw_done):
            return None
        per_frame = self._raw_appended / frames * self._encoded_done / self._raw_done
        return int(per_frame * max(self._frames_expected - self._frames_on_disk, 0))

    def _check_space(self) -> None:
        """Once the first chunks are encoded, stop a run that would not fit on the disk."""
        if self._space_checked or not self._raw_done or not self._frames_expected:
            return
        self._space_checked = True
        frames = self._sizes["frame"]
        per_frame = self._raw_appended / frames * self._encoded_done / self._raw_done
        needed = int(per_frame * (self._frames_expected - frames))
        free = free_bytes(self.partial)
        if needed > free:
            self._refusal = (f"the disk has {human_bytes(free)} free, the run needs about "
                             f"{human_bytes(needed)} more (stopped before filling it)")

    def checkpoint(self) -> None:
        """Put every frame appended so far into the file on disk (the chunks being filled
        as well), so that even a killed process leaves them readable.

        Raises
        ------
        ResultWriteError
            When a write failed.
        """
        self._raise_failure()
        self._write_everything()
        self._raise_failure()
        self._last_checkpoint = time.monotonic()

    def _write_everything(self) -> None:
        """Write the partly filled chunks, then, if no write failed, the exact sizes and
        state."""
        self._settle_all()
        for dim, size in self._sizes.items():
            self._grow(dim, size)
        for column in self._columns.values():
            if column.n_staged and column.n_staged != column.tail_written \
                    and column.broken is None:
                self._submit(column, column.chunk, column.tail(), tail=column.n_staged)
        self._settle_all()
        if self._failure is None:
            self._set_sizes(self._sizes)

    def _set_sizes(self, sizes: Mapping[str, int]) -> None:
        for dim, size in sizes.items():
            if self._extent[dim] != size:
                self._file.resize_dimension(dim, size)
                self._extent[dim] = size
        self._file.attrs["frames_written"] = sizes.get("frame", 0)
        self._h5.flush()
        self._frames_on_disk = sizes.get("frame", 0)
        self._bounds = [dict(sizes)]

    def _saved_bounds(self) -> dict[str, int]:
        """The last append whose rows are all on disk, after a failed write."""
        on_disk: dict[str, int] = {}
        for column in self._columns.values():
            rows = column.rows_on_disk()
            on_disk[column.dim] = min(on_disk.get(column.dim, rows), rows)
        for bound in reversed(self._bounds):
            if all(bound[dim] <= on_disk.get(dim, bound[dim]) for dim in bound):
                return bound
        return {dim: 0 for dim in self._sizes}

    # ------------------------------------------------------------------ closing
    def close(self, complete: bool) -> None:
        """Close the file, marked complete or not, and, complete, move it into place.

        An incomplete file keeps every frame appended, or after a failed write every frame
        whose rows reached the disk; one of no frames is removed.

        Raises
        ------
        ResultWriteError
            When a write failed, with `ResultWriteError.frames_saved` set.
        """
        if self._closed:
            return
        self._closed = True
        failure = None
        try:
            # The space held back lets the last writes through on a disk that is full.
            self._destination.give_back_space()
            saved = self._finish()
            stopped = self._failure is not None or self._refusal is not None
            complete = complete and not stopped
            if saved is None:
                self.partial.unlink(missing_ok=True)
                saved = 0
            else:
                self._file.attrs.update(complete=int(complete), frames_written=saved)
                self._close_files()
                if complete:
                    move_into_place(self.partial, self.path)
                elif saved == 0 and not stopped:
                    self.partial.unlink()
                else:
                    fsync_path(self.partial)
            self._frames_on_disk = saved
            if stopped:
                failure = self._error()
        finally:
            self._close_files()
            for pool in (self._encoders, self._writer):
                if pool is not None:
                    pool.shutdown(wait=True)
            self._release()
        if failure is not None:
            failure.frames_saved = self._frames_on_disk
            raise failure

    def _finish(self) -> int | None:
        """Write what is left; the frames the file keeps, None if it cannot be closed."""
        try:
            self._write_everything()
            if self._failure is None:
                return self._sizes.get("frame", 0)
            bound = self._saved_bounds()
            self._set_sizes(bound)
            return bound.get("frame", 0)
        except OSError:
            if self._failure is None:
                raise
            return None

    def _close_files(self) -> None:
        try:
            if self._file is not None:
                file, self._file = self._file, None
                with _quiet_netcdf_features():
                    file.close()
        except OSError:
            if self._failure is None:
                raise
        finally:
            if self._h5 is not None:
                h5, self._h5 = self._h5, None
                try:
                    h5.close()
                except OSError:
                    if self._failure is None:
                        raise

    def _release(self) -> None:
        if self._owns_destination:
            self._destination.release()
        else:
            self._destination.give_back_space()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            self.close(complete=kind is None)
        except ResultWriteError as failure:
            if not isinstance(error, ResultWriteError):
                raise
            error.bytes_needed = failure.bytes_needed
        if isinstance(error, ResultWriteError):
            # The error raised while writing, now with what the closed file kept; it says
            # so itself, in one line.
            error.frames_saved = self._frames_on_disk
            return
        if kind is not None and self._frames_on_disk:
            why = "interrupted" if interrupted(error) else kind.__name__
            warnings.warn(
                f"the run stopped ({why}) after {self._frames_on_disk} frames: "
                f"{self.partial} holds their results and is marked complete=0",
                IncompleteResultWarning, stacklevel=2)


def open_result(path: str | os.PathLike) -> xr.Dataset:
    """Open a result file lazily (from `aare_lab.model.results.save_result` or ``find(out=...)``).

    Returns
    -------
    xarray.Dataset
        The result, read from the file as it is used; close it (or use it in a ``with``
        block) when done. The attributes ``complete`` and ``frames_written`` of a file
        written chunk by chunk are dropped.

    Raises
    ------
    FileNotFoundError
        Without a file at ``path`` (naming the partial file of a run that stopped early).
    ValueError
        For a file that is not a netCDF result.

    Warns
    -----
    IncompleteResultWarning
        When the run that wrote the file was interrupted.
    """
    if not os.path.exists(path):
        partial = partial_path(path)
        hint = (f"; {partial} holds the frames of a run that stopped early (open it to read "
                "them)" if partial.exists() else "")
        raise FileNotFoundError(errno.ENOENT, f"no result file at {path}{hint}")
    try:
        ds = xr.open_dataset(path, engine=NETCDF_ENGINE)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is not an aare_lab result ({err}); results are the netCDF "
                         "files that save_result and `aare-lab find --out` write") from None
    state = {key: ds.attrs.pop(key) for key in STATE_ATTRS if key in ds.attrs}
    if not int(state.get("complete", 1)):
        warnings.warn(f"{path} holds an interrupted run: the {int(state['frames_written'])} "
                      "frames completed before it stopped", IncompleteResultWarning,
                      stacklevel=2)
    return ds


__all__ = ["COMPRESSIONS", "DEFAULT_COMPRESSION", "IncompleteResultWarning", "ResultWriteError", "ResultWriter",
           "interrupted", "open_result"]
