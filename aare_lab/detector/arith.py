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
fast-math, so ``a * b - c`` rounds twice, as the contract requires. The one exception
changes no bit either: each quotient ``s / N`` is formed from ``RN(1 / N)`` by Markstein's
correction, two FMAs that give the correctly rounded quotient, the bits of the division
(`quotients_row`); a row whose state lies outside the range where that is proven is
divided.

Twin: ``kernels/frozen.cu`` mirrors these functions line for line.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload
from numba.np.numpy_support import as_dtype

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


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (LLVM's ``llvm.fma``: the FMA instruction where the CPU
    has one, else an exact emulation)."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        t = args[0].type
        fn = builder.module.declare_intrinsic("llvm.fma", [t], ir.FunctionType(t, [t, t, t]))
        return builder.call(fn, args)

    return a(a, b, c), codegen


def in_correction_range(s):
    """Whether ``2**-60 <= |s| <= 2**60``, where `quotients_row`'s correction is exact."""
    return 2.0 ** -60 <= abs(s) <= 2.0 ** 60


@overload(in_correction_range, jit_options={"cache": True, "nogil": True,
                                            "error_model": "numpy"})
def _in_correction_range(s):
    # The bounds in the state's own dtype, so that a float32 row compares as float32.
    t = as_dtype(s).type
    low, high = t(2.0 ** -60), t(2.0 ** 60)

    def impl(s):
        a = abs(s)
        return (a >= low) & (a <= high)

    return impl


@njit(cache=True, nogil=True, error_model="numpy")
def quotients_row(s, N, out):
    """``out = s / N`` for one row, bit for bit the division's.

    Each quotient is finished from ``r = RN(1 / N)`` by Markstein's correction,
    ``q = RN(s·r)``, ``q' = RN(q + RN(s - q·N)·r)`` with both steps fused: the correctly
    rounded ``s / N`` wherever the residual neither under- nor overflows, i.e. for
    ``2**-60 <= |s| <= 2**60`` (`in_correction_range`; zero is outside: ``-0 / N`` is
    ``-0``, the correction gives ``+0``). A row with any other ``s`` is divided. Vector
    code with no division, which costs several times a multiplication on some CPUs.

    Twin: ``corrected_quotient`` and ``quotients`` in ``kernels/frozen.cu``.
    """
    r = (N / N) / N
    exact = True
    for j in range(len(s)):
        q = s[j] * r
        out[j] = fma(fma(-q, N, s[j]), r, q)
        exact &= in_correction_range(s[j])
    if not exact:
        for j in range(len(s)):
            out[j] = s[j] / N


def as_state(value, like):
    """``value`` (a count) converted to the dtype of the state array ``like``: exact, a
    ``uint16`` fits either float."""
    return np.asarray(like).dtype.type(value)


@overload(as_state, jit_options={"cache": True, "nogil": True, "error_model": "numpy"})
def _as_state(value, like):
    t = as_dtype(like.dtype).type
    return lambda value, like: t(value)


@njit(cache=True, nogil=True, error_model="numpy")
def values_row(frame, off, s, N, v, corr):
    """Pedestal-subtracted values ``v = ((x - off) - corr) - s / N`` of one row.

    ``corr`` is the row's common-mode correction, or None (compiled away) without one;
    ``off`` the row's offsets, or None where they are all zero (`centred`). The quotients
    are formed in ``v`` first (`quotients_row`).
    """
    quotients_row(s, N, v)
    for j in range(len(frame)):
        y = centred(as_state(frame[j], v), off, j)
        if corr is not None:
            y = y - corr[j]
        v[j] = y - v[j]


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
    (`update_quiet_row`): the same quotient, formed once."""
    quotients_row(s, N, resid)
    for j in range(len(frame)):
        y = centred(as_state(frame[j], v), off, j)
        if corr is not None:
            y = y - corr[j]
        v[j] = y - resid[j]


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
def pushed_row(frame, off, s, s2, rms_fixed, fixed, N, nsig, thr, new_s, new_s2, new_v, q,
               corr):
    """One row's thresholds (`thresholds_row`), and what its state and value would be
    after pushing the frame's values.

    The `ema` update and the value a later read of the pushed pixel sees, ``y - s / N``;
    computed for every pixel of the row and applied by the serial finder where the pixel
    is quiet. The thresholds and the push take the same quotients of ``s`` and ``s2`` by
    ``N``, formed once (`quotients_row`, in ``new_v`` and ``new_s2`` until they are
    read); ``q`` is scratch for those of the pushed state. ``corr`` as in `values_row`.
    """
    quotients_row(s, N, new_v)
    quotients_row(s2, N, new_s2)
    zero = N - N
    for j in range(len(frame)):
        resid = new_v[j]
        q2 = new_s2[j]
        if fixed:
            thr[j] = nsig * rms_fixed[j]
        else:
            thr[j] = running_threshold(resid, q2, nsig, zero)
        y = centred(as_state(frame[j], new_v), off, j)
        if corr is not None:
            y = y - corr[j]
        new_s[j], new_s2[j] = ema(s[j], s2[j], y, resid, q2)
        new_v[j] = y
    quotients_row(new_s, N, q)
    for j in range(len(frame)):
        new_v[j] = new_v[j] - q[j]


@njit(cache=True, nogil=True, error_model="numpy")
def update_quiet_row(codes, frame, off, s, s2, N, x, corr, status, resid):
    """Push the frame's values into the pedestal of the row's QUIET_UPDATE pixels.

    The `ema` update in place, without the value read back; ``x`` is scratch of the row's
    length in the state's dtype (for ``s2 / N``, `quotients_row`); ``corr`` as in
    `values_row`; ``status`` the row's JUNGFRAU pixel status, of which only G0 is pushed,
    or None (compiled away) without gain bits; ``resid`` the row's ``s / N`` where
    `values_resid_row` kept it (the same bits, formed once), or None (compiled away) to
    divide here.
    """
    quotients_row(s2, N, x)
    for j in range(len(frame)):
        y = centred(as_state(frame[j], x), off, j)
        if corr is not None:
            y = y - corr[j]
        if resid is None:
            mean = s[j] / N
        else:
            mean = resid[j]
        new_s, new_s2 = ema(s[j], s2[j], y, mean, x[j])
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
