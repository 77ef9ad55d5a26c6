"""The widgets on the GPU: what they show equals the frozen CPU finder's results."""

import numpy as np
import pytest

import aare_lab
from aare_lab.model.binning import integer_edges
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.sources import PacedSource
from aare_lab.widgets import FinderControls, LiveSpectrum

pytestmark = pytest.mark.gpu
EDGES = integer_edges(0, 999, width=10)


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=(64, 64)), Beam(photons_per_frame=60), seed=11)
    dark = sim.dark(100)
    frames, _ = sim.frames(600)
    return frames, dark


def frozen(frames, dark, **changes):
    spec = FinderSpec("frozen", n_pedestal=100, **changes)
    return aare_lab.find_clusters(frames, dark, spec=spec, progress=False)


def test_finder_controls_on_the_gpu_equal_the_frozen_finder(run):
    frames, dark = run
    controls = FinderControls(frames, dark, spec=FinderSpec("cuda", n_pedestal=100),
                              interactive=False, max_hz=50)
    controls.wait()
    for n_sigma in (4.0, 6.0, 5.0):  # re-finds from the device snapshot, reconfigured
        controls.set(n_sigma=n_sigma)
        controls.wait()
        assert controls.error is None, controls.error
        expected = frozen(frames, dark, n_sigma=n_sigma)
        result = controls.result
        assert result.attrs["finder"] == "cuda"
        for name in ("n_found", "y", "x", "window"):
            np.testing.assert_array_equal(result[name], expected[name])
    controls.close()


def test_spectrum_only_controls_on_the_gpu(run):
    frames, dark = run
    controls = FinderControls(frames, dark, spec=FinderSpec("cuda", n_pedestal=100),
                              clusters=False, bins=EDGES, interactive=False, max_hz=50)
    controls.wait()
    controls.set(n_sigma=4.0)
    controls.wait()
    expected = frozen(frames, dark, n_sigma=4.0)
    counts = np.histogram(expected["energy"].to_numpy(), bins=EDGES)[0]
    np.testing.assert_array_equal(controls.outcome.spectrum.to_numpy(), counts)
    assert controls.outcome.spectrum.attrs["outside"] == expected.sizes["cluster"] - counts.sum()
    controls.close()


def test_live_spectrum_on_the_gpu_equals_the_offline_spectrum(run):
    frames, dark = run
    # The consumer thread is the first to use CUDA in its finder (a context on a new thread).
    live = LiveSpectrum(PacedSource(frames, rate=3000, chunk_frames=100, queue_chunks=16),
                        dark, spec=FinderSpec("cuda", n_pedestal=100), bins=EDGES,
                        chunk_frames=100, interactive=False, max_hz=20)
    live.wait_finished(timeout=120)
    assert live.error is None, live.error
    assert live.frames_processed + live.frames_dropped == len(frames)
    assert live.frames_dropped == 0
    expected = frozen(frames, dark)
    counts = np.histogram(expected["energy"].to_numpy(), bins=EDGES)[0]
    np.testing.assert_array_equal(live.spectrum.to_numpy(), counts)
    assert live.spectrum.attrs["outside"] == expected.sizes["cluster"] - counts.sum()
    live.close()
