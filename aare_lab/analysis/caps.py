"""What a per-frame capacity (``max_clusters_per_frame``) would cut, and what it costs."""

from __future__ import annotations

import numpy as np
import xarray as xr

from aare_lab.checks import positive_int
from aare_lab.model.params import WINDOW_DTYPES, parse_cluster_size


def byte_size(n: float) -> str:
    """Bytes in decimal units.

    Examples
    --------
    >>> byte_size(52_000), byte_size(156e6), byte_size(224)
    ('52 kB', '156 MB', '224 B')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"

# Per kept cluster the result holds a window, y and x (int32) and its frame number (int64);
# per frame, n_found and n_kept (int64).
_CENTRE_BYTES = 4 + 4 + 8
_FRAME_BYTES = 8 + 8


def buffer_bytes_per_frame(cap: int, cluster_size: int | str | tuple[int, int] = (3, 3),
                           window_dtype: str = "int32") -> int:
    """Bytes of output buffer one frame needs at capacity ``cap``.

    Examples
    --------
    >>> buffer_bytes_per_frame(1000, "3x3")  # 1000 * (9 * 4 + 16) + 16
    52016
    >>> buffer_bytes_per_frame(1000, "9x9", "int16")  # 1000 * (81 * 2 + 16) + 16: int16
    178016
    """
    cap = positive_int("cap", cap)
    cy, cx = parse_cluster_size(cluster_size)
    if window_dtype not in WINDOW_DTYPES:
        raise ValueError(f"window_dtype={window_dtype!r} is not one of {', '.join(WINDOW_DTYPES)}")
    per_cluster = cy * cx * np.dtype(window_dtype).itemsize + _CENTRE_BYTES
    return cap * per_cluster + _FRAME_BYTES


def cap_analysis(counts: xr.Dataset | np.ndarray, cap: int, *,
                 cluster_size: int | str | tuple[int, int] | None = None,
                 window_dtype: str | None = None) -> xr.Dataset:
    """Which frames and clusters a capacity would truncate, and its buffer cost.

    Parameters
    ----------
    counts
        A finder result (its ``n_found``, the true count per frame, and its clusters), or
        the clusters per frame as an array.
    cap
        The capacity ``max_clusters_per_frame`` to evaluate.
    cluster_size, window_dtype
        For the buffer cost; default: those of the result, else 3x3 and int32.

    Returns
    -------
    xarray.Dataset
        ``n_found(frame)``, ``truncated(frame)``, ``histogram(clusters_per_frame)`` (frames
        per count); for a result also ``dropped(cluster)``, the clusters beyond the first
        ``cap`` of their frame in raster order. Attributes: ``cap``, ``frames``,
        ``frames_truncated``, ``truncated_fraction``, ``clusters``, ``clusters_dropped``,
        ``dropped_fraction``, ``max_count``, ``bytes_per_frame``, ``cluster_size``,
        ``window_dtype``.

    Raises
    ------
    ValueError
        For a cap below 1, negative counts, or a result already truncated below ``cap``
        (its missing clusters cannot be ranked).
    """
    cap = positive_int("cap", cap)
    is_result = isinstance(counts, xr.Dataset)
    if is_result:
        attrs = counts.attrs
        cluster_size = cluster_size or attrs.get("cluster_size", (3, 3))
        window_dtype = window_dtype or attrs.get("window_dtype", "int32")
        n_found = counts["n_found"].to_numpy().astype(np.int64)
        frames = counts["frame"].to_numpy()
        kept = counts["n_kept"].to_numpy()
        if ((kept < n_found) & (kept < cap)).any():
            raise ValueError(
                f"the result was truncated at max_clusters_per_frame="
                f"{attrs.get('max_clusters_per_frame')} < cap={cap}: the clusters beyond "
                "its capacity are unknown; analyse a run with a larger capacity, or pass "
                "result['n_found'] to analyse the counts only")
    else:
        n_found = np.asarray(counts).astype(np.int64).ravel()
        frames = np.arange(len(n_found))
        cluster_size = cluster_size or (3, 3)
        window_dtype = window_dtype or "int32"
    if (n_found < 0).any():
        raise ValueError("cluster counts must be >= 0")
    truncated = n_found > cap
    dropped_per_frame = np.maximum(n_found - cap, 0)
    total = int(n_found.sum())
    hist = np.bincount(n_found, minlength=1)
    size = parse_cluster_size(cluster_size)
    ds = xr.Dataset(
        {"n_found": ("frame", n_found, {"long_name": "clusters found in the frame"}),
         "truncated": ("frame", truncated, {"long_name": f"more than {cap} clusters"}),
         "histogram": ("clusters_per_frame", hist.astype(np.int64),
                       {"long_name": "frames with this many clusters"})},
        coords={"frame": frames, "clusters_per_frame": np.arange(len(hist))},
        attrs={"cap": int(cap), "frames": len(n_found),
               "frames_truncated": int(truncated.sum()),
               "truncated_fraction": float(truncated.mean()) if len(n_found) else 0.0,
               "clusters": total, "clusters_dropped": int(dropped_per_frame.sum()),
               "dropped_fraction": float(dropped_per_frame.sum() / total) if total else 0.0,
               "max_count": int(n_found.max()) if len(n_found) else 0,
               "bytes_per_frame": buffer_bytes_per_frame(cap, size, window_dtype),
               "cluster_size": f"{size[0]}x{size[1]}", "window_dtype": window_dtype},
    )
    if is_result:
        ds["dropped"] = ("cluster", _rank_in_frame(counts) >= cap,
                         {"long_name": f"beyond the first {cap} clusters of its frame"})
    return ds


def _rank_in_frame(result: xr.Dataset) -> np.ndarray:
    """Each cluster's place among the clusters of its frame, in raster order of centres."""
    nx = int(np.asarray(result.attrs["frame_shape"])[1])
    frame = result["frame_number"].to_numpy()
    raster = result["y"].to_numpy().astype(np.int64) * nx + result["x"].to_numpy()
    order = np.lexsort((raster, frame))
    sorted_frame = frame[order]
    starts = np.flatnonzero(np.r_[True, sorted_frame[1:] != sorted_frame[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(frame)]))
    rank = np.empty(len(frame), np.int64)
    rank[order] = np.arange(len(frame)) - group_start
    return rank
