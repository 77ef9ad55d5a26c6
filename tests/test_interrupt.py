"""Ctrl-C is not lost where Python drops the exception it raises (`aare_lab.runtime.interrupt`)."""

import signal
import sys
import weakref

import pytest

from aare_lab.finders import make_finder
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import train_pedestal
from aare_lab.runtime import interrupt
from aare_lab.simulate import Detector, simulate_run


class Dropped:
    """An object whose weakref callback receives SIGINT: Python prints the
    KeyboardInterrupt as "Exception ignored" and drops it."""


def sigint_in_a_weakref_callback():
    obj = Dropped()
    keep = weakref.ref(obj, lambda ref: signal.raise_signal(signal.SIGINT))
    del obj
    return keep


def error_in_a_weakref_callback():
    def fail(ref):
        raise ValueError("a real error in a callback")
    obj = Dropped()
    keep = weakref.ref(obj, fail)
    del obj
    return keep


@pytest.fixture(autouse=True)
def python_default():
    """SIGINT as Python sets it at start in a terminal (a job in the background starts with
    it ignored); restored after the test."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_an_interrupt_dropped_in_a_callback_is_raised_at_the_next_check(monkeypatch):
    """Raised again by `check`, and not printed as "Exception ignored" where Python drops
    it; other exceptions Python drops still reach the hook that was there."""
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with interrupt.raising_interrupts():
        sigint_in_a_weakref_callback()  # no exception reaches here
        assert reported == []
        error_in_a_weakref_callback()
        assert [type(r.exc_value) for r in reported] == [ValueError]
        with pytest.raises(KeyboardInterrupt):
            interrupt.check()
    interrupt.check()  # the block's end forgets it
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert sys.unraisablehook == reported.append


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_find_stops_between_chunks_when_its_interrupt_was_dropped():
    run = simulate_run(n_dark=20, n_frames=8, detector=Detector(frame_shape=(16, 16)), seed=1)
    finder = make_finder(FinderSpec("frozen", n_pedestal=20),
        train_pedestal(run.dark, 20, progress=False), chunk_frames=2)
    with interrupt.raising_interrupts():
        sigint_in_a_weakref_callback()
        with pytest.raises(KeyboardInterrupt):
            finder.find(run.frames, progress=False)


def test_an_ignored_interrupt_stays_ignored():
    """A run started with SIGINT ignored (``nohup``, a background job) is not made
    interruptible: the block leaves the handler alone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with interrupt.raising_interrupts():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)
        interrupt.check()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
