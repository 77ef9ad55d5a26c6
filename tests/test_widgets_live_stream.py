"""LiveSpectrum on the detector's stream: a `StreamSource` fed by a `StreamPublisher` on
127.0.0.1; the spectrum equals the offline one and the status line shows the stream's counts."""

import time

import numpy as np
import pytest

import aare_lab
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.sources import StreamSource
from aare_lab.stream.publisher import StreamPublisher
from aare_lab.widgets import LiveSpectrum


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=(32, 32)), Beam(photons_per_frame=6), seed=6)
    dark = sim.dark(40)
    frames, _ = sim.frames(200)
    return frames, dark


def test_the_stream_gives_the_offline_spectrum_and_its_counts(run, interactive):
    frames, dark = run
    spec = FinderSpec("frozen", n_pedestal=40)
    # Frame 101 never comes: the stream counts it lost.
    numbers = np.delete(np.arange(1, len(frames) + 2), 100)
    with StreamPublisher("tcp://127.0.0.1:0") as publisher, \
            StreamSource(publisher.endpoints, chunk_frames=32) as source:
        publisher.wait_for_subscribers(timeout=30)
        live = LiveSpectrum(source, dark, spec=spec, interactive=interactive)
        publisher.send_frames(frames, numbers)
        publisher.end_acquisition()
        live.wait_finished(timeout=120)
        stats = source.stats.as_dict()
    assert live.error is None, live.error
    assert live.frames_processed == len(frames)
    assert stats["frames_processed"] == stats["frames_received"] == len(frames)
    assert stats["frames_lost"] == 1
    offline = aare_lab.find_clusters(frames, dark, spec=spec, progress=False)
    np.testing.assert_array_equal(live.spectrum.to_numpy(),
                                  np.histogram(offline["energy"].to_numpy(), live.edges)[0])
    assert "stream: 200 received, 1 lost, 0 incomplete, 0 malformed" in live.stats.value
    live.close()


def test_a_stop_loses_nothing_read_ahead_and_a_restart_begins_with_it(run, interactive):
    """Chunks read ahead (two waiting, one held by the reading thread) while the run is
    paused go back to the stream at the stop; the restarted run processes every frame."""
    frames, dark = run
    spec = FinderSpec("frozen", n_pedestal=40)
    with StreamPublisher("tcp://127.0.0.1:0") as publisher, \
            StreamSource(publisher.endpoints, chunk_frames=32, queue_chunks=16) as source:
        publisher.wait_for_subscribers(timeout=30)
        live = LiveSpectrum(source, dark, spec=spec, interactive=interactive, autostart=False)
        live.pause()
        live.start()
        publisher.send_frames(frames)
        publisher.end_acquisition()
        deadline = time.monotonic() + 60
        while source.stats.frames_yielded < 3 * 32:
            assert time.monotonic() < deadline, source.stats
            time.sleep(0.05)
        time.sleep(0.2)
        read_ahead = source.stats.frames_yielded
        live.stop()
        assert not live.running
        stopped = source.stats
        live.resume()
        live.start()
        live.wait_finished(timeout=120)
        stats = source.stats.as_dict()
    assert read_ahead == 3 * 32 and live.error is None, (read_ahead, live.error)
    assert stopped.frames_yielded == 0 and stopped.frames_processed == 0
    assert live.frames_processed == len(frames)
    assert stats["frames_processed"] == stats["frames_received"] == len(frames)
    offline = aare_lab.find_clusters(frames, dark, spec=spec, progress=False)
    np.testing.assert_array_equal(live.spectrum.to_numpy(),
                                  np.histogram(offline["energy"].to_numpy(), live.edges)[0])
    live.close()
