"""`quotients_row` forms ``s / N`` without dividing: every bit must be the division's.

The oracle is NumPy's IEEE division of the same arrays. The rows cover the pedestal
states the finders hold (sums of counts, centred sums near zero, sums of squares), the
values where the correction is not exact (zero, subnormal, huge), which must take the
division, and for float32 every significand in [1, 2) against the N most likely to
break a reciprocal (all ones in the significand: 2**k - 1).
"""

import numpy as np
import pytest

from aare_lab.detector.arith import in_correction_range, quotients_row

BITS = {np.float32: np.uint32, np.float64: np.uint64}
NS = (1, 2, 3, 7, 100, 255, 300, 1000, 1023, 4095, 65535, 1_000_000)


def state_rows(dtype, n, rng):
    """Rows of what a pedestal's ``s`` and ``s2`` hold, and rows with values out of the
    correction's range mixed in."""
    rows = [rng.normal(1000.0, 30.0, 400) * n,             # float64: sums of counts
            rng.normal(0.0, 5.0, 400) * n,                  # float32: centred sums
            rng.gamma(2.0, 30.0, 400) * n,                  # sums of squares
            rng.uniform(-1e6, 1e6, 400),
            np.ldexp(rng.uniform(1, 2, 400), rng.integers(-59, 59, 400))]
    tiny = np.finfo(dtype).tiny
    special = rng.normal(1000.0, 30.0, 400)
    special[[3, 50, 51, 100, 200, 399]] = [0.0, -0.0, tiny / 4, -1e30, 2.0 ** -61, 2.0 ** 61]
    rows.append(special)
    return np.array(rows).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", NS)
def test_quotients_have_the_bits_of_the_division(dtype, n):
    rng = np.random.default_rng(n)
    N = dtype(n)
    for s in state_rows(dtype, n, rng):
        out = np.full_like(s, np.nan)
        quotients_row(s, N, out)
        np.testing.assert_array_equal(out.view(BITS[dtype]), (s / N).view(BITS[dtype]))


@pytest.mark.parametrize("n", [255, 1023, 65535])
def test_every_float32_significand(n):
    s = (np.float32(1) + np.arange(1 << 23, dtype=np.float32) * np.float32(2.0 ** -23))
    s = s.reshape(-1, 1024)
    N, out = np.float32(n), np.empty(1024, np.float32)
    for row in s[:: 1 if n == 1023 else 7]:
        quotients_row(row, N, out)
        np.testing.assert_array_equal(out.view(np.uint32), (row / N).view(np.uint32))


def test_a_zero_in_the_row_takes_the_division():
    # The correction gives +0 for -0 / N, whose quotient is -0: the row must be divided.
    s = np.array([1000.0, -0.0, 2000.0])
    assert not in_correction_range(-0.0) and in_correction_range(1000.0)
    out = np.empty(3)
    quotients_row(s, 3.0, out)
    assert np.signbit(out[1])
