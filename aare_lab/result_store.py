"""Results written to disk chunk by chunk while a run goes, so memory stays flat.

A run of a million dense frames does not fit in memory (about 100 kB of 3x3 clusters per
MÖNCH frame), so ``Finder.find(..., out="run.nc")`` hands every chunk's clusters to a
`ResultWriter` and drops them. The file is netCDF4 (HDF5, written with h5netcdf) with
the variables, dimensions and attributes of the result Dataset (`aare_lab.results`);
``cluster``, ``frame`` and ``branch_frame`` are unlimited dimensions that grow with every
chunk, so ``xarray.open_dataset(path, engine="h5netcdf")`` opens it lazily. Two more
attributes say how far the run got: ``complete`` (0 while the run goes and after it was
interrupted, 1 once it ended) and ``frames_written``; `open_result` drops them, so what it
gives equals what ``find`` returns in memory.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Self

import h5netcdf
import h5py
import numpy as np
import xarray as xr

from .results import NETCDF_ENGINE

#: The dimensions that grow as chunks are written.
GROWING = ("cluster", "frame", "branch_frame")
#: How far the run got; not part of the result.
STATE_ATTRS = ("complete", "frames_written")
#: About this many bytes per HDF5 chunk of a growing variable.
CHUNK_BYTES = 1 << 20


def interrupted(error: BaseException | None) -> bool:
    """Whether ``error`` is Ctrl-C (`KeyboardInterrupt`), also where a compiled function
    turned it into another error (Numba raises a SystemError with it as the context)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


class IncompleteResultWarning(UserWarning):
    """A result file holds an interrupted run: the frames completed before it stopped."""


class ResultWriter:
    """Append a run's variables to a netCDF4 file, chunk by chunk.

    Use it as a context manager: leaving the block normally marks the file complete; an
    exception (KeyboardInterrupt included) leaves it holding every chunk appended before,
    marked ``complete = 0``, and warns (`IncompleteResultWarning`).

    Parameters
    ----------
    path
        The file to write (replaced if it exists).
    template
        A result Dataset of no frames (`aare_lab.results.make_result` of empty arrays): the
        file gets its variables, dimensions and attributes, and the values of those that
        do not grow (window offsets, label maps).
    """

    def __init__(self, path: str | os.PathLike, template: xr.Dataset):
        self.path = Path(path)
        self._dims = {name: var.dims[0] for name, var in template.variables.items()
                      if var.dims and var.dims[0] in GROWING}
        self._sizes = {dim: 0 for dim in GROWING if dim in template.sizes}
        # The h5py file is ours, to flush: h5netcdf's flush only writes _NCProperties,
        # so a killed process would leave a file HDF5 cannot open.
        self._h5 = h5py.File(self.path, "w", track_order=True)
        self._file = None
        self._closed = False
        try:
            self._file = h5netcdf.File(self._h5, "w")
            self._create(template)
            self._file.flush()
            self._h5.flush()
        except BaseException:
            self._close_files()
            raise

    def _create(self, template: xr.Dataset) -> None:
        f = self._file
        f.dimensions = {dim: None if dim in GROWING else size
                        for dim, size in template.sizes.items()}
        for name, var in template.variables.items():
            growing = name in self._dims
            row = var.dtype.itemsize * int(np.prod(var.shape[1:], dtype=np.int64))
            chunks = (max(1, CHUNK_BYTES // max(row, 1)), *var.shape[1:]) if growing else None
            out = f.create_variable(name, var.dims, var.dtype, chunks=chunks)
            out.attrs.update(var.attrs)
            if not growing:
                out[...] = var.values
        f.attrs.update(template.attrs)
        f.attrs.update(complete=0, frames_written=0)

    @property
    def frames_written(self) -> int:
        """Frames whose results are in the file."""
        return self._sizes["frame"]

    def append(self, columns: Mapping[str, np.ndarray]) -> None:
        """Append one chunk: every growing variable's new rows, by variable name.

        Raises
        ------
        ValueError
            When ``columns`` does not name exactly the growing variables, or variables of
            one dimension disagree in length.
        """
        if set(columns) != set(self._dims):
            raise ValueError(f"a chunk must give {sorted(self._dims)}, got {sorted(columns)}")
        rows: dict[str, int] = {}
        for name, data in columns.items():
            n = rows.setdefault(self._dims[name], len(data))
            if n != len(data):
                raise ValueError(f"{name} has {len(data)} rows, other variables along "
                                 f"{self._dims[name]} have {n}")
        f = self._file
        for dim, n in rows.items():
            if n:
                f.resize_dimension(dim, self._sizes[dim] + n)
        for name, data in columns.items():
            if len(data):
                start = self._sizes[self._dims[name]]
                f.variables[name][start:start + len(data)] = data
        for dim, n in rows.items():
            self._sizes[dim] += n
        f.attrs["frames_written"] = self._sizes["frame"]
        # In the file now, so that even a killed process leaves the chunks written so far.
        self._h5.flush()

    def close(self, complete: bool) -> None:
        """Close the file, marked complete or not (what it holds is kept either way)."""
        if self._closed:
            return
        self._closed = True
        f = self._file
        try:
            if not complete:
                # A chunk cut off half-way is dropped: the file holds whole chunks only.
                for dim, size in self._sizes.items():
                    if f.dimensions[dim].size != size:
                        f.resize_dimension(dim, size)
            f.attrs.update(complete=int(complete), frames_written=self._sizes["frame"])
        finally:
            self._close_files()

    def _close_files(self) -> None:
        try:
            if self._file is not None:
                self._file.close()
        finally:
            self._h5.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self.close(complete=kind is None)
        if kind is not None:
            why = "KeyboardInterrupt" if interrupted(error) else kind.__name__
            warnings.warn(
                f"the run stopped ({why}) after {self.frames_written} frames: "
                f"{self.path} holds their results and is marked complete=0",
                IncompleteResultWarning, stacklevel=2)


def open_result(path: str | os.PathLike) -> xr.Dataset:
    """Open a result file lazily (from `aare_lab.results.save_result` or ``find(out=...)``).

    Returns
    -------
    xarray.Dataset
        The result, read from the file as it is used; close it (or use it in a ``with``
        block) when done. The attributes ``complete`` and ``frames_written`` of a file
        written chunk by chunk are dropped.

    Raises
    ------
    FileNotFoundError
        Without a file at ``path``.
    ValueError
        For a file that is not a netCDF result.

    Warns
    -----
    IncompleteResultWarning
        When the run that wrote the file was interrupted.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"no result file at {path}")
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


__all__ = ["IncompleteResultWarning", "ResultWriter", "interrupted", "open_result"]
