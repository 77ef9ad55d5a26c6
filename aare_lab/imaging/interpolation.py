"""η interpolation: maps from flat-field clusters to sub-pixel photon positions.

Under a flat field the true position inside a pixel is uniform, so the cumulative
distribution of η is the position: `build_interpolation` histograms (η_x, η_y, energy) of
flat-field clusters and turns each energy bin's 2-D histogram into two lookup tables,
PSI aare's ``Interpolator`` value for value. With ``method="rosenblatt"`` (aare's
``rosenblatttransform``, the default) ``ietax`` is the marginal CDF of η_x and ``ietay``
the CDF of η_y conditioned on η_x, so (ietax, ietay) is uniform on the unit square (the
Rosenblatt transform); ``method="conditional"`` (aare's constructor from the cube) makes
each the CDF conditioned on the other η. Both CDFs start after their first bin: the value
at bin i is the share of the counts in bins 1..i, as aare computes it.

`interpolate` looks each cluster's η up in its energy bin (the bin whose lower edge is
the last one below the value, as aare's ``last_smaller``; no interpolation between bins)
and places the photon, in pixel units with pixel (column c, row r) spanning [c, c + 1) x
[r, r + 1):

- η2 and full η2: ``x = (centre column + 0.5) + ietax + dX`` with dX = -1 when the block of
  largest sum lies left of the centre, else 0 (y likewise, dY = -1 for blocks above);
- η3 and cross η3: ``x = centre column + ietax`` (aare's convention for these kinds).

Noise makes some η fall outside the kind's range (η2 above 1 beside a negative tap).
aare looks values below the first edge up in the first bin and raises for values beyond
the last edge; here those take the last bin instead (counted in the photons'
``eta_clamped`` attribute), so that one noisy cluster does not stop the run. Clusters
whose energy lies beyond the last energy edge (pile-up, not photons of the maps' energies)
get NaN positions, counted in ``outside_map``. Where aare defines the result the two agree
bit for bit (tests/test_imaging_interpolation.py).
"""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from aare_lab.storage.netcdf import read_netcdf, write_netcdf

from . import _lookup_loops
from .eta import ETA_FUNCTIONS, array_module

#: The attribute (name, version) every interpolation file carries.
FILE_MARK = ("aare_lab_interpolation", 1)
_FILE_HINT = "write one with aare_lab.imaging.save_interpolation or `aare-lab interpolate`"
#: The range of each η kind (the default histogram range).
ETA_RANGES = {"eta2": (0.0, 1.0), "full_eta2": (0.0, 1.0), "eta3": (-1.0, 1.0),
              "cross_eta3": (-1.0, 1.0)}
METHODS = ("rosenblatt", "conditional")


def _edges(bins, values, value_range) -> np.ndarray:
    if np.ndim(bins) == 1:
        edges = np.asarray(bins, np.float64)
        if len(edges) < 3 or np.any(np.diff(edges) <= 0):
            raise ValueError("bin edges must increase and give at least 2 bins")
        return edges
    if int(bins) < 2 and value_range is not None:
        raise ValueError(f"the η histogram needs at least 2 bins per axis, got {bins}")
    return np.histogram_bin_edges(values, bins=int(bins), range=value_range).astype(np.float64)


def _shifted_cdf(cube: np.ndarray, axis: int) -> np.ndarray:
    """The CDF along ``axis`` without its first bin: (cumsum - first) / (total - first),
    left alone where that total is 0 (aare's normalisation, additions in its order)."""
    cumulative = np.cumsum(cube, axis=axis)
    first = np.take(cube, [0], axis=axis)
    norm = np.take(cumulative, [-1], axis=axis) - first
    return (cumulative - first) / np.where(norm == 0, 1.0, norm)


def cdf_maps(cube: np.ndarray, method: str = "rosenblatt") -> tuple[np.ndarray, np.ndarray]:
    """``(ietax, ietay)``, each shaped as the (η_x, η_y, energy) ``cube``, as aare's
    Interpolator computes them (see the module's description of ``method``)."""
    cube = np.asarray(cube, np.float64)
    if method == "conditional":
        return _shifted_cdf(cube, 0), _shifted_cdf(cube, 1)
    if method != "rosenblatt":
        raise ValueError(f"unknown interpolation method {method!r}: use one of {METHODS}")
    marginal = np.cumsum(cube, axis=1)[:, -1, :]  # summed along η_y in order, as aare does
    marginal[0] = 0.0
    marginal = np.cumsum(marginal, axis=0)
    norm = marginal[-1]
    marginal[1:] /= np.where(norm == 0, 1.0, norm)
    ietax = np.broadcast_to(marginal[:, None, :], cube.shape).copy()
    return ietax, _shifted_cdf(cube, 1)


def histogram(result: xr.Dataset, bins=100, energy_bins=1, eta: str = "eta2",
              eta_range: tuple[float, float] | None = None) -> xr.Dataset:
    """The (η_x, η_y, energy) histogram of a result's clusters, the maps' input.

    Parameters
    ----------
    result
        A finder result (its ``window``), on the host or the device.
    bins
        Bins per η axis over ``eta_range``, or their edges.
    energy_bins
        Energy bins over the clusters' η sums, the first and last open (from -inf, to
        inf), or their edges as given (ADU, or keV for a result in keV).
    eta
        The η kind (`aare_lab.imaging.ETA_FUNCTIONS`).
    eta_range
        The η range of ``bins``; default the kind's full range.

    Returns
    -------
    xarray.Dataset
        ``histogram``: counts over ``(eta_x, eta_y, energy)`` (bin centres), with the edges
        as coordinates ``eta_x_edges``, ``eta_y_edges`` and ``energy_edges``.
    """
    etas = _etas(result, eta)
    values = [np.asarray(_host(etas[name].data), np.float64) for name in ("eta_x", "eta_y", "sum")]
    value_range = ETA_RANGES[eta] if eta_range is None else eta_range
    edges = [_edges(bins, values[0], value_range), _edges(bins, values[1], value_range),
             _edges(energy_bins, values[2], None)]
    energy_centres = 0.5 * (edges[2][1:] + edges[2][:-1])
    if np.ndim(energy_bins) == 0:
        # Open outer bins: every cluster of a later run has a map.
        edges[2][0], edges[2][-1] = -np.inf, np.inf
    counts, _ = np.histogramdd(np.stack(values, axis=1), bins=edges)
    units = result["energy"].attrs.get("units", "ADU") if "energy" in result else "ADU"
    return xr.Dataset(
        {"histogram": (("eta_x", "eta_y", "energy"), counts,
                       {"long_name": "flat-field clusters per (η_x, η_y, energy) bin"})},
        coords={"eta_x": 0.5 * (edges[0][1:] + edges[0][:-1]),
                "eta_y": 0.5 * (edges[1][1:] + edges[1][:-1]),
                "energy": ("energy", energy_centres, {"units": units}),
                "eta_x_edges": edges[0], "eta_y_edges": edges[1],
                "energy_edges": ("energy_edges", edges[2], {"units": units})},
        attrs={"eta": eta})


def build_interpolation(result: xr.Dataset, bins=100, energy_bins=1, eta: str = "eta2",
                        method: str = "rosenblatt",
                        eta_range: tuple[float, float] | None = None) -> xr.Dataset:
    """Interpolation maps from a flat-field result, one per energy bin.

    Parameters
    ----------
    result
        Clusters of a flat (uniform) illumination.
    bins, energy_bins, eta, eta_range
        As for `histogram`.
    method
        ``"rosenblatt"`` (marginal CDF of η_x, CDF of η_y given η_x) or
        ``"conditional"`` (each CDF given the other η).

    Returns
    -------
    xarray.Dataset
        ``ietax`` and ``ietay`` over the histogram's dimensions, and the ``histogram``;
        attributes ``eta``, ``method`` and the file mark, for `save_interpolation`.

    Examples
    --------
    >>> windows = np.random.default_rng(0).integers(1, 100, (500, 3, 3)).astype(np.int32)
    >>> flat = xr.Dataset({"window": (("cluster", "wy", "wx"), windows)})
    >>> maps = build_interpolation(flat, bins=20)
    >>> maps["ietax"].shape
    (20, 20, 1)
    """
    maps = histogram(result, bins, energy_bins, eta, eta_range)
    counts = maps["histogram"]
    ietax, ietay = cdf_maps(counts.to_numpy(), method)
    maps["ietax"] = (counts.dims, ietax, {"long_name": "transformed η_x: position in the "
                                                       "pixel along x"})
    maps["ietay"] = (counts.dims, ietay, {"long_name": "transformed η_y: position in the "
                                                       "pixel along y"})
    maps.attrs.update({"method": method, FILE_MARK[0]: FILE_MARK[1],
                       "n_clusters": int(counts.sum())})
    return maps


def save_interpolation(maps: xr.Dataset, path: str | os.PathLike) -> None:
    """Write maps from `build_interpolation` to netCDF (whole or not at all)."""
    write_netcdf(maps, path)


def load_interpolation(path: str | os.PathLike) -> xr.Dataset:
    """Read maps written by `save_interpolation`.

    Raises
    ------
    ValueError
        For a file that is not an interpolation file, naming it.
    """
    return read_netcdf(path, "an interpolation file", _FILE_HINT, FILE_MARK)


def _host(array) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)


def _etas(result, eta: str) -> xr.Dataset:
    if eta not in ETA_FUNCTIONS:
        raise ValueError(f"unknown η kind {eta!r}: use one of {tuple(ETA_FUNCTIONS)}")
    return ETA_FUNCTIONS[eta](result)


def _bin_index(xp, edges, values):
    """aare's ``last_smaller``: the last edge below the value (the first bin for values at
    or below the first edge); ``len(edges) - 1`` means beyond the last edge."""
    return xp.searchsorted(edges[1:], values, side="left")


def _map_arrays(xp, maps):
    return ([xp.asarray(maps[name].to_numpy()) for name in
             ("eta_x_edges", "eta_y_edges", "energy_edges")],
            [xp.asarray(maps[name].to_numpy()) for name in ("ietax", "ietay")])


def _place_arrays(xp, etas, energy, maps, result):
    """Positions by array expressions (CuPy): x, y, beyond the energies, η clamped."""
    edges, (ietax, ietay) = _map_arrays(xp, maps)
    ix = _bin_index(xp, edges[0], etas["eta_x"].data)
    iy = _bin_index(xp, edges[1], etas["eta_y"].data)
    ie = _bin_index(xp, edges[2], energy)
    inside = ie < len(edges[2]) - 1
    clamped = ((ix == len(edges[0]) - 1) | (iy == len(edges[1]) - 1)) & inside
    at = (xp.minimum(ix, len(edges[0]) - 2), xp.minimum(iy, len(edges[1]) - 2),
          xp.where(inside, ie, 0))
    ux, uy = ietax[at], ietay[at]
    column = xp.asarray(result["x"].data).astype(xp.float64)
    row = xp.asarray(result["y"].data).astype(xp.float64)
    if "corner" in etas:
        corner = etas["corner"].data
        x = column + 0.5 + ux + xp.where(corner % 2 == 0, -1.0, 0.0)
        y = row + 0.5 + uy + xp.where(corner < 2, -1.0, 0.0)
    else:
        x, y = column + ux, row + uy
    nan = xp.float64(np.nan)
    return xp.where(inside, x, nan), xp.where(inside, y, nan), ~inside, clamped


def _place_compiled(xp, etas, energy, maps, result):
    """`_place_arrays` by a compiled loop (NumPy)."""
    edges, (ietax, ietay) = _map_arrays(np, maps)
    n = len(energy)
    x, y, flags = np.empty(n), np.empty(n), np.empty(n, np.uint8)
    corner = etas["corner"].to_numpy() if "corner" in etas else np.empty(0, np.int8)
    _lookup_loops.place(etas["eta_x"].to_numpy(), etas["eta_y"].to_numpy(), energy, corner,
                        result["x"].to_numpy(), result["y"].to_numpy(), *edges, ietax, ietay,
                        x, y, flags)
    return x, y, flags == 1, flags == 2


def interpolate(result: xr.Dataset, maps: xr.Dataset) -> xr.Dataset:
    """Sub-pixel photon positions of a result's clusters through maps of the same η kind.

    Parameters
    ----------
    result
        A finder result (host or device windows; the photons stay where they are).
    maps
        From `build_interpolation` or `load_interpolation`.

    Returns
    -------
    xarray.Dataset
        On ``cluster``: ``x``, ``y`` (pixel units, see the module), ``energy`` (the η's sum,
        float64) and ``frame_number``; attributes ``eta``, ``frame_shape``,
        ``eta_clamped`` and ``outside_map`` (see the module).
    """
    kind = maps.attrs["eta"]
    etas = _etas(result, kind)
    xp = array_module(etas["eta_x"].data)
    energy = etas["sum"].data.astype(xp.float64)
    place = _place_compiled if xp is np else _place_arrays
    x, y, beyond, clamped = place(xp, etas, energy, maps, result)
    attrs = {"eta": kind, "outside_map": int(beyond.sum()), "eta_clamped": int(clamped.sum()),
             "frame_shape": np.asarray(result.attrs.get("frame_shape", (0, 0)), np.int64)}
    return xr.Dataset(
        {"x": ("cluster", x, {"long_name": "interpolated column", "units": "pixel"}),
         "y": ("cluster", y, {"long_name": "interpolated row", "units": "pixel"}),
         "energy": ("cluster", energy, {"long_name": f"{kind} sum",
                                        "units": result["energy"].attrs.get("units", "ADU")
                                        if "energy" in result else "ADU"}),
         "frame_number": ("cluster", result["frame_number"].data)
         if "frame_number" in result else ("cluster", xp.zeros(len(x), xp.int64))},
        attrs=attrs)


def image(photons: xr.Dataset, subpixels: int = 5,
          frame_shape: tuple[int, int] | None = None) -> xr.DataArray:
    """Photons counted on a grid of ``subpixels`` x ``subpixels`` bins per pixel.

    Parameters
    ----------
    photons
        From `interpolate` (NaN positions are left out), or any Dataset with ``x``, ``y``
        in pixel units.
    subpixels
        Bins per pixel along each axis (1: the pixel grid).
    frame_shape
        ``(ny, nx)`` in pixels; default the photons' ``frame_shape`` attribute.

    Returns
    -------
    xarray.DataArray
        Counts over ``(y, x)``, the coordinates the bin centres in pixel units.
    """
    shape = tuple(int(n) for n in (frame_shape if frame_shape is not None
                                   else photons.attrs["frame_shape"]))
    if subpixels < 1 or len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"an image needs subpixels >= 1 and a frame shape (ny, nx), got "
                         f"{subpixels} and {shape}")
    x, y = _host(photons["x"].data), _host(photons["y"].data)
    keep = np.isfinite(x) & np.isfinite(y)
    y_edges = np.linspace(0, shape[0], shape[0] * subpixels + 1)
    x_edges = np.linspace(0, shape[1], shape[1] * subpixels + 1)
    counts, _, _ = np.histogram2d(y[keep], x[keep], bins=(y_edges, x_edges))
    return xr.DataArray(
        counts.astype(np.int64), dims=("y", "x"), name="photons",
        coords={"y": ("y", 0.5 * (y_edges[1:] + y_edges[:-1]), {"units": "pixel"}),
                "x": ("x", 0.5 * (x_edges[1:] + x_edges[:-1]), {"units": "pixel"})},
        attrs={"long_name": "interpolated photons per sub-pixel", "subpixels": subpixels,
               "eta": photons.attrs.get("eta", "")})
