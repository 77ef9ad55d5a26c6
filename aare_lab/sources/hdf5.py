"""Frames in an HDF5 dataset (also NeXus ``.nxs`` files), read chunk by chunk."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike

import h5py
import numpy as np

from aare_lab.checks import existing_file

from .base import FrameChunk, FrameSource, Reader, as_frame_numbers, check_stack


class Hdf5Source(FrameSource):
    """Frames in an HDF5 dataset, one 2-D ``uint16`` frame or a stack ``(n, ny, nx)``.

    Only the chunks asked for are read. Frame numbers are never guessed from other
    datasets in the file: name the one that holds them, or let the frames name it in
    their attribute ``frame_numbers`` (as ``aare-lab capture`` writes them).

    Parameters
    ----------
    path
        The HDF5 file.
    dataset
        Path of the frames inside the file, e.g. ``"/entry/data/data"``.
    frame_numbers
        Path of a dataset in the same file holding one unique integer per frame, or the
        numbers themselves. Without them, those of the dataset the frames' attribute
        ``frame_numbers`` names, else 0, 1, 2, ...

    Raises
    ------
    FileNotFoundError
        For a missing file.
    TypeError
        For a dtype other than ``uint16`` or non-integer frame numbers.
    ValueError
        For a missing dataset (the message lists the 3-D ones), the wrong number of
        dimensions, an empty dataset, or unusable frame numbers.
    """

    def __init__(self, path: str | PathLike, dataset: str, frame_numbers=None):
        self.path = existing_file(path)
        self.dataset = dataset
        with open_hdf5(self.path) as file:
            frames = self._dataset(file, dataset)
            self.n_frames, self.frame_shape = check_stack(frames, self.describe())
            link = frames.attrs.get("frame_numbers")
            if frame_numbers is None and isinstance(link, str):
                frame_numbers = link
            if isinstance(frame_numbers, str):
                frame_numbers = self._dataset(file, frame_numbers)[()]
        self.has_frame_numbers = frame_numbers is not None
        self._numbers = (np.arange(self.n_frames, dtype=np.int64) if frame_numbers is None
                         else as_frame_numbers(frame_numbers, self.n_frames, self.describe()))

    def describe(self) -> str:
        return f"'{self.path}:{self.dataset}'"

    def _dataset(self, file: h5py.File, name: str) -> h5py.Dataset:
        found = file.get(name)
        if not isinstance(found, h5py.Dataset):
            raise ValueError(f"'{self.path}' has no dataset {name!r}; {list_stacks(file)}")
        return found

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        with h5py.File(self.path, "r") as file:
            data = file[self.dataset]

            def read(start: int, stop: int) -> FrameChunk:
                frames = data[start:stop] if data.ndim == 3 else data[()][np.newaxis]
                return FrameChunk(self._numbers[start:stop], np.ascontiguousarray(frames))
            yield read


def open_hdf5(path: str | PathLike) -> h5py.File:
    """Open an HDF5 file for reading; a missing file or one of another format is named.

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a file h5py cannot read (empty, truncated, not HDF5).
    """
    path = existing_file(path)
    try:
        return h5py.File(path, "r")
    except OSError as err:
        # h5py says "file signature not found" without the file's name.
        raise ValueError(f"'{path}' is not a readable HDF5 file ({err}): it is empty, "
                         "truncated or of another format") from None


def list_stacks(file: h5py.File) -> str:
    """Name the 3-D datasets of an HDF5 file, the likely frame stacks, for messages."""
    stacks = []

    def visit(name: str, item) -> None:
        if isinstance(item, h5py.Dataset) and item.ndim == 3:
            stacks.append(f"/{name} {item.shape} {item.dtype}")

    file.visititems(visit)
    if not stacks:
        return "it has no 3-D dataset"
    return "its 3-D datasets are: " + ", ".join(stacks)
