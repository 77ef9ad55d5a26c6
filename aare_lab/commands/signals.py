"""SIGINT and SIGTERM as a request to stop: long-running commands end cleanly on them."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: Callable[[str], None]) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM call ``stop(reason)`` instead of killing.

    A second signal raises `KeyboardInterrupt`, for a run that does not stop. The
    previous handlers come back at the end of the block (main thread only, as Python's
    signal handlers are).
    """
    caught: list[str] = []

    def handle(number, frame) -> None:
        if caught:
            raise KeyboardInterrupt
        caught.append(signal.Signals(number).name)
        stop(f"{caught[0]} received")

    previous = {number: signal.signal(number, handle) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
