"""Spatial resolution from an edge: the edge-spread function of photons and the width of
its line spread.

Photons from a flat field behind a straight absorbing edge (`aare_lab.simulate.Edge`, or
a knife edge in the beam) are counted against their distance from the edge along its
normal: the edge-spread function (ESF). Its derivative, the line-spread function (LSF), is
how far the positions scatter across a sharp line. The counts of a few thousand photons are
too noisy to differentiate bin by bin, so the ESF is fitted by a gaussian LSF's integral,
``background + height * Φ((d - offset) / sigma)``, and the LSF's FWHM is
``2 sqrt(2 ln 2) sigma``. For positions at pixel centres the LSF is about a box of a
pixel's width; interpolation narrows it toward the true resolution (docs/imaging.md).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.optimize import curve_fit
from scipy.special import ndtr

#: FWHM of a gaussian per unit of its sigma.
FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))


def _esf_model(d, background, height, offset, sigma):
    return background + height * ndtr((d - offset) / sigma)


def edge_spread(x, y, edge, bin_width: float = 0.05, half_range: float = 3.0) -> xr.Dataset:
    """The edge-spread function of positions ``x``, ``y`` (pixel units) behind ``edge``,
    and its gaussian fit.

    Parameters
    ----------
    x, y
        Photon positions (NaN positions are left out).
    edge
        An `aare_lab.simulate.Edge` (its ``distance``).
    bin_width, half_range
        Distance bins (pixels) over ``[-half_range, half_range]`` from the edge.

    Returns
    -------
    xarray.Dataset
        ``esf`` (photons per distance bin) over ``distance``; attributes ``offset`` and
        ``sigma`` of the fit (pixels) and ``fwhm``, the fitted LSF's FWHM (pixels).

    Examples
    --------
    >>> from aare_lab.simulate import Edge
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.uniform(0, 20, 200_000), rng.uniform(0, 20, 200_000)
    >>> x, y = x[x > 10] + rng.normal(0, 0.1, (x > 10).sum()), y[x > 10]
    >>> round(edge_spread(x, y, Edge(10.0)).attrs["fwhm"], 2)
    0.24
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    distance = edge.distance(y, x)
    distance = distance[np.isfinite(distance)]
    bins = np.arange(-half_range, half_range + bin_width / 2, bin_width)
    counts, _ = np.histogram(distance, bins)
    centres = 0.5 * (bins[1:] + bins[:-1])
    start = [counts[: len(counts) // 4].mean(), np.ptp(counts), 0.0, 0.3]
    (background, height, offset, sigma), _ = curve_fit(_esf_model, centres, counts, p0=start)
    sigma = abs(sigma)
    return xr.Dataset(
        {"esf": ("distance", counts, {"long_name": "photons per distance bin"})},
        coords={"distance": ("distance", centres,
                             {"long_name": "distance from the edge (open side positive)",
                              "units": "pixel"})},
        attrs={"offset": float(offset), "sigma": float(sigma),
               "fwhm": float(FWHM_PER_SIGMA * sigma), "n_photons": int(counts.sum())})
