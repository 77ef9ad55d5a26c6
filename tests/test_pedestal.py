"""The pedestal arithmetic of docs/algorithm.md: training, centring, EMA updates, noise modes."""

import numpy as np
import pytest
from reference import RefPedestal

from aare_lab import Pedestal, PedestalNotReady


def darks(rng, n, shape=(6, 5), level=3000.0, sigma=4.0):
    return np.rint(rng.normal(level, sigma, (n, *shape))).astype(np.uint16)


def test_training_mean_and_rms_are_the_plain_float64_statistics():
    rng = np.random.default_rng(0)
    dark = darks(rng, 10)
    ped = Pedestal(dark.shape[1:], 10)
    for k, frame in enumerate(dark[:9]):
        ped.push_dark(frame)
        assert not ped.ready and ped.n_frames == k + 1
    x = dark[:9].astype(np.float64)
    np.testing.assert_allclose(ped.mean, x.mean(0), rtol=1e-15)
    np.testing.assert_allclose(ped.rms, x.std(0), rtol=1e-9)
    ped.push_dark(dark[9])
    assert ped.ready
    x = dark.astype(np.float64)
    np.testing.assert_array_equal(ped.mean, x.sum(0) / 10)
    var = (x * x).sum(0) / 10 - (x.sum(0) / 10) ** 2
    np.testing.assert_array_equal(ped.rms, np.sqrt(np.maximum(var, 0)))


def test_not_ready_message_counts_the_frames():
    ped = Pedestal((2, 2), 1000)
    ped.push_dark(np.zeros((999, 2, 2), np.uint16))
    with pytest.raises(PedestalNotReady, match="999 of 1000 dark frames pushed; push 1 more"):
        ped.require_ready()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("noise", ["running", "fixed"])
def test_state_follows_the_transcription_bit_for_bit(dtype, noise):
    rng = np.random.default_rng(1)
    dark = darks(rng, 12, (4, 3))
    ped = Pedestal((4, 3), 5, dtype, noise)
    ref = RefPedestal((4, 3), 5, dtype, noise)
    ped.push_dark(dark)
    for frame in dark:
        ref.push_dark(frame.tolist())
    for key, value in ref.state().items():
        np.testing.assert_array_equal(ped.state()[key], value, err_msg=key)
    expected_rms = np.array([[ref.rms(i, j) for j in range(3)] for i in range(4)])
    np.testing.assert_array_equal(ped.rms, expected_rms)
    assert ped.rms.dtype == np.dtype(dtype)


def test_float32_state_is_centred_on_the_rounded_mean():
    ped = Pedestal((1, 3), 2, "float32")
    ped.push_dark(np.array([[[1000, 2001, 7]], [[1001, 2002, 8]]], np.uint16))
    # means 1000.5, 2001.5, 7.5 round half away from zero to 1001, 2002, 8
    np.testing.assert_array_equal(ped.state()["off"], [[1001, 2002, 8]])
    np.testing.assert_array_equal(ped.state()["s"], [[-1, -1, -1]])
    np.testing.assert_array_equal(ped.state()["s2"], [[1, 1, 1]])
    np.testing.assert_array_equal(ped.mean, [[1000.5, 2001.5, 7.5]])
    np.testing.assert_array_equal(ped.rms, [[0.5, 0.5, 0.5]])


def test_float32_centring_avoids_cancellation_at_high_pedestals():
    rng = np.random.default_rng(2)
    dark = darks(rng, 1200, (8, 8), level=12000.0, sigma=2.0)
    f64 = Pedestal((8, 8), 1000)
    f32 = Pedestal((8, 8), 1000, "float32")
    f64.push_dark(dark)
    f32.push_dark(dark)
    # A naive float32 E[x^2] - mean^2 at 12000 ADU has an error of ~ 12000^2 * 6e-8 = 9 ADU^2,
    # more than twice the variance; the centred state is accurate to ~1e-6 relative.
    np.testing.assert_allclose(f32.rms, f64.rms, rtol=1e-4)
    np.testing.assert_allclose(f32.mean, f64.mean, rtol=1e-7)
    assert (f32.rms > 1).all()


def test_ema_update_moves_the_mean_by_one_nth():
    ped = Pedestal((1, 1), 4)
    ped.push_dark(np.full((4, 1, 1), 100, np.uint16))
    ped.push_dark(np.full((1, 1, 1), 104, np.uint16))
    assert ped.mean[0, 0] == 101.0
    assert ped.n_frames == 5


def test_fixed_noise_keeps_the_training_rms():
    rng = np.random.default_rng(3)
    dark = darks(rng, 8)
    running = Pedestal(dark.shape[1:], 4, noise="running")
    fixed = Pedestal(dark.shape[1:], 4, noise="fixed")
    running.push_dark(dark[:4])
    fixed.push_dark(dark[:4])
    trained = fixed.rms
    np.testing.assert_array_equal(trained, running.rms)
    loud = np.rint(rng.normal(3000, 40, (4, *dark.shape[1:]))).astype(np.uint16)
    running.push_dark(loud)
    fixed.push_dark(loud)
    np.testing.assert_array_equal(fixed.rms, trained)
    assert (running.rms > trained).mean() > 0.9
    np.testing.assert_array_equal(fixed.mean, running.mean)


def test_copy_is_independent_and_snapshot_is_a_copy():
    ped = Pedestal((2, 2), 1)
    ped.push_dark(np.full((1, 2, 2), 50, np.uint16))
    twin = ped.copy()
    snap = ped.snapshot()
    ped.push_dark(np.full((1, 2, 2), 60, np.uint16))
    assert twin.mean[0, 0] == 50 and snap.mean[0, 0] == 50 and snap.n_frames == 1
    assert ped.mean[0, 0] == 60
    snap.mean[0, 0] = -1
    assert ped.mean[0, 0] == 60


@pytest.mark.parametrize("args, error, message", [
    (((4,), 10), ValueError, "frame_shape"),
    (((0, 4), 10), ValueError, "frame_shape"),
    (((4, 4), 0), ValueError, "n_pedestal"),
    (((4, 4), 2.5), ValueError, "n_pedestal"),
    (((4, 4), 10, "int16"), ValueError, "dtype"),
    (((4, 4), 10, "float64", "sliding"), ValueError, "noise"),
])
def test_bad_configuration_is_refused(args, error, message):
    with pytest.raises(error, match=message):
        Pedestal(*args)


def test_bad_dark_frames_are_refused():
    ped = Pedestal((4, 4), 2)
    with pytest.raises(TypeError, match="dark frames must be uint16"):
        ped.push_dark(np.zeros((1, 4, 4), np.int32))
    with pytest.raises(ValueError, match="4x5"):
        ped.push_dark(np.zeros((1, 4, 5), np.uint16))
    assert ped.n_frames == 0


def test_push_dark_takes_what_find_clusters_takes(tmp_path):
    """A file or a FrameSource, as find_clusters' dark frames (it once said "got dtype
    object" for a source of a uint16 file)."""
    from aare_lab.sources import open_source

    dark = np.random.default_rng(3).normal(1000, 5, (7, 6, 5)).round().astype(np.uint16)
    np.save(tmp_path / "dark.npy", dark)
    expected = Pedestal((6, 5), 5)
    expected.push_dark(dark)
    for given in (open_source(tmp_path / "dark.npy"), tmp_path / "dark.npy",
                  str(tmp_path / "dark.npy")):
        pedestal = Pedestal((6, 5), 5)
        pedestal.push_dark(given)
        assert pedestal.n_frames == 7
        for name, value in expected.state().items():
            np.testing.assert_array_equal(pedestal.state()[name], value)
    with pytest.raises(ValueError, match=r"dark frames of '.*dark.npy' are 6x5 \(ny x nx\) "
                                         r"but the pedestal is 5x6"):
        Pedestal((5, 6), 5).push_dark(tmp_path / "dark.npy")
