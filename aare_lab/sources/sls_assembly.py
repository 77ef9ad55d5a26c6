"""Frames from the parts that slsReceiver's sockets stream, and the acquisitions they form.

`Assembler` knows nothing of sockets or threads: it is fed parts and end messages with the
time they came, and answers with what is now decided, in order. That keeps the rules of
`aare_lab.sources.sls_stream` (see its docstring) in one place that tests can drive.

Each socket streams its frames in increasing frame number, so a frame that waits for the
part of socket ``s`` is given up as soon as ``s`` has sent a later frame or its end
message; only a socket that says nothing makes a frame wait the full timeout. Frames are
decided in frame-number order, so a complete frame never overtakes an undecided one.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .sls_header import MalformedMessage, Part

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
    """

    number: int
    image: np.ndarray | None
    headers: tuple[dict, ...]
    complete: bool


class Boundary(NamedTuple):
    """An acquisition starts (``ended=False``) or has ended with its end messages."""

    ended: bool


START = Boundary(False)
END = Boundary(True)


@dataclass
class _Waiting:
    since: float
    parts: dict[tuple[int, int], Part] = field(default_factory=dict)
    sockets: set[int] = field(default_factory=set)


class Assembler:
    """Frames assembled from the parts of ``n_sockets`` sockets, by frame number.

    Parameters
    ----------
    n_sockets
        Sockets feeding it, numbered from 0.
    frame_shape
        ``(ny, nx)`` the frames must have; None takes the first header's.
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
    received, lost, incomplete, acquisitions, acquisitions_ended, end_messages
        Counts as `aare_lab.sources.sls_stream.StreamStats` reports them.
    """

    def __init__(self, n_sockets: int, frame_shape: tuple[int, int] | None = None, *,
                 mask: bool = False, masked_value: int = 0, timeout: float = 0.5,
                 max_waiting: int = 512):
        self.n_sockets = n_sockets
        self.frame_shape = frame_shape
        self.mask = mask
        self.masked_value = masked_value
        self.timeout = timeout
        self.max_waiting = max_waiting
        self.det_type: int | None = None
        self.ports: tuple[int, int] | None = None
        self.received = self.lost = self.incomplete = 0
        self.acquisitions = self.acquisitions_ended = self.end_messages = 0
        self._running = False
        self._reset()

    def _reset(self) -> None:
        self._waiting: dict[int, _Waiting] = {}
        self._order: list[int] = []
        self._last: list[int | None] = [None] * self.n_sockets
        self._key: list[tuple[int, int] | None] = [None] * self.n_sockets
        self._ended = [False] * self.n_sockets
        self._end_since: float | None = None
        self._decided: int | None = None

    def add(self, socket: int, part: Part, now: float) -> list[Frame | Boundary]:
        """Take a part from ``socket``; return the frames and boundaries now decided.

        Raises
        ------
        MalformedMessage
            For a part of another detector type or geometry than the stream's, or a
            second copy of a part.
        """
        self._check(part)
        out: list[Frame | Boundary] = []
        if self._running and (self._ended[socket] or self._restarted(socket, part)):
            out += self._finish(ended=self._ended[socket])
        if not self._running:
            self._running = True
            self.acquisitions += 1
            out.append(START)
        self._last[socket] = part.number
        self._key[socket] = part.acquisition_key
        if self._decided is not None and part.number <= self._decided:
            return out  # too late: its frame was already given up
        waiting = self._waiting.get(part.number)
        if waiting is None:
            waiting = self._waiting[part.number] = _Waiting(now)
            heapq.heappush(self._order, part.number)
        if part.position in waiting.parts:
            raise MalformedMessage(f"second part at row, column {part.position} of frame "
                                   f"{part.number}")
        waiting.parts[part.position] = part
        waiting.sockets.add(socket)
        return out + self._decide(now)

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
        return out

    def poll(self, now: float) -> list[Frame | Boundary]:
        """Give up what has waited ``timeout``: frames, and an acquisition's other ends."""
        out = self._decide(now)
        if self._end_since is not None and now - self._end_since >= self.timeout:
            out += self._finish(ended=True)
        return out

    def _check(self, part: Part) -> None:
        if self.det_type is None:
            ports = part.ports
            shape = (part.image.shape[0] * ports[0], part.image.shape[1] * ports[1])
            if self.frame_shape is not None and shape != tuple(self.frame_shape):
                raise MalformedMessage(
                    f"frames of {shape[0]}x{shape[1]} pixels (shape {part.header['shape']}, "
                    f"detshape {part.header['detshape']}), not the "
                    f"{self.frame_shape[0]}x{self.frame_shape[1]} expected")
            self.det_type, self.ports, self.frame_shape = part.header["detType"], ports, shape
            self._part_shape = part.image.shape
            return
        if part.header["detType"] != self.det_type:
            raise MalformedMessage(f"detType {part.header['detType']} in a stream of "
                                   f"detType {self.det_type}")
        if part.ports != self.ports or part.image.shape != self._part_shape:
            raise MalformedMessage(
                f"shape {part.header['shape']}, detshape {part.header['detshape']} in a "
                f"stream of shape {list(self._part_shape[::-1])}, detshape "
                f"{list(self.ports[::-1])}")

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
        if self._decided is not None and number > self._decided + 1:
            self.lost += number - self._decided - 1
        self._decided = number
        self.received += 1
        parts = [waiting.parts[key] for key in sorted(waiting.parts)]
        complete = (len(parts) == self.ports[0] * self.ports[1]
                    and all(part.complete for part in parts))
        headers = tuple(part.header for part in parts)
        if not complete:
            self.incomplete += 1
            if not self.mask:
                return Frame(number, None, headers, False)
        if complete and len(parts) == 1:
            return Frame(number, parts[0].image, headers, True)
        image = np.full(self.frame_shape, self.masked_value, np.uint16)
        py, px = self._part_shape
        for part in parts:
            row, column = part.position
            block = image[row * py:(row + 1) * py, column * px:(column + 1) * px]
            block[...] = part.image
            if not part.complete:
                block[block == PADDING] = self.masked_value
        return Frame(number, image, headers, complete)

    def _finish(self, ended: bool) -> list[Frame | Boundary]:
        out: list[Frame | Boundary] = self._decide(0.0, force=True)
        if ended:
            self.acquisitions_ended += 1
            out.append(END)
        self._running = False
        self._reset()
        return out
