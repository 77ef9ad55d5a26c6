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


class HalfBuilt:
    """An object whose constructor SIGINT cuts short: its finalizer then fails on an
    attribute never set, as h5netcdf's File and llvmlite's references do."""

    def __init__(self):
        signal.raise_signal(signal.SIGINT)
        self.handle = 1

    def __del__(self):
        self.handle


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


def test_objects_an_interrupt_cut_short_are_finalized_quietly(monkeypatch):
    """Their finalizer's AttributeError is not printed as "Exception ignored" once the
    interrupt came (the user would read it as a crash); other errors still are."""
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with interrupt.raising_interrupts():
        try:
            HalfBuilt()
        except KeyboardInterrupt:
            pass
        assert reported == []
        error_in_a_weakref_callback()
        assert [type(r.exc_value) for r in reported] == [ValueError]
    reported.clear()
    obj = object.__new__(HalfBuilt)
    del obj  # outside the block, no interrupt: reported as before
    assert [type(r.exc_value) for r in reported] == [AttributeError]


def test_the_command_line_stops_on_an_interrupt_dropped_at_start_up(monkeypatch, capsys,
                                                                    tmp_path):
    """Ctrl-C during start-up's imports may land in an import lock's callback, where Python
    drops it; the command stops all the same, with one line."""
    from aare_lab import cli

    build = cli.build_parser

    def parser_after_a_dropped_interrupt():
        sigint_in_a_weakref_callback()
        return build()

    monkeypatch.setattr(cli, "build_parser", parser_after_a_dropped_interrupt)
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    missing = str(tmp_path / "missing.npy")
    out = str(tmp_path / "out.nc")
    assert cli.main(["find", "--dark", missing, "--frames", missing, "--out", out]) \
        == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "aare-lab find: interrupted\n"
    assert reported == []
