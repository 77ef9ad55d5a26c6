"""Frames from the parts that slsReceiver's sockets stream, and the acquisitions they form.

`Assembler` knows nothing of sockets or threads: it is fed parts and end messages with the
time they came, and answers with what is now decided, in order. That keeps the rules of
`aare_lab.sources.sls_stream` (see its docstring) in one place that tests can drive.

Each socket streams its frames in increasing frame number, so a frame that waits for the
part of socket ``s`` is given up as soon as ``s`` has sent a later frame or its end
message; only a socket that says nothing makes a frame wait the full timeout. Frames are
decided in frame-number order, so a complete frame never overtakes an undecided one.

What is decided then passes a gate of formats (detector type, ports, shape of a part):
frames of the stream's format are counted and handed on; those of a new format are held
back, at most `SETTLE_FRAMES` frames of at most `SETTLE_FRAMES` formats, until their
format settles or another one does (then they are refused).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .sls_header import Part

#: A padded pixel: the receiver fills missing packets with 0xFF bytes.
PADDING = 0xFFFF


class Frame(NamedTuple):
    """A decided frame.

    Attributes
    ----------
    number
        Its frame number.
    image
        ``(ny, nx)`` ``uint16``; None for an incomplete frame that is skipped.
    headers
        The headers of its parts, ordered by (row, column).
    complete
        Whether every part came, with every packet.
    acquisition
        The acquisition it belongs to, counted from 1 as `Assembler.acquisitions`.
    missed
        Frames of its acquisition lost just before it (a gap in the frame numbers, or
        for the first frame decided, its ``frameIndex`` where the acquisition's start
        was watched).
    """

    number: int
    image: np.ndarray | None
    headers: tuple[dict, ...]
    complete: bool
    acquisition: int = 0
    missed: int = 0


class Boundary(NamedTuple):
    """An acquisition starts (``kind`` "start"), has ended with its end messages ("end")
    or was cut short by the next one ("cut").

    Attributes
    ----------
    missed
        At its end or cut: frames its last part's ``progress`` says were sent after the
        last frame received (`aare_lab.sources.sls_header.Part.acquisition_frames`).
    """

    kind: str
    acquisition: int = 0
    missed: int = 0

    @property
    def ended(self) -> bool:
        """Whether the acquisition ended with its end messages."""
        return self.kind == "end"


START = Boundary("start")
END = Boundary("end")

#: Frames of a new format held back until it is the stream's: one stray message of
#: another shape or detector type never becomes the stream's format.
SETTLE_FRAMES = 8


@dataclass
class _Waiting:
    since: float
    parts: dict[tuple[int, int], Part] = field(default_factory=dict)
    sockets: set[int] = field(default_factory=set)


class Assembler:
    """Frames assembled from the parts of ``n_sockets`` sockets, by frame number.

    The stream's format (detector type, ports and shape of a part) is learned from the
    data: an acquisition whose format is not the stream's yet is held back until
    `SETTLE_FRAMES` of its frames are decided, or it ends with its end messages, or the
    next acquisition has its format too; then its format becomes the stream's. Held
    frames of a format that another one follows first are refused (``refused["format"]``,
    one per part), so stray frames before a run cannot lock the stream onto their format.
    A part of another format than the running acquisition's starts the next acquisition.

    Parameters
    ----------
    n_sockets
        Sockets feeding it, numbered from 0.
    frame_shape
        ``(ny, nx)`` the frames must have (frames of any other shape are refused as of
        another format); None: any shape the data settles on.
    mask
        Build incomplete frames with padded and missing pixels set to ``masked_value``;
        False leaves them unbuilt (``image`` None).
    timeout
        Seconds a frame waits for missing parts, and an acquisition for the end messages
        of the other sockets.
    max_waiting
        Frames that may wait at once; beyond that the oldest is given up.

    Attributes
    ----------
    frame_shape
        The stream's frame shape: given, or that of its format once settled (else None).
    received, lost, incomplete, acquisitions, acquisitions_ended, end_messages
        Counts as `aare_lab.sources.sls_stream.StreamStats` reports them; frames held
        back are counted once their format settles, never if they are refused.
    refused, last_refused
        Messages refused here, by kind (``"repeated"``, ``"format"``), and why the last
        was.
    """

    def __init__(self, n_sockets: int, frame_shape: tuple[int, int] | None = None, *,
                 mask: bool = False, masked_value: int = 0, timeout: float = 0.5,
                 max_waiting: int = 512):
        self.n_sockets = n_sockets
        self.required_shape = None if frame_shape is None else tuple(frame_shape)
        self.frame_shape = self.required_shape
        self.mask = mask
        self.masked_value = masked_value
        self.timeout = timeout
        self.max_waiting = max_waiting
        self.format: tuple | None = None  # the stream's, once settled
        self.received = self.lost = self.incomplete = 0
        self.acquisitions = self.acquisitions_ended = self.end_messages = 0
        self.refused: dict[str, int] = {}
        self.last_refused: str | None = None
        self._refusing = False
        self._running = self._after_end = False
        self._running_format: tuple | None = None  # the running acquisition's
        # What acquisitions of formats not (yet) the stream's gave (their starts, frames,
        # ends or cuts), held back by format, in the order they came.
        self._held: dict[tuple, list[Frame | Boundary]] = {}
        self._reset()

    def _reset(self) -> None:
        self._waiting: dict[int, _Waiting] = {}
        self._order: list[int] = []
        self._last: list[int | None] = [None] * self.n_sockets
        self._key: list[tuple[int, int] | None] = [None] * self.n_sockets
        self._ended = [False] * self.n_sockets
        self._end_since: float | None = None
        self._decided: int | None = None
        self._tail: tuple[int, int | None] | None = None  # (frameIndex, frames) of the last part

    def add(self, socket: int, part: Part, now: float) -> list[Frame | Boundary]:
        """Take a part from ``socket``; return the frames and boundaries now decided.

        A second copy of a part is refused (``refused["repeated"]``).
        """
        out: list[Frame | Boundary] = []
        if self._running and (self._ended[socket] or self._restarted(socket, part)
                              or part.format != self._running_format):
            # Gated before the next starts: what the gate does depends on the format.
            out += self._gate(self._finish(ended=self._ended[socket]))
        if not self._running:
            out += self._gate([self._start(part)])
        self._last[socket] = part.number
        self._key[socket] = part.acquisition_key
        index = part.header["frameIndex"]
        if self._tail is None or index >= self._tail[0]:
            self._tail = (index, part.acquisition_frames)
        if self._decided is not None and part.number <= self._decided:
            return out  # too late: its frame was already given up
        waiting = self._waiting.get(part.number)
        if waiting is None:
            waiting = self._waiting[part.number] = _Waiting(now)
            heapq.heappush(self._order, part.number)
        if part.position in waiting.parts:
            self.refused["repeated"] = self.refused.get("repeated", 0) + 1
            self.last_refused = (f"a second part at row, column {part.position} of frame "
                                 f"{part.number}")
            return out
        waiting.parts[part.position] = part
        waiting.sockets.add(socket)
        return out + self._gate(self._decide(now))

    def _start(self, part: Part) -> Boundary:
        self._running = True
        self.acquisitions += 1
        self._running_format = part.format
        self._ports, self._part_shape = part.ports, part.image.shape
        self._shape = part.frame_shape
        if self._after_end:
            # Its start was watched (the one before ended with its end messages), so
            # frames before the first one received were sent and lost.
            self._decided = part.number - part.header["frameIndex"] - 1
        return Boundary("start", self.acquisitions)

    def holding(self, socket: int) -> bool:
        """Whether ``socket`` has ended the running acquisition while others have not.

        Its next messages belong to the next acquisition: the reader leaves them in
        ZeroMQ's queue until the acquisition ends everywhere (or ``timeout`` after this
        end), so that a socket read ahead of the others cannot end it for them.
        """
        return self._running and self._ended[socket]

    def end(self, socket: int, now: float) -> list[Frame | Boundary]:
        """Take an end-of-acquisition message from ``socket``; a repeat changes nothing."""
        self.end_messages += 1
        if not self._running or self._ended[socket] or self._last[socket] is None:
            return []
        self._ended[socket] = True
        if self._end_since is None:
            self._end_since = now
        out = self._decide(now)
        if all(self._ended):
            out += self._finish(ended=True)
        return self._gate(out)

    def poll(self, now: float) -> list[Frame | Boundary]:
        """Give up what has waited ``timeout``: frames, and an acquisition's other ends."""
        out = self._decide(now)
        if self._end_since is not None and now - self._end_since >= self.timeout:
            out += self._finish(ended=True)
        return self._gate(out)

    def flush(self) -> list[Frame | Boundary]:
        """Decide every waiting frame now and let held frames through (the reader stops:
        what came is counted, whatever its format)."""
        out = self._gate(self._decide(0.0, force=True))
        for fmt in list(self._held):
            out += [self._count(item) for item in self._held.pop(fmt)]
        return out

    def _restarted(self, socket: int, part: Part) -> bool:
        last = self._last[socket]
        return last is not None and (part.number < last
                                     or part.acquisition_key != self._key[socket])

    def _decide(self, now: float, force: bool = False) -> list[Frame]:
        out = []
        while self._order:
            number = self._order[0]
            waiting = self._waiting[number]
            if not (force or len(self._order) > self.max_waiting
                    or now - waiting.since >= self.timeout
                    or self._settled(number, waiting)):
                break
            heapq.heappop(self._order)
            del self._waiting[number]
            out.append(self._frame(number, waiting))
        return out

    def _settled(self, number: int, waiting: _Waiting) -> bool:
        """Whether every socket has sent its part of frame ``number`` or gone past it."""
        return all(s in waiting.sockets or self._ended[s]
                   or (self._last[s] is not None and self._last[s] > number)
                   for s in range(self.n_sockets))

    def _frame(self, number: int, waiting: _Waiting) -> Frame:
        missed = 0 if self._decided is None else max(number - self._decided - 1, 0)
        self._decided = number
        parts = [waiting.parts[key] for key in sorted(waiting.parts)]
        complete = (len(parts) == self._ports[0] * self._ports[1]
                    and all(part.complete for part in parts))
        headers = tuple(part.header for part in parts)
        frame = Frame(number, None, headers, complete, self.acquisitions, missed)
        if not complete and not self.mask:
            return frame
        if complete and len(parts) == 1:
            return frame._replace(image=parts[0].image)
        image = np.full(self._shape, self.masked_value, np.uint16)
        py, px = self._part_shape
        for part in parts:
            row, column = part.position
            block = image[row * py:(row + 1) * py, column * px:(column + 1) * px]
            block[...] = part.image
            if not part.complete:
                block[block == PADDING] = self.masked_value
        return frame._replace(image=image)

    def _finish(self, ended: bool) -> list[Frame | Boundary]:
        out: list[Frame | Boundary] = self._decide(0.0, force=True)
        index, frames = self._tail if self._tail is not None else (0, None)
        missed = 0 if frames is None else max(frames - index - 1, 0)
        out.append(Boundary("end" if ended else "cut", self.acquisitions, missed))
        self._running, self._after_end = False, ended
        self._reset()
        return out

    # What is decided passes here, to be counted, held back or refused by its format.

    def _gate(self, items: list[Frame | Boundary]) -> list[Frame | Boundary]:
        out: list[Frame | Boundary] = []
        for item in items:
            if isinstance(item, Boundary) and item.kind == "start":
                out += self._started()
            if self._refusing:
                if isinstance(item, Frame):
                    ny, nx = self.required_shape
                    self._refuse(len(item.headers), f"{_describe(self._running_format)}, not the "
                                                    f"{ny}x{nx} pixels asked for")
            elif self._running_format == self.format:
                out.append(self._count(item))
            else:
                held = self._held[self._running_format]
                held.append(item)
                frames = sum(isinstance(one, Frame) for one in held)
                if (isinstance(item, Boundary) and item.ended) or frames >= SETTLE_FRAMES:
                    out += self._settle(self._running_format)
        return out

    def _started(self) -> list[Frame | Boundary]:
        """An acquisition starts: one of the stream's format refuses what is held; one held
        of its format settles it; one of a new format is held (the oldest format held is
        refused beyond `SETTLE_FRAMES` formats)."""
        self._refusing = (self.required_shape is not None
                          and _frame_shape(self._running_format) != self.required_shape)
        if self._refusing:
            return []
        if self._running_format == self.format:
            for fmt in list(self._held):
                self._refuse_held(fmt)
            return []
        if self._running_format in self._held:
            return self._settle(self._running_format)
        if len(self._held) >= SETTLE_FRAMES:
            self._refuse_held(next(iter(self._held)))
        self._held[self._running_format] = []
        return []

    def _settle(self, fmt: tuple) -> list[Frame | Boundary]:
        """``fmt`` becomes the stream's format: what was held of it, counted, is handed
        on; what was held of other formats is refused."""
        self.format, self.frame_shape = fmt, _frame_shape(fmt)
        items = self._held.pop(fmt)
        for other in list(self._held):
            self._refuse_held(other)
        return [self._count(item) for item in items]

    def _refuse_held(self, fmt: tuple) -> None:
        parts = sum(len(item.headers) for item in self._held.pop(fmt)
                    if isinstance(item, Frame))
        self._refuse(parts, f"{_describe(fmt)}, a format that no run of frames followed")

    def _refuse(self, parts: int, why: str) -> None:
        if parts:
            self.refused["format"] = self.refused.get("format", 0) + parts
            self.last_refused = f"{parts} parts of {why}"

    def _count(self, item: Frame | Boundary) -> Frame | Boundary:
        self.lost += item.missed
        if isinstance(item, Boundary):
            self.acquisitions_ended += item.ended
        else:
            self.received += 1
            self.incomplete += not item.complete
        return item


def _frame_shape(fmt: tuple) -> tuple[int, int]:
    _, (py, px), (ny, nx) = fmt
    return ny * py, nx * px


def _describe(fmt: tuple) -> str:
    det_type, (py, px), (ny, nx) = fmt
    return f"detType {det_type} frames of {ny * py}x{nx * px} pixels ({py}x{px} parts)"
