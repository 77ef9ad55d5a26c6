"""The capacity view: clusters per frame, the cap, and what it would truncate."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from aare_lab.analysis.caps import byte_size

from ._figure import single_axes
from ._view import View

MAX_BARS = 100
HISTOGRAM_COLOUR = "#6baed6"
CAP_COLOUR = "#d7301f"
TRUNCATED_COLOUR = "#fc9272"
#: The y range over the highest bar: the legend and the annotation sit above the bars.
HEADROOM = 1.35


class Bars(NamedTuple):
    """The histogram as drawn: at most about `MAX_BARS` bars over the occupied counts."""

    #: Frames per bar.
    values: np.ndarray
    #: Of those, the frames with more clusters than the cap.
    truncated: np.ndarray
    #: The bars' edges, in clusters per frame.
    edges: np.ndarray
    #: Counts per bar (1 when few counts are occupied).
    width: int


def _bars(hist: np.ndarray, cap: int) -> Bars:
    """The bars of ``hist`` (frames per count, from 0) and of its frames above ``cap``."""
    occupied = np.flatnonzero(hist)
    first = occupied[0] if len(occupied) else 0
    span = occupied[-1] - first + 1 if len(occupied) else 1
    width = max(1, -(-span // MAX_BARS))
    starts = np.arange(first, first + span, width)
    # A bar that straddles the cap is shaded up to the frames above it.
    above = np.where(np.arange(len(hist)) > cap, hist, 0)
    return Bars(np.add.reduceat(hist, starts), np.add.reduceat(above, starts),
                np.r_[starts, starts[-1] + width] - 0.5, width)


def _annotation(a: dict) -> str:
    return (f"{a['frames_truncated']:,} of {a['frames']:,} frames truncated "
            f"({100 * a['truncated_fraction']:.3g} %)\n"
            f"{a['clusters_dropped']:,} clusters dropped ({100 * a['dropped_fraction']:.3g} %)\n"
            f"{byte_size(a['bytes_per_frame'])} per frame ({a['cluster_size']}, "
            f"{a['window_dtype']})")


class CapView(View):
    """Histogram of clusters per frame with the cap drawn as a line and annotated.

    Counts are grouped into at most `MAX_BARS` bars. The frames above the cap, those it
    would truncate, are shaded in each bar.

    Parameters
    ----------
    report
        An `aare_lab.analysis.caps.cap_analysis` report.
    ax, fig
        Axes to draw into, or a figure to fill (default: a new figure).
    managed
        For a new figure: create it through pyplot (see `aare_lab.plots.new_figure`).

    Attributes
    ----------
    artists
        ``histogram`` (StepPatch), ``truncated`` (StepPatch of the frames above the cap),
        ``cap`` (vertical line), ``annotation`` (text), ``legend``.
    """

    def __init__(self, report: xr.Dataset, *, ax: Axes | None = None, fig: Figure | None = None,
                 managed: bool = False):
        self.ax = single_axes(ax, fig, managed=managed)
        self.figure = self.ax.figure
        self.artists = {}
        cap = report.attrs["cap"]
        bars = _bars(report["histogram"].to_numpy(), cap)
        self._keep("histogram", self.ax.stairs(bars.values, bars.edges, fill=True,
                                               color=HISTOGRAM_COLOUR))
        self._keep("truncated", self.ax.stairs(bars.truncated, bars.edges, fill=True,
                                               color=TRUNCATED_COLOUR,
                                               label="truncated frames"))
        self._keep("cap", self.ax.axvline(cap, color=CAP_COLOUR, lw=2, label=f"cap = {cap}"))
        self._keep("annotation", self.ax.text(
            0.98, 0.95, "", transform=self.ax.transAxes, ha="right", va="top",
            fontsize="small", bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"}))
        self.ax.set_xlabel("clusters per frame")
        self._keep("legend", self.ax.legend(handles=[self.artists["cap"],
                                                     self.artists["truncated"]],
                                            loc="upper left", frameon=False))
        self._cap_text = self.artists["legend"].get_texts()[0]
        self.update(report)

    def update(self, report: xr.Dataset) -> None:
        """Show another report (another cap, or another run's counts)."""
        a = report.attrs
        bars = _bars(report["histogram"].to_numpy(), a["cap"])
        self.artists["histogram"].set_data(bars.values, bars.edges)
        self.artists["truncated"].set_data(bars.truncated, bars.edges)
        self.artists["cap"].set_xdata([a["cap"], a["cap"]])
        self.artists["cap"].set_label(f"cap = {a['cap']}")
        self._cap_text.set_text(f"cap = {a['cap']}")
        self.artists["annotation"].set_text(_annotation(a))
        low, high = min(bars.edges[0] + 0.5, a["cap"]), max(bars.edges[-1] - 0.5, a["cap"])
        pad = max(1, (high - low) // 20)
        self.ax.set_xlim(low - pad, high + pad)
        self.ax.set_ylim(0, max(1, bars.values.max()) * HEADROOM)
        self.ax.set_ylabel("frames" if bars.width == 1 else f"frames per {bars.width} counts")


def cap_plot(report: xr.Dataset, *, ax: Axes | None = None, fig: Figure | None = None) -> Figure:
    """Draw a `CapView` of an `aare_lab.analysis.caps.cap_analysis` report and return its figure."""
    return CapView(report, ax=ax, fig=fig).figure
