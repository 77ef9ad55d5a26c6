"""The mismatch panel: several finders' clusters side by side over one patch of one frame.

Each panel shows only the pixels inside its own finder's cluster footprints, coloured by
the stored (pedestal-subtracted) window values, so no frames are needed. Red dots mark
the centres; an amber ring marks ("rings") every centre that some other finder does not
have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from ..compare import check_comparable, compare_all, worst_mismatch
from ..labels import as_labelled
from ..params import parse_cluster_size
from ._figure import new_figure

RING_COLOUR = "#ffbf00"


def footprints(result: xr.Dataset, frame: int, bounds: tuple[int, int, int, int]
               ) -> tuple[np.ma.MaskedArray, np.ndarray]:
    """Paint a frame's cluster windows into a patch.

    Parameters
    ----------
    result
        A finder result.
    frame
        The frame number.
    bounds
        ``(y0, y1, x0, x1)``: rows ``y0..y1-1`` and columns ``x0..x1-1``.

    Returns
    -------
    values : numpy.ma.MaskedArray
        The window values over the patch, masked outside every footprint (where windows
        overlap, the later cluster in raster order is shown).
    centres : numpy.ndarray
        ``(n, 2)`` ``(y, x)`` of the frame's centres inside the patch.
    """
    y0, y1, x0, x1 = bounds
    sel = (result["frame_number"] == frame).to_numpy()
    y = result["y"].to_numpy()[sel].astype(np.int64)
    x = result["x"].to_numpy()[sel].astype(np.int64)
    windows = result["window"].to_numpy()[sel]
    ry, rx = windows.shape[1] // 2, windows.shape[2] // 2
    dy, dx = np.mgrid[-ry:ry + 1, -rx:rx + 1]
    yy = y[:, None, None] + dy
    xx = x[:, None, None] + dx
    inside = (yy >= y0) & (yy < y1) & (xx >= x0) & (xx < x1)
    values = np.zeros((y1 - y0, x1 - x0))
    covered = np.zeros(values.shape, bool)
    values[yy[inside] - y0, xx[inside] - x0] = windows[inside]
    covered[yy[inside] - y0, xx[inside] - x0] = True
    in_patch = (y >= y0) & (y < y1) & (x >= x0) & (x < x1)
    return np.ma.masked_array(values, ~covered), np.column_stack([y[in_patch], x[in_patch]])


def _patch(centre: int, half: int, size: int) -> tuple[int, int]:
    """``2 * half + 1`` pixels around ``centre``, shifted to stay inside ``0..size``."""
    width = min(2 * half + 1, size)
    start = min(max(centre - half, 0), size - width)
    return start, start + width


def mismatch_panel(results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset],
                   frame: int | None = None, y: int | None = None, x: int | None = None, *,
                   labels: Sequence[str] | None = None, half_size: int | None = None,
                   cmap: str = "viridis", fig: Figure | None = None) -> Figure:
    """Draw the finders' clusters side by side around one site.

    Parameters
    ----------
    results
        Two or more results over the same frames (a sequence or ``label -> result``).
    frame, y, x
        The site; all None picks the worst mismatch (`aare_lab.compare.worst_mismatch`).
    labels
        Names for a sequence of results.
    half_size
        The patch spans ``2 * half_size + 1`` pixels each way (clipped to the frame);
        default ``3 * radius + 2``.
    cmap
        Colour map of the pedestal-subtracted values (one scale for all panels).
    fig
        Figure to draw into (default: a new pyplot figure).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If the results cannot be compared, or no site is given and they agree everywhere.
    """
    labels, results = as_labelled(results, labels)
    check_comparable(results, labels)
    ry, rx = (s // 2 for s in parse_cluster_size(results[0].attrs["cluster_size"]))
    half = 3 * max(ry, rx) + 2 if half_size is None else int(half_size)
    if frame is None and y is None and x is None:
        site = worst_mismatch(compare_all(results, labels), half)
        if site is None:
            raise ValueError("the results agree everywhere: there is no mismatch to show "
                             "(give frame, y and x to draw a site anyway)")
        frame, y, x = site
    elif frame is None or y is None or x is None:
        raise ValueError("give all of frame, y and x, or none of them for the worst mismatch")
    ny, nx = (int(n) for n in np.asarray(results[0].attrs["frame_shape"]))
    y0, y1 = _patch(int(y), half, ny)
    x0, x1 = _patch(int(x), half, nx)
    painted = [footprints(r, frame, (y0, y1, x0, x1)) for r in results]
    centre_sets = [{tuple(c) for c in centres.tolist()} for _, centres in painted]

    shown = np.concatenate([v.compressed() for v, _ in painted])
    norm = Normalize(*(shown.min(), shown.max()) if shown.size else (0.0, 1.0))
    n = len(results)
    fig = new_figure(fig, (4.2 * n + 1.5, 4.4))
    axes = fig.subplots(1, n, sharex=True, sharey=True, squeeze=False)[0]
    image = None
    for ax, label, (values, centres), mine in zip(axes, labels, painted, centre_sets):
        others = [s for s in centre_sets if s is not mine]
        missing = np.array([c for c in centres.tolist() if any(tuple(c) not in s for s in others)],
                           dtype=float).reshape(-1, 2)
        image = ax.imshow(values, cmap=cmap, norm=norm, interpolation="nearest",
                          extent=(x0 - 0.5, x1 - 0.5, y1 - 0.5, y0 - 0.5))
        image.set_gid("footprints")
        ax.scatter(centres[:, 1], centres[:, 0], s=18, c="red", zorder=3, gid="centres")
        ax.scatter(missing[:, 1], missing[:, 0], s=260, facecolors="none",
                   edgecolors=RING_COLOUR, linewidths=2, zorder=4, gid="rings")
        n = len(centres)
        ax.set_title(f"{label}: {n} centre{'' if n == 1 else 's'}, {len(missing)} ringed",
                     fontsize="medium")
        ax.set_xlabel("x (pixel)")
        ax.set_facecolor("#eeeeee")
    axes[0].set_ylabel("y (pixel)")
    fig.colorbar(image, ax=list(axes), label="pedestal-subtracted value (ADU)", shrink=0.85)
    fig.suptitle(f"frame {frame}: rows {y0}..{y1 - 1}, columns {x0}..{x1 - 1}")
    return fig
