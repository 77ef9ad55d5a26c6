"""The CPU finders' fast window paths give, bit for bit, what the taps one by one give.

`classify_three`, `add_three_taps`, `add_taps` / `add_tap_range` with `row_max` (and the
frozen finder's `window_max` over them), and `list_stores` serve the frozen and the serial
CPU finder; `add_row_taps` below (sum and maximum, tap by tap per window row, in the
state's dtype) and `classify` are the reference they must equal on any values, ties and
frame edges included.
"""

import numpy as np
import pytest

from aare_lab.detector.branches import Branch
from aare_lab.finders._decision import (
    add_tap_range,
    add_taps,
    add_three_taps,
    classify,
    classify_three,
    list_stores,
    row_max,
)
from aare_lab.finders._frozen import window_max


def add_row_taps(vrow, b_lo, b_hi, tot, m):
    """Add taps ``b_lo..b_hi`` of one window row to every pixel's ``tot`` and ``m``, one
    tap at a time in raster order, skipping taps outside the row."""
    nx = len(vrow)
    for b in range(b_lo, b_hi + 1):
        for j in range(nx):
            if 0 <= j + b < nx:
                tot[j] += vrow[j + b]
                m[j] = max(m[j], vrow[j + b])


def rows_with_ties(rng, n, nx, dtype):
    """Rows of values on a coarse grid (many equal taps, so ``vp == m`` ties) and signs."""
    return (rng.integers(-6, 7, (n, nx)) * 0.75 + rng.normal(0, 1e-3, (n, nx))
            * rng.integers(0, 2, (n, nx))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nx", [2, 3, 5, 64])
@pytest.mark.parametrize("own_left", [True, False], ids=["frozen", "serial"])
def test_classify_three_equals_the_taps_row_by_row(dtype, nx, own_left):
    # The serial model reads each pixel's left tap from the pushed values (another row)
    # and wants the codes with the row's own left tap beside them.
    rng = np.random.default_rng(nx)

    def expected_codes(above, left, row, below, thr, c3):
        tot, m = np.zeros(nx, dtype), row.copy()
        add_row_taps(above, -1, 1, tot, m)
        add_row_taps(left, -1, -1, tot, m)
        add_row_taps(row, 0, 1, tot, m)
        add_row_taps(below, -1, 1, tot, m)
        return np.array([classify(row[j], thr[j], m[j], tot[j], c3) for j in range(nx)],
                        np.uint8)

    for _ in range(50):
        above, row, below, pushed = rows_with_ties(rng, 4, nx, dtype)
        thr = rng.uniform(0.5, 4, nx).astype(dtype)
        c3 = np.sqrt(dtype(9))
        codes, other_codes = np.zeros(nx, np.uint8), np.zeros(nx, np.uint8)
        if own_left:
            count = classify_three(above, row, row, below, thr, c3, codes, None, None)
            expected = expected_codes(above, row, row, below, thr, c3)
        else:
            count = classify_three(above, pushed, row, below, thr, c3, codes, row, other_codes)
            expected = expected_codes(above, pushed, row, below, thr, c3)
            other = expected_codes(above, row, row, below, thr, c3)
            np.testing.assert_array_equal(other_codes[1:nx - 1], other[1:nx - 1])
            assert other_codes[0] == 0 and other_codes[-1] == 0
        np.testing.assert_array_equal(codes[1:nx - 1], expected[1:nx - 1])
        stores = np.isin(expected[1:nx - 1], [Branch.TEST1_STORE, Branch.TEST3_STORE])
        assert count == stores.sum()
        assert codes[0] == 0 and codes[-1] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rx", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("nx", [1, 2, 4, 9, 11, 40])
def test_add_taps_and_row_max_equal_the_taps_one_by_one(dtype, rx, nx):
    rng = np.random.default_rng(100 * rx + nx)
    row = rng.normal(0, 10, nx).astype(dtype)
    start = rng.normal(0, 10, nx).astype(dtype)

    tot, m = start.copy(), row.copy()
    add_row_taps(row, -rx, rx, tot, m)
    fast = start.copy()
    add_taps(row, rx, fast)
    assert fast.tobytes() == tot.tobytes()

    maxima = np.empty(nx, dtype)
    row_max(row, rx, maxima)
    np.testing.assert_array_equal(maxima, m)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ry", [0, 1, 2, 4, 5])
def test_window_max_is_the_maximum_of_the_window_rows(dtype, ry):
    # Rows in a ring of 2 ry + 1, as the frozen finder keeps their row maxima; rows near
    # the frame's top and bottom leave the ring's other rows out.
    rng = np.random.default_rng(ry)
    ny, nx, ring = 12, 40, 2 * ry + 1
    rows = rng.normal(0, 10, (ny, nx)).astype(dtype)
    for i in range(ny):
        maxima = rng.normal(0, 10, (ring, nx)).astype(dtype)
        window = range(max(0, i - ry), min(ny, i + ry + 1))
        for r in window:
            maxima[r % ring] = rows[r]
        m = np.empty(nx, dtype)
        window_max(maxima, i, ry, ny, m)
        np.testing.assert_array_equal(m, rows[window.start:window.stop].max(axis=0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nx", [2, 3, 5, 40])
def test_add_three_taps_equals_the_taps_one_by_one(dtype, nx):
    rng = np.random.default_rng(nx)
    row, start = rows_with_ties(rng, 2, nx, dtype)
    tot, m = start.copy(), row.copy()
    add_row_taps(row, -1, 1, tot, m)
    fast_tot, fast_m = start.copy(), row.copy()
    add_three_taps(row, fast_tot, fast_m)
    assert fast_tot.tobytes() == tot.tobytes()
    np.testing.assert_array_equal(fast_m, m)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b_lo, b_hi", [(-4, -1), (0, 4), (-1, -1), (0, 0), (-5, 2), (1, 3)])
@pytest.mark.parametrize("nx", [1, 3, 9, 40])
def test_add_tap_range_equals_the_taps_one_by_one(dtype, b_lo, b_hi, nx):
    # The serial model's own window row: left taps from the pushed values, the rest not.
    rng = np.random.default_rng(100 * nx + 10 * (b_lo + 5) + b_hi)
    row = rng.normal(0, 10, nx).astype(dtype)
    start = rng.normal(0, 10, nx).astype(dtype)
    tot, m = start.copy(), row.copy()
    add_row_taps(row, b_lo, b_hi, tot, m)
    fast = start.copy()
    add_tap_range(row, b_lo, b_hi, fast)
    assert fast.tobytes() == tot.tobytes()


@pytest.mark.parametrize("nx", [1, 7, 8, 9, 16, 403])
def test_list_stores_lists_the_store_columns_in_order(nx):
    rng = np.random.default_rng(nx)
    for density in (0.0, 0.02, 0.5, 1.0):
        codes = rng.integers(0, 7, nx).astype(np.uint8)
        codes[rng.random(nx) > density] = Branch.QUIET_UPDATE
        out = np.full(nx, -1, np.int32)
        n = list_stores(codes, out)
        expected = np.flatnonzero(np.isin(codes, [Branch.TEST1_STORE, Branch.TEST3_STORE]))
        assert n == len(expected)
        np.testing.assert_array_equal(out[:len(expected)], expected)
