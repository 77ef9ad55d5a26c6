"""Frames live from slsReceiver's ZeroMQ stream.

`StreamSource` subscribes to one or more slsReceiver PUB endpoints (one per UDP
interface or module), assembles each frame from its parts by frame number, and hands the
frames to any finder in chunks, while a background thread keeps reading the sockets.

Reading
-------
``for chunk in source.chunks(): ...`` yields `FrameChunk` s (``int64`` frame numbers,
C-contiguous ``uint16`` frames), so every finder takes them. With ``stop_at_end=True``
the iteration ends after the end-of-acquisition message; calling `chunks` again continues
with the next acquisition. ``chunks(with_headers=True)`` yields ``(chunk, headers)``
pairs instead: ``headers[i]`` is a tuple of the JSON headers (dicts, as the receiver sent
them) of the parts of frame ``i``, one per port ordered by (row, column); a single-port
detector gives 1-tuples. Capture stores those. ``chunks(with_acquisition=True)`` yields
``(chunk, acquisition)`` (``(chunk, headers, acquisition)`` with both): the acquisition
the chunk's frames belong to, counted from 1 as ``stats.acquisitions`` (a chunk never
spans two).

The consumer reports what it has processed with ``source.mark_processed(n)``: the source
cannot know when a finder is done with a chunk (a reader may prefetch), so
``frames_processed`` counts only what was marked.

Format
------
The frame shape and detector type are learned from the data, not from the first message
alone: the frames of an acquisition of a new format are held back until
`aare_lab.sources.sls_assembly.SETTLE_FRAMES` of them came, the acquisition ended, or the
next one has the same format; frames of a format that another follows first (stray
frames before a run) are refused, counted under ``"format"``, and their acquisition's
end ends no iteration. A format that settles later replaces the stream's: the chunks
then have the new shape. With ``frame_shape`` given, frames of any other shape are
refused.

Counting
--------
`StreamSource.stats` is a `StreamStats` snapshot; ``stats.as_dict()`` has exactly the
keys ``frames_received``, ``frames_processed``, ``frames_lost``, ``frames_incomplete``,
``frames_dropped``, ``frames_queued``, ``messages_malformed``, and ``stats.refused`` the
refused messages by kind:

- received: frames built from the stream (one per frame number and acquisition, all its
  parts together), complete or not;
- processed: what the consumer marked with `StreamSource.mark_processed`;
- lost: frames sent and never received: frame numbers missing between two received
  frames of one acquisition (the receiver discarded them, or ZeroMQ dropped them at its
  high-water mark), frames after the last one received where its ``progress`` tells how
  many the acquisition had (counted at its end, or when the next one starts), and, for an
  acquisition whose start came after another's, frames before its first;
- incomplete: received frames with padded packets (``completeImage`` 0) or a port that
  never sent its part within ``assemble_timeout``: skipped (``incomplete="skip"``,
  the default, since 0xFF padding would make false clusters) or yielded masked
  (``incomplete="mask"``, see `MASKED_VALUE`);
- dropped: frames thrown away, whole chunks at a time, because the consumer fell behind
  and the queue of ``queue_chunks`` chunks was full;
- queued: frames received and not processed (nor dropped, nor skipped as incomplete):
  waiting for the consumer, or, after `StreamSource.halt`, left unprocessed, with those
  still in the sockets' buffers at the halt; ``received = processed + dropped + queued``
  plus the incomplete frames skipped;
- malformed: messages refused, each skipped, the sum of ``refused``, whose keys
  (`aare_lab.sources.sls_header.REFUSALS`) say why: ``not_json`` (a header that does not
  parse), ``version`` (another jsonversion than 4/5), ``header`` (a field missing or out
  of range), ``bitmode`` (another bit depth than 16), ``size`` (a data part of the wrong
  size or missing), ``repeated`` (a second copy of a part), ``format`` (parts of another
  detector type or frame shape than the stream's, see Format).

Acquisitions
------------
The end of an acquisition is the one-part ``"data":0`` header, sent once per socket and
possibly repeated: it ends the acquisition once, when every socket has sent it (or
``assemble_timeout`` after the first did). There is no start message: the first data
header after an end starts the next acquisition, and so does a header whose
``fileIndex`` or acquisition start (``frameNumber - frameIndex``) changed, or whose frame
number went backwards (a restarted publisher): numbering that restarts is a new
acquisition, never a gap of lost frames. Frame numbers are the detector's, so they may
repeat from one acquisition to the next.

Memory
------
The queue holds at most ``queue_chunks`` chunks; frames waiting for their other parts are
at most ``queue_chunks * chunk_frames``; each socket's ZeroMQ receive high-water mark is
``queue_chunks * chunk_frames`` messages. Memory is bounded by these, however long the
run and however slow the consumer.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Sequence

import zmq

from aare_lab.checks import positive_int

from .base import FrameChunk, FrameSource
from .sls_assembly import END, Assembler, Boundary, Frame
from .sls_chunks import ChunkBuilder, ChunkQueue
from .sls_header import MalformedMessage, parse_message

#: What a padded or missing pixel reads in frames yielded with ``incomplete="mask"``.
#: 0 ADU lies far below any pedestal, so the finder's decision for that pixel is NEG_SKIP
#: (no cluster, no pedestal push; docs/algorithm.md); a window that holds such a pixel
#: has a lower sum, so a cluster touching the gap can be missed but never invented.
MASKED_VALUE = 0

#: Seconds `StreamSource.frame_shape` waits for the first header when
#: ``receive_timeout`` is None.
SHAPE_WAIT = 10.0
#: Seconds the first frame of a chunk waits for the rest before the chunk goes anyway,
#: so that a slow stream still reaches the finder promptly.
FLUSH_AFTER = 0.2
#: Milliseconds the socket thread waits for messages before it looks at the clock (and
#: at `StreamSource.close`).
POLL_MS = 20
#: Messages taken from one socket before the others get their turn.
BURST = 64
INCOMPLETE_MODES = ("skip", "mask")


class StreamTimeout(TimeoutError):
    """Nothing usable arrived from the stream in the time allowed."""


@dataclasses.dataclass(frozen=True)
class StreamStats:
    """What a `StreamSource` has seen so far (see the module docstring for each count).

    Attributes
    ----------
    frames_received, frames_processed, frames_lost, frames_incomplete, frames_dropped, frames_queued, messages_malformed
        The counts reported under these names by `as_dict`.
    refused
        Messages refused, by kind (their sum is ``messages_malformed``): only kinds seen.
    frames_yielded
        Frames handed to the consumer.
    acquisitions
        Acquisitions started.
    acquisitions_ended
        Acquisitions ended by their end messages (repeats not counted).
    end_messages
        End-of-acquisition headers received, repeats included.
    messages
        Messages received, usable or not.
    last_malformed
        Why the last malformed message was refused, or None.
    """

    frames_received: int = 0
    frames_processed: int = 0
    frames_lost: int = 0
    frames_incomplete: int = 0
    frames_dropped: int = 0
    frames_queued: int = 0
    messages_malformed: int = 0
    refused: dict[str, int] = dataclasses.field(default_factory=dict)
    frames_yielded: int = 0
    acquisitions: int = 0
    acquisitions_ended: int = 0
    end_messages: int = 0
    messages: int = 0
    last_malformed: str | None = None

    def as_dict(self) -> dict[str, int]:
        """The seven counts of `COUNT_KEYS`, under exactly their names."""
        return {key: getattr(self, key) for key in COUNT_KEYS}


#: The keys of `StreamStats.as_dict`, in order.
COUNT_KEYS = ("frames_received", "frames_processed", "frames_lost", "frames_incomplete",
              "frames_dropped", "frames_queued", "messages_malformed")

_CLOSED = object()


class StreamSource(FrameSource):
    """Frames of a detector live from slsReceiver ZeroMQ PUB endpoints.

    The sockets connect and a background thread starts reading at construction, so
    nothing sent after it is missed; close the source (or use it as a context manager)
    to stop it.

    Parameters
    ----------
    endpoints
        One endpoint (``"tcp://host:port"``, or ``"host:port"``) or several: one per UDP
        interface or module, as the receiver streams them (``rx_zmqport`` + interface).
    frame_shape
        ``(ny, nx)`` of the assembled frames, frames of any other shape refused; None:
        the shape the data settles on (see Format; ``shape`` is ``[columns, rows]`` of
        one part, ``detshape`` the parts).
    chunk_frames
        Frames per chunk; a chunk is also handed on early at the end of an acquisition,
        when the next begins, and when its first frame has waited `FLUSH_AFTER` seconds.
    queue_chunks
        Chunks held for the consumer; when it is full, new chunks are dropped whole.
    assemble_timeout
        Seconds a frame waits for the parts of other ports (and an acquisition for the
        end messages of the other sockets) before it is given up as incomplete.
    incomplete
        ``"skip"`` (default): incomplete frames are counted and never yielded.
        ``"mask"``: they are yielded with padded and missing pixels set to
        `MASKED_VALUE`.
    stop_at_end
        End each `chunks` iteration at the end of an acquisition; False goes on with the
        next acquisitions.
    receive_timeout
        Seconds without any message after which a `chunks` iteration ends (None: wait
        forever); also how long `frame_shape` waits for the first header (`SHAPE_WAIT`
        when None).
    name
        How messages name the source (default: the endpoints).

    Attributes
    ----------
    ended
        A `threading.Event` set at each end of acquisition (when the message arrives;
        `chunks` still yields the frames before it) and cleared by the first frame of the
        next acquisition.
    n_frames
        None: a stream is endless.

    Raises
    ------
    ValueError
        For a bad argument or an endpoint ZeroMQ cannot connect to.

    Examples
    --------
    A stand-in for the receiver (`aare_lab.stream.publisher`) sends one acquisition:

    >>> import numpy as np
    >>> from aare_lab.stream.publisher import StreamPublisher
    >>> with StreamPublisher("tcp://127.0.0.1:0") as receiver, \\
    ...         StreamSource(receiver.endpoints) as source:
    ...     receiver.wait_for_subscribers()
    ...     receiver.send_frames(np.ones((5, 4, 6), np.uint16))
    ...     receiver.end_acquisition()
    ...     for chunk in source.chunks():
    ...         pass  # finder.process_chunk(chunk.frames, chunk.numbers)
    ...         source.mark_processed(len(chunk.numbers))
    ...     source.frame_shape, source.stats.frames_processed
    ((4, 6), 5)
    """

    n_frames = None
    has_frame_numbers = True

    def __init__(self, endpoints: str | Sequence[str], *,
                 frame_shape: tuple[int, int] | None = None, chunk_frames: int = 64,
                 queue_chunks: int = 8, assemble_timeout: float = 0.5,
                 incomplete: str = "skip", stop_at_end: bool = True,
                 receive_timeout: float | None = None, name: str | None = None):
        self.endpoints = _endpoints(endpoints)
        self.chunk_frames = positive_int("chunk_frames", chunk_frames)
        self.queue_chunks = positive_int("queue_chunks", queue_chunks)
        if incomplete not in INCOMPLETE_MODES:
            raise ValueError(f"incomplete must be one of {INCOMPLETE_MODES}, got {incomplete!r}")
        for label, value in (("assemble_timeout", assemble_timeout),
                             ("receive_timeout", receive_timeout)):
            if value is not None and not 0 < value < float("inf"):
                raise ValueError(f"{label} must be a finite number of seconds > 0, got {value!r}")
        if frame_shape is not None:
            frame_shape = tuple(positive_int("frame_shape", n) for n in frame_shape)
            if len(frame_shape) != 2:
                raise ValueError(f"frame_shape must be (ny, nx), got {frame_shape!r}")
        self.stop_at_end = stop_at_end
        self.receive_timeout = receive_timeout
        self.name = name or " + ".join(self.endpoints)
        self.ended = threading.Event()
        self._frames_in_flight = self.queue_chunks * self.chunk_frames
        self._assembler = Assembler(len(self.endpoints), frame_shape,
                                    mask=incomplete == "mask", masked_value=MASKED_VALUE,
                                    timeout=assemble_timeout,
                                    max_waiting=self._frames_in_flight)
        self._queue = ChunkQueue(self.queue_chunks)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(("frames_processed", "frames_dropped", "frames_yielded",
                                      "frames_built", "messages"), 0)
        self._refused: dict[str, int] = {}
        self._last_malformed: str | None = None
        self._shape_known = threading.Event()
        if frame_shape is not None:
            self._shape_known.set()
        self._last_message = time.monotonic()
        self._error: BaseException | None = None
        # Whether the last thing an iteration took was an acquisition's end (`unread`).
        self._end_read = False
        self._stop = threading.Event()
        self._halting = False
        self._context = zmq.Context()
        self._sockets: list[zmq.Socket] = []
        for endpoint in self.endpoints:
            self._connect(endpoint)
        self._thread = threading.Thread(target=self._receive, daemon=True,
                                        name="aare_lab-stream-source")
        self._thread.start()

    def _connect(self, endpoint: str) -> None:
        socket = self._context.socket(zmq.SUB)
        socket.setsockopt(zmq.LINGER, 0)
        # The frames ZeroMQ may hold per socket: as many as the chunk queue, so that
        # memory stays bounded even when this thread falls behind.
        socket.setsockopt(zmq.RCVHWM, self._frames_in_flight)
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        self._sockets.append(socket)
        try:
            socket.connect(endpoint)
        except zmq.ZMQError as err:
            self._context.destroy(linger=0)
            raise ValueError(f"cannot connect to {endpoint}: {err}") from None

    @property
    def frame_shape(self) -> tuple[int, int]:
        """``(ny, nx)`` of the frames, waiting for the format to settle if not given.

        Raises
        ------
        StreamTimeout
            When no usable data header arrived within ``receive_timeout`` (or
            `SHAPE_WAIT`) seconds.
        """
        wait = SHAPE_WAIT if self.receive_timeout is None else self.receive_timeout
        if not self._shape_known.wait(wait):
            self._raise_error()
            raise StreamTimeout(
                f"no usable frame header from {self.describe()} within {wait:g} s: is the "
                "receiver streaming (rx_zmqstream 1) on that port, and is it acquiring?"
                + _malformed_hint(self.stats))
        return self._assembler.frame_shape

    @property
    def stats(self) -> StreamStats:
        """A snapshot of the counts."""
        a = self._assembler
        with self._lock:
            counts = dict(self._counts)
            refused = dict(self._refused)
            for kind, n in a.refused.items():
                refused[kind] = refused.get(kind, 0) + n
            built = counts.pop("frames_built")
            return StreamStats(
                frames_received=a.received, frames_lost=a.lost, frames_incomplete=a.incomplete,
                frames_queued=built - counts["frames_dropped"] - counts["frames_processed"],
                messages_malformed=sum(refused.values()), refused=refused,
                acquisitions=a.acquisitions, acquisitions_ended=a.acquisitions_ended,
                end_messages=a.end_messages,
                last_malformed=self._last_malformed or a.last_refused, **counts)

    @property
    def frames_dropped(self) -> int:
        """Frames dropped because the consumer fell behind (as `PacedSource` has it)."""
        return self.stats.frames_dropped

    def mark_processed(self, n: int) -> None:
        """Count ``n`` more frames as processed by the consumer."""
        self._count(frames_processed=int(n))

    def _count(self, **increments) -> None:
        with self._lock:
            for key, value in increments.items():
                self._counts[key] += value

    def describe(self) -> str:
        """The endpoints."""
        return f"the ZeroMQ stream {self.name}"

    def _reader(self):
        raise TypeError(f"{self.describe()} is a live stream: read it in order with chunks()")

    def chunks(self, chunk_frames: int | None = None, start: int = 0,
               stop: int | None = None, *, with_headers: bool = False,
               with_acquisition: bool = False, until: threading.Event | None = None
               ) -> Iterator[FrameChunk] | Iterator[tuple]:
        """Iterate over the frames as they arrive.

        ``chunk_frames`` is fixed at construction (the argument is accepted for the
        `FrameSource` signature and ignored); ``start`` must be 0 and ``stop`` None: a
        live stream has no positions. Chunks given back with `unread` come first.

        Parameters
        ----------
        with_headers
            Yield ``(chunk, headers)`` with the JSON headers of every frame's parts.
        with_acquisition
            Yield ``(chunk, acquisition)`` (after ``headers`` with both): the acquisition
            of the chunk's frames, from 1.
        until
            Once set, the iteration ends (within `POLL_MS`) and takes nothing more from
            the stream: a consumer that stops lets go of it at once.

        Yields
        ------
        FrameChunk or tuple
            Frames in frame-number order within an acquisition.

        Raises
        ------
        ValueError
            For positions, or a closed source.
        """
        if start != 0 or stop is not None:
            raise ValueError(f"{self.describe()} is a live stream: it has no positions")
        if self._stop.is_set():
            raise ValueError(f"{self.describe()} is closed")
        return self._iterate(with_headers, with_acquisition, until)

    def unread(self, chunks: list) -> None:
        """Give back chunks taken from `chunks` but not processed (a consumer stopped):
        the next iteration yields them first, in the order given, before anything newer.

        Parameters
        ----------
        chunks
            As `chunks` yielded them: `FrameChunk` s, or tuples of a chunk with its
            headers (a list) and its acquisition (an int); maybe none. Chunks given back
            without them have None for them. With ``stop_at_end``, an end of the
            acquisition the iteration read after them goes back after them.
        """
        items = [_queued(item) for item in chunks]
        self._count(frames_yielded=-sum(len(chunk.numbers) for chunk, _, _ in items))
        # The acquisition's end, if the iteration read it after these: it goes back too,
        # so that the next iteration ends where this one would have.
        end, self._end_read = (END if self._end_read else None), False
        self._queue.put_back(items, then=end)

    def _iterate(self, with_headers: bool, with_acquisition: bool,
                 until: threading.Event | None):
        began = time.monotonic()
        while True:
            if until is not None and until.is_set():
                return
            item = self._queue.get(POLL_MS / 1000)
            if item is None:
                self._raise_error()
                quiet = time.monotonic() - max(self._last_message, began)
                if self._stop.is_set() or (self.receive_timeout is not None
                                           and quiet > self.receive_timeout):
                    return
                continue
            if item is _CLOSED:
                self._raise_error()
                return
            if item is END:
                if self.stop_at_end:
                    self._end_read = True
                    return
                continue
            self._end_read = False
            chunk, headers, acquisition = item
            self._count(frames_yielded=len(chunk.numbers))
            if not (with_headers or with_acquisition):
                yield chunk
            else:
                yield (chunk, *([headers] if with_headers else []),
                       *([acquisition] if with_acquisition else []))

    def _raise_error(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"reading {self.describe()} failed") from self._error

    def halt(self) -> None:
        """Stop reading the stream, counting what reached this process: the messages
        still in the sockets' buffers are read, the frames waiting for parts decided,
        and every frame not processed is counted in ``frames_queued`` (those read now
        are counted only). Then close (idempotent; chunks already queued stay readable
        until then)."""
        self._halting = True
        self.close()

    def close(self) -> None:
        """Stop the thread and close the sockets; idempotent and prompt."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        if not self._context.closed:
            self._context.term()

    def __enter__(self) -> StreamSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # The socket thread: only it touches the sockets and the assembler.

    def _receive(self) -> None:
        builder = ChunkBuilder(self.chunk_frames)
        poller = zmq.Poller()
        for socket in self._sockets:
            poller.register(socket, zmq.POLLIN)
        held: set[int] = set()
        try:
            while not self._stop.is_set():
                # A socket whose part of the acquisition has ended is not polled (nor
                # read) until the others end it too: its queue holds the next one.
                for index, socket in enumerate(self._sockets):
                    hold = self._assembler.holding(index)
                    if hold and index not in held:
                        poller.unregister(socket)
                        held.add(index)
                    elif not hold and index in held:
                        poller.register(socket, zmq.POLLIN)
                        held.discard(index)
                if len(held) == len(self._sockets):
                    time.sleep(POLL_MS / 1000)
                ready = dict(poller.poll(POLL_MS))
                for index, socket in enumerate(self._sockets):
                    if socket in ready:
                        self._drain(index, socket, builder)
                now = time.monotonic()
                self._handle(self._assembler.poll(now), builder)
                if builder.first is not None and now - builder.first >= FLUSH_AFTER:
                    self._flush(builder)
            if self._halting:
                self._read_rest(builder)
        except BaseException as err:  # handed to the consumer, raised there
            self._error = err
        finally:
            for socket in self._sockets:
                socket.close(linger=0)
            self._queue.put_marker(_CLOSED)

    def _drain(self, index: int, socket: zmq.Socket, builder: ChunkBuilder,
               burst: int = BURST, hold: bool = True) -> None:
        for _ in range(burst):
            if hold and self._assembler.holding(index):
                return
            try:
                message = socket.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            now = self._last_message = time.monotonic()
            self._count(messages=1)
            try:
                part = parse_message(message)
            except MalformedMessage as err:
                with self._lock:
                    self._refused[err.kind] = self._refused.get(err.kind, 0) + 1
                    self._last_malformed = f"{self.endpoints[index]}: {err}"
                continue
            out = (self._assembler.end(index, now) if part is None
                   else self._assembler.add(index, part, now))
            self._handle(out, builder)

    def _read_rest(self, builder: ChunkBuilder) -> None:
        """At a halt: what the sockets hold now (at most their high-water mark each, so
        that a publisher still sending cannot keep the halt waiting) and the frames
        waiting for parts, counted and not queued."""
        self._flush(builder)
        for index, socket in enumerate(self._sockets):
            self._drain(index, socket, builder, burst=self._frames_in_flight, hold=False)
        self._handle(self._assembler.flush(), builder)

    def _handle(self, out: list[Frame | Boundary], builder: ChunkBuilder) -> None:
        for item in out:
            if isinstance(item, Boundary):
                self._flush(builder)
                if item.kind == "start":
                    self.ended.clear()
                elif item.ended:
                    self._queue.put_marker(END)
                    self.ended.set()
            elif item.image is None:
                continue
            elif self._halting:
                self._count(frames_built=1)
            else:
                self._count(frames_built=1)
                if builder.add(item):
                    self._flush(builder)
        if self._assembler.frame_shape is not None:
            self._shape_known.set()

    def _flush(self, builder: ChunkBuilder) -> None:
        if self._halting:
            builder.take()  # counted as built: queued, never handed on
            return
        taken = builder.take()
        if taken is not None and not self._queue.put_chunk(taken):
            self._count(frames_dropped=len(taken[0].numbers))


def _endpoints(endpoints) -> list[str]:
    given = [endpoints] if isinstance(endpoints, str) else list(endpoints)
    if not given or not all(isinstance(e, str) and e for e in given):
        raise ValueError(f"give one or more endpoints such as 'tcp://127.0.0.1:30001', "
                         f"got {endpoints!r}")
    return [e if "://" in e else f"tcp://{e}" for e in given]


def _queued(item) -> tuple[FrameChunk, list | None, int | None]:
    """``(chunk, headers, acquisition)`` of an item as `StreamSource.chunks` yields it."""
    if isinstance(item, FrameChunk):
        return item, None, None
    chunk, *rest = item
    headers = next((value for value in rest if isinstance(value, list)), None)
    acquisition = next((value for value in rest if isinstance(value, int)), None)
    return chunk, headers, acquisition


def _malformed_hint(stats: StreamStats) -> str:
    if not stats.messages_malformed:
        return ""
    return (f" {stats.messages_malformed} messages were malformed, the last: "
            f"{stats.last_malformed}")
