"""Raw JUNGFRAU frames without a calibration: their gain bits are reported, never clustered
silently as ADC counts (`aare_lab.detector.jungfrau.GainBitsWarning`)."""

import warnings

import numpy as np
import pytest
from live_helpers import live_cli

from aare_lab import FinderSpec, FrozenFinder, GainBitsWarning, SerialFinder, find_clusters
from aare_lab.cli import main
from aare_lab.detector.jungfrau import ADC_MASK, GainBitsTally, gain_bits_per_frame
from aare_lab.finders import CudaFinder
from aare_lab.finders.frozen import max_threads
from aare_lab.pipeline import train_pedestal
from aare_lab.simulate import (
    Beam,
    Detector,
    JungfrauBeam,
    JungfrauDetector,
    JungfrauSimulator,
    Simulator,
)
from aare_lab.stream.publisher import StreamPublisher

SHAPE = (24, 32)
N_DARK = 20
G1, G2 = 0x4000, 0xC000


@pytest.fixture(scope="module")
def run():
    """MÖNCH-like dark and data frames (14-bit values), and data frames in which 3 pixels
    of frame 2 and 1 pixel of frame 5 read as raw JUNGFRAU pixels switched to G1 or G2."""
    sim = Simulator(Detector(frame_shape=SHAPE), Beam(photons_per_frame=6), seed=2)
    dark, (frames, _) = sim.dark(N_DARK), sim.frames(8)
    switched = frames.copy()
    switched[2, 3, 4] = G1 | 9000
    switched[2, 10, 11] = G1 | 12000
    switched[2, 20, 30] = G2 | 14000
    switched[5, 7, 7] = G2 | 13000
    return dark, frames, switched


def caught(func, *args, **kwargs):
    """What ``func`` returns, and the messages of the `GainBitsWarning` it raised."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = func(*args, **kwargs)
    return out, [str(w.message) for w in record if w.category is GainBitsWarning]


def test_count_per_frame(run):
    _, frames, switched = run
    assert gain_bits_per_frame(frames).tolist() == [0] * 8
    assert gain_bits_per_frame(switched).tolist() == [0, 0, 3, 0, 0, 1, 0, 0]


@pytest.mark.parametrize("cls", [SerialFinder, FrozenFinder])
def test_data_frames_with_gain_bits_warn_once(run, cls):
    dark, _, switched = run
    _, messages = caught(cls(train_pedestal(dark, N_DARK, progress=False)).find,
                         switched, progress=False)
    assert len(messages) == 1
    assert messages[0].startswith("4 pixels in 2 of 8 frames of ")
    assert "--calibration FILE" in messages[0]
    assert "calibration=aare_lab.JungfrauCalibration.load(FILE)" in messages[0]


@pytest.mark.parametrize("make", [
    lambda ped: SerialFinder(ped, chunk_frames=3),
    lambda ped: SerialFinder(ped, 5.0, 5, common_mode=np.arange(SHAPE[1]) // 8 + np.zeros(
        SHAPE, np.int64), chunk_frames=3),
    lambda ped: FrozenFinder(ped, chunk_frames=3, threads=1),
    lambda ped: FrozenFinder(ped, 5.0, 9, chunk_frames=3, threads=max_threads()),
    lambda ped: FrozenFinder(ped, common_mode=np.arange(SHAPE[1]) // 8 + np.zeros(
        SHAPE, np.int64), chunk_frames=3, threads=max_threads()),
], ids=["serial", "serial-common-mode", "frozen-1-thread", "frozen-9x9-all-threads",
        "frozen-common-mode"])
def test_the_cpu_finders_count_every_switched_pixel(run, make):
    # From none to every pixel switched, frame by frame, over chunks of 3 frames: the
    # compiled loops count each frame's rows as they read them, every row of every band.
    dark, frames, _ = run
    share = np.linspace(0, 1, len(frames))[:, None, None]
    switched = frames | np.where(np.random.default_rng(5).random(frames.shape) < share,
                                 np.uint16(G1), np.uint16(0))
    expected = (switched > ADC_MASK).sum(axis=(1, 2)).tolist()
    assert expected[0] == 0 and expected[-1] == frames[0].size and len(set(expected)) > 4
    finder = make(train_pedestal(dark, N_DARK, progress=False))
    handed, add = [], finder.gain_bits.add
    finder.gain_bits.add = lambda counts: (handed.append(counts.copy()), add(counts))
    assert sum(len(b.frame_numbers) for b in finder.find_batches(switched)) == len(frames)
    assert [len(h) for h in handed] == [3, 3, 2]
    assert np.concatenate(handed).tolist() == expected


def test_a_finder_warns_once_over_a_split_run(run):
    dark, _, switched = run
    finder = FrozenFinder(train_pedestal(dark, N_DARK, progress=False))
    _, first = caught(finder.find, switched[:4], progress=False)
    _, second = caught(finder.find, switched[4:], progress=False)
    assert len(first) == 1 and first[0].startswith("3 pixels in 1 of 4 frames")
    assert second == []


def test_a_finder_that_warned_counts_no_more(run):
    dark, _, switched = run
    finder = FrozenFinder(train_pedestal(dark, N_DARK, progress=False), chunk_frames=2)
    _, messages = caught(finder.find, switched, progress=False)
    assert len(messages) == 1
    for _ in range(3):
        assert sum(len(b.frame_numbers) for b in finder.find_batches(switched)) == 8
    assert finder.gain_bits.counts() == (0, 0, 0)


def test_a_tally_sums_chunk_after_chunk():
    tally = GainBitsTally()
    for k in range(1000):
        tally.add(np.array([k % 3, 0]))
    assert tally.counts() == (999, 666, 2000)
    tally.reset()
    assert tally.counts() == (0, 0, 0)


def test_chunk_by_chunk_callers_report_when_they_ask(run):
    dark, _, switched = run
    finder = FrozenFinder(train_pedestal(dark, N_DARK, progress=False))
    _, silent = caught(finder.process_chunk, switched[:4], np.arange(4))
    assert silent == []
    _, messages = caught(finder.report_gain_bits, "the stream")
    assert len(messages) == 1
    assert messages[0].startswith("3 pixels in 1 of 4 frames of the stream read above 16383")


def test_dark_frames_with_gain_bits_warn(run):
    dark, frames, _ = run
    bad_dark = dark.copy()
    bad_dark[4, 1, 1] = G1 | 100
    bad_dark[9, 2, 2] = G2 | 100
    _, messages = caught(train_pedestal, bad_dark, N_DARK, progress=False)
    assert len(messages) == 1
    assert messages[0].startswith("2 pixels in 2 of 20 frames of ")
    assert "dark frames" in messages[0] and "--calibration" in messages[0]
    _, messages = caught(find_clusters, frames, bad_dark, n_pedestal=N_DARK, progress=False)
    assert len(messages) == 1 and "dark frames" in messages[0]


@pytest.mark.gpu
@pytest.mark.parametrize("where", ["host", "device"])
def test_the_cuda_finder_counts_as_the_cpu(run, where):
    # The kernel counts host and device frames alike; chunks of 3 frames put the switched
    # pixels into two of them.
    import cupy

    dark, _, switched = run
    finder = CudaFinder(train_pedestal(dark, N_DARK, progress=False), chunk_frames=3)
    frames = switched if where == "host" else cupy.asarray(switched)
    _, messages = caught(finder.find, frames, progress=False)
    assert len(messages) == 1 and messages[0].startswith("4 pixels in 2 of 8 frames of ")
    finder = CudaFinder(train_pedestal(dark, N_DARK, progress=False), chunk_frames=3)
    _, messages = caught(finder.spectrum, frames, progress=False)
    assert len(messages) == 1 and messages[0].startswith("4 pixels in 2 of 8 frames")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_cuda_finder_counts_every_switched_pixel(run, dtype):
    # From none to every pixel switched, frame by frame, over chunks of 3 frames: a warp
    # adds its pixels' count once, whether one lane or all have gain bits, the block's
    # threads past the frame's last pixel add nothing, and each count is its own frame's;
    # float64 state sends edge rows with flags, float32 in words (load_next after the halo).
    import cupy

    dark, frames, _ = run
    share = np.linspace(0, 1, len(frames))[:, None, None]
    switched = frames | np.where(np.random.default_rng(5).random(frames.shape) < share,
                                 np.uint16(G1), np.uint16(0))
    per_frame = gain_bits_per_frame(switched)
    assert per_frame[0] == 0 and per_frame[-1] == frames[0].size and len(set(per_frame)) > 4
    finder = CudaFinder(train_pedestal(dark, N_DARK, dtype=dtype, progress=False),
                        chunk_frames=3)
    handed, add = [], finder.gain_bits.add
    finder.gain_bits.add = lambda counts: (handed.append(counts.copy()), add(counts))

    def counted(source):
        handed.clear()
        assert sum(len(b.frame_numbers) for b in finder.find_batches(source)) == len(frames)
        return np.concatenate(handed).tolist()

    for source in (switched, cupy.asarray(switched)):
        assert counted(source) == per_frame.tolist()
        assert finder.gain_bits.counts() == (int(per_frame.sum()), int((per_frame > 0).sum()),
                                             len(frames))
    # A band whose region overflows repeats its chunk, which counts again from zero.
    finder._engine.region_cap = 4
    assert counted(switched) == per_frame.tolist()
    assert finder._engine.region_cap > 4
    # Stopped after the first chunk: the chunk queued behind it is rewound, not counted.
    handed.clear()
    batches = finder.find_batches(switched)
    next(batches)
    batches.close()
    assert np.concatenate(handed).tolist() == per_frame[:3].tolist()
    assert finder.gain_bits.counts() == (int(per_frame[:3].sum()),
                                         int((per_frame[:3] > 0).sum()), 3)


def test_mönch_like_frames_do_not_warn(run):
    dark, frames, _ = run
    result, messages = caught(find_clusters, frames, dark, n_pedestal=N_DARK, progress=False)
    assert messages == [] and result.sizes["cluster"] > 0


def test_with_a_calibration_nothing_warns():
    sim = JungfrauSimulator(JungfrauDetector(frame_shape=(32, 64)),
                            JungfrauBeam(photons_per_frame=10, spots_per_frame=2), seed=1)
    dark, (frames, _) = sim.dark(N_DARK), sim.frames(4)
    assert gain_bits_per_frame(frames).sum() > 0  # the spots switch pixels to G1 and G2
    spec = FinderSpec("frozen", window_dtype="float32", n_pedestal=N_DARK,
                      calibration=sim.calibration)
    result, messages = caught(find_clusters, frames, dark, spec=spec, progress=False)
    assert messages == [] and result.sizes["cluster"] > 0


def test_cli_find_names_the_file_and_the_option(run, tmp_path, capsys):
    dark, _, switched = run
    np.save(tmp_path / "dark.npy", dark)
    np.save(tmp_path / "frames.npy", switched)
    code = main(["find", "--dark", str(tmp_path / "dark.npy"), "--frames",
                 str(tmp_path / "frames.npy"), "--n-pedestal", str(N_DARK),
                 "--out", str(tmp_path / "r.nc"), "--quiet"])
    assert code == 0
    err = capsys.readouterr().err
    assert (f"aare-lab find: GainBitsWarning: 4 pixels in 2 of 8 frames of "
            f"'{tmp_path / 'frames.npy'}' read above 16383") in err
    assert "--calibration FILE" in err


def test_cli_live_warns_for_the_dark_and_the_data_frames(run, tmp_path, capsys):
    dark, _, switched = run
    bad_dark = dark.copy()
    bad_dark[4, 1, 1] = G1 | 100
    with StreamPublisher("tcp://127.0.0.1:0", detector="jungfrau") as publisher:
        def send():
            publisher.send_frames(np.concatenate([bad_dark, switched]))
            publisher.end_acquisition()

        code = live_cli(publisher, send, "--n-dark", str(N_DARK), "--n-pedestal",
                        str(N_DARK), "--stop-at-end", "--out", str(tmp_path))
    assert code == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "GainBitsWarning" in line]
    assert len(lines) == 2
    assert lines[0].startswith("aare-lab live: GainBitsWarning: 1 pixels in 1 of 20 frames of ")
    assert "dark frames" in lines[0]
    assert "4 pixels in 2 of" in lines[1] and "--calibration FILE" in lines[1]


def test_pixels_with_gain_bits_are_counted_per_frame_as_numpy_counts_them():
    """Rows without such a pixel, rows with one at either end, whole frames of them, a
    value one above the ADC's range, and a strided stack."""
    rng = np.random.default_rng(2)
    frames = rng.integers(0, ADC_MASK + 1, (6, 31, 45)).astype(np.uint16)
    frames[1, 0, 0] = frames[1, 30, 44] = ADC_MASK + 1
    frames[2] = rng.integers(ADC_MASK + 1, 1 << 16, (31, 45))
    frames[4, 7, 3:40] = 0xC000
    expected = (frames > ADC_MASK).sum(axis=(1, 2))
    assert expected.tolist()[:3] == [0, 2, 31 * 45] and expected[4] == 37
    np.testing.assert_array_equal(gain_bits_per_frame(frames), expected)
    np.testing.assert_array_equal(gain_bits_per_frame(frames[:, ::2, 1::3]),
                                  (frames[:, ::2, 1::3] > ADC_MASK).sum(axis=(1, 2)))
    assert gain_bits_per_frame(frames[:0]).shape == (0,)
