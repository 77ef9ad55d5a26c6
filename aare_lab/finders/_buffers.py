"""Growable cluster output buffers for the compiled chunk loops."""

import numpy as np
from numba import njit

#: A buffer that must grow grows at once to the caller's estimate of the whole chunk's
#: clusters, but to no more than this many times what is needed now: a first frame far
#: busier than the rest (a detector's first frame of an acquisition) must not reserve
#: the chunk's length times its clusters.
ESTIMATE_LIMIT = 8


@njit(cache=True, nogil=True, error_model="numpy")
def reserve(win, ys, xs, used, need, estimate):
    """Return buffers with room for at least ``need`` clusters, keeping the first ``used``.

    Buffers that must grow get room for ``estimate`` clusters (what the chunk will need,
    by its frames so far; at most ``ESTIMATE_LIMIT * need``), and at least twice their
    rows: one chunk grows them a few times, not once per doubling, copying and mapping
    afresh the rows of each size on one thread.
    """
    have = win.shape[0]
    if need <= have:
        return win, ys, xs
    size = max(need, 2 * have, min(estimate, ESTIMATE_LIMIT * need))
    new_win = np.empty((size, win.shape[1], win.shape[2]), dtype=win.dtype)
    new_ys = np.empty(size, dtype=ys.dtype)
    new_xs = np.empty(size, dtype=xs.dtype)
    new_win[:used] = win[:used]
    new_ys[:used] = ys[:used]
    new_xs[:used] = xs[:used]
    return new_win, new_ys, new_xs
