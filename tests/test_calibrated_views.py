"""Spectra, fits, plots, the live spectrum and ``aare-lab find --pedestal`` of calibrated
(keV) results: units follow the result, and keV energies get equal, not integer-aligned,
bins. Expected bins and counts come from `numpy.histogram`, never from `aare_lab.model.binning`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from aare_lab import Pedestal
from aare_lab.analysis.spectra import fit_peaks, spectra, spectrum_units
from aare_lab.cli import main
from aare_lab.model.binning import data_edges, edges_for
from aare_lab.model.results import spectrum
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import find_clusters
from aare_lab.simulate import JungfrauBeam, JungfrauDetector, JungfrauSimulator

pytestmark = pytest.mark.filterwarnings("ignore:the noise estimated from")
SHAPE = (32, 64)
N_DARK = 60
E_KEV = 12.4


@pytest.fixture(scope="module")
def run():
    """Point-charge 12.4 keV photons, no spots: one photon per pixel or 3x3."""
    sim = JungfrauSimulator(
        JungfrauDetector(frame_shape=SHAPE),
        JungfrauBeam(photons_per_frame=40, charge_cloud_sigma_um=0.0, spots_per_frame=0.0),
        seed=5)
    dark = sim.dark(N_DARK)
    frames, _ = sim.frames(40)
    result = find_clusters(frames, dark, n_pedestal=N_DARK, window_dtype="float64",
                           calibration=sim.calibration, progress=False)
    return sim, dark, frames, result


def test_spectrum_is_in_kev_on_equal_bins(run):
    _, _, _, result = run
    energies = result["energy"].to_numpy()
    assert result.sizes["cluster"] > 500
    s = spectrum(result)
    expected, edges = np.histogram(energies, bins=200)
    np.testing.assert_array_equal(s.to_numpy(), expected)
    np.testing.assert_allclose(np.r_[s["energy_lo"], s["energy_hi"][-1:]], edges)
    assert s["energy"].attrs["units"] == s["energy_lo"].attrs["units"] == "keV"
    assert s.attrs["underflow"] == s.attrs["overflow"] == 0
    by_width = spectrum(result, width=0.25)
    np.testing.assert_allclose(np.diff(np.r_[by_width["energy_lo"],
                                             by_width["energy_hi"][-1:]]), 0.25)
    assert by_width.sum() == len(energies) and by_width.attrs["overflow"] == 0


def test_kev_binning_keeps_adu_binning_integer_aligned():
    energies = [np.array([0.3, 7.9, 12.41])]
    np.testing.assert_allclose(data_edges(energies, 4, integer=False),
                               np.histogram_bin_edges(energies[0], 4))
    np.testing.assert_allclose(edges_for(energies, range=(0, 1), width=0.5, integer=False),
                               [0.0, 0.5, 1.0, 1.5])
    np.testing.assert_array_equal(data_edges([np.array([0, 3])], 4), [-0.5, 0.5, 1.5, 2.5, 3.5])
    with pytest.raises(ValueError, match="whole number of ADU"):
        edges_for(energies, width=0.5)


def test_spectra_and_fits_follow_the_units(run):
    _, dark, frames, result = run
    both = spectra({"a": result, "b": result}, bins=160, range=(0.0, 40.0))
    assert spectrum_units(both) == "keV"
    fits = fit_peaks(both)
    assert fits["position"].attrs["units"] == fits["fwhm"].attrs["units"] == "keV"
    assert fits["slope"].attrs["units"] == "counts/keV"
    assert abs(float(fits["position"].sel(finder="a")) - E_KEV) < 0.5
    plain = find_clusters(frames[:5], dark, n_pedestal=N_DARK, progress=False)
    assert spectrum_units(spectra([plain])) == "ADU"
    with pytest.raises(ValueError, match="different units .*keV.*separately"):
        spectra([result, plain])


def test_spectrum_view_labels_kev_and_refuses_a_gain(run):
    pytest.importorskip("matplotlib", reason="the plots need matplotlib")
    from aare_lab.plots import SpectrumView

    _, _, _, result = run
    s = spectrum(result, bins=160, range=(0.0, 40.0))
    fits = fit_peaks(s.expand_dims(finder=["frozen"]))
    view = SpectrumView(s, fits)
    assert view.ax.get_xlabel() == "energy (keV)"
    assert "keV" in view.artists["annotation:frozen"].get_text()
    with pytest.raises(ValueError, match="in keV already"):
        SpectrumView(s, gain=40.0)


def test_live_spectrum_of_a_calibrated_spec_is_in_kev(run):
    pytest.importorskip("ipywidgets", reason="the widgets need ipywidgets")
    from aare_lab.widgets import LiveSpectrum
    from aare_lab.widgets.live_spectrum import DEFAULT_KEV_EDGES

    sim, dark, frames, result = run
    spec = FinderSpec("frozen", n_pedestal=N_DARK, window_dtype="float64",
                      calibration=sim.calibration)
    with pytest.raises(ValueError, match="leave it out"):
        LiveSpectrum(frames, dark, spec=spec, gain=40.0, autostart=False, interactive=False)
    live = LiveSpectrum(frames, dark, spec=spec, interactive=False, chunk_frames=10)
    live.wait_finished(timeout=120)
    np.testing.assert_array_equal(live.edges, DEFAULT_KEV_EDGES)
    assert live.spectrum["energy"].attrs["units"] == "keV"
    np.testing.assert_array_equal(live.spectrum.to_numpy(), np.histogram(
        result["energy"].to_numpy(), bins=DEFAULT_KEV_EDGES)[0])
    live.close()


def test_find_refuses_a_pedestal_of_another_shape_than_the_calibration(run, tmp_path, capsys):
    sim, dark, frames, _ = run
    cal_path, frames_path, ped_path = (tmp_path / n for n in ("cal.nc", "f.npy", "ped.nc"))
    sim.calibration.save(cal_path)
    np.save(frames_path, frames)
    other = Pedestal((SHAPE[0], SHAPE[1] // 2), N_DARK)
    other.push_dark(dark[:, :, :SHAPE[1] // 2])
    other.save(ped_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["find", "--pedestal", str(ped_path), "--frames", str(frames_path),
                     "--calibration", str(cal_path), "--out", str(tmp_path / "o.nc"),
                     "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "ped.nc is for 32x32 frames" in err and "cal.nc for 32x64" in err
