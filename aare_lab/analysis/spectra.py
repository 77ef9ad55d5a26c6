"""Energy spectra of several finders on one binning, their ratios and peak fits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from aare_lab.analysis.fit import PeakFit, fit_peak
from aare_lab.callable_module import make_callable
from aare_lab.model.binning import DEFAULT_BINS, edges_for
from aare_lab.model.labels import as_labelled
from aare_lab.model.results import spectrum

_FIT_FIELDS = ("position", "position_err", "sigma", "sigma_err", "amplitude", "offset", "slope",
               "beta_ratio", "beta_ratio_err")


#: Run parameters of each spectrum, kept as coordinates over ``finder``.
RUN_COORDS = ("n_sigma", "cluster_size", "n_frames", "underflow", "overflow")


def spectra(results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset],
            labels: Sequence[str] | None = None, *, bins: int | np.ndarray = DEFAULT_BINS,
            range: tuple[float, float] | None = None,
            width: float | None = None) -> xr.DataArray:
    """Cluster-energy histograms of several results on common bins.

    Parameters
    ----------
    results
        Finder results, as a sequence or a mapping ``label -> result``.
    labels
        Names for a sequence (default: `aare_lab.model.labels.result_labels`).
    bins, range, width
        The binning, as for `aare_lab.model.results.spectrum`, chosen over all the results: by
        default 200 integer-aligned bins (ADU; one per ADU over a narrower span) or 200 equal
        bins (keV) that hold every cluster.

    Returns
    -------
    xarray.DataArray
        Counts over ``(finder, energy)`` with the edges as ``energy_lo``, ``energy_hi``,
        all three in the results' ``units`` (`spectrum_units`), and per finder the
        coordinates ``finder_name``, ``n_sigma``, ``cluster_size``, ``n_frames``,
        ``underflow`` and ``overflow`` (clusters outside the edges).

    Raises
    ------
    ValueError
        For results in different units (calibrated and uncalibrated).
    """
    labels, results = as_labelled(results, labels)
    units = {spectrum_units(r) for r in results}
    if len(units) > 1:
        raise ValueError("the results' energies are in different units "
                         f"({', '.join(sorted(units))}): compare calibrated (keV) and "
                         "uncalibrated (ADU) results separately")
    edges = edges_for([r["energy"].to_numpy() for r in results], bins, range, width,
                      integer=units != {"keV"})
    parts = [spectrum(r, bins=edges) for r in results]
    out = xr.concat(parts, dim=xr.DataArray(labels, dims="finder", name="finder"),
                    combine_attrs="drop")
    out = out.assign_coords(
        finder_name=("finder", [p.attrs["finder"] for p in parts]),
        **{name: ("finder", [p.attrs[name] for p in parts]) for name in RUN_COORDS})
    out.attrs = {"long_name": "clusters per energy bin"}
    return out


def spectrum_units(spectra: xr.DataArray) -> str:
    """The energy units of spectra (``"ADU"``, or ``"keV"`` with a JUNGFRAU calibration)."""
    return str(spectra["energy"].attrs.get("units", "ADU"))


def shown_energy(units: str, gain: float | None = None) -> tuple[float, str]:
    """How energies in ``units`` are shown: the factor they are multiplied by, and the unit
    shown; with ``gain`` (ADU per keV) ADU are shown in keV.

    Examples
    --------
    >>> shown_energy("ADU", 40.0), shown_energy("ADU")
    ((0.025, 'keV'), (1.0, 'ADU'))
    """
    return (1 / gain, "keV") if gain else (1.0, units)


def spectrum_ratio(spectra: xr.DataArray, reference: str | None = None) -> xr.DataArray:
    """Each finder's spectrum divided by the reference finder's (default: the first).

    Bins where the reference is empty are NaN.
    """
    reference = _reference(spectra, reference)
    ref = spectra.sel(finder=reference).astype(float)
    ratio = spectra.astype(float) / ref.where(ref > 0)
    ratio.name = "ratio"
    ratio.attrs = {"long_name": f"counts relative to {reference}", "reference": reference}
    return ratio


def spectrum_ratio_error(spectra: xr.DataArray, reference: str | None = None) -> xr.DataArray:
    """The Poisson uncertainty of `spectrum_ratio`: ``r * sqrt(1/a + 1/b)`` for counts ``a``
    over ``b``, an empty numerator counting as one.

    The counts are treated as independent, so for finders that share most clusters the
    error is an upper bound. Bins where the reference is empty are NaN.
    """
    reference = _reference(spectra, reference)
    a = spectra.astype(float)
    b = spectra.sel(finder=reference).astype(float).where(lambda v: v > 0)
    error = np.sqrt(np.maximum(a, 1.0) * (1.0 + a / b)) / b
    error.name = "ratio_error"
    error.attrs = {"long_name": f"uncertainty of the counts relative to {reference}",
                   "reference": reference}
    return error


def _reference(spectra: xr.DataArray, reference: str | None) -> str:
    reference = str(spectra["finder"][0].item()) if reference is None else reference
    if reference not in spectra["finder"].to_numpy():
        raise ValueError(f"no finder {reference!r} in the spectra; have "
                         f"{list(spectra['finder'].to_numpy())}")
    return reference


def fit_peaks(spectra: xr.DataArray, window: tuple[float, float] | None = None,
              lines=None) -> xr.Dataset:
    """Fit a gaussian, or a Kα/Kβ doublet, on a linear background to each finder's spectrum.

    Parameters
    ----------
    spectra
        From `spectra`, or the spectrum of one result (`aare_lab.model.results.spectrum`),
        fitted as the finder its ``finder`` attribute names.
    window
        ``(low, high)`` energy range of the fit; default: around each spectrum's highest bin
        (see `aare_lab.analysis.fit.fit_peak`).
    lines
        None for one gaussian, or the Kα and Kβ energies in keV for the doublet (as for
        `aare_lab.analysis.fit.fit_peak`).

    Returns
    -------
    xarray.Dataset
        Over ``finder``: ``position``, ``fwhm``, ``resolution`` (FWHM / position) and their
        ``*_err``, ``sigma``, ``amplitude``, ``offset``, ``slope``, ``window_lo``,
        ``window_hi``, energies in the spectra's units (`spectrum_units`); ``beta_ratio``
        (Kβ/Kα intensity) and its ``*_err``, ``alpha_line`` and ``beta_line`` (the line
        energies, keV), all four NaN for one gaussian. For a doublet ``position``,
        ``fwhm`` and ``resolution`` are Kα's.

    Raises
    ------
    ValueError
        Naming the finder whose fit failed.
    """
    if "finder" not in spectra.dims:
        spectra = spectra.expand_dims(finder=[str(spectra.attrs.get("finder") or "result")])
    fits = []
    centres = spectra["energy"].to_numpy()
    for label in spectra["finder"].to_numpy():
        try:
            fits.append(fit_peak(centres, spectra.sel(finder=label).to_numpy(), window, lines))
        except ValueError as err:
            raise ValueError(f"{label}: {err}") from None
    columns = {name: [getattr(f, name) for f in fits] for name in
               (*_FIT_FIELDS, "fwhm", "fwhm_err", "resolution", "resolution_err")}
    columns["window_lo"] = [f.window[0] for f in fits]
    columns["window_hi"] = [f.window[1] for f in fits]
    for k, name in enumerate(("alpha_line", "beta_line")):
        columns[name] = [np.nan if f.lines is None else f.lines[k] for f in fits]
    energy = spectrum_units(spectra)
    units = {"resolution": "1", "resolution_err": "1", "amplitude": "counts",
             "offset": "counts", "slope": f"counts/{energy}", "beta_ratio": "1",
             "beta_ratio_err": "1", "alpha_line": "keV", "beta_line": "keV"}
    return xr.Dataset({name: ("finder", np.asarray(values, float),
                              {"units": units.get(name, energy)})
                       for name, values in columns.items()},
                      coords={"finder": spectra["finder"].to_numpy()})


#: Clusters a spectrum needs before `fit_or_none` fits its peak.
MIN_FIT_COUNTS = 100


def fit_or_none(spectrum: xr.DataArray, label: str, window: tuple[float, float] | None = None,
                lines=None) -> xr.Dataset | None:
    """`fit_peaks` of one spectrum (over ``energy``) as finder ``label``, or None while it
    holds fewer than `MIN_FIT_COUNTS` clusters or no peak fits yet (also a fit whose
    position or FWHM error is not finite or exceeds the FWHM): for spectra that are still
    filling (a live run, a widget), where that is no error.

    Examples
    --------
    >>> from aare_lab.model.results import counts_spectrum
    >>> from aare_lab.model.spec import FinderSpec
    >>> empty = counts_spectrum(np.zeros(20, np.int64), np.arange(21.0), FinderSpec(), 0, 0, 0)
    >>> fit_or_none(empty, "frozen") is None
    True
    """
    if spectrum.sum() < MIN_FIT_COUNTS:
        return None
    try:
        fits = fit_peaks(spectrum.expand_dims(finder=[label]), window, lines)
    except ValueError:
        return None
    # On a flat or piled-up spectrum the fit "finds" a peak it cannot place: errors that
    # could not be estimated, or wider than the peak itself.
    width = fits["fwhm"].to_numpy()
    placed = all(np.isfinite(error).all() and (error < width).all()
                 for error in (fits["position_err"].to_numpy(), fits["fwhm_err"].to_numpy()))
    return fits if placed else None


def peak_fit(fits: xr.Dataset, label: str) -> PeakFit:
    """One finder's row of `fit_peaks` as a `aare_lab.analysis.fit.PeakFit` (to evaluate the
    curve)."""
    row = fits.sel(finder=label)
    lines = (float(row["alpha_line"]), float(row["beta_line"]))
    return PeakFit(**{name: float(row[name]) for name in _FIT_FIELDS},
                   window=(float(row["window_lo"]), float(row["window_hi"])),
                   lines=None if np.isnan(lines[0]) else lines)


# aare_lab.analysis.spectra(...) calls spectra(...).
make_callable(__name__)
