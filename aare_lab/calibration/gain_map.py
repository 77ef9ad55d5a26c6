"""Gain maps: each pixel's line position in ADU over the line's energy, with the fit's
quality and CF flags for pixels that could not be fitted."""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from aare_lab.flags import cf_flags
from aare_lab.storage.netcdf import read_netcdf, write_netcdf

from .linefit import fit_lines

#: The attribute (name, version) every gain-map file carries.
FILE_MARK = ("aare_lab_gain_map", 1)
_FILE_HINT = "write one with aare_lab.calibration.save_gain_map or `aare-lab gainmap`"
#: CF flag codes of a gain map's ``flag``.
FLAGS = ("ok", "too_few_counts", "not_converged", "peak_outside_fit_range")
OK, TOO_FEW_COUNTS, NOT_CONVERGED, OUTSIDE = range(4)


def _start(x, counts, doublet):
    """Start parameters from each spectrum: its maximum, where it is, and the counts' rms
    width around it (within a bin and a quarter of the range)."""
    peak = np.argmax(counts, axis=1)
    mu = x[peak]
    total = np.maximum(counts.sum(axis=1), 1)
    width = np.sqrt((counts * (x[None] - mu[:, None]) ** 2).sum(axis=1) / total)
    bin_width = x[1] - x[0]
    sigma = np.clip(width / 2, bin_width, (x[-1] - x[0]) / 4)
    start = [counts.max(axis=1).astype(float), mu, sigma]
    if doublet:
        start.append(np.full(len(mu), 0.15))
    return np.stack(start, axis=1)


def gain_map(spectra: xr.DataArray, line_kev: float, fit_range: tuple[float, float] | None = None,
             kbeta_kev: float | None = None, min_counts: int = 30,
             reference: xr.Dataset | None = None) -> xr.Dataset:
    """Fit a line in every pixel's spectrum and divide its position by its energy.

    Parameters
    ----------
    spectra
        From `aare_lab.calibration.pixel_spectra`: in ADU, or in keV through the
        ``reference`` map.
    line_kev
        The fitted line's energy (Cu Kα: 8.05 keV).
    fit_range
        ``(low, high)`` of the fit in the spectra's units; default their range. Keep it on the line
        (and its Kβ with ``kbeta_kev``), clear of the charge-sharing tail below.
    kbeta_kev
        Fit the Kα/Kβ doublet with the Kβ at ``kbeta_kev`` (its position scales with the
        Kα's, its share is free); None: one gaussian.
    min_counts
        Pixels with fewer counts in the fit range are not fitted (flag ``too_few_counts``).
    reference
        The gain map keV spectra were made with: each pixel's new gain is its reference
        gain times the line's fitted position over ``line_kev``.

    Returns
    -------
    xarray.Dataset
        Over ``(y, x)``: ``gain`` (ADU/keV, NaN where flagged) and ``gain_error``, the fit's
        ``peak``, ``peak_error``, ``sigma``, ``amplitude`` (and ``kbeta_ratio``), ``chi2``
        and ``ndof``, ``counts`` in the fit range and ``flag`` (CF flags `FLAGS`).
    """
    energy = spectra["energy"].to_numpy()
    low, high = (energy[0], energy[-1]) if fit_range is None else fit_range
    use = (energy >= low) & (energy <= high)
    x = energy[use]
    ny, nx = spectra.sizes["y"], spectra.sizes["x"]
    counts = spectra.to_numpy()[:, :, use].reshape(ny * nx, len(x)).astype(np.float64)
    total = counts.sum(axis=1)
    fitted = total >= min_counts
    doublet = None if kbeta_kev is None else kbeta_kev / line_kev
    k = 3 if doublet is None else 4
    par = np.full((ny * nx, k), np.nan)
    par_err = np.full((ny * nx, k), np.nan)
    chi2 = np.full(ny * nx, np.nan)
    flag = np.where(fitted, OK, TOO_FEW_COUNTS).astype(np.uint8)
    if fitted.any():
        out = fit_lines(x, counts[fitted], _start(x, counts[fitted], doublet is not None),
                        doublet_ratio=doublet)
        par[fitted], par_err[fitted], chi2[fitted] = out["par"], out["par_err"], out["chi2"]
        index = np.flatnonzero(fitted)
        flag[index[~out["converged"]]] = NOT_CONVERGED
        mu, sigma = out["par"][:, 1], out["par"][:, 2]
        outside = ~((mu > low) & (mu < high) & (sigma > 0) & (sigma < high - low))
        flag[index[outside & out["converged"]]] = OUTSIDE
    in_kev = spectra["energy"].attrs.get("units") == "keV"
    if in_kev != (reference is not None):
        raise ValueError("spectra in keV need the reference gain map they were made with, "
                         "and spectra in ADU none")
    scale = 1.0 if reference is None else reference["gain"].to_numpy().ravel()
    ok = (flag == OK) & np.isfinite(scale)
    gain = np.where(ok, scale * par[:, 1] / line_kev, np.nan)
    gain_error = np.where(ok, scale * par_err[:, 1] / line_kev, np.nan)

    units = "keV" if in_kev else "ADU"

    def grid(values):
        return values.reshape(ny, nx)

    data = {
        "gain": (("y", "x"), grid(gain), {"long_name": "gain", "units": "ADU/keV"}),
        "gain_error": (("y", "x"), grid(gain_error),
                       {"long_name": "gain uncertainty (fit)", "units": "ADU/keV"}),
        "peak": (("y", "x"), grid(par[:, 1]), {"long_name": "fitted line position",
                                               "units": units}),
        "peak_error": (("y", "x"), grid(par_err[:, 1]), {"units": units}),
        "sigma": (("y", "x"), grid(par[:, 2]), {"long_name": "fitted line rms",
                                                "units": units}),
        "amplitude": (("y", "x"), grid(par[:, 0]), {"long_name": "fitted line height"}),
        "chi2": (("y", "x"), grid(chi2), {"long_name": "chi-square of the fit"}),
        "ndof": (("y", "x"), grid(np.where(fitted, len(x) - k, 0)).astype(np.int64),
                 {"long_name": "degrees of freedom of the fit"}),
        "counts": (("y", "x"), grid(total).astype(np.int64),
                   {"long_name": "counts in the fit range"}),
        "flag": (("y", "x"), grid(flag), cf_flags(range(len(FLAGS)), FLAGS, "fit outcome")),
    }
    if doublet is not None:
        data["kbeta_ratio"] = (("y", "x"), grid(par[:, 3]),
                               {"long_name": "fitted Kβ/Kα height ratio"})
    return xr.Dataset(
        data, coords={"y": np.arange(ny), "x": np.arange(nx)},
        attrs={"line_kev": float(line_kev), "kbeta_kev": np.nan if kbeta_kev is None
               else float(kbeta_kev), "fit_range": np.array([low, high], np.float64),
               "selection": spectra.attrs.get("selection", ""), FILE_MARK[0]: FILE_MARK[1]})


def save_gain_map(gain: xr.Dataset, path: str | os.PathLike) -> None:
    """Write a gain map from `gain_map` to netCDF (whole or not at all)."""
    write_netcdf(gain, path)


def load_gain_map(path: str | os.PathLike) -> xr.Dataset:
    """Read a gain map written by `save_gain_map`.

    Raises
    ------
    ValueError
        For a file that is not a gain map, naming it.
    """
    return read_netcdf(path, "a gain-map file", _FILE_HINT, FILE_MARK)
