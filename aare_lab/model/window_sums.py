"""Compiled per-window loops: the windows' sums (`window_energies`), exact for integer
windows and NumPy's pairwise sum for float ones, and the taps at given limits
(`aare_lab.model.clipping`), each alone or with the copy of the windows into a result.

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


#: NumPy's pairwise summation adds blocks of at most this many values in one unrolled pass.
PAIRWISE_BLOCK = 128


@njit(cache=True, nogil=True, error_model="numpy")
def pairwise_sum(values, lo, n):
    """The float64 sum of ``values[lo:lo + n]``, ``n`` at most `PAIRWISE_BLOCK`, in NumPy's
    order (``pairwise_sum`` of its ``add.reduce`` over a contiguous axis): below 8 values
    one by one from -0.0, else in eight interleaved partial sums.

    A float window's energy is NumPy's ``window.sum(dtype=float64)`` to the last bit
    (``0.0 + pairwise_sum``); any other order of the additions would round differently.
    NumPy splits longer runs in halves, recursively; the finders' windows (at most 11x11)
    never need it, and a recursive function cannot be cached by Numba (it crashes when
    loaded), so larger windows are left to NumPy (`aare_lab.model.results.window_energies`).
    """
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += np.float64(values[i])
        return res
    r0 = np.float64(values[lo])
    r1 = np.float64(values[lo + 1])
    r2 = np.float64(values[lo + 2])
    r3 = np.float64(values[lo + 3])
    r4 = np.float64(values[lo + 4])
    r5 = np.float64(values[lo + 5])
    r6 = np.float64(values[lo + 6])
    r7 = np.float64(values[lo + 7])
    whole = n - n % 8
    for i in range(lo + 8, lo + whole, 8):
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(lo + whole, lo + n):
        res += np.float64(values[i])
    return res


@njit(cache=True, nogil=True, error_model="numpy")
def float_window_sums(windows, out):
    """Write the float64 sum of each float window ``(n, taps)``, at most `PAIRWISE_BLOCK`
    taps, into ``out``, as NumPy's ``windows.sum(axis=(1, 2), dtype=float64)``
    (`pairwise_sum`)."""
    for i in range(windows.shape[0]):
        out[i] = 0.0 + pairwise_sum(windows[i], 0, windows.shape[1])


@njit(cache=True, nogil=True, error_model="numpy")
def copy_float_windows(src, dst, out):
    """Copy float windows ``(n, taps)``, at most `PAIRWISE_BLOCK` taps, from ``src`` into
    ``dst`` and write each one's `float_window_sums` into ``out``."""
    for i in range(src.shape[0]):
        dst[i] = src[i]
        out[i] = 0.0 + pairwise_sum(src[i], 0, src.shape[1])


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
