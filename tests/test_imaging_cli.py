"""``aare-lab interpolate`` and ``aare-lab gainmap`` on small simulated runs."""

from __future__ import annotations

import hashlib

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


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def interpolate_args(runs, folder):
    return ["interpolate", str(runs / "run.nc"), "--flat", str(runs / "flat.nc"), "--bins", "20",
            "--save-maps", str(folder / "maps.nc"), "--out", str(folder / "photons.nc"),
            "--image", str(folder / "image.nc")]


@pytest.mark.parametrize("option, name", [("--out", "photons.nc"), ("--image", "image.nc"),
                                          ("--save-maps", "maps.nc")])
def test_interpolate_keeps_an_existing_output_unless_overwrite(runs, tmp_path, capsys, option,
                                                               name):
    (tmp_path / name).write_bytes(b"an earlier file")
    assert main(interpolate_args(runs, tmp_path)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert (f"{tmp_path / name} exists: pass --overwrite (Python: overwrite=True) to "
            f"replace it once the new file is complete, or choose another {option}") in err
    # Refused before any work: nothing else was written either.
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert (tmp_path / name).read_bytes() == b"an earlier file"
    assert main([*interpolate_args(runs, tmp_path), "--overwrite"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image.nc", "maps.nc", "photons.nc"]
    with xr.open_dataset(tmp_path / name, engine="h5netcdf") as ds:
        assert ds.sizes


@pytest.mark.parametrize("case", ["--out is RESULT.nc", "--image is --flat",
                                  "--save-maps is --flat", "--out is --maps",
                                  "--image is --out"])
def test_interpolate_refuses_an_output_that_is_an_input(runs, tmp_path, capsys, case):
    for name in ("run.nc", "flat.nc"):
        (tmp_path / name).write_bytes((runs / name).read_bytes())
    assert main(interpolate_args(runs, tmp_path)) == 0  # maps.nc for --maps
    run, flat, maps = (tmp_path / name for name in ("run.nc", "flat.nc", "maps.nc"))
    source = ["--flat", str(flat)] if "--maps" not in case else ["--maps", str(maps)]
    outputs = {"--out is RESULT.nc": ["--out", str(run)],
               "--image is --flat": ["--image", str(flat)],
               "--save-maps is --flat": ["--save-maps", str(flat)],
               "--out is --maps": ["--out", str(maps)],
               "--image is --out": ["--out", str(tmp_path / "p.nc"),
                                    "--image", str(tmp_path / "p.nc")]}[case]
    kept = {path: digest(path) for path in (run, flat, maps)}
    capsys.readouterr()
    assert main(["interpolate", str(run), *source, *outputs, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "would overwrite the input" in err or "are the same file" in err, err
    assert {path: digest(path) for path in kept} == kept
    assert not (tmp_path / "p.nc").exists()


def gainmap_args(runs, folder, *more):
    return ["gainmap", str(runs / "run.nc"), "--line", "8.05", "--fit-range", "7.0", "9.6",
            "--iterations", "1", "--min-counts", "5", "--out", str(folder / "gain.nc"),
            "--calibrated", str(folder / "calibrated.nc"), *more]


@pytest.mark.parametrize("option, name", [("--out", "gain.nc"),
                                          ("--calibrated", "calibrated.nc")])
def test_gainmap_keeps_an_existing_output_unless_overwrite(runs, tmp_path, capsys, option,
                                                           name):
    (tmp_path / name).write_bytes(b"an earlier file")
    assert main(gainmap_args(runs, tmp_path)) == 1
    err = capsys.readouterr()
    assert err.err.count("\n") == 1 and "ADU/keV" not in err.out, err
    assert (f"{tmp_path / name} exists: pass --overwrite (Python: overwrite=True) to "
            f"replace it once the new file is complete, or choose another {option}") in err.err
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert (tmp_path / name).read_bytes() == b"an earlier file"
    assert main(gainmap_args(runs, tmp_path, "--overwrite")) == 0
    assert load_gain_map(tmp_path / "gain.nc")["gain"].shape == (16, 16)
    assert load_result(tmp_path / "calibrated.nc")["energy"].attrs["units"] == "keV"


@pytest.mark.parametrize("option", ["--out", "--calibrated", "both"])
def test_gainmap_refuses_an_output_that_is_the_result(runs, tmp_path, capsys, option):
    run = tmp_path / "run.nc"
    run.write_bytes((runs / "run.nc").read_bytes())
    kept = digest(run)
    outputs = {"--out": ["--out", str(run)],
               "--calibrated": ["--out", str(tmp_path / "g.nc"), "--calibrated", str(run)],
               "both": ["--out", str(tmp_path / "g.nc"),
                        "--calibrated", str(tmp_path / "g.nc")]}[option]
    assert main(["gainmap", str(run), "--line", "8.05", "--fit-range", "7.0", "9.6",
                 *outputs, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert (f"would overwrite the input RESULT.nc {run}" in err if option != "both"
            else "--calibrated and --out are the same file" in err), err
    assert digest(run) == kept and sorted(p.name for p in tmp_path.iterdir()) == ["run.nc"]
