"""Per-pixel spectra of a result's clusters, counted at their seed pixel.

Which value a pixel's spectrum counts decides whose gain its line measures:

- ``"single"`` (the default): the seed tap alone, of clusters whose seed holds at least
  ``min_fraction`` of the central 3x3's sum (single-pixel events). Only the pixel's own
  gain enters, so a fit of its line is that pixel's gain; charge shared below the
  fraction leaves a low tail that the fit range should exclude.
- ``"cluster"``: the cluster energy (window sum), by seed pixel. Every photon counts, but
  the sum mixes in the neighbours' gains (a shared photon is read by several pixels), which
  pulls each pixel's line toward its neighbourhood's mean gain.

Given a ``gain`` map, the values are in keV instead, every tap through its own pixel's
gain (`aare_lab.calibration.apply_gain`'s ``"per_tap"``): a pixel whose gain is off by δ
then shows its line off by about its share of the charge times δ, and the neighbours'
gains no longer move it; `aare_lab.calibration.calibrate` iterates on that.

A charge cloud of a quarter pixel's width leaves no photon whole in one pixel (6 µm rms on
25 µm pixels keeps at most about 93 % of the charge in the hit pixel), so single-pixel
events put the line below its energy by that share, alike in every pixel: the map is right
relative to itself, not in absolute keV. The clusters' sums hold all the charge, which is
why `calibrate` fits those.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from aare_lab.model.results import energy_coords

from .apply import tap_gains

SELECTIONS = ("single", "cluster")


def seed_values(result: xr.Dataset, selection: str = "single", min_fraction: float = 0.9,
                gain: xr.Dataset | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The value each cluster adds to its seed pixel's spectrum, and which clusters count.

    Returns
    -------
    values, keep
        float64 per cluster, and a boolean mask of the clusters that count.
    """
    if selection not in SELECTIONS:
        raise ValueError(f"unknown selection {selection!r}: use one of {SELECTIONS}")
    windows = result["window"].to_numpy()
    cy, cx = windows.shape[1] // 2, windows.shape[2] // 2
    per_tap = None if gain is None else tap_gains(result, gain)[0]
    if selection == "cluster":
        if per_tap is None:
            values = result["energy"].to_numpy().astype(np.float64)
        else:
            values = (windows / per_tap).sum(axis=(1, 2))
        return values, np.ones(len(values), bool)
    seed = windows[:, cy, cx].astype(np.float64)
    central = windows[:, cy - 1:cy + 2, cx - 1:cx + 2].sum(axis=(1, 2), dtype=np.float64)
    keep = (seed > 0) & (seed >= min_fraction * central)
    return (seed if per_tap is None else seed / per_tap[:, cy, cx]), keep


def pixel_spectra(result: xr.Dataset, bins: int = 100, range: tuple[float, float] | None = None,
                  selection: str = "single", min_fraction: float = 0.9,
                  gain: xr.Dataset | None = None) -> xr.DataArray:
    """Histogram of each pixel's clusters (see the module for ``selection``).

    Parameters
    ----------
    result
        A finder result (energies in ADU).
    bins, range
        Equal bins over ``(low, high)`` (ADU, or keV with a ``gain``); default the
        selected values' range.
    selection, min_fraction, gain
        Which value counts (see the module).

    Returns
    -------
    xarray.DataArray
        int32 counts over ``(y, x, energy)``, the energy coordinates as
        `aare_lab.model.results.spectrum`'s; attributes ``selection``, ``min_fraction`` and
        ``outside`` (selected clusters beyond the range).

    Examples
    --------
    >>> w = np.zeros((3, 3, 3), np.int32); w[:, 1, 1] = [100, 300, 310]
    >>> r = xr.Dataset({"window": (("cluster", "wy", "wx"), w),
    ...                 "y": ("cluster", [0, 1, 1]), "x": ("cluster", [0, 0, 0])},
    ...                attrs={"frame_shape": [2, 1]})
    >>> pixel_spectra(r, bins=4, range=(0, 400)).sum("energy").values.ravel().tolist()
    [1, 2]
    """
    values, keep = seed_values(result, selection, min_fraction, gain)
    ny, nx = (int(n) for n in result.attrs["frame_shape"])
    if range is None:
        range = (float(values[keep].min()), float(values[keep].max())) if keep.any() else (0, 1)
    edges = np.linspace(range[0], range[1], int(bins) + 1)
    index = np.searchsorted(edges, values, side="right") - 1
    index[values == edges[-1]] = bins - 1  # numpy.histogram's closed last bin
    inside = keep & (index >= 0) & (index < bins)
    pixel = result["y"].to_numpy().astype(np.int64) * nx + result["x"].to_numpy()
    flat = pixel[inside] * bins + index[inside]
    counts = np.bincount(flat, minlength=ny * nx * bins).astype(np.int32)
    return xr.DataArray(
        counts.reshape(ny, nx, bins), dims=("y", "x", "energy"), name="counts",
        coords=energy_coords(edges, "ADU" if gain is None else "keV"),
        attrs={"long_name": "clusters per pixel and energy bin", "selection": selection,
               "min_fraction": min_fraction, "outside": int((keep & ~inside).sum())})
