"""Where a view draws: the caller's axes or figure, else a new pyplot figure."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure


def new_figure(fig: Figure | None, figsize: tuple[float, float]) -> Figure:
    """``fig`` itself, or a new pyplot figure (so notebooks display it) whose constrained
    layout keeps legends and colour bars outside the axes in view."""
    if fig is not None:
        return fig
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained")


def single_axes(ax: Axes | None, figsize: tuple[float, float] = (6.4, 4.8)) -> Axes:
    """``ax`` itself, or the axes of a new figure."""
    return ax if ax is not None else new_figure(None, figsize).add_subplot()
