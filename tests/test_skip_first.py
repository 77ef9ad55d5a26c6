"""skip_first: the first frames of each acquisition left out of dark training and finding,
counted in the result; dark frames whose residual noise stands out named.

The real frames are the committed crop of PSI aare's JUNGFRAU dark runs
(tests/data/jungfrau_dark_crop.npz, its README): in both runs the first frame stands out.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from aare_env import aare_python
from live_helpers import live_cli
from test_sources import write_raw

from aare_lab import Pedestal, find_clusters, load_result, train_pedestal
from aare_lab.cli import main
from aare_lab.detector.dark.frame_noise import FRAME_MIN_EXCESS, frame_noise
from aare_lab.detector.dark.report import dark_report
from aare_lab.simulate import Detector, simulate_run
from aare_lab.sources import (
    FrameChunk,
    LiveSkipFirst,
    SkipFirst,
    open_source,
    split_dark,
    without_first,
)
from aare_lab.stream.publisher import StreamPublisher

JUNGFRAU = Path(__file__).parent / "data" / "jungfrau_dark_crop.npz"


@pytest.fixture(scope="module")
def jungfrau():
    with np.load(JUNGFRAU) as data:
        return {name: data[name] for name in ("single", "double")}


@pytest.fixture(scope="module")
def run():
    return simulate_run(n_dark=21, n_frames=11, detector=Detector(frame_shape=(32, 40)),
                        seed=3)


def stack(n=7, shape=(2, 3)):
    return (np.arange(n, dtype=np.uint16)[:, None, None] + np.zeros(shape, np.uint16))


# ------------------------------------------------------------------ the source view
def test_a_file_is_one_acquisition_whose_first_frames_are_left_out():
    frames = stack()
    source = without_first(open_source(frames), 2)
    assert isinstance(source, SkipFirst)
    assert (source.n_frames, source.skip_first, source.frames_skipped) == (5, 2, 2)
    chunk = source.read()
    np.testing.assert_array_equal(chunk.frames, frames[2:])
    # No numbers of its own: the frames left are numbered from 0, as any view's.
    np.testing.assert_array_equal(chunk.numbers, np.arange(5))
    assert "without the first 2 frames of each acquisition" in source.describe()
    assert without_first(source.base, 0) is source.base


def test_labelled_acquisitions_each_lose_their_first_frames_across_chunks():
    frames = stack(9)
    labels = np.array([4, 4, 4, 7, 7, 7, 7, 1, 1])
    source = without_first(open_source(frames, frame_numbers=np.arange(100, 109)), 2,
                           acquisitions=labels)
    kept = [2, 5, 6]  # the last acquisition (two frames) is left out whole
    assert source.frames_skipped == 6
    for size in (1, 2, 3):
        chunks = list(source.chunks(size))
        np.testing.assert_array_equal(np.concatenate([c.frames for c in chunks]), frames[kept])
        # Numbers that came with the frames stay theirs.
        np.testing.assert_array_equal(np.concatenate([c.numbers for c in chunks]),
                                      np.array(kept) + 100)
    np.testing.assert_array_equal(source.acquisition_starts(), [0, 1])


def test_split_dark_counts_each_skipped_frame_once():
    labels = np.repeat([1, 2], 5)
    source = without_first(open_source(stack(10)), 1, acquisitions=labels)
    dark, data = split_dark(source, 3)
    # dark: frames 1, 2, 3; data: 4 | 6, 7, 8, 9 (frame 5 left out before 6).
    assert (dark.frames_skipped, data.frames_skipped) == (1, 1)
    assert (dark.skip_first, data.skip_first) == (1, 1)
    np.testing.assert_array_equal(data.read().frames[:, 0, 0], [4, 6, 7, 8, 9])
    np.testing.assert_array_equal(data.acquisition_starts(), [1])


@pytest.mark.parametrize("n, labels, match", [
    (-1, None, "skip_first must be a whole number"),
    (1.5, None, "skip_first must be a whole number"),
    (7, None, "leaves no frame"),
    (1, np.zeros(3, np.int64), r"one integer per frame, shape \(7,\)"),
    (1, np.zeros(7), "one integer per frame"),
])
def test_bad_skips_are_refused_in_words(n, labels, match):
    with pytest.raises(ValueError, match=match):
        without_first(open_source(stack()), n, acquisitions=labels)


def test_an_array_must_be_opened_first():
    with pytest.raises(TypeError, match=r"FrameSource \(aare_lab.open_source gives one\)"):
        without_first(stack(), 1)


# ------------------------------------------------------- training, finding, results
def test_training_without_the_first_frames_is_training_on_the_rest(run):
    pedestal = train_pedestal(run.dark, 20, skip_first=1, progress=False)
    plain = train_pedestal(run.dark[1:], 20, progress=False)
    for name, value in plain.state().items():
        np.testing.assert_array_equal(pedestal.state()[name], value, err_msg=name)
    assert (pedestal.dark_frames_skipped, plain.dark_frames_skipped) == (1, 0)
    with pytest.raises(ValueError, match="without the first 2 frames of each acquisition: "
                                         "19 given, n_pedestal=20"):
        train_pedestal(run.dark[:1].repeat(21, 0), 20, skip_first=2, progress=False)


def test_push_dark_counts_what_a_skipping_source_leaves_out(run, tmp_path):
    pedestal = Pedestal(run.dark.shape[1:], 20)
    pedestal.push_dark(without_first(open_source(run.dark), 1))
    assert (pedestal.n_frames, pedestal.dark_frames_skipped) == (20, 1)
    pedestal.save(tmp_path / "pedestal.nc")
    assert Pedestal.load(tmp_path / "pedestal.nc").dark_frames_skipped == 1
    assert pedestal.copy().dark_frames_skipped == 1


@pytest.mark.parametrize("finder", ["serial", "frozen"])
def test_every_finder_finds_what_it_finds_in_the_frames_left(run, finder, tmp_path):
    skipped = find_clusters(run.frames, run.dark, finder=finder, n_pedestal=20,
                            skip_first=1, progress=False, out=tmp_path / "skip.nc")
    plain = find_clusters(run.frames[1:], run.dark[1:], finder=finder, n_pedestal=20,
                          progress=False)
    with skipped:
        for name in ("frame_number", "y", "x", "window", "n_found", "frame"):
            np.testing.assert_array_equal(skipped[name], plain[name], err_msg=name)
        assert {key: int(skipped.attrs[key]) for key in
                ("skip_first", "frames_skipped", "dark_frames_skipped")} == {
            "skip_first": 1, "frames_skipped": 1, "dark_frames_skipped": 1}
    assert not {"skip_first", "frames_skipped", "dark_frames_skipped"} & set(plain.attrs)


@pytest.mark.gpu
@pytest.mark.parametrize("on_device", [False, True])
def test_the_cuda_finder_finds_what_the_frozen_finder_finds_in_the_frames_left(run, on_device):
    import cupy

    frames = cupy.asarray(run.frames) if on_device else run.frames
    # 21 dark frames less the first 2 leave 19 to train on.
    gpu = find_clusters(frames, run.dark, finder="cuda", n_pedestal=19, skip_first=2,
                        progress=False)
    cpu = find_clusters(run.frames, run.dark, finder="frozen", n_pedestal=19, skip_first=2,
                        progress=False)
    assert gpu.sizes["frame"] == 9
    for name in ("frame_number", "y", "x", "window", "n_found", "frame"):
        np.testing.assert_array_equal(gpu[name], cpu[name], err_msg=name)
    assert (gpu.attrs["skip_first"], gpu.attrs["frames_skipped"],
            gpu.attrs["dark_frames_skipped"]) == (2, 2, 2)


def test_a_given_pedestal_skips_the_data_frames_only(run):
    pedestal = train_pedestal(run.dark, 20, progress=False)
    result = find_clusters(run.frames, pedestal=pedestal, skip_first=3, progress=False)
    assert result.sizes["frame"] == 8
    assert (result.attrs["skip_first"], result.attrs["frames_skipped"]) == (3, 3)
    assert "dark_frames_skipped" not in result.attrs


def test_find_cli_skips_the_file_once_before_its_dark_frames(run, tmp_path):
    np.save(tmp_path / "all.npy", np.concatenate([run.dark, run.frames]))
    assert main(["find", "--frames", str(tmp_path / "all.npy"), "--n-dark", "20",
                 "--n-pedestal", "20", "--skip-first", "1", "--quiet",
                 "--out", str(tmp_path / "r.nc")]) == 0
    result = load_result(tmp_path / "r.nc")
    plain = find_clusters(run.frames, run.dark[1:], n_pedestal=20, progress=False)
    np.testing.assert_array_equal(result["energy"], plain["energy"])
    # The one frame left out was among the dark frames; the data frames lost none.
    assert (result.attrs["skip_first"], result.attrs["frames_skipped"],
            result.attrs["dark_frames_skipped"]) == (1, 0, 1)


# ------------------------------------------------------------- frames that stand out
def independent_residuals(frames):
    """Residual noise per frame against the mean of all: numpy alone."""
    x = frames.astype(np.float64)
    residual = x - x.mean(0)
    residual -= np.median(residual.reshape(len(x), -1), axis=1)[:, None, None]
    return np.sqrt((residual**2).mean(axis=(1, 2)))


@pytest.mark.parametrize("name", ["single", "double"])
def test_the_real_jungfrau_first_frame_stands_out(jungfrau, name):
    frames = jungfrau[name]
    source = open_source(frames)
    noise = frame_noise(train_pedestal(source, 10, progress=False), source)
    expected = independent_residuals(frames)
    np.testing.assert_allclose(noise.residual_rms, expected, rtol=1e-9)
    # The first frame is 15-18 % noisier than the median of the ten, the others within 1 %.
    assert 1.15 < expected[0] / np.median(expected) < 1.18
    assert np.all(np.abs(expected[1:] / np.median(expected) - 1) < 0.01)
    assert noise.outliers.tolist() == [0]
    assert noise.suggested_skip == 1
    message = noise.message()
    assert f"frame 0 ({expected[0]:.3g} ADU, first of its acquisition)" in message
    assert "--skip-first 1" in message

    skipped = without_first(source, 1)
    again = frame_noise(train_pedestal(skipped, 9, progress=False), skipped)
    np.testing.assert_allclose(again.residual_rms, independent_residuals(frames[1:]),
                               rtol=1e-9)
    assert again.outliers.size == 0 and again.message() is None


def test_a_noisy_frame_in_the_middle_is_named_without_a_skip():
    rng = np.random.default_rng(1)
    frames = rng.normal(1000, 10, (12, 256, 256))
    # Against a mean it is part of, a frame 3x the bound noisier reads about 2.7x above.
    frames[8] = rng.normal(1000, 10 * (1 + 3 * FRAME_MIN_EXCESS), (256, 256))
    frames = np.rint(frames).astype(np.uint16)
    source = open_source(frames)
    noise = frame_noise(train_pedestal(source, 12, progress=False), source)
    assert noise.outliers.tolist() == [8]
    assert noise.suggested_skip is None
    assert "frame 8 (" in noise.message() and "frame 9 of its acquisition" in noise.message()
    assert "--skip-first" not in noise.message()
    # Half the excess is within the bound: nothing is named.
    frames[8] = np.rint(rng.normal(1000, 10 * (1 + FRAME_MIN_EXCESS / 2), (256, 256)))
    source = open_source(frames)
    assert frame_noise(train_pedestal(source, 12, progress=False), source).outliers.size == 0


def test_dark_report_and_cli_name_the_frame_and_the_skip(jungfrau, tmp_path, capsys):
    source = open_source(jungfrau["double"])
    report = dark_report(train_pedestal(source, 10, progress=False), frames=source)
    np.testing.assert_allclose(report.statistics["frame_residual_rms"],
                               independent_residuals(jungfrau["double"]), rtol=1e-9)
    assert dark_report(train_pedestal(source, 10, progress=False)).frames is None
    np.save(tmp_path / "double.npy", jungfrau["double"])
    assert main(["dark", str(tmp_path / "double.npy"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "1 dark frame stands out by residual noise: frame 0" in out
    assert "--skip-first 1" in out
    assert main(["dark", str(tmp_path / "double.npy"), "--quiet", "--skip-first", "1"]) == 0
    out = capsys.readouterr().out
    assert "dark frames: 9 (n_pedestal=9), 128x256 pixels; 1 left out" in out
    assert "no frame stands out" in out


# --------------------------------------------------------------------- the stream
class FakeStream:
    """What `LiveSkipFirst` uses of a `StreamSource`: chunks with their acquisition."""

    n_frames = None  # endless, as a stream is

    def __init__(self, items):
        self.items, self.processed, self.given_back = list(items), 0, []

    def chunks(self, chunk_frames=None, start=0, stop=None, *, with_headers=False,
               with_acquisition=False, until=None):
        assert with_acquisition
        items, self.items = self.given_back + self.items, []
        self.given_back = []
        yield from items

    def mark_processed(self, n):
        self.processed += n

    def unread(self, items):
        self.given_back = list(items)

    @property
    def stats(self):
        return type("Stats", (), {"as_dict": lambda s: {"frames_processed": self.processed}})()


def chunk_of(numbers):
    numbers = np.asarray(numbers, np.int64)
    return FrameChunk(numbers, numbers.astype(np.uint16).reshape(-1, 1, 1))


def test_the_stream_loses_the_first_frames_of_each_acquisition_across_chunks():
    items = [(chunk_of([1, 2]), 1), (chunk_of([3, 4, 5]), 1), (chunk_of([1, 2, 3, 4]), 2),
             (chunk_of([1]), 3), (chunk_of([2, 3]), 3)]
    stream = FakeStream(items)
    source = without_first(stream, 3)
    assert isinstance(source, LiveSkipFirst)
    got = list(source.chunks(with_acquisition=True))
    assert [(c.numbers.tolist(), a) for c, a in got] == [([4, 5], 1), ([4], 2)]
    # Left out, and marked processed so that the stream's accounting still adds up.
    assert source.frames_skipped == stream.processed == 3 + 3 + 3
    assert source.stats.as_dict() == {"frames_processed": 9, "frames_skipped": 9}


def test_chunks_given_back_to_the_stream_are_not_skipped_again():
    stream = FakeStream([(chunk_of([1, 2, 3]), 1)])
    source = without_first(stream, 1)
    first = list(source.chunks(with_acquisition=True))
    source.unread(first)
    again = list(source.chunks(with_acquisition=True))
    assert [c.numbers.tolist() for c, _ in again] == [[2, 3]]
    assert source.frames_skipped == 1


def test_live_cli_leaves_out_each_acquisitions_first_frames(run, tmp_path):
    pedestal = train_pedestal(run.dark, 20, noise="fixed", progress=False)
    pedestal.save(tmp_path / "pedestal.nc")
    out = tmp_path / "live"

    with StreamPublisher("tcp://127.0.0.1:0") as publisher:
        def send():
            for part in (run.frames[:5], run.frames[5:]):
                publisher.send_frames(part)
                publisher.end_acquisition()
                time.sleep(0.3)

        assert live_cli(publisher, send, "--noise", "fixed", "--out", str(out),
                        "--pedestal", str(tmp_path / "pedestal.nc"), "--clusters",
                        "--skip-first", "2", "--duration", "2.5", "--interval", "0.2") == 0
    found = load_result(out / "clusters.nc")
    assert found["acquisition"].values.tolist() == [1] * 3 + [2] * 4
    assert found["frame"].values.tolist() == [3, 4, 5, 3, 4, 5, 6]
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["frames_received"], stats["frames_processed"], stats["frames_skipped"],
            stats["frames_queued"]) == (11, 11, 4, 0)


# ------------------------------------------------------------------------- the oracle
ORACLE = """
import sys, numpy as np, aare
pedestal = aare.FastPedestal.from_file(sys.argv[1], n_samples=int(sys.argv[2]),
                                       skip_first=int(sys.argv[3]))
np.savez(sys.argv[4], mean=np.asarray(pedestal.mean()), std=np.asarray(pedestal.std()))
"""


AARE_VERSION = "2026.9.30"


def aare_or_skip() -> str:
    python = aare_python(AARE_VERSION)
    if python is None:
        pytest.skip(f"aare {AARE_VERSION} is not installed (/opt/aare-{AARE_VERSION}, "
                    "tests/aare_env.py)")
    return python


@pytest.mark.aare
@pytest.mark.parametrize("n_samples", [9, 8])
def test_training_skips_as_aare_fast_pedestal_from_file(jungfrau, tmp_path, n_samples):
    python = aare_or_skip()
    np.save(tmp_path / "single.npy", jungfrau["single"])
    subprocess.run([python, "-c", ORACLE, str(tmp_path / "single.npy"), str(n_samples), "1",
                    str(tmp_path / "aare.npz")], check=True, timeout=120)
    with np.load(tmp_path / "aare.npz") as aare:
        pedestal = train_pedestal(tmp_path / "single.npy", n_samples, skip_first=1,
                                  progress=False)
        np.testing.assert_allclose(pedestal.mean, aare["mean"], rtol=1e-12)
        np.testing.assert_allclose(pedestal.rms, aare["std"], rtol=1e-9, atol=1e-9)


RAW = """
import sys, warnings, numpy as np, aare, aare_lab
master, out = sys.argv[1:]
warnings.simplefilter("ignore")  # ten dark frames are too few, and said so
pedestal = aare_lab.train_pedestal(master, 9, skip_first=1, progress=False)
oracle = aare.FastPedestal.from_file(master, n_samples=9, skip_first=1)
result = aare_lab.find_clusters(master, master, n_pedestal=9, skip_first=1, progress=False)
np.savez(out, mean=pedestal.mean, rms=pedestal.rms, aare_mean=np.asarray(oracle.mean()),
         aare_std=np.asarray(oracle.std()), frame=result["frame"].values,
         skipped=[result.attrs["skip_first"], result.attrs["frames_skipped"],
                  result.attrs["dark_frames_skipped"]])
"""


@pytest.mark.aare
def test_a_raw_master_file_is_one_acquisition_as_aare_reads_it(jungfrau, tmp_path):
    python = aare_or_skip()
    master = write_raw(tmp_path / "raw", [jungfrau["single"]], np.arange(1, 11))
    subprocess.run([python, "-c", RAW, str(master), str(tmp_path / "raw.npz")], check=True,
                   timeout=300, env={**os.environ,
                                     "PYTHONPATH": str(Path(__file__).parents[1])})
    with np.load(tmp_path / "raw.npz") as got:
        np.testing.assert_allclose(got["mean"], got["aare_mean"], rtol=1e-12)
        np.testing.assert_allclose(got["rms"], got["aare_std"], rtol=1e-9, atol=1e-9)
        # The raw headers' numbers stay: frame 1 is the one left out.
        assert got["frame"].tolist() == list(range(2, 11))
        assert got["skipped"].tolist() == [1, 1, 1]
