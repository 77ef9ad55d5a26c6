"""Compiled per-window loops over integer windows: exact sums (the fast path of
`window_energies`) and the taps at given limits (`aare_lab.model.clipping`), each alone or with
the copy of the windows into a result.

All take the windows flattened to ``(n, wy * wx)``: one loop over a row's taps compiles
to faster code than two nested loops over the window's rows and columns.
"""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def integer_window_sums(windows, out):
    """Write the sum of each integer window ``(n, taps)`` into ``out`` (float64).

    The int64 sum is exact, and so is its float64 (at most 121 values of 32 bits), so it
    equals NumPy's float64 sum in any order of the additions.
    """
    n, taps = windows.shape
    for i in range(n):
        total = np.int64(0)
        for k in range(taps):
            total += windows[i, k]
        out[i] = total


@njit(cache=True, nogil=True, error_model="numpy")
def window_taps_at_limits(windows, low, high, out):
    """Write into ``out[i]`` how many taps of window ``i`` of ``windows`` ``(n, taps)``
    equal ``low`` or ``high``."""
    n, taps = windows.shape
    for i in range(n):
        hits = 0
        for k in range(taps):
            value = windows[i, k]
            hits += (value == low) | (value == high)
        out[i] = hits


@njit(cache=True, nogil=True, error_model="numpy")
def copy_integer_windows(src, dst, out, low, high, at_limits):
    """Copy integer windows ``(n, taps)`` from ``src`` into ``dst`` and write each one's sum
    into ``out`` (float64, as `integer_window_sums`), reading each window once; with an
    ``at_limits`` of one element per window, also each one's taps equal to ``low`` or
    ``high`` (as `window_taps_at_limits`; empty: not counted)."""
    n, taps = src.shape
    count = len(at_limits) > 0
    for i in range(n):
        total = np.int64(0)
        if count:
            hits = 0
            for k in range(taps):
                value = src[i, k]
                dst[i, k] = value
                total += value
                hits += (value == low) | (value == high)
            at_limits[i] = hits
        else:
            for k in range(taps):
                value = src[i, k]
                dst[i, k] = value
                total += value
        out[i] = total
