"""Frames already in memory as a NumPy array."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from aare_lab.frames import as_frame_stack

from .base import FrameChunk, FrameSource, Reader, as_frame_numbers, check_not_empty


class ArraySource(FrameSource):
    """Frames from a NumPy array: one 2-D frame or a 3-D stack ``(n, ny, nx)``.

    Chunks are views of the array when it is already C-contiguous ``uint16`` (it is
    copied once otherwise), so the array must not change while it is being read.

    Parameters
    ----------
    array
        ``uint16`` raw detector counts.
    frame_numbers
        One unique integer per frame, in the order of the frames (they need not
        increase). Without them the frames are numbered 0, 1, 2, ...
    name
        How messages name the data.

    Raises
    ------
    TypeError
        For a dtype other than ``uint16`` or non-integer frame numbers.
    ValueError
        For the wrong number of dimensions, an empty array, or frame numbers of the wrong
        length or with duplicates.
    """

    def __init__(self, array, frame_numbers=None, name: str = "a NumPy array"):
        self.name = name
        self._frames = as_frame_stack(array, what=f"frames of {name}")
        n_frames, ny, nx = self._frames.shape
        check_not_empty(n_frames, self._frames.shape, name)
        self.n_frames = n_frames
        self.frame_shape = (ny, nx)
        self.has_frame_numbers = frame_numbers is not None
        self._numbers = (np.arange(n_frames, dtype=np.int64) if frame_numbers is None
                         else as_frame_numbers(frame_numbers, n_frames, name))

    @property
    def array(self) -> np.ndarray:
        """The C-contiguous ``uint16`` stack the chunks are views of (do not modify it)."""
        return self._frames

    def describe(self) -> str:
        return self.name

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        yield lambda start, stop: FrameChunk(self._numbers[start:stop],
                                             self._frames[start:stop])
