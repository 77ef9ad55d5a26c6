"""Frames left out at the start of each acquisition (``skip_first``).

A detector's first frames after the start of an acquisition can be noisier than the rest:
in the real JUNGFRAU dark runs of PSI aare's test data the first frame's residual noise is
15-17 % above the others' (benchmarks/first_frame_noise.py). `without_first` hides the
first ``n`` frames of every acquisition from whatever reads the source: dark training,
every finder and the live run alike, with nothing changed in them.

Where acquisitions begin:

- an slsDetector master file (`aare_lab.sources.RawSource`) is one acquisition, as are an
  array, a ``.npy``/``.npz`` file or an HDF5 dataset, unless ``acquisitions`` gives each
  frame's acquisition (any integer label; a new acquisition begins where it changes);
- the live stream (`aare_lab.sources.StreamSource`) says it: each chunk comes with its
  acquisition (``chunks(with_acquisition=True)``), counted from 1.

A finite source's skipped frames are known when it is opened (``frames_skipped``); a
stream's are counted as they come (``stats.frames_skipped``). Results record
``skip_first`` and ``frames_skipped`` (`aare_lab.model.results`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from aare_lab.checks import positive_int

from .base import FrameChunk, FrameSource, Reader


def without_first(source, n: int, acquisitions=None):
    """``source`` without the first ``n`` frames of each of its acquisitions.

    Parameters
    ----------
    source
        A `FrameSource`, or a live source with ``chunks(with_acquisition=True)`` (a
        `aare_lab.sources.StreamSource`).
    n
        Frames to leave out at the start of each acquisition; 0 returns ``source`` as it is.
    acquisitions
        For a finite source: each frame's acquisition, one integer per frame (default: the
        source's own, `FrameSource.acquisition_starts`).

    Returns
    -------
    FrameSource
        `SkipFirst` for a finite source, `LiveSkipFirst` for a live one.

    Raises
    ------
    TypeError
        For anything but a source (open an array or a file with
        `aare_lab.sources.open_source` first).
    ValueError
        For a negative ``n``, ``acquisitions`` of the wrong length or with a live source,
        or when no frame would be left.
    """
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ValueError(f"skip_first must be a whole number of frames >= 0, got {n!r}")
    if n == 0 and acquisitions is None:
        return source
    if not isinstance(source, FrameSource) and getattr(source, "n_frames", 0) is not None:
        raise TypeError(f"without_first takes a FrameSource (aare_lab.open_source gives one) "
                        f"or a live source, got {type(source).__name__}")
    if getattr(source, "n_frames", 0) is None:
        if acquisitions is not None:
            raise ValueError(f"{source.describe()} says its own acquisitions: leave out "
                             "acquisitions=")
        return LiveSkipFirst(source, int(n))
    return SkipFirst(source, int(n), acquisitions)


def starts_of(labels, n_frames: int, what: str) -> np.ndarray:
    """The positions where a per-frame acquisition label changes (0 first).

    Raises
    ------
    ValueError
        For labels that are not one integer per frame.
    """
    labels = np.asarray(labels)
    if labels.shape != (n_frames,) or labels.dtype.kind not in "iu":
        raise ValueError(f"acquisitions of {what} must be one integer per frame, shape "
                         f"({n_frames},); got {labels.dtype} of shape {labels.shape}")
    return np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]]).astype(np.int64)


class SkipFirst(FrameSource):
    """The frames of a finite source without the first ``skip_first`` of each acquisition.

    Frames keep the numbers the source carries; a source without numbers has the frames
    left numbered from 0, as any view (`aare_lab.sources.SourceView`).

    Parameters
    ----------
    base
        A finite `FrameSource`.
    skip_first
        Frames left out at the start of each acquisition.
    acquisitions
        Each frame's acquisition (see `without_first`).

    Attributes
    ----------
    frames_skipped
        The frames left out, in all.

    Raises
    ------
    ValueError
        When every frame would be left out, or as `starts_of`.
    """

    def __init__(self, base: FrameSource, skip_first: int, acquisitions=None):
        self.base = base
        starts = (base.acquisition_starts() if acquisitions is None
                  else starts_of(acquisitions, base.n_frames, base.describe()))
        ends = np.r_[starts[1:], base.n_frames]
        keep = np.ones(base.n_frames, bool)
        for start, end in zip(starts, ends):
            keep[start:min(start + skip_first, end)] = False
        self._kept = np.flatnonzero(keep)
        self.n_frames = len(self._kept)
        if self.n_frames == 0:
            raise ValueError(
                f"skip_first={skip_first} leaves no frame of {base.describe()} "
                f"({base.n_frames} frames in {len(starts)} acquisition(s)): skip fewer")
        kept_starts = [np.searchsorted(self._kept, start) for start, end
                       in zip(starts, ends) if end - start > skip_first]
        self._starts = np.asarray(kept_starts, np.int64)
        # Per frame left, the frames left out between it and the one before; those after
        # the last frame (a last acquisition left out whole) go with the last.
        self._gaps = np.diff(self._kept, prepend=-1) - 1
        self._gaps[-1] += base.n_frames - 1 - self._kept[-1]
        self.skip_first = base.skip_first + skip_first
        self.frames_skipped = base.frames_skipped + base.n_frames - self.n_frames
        self.frame_shape = base.frame_shape
        self.has_frame_numbers = base.has_frame_numbers
        self.origin = base.origin

    def describe(self) -> str:
        n = self.skip_first - self.base.skip_first
        return (f"{self.base.describe()} without the first {n} frame{'' if n == 1 else 's'} "
                "of each acquisition")

    def acquisition_starts(self) -> np.ndarray:
        return self._starts.copy()

    def skipped_within(self, start: int, stop: int) -> int:
        return int(self._gaps[start:stop].sum())

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        with self.base._reader() as read_base:
            def read(start: int, stop: int) -> FrameChunk:
                wanted = self._kept[start:stop]
                # Runs of consecutive positions, each read at once.
                cuts = np.flatnonzero(np.diff(wanted) != 1) + 1
                parts = [read_base(int(run[0]), int(run[-1]) + 1)
                         for run in np.split(wanted, cuts) if len(run)]
                numbers = np.concatenate([part.numbers for part in parts])
                frames = (parts[0].frames if len(parts) == 1
                          else np.concatenate([part.frames for part in parts]))
                if not self.has_frame_numbers:
                    numbers = np.arange(start, start + len(numbers), dtype=np.int64)
                return FrameChunk(numbers, frames)
            yield read


@dataclasses.dataclass(frozen=True)
class SkippingStats:
    """A live source's `aare_lab.sources.StreamStats` with the frames left out.

    ``as_dict`` has the stream's counts and ``frames_skipped``; the skipped frames are
    marked processed on the stream, so that its ``received = processed + dropped +
    queued`` (plus incomplete frames) still holds.
    """

    stream: object
    frames_skipped: int

    def __getattr__(self, name: str):
        return getattr(self.stream, name)

    def as_dict(self) -> dict[str, int]:
        """The stream's counts, then ``frames_skipped``."""
        return {**self.stream.as_dict(), "frames_skipped": self.frames_skipped}


class LiveSkipFirst:
    """A live source without the first ``skip_first`` frames of each acquisition.

    Everything a live consumer (`aare_lab.stream.live.LiveRun`) uses is the stream's, except
    `chunks`, which leaves the frames out, and `stats`, which counts them
    (`SkippingStats`). An acquisition begins when a chunk's acquisition is higher than
    any seen before, so chunks given back with `unread` are not skipped again.

    Parameters
    ----------
    stream
        A `aare_lab.sources.StreamSource` (or anything with its ``chunks``,
        ``mark_processed``, ``unread`` and ``stats``).
    skip_first
        Frames left out at the start of each acquisition, at least 1.
    """

    n_frames = None

    def __init__(self, stream, skip_first: int):
        self.stream = stream
        self.skip_first = positive_int("skip_first", skip_first)
        self._lock = threading.Lock()
        self._acquisition = 0
        self._left = 0
        self._skipped = 0

    def __getattr__(self, name: str):
        return getattr(self.stream, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stream.close()

    @property
    def frames_skipped(self) -> int:
        """Frames left out so far."""
        return self._skipped

    @property
    def stats(self) -> SkippingStats:
        """The stream's counts and ``frames_skipped``."""
        return SkippingStats(self.stream.stats, self._skipped)

    def chunks(self, chunk_frames: int | None = None, start: int = 0,
               stop: int | None = None, *, with_headers: bool = False,
               with_acquisition: bool = False, until: threading.Event | None = None):
        """The stream's `chunks`, as it yields them, without the skipped frames (a chunk
        whose frames are all skipped is not yielded)."""
        items = self.stream.chunks(chunk_frames, start, stop, with_headers=with_headers,
                                   with_acquisition=True, until=until)
        return self._iterate(items, with_headers, with_acquisition)

    def _iterate(self, items, with_headers: bool, with_acquisition: bool):
        for item in items:
            chunk, *rest = item
            acquisition = rest[-1]
            headers = rest[0] if with_headers else None
            k = self._skip(acquisition, len(chunk.numbers))
            if k:
                self.stream.mark_processed(k)
                chunk = FrameChunk(chunk.numbers[k:], chunk.frames[k:])
                headers = None if headers is None else headers[k:]
            if not len(chunk.numbers):
                continue
            if not (with_headers or with_acquisition):
                yield chunk
            else:
                yield (chunk, *([headers] if with_headers else []),
                       *([acquisition] if with_acquisition else []))

    def _skip(self, acquisition, n: int) -> int:
        """How many of the ``n`` frames of a chunk of ``acquisition`` are left out."""
        with self._lock:
            if acquisition is not None and acquisition > self._acquisition:
                self._acquisition, self._left = acquisition, self.skip_first
            k = min(self._left, n)
            self._left -= k
            self._skipped += k
            return k
