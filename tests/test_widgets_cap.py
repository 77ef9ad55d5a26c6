"""CapTuner driven from Python, with the static PNG host and with the ipympl canvas."""

import threading
import warnings

import numpy as np
import pytest
from widget_helpers import browser_draw, in_thread, record_threads

import aare_lab
from aare_lab.analysis.caps import buffer_bytes_per_frame
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.widgets import CapTuner
from aare_lab.widgets.cap_tuner import recommend_cap, tidy_up


@pytest.fixture(scope="module")
def run():
    """An uncapped frozen result on 40 small simulated frames, and its trained pedestal."""
    sim = Simulator(Detector(frame_shape=(64, 64)), Beam(photons_per_frame=60), seed=0)
    dark = sim.dark(100)
    frames, _ = sim.frames(40)
    pedestal = aare_lab.Pedestal((64, 64), n_pedestal=100)
    pedestal.push_dark(dark)
    result = aare_lab.FrozenFinder(pedestal.copy(), n_sigma=5).find(frames, progress=False)
    return result, pedestal, frames


@pytest.fixture
def tuner_of(interactive):
    made = []

    def make(data, **kwargs):
        tuner = CapTuner(data, interactive=interactive, **kwargs)
        made.append(tuner)
        tuner.wait()
        browser_draw(tuner.host)
        tuner.wait()
        return tuner

    yield make
    for tuner in made:
        tuner.close()


def by_hand(n_found, cap):
    return int(np.sum(n_found > cap)), int(np.sum(np.maximum(n_found - cap, 0)))


def test_truncated_counts_equal_a_count_by_hand(run, tuner_of):
    result, _, _ = run
    n_found = result["n_found"].to_numpy()
    tuner = tuner_of(result)
    assert tuner.error is None
    for cap in (int(np.median(n_found)), int(n_found.min()), int(n_found.max()), 1, 45):
        tuner.cap = cap
        tuner.wait()
        a = tuner.report.attrs
        assert tuner.cap == a["cap"] == cap
        assert (a["frames_truncated"], a["clusters_dropped"]) == by_hand(n_found, cap)
        assert a["clusters"] == int(n_found.sum()) and a["frames"] == len(n_found)
        assert tuner.report["truncated"].to_numpy().tolist() == (n_found > cap).tolist()
        frames, dropped = by_hand(n_found, cap)
        assert f"{frames:,} of {len(n_found):,}" in tuner.table.value
        assert f"{dropped:,} of {int(n_found.sum()):,}" in tuner.table.value
        # The memory cost at the result's window dtype and cluster size (3x3 int32).
        assert a["bytes_per_frame"] == buffer_bytes_per_frame(cap, "3x3", "int32")
        assert a["bytes_per_second"] == a["bytes_per_frame"] * 1000.0
        assert a["bytes_per_1000_frames"] == 1000 * a["bytes_per_frame"]
        # The histogram bars hold every frame.
        assert tuner.view.artists["histogram"].get_data().values.sum() == len(n_found)


def test_moving_the_cap_updates_the_same_artists(run, tuner_of):
    result, _, _ = run
    tuner = tuner_of(result)
    view, line = tuner.view, tuner.view.artists["cap"]
    annotation, shaded = tuner.view.artists["annotation"], tuner.view.artists["truncated"]
    redraws = tuner.pump.redraws
    tuner.slider.value = 50
    tuner.wait()
    assert tuner.view is view and tuner.view.artists["cap"] is line
    assert tuner.view.artists["truncated"] is shaded
    assert shaded.get_data().values.sum() == tuner.report.attrs["frames_truncated"] > 0
    assert list(line.get_xdata()) == [50, 50]
    assert tuner.cap_box.value == 50
    assert tuner.view.artists["annotation"] is annotation
    assert list(tuner.view.ax.texts) == [annotation]
    assert "0 of 40 frames" not in annotation.get_text()  # cap 50 truncates some
    assert tuner.pump.redraws == redraws + 1
    assert list(tuner.view.ax.lines) == [line]


def test_counts_array_and_dtype_cost(tuner_of):
    counts = np.array([0, 3, 5, 5, 10])
    tuner = tuner_of(counts, cap=4, cluster_size="5x5", window_dtype="float64",
                     frame_rate=2000)
    a = tuner.report.attrs
    assert (a["frames_truncated"], a["clusters_dropped"]) == by_hand(counts, 4) == (3, 8)
    assert a["bytes_per_frame"] == 4 * (25 * 8 + 16) + 16
    costs = tuner.costs()
    assert costs["bytes_per_second"] == a["bytes_per_frame"] * 2000
    # Kept on average: min(n, 4) = 0, 3, 4, 4, 4 → 3 clusters per frame.
    assert costs["kept_bytes_per_second"] == (3 * (25 * 8 + 16) + 16) * 2000


def test_repr_is_the_cap_what_it_truncates_and_the_recommendation(tuner_of):
    tuner = tuner_of(np.array([0, 3, 5, 5, 10]), cap=4)
    assert repr(tuner) == ("CapTuner(cap 4: 3 of 5 frames truncated, 8 of 23 clusters "
                           "dropped; 224 B per frame; recommended 12)")
    tuner.cap = 0
    tuner.wait()
    assert repr(tuner).startswith("CapTuner(cap 4: 3 of 5 frames truncated")
    assert "; error: cap must be a positive integer, got 0" in repr(tuner)
    assert "application/vnd.jupyter.widget-view+json" in tuner._repr_mimebundle_()


def test_recommended_cap_and_button(run, tuner_of):
    result, _, _ = run
    n_found = result["n_found"].to_numpy()
    tuner = tuner_of(result, margin=0.25)
    expected = tidy_up(n_found.max() * 1.25)
    assert tuner.recommended == expected == recommend_cap(n_found, 0.25)
    assert tuner.cap == expected and tuner.report.attrs["frames_truncated"] == 0
    tuner.cap = 10
    tuner.wait()
    assert tuner.cap == 10
    tuner.use_recommended.click()
    tuner.wait()
    assert tuner.cap == tuner.slider.value == tuner.cap_box.value == expected
    assert tuner.report.attrs["cap"] == expected
    assert f"{expected:,}" in tuner.use_recommended.description


def test_recommendation_rule():
    assert [tidy_up(v) for v in (0, 1, 7, 87, 123, 1001, 2875.2, 9999)] == \
        [1, 1, 7, 87, 130, 1100, 2900, 10000]
    assert recommend_cap([1800, 2100, 2396]) == 2900           # 2396 × 1.2 = 2875.2
    assert recommend_cap(np.arange(101), margin=0, quantile=0.9) == 90
    assert recommend_cap([0, 0]) == 1


def test_a_truncated_result_is_refused(run):
    _, pedestal, frames = run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", aare_lab.TruncationWarning)
        capped = aare_lab.FrozenFinder(pedestal.copy(), n_sigma=5,
                                       max_clusters_per_frame=50).find(frames, progress=False)
    with pytest.raises(ValueError, match=r"truncated.*max_clusters_per_frame=50.*"
                                         r"max_clusters_per_frame=None"):
        CapTuner(capped, interactive=False)
    # Its counts alone are fine.
    tuner = CapTuner(capped["n_found"], interactive=False)
    tuner.wait()
    assert tuner.report.attrs["max_count"] == int(capped["n_found"].max())
    tuner.close()


def test_a_capped_result_that_truncated_nothing_is_accepted(run, tuner_of):
    _, pedestal, frames = run
    capped = aare_lab.FrozenFinder(pedestal.copy(), n_sigma=5,
                                   max_clusters_per_frame=500).find(frames, progress=False)
    assert tuner_of(capped).error is None


@pytest.mark.parametrize("bad", [0, -3])
def test_a_bad_cap_shows_an_error_and_keeps_the_last_report(run, tuner_of, bad):
    result, _, _ = run
    tuner = tuner_of(result, cap=50)
    report, redraws = tuner.report, tuner.pump.redraws
    line = list(tuner.view.artists["cap"].get_xdata())
    tuner.cap = bad
    tuner.wait()
    assert "cap must be a positive integer" in tuner.error
    assert "⚠" in tuner.status.widget.value
    assert tuner.report is report and tuner.cap == 50
    assert list(tuner.view.artists["cap"].get_xdata()) == line == [50, 50]
    assert tuner.pump.redraws == redraws
    # A good value clears the error.
    tuner.cap = 55
    tuner.wait()
    assert tuner.error is None and tuner.report.attrs["cap"] == 55


def test_bad_arguments_are_refused_at_construction():
    with pytest.raises(ValueError, match="cap must be a positive integer"):
        CapTuner([1, 2, 3], cap=0, interactive=False)
    with pytest.raises(ValueError, match="margin"):
        CapTuner([1, 2, 3], margin=-1, interactive=False)
    with pytest.raises(ValueError, match=">= 0"):
        CapTuner([1, -2, 3], interactive=False)
    with pytest.raises(ValueError, match="empty"):
        CapTuner([], interactive=False)


def test_a_cap_above_the_slider_range_widens_it(tuner_of):
    tuner = tuner_of(np.array([10, 20, 30]))
    tuner.cap = 10 * tuner.slider.max
    tuner.wait()
    assert tuner.slider.value == tuner.cap == tuner.cap_box.value
    assert tuner.slider.max >= tuner.cap


def test_a_slider_set_from_another_thread_draws_on_the_ui_thread(run, tuner_of):
    result, _, _ = run
    n_found = result["n_found"].to_numpy()
    tuner = tuner_of(result)
    ui = threading.get_ident()
    assert tuner.ui.thread_id == ui
    updates = record_threads(tuner.view, "update")
    tables = record_threads(tuner.table_node, "render")
    draws_before = len(tuner.host.draw_threads)
    worker = in_thread(setattr, tuner.slider, "value", 53)
    assert worker != ui
    tuner.wait()
    browser_draw(tuner.host)  # the browser's draw request, from a subshell thread
    tuner.wait()
    assert tuner.cap == 53
    assert tuner.report.attrs["frames_truncated"] == by_hand(n_found, 53)[0]
    assert updates and set(updates) == {ui}
    assert tables and set(tables) == {ui}
    assert len(tuner.host.draw_threads) > draws_before
    assert set(tuner.host.draw_threads) == {ui}
    # Many moves from several threads: all land, still only on the UI thread.
    for value in (44, 45, 46, 47):
        in_thread(setattr, tuner.slider, "value", value)
    tuner.wait()
    browser_draw(tuner.host)
    tuner.wait()
    assert tuner.cap == 47 and tuner.report.attrs["cap"] == 47
    assert set(updates) == {ui} and set(tuner.host.draw_threads) == {ui}
