"""A compiled `numpy.repeat` into a given array, which threads can run on disjoint pieces
(`aare_lab.parallel.parallel_repeat`).

NumPy's repeat allocates its result and runs on one thread: for a GPU batch of 1.1 M
clusters that was about 2 ms of the calling thread per 512 frames, a fifth of what
assembling `find()`'s result cost it (``benchmarks/results/find_breakdown_*``).
"""

from numba import njit


@njit(cache=True, nogil=True)
def repeat_into(values, counts, out):
    """Write ``values[i]`` ``counts[i]`` times, in order, into ``out`` (``counts.sum()``
    long)."""
    k = 0
    for i in range(len(values)):
        value = values[i]
        for _ in range(counts[i]):
            out[k] = value
            k += 1
