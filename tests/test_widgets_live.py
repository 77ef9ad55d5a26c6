"""LiveSpectrum: accumulation equals the offline spectrum, redraws stay bounded."""

import threading
import time

import numpy as np
import pytest
from widget_helpers import no_noted_warnings

import aare_lab
from aare_lab.model.binning import integer_edges
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.sources import PacedSource
from aare_lab.widgets import LiveSpectrum
from aare_lab.widgets.loop import wait_until

EDGES = integer_edges(-100, 2000, width=10)


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=(32, 32)), Beam(photons_per_frame=6), seed=5)
    dark = sim.dark(50)
    frames, _ = sim.frames(1000)
    # Ten passes over the same photons keep the simulation cheap; the pedestal moves on.
    return np.tile(frames, (10, 1, 1)), dark


def offline_counts(frames, dark, **spec):
    result = aare_lab.find_clusters(frames, dark, spec=FinderSpec(n_pedestal=50, **spec),
                                    progress=False)
    return np.histogram(result["energy"].to_numpy(), bins=EDGES)[0]


def test_ten_thousand_frames_redraw_a_bounded_number_of_times(run, interactive):
    frames, dark = run
    live = LiveSpectrum(frames, dark, spec=FinderSpec("serial"), bins=EDGES,
                        chunk_frames=50, interactive=interactive, max_hz=5)
    live.wait_finished(timeout=300)
    assert live.frames_processed == len(frames)
    np.testing.assert_array_equal(live.spectrum.to_numpy(),
                                  offline_counts(frames, dark, finder="serial"))
    # 200 chunks, but at most 5 redraws a second (plus the final one).
    elapsed = live.pump.ticks / 5
    assert live.pump.redraws <= 5 * max(elapsed, 1) + 2
    assert live.pump.redraws < 200
    view = live._view
    np.testing.assert_array_equal(view.artists["spectrum:serial"].get_data().values,
                                  live.spectrum.to_numpy())
    assert live.latest.fits is not None
    assert "frames processed" in live.stats.value and "peak" in live.stats.value
    summary = live.summary()
    assert summary.startswith(f"{len(frames):,} frames processed (")
    assert "\npeak " in summary and "<" not in summary and "finished" in summary
    live.log_scale.value = False
    live.wait()
    top = int(live.spectrum.max())
    assert view.ax.get_yscale() == "linear" and view.ax.get_ylim() == (0.0, 1.08 * top)
    live.close()


def test_lines_fit_the_kalpha_kbeta_doublet_and_say_so(run):
    frames, dark = run
    with pytest.raises(ValueError, match="lines must be the Kα and Kβ energies"):
        LiveSpectrum(frames, dark, spec=FinderSpec("frozen"), lines=(8.90, 8.05),
                     autostart=False)
    live = LiveSpectrum(frames[:3000], dark, spec=FinderSpec("frozen"), bins=EDGES,
                        gain=40.0, lines=Beam().lines, interactive=False)
    live.wait_finished(timeout=300)
    fits = live.latest.fits
    assert float(fits["alpha_line"][0]) == 8.05 and float(fits["beta_line"][0]) == 8.90
    assert float(fits["position"][0]) == pytest.approx(40 * 8.05, rel=0.01)
    summary = live.summary()
    # One wording in the stats line and the figure's corner: Kα, its FWHM and the ratio.
    line = summary.splitlines()[1]
    assert line.startswith("Kα 8.0") and " keV, FWHM 0." in line and ", Kβ/Kα 0." in line
    fit_text = line.removesuffix(" — finished")
    assert live._view.artists["annotation:frozen"].get_text() == f"frozen: {fit_text}"
    live.close()


def test_a_parameter_change_resets_the_spectrum_explicitly(run):
    frames, dark = run
    live = LiveSpectrum(frames[:1000], dark, spec=FinderSpec("frozen"), bins=EDGES,
                        chunk_frames=50, interactive=False, max_hz=20, autostart=False)
    live.pause()          # the run starts paused: its first chunk waits
    live.start()
    live.set(n_sigma=4.0)
    live.wait()
    assert live.spec.n_sigma == 4.0
    live.resume()
    live.wait_finished(timeout=300)
    # The reset came before the first chunk was taken: the whole run is at 4σ.
    assert live.frames_processed == 1000
    np.testing.assert_array_equal(live.spectrum.to_numpy(),
                                  offline_counts(frames[:1000], dark, n_sigma=4.0))
    assert live.latest.spec.n_sigma == 4.0
    live.close()


def test_reset_empties_and_stop_keeps_the_spectrum(run):
    frames, dark = run
    live = LiveSpectrum(PacedSource(frames, rate=2000, chunk_frames=50, repeat=True), dark,
                        spec=FinderSpec("serial"), bins=EDGES, interactive=False, max_hz=20)
    wait_until(live.ui, lambda: live.frames_processed >= 500, timeout=60)
    before = live.frames_processed
    live.reset()
    # The first snapshot after the reset counts from zero again.
    wait_until(live.ui, lambda: 0 < live.frames_processed < before, timeout=60)
    # Paced at 2000 frames/s, the finder alone is faster: it keeps up.
    latest = live.latest
    assert latest.finder_rate > 2000 * 1.2
    assert f"the finder alone {latest.finder_rate:,.0f} frames/s" in live.stats.value
    live.stop()
    live.wait()
    assert not live.running
    shown = live.spectrum.to_numpy()
    assert shown.sum() > 0
    np.testing.assert_array_equal(live._view.artists["spectrum:serial"].get_data().values,
                                  shown)
    live.close()


def test_a_slow_consumer_drops_whole_chunks_and_counts_them(run):
    frames, dark = run
    source = PacedSource(frames[:2000], rate=100_000, chunk_frames=50, queue_chunks=2)
    live = LiveSpectrum(source, dark, spec=FinderSpec("serial", cluster_size="9x9"),
                        bins=EDGES, chunk_frames=50, interactive=False, max_hz=20)
    live.wait_finished(timeout=300)
    assert live.frames_dropped > 0
    assert live.frames_dropped % 50 == 0
    assert live.frames_processed + live.frames_dropped == 2000
    assert "dropped" in live.stats.value
    live.close()


def test_a_live_stream_is_read_in_its_own_chunks_and_the_repr_says_where_the_run_is(run):
    frames, dark = run
    live = LiveSpectrum(PacedSource(frames[:300], rate=5000, chunk_frames=30), dark,
                        spec=FinderSpec("frozen"), bins=EDGES, chunk_frames=64,
                        interactive=False, max_hz=20, autostart=False)
    seen = []
    deliver = live._deliver
    live._deliver = lambda snapshot: (seen.append(snapshot.frames_processed),
                                      deliver(snapshot))
    assert repr(live) == "LiveSpectrum(frozen, nσ=5, 3x3)"
    live.start()
    live.wait_finished(timeout=120)
    # The stream's 30 frames per chunk, not the widget's 64 (see chunk_frames).
    assert seen and all(n % 30 == 0 for n in seen)
    assert live.frames_processed + live.frames_dropped == 300
    text = repr(live)
    assert text.startswith("LiveSpectrum(frozen, nσ=5, 3x3; end of the source; ")
    assert f"{live.frames_processed:,} frames processed" in text and "\n" not in text
    assert text.endswith("— finished)")
    assert "application/vnd.jupyter.widget-view+json" in live._repr_mimebundle_()
    live.close()


def test_a_source_that_cannot_be_opened_is_an_error():
    with pytest.raises((ValueError, FileNotFoundError, OSError), match="nothing.npy"):
        LiveSpectrum("nothing.npy", np.zeros((5, 4, 4), np.uint16))


def test_a_failing_finder_shows_a_message(run):
    frames, dark = run
    live = LiveSpectrum(frames[:100], dark[:, :16, :16], spec=FinderSpec("frozen"),
                        bins=EDGES, interactive=False, max_hz=20)
    live.wait_finished(timeout=60)
    assert live.error is not None and "32x32" in live.error
    live.close()


def test_truncation_is_counted_and_shown(run):
    frames, dark = run
    live = LiveSpectrum(frames[:500], dark, spec=FinderSpec("serial", max_clusters_per_frame=3),
                        bins=EDGES, chunk_frames=50, interactive=False, max_hz=20)
    live.wait_finished(timeout=120)
    offline = aare_lab.find_clusters(frames[:500], dark, progress=False,
                                     spec=FinderSpec("serial", n_pedestal=50))
    expected = int((offline["n_found"] > 3).sum())
    assert expected > 0
    assert live.latest.frames_truncated == expected
    assert f"{expected:,}</b> frames truncated at max_clusters_per_frame=3" in live.stats.value
    live.close()


def test_a_failed_run_leaves_no_thread_behind(run):
    frames, dark = run
    source = PacedSource(frames[:500], rate=5000, chunk_frames=50, repeat=True)
    live = LiveSpectrum(source, dark[:, :16, :16], spec=FinderSpec("serial"), bins=EDGES,
                        interactive=False, max_hz=20)
    live.wait_finished(timeout=60)
    assert live.error is not None
    deadline = time.monotonic() + 5
    names = {"aare_lab-LiveSpectrum", "aare_lab-LiveSpectrum-reader", "aare_lab-paced-source"}
    while time.monotonic() < deadline and names & {t.name for t in threading.enumerate()}:
        time.sleep(0.05)
    assert not names & {t.name for t in threading.enumerate()}
    live.close()


def test_gain_bits_are_a_note_from_the_first_chunk_that_has_them(run):
    frames, dark = run
    switched = frames[:300].copy()
    switched[120, 5, 5] = 0x4000 | 9000
    live = LiveSpectrum(switched, dark, spec=FinderSpec("frozen"), bins=EDGES, chunk_frames=50,
                        interactive=False, max_hz=20, autostart=False)
    shown = []
    deliver = live._deliver
    live._deliver = lambda snapshot: (shown.append((snapshot.frames_processed, live.notes)),
                                      deliver(snapshot))
    with no_noted_warnings():
        live.start()
        live.wait_finished(timeout=120)
    (note,) = live.notes
    assert note.startswith("1 pixels in 1 of 50 frames of ") and "--calibration" in note
    # The note is handed over with the snapshots, first: on screen no later than its chunk.
    assert all(notes == (note,) for processed, notes in shown if processed >= 150)
    assert "⚠ 1 pixels in 1 of 50 frames" in live.notes_line.widget.value
    assert repr(live).endswith(f"; {note})")
    live.close()


def test_illuminated_dark_frames_are_a_note(run):
    frames, _ = run
    live = LiveSpectrum(frames[:100], frames[:50], spec=FinderSpec("frozen"), bins=EDGES,
                        chunk_frames=50, interactive=False, max_hz=20, autostart=False)
    with no_noted_warnings():
        live.start()
        live.wait_finished(timeout=120)
    (note,) = (n for n in live.notes if "photon hits in the dark frames" in n)
    assert "the dark frames held photons" in note
    assert "⚠ " in live.notes_line.widget.value and "photon hits" in live.notes_line.widget.value
    live.close()


def test_the_dark_frames_are_notes_and_follow_n_sigma(run):
    frames, dark = run
    few = dark[:5].copy()
    few[2, 1, 1] = 0xC000 | 100
    live = LiveSpectrum(frames[:100], few, spec=FinderSpec("frozen"), bins=EDGES,
                        chunk_frames=50, interactive=False, max_hz=20, autostart=False)
    live.pause()
    with no_noted_warnings():
        live.start()
        wait_until(live.ui, lambda: len(live.notes) == 2, timeout=60)
        gain_bits, at_5 = live.notes
        live.set(n_sigma=6.0)
        live.resume()
        live.wait_finished(timeout=120)
    assert gain_bits.startswith("1 pixels in 1 of 5 frames of ") and "dark frames" in gain_bits
    assert at_5.startswith("the noise estimated from 5 dark frames (n_pedestal=5)")
    assert " at 5 sigma " in at_5
    assert live.notes[0] == gain_bits and " at 6 sigma " in live.notes[1]
    live.close()

