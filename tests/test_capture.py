"""`aare-lab capture` over real sockets on 127.0.0.1, and its replay with `aare-lab find`."""

import json
import signal
import threading

import h5py
import numpy as np
import pytest
import xarray as xr
from cli_process import CliProcess

from aare_lab import load_result
from aare_lab.cli import main
from aare_lab.simulate import Detector, simulate_run
from aare_lab.stream.publisher import StreamPublisher

N_DARK = 20


@pytest.fixture(scope="module")
def run():
    sim = simulate_run(n_dark=N_DARK, n_frames=30, detector=Detector(frame_shape=(40, 48)),
                       seed=8)
    return np.concatenate([sim.dark, sim.frames])


@pytest.fixture
def publisher():
    with StreamPublisher("tcp://127.0.0.1:0") as pub:  # a free port
        yield pub


def capture_here(publisher, frames, out, *options):
    """`aare-lab capture` in this process while a thread sends ``frames`` (numbered from
    1) and the end of the acquisition once it has subscribed."""
    def send():
        publisher.wait_for_subscribers(timeout=30)
        publisher.send_frames(frames)
        publisher.end_acquisition()

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    code = main(["capture", *publisher.endpoints, "--out", str(out), *options])
    thread.join(30)
    return code


def test_a_replayed_capture_finds_what_the_original_frames_give(run, publisher, tmp_path):
    assert capture_here(publisher, run, tmp_path / "run.h5", "--frames", "1000") == 0
    with h5py.File(tmp_path / "run.h5", "r") as file:
        np.testing.assert_array_equal(file["frames"], run)
        assert file["frames"].chunks == (1, *run.shape[1:])
        np.testing.assert_array_equal(file["frame_numbers"], np.arange(1, len(run) + 1))
        headers = [json.loads(text) for text in file["headers"].asstr()]
        assert file.attrs["frames_captured"] == len(run)
        assert file.attrs["ended_by"] == "the stream ended"
        assert json.loads(file.attrs["stats"])["frames_received"] == len(run)
    assert [parts[0]["frameNumber"] for parts in headers] == list(range(1, len(run) + 1))
    assert {parts[0]["shape"][0] for parts in headers} == {run.shape[2]}  # [columns, rows]

    np.save(tmp_path / "run.npy", run)
    common = ["--n-dark", str(N_DARK), "--n-pedestal", str(N_DARK), "--quiet"]
    assert main(["find", "--frames", f"{tmp_path / 'run.h5'}:/frames", *common,
                 "--out", str(tmp_path / "replay.nc")]) == 0
    assert main(["find", "--frames", str(tmp_path / "run.npy"), *common,
                 "--out", str(tmp_path / "original.nc")]) == 0
    replay, original = load_result(tmp_path / "replay.nc"), load_result(tmp_path / "original.nc")
    assert original.sizes["cluster"] > 0
    # The replay carries the detector's frame numbers; the .npy numbers its data frames
    # from 0.
    shift = N_DARK + 1
    np.testing.assert_array_equal(replay["frame"], original["frame"] + shift)
    original = original.assign_coords(frame=replay["frame"])
    original["frame_number"] = original["frame_number"] + shift
    # Each names the file it was read from; all else is the same.
    sources = [json.loads(ds.attrs.pop("inputs"))["frames"]["source"] for ds in (replay, original)]
    assert sources == [f"{tmp_path / 'run.h5'}:/frames", str(tmp_path / "run.npy")]
    xr.testing.assert_identical(replay, original)


def test_capture_stops_at_the_frames_asked_for(run, publisher, tmp_path):
    assert capture_here(publisher, run, tmp_path / "part.h5", "--frames", "7") == 0
    with h5py.File(tmp_path / "part.h5", "r") as file:
        np.testing.assert_array_equal(file["frames"], run[:7])
        np.testing.assert_array_equal(file["frame_numbers"], np.arange(1, 8))
        assert file.attrs["ended_by"] == "7 frames captured"


def test_an_interrupted_capture_keeps_the_frames_so_far(run, publisher, tmp_path):
    out = tmp_path / "cut.h5"
    with CliProcess("capture", *publisher.endpoints, "--frames", "1000",
                    "--out", str(out)) as cli:
        publisher.wait_for_subscribers(timeout=60)
        publisher.send_frames(run[:25])  # and no end of acquisition
        status = cli.wait_for(r"^25 of 1,000 frames.*", timeout=30).group()
        assert status == ("25 of 1,000 frames captured; received 25, processed 25, lost 0, "
                          "incomplete 0, dropped 0, queued 0, malformed 0"), status
        cli.signal(signal.SIGTERM)
        assert cli.wait(30) == 0, cli.output
    assert "capture: SIGTERM received; 25 frames" in cli.output
    with h5py.File(out, "r") as file:
        np.testing.assert_array_equal(file["frames"], run[:25])
        np.testing.assert_array_equal(file["frame_numbers"], np.arange(1, 26))
        assert len(file["headers"]) == 25 and file.attrs["ended_by"] == "stopped"


def test_capture_refuses_a_file_that_is_not_hdf5(tmp_path, capsys):
    assert main(["capture", "tcp://127.0.0.1:1", "--frames", "5",
                 "--out", str(tmp_path / "run.npy")]) == 2
    assert "--out must be an .h5 file" in capsys.readouterr().err
