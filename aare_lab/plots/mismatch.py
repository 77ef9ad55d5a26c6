"""The mismatch panel: several finders' clusters side by side over one patch of one frame.

Each panel shows only the pixels inside its own finder's cluster footprints, coloured by
the stored (pedestal-subtracted) window values, so no frames are needed. Red dots mark
the centres; an amber ring marks ("rings") every centre that some other finder does not
have. Where two finders store the same clusters with windows a few ADU apart (a matched
window that differs), their panels look alike on a scale of hundreds of ADU: the
``difference`` panel shows the first result's values less the second's, on a scale of its
own centred on 0, where both footprints cover a pixel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure

from aare_lab.analysis.compare import check_comparable
from aare_lab.model.labels import as_labelled
from aare_lab.model.params import parse_cluster_size

from ._figure import figure_for
from ._view import View

RING_COLOUR = "#ffbf00"
#: Colour map of the difference panel: blue below 0, white at 0, red above.
DIFFERENCE_CMAP = "RdBu_r"


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


class MismatchView(View):
    """The finders' clusters side by side around one site.

    Parameters
    ----------
    results
        Two or more results over the same frames (a sequence or ``label -> result``).
    frame, y, x
        The site (for example `aare_lab.analysis.compare.worst_mismatch`, or a site of a
        `aare_lab.analysis.compare.Comparison`).
    labels
        Names for a sequence of results.
    half_size
        The patch spans ``2 * half_size + 1`` pixels each way (clipped to the frame);
        default ``3 * radius + 2``.
    cmap
        Colour map of the pedestal-subtracted values (one scale for all panels).
    fig
        Figure to draw into (default: a new figure).
    managed
        For a new figure: create it through pyplot (see `aare_lab.plots.new_figure`).
    difference
        Add a panel of the first result's values less the second's (`DIFFERENCE_CMAP`,
        symmetric about 0), where both footprints cover a pixel.

    Attributes
    ----------
    artists
        Per label: ``footprints:<label>`` (image; gid ``footprints``), ``centres:<label>``
        and ``rings:<label>`` (scatters; gids ``centres``, ``rings``), ``title:<label>``,
        ``empty:<label>`` (a note on a panel without clusters; gid ``no_clusters``);
        ``colorbar`` (a `~matplotlib.colorbar.Colorbar`, following the shared norm) and
        ``title`` (the figure's); with ``difference``, ``difference`` (image; gid
        ``difference``), ``difference_title`` and ``difference_colorbar``.

    Raises
    ------
    ValueError
        If the results cannot be compared.
    """

    def __init__(self, results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset],
                 frame: int, y: int, x: int, *, labels: Sequence[str] | None = None,
                 half_size: int | None = None, cmap: str = "viridis",
                 fig: Figure | None = None, managed: bool = False, difference: bool = False):
        self.labels, self.results = as_labelled(results, labels)
        check_comparable(self.results, self.labels)
        ry, rx = (s // 2 for s in parse_cluster_size(self.results[0].attrs["cluster_size"]))
        self.half = 3 * max(ry, rx) + 2 if half_size is None else int(half_size)
        n = len(self.results)
        self.figure = figure_for(fig, (4.2 * (n + difference) + 1.5, 4.4), managed)
        axes = list(self.figure.subplots(1, n + difference, sharex=True, sharey=True,
                                         squeeze=False)[0])
        self.axes: list[Axes] = axes[:n]
        self.norm = Normalize(0.0, 1.0)
        self.artists = {}
        for ax, label in zip(self.axes, self.labels):
            image = ax.imshow(np.ma.masked_all((1, 1)), cmap=cmap, norm=self.norm,
                              interpolation="nearest", gid="footprints")
            self._keep(f"footprints:{label}", image)
            self._keep(f"centres:{label}", ax.scatter([], [], s=18, c="red", zorder=3,
                                                      gid="centres"))
            self._keep(f"rings:{label}", ax.scatter([], [], s=260, facecolors="none",
                                                    edgecolors=RING_COLOUR, linewidths=2,
                                                    zorder=4, gid="rings"))
            self._keep(f"title:{label}", ax.set_title("", fontsize="medium"))
            # A panel without a cluster says so, rather than looking like a failed plot.
            self._keep(f"empty:{label}", ax.text(0.5, 0.5, "", transform=ax.transAxes,
                                                 ha="center", va="center", color="0.35",
                                                 gid="no_clusters"))
            ax.set_xlabel("x (pixel)")
            ax.set_facecolor("#eeeeee")
        self.axes[0].set_ylabel("y (pixel)")
        self.artists["colorbar"] = self.figure.colorbar(
            image, ax=self.axes, label="pedestal-subtracted value (ADU)", shrink=0.85)
        self.difference_norm = None
        if difference:
            ax = axes[-1]
            self.difference_norm = TwoSlopeNorm(0.0, -1.0, 1.0)
            image = ax.imshow(np.ma.masked_all((1, 1)), cmap=DIFFERENCE_CMAP,
                              norm=self.difference_norm, interpolation="nearest",
                              gid="difference")
            self._keep("difference", image)
            self._keep("difference_title", ax.set_title("", fontsize="medium"))
            ax.set_xlabel("x (pixel)")
            ax.set_facecolor("#eeeeee")
            self.artists["difference_colorbar"] = self.figure.colorbar(
                image, ax=ax, label=f"{self.labels[0]} − {self.labels[1]} (ADU)", shrink=0.85)
        self._keep("title", self.figure.suptitle(""))
        self.update(frame, y, x)

    def update(self, frame: int, y: int, x: int,
               results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset] | None = None) -> None:
        """Show another site, optionally of new results (as many, in the same order)."""
        if results is not None:
            _, results = as_labelled(results, self.labels)
            check_comparable(results, self.labels)
            self.results = results
        ny, nx = (int(n) for n in np.asarray(self.results[0].attrs["frame_shape"]))
        y0, y1 = _patch(int(y), self.half, ny)
        x0, x1 = _patch(int(x), self.half, nx)
        painted = [footprints(r, frame, (y0, y1, x0, x1)) for r in self.results]
        centre_sets = [{tuple(c) for c in centres.tolist()} for _, centres in painted]
        shown = np.concatenate([v.compressed() for v, _ in painted])
        # One norm for every panel: changing it recolours them all.
        self.norm.vmin, self.norm.vmax = ((float(shown.min()), float(shown.max()))
                                          if shown.size else (0.0, 1.0))
        extent = (x0 - 0.5, x1 - 0.5, y1 - 0.5, y0 - 0.5)
        for label, (values, centres), mine in zip(self.labels, painted, centre_sets):
            others = [s for s in centre_sets if s is not mine]
            missing = np.array([c for c in centres.tolist()
                                if any(tuple(c) not in s for s in others)],
                               dtype=float).reshape(-1, 2)
            image = self.artists[f"footprints:{label}"]
            image.set_data(values)
            image.set_extent(extent)
            self.artists[f"centres:{label}"].set_offsets(centres[:, ::-1].astype(float))
            self.artists[f"rings:{label}"].set_offsets(missing[:, ::-1])
            n = len(centres)
            self.artists[f"empty:{label}"].set_text(
                "" if values.count() else f"no {label} cluster in this patch")
            self.artists[f"title:{label}"].set_text(
                f"{label}: {n} centre{'' if n == 1 else 's'}, {len(missing)} ringed")
        if self.difference_norm is not None:
            self._show_difference(painted[0][0], painted[1][0], extent)
        self.axes[0].set_xlim(extent[0], extent[1])
        self.axes[0].set_ylim(extent[2], extent[3])
        self.artists["title"].set_text(
            f"frame {frame}: rows {y0}..{y1 - 1}, columns {x0}..{x1 - 1}")


    def _show_difference(self, a: np.ma.MaskedArray, b: np.ma.MaskedArray, extent) -> None:
        both = np.ma.masked_array(a.data - b.data, a.mask | b.mask)
        image = self.artists["difference"]
        image.set_data(both)
        image.set_extent(extent)
        largest = float(np.abs(both).max()) if both.count() else 0.0
        # Symmetric about 0, at least ±1 ADU: equal windows show as white.
        self.difference_norm.vmin, self.difference_norm.vmax = -max(largest, 1.0), \
            max(largest, 1.0)
        differing = int((both != 0).sum())
        self.artists["difference_title"].set_text(
            f"{self.labels[0]} − {self.labels[1]}: {differing} pixel"
            f"{'' if differing == 1 else 's'} differ, by up to {largest:g} ADU")


def mismatch_panel(results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset],
                   frame: int, y: int, x: int, *, labels: Sequence[str] | None = None,
                   half_size: int | None = None, cmap: str = "viridis",
                   fig: Figure | None = None, difference: bool = False) -> Figure:
    """Draw a `MismatchView` of one site and return its figure.

    The worst site of a comparison is ``aare_lab.analysis.compare.worst_mismatch(comparisons)``.
    """
    return MismatchView(results, frame, y, x, labels=labels, half_size=half_size, cmap=cmap,
                        fig=fig, difference=difference).figure
