"""Compiled η loops for NumPy windows: the same arithmetic as `aare_lab.imaging.eta`'s
array expressions (which CuPy windows take), one cluster at a time and several times
faster on the CPU.

Every value aare stores in the window's type goes through an array of that type here
(``total``, ``blocks``, ``pair``), so it rounds or wraps as aare's does; the rest is
Numba's arithmetic on the promoted type, as C++'s on ``int`` or the floating type.
Each takes ``taps``, the central 3x3 ``(n, 3, 3)`` of the windows.
"""

import numpy as np
from numba import njit

_FLAGS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_FLAGS)
def _ratio(numerator, denominator):
    if denominator != 0:
        return np.float64(numerator) / np.float64(denominator)
    return 0.0


@njit(**_FLAGS)
def max_blocks(taps, generic, blocks, corner, total):
    """aare's ``max_sum_2x2`` of every cluster: ``corner`` and its block's sum ``total``;
    ``generic``: the centre-first order of aare's clusters larger than 3x3."""
    for i in range(taps.shape[0]):
        d0, d1, d2 = taps[i, 0, 0], taps[i, 0, 1], taps[i, 0, 2]
        d3, d4, d5 = taps[i, 1, 0], taps[i, 1, 1], taps[i, 1, 2]
        d6, d7, d8 = taps[i, 2, 0], taps[i, 2, 1], taps[i, 2, 2]
        if generic:
            blocks[0] = d4 + d3 + d1 + d0
            blocks[1] = d4 + d5 + d1 + d2
            blocks[2] = d4 + d3 + d7 + d6
            blocks[3] = d4 + d5 + d7 + d8
        else:
            blocks[0] = d0 + d1 + d3 + d4
            blocks[1] = d1 + d2 + d4 + d5
            blocks[2] = d3 + d4 + d6 + d7
            blocks[3] = d4 + d5 + d7 + d8
        best = 0
        for k in range(1, 4):
            if blocks[k] > blocks[best]:
                best = k
        corner[i] = best
        total[i] = blocks[best]


@njit(**_FLAGS)
def eta2(taps, corner, eta_x, eta_y):
    for i in range(taps.shape[0]):
        c = corner[i]
        left = taps[i, 1, 0] if c % 2 == 0 else taps[i, 1, 1]
        right = taps[i, 1, 1] if c % 2 == 0 else taps[i, 1, 2]
        upper = taps[i, 0, 1] if c < 2 else taps[i, 1, 1]
        lower = taps[i, 1, 1] if c < 2 else taps[i, 2, 1]
        eta_x[i] = _ratio(right, right + left)
        eta_y[i] = _ratio(lower, lower + upper)


@njit(**_FLAGS)
def full_eta2(taps, corner, total, eta_x, eta_y):
    for i in range(taps.shape[0]):
        c = corner[i]
        if c == 0:
            right, bottom = taps[i, 1, 1] + taps[i, 0, 1], taps[i, 1, 0] + taps[i, 1, 1]
        elif c == 1:
            right, bottom = taps[i, 1, 2] + taps[i, 0, 2], taps[i, 1, 1] + taps[i, 1, 2]
        elif c == 2:
            right, bottom = taps[i, 1, 1] + taps[i, 2, 1], taps[i, 2, 1] + taps[i, 2, 0]
        else:
            right, bottom = taps[i, 1, 2] + taps[i, 2, 2], taps[i, 2, 1] + taps[i, 2, 2]
        eta_x[i] = _ratio(right, total[i])
        eta_y[i] = _ratio(bottom, total[i])


@njit(**_FLAGS)
def sequential_sums(taps, total):
    """``std::accumulate`` of the 3x3 in the window's type, in raster order."""
    for i in range(taps.shape[0]):
        total[i] = 0
        for r in range(3):
            for c in range(3):
                total[i] = total[i] + taps[i, r, c]


@njit(**_FLAGS)
def eta3(taps, total, pair, eta_x, eta_y):
    for i in range(taps.shape[0]):
        pair[0] = taps[i, 0, 0] + taps[i, 1, 0] + taps[i, 2, 0]
        pair[1] = taps[i, 0, 2] + taps[i, 1, 2] + taps[i, 2, 2]
        eta_x[i] = _ratio(-pair[0] + pair[1], total[i])
        pair[0] = taps[i, 0, 0] + taps[i, 0, 1] + taps[i, 0, 2]
        pair[1] = taps[i, 2, 0] + taps[i, 2, 1] + taps[i, 2, 2]
        eta_y[i] = _ratio(-pair[0] + pair[1], total[i])


@njit(**_FLAGS)
def cross_eta3(taps, eta_x, eta_y):
    for i in range(taps.shape[0]):
        d1, d3, d4 = taps[i, 0, 1], taps[i, 1, 0], taps[i, 1, 1]
        d5, d7 = taps[i, 1, 2], taps[i, 2, 1]
        eta_x[i] = _ratio(-d3 + d5, d3 + d4 + d5)
        eta_y[i] = _ratio(-d1 + d7, d1 + d4 + d7)
