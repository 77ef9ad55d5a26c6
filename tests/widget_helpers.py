"""Shared helpers for the widget tests: both figure hosts, other threads, thread records.

The fixture ``interactive`` (tests/conftest.py) runs a test with the ipympl canvas and
with the static PNG host.
"""

import threading



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
