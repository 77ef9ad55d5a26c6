"""Per-pixel arithmetic of the finder contract, compiled with Numba.

One implementation serves both pedestal dtypes. The float64 state is the centred
float32 state of ALGORITHM.md with the offset fixed at 0: ``x - 0`` is exact, and
``sum / N`` is the cached mean bit for bit, so ``(x - off) - s / N`` is ``x - mean`` and
``s2 / N - resid * resid`` is ``sum2 / N - mean * mean``. The dtype of the state arrays
(and of the scalars ``N``, ``nsig``, ``c3``, which callers pass in that dtype) selects
float32 or float64 arithmetic; writing a ``uint16`` into a state-typed buffer is the
conversion ``float32(x)`` / ``float64(x)``.

Twin: ``kernels/frozen.cu`` mirrors these functions line for line.
"""

import numpy as np
from numba import njit

NOT_PROCESSED = np.uint8(0)
NEG_SKIP = np.uint8(1)
SHADOW = np.uint8(2)
TEST1_STORE = np.uint8(3)
TEST3_STORE = np.uint8(4)
TEST3_SKIP = np.uint8(5)
QUIET_UPDATE = np.uint8(6)


@njit(cache=True, nogil=True, error_model="numpy")
def load_row(frame, off, s, s2, rms_fixed, fixed, N, nsig, xT, v, thr):
    """Fill ``xT``, ``v`` (pedestal-subtracted) and ``thr`` (n_sigma * rms) of one row.

    Arguments are 1-D rows; branch-free bodies let LLVM vectorise across pixels, which
    changes no result: every pixel's operations and their order stay as specified.
    """
    zero = N - N
    for j in range(len(frame)):
        xT[j] = frame[j]
        resid = s[j] / N
        v[j] = (xT[j] - off[j]) - resid
    if fixed:
        for j in range(len(frame)):
            thr[j] = nsig * rms_fixed[j]
    else:
        for j in range(len(frame)):
            resid = s[j] / N
            var = max(s2[j] / N - resid * resid, zero)
            thr[j] = nsig * np.sqrt(var)


@njit(cache=True, nogil=True, error_model="numpy")
def pushed_row(off, s, s2, N, xT, new_s, new_s2, new_v):
    """What one row's state and pedestal-subtracted value would be after pushing ``xT``.

    The EMA update of ALGORITHM.md, ``s += y - s / N`` with ``y = x - off``, and the value a
    later read of the pushed pixel sees, ``y - s / N``; computed for every pixel of the row
    (branch-free, so vectorised) and applied by the caller where the pixel is quiet.
    """
    for j in range(len(xT)):
        y = xT[j] - off[j]
        new_s[j] = s[j] + (y - s[j] / N)
        new_s2[j] = s2[j] + (y * y - s2[j] / N)
        new_v[j] = y - new_s[j] / N


@njit(cache=True, nogil=True, error_model="numpy")
def update_masked_row(push, off, s, s2, N, xT, new_s, new_s2, new_v):
    """Push ``xT`` into the pedestal of the pixels of one row where ``push`` is true."""
    pushed_row(off, s, s2, N, xT, new_s, new_s2, new_v)
    for j in range(len(push)):
        s[j] = new_s[j] if push[j] else s[j]
        s2[j] = new_s2[j] if push[j] else s2[j]


@njit(cache=True, nogil=True, error_model="numpy")
def rms_map(s, s2, N, out):
    """``sqrt(max(s2 / N - (s / N)**2, 0))`` per pixel, in the dtype of the state."""
    ny, nx = s.shape
    for i in range(ny):
        for j in range(nx):
            resid = s[i, j] / N
            var = s2[i, j] / N - resid * resid
            if var > 0:
                out[i, j] = np.sqrt(var)
            else:
                out[i, j] = 0


@njit(cache=True, nogil=True, error_model="numpy")
def update_frame(frame, off, s, s2, N, xT, new_s, new_s2, new_v):
    """Push a whole dark frame into a trained pedestal."""
    for i in range(frame.shape[0]):
        for j in range(frame.shape[1]):
            xT[i, j] = frame[i, j]
        pushed_row(off[i], s[i], s2[i], N, xT[i], new_s, new_s2, new_v)
        s[i] = new_s
        s2[i] = new_s2


@njit(cache=True, nogil=True, error_model="numpy")
def round_half_away(value):
    """Round to the nearest integer, halves away from zero (C's ``round``)."""
    a = abs(value)
    t = np.floor(a)
    if a - t >= 0.5:
        t += 1
    return t if value >= 0 else -t
