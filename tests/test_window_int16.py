"""int16 windows (docs/algorithm.md, "The stored cluster"): the int32 windows saturated to
-32768..32767, never wrapped, and never silent: ``n_window_clipped`` per frame and one
`WindowClippedWarning` per run, in memory, chunk by chunk into a file, through
`find_clusters` and the command line; refused with a JUNGFRAU calibration.

The reference is an int32 run of the same frames (int32 is proven against aare), clipped
with NumPy; the counts are recounted from it with NumPy.
"""

import json
import warnings

import numpy as np
import pytest
import xarray as xr

import aare_lab
from aare_lab import FrozenFinder, Pedestal, SerialFinder, WindowClippedWarning
from aare_lab.analysis.caps import buffer_bytes_per_frame
from aare_lab.analysis.compare import CAUSES, KINDS, compare
from aare_lab.cli import main
from aare_lab.detector.jungfrau import JungfrauCalibration
from aare_lab.interop.clusterfile import read_clusterfile, record_dtype, write_clusterfile
from aare_lab.model.results import load_result, window_energies
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator

# 16-bit values on purpose (stored values at the int16 limits), not raw JUNGFRAU frames.
pytestmark = pytest.mark.filterwarnings("ignore::aare_lab.detector.jungfrau.GainBitsWarning")

SHAPE = (24, 32)
N_PEDESTAL = 16
LOW, HIGH = -32768, 32767
FINDERS = {"serial": SerialFinder, "frozen": FrozenFinder}
#: A pixel whose dark frames sit 40000 ADU up: read at the simulated level, its value is
#: about -40000, below int16, in the window of any cluster next to it.
HOT = (5, 7)


@pytest.fixture(scope="module")
def run():
    """Dark frames, and data frames of which three leave the int16 range: frame 0 has a
    hit whose value rounds to exactly 32767 (at the limit, not beyond), frame 1 a 3x3 block
    at 65535, frame 3 a hit beside `HOT`."""
    sim = Simulator(Detector(frame_shape=SHAPE), Beam(photons_per_frame=8), seed=3)
    dark = sim.dark(N_PEDESTAL)
    dark[:, HOT[0], HOT[1]] += 40000
    frames, _ = sim.frames(8)
    mean = trained(dark).mean
    frames[0, 18, 20] = np.floor(mean[18, 20] + 0.5) + HIGH
    frames[1, 10:13, 10:13] = 65535
    frames[3, HOT[0], HOT[1] + 1] = mean[HOT[0], HOT[1] + 1] + 2000
    return dark, frames


def trained(dark, dtype="float64") -> Pedestal:
    ped = Pedestal(SHAPE, N_PEDESTAL, dtype)
    ped.push_dark(dark)
    return ped


def found(finder, dark, frames, window_dtype, dtype="float64", **options):
    """The result and the `WindowClippedWarning` messages of one run."""
    find = options.pop("find", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = FINDERS[finder](trained(dark, dtype), 4.0, 3, window_dtype=window_dtype,
                                 **options).find(frames, progress=False, **find)
    return result, [str(w.message) for w in caught if w.category is WindowClippedWarning]


def at_limits(result32) -> np.ndarray:
    """Per frame, the taps of an int32 result that int16 holds only at or beyond a limit."""
    w = result32["window"].to_numpy()
    per_cluster = ((w >= HIGH) | (w <= LOW)).sum(axis=(1, 2))
    frame = np.searchsorted(result32["frame"].to_numpy(), result32["frame_number"].to_numpy())
    return np.bincount(frame, weights=per_cluster, minlength=result32.sizes["frame"]).astype(int)


@pytest.mark.parametrize("finder", FINDERS)
def test_int16_windows_are_the_int32_windows_saturated(run, finder):
    dark, frames = run
    r32, none = found(finder, dark, frames, "int32")
    r16, messages = found(finder, dark, frames, "int16")
    w32 = r32["window"].to_numpy()
    # The premises: values beyond both limits, and one exactly at the upper limit.
    assert (w32 > HIGH).any() and (w32 < LOW).any() and (w32 == HIGH).any()
    assert r16["window"].dtype == np.int16 and r16.attrs["window_dtype"] == "int16"
    np.testing.assert_array_equal(r16["window"].to_numpy(), np.clip(w32, LOW, HIGH))
    for name in ("frame_number", "y", "x", "n_found", "n_kept"):
        np.testing.assert_array_equal(r16[name].to_numpy(), r32[name].to_numpy(), err_msg=name)
    np.testing.assert_array_equal(r16["energy"].to_numpy(),
                                  np.clip(w32, LOW, HIGH).astype(np.int64).sum(axis=(1, 2)))
    expected = at_limits(r32)
    assert expected[[0, 1, 3]].all() and not expected[[2, 4, 5, 6, 7]].any()
    np.testing.assert_array_equal(r16["n_window_clipped"].to_numpy(), expected)
    assert r16["n_window_clipped"].attrs["long_name"]
    assert "n_window_clipped" not in r32 and none == []
    assert len(messages) == 1
    assert (f"{expected.sum()} stored window values in 3 of 8 frames sit at the int16 limits "
            f"(-32768 or 32767)") in messages[0]
    assert "(frames 0, 1, 3)" in messages[0] and "window_dtype='int32'" in messages[0]
    assert "--window-dtype int32" in messages[0]


def test_in_range_frames_give_int32_values_zero_counts_and_no_warning(run):
    dark, frames = run
    quiet = frames[4:]
    r32, _ = found("frozen", dark, quiet, "int32", find={"frame_numbers": range(4, 8)})
    r16, messages = found("frozen", dark, quiet, "int16", find={"frame_numbers": range(4, 8)})
    assert r32.sizes["cluster"] > 0
    np.testing.assert_array_equal(r16["window"].to_numpy(), r32["window"].to_numpy())
    np.testing.assert_array_equal(r16["n_window_clipped"].to_numpy(), np.zeros(4))
    assert messages == []


def test_a_live_runs_cluster_file_carries_the_count(run, tmp_path):
    """``aare-lab live --clusters``: clusters.nc as ``find(out=...)`` writes it, its counts
    and energies those of the run's spectrum and stats.json (computed once per batch)."""
    from live_helpers import live_run

    dark, frames = run
    r32, _ = found("frozen", dark, frames, "int32")
    spec = FinderSpec("frozen", 4.0, (3, 3), window_dtype="int16", n_pedestal=N_PEDESTAL)
    _, caught = live_run(np.concatenate([dark, frames]), spec, tmp_path, N_PEDESTAL,
                         clusters=True, chunk_frames=3)
    assert any(w.category is WindowClippedWarning for w in caught)
    with xr.open_dataset(tmp_path / "clusters.nc", engine="h5netcdf") as raw:
        assert raw.attrs["complete"] == 1 and raw.attrs["frames_written"] == len(frames)
    live = load_result(tmp_path / "clusters.nc")
    np.testing.assert_array_equal(live["n_window_clipped"].to_numpy(), at_limits(r32))
    np.testing.assert_array_equal(live["window"].to_numpy(),
                                  np.clip(r32["window"].to_numpy(), LOW, HIGH))
    np.testing.assert_array_equal(live["energy"].to_numpy(),
                                  window_energies(live["window"].to_numpy()))
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["n_window_clipped"] == at_limits(r32).sum() > 0


def test_chunked_file_and_find_clusters_carry_the_count(run, tmp_path):
    dark, frames = run
    r32, _ = found("frozen", dark, frames, "int32")
    path = tmp_path / "r.nc"
    finder = FrozenFinder(trained(dark), 4.0, 3, window_dtype="int16", chunk_frames=3)
    with pytest.warns(WindowClippedWarning, match="3 of 8 frames"):
        on_disk = finder.find(frames, progress=False, out=path)
    with on_disk:
        np.testing.assert_array_equal(on_disk["n_window_clipped"].to_numpy(), at_limits(r32))
        np.testing.assert_array_equal(on_disk["window"].to_numpy(),
                                      np.clip(r32["window"].to_numpy(), LOW, HIGH))
    assert load_result(path)["n_window_clipped"].attrs["long_name"]
    with pytest.warns(WindowClippedWarning, match="3 of 8 frames"):
        direct = aare_lab.find_clusters(frames, dark, n_sigma=4.0, n_pedestal=N_PEDESTAL,
                                        window_dtype="int16", progress=False)
    np.testing.assert_array_equal(direct["n_window_clipped"].to_numpy(), at_limits(r32))
    assert FinderSpec.from_result(direct).window_dtype == "int16"


def test_int16_sums_are_exact_and_buffers_half_as_large():
    windows = np.full((2, 11, 11), HIGH, np.int16)
    windows[1] = LOW
    np.testing.assert_array_equal(window_energies(windows), [121 * HIGH, 121 * LOW])
    for size, taps in (("3x3", 9), ("9x9", 81)):
        saved = buffer_bytes_per_frame(100, size, "int32") - buffer_bytes_per_frame(
            100, size, "int16")
        assert saved == 100 * taps * 2


def test_calibration_refuses_int16():
    cal = JungfrauCalibration(pedestal=np.full((3, *SHAPE), 1000.0),
                              gain=np.stack([np.full(SHAPE, g) for g in (40.0, -1.5, -0.1)]))
    with pytest.raises(ValueError, match="keV.*'float32' or 'float64', not 'int16'"):
        FinderSpec(window_dtype="int16", calibration=cal)


def test_aare_cluster_file_of_int16_windows_is_int32_and_exact(run, tmp_path):
    dark, frames = run
    r16, _ = found("frozen", dark, frames, "int16")
    path = tmp_path / "r.clust"
    # The file drops n_window_clipped: writing it warns of the taps at the limits.
    with pytest.warns(WindowClippedWarning, match="may have been clipped"):
        write_clusterfile(r16, path)
    n_frames, n_clusters = r16.sizes["frame"], r16.sizes["cluster"]
    assert path.stat().st_size == 8 * n_frames + n_clusters * record_dtype(3, "int32").itemsize
    back = read_clusterfile(path, 3, "int32")
    assert back["window"].dtype == np.int32
    np.testing.assert_array_equal(back["window"].to_numpy(), r16["window"].to_numpy())
    with pytest.warns(WindowClippedWarning):
        write_clusterfile(r16, path, dtype="int16")  # aare's 3x3 int16 files, on request
    np.testing.assert_array_equal(read_clusterfile(path, 3, "int16")["window"].to_numpy(),
                                  r16["window"].to_numpy())


def test_compare_puts_the_clipped_windows_down_to_the_window_dtype(run):
    dark, frames = run
    r32, _ = found("frozen", dark, frames, "int32")
    r16, _ = found("frozen", dark, frames, "int16")
    result = compare(r16, r32)
    w = r32["window"].to_numpy()
    clipped = ((w > HIGH) | (w < LOW)).any(axis=(1, 2))
    assert result.a_only == result.b_only == 0
    assert result.matched_value_diffs == clipped.sum() > 0
    sites = result.sites
    assert (sites["kind"].to_numpy() == KINDS.index("value_diff")).all()
    assert (sites["cause"].to_numpy() == CAUSES.index("configuration")).all()


@pytest.fixture(scope="module")
def run_files(run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("int16")
    dark, frames = run
    np.save(folder / "dark.npy", dark)
    np.save(folder / "frames.npy", frames)
    return folder


def find_args(folder, out, *extra):
    return ["find", "--dark", str(folder / "dark.npy"), "--frames", str(folder / "frames.npy"),
            "--n-pedestal", str(N_PEDESTAL), "--n-sigma", "4", "--out", str(out), "--quiet",
            *extra]


def test_cli_window_dtype_int16(run, run_files, tmp_path, capsys):
    out = tmp_path / "r.nc"
    assert main(find_args(run_files, out, "--window-dtype", "int16")) == 0
    result = load_result(out)
    assert result["window"].dtype == np.int16
    r32, _ = found("frozen", *run, "int32")
    np.testing.assert_array_equal(result["n_window_clipped"].to_numpy(), at_limits(r32))
    err = capsys.readouterr().err
    assert "aare-lab find: WindowClippedWarning:" in err and "--window-dtype int32" in err


def test_cli_bad_window_dtype_exits_2(run_files, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(find_args(run_files, tmp_path / "r.nc", "--window-dtype", "int8"))
    assert info.value.code == 2
    assert "--window-dtype: invalid choice: 'int8'" in capsys.readouterr().err
    cal = tmp_path / "cal.nc"
    JungfrauCalibration(pedestal=np.full((3, *SHAPE), 1000.0),
                        gain=np.stack([np.full(SHAPE, g) for g in (40.0, -1.5, -0.1)])).save(cal)
    assert main(find_args(run_files, tmp_path / "r.nc", "--window-dtype", "int16",
                          "--calibration", str(cal))) == 2
    assert ("--window-dtype int16 with --calibration: a JUNGFRAU calibration gives windows "
            "in keV") in capsys.readouterr().err
    assert not (tmp_path / "r.nc").exists()


def test_cli_help_names_the_window_dtypes(capsys):
    with pytest.raises(SystemExit):
        main(["find", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--window-dtype {int32,int16,float32,float64}" in text and "half" in text


# ------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("size", ["3x3", "9x9", "3x5"])
def test_cuda_equals_frozen_for_int16(run, dtype, size):
    from aare_lab.finders import CudaFinder

    dark, frames = run
    ped_cpu, ped_gpu = trained(dark, dtype), trained(dark, dtype)
    with pytest.warns(WindowClippedWarning):
        cpu = FrozenFinder(ped_cpu, 4.0, size, window_dtype="int16").find(
            frames, branch_maps=True, progress=False)
    with pytest.warns(WindowClippedWarning):
        gpu = CudaFinder(ped_gpu, 4.0, size, window_dtype="int16", chunk_frames=3).find(
            frames, branch_maps=True, progress=False)
    assert gpu["window"].dtype == np.int16
    r32 = FrozenFinder(trained(dark, dtype), 4.0, size).find(frames, progress=False)
    np.testing.assert_array_equal(cpu["window"].to_numpy(),
                                  np.clip(r32["window"].to_numpy(), LOW, HIGH))
    np.testing.assert_array_equal(cpu["n_window_clipped"].to_numpy(), at_limits(r32))
    assert at_limits(r32)[[0, 1, 3]].all()
    for name in ("frame_number", "y", "x", "window", "energy", "n_found", "n_kept",
                 "n_window_clipped", "branch_map"):
        np.testing.assert_array_equal(gpu[name].to_numpy(), cpu[name].to_numpy(), err_msg=name)
    for key, value in ped_cpu.state().items():
        np.testing.assert_array_equal(ped_gpu.state()[key], value, err_msg=key)


@pytest.mark.gpu
def test_cuda_int16_file_result_carries_the_count(run, tmp_path):
    from aare_lab.finders import CudaFinder

    dark, frames = run
    r32, _ = found("frozen", dark, frames, "int32")
    finder = CudaFinder(trained(dark), 4.0, 3, window_dtype="int16", chunk_frames=2)
    with pytest.warns(WindowClippedWarning, match="3 of 8 frames"):
        on_disk = finder.find(frames, progress=False, out=tmp_path / "g.nc")
    with on_disk:
        np.testing.assert_array_equal(on_disk["window"].to_numpy(),
                                      np.clip(r32["window"].to_numpy(), LOW, HIGH))
        np.testing.assert_array_equal(on_disk["n_window_clipped"].to_numpy(), at_limits(r32))


@pytest.mark.gpu
def test_cuda_spectrum_refuses_int16_windows(run):
    from aare_lab.finders import CudaFinder

    dark, frames = run
    finder = CudaFinder(trained(dark), 4.0, 3, window_dtype="int16")
    with pytest.raises(ValueError, match=r"spectrum\(\) bins cluster energies without "
                                         r"their windows.*window_dtype='int32'"):
        finder.spectrum(frames, progress=False)


def test_live_run_warns_of_clipped_windows_once(run, tmp_path):
    """The live path counts from the same windows: the same frames over a real socket give
    the same taps at the limits as `find`, in one warning at the end of the run."""
    from live_helpers import live_run

    dark, frames = run
    offline, _ = found("frozen", dark, frames, "int16")
    spec = FinderSpec(n_sigma=4.0, n_pedestal=N_PEDESTAL, window_dtype="int16")
    _, caught = live_run(np.concatenate([dark, frames]), spec, tmp_path, n_dark=N_PEDESTAL)
    messages = [str(w.message) for w in caught if w.category is WindowClippedWarning]
    counts = offline["n_window_clipped"].to_numpy()
    assert json.loads((tmp_path / "stats.json").read_text())["n_window_clipped"] == counts.sum()
    assert len(messages) == 1
    assert messages[0].startswith(f"{counts.sum():,} stored window values in "
                                  f"{np.count_nonzero(counts)} of {len(frames)} frames")


def test_widgets_refuse_int16_windows(run):
    """The widgets bin energies without keeping the windows: int16 would clip unreported."""
    from aare_lab.widgets import FinderControls, LiveSpectrum

    dark, frames = run
    spec = FinderSpec("frozen", n_pedestal=N_PEDESTAL, window_dtype="int16")
    for widget in (FinderControls, LiveSpectrum):
        with pytest.raises(ValueError, match=f"{widget.__name__} bins cluster energies.*'int32'"):
            widget(frames, dark, spec=spec)
