"""Where a view draws: the caller's axes or figure, else a new figure that shows nowhere."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure


def new_figure(figsize: tuple[float, float] = (6.4, 4.8), *, managed: bool = False) -> Figure:
    """A figure with constrained layout (legends and colour bars stay in view).

    Parameters
    ----------
    figsize
        Width and height in inches.
    managed
        Create it through pyplot, so ``plt.show()`` and notebooks' inline backend display it;
        by default a bare `~matplotlib.figure.Figure` that is displayed only where it is
        returned or saved, never twice (widgets, and ipympl canvases made elsewhere).
    """
    if managed:
        import matplotlib.pyplot as plt

        return plt.figure(figsize=figsize, layout="constrained")
    return Figure(figsize=figsize, layout="constrained")


def figure_for(fig: Figure | None, figsize: tuple[float, float], managed: bool) -> Figure:
    """``fig`` itself, or a `new_figure`."""
    return fig if fig is not None else new_figure(figsize, managed=managed)


def single_axes(ax: Axes | None, fig: Figure | None = None,
                figsize: tuple[float, float] = (6.4, 4.8), managed: bool = False) -> Axes:
    """``ax`` itself, else new axes filling ``fig`` or a `new_figure`."""
    if ax is not None:
        return ax
    return figure_for(fig, figsize, managed).add_subplot()
