"""Growable cluster output buffers for the compiled chunk loops."""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def reserve(win, ys, xs, need):
    """Return buffers with room for at least ``need`` clusters, keeping the first rows."""
    have = win.shape[0]
    if need <= have:
        return win, ys, xs
    size = max(need, 2 * have)
    new_win = np.empty((size, win.shape[1], win.shape[2]), dtype=win.dtype)
    new_ys = np.empty(size, dtype=ys.dtype)
    new_xs = np.empty(size, dtype=xs.dtype)
    new_win[:have] = win
    new_ys[:have] = ys
    new_xs[:have] = xs
    return new_win, new_ys, new_xs
