"""Peak fits: the Kα/Kβ doublet against one gaussian on spectra of a known doublet."""

import numpy as np
import pytest
from compare_cases import synthetic_result

from aare_lab.analysis.fit import PeakFit, fit_peak, line_energies
from aare_lab.analysis.spectra import fit_peaks, peak_fit, spectra

# The truth, chosen here: Cu lines at a MÖNCH03-like gain and 3x3-cluster noise.
E_ALPHA, E_BETA = 8.05, 8.90
GAIN, SIGMA = 40.0, 15.0
BETA_SHARE = 0.13                       # of the photons, as in the simulator's Beam
BETA_RATIO = BETA_SHARE / (1 - BETA_SHARE)
N_PHOTONS, N_FLAT = 150_000, 5_000
EDGES = np.arange(100.5, 600.5, 2.0)    # 2 ADU bins, as the demo's
WINDOW = (GAIN * E_ALPHA - 3 * SIGMA, GAIN * E_BETA + 3 * SIGMA)


def doublet_energies(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    beta = rng.random(N_PHOTONS) < BETA_SHARE
    centre = np.where(beta, GAIN * E_BETA, GAIN * E_ALPHA)
    return np.r_[rng.normal(centre, SIGMA), rng.uniform(EDGES[0], EDGES[-1], N_FLAT)]


@pytest.fixture(scope="module")
def histogram():
    counts, _ = np.histogram(doublet_energies(seed=7), EDGES)
    return 0.5 * (EDGES[1:] + EDGES[:-1]), counts


def pull(value, error, truth):
    return (value - truth) / error


def test_doublet_recovers_kalpha_position_width_and_kbeta_ratio(histogram):
    fit = fit_peak(*histogram, window=WINDOW, lines=(E_ALPHA, E_BETA))
    assert fit.model == "Kα/Kβ doublet" and fit.lines == (E_ALPHA, E_BETA)
    assert abs(pull(fit.position, fit.position_err, GAIN * E_ALPHA)) < 3
    assert abs(pull(fit.sigma, fit.sigma_err, SIGMA)) < 3
    assert abs(pull(fit.beta_ratio, fit.beta_ratio_err, BETA_RATIO)) < 3
    assert fit.beta_position == pytest.approx(GAIN * E_BETA, rel=1e-3)
    assert fit.resolution == pytest.approx(2.3548 * SIGMA / (GAIN * E_ALPHA), rel=0.02)


def test_one_gaussian_over_the_doublet_is_biased(histogram):
    fit = fit_peak(*histogram, window=WINDOW)
    assert fit.model == "gaussian" and fit.lines is None and np.isnan(fit.beta_ratio)
    # Kβ pulls the position up by far more than its error, and widens the line.
    assert pull(fit.position, fit.position_err, GAIN * E_ALPHA) > 10
    assert fit.position / (GAIN * E_ALPHA) - 1 > 0.005
    assert pull(fit.sigma, fit.sigma_err, SIGMA) > 10


def test_default_window_of_a_doublet_reaches_above_kbeta(histogram):
    single = fit_peak(*histogram)
    fit = fit_peak(*histogram, lines=(E_ALPHA, E_BETA))
    assert fit.window[0] == single.window[0] and fit.window[1] > GAIN * E_BETA + 2 * SIGMA
    assert abs(pull(fit.position, fit.position_err, GAIN * E_ALPHA)) < 3


def test_doublet_in_kev_is_the_doublet_in_adu_scaled(histogram):
    centres, counts = histogram
    adu = fit_peak(centres, counts, window=WINDOW, lines=(E_ALPHA, E_BETA))
    kev = fit_peak(centres / GAIN, counts, window=tuple(w / GAIN for w in WINDOW),
                   lines=(E_ALPHA, E_BETA))
    assert kev.position * GAIN == pytest.approx(adu.position, rel=1e-6)
    assert kev.beta_ratio == pytest.approx(adu.beta_ratio, rel=1e-5)


def test_lines_may_be_a_beams_energy_intensity_pairs():
    assert line_energies(((8.05, 0.87), (8.90, 0.13))) == (8.05, 8.90)
    assert line_energies(np.array([[8.05, 0.87], [8.90, 0.13]])) == (8.05, 8.90)
    for bad in ((8.90, 8.05), (8.05,), (8.05, 8.90, 9.5), (0.0, 8.05)):
        with pytest.raises(ValueError, match="lines must be the Kα and Kβ energies"):
            line_energies(bad)


def test_doublet_refuses_a_window_that_ends_below_kbeta(histogram):
    with pytest.raises(ValueError, match=r"cannot fit the Kα/Kβ doublet in 277\.\.340: Kβ is "
                                         r"expected at 35\d.*widen it or fit one gaussian"):
        fit_peak(*histogram, window=(277, 340), lines=(E_ALPHA, E_BETA))


def test_doublet_refuses_too_few_bins_or_counts(histogram):
    centres, counts = histogram
    coarse = np.linspace(280, 400, 7)
    with pytest.raises(ValueError, match=r"^cannot fit a peak in 270..410: 0 counts in 7 bins"):
        fit_peak(coarse, np.zeros(7), window=(270, 410), lines=(E_ALPHA, E_BETA))
    few = np.linspace(300, 400, 6)
    with pytest.raises(ValueError, match=r"^cannot fit a peak in 290..410: .* in 6 bins"):
        fit_peak(few, np.full(6, 50.0), window=(290, 410), lines=(E_ALPHA, E_BETA))
    with pytest.raises(ValueError, match="lines must be"):
        fit_peak(centres, counts, lines=(E_BETA, E_ALPHA))


def test_result_says_which_model_was_fitted(histogram):
    doublet = fit_peak(*histogram, window=WINDOW, lines=(E_ALPHA, E_BETA))
    text = str(doublet)
    assert text.startswith("Kα/Kβ doublet: Kα position 3")
    assert "Kα FWHM" in text and "Kα resolution" in text and "%, Kβ/Kα intensity 0.1" in text
    assert dict(doublet.rows())["model"] == "Kα/Kβ doublet"
    assert "<td style='text-align:left'>Kβ/Kα intensity</td>" in doublet._repr_html_()
    single = fit_peak(*histogram, window=WINDOW)
    assert str(single).startswith("gaussian: position 3") and "Kβ" not in str(single)


def test_fit_peaks_round_trips_a_doublet_through_the_dataset():
    results = {name: synthetic_result(doublet_energies(seed)) for name, seed in
               (("a", 1), ("b", 2))}
    spec = spectra(results, bins=EDGES)
    fits = fit_peaks(spec, WINDOW, lines=((E_ALPHA, 0.87), (E_BETA, 0.13)))
    assert fits["alpha_line"].attrs["units"] == "keV" and fits["beta_ratio"].attrs["units"] == "1"
    for name in ("a", "b"):
        fit = peak_fit(fits, name)
        assert isinstance(fit, PeakFit) and fit.lines == (E_ALPHA, E_BETA)
        assert fit.beta_ratio == float(fits["beta_ratio"].sel(finder=name))
        centres = spec["energy"].to_numpy()
        direct = fit_peak(centres, spec.sel(finder=name).to_numpy(), WINDOW, (E_ALPHA, E_BETA))
        np.testing.assert_allclose(fit.evaluate(centres), direct.evaluate(centres))
    single = fit_peaks(spec, WINDOW)
    assert np.isnan(single["beta_ratio"]).all() and np.isnan(single["alpha_line"]).all()
    assert peak_fit(single, "a").lines is None
