"""The result model: one xarray Dataset per finder run, NumPy-backed, saved as netCDF.

Variable and attribute names are a public contract (the CLI writes them, other tools read
them):

- ``frame_number(cluster)`` int64, ``y(cluster)``, ``x(cluster)`` int32 centre pixel,
  ``window(cluster, wy, wx)`` pedestal-subtracted values (int32 unless asked otherwise),
  ``energy(cluster)`` the window sum, in ADU (keV with a JUNGFRAU calibration: window and
  energy carry their ``units``);
- ``n_found(frame)``, ``n_kept(frame)`` int64, coordinate ``frame`` = frame numbers;
- optional ``branch_map(branch_frame, row, col)`` uint8 with CF flags (use `branch_maps`
  to get it as a ``DataArray(frame, y, x)``);
- attributes stamped once, here, from the run's `aare_lab.model.spec.FinderSpec`: finder,
  n_sigma, cluster_size, pedestal_dtype, noise, n_pedestal, max_clusters_per_frame
  (``aare_lab.model.capacity.NO_CAP`` = -1: no capacity), window_dtype; then frame_shape and
  aare_lab_version; and from the pedestal ``dark_frames``, ``dark_effective_frames``,
  ``dark_rms_relative_uncertainty`` and ``dark_expected_false_rate_factor`` (what its dark
  frames mean for false clusters, `aare_lab.detector.dark.quality`);
- with ``skip_first`` (frames left out at the start of each acquisition,
  `aare_lab.sources.without_first`): attributes ``skip_first`` and ``frames_skipped`` (the
  data frames left out), and ``dark_frames_skipped`` (the dark frames', from the pedestal);
- with int16 windows: ``n_window_clipped(frame)`` the stored taps at the int16 limits, which
  may have been clipped (`aare_lab.model.clipping`);
- with a JUNGFRAU calibration (attribute ``calibration_sha256``, `aare_lab.model.spec`):
  ``n_flagged(frame)`` the pixels flagged in each frame (never photons);
- with common mode (attribute ``common_mode`` other than ``"none"``): ``common_mode(frame,
  region)`` the offset subtracted from each region's pixels (ADU, pedestal dtype),
  ``common_mode_pixels(frame, region)`` the pixels its estimate came from, and for a user's
  label map ``common_mode_labels(row, col)`` (presets are rebuilt from their name).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from aare_lab._version import __version__
from aare_lab.detector.branches import cf_flag_attrs
from aare_lab.model.binning import DEFAULT_BINS, count, edges_for
from aare_lab.model.clipping import (
    CLIPPED_ATTRS,
    CLIPPED_VARIABLE,
    clipped_taps,
    counts_clipping,
)
from aare_lab.model.params import format_cluster_size
from aare_lab.model.spec import FinderSpec
from aare_lab.model.window_sums import PAIRWISE_BLOCK, float_window_sums, integer_window_sums
from aare_lab.storage.netcdf import write_netcdf
from aare_lab.storage.result_store import open_result

if TYPE_CHECKING:
    from aare_lab.detector.dark.quality import DarkQuality

#: The variables and attributes every result holds (the contract above).
RESULT_VARIABLES = ("frame_number", "y", "x", "window", "energy", "n_found", "n_kept", "frame")
RESULT_ATTRS = ("finder", "n_sigma", "cluster_size", "pedestal_dtype", "noise",
                "max_clusters_per_frame", "window_dtype", "n_pedestal", "frame_shape")


def make_result(*, spec: FinderSpec, frame_shape: tuple[int, int], frame_numbers: np.ndarray,
                n_found: np.ndarray, n_kept: np.ndarray, cluster_frame: np.ndarray,
                cluster_y: np.ndarray, cluster_x: np.ndarray, windows: np.ndarray,
                branch_maps: np.ndarray | None = None,
                branch_frames: np.ndarray | None = None,
                common_mode: np.ndarray | None = None,
                common_mode_pixels: np.ndarray | None = None,
                n_flagged: np.ndarray | None = None,
                dark: DarkQuality | None = None,
                energy: np.ndarray | None = None,
                n_window_clipped: np.ndarray | None = None,
                inputs: Mapping[str, dict] | None = None,
                skipped: Mapping[str, int] | None = None) -> xr.Dataset:
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
    common_mode, common_mode_pixels
        With ``spec.common_mode``: per frame and region, the offset and its pixel count.
    n_flagged
        With ``spec.calibration``: per frame, the pixels flagged (`aare_lab.detector.jungfrau`).
    dark
        What the pedestal's dark frames mean for false clusters: its
        `aare_lab.detector.dark.quality.DarkQuality.attrs` (``dark_frames``...) are stamped too.
    inputs
        The run's input files by role (``frames``, ``dark``, ``pedestal``,
        ``calibration``, ``common_mode``), each as
        `aare_lab.sources.files.input_record` gives it: stamped as the JSON attribute
        ``inputs`` (none when no input came from a file).
    energy
        `window_energies` of ``windows``, when the caller has them already.
    n_window_clipped
        With int16 windows, `aare_lab.model.clipping.clipped_taps` of ``windows``, when the
        caller has them already.
    skipped
        ``skip_first`` and ``frames_skipped`` of the frames' source, stamped as attributes
        when ``skip_first`` is set (`aare_lab.sources.without_first`).

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
    units = spec.units
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
                        "units": units}),
            "energy": ("cluster", window_energies(windows) if energy is None else energy,
                       {"long_name": "cluster energy (window sum)", "units": units}),
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
            **({} if dark is None else dark.attrs),
            **({"inputs": json.dumps(dict(inputs), sort_keys=True)} if inputs else {}),
            **(dict(skipped) if skipped and skipped.get("skip_first") else {}),
        },
    )
    if spec.common_mode is not None:
        regions = np.arange(np.shape(common_mode)[1], dtype=np.int32)
        ds["common_mode"] = xr.DataArray(
            np.asarray(common_mode), dims=("frame", "region"), coords={"region": regions},
            attrs={"long_name": "common-mode offset subtracted from the region",
                   "units": "ADU"})
        ds["common_mode_pixels"] = xr.DataArray(
            np.asarray(common_mode_pixels, np.int64), dims=("frame", "region"),
            coords={"region": regions},
            attrs={"long_name": "pixels the common-mode offset was estimated from"})
        if spec.common_mode.label_map is not None:
            ds["common_mode_labels"] = (("row", "col"), np.asarray(spec.common_mode.label_map),
                                        {"long_name": "common-mode region of each pixel",
                                         "comment": "-1: excluded"})
    if counts_clipping(spec.window_dtype):
        clipped = clipped_taps(windows, n_kept) if n_window_clipped is None else \
            np.asarray(n_window_clipped, np.int64)
        ds[CLIPPED_VARIABLE] = ("frame", clipped, CLIPPED_ATTRS)
    if spec.calibration is not None:
        ds["n_flagged"] = ("frame", np.asarray(n_flagged, np.int64),
                           {"long_name": "pixels flagged in the frame (never photons)",
                            "comment": "invalid gain, readout error, saturated or "
                                       "uncalibrated: aare_lab.detector.jungfrau.FLAG_MEANINGS"})
    if branch_maps is not None:
        ds["branch_map"] = xr.DataArray(
            np.asarray(branch_maps, np.uint8), dims=("branch_frame", "row", "col"),
            coords={"branch_frame": np.asarray(branch_frames, np.int64)},
            attrs=cf_flag_attrs(),
        )
    return ds


def check_result(result: xr.Dataset, name: str = "the result") -> None:
    """Refuse anything but a finder result: a Dataset with `RESULT_VARIABLES` and
    `RESULT_ATTRS` (what `compare` and `aare_lab.analysis.explain` read).

    Raises
    ------
    TypeError
        For an object that is not an `xarray.Dataset`.
    ValueError
        For a Dataset that lacks some of them, naming ``name`` and what is missing; for
        one read from an aare cluster file without its frame shape, how to give it.
    """
    if not isinstance(result, xr.Dataset):
        raise TypeError(f"{name} must be a finder result (a Dataset from a finder or "
                        f"load_result), got {type(result).__name__}")
    missing = [v for v in RESULT_VARIABLES if v not in result.variables]
    missing += [f"attribute {a}" for a in RESULT_ATTRS if a not in result.attrs]
    unknown = str(result.attrs.get("unknown_attrs", "")).split()
    if "attribute frame_shape" in missing and "frame_shape" in unknown:
        source = result.attrs.get("source_file", "IN.clust")
        raise ValueError(f"{name} has no frame shape: it was read from the aare cluster "
                         f"file {source}, which does not record it. Convert that file again "
                         f"with the detector's frame shape: aare-lab convert {source} "
                         "OUT.nc --frame-shape NYxNX (e.g. 512x1024 for a JUNGFRAU module; "
                         "Python: read_clusterfile(..., frame_shape=(ny, nx)))")
    if missing:
        raise ValueError(f"{name} is not an aare_lab finder result: it lacks "
                         f"{', '.join(missing)}")


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


def window_energies(windows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The energy of each cluster: the float64 sum of its window ``(n, wy, wx)`` (ADU).

    Integer windows are summed exactly; float ones in NumPy's order (`pairwise_sum`), so
    that each energy is ``window.sum(dtype=float64)`` to the last bit (windows of more
    taps than `PAIRWISE_BLOCK`, which no finder makes, by NumPy itself).
    ``out``, if given, receives the sums (float64, one per window) and is returned.
    """
    if out is None:
        out = np.empty(len(windows), np.float64)
    taps = int(np.prod(windows.shape[1:]))
    if windows.dtype.kind not in "iu" and taps > PAIRWISE_BLOCK:
        return windows.sum(axis=(1, 2), dtype=np.float64, out=out)
    flat = np.ascontiguousarray(windows).reshape(len(windows), taps)
    if windows.dtype.kind in "iu":
        integer_window_sums(flat, out)
    else:
        float_window_sums(flat, out)
    return out


def energy_coords(edges: np.ndarray, units: str = "ADU") -> dict:
    """The coordinates of a spectrum over ``edges`` (in ``units``): the bin centres
    ``energy`` and the edges ``energy_lo`` and ``energy_hi``, for `xarray.DataArray`
    ``coords``."""
    edges = np.asarray(edges, float)
    return {"energy": ("energy", 0.5 * (edges[:-1] + edges[1:]), {"units": units}),
            "energy_lo": ("energy", edges[:-1], {"units": units}),
            "energy_hi": ("energy", edges[1:], {"units": units})}


def spectrum_edges(spectrum: xr.DataArray) -> np.ndarray:
    """The bin edges of a spectrum (from its ``energy_lo`` and ``energy_hi``)."""
    return np.r_[spectrum["energy_lo"].to_numpy(), spectrum["energy_hi"].to_numpy()[-1:]]


def spectrum(result: xr.Dataset, bins: int | np.ndarray = DEFAULT_BINS,
             range: tuple[float, float] | None = None, *,
             width: float | None = None) -> xr.DataArray:
    """Histogram of cluster energies, in the units of the result's ``energy``.

    Parameters
    ----------
    result
        A finder result: energies in ADU, or in keV with a JUNGFRAU calibration (its
        ``energy`` variable's ``units``).
    bins
        Bin edges (in those units), or a number of bins: equal bins over ``range`` (as
        `numpy.histogram`), or without a range, holding every cluster
        (`aare_lab.model.binning.data_edges`): in ADU at most that many integer-aligned bins
        (edges at ``k - 0.5``), in keV that many equal bins.
    range
        ``(low, high)`` in those units; clusters outside are counted in the attributes.
    width
        The bin width instead of ``bins``, over ``range`` or the data: a whole number of
        ADU, or any width in keV.

    Returns
    -------
    xarray.DataArray
        Counts over the bin centres ``energy``, with the edges as the coordinates
        ``energy_lo`` and ``energy_hi``; attributes ``underflow`` and ``overflow`` (clusters
        below and above the edges), ``finder``, ``n_sigma``, ``cluster_size`` and
        ``n_frames`` of the run.
    """
    energies = result["energy"].to_numpy()
    units = result["energy"].attrs.get("units", "ADU")
    edges = edges_for([energies], bins, range, width, integer=units == "ADU")
    counts, underflow, overflow = count(energies, edges)
    a = result.attrs
    return xr.DataArray(
        counts, dims="energy", coords=energy_coords(edges, units), name="counts",
        attrs={"long_name": "clusters per energy bin", "finder": a.get("finder", ""),
               "n_sigma": a.get("n_sigma", np.nan), "cluster_size": a.get("cluster_size", ""),
               "n_frames": int(result.sizes.get("frame", 0)),
               "underflow": underflow, "overflow": overflow},
    )


def counts_spectrum(counts: np.ndarray, edges: np.ndarray, spec: FinderSpec, n_frames: int,
                    underflow: int | None, overflow: int | None,
                    outside: int | None = None) -> xr.DataArray:
    """Counts accumulated over ``edges`` as the DataArray `aare_lab.model.results.spectrum` makes.

    ``outside`` counts the clusters beyond the edges when only their total is known (the
    GPU's histogram counts inside the range only); then ``underflow`` and ``overflow``
    are None and left out of the attributes.
    """
    attrs = {"long_name": "clusters per energy bin", "finder": spec.finder,
             "n_sigma": spec.n_sigma, "cluster_size": format_cluster_size(spec.cluster_size),
             "n_frames": int(n_frames)}
    if underflow is not None:
        attrs.update(underflow=int(underflow), overflow=int(overflow))
        outside = underflow + overflow
    attrs["outside"] = int(outside)
    return xr.DataArray(np.array(counts, np.int64), dims="energy",
                        coords=energy_coords(edges, spec.units), name="counts", attrs=attrs)


def save_result(result: xr.Dataset, path: str | os.PathLike) -> None:
    """Write a result to netCDF (lossless: every value and attribute round-trips).

    The file appears complete or not at all (`write_netcdf`).
    """
    write_netcdf(result, path)


def load_result(path: str | os.PathLike) -> xr.Dataset:
    """Read a result written by `save_result` or ``find(out=...)`` into memory.

    The file is closed again. A run that was interrupted while it was being written warns
    (`aare_lab.storage.result_store.IncompleteResultWarning`) and gives the frames it holds.
    """
    with open_result(path) as ds:
        return ds.load()
