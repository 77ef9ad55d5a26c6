"""The result Dataset: schema, netCDF round trip, spectra, branch maps."""

import numpy as np
import pytest
import xarray as xr

from aare_lab import (
    Branch,
    FrozenFinder,
    Pedestal,
    branch_maps,
    load_result,
    save_result,
    spectrum,
    truncated_frames,
)
from aare_lab.model.results import make_result, window_energies
from aare_lab.model.spec import FinderSpec


@pytest.fixture
def result():
    # Dark frames alternate 499/501 (rms 1); data frames are flat apart from the photons:
    # one at (5, 5) in every frame, and a second, spread over a column, in frame 42.
    ped = Pedestal((20, 24), 10, "float32", "fixed")
    dark = np.full((10, 20, 24), 499, np.uint16)
    dark[1::2] = 501
    ped.push_dark(dark)
    frames = np.full((6, 20, 24), 500, np.uint16)
    frames[:, 5, 5] += 200
    frames[2, 10:13, 10] += 150
    with pytest.warns(UserWarning):
        return FrozenFinder(ped, 5.0, "5x3", 1, window_dtype="float32").find(
            frames, frame_numbers=np.arange(6) + 40, branch_maps=[41, 42], progress=False)


def test_schema(result):
    assert result["frame_number"].dtype == np.int64
    assert result["window"].dims == ("cluster", "wy", "wx")
    assert result["window"].dtype == np.float32
    np.testing.assert_array_equal(result["wy"], [-2, -1, 0, 1, 2])
    np.testing.assert_array_equal(result["wx"], [-1, 0, 1])
    np.testing.assert_allclose(result["energy"], result["window"].sum(("wy", "wx")), rtol=1e-6)
    np.testing.assert_array_equal(result["frame"], np.arange(40, 46))
    assert result["n_found"].dims == ("frame",)


def test_round_trip_is_lossless(result, tmp_path):
    path = tmp_path / "r.nc"
    save_result(result, path)
    loaded = load_result(path)
    xr.testing.assert_identical(loaded, result)
    for name in result.variables:
        assert loaded[name].dtype == result[name].dtype, name
    assert loaded.attrs["max_clusters_per_frame"] == 1
    np.testing.assert_array_equal(loaded["branch_map"].attrs["flag_values"], np.arange(7))


def test_empty_result_round_trips(tmp_path):
    empty = make_result(
        spec=FinderSpec("serial", n_pedestal=3), frame_shape=(4, 4), frame_numbers=np.zeros(0, np.int64),
        n_found=np.zeros(0), n_kept=np.zeros(0), cluster_frame=np.zeros(0),
        cluster_y=np.zeros(0), cluster_x=np.zeros(0), windows=np.zeros((0, 3, 3), np.int32))
    save_result(empty, tmp_path / "e.nc")
    xr.testing.assert_identical(load_result(tmp_path / "e.nc"), empty)
    assert empty.attrs["max_clusters_per_frame"] == -1


def test_load_missing_file_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no result file"):
        load_result(tmp_path / "missing.nc")


def test_branch_maps_are_a_cf_flagged_dataarray(result):
    maps = branch_maps(result)
    assert maps.dims == ("frame", "y", "x")
    np.testing.assert_array_equal(maps["frame"], [41, 42])
    assert maps.attrs["flag_meanings"].split() == [b.name for b in Branch]
    np.testing.assert_array_equal(maps.attrs["flag_values"], [b.value for b in Branch])
    assert maps.sel(frame=42, y=11, x=10).item() in (Branch.TEST1_STORE, Branch.TEST3_STORE)
    assert maps.sel(frame=41, y=5, x=5).item() == Branch.TEST1_STORE


def test_branch_maps_missing_is_a_clear_error():
    empty = xr.Dataset()
    with pytest.raises(KeyError, match="branch_maps=True"):
        branch_maps(empty)


def test_truncated_frames(result):
    # frame 42 holds two photons, the cap is 1
    np.testing.assert_array_equal(truncated_frames(result), [42])


def test_spectrum_counts_and_edges(result):
    spec = spectrum(result, bins=np.array([0.0, 100.0, 180.0, 1000.0]))
    energy = result["energy"].to_numpy()
    expected = [(energy < 100).sum(), ((energy >= 100) & (energy < 180)).sum(),
                (energy >= 180).sum()]
    np.testing.assert_array_equal(spec.to_numpy(), expected)
    np.testing.assert_array_equal(spec["energy_lo"], [0, 100, 180])
    np.testing.assert_array_equal(spec["energy_hi"], [100, 180, 1000])
    np.testing.assert_array_equal(spec["energy"], [50, 140, 590])
    assert spec.attrs["finder"] == "frozen"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_energies_are_numpys_sums_to_the_bit(dtype):
    """Float windows of every shape the finders make (1..11 by 1..11) and larger ones (more
    taps than NumPy adds in one block), with values over sixteen decades and of both signs:
    each energy is NumPy's float64 sum, bit for bit, whatever its rounding."""
    rng = np.random.default_rng(12)
    shapes = [(wy, wx) for wy in range(1, 12) for wx in range(1, 12)] + [(13, 13), (17, 17)]
    for shape in shapes:
        windows = (rng.normal(0, 1e3, (300, *shape))
                   * rng.choice([1.0, 1e-8, 1e8], (300, *shape))).astype(dtype)
        windows[0] = -0.0
        expected = windows.sum(axis=(1, 2), dtype=np.float64)
        got = window_energies(windows)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64), err_msg=shape)


@pytest.mark.parametrize("dtype", ["int16", "int32"])
def test_integer_energies_do_not_overflow(dtype):
    info = np.iinfo(dtype)
    windows = np.full((3, 9, 9), info.max, dtype)
    windows[1] = info.min
    windows[2, ::2] = info.min
    np.testing.assert_array_equal(window_energies(windows),
                                  windows.sum(axis=(1, 2), dtype=np.float64))
    assert window_energies(windows)[0] == 81 * float(info.max)
