"""The compiled count of the pixels with gain bits: a row (`row_above`), a frame
(`frame_above`), a stack on Numba's threads (`count_above`).

The CPU finders count each frame inside their own loops, row by row where their threads
read it (as the GPU kernel does, ``kernels/frozen.cu``'s ``n_gain_bits``), rather than in
a pass of their own over each chunk before the loop, which read every frame once more and
cost a parallel region per chunk.
"""

from numba import njit, prange


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def row_above(row, limit):
    """How many values of ``row`` are above ``limit``.

    The row's maximum first (a vectorised pass) settles the common case, no value above;
    only a row with one is counted (2.3x faster than counting every row).
    """
    top = row[0] - row[0]
    for j in range(row.shape[0]):
        top = max(top, row[j])
    n = 0
    if top > limit:
        for j in range(row.shape[0]):
            n += row[j] > limit
    return n


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def frame_above(frame, limit):
    """How many values of ``frame`` ``(ny, nx)`` are above ``limit`` (`row_above`)."""
    n = 0
    for i in range(frame.shape[0]):
        n += row_above(frame[i], limit)
    return n


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def count_above(frames, limit, out):
    """Write into ``out[f]`` how many values of frame ``f`` of ``frames`` ``(n, ny, nx)``
    are above ``limit`` (`frame_above`), frames in parallel."""
    for f in prange(frames.shape[0]):
        out[f] = frame_above(frames[f], limit)
