"""aare cluster files: the byte layout, round trips, refusals, and PSI aare's own reader,
writer and finder cluster for cluster (aare runs in its own interpreter, see `aare_env`)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from aare_env import aare_python

from aare_lab import FrozenFinder, Pedestal, SerialFinder
from aare_lab.cli import main
from aare_lab.interop.clusterfile import (
    AARE_FORMATS,
    UNKNOWN_ATTRS,
    read_clusterfile,
    record_dtype,
    write_clusterfile,
)
from aare_lab.model.clipping import WindowClippedWarning
from aare_lab.model.results import load_result, make_result, save_result
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator

RUNNER = Path(__file__).with_name("clusterfile_runner.py")
VERSIONS = ("2026.3.17", "2026.9.30")
#: (cluster size, value type of the file, window dtype of the result)
FORMATS = [((3, 3), "int32", "int32"), ((3, 3), "float64", "float64"),
           ((5, 5), "float32", "float32"), ((9, 9), "int32", "int32"),
           ((3, 3), "int16", "int32")]
FRAME_SHAPE = (512, 1024)
FRAMES = np.array([5, 6, 9, 10, 11, 200])
COUNTS = np.array([4, 0, 7, 1, 0, 3])


def synthetic_windows(rng, n, size, dtype) -> np.ndarray:
    if dtype == "int32":
        return rng.integers(-300, 3000, (n, *size)).astype(np.int32)
    return (rng.normal(0, 100, (n, *size))).astype(dtype)


def synthetic_result(size=(3, 3), window_dtype="int32", seed=0):
    """A result over frames 5..200 with empty frames, centres spread over a 512x1024
    module in no particular order, and varied (asymmetric) windows."""
    rng = np.random.default_rng(seed)
    n = COUNTS.sum()
    windows = synthetic_windows(rng, n, size, window_dtype)
    windows[0] = np.arange(size[0] * size[1]).reshape(size)  # top-left 0, bottom-right max
    ys, xs = rng.integers(0, FRAME_SHAPE[0], n), rng.integers(0, FRAME_SHAPE[1], n)
    ys[0], xs[0] = 2, 700
    return make_result(spec=FinderSpec(cluster_size=size, window_dtype=window_dtype,
                                       n_pedestal=10),
                       frame_shape=FRAME_SHAPE, frame_numbers=FRAMES, n_found=COUNTS,
                       n_kept=COUNTS, cluster_frame=np.repeat(FRAMES, COUNTS), cluster_y=ys,
                       cluster_x=xs, windows=windows)


def assert_same_clusters(ours, frames, counts, x, y, data):
    np.testing.assert_array_equal(ours["frame"], frames)
    np.testing.assert_array_equal(ours["n_kept"], counts)
    np.testing.assert_array_equal(ours["frame_number"], np.repeat(frames, counts))
    np.testing.assert_array_equal(ours["x"], x)
    np.testing.assert_array_equal(ours["y"], y)
    np.testing.assert_array_equal(ours["window"], data)


# --- the byte layout, from the format description -------------------------------------------

@pytest.mark.parametrize("size, dtype, itemsize, data_offset", [
    ((3, 3), "int32", 40, 4), ((3, 3), "float32", 40, 4), ((3, 3), "float64", 80, 8),
    ((5, 5), "float64", 208, 8), ((3, 3), "int16", 22, 4), ((9, 9), "int32", 328, 4)])
def test_record_layout_is_the_c_struct(size, dtype, itemsize, data_offset):
    record = record_dtype(size, dtype)
    assert record.itemsize == itemsize
    assert record.fields["data"][1] == data_offset
    assert record.fields["x"][1] == 0 and record.fields["y"][1] == 2


@pytest.mark.parametrize("size, dtype, message", [
    ("3x5", "int32", "no int32 cluster file for 3x5"),
    ((11, 11), "float64", "no float64 cluster file for 11x11"),
    ((5, 5), "int16", "reads 3x3"),
    ((3, 3), "uint8", "not 'uint8'")])
def test_sizes_and_types_aare_cannot_read_are_refused(size, dtype, message):
    with pytest.raises(ValueError, match=message):
        record_dtype(size, dtype)


def handmade_file(path: Path) -> None:
    """Frame 7: one float64 3x3 cluster at column 700, row 2; frame 8: none."""
    with open(path, "wb") as file:
        file.write(struct.pack("<iI", 7, 1))
        file.write(struct.pack("<HH4x9d", 700, 2, *[float(v) for v in range(9)]))
        file.write(struct.pack("<iI", 8, 0))


def test_reads_a_handmade_file(tmp_path):
    handmade_file(tmp_path / "a.clust")
    ds = read_clusterfile(tmp_path / "a.clust", "3x3", "float64", frame_shape=FRAME_SHAPE)
    assert ds["frame"].values.tolist() == [7, 8] and ds["n_kept"].values.tolist() == [1, 0]
    assert (int(ds["x"][0]), int(ds["y"][0])) == (700, 2)
    np.testing.assert_array_equal(ds["window"][0], np.arange(9.0).reshape(3, 3))
    assert float(ds["energy"][0]) == 36.0


def test_writes_the_handmade_bytes(tmp_path):
    handmade_file(tmp_path / "expected.clust")
    result = make_result(spec=FinderSpec(window_dtype="float64", n_pedestal=1),
                         frame_shape=FRAME_SHAPE, frame_numbers=[7, 8], n_found=[1, 0],
                         n_kept=[1, 0], cluster_frame=[7], cluster_y=[2], cluster_x=[700],
                         windows=np.arange(9.0).reshape(1, 3, 3))
    write_clusterfile(result, tmp_path / "ours.clust")
    assert (tmp_path / "ours.clust").read_bytes() == (tmp_path / "expected.clust").read_bytes()


@pytest.mark.parametrize("size, dtype, window_dtype", FORMATS)
def test_round_trip(tmp_path, size, dtype, window_dtype):
    result = synthetic_result(size, window_dtype)
    write_clusterfile(result, tmp_path / "r.clust", dtype=dtype)
    back = read_clusterfile(tmp_path / "r.clust", size, dtype, frame_shape=FRAME_SHAPE)
    for name in ("frame", "n_kept", "n_found", "frame_number", "y", "x", "window", "energy"):
        np.testing.assert_array_equal(back[name], result[name], err_msg=name)
    assert back["window"].dtype == window_dtype
    assert back.attrs["finder"] == "aare" and back.attrs["file_dtype"] == dtype
    assert back.attrs["source_file"].endswith("r.clust")
    assert back.attrs["unknown_attrs"].split() == list(UNKNOWN_ATTRS)
    assert np.isnan(back.attrs["n_sigma"])


def test_clusters_are_grouped_by_the_frame_coordinate(tmp_path):
    """Clusters listed out of frame order still land in their frames, in their order."""
    result = synthetic_result().isel(cluster=[9, 0, 1, 14, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13])
    write_clusterfile(result, tmp_path / "r.clust")
    back = read_clusterfile(tmp_path / "r.clust")
    for name in ("frame_number", "y", "x", "window"):
        got = back[name].to_numpy()
        want = np.concatenate([result[name].to_numpy()[result["frame_number"] == f]
                               for f in FRAMES])
        np.testing.assert_array_equal(got, want, err_msg=name)
    np.testing.assert_array_equal(back["n_kept"], COUNTS)


def test_provenance_and_frame_shape(tmp_path):
    write_clusterfile(synthetic_result(), tmp_path / "r.clust")
    back = read_clusterfile(tmp_path / "r.clust", provenance={"n_sigma": 5.0, "noise": "fixed"})
    assert back.attrs["n_sigma"] == 5.0 and back.attrs["noise"] == "fixed"
    assert back.attrs["unknown_attrs"].split() == [
        "pedestal_dtype", "n_pedestal", "max_clusters_per_frame", "frame_shape"]
    assert "frame_shape" not in back.attrs
    with pytest.raises(ValueError, match="provenance takes .* got finder"):
        read_clusterfile(tmp_path / "r.clust", provenance={"finder": "frozen"})
    with pytest.raises(ValueError, match="outside the frame shape 512x512"):
        read_clusterfile(tmp_path / "r.clust", frame_shape=(512, 512))


def test_one_frame_in_consecutive_records_is_one_frame(tmp_path):
    handmade_file(tmp_path / "a.clust")
    data = (tmp_path / "a.clust").read_bytes()
    (tmp_path / "b.clust").write_bytes(data[:-8] + data[:-8] + data[-8:])  # frame 7 twice
    ds = read_clusterfile(tmp_path / "b.clust", 3, "float64")
    assert ds["frame"].values.tolist() == [7, 8] and ds["n_kept"].values.tolist() == [2, 0]
    (tmp_path / "c.clust").write_bytes(data + data[:-8])  # 7, 8, 7
    with pytest.raises(ValueError, match="frame number 7 appears again"):
        read_clusterfile(tmp_path / "c.clust", 3, "float64")
    (tmp_path / "d.clust").write_bytes(data[-8:] + data)  # 8, 7, 8
    with pytest.raises(ValueError, match="frame number 8 appears again"):
        read_clusterfile(tmp_path / "d.clust", 3, "float64")


def test_damaged_or_mismatched_files_are_refused(tmp_path):
    handmade_file(tmp_path / "a.clust")
    data = (tmp_path / "a.clust").read_bytes()
    (tmp_path / "cut.clust").write_bytes(data[:30])
    with pytest.raises(ValueError, match=r"cut.clust: frame 7 .* announces 1 clusters of 80 "
                                         r"bytes but 22 bytes remain"):
        read_clusterfile(tmp_path / "cut.clust", 3, "float64")
    (tmp_path / "stray.clust").write_bytes(data + b"\0\0\0")
    with pytest.raises(ValueError, match="stray.clust ends in 3 stray bytes after frame 8"):
        read_clusterfile(tmp_path / "stray.clust", 3, "float64")
    with pytest.raises(ValueError, match="not of the cluster_size and dtype given"):
        read_clusterfile(tmp_path / "a.clust", 5, "float64")
    with pytest.raises(FileNotFoundError):
        read_clusterfile(tmp_path / "missing.clust")
    (tmp_path / "empty.clust").write_bytes(b"")
    assert read_clusterfile(tmp_path / "empty.clust").sizes["frame"] == 0


#: Writing windows of a result dtype (first) as a file dtype (second) that cannot hold all
#: of synthetic_result's values (fractions; float64 digits beyond float32).
LOSSY = {("float32", "int32"), ("float32", "int16"), ("float64", "int32"),
         ("float64", "int16"), ("float64", "float32")}


@pytest.mark.parametrize("window_dtype", ["int32", "int16", "float32", "float64"])
@pytest.mark.parametrize("dtype", list(AARE_FORMATS))
def test_every_dtype_pair_converts_values_or_is_refused(tmp_path, window_dtype, dtype):
    result = synthetic_result(window_dtype=window_dtype)
    path = tmp_path / "r.clust"
    if (window_dtype, dtype) in LOSSY:
        with pytest.raises(ValueError, match=rf"as {dtype}: \d+ of the 135 {window_dtype} "
                                             rf"window values would change.*--dtype"):
            write_clusterfile(result, path, dtype=dtype)
        return
    write_clusterfile(result, path, dtype=dtype)
    back = read_clusterfile(path, dtype=dtype)
    np.testing.assert_array_equal(back["window"].astype(np.float64),
                                  result["window"].astype(np.float64))


def test_float_windows_of_whole_numbers_write_as_integers(tmp_path):
    result = synthetic_result(window_dtype="float64")
    result["window"] = np.round(result["window"])
    write_clusterfile(result, tmp_path / "r.clust", dtype="int16")
    back = read_clusterfile(tmp_path / "r.clust", dtype="int16")
    np.testing.assert_array_equal(back["window"], result["window"])


def test_clipped_int16_windows_are_warned_about_when_written(tmp_path):
    windows = np.zeros((2, 3, 3), np.int16)
    windows[1, 1, 1] = np.iinfo(np.int16).max
    result = make_result(spec=FinderSpec(window_dtype="int16", n_pedestal=1),
                         frame_shape=FRAME_SHAPE, frame_numbers=[7, 8], n_found=[1, 1],
                         n_kept=[1, 1], cluster_frame=[7, 8], cluster_y=[2, 2],
                         cluster_x=[5, 5], windows=windows)
    with pytest.warns(WindowClippedWarning, match="1 stored window values in 1 of 2 frames"):
        write_clusterfile(result, tmp_path / "r.clust")


@pytest.mark.parametrize("written, read, message", [
    ("int32", "float32", "3x3.clust does not hold float32 values: read as float32, "
                         r"\d+ of its 135 window values are subnormal.*--dtype int32"),
    ("float32", "int32", "3x3.clust does not hold int32 values: read as int32, "
                         r"\d+ of its 135 window values are at least 8,388,608.*"
                         "--dtype float32"),
    ("float64", "float32", "not of the cluster_size and dtype given"),
    ("int16", "int32", "not of the cluster_size and dtype given"),
])
def test_a_file_read_as_another_value_type_is_refused(tmp_path, written, read, message):
    path = tmp_path / "3x3.clust"
    write_clusterfile(synthetic_result(window_dtype="int32" if written == "int16" else written),
                      path, dtype=written)
    with pytest.raises(ValueError, match=message):
        read_clusterfile(path, dtype=read)


def test_writes_that_would_lose_something_are_refused(tmp_path):
    path = tmp_path / "r.clust"
    floats = synthetic_result(window_dtype="float64")
    with pytest.raises(ValueError, match="as int32: .* float64 window values would change, "
                                         r"e\.g\. -?\d+\.\d+ to -?\d+ \(int32 holds whole"):
        write_clusterfile(floats, path, dtype="int32")
    with pytest.raises(ValueError, match="as float32: .* would change"):
        write_clusterfile(floats, path, dtype="float32")
    big = synthetic_result()
    big["window"][0, 0, 0] = 40000
    with pytest.raises(ValueError, match=r"as int16: 1 of the 135 int32 window values would "
                                         r"change, e\.g\. 40000 to -25536 \(int16 holds "
                                         r"whole numbers -32768\.\.32767\); write "
                                         r"dtype='int32' \(aare-lab convert: --dtype int32\)"):
        write_clusterfile(big, path, dtype="int16")
    late = synthetic_result().assign_coords(frame=FRAMES + 2 ** 31)
    with pytest.raises(ValueError, match="frame numbers as int32"):
        write_clusterfile(late, path)
    wide = synthetic_result()
    wide["x"][1] = 70000
    with pytest.raises(ValueError, match="centres as uint16, the result has x in"):
        write_clusterfile(wide, path)
    with pytest.raises(ValueError, match="lacks window"):
        write_clusterfile(synthetic_result().drop_vars("window"), path)
    orphan = synthetic_result().isel(frame=slice(1, None))
    with pytest.raises(ValueError, match=r"clusters of frames \[5\]"):
        write_clusterfile(orphan, path)
    assert list(tmp_path.iterdir()) == []  # nothing half-written


# --- the command line ---------------------------------------------------------------------

def test_cli_converts_both_ways(tmp_path, capsys):
    result = synthetic_result(window_dtype="float64")
    save_result(result, tmp_path / "r.nc")
    assert main(["convert", str(tmp_path / "r.nc"), str(tmp_path / "r.clust")]) == 0
    assert "wrote 15 clusters of 6 frames (3x3, float64)" in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "r.clust"), str(tmp_path / "back.nc"),
                 "--dtype", "float64", "--frame-shape", "512x1024"]) == 0
    back = load_result(tmp_path / "back.nc")
    np.testing.assert_array_equal(back["window"], result["window"])
    np.testing.assert_array_equal(back.attrs["frame_shape"], FRAME_SHAPE)


@pytest.mark.parametrize("argv, message, code", [
    (["a.nc", "b.nc"], "convert takes RESULT.nc OUT.clust or IN.clust RESULT.nc", 2),
    (["r.nc", "b.clust", "--cluster-size", "5x5"], "apply to reading a .clust", 2),
    (["missing.clust", "b.nc"], "No such file", 1),
    (["r.clust", "b.nc", "--dtype", "float32"], "r.clust does not hold float32 values", 1),
])
def test_cli_refusals_exit_1_or_2_for_usage(tmp_path, capsys, monkeypatch, argv, message,
                                            code):
    monkeypatch.chdir(tmp_path)
    save_result(synthetic_result(), tmp_path / "r.nc")
    write_clusterfile(synthetic_result(), tmp_path / "r.clust")
    assert main(["convert", *argv]) == code
    assert message in capsys.readouterr().err
    assert not (tmp_path / "b.nc").exists()


# --- PSI aare's reader, writer and finder ------------------------------------------------------

N_PEDESTAL = 1000  # aare's pedestal window
FINDER_SHAPE = (48, 64)


@pytest.fixture(scope="module", params=VERSIONS)
def aare_side(request, tmp_path_factory):
    """Everything aare does, in one run of its interpreter per version: it reads our files,
    writes its own from known clusters, and finds and writes clusters of a simulated run."""
    version = request.param
    python = aare_python(version)
    if python is None:
        pytest.skip(f"aare {version} is not installed: run AARE_VERSION={version} "
                    f"VENV=/opt/aare-{version} bash tools/install_aare.sh "
                    f"(or set AARE_PYTHON_{version.replace('.', '_')})")
    folder = tmp_path_factory.mktemp(f"aare-{version}")
    jobs, ours, theirs = [], {}, {}
    for i, (size, dtype, window_dtype) in enumerate(FORMATS):
        result = synthetic_result(size, window_dtype, seed=i)
        write_clusterfile(result, folder / f"ours{i}.clust", dtype=dtype)
        ours[i] = result
        jobs.append({"task": "read", "path": str(folder / f"ours{i}.clust"), "size": size,
                     "dtype": dtype, "out": str(folder / f"read{i}.npz")})
        given = synthetic_result(size, window_dtype, seed=100 + i)
        theirs[i] = given
        np.savez(folder / f"given{i}.npz", frame=FRAMES, count=COUNTS, x=given["x"],
                 y=given["y"], data=given["window"])
        jobs.append({"task": "write", "npz": str(folder / f"given{i}.npz"), "size": size,
                     "dtype": dtype, "path": str(folder / f"theirs{i}.clust")})
    sim = Simulator(Detector(frame_shape=FINDER_SHAPE), Beam(photons_per_frame=15), seed=3)
    dark, (frames, _) = sim.dark(N_PEDESTAL), sim.frames(12)
    np.save(folder / "dark.npy", dark)
    np.save(folder / "frames.npy", frames)
    jobs.append({"task": "find", "dark": str(folder / "dark.npy"),
                 "frames": str(folder / "frames.npy"), "size": (3, 3), "n_sigma": 5.0,
                 "path": str(folder / "found.clust")})
    (folder / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([python, str(RUNNER), str(folder / "jobs.json")], check=True, timeout=300)
    return version, folder, ours, theirs, dark, frames



@pytest.mark.aare
@pytest.mark.parametrize("index", range(len(FORMATS)), ids=[f"{s[0]}x{s[1]}-{d}"
                                                             for s, d, _ in FORMATS])
def test_aare_reads_our_files_cluster_for_cluster(aare_side, index):
    _, folder, ours, _, _, _ = aare_side
    read = np.load(folder / f"read{index}.npz")
    assert_same_clusters(ours[index], read["frame"], read["count"], read["x"], read["y"],
                         read["data"])
    assert read["data"].dtype == FORMATS[index][1]


@pytest.mark.aare
@pytest.mark.parametrize("index", range(len(FORMATS)), ids=[f"{s[0]}x{s[1]}-{d}"
                                                             for s, d, _ in FORMATS])
def test_we_read_aare_files_cluster_for_cluster(aare_side, index):
    _, folder, _, theirs, _, _ = aare_side
    size, dtype, _ = FORMATS[index]
    ours = read_clusterfile(folder / f"theirs{index}.clust", size, dtype,
                            frame_shape=FRAME_SHAPE)
    given = theirs[index]
    assert_same_clusters(ours, FRAMES, COUNTS, given["x"], given["y"], given["window"])


@pytest.mark.aare
def test_aare_finder_clusters_come_through_its_file_as_our_finder_finds_them(aare_side):
    """aare's ClusterFinder and ClusterFile on a 48x64 run equal our finder of the same
    timing model, centre for centre (x the column, y the row) and window for window."""
    version, folder, _, _, dark, frames = aare_side
    finder_cls, noise = {"2026.3.17": (SerialFinder, "running"),
                         "2026.9.30": (FrozenFinder, "fixed")}[version]
    pedestal = Pedestal(FINDER_SHAPE, N_PEDESTAL, "float64", noise)
    pedestal.push_dark(dark)
    ours = finder_cls(pedestal, 5.0, (3, 3)).find(frames, progress=False)
    theirs = read_clusterfile(folder / "found.clust", frame_shape=FINDER_SHAPE)
    assert ours.sizes["cluster"] > 100
    assert_same_clusters(theirs, ours["frame"], ours["n_kept"], ours["x"], ours["y"],
                         ours["window"])
    assert (ours["x"] >= FINDER_SHAPE[0]).any()  # a swap of x and y could not pass
