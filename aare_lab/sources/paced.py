"""A live stream at a fixed frame rate, for demos and tests without a detector.

`PacedSource` sends the frames of another source at ``rate`` frames per second, the way a
detector does: whether or not anybody keeps up. Between the sender and the reader sits a
bounded queue of chunks; when the reader falls behind, whole chunks are dropped and
counted, so memory stays flat however long the run.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

from aare_lab.checks import positive_int

from .base import FrameChunk, FrameSource
from .opening import open_source


class PacedSource(FrameSource):
    """Frames of ``source`` delivered in real time at ``rate`` frames per second.

    Parameters
    ----------
    source
        Any `FrameSource` (or what `aare_lab.open_source` takes).
    rate
        Frames per second sent.
    chunk_frames
        Frames per chunk sent (and per chunk read).
    queue_chunks
        Chunks the queue holds before the sender drops.
    repeat
        Send the source again and again (frame numbers keep counting up) until stopped.

    Attributes
    ----------
    frames_sent, frames_dropped
        What the sender sent so far, and what it dropped because the queue was full.
    """

    has_frame_numbers = True
    n_frames = None

    def __init__(self, source, rate: float, *, chunk_frames: int = 64,
                 queue_chunks: int = 8, repeat: bool = False):
        self.source = open_source(source)
        if not rate > 0:
            raise ValueError(f"rate must be > 0 frames per second, got {rate!r}")
        self.rate = float(rate)
        self.chunk_frames = positive_int("chunk_frames", chunk_frames)
        self.queue_chunks = positive_int("queue_chunks", queue_chunks)
        self.repeat = repeat
        self.frame_shape = self.source.frame_shape
        self.frames_sent = 0
        self.frames_dropped = 0

    def describe(self) -> str:
        """The stream and what it sends."""
        return f"{self.source.describe()} sent at {self.rate:g} frames/s"

    def _reader(self):
        raise TypeError(f"{self.describe()} is a live stream: read it in order with chunks()")

    def chunks(self, chunk_frames: int | None = None, start: int = 0,
               stop: int | None = None) -> Iterator[FrameChunk]:
        """Iterate over the chunks as they arrive; stops when the sender is done.

        ``chunk_frames`` is fixed by the sender; ``start`` must be 0 and ``stop`` None:
        a live stream is read from now on.
        """
        if start != 0 or stop is not None:
            raise ValueError(f"{self.describe()} is a live stream: it has no positions")
        return self._receive()

    def _receive(self) -> Iterator[FrameChunk]:
        chunks: queue.Queue = queue.Queue(self.queue_chunks)
        stop = threading.Event()
        sender = threading.Thread(target=self._send, args=(chunks, stop), daemon=True,
                                  name="aare_lab-paced-source")
        sender.start()
        try:
            while True:
                chunk = chunks.get()
                if chunk is None:
                    return
                if isinstance(chunk, Exception):
                    raise chunk
                yield chunk
        finally:
            stop.set()

    def _send(self, chunks: queue.Queue, stop: threading.Event) -> None:
        start = time.perf_counter()
        sent = offset = 0
        end = None
        try:
            while not stop.is_set():
                last = -1
                for chunk in self.source.chunks(self.chunk_frames):
                    if stop.is_set():
                        return
                    # Send when the detector would have: no earlier, whatever the reader does.
                    delay = start + (sent + len(chunk.numbers)) / self.rate - time.perf_counter()
                    if delay > 0 and stop.wait(delay):
                        return
                    chunk = FrameChunk(chunk.numbers + offset, chunk.frames)
                    last = int(chunk.numbers[-1])
                    sent += len(chunk.numbers)
                    try:
                        chunks.put_nowait(chunk)
                        self.frames_sent += len(chunk.numbers)
                    except queue.Full:
                        self.frames_dropped += len(chunk.numbers)
                if not self.repeat or last < 0:  # an empty source is not repeated
                    return
                offset = last + 1
        except Exception as err:  # the reader raises it
            end = err
        finally:
            while True:  # the end marker, unless the reader has gone
                try:
                    chunks.put(end, timeout=0.1)
                    break
                except queue.Full:
                    if stop.is_set():
                        break
