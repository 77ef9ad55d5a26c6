"""Frames already on the GPU, as a CuPy array: the device-resident mode of the cuda finder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from aare_lab.sources.base import FrameChunk, FrameSource, Reader, as_frame_numbers, check_not_empty


class DeviceArraySource(FrameSource):
    """A CuPy stack ``(n, ny, nx)`` (or one frame) of ``uint16`` counts; chunks are views.

    Parameters
    ----------
    array
        A C-contiguous CuPy array; it is never copied, so it must not change while it is
        being read.
    frame_numbers
        One unique integer per frame (default 0, 1, 2, ...).

    Raises
    ------
    TypeError
        For a dtype other than ``uint16``.
    ValueError
        For the wrong number of dimensions, an empty array, or a non-contiguous one.
    """

    def __init__(self, array, frame_numbers=None):
        if array.dtype != np.uint16:
            raise TypeError(f"device frames must be uint16 raw detector counts, got dtype "
                            f"{array.dtype}")
        if array.ndim == 2:
            array = array[None]
        if array.ndim != 3:
            raise ValueError(f"device frames must be one 2-D frame or a 3-D stack (n, ny, nx), "
                             f"got shape {array.shape}")
        if not array.flags.c_contiguous:
            raise ValueError("device frames must be C-contiguous (a strided view would be "
                             "copied on every call); pass cupy.ascontiguousarray(frames)")
        check_not_empty(array.shape[0], array.shape, "the device array")
        self._frames = array
        self.n_frames = int(array.shape[0])
        self.frame_shape = (int(array.shape[1]), int(array.shape[2]))
        self.has_frame_numbers = frame_numbers is not None
        self._numbers = (np.arange(self.n_frames, dtype=np.int64) if frame_numbers is None
                         else as_frame_numbers(frame_numbers, self.n_frames, "the device array"))

    def describe(self) -> str:
        return f"a CuPy array of {self.n_frames} frames on the GPU"

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        yield lambda start, stop: FrameChunk(self._numbers[start:stop],
                                             self._frames[start:stop])
