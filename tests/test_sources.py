"""Frame sources: round trips of frames and numbers, positions, dark/data split, errors."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import h5py
import numpy as np
import pytest
from aare_env import aare_python

from aare_lab.sources import (
    ArraySource,
    FrameChunk,
    FrameSource,
    Hdf5Source,
    NpySource,
    NpzSource,
    SourceView,
    open_source,
    split_dark,
)

REPO = Path(__file__).resolve().parents[1]
AARE_VERSIONS = ["2026.3.17", "2026.9.30"]

FRAMES = np.random.default_rng(7).integers(0, 65536, size=(7, 4, 5), dtype=np.uint16)
# Gaps as after lost frames; numbers need not start at 0.
NUMBERS = np.array([100, 101, 102, 105, 106, 107, 110], dtype=np.int64)
POSITIONS = np.arange(len(FRAMES), dtype=np.int64)


# --- making sources of every kind ------------------------------------------------------

def make_source(kind: str, tmp_path: Path) -> tuple[FrameSource, np.ndarray]:
    """A source of FRAMES and the numbers it should give."""
    if kind == "array":
        return open_source(FRAMES), POSITIONS
    if kind == "array+numbers":
        return open_source(FRAMES, frame_numbers=NUMBERS), NUMBERS
    if kind == "npy":
        np.save(tmp_path / "frames.npy", FRAMES)
        return open_source(tmp_path / "frames.npy"), POSITIONS
    if kind == "npy+numbers":
        np.save(tmp_path / "frames.npy", FRAMES)
        return open_source(str(tmp_path / "frames.npy"), frame_numbers=NUMBERS), NUMBERS
    if kind == "npz":
        np.savez(tmp_path / "frames.npz", images=FRAMES)
        return open_source(tmp_path / "frames.npz"), POSITIONS
    if kind == "npz+numbers":
        np.savez_compressed(tmp_path / "frames.npz", images=FRAMES,
                            frame_numbers=NUMBERS.astype(np.uint64))
        return open_source(tmp_path / "frames.npz"), NUMBERS
    if kind == "hdf5":
        write_hdf5(tmp_path / "run.h5")
        return open_source(f"{tmp_path / 'run.h5'}:/entry/data"), POSITIONS
    if kind == "hdf5+numbers":
        write_hdf5(tmp_path / "run.nxs")
        return (open_source(f"{tmp_path / 'run.nxs'}:/entry/data",
                            frame_numbers="/entry/frame_numbers"), NUMBERS)
    raise AssertionError(kind)


KINDS = ["array", "array+numbers", "npy", "npy+numbers", "npz", "npz+numbers", "hdf5",
         "hdf5+numbers"]


def write_hdf5(path: Path, frames=FRAMES) -> None:
    with h5py.File(path, "w") as file:
        # HDF5 chunks smaller than the reads, as detector files often have.
        file.create_dataset("/entry/data", data=frames, chunks=(2, *frames.shape[1:]))
        file.create_dataset("/entry/frame_numbers", data=NUMBERS)
        file.create_dataset("/entry/instrument/exposure", data=np.ones(3))


def collect(chunks) -> tuple[np.ndarray, np.ndarray, list[int]]:
    chunks = list(chunks)
    for chunk in chunks:
        assert isinstance(chunk, FrameChunk)
        assert chunk.numbers.dtype == np.int64 and chunk.numbers.ndim == 1
        assert chunk.frames.dtype == np.uint16 and chunk.frames.flags.c_contiguous
        assert len(chunk.numbers) == len(chunk.frames)
    return (np.concatenate([c.numbers for c in chunks]),
            np.concatenate([c.frames for c in chunks]),
            [len(c.numbers) for c in chunks])


# --- round trips -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunk_frames, sizes", [(1, [1] * 7), (3, [3, 3, 1]), (50, [7])])
def test_round_trip(kind, chunk_frames, sizes, tmp_path):
    source, numbers = make_source(kind, tmp_path)
    assert (len(source), source.n_frames, source.frame_shape) == (7, 7, (4, 5))
    got_numbers, got_frames, got_sizes = collect(source.chunks(chunk_frames))
    assert got_sizes == sizes
    np.testing.assert_array_equal(got_numbers, numbers)
    np.testing.assert_array_equal(got_frames, FRAMES)


@pytest.mark.parametrize("kind", KINDS)
def test_start_stop_and_read(kind, tmp_path):
    source, numbers = make_source(kind, tmp_path)
    got_numbers, got_frames, sizes = collect(source.chunks(3, start=2, stop=6))
    assert sizes == [3, 1]
    np.testing.assert_array_equal(got_numbers, numbers[2:6])
    np.testing.assert_array_equal(got_frames, FRAMES[2:6])

    chunk = source.read(5)
    np.testing.assert_array_equal(chunk.numbers, numbers[5:])
    np.testing.assert_array_equal(chunk.frames, FRAMES[5:])
    whole = source.read()
    np.testing.assert_array_equal(whole.frames, FRAMES)
    assert whole.frames.flags.c_contiguous
    empty = source.read(4, 4)
    assert empty.numbers.shape == (0,) and empty.frames.shape == (0, 4, 5)
    assert list(source.chunks(start=7)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_split_dark(kind, tmp_path):
    source, numbers = make_source(kind, tmp_path)
    dark, data = split_dark(source, 3)
    assert isinstance(dark, SourceView) and (len(dark), len(data)) == (3, 4)
    assert data.frame_shape == (4, 5)
    np.testing.assert_array_equal(dark.read().frames, FRAMES[:3])
    np.testing.assert_array_equal(dark.read().numbers, numbers[:3])
    got_numbers, got_frames, _ = collect(data.chunks(3))
    np.testing.assert_array_equal(got_frames, FRAMES[3:])
    # Numbers of the data keep those the source carries; positions restart from 0.
    expected = NUMBERS[3:] if source.has_frame_numbers else np.arange(4)
    np.testing.assert_array_equal(got_numbers, expected)
    np.testing.assert_array_equal(data.read(1, 3).numbers, expected[1:3])
    assert "frames 3:7 of" in repr(data)


def test_split_dark_of_a_split_counts_from_its_own_start():
    _, data = split_dark(ArraySource(FRAMES), 2)
    dark2, data2 = split_dark(data, 2)
    np.testing.assert_array_equal(data2.read().frames, FRAMES[4:])
    np.testing.assert_array_equal(data2.read().numbers, [0, 1, 2])
    np.testing.assert_array_equal(dark2.read().frames, FRAMES[2:4])


@pytest.mark.parametrize("n_dark, message", [(0, "n_dark must be a positive integer"),
                                             (7, "not enough"), (9, "has 7 frames")])
def test_split_dark_refuses_too_few_frames(n_dark, message):
    with pytest.raises(ValueError, match=message):
        split_dark(ArraySource(FRAMES), n_dark)


def test_passes_iterate_independently(tmp_path):
    source, _ = make_source("hdf5", tmp_path)
    dark, data = split_dark(source, 3)
    pairs = list(zip(dark.chunks(1), data.chunks(1)))
    assert len(pairs) == 3
    for i, (d, x) in enumerate(pairs):
        np.testing.assert_array_equal(d.frames[0], FRAMES[i])
        np.testing.assert_array_equal(x.frames[0], FRAMES[3 + i])


def test_single_frame_is_a_stack_of_one(tmp_path):
    np.save(tmp_path / "one.npy", FRAMES[0])
    write_hdf5(tmp_path / "one.h5", FRAMES[0])
    for source in [ArraySource(FRAMES[0]), NpySource(tmp_path / "one.npy"),
                   Hdf5Source(tmp_path / "one.h5", "/entry/data")]:
        chunk = source.read()
        assert len(source) == 1
        np.testing.assert_array_equal(chunk.numbers, [0])
        np.testing.assert_array_equal(chunk.frames, FRAMES[:1])


def test_frame_numbers_need_not_increase():
    numbers = [9, 3, 5, 1, 0, 8, 2]
    np.testing.assert_array_equal(ArraySource(FRAMES, numbers).read().numbers, numbers)


def test_explicit_frame_numbers_win_over_those_in_npz(tmp_path):
    np.savez(tmp_path / "f.npz", frames=FRAMES, frame_numbers=NUMBERS)
    source = NpzSource(tmp_path / "f.npz", frame_numbers=POSITIONS + 1000)
    np.testing.assert_array_equal(source.read().numbers, POSITIONS + 1000)


def test_fortran_ordered_npy_gives_c_contiguous_chunks(tmp_path):
    np.save(tmp_path / "f.npy", np.asfortranarray(FRAMES))
    numbers, frames, _ = collect(NpySource(tmp_path / "f.npy").chunks(3))
    np.testing.assert_array_equal(frames, FRAMES)


def test_npy_is_memory_mapped_not_loaded(tmp_path):
    path = tmp_path / "big.npy"
    # 2000 MÖNCH frames (640 MB) as a sparse file: only the frames written take space.
    big = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint16,
                                    shape=(2000, 400, 400))
    big[0] = 1
    big[-1] = 2
    big.flush()
    del big

    tracemalloc.start()
    try:
        source = open_source(path)
        first = next(source.chunks(4))
        last = source.read(1999)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, f"opening and reading 5 frames allocated {peak / 1e6:.0f} MB"
    assert (first.frames[0] == 1).all() and (first.frames[1] == 0).all()
    np.testing.assert_array_equal(first.numbers, [0, 1, 2, 3])
    assert (last.frames == 2).all() and last.numbers.tolist() == [1999]
    # Chunks are copies, not views that keep the file mapped.
    assert first.frames.base is None


@pytest.mark.parametrize("suffix", [".npy", ".h5"])
def test_sources_of_files_pickle_without_their_frames(suffix, tmp_path):
    frames = np.tile(FRAMES, (20, 10, 10))  # 140 frames of 40x50, 560 kB
    path = tmp_path / f"f{suffix}"
    if suffix == ".npy":
        np.save(path, frames)
    else:
        write_hdf5(path, frames)
        path = f"{path}:/entry/data"
    pickled = pickle.dumps(open_source(path))
    assert len(pickled) < 10_000
    np.testing.assert_array_equal(pickle.loads(pickled).read(130).frames, frames[130:])


def test_repr_names_the_data(tmp_path):
    source, _ = make_source("hdf5+numbers", tmp_path)
    assert repr(source) == f"<Hdf5Source '{tmp_path / 'run.nxs'}:/entry/data': 7 frames of 4x5>"
    assert "'frames.npz' [images]" in make_source("npz", tmp_path)[0].describe().replace(
        str(tmp_path) + os.sep, "")


def test_open_source_returns_a_source_as_it_is():
    source = ArraySource(FRAMES)
    assert open_source(source) is source


# --- an endless stream -------------------------------------------------------------------

class Countdown(FrameSource):
    """A stream of unknown length that ends after `left` frames."""

    def __init__(self, left: int):
        self.frame_shape = (2, 3)
        self.n_frames = None
        self.has_frame_numbers = True
        self.left = left

    def describe(self) -> str:
        return "a test stream"

    @contextmanager
    def _reader(self):
        def read(start, stop):
            stop = min(stop, self.left)
            frames = np.full((stop - start, 2, 3), 7, np.uint16)
            return FrameChunk(np.arange(start, stop) * 10, frames)
        yield read


def test_endless_source_ends_on_a_short_read():
    stream = Countdown(7)
    _, _, sizes = collect(stream.chunks(3))
    assert sizes == [3, 3, 1]
    assert [len(c.numbers) for c in Countdown(6).chunks(3)] == [3, 3]
    np.testing.assert_array_equal(stream.read(2, 4).numbers, [20, 30])
    assert "endless" in repr(stream)
    with pytest.raises(TypeError, match="no length"):
        len(stream)
    with pytest.raises(ValueError, match="give stop"):
        stream.read()
    with pytest.raises(ValueError, match="endless"):
        split_dark(stream, 2)


# --- errors ----------------------------------------------------------------------------

def bad_arrays():
    nan = np.zeros((3, 4, 5), np.float32)
    nan[0, 1, 1] = np.nan
    return {
        "float32 NaN": (nan, TypeError, "NaN"),
        "int32": (FRAMES.astype(np.int32), TypeError, "int32.*astype"),
        "1-D": (np.zeros(5, np.uint16), ValueError, r"2-D frame .* shape \(5,\)"),
        "4-D": (np.zeros((2, 3, 4, 5), np.uint16), ValueError, r"shape \(2, 3, 4, 5\)"),
        "no frames": (np.zeros((0, 4, 5), np.uint16), ValueError, "holds no frames"),
        "empty frame": (np.zeros((3, 0, 5), np.uint16), ValueError, "empty frame shape"),
    }


@pytest.mark.parametrize("case", list(bad_arrays()))
@pytest.mark.parametrize("store", ["array", "npy", "npz", "hdf5"])
def test_bad_frames_are_refused(case, store, tmp_path):
    array, error, message = bad_arrays()[case]
    if store == "array":
        spec = array
    elif store == "npy":
        spec = tmp_path / "bad.npy"
        np.save(spec, array)
    elif store == "npz":
        spec = tmp_path / "bad.npz"
        np.savez(spec, frames=array)
    else:
        with h5py.File(tmp_path / "bad.h5", "w") as file:
            file["frames"] = array
        spec = f"{tmp_path / 'bad.h5'}:/frames"
    with pytest.raises(error, match=message):
        open_source(spec)


@pytest.mark.parametrize("name", ["gone.npy", "gone.npz", "gone.h5:/data", "gone.h5",
                                  "run_master_0.json", "run_master_0.raw"])
def test_missing_file(name, tmp_path):
    with pytest.raises(FileNotFoundError, match="gone|run_master"):
        open_source(tmp_path / name)


def test_missing_file_message_has_the_path(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        open_source(tmp_path / "gone.npy")
    assert str(tmp_path / "gone.npy") in str(error.value)


def test_missing_hdf5_dataset_lists_the_stacks(tmp_path):
    write_hdf5(tmp_path / "run.h5")
    listed = r"no dataset '/entry/dat'.*/entry/data \(7, 4, 5\) uint16"
    with pytest.raises(ValueError, match=listed):
        open_source(f"{tmp_path / 'run.h5'}:/entry/dat")
    with pytest.raises(ValueError, match=r"no dataset '/entry'"):  # a group, not a dataset
        open_source(f"{tmp_path / 'run.h5'}:/entry")
    with pytest.raises(ValueError, match="no dataset '/nope'"):
        Hdf5Source(tmp_path / "run.h5", "/entry/data", frame_numbers="/nope")


def test_hdf5_without_dataset_lists_the_stacks(tmp_path):
    write_hdf5(tmp_path / "run.hdf5")
    with pytest.raises(ValueError, match=r"run.hdf5:/path/to/dataset.*/entry/data \(7, 4, 5\)"):
        open_source(tmp_path / "run.hdf5")
    with h5py.File(tmp_path / "flat.h5", "w") as file:
        file["x"] = np.ones(4)
    with pytest.raises(ValueError, match="no 3-D dataset"):
        open_source(tmp_path / "flat.h5")


def test_npz_key(tmp_path):
    np.savez(tmp_path / "two.npz", dark=FRAMES[:2], data=FRAMES[2:], frame_numbers=NUMBERS)
    with pytest.raises(ValueError, match=r"\['dark', 'data', 'frame_numbers'\]: choose the "
                       r"frames, e\.g\. '.*two\.npz:dark' \(key='dark' in Python\)"):
        open_source(tmp_path / "two.npz")
    with pytest.raises(ValueError, match=r"no array 'light'.*\['dark', 'data'"):
        open_source(tmp_path / "two.npz", key="light")
    # The stored frame numbers are for another array: the length mismatch is caught.
    with pytest.raises(ValueError, match=r"shape \(2,\), one per frame, got \(7,\)"):
        open_source(tmp_path / "two.npz", key="dark")
    np.testing.assert_array_equal(
        open_source(tmp_path / "two.npz", key="data", frame_numbers=[4, 5, 6, 7, 8]).read().frames,
        FRAMES[2:])
    # The spec's form of key=, as a command line gives it.
    named = open_source(f"{tmp_path / 'two.npz'}:data", frame_numbers=[4, 5, 6, 7, 8])
    np.testing.assert_array_equal(named.read().frames, FRAMES[2:])
    assert named.describe().endswith("two.npz' [data]")
    with pytest.raises(ValueError, match=r"no array 'light'"):
        open_source(f"{tmp_path / 'two.npz'}:light")
    with pytest.raises(ValueError, match=r"names its member already: leave out key='dark'"):
        open_source(f"{tmp_path / 'two.npz'}:data", key="dark")
    with pytest.raises(FileNotFoundError, match="gone.npz"):
        open_source(f"{tmp_path / 'gone.npz'}:data")


@pytest.mark.parametrize("numbers, error, message", [
    (NUMBERS[:5], ValueError, r"shape \(7,\), one per frame, got \(5,\)"),
    (NUMBERS.reshape(7, 1), ValueError, r"got \(7, 1\)"),
    (NUMBERS.astype(float), TypeError, "integers, got dtype float64"),
    ([1, 2, 3, 3, 4, 5, 6], ValueError, r"unique; repeated: \[3\]"),
    (np.full(7, 2**63, np.uint64), ValueError, "int64 range"),
])
@pytest.mark.parametrize("kind", ["array", "npy", "hdf5"])
def test_bad_frame_numbers(numbers, error, message, kind, tmp_path):
    np.save(tmp_path / "f.npy", FRAMES)
    write_hdf5(tmp_path / "f.h5")
    make = {"array": lambda: ArraySource(FRAMES, numbers),
            "npy": lambda: NpySource(tmp_path / "f.npy", numbers),
            "hdf5": lambda: Hdf5Source(tmp_path / "f.h5", "/entry/data", numbers)}[kind]
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize("chunk_frames", [0, -3])
def test_chunk_frames_must_be_positive(chunk_frames):
    with pytest.raises(ValueError, match=f"chunk_frames must be a positive integer, got {chunk_frames}"):
        ArraySource(FRAMES).chunks(chunk_frames)  # at the call, before any iteration


@pytest.mark.parametrize("start, stop", [(-1, None), (0, 8), (5, 4), (8, None)])
def test_positions_outside_the_source(start, stop):
    source = ArraySource(FRAMES)
    with pytest.raises(ValueError, match="not within the 7 frames of a NumPy array"):
        source.chunks(2, start, stop)
    with pytest.raises(ValueError, match="not within"):
        source.read(start, stop)


@pytest.mark.parametrize("spec", ["frames.tif", "notes.json", "run_d0_f0_0.bin"])
def test_unknown_file_kind_lists_the_supported_ones(spec):
    with pytest.raises(ValueError, match=r"cannot read frames from .*\.npy.*\.npz.*\.h5.*master"):
        open_source(spec)


def test_other_types_are_refused():
    with pytest.raises(TypeError, match="cannot read frames from list"):
        open_source([[1, 2], [3, 4]])


def test_options_that_do_not_apply_are_refused(tmp_path):
    np.save(tmp_path / "f.npy", FRAMES)
    with pytest.raises(ValueError, match="key cannot be used with"):
        open_source(tmp_path / "f.npy", key="frames")
    with pytest.raises(ValueError, match="frame_numbers cannot be used with"):
        open_source(ArraySource(FRAMES), frame_numbers=NUMBERS)


# --- slsDetector raw files ---------------------------------------------------------------

# The sls_detector_header that precedes every frame in a raw data file (112 bytes).
SLS_HEADER = np.dtype([
    ("frameNumber", "<u8"), ("expLength", "<u4"), ("packetNumber", "<u4"),
    ("bunchId", "<u8"), ("timestamp", "<u8"), ("modId", "<u2"), ("row", "<u2"),
    ("column", "<u2"), ("reserved", "<u2"), ("debug", "<u4"), ("roundRNumber", "<u2"),
    ("detType", "u1"), ("version", "u1"), ("packetMask", "u1", (64,)),
])
assert SLS_HEADER.itemsize == 112


def write_raw(directory: Path, modules: list[np.ndarray], numbers, name: str = "run",
              bitdepth: int = 16) -> Path:
    """Write a JUNGFRAU acquisition (master file version 7.2) with modules stacked in y."""
    n, ny, nx = modules[0].shape
    directory.mkdir(parents=True, exist_ok=True)
    master = directory / f"{name}_master_0.json"
    master.write_text(json.dumps({
        "Version": 7.2, "Detector Type": "Jungfrau", "Timing Mode": "auto",
        "Geometry": {"x": 1, "y": len(modules)}, "Image Size in bytes": ny * nx * bitdepth // 8,
        "Pixels": {"x": nx, "y": ny}, "Max Frames Per File": 10000, "Total Frames": n,
        "Frames in File": n, "Frame Padding": 1, "Frame Discard Policy": "nodiscard",
        "Dynamic Range": bitdepth,
    }))
    for index, frames in enumerate(modules):
        records = np.zeros(n, [("header", SLS_HEADER), ("image", f"<u{bitdepth // 8}", (ny, nx))])
        records["header"]["frameNumber"] = numbers
        records["header"]["row"] = index
        records["image"] = frames
        records.tofile(directory / f"{name}_d{index}_f0_0.raw")
    return master


@pytest.fixture
def raw_master(tmp_path) -> Path:
    return write_raw(tmp_path / "raw", [FRAMES], NUMBERS)


def test_raw_needs_aare(raw_master, monkeypatch):
    monkeypatch.setitem(sys.modules, "aare", None)  # as if aare were not installed
    with pytest.raises(ImportError, match=r'pip install "aare-lab\[aare\]"'):
        open_source(raw_master)


def test_raw_data_file_is_not_a_master_file(raw_master):
    with pytest.raises(ValueError, match="not an slsDetector master file"):
        open_source(raw_master.parent / "run_d0_f0_0.raw")


RAW_CHECKS = """
import json, sys
import numpy as np
from aare_lab.sources import RawSource, open_source, split_dark

single, double, bits32, out = sys.argv[1:]
report = {}
source = open_source(single)
assert isinstance(source, RawSource), source
report["len"] = len(source)
report["shape"] = list(source.frame_shape)
report["repr"] = repr(source)
for size in (1, 3, 50):
    chunks = list(source.chunks(size))
    assert all(c.frames.dtype == np.uint16 and c.frames.flags.c_contiguous for c in chunks)
    assert all(c.numbers.dtype == np.int64 for c in chunks)
    report[f"sizes{size}"] = [len(c.numbers) for c in chunks]
    report[f"numbers{size}"] = np.concatenate([c.numbers for c in chunks]).tolist()
    report[f"frames{size}"] = np.concatenate([c.frames for c in chunks]).tolist()
part = list(source.chunks(3, start=2, stop=6))
report["part_numbers"] = np.concatenate([c.numbers for c in part]).tolist()
report["part_frames"] = np.concatenate([c.frames for c in part]).tolist()
report["tail"] = source.read(5).numbers.tolist()
dark, data = split_dark(source, 3)
pairs = list(zip(dark.chunks(1), data.chunks(1)))  # two passes open at once
report["dark"] = dark.read().numbers.tolist()
report["data"] = data.read().numbers.tolist()
report["data_frames"] = data.read().frames.tolist()
report["pairs"] = [[d.numbers[0].item(), x.numbers[0].item()] for d, x in pairs]
both = open_source(double).read()
report["double_numbers"] = both.numbers.tolist()
report["double_frames"] = both.frames.tolist()
try:
    open_source(bits32)
except TypeError as error:
    report["bits32"] = str(error)
json.dump(report, open(out, "w"))
"""


@pytest.mark.aare
@pytest.mark.parametrize("version", AARE_VERSIONS)
def test_raw_source_through_aare(version, tmp_path, raw_master):
    python = aare_python(version)
    if python is None:
        pytest.skip(f"no Python with aare {version}: set AARE_PYTHON_{version.replace('.', '_')}"
                    f" or install it in /opt/aare-{version}")
    top = np.arange(3 * 2 * 3, dtype=np.uint16).reshape(3, 2, 3)
    double = write_raw(tmp_path / "double", [top, top + 1000], [40, 41, 43])
    bits32 = write_raw(tmp_path / "bits32", [FRAMES], NUMBERS, bitdepth=32)
    out = tmp_path / "report.json"
    run = subprocess.run(
        [python, "-c", RAW_CHECKS, str(raw_master), str(double), str(bits32), str(out)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if run.returncode and "ModuleNotFoundError" in run.stderr:
        pytest.skip(f"the aare {version} Python lacks a dependency of aare_lab: "
                    f"{run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())

    assert (report["len"], report["shape"]) == (7, [4, 5])
    assert report["repr"] == f"<RawSource '{raw_master}': 7 frames of 4x5>"
    assert report["sizes1"] == [1] * 7 and report["sizes3"] == [3, 3, 1]
    assert report["sizes50"] == [7]
    for size in (1, 3, 50):
        assert report[f"numbers{size}"] == NUMBERS.tolist()
        np.testing.assert_array_equal(report[f"frames{size}"], FRAMES)
    assert report["part_numbers"] == NUMBERS[2:6].tolist()
    np.testing.assert_array_equal(report["part_frames"], FRAMES[2:6])
    assert report["tail"] == NUMBERS[5:].tolist()
    assert report["dark"] == NUMBERS[:3].tolist()
    assert report["data"] == NUMBERS[3:].tolist()  # raw files keep their numbers
    np.testing.assert_array_equal(report["data_frames"], FRAMES[3:])
    assert report["pairs"] == [[100, 105], [101, 106], [102, 107]]
    # Two modules: one number per frame, modules stacked in y.
    assert report["double_numbers"] == [40, 41, 43]
    np.testing.assert_array_equal(report["double_frames"], np.concatenate([top, top + 1000], 1))
    assert "32-bit" in report["bits32"]


def test_paced_source_sends_at_its_rate_and_counts_what_a_slow_reader_misses():
    import time

    from aare_lab.sources import PacedSource

    frames = np.arange(40 * 4 * 4, dtype=np.uint16).reshape(40, 4, 4)
    start = time.perf_counter()
    got = list(PacedSource(frames, rate=400, chunk_frames=10).chunks())
    assert time.perf_counter() - start >= 40 / 400 * 0.9
    np.testing.assert_array_equal(np.concatenate([c.numbers for c in got]), np.arange(40))
    np.testing.assert_array_equal(np.concatenate([c.frames for c in got]), frames)

    slow = PacedSource(frames, rate=10_000, chunk_frames=5, queue_chunks=1)
    seen = []
    for chunk in slow.chunks():
        time.sleep(0.02)
        seen.extend(chunk.numbers.tolist())
    assert slow.frames_dropped > 0 and slow.frames_dropped % 5 == 0
    assert len(seen) + slow.frames_dropped == 40
    assert seen == sorted(seen)


def test_paced_source_repeats_with_rising_frame_numbers_and_refuses_positions():
    from aare_lab.sources import PacedSource

    frames = np.zeros((6, 2, 2), np.uint16)
    source = PacedSource(frames, rate=10_000, chunk_frames=3, repeat=True)
    stream = source.chunks()
    numbers = [next(stream).numbers.tolist() for _ in range(4)]
    stream.close()
    assert numbers == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    with pytest.raises(ValueError, match="live stream"):
        source.chunks(start=2)
    with pytest.raises(TypeError, match="live stream"):
        source.read(0, 2)


@pytest.mark.parametrize("content", [b"", "truncated"], ids=["empty", "truncated"])
def test_an_unreadable_npy_file_is_named_with_what_to_do(tmp_path, content):
    path = tmp_path / "frames.npy"
    if content == "truncated":
        np.save(path, np.zeros((10, 16, 16), np.uint16))
        path.write_bytes(path.read_bytes()[:1000])
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=r"frames.npy' is not a readable .npy file .*numpy.save"):
        open_source(str(path))
