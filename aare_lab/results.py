"""The result model: one xarray Dataset per finder run, NumPy-backed, saved as netCDF.

Variable and attribute names are a public contract (the CLI writes them, other tools read
them):

- ``frame_number(cluster)`` int64, ``y(cluster)``, ``x(cluster)`` int32 centre pixel,
  ``window(cluster, wy, wx)`` pedestal-subtracted values (int32 unless asked otherwise),
  ``energy(cluster)`` the window sum in ADU;
- ``n_found(frame)``, ``n_kept(frame)`` int64, coordinate ``frame`` = frame numbers;
- optional ``branch_map(branch_frame, row, col)`` uint8 with CF flags (use `branch_maps`
  to get it as a ``DataArray(frame, y, x)``);
- attributes stamped once, here, from the run's `aare_lab.spec.FinderSpec`: finder,
  n_sigma, cluster_size, pedestal_dtype, noise, n_pedestal, max_clusters_per_frame
  (``aare_lab.capacity.NO_CAP`` = -1: no capacity), window_dtype; then frame_shape and
  aare_lab_version.
"""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from ._version import __version__
from .binning import DEFAULT_BINS, count, edges_for
from .branches import cf_flag_attrs
from .spec import FinderSpec

NETCDF_ENGINE = "h5netcdf"


def make_result(*, spec: FinderSpec, frame_shape: tuple[int, int], frame_numbers: np.ndarray,
                n_found: np.ndarray, n_kept: np.ndarray, cluster_frame: np.ndarray,
                cluster_y: np.ndarray, cluster_x: np.ndarray, windows: np.ndarray,
                branch_maps: np.ndarray | None = None,
                branch_frames: np.ndarray | None = None) -> xr.Dataset:
    """Assemble a finder run into the result Dataset and stamp its provenance.

    Parameters
    ----------
    spec
        The finder specification, with ``n_pedestal`` set (`Finder.spec` is).
    frame_shape
        ``(ny, nx)`` of the frames.
    frame_numbers
        Number of every processed frame, in processing order.
    n_found, n_kept
        Per frame: clusters found and clusters kept under the capacity.
    cluster_frame, cluster_y, cluster_x, windows
        Per kept cluster: its frame number, centre and window.
    branch_maps, branch_frames
        Optional branch codes ``(k, ny, nx)`` and the frame numbers they belong to.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        If ``spec.n_pedestal`` is None.
    """
    if spec.n_pedestal is None:
        raise ValueError("a result needs the pedestal window: give the spec an n_pedestal")
    ry, rx = spec.radius
    windows = np.asarray(windows)
    ds = xr.Dataset(
        data_vars={
            "frame_number": ("cluster", np.asarray(cluster_frame, np.int64),
                             {"long_name": "frame number of the cluster"}),
            "y": ("cluster", np.asarray(cluster_y, np.int32),
                  {"long_name": "row of the cluster centre", "units": "pixel"}),
            "x": ("cluster", np.asarray(cluster_x, np.int32),
                  {"long_name": "column of the cluster centre", "units": "pixel"}),
            "window": (("cluster", "wy", "wx"), windows,
                       {"long_name": "pedestal-subtracted window, raster order",
                        "units": "ADU"}),
            "energy": ("cluster", window_energies(windows),
                       {"long_name": "cluster energy (window sum)", "units": "ADU"}),
            "n_found": ("frame", np.asarray(n_found, np.int64),
                        {"long_name": "clusters found in the frame"}),
            "n_kept": ("frame", np.asarray(n_kept, np.int64),
                       {"long_name": "clusters kept under max_clusters_per_frame"}),
        },
        coords={
            "frame": ("frame", np.asarray(frame_numbers, np.int64),
                      {"long_name": "frame number"}),
            "wy": ("wy", np.arange(-ry, ry + 1, dtype=np.int32),
                   {"long_name": "row offset from the centre", "units": "pixel"}),
            "wx": ("wx", np.arange(-rx, rx + 1, dtype=np.int32),
                   {"long_name": "column offset from the centre", "units": "pixel"}),
        },
        attrs={
            "Conventions": "CF-1.10",
            "title": f"aare_lab {spec.finder} cluster finder result",
            **spec.attrs,
            "frame_shape": np.asarray(frame_shape, np.int64),
            "aare_lab_version": __version__,
        },
    )
    if branch_maps is not None:
        ds["branch_map"] = xr.DataArray(
            np.asarray(branch_maps, np.uint8), dims=("branch_frame", "row", "col"),
            coords={"branch_frame": np.asarray(branch_frames, np.int64)},
            attrs=cf_flag_attrs(),
        )
    return ds


def branch_maps(result: xr.Dataset) -> xr.DataArray:
    """The branch maps of a result as ``DataArray(frame, y, x)`` with CF flag attributes.

    Raises
    ------
    KeyError
        If the run was made without branch maps.
    """
    if "branch_map" not in result:
        raise KeyError(
            "this result has no branch maps; run the finder with branch_maps=True "
            "(or a list of frame numbers), or the CLI with --branch-maps"
        )
    bm = result["branch_map"]
    ny, nx = bm.shape[1:]
    return xr.DataArray(
        bm.to_numpy(), dims=("frame", "y", "x"),
        coords={"frame": bm["branch_frame"].to_numpy(), "y": np.arange(ny), "x": np.arange(nx)},
        attrs=dict(bm.attrs), name="branch",
    )


def truncated_frames(result: xr.Dataset) -> np.ndarray:
    """Frame numbers whose clusters were cut by ``max_clusters_per_frame``."""
    mask = result["n_found"].to_numpy() > result["n_kept"].to_numpy()
    return result["frame"].to_numpy()[mask]


def window_energies(windows: np.ndarray) -> np.ndarray:
    """The energy of each cluster: the float64 sum of its window ``(n, wy, wx)`` (ADU)."""
    return windows.sum(axis=(1, 2), dtype=np.float64)


def energy_coords(edges: np.ndarray) -> dict:
    """The coordinates of a spectrum over ``edges`` (ADU): the bin centres ``energy`` and
    the edges ``energy_lo`` and ``energy_hi``, for `xarray.DataArray` ``coords``."""
    edges = np.asarray(edges, float)
    return {"energy": ("energy", 0.5 * (edges[:-1] + edges[1:]), {"units": "ADU"}),
            "energy_lo": ("energy", edges[:-1], {"units": "ADU"}),
            "energy_hi": ("energy", edges[1:], {"units": "ADU"})}


def spectrum(result: xr.Dataset, bins: int | np.ndarray = DEFAULT_BINS,
             range: tuple[float, float] | None = None, *,
             width: int | None = None) -> xr.DataArray:
    """Histogram of cluster energies.

    Parameters
    ----------
    result
        A finder result.
    bins
        Bin edges (ADU), or a number of bins: equal bins over ``range`` (as
        `numpy.histogram`), or without a range at most that many integer-aligned bins
        (edges at ``k - 0.5``) holding every cluster (`aare_lab.binning.data_edges`).
    range
        ``(low, high)`` in ADU; clusters outside are counted in the attributes.
    width
        A whole number of ADU per bin instead of ``bins``, over ``range`` or the data.

    Returns
    -------
    xarray.DataArray
        Counts over the bin centres ``energy``, with the edges as the coordinates
        ``energy_lo`` and ``energy_hi``; attributes ``underflow`` and ``overflow`` (clusters
        below and above the edges), ``finder``, ``n_sigma``, ``cluster_size`` and
        ``n_frames`` of the run.
    """
    energies = result["energy"].to_numpy()
    edges = edges_for([energies], bins, range, width)
    counts, underflow, overflow = count(energies, edges)
    a = result.attrs
    return xr.DataArray(
        counts, dims="energy", coords=energy_coords(edges), name="counts",
        attrs={"long_name": "clusters per energy bin", "finder": a.get("finder", ""),
               "n_sigma": a.get("n_sigma", np.nan), "cluster_size": a.get("cluster_size", ""),
               "n_frames": int(result.sizes.get("frame", 0)),
               "underflow": underflow, "overflow": overflow},
    )


def save_result(result: xr.Dataset, path: str | os.PathLike) -> None:
    """Write a result to netCDF (lossless: every value and attribute round-trips)."""
    result.to_netcdf(path, engine=NETCDF_ENGINE)


def load_result(path: str | os.PathLike) -> xr.Dataset:
    """Read a result written by `save_result` into memory (the file is closed again)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no result file at {path}")
    try:
        ds = xr.open_dataset(path, engine=NETCDF_ENGINE)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is not an aare_lab result ({err}); results are the netCDF "
                         "files that save_result and `aare-lab find --out` write") from None
    with ds:
        return ds.load()
