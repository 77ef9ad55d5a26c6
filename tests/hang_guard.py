"""End a test run whose test hangs, printing every thread's stack, instead of letting it
stall until the GPU machine's or CI's time is gone.

A GPU kernel that waits for data that never comes (as ``exchange_ab.py``'s second finder
did before 59766f7, handed a kernel built for the other exchange) blocks its test forever,
and one call on the GPU machine has ten minutes. Loaded by ``conftest.py``;
``AARE_LAB_TEST_HANG_S`` sets the limit for every test (seconds).
"""

from __future__ import annotations

import faulthandler
import os

import pytest

#: Seconds after which a test is taken to hang: GPU tests (the slowest took 18 s,
#: ``benchmarks/results/gpu_tests_20261202T1402.xml``), and the others (notebooks in a
#: browser take up to a minute or two on CI's two cores).
HANG_S = {"gpu": 120, "other": 900}

_stderr: int | None = None


def pytest_configure(config):
    # A copy of the real stderr, taken while pytest's capture is suspended: a test's own
    # fd 2 goes to a capture file, which nobody reads once the process has ended.
    global _stderr
    _stderr = os.dup(2)


def pytest_unconfigure(config):
    global _stderr
    if _stderr is not None:
        os.close(_stderr)
        _stderr = None


@pytest.fixture(autouse=True)
def _end_the_run_if_this_test_hangs(request):
    limit = os.environ.get("AARE_LAB_TEST_HANG_S")
    seconds = float(limit) if limit else HANG_S[
        "gpu" if request.node.get_closest_marker("gpu") else "other"]
    os.write(_stderr, b"")  # fails early, not at the timeout, if the copy is gone
    faulthandler.dump_traceback_later(seconds, exit=True, file=_stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
