"""The plots hold what they claim: masks, markers, legends and lines checked on known cases."""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from aare_lab import Branch, FrozenFinder
from aare_lab.caps import cap_analysis
from aare_lab.plots import (branch_diff_plot, branch_map_plot, cap_plot, mismatch_panel,
                            spectrum_plot)
from aare_lab.spectra import fit_peaks, spectra
from compare_cases import (P1, P1_BIS, P2, PHOTON, R2, run_pair, synthetic_result,
                           timing_frames)

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
    fig = mismatch_panel([serial, frozen])
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


def test_mismatch_panel_refusals(timing):
    _, frozen, f32 = timing
    with pytest.raises(ValueError, match="agree everywhere"):
        mismatch_panel([frozen, f32])
    with pytest.raises(ValueError, match="all of frame, y and x"):
        mismatch_panel([frozen, f32], 0)


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
    assert ax.get_legend().get_texts()[-1].get_text() == "code differs (5 pixels)"
    assert offsets_yx(by_gid(ax, "centres_a")) == {P2, PHOTON}
    assert offsets_yx(by_gid(ax, "centres_b")) == {P1, P1_BIS, R2, PHOTON}
    assert ax.get_xlim() == (-0.5, 19.5) and ax.get_ylim() == (5.5, -0.5)


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
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["serial", "frozen"]


def test_spectrum_plot_linear_without_ratio_from_results():
    results = [synthetic_result(np.array([100.0, 200.0, 200.0]), "serial")]
    fig = spectrum_plot(results, log=False, ratio=False, bins=4)
    (ax,) = fig.axes
    assert ax.get_yscale() == "linear"
    np.testing.assert_array_equal(by_gid(ax, "spectrum:serial").get_data().values, [1, 0, 0, 2])


def test_cap_plot_line_and_annotation():
    fig = cap_plot(np.array([0, 3, 5, 5, 10]), 4)
    ax = fig.axes[0]
    assert by_gid(ax, "cap").get_xdata()[0] == 4
    hist = by_gid(ax, "histogram").get_data()
    np.testing.assert_array_equal(hist.values, [1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(hist.edges, np.arange(12) - 0.5)
    text = by_gid(ax, "annotation").get_text()
    assert "3 of 5 frames truncated (60 %)" in text
    assert "8 clusters dropped" in text and "224 bytes per frame (3x3, int32)" in text


def test_cap_plot_groups_wide_distributions():
    counts = np.arange(2000, 2400)  # one frame per count, 400 counts wide
    report = cap_analysis(counts, 2300)
    fig, ax = plt.subplots()
    assert cap_plot(report, ax=ax) is fig
    hist = by_gid(ax, "histogram").get_data()
    assert len(hist.values) == 100 and (hist.values == 4).all()
    assert ax.get_ylabel() == "frames per 4 counts"
