"""Frames in NumPy files: ``.npy`` memory-mapped, ``.npz`` loaded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike

import numpy as np

from aare_lab.checks import existing_file

from .arrays import ArraySource
from .base import FrameChunk, FrameSource, Reader, as_frame_numbers, check_stack

#: The member of an ``.npz`` file that holds the frame numbers, if any.
FRAME_NUMBERS_KEY = "frame_numbers"


class NpySource(FrameSource):
    """Frames in a ``.npy`` file, memory-mapped and copied out chunk by chunk.

    Only the chunks asked for are read, so files larger than memory work.

    Parameters
    ----------
    path
        A ``.npy`` file holding one 2-D ``uint16`` frame or a 3-D stack ``(n, ny, nx)``.
    frame_numbers
        One unique integer per frame; without them the frames are numbered 0, 1, 2, ...

    Raises
    ------
    FileNotFoundError
        For a missing file.
    TypeError
        For a dtype other than ``uint16`` or non-integer frame numbers.
    ValueError
        For the wrong number of dimensions, an empty array, or unusable frame numbers.
    """

    def __init__(self, path: str | PathLike, frame_numbers=None):
        self.path = existing_file(path)
        self.n_frames, self.frame_shape = check_stack(self._map(), self.describe())
        self.has_frame_numbers = frame_numbers is not None
        self._numbers = (np.arange(self.n_frames, dtype=np.int64) if frame_numbers is None
                         else as_frame_numbers(frame_numbers, self.n_frames, self.describe()))

    def describe(self) -> str:
        return f"'{self.path}'"

    def _map(self) -> np.ndarray:
        try:
            return np.load(self.path, mmap_mode="r")
        except (EOFError, ValueError, OSError) as err:
            # np.load names neither the file nor the cause a user can act on.
            raise ValueError(f"{self.describe()} is not a readable .npy file ({err}): it is "
                             "empty, truncated or of another format; write it again with "
                             "numpy.save") from None

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        # Mapped again for each pass rather than kept, so that the source stays small
        # to pickle and never holds the file open between passes.
        stack = self._map().reshape(self.n_frames, *self.frame_shape)

        def read(start: int, stop: int) -> FrameChunk:
            # A copy, so that chunks are ordinary arrays that do not pin the mapping.
            return FrameChunk(self._numbers[start:stop],
                              np.array(stack[start:stop], order="C"))
        yield read


class NpzSource(ArraySource):
    """Frames in an ``.npz`` file, loaded whole (members of a zip file cannot be mapped).

    Parameters
    ----------
    path
        An ``.npz`` file.
    key
        The member holding the frames; may be left out when there is only one besides
        ``frame_numbers``.
    frame_numbers
        One unique integer per frame. When left out, the member ``frame_numbers`` is
        used if the file has one, else the frames are numbered 0, 1, 2, ...

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a missing ``key``, or when it is left out and the file holds several arrays;
        and as `ArraySource` for the frames themselves.
    """

    def __init__(self, path: str | PathLike, key: str | None = None, frame_numbers=None):
        self.path = existing_file(path)
        with np.load(self.path) as npz:
            candidates = [name for name in npz.files if name != FRAME_NUMBERS_KEY]
            if key is None:
                if len(candidates) != 1:
                    raise ValueError(
                        f"'{self.path}' holds the arrays {npz.files}: choose the frames, "
                        f"e.g. '{self.path}:{candidates[0]}' (key='{candidates[0]}' in Python)"
                    )
                key = candidates[0]
            elif key not in npz.files:
                raise ValueError(f"'{self.path}' has no array {key!r}; it holds {npz.files}")
            array = npz[key]
            if frame_numbers is None and FRAME_NUMBERS_KEY in npz.files:
                frame_numbers = npz[FRAME_NUMBERS_KEY]
        self.key = key
        super().__init__(array, frame_numbers, name=f"'{self.path}' [{key}]")
