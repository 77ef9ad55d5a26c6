"""Chunks between `StreamSource`'s socket thread and its consumer.

`ChunkBuilder` copies decided frames into the next chunk on the socket thread;
`ChunkQueue` hands chunks over, holding at most a fixed number, so that a consumer that
falls behind costs dropped chunks rather than memory.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from aare_lab.frames import FRAME_DTYPE

from .base import FrameChunk
from .sls_assembly import Frame


class ChunkBuilder:
    """Frames collected into the next chunk (socket thread only)."""

    def __init__(self, chunk_frames: int):
        self.chunk_frames = chunk_frames
        self.first: float | None = None
        self._frames: np.ndarray | None = None
        self._numbers = np.empty(chunk_frames, np.int64)
        self._headers: list[tuple[dict, ...]] = []
        self._acquisition = 0

    def add(self, frame: Frame) -> bool:
        """Copy ``frame`` in (of the chunk's acquisition: the caller takes the chunk at
        each boundary); return whether the chunk is full."""
        if self._frames is None:
            # A new array per chunk: the consumer owns the chunks it was given.
            self._frames = np.empty((self.chunk_frames, *frame.image.shape), FRAME_DTYPE)
            self.first = time.monotonic()
            self._acquisition = frame.acquisition
        k = len(self._headers)
        self._frames[k] = frame.image
        self._numbers[k] = frame.number
        self._headers.append(frame.headers)
        return k + 1 == self.chunk_frames

    def take(self) -> tuple[FrameChunk, list[tuple[dict, ...]], int] | None:
        """``(chunk, headers, acquisition)`` so far (None if empty), and start the next."""
        n = len(self._headers)
        if not n:
            return None
        taken = (FrameChunk(self._numbers[:n].copy(), self._frames[:n]), self._headers,
                 self._acquisition)
        self._frames, self.first, self._headers = None, None, []
        return taken


class ChunkQueue:
    """Chunks for the consumer, at most ``limit``; markers always get in."""

    def __init__(self, limit: int):
        self.limit = limit
        self._items: deque = deque()  # (is_chunk, item)
        self._chunks = 0
        self._ready = threading.Condition()

    def put_chunk(self, item) -> bool:
        """Append a chunk unless ``limit`` are waiting; return whether it went in."""
        with self._ready:
            if self._chunks >= self.limit:
                return False
            self._chunks += 1
            self._items.append((True, item))
            self._ready.notify()
            return True

    def put_back(self, items: list, then=None) -> None:
        """Put chunks taken earlier back in front of the others, in the order given, and
        after them the marker ``then`` unless None (beyond ``limit`` if need be: they were
        in the queue before)."""
        entries = [(True, item) for item in items] + ([] if then is None else [(False, then)])
        with self._ready:
            self._items.extendleft(reversed(entries))
            self._chunks += len(items)
            self._ready.notify()

    def put_marker(self, marker) -> None:
        """Append an end or closed marker, whatever the number of chunks."""
        with self._ready:
            self._items.append((False, marker))
            self._ready.notify()

    def get(self, timeout: float):
        """The next item, or None after ``timeout`` seconds without one."""
        with self._ready:
            if not self._items and not self._ready.wait(timeout):
                return None
            if not self._items:
                return None
            is_chunk, item = self._items.popleft()
            self._chunks -= is_chunk
            return item
