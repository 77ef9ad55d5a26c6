"""Branch maps: which path of the decision each pixel took, and where two finders differ."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from aare_lab.detector.branches import Branch
from aare_lab.model.labels import as_labelled
from aare_lab.model.results import branch_maps

from ._figure import single_axes
from ._view import View

#: One colour per branch code, in code order.
BRANCH_COLOURS = {
    Branch.NOT_PROCESSED: "#bdbdbd",
    Branch.NEG_SKIP: "#4575b4",
    Branch.SHADOW: "#fdb863",
    Branch.TEST1_STORE: "#d7301f",
    Branch.TEST3_STORE: "#762a83",
    Branch.TEST3_SKIP: "#c2a5cf",
    Branch.QUIET_UPDATE: "#e5f5e0",
}
DIFF_COLOUR = "#ff00ff"
#: Pixels shown around the differing pixels when a difference view zooms to them.
ZOOM_MARGIN = 3
#: The markers of A's and B's cluster centres in a difference view.
CENTRE_MARKERS = {"a": {"marker": "o", "s": 14}, "b": {"marker": "x", "s": 30}}
_CMAP = ListedColormap([BRANCH_COLOURS[b] for b in Branch], name="branches")
_NORM = BoundaryNorm(np.arange(len(Branch) + 1) - 0.5, len(Branch))

Region = tuple[int, int, int, int]


def frame_codes(result: xr.Dataset, frame: int) -> np.ndarray:
    """The branch codes of one frame of ``result``.

    Raises
    ------
    KeyError
        If the result has no branch maps.
    ValueError
        If ``frame`` has none.
    """
    maps = branch_maps(result)
    if frame not in maps["frame"]:
        raise ValueError(f"frame {frame} has no branch map; mapped frames: "
                         f"{maps['frame'].to_numpy()[:10].tolist()}")
    return maps.sel(frame=frame).to_numpy()


def frame_centres(result: xr.Dataset, frame: int) -> np.ndarray:
    """``(n, 2)`` ``(y, x)`` of the cluster centres of one frame of ``result``."""
    sel = (result["frame_number"] == frame).to_numpy()
    return np.column_stack([result["y"].to_numpy()[sel], result["x"].to_numpy()[sel]])


def _xy(centres: np.ndarray | None) -> np.ndarray:
    """Scatter offsets ``(x, y)`` of ``(y, x)`` centres."""
    if centres is None:
        return np.empty((0, 2))
    return np.asarray(centres, float).reshape(-1, 2)[:, ::-1]


def _legend(ax: Axes, extra: Sequence[Artist] = ()):
    handles = [Patch(facecolor=BRANCH_COLOURS[b], edgecolor="0.4", label=b.name) for b in Branch]
    return ax.legend(handles=[*handles, *extra], loc="upper left", bbox_to_anchor=(1.02, 1),
                     fontsize="small", frameon=False)


def _centre_handle(role: str, label: str) -> Line2D:
    """A legend entry drawn like the scatter of ``role``'s centres."""
    style = CENTRE_MARKERS[role]
    # A scatter's size is an area in points², a line marker's a width in points.
    return Line2D([], [], linestyle="none", color="black", marker=style["marker"],
                  markersize=np.sqrt(style["s"]), label=f"{label} cluster centres")


def _show_region(ax: Axes, region: Region) -> None:
    y0, y1, x0, x1 = region
    ax.set_xlim(x0 - 0.5, x1 - 0.5)
    ax.set_ylim(y1 - 0.5, y0 - 0.5)


def _frame_axes(ax: Axes, region: Region | None) -> None:
    if region is not None:
        _show_region(ax, region)
    ax.set_xlabel("x (pixel)")
    ax.set_ylabel("y (pixel)")


def difference_region(differ: np.ndarray, margin: int = ZOOM_MARGIN) -> Region | None:
    """The bounding box of the ``True`` pixels of ``differ``, ``margin`` pixels wider on
    every side within the frame, as ``(y0, y1, x0, x1)`` (None: no pixel differs).

    Examples
    --------
    >>> differ = np.zeros((10, 20), bool); differ[4, 5] = differ[6, 18] = True
    >>> difference_region(differ, margin=2)
    (2, 9, 3, 20)
    """
    ys, xs = np.nonzero(differ)
    if not len(ys):
        return None
    ny, nx = np.shape(differ)
    return (max(int(ys.min()) - margin, 0), min(int(ys.max()) + 1 + margin, ny),
            max(int(xs.min()) - margin, 0), min(int(xs.max()) + 1 + margin, nx))


class BranchMapView(View):
    """One frame's branch codes in categorical colours, with a legend of the codes.

    Parameters
    ----------
    codes
        ``(ny, nx)`` branch codes (`frame_codes`).
    centres
        ``(n, 2)`` ``(y, x)`` cluster centres to overlay as black dots (`frame_centres`).
    title
        The axes title.
    region
        ``(y0, y1, x0, x1)`` to zoom into.
    ax, fig
        Axes to draw into, or a figure to fill (default: a new figure).
    managed
        For a new figure: create it through pyplot (see `aare_lab.plots.new_figure`).

    Attributes
    ----------
    artists
        ``branch`` (image), ``centres`` (scatter), ``legend``, ``title``.
    """

    def __init__(self, codes: np.ndarray, centres: np.ndarray | None = None, *,
                 title: str = "", region: Region | None = None, ax: Axes | None = None,
                 fig: Figure | None = None, managed: bool = False):
        self.ax = single_axes(ax, fig, managed=managed)
        self.figure = self.ax.figure
        self.artists = {}
        self._keep("branch", self.ax.imshow(codes, cmap=_CMAP, norm=_NORM,
                                            interpolation="nearest"))
        self._keep("centres", self.ax.scatter(*_xy(centres).T, s=10, c="black", zorder=3))
        self._keep("legend", _legend(self.ax))
        self._keep("title", self.ax.set_title(title))
        _frame_axes(self.ax, region)

    def update(self, codes: np.ndarray, centres: np.ndarray | None = None, *,
               title: str | None = None) -> None:
        """Show another frame's codes (of the same shape) and centres."""
        self.artists["branch"].set_data(codes)
        self.artists["centres"].set_offsets(_xy(centres))
        if title is not None:
            self.artists["title"].set_text(title)


class BranchDiffView(View):
    """The pixels whose branch code differs between two finders.

    A's codes are drawn faded underneath; the pixels where B took another branch are drawn
    in magenta on top. The legend names both finders' centre markers.
    `zoom_to_differences` shows the pixels that differ, `show_region` a region again.

    Parameters
    ----------
    codes_a, codes_b
        The two finders' codes of one frame (`frame_codes`).
    centres_a, centres_b
        Their centres, drawn as dots (A) and crosses (B) (`frame_centres`).
    labels
        Names of the two finders.
    title
        The axes title, a template of ``{a}``, ``{b}`` (the labels) and ``{n}`` (the pixels
        that differ).
    region
        ``(y0, y1, x0, x1)`` to zoom into.
    ax, fig
        Axes to draw into, or a figure to fill (default: a new figure).
    managed
        For a new figure: create it through pyplot (see `aare_lab.plots.new_figure`).

    Attributes
    ----------
    artists
        ``branch`` (A's faded image), ``differs`` (masked image), ``centres_a``,
        ``centres_b`` (scatters), ``legend``, ``title``.
    differ
        The mask of the pixels that differ in the frame shown.
    """

    def __init__(self, codes_a: np.ndarray, codes_b: np.ndarray,
                 centres_a: np.ndarray | None = None, centres_b: np.ndarray | None = None, *,
                 labels: Sequence[str] = ("a", "b"),
                 title: str = "{a} vs {b}: {n} pixels differ", region: Region | None = None,
                 ax: Axes | None = None, fig: Figure | None = None, managed: bool = False):
        self.labels = tuple(labels)
        self._title = title
        self.ax = single_axes(ax, fig, managed=managed)
        self.figure = self.ax.figure
        self.artists = {}
        ax = self.ax
        self._keep("branch", ax.imshow(codes_a, cmap=_CMAP, norm=_NORM,
                                       interpolation="nearest", alpha=0.35))
        self._keep("differs", ax.imshow(np.ma.masked_all(np.shape(codes_a)),
                                        cmap=ListedColormap([DIFF_COLOUR]),
                                        interpolation="nearest", vmin=0, vmax=1))
        la, lb = self.labels
        for role, label, centres, zorder in (("a", la, centres_a, 3), ("b", lb, centres_b, 4)):
            self._keep(f"centres_{role}", ax.scatter(*_xy(centres).T, c="black", zorder=zorder,
                                                     label=label, **CENTRE_MARKERS[role]))
        self._keep("legend", _legend(ax, [Patch(facecolor=DIFF_COLOUR, label="code differs"),
                                          _centre_handle("a", la), _centre_handle("b", lb)]))
        # Its pixel count changes with the frame.
        self._differs_text = self.artists["legend"].get_texts()[len(Branch)]
        self._keep("title", ax.set_title(""))
        _frame_axes(ax, region)
        self.update(codes_a, codes_b, centres_a, centres_b)

    def update(self, codes_a: np.ndarray, codes_b: np.ndarray,
               centres_a: np.ndarray | None = None, centres_b: np.ndarray | None = None, *,
               title: str | None = None) -> None:
        """Show another frame's codes and centres (or another pair of finders'); ``title``
        replaces the template."""
        codes_a, codes_b = np.asarray(codes_a), np.asarray(codes_b)
        la, lb = self.labels
        if codes_a.shape != codes_b.shape:
            raise ValueError(f"the frames of {la} and {lb} differ in shape: "
                             f"{codes_a.shape} and {codes_b.shape}")
        differ = codes_a != codes_b
        self.differ = differ
        self.artists["branch"].set_data(codes_a)
        self.artists["differs"].set_data(np.ma.masked_array(np.ones(differ.shape), ~differ))
        self.artists["centres_a"].set_offsets(_xy(centres_a))
        self.artists["centres_b"].set_offsets(_xy(centres_b))
        n = int(differ.sum())
        self._differs_text.set_text(f"code differs ({n} pixels)")
        self._title = self._title if title is None else title
        self.artists["title"].set_text(self._title.format(a=la, b=lb, n=n))

    def show_region(self, region: Region | None = None) -> None:
        """Show ``region`` ``(y0, y1, x0, x1)`` (None: the whole frame)."""
        _show_region(self.ax, region or (0, self.differ.shape[0], 0, self.differ.shape[1]))

    def zoom_to_differences(self, margin: int = ZOOM_MARGIN) -> Region | None:
        """Show the pixels that differ with ``margin`` pixels around them (the whole frame
        when none differs).

        Returns
        -------
        tuple or None
            The region shown (`difference_region`), None when no pixel differs.
        """
        region = difference_region(self.differ, margin)
        self.show_region(region)
        return region


def branch_map_plot(result: xr.Dataset, frame: int, *, centres: bool = True,
                    region: Region | None = None, ax: Axes | None = None) -> Figure:
    """Draw a `BranchMapView` of one frame of a result with branch maps; return its figure."""
    return BranchMapView(frame_codes(result, frame),
                         frame_centres(result, frame) if centres else None,
                         title=f"{result.attrs.get('finder', '')}: branches of frame {frame}",
                         region=region, ax=ax).figure


def branch_diff_plot(a: xr.Dataset, b: xr.Dataset, frame: int, *,
                     labels: Sequence[str] | None = None, centres: bool = True,
                     region: Region | None = None, ax: Axes | None = None) -> Figure:
    """Draw a `BranchDiffView` of one frame of two results; return its figure."""
    (la, lb), _ = as_labelled([a, b], labels)
    return BranchDiffView(frame_codes(a, frame), frame_codes(b, frame),
                          frame_centres(a, frame) if centres else None,
                          frame_centres(b, frame) if centres else None,
                          labels=(la, lb), region=region, ax=ax,
                          title=f"{{a}} vs {{b}}, frame {frame}: {{n}} pixels differ").figure
