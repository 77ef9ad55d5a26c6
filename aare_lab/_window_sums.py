"""Exact window sums of integer windows, compiled: the fast path of `window_energies`."""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def integer_window_sums(windows, out):
    """Write the sum of each integer window ``(n, wy, wx)`` into ``out`` (float64).

    The int64 sum is exact, and so is its float64 (at most 121 values of 32 bits), so it
    equals NumPy's float64 sum in any order of the additions.
    """
    n, wy, wx = windows.shape
    for i in range(n):
        total = np.int64(0)
        for r in range(wy):
            for c in range(wx):
                total += windows[i, r, c]
        out[i] = total
