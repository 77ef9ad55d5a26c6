"""A gain map from a run of one fluorescence line, iterated until the neighbours' gains
no longer blur it.

The first round fits every pixel's spectrum of cluster sums in keV through a uniform map
(the run's most common cluster energy over the line's), every later round through the
previous round's map, each tap by its own pixel's gain (`aare_lab.calibration.pixel_spectra`),
and takes the fitted line over its energy times the map as the next map
(`aare_lab.calibration.gain_map`). A photon leaves about a third of its charge in the
neighbours, so each round shrinks the map's error by roughly that factor, and the fit range
is the same in keV for every pixel. Four rounds reach the fits' statistical precision on
the simulator's MÖNCH defaults (docs/imaging.md).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from .gain_map import gain_map
from .pixel_spectra import pixel_spectra


def nominal_gain(result: xr.Dataset, line_kev: float, bins: int = 200) -> float:
    """The most common cluster energy (ADU) over ``line_kev``: the run's mean gain when
    the line dominates its spectrum."""
    energy = result["energy"].to_numpy()
    low, high = np.percentile(energy, [1, 99])
    counts, edges = np.histogram(energy, bins=bins, range=(low, high))
    peak = np.argmax(counts)
    return float(0.5 * (edges[peak] + edges[peak + 1]) / line_kev)


def calibrate(result: xr.Dataset, line_kev: float, fit_range: tuple[float, float],
              bins: int = 60, kbeta_kev: float | None = None, iterations: int = 4,
              min_counts: int = 30, progress: bool = False) -> xr.Dataset:
    """The gain map of a run under one line (and its Kβ), in ``iterations`` rounds.

    Parameters
    ----------
    result
        A finder result in ADU of a run with one fluorescence line.
    line_kev, kbeta_kev, min_counts
        As for `aare_lab.calibration.gain_map`.
    fit_range
        ``(low, high)`` keV of the fits, also the spectra's range, over ``bins`` bins.
    iterations
        Rounds of fits, >= 1.
    progress
        Show a progress bar over the rounds.

    Returns
    -------
    xarray.Dataset
        The last round's gain map (ADU/keV), with attributes ``iterations`` and
        ``nominal_gain``.
    """
    if iterations < 1:
        raise ValueError(f"calibrate needs at least 1 iteration, got {iterations}")
    ny, nx = (int(n) for n in result.attrs["frame_shape"])
    nominal = nominal_gain(result, line_kev)
    gain = xr.Dataset({"gain": (("y", "x"), np.full((ny, nx), nominal))})
    for _ in tqdm(range(iterations), desc="gain map", disable=not progress):
        spectra = pixel_spectra(result, bins=bins, range=fit_range, selection="cluster",
                                gain=gain)
        gain = gain_map(spectra, line_kev, fit_range, kbeta_kev=kbeta_kev,
                        min_counts=min_counts, reference=gain)
    gain.attrs.update(iterations=int(iterations), nominal_gain=nominal)
    return gain
