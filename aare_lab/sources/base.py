"""What every frame source shares: the chunk type, chunking, positions, dark/data split."""

from __future__ import annotations

import itertools
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import NamedTuple

import numpy as np

from aare_lab.checks import positive_int
from aare_lab.frames import FRAME_DTYPE, as_frame_stack, check_dtype


class FrameChunk(NamedTuple):
    """Consecutive frames of a source with their frame numbers.

    Attributes
    ----------
    numbers
        ``int64`` frame numbers, shape ``(n,)``.
    frames
        C-contiguous ``uint16`` frames, shape ``(n, ny, nx)``.
    """

    numbers: np.ndarray
    frames: np.ndarray


#: Reads the frames at positions ``start:stop`` of an opened source.
Reader = Callable[[int, int], FrameChunk]


class FrameSource(ABC):
    """Frames read in chunks, each frame with its frame number.

    A source that carries its own frame numbers (a raw file, frame numbers given
    explicitly) keeps them; one that does not numbers its frames 0, 1, 2, ... by position.
    Positions (``start``, ``stop``) always count frames from 0, whatever their numbers.

    Subclasses set the attributes below and implement `describe` and `_reader`.

    Attributes
    ----------
    frame_shape
        ``(ny, nx)`` of every frame.
    n_frames
        Number of frames, or None for an endless stream.
    has_frame_numbers
        Whether the numbers come with the data rather than from frame positions.
    origin
        The file spec the frames were opened from (`aare_lab.sources.open_source`), which
        results record with its files' fingerprints; None for frames from memory.
    skip_first, frames_skipped
        Frames left out at the start of each acquisition, and in all
        (`aare_lab.sources.skip.without_first`); 0 for a source that leaves none out.
    """

    frame_shape: tuple[int, int]
    n_frames: int | None
    has_frame_numbers: bool
    origin: str | None = None
    skip_first: int = 0
    frames_skipped: int = 0

    @abstractmethod
    def describe(self) -> str:
        """Name the data (file, dataset) for messages."""

    @abstractmethod
    def _reader(self) -> AbstractContextManager[Reader]:
        """Open the data for one pass and give a function reading positions ``start:stop``.

        Each pass opens its own reader so that several iterations, and the views of
        `split_dark`, never share a file position. The function may return fewer frames
        than asked only at the end of an endless stream.
        """

    def acquisition_starts(self) -> np.ndarray:
        """The positions where the source's acquisitions begin (``int64``, 0 first).

        A file or an array is one acquisition (``[0]``); `aare_lab.sources.skip` labels
        frames otherwise.
        """
        return np.zeros(1, np.int64)

    def skipped_within(self, start: int, stop: int) -> int:
        """The frames left out (`frames_skipped`) just before positions ``start:stop``,
        so that views which divide a source (`split_dark`) count each once."""
        return 0

    def chunks(self, chunk_frames: int = 64, start: int = 0,
               stop: int | None = None) -> Iterator[FrameChunk]:
        """Iterate over the frames at positions ``start:stop`` in chunks.

        Parameters
        ----------
        chunk_frames
            Frames per chunk (at least 1); the last chunk may be shorter.
        start, stop
            Positions of the first frame and one past the last; ``stop=None`` reads to the
            end (forever for an endless stream).

        Yields
        ------
        FrameChunk
            Frames and their numbers.

        Raises
        ------
        ValueError
            For ``chunk_frames < 1`` or positions outside the source.
        """
        chunk_frames = positive_int("chunk_frames", chunk_frames)
        start, stop = self._positions(start, stop)
        return self._chunks(chunk_frames, start, stop)

    def _chunks(self, chunk_frames: int, start: int, stop: int | None) -> Iterator[FrameChunk]:
        # Apart from chunks() so that bad arguments fail at the call, while the reader
        # opens on the first next() and closes when the iteration ends or is dropped.
        with self._reader() as read:
            for first in itertools.count(start, chunk_frames):
                if stop is not None and first >= stop:
                    return
                n = chunk_frames if stop is None else min(chunk_frames, stop - first)
                chunk = read(first, first + n)
                if len(chunk.numbers):
                    yield chunk
                if len(chunk.numbers) < n:
                    return

    def read(self, start: int = 0, stop: int | None = None) -> FrameChunk:
        """Read the frames at positions ``start:stop`` into one chunk.

        Parameters
        ----------
        start, stop
            Positions of the first frame and one past the last; ``stop=None`` reads to
            the end.

        Raises
        ------
        ValueError
            For positions outside the source, or ``stop=None`` on an endless stream.
        """
        start, stop = self._positions(start, stop)
        if stop is None:
            raise ValueError(f"{self.describe()} is an endless stream: give stop to read()")
        if start == stop:
            return FrameChunk(np.empty(0, np.int64),
                              np.empty((0, *self.frame_shape), FRAME_DTYPE))
        with self._reader() as read:
            return read(start, stop)

    def _positions(self, start: int, stop: int | None) -> tuple[int, int | None]:
        start = operator.index(start)
        stop = self.n_frames if stop is None else operator.index(stop)
        end = self.n_frames
        if start < 0 or (stop is not None and (stop < start or (end is not None and stop > end))):
            raise ValueError(
                f"positions start={start}, stop={stop} are not within the "
                f"{'endless' if end is None else end} frames of {self.describe()}"
            )
        return start, stop

    def __len__(self) -> int:
        if self.n_frames is None:
            raise TypeError(f"{self.describe()} is an endless stream and has no length")
        return self.n_frames

    def __repr__(self) -> str:
        ny, nx = self.frame_shape
        count = ("endless frames" if self.n_frames is None
                 else f"{self.n_frames} frame{'' if self.n_frames == 1 else 's'}")
        return f"<{type(self).__name__} {self.describe()}: {count} of {ny}x{nx}>"


class SourceView(FrameSource):
    """The frames at positions ``offset:offset + n_frames`` of another source."""

    def __init__(self, base: FrameSource, offset: int, n_frames: int):
        self.base = base
        self.offset = offset
        self.n_frames = n_frames
        self.frame_shape = base.frame_shape
        self.has_frame_numbers = base.has_frame_numbers
        self.origin = base.origin
        self.skip_first = base.skip_first
        self.frames_skipped = base.skipped_within(offset, offset + n_frames)

    def describe(self) -> str:
        return f"frames {self.offset}:{self.offset + self.n_frames} of {self.base.describe()}"

    def acquisition_starts(self) -> np.ndarray:
        # An acquisition begun before the view goes on in it: its start is not the view's.
        starts = self.base.acquisition_starts() - self.offset
        return starts[(starts >= 0) & (starts < self.n_frames)]

    def skipped_within(self, start: int, stop: int) -> int:
        return self.base.skipped_within(self.offset + start, self.offset + stop)

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        with self.base._reader() as read_base:
            def read(start: int, stop: int) -> FrameChunk:
                chunk = read_base(self.offset + start, self.offset + stop)
                if self.has_frame_numbers:
                    return chunk
                # Without numbers of its own, a view numbers its frames from 0 like any
                # source: the dark frames before it are not counted.
                return chunk._replace(numbers=np.arange(start, stop, dtype=np.int64))
            yield read


def split_dark(source: FrameSource, n_dark: int) -> tuple[FrameSource, FrameSource]:
    """Split a source into its first ``n_dark`` frames (dark) and the rest (data).

    Both views read the same file. Data frames keep the numbers a source carries; a
    source without numbers has its data frames numbered from 0.

    Parameters
    ----------
    source
        A finite source.
    n_dark
        Number of dark frames, at least 1.

    Returns
    -------
    dark, data
        Views over positions ``0:n_dark`` and ``n_dark:``.

    Raises
    ------
    ValueError
        For ``n_dark < 1``, an endless source, or one without frames after the dark.
    """
    n_dark = positive_int("n_dark", n_dark)
    if source.n_frames is None:
        raise ValueError(f"cannot split the endless stream {source.describe()}")
    if source.n_frames <= n_dark:
        raise ValueError(
            f"{source.describe()} has {source.n_frames} frames: not enough for {n_dark} "
            "dark frames and at least one data frame"
        )
    return (SourceView(source, 0, n_dark),
            SourceView(source, n_dark, source.n_frames - n_dark))


def check_stack(data, name: str) -> tuple[int, tuple[int, int]]:
    """Check a lazily read array (memory map, HDF5 dataset) without reading it whole.

    The dtype is checked on the whole data (`check_dtype` reads it in slices only when it
    is not ``uint16``, to count the values a conversion would lose); `as_frame_stack` sees
    only the first frame, which is enough for the frame shape.

    Parameters
    ----------
    data
        Anything with ``ndim``, ``shape``, ``dtype`` and NumPy slicing.
    name
        How messages name the data.

    Returns
    -------
    n_frames, frame_shape

    Raises
    ------
    TypeError
        For a dtype other than ``uint16``.
    ValueError
        For the wrong number of dimensions, an empty frame or no frames at all.
    """
    check_dtype(data, f"frames of {name}")
    if data.ndim == 3:
        sample = data[:1]
    elif data.ndim == 2:
        sample = data[()]
    else:
        # Refused for its shape before as_frame_stack would copy anything.
        sample = np.broadcast_to(np.zeros((), data.dtype), data.shape)
    as_frame_stack(sample, what=f"frames of {name}")
    n_frames = data.shape[0] if data.ndim == 3 else 1
    check_not_empty(n_frames, data.shape, name)
    return n_frames, (int(data.shape[-2]), int(data.shape[-1]))


def check_not_empty(n_frames: int, shape: tuple[int, ...], name: str) -> None:
    """Refuse a source without frames, which would give a pedestal or a run of nothing."""
    if n_frames == 0:
        raise ValueError(f"{name} holds no frames (shape {shape})")


def as_frame_numbers(numbers, n_frames: int, what: str) -> np.ndarray:
    """Return frame numbers as ``int64`` after checking they can label ``n_frames`` frames.

    Numbers must be integers and unique, in any order: detectors may restart or wrap
    their counters, so they are kept as given rather than required to increase.

    Raises
    ------
    TypeError
        For numbers that are not integers.
    ValueError
        For the wrong shape or length, duplicates, or values beyond ``int64``.
    """
    arr = np.asarray(numbers)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"frame numbers of {what} must be integers, got dtype {arr.dtype}")
    if arr.shape != (n_frames,):
        raise ValueError(
            f"frame numbers of {what} must have shape ({n_frames},), one per frame, "
            f"got {arr.shape}"
        )
    if arr.dtype.kind == "u" and n_frames and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"frame numbers of {what} exceed the int64 range")
    arr = arr.astype(np.int64)
    values, counts = np.unique(arr, return_counts=True)
    if (counts > 1).any():
        raise ValueError(
            f"frame numbers of {what} must be unique; repeated: {values[counts > 1][:5].tolist()}"
        )
    return arr


def counts_text(counts: dict[str, int]) -> str:
    """A live source's counts (``source.stats.as_dict()``, named ``frames_received`` and
    so on) in words, for a status line.

    Examples
    --------
    >>> counts_text({"frames_received": 1200, "frames_lost": 0, "messages_malformed": 1})
    'received 1,200, lost 0, malformed 1'
    """
    return ", ".join(f"{key.split('_', 1)[1]} {value:,}" for key, value in counts.items())
