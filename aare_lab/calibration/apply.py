"""Cluster energies in keV through a gain map.

Two ways, both offered: ``"seed"`` divides the cluster's ADU sum by its seed pixel's
gain; it is
exact for single-pixel photons and a good approximation when the neighbours' gains are
alike. ``"per_tap"`` divides each tap by its own pixel's gain before summing, which is
exact for shared photons too. Pixels without a gain (flagged in the map, or taps beyond
the frame) use the median of the map's gains; the clusters that needed it are counted in
the ``energy`` variable's ``fallback_gain_clusters`` attribute.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

METHODS = ("seed", "per_tap")


def tap_gains(result: xr.Dataset, gain: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Each tap's pixel gain ``(cluster, wy, wx)``, the median gain where the map has none,
    and which clusters needed that fallback."""
    gains = gain["gain"].to_numpy()
    ny, nx = gains.shape
    if tuple(int(n) for n in result.attrs.get("frame_shape", (ny, nx))) != (ny, nx):
        raise ValueError(f"the gain map is {ny}x{nx} pixels but the result's frames are "
                         f"{tuple(result.attrs['frame_shape'])}: use a map of this detector")
    known = np.isfinite(gains) & (gains > 0)
    fallback = float(np.median(gains[known])) if known.any() else np.nan
    filled = np.where(known, gains, fallback)
    y, x = result["y"].to_numpy(), result["x"].to_numpy()
    rows = y[:, None, None] + result["wy"].to_numpy()[None, :, None]
    cols = x[:, None, None] + result["wx"].to_numpy()[None, None, :]
    inside = (rows >= 0) & (rows < ny) & (cols >= 0) & (cols < nx)
    rows, cols = np.clip(rows, 0, ny - 1), np.clip(cols, 0, nx - 1)
    return np.where(inside, filled[rows, cols], fallback), ~(inside & known[rows, cols])


def apply_gain(result: xr.Dataset, gain: xr.Dataset, method: str = "seed") -> xr.Dataset:
    """A copy of ``result`` whose ``energy`` is in keV (windows stay in ADU).

    Parameters
    ----------
    result
        A finder result in ADU.
    gain
        From `aare_lab.calibration.gain_map`, over the result's frame.
    method
        ``"seed"`` or ``"per_tap"`` (see the module).

    Returns
    -------
    xarray.Dataset
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: use one of {METHODS}")
    if result["energy"].attrs.get("units", "ADU") != "ADU":
        raise ValueError("the result's energies are not in ADU: apply a gain map to an "
                         "uncalibrated result")
    per_tap, missing = tap_gains(result, gain)
    windows = result["window"].to_numpy()
    cy, cx = windows.shape[1] // 2, windows.shape[2] // 2
    if method == "seed":
        energy = result["energy"].to_numpy() / per_tap[:, cy, cx]
        needed = missing[:, cy, cx]
    else:
        energy = (windows / per_tap).sum(axis=(1, 2))
        needed = missing.any(axis=(1, 2))
    calibrated = result.copy()
    calibrated["energy"] = ("cluster", energy,
                            {"long_name": f"cluster energy (gain by {method})", "units": "keV",
                             "fallback_gain_clusters": int(needed.sum())})
    calibrated.attrs["gain_method"] = method
    return calibrated
