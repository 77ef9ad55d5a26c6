"""The plots hold what they claim: masks, markers, legends and lines checked on known cases."""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from compare_cases import P1, P1_BIS, P2, PHOTON, R2, run_pair, synthetic_result, timing_frames
from matplotlib.figure import Figure

import aare_lab
from aare_lab import Branch, FrozenFinder
from aare_lab.analysis.caps import cap_analysis
from aare_lab.analysis.compare import compare_all, worst_mismatch
from aare_lab.analysis.spectra import fit_peaks, spectra, spectrum_ratio_error
from aare_lab.plots import (
    BranchDiffView,
    BranchMapView,
    CapView,
    MismatchView,
    SpectrumView,
    branch_diff_plot,
    branch_map_plot,
    cap_plot,
    frame_centres,
    frame_codes,
    mismatch_panel,
    new_figure,
    spectrum_plot,
)
from aare_lab.plots.branchmap import ZOOM_MARGIN, difference_region

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def timing():
    frames = timing_frames()
    serial, frozen = run_pair(frames)
    f32 = run_pair(frames, finders=(FrozenFinder,), dtypes=("float32",))[0]
    return serial, frozen, f32


def by_gid(ax, gid):
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"{len(found)} artists with gid {gid!r}"
    return found[0]


def footprint(centres, bounds):
    """Mask of the 3x3 windows of ``centres`` over the patch ``(y0, y1, x0, x1)``."""
    y0, y1, x0, x1 = bounds
    mask = np.zeros((y1 - y0, x1 - x0), bool)
    for y, x in centres:
        for yy in range(y - 1, y + 2):
            for xx in range(x - 1, x + 2):
                if y0 <= yy < y1 and x0 <= xx < x1:
                    mask[yy - y0, xx - x0] = True
    return mask


def offsets_yx(collection):
    return {(int(y), int(x)) for x, y in collection.get_offsets()}


def test_mismatch_panel_picks_the_worst_site(timing):
    serial, frozen, _ = timing
    site = worst_mismatch(compare_all([serial, frozen]), half_size=5)
    fig = mismatch_panel([serial, frozen], *site)
    left, right = fig.axes[:2]
    # Frame 0 has four sites; P2 and R2 are neighbours, so the patch is centred on P2
    # (the first of them): rows 3 - 5 .. 3 + 5 shifted into the frame, columns 8..18.
    bounds = (0, 11, 8, 19)
    for ax, centres in ((left, [P2]), (right, [R2])):
        image = by_gid(ax, "footprints")
        np.testing.assert_array_equal(image.get_array().mask, ~footprint(centres, bounds))
        assert image.get_extent() == [7.5, 18.5, 10.5, -0.5]
        assert offsets_yx(by_gid(ax, "centres")) == set(centres)
        assert offsets_yx(by_gid(ax, "rings")) == set(centres), "the other finder lacks it"
    assert left.images[0].norm is right.images[0].norm
    assert "frame 0" in fig._suptitle.get_text()
    assert left.get_xlabel() == "x (pixel)" and left.get_ylabel() == "y (pixel)"


def test_mismatch_panel_values_are_the_stored_windows(timing):
    serial, frozen, _ = timing
    fig = mismatch_panel({"serial": serial, "frozen": frozen}, 0, *PHOTON, half_size=2,
                         fig=Figure())
    for ax in fig.axes[:2]:
        values = by_gid(ax, "footprints").get_array()
        expected = np.zeros((5, 5))
        expected[2, 2] = 20
        np.testing.assert_array_equal(values.filled(0), expected)
        assert values.mask.sum() == 25 - 9
        assert offsets_yx(by_gid(ax, "centres")) == {PHOTON}
        assert len(by_gid(ax, "rings").get_offsets()) == 0, "both finders have the photon"


def test_mismatch_panel_of_three_rings_what_any_other_lacks(timing):
    serial, frozen, f32 = timing
    fig = mismatch_panel({"serial": serial, "frozen": frozen, "f32": f32}, 0, *P1, half_size=3)
    rings = [offsets_yx(by_gid(ax, "rings")) for ax in fig.axes[:3]]
    centres = [offsets_yx(by_gid(ax, "centres")) for ax in fig.axes[:3]]
    assert centres == [set(), {P1}, {P1}]
    assert rings == [set(), {P1}, {P1}], "serial lacks P1, which frozen and f32 both have"


def test_mismatch_view_update_moves_the_same_artists(timing):
    serial, frozen, _ = timing
    view = MismatchView({"serial": serial, "frozen": frozen}, 0, *PHOTON, half_size=2)
    before = dict(view.artists)
    view.update(0, *P1)
    assert view.artists == before and all(view.artists[k] is a for k, a in before.items())
    bounds = (P1[0] - 2, P1[0] + 3, P1[1] - 2, P1[1] + 3)
    assert offsets_yx(view.artists["centres:frozen"]) == {P1}
    assert offsets_yx(view.artists["rings:frozen"]) == {P1}, "serial lacks P1"
    np.testing.assert_array_equal(view.artists["footprints:frozen"].get_array().mask,
                                  ~footprint([P1], bounds))
    assert view.artists["footprints:frozen"].get_extent()[0] == bounds[2] - 0.5
    assert f"frame 0: rows {bounds[0]}" in view.artists["title"].get_text()
    # Only the frozen finder has a cluster this near P1: the serial panel says so.
    assert view.artists["empty:serial"].get_text() == "no serial cluster in this patch"
    assert view.artists["empty:frozen"].get_text() == ""
    view.update(0, *PHOTON)
    assert view.artists["empty:serial"].get_text() == view.artists["empty:frozen"].get_text() \
        == ""
    assert not plt.get_fignums(), "views draw into figures that pyplot does not display"


def test_branch_map_legend_colours_and_centres(timing):
    serial, *_ = timing
    fig = branch_map_plot(serial, 0)
    ax = fig.axes[0]
    image = by_gid(ax, "branch")
    np.testing.assert_array_equal(image.get_array(), serial["branch_map"].to_numpy()[0])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [b.name for b in Branch]
    # Each code is drawn in the colour its legend entry shows.
    handles = ax.get_legend().legend_handles
    for code in Branch:
        assert np.allclose(image.cmap(image.norm(int(code))), handles[code].get_facecolor())
    assert offsets_yx(by_gid(ax, "centres")) == {P2, PHOTON}


def test_branch_difference_view(timing):
    serial, frozen, _ = timing
    fig = branch_diff_plot(serial, frozen, 0, region=(0, 6, 0, 20))
    ax = fig.axes[0]
    overlay = by_gid(ax, "differs")
    # From the construction: the four sites, and the pixel below P2 (TEST3_SKIP in frozen,
    # pushed by the serial finder, which read the pushed Q and R2).
    differ = {P1, P1_BIS, P2, R2, (P2[0] + 1, P2[1])}
    assert {tuple(p) for p in np.argwhere(~overlay.get_array().mask).tolist()} == differ
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()][len(Branch):] == [
        "code differs (5 pixels)", "serial cluster centres", "frozen cluster centres"]
    assert offsets_yx(by_gid(ax, "centres_a")) == {P2, PHOTON}
    assert offsets_yx(by_gid(ax, "centres_b")) == {P1, P1_BIS, R2, PHOTON}
    # Each finder's entry is drawn with its centres' marker.
    dot, cross = legend.legend_handles[-2:]
    assert (dot.get_marker(), cross.get_marker()) == ("o", "x")
    assert ax.get_xlim() == (-0.5, 19.5) and ax.get_ylim() == (5.5, -0.5)


def test_branch_difference_view_zooms_to_the_pixels_that_differ(timing):
    serial, frozen, _ = timing
    view = BranchDiffView(frame_codes(serial, 0), frame_codes(frozen, 0))
    ax = view.ax
    # The pixels that differ span y 3..9, x 4..14; 3 pixels more, within the 12x24 frame.
    assert ZOOM_MARGIN == 3 and view.zoom_to_differences() == (0, 12, 1, 18)
    assert ax.get_xlim() == (0.5, 17.5) and ax.get_ylim() == (11.5, -0.5)
    assert view.zoom_to_differences(margin=1) == (2, 11, 3, 16)
    assert ax.get_xlim() == (2.5, 15.5) and ax.get_ylim() == (10.5, 1.5)
    view.show_region()
    assert ax.get_xlim() == (-0.5, 23.5) and ax.get_ylim() == (11.5, -0.5)
    codes = frame_codes(serial, 1)
    view.update(codes, codes)  # nothing differs: the whole frame
    view.show_region((0, 4, 0, 4))
    assert view.zoom_to_differences() is None
    assert ax.get_xlim() == (-0.5, 23.5) and ax.get_ylim() == (11.5, -0.5)
    assert difference_region(np.eye(3, dtype=bool)[::-1], margin=5) == (0, 3, 0, 3)


def test_branch_map_needs_maps(timing):
    serial, *_ = timing
    with pytest.raises(KeyError, match="no branch maps"):
        branch_map_plot(serial.drop_vars("branch_map"), 0)
    with pytest.raises(ValueError, match="frame 7 has no branch map"):
        branch_map_plot(serial, 7)


def test_spectrum_plot_draws_the_fitted_peak():
    rng = np.random.default_rng(3)
    energies = np.r_[rng.normal(300.0, 10.0, 8000), rng.uniform(150, 450, 1000)]
    spec = spectra({"serial": synthetic_result(energies),
                    "frozen": synthetic_result(energies[::2])}, bins=150, range=(150, 450))
    fits = fit_peaks(spec, window=(250, 350))
    fig = spectrum_plot(spec, fits=fits)
    ax, rax = fig.axes
    for label in ("serial", "frozen"):
        line = by_gid(ax, f"peak:{label}")
        assert line.get_xdata()[0] == float(fits["position"].sel(finder=label))
        assert abs(line.get_xdata()[0] - 300.0) < 1.0
        curve = by_gid(ax, f"fit:{label}")
        assert curve.get_xdata()[0] == 250 and curve.get_xdata()[-1] == 350
        np.testing.assert_array_equal(by_gid(ax, f"spectrum:{label}").get_data().values,
                                      spec.sel(finder=label).to_numpy())
        assert "FWHM" in by_gid(ax, f"annotation:{label}").get_text()
    assert ax.get_yscale() == "log"
    ratio = by_gid(rax, "ratio:frozen")
    serial, frozen = (spec.sel(finder=f).to_numpy() for f in ("serial", "frozen"))
    have = serial > 0
    expected = frozen[have] / serial[have]
    np.testing.assert_allclose(ratio.get_ydata()[have], expected)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["serial: 9,000 clusters", "frozen: 4,500 clusters"]
    errors = by_gid(rax, "ratio_err:frozen").get_segments()
    # Poisson errors of both counts; an empty bin counts as one.
    a, b = frozen[have], serial[have]
    expected_err = np.sqrt(np.maximum(a, 1) * (1 + a / b)) / b
    np.testing.assert_allclose([top[1] - bottom[1] for bottom, top in errors], 2 * expected_err)


def test_spectrum_view_shows_what_aare_lab_spectrum_counts():
    result = synthetic_result(np.array([100.0, 200.0, 200.0]), "serial")
    fig = spectrum_plot(aare_lab.spectrum(result, bins=4), log=False, ratio=False)
    (ax,) = fig.axes
    assert ax.get_yscale() == "linear"
    stairs = by_gid(ax, "spectrum:serial").get_data()
    np.testing.assert_array_equal(stairs.values, aare_lab.spectrum(result, bins=4).to_numpy())
    np.testing.assert_array_equal(stairs.edges, [99.5, 125.5, 151.5, 177.5, 203.5])
    assert "serial" in ax.get_title() and "3 frames" in ax.get_title()


def test_spectrum_view_switches_between_log_and_linear_counts():
    result = synthetic_result(np.r_[np.full(400, 100.0), np.full(3, 300.0)], "serial")
    view = SpectrumView(aare_lab.spectrum(result, bins=8), ratio=False)
    assert view.ax.get_yscale() == "log" and view.ax.get_ylim() == (0.5, 800.0)
    view.set_log(False)
    # A linear axis starts at zero with the highest bin near its top, also after updates.
    assert view.ax.get_yscale() == "linear" and view.ax.get_ylim() == (0.0, 1.08 * 400)
    view.update(aare_lab.spectrum(result, bins=8))
    assert view.ax.get_ylim() == (0.0, 1.08 * 400)
    view.set_log(True)
    assert view.ax.get_yscale() == "log" and view.ax.get_ylim() == (0.5, 800.0)


def test_spectrum_view_reports_clusters_outside_the_range():
    result = synthetic_result(np.array([-5.0, 10.0, 20.0, 700.0, 800.0]), "frozen")
    view = SpectrumView(spectra([result], bins=10, range=(0, 100)))
    legend = view.artists["legend"].get_texts()[0].get_text()
    assert legend == "frozen: 2 clusters (1 below and 2 above the range)"


def test_spectrum_view_in_kev_with_a_visible_fit():
    rng = np.random.default_rng(4)
    spec = spectra([synthetic_result(np.round(rng.normal(320.0, 8.0, 5000)))])
    fits = fit_peaks(spec, window=(290, 350))
    view = SpectrumView(spec, fits, gain=40.0)
    assert view.ax.get_xlabel() == "energy (keV)"
    assert view.artists["spectrum:frozen"].get_data().edges[0] == spec["energy_lo"][0] / 40
    curve = view.artists["fit:frozen"]
    assert curve.get_xdata()[0] == 290 / 40 and curve.get_xdata()[-1] == 350 / 40
    assert curve.get_zorder() > view.artists["spectrum:frozen"].get_zorder()
    assert curve.get_linewidth() > view.artists["spectrum:frozen"].get_linewidth()
    assert curve.get_color() != view.artists["spectrum:frozen"].get_edgecolor()
    assert "keV" in view.artists["annotation:frozen"].get_text()
    assert view.ratio_ax is None, "one spectrum has nothing to be compared with"


def test_spectrum_view_draws_a_doublet_as_one_curve_with_its_kbeta_ratio():
    rng = np.random.default_rng(8)
    beta = rng.random(20000) < 0.13
    energies = np.round(rng.normal(np.where(beta, 356.0, 322.0), 15.0))
    spec = spectra([synthetic_result(energies)], width=2)
    fits = fit_peaks(spec, window=(277, 401), lines=(8.05, 8.90))
    view = SpectrumView(spec, fits, gain=40.0)
    curve = view.artists["fit:frozen"]
    assert curve.get_xdata()[0] == 277 / 40 and curve.get_xdata()[-1] == 401 / 40
    # One curve over both lines: at Kβ it stands far above its mirror image below Kα,
    # where a gaussian of Kα alone would be as high.
    at_kbeta, at_mirror = np.interp(np.array([356, 2 * 322 - 356]) / 40, curve.get_xdata(),
                                    curve.get_ydata())
    assert at_kbeta > 2 * at_mirror
    assert view.artists["peak:frozen"].get_xdata()[0] == float(fits["position"][0]) / 40
    text = view.artists["annotation:frozen"].get_text()
    assert text.startswith("frozen: Kα 8.0") and "keV, FWHM" in text and ", Kβ/Kα 0.1" in text
    # The line reaches across the peak: drawn over the fit curve, whose dashes hid digits.
    assert view.artists["annotation:frozen"].get_zorder() > curve.get_zorder()


def test_overlapping_spectra_are_told_apart():
    energies = np.arange(100.0, 200.0)
    view = SpectrumView(spectra({"a": synthetic_result(energies), "b": synthetic_result(energies)}))
    a, b = view.artists["spectrum:a"], view.artists["spectrum:b"]
    assert a.get_linestyle() != b.get_linestyle() and a.get_linewidth() > b.get_linewidth()
    assert b.get_zorder() > a.get_zorder(), "the thinner curve is drawn on top"


def test_ratio_range_ignores_bins_of_few_counts():
    rng = np.random.default_rng(5)
    energies = np.round(rng.normal(300.0, 20.0, 20000))
    tail = np.r_[energies, 500.0]  # a lone bin: 1 count against 2
    spec = spectra({"a": synthetic_result(np.r_[tail, 500.0]), "b": synthetic_result(tail)})
    view = SpectrumView(spec)
    low, high = view.ratio_ax.get_ylim()
    # The lone bin's ratio of 2 is far outside; the typical error bar of the well-filled
    # bins (those at the peak) is inside.
    assert 0.8 < low < 1.0 < high < 1.2, (low, high)
    peak = spec.sel(finder="b").to_numpy() >= 10
    errors = spectrum_ratio_error(spec, "a").sel(finder="b").to_numpy()[peak]
    assert high - 1.0 > np.median(errors) and 1.0 - low > np.median(errors)


def test_spectrum_view_update_keeps_the_artists():
    rng = np.random.default_rng(6)
    first = spectra({"a": synthetic_result(rng.normal(300, 10, 3000)),
                     "b": synthetic_result(rng.normal(300, 10, 3000))}, width=2)
    fits = fit_peaks(first, window=(280, 320))
    view = SpectrumView(first, fits)
    before = dict(view.artists)
    # Accumulated counts on other edges, without fits.
    second = spectra({"a": synthetic_result(rng.normal(500, 10, 900)),
                      "b": synthetic_result(rng.normal(500, 10, 1000))}, width=5)
    view.update(second)
    assert all(view.artists[k] is a for k, a in before.items()) and view.artists == before
    for label in ("a", "b"):
        data = view.artists[f"spectrum:{label}"].get_data()
        np.testing.assert_array_equal(data.values, second.sel(finder=label).to_numpy())
        assert data.edges[0] == second["energy_lo"][0]
        assert len(view.artists[f"fit:{label}"].get_xdata()) == 0
    assert view.ax.get_xlim() == (second["energy_lo"][0], second["energy_hi"][-1])
    np.testing.assert_allclose(view.artists["ratio:b"].get_ydata(),
                               (second.sel(finder="b") / second.sel(finder="a")
                                .where(second.sel(finder="a") > 0)).to_numpy())
    assert view.artists["legend"].get_texts()[1].get_text() == "b: 1,000 clusters"
    with pytest.raises(ValueError, match="draw a new view"):
        view.update(second.sel(finder=["a"]))


def test_cap_plot_line_and_annotation():
    fig = cap_plot(cap_analysis(np.array([0, 3, 5, 5, 10]), 4))
    ax = fig.axes[0]
    assert by_gid(ax, "cap").get_xdata()[0] == 4
    hist = by_gid(ax, "histogram").get_data()
    np.testing.assert_array_equal(hist.values, [1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(hist.edges, np.arange(12) - 0.5)
    text = by_gid(ax, "annotation").get_text()
    assert "3 of 5 frames truncated (60 %)" in text
    assert "8 clusters dropped" in text and "224 B per frame (3x3, int32)" in text


def test_cap_view_update_keeps_the_artists():
    counts = np.array([0, 3, 5, 5, 10])
    view = CapView(cap_analysis(counts, 4), fig=new_figure())
    before = dict(view.artists)
    view.update(cap_analysis(counts, 6))
    assert all(view.artists[k] is a for k, a in before.items())
    assert view.artists["cap"].get_xdata()[0] == 6
    assert view.artists["legend"].get_texts()[0].get_text() == "cap = 6"
    assert "1 of 5 frames truncated" in view.artists["annotation"].get_text()
    np.testing.assert_array_equal(view.artists["truncated"].get_data().values,
                                  [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])


def test_cap_view_shades_the_frames_above_the_cap():
    counts = np.array([0, 3, 5, 5, 10])
    ax = cap_plot(cap_analysis(counts, 4)).axes[0]
    shaded, hist = by_gid(ax, "truncated").get_data(), by_gid(ax, "histogram").get_data()
    np.testing.assert_array_equal(shaded.edges, hist.edges)
    # One count per bar: the bars of 5 and 10 clusters, whole.
    np.testing.assert_array_equal(shaded.values, np.where(np.arange(11) > 4, hist.values, 0))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cap = 4",
                                                                    "truncated frames"]
    # Four counts per bar: the bar of 2296..2299 holds 4 frames, 3 of them above 2296.
    ax = cap_plot(cap_analysis(np.arange(2000, 2400), 2296)).axes[0]
    shaded, hist = by_gid(ax, "truncated").get_data(), by_gid(ax, "histogram").get_data()
    assert shaded.values.sum() == 103 and (shaded.values <= hist.values).all()
    straddling = np.searchsorted(hist.edges, 2296) - 1
    assert hist.edges[straddling] == 2295.5 and shaded.values[straddling] == 3
    assert (shaded.values[:straddling] == 0).all() and (shaded.values[straddling + 1:] == 4).all()


def test_branch_views_update_in_place(timing):
    serial, frozen, _ = timing
    codes = frame_codes(serial, 0)
    view = BranchMapView(codes, frame_centres(serial, 0))
    image, dots = view.artists["branch"], view.artists["centres"]
    view.update(np.zeros_like(codes), np.array([[1, 2]]), title="frame 1")
    assert view.artists["branch"] is image and view.artists["centres"] is dots
    assert (image.get_array() == 0).all() and offsets_yx(dots) == {(1, 2)}
    assert view.artists["title"].get_text() == "frame 1"
    diff = BranchDiffView(codes, codes, labels=("serial", "frozen"))
    overlay = diff.artists["differs"]
    assert overlay.get_array().mask.all()
    diff.update(codes, frame_codes(frozen, 0), frame_centres(serial, 0), frame_centres(frozen, 0))
    assert diff.artists["differs"] is overlay and (~overlay.get_array().mask).sum() == 5
    assert diff.artists["title"].get_text() == "serial vs frozen: 5 pixels differ"
    assert offsets_yx(diff.artists["centres_b"]) == {P1, P1_BIS, R2, PHOTON}


def test_cap_plot_groups_wide_distributions():
    counts = np.arange(2000, 2400)  # one frame per count, 400 counts wide
    report = cap_analysis(counts, 2300)
    fig, ax = plt.subplots()
    assert cap_plot(report, ax=ax) is fig
    hist = by_gid(ax, "histogram").get_data()
    assert len(hist.values) == 100 and (hist.values == 4).all()
    assert ax.get_ylabel() == "frames per 4 counts"


def doublet_spectrum(seed=8, n=20000):
    rng = np.random.default_rng(seed)
    beta = rng.random(n) < 0.13
    energies = np.round(rng.normal(np.where(beta, 356.0, 322.0), 15.0))
    return spectra({"serial": synthetic_result(energies),
                    "frozen": synthetic_result(energies)}, width=2)


def test_fit_region_shows_the_doublet_its_parts_and_residuals():
    spec = doublet_spectrum()
    fits = fit_peaks(spec, window=(277, 401), lines=(8.05, 8.90))
    single = fit_peaks(spec, window=(277, 401))
    view = SpectrumView(spec, fits, gain=40.0, reference="frozen", detail=True,
                        compare_fits=single)
    assert view.fit_ax is not None and view.residual_ax is not None
    assert set(view.figure.axes) == {view.ax, view.ratio_ax, view.fit_ax, view.residual_ax}
    fit = aare_lab.spectra.peak_fit(fits, "frozen")
    x, total = view.artists["detail:fit"].get_data()
    assert x[0] == 277 / 40 and x[-1] == 401 / 40
    # The parts add up to the curve; Kβ peaks at Kβ's position, Kα at Kα's.
    parts = {p: view.artists[f"detail:{p}"].get_ydata() for p in ("Kα", "Kβ", "background")}
    np.testing.assert_allclose(sum(parts.values()), total, rtol=1e-12)
    assert abs(x[np.argmax(parts["Kβ"])] - fit.beta_position / 40) < 0.01
    assert abs(x[np.argmax(parts["Kα"])] - fit.position / 40) < 0.01
    # The counts in the window, and the residuals of both models in units of √fit.
    counts = spec.sel(finder="frozen").to_numpy()
    centres = spec["energy"].to_numpy()
    inside = (centres >= 277) & (centres <= 401)
    rx, pull = view.artists["residual:fit"].get_data()
    np.testing.assert_allclose(rx, centres[inside] / 40)
    model = fit.evaluate(centres[inside])
    # Where the fit is below one count (its line may dip below 0 at an edge) √1 is taken.
    np.testing.assert_allclose(pull, (counts[inside] - model) / np.sqrt(np.maximum(model, 1)))
    _, pull_one = view.artists["residual:compare"].get_data()
    # One gaussian over a doublet misses the Kβ shoulder: its residuals are far larger.
    assert np.sum(pull_one ** 2) > 3 * np.sum(pull ** 2)
    labels = [t.get_text() for t in view.fit_ax.get_legend().get_texts()]
    assert any(t.startswith("Kα/Kβ doublet fit, χ²/ndf") for t in labels), labels
    gaussian = aare_lab.spectra.peak_fit(single, "frozen")
    peak = aare_lab.fit.value_and_error(gaussian.position / 40, gaussian.position_err / 40)
    assert any(t.startswith("gaussian fit, χ²/ndf") and t.endswith(f"peak {peak} keV")
               for t in labels), labels
    # One gaussian over both lines sits above Kα.
    assert gaussian.position > fit.position + 5 * gaussian.position_err


def test_fit_region_legend_and_annotations_are_in_their_curves_colours():
    spec = doublet_spectrum()
    fits = fit_peaks(spec, window=(277, 401), lines=(8.05, 8.90))
    view = SpectrumView(spec, fits, gain=40.0, detail=True, compare_fits=fit_peaks(spec))
    legend = view.fit_ax.get_legend()
    assert len(legend.get_lines()) == 6  # counts, fit, Kα, Kβ, background, one gaussian
    drawn = {a.get_label(): a for a in view.fit_ax.get_children() if hasattr(a, "get_label")}
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        artist = drawn[text.get_text()]
        colour = artist.get_edgecolor() if hasattr(artist, "get_edgecolor") and not \
            hasattr(artist, "get_color") else artist.get_color()
        assert matplotlib.colors.same_color(handle.get_color(), colour), text.get_text()
    colours = [matplotlib.colors.to_hex(h.get_color()) for h in legend.legend_handles]
    assert len(set(colours)) == len(colours), "every part has a colour of its own"
    # Main panel: each annotation in its fit's colour, and fits that coincide (the same
    # clusters) interleave their dashes, so each colour shows on the curve.
    fit_a, fit_b = view.artists["fit:serial"], view.artists["fit:frozen"]
    for label, curve in (("serial", fit_a), ("frozen", fit_b)):
        assert matplotlib.colors.same_color(view.artists[f"annotation:{label}"].get_color(),
                                            curve.get_color())
    np.testing.assert_array_equal(fit_a.get_ydata(), fit_b.get_ydata())
    # Line2D keeps its dash pattern (offset, on-off) unscaled by the width here.
    (offset_a, dashes_a), (offset_b, dashes_b) = (c._unscaled_dash_pattern for c in (fit_a, fit_b))
    assert dashes_a == dashes_b and dashes_a[1] >= dashes_a[0] and offset_a != offset_b


def test_the_figure_states_bin_width_gain_ratio_errors_and_a_note():
    spec = doublet_spectrum()
    view = SpectrumView(spec, gain=40.0, note="errors are statistical")
    assert view.artists["scale"].get_text() == "bins of 2 ADU (0.05 keV), gain 40 ADU/keV"
    assert "Poisson" in view.artists["ratio_note"].get_text()
    assert "independent" in view.artists["ratio_note"].get_text()
    assert view.artists["note"].get_text() == "errors are statistical"
    assert view.artists["note"].get_figure() is view.figure
    plain = SpectrumView(spectra([synthetic_result(np.arange(100.0, 200.0))], bins=10))
    assert plain.artists["scale"].get_text() == "bins of 10 ADU"
    assert plain.fit_ax is None and len(plain.figure.axes) == 1


def test_fit_region_without_a_fit_is_empty_and_fills_on_update():
    spec = doublet_spectrum()
    view = SpectrumView(spec, detail=True)
    assert len(view.artists["detail:fit"].get_xdata()) == 0
    assert len(view.artists["residual:fit"].get_xdata()) == 0
    view.update(spec, fit_peaks(spec, window=(277, 401), lines=(8.05, 8.90)))
    assert len(view.artists["detail:fit"].get_xdata()) == 300
    assert len(view.artists["residual:fit"].get_xdata()) == 62  # the 2-ADU bins in 277..401
