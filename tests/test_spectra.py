"""Spectra of several finders on common bins, ratios and peak fits."""

import numpy as np
import pytest
from compare_cases import synthetic_result

import aare_lab
from aare_lab.analysis.spectra import (
    fit_or_none,
    fit_peaks,
    peak_fit,
    spectra,
    spectrum_ratio,
    spectrum_ratio_error,
)
from aare_lab.simulate import Detector, Simulator, simulate_run
from aare_lab.stream.live import fixed_edges

POSITION, SIGMA = 320.0, 12.0


@pytest.fixture(scope="module")
def peak():
    rng = np.random.default_rng(1)
    energies = np.r_[rng.normal(POSITION, SIGMA, 20000), rng.uniform(100, 500, 2000)]
    return energies


def test_common_binning_over_all_results(peak):
    a = synthetic_result(peak[:1000], "serial")
    b = synthetic_result(np.array([50.0, 600.0]), "frozen")
    spec = spectra([a, b], bins=55)
    assert spec["finder"].to_numpy().tolist() == ["serial", "frozen"]
    assert spec["energy_lo"][0] == 49.5 and spec["energy_hi"][-1] > 600.0
    assert spec.sel(finder="serial").sum() == 1000 and spec.sel(finder="frozen").sum() == 2
    edges = np.arange(0, 1001, 100.0)
    fixed = spectra({"x": a, "y": b}, bins=edges)
    np.testing.assert_array_equal(fixed["energy"], edges[:-1] + 50)


def test_ratio_to_reference(peak):
    a = synthetic_result(peak[:500], "serial")
    b = synthetic_result(np.r_[peak[:500], peak[:500]], "frozen")
    spec = spectra([a, b], bins=40, range=(0, 800))
    ratio = spectrum_ratio(spec)
    have = spec.sel(finder="serial").to_numpy() > 0
    np.testing.assert_array_equal(ratio.sel(finder="frozen").to_numpy()[have], 2.0)
    assert np.isnan(ratio.sel(finder="frozen").to_numpy()[~have]).all()
    assert ratio.attrs["reference"] == "serial"
    back = spectrum_ratio(spec, "frozen").sel(finder="serial").to_numpy()[have]
    np.testing.assert_array_equal(back, 0.5)
    with pytest.raises(ValueError, match="no finder 'cuda'"):
        spectrum_ratio(spec, "cuda")


def test_peak_fit_recovers_the_line(peak):
    spec = spectra([synthetic_result(peak)], bins=200, range=(100, 500))
    fits = fit_peaks(spec, window=(250, 390))
    row = fits.sel(finder="frozen")
    assert abs(row["position"] - POSITION) < 4 * row["position_err"] + 0.1
    assert row["fwhm"] == pytest.approx(2.3548 * SIGMA, rel=0.05)
    assert row["resolution"] == pytest.approx(2.3548 * SIGMA / POSITION, rel=0.05)
    assert 0 < row["position_err"] < 0.5 and row["resolution_err"] > 0
    fit = peak_fit(fits, "frozen")
    assert fit.position == float(row["position"]) and fit.window == (250.0, 390.0)
    assert fit.evaluate([fit.position])[0] == pytest.approx(fit.amplitude + fit.offset)


def test_fit_or_none_fits_a_peak_and_nothing_else(peak):
    """A spectrum still filling, or flat, has no peak to show: None, where fit_peaks
    would raise or report a "peak" it cannot place; a peak is fitted as fit_peaks does."""
    one = spectra([synthetic_result(peak)], bins=200, range=(100, 500)).sel(finder="frozen")
    fits = fit_or_none(one, "frozen", (250, 390))
    assert float(fits["position"][0]) == float(fit_peaks(one.expand_dims(finder=["frozen"]),
                                                         window=(250, 390))["position"][0])
    assert fit_or_none(one * 0, "frozen") is None  # no clusters yet
    # 200 photons per frame of 48x40 pixels pile up: no peak, and the doublet fit around
    # the highest bin returns one it cannot place (errors not finite).
    run = simulate_run(n_dark=30, n_frames=40, detector=Detector(frame_shape=(48, 40)), seed=5)
    piled = aare_lab.spectrum(aare_lab.find_clusters(run.frames, run.dark, n_pedestal=30,
                                                     progress=False), bins=fixed_edges())
    unplaced = fit_peaks(piled.expand_dims(finder=["frozen"]), lines=(8.05, 8.90))
    assert not np.isfinite(float(unplaced["position_err"][0]))
    assert fit_or_none(piled, "frozen", lines=(8.05, 8.90)) is None


def test_failed_fit_names_the_finder():
    spec = spectra({"empty": synthetic_result(np.array([300.0]))}, bins=20, range=(0, 400))
    with pytest.raises(ValueError, match="^empty: cannot fit"):
        fit_peaks(spec, window=(0, 40))


def test_a_fit_that_leaves_its_window_is_refused():
    # A falling edge and no peak: the best gaussian sits beyond the window's top.
    energies = np.repeat(np.arange(200.0, 260.0), np.arange(60, 0, -1))
    spec = spectra({"edge": synthetic_result(energies)}, bins=60, range=(200, 260))
    with pytest.raises(ValueError, match="^edge: the peak fit in 200..260 put the peak at "
                                         ".*outside the window"):
        fit_peaks(spec, window=(200, 260))


def test_default_bins_hold_every_integer_energy_without_a_last_bin_spike():
    # A flat distribution of integer energies: numpy's bins over the data range put one
    # value more into the last bin (closed on the right); integer-aligned bins do not.
    energies = np.repeat(np.arange(-40.0, 760.0), 3)
    spec = spectra([synthetic_result(energies)])
    counts = spec.sel(finder="frozen").to_numpy()
    assert counts.sum() == len(energies) and len(counts) <= 200
    assert (counts == counts[0]).all(), "every bin holds the same number of values"
    lo, hi = spec["energy_lo"].to_numpy(), spec["energy_hi"].to_numpy()
    assert lo[0] == -40.5 and ((hi - lo) == 4).all() and (lo % 1 == 0.5).all()
    assert int(spec["underflow"][0]) == int(spec["overflow"][0]) == 0


def test_an_explicit_range_reports_what_it_cuts():
    spec = spectra({"a": synthetic_result(np.array([-3.0, 5.0, 50.0, 700.0, 999.0]))},
                   bins=10, range=(0, 100))
    assert spec.sum() == 2
    assert (int(spec["underflow"][0]), int(spec["overflow"][0])) == (1, 2)
    one = aare_lab.spectrum(synthetic_result(np.array([-3.0, 5.0, 700.0])), range=(0, 100),
                            width=10)
    assert (one.attrs["underflow"], one.attrs["overflow"]) == (1, 1)
    np.testing.assert_array_equal(one["energy_lo"][:2], [-0.5, 9.5])


def test_ratio_errors_are_poisson():
    spec = spectra({"a": synthetic_result(np.r_[np.zeros(100), np.ones(4)]),
                    "b": synthetic_result(np.zeros(25))}, bins=np.array([-0.5, 0.5, 1.5]))
    error = spectrum_ratio_error(spec, "a").sel(finder="b").to_numpy()
    np.testing.assert_allclose(error, [0.25 * np.sqrt(1 / 25 + 1 / 100), np.sqrt(1) / 4])


def test_default_spectrum_of_a_simulated_run_keeps_the_pile_up():
    sim = Simulator(seed=0)
    dark = sim.dark(200)
    frames, _ = sim.frames(20)
    result = aare_lab.find_clusters(frames, dark, n_pedestal=200, progress=False)
    spec = aare_lab.spectrum(result)
    assert int(spec.sum()) == result.sizes["cluster"], "no cluster lost with the default bins"
    assert spec["energy_hi"][-1] > 600, "the pile-up near 645 ADU is in range"
    # The old default of the demo stopped at 1.5 times Kβ (534 ADU) and lost the pile-up.
    cut = aare_lab.spectrum(result, bins=np.arange(0.0, 534.0, 2.0))
    assert cut.attrs["overflow"] > 0.01 * result.sizes["cluster"]
