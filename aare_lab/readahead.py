"""Read an iterator ahead on its own thread, so that reading overlaps the consumer's work
and a consumer waiting on a live stream can still act on time."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

#: Seconds between checks of the stop event while nothing arrives.
POLL = 0.1

_END = object()


def read_ahead(items: Iterator, stop: threading.Event, depth: int = 2,
               tick: bool = False) -> Iterator:
    """Iterate over ``items`` with the next ones read on their own thread meanwhile.

    Parameters
    ----------
    items
        A generator (closed by the reading thread when it is done: a live source then
        lets go of its stream).
    stop
        Ends the iteration (checked every `POLL` seconds) and the reading thread (at its
        next item: a thread blocked inside ``items`` waits there, as a daemon).
    depth
        Items read ahead at most.
    tick
        Yield None every `POLL` seconds while nothing arrives, so that the consumer can
        do timed work (write its outputs, stop after a duration) on a quiet stream.

    Yields
    ------
    The items (or None, with ``tick``); an error of the reader is raised here.
    """
    ready: queue.Queue = queue.Queue(depth)

    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=POLL)
                return True
            except queue.Full:
                pass
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

    threading.Thread(target=read, daemon=True, name="aare_lab-read-ahead").start()
    while True:
        try:
            item = ready.get(timeout=POLL)
        except queue.Empty:
            if stop.is_set():
                return
            if tick:
                yield None
            continue
        if item is _END:
            return
        if isinstance(item, Exception):
            raise item
        yield item
