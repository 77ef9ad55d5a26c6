"""`aare_lab._repeat.repeat`: NumPy's repeat, compiled, on threads, into a reused buffer."""

import numpy as np
import pytest

import aare_lab.parallel
from aare_lab._repeat import repeat


@pytest.mark.parametrize("counts", [[3, 0, 5, 1, 0, 0, 7], [0, 0, 0], [], [4000] * 9, [1]])
def test_repeat_is_numpy_repeat(monkeypatch, counts):
    """Runs of every length, empty ones among them and at the ends of the threads' shares,
    into a given output (returned, filled) or a new one."""
    monkeypatch.setenv(aare_lab.parallel.THREADS_VARIABLE, "4")
    monkeypatch.setattr(aare_lab.parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(aare_lab.parallel, "_pools", {})
    values = np.arange(100, 100 + len(counts), dtype=np.int64)
    expected = np.repeat(values, counts)
    np.testing.assert_array_equal(repeat(values, np.array(counts, np.int64)), expected)
    out = np.full(len(expected), -1, np.int64)
    assert repeat(values, counts, out) is out
    np.testing.assert_array_equal(out, expected)
    if counts:
        executor, threads = aare_lab.parallel._pools["default"]
        assert threads == 4
        executor.shutdown()


def test_an_output_of_the_wrong_size_or_a_negative_count_is_refused():
    values = np.arange(3, dtype=np.int64)
    with pytest.raises(ValueError, match="an output of 6 values"):
        repeat(values, [1, 2, 3], np.empty(7, np.int64))
    with pytest.raises(ValueError, match="one non-negative count per value"):
        repeat(values, [1, -2, 3], np.empty(2, np.int64))
    with pytest.raises(ValueError, match="one non-negative count per value"):
        repeat(values, [1, 2])
