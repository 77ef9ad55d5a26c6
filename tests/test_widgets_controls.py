"""FinderControls driven from Python, with the ipympl canvas and with a static image."""

import threading

import numpy as np
import pytest
from widget_helpers import no_noted_warnings

import aare_lab
from aare_lab.detector.dark.photons import IlluminatedDarkWarning
from aare_lab.detector.dark.quality import DarkFrameWarning
from aare_lab.model.clipping import clipping_message
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.widgets import FinderControls
from aare_lab.widgets.loop import Job
from aare_lab.widgets.run import FinderRunner


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=(48, 48)), Beam(photons_per_frame=12), seed=3)
    dark = sim.dark(64)
    frames, _ = sim.frames(40)
    return frames, dark


def offline(frames, dark, **spec):
    return aare_lab.find_clusters(frames, dark, spec=FinderSpec(n_pedestal=64, **spec),
                                  progress=False)


def make(run, interactive, **kwargs):
    frames, dark = run
    kwargs.setdefault("spec", FinderSpec("frozen"))
    controls = FinderControls(frames, dark, interactive=interactive, max_hz=50, **kwargs)
    controls.wait()
    return controls


def plotted_counts(controls):
    view = controls._spectrum_view
    (label,) = view.labels
    data = view.artists[f"spectrum:{label}"].get_data()
    return data.values, data.edges


def test_first_run_shows_the_offline_spectrum(run, interactive):
    controls = make(run, interactive)
    expected = offline(*run)
    assert controls.outcome.n_found == int(expected["n_found"].sum())
    values, edges = plotted_counts(controls)
    np.testing.assert_array_equal(values, aare_lab.spectrum(expected, bins=edges).to_numpy())
    assert "frozen" in controls.status.text and "frames/s" in controls.status.text
    controls.close()


def test_repr_is_the_spec_then_the_last_run_in_one_line(run):
    controls = make(run, False)
    n_found = controls.outcome.n_found
    spec5 = "frozen (float64, noise=running), nσ=5, 3x3, no cap"
    assert repr(controls).startswith(f"FinderControls({spec5}; last run: 40 frames in ")
    fit = aare_lab.spectra.peak_fit(controls.outcome.fits, "frozen").summary(1.0, "ADU")
    assert repr(controls).endswith(f"n_found {n_found:,}, n_kept {n_found:,}; {fit})")
    controls.set(n_sigma=4)
    controls.ui.drain()  # the new value reaches the graph: the re-run is submitted
    # While it runs, the old spec is the last run's, not the controls'.
    assert repr(controls).startswith(
        f"FinderControls(running; {spec5.replace('nσ=5', 'nσ=4')}; last run ({spec5}): 40 ")
    controls.wait()
    assert ", nσ=4, 3x3, no cap; last run: 40 frames in " in repr(controls)
    assert "application/vnd.jupyter.widget-view+json" in controls._repr_mimebundle_()
    controls.close()


def test_changing_n_sigma_reruns_and_updates_the_same_artists(run, interactive):
    controls = make(run, interactive)
    stairs = controls._spectrum_view.artists["spectrum:frozen"]
    redraws = controls.pump.redraws
    first_edges = plotted_counts(controls)[1].copy()
    controls.set(n_sigma=3.5)
    controls.wait()
    expected = offline(*run, n_sigma=3.5)
    assert controls.spec.n_sigma == 3.5
    assert controls.outcome.n_found == int(expected["n_found"].sum())
    assert controls._spectrum_view.artists["spectrum:frozen"] is stairs
    values, edges = plotted_counts(controls)
    # The first run's bins stay, so that the two spectra compare bin for bin.
    np.testing.assert_array_equal(edges, first_edges)
    np.testing.assert_array_equal(values, aare_lab.spectrum(expected, bins=edges).to_numpy())
    shown = controls.outcome.spectrum
    assert int(shown.sum()) + shown.attrs["underflow"] + shown.attrs["overflow"] \
        == expected.sizes["cluster"]
    assert controls.pump.redraws > redraws
    # Another cluster size sums other windows: its first run picks its own bins.
    controls.set(cluster_size="5x5")
    controls.wait()
    expected = offline(*run, n_sigma=3.5, cluster_size="5x5")
    values, edges = plotted_counts(controls)
    np.testing.assert_array_equal(values, aare_lab.spectrum(expected).to_numpy())
    assert not np.array_equal(edges, first_edges)
    controls.close()


def test_the_peak_fit_follows_every_run(run, interactive):
    """The doublet fit of each run's spectrum is drawn, written in the figure's corner and
    the repr, in keV with a gain, and follows a change of nσ; a run with too few clusters
    for a peak shows none, without an error."""
    frames, dark = run
    controls = make(run, interactive, gain=40.0, lines=Beam().lines)
    positions = []
    for n_sigma in (5.0, 6.0):
        controls.set(n_sigma=n_sigma)
        controls.wait()
        assert controls.outcome.spec.n_sigma == n_sigma
        # On the bins of the run's spectrum (ADU; the view's are in keV).
        edges = aare_lab.model.results.spectrum_edges(controls.outcome.spectrum)
        shown = aare_lab.spectrum(offline(frames, dark, n_sigma=n_sigma), bins=edges)
        expected = aare_lab.spectra.fit_peaks(shown.expand_dims(finder=["frozen"]),
                                              lines=Beam().lines)
        fits = controls.outcome.fits
        for name in ("position", "fwhm", "beta_ratio", "alpha_line"):
            assert float(fits[name][0]) == pytest.approx(float(expected[name][0]), rel=1e-9)
        summary = aare_lab.spectra.peak_fit(fits, "frozen").summary(1 / 40, "keV")
        assert summary.startswith("Kα 8.") and ", Kβ/Kα " in summary
        view = controls._spectrum_view
        assert view.artists["annotation:frozen"].get_text() == f"frozen: {summary}"
        assert view.artists["fit:frozen"].get_xdata().size > 0
        assert repr(controls).endswith(f"; {summary})")
        positions.append(float(fits["position"][0]))
    assert positions[0] != positions[1]  # 6σ keeps other windows: the fit moved with it
    controls.close()
    few = FinderControls(frames[:2], dark, spec=FinderSpec("frozen"), interactive=False)
    few.wait()
    assert few.error is None and few.outcome.fits is None
    assert few._spectrum_view.artists["annotation:frozen"].get_text() == ""
    few.close()
    with pytest.raises(ValueError, match="lines must be the Kα and Kβ energies"):
        FinderControls(frames, dark, lines=(8.9, 8.05), interactive=False)


def test_every_control_maps_to_the_spec(run, interactive):
    controls = make(run, interactive)
    controls.set(finder="serial", cluster_size="5x5", pedestal_dtype="float32",
                 noise="fixed", max_clusters_per_frame=3)
    controls.wait()
    spec = controls.spec
    assert (spec.finder, spec.cluster_size, spec.pedestal_dtype, spec.noise,
            spec.max_clusters_per_frame) == ("serial", (5, 5), "float32", "fixed", 3)
    expected = offline(*run, finder="serial", cluster_size="5x5", pedestal_dtype="float32",
                       noise="fixed", max_clusters_per_frame=3)
    result = controls.result
    np.testing.assert_array_equal(result["n_kept"], expected["n_kept"])
    np.testing.assert_array_equal(result["window"], expected["window"])
    # Truncation is never silent: the status line says so.
    assert (expected["n_found"] > 3).any()
    assert "TRUNCATED" in controls.status.text
    controls.close()


@pytest.mark.parametrize("control, value, message", [
    ("cluster_size", "4x4", "even"),
    ("cluster_size", "0x0", "cluster"),
    ("max_clusters_per_frame", 0, "positive integer"),
    ("n_sigma", -1.0, "nσ"),
])
def test_bad_input_shows_a_message_and_keeps_the_last_result(run, interactive, control, value,
                                                             message):
    controls = make(run, interactive)
    before = controls.outcome
    values_before = plotted_counts(controls)[0].copy()
    controls.set(**{control: value})
    controls.wait()
    assert controls.error is not None and message in controls.error
    assert controls.outcome is before
    np.testing.assert_array_equal(plotted_counts(controls)[0], values_before)
    # The controls show what runs again, so the next good change runs what they show.
    assert controls.spec == before.spec
    assert (controls.cluster_size.value, controls.n_sigma.value, controls.cap_enabled.value) \
        == ("3x3", 5.0, False)
    controls.set(n_sigma=4.0)
    controls.wait()
    assert controls.error is None and controls.spec == before.spec.replace(n_sigma=4.0)
    controls.close()


def test_a_cap_typed_while_the_cap_is_off_waits_for_the_tick(run):
    controls = make(run, False)
    controls.cap.value = 5
    controls.wait()
    assert controls.spec.max_clusters_per_frame is None and controls.error is None
    controls.cap_enabled.value = True
    controls.wait()
    assert controls.spec.max_clusters_per_frame == 5
    controls.close()


def test_a_gpu_finder_without_a_gpu_is_a_message(run):
    if "cuda" in aare_lab.available_finders():
        pytest.skip("this machine has a GPU: the cuda finder runs")
    controls = make(run, False)
    controls.set(finder="cuda")
    controls.wait()
    assert "cuda" in controls.error and "[cuda13]" in controls.error
    assert controls.outcome.spec.finder == "frozen"
    controls.close()


def test_callbacks_from_other_threads_update_figures_on_the_ui_thread(run, interactive):
    controls = make(run, interactive)
    rendered = []
    view = controls._spectrum_view
    update = view.update
    view.update = lambda *a, **k: (rendered.append(threading.get_ident()), update(*a, **k))
    # What a subshell thread does when the browser moves the control.
    threads = [threading.Thread(target=setattr, args=(controls.n_sigma, "value", v))
               for v in (4.0, 4.5, 6.0)]
    for t in threads:
        t.start()
        t.join()
    controls.wait()
    assert controls.spec.n_sigma == 6.0
    assert rendered and set(rendered) == {controls.ui.thread_id}
    assert set(controls.spectrum_host.draw_threads) <= {controls.ui.thread_id}
    controls.close()


def test_a_preview_bounds_the_frames_run(run):
    frames, dark = run
    controls = FinderControls(frames, dark, spec=FinderSpec("frozen"), preview_frames=10,
                              interactive=False, max_hz=50)
    controls.wait()
    assert controls.outcome.frames == 10
    assert controls.result.sizes["frame"] == 10
    controls.close()


# What `find` warns about, a widget's run shows under its status line: its worker's
# warnings would reach nobody. Each test fails if the run still warns.

def test_too_few_dark_frames_are_a_note_in_the_warnings_words(run):
    frames, dark = run
    with no_noted_warnings():
        controls = make((frames, dark[:5]), False)
    (note,) = controls.notes
    assert note.startswith("the noise estimated from 5 dark frames (n_pedestal=5)")
    with pytest.warns(DarkFrameWarning) as warned:
        aare_lab.find_clusters(frames, dark[:5], n_pedestal=5, progress=False)
    assert [str(w.message) for w in warned] == [note]
    shown = controls.notes_line.widget.value
    assert "⚠ the noise estimated from 5 dark frames" in shown and "#b35806" in shown
    assert repr(controls).endswith(f"; {note})")
    controls.close()


def test_gain_bits_are_a_note_naming_the_remedy_after_every_run(run):
    frames, dark = run
    switched = frames.copy()
    switched[2, 3, 4] = switched[7, 30, 30] = 0x4000 | 9000
    with no_noted_warnings():
        controls = make((switched, dark), False)
        first = controls.notes
        controls.set(n_sigma=5.5)
        controls.wait()
    assert controls.spec.n_sigma == 5.5
    assert first == controls.notes and len(first) == 1
    assert first[0].startswith("2 pixels in 2 of 40 frames of ")
    assert "--calibration FILE" in first[0]
    assert "calibration=aare_lab.JungfrauCalibration.load(FILE)" in first[0]
    controls.close()


def test_illuminated_dark_frames_are_a_note_in_the_warnings_words(run):
    frames, _ = run
    with no_noted_warnings():
        controls = make((frames, frames), False)
    (note,) = (n for n in controls.notes if "photon hits in the dark frames" in n)
    assert "the dark frames held photons" in note and "beam off" in note
    with pytest.warns(IlluminatedDarkWarning) as warned:
        aare_lab.train_pedestal(frames, len(frames), progress=False)
    assert [str(w.message) for w in warned] == [note]
    controls.close()


def test_int16_windows_at_their_limits_are_a_note(run):
    # FinderControls refuses int16 windows; its runner reports them like find().
    frames, dark = run
    saturated = frames.copy()
    saturated[1, 10:13, 10:13] = 65535
    runner = FinderRunner(saturated, dark=dark)
    with no_noted_warnings():
        outcome = runner.run(Job(None, None, None), FinderSpec("frozen", window_dtype="int16"))
    message = clipping_message(outcome.result)
    assert "sit at the int16 limits" in message and message in outcome.notes
    assert any(note.startswith("9 pixels in 1 of 40 frames") for note in outcome.notes)

