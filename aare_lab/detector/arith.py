"""Per-pixel arithmetic of the finder contract, compiled with Numba.

One implementation serves both pedestal dtypes. The float64 state is the centred
float32 state of docs/algorithm.md with the offset fixed at 0: ``x - 0`` is exact, and
``sum / N`` is the cached mean bit for bit, so ``(x - off) - s / N`` is ``x - mean`` and
``s2 / N - resid * resid`` is ``sum2 / N - mean * mean``. The dtype of the state arrays
(and of the scalars ``N``, ``nsig``, ``c3``, which callers pass in that dtype) selects
float32 or float64 arithmetic; writing a ``uint16`` into a state-typed buffer is the
conversion ``float32(x)`` / ``float64(x)``.

The functions work on one image row (1-D arrays) with branch-free bodies, so LLVM
vectorises them across pixels; that changes no result, because every pixel's operations
and their order stay as specified. No fused multiply-add: Numba compiles without
fast-math, so ``a * b - c`` rounds twice, as the contract requires.

Twin: ``kernels/frozen.cu`` mirrors these functions line for line.
"""

import numpy as np
from numba import njit, types
from numba.extending import overload

from aare_lab.detector.branches import Branch

# Branch codes as uint8 globals, which Numba freezes into the compiled code.
NEG_SKIP = np.uint8(Branch.NEG_SKIP)
SHADOW = np.uint8(Branch.SHADOW)
TEST1_STORE = np.uint8(Branch.TEST1_STORE)
TEST3_STORE = np.uint8(Branch.TEST3_STORE)
TEST3_SKIP = np.uint8(Branch.TEST3_SKIP)
QUIET_UPDATE = np.uint8(Branch.QUIET_UPDATE)
#: The pixel status of a JUNGFRAU G0 value, the only one pushed (``finders/_gain.py``).
G0 = np.uint8(0)


def row_of(array, i):
    """Row ``i`` of ``array``, or None where ``array`` is None (the feature is off): what
    the row functions below take for ``corr`` and ``status``."""
    return None if array is None else array[i]


@overload(row_of, jit_options={"cache": True, "nogil": True, "error_model": "numpy"})
def _row_of(array, i):
    # Decided when the caller compiles, from the argument's type.
    if isinstance(array, types.NoneType):
        return lambda array, i: None
    return lambda array, i: array[i]


@njit(cache=True, nogil=True, error_model="numpy")
def values_row(frame, off, s, N, v, corr):
    """Pedestal-subtracted values ``v = ((x - off) - corr) - s / N`` of one row.

    ``corr`` is the row's common-mode correction, or None (compiled away) without one;
    ``off`` the row's offsets, or None where they are all zero (`centred`).
    """
    for j in range(len(frame)):
        v[j] = frame[j]
        y = centred(v[j], off, j)
        if corr is not None:
            y = y - corr[j]
        v[j] = y - s[j] / N


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def centred(x, off, j):
    """``x - off[j]``; ``x`` itself where ``off`` is None, the float64 state's offsets,
    which are all 0 (``x - 0`` is ``x``: the counts are never -0), so that a finder
    need not read them."""
    if off is None:
        return x
    return x - off[j]


def zero_offsets(off):
    """``off``, or None where every offset is 0 (the float64 state): what the row functions
    take so that the offsets, a state array as large as ``s``, are not read each frame."""
    return None if not off.any() else off


@njit(cache=True, nogil=True, error_model="numpy")
def values_resid_row(frame, off, s, N, v, corr, resid):
    """`values_row`, keeping each pixel's ``s / N`` in ``resid`` for the row's push
    (`update_quiet_row`): the same quotient, divided once."""
    for j in range(len(frame)):
        v[j] = frame[j]
        y = centred(v[j], off, j)
        if corr is not None:
            y = y - corr[j]
        r = s[j] / N
        resid[j] = r
        v[j] = y - r


@njit(cache=True, nogil=True, error_model="numpy")
def thresholds_row(s, s2, rms_fixed, fixed, N, nsig, thr):
    """``n_sigma * rms`` of one row: the kept rms, or ``sqrt(max(s2/N - (s/N)², 0))``."""
    if fixed:
        for j in range(len(thr)):
            thr[j] = nsig * rms_fixed[j]
    else:
        zero = N - N
        for j in range(len(thr)):
            thr[j] = running_threshold(s[j] / N, s2[j] / N, nsig, zero)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def running_threshold(resid, q2, nsig, zero):
    """``nsig * sqrt(max(s2/N - (s/N)², 0))`` from the quotients ``resid = s / N`` and
    ``q2 = s2 / N``; ``zero`` is 0 in the state's dtype."""
    return nsig * np.sqrt(max(q2 - resid * resid, zero))


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def ema(s, s2, y, resid, q2):
    """One pedestal push: ``s += y - s / N``, ``s2 += y * y - s2 / N``, ``y = x - off``,
    with ``resid = s / N`` and ``q2 = s2 / N`` divided by the caller (once for the push
    and whatever else reads them)."""
    return s + (y - resid), s2 + (y * y - q2)


@njit(cache=True, nogil=True, error_model="numpy")
def pushed_row(frame, off, s, s2, rms_fixed, fixed, N, nsig, thr, new_s, new_s2, new_v, corr):
    """One row's thresholds (`thresholds_row`), and what its state and value would be
    after pushing the frame's values.

    The `ema` update and the value a later read of the pushed pixel sees, ``y - s / N``;
    computed for every pixel of the row and applied by the serial finder where the pixel
    is quiet. The thresholds and the push divide ``s`` and ``s2`` by ``N`` once for both
    (the same quotients). ``corr`` as in `values_row`.
    """
    zero = N - N
    for j in range(len(frame)):
        resid = s[j] / N
        q2 = s2[j] / N
        if fixed:
            thr[j] = nsig * rms_fixed[j]
        else:
            thr[j] = running_threshold(resid, q2, nsig, zero)
        new_v[j] = frame[j]
        y = centred(new_v[j], off, j)
        if corr is not None:
            y = y - corr[j]
        new_s[j], new_s2[j] = ema(s[j], s2[j], y, resid, q2)
        new_v[j] = y - new_s[j] / N


@njit(cache=True, nogil=True, error_model="numpy")
def update_quiet_row(codes, frame, off, s, s2, N, x, corr, status, resid):
    """Push the frame's values into the pedestal of the row's QUIET_UPDATE pixels.

    The `ema` update in place, without the value read back; ``x`` is scratch of the row's
    length in the state's dtype; ``corr`` as in `values_row`; ``status`` the row's JUNGFRAU
    pixel status, of which only G0 is pushed, or None (compiled away) without gain bits;
    ``resid`` the row's ``s / N`` where `values_resid_row` kept it (the same
    bits, one division a pixel fewer), or None (compiled away) to divide here.
    """
    for j in range(len(frame)):
        x[j] = frame[j]
        y = centred(x[j], off, j)
        if corr is not None:
            y = y - corr[j]
        if resid is None:
            mean = s[j] / N
        else:
            mean = resid[j]
        new_s, new_s2 = ema(s[j], s2[j], y, mean, s2[j] / N)
        quiet = codes[j] == QUIET_UPDATE
        if status is not None:
            quiet = quiet and status[j] == G0
        s[j] = new_s if quiet else s[j]
        s2[j] = new_s2 if quiet else s2[j]


@njit(cache=True, nogil=True, error_model="numpy")
def rms_map(s, s2, N, out):
    """``sqrt(max(s2 / N - (s / N)**2, 0))`` per pixel, in the dtype of the state."""
    one = N / N
    for i in range(s.shape[0]):
        # n_sigma = 1 gives the rms itself; the kept-rms argument is unused with fixed=False.
        thresholds_row(s[i], s2[i], out[i], False, N, one, out[i])


@njit(cache=True, nogil=True, error_model="numpy")
def update_frame(frame, off, s, s2, N, x):
    """Push a whole dark frame into a trained pedestal; ``x`` is row scratch."""
    quiet = np.full(frame.shape[1], QUIET_UPDATE)
    for i in range(frame.shape[0]):
        update_quiet_row(quiet, frame[i], off[i], s[i], s2[i], N, x, None, None, None)


@njit(cache=True, nogil=True, error_model="numpy")
def round_half_away(value):
    """Round to the nearest integer, halves away from zero (C's ``round``)."""
    a = abs(value)
    t = np.floor(a)
    if a - t >= 0.5:
        t += 1
    return t if value >= 0 else -t


@njit(cache=True, nogil=True, error_model="numpy")
def round_half_away_array(values):
    """`round_half_away` of every element of a C-contiguous array, as a new array."""
    out = np.empty_like(values)
    flat_in, flat_out = values.reshape(-1), out.reshape(-1)
    for k in range(flat_in.size):
        flat_out[k] = round_half_away(flat_in[k])
    return out
