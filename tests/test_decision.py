"""Every branch of the per-pixel decision, pinned on hand-built frames.

The pedestal has mean 101 and rms 1 (N = 4), so with n_sigma = 5 the threshold is 5 and
Test 3 needs a 3x3 window sum above 3 * 5 = 15. Frames are written as their
pedestal-subtracted values; every expected code and window below follows from the rules
of docs/algorithm.md applied by hand.
"""

import numpy as np
import pytest
from helpers import frame_from_values, unit_pedestal

from aare_lab import Branch, FrozenFinder, SerialFinder

FINDERS = [SerialFinder, FrozenFinder]
DTYPES = ["float64", "float32"]
NOISES = ["running", "fixed"]


def run(finder_cls, v, dtype="float64", noise="running", cluster_size=(3, 3), cap=None,
        zero_rms=None, n_sigma=5.0):
    v = np.asarray(v)
    ped = unit_pedestal(v.shape, dtype, noise, zero_rms)
    finder = finder_cls(ped, n_sigma, cluster_size, cap)
    result = finder.find(frame_from_values(v), branch_maps=True, progress=False)
    codes = result["branch_map"].to_numpy()[0]
    return result, codes


def centres(result):
    return list(zip(result["y"].to_numpy().tolist(), result["x"].to_numpy().tolist()))


@pytest.fixture(params=[(f, d, n) for f in FINDERS for d in DTYPES for n in NOISES],
                ids=lambda p: f"{p[0].name}-{p[1]}-{p[2]}")
def config(request):
    return request.param


def test_isolated_photon_is_test1_store_and_shadows_neighbours(config):
    finder, dtype, noise = config
    v = np.zeros((7, 7), int)
    v[3, 3] = 20
    result, codes = run(finder, v, dtype, noise)
    assert codes[3, 3] == Branch.TEST1_STORE
    neighbours = codes[2:5, 2:5].copy()
    neighbours[1, 1] = Branch.SHADOW
    assert (neighbours == Branch.SHADOW).all()
    assert codes[0, 0] == Branch.QUIET_UPDATE
    assert centres(result) == [(3, 3)]
    expected = np.zeros((3, 3), int)
    expected[1, 1] = 20
    np.testing.assert_array_equal(result["window"].to_numpy()[0], expected)
    assert result["energy"].item() == 20
    assert result["n_found"].item() == 1


def test_negative_pixel_is_neg_skip_only_below_minus_threshold(config):
    finder, dtype, noise = config
    v = np.zeros((5, 5), int)
    v[1, 1] = -6
    v[3, 3] = -5
    _, codes = run(finder, v, dtype, noise)
    assert codes[1, 1] == Branch.NEG_SKIP
    assert codes[3, 3] == Branch.QUIET_UPDATE, "v == -thr is not below -thr"


def test_equal_neighbours_both_store(config):
    finder, dtype, noise = config
    v = np.zeros((5, 6), int)
    v[2, 2] = v[2, 3] = 12
    result, codes = run(finder, v, dtype, noise)
    assert codes[2, 2] == codes[2, 3] == Branch.TEST1_STORE
    assert centres(result) == [(2, 2), (2, 3)]


def test_test3_store_and_skip(config):
    finder, dtype, noise = config
    v = np.zeros((9, 9), int)
    # Serial reads see earlier quiet pixels pushed (2 -> 1.5, 3 -> 2.25); the sums
    # below stay on the same side of 15 in both models.
    v[1:4, 1:4] = 2          # window sum 18 (serial 16) > 15, centre equals the max
    v[5:8, 5:8] = 3
    v[6, 6] = 2              # window sum 26 (serial 24.5) > 15, centre below the max
    result, codes = run(finder, v, dtype, noise)
    assert codes[2, 2] == Branch.TEST3_STORE
    assert codes[6, 6] == Branch.TEST3_SKIP
    assert codes[1, 2] == Branch.QUIET_UPDATE, "sum 12 is not above 15"
    assert (2, 2) in centres(result) and (6, 6) not in centres(result)
    np.testing.assert_array_equal(result["window"].to_numpy()[0], np.full((3, 3), 2))


def test_test3_needs_sum_strictly_above(config):
    finder, dtype, noise = config
    v = np.zeros((5, 5), int)
    v[1:4, 1:4] = [[2, 2, 2], [2, 1, 2], [1, 2, 1]]  # sum 15 == 3 * 5
    v[2, 2] = 2
    v[3, 1] = 0                                      # sum 15
    _, codes = run(finder, v, dtype, noise)
    assert v[1:4, 1:4].sum() == 15
    assert codes[2, 2] == Branch.QUIET_UPDATE


def test_test1_needs_max_strictly_above_threshold(config):
    finder, dtype, noise = config
    v = np.zeros((5, 5), int)
    v[2, 2] = 5
    _, codes = run(finder, v, dtype, noise)
    assert codes[2, 2] == Branch.QUIET_UPDATE


def test_corner_and_edge_windows_skip_outside_taps(config):
    finder, dtype, noise = config
    v = np.zeros((6, 7), int)
    v[0, 0] = 30
    v[0, 1] = 4
    v[5, 3] = 25
    v[4, 3] = -3
    result, codes = run(finder, v, dtype, noise)
    assert codes[0, 0] == Branch.TEST1_STORE
    assert codes[5, 3] == Branch.TEST1_STORE
    assert centres(result) == [(0, 0), (5, 3)]
    w = result["window"].to_numpy()
    np.testing.assert_array_equal(w[0], [[0, 0, 0], [0, 30, 4], [0, 0, 0]])
    np.testing.assert_array_equal(w[1], [[0, -3, 0], [0, 25, 0], [0, 0, 0]])


def test_edge_taps_are_not_zeros_in_the_max():
    # A negative centre whose in-frame window is all negative: max is the largest real
    # tap (-1), not an outside 0, so with a zero threshold Test 1 fails.
    v = np.full((3, 3), -1)
    zero = np.ones((3, 3), bool)
    for finder in FINDERS:
        _, codes = run(finder, v, zero_rms=zero)
        assert (codes == Branch.NEG_SKIP).all()


def test_zero_rms_pixels(config):
    finder, dtype, noise = config
    v = np.zeros((5, 5), int)
    v[2, 2] = 1
    v[0, 4] = -1
    zero = np.ones((5, 5), bool)
    result, codes = run(finder, v, dtype, noise, zero_rms=zero)
    assert codes[2, 2] == Branch.TEST1_STORE, "thr = 0, so any positive value is a photon"
    assert codes[0, 4] == Branch.NEG_SKIP
    assert codes[4, 0] == Branch.QUIET_UPDATE, "0 is neither below -0 nor above 0"
    assert centres(result) == [(2, 2)]


@pytest.mark.parametrize("finder", FINDERS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rectangular_cluster_uses_sqrt_of_its_area(finder, dtype):
    # 3 rows x 5 columns: Test 3 compares with sqrt(15) * 5 = 19.36... Only taps after
    # the centre in raster order are non-zero, so both timing models read the same sums.
    v = np.zeros((7, 9), int)
    v[2, 2:5] = [5, 3, 2]
    v[3, 0:5] = [2, 2, 2, 2, 1]      # sum 19 < 19.36: quiet
    v[5, 6:9] = [5, 3, 2]
    v[6, 4:9] = 2                    # sum 20 > 19.36: Test 3
    result, codes = run(finder, v, dtype, cluster_size=(3, 5))
    assert v[1:4, 0:5].sum() == 19 and v[4:7, 4:9].sum() == 20
    assert codes[2, 2] == Branch.QUIET_UPDATE
    assert codes[5, 6] == Branch.TEST3_STORE
    assert centres(result) == [(5, 6)]
    assert result["window"].shape == (1, 3, 5)
    np.testing.assert_array_equal(result["window"].to_numpy()[0], v[4:7, 4:9])


@pytest.mark.parametrize("dtype", DTYPES)
def test_serial_and_frozen_differ_by_update_timing(dtype):
    # L at (2, 2) and B at (2, 3) both read 4. L is quiet (sum 12) and, in the serial
    # model, is pushed before B is scanned: B then reads L as 4 - 4/N = 3, and its window
    # sum drops from 16 (> 15: TEST3_STORE in the frozen model) to 15 (quiet).
    v = np.zeros((5, 6), int)
    v[2, 2] = v[2, 3] = 4
    v[2, 4] = 2
    v[3, 2:5] = 2
    frozen, fcodes = run(FrozenFinder, v, dtype)
    serial, scodes = run(SerialFinder, v, dtype)
    assert fcodes[2, 2] == scodes[2, 2] == Branch.QUIET_UPDATE
    assert fcodes[2, 3] == Branch.TEST3_STORE
    assert scodes[2, 3] == Branch.QUIET_UPDATE
    assert centres(frozen) == [(2, 3)] and centres(serial) == []
    np.testing.assert_array_equal(frozen["window"].to_numpy()[0],
                                  [[0, 0, 0], [4, 4, 2], [2, 2, 2]])


@pytest.mark.parametrize("finder", FINDERS)
def test_window_values_round_half_away_from_zero(finder):
    # mean 101 + 1/2: dark 100, 101, 102, 101 -> sum 404... use N = 2: (101 + 102) / 2
    from aare_lab import Pedestal

    ped = Pedestal((3, 3), 2)
    ped.push_dark(np.stack([np.full((3, 3), 101), np.full((3, 3), 102)]).astype(np.uint16))
    frame = np.full((1, 3, 3), 101, np.uint16)   # v = -0.5 everywhere
    frame[0, 1, 1] = 112                         # v = 10.5
    frame[0, 0, 0] = 104                         # v = 2.5
    result = finder(ped, 5.0, (3, 3)).find(frame, progress=False)
    np.testing.assert_array_equal(result["window"].to_numpy()[0],
                                  [[3, -1, -1], [-1, 11, -1], [-1, -1, -1]])


@pytest.mark.parametrize("finder", FINDERS)
def test_float_windows_keep_the_exact_values(finder):
    from aare_lab import Pedestal

    ped = Pedestal((3, 3), 2)
    ped.push_dark(np.stack([np.full((3, 3), 101), np.full((3, 3), 102)]).astype(np.uint16))
    frame = np.full((1, 3, 3), 101, np.uint16)
    frame[0, 1, 1] = 112
    result = finder(ped, 5.0, (3, 3), window_dtype="float64").find(frame, progress=False)
    expected = np.full((3, 3), -0.5)
    expected[1, 1] = 10.5
    np.testing.assert_array_equal(result["window"].to_numpy()[0], expected)
    assert result["window"].dtype == np.float64


def window_sums(v, ry, rx, outside):
    """Every pixel's window sum and maximum, taps in raster order as the finders add them
    (`aare_lab.finders._decision`, ``val > m ? val : m`` as the CUDA kernel
    compares): taps outside the frame left out (``outside=None``, the finders) or read as
    ``outside`` (the kernel's zeros)."""
    ny, nx = v.shape
    tot, m = np.zeros_like(v), v.copy()
    padded = np.pad(v, ((ry, ry), (rx, rx)), constant_values=0 if outside is None else outside)
    frame = np.pad(np.ones(v.shape, bool), ((ry, ry), (rx, rx)), constant_values=False)
    for a in range(2 * ry + 1):
        for c in range(2 * rx + 1):
            tap = padded[a:a + ny, c:c + nx]
            read = frame[a:a + ny, c:c + nx] | (outside is not None)
            tot = np.where(read, tot + tap, tot)
            m = np.where(read & (tap > m), tap, m)
    return tot, m


def decisions(v, thr, c3, ry, rx, outside):
    """Every pixel's branch code, window sum and maximum (`window_sums`)."""
    from aare_lab.finders._decision import classify

    tot, m = window_sums(v, ry, rx, outside)
    codes = np.array([classify(v.flat[k], thr.flat[k], m.flat[k], tot.flat[k], c3)
                      for k in range(v.size)]).reshape(v.shape)
    return codes, tot, m


#: Values where zeros for the taps outside could matter: below zero down to -inf, both
#: zeros, a float32 subnormal, NaN and photons; thresholds at zero, below it (a negative
#: gain's keV), infinite and NaN.
VALUES = [-3.5, -1.0, -0.0, 0.0, -1e-45, -6.0, -np.inf, np.nan, 2.0, 7.0]
THRESHOLDS = [0.0, 5.0, -5.0, 1e-40, np.inf, np.nan]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cluster_size", [(3, 3), (5, 3), (9, 9), (11, 3)])
def test_zeros_for_the_taps_outside_the_frame_change_no_decision(dtype, cluster_size):
    """The CUDA kernel reads zeros where a window's taps lie outside the frame
    (``tile_index`` in kernels/frozen.cu), the finders leave them out. The sums are the
    same bits; a zero raises the maximum only of windows whose taps are all below zero,
    and the decision stays the same for every threshold as c3 = sqrt(cy * cx) > 0."""
    rng = np.random.default_rng(11)
    ry, rx = cluster_size[0] // 2, cluster_size[1] // 2
    c3 = np.sqrt(np.dtype(dtype).type(cluster_size[0] * cluster_size[1]))
    raised = 0
    for _ in range(20):
        v = rng.choice(np.array(VALUES, dtype), size=(8, 11))
        # Windows at the left edge below zero or -0, at the top left corner below zero.
        v[:, :2] = -np.abs(v[:, :2])
        v[:ry + 2, :rx + 2] = rng.choice(np.array([-3.5, -1e-45, -6.0], dtype), (ry + 2, rx + 2))
        thr = rng.choice(np.array(THRESHOLDS, dtype), size=v.shape)
        left_out, tot_left_out, m_left_out = decisions(v, thr, c3, ry, rx, None)
        zeros, tot_zeros, m_zeros = decisions(v, thr, c3, ry, rx, 0.0)
        np.testing.assert_array_equal(tot_zeros.view(f"u{v.itemsize}"),
                                      tot_left_out.view(f"u{v.itemsize}"))
        np.testing.assert_array_equal(zeros, left_out)
        # Windows whose maximum a zero raised and which the first test does not settle.
        raised += ((m_zeros != m_left_out) & (left_out != Branch.NEG_SKIP)).sum()
    assert raised > 0, "no undecided maximum was raised by a zero: the case tests nothing"


def test_zeros_for_the_taps_outside_would_change_a_decision_were_c3_negative():
    # The argument needs c3 > 0: with c3 < 0 a window of negative taps passes Test 3, and
    # v(p) == m then tells TEST3_STORE (taps left out) from TEST3_SKIP (zeros).
    v = np.full((3, 3), -1.0)
    thr = np.full(v.shape, 5.0)
    left_out, _, _ = decisions(v, thr, -3.0, 1, 1, None)
    zeros, _, _ = decisions(v, thr, -3.0, 1, 1, 0.0)
    assert left_out[0, 0] == Branch.TEST3_STORE and zeros[0, 0] == Branch.TEST3_SKIP
