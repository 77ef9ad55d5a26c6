"""Saving and loading a pedestal: a loaded one goes on bit for bit as the original would."""

import json

import numpy as np
import pytest
import xarray as xr

from aare_lab import (
    FinderSpec,
    IlluminatedDarkWarning,
    Pedestal,
    load_result,
    save_result,
    train_pedestal,
)
from aare_lab.cli import main
from aare_lab.detector.dark.report import dark_report
from aare_lab.finders import make_finder
from aare_lab.simulate import Beam, Detector, Simulator, simulate_run

N_PEDESTAL = 20


@pytest.fixture(scope="module")
def run():
    return simulate_run(n_dark=N_PEDESTAL + 5, n_frames=6,
                        detector=Detector(frame_shape=(24, 20)), seed=3)


def trained(run, dtype, noise, n_dark=N_PEDESTAL + 5):
    ped = Pedestal(run.frames.shape[1:], N_PEDESTAL, dtype, noise)
    ped.push_dark(run.dark[:n_dark])
    return ped


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("noise", ["running", "fixed"])
@pytest.mark.parametrize("finder", ["serial", "frozen"])
def test_a_loaded_pedestal_finds_the_same_clusters(run, tmp_path, dtype, noise, finder):
    original = trained(run, dtype, noise)
    original.save(tmp_path / "pedestal.nc")
    loaded = Pedestal.load(tmp_path / "pedestal.nc")
    assert repr(loaded) == repr(original)
    assert loaded.n_frames == original.n_frames == N_PEDESTAL + 5
    spec = FinderSpec(finder, pedestal_dtype=dtype, noise=noise)
    a = make_finder(spec, original).find(run.frames, progress=False)
    b = make_finder(spec, loaded).find(run.frames, progress=False)
    assert a.sizes["cluster"] > 0
    # The loaded one's result names its file among the inputs; all else is the same.
    assert json.loads(b.attrs.pop("inputs"))["pedestal"]["source"] == str(tmp_path / "pedestal.nc")
    xr.testing.assert_identical(a, b)
    # Both pedestals were advanced through the same frames the same way.
    for key, value in original.state().items():
        np.testing.assert_array_equal(loaded.state()[key], value, err_msg=key)
        assert loaded.state()[key].dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_pedestal_saved_while_training_finishes_training_the_same(run, tmp_path, dtype):
    original = trained(run, dtype, "fixed", n_dark=N_PEDESTAL - 3)
    original.save(tmp_path / "half.nc")
    loaded = Pedestal.load(tmp_path / "half.nc")
    assert not loaded.ready and loaded.n_frames == N_PEDESTAL - 3
    np.testing.assert_array_equal(loaded.mean, original.mean)
    for ped in (original, loaded):
        ped.push_dark(run.dark[N_PEDESTAL - 3:])
    for key, value in original.state().items():
        np.testing.assert_array_equal(loaded.state()[key], value, err_msg=key)


def test_the_photon_check_of_the_dark_frames_is_kept(tmp_path):
    """A pedestal trained on dark frames with photons keeps what the check found through a
    file, so that its dark report still says so; one pushed without a check keeps None; a
    file with only some of the check's attributes is refused, naming the one missing."""
    frames, _ = Simulator(Detector(frame_shape=(48, 40)), Beam(photons_per_frame=20),
                          seed=2).frames(30)
    with pytest.warns(IlluminatedDarkWarning):
        original = train_pedestal(frames, 30, progress=False)
    assert original.dark_photons is not None and original.dark_photons.illuminated
    original.save(tmp_path / "lit.nc")
    loaded = Pedestal.load(tmp_path / "lit.nc")
    assert loaded.dark_photons == original.dark_photons
    assert "the dark frames held photons" in repr(dark_report(loaded)).splitlines()[-1]
    pushed = Pedestal((48, 40), 30)
    pushed.push_dark(frames)
    pushed.save(tmp_path / "pushed.nc")
    assert Pedestal.load(tmp_path / "pushed.nc").dark_photons is None
    with xr.open_dataset(tmp_path / "lit.nc") as ds:
        damaged = ds.load()
    del damaged.attrs["dark_photons_hits"]
    damaged.to_netcdf(tmp_path / "damaged.nc")
    with pytest.raises(ValueError, match="incomplete pedestal file: 'dark_photons_hits'"):
        Pedestal.load(tmp_path / "damaged.nc")


def test_a_result_file_is_not_a_pedestal(run, tmp_path):
    result = make_finder(FinderSpec("frozen"), trained(run, "float64", "running")).find(
        run.frames, progress=False)
    save_result(result, tmp_path / "result.nc")
    with pytest.raises(ValueError, match=r"result\.nc is not a pedestal file.*--save-pedestal"):
        Pedestal.load(tmp_path / "result.nc")


def test_a_file_that_is_not_netcdf_is_named(tmp_path):
    (tmp_path / "notes.nc").write_text("not netCDF")
    with pytest.raises(ValueError, match=r"notes\.nc is not a pedestal file"):
        Pedestal.load(tmp_path / "notes.nc")


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.nc"):
        Pedestal.load(tmp_path / "missing.nc")


def test_find_saves_a_pedestal_that_a_later_find_takes(run, tmp_path, capsys):
    np.save(tmp_path / "dark.npy", run.dark)
    np.save(tmp_path / "frames.npy", run.frames)
    common = ["--frames", str(tmp_path / "frames.npy"), "--finder", "serial",
              "--n-pedestal", str(N_PEDESTAL), "--noise", "fixed", "--quiet"]
    assert main(["find", "--dark", str(tmp_path / "dark.npy"), *common,
                 "--save-pedestal", str(tmp_path / "ped.nc"),
                 "--out", str(tmp_path / "a.nc")]) == 0
    # The file brings N and the noise mode: without them, or with the same values.
    assert main(["find", "--pedestal", str(tmp_path / "ped.nc"), "--frames",
                 str(tmp_path / "frames.npy"), "--finder", "serial", "--quiet",
                 "--out", str(tmp_path / "b.nc")]) == 0
    assert main(["find", "--pedestal", str(tmp_path / "ped.nc"), *common,
                 "--out", str(tmp_path / "c.nc")]) == 0
    first = load_result(tmp_path / "a.nc")
    assert first.sizes["cluster"] > 0
    xr.testing.assert_identical(load_result(tmp_path / "b.nc").drop_attrs(),
                                first.drop_attrs())
    later = load_result(tmp_path / "c.nc")
    # The later run names the pedestal file besides the dark frames it was trained on.
    inputs, first_inputs = (json.loads(ds.attrs.pop("inputs")) for ds in (later, first))
    assert inputs["dark"] == first_inputs["dark"] and "pedestal" in inputs
    xr.testing.assert_identical(later, first)
    # The saved state is the trained one, before the data frames moved it.
    np.testing.assert_array_equal(Pedestal.load(tmp_path / "ped.nc").state()["s"],
                                  trained(run, "float64", "fixed").state()["s"])
    capsys.readouterr()
    assert main(["find", "--pedestal", str(tmp_path / "ped.nc"), *common,
                 "--pedestal-dtype", "float32", "--out", str(tmp_path / "d.nc")]) == 1
    assert "--pedestal-dtype float32 contradicts the pedestal in" in capsys.readouterr().err
    assert main(["find", "--pedestal", str(tmp_path / "ped.nc"), "--dark",
                 str(tmp_path / "dark.npy"), *common, "--out", str(tmp_path / "e.nc")]) == 2
    assert "exactly one of --dark FILE, --n-dark K or --pedestal FILE" in capsys.readouterr().err
