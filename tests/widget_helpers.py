"""Shared helpers for the widget tests: both figure hosts, other threads, thread records,
and the warnings a widget shows as notes instead.

The fixture ``interactive`` (tests/conftest.py) runs a test with the ipympl canvas and
with the static PNG host.
"""

import threading
import warnings
from contextlib import contextmanager

from aare_lab.detector.dark.photons import IlluminatedDarkWarning
from aare_lab.detector.dark.pixels import DarkPixelWarning
from aare_lab.detector.dark.quality import DarkFrameWarning
from aare_lab.detector.jungfrau import GainBitsWarning
from aare_lab.model.clipping import WindowClippedWarning

#: What `find` warns about and a widget shows as a note instead.
NOTED = (DarkFrameWarning, DarkPixelWarning, GainBitsWarning, IlluminatedDarkWarning,
         WindowClippedWarning)


def in_thread(func, *args, name: str = "subshell", timeout: float = 10.0):
    """Run ``func(*args)`` on a new thread and wait for it, as ipykernel 7 runs a widget
    message on a subshell thread; the thread's exception is re-raised here."""
    errors = []

    def run():
        try:
            func(*args)
        except BaseException as err:  # handed to the test's thread
            errors.append(err)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{name} thread still running after {timeout} s"
    if errors:
        raise errors[0]
    return thread.ident


def browser_draw(host) -> None:
    """Answer a ``draw_idle`` as the browser does: an ipympl ``draw`` message sent from
    another thread (a subshell). A static host has no browser round trip: nothing."""
    if host.interactive:
        in_thread(host.send_event, {"type": "draw"})


def record_threads(obj, method: str) -> list[int]:
    """Wrap ``obj.method`` so that every call records the ident of the calling thread."""
    calls: list[int] = []
    original = getattr(obj, method)

    def wrapped(*args, **kwargs):
        calls.append(threading.get_ident())
        return original(*args, **kwargs)

    setattr(obj, method, wrapped)
    return calls


@contextmanager
def no_noted_warnings():
    """Fail if the block raised, on any thread, a warning that a widget must show as a
    note instead (`NOTED`). Used on the test's (the UI) thread around a whole widget run:
    warnings' state is process-wide, so this records a worker's warnings too."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield
    raised = [f"{w.category.__name__}: {w.message}" for w in record
              if issubclass(w.category, NOTED)]
    assert raised == [], raised
