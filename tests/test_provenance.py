"""Results record their inputs: each file's path, size and fingerprint, by role."""

import json
import os
import pickle

import numpy as np
from live_helpers import live_run

from aare_lab import JungfrauCalibration, Pedestal, find_clusters
from aare_lab.campaign import Campaign
from aare_lab.cli import main
from aare_lab.detector.common_mode import CommonMode, load_label_map
from aare_lab.model.results import load_result
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import (
    Beam,
    Detector,
    JungfrauBeam,
    JungfrauDetector,
    JungfrauSimulator,
    Simulator,
)
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


def jungfrau_files(tmp_path):
    """Raw JUNGFRAU dark and data frames, their calibration and a label map of two regions,
    as files; and the simulator."""
    sim = JungfrauSimulator(JungfrauDetector(frame_shape=(32, 64)),
                            JungfrauBeam(photons_per_frame=10, spots_per_frame=1), seed=4)
    paths = {name: tmp_path / name for name in ("dark.npy", "frames.npy", "cal.nc",
                                                  "labels.npy")}
    np.save(paths["dark.npy"], sim.dark(20))
    np.save(paths["frames.npy"], sim.frames(4)[0])
    sim.calibration.save(paths["cal.nc"])
    np.save(paths["labels.npy"], np.repeat(np.arange(64)[None] // 32, 32, axis=0))
    return sim, paths


def assert_records(inputs, role, path):
    """``inputs[role]`` names ``path`` as given and its one file as it is now."""
    (record,) = inputs[role]["files"]
    assert inputs[role]["source"] == str(path) and record["path"] == str(path.resolve())
    assert record["bytes"] == path.stat().st_size
    assert record["fingerprint"] == file_fingerprint(path)


def test_the_cli_records_a_calibration_and_a_label_map_file(tmp_path):
    _, paths = jungfrau_files(tmp_path)
    out = tmp_path / "r.nc"
    assert main(["find", "--dark", str(paths["dark.npy"]),
                 "--frames", str(paths["frames.npy"]), "--n-pedestal", "20",
                 "--calibration", str(paths["cal.nc"]),
                 "--common-mode", str(paths["labels.npy"]), "--out", str(out), "--quiet"]) == 0
    inputs = json.loads(load_result(out).attrs["inputs"])
    assert set(inputs) == {"dark", "frames", "calibration", "common_mode"}
    assert_records(inputs, "calibration", paths["cal.nc"])
    assert_records(inputs, "common_mode", paths["labels.npy"])


def test_the_api_records_a_loaded_calibration_and_label_map_not_ones_in_memory(tmp_path):
    sim, paths = jungfrau_files(tmp_path)
    frames, dark = np.load(paths["frames.npy"]), np.load(paths["dark.npy"])
    options = {"n_pedestal": 20, "window_dtype": "float32", "progress": False}
    loaded = find_clusters(frames, dark, calibration=JungfrauCalibration.load(paths["cal.nc"]),
                           common_mode=load_label_map(paths["labels.npy"]), **options)
    inputs = json.loads(loaded.attrs["inputs"])
    assert set(inputs) == {"calibration", "common_mode"}
    assert_records(inputs, "calibration", paths["cal.nc"])
    assert_records(inputs, "common_mode", paths["labels.npy"])
    # The same calibration and labels from memory: nothing to record, as for frames.
    in_memory = find_clusters(frames, dark, calibration=sim.calibration,
                              common_mode=np.load(paths["labels.npy"]), **options)
    assert "inputs" not in in_memory.attrs
    assert in_memory.attrs["calibration_sha256"] == loaded.attrs["calibration_sha256"]


def test_a_changed_calibration_file_gives_another_fingerprint(tmp_path):
    sim, paths = jungfrau_files(tmp_path)
    frames, dark = np.load(paths["frames.npy"]), np.load(paths["dark.npy"])

    def recorded():
        result = find_clusters(frames, dark, calibration=JungfrauCalibration.load(paths["cal.nc"]),
                               n_pedestal=20, window_dtype="float32", progress=False)
        (record,) = json.loads(result.attrs["inputs"])["calibration"]["files"]
        return record["fingerprint"]

    first = recorded()
    gain = sim.calibration.gain.copy()
    gain[0] *= 1.01
    JungfrauCalibration(sim.calibration.pedestal, gain).save(paths["cal.nc"])
    second = recorded()
    assert first != second and second == file_fingerprint(paths["cal.nc"])


def test_a_label_map_file_is_recorded_by_live_runs_and_campaigns(tmp_path):
    dark, frames = files(tmp_path)
    labels = tmp_path / "labels.npy"
    np.save(labels, np.zeros((32, 32), np.int64))
    spec = FinderSpec("frozen", n_pedestal=30, common_mode=load_label_map(labels))
    # A campaign's workers may be other processes: the spec travels pickled.
    assert pickle.loads(pickle.dumps(spec)).common_mode.inputs == spec.common_mode.inputs
    stack = np.concatenate([np.load(dark), np.load(frames)])
    live_run(stack, spec, tmp_path / "live", n_dark=30, clusters=True)
    inputs = json.loads(load_result(tmp_path / "live" / "clusters.nc").attrs["inputs"])
    assert_records(inputs, "common_mode", labels)
    Campaign([str(frames)], spec, dark=str(dark), out=tmp_path / "campaign").run(
        workers=1, processes=False, progress=False)
    inputs = json.loads(load_result(tmp_path / "campaign" / "frames" / "clusters.nc")
                        .attrs["inputs"])
    assert set(inputs) == {"dark", "frames", "common_mode"}
    assert_records(inputs, "common_mode", labels)
    assert CommonMode(np.zeros((32, 32), np.int64)) == spec.common_mode
