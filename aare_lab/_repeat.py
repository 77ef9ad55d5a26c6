"""`numpy.repeat` into a given array, compiled and spread over threads.

The cuda finder gives each of a batch's clusters its frame number: 1.1 M per 512 dense
MÖNCH frames. NumPy's repeat allocates its result and runs on one thread: 1-2 ms of the
calling thread per batch, bound by what one core of the H200's host writes (about 10 GB/s);
here each thread fills the runs of a share of the frames, with vector stores, into a
buffer the finder reuses from batch to batch.
"""

import numpy as np
from numba import njit

from .parallel import parallel_ranges


@njit(cache=True, nogil=True)
def _repeat_into(values, counts, out):
    k = 0
    for i in range(len(values)):
        n = counts[i]
        value = values[i]
        run = out[k:k + n]
        # A loop over the run's own length compiles to vector stores; one index carried
        # across runs does not.
        for j in range(n):
            run[j] = value
        k += n


def repeat(values: np.ndarray, counts: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``numpy.repeat(values, counts)``, written into ``out`` when given.

    Parameters
    ----------
    values
        One value per run.
    counts
        Non-negative run lengths, one per value.
    out
        A 1-D array of exactly ``counts.sum()`` elements (None: a new array).

    Returns
    -------
    numpy.ndarray
        ``out``, filled.

    Raises
    ------
    ValueError
        When ``out`` has not exactly ``counts.sum()`` elements, or a count is negative.

    Examples
    --------
    >>> repeat(np.array([7, 8, 9]), np.array([2, 0, 1]))
    array([7, 7, 9])
    """
    counts = np.asarray(counts, np.int64)
    if len(counts) != len(values) or (counts < 0).any():
        raise ValueError(f"repeat needs one non-negative count per value, got {counts!r}")
    total = int(counts.sum())
    if out is None:
        out = np.empty(total, values.dtype)
    elif out.shape != (total,):
        raise ValueError(f"repeat needs an output of {total} values, got shape {out.shape}")
    ends = np.cumsum(counts)
    starts = ends - counts
    parallel_ranges(lambda a, b: _repeat_into(values[a:b], counts[a:b],
                                              out[starts[a]:ends[b - 1]]),
                    len(values), out.nbytes)
    return out
