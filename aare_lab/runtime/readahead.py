"""Read an iterator ahead on its own thread, so that reading overlaps the consumer's work
and a consumer waiting on a live stream can still act on time."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

#: Seconds between checks of the stop event while nothing arrives.
POLL = 0.1
#: Seconds to wait, after a stop, for the reading thread to let go of its item.
READER_JOIN = 2.0

_END = object()


def read_ahead(items: Iterator, stop: threading.Event, depth: int = 2,
               tick: bool = False, *, hold: threading.Event | None = None,
               unread: Callable[[list], None] | None = None) -> Iterator:
    """Iterate over ``items`` with the next ones read on their own thread meanwhile.

    Parameters
    ----------
    items
        A generator (closed by the reading thread when it is done: a live source then
        lets go of its stream). It should end by itself soon after ``stop`` is set (a
        live stream's ``chunks(until=stop)``); otherwise its thread waits inside it, as a
        daemon, and what it reads then is lost.
    stop
        Ends the iteration: checked before each item is handed out, and every `POLL`
        seconds while nothing arrives (an item being taken as it is set is still handed
        out). Leaving the iteration early (``break``, an exception) sets it.
    depth
        Items read ahead at most.
    tick
        Yield None every `POLL` seconds while nothing arrives, so that the consumer can
        do timed work (write its outputs, stop after a duration) on a quiet stream.
    hold
        While set (a pause), no item is handed out; the reading thread goes on until
        ``depth`` items wait.
    unread
        Called once when the iteration ends by ``stop`` or is left early, with the items
        read but never handed out, in their order, maybe none (e.g.
        `aare_lab.sources.StreamSource.unread`, so that the next iteration of the stream
        starts with them and nothing read is lost).

    Yields
    ------
    The items (or None, with ``tick``); an error of the reader is raised here.
    """
    ready: queue.Queue = queue.Queue(depth)
    # The item the reading thread held when the stop came, for `unread`.
    held: list = []

    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=POLL)
                return True
            except queue.Full:
                pass
        held.append(item)
        return False

    def read() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            end = _END
        except Exception as err:  # noqa: BLE001 -- handed to the consumer, which raises it
            end = err
        finally:
            items.close()
        put(end)

    reader = threading.Thread(target=read, daemon=True, name="aare_lab-read-ahead")
    reader.start()
    # Ended as the items did (their end, or their error): nothing read is left to give back.
    finished = False
    try:
        while True:
            while hold is not None and hold.is_set() and not stop.is_set():
                stop.wait(POLL / 2)
            if stop.is_set():
                return
            try:
                item = ready.get(timeout=POLL)
            except queue.Empty:
                if tick:
                    yield None
                continue
            if item is _END:
                finished = True
                return
            if isinstance(item, Exception):
                finished = True
                raise item
            yield item
    finally:
        if not finished:
            # Stopped, or the consumer left early (break, an exception): the reading stops
            # too, and what it read goes back.
            stop.set()
            if unread is not None:
                _give_back(reader, ready, held, unread)


def _give_back(reader: threading.Thread, ready: queue.Queue, held: list,
               unread: Callable[[list], None]) -> None:
    """Hand the items read but not handed out to ``unread``: first those waiting, then the
    one the reading thread held, once it has finished (stop set)."""
    reader.join(READER_JOIN)
    waiting = []
    while True:
        try:
            waiting.append(ready.get_nowait())
        except queue.Empty:
            break
    unread([item for item in waiting + held
            if item is not _END and not isinstance(item, Exception)])
