"""Branch maps: which path of the decision each pixel took, and where two finders differ."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..branches import Branch
from ..labels import as_labelled
from ..results import branch_maps
from ._figure import single_axes

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
_CMAP = ListedColormap([BRANCH_COLOURS[b] for b in Branch], name="branches")
_NORM = BoundaryNorm(np.arange(len(Branch) + 1) - 0.5, len(Branch))


def _codes(result: xr.Dataset, frame: int) -> np.ndarray:
    maps = branch_maps(result)
    if frame not in maps["frame"]:
        raise ValueError(f"frame {frame} has no branch map; mapped frames: "
                         f"{maps['frame'].to_numpy()[:10].tolist()}")
    return maps.sel(frame=frame).to_numpy()


def _centres(result: xr.Dataset, frame: int) -> tuple[np.ndarray, np.ndarray]:
    sel = (result["frame_number"] == frame).to_numpy()
    return result["y"].to_numpy()[sel], result["x"].to_numpy()[sel]


def _draw_codes(ax: Axes, codes: np.ndarray, alpha: float = 1.0):
    image = ax.imshow(codes, cmap=_CMAP, norm=_NORM, interpolation="nearest", alpha=alpha)
    image.set_gid("branch")
    return image


def _legend(ax: Axes, extra: Sequence[Patch] = ()) -> None:
    handles = [Patch(facecolor=BRANCH_COLOURS[b], edgecolor="0.4", label=b.name) for b in Branch]
    ax.legend(handles=[*handles, *extra], loc="upper left", bbox_to_anchor=(1.02, 1),
              fontsize="small", frameon=False)


def _zoom(ax: Axes, region: tuple[int, int, int, int] | None) -> None:
    if region is not None:
        y0, y1, x0, x1 = region
        ax.set_xlim(x0 - 0.5, x1 - 0.5)
        ax.set_ylim(y1 - 0.5, y0 - 0.5)


def branch_map_plot(result: xr.Dataset, frame: int, *, centres: bool = True,
                    region: tuple[int, int, int, int] | None = None,
                    ax: Axes | None = None) -> Figure:
    """Draw one frame's branch codes in categorical colours, with a legend of the codes.

    Parameters
    ----------
    result
        A finder result with branch maps.
    frame
        The frame number.
    centres
        Overlay the frame's cluster centres (black dots).
    region
        ``(y0, y1, x0, x1)`` to zoom into.
    ax
        Axes to draw into (default: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    ax = single_axes(ax)
    _draw_codes(ax, _codes(result, frame))
    if centres:
        cy, cx = _centres(result, frame)
        ax.scatter(cx, cy, s=10, c="black", zorder=3, gid="centres")
    _legend(ax)
    _zoom(ax, region)
    ax.set_title(f"{result.attrs.get('finder', '')}: branches of frame {frame}")
    ax.set_xlabel("x (pixel)")
    ax.set_ylabel("y (pixel)")
    return ax.figure


def branch_diff_plot(a: xr.Dataset, b: xr.Dataset, frame: int, *,
                     labels: Sequence[str] | None = None, centres: bool = True,
                     region: tuple[int, int, int, int] | None = None,
                     ax: Axes | None = None) -> Figure:
    """Highlight the pixels whose branch code differs between two results.

    A's codes are drawn faded underneath; the pixels where B took another branch are
    drawn in magenta on top.

    Parameters
    ----------
    a, b
        Results with branch maps of ``frame``.
    frame
        The frame number.
    labels
        Names of the two results.
    centres
        Overlay A's centres (dots) and B's centres (crosses).
    region
        ``(y0, y1, x0, x1)`` to zoom into.
    ax
        Axes to draw into (default: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    (la, lb), _ = as_labelled([a, b], labels)
    ca, cb = _codes(a, frame), _codes(b, frame)
    if ca.shape != cb.shape:
        raise ValueError(f"the frames of {la} and {lb} differ in shape: {ca.shape} and {cb.shape}")
    differ = ca != cb
    ax = single_axes(ax)
    _draw_codes(ax, ca, alpha=0.35)
    overlay = ax.imshow(np.ma.masked_array(np.ones(ca.shape), ~differ),
                        cmap=ListedColormap([DIFF_COLOUR]), interpolation="nearest",
                        vmin=0, vmax=1)
    overlay.set_gid("differs")
    if centres:
        ya, xa = _centres(a, frame)
        yb, xb = _centres(b, frame)
        ax.scatter(xa, ya, s=14, c="black", marker="o", zorder=3, gid="centres_a", label=la)
        ax.scatter(xb, yb, s=30, c="black", marker="x", zorder=4, gid="centres_b", label=lb)
    n = int(differ.sum())
    _legend(ax, [Patch(facecolor=DIFF_COLOUR, label=f"code differs ({n} pixels)")])
    _zoom(ax, region)
    ax.set_title(f"{la} vs {lb}, frame {frame}: {n} pixels differ")
    ax.set_xlabel("x (pixel)")
    ax.set_ylabel("y (pixel)")
    return ax.figure
