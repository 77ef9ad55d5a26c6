"""The capacity view: clusters per frame, the cap, and what it would truncate."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..caps import byte_size
from ._figure import single_axes
from ._view import View

MAX_BARS = 100


def _bars(hist: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """At most about `MAX_BARS` bars over the occupied counts, one count per bar when few:
    the bar heights, their edges and the counts per bar."""
    occupied = np.flatnonzero(hist)
    first = occupied[0] if len(occupied) else 0
    span = occupied[-1] - first + 1 if len(occupied) else 1
    width = max(1, -(-span // MAX_BARS))
    starts = np.arange(first, first + span, width)
    return np.add.reduceat(hist, starts), np.r_[starts, starts[-1] + width] - 0.5, width


def _annotation(a: dict) -> str:
    return (f"{a['frames_truncated']:,} of {a['frames']:,} frames truncated "
            f"({100 * a['truncated_fraction']:.3g} %)\n"
            f"{a['clusters_dropped']:,} clusters dropped ({100 * a['dropped_fraction']:.3g} %)\n"
            f"{byte_size(a['bytes_per_frame'])} per frame ({a['cluster_size']}, "
            f"{a['window_dtype']})")


class CapView(View):
    """Histogram of clusters per frame with the cap drawn as a line and annotated.

    Counts are grouped into at most `MAX_BARS` bars.

    Parameters
    ----------
    report
        An `aare_lab.caps.cap_analysis` report.
    ax, fig
        Axes to draw into, or a figure to fill (default: a new figure).
    managed
        For a new figure: create it through pyplot (see `aare_lab.plots.new_figure`).

    Attributes
    ----------
    artists
        ``histogram`` (StepPatch), ``cap`` (vertical line), ``annotation`` (text),
        ``legend``.
    """

    def __init__(self, report: xr.Dataset, *, ax: Axes | None = None, fig: Figure | None = None,
                 managed: bool = False):
        self.ax = single_axes(ax, fig, managed=managed)
        self.figure = self.ax.figure
        self.artists = {}
        values, edges, _ = _bars(report["histogram"].to_numpy())
        self._keep("histogram", self.ax.stairs(values, edges, fill=True, color="#6baed6"))
        cap = report.attrs["cap"]
        self._keep("cap", self.ax.axvline(cap, color="#d7301f", lw=2, label=f"cap = {cap}"))
        self._keep("annotation", self.ax.text(
            0.98, 0.95, "", transform=self.ax.transAxes, ha="right", va="top",
            fontsize="small", bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"}))
        self.ax.set_xlabel("clusters per frame")
        self._keep("legend", self.ax.legend(loc="upper left", frameon=False))
        self.update(report)

    def update(self, report: xr.Dataset) -> None:
        """Show another report (another cap, or another run's counts)."""
        a = report.attrs
        values, edges, width = _bars(report["histogram"].to_numpy())
        self.artists["histogram"].set_data(values, edges)
        self.artists["cap"].set_xdata([a["cap"], a["cap"]])
        self.artists["cap"].set_label(f"cap = {a['cap']}")
        self.artists["legend"].get_texts()[0].set_text(f"cap = {a['cap']}")
        self.artists["annotation"].set_text(_annotation(a))
        low, high = min(edges[0] + 0.5, a["cap"]), max(edges[-1] - 0.5, a["cap"])
        pad = max(1, (high - low) // 20)
        self.ax.set_xlim(low - pad, high + pad)
        self.ax.set_ylim(0, max(1, values.max()) * 1.05)
        self.ax.set_ylabel("frames" if width == 1 else f"frames per {width} counts")


def cap_plot(report: xr.Dataset, *, ax: Axes | None = None, fig: Figure | None = None) -> Figure:
    """Draw a `CapView` of an `aare_lab.caps.cap_analysis` report and return its figure."""
    return CapView(report, ax=ax, fig=fig).figure
