"""Results record their inputs: each file's path, size and fingerprint, by role."""

import json
import os

import numpy as np

from aare_lab import Pedestal, find_clusters
from aare_lab.cli import main
from aare_lab.model.results import load_result
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.sources.files import file_fingerprint, fingerprint, input_record


def files(tmp_path):
    sim = Simulator(Detector(frame_shape=(32, 32)), Beam(photons_per_frame=10), seed=8)
    np.save(tmp_path / "dark.npy", sim.dark(30))
    np.save(tmp_path / "frames.npy", sim.frames(6)[0])
    return tmp_path / "dark.npy", tmp_path / "frames.npy"


def test_a_result_records_its_frames_dark_and_pedestal_files(tmp_path):
    dark, frames = files(tmp_path)
    out, ped = tmp_path / "r.nc", tmp_path / "p.nc"
    assert main(["find", "--dark", str(dark), "--frames", str(frames), "--n-pedestal", "30",
                 "--save-pedestal", str(ped), "--out", str(out), "--quiet"]) == 0
    inputs = json.loads(load_result(out).attrs["inputs"])
    for role, path in (("dark", dark), ("frames", frames)):
        (record,) = inputs[role]["files"]
        assert inputs[role]["source"] == str(path) and record["path"] == str(path.resolve())
        assert record["bytes"] == path.stat().st_size
        assert record["fingerprint"] == file_fingerprint(path)
    # A result found with the saved pedestal names it, and the dark frames it came from.
    again = find_clusters(str(frames), pedestal=Pedestal.load(ped), n_pedestal=30,
                          progress=False)
    inputs = json.loads(again.attrs["inputs"])
    assert set(inputs) == {"dark", "pedestal", "frames"}
    assert inputs["pedestal"]["files"][0]["fingerprint"] == file_fingerprint(ped)
    assert inputs["dark"]["files"][0]["fingerprint"] == file_fingerprint(dark)


def test_frames_from_memory_record_no_input():
    sim = Simulator(Detector(frame_shape=(16, 16)), Beam(photons_per_frame=4), seed=2)
    result = find_clusters(sim.frames(3)[0], sim.dark(20), n_pedestal=20, progress=False)
    assert "inputs" not in result.attrs


def test_a_fingerprint_follows_the_content_and_the_modification_time(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.zeros(200_000, np.uint16))
    first = fingerprint(path)
    assert fingerprint(path) == first and len(first) == 64
    stat = path.stat()
    with open(path, "r+b") as f:   # one byte in the middle, the mtime kept
        f.seek(200_000)
        f.write(b"\x01")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fingerprint(path) != first
    assert input_record(tmp_path / "gone.npy")["files"][0]["fingerprint"] is None
