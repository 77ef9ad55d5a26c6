"""`aare_lab.runtime.repeat`: NumPy's repeat, compiled, on threads, into a given buffer, and any
slice of it on its own (`fill_runs`, which the result sink calls per share of the clusters)."""

import numpy as np
import pytest

import aare_lab.runtime.parallel
from aare_lab.runtime.repeat import fill_runs, repeat, run_ends


@pytest.mark.parametrize("counts", [[3, 0, 5, 1, 0, 0, 7], [0, 0, 0], [], [4000] * 9, [1]])
def test_repeat_is_numpy_repeat(monkeypatch, counts):
    """Runs of every length, empty ones among them and at the ends of the threads' shares,
    into a given output (returned, filled) or a new one."""
    monkeypatch.setenv(aare_lab.runtime.parallel.THREADS_VARIABLE, "4")
    monkeypatch.setattr(aare_lab.runtime.parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(aare_lab.runtime.parallel, "_pools", {})
    values = np.arange(100, 100 + len(counts), dtype=np.int64)
    expected = np.repeat(values, counts)
    ends = run_ends(np.array(counts, np.int64), len(values))
    np.testing.assert_array_equal(repeat(values, ends), expected)
    out = np.full(len(expected), -1, np.int64)
    assert repeat(values, ends, out) is out
    np.testing.assert_array_equal(out, expected)
    if expected.size:
        executor, threads = aare_lab.runtime.parallel._pools["default"]
        assert threads == 4
        executor.shutdown()


def test_an_output_of_the_wrong_size_or_a_negative_count_is_refused():
    values = np.arange(3, dtype=np.int64)
    with pytest.raises(ValueError, match="an output of 6 values"):
        repeat(values, run_ends([1, 2, 3], len(values)), np.empty(7, np.int64))
    with pytest.raises(ValueError, match="one non-negative count per value"):
        repeat(values, run_ends([1, -2, 3], len(values)), np.empty(2, np.int64))
    with pytest.raises(ValueError, match="one non-negative count per value"):
        repeat(values, run_ends([1, 2], len(values)))


def test_every_slice_of_the_runs_is_filled_on_its_own():
    """A share of the positions may start or stop inside a run, on a run's edge, or among
    empty runs; each writes exactly its values and nothing beyond."""
    counts = [0, 3, 0, 0, 5, 1, 0, 2, 0]
    values = np.arange(10, 10 + len(counts), dtype=np.int64)
    expected = np.repeat(values, counts)
    ends = run_ends(counts, len(values))
    for start in range(len(expected) + 1):
        for stop in range(start, len(expected) + 1):
            out = np.full(stop - start + 2, -1, np.int64)
            fill_runs(values, ends, start, out[1:-1])
            np.testing.assert_array_equal(out[1:-1], expected[start:stop])
            assert out[0] == out[-1] == -1
