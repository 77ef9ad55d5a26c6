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
def load_pixel(frame, off, s, s2, rms_fixed, fixed, N, nsig, xT, v, thr, i, j):
    """Fill ``xT``, ``v`` (pedestal-subtracted) and ``thr`` (n_sigma * rms) of one pixel."""
    xT[i, j] = frame[i, j]
    resid = s[i, j] / N
    v[i, j] = (xT[i, j] - off[i, j]) - resid
    if fixed:
        thr[i, j] = nsig * rms_fixed[i, j]
    else:
        var = s2[i, j] / N - resid * resid
        if var > 0:
            thr[i, j] = nsig * np.sqrt(var)
        else:
            thr[i, j] = 0


@njit(cache=True, nogil=True, error_model="numpy")
def update_pixel(off, s, s2, N, xT, i, j):
    """Push the value in ``xT`` into the pedestal of pixel ``(i, j)`` (EMA over N)."""
    y = xT[i, j] - off[i, j]
    s[i, j] += y - s[i, j] / N
    s2[i, j] += y * y - s2[i, j] / N


@njit(cache=True, nogil=True, error_model="numpy")
def refresh_value(off, s, N, xT, v, i, j):
    """Recompute ``v`` of a pixel from its (just updated) pedestal: the serial model's read."""
    v[i, j] = (xT[i, j] - off[i, j]) - s[i, j] / N


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
def update_frame(frame, off, s, s2, N, xT):
    """Push a whole dark frame into a trained pedestal."""
    ny, nx = frame.shape
    for i in range(ny):
        for j in range(nx):
            xT[i, j] = frame[i, j]
            update_pixel(off, s, s2, N, xT, i, j)


@njit(cache=True, nogil=True, error_model="numpy")
def round_half_away(value):
    """Round to the nearest integer, halves away from zero (C's ``round``)."""
    a = abs(value)
    t = np.floor(a)
    if a - t >= 0.5:
        t += 1
    return t if value >= 0 else -t
