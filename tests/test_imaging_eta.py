"""η2, full η2, η3 and cross η3: their definitions on hand-made windows, and PSI aare
2026.9.30's functions value for value on the same clusters (aare runs in its own
interpreter, see `aare_env`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from aare_env import aare_python

from aare_lab.imaging import cross_eta3, eta2, eta3, full_eta2
from aare_lab.imaging.eta import _ARRAY_PATHS, CORNERS, _compiled

RUNNER = Path(__file__).with_name("imaging_runner.py")
AARE_VERSION = "2026.9.30"
KINDS = {"eta2": eta2, "full_eta2": full_eta2, "eta3": eta3, "cross_eta3": cross_eta3}
#: (window size, dtype): every cluster type aare 2026.9.30 binds η for.
CASES = [(s, d) for s in (3, 5, 7, 9) for d in ("int32", "float32", "float64")] + \
        [(3, "int16")]


def window(rows) -> np.ndarray:
    return np.array([rows], np.int32)


@pytest.mark.parametrize("peak, corner", [((0, 0), "top_left"), ((0, 2), "top_right"),
                                          ((2, 0), "bottom_left"), ((2, 2), "bottom_right")])
def test_the_corner_is_the_2x2_block_of_largest_sum(peak, corner):
    w = np.full((1, 3, 3), 1, np.int32)
    w[0, 1, 1] = 100
    w[0, peak[0], peak[1]] = 50
    assert CORNERS[int(eta2(w)["corner"][0])] == corner
    assert int(eta2(w)["sum"][0]) == 100 + 50 + 1 + 1


def test_eta2_is_the_share_of_the_right_and_lower_pixel_of_the_pair():
    # Block top-left: the pair in the centre row is (left 30, centre 90), in the centre
    # column (above 10, centre 90).
    w = window([[5, 10, 0], [30, 90, 0], [0, 0, 0]])
    result = eta2(w)
    assert float(result["eta_x"][0]) == 90 / 120
    assert float(result["eta_y"][0]) == 90 / 100
    full = full_eta2(w)
    assert float(full["eta_x"][0]) == (10 + 90) / 135
    assert float(full["eta_y"][0]) == (30 + 90) / 135


def test_eta3_and_cross_eta3_differ_by_the_corner_pixels():
    w = window([[20, 0, 0], [10, 60, 30], [0, 0, 0]])
    assert float(eta3(w)["eta_x"][0]) == (30 - 30) / 120
    assert float(eta3(w)["eta_y"][0]) == (0 - 20) / 120
    assert float(cross_eta3(w)["eta_x"][0]) == (30 - 10) / 100
    assert float(cross_eta3(w)["eta_y"][0]) == 0.0
    assert int(eta3(w)["sum"][0]) == int(cross_eta3(w)["sum"][0]) == 120


@pytest.mark.parametrize("kind", KINDS)
def test_a_zero_denominator_leaves_eta_at_zero(kind):
    # The centre row cancels, which zeroes cross η3's x denominator; the window sums to 0.
    w = window([[0, 0, 0], [-5, 0, 5], [0, 0, 0]])
    result = KINDS[kind](np.concatenate([w, np.zeros_like(w)]))
    assert (result["eta_x"][1] == 0) and (result["eta_y"][1] == 0)
    if kind in ("eta3", "cross_eta3"):
        assert result["eta_y"][0] == 0 and np.isfinite(result["eta_x"][0])


@pytest.mark.parametrize("kind, shape", [
    *[(kind, shape) for kind in ("eta3", "cross_eta3") for shape in ((7, 7), (11, 11), (5, 3))],
    # windows that aare does not bind for eta2: their central 3x3 (aare's reduce_to_3x3)
    *[(kind, shape) for kind in ("eta2", "full_eta2")
      for shape in ((11, 11), (5, 3), (3, 5), (7, 5))],
])
def test_larger_windows_use_their_central_3x3(kind, shape):
    rng = np.random.default_rng(1)
    big = rng.integers(-50, 500, (20, *shape)).astype(np.int32)
    cy, cx = shape[0] // 2, shape[1] // 2
    central = np.ascontiguousarray(big[:, cy - 1:cy + 2, cx - 1:cx + 2])
    xr.testing.assert_identical(KINDS[kind](big), KINDS[kind](central))



def test_a_result_gives_dataarrays_on_its_cluster_dimension():
    windows = np.random.default_rng(2).integers(0, 100, (4, 3, 3)).astype(np.int32)
    result = xr.Dataset({"window": (("cluster", "wy", "wx"), windows)})
    etas = eta2(result)
    assert etas["eta_x"].dims == ("cluster",) and etas.sizes["cluster"] == 4
    assert etas["corner"].attrs["flag_meanings"] == " ".join(CORNERS)
    assert etas["sum"].dtype == np.int32


def test_windows_smaller_than_3x3_are_refused():
    with pytest.raises(ValueError, match="at least 3x3"):
        eta2(np.zeros((2, 1, 3), np.int32))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size, dtype", [(3, "int32"), (3, "float32"), (5, "float32"),
                                         (9, "float64"), (3, "int16"), (7, "int32")])
def test_the_array_path_for_cupy_equals_the_compiled_loops(kind, size, dtype):
    """CuPy windows take the element-wise expressions, NumPy windows the compiled loops:
    the same values, bit for bit (run here with NumPy as the array module)."""
    windows = oracle_windows(np.random.default_rng(size), 800, size, dtype)
    compiled, arrays = _compiled(kind, windows), _ARRAY_PATHS[kind](windows)
    for ours, theirs in zip(compiled, arrays):
        if ours is None:
            assert theirs is None
            continue
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


# --- PSI aare's functions --------------------------------------------------------------------

def oracle_windows(rng, n, size, dtype) -> np.ndarray:
    """Windows with ties between 2x2 blocks, zero rows and columns, negative taps and, for
    floats, values whose sums round (the order of the additions shows)."""
    shape = (n, size, size)
    if dtype.startswith("int"):
        windows = rng.integers(-20, 40, shape)
        windows[: n // 4] = rng.integers(0, 3, (n // 4, size, size))  # ties and zeros
    else:
        windows = rng.normal(50, 300, shape) * rng.choice([1e-3, 1, 1e5], (n, 1, 1))
        windows[: n // 4] = np.round(windows[: n // 4] / 100)
    windows[n // 4: n // 4 + 20] = 0
    c = size // 2
    windows[n // 2:, c, c] += 1000  # photon-like: a bright centre
    return windows.astype(dtype)


@pytest.fixture(scope="module")
def aare_etas(tmp_path_factory):
    """aare's four η on every case, in one run of its interpreter."""
    python = aare_python(AARE_VERSION)
    if python is None:
        pytest.skip(f"aare {AARE_VERSION} is not installed: run AARE_VERSION={AARE_VERSION} "
                    f"VENV=/opt/aare-{AARE_VERSION} bash tools/install_aare.sh "
                    f"(or set AARE_PYTHON_{AARE_VERSION.replace('.', '_')})")
    folder = tmp_path_factory.mktemp("aare-eta")
    rng = np.random.default_rng(36)
    jobs, given = [], {}
    for size, dtype in CASES:
        name = f"{size}x{size}-{dtype}"
        windows = oracle_windows(rng, 1500, size, dtype)
        given[name] = windows
        np.savez(folder / f"{name}.npz", x=np.arange(len(windows)) % 400,
                 y=np.arange(len(windows)) % 300, data=windows)
        jobs.append({"task": "eta", "npz": str(folder / f"{name}.npz"), "dtype": dtype,
                     "out": str(folder / f"{name}-out.npz")})
    (folder / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([python, str(RUNNER), str(folder / "jobs.json")], check=True, timeout=300)
    return {name: (windows, np.load(folder / f"{name}-out.npz"))
            for name, windows in given.items()}


@pytest.mark.aare
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", [f"{s}x{s}-{d}" for s, d in CASES])
def test_eta_equals_aare(aare_etas, case, kind):
    """Bit for bit: the same float64 η, the same corner and the same sum in the same type."""
    windows, theirs = aare_etas[case]
    ours = KINDS[kind](windows)
    np.testing.assert_array_equal(ours["eta_x"].to_numpy(), theirs[f"{kind}_x"])
    np.testing.assert_array_equal(ours["eta_y"].to_numpy(), theirs[f"{kind}_y"])
    assert ours["sum"].dtype == theirs[f"{kind}_sum"].dtype
    np.testing.assert_array_equal(ours["sum"].to_numpy(), theirs[f"{kind}_sum"])
    if "corner" in ours:
        np.testing.assert_array_equal(ours["corner"].to_numpy(), theirs[f"{kind}_c"])
