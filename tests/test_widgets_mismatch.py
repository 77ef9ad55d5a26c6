"""MismatchBrowser driven from Python: the listed sites are the comparison's, the panel
shows the footprints, the explanation is `explain`'s, and every draw is on the UI thread."""

# Tests that are not about the figure host use the ipympl canvas where it is installed:
# without a browser it never renders, which keeps them fast.
import importlib.util

import numpy as np
import pytest
from compare_cases import P1, P1_BIS, P2, R2, run_pair, timing_frames, unit_pedestal
from widget_helpers import browser_draw, in_thread

from aare_lab.analysis.compare import compare
from aare_lab.analysis.explain import explain
from aare_lab.plots.mismatch import _patch, footprints
from aare_lab.widgets import MismatchBrowser

CHEAP = importlib.util.find_spec("ipympl") is not None
SITES = [(0, *P1), (0, *P2), (0, *R2), (0, *P1_BIS), (1, *P1)]


@pytest.fixture(scope="module")
def timing():
    frames = timing_frames()
    serial, frozen = run_pair(frames)
    return frames, {"serial": serial, "frozen": frozen}


def panel_matches_footprints(browser, results):
    """The images of the mismatch panel are the footprints around the shown site."""
    frame, y, x = browser.site
    ny, nx = results["serial"].attrs["frame_shape"]
    half = browser.view.half
    bounds = (*_patch(y, half, int(ny)), *_patch(x, half, int(nx)))
    for label, result in results.items():
        expected, _ = footprints(result, frame, bounds)
        shown = browser.view.artists[f"footprints:{label}"].get_array()
        np.testing.assert_array_equal(np.ma.getmaskarray(shown), np.ma.getmaskarray(expected))
        np.testing.assert_array_equal(shown.filled(-1), expected.filled(-1))


def test_browser_steps_through_the_sites(timing, interactive):
    frames, results = timing
    browser = MismatchBrowser(results, frames=frames, pedestal=unit_pedestal(),
                              interactive=interactive)
    try:
        browser.wait()
        assert browser.error is None
        c = browser.comparison
        assert c.summary() == compare(results["serial"], results["frozen"]).summary()
        assert browser.sites == SITES
        assert browser.site_select.options[4][0] == \
            f"frame 1 ({P1[0]}, {P1[1]}): b_only, isolated, pedestal_diverged"
        assert (browser.index, browser.site) == (0, SITES[0])
        panel_matches_footprints(browser, results)

        # Next, pressed on a subshell thread; the explanation is explain()'s.
        in_thread(browser.next_button.click)
        browser.wait()
        assert (browser.index, browser.site) == (1, SITES[1])
        panel_matches_footprints(browser, results)
        e = browser.explanation
        reference = explain(frames, *SITES[1], results, pedestal=unit_pedestal())
        assert (e.frame, e.y, e.x, e.deciding_test) == (*SITES[1], reference.deciding_test)
        assert e.deciding_test == "local_max"
        for label in results:
            assert e.branch(label) == reference.branch(label)
            margin = e.test(label, "local_max")["margin"]
            assert f"{margin:.6g}" in browser.explanation_html.value
        assert "local max decides" in browser.explanation_html.value

        in_thread(browser.select, 4)
        browser.wait()
        assert browser.site == SITES[4] and browser.explanation.deciding_test == "test1"
        browser.previous()
        browser.wait()
        assert browser.index == 3
        browser_draw(browser.panel_host)
        browser.wait()
        assert browser.panel_host.draw_threads
        assert set(browser.panel_host.draw_threads) == {browser.ui.thread_id}
    finally:
        browser.close()


def test_filters_free_sites_and_bad_input(timing):
    frames, results = timing
    browser = MismatchBrowser(results, frames=frames, pedestal=unit_pedestal(),
                              interactive=CHEAP)
    try:
        browser.wait()
        browser.filter(cause="pedestal_diverged")
        browser.wait()
        assert browser.sites == [SITES[4]] and browser.site == SITES[4]
        browser.filter(cause="all", classification="displaced")
        browser.wait()
        assert browser.sites == [SITES[1], SITES[2]] and browser.index == 0
        # A class no site has: offered while chosen, and nothing to show.
        browser.filter(classification="truncated")
        browser.wait()
        assert browser.error is None and browser.sites == []
        assert browser.classification.value == "truncated"
        assert browser.position.value == "no site passes the filters" and browser.site is None
        browser.filter(classification="displaced")
        browser.wait()
        # A control moved in the browser, on another thread.
        in_thread(setattr, browser.classification, "value", None)
        browser.wait()
        assert len(browser.sites) == 5 and browser.site == SITES[1]

        browser.select(9)
        assert "site 9 is not in the list" in browser.error
        browser.site = (0, 99, 3)
        assert "outside the 12x24 frame" in browser.error
        assert browser.site == SITES[1]
        browser.filter(cause="gremlins")
        assert "cause must be one of" in browser.error

        browser.site = (0, 6, 6)  # not a site: shown and explained all the same
        browser.wait()
        assert browser.index is None and browser.site == (0, 6, 6)
        assert browser.explanation.deciding_test is None
        assert browser.error is None
    finally:
        browser.close()


def test_results_that_cannot_be_compared(timing):
    _, results = timing
    other = run_pair(timing_frames()[:1])[1]
    browser = MismatchBrowser({"serial": results["serial"], "one frame": other},
                              interactive=CHEAP)
    try:
        browser.wait()
        assert "cannot compare serial with one frame" in browser.error
        assert browser.comparison is None and browser.site is None
    finally:
        browser.close()


def test_a_failing_explanation_keeps_the_last_good_view(timing):
    frames, results = timing
    # Frame 1 is missing from the frames given: explaining its site raises on the worker.
    browser = MismatchBrowser(results, frames=frames[:1], pedestal=unit_pedestal(),
                              interactive=CHEAP, prefetch=0)
    try:
        browser.wait()
        good = browser.explanation
        assert good is not None and browser.error is None
        browser.select(4)
        browser.wait()
        assert "frames [1] are not in" in browser.error
        assert browser.site == SITES[4] and browser.explanation is None
        assert "could not explain frame 1" in browser.explanation_html.value
        panel_matches_footprints(browser, results)  # the panel still follows the site
    finally:
        browser.close()


def test_three_results_and_the_pair_selector(timing):
    frames, results = timing
    frozen32 = run_pair(frames, dtypes=("float64", "float32"))[1]
    browser = MismatchBrowser({**results, "frozen32": frozen32}, interactive=CHEAP)
    try:
        browser.wait()
        assert [o[1] for o in browser.pair_selector.options] == [
            ("serial", "frozen"), ("serial", "frozen32"), ("frozen", "frozen32")]
        assert browser.explanation is None  # no frames: nothing to explain
        assert "Give the frames" in browser.explanation_html.value
        browser.pair = ("frozen32", "frozen")
        browser.wait()
        assert browser.comparison.labels == ("frozen", "frozen32")
        assert browser.comparison.sites.sizes["site"] == len(browser.sites)
    finally:
        browser.close()


def test_a_timing_cause_without_branch_maps_is_labelled_assumed(timing):
    _, results = timing
    bare = {label: r.drop_vars("branch_map") for label, r in results.items()}
    for given, label in ((bare, "timing (5, 5 assumed: no branch maps)"),
                         (results, "timing (4)")):
        browser = MismatchBrowser(given, interactive=CHEAP)
        try:
            browser.wait()
            assert dict((value, text) for text, value in browser.cause.options)["timing"] \
                == label
        finally:
            browser.close()


def test_one_sided_sites_are_listed_before_value_differences(timing):
    from compare_cases import PHOTON

    from aare_lab.widgets.mismatch_browser import site_list

    _, results = timing
    frozen = results["frozen"].copy(deep=True)
    at = np.flatnonzero((frozen["frame_number"] == 0) & (frozen["y"] == PHOTON[0])
                        & (frozen["x"] == PHOTON[1]))[0]
    frozen["window"][at, 0, 0] = frozen["window"][at, 0, 0] + 3
    c = compare(results["serial"], frozen, labels=["serial", "frozen"])
    kinds = c.sites["kind"].to_numpy()
    listing = site_list(c)
    assert listing.sites == SITES + [(0, *PHOTON)]
    one_sided = np.flatnonzero(kinds != kinds[listing.positions[-1]])
    assert list(listing.positions[:5]) == list(one_sided)
    # The kind is not repeated as the classification.
    assert listing.texts[-1].startswith(f"frame 0 ({PHOTON[0]}, {PHOTON[1]}): value_diff, ")
    assert listing.texts[-1].count("value_diff") == 1
