"""The per-pixel decision of docs/algorithm.md, shared by the serial and the frozen finder.

A pixel's decision needs its window's maximum ``m`` and its sum ``tot`` taken in raster
order of the window, starting from 0. The finders build them for every pixel of an image
row at once (the same per-pixel order, vectorised across pixels): `classify_three` a 3x3
window inside the frame in one pass, `add_three_taps` both for a 3-wide window row,
`add_taps` the sum alone with the maximum from each window row's `row_max` (wider
windows: a maximum is the same in any order), and `window_taps` continues one pixel's
sums tap by tap. `classify` then turns them into a branch code.

Twin: ``kernels/frozen.cu`` mirrors ``classify`` and ``store_window`` line for line; its
windows add the taps `window_taps` adds, in the same order, and read +0 for each tap
outside the frame, in the sum and the maximum alike. That leaves every decision as it is
here (the argument is at ``tile_index`` in the kernel, its test in tests/test_decision.py).
"""

import numpy as np
from numba import njit
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from aare_lab.detector.arith import (
    NEG_SKIP,
    QUIET_UPDATE,
    SHADOW,
    TEST1_STORE,
    TEST3_SKIP,
    TEST3_STORE,
    round_half_away,
)
from aare_lab.model.params import SATURATED_WINDOW_DTYPES

LOW_BYTES = np.uint64(0x0101010101010101)
HIGH_BITS = np.uint64(0x8080808080808080)
TEST1_STORE_BYTES = np.uint64(int(TEST1_STORE) * 0x0101010101010101)
TEST3_STORE_BYTES = np.uint64(int(TEST3_STORE) * 0x0101010101010101)


@njit(cache=True, nogil=True, error_model="numpy")
def classify(vp, thr_p, m, tot, c3):
    """Branch code from the pixel's value, threshold, window maximum and window sum."""
    if vp < -thr_p:
        return NEG_SKIP
    if m > thr_p:
        return TEST1_STORE if vp == m else SHADOW
    if tot > c3 * thr_p:
        return TEST3_STORE if vp == m else TEST3_SKIP
    return QUIET_UPDATE


@njit(cache=True, nogil=True, error_model="numpy")
def add_three_taps(vrow, tot, m):
    """Add taps -1, 0, 1 of one window row, read from ``vrow``, to every pixel's ``tot`` and
    ``m`` in one pass (3-wide windows, the common case).

    Each pixel's three additions in tap order, with one load and store of ``tot`` and
    ``m`` per pixel instead of one per tap.
    """
    nx = len(vrow)
    tot[0] = (tot[0] + vrow[0]) + vrow[1]
    m[0] = max(m[0], max(vrow[0], vrow[1]))
    left = vrow[:nx - 2]
    centre = vrow[1:nx - 1]
    right = vrow[2:]
    tseg = tot[1:nx - 1]
    mseg = m[1:nx - 1]
    for k in range(len(tseg)):
        tseg[k] = ((tseg[k] + left[k]) + centre[k]) + right[k]
        mseg[k] = max(mseg[k], max(left[k], max(centre[k], right[k])))
    tot[nx - 1] = (tot[nx - 1] + vrow[nx - 2]) + vrow[nx - 1]
    m[nx - 1] = max(m[nx - 1], max(vrow[nx - 2], vrow[nx - 1]))


@njit(cache=True, nogil=True, error_model="numpy")
def classify_three(above, left, row, below, thr, c3, codes, other_left, other_codes):
    """`classify` pixels ``1..nx-2`` of ``row`` by their 3x3 windows, all inside the frame
    (``above``, ``below``: the rows around it); return how many store.

    One pass, the window's nine taps added and compared in registers: the sum in raster
    order from 0, as `add_three_taps` over the three rows, and the maximum of the nine,
    which `classify` reads as the one tap by tap. Each pixel's left tap in its own
    row is read from ``left``: ``row`` itself in the frozen model, the pushed values in the
    serial one, which also wants the codes with the left tap from ``other_left`` (the
    values not pushed) in ``other_codes``; None for both where not. ``codes[0]`` and
    ``codes[nx-1]`` (and ``other_codes``') are left as they are.
    """
    nx = len(row)
    zero = c3 - c3
    count = 0
    a0, a1, a2 = above[:nx - 2], above[1:nx - 1], above[2:]
    r0, r1, r2 = left[:nx - 2], row[1:nx - 1], row[2:]
    b0, b1, b2 = below[:nx - 2], below[1:nx - 1], below[2:]
    t_in, c_out = thr[1:nx - 1], codes[1:nx - 1]
    if other_left is not None:
        o0, o_out = other_left[:nx - 2], other_codes[1:nx - 1]
    for k in range(nx - 2):
        # The sums share the taps before the left one; the maxima all but the left tap.
        head = ((zero + a0[k]) + a1[k]) + a2[k]
        others = max(max(max(a0[k], a1[k]), a2[k]),
                     max(max(r1[k], r2[k]), max(max(b0[k], b1[k]), b2[k])))
        tot = (((((head + r0[k]) + r1[k]) + r2[k]) + b0[k]) + b1[k]) + b2[k]
        code = classify(r1[k], t_in[k], max(others, r0[k]), tot, c3)
        c_out[k] = code
        count += is_store(code)
        if other_left is not None:
            tot = (((((head + o0[k]) + r1[k]) + r2[k]) + b0[k]) + b1[k]) + b2[k]
            o_out[k] = classify(r1[k], t_in[k], max(others, o0[k]), tot, c3)
    return count


#: The most taps of a window row one pass folds (`fold_group`): a 9x9 window's row in one
#: pass (benchmarks/README.md, "Windows wider than 3×3"). Odd, as every count of the
#: passes (`group_size`).
GROUP_TAPS = 9


@njit(cache=True, nogil=True, error_model="numpy")
def add_taps(vrow, rx, tot):
    """Add taps ``-rx..rx`` of one window row, read from ``vrow``, to every pixel's ``tot``.

    Taps outside the frame are skipped and each pixel's additions are in raster order, so
    ``tot`` is bit-identical to a tap-by-tap sum; up to `GROUP_TAPS` taps per pass over
    the row, so that ``tot`` is loaded and stored once per pass.
    """
    add_tap_range(vrow, -rx, rx, tot)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def add_tap_range(vrow, b_lo, b_hi, tot):
    """`add_taps` for taps ``b_lo..b_hi`` of the window row (the serial model's own row
    takes its left and right taps from different values)."""
    b = b_lo
    while b <= b_hi:
        n = group_size(b_hi - b + 1)
        add_tap_group(vrow, b, n, tot)
        b += n


@njit(cache=True, nogil=True, error_model="numpy")
def add_tap_group(vrow, b, n, tot):
    """Add taps ``b..b+n-1`` (``n`` a `group_size`) of ``vrow`` to ``tot``, in that
    order."""
    nx = len(vrow)
    lo = min(max(0, -b), nx)
    hi = max(lo, min(nx, nx - b - n + 1))
    # Pixels near the row's ends, whose window leaves the row: tap by tap, in order.
    for j in range(lo):
        add_inside(vrow, b, n, j, tot)
    for j in range(hi, nx):
        add_inside(vrow, b, n, j, tot)
    # Pixels lo..hi-1 have every tap inside.
    fold_group(vrow[lo + b:], tot[lo:hi], n, False)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def group_size(n):
    """The taps of the next pass when ``n`` are left: the most of 9, 7, 5, 3, 1."""
    return GROUP_TAPS if n >= GROUP_TAPS else n - (n + 1) % 2


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def fold_group(taps, acc, n, take_max):
    """`fold_taps` of ``n`` taps, one of 9, 7, 5, 3, 1 (`group_size`), with ``n`` a
    constant in each call: the tap loop unrolls and the pixel loop vectorises (with the
    count in a variable, the pixels would be folded one at a time). Five counts, not
    nine: each is a vectorised loop to compile, in every caller."""
    if n == 9:
        fold_taps(taps, acc, 9, take_max)
    elif n == 7:
        fold_taps(taps, acc, 7, take_max)
    elif n == 5:
        fold_taps(taps, acc, 5, take_max)
    elif n == 3:
        fold_taps(taps, acc, 3, take_max)
    else:
        fold_taps(taps, acc, 1, take_max)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def fold_taps(taps, acc, n, take_max):
    """Fold into every pixel's ``acc[k]`` its ``n`` taps ``taps[k]``, ``taps[k + 1]``, ...
    ``taps[k + n - 1]``: added in that order, or with ``take_max`` their maximum. Each
    pixel's value stays in a register for the ``n`` taps."""
    for k in range(len(acc)):
        a = acc[k]
        for t in range(n):
            if take_max:
                a = max(a, taps[k + t])
            else:
                a += taps[k + t]
        acc[k] = a


@njit(cache=True, nogil=True, error_model="numpy")
def add_inside(vrow, b, n, j, tot):
    """Add pixel ``j``'s taps ``b..b+n-1`` that lie inside the row, in order."""
    for t in range(n):
        x = j + b + t
        if 0 <= x < len(vrow):
            tot[j] += vrow[x]


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def copy_row(src, out):
    """``out[:] = src`` as an element loop: Numba's slice assignment, which allows for
    overlapping arrays, took three times as long for a 400-pixel row."""
    for j in range(len(out)):
        out[j] = src[j]


@njit(cache=True, nogil=True, error_model="numpy")
def row_max(vrow, rx, out):
    """``out[j]``: the maximum of ``vrow`` over ``j-rx..j+rx`` inside the row.

    The window's maximum is the maximum of its rows' `row_max`: a maximum does not depend
    on the order it is taken in, so the decision sees the one taken tap by tap.
    """
    nx = len(vrow)
    lo = min(rx, nx)
    hi = max(lo, nx - rx)
    # Pixels lo..hi-1 have the whole window row inside: up to GROUP_TAPS taps a pass,
    # from the first tap (taken twice: a maximum).
    inner, first = out[lo:hi], vrow[lo - rx:]
    # A loop, not a slice assignment: that alone took Numba 2 s to compile.
    for k in range(len(inner)):
        inner[k] = first[k]
    b = 0
    while b <= 2 * rx:
        n = group_size(2 * rx + 1 - b)
        fold_group(vrow[lo - rx + b:], inner, n, True)
        b += n
    for j in range(lo):
        out[j] = max_inside(vrow, j, rx)
    for j in range(hi, nx):
        out[j] = max_inside(vrow, j, rx)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def max_inside(vrow, j, rx):
    """The maximum of ``vrow`` over ``j-rx..j+rx`` inside the row."""
    m = vrow[j]
    for x in range(max(0, j - rx), min(len(vrow), j + rx + 1)):
        m = max(m, vrow[x])
    return m


@njit(cache=True, nogil=True, error_model="numpy")
def window_taps(v, i, j, a_lo, a_hi, rx, tot, m):
    """Continue one pixel's window sum and maximum over window rows ``a_lo..a_hi``."""
    ny, nx = v.shape
    for y in range(max(i + a_lo, 0), min(i + a_hi + 1, ny)):
        for x in range(max(j - rx, 0), min(j + rx + 1, nx)):
            val = v[y, x]
            tot += val
            m = max(m, val)
    return tot, m


@njit(cache=True, nogil=True, error_model="numpy")
def is_store(code):
    """Whether a branch code stores a cluster."""
    return code == TEST1_STORE or code == TEST3_STORE


@njit(cache=True, nogil=True, error_model="numpy")
def list_stores(codes, out):
    """Write the columns of the row's stores, in order, to the start of ``out``; return
    how many.

    Eight codes at a time: a word without a store code, the common case, is passed over
    whole (a byte equal to TEST1_STORE or TEST3_STORE shows as a zero byte of the word
    XORed with it).
    """
    words = codes[:len(codes) // 8 * 8].view(np.uint64)
    c = 0
    for w in range(len(words)):
        word = words[w]
        if has_byte(word, TEST1_STORE_BYTES) or has_byte(word, TEST3_STORE_BYTES):
            for j in range(8 * w, 8 * w + 8):
                out[c] = j
                c += is_store(codes[j])
    for j in range(8 * len(words), len(codes)):
        out[c] = j
        c += is_store(codes[j])
    return c


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def has_byte(word, pattern):
    """Whether a byte of ``word`` equals that repeated in ``pattern`` (exact: a borrow
    into a byte only follows a zero byte below it)."""
    x = word ^ pattern
    return ((x - LOW_BYTES) & ~x & HIGH_BITS) != 0


def saturated(value, out):
    """``value`` limited to the range of ``out``'s dtype if that is a saturated window dtype
    (`aare_lab.model.params.SATURATED_WINDOW_DTYPES`), else ``value`` itself."""
    dtype = np.asarray(out).dtype
    if dtype.name not in SATURATED_WINDOW_DTYPES:
        return value
    info = np.iinfo(dtype)
    return min(max(value, info.min), info.max)


@overload(saturated, jit_options={"cache": True, "nogil": True, "error_model": "numpy"})
def _saturated(value, out):
    # Decided when the caller compiles, from the buffer's dtype: int32 and float windows
    # compile to the plain conversion, as before.
    if as_dtype(out.dtype).name not in SATURATED_WINDOW_DTYPES:
        return lambda value, out: value
    info = np.iinfo(as_dtype(out.dtype))
    low, high = float(info.min), float(info.max)
    return lambda value, out: min(max(value, low), high)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def store_window(v, i, j, ry, rx, round_values, out, k):
    """Write the window of ``(i, j)`` into ``out[k]`` in raster order; outside taps are 0.

    With ``round_values`` a value is rounded half away from zero, then `saturated` to an
    int16 ``out``'s range (a conversion would wrap it).
    """
    ny, nx = v.shape
    if ry <= i < ny - ry and rx <= j < nx - rx:
        # Inside the frame: rows of taps without bounds checks.
        for a in range(2 * ry + 1):
            vrow = v[i - ry + a, j - rx:j + rx + 1]
            orow = out[k, a]
            if round_values:
                for b in range(2 * rx + 1):
                    orow[b] = saturated(round_half_away(vrow[b]), out)
            else:
                for b in range(2 * rx + 1):
                    orow[b] = vrow[b]
        return
    for a in range(2 * ry + 1):
        yy = i - ry + a
        for b in range(2 * rx + 1):
            xx = j - rx + b
            if 0 <= yy < ny and 0 <= xx < nx:
                if round_values:
                    out[k, a, b] = saturated(round_half_away(v[yy, xx]), out)
                else:
                    out[k, a, b] = v[yy, xx]
            else:
                out[k, a, b] = 0
