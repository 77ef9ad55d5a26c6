"""Frames published the way slsReceiver 9.2.0 streams them, for demos and tests.

`StreamPublisher` binds one ZeroMQ PUB socket per UDP interface (``port + i``, as the
receiver binds ``rx_zmqport + i``) and sends each frame as the receiver does: a two-part
message of the JSON header (`aare_lab.sources.sls_header.format_header`) and the image,
and after an acquisition one end-of-acquisition header per socket. With several
interfaces each socket sends its band of rows, as MÖNCH and JUNGFRAU stream them
(``detshape [1, n]``, ``row`` = interface).

Examples
--------
>>> import numpy as np
>>> from aare_lab.sources import StreamSource
>>> with StreamPublisher("tcp://127.0.0.1:0") as pub:      # port 0: any free port
...     with StreamSource(pub.endpoints) as source:
...         pub.wait_for_subscribers()
...         pub.send_frames(np.zeros((3, 4, 6), np.uint16))
...         pub.end_acquisition()
...         [chunk.numbers.tolist() for chunk in source.chunks()]
[[1, 2, 3]]
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable

import numpy as np
import zmq

from aare_lab.checks import positive_int
from aare_lab.frames import as_frame_stack
from aare_lab.sources.sls_header import DETECTOR_TYPES, END_HEADER, format_header

#: Bytes of image per UDP packet, by detector (slsReceiver's GeneralData ``dataSize``).
PACKET_BYTES = {"moench": 6400, "jungfrau": 8192}
#: The frame shape of one module, by detector.
MODULE_SHAPES = {"moench": (400, 400), "jungfrau": (512, 1024)}

#: Milliseconds `StreamPublisher.close` waits for what is still queued (the end message).
LINGER_MS = 1000

_ENDPOINT = re.compile(r"(?P<base>(?:tcp://)?[^/]*:)(?P<port>\d+)")


class StreamPublisher:
    """A stand-in for slsReceiver's ZeroMQ stream.

    Parameters
    ----------
    endpoint
        Where to bind, ``"tcp://host:port"``; port 0 picks a free one. With several
        interfaces the next ones bind the following ports.
    detector
        ``"moench"`` or ``"jungfrau"``: the ``detType`` and packet size written.
    interfaces
        Sockets the frame's rows are split over, at least 1; the rows must divide evenly.
    total_frames
        Frames per acquisition, for the ``progress`` field (0 when None).
    hwm
        ZeroMQ send high-water mark in messages (the receiver's ``rx_zmqhwm``; None keeps
        ZeroMQ's 1000, as ``rx_zmqhwm -1`` does). A subscriber that falls behind loses
        whole frames beyond it.

    Attributes
    ----------
    endpoints
        The bound endpoints, one per interface.
    frames_sent
        Frames sent so far.
    """

    def __init__(self, endpoint: str = "tcp://127.0.0.1:30001", *, detector: str = "moench",
                 interfaces: int = 1, total_frames: int | None = None,
                 hwm: int | None = None):
        if detector not in DETECTOR_TYPES:
            raise ValueError(f"detector must be one of {sorted(DETECTOR_TYPES)}, got "
                             f"{detector!r}")
        match = _ENDPOINT.fullmatch(endpoint)
        if match is None:
            raise ValueError(f"endpoint must look like 'tcp://127.0.0.1:30001', got "
                             f"{endpoint!r}")
        self.detector = detector
        self.interfaces = positive_int("interfaces", interfaces)
        self.total_frames = None if total_frames is None else positive_int("total_frames",
                                                                           total_frames)
        self.frames_sent = 0
        self._first: int | None = None
        self._next = 1
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._context = zmq.Context()
        self._sockets: list[zmq.Socket] = []
        self.endpoints: list[str] = []
        base = match["base"] if "://" in match["base"] else f"tcp://{match['base']}"
        port = int(match["port"])
        try:
            for i in range(self.interfaces):
                # XPUB sends exactly what PUB sends, and also hands us the subscriptions,
                # so that wait_for_subscribers knows when nothing sent will be missed.
                socket = self._context.socket(zmq.XPUB)
                socket.setsockopt(zmq.XPUB_VERBOSE, 1)  # one message per subscriber
                socket.setsockopt(zmq.LINGER, LINGER_MS)
                if hwm is not None:
                    socket.setsockopt(zmq.SNDHWM, hwm)
                self._sockets.append(socket)
                if port == 0 and i == 0:
                    socket.bind(f"{base}0")
                    port = int(socket.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])
                else:
                    socket.bind(f"{base}{port + i}")
                self.endpoints.append(f"{base}{port + i}")
        except zmq.ZMQError as err:
            self.close()
            raise ValueError(f"cannot bind {base}{port + len(self.endpoints)}: {err}") from None

    def wait_for_subscribers(self, n: int = 1, timeout: float = 5.0) -> None:
        """Wait until ``n`` subscribers have subscribed on every socket.

        Raises
        ------
        TimeoutError
            When they have not after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        for socket, endpoint in zip(self._sockets, self.endpoints):
            seen = 0
            while seen < n:
                left = deadline - time.monotonic()
                if left <= 0 or not socket.poll(left * 1000):
                    raise TimeoutError(f"{seen} of {n} subscribers on {endpoint} after "
                                       f"{timeout:g} s")
                if socket.recv()[:1] == b"\x01":
                    seen += 1

    def send_frames(self, frames, numbers: Iterable[int] | None = None, *,
                    complete: bool = True) -> None:
        """Send frames of the current acquisition (a new one after `end_acquisition`).

        Parameters
        ----------
        frames
            ``uint16`` frame or stack ``(n, ny, nx)``.
        numbers
            Their frame numbers; by default the acquisition's count goes on (from 1).
        complete
            The ``completeImage`` written: False marks the frames as padded.

        The frames go to ZeroMQ without a copy: change them only after `close`.
        """
        frames = as_frame_stack(frames)
        numbers = (np.arange(self._next, self._next + len(frames)) if numbers is None
                   else np.asarray(list(numbers), np.int64))
        if numbers.shape != (len(frames),):
            raise ValueError(f"{len(frames)} frames but {numbers.size} numbers")
        ny, nx = frames.shape[1:]
        if ny % self.interfaces:
            raise ValueError(f"{ny} rows do not split evenly over {self.interfaces} interfaces")
        rows = ny // self.interfaces
        packets = -(-rows * nx * 2 // PACKET_BYTES[self.detector])
        for frame, number in zip(frames, numbers.tolist()):
            if self._first is None:
                self._first = number
            index = number - self._first
            progress = 0.0 if self.total_frames is None else 100 * (index + 1) / self.total_frames
            for row, socket in enumerate(self._sockets):
                header = format_header(
                    frame_number=number, frame_index=index, shape=(rows, nx),
                    detshape=(self.interfaces, 1), row=row,
                    det_type=DETECTOR_TYPES[self.detector], progress=progress,
                    packets=packets if complete else packets - 1, complete=complete)
                socket.send_multipart([header, frame[row * rows:(row + 1) * rows]],
                                      copy=False)
            self._next = number + 1
            self.frames_sent += 1

    def end_acquisition(self) -> None:
        """Send the end-of-acquisition header on every socket; the next frames start anew."""
        for socket in self._sockets:
            socket.send(END_HEADER)
        self._first, self._next = None, 1

    def stream(self, frames, rate: float, *, acquisitions: int = 1, n_frames: int | None = None,
               dark=None, n_dark: int = 0, pause: float = 0.5, report=None) -> int:
        """Send frames at ``rate`` frames per second, acquisition after acquisition.

        Each acquisition sends ``n_dark`` frames cycling through ``dark``, then
        ``n_frames`` cycling through ``frames``, numbered from 1, then the end message;
        `stop` (or Ctrl-C) ends the current acquisition early, with its end message.

        Parameters
        ----------
        frames
            ``uint16`` stack to send.
        rate
            Frames per second; a sender that falls behind sends at once to catch up.
        acquisitions
            How many.
        n_frames
            Frames of ``frames`` per acquisition (default: all of them once).
        dark, n_dark
            Dark frames to send first, and how many.
        pause
            Seconds between acquisitions.
        report
            Called about once a second with a line saying what was sent.

        Returns
        -------
        int
            Frames sent.
        """
        frames = as_frame_stack(frames)
        if not rate > 0:
            raise ValueError(f"rate must be > 0 frames per second, got {rate!r}")
        n_data = len(frames) if n_frames is None else positive_int("n_frames", n_frames)
        if n_dark:
            dark = as_frame_stack(dark, frames.shape[1:], what="dark frames")
        n = n_dark + n_data
        sent = 0
        for acquisition in range(positive_int("acquisitions", acquisitions)):
            start = last_report = time.perf_counter()
            try:
                for k in range(n):
                    delay = start + k / rate - time.perf_counter()
                    if (delay > 0 and self._stop.wait(delay)) or self._stop.is_set():
                        break
                    frame = dark[k % len(dark)] if k < n_dark else frames[(k - n_dark) % len(frames)]
                    self.send_frames(frame, [k + 1])
                    sent += 1
                    now = time.perf_counter()
                    if report is not None and now - last_report >= 1:
                        report(f"acquisition {acquisition + 1}: {k + 1} of {n} frames, "
                               f"{(k + 1) / (now - start):.0f} frames/s")
                        last_report = now
            finally:
                self.end_acquisition()
            if report is not None:
                report(f"acquisition {acquisition + 1}: sent {k + 1} frames and the end message")
            if self._stop.is_set() or (acquisition + 1 < acquisitions and self._stop.wait(pause)):
                break
        return sent

    def start(self, frames, rate: float, **options) -> None:
        """Run `stream` on a background thread (for notebooks); `stop` ends it."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("the publisher is already streaming")
        self._stop.clear()
        self._thread = threading.Thread(target=self.stream, args=(frames, rate),
                                        kwargs=options, daemon=True,
                                        name="aare_lab-stream-publisher")
        self._thread.start()

    @property
    def streaming(self) -> bool:
        """Whether a background `start` is still sending."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """End a `stream` after its current frame, with the end message; waits ``timeout``
        seconds for a background one (safe in a signal handler of a foreground one)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def close(self) -> None:
        """Stop streaming, send what is queued (`LINGER_MS` at most) and unbind."""
        self.stop()
        for socket in self._sockets:
            socket.close()
        self._context.term()

    def __enter__(self) -> StreamPublisher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
