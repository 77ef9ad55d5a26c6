"""`aare-lab find`: sources in, result netCDF out, and messages a shell user can act on."""

import signal
import time

import h5py
import numpy as np
import pytest
from cli_process import CliProcess

from aare_lab import FrozenFinder, Pedestal, SerialFinder
from aare_lab.cli import main
from aare_lab.model.results import load_result
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.storage.result_store import IncompleteResultWarning, open_result


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    sim = Simulator(Detector(frame_shape=(48, 40)), Beam(photons_per_frame=20), seed=4)
    dark = sim.dark(30)
    frames, _ = sim.frames(12)
    np.save(folder / "dark.npy", dark)
    np.save(folder / "frames.npy", frames)
    np.save(folder / "all.npy", np.concatenate([dark, frames]))
    np.savez(folder / "run.npz", dark=dark, data=frames)
    with h5py.File(folder / "run.h5", "w") as f:
        f["/entry/dark"] = dark
        f["/entry/data"] = frames
    return folder, dark, frames


def expected(dark, frames, finder_cls, **kwargs):
    ped = Pedestal(dark.shape[1:], kwargs.pop("n_pedestal", 30), kwargs.pop("dtype", "float64"),
                   kwargs.pop("noise", "running"))
    ped.push_dark(dark)
    return finder_cls(ped, **kwargs).find(frames, progress=False)


def test_find_from_npy_equals_the_library(run_files, tmp_path, capsys):
    folder, dark, frames = run_files
    out = tmp_path / "r.nc"
    code = main(["find", "--dark", str(folder / "dark.npy"), "--frames",
                 str(folder / "frames.npy"), "--finder", "serial", "--n-sigma", "4",
                 "--cluster-size", "3x5", "--n-pedestal", "30", "--pedestal-dtype", "float32",
                 "--noise", "fixed", "--out", str(out), "--quiet"])
    assert code == 0
    result = load_result(out)
    want = expected(dark, frames, SerialFinder, n_sigma=4.0, cluster_size=(3, 5),
                    dtype="float32", noise="fixed")
    for key in ("frame_number", "y", "x", "window", "n_found"):
        np.testing.assert_array_equal(result[key], want[key])
    assert result.attrs["cluster_size"] == "3x5" and result.attrs["noise"] == "fixed"
    assert f"serial: {want.sizes['cluster']} clusters in 12 frames" in capsys.readouterr().out


def test_find_from_hdf5_with_branch_maps(run_files, tmp_path):
    folder, dark, frames = run_files
    out = tmp_path / "h.nc"
    code = main(["find", "--dark", f"{folder / 'run.h5'}:/entry/dark", "--frames",
                 f"{folder / 'run.h5'}:/entry/data", "--n-pedestal", "30",
                 "--branch-maps", "3,5", "--threads", "1", "--out", str(out), "--quiet"])
    assert code == 0
    result = load_result(out)
    np.testing.assert_array_equal(result["branch_frame"], [3, 5])
    want = expected(dark, frames, FrozenFinder, n_sigma=5.0)
    np.testing.assert_array_equal(result["y"], want["y"])


def test_find_takes_the_arrays_of_one_npz_file_by_name(run_files, tmp_path, capsys):
    """``file.npz:member`` picks each array of a file holding dark and data frames; the
    file alone is refused with the names to give."""
    folder, dark, frames = run_files
    npz = folder / "run.npz"
    out = tmp_path / "z.nc"
    assert main(["find", "--dark", f"{npz}:dark", "--frames", f"{npz}:data", "--n-pedestal",
                 "30", "--threads", "1", "--out", str(out), "--quiet"]) == 0
    want = expected(dark, frames, FrozenFinder, n_sigma=5.0)
    for key in ("frame_number", "y", "x", "window"):
        np.testing.assert_array_equal(load_result(out)[key], want[key])
    assert main(["find", "--dark", f"{npz}:dark", "--frames", str(npz), "--n-pedestal", "30",
                 "--out", str(tmp_path / "no.nc"), "--quiet"]) == 1
    assert f"holds the arrays ['dark', 'data']: choose the frames, e.g. '{npz}:dark'" \
        in capsys.readouterr().err


def test_find_with_dark_frames_at_the_start_of_the_file(run_files, tmp_path):
    folder, dark, frames = run_files
    out = tmp_path / "s.nc"
    assert main(["find", "--frames", str(folder / "all.npy"), "--n-dark", "30",
                 "--n-pedestal", "30", "--out", str(out), "--quiet"]) == 0
    result = load_result(out)
    np.testing.assert_array_equal(result["frame"], np.arange(12))
    np.testing.assert_array_equal(result["x"], expected(dark, frames, FrozenFinder)["x"])


def test_capacity_error_exits_3(run_files, tmp_path, capsys):
    folder, _, _ = run_files
    code = main(["find", "--dark", str(folder / "dark.npy"), "--frames",
                 str(folder / "frames.npy"), "--n-pedestal", "30", "--cap", "1",
                 "--on-truncation", "error", "--out", str(tmp_path / "c.nc"), "--quiet"])
    assert code == 3
    err = capsys.readouterr().err
    assert "max_clusters_per_frame=1 truncated" in err
    # It says what it left: the whole run, capped, under --out.
    assert f"{tmp_path / 'c.nc'} holds the whole run" in err
    kept = load_result(tmp_path / "c.nc")
    assert kept.sizes["frame"] == 12 and int(kept["n_kept"].max()) == 1


def test_a_capped_run_says_how_many_clusters_it_kept_of_those_found(run_files, tmp_path,
                                                                    capsys):
    folder, _, _ = run_files
    assert main(["find", "--dark", str(folder / "dark.npy"), "--frames",
                 str(folder / "frames.npy"), "--n-pedestal", "30", "--cap", "2",
                 "--out", str(tmp_path / "c.nc"), "--quiet"]) == 0
    result = load_result(tmp_path / "c.nc")
    found, kept = int(result["n_found"].sum()), result.sizes["cluster"]
    assert kept < found
    assert f"frozen: {kept} clusters kept of {found} found in 12 frames" in \
        capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--dark", "missing.npy"], "missing.npy"),
    (["--dark", "{dark}", "--n-pedestal", "1000"],
     "dark.npy': 30 given, --n-pedestal=1000 needed (record more dark frames or lower "
     "--n-pedestal)"),
    (["--dark", "{dark}.h5"], "No such file"),
])
def test_bad_input_exits_1_with_a_message(run_files, tmp_path, capsys, args, message):
    assert find_exit_code(run_files, tmp_path, args) == 1
    err = capsys.readouterr().err
    assert err.startswith("aare-lab find: error: ") and message in err


@pytest.mark.parametrize("args, message", [
    (["--dark", "{dark}", "--finder", "serial", "--threads", "2"],
     "--threads applies to the frozen finder only, not --finder serial"),
    (["--dark", "{dark}", "--n-dark", "3"], "exactly one of"),
    ([], "exactly one of"),
    (["--dark", "{dark}", "--branch-maps", "1,x"], "--branch-maps takes 'all' or frame numbers"),
    (["--dark", "{dark}", "--out", "x.h5"], "--out must be a .nc file"),
])
def test_bad_option_combinations_exit_2_with_a_message(run_files, tmp_path, capsys, args,
                                                       message):
    assert find_exit_code(run_files, tmp_path, args) == 2
    err = capsys.readouterr().err
    assert err.startswith("aare-lab find: error: ") and message in err


def find_exit_code(run_files, tmp_path, args) -> int:
    """``aare-lab find`` on the run's frames with ``args`` (``{dark}``: its dark file)."""
    folder, _, _ = run_files
    args = [a.replace("{dark}", str(folder / "dark.npy")) for a in args]
    pedestal = [] if "--n-pedestal" in args else ["--n-pedestal", "30"]
    out = [] if "--out" in args else ["--out", str(tmp_path / "x.nc")]
    return main(["find", *args, *pedestal, "--frames", str(folder / "frames.npy"), *out,
                 "--quiet"])


@pytest.mark.parametrize("args, message", [
    (["--cluster-size", "4x3"], "even"),
    (["--finder", "gpu"], "invalid choice: 'gpu'"),
])
def test_usage_errors_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main(["find", "--frames", "f.npy", "--out", "r.nc", *args])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_an_out_path_that_cannot_be_written_exits_1_with_a_message(run_files, tmp_path,
                                                                    capsys):
    folder, _, _ = run_files
    (tmp_path / "taken.nc").mkdir()
    code = main(["find", "--dark", str(folder / "dark.npy"), "--n-pedestal", "30",
                 "--frames", str(folder / "frames.npy"), "--out", str(tmp_path / "taken.nc"),
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("aare-lab find: error: ") and "taken.nc" in err


def test_ctrl_c_during_find_keeps_the_chunks_and_exits_130(tmp_path):
    sim = Simulator(Detector(frame_shape=(128, 128)), Beam(photons_per_frame=200), seed=1)
    np.save(tmp_path / "dark.npy", sim.dark(50))
    frames, _ = sim.frames(100)
    # Long enough (11x11 windows, serial) that the signal arrives while chunks are found.
    np.save(tmp_path / "frames.npy", np.tile(frames, (40, 1, 1)))
    out, partial = tmp_path / "run.nc", tmp_path / "run.partial.nc"
    with CliProcess("find", "--finder", "serial", "--dark", str(tmp_path / "dark.npy"),
                    "--frames", str(tmp_path / "frames.npy"), "--n-pedestal", "50",
                    "--cluster-size", "11x11", "--out", str(out)) as process:
        deadline = time.monotonic() + 120
        while not partial.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)
        process.signal(signal.SIGINT)
        assert process.wait(60) == 130, process.output
    assert "aare-lab find: interrupted" in process.output
    assert "Traceback" not in process.output and "SystemError" not in process.output
    assert "the run stopped (interrupted) after" in process.output
    assert f"{partial} holds their results" in process.output
    assert not out.exists()
    with pytest.warns(IncompleteResultWarning), open_result(partial) as kept:
        assert 0 < kept.sizes["frame"] < 4000
