"""``aare-lab interpolate`` and ``aare-lab gainmap`` on small simulated runs."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from aare_lab import find_clusters
from aare_lab.calibration import load_gain_map
from aare_lab.cli import main
from aare_lab.imaging import load_interpolation
from aare_lab.model.results import load_result, save_result
from aare_lab.simulate import Beam, Detector, Simulator


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("imaging-cli")
    for name, seed in (("flat", 1), ("run", 2)):
        sim = Simulator(Detector(frame_shape=(16, 16), gain_spread=0.03),
                        Beam(photons_per_frame=4), seed=seed)
        result = find_clusters(sim.frames(600)[0], sim.dark(100), n_pedestal=100,
                               progress=False)
        save_result(result, folder / f"{name}.nc")
    return folder


def test_interpolate_builds_saves_and_applies_maps(runs, capsys):
    maps, photons, picture = runs / "maps.nc", runs / "photons.nc", runs / "image.nc"
    assert main(["interpolate", str(runs / "run.nc"), "--flat", str(runs / "flat.nc"),
                 "--bins", "20", "--save-maps", str(maps), "--out", str(photons),
                 "--image", str(picture), "--subpixels", "4"]) == 0
    assert "photons" in capsys.readouterr().out
    assert load_interpolation(maps)["ietax"].shape == (20, 20, 1)
    with xr.open_dataset(photons, engine="h5netcdf") as ds:
        assert ds.sizes["cluster"] == load_result(runs / "run.nc").sizes["cluster"]
    with xr.open_dataset(picture, engine="h5netcdf") as ds:
        assert ds["photons"].shape == (64, 64)
    assert main(["interpolate", str(runs / "run.nc"), "--maps", str(maps)]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--maps", "m.nc", "--save-maps", "n.nc"], "--save-maps writes maps built from --flat"),
    (["--flat", "f.nc"], "nothing to do"),
])
def test_interpolate_usage_errors_name_the_fix(argv, message, capsys):
    assert main(["interpolate", *argv]) == 2
    assert message in capsys.readouterr().err


def test_gainmap_writes_the_map_and_a_calibrated_result(runs, capsys):
    gain, calibrated = runs / "gain.nc", runs / "calibrated.nc"
    assert main(["gainmap", str(runs / "run.nc"), "--line", "8.05", "--fit-range", "7.0",
                 "9.6", "--kbeta", "8.9", "--iterations", "2", "--min-counts", "5",
                 "--out", str(gain),
                 "--calibrated", str(calibrated)]) == 0
    assert "ADU/keV" in capsys.readouterr().out
    gains = load_gain_map(gain)
    assert gains["gain"].shape == (16, 16)
    assert np.nanmedian(gains["gain"]) == pytest.approx(40, rel=0.03)
    assert load_result(calibrated)["energy"].attrs["units"] == "keV"


def test_gainmap_says_when_no_pixel_could_be_fitted(runs, capsys):
    assert main(["gainmap", str(runs / "run.nc"), "--line", "8.05", "--fit-range", "7.0",
                 "9.6", "--min-counts", "100000", "--out", str(runs / "g.nc")]) == 1
    assert "no pixel of" in capsys.readouterr().err


def test_gainmap_refuses_a_fit_range_without_the_line(runs, capsys):
    assert main(["gainmap", str(runs / "run.nc"), "--line", "8.05", "--fit-range", "9",
                 "10", "--out", str(runs / "g.nc")]) == 2
    assert "must hold --line 8.05" in capsys.readouterr().err
