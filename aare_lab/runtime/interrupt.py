"""Ctrl-C and SIGTERM that stop a run cleanly, never half-way through a write.

Python raises `KeyboardInterrupt` in whatever the main thread runs when SIGINT arrives:
between two statements of a file write, while worker threads still copy into buffers the
unwinding frees (a segfault), or inside a weakref callback or destructor, where it is
printed as "Exception ignored" and dropped (a long run then went on to its end). Two ways
out:

- `raising_interrupts` (the command line's whole run): SIGINT raises as by default, and
  SIGTERM raises `Terminated`; both are remembered, and `check` raises them again, so a
  dropped one is not lost (nor printed).
- `deferred_interrupts` (a finder's loop over chunks): the signal is only noted, and `check`
  raises it between two chunks, where nothing is half-done: the result file then keeps
  every chunk before.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM under `raising_interrupts`: the run stops as on Ctrl-C (exit status 143)."""


_requested = threading.Event()
_which: list[int] = []
_depth = [0]


def _exception() -> type[KeyboardInterrupt]:
    return Terminated if _which and _which[0] == signal.SIGTERM else KeyboardInterrupt


def _note(number: int) -> None:
    if not _which:
        _which.append(number)
    _requested.set()


def _raising(number, frame) -> None:
    _note(number)
    raise _exception()


def _noting(number, frame) -> None:
    _note(number)


_raising.aare_lab = _noting.aare_lab = True


def check() -> None:
    """Raise the interrupt (`KeyboardInterrupt`, or `Terminated` for SIGTERM) noted under
    `raising_interrupts` or `deferred_interrupts`, if one came."""
    if _requested.is_set():
        raise _exception()


@contextmanager
def _forgotten_at_the_end() -> Iterator[None]:
    """Within nested blocks, an interrupt is remembered until the outermost one ends."""
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        if not _depth[0]:
            _requested.clear()
            _which.clear()


def _ours(handler) -> bool:
    return getattr(handler, "aare_lab", False)


@contextmanager
def raising_interrupts() -> Iterator[None]:
    """Within the block, SIGINT raises `KeyboardInterrupt` as by default, SIGTERM raises
    `Terminated`, and both are remembered for `check`. Where SIGINT is not Python's default
    (ignored, as in a job started in the background or under ``nohup``, or handled by the
    caller), it is left alone, and so is SIGTERM where it is not the system's default; off
    the main thread, where Python takes no signal handlers, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = {number: signal.getsignal(number) for number, default in (
        (signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL))
        if signal.getsignal(number) is default}

    def unraisable(report) -> None:
        # Python's "Exception ignored ... Traceback" of the interrupt it dropped, which
        # `check` raises again, and, once one came, of the AttributeError that finalizers
        # of objects it cut short in their constructors raise for an attribute never set
        # (h5netcdf's File, llvmlite's references): the user would read it as a crash.
        if not (_requested.is_set()
                and isinstance(report.exc_value, (KeyboardInterrupt, AttributeError))):
            previous_hook(report)

    previous_hook = sys.unraisablehook
    with _forgotten_at_the_end():
        for number in taken:
            signal.signal(number, _raising)
        sys.unraisablehook = unraisable
        try:
            yield
        finally:
            if _requested.is_set():
                # Those objects in reference cycles: finalized while the hook is ours.
                gc.collect()
            sys.unraisablehook = previous_hook
            for number, handler in taken.items():
                signal.signal(number, handler)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Within the block, SIGINT (where it is Python's default or `raising_interrupts`') and
    the SIGTERM of `raising_interrupts` are only noted; `check` raises them, and so does the
    block's end if nothing did before. Elsewhere (another handler, off the main thread) it
    does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = {number: handler for number in (signal.SIGINT, signal.SIGTERM)
             if _ours(handler := signal.getsignal(number))
             or (number == signal.SIGINT and handler is signal.default_int_handler)}
    with _forgotten_at_the_end():
        for number in taken:
            signal.signal(number, _noting)
        try:
            yield
        finally:
            for number, handler in taken.items():
                signal.signal(number, handler)
        check()


__all__ = ["Terminated", "check", "deferred_interrupts", "raising_interrupts"]
