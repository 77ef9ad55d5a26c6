"""`aare-lab capture` over real sockets on 127.0.0.1, and its replay with `aare-lab find`."""

import json
import signal
import threading
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
import xarray as xr
from cli_process import CliProcess

from aare_lab import load_result
from aare_lab.cli import main
from aare_lab.simulate import Detector, simulate_run
from aare_lab.sources import open_source
from aare_lab.storage.destination import DestinationExists
from aare_lab.storage.result_store import IncompleteResultWarning
from aare_lab.stream.capture import capture
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


def names(folder):
    """The files in ``folder``: a capture's own, its partial file and its lock file included."""
    return sorted(path.name for path in folder.iterdir())


def test_a_replayed_capture_finds_what_the_original_frames_give(run, publisher, tmp_path):
    assert capture_here(publisher, run, tmp_path / "run.h5", "--frames", "1000") == 0
    with h5py.File(tmp_path / "run.h5", "r") as file:
        np.testing.assert_array_equal(file["frames"], run)
        assert file["frames"].chunks == (1, *run.shape[1:])
        np.testing.assert_array_equal(file["frame_numbers"], np.arange(1, len(run) + 1))
        headers = [json.loads(text) for text in file["headers"].asstr()]
        assert file.attrs["frames_captured"] == len(run)
        assert file.attrs["ended_by"] == "the stream ended" and file.attrs["complete"] == 1
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


@pytest.mark.parametrize("number, code", [
    (signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.slow)])
def test_an_interrupted_capture_leaves_a_readable_partial_file(run, publisher, tmp_path,
                                                               number, code):
    out, partial = tmp_path / "cut.h5", tmp_path / "cut.partial.h5"
    with CliProcess("capture", *publisher.endpoints, "--frames", "1000",
                    "--out", str(out)) as cli:
        publisher.wait_for_subscribers(timeout=60)
        publisher.send_frames(run[:25])  # and no end of acquisition
        status = cli.wait_for(r"^25 of 1,000 frames.*", timeout=30).group()
        assert status == ("25 of 1,000 frames captured; received 25, processed 25, lost 0, "
                          "incomplete 0, dropped 0, queued 0, malformed 0"), status
        cli.signal(number)
        assert cli.wait(30) == code, cli.output
    assert f"capture: {number.name} received; 25 frames in {partial} (complete=0; {out} not " \
           "written)" in cli.output
    assert "Traceback" not in cli.output
    assert names(tmp_path) == ["cut.partial.h5"]
    with h5py.File(partial, "r") as file:
        np.testing.assert_array_equal(file["frames"], run[:25])
        np.testing.assert_array_equal(file["frame_numbers"], np.arange(1, 26))
        assert len(file["headers"]) == 25 and file.attrs["ended_by"] == "stopped"
        assert file.attrs["complete"] == 0 and file.attrs["frames_captured"] == 25
    replay = open_source(f"{partial}:/frames")
    np.testing.assert_array_equal(next(iter(replay.chunks(chunk_frames=100))).numbers,
                                  np.arange(1, 26))


@pytest.mark.parametrize("existing, message", [
    ("run.h5", "run.h5 exists: pass --overwrite"),
    ("run.partial.h5", ("run.partial.h5 holds the frames of an earlier capture that stopped "
                        "early: rename it to keep them, or pass --overwrite")),
])
def test_an_existing_file_is_kept_without_overwrite_and_replaced_with_it(
        run, publisher, tmp_path, capsys, existing, message):
    (tmp_path / existing).write_bytes(b"frames of an earlier capture")
    # Refused before subscribing: no frame is read.
    assert main(["capture", *publisher.endpoints, "--frames", "5",
                 "--out", str(tmp_path / "run.h5")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert names(tmp_path) == [existing]
    assert (tmp_path / existing).read_bytes() == b"frames of an earlier capture"

    assert capture_here(publisher, run, tmp_path / "run.h5", "--frames", "5",
                        "--overwrite") == 0
    assert names(tmp_path) == ["run.h5"]
    with h5py.File(tmp_path / "run.h5", "r") as file:
        np.testing.assert_array_equal(file["frames"], run[:5])
        assert file.attrs["complete"] == 1


@pytest.mark.slow
def test_a_second_capture_to_one_file_refuses_while_the_first_runs(run, publisher, tmp_path,
                                                                  capsys):
    out = tmp_path / "run.h5"
    with CliProcess("capture", *publisher.endpoints, "--frames", "1000",
                    "--out", str(out)) as first:
        publisher.wait_for_subscribers(timeout=60)
        publisher.send_frames(run[:25])
        first.wait_for(r"^25 of 1,000 frames", timeout=30)
        for options in ([], ["--overwrite"]):
            capsys.readouterr()
            assert main(["capture", *publisher.endpoints, "--frames", "5",
                         "--out", str(out), *options]) == 1
            err = capsys.readouterr().err
            assert err.count("\n") == 1, err
            assert f"another process (pid {first.process.pid}) is writing {out}: wait" in err
        publisher.send_frames(run[25:])
        publisher.end_acquisition()
        assert first.wait(30) == 0, first.output
    assert names(tmp_path) == ["run.h5"]
    with h5py.File(out, "r") as file:
        np.testing.assert_array_equal(file["frames"], run)
        np.testing.assert_array_equal(file["frame_numbers"], np.arange(1, len(run) + 1))
        assert file.attrs["complete"] == 1


class FailingSource:
    """A live source that gives one chunk of 5 frames, then fails as a lost connection
    would."""

    def __init__(self, frames):
        self.endpoints = []
        self.frames = frames
        self.read = False
        self.stats = SimpleNamespace(as_dict=lambda: {"frames_received": 5})

    def describe(self):
        return "a failing stream"

    def mark_processed(self, n):
        pass

    def chunks(self, with_headers):
        self.read = True
        headers = [[{"frameNumber": n}] for n in range(1, 6)]
        yield (np.arange(1, 6), self.frames[:5]), headers
        raise ConnectionError("the receiver went away")


def test_a_capture_that_fails_leaves_its_frames_in_the_partial_file(run, tmp_path):
    out, partial = tmp_path / "run.h5", tmp_path / "run.partial.h5"
    with pytest.warns(IncompleteResultWarning, match=f"after 5 frames: {partial} holds them"), \
            pytest.raises(ConnectionError, match="the receiver went away"):
        capture(FailingSource(run), out, 100)
    assert names(tmp_path) == ["run.partial.h5"]
    with h5py.File(partial, "r") as file:
        np.testing.assert_array_equal(file["frames"], run[:5])
        assert file.attrs["complete"] == 0 and file.attrs["frames_captured"] == 5
        assert file.attrs["ended_by"] == "error: ConnectionError: the receiver went away"
    # The next capture to that file neither reads the stream nor touches the frames kept.
    source = FailingSource(run)
    with pytest.raises(DestinationExists, match="holds the frames of an earlier capture"):
        capture(source, out, 100)
    assert not source.read and names(tmp_path) == ["run.partial.h5"]


def test_capture_refuses_a_file_that_is_not_hdf5(tmp_path, capsys):
    assert main(["capture", "tcp://127.0.0.1:1", "--frames", "5",
                 "--out", str(tmp_path / "run.npy")]) == 2
    assert "--out must be an .h5 file" in capsys.readouterr().err
