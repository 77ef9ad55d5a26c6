"""`numpy.repeat` of run lengths, written piece by piece into a given array.

Each kept cluster's frame number is its frame's, repeated ``n_kept`` times: 1.1 M values per
512 dense MÖNCH frames. `fill_runs` writes any slice of that repetition, so the result sink
writes the frame numbers straight into the result's column in the same threaded pass that
copies the clusters (`aare_lab.finders._assembly`), with no temporary array per batch.
"""

import numpy as np
from numba import njit

from aare_lab.runtime.parallel import parallel_ranges


@njit(cache=True, nogil=True)
def fill_runs(values, ends, start, out):
    """Write positions ``start : start + len(out)`` of the runs of ``values`` into ``out``.

    Parameters
    ----------
    values
        One value per run.
    ends
        The cumulative run lengths (``numpy.cumsum`` of the counts): run ``i`` covers the
        positions ``ends[i - 1] : ends[i]``.
    start
        The first position written.
    out
        Receives the values of positions ``start`` onwards; ``start + len(out)`` is at most
        ``ends[-1]`` (compiled without bounds checks: the callers check, `run_ends`).
    """
    stop = start + len(out)
    i = np.searchsorted(ends, start, side="right")
    k = start
    while k < stop:
        end = min(ends[i], stop)
        run = out[k - start:end - start]
        value = values[i]
        # A loop over the run's own length compiles to vector stores; one index carried
        # across runs does not.
        for j in range(len(run)):
            run[j] = value
        k = end
        i += 1


def run_ends(counts: np.ndarray, n_values: int) -> np.ndarray:
    """The cumulative run lengths `fill_runs` takes, checked: one non-negative count per
    value.

    Raises
    ------
    ValueError
        When there is not one count per value, or a count is negative.
    """
    counts = np.asarray(counts, np.int64)
    if len(counts) != n_values or (counts < 0).any():
        raise ValueError(f"runs need one non-negative count per value, got {counts!r} "
                         f"for {n_values} values")
    return np.cumsum(counts)


def repeat(values: np.ndarray, ends: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``numpy.repeat`` of the runs that end at ``ends``, written into ``out`` when given.

    Parameters
    ----------
    values
        One value per run.
    ends
        The cumulative run lengths, checked (`run_ends`).
    out
        A 1-D array of exactly ``ends[-1]`` elements (None: a new array).

    Returns
    -------
    numpy.ndarray
        ``out``, filled.

    Raises
    ------
    ValueError
        When ``out`` has not exactly ``ends[-1]`` elements.

    Examples
    --------
    >>> values = np.array([7, 8, 9])
    >>> repeat(values, run_ends(np.array([2, 0, 1]), len(values)))
    array([7, 7, 9])
    """
    total = int(ends[-1]) if len(ends) else 0
    if out is None:
        out = np.empty(total, values.dtype)
    elif out.shape != (total,):
        raise ValueError(f"repeat needs an output of {total} values, got shape {out.shape}")
    parallel_ranges(lambda a, b: fill_runs(values, ends, a, out[a:b]), total, out.nbytes)
    return out
