"""The result model: one xarray Dataset per finder run, NumPy-backed, saved as netCDF.

Variable and attribute names are a public contract (the CLI writes them, other tools read
them):

- ``frame_number(cluster)`` int64, ``y(cluster)``, ``x(cluster)`` int32 centre pixel,
  ``window(cluster, wy, wx)`` pedestal-subtracted values (int32 unless asked otherwise),
  ``energy(cluster)`` the window sum in ADU;
- ``n_found(frame)``, ``n_kept(frame)`` int64, coordinate ``frame`` = frame numbers;
- optional ``branch_map(branch_frame, row, col)`` uint8 with CF flags (use `branch_maps`
  to get it as a ``DataArray(frame, y, x)``);
- attributes stamped once, here: finder, n_sigma, cluster_size, pedestal_dtype, noise,
  n_pedestal, max_clusters_per_frame (-1: no capacity), window_dtype, frame_shape,
  aare_lab_version.
"""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from ._version import __version__
from .branches import cf_flag_attrs
from .params import FinderParams, format_cluster_size

NO_CAPACITY = -1
NETCDF_ENGINE = "h5netcdf"


def make_result(*, finder: str, params: FinderParams, pedestal_dtype: str, noise: str,
                n_pedestal: int, frame_shape: tuple[int, int], frame_numbers: np.ndarray,
                n_found: np.ndarray, n_kept: np.ndarray, cluster_frame: np.ndarray,
                cluster_y: np.ndarray, cluster_x: np.ndarray, windows: np.ndarray,
                branch_maps: np.ndarray | None = None,
                branch_frames: np.ndarray | None = None) -> xr.Dataset:
    """Assemble a finder run into the result Dataset and stamp its provenance.

    Parameters
    ----------
    finder
        Name of the finder ("serial", "frozen", "cuda", ...).
    params
        The finder parameters.
    pedestal_dtype, noise, n_pedestal
        The pedestal configuration.
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
    """
    ry, rx = params.radius
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
            "energy": ("cluster", windows.sum(axis=(1, 2), dtype=np.float64),
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
            "title": f"aare_lab {finder} cluster finder result",
            "finder": finder,
            "n_sigma": float(params.n_sigma),
            "cluster_size": format_cluster_size(params.cluster_size),
            "pedestal_dtype": str(pedestal_dtype),
            "noise": noise,
            "n_pedestal": int(n_pedestal),
            "max_clusters_per_frame": (NO_CAPACITY if params.max_clusters_per_frame is None
                                       else int(params.max_clusters_per_frame)),
            "window_dtype": params.window_dtype,
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


def spectrum(result: xr.Dataset, bins: int | np.ndarray = 200,
             range: tuple[float, float] | None = None) -> xr.DataArray:
    """Histogram of cluster energies.

    Parameters
    ----------
    result
        A finder result.
    bins
        Number of bins or the bin edges (ADU).
    range
        ``(low, high)`` in ADU when ``bins`` is a number; default: the data range.

    Returns
    -------
    xarray.DataArray
        Counts over the bin centres ``energy``, with the edges as the coordinates
        ``energy_lo`` and ``energy_hi``.
    """
    counts, edges = np.histogram(result["energy"].to_numpy(), bins=bins, range=range)
    return xr.DataArray(
        counts.astype(np.int64), dims="energy",
        coords={
            "energy": ("energy", 0.5 * (edges[:-1] + edges[1:]), {"units": "ADU"}),
            "energy_lo": ("energy", edges[:-1], {"units": "ADU"}),
            "energy_hi": ("energy", edges[1:], {"units": "ADU"}),
        },
        name="counts",
        attrs={"long_name": "clusters per energy bin", "finder": result.attrs.get("finder", "")},
    )


def save_result(result: xr.Dataset, path: str | os.PathLike) -> None:
    """Write a result to netCDF (lossless: every value and attribute round-trips)."""
    result.to_netcdf(path, engine=NETCDF_ENGINE)


def load_result(path: str | os.PathLike) -> xr.Dataset:
    """Read a result written by `save_result` into memory (the file is closed again)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no result file at {path}")
    with xr.open_dataset(path, engine=NETCDF_ENGINE) as ds:
        return ds.load()
