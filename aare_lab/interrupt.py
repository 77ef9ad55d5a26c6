"""Ctrl-C that is not lost.

Python raises `KeyboardInterrupt` in whatever the main thread runs when SIGINT arrives.
Inside a weakref callback or a destructor (freed arrays, HDF5 objects) it is printed as
"Exception ignored" and dropped, and a long run went on to its end (seen in CI: ``aare-lab
find`` finished a 4000-frame run after Ctrl-C). Under `raising_interrupts` the handler also
remembers the interrupt, and `check`, called between chunks (`Finder.find`), raises it
again; such a dropped interrupt is not printed either, since it is not lost.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_requested = threading.Event()


def check() -> None:
    """Raise `KeyboardInterrupt` if SIGINT came under `raising_interrupts` (again, in case
    the first was raised where Python drops exceptions)."""
    if _requested.is_set():
        raise KeyboardInterrupt


@contextmanager
def raising_interrupts() -> Iterator[None]:
    """Within the block, SIGINT raises `KeyboardInterrupt` as by default and is remembered
    for `check`. Where SIGINT is not Python's default (ignored, as in a job started in the
    background or under ``nohup``, or handled by the caller), and off the main thread,
    where Python takes no signal handlers, it does nothing."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def handle(number, frame) -> None:
        _requested.set()
        raise KeyboardInterrupt

    def unraisable(report) -> None:
        # Python's "Exception ignored ... Traceback" of the interrupt it dropped, which
        # `check` raises again: the user would read it as a crash.
        if not (isinstance(report.exc_value, KeyboardInterrupt) and _requested.is_set()):
            previous_hook(report)

    previous_hook = sys.unraisablehook
    previous = signal.signal(signal.SIGINT, handle)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous)
        _requested.clear()
