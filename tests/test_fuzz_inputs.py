"""Fuzzing every entry point with the inputs users get wrong (issue 11, part 5).

Each call must either succeed or raise a clear error (ValueError, TypeError,
FileNotFoundError, PedestalNotReady) naming the file when there is one; the CLI must
answer with exit code 0, 1 (one ``aare-lab CMD: error:`` line, no traceback) or 2
(argparse), and never leave a half-written ``--out``. Frames are tiny and the finder is
``serial`` so that a few hundred examples run in well under a minute on two cores.
"""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aare_lab
from aare_lab import Pedestal, SerialFinder, find_clusters, open_source, spectrum
from aare_lab.analysis.compare import compare
from aare_lab.analysis.explain import explain
from aare_lab.cli import build_parser, main
from aare_lab.detector.pedestal import PedestalNotReady

CLEAR = (ValueError, TypeError, FileNotFoundError, PedestalNotReady)
FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
SHAPE = (6, 7)
DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.bool_, np.complex128, np.object_]
SHAPES = [(), (7,), SHAPE, (3, *SHAPE), (1, 2, *SHAPE), (0, *SHAPE), (3, 0, 7), (3, 6, 0),
          (2, 5, 7), (2, 6, 8)]
SPECIALS = [None, math.nan, math.inf, -math.inf, -1, 70000, 0.5]
CLUSTER_SIZES = [0, 1, 2, 3, 5, 11, 13, -3, 3.5, None, True, "3x5", "0x0", "2x2", "11x3",
                 "axb", "", "3×3", (3,), (3, 3, 3), [5, 3]]
N_SIGMAS = [0, -1, math.nan, math.inf, -math.inf, 1e-300, 0.5, 5, 1e300, "5", None, True]
N_PEDESTALS = [0, -1, 1, 2, 4, 5, 1.5, True, None, 10**9]

pytestmark = pytest.mark.filterwarnings(
    "ignore::aare_lab.detector.dark.quality.DarkFrameWarning")


def frames_array(dtype, shape, special, seed=0):
    values = np.random.default_rng(seed).integers(2000, 2100, shape)
    if dtype is np.object_:
        return values.astype(object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a special that does not fit
        array = values.astype(dtype)
        if special is not None and array.size and np.dtype(dtype).kind in "fiu":
            try:
                array.flat[array.size // 2] = special
            except (OverflowError, ValueError):
                pass  # not representable in this dtype: the plain values are fuzz enough
    return array


def dark_frames(n=4, shape=SHAPE):
    return np.random.default_rng(1).integers(2000, 2100, (n, *shape)).astype(np.uint16)


def assert_clear(err: BaseException, *names):
    """A clear error: an accepted type, a message, and the file's name if there is one."""
    assert isinstance(err, CLEAR), f"unclear {type(err).__name__}: {err}"
    assert str(err).strip(), f"{type(err).__name__} without a message"
    for name in names:
        assert name in str(err), f"{name!r} not named in: {err}"


def call(function, *args, **kwargs):
    """``function(*args, **kwargs)``, or None after a clear error."""
    try:
        return function(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - whatever it is, it must be one of CLEAR
        assert_clear(err)
        return None


@FUZZ
@given(dtype=st.sampled_from(DTYPES), shape=st.sampled_from(SHAPES),
       special=st.sampled_from(SPECIALS), as_dark=st.booleans(),
       cluster_size=st.sampled_from(CLUSTER_SIZES), n_sigma=st.sampled_from(N_SIGMAS),
       n_pedestal=st.sampled_from(N_PEDESTALS))
def test_find_clusters_succeeds_or_says_why(dtype, shape, special, as_dark, cluster_size,
                                            n_sigma, n_pedestal):
    bad = frames_array(dtype, shape, special)
    frames, dark = (dark_frames(), bad) if as_dark else (bad, dark_frames())
    result = call(find_clusters, frames, dark, finder="serial", n_sigma=n_sigma,
                  cluster_size=cluster_size, n_pedestal=n_pedestal, progress=False)
    if result is not None:
        assert result.sizes["frame"] == np.asarray(frames).reshape(-1, *SHAPE).shape[0]
    if bad.dtype.kind == "f" and bad.shape[-2:] == SHAPE and not np.isfinite(bad).all():
        with pytest.raises(TypeError, match="NaN or infinite values"):
            find_clusters(frames, dark, n_pedestal=4, progress=False)


@FUZZ
@given(dtype=st.sampled_from(DTYPES), shape=st.sampled_from(SHAPES),
       special=st.sampled_from(SPECIALS), n_sigma=st.sampled_from(N_SIGMAS),
       cluster_size=st.sampled_from(CLUSTER_SIZES))
def test_finder_find_and_open_source_succeed_or_say_why(dtype, shape, special, n_sigma,
                                                        cluster_size):
    frames = frames_array(dtype, shape, special)
    pedestal = Pedestal(SHAPE, 4)
    pedestal.push_dark(dark_frames())
    finder = call(SerialFinder, pedestal, n_sigma=n_sigma, cluster_size=cluster_size)
    if finder is not None:
        call(finder.find, frames, progress=False)
    call(open_source, frames)


@pytest.fixture(scope="module")
def results():
    frames, dark = dark_frames(6), dark_frames(4)
    return {name: find_clusters(frames, dark, finder=name, n_pedestal=4, n_sigma=1.0,
                                progress=False) for name in ("serial", "frozen")}


def test_compare_explain_spectrum_refuse_what_they_cannot_use(results):
    serial, frozen = results["serial"], results["frozen"]
    for other in (xr.Dataset(), frozen.drop_vars("window"), "frozen.nc", None, 3,
                  frozen.isel(frame=slice(0, 2)), frozen.assign_attrs(cluster_size="5x5"),
                  frozen.assign_attrs(frame_shape=np.array([3, 3]))):
        call(compare, serial, other)
    call(compare, serial, frozen, tolerance=math.nan)
    frames, dark = dark_frames(6), dark_frames(4)
    for site in ((99, 0, 0), (0, 99, 0), (0, -1, 0), (-1, 0, 0), ("a", 0, 0)):
        call(explain, frames, *site, [serial, frozen], dark=dark)
    for finders, kwargs in (([], {"dark": dark}), (["serial"], {"dark": dark}),
                            ([serial], {}), ([serial], {"dark": dark[:, :3]}),
                            ([serial], {"dark": dark.astype(float)})):
        call(explain, frames, 0, 0, 0, finders, **kwargs)
    for bins, value_range, width in ((0, None, None), (-1, None, None), (1.5, None, None),
                                     ("a", None, None), (10, (math.nan, 1), None),
                                     (10, (5, 1), None), (10, (1, math.inf), None),
                                     (np.array([1.0]), None, None),
                                     (np.array([3.0, 1, 2]), None, None),
                                     (10, (0, 0), None), (10, None, 0), (10, None, -1),
                                     (10, None, math.nan)):
        call(spectrum, serial, bins=bins, range=value_range, width=width)


# ------------------------------------------------------------------------- files
FILE_KINDS = ["npy", "npy_float_nan", "npy_int16", "npy_4d", "npy_1d", "npy_other_shape",
              "npy_truncated", "empty", "text", "result_nc", "npz_two", "h5_text", "h5_good",
              "h5_no_dataset", "folder", "missing"]


def make_file(kind, folder, results):
    """A file of ``kind`` and the argument naming it (a path or ``path:/dataset``)."""
    import h5py

    suffix = {"result_nc": ".nc", "npz_two": ".npz", "h5_text": ".h5", "h5_good": ".h5",
              "h5_no_dataset": ".h5", "text": ".npy", "empty": ".npy"}.get(kind, ".npy")
    path = folder / f"{kind}{suffix}"
    if kind == "npy":
        np.save(path, dark_frames(6))
    elif kind == "npy_float_nan":
        np.save(path, frames_array(np.float32, (6, *SHAPE), math.nan))
    elif kind == "npy_int16":
        np.save(path, dark_frames(6).astype(np.int16))
    elif kind == "npy_4d":
        np.save(path, dark_frames(6).reshape(2, 3, *SHAPE))
    elif kind == "npy_1d":
        np.save(path, np.arange(7, dtype=np.uint16))
    elif kind == "npy_other_shape":
        np.save(path, dark_frames(6, (5, 7)))
    elif kind == "npy_truncated":
        np.save(path, dark_frames(6))
        path.write_bytes(path.read_bytes()[:150])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("frame,y,x\n1,2,3\n")
    elif kind == "result_nc":
        aare_lab.save_result(results["serial"], path)
    elif kind == "npz_two":
        np.savez(path, a=dark_frames(6), b=dark_frames(6))
    elif kind == "h5_text":
        path.write_text("not hdf5")
    elif kind in ("h5_good", "h5_no_dataset"):
        with h5py.File(path, "w") as file:
            file["/entry/data"] = dark_frames(6)
        return path, str(path) + (":/entry/data" if kind == "h5_good" else "")
    elif kind == "folder":
        path = folder / "frames_folder.npy"
        path.mkdir()
    return path, str(path)


def run_cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    assert code in (0, 1), (argv, code, captured.err)
    assert "Traceback" not in captured.err
    if code == 1:
        errors = [line for line in captured.err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and errors[0].startswith(f"aare-lab {argv[0]}: error: ")
    return code, captured


@FUZZ
@given(kind=st.sampled_from(FILE_KINDS), role=st.sampled_from(["frames", "dark", "both"]),
       n_pedestal=st.sampled_from(["4", "6", "1000"]))
def test_find_on_the_command_line_succeeds_or_names_the_file(kind, role, n_pedestal,
                                                             tmp_path_factory, results,
                                                             capsys):
    folder = tmp_path_factory.mktemp("find")
    path, arg = make_file(kind, folder, results)
    good = folder / "good.npy"
    np.save(good, dark_frames(6))
    frames = arg if role in ("frames", "both") else str(good)
    dark = arg if role in ("dark", "both") else str(good)
    out = folder / "out" / "r.nc"
    code, captured = run_cli(["find", "--frames", frames, "--dark", dark, "--n-pedestal",
                              n_pedestal, "--finder", "serial", "--out", str(out),
                              "--quiet"], capsys)
    if code == 0:
        assert aare_lab.load_result(out).sizes["frame"] == 6
    else:
        assert not out.exists(), "a failed run left its --out behind"
        if kind not in ("npy", "h5_good") and n_pedestal != "1000":
            assert path.name in captured.err, captured.err


@FUZZ
@given(kinds=st.lists(st.sampled_from(FILE_KINDS), min_size=1, max_size=2, unique=True))
def test_compare_and_dark_on_the_command_line_name_the_file(kinds, tmp_path_factory,
                                                            results, capsys):
    folder = tmp_path_factory.mktemp("compare")
    good = folder / "good.nc"
    aare_lab.save_result(results["frozen"], good)
    made = [make_file(kind, folder, results) for kind in kinds]
    json_out = folder / "summary.json"
    code, captured = run_cli(["compare", str(good), *(arg for _, arg in made), "--json",
                              str(json_out)], capsys)
    if code == 1:
        assert not json_out.exists()
        assert any(path.name in captured.err for path, _ in made), captured.err
    code, captured = run_cli(["dark", made[0][1], "--quiet"], capsys)
    if code == 1 and kinds[0] not in ("npy", "h5_good"):
        assert made[0][0].name in captured.err, captured.err


@pytest.mark.parametrize("argv", [
    ["find", "--frames", "f.npy", "--out", "r.nc", "--cluster-size", "0x0"],
    ["find", "--frames", "f.npy", "--out", "r.nc", "--n-sigma", "nan"],
    ["find", "--frames", "f.npy", "--out", "r.nc", "--n-sigma", "-1"],
    ["find", "--frames", "f.npy", "--out", "r.nc", "--n-sigma", "inf"],
    ["find", "--frames", "f.npy", "--out", "r.nc", "--n-pedestal", "0"],
    ["find", "--frames", "f.npy", "--out", "r.nc", "--cap", "-3"],
    ["demo", "--frames", "0"], ["demo", "--shape", "0x4"], ["demo", "--shape", "4"],
    ["demo", "--photons", "nan"], ["demo", "--cluster-size", "4x4"],
    ["dark", "d.npy", "--n-pedestal", "0"], ["dark", "d.npy", "--n-sigma", "0"],
    ["compare"], ["compare", "a.nc", "--tolerance", "x"],
])
def test_bad_option_values_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


STREAMING = {  # command: (required arguments, options taking a positive number or size)
    "live": (["tcp://127.0.0.1:1", "--n-dark", "10", "--out", "o"],
             ["--n-sigma", "--cluster-size", "--n-pedestal", "--cap", "--interval",
              "--duration", "--n-dark", "--bin-width", "--queue-chunks", "--threads"]),
    "capture": (["tcp://127.0.0.1:1", "--frames", "5", "--out", "o.h5"], ["--frames"]),
    # stream-sim's --n-dark may be 0; a negative one is refused when it runs (exit 1).
    "stream-sim": ([], ["--frames", "--rate", "--acquisitions", "--interfaces", "--bank"]),
}


@pytest.mark.parametrize("command, option", [(command, option)
                                             for command, (_, options) in STREAMING.items()
                                             for option in options])
def test_streaming_commands_validate_their_arguments(command, option, capsys):
    """Argument validation only: these commands would wait for a stream if they started."""
    required = STREAMING[command][0]
    for value in ("0", "-1", "nan", "inf", "0x0", "abc"):
        with pytest.raises(SystemExit) as info:
            build_parser().parse_args([command, *required, option, value])
        assert info.value.code == 2
        assert f"argument {option}" in capsys.readouterr().err


def test_demo_on_tiny_frames_succeeds_or_says_why(tmp_path, capsys):
    code, _ = run_cli(["demo", "--frames", "2", "--dark", "3", "--shape", "8x8", "--photons",
                       "1", "--out", str(tmp_path / "demo"), "--quiet"], capsys)
    if code == 0:
        assert (tmp_path / "demo" / "summary.nc").exists()


def test_the_installed_command_reports_bad_frames_without_a_traceback(tmp_path):
    frames = tmp_path / "frames.npy"
    np.save(frames, frames_array(np.float64, (3, *SHAPE), math.nan))
    dark = tmp_path / "dark.npy"
    np.save(dark, dark_frames(4))
    done = subprocess.run([sys.executable, "-m", "aare_lab", "find", "--frames", str(frames),
                           "--dark", str(dark), "--n-pedestal", "4", "--out",
                           str(tmp_path / "r.nc")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "frames.npy" in done.stderr and "1 NaN or infinite values" in done.stderr
    assert not (tmp_path / "r.nc").exists()


def test_mismatched_shapes_are_said_before_the_dark_count(tmp_path, capsys):
    np.save(tmp_path / "dark.npy", dark_frames(3))
    np.save(tmp_path / "frames.npy", dark_frames(3, (5, 7)))
    code, captured = run_cli(["find", "--dark", str(tmp_path / "dark.npy"), "--frames",
                              str(tmp_path / "frames.npy"), "--out", str(tmp_path / "r.nc")],
                             capsys)
    assert code == 1
    assert "frames.npy' are 5x7" in captured.err and "dark.npy' are 6x7" in captured.err
    with pytest.raises(ValueError, match="n_pedestal=1000 needed"):
        find_clusters(dark_frames(3), dark_frames(3), progress=False)
    with pytest.raises(ValueError, match=r"frames array are 5x7 .* 6x7"):
        find_clusters(dark_frames(3, (5, 7)), dark_frames(3), progress=False)
