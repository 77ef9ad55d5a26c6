"""SIGINT and SIGTERM as a request to stop: long-running commands end cleanly on them."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: Callable[[str], None],
                    interrupt: Callable[[str], None] | None = None) -> Iterator[list[str]]:
    """Within the block, SIGINT and SIGTERM call ``stop(reason)`` instead of killing.

    The second signal calls ``interrupt(reason)`` (a run that ends at once, its outputs
    still whole), or without one raises `KeyboardInterrupt`; a signal after that raises
    `KeyboardInterrupt` in any case, for a run that does not end. The previous handlers
    come back at the end of the block (main thread only, as Python's signal handlers
    are). The block gets the names of the signals caught, in order, as they come.
    """
    caught: list[str] = []

    def handle(number, frame) -> None:
        caught.append(signal.Signals(number).name)
        if len(caught) == 1:
            stop(f"{caught[0]} received")
        elif len(caught) == 2 and interrupt is not None:
            interrupt(f"interrupted by a second signal ({caught[1]})")
        else:
            raise KeyboardInterrupt

    previous = {number: signal.signal(number, handle) for number in STOP_SIGNALS}
    try:
        yield caught
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
