"""Spectra of several finders on common bins, ratios and peak fits."""

import numpy as np
import pytest

from aare_lab.spectra import fit_peaks, peak_fit, spectra, spectrum_ratio
from compare_cases import synthetic_result

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
    assert spec["energy_lo"][0] == 50.0 and spec["energy_hi"][-1] == 600.0
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


def test_failed_fit_names_the_finder():
    spec = spectra({"empty": synthetic_result(np.array([300.0]))}, bins=20, range=(0, 400))
    with pytest.raises(ValueError, match="^empty: cannot fit"):
        fit_peaks(spec, window=(0, 40))
