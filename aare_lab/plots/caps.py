"""The capacity view: clusters per frame, the cap, and what it would truncate."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..caps import cap_analysis
from ._figure import single_axes

MAX_BARS = 100


def cap_plot(counts: xr.Dataset | np.ndarray, cap: int | None = None, *,
             ax: Axes | None = None) -> Figure:
    """Histogram of clusters per frame with the cap drawn as a line and annotated.

    Counts are grouped into at most `MAX_BARS` bars.

    Parameters
    ----------
    counts
        A `aare_lab.caps.cap_analysis` report, a finder result, or clusters per frame.
    cap
        The capacity; not needed for a report.
    ax
        Axes to draw into (default: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if isinstance(counts, xr.Dataset) and "histogram" in counts:
        report = counts
    elif cap is None:
        raise ValueError("give the cap to evaluate (or a cap_analysis report)")
    else:
        report = cap_analysis(counts, cap)
    a = report.attrs
    hist = report["histogram"].to_numpy()
    occupied = np.flatnonzero(hist)
    first = occupied[0] if len(occupied) else 0
    span = occupied[-1] - first + 1 if len(occupied) else 1
    # At most about MAX_BARS bars over the occupied counts; one count per bar when few.
    width = max(1, -(-span // MAX_BARS))
    starts = np.arange(first, first + span, width)
    ax = single_axes(ax)
    ax.stairs(np.add.reduceat(hist, starts), np.r_[starts, starts[-1] + width] - 0.5,
              fill=True, color="#6baed6", gid="histogram")
    ax.axvline(a["cap"], color="#d7301f", lw=2, gid="cap", label=f"cap = {a['cap']}")
    ax.text(0.98, 0.95,
            f"{a['frames_truncated']} of {a['frames']} frames truncated "
            f"({100 * a['truncated_fraction']:.3g} %)\n"
            f"{a['clusters_dropped']} clusters dropped ({100 * a['dropped_fraction']:.3g} %)\n"
            f"{a['bytes_per_frame']} bytes per frame ({a['cluster_size']}, {a['window_dtype']})",
            transform=ax.transAxes, ha="right", va="top", fontsize="small", gid="annotation",
            bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    low, high = min(first, a["cap"]), max(first + span - 1, a["cap"])
    pad = max(1, (high - low) // 20)
    ax.set_xlim(low - pad, high + pad)
    ax.set_xlabel("clusters per frame")
    ax.set_ylabel("frames" if width == 1 else f"frames per {width} counts")
    ax.legend(loc="upper left", frameon=False)
    return ax.figure
