"""η interpolation: maps from a histogram, photons, images and the maps' file; and PSI
aare 2026.9.30's Interpolator built from the same histogram, map for map and photon for
photon (aare runs in its own interpreter, see `aare_env`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from aare_env import aare_python

from aare_lab.imaging import ETA_FUNCTIONS
from aare_lab.imaging.interpolation import (
    _place_arrays,
    _place_compiled,
    build_interpolation,
    cdf_maps,
    image,
    interpolate,
    load_interpolation,
    save_interpolation,
)

RUNNER = Path(__file__).with_name("imaging_runner.py")
AARE_VERSION = "2026.9.30"
#: aare's Interpolator method for each η kind.
AARE_METHODS = {"eta2": "interpolate", "full_eta2": "interpolate_full_eta2",
                "eta3": "interpolate_eta3", "cross_eta3": "interpolate_cross_eta3"}


def clusters(n=2000, dtype="int32", seed=0, frame_shape=(40, 50)) -> xr.Dataset:
    """Positive windows with a bright centre: every η inside its kind's range."""
    rng = np.random.default_rng(seed)
    windows = rng.integers(1, 300, (n, 3, 3))
    windows[:, 1, 1] += rng.integers(500, 3000, n)
    if dtype != "int32":
        windows = windows * rng.uniform(0.9, 1.1, (n, 3, 3))
    return xr.Dataset(
        {"window": (("cluster", "wy", "wx"), windows.astype(dtype)),
         "x": ("cluster", rng.integers(1, frame_shape[1] - 1, n).astype(np.int32)),
         "y": ("cluster", rng.integers(1, frame_shape[0] - 1, n).astype(np.int32)),
         "frame_number": ("cluster", np.arange(n, dtype=np.int64))},
        attrs={"frame_shape": np.asarray(frame_shape)})


def test_the_rosenblatt_maps_of_a_uniform_histogram_are_the_bin_fractions():
    ietax, ietay = cdf_maps(np.ones((5, 4, 2)))
    # Counted after the first bin: bin i holds i of the 4 (x) or 3 (y) later bins.
    np.testing.assert_allclose(ietax[:, 0, 0], np.arange(5) / 4)
    np.testing.assert_allclose(ietay[0, :, 1], np.arange(4) / 3)


def test_the_rosenblatt_x_map_is_the_marginal_and_the_y_map_conditional():
    cube = np.random.default_rng(3).uniform(0, 10, (6, 7, 1))
    ietax, ietay = cdf_maps(cube, "rosenblatt")
    conditional_x, conditional_y = cdf_maps(cube, "conditional")
    assert np.all(ietax == ietax[:, :1])  # one column for every η_y
    np.testing.assert_array_equal(ietay, conditional_y)
    assert not np.allclose(conditional_x, ietax)


def test_photons_land_in_the_pixel_of_their_block():
    flat = clusters()
    photons = interpolate(flat, build_interpolation(flat, bins=20))
    # η2 places photons within a pixel of the centre's pixel centre.
    assert np.all(np.abs(photons["x"] - (flat["x"] + 0.5)) <= 1)
    assert np.all(np.abs(photons["y"] - (flat["y"] + 0.5)) <= 1)
    np.testing.assert_array_equal(photons["frame_number"], flat["frame_number"])
    assert photons.attrs["outside_map"] == 0


def test_clusters_beyond_the_maps_get_no_position():
    flat = clusters()
    maps = build_interpolation(flat, bins=20, energy_bins=np.array([0.0, 1000.0, 2000.0]))
    photons = interpolate(flat, maps)
    beyond = photons["energy"].to_numpy() > 2000
    assert beyond.any() and photons.attrs["outside_map"] == beyond.sum()
    assert np.isnan(photons["x"].to_numpy()[beyond]).all()
    assert np.isfinite(photons["x"].to_numpy()[~beyond]).all()


@pytest.mark.parametrize("kind", AARE_METHODS)
def test_the_array_path_for_cupy_equals_the_compiled_loop(kind):
    """CuPy photons come from array expressions, NumPy photons from a compiled loop: the
    same positions and flags, with η and energies beyond the maps among them."""
    flat = clusters(seed=4)
    etas = ETA_FUNCTIONS[kind](flat)
    energy = etas["sum"].to_numpy().astype(np.float64)
    low, high = np.percentile(etas["eta_x"], [5, 95])
    maps = build_interpolation(flat, bins=20, energy_bins=np.percentile(energy, [0, 50, 95]),
                               eta=kind, eta_range=(low, high))
    compiled = _place_compiled(np, etas, energy, maps, flat)
    arrays = _place_arrays(np, etas, energy, maps, flat)
    assert compiled[2].any() and compiled[3].any()
    for ours, theirs in zip(compiled, arrays):
        np.testing.assert_array_equal(ours, theirs)


def test_the_image_counts_every_photon_at_its_sub_pixel():
    photons = xr.Dataset({"x": ("cluster", [0.1, 0.9, 3.55, np.nan]),
                          "y": ("cluster", [0.1, 0.1, 1.3, 0.0])},
                         attrs={"frame_shape": np.array([2, 4])})
    picture = image(photons, subpixels=2)
    assert picture.shape == (4, 8) and int(picture.sum()) == 3
    assert int(picture.sel(x=0.25, y=0.25)) == 1 and int(picture.sel(x=0.75, y=0.25)) == 1
    assert int(picture.sel(x=3.75, y=1.25)) == 1


def test_maps_round_trip_through_their_file(tmp_path):
    maps = build_interpolation(clusters(), bins=10, energy_bins=2, eta="eta3")
    save_interpolation(maps, tmp_path / "maps.nc")
    xr.testing.assert_identical(load_interpolation(tmp_path / "maps.nc"), maps)


def test_a_file_that_is_not_maps_is_refused_by_name(tmp_path):
    xr.Dataset({"a": ("b", [1])}).to_netcdf(tmp_path / "other.nc", engine="h5netcdf")
    with pytest.raises(ValueError, match="other.nc is not an interpolation file"):
        load_interpolation(tmp_path / "other.nc")


def test_unknown_kinds_and_methods_are_refused():
    with pytest.raises(ValueError, match="unknown η kind"):
        build_interpolation(clusters(), eta="eta5")
    with pytest.raises(ValueError, match="unknown interpolation method"):
        build_interpolation(clusters(), method="bilinear")


# --- PSI aare's Interpolator -----------------------------------------------------------------

CASES = [(method, kind, "int32") for method in ("rosenblatt", "conditional")
         for kind in AARE_METHODS] + [("rosenblatt", "eta2", "float32"),
                                      ("rosenblatt", "eta3", "float64")]


@pytest.fixture(scope="module")
def aare_interpolations(tmp_path_factory):
    """aare's maps and photons for every case, in one run of its interpreter."""
    python = aare_python(AARE_VERSION)
    if python is None:
        pytest.skip(f"aare {AARE_VERSION} is not installed: run AARE_VERSION={AARE_VERSION} "
                    f"VENV=/opt/aare-{AARE_VERSION} bash tools/install_aare.sh "
                    f"(or set AARE_PYTHON_{AARE_VERSION.replace('.', '_')})")
    folder = tmp_path_factory.mktemp("aare-interpolation")
    jobs, ours = [], {}
    for i, (method, kind, dtype) in enumerate(CASES):
        flat = clusters(dtype=dtype, seed=i)
        maps = build_interpolation(flat, bins=25, energy_bins=3, eta=kind, method=method)
        ours[i] = flat, maps
        np.savez(folder / f"{i}.npz", x=flat["x"], y=flat["y"], data=flat["window"],
                 cube=maps["histogram"], xbins=maps["eta_x_edges"], ybins=maps["eta_y_edges"],
                 ebins=maps["energy_edges"])
        jobs.append({"task": "interpolate", "npz": str(folder / f"{i}.npz"), "dtype": dtype,
                     "rosenblatt": method == "rosenblatt", "kinds": {kind: AARE_METHODS[kind]},
                     "out": str(folder / f"{i}-out.npz")})
    (folder / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([python, str(RUNNER), str(folder / "jobs.json")], check=True, timeout=300)
    return {i: (*ours[i], np.load(folder / f"{i}-out.npz")) for i in ours}


@pytest.mark.aare
@pytest.mark.parametrize("case", range(len(CASES)), ids=["-".join(c) for c in CASES])
def test_interpolation_equals_aare(aare_interpolations, case):
    """The same maps from the same histogram and the same photons, bit for bit."""
    flat, maps, theirs = aare_interpolations[case]
    kind = CASES[case][1]
    np.testing.assert_array_equal(maps["ietax"].to_numpy(), theirs["ietax"])
    np.testing.assert_array_equal(maps["ietay"].to_numpy(), theirs["ietay"])
    photons = interpolate(flat, maps)
    for field in ("x", "y", "energy"):
        np.testing.assert_array_equal(photons[field].to_numpy(), theirs[f"{kind}_{field}"])
