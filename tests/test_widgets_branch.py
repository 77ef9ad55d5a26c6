"""BranchInspector driven from Python and by simulated canvas events: the branches shown
are the finders' own maps, the explanation names them, and every draw is on the UI thread."""

import importlib.util

import numpy as np
import pytest
from compare_cases import MEAN, P1, P2, run_pair, timing_frames, unit_pedestal
from widget_helpers import browser_draw, in_thread

from aare_lab import Branch
from aare_lab.plots.branchmap import ZOOM_MARGIN
from aare_lab.widgets import BranchInspector

CHEAP = importlib.util.find_spec("ipympl") is not None  # no rendering without a browser


@pytest.fixture(scope="module")
def timing():
    frames = timing_frames()
    serial, frozen = run_pair(frames)
    return frames, {"serial": serial, "frozen": frozen}


def map_code(result, frame, y, x):
    return Branch(int(result["branch_map"].sel(branch_frame=frame).to_numpy()[y, x]))


def event(host, ax, y, x, kind="button_press"):
    """The browser message of a mouse event over data point (x, y) of ``ax``."""
    dx, dy = ax.transData.transform((x, y))
    return {"type": kind, "x": float(dx), "y": float(host.figure.bbox.height - dy),
            "button": 0, "buttons": 1 if kind == "button_press" else 0, "step": 0,
            "modifiers": [], "guiEvent": {"isTrusted": True}}


def test_a_click_selects_the_pixel_and_explains_it(timing, interactive):
    frames, results = timing
    w = BranchInspector(results, frames=frames, pedestal=unit_pedestal(),
                        interactive=interactive)
    try:
        w.wait()
        assert (w.frame, w.finder, w.diff, w.pixel) == (0, "serial", None, None)
        assert w.error is None
        host = w.host
        browser_draw(host)  # the browser draws the canvas, from another thread
        w.wait()
        if interactive:
            in_thread(host.send_event, event(host, w.view.ax, *P1))
        else:
            in_thread(w.select_pixel, *P1)  # a static figure takes no clicks
        w.wait()
        assert w.pixel == P1
        assert w.branches == {label: map_code(r, 0, *P1) for label, r in results.items()}
        assert w.branches == {"serial": Branch.QUIET_UPDATE, "frozen": Branch.TEST3_STORE}
        e = w.explanation
        assert (e.frame, e.y, e.x) == (0, *P1)
        for label, result in results.items():
            assert e.branch(label) == map_code(result, 0, *P1)
            assert int(e.data["finder_branch"].sel(finder=label)) == map_code(result, 0, *P1)
            assert f"-&gt; {map_code(result, 0, *P1).name}" in w.explanation_html.value
        assert e.deciding_test == "test3"
        # Not a centre of serial: the window is the frame's values around the pixel.
        source, values = w.window
        np.testing.assert_array_equal(values, frames[0, P1[0] - 1:P1[0] + 2, P1[1] - 1:P1[1] + 2])
        assert source == "frame" and "QUIET_UPDATE" in w.pixel_html.value
        w.finder = "frozen"  # a centre of frozen: its cluster window
        w.wait()
        source, values = w.window
        k = np.flatnonzero((results["frozen"]["frame_number"] == 0).to_numpy()
                           & (results["frozen"]["y"] == P1[0]).to_numpy()
                           & (results["frozen"]["x"] == P1[1]).to_numpy())[0]
        np.testing.assert_array_equal(values, results["frozen"]["window"][k])
        assert source == "cluster frozen"
        marker = w._marker
        assert marker.get_visible() and marker.get_xy() == (P1[1] - 0.5, P1[0] - 0.5)
        browser_draw(host)
        w.wait()
        assert host.draw_threads
        assert set(host.draw_threads) == {w.ui.thread_id}
    finally:
        w.close()


@pytest.mark.skipif(not CHEAP, reason="hover messages need the ipympl canvas")
def test_hover_shows_coordinates_branch_and_value(timing):
    frames, results = timing
    w = BranchInspector(results, frames=frames, interactive=True, diff="frozen")
    try:
        w.wait()
        browser_draw(w.host)
        w.wait()
        in_thread(w.host.send_event, event(w.host, w.view.ax, *P1, kind="motion_notify"))
        w.wait()
        assert w.host.widget._message == (f"(y={P1[0]}, x={P1[1]}) serial: QUIET_UPDATE, "
                                          f"frozen: TEST3_STORE, value {MEAN + 5} ADU")
        assert set(w.host.draw_threads) == {w.ui.thread_id}
    finally:
        w.close()


def test_difference_and_frames(timing):
    frames, results = timing
    w = BranchInspector(results, interactive=CHEAP)
    try:
        w.wait()
        w.diff = True
        w.wait()
        assert w.diff == "frozen" and type(w.view).__name__ == "BranchDiffView"
        codes = {label: r["branch_map"].sel(branch_frame=0).to_numpy()
                 for label, r in results.items()}
        differs = w.view.artists["differs"].get_array()
        np.testing.assert_array_equal(~np.ma.getmaskarray(differs),
                                      codes["serial"] != codes["frozen"])
        w.frame = 1
        w.select_pixel(*P2)
        w.wait()
        assert w.frame == 1 and "frame 1" in w.view.artists["title"].get_text()
        assert w.branches == {label: map_code(r, 1, *P2) for label, r in results.items()}
        assert w.window is None  # no frames, not a centre: no window
        assert w.explanation is None and "Give the frames" in w.explanation_html.value
        w.diff = None
        w.wait()
        assert type(w.view).__name__ == "BranchMapView"
        np.testing.assert_array_equal(w.view.artists["branch"].get_array(),
                                      results["serial"]["branch_map"].sel(branch_frame=1))
    finally:
        w.close()


def limits(ax):
    """``(y0, y1, x0, x1)`` of the pixels ``ax`` shows."""
    (left, right), (bottom, top) = ax.get_xlim(), ax.get_ylim()
    return top + 0.5, bottom + 0.5, left + 0.5, right + 0.5


def around(pixels, shape, margin=ZOOM_MARGIN):
    """The box of ``pixels`` with ``margin`` around them, within ``shape``."""
    (y0, x0), (y1, x1) = np.min(pixels, axis=0), np.max(pixels, axis=0)
    return (max(y0 - margin, 0), min(y1 + 1 + margin, shape[0]),
            max(x0 - margin, 0), min(x1 + 1 + margin, shape[1]))


def test_zoom_to_the_differences_follows_the_frame_and_goes_back(timing, interactive):
    frames, results = timing
    w = BranchInspector(results, interactive=interactive)
    try:
        w.wait()
        whole = (0, 12, 0, 24)
        assert w.zoom_toggle.disabled and limits(w.view.ax) == whole
        w.diff = True
        w.wait()
        assert not w.zoom_toggle.disabled and limits(w.view.ax) == whole
        texts = [t.get_text() for t in w.view.artists["legend"].get_texts()]
        assert texts[-3:] == ["code differs (5 pixels)", "serial cluster centres",
                              "frozen cluster centres"]
        in_thread(setattr, w.zoom_toggle, "value", True)  # a click, on a subshell thread
        w.wait()
        differ = {f: np.argwhere(w._codes("serial", f) != w._codes("frozen", f))
                  for f in (0, 1)}
        assert w.zoom and limits(w.view.ax) == around(differ[0], (12, 24)) == (0, 12, 1, 18)
        assert "zoomed to the differences" in w.describe(None)
        w.frame = 1  # the zoom follows the frame's differences
        w.wait()
        assert limits(w.view.ax) == around(differ[1], (12, 24)) == (0, 7, 1, 9)
        w.select_pixel(*P1)
        w.wait()
        assert repr(w) == ("BranchInspector(frame 1: serial vs frozen (zoomed to the "
                           "differences); pixel (y=3, x=4): serial QUIET_UPDATE, frozen "
                           "TEST1_STORE)")
        w.zoom = False
        w.wait()
        assert not w.zoom_toggle.value and limits(w.view.ax) == whole
        w.view.ax.set_xlim(2.5, 6.5)  # as the toolbar's zoom does: a new frame keeps it
        w.frame = 0
        w.wait()
        assert w.view.ax.get_xlim() == (2.5, 6.5)
        w.diff = None
        w.wait()
        assert w.zoom_toggle.disabled
        browser_draw(w.host)
        w.wait()
        assert set(w.host.draw_threads) == {w.ui.thread_id}
    finally:
        w.close()
    w = BranchInspector(results, diff="frozen", region=(2, 6, 0, 20), interactive=CHEAP)
    try:
        w.zoom = True
        w.wait()
        assert limits(w.view.ax) == (0, 12, 1, 18)
        w.zoom = False  # back to the region asked for
        w.wait()
        assert limits(w.view.ax) == (2, 6, 0, 20)
    finally:
        w.close()


def test_bad_input_is_reported_and_the_view_kept(timing):
    frames, results = timing
    w = BranchInspector(results, frames=frames[:1], pedestal=unit_pedestal(),
                        interactive=CHEAP)
    try:
        w.wait()
        w.select_pixel(*P1)
        w.wait()
        w.select_pixel(40, 2)
        assert "pixel (y=40, x=2) is outside the 12x24 frame" in w.error and w.pixel == P1
        w.frame = 5
        assert "frame 5 has no branch map" in w.error and w.frame == 0
        w.diff = "nobody"
        assert "is not another result" in w.error and w.diff is None
        view = w.view
        w.frame = 1  # mapped, but not in the frames given: reading it raises on the worker
        w.wait()
        # Both the frame reader and the explanation fail; the status shows the last.
        assert any(text in w.error for text in ("frame 1 is not in the frames given",
                                                 "frames [1] are not in"))
        assert "could not explain pixel (y=3, x=4) of frame 1" in w.explanation_html.value
        assert w.view is view and w.frame == 1
        assert w.branches["serial"] == map_code(results["serial"], 1, *P1)
    finally:
        w.close()
    unmapped = {label: r.drop_vars(["branch_map", "branch_frame"]) for label, r in results.items()}
    w = BranchInspector(unmapped, interactive=CHEAP)
    try:
        assert "none of the results has branch maps" in w.error
        w.select_pixel(1, 1)
        assert w.pixel is None and w.branches == {}
    finally:
        w.close()
