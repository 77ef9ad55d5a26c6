"""ipywidgets wired to graph inputs on the UI thread, and the status line every widget shows."""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as widgets
import numpy as np

from .graph import Input
from .loop import UiLoop


class StatusLine:
    """One line under a widget: what ran and how fast, or what went wrong.

    An error is shown in red beside the last good result, which stays on screen.
    """

    def __init__(self):
        self.widget = widgets.HTML(value="", layout=widgets.Layout(min_height="1.6em"))
        self.text = ""
        self.error: str | None = None

    def show(self, text: str) -> None:
        """Show a normal status text (clears a shown error)."""
        self.text, self.error = text, None
        self.widget.value = f"<span style='color:#333'>{html.escape(text)}</span>"

    def fail(self, message: str) -> None:
        """Show an error message (the views keep their last good state)."""
        self.error = message
        kept = f" <span style='color:#777'>(showing the last good result: {html.escape(self.text)})</span>" \
            if self.text else ""
        self.widget.value = f"<span style='color:#b2182b'>⚠ {html.escape(message)}</span>{kept}"


class NotesLine:
    """Lines under the status line: what a run would have warned about outside a widget
    (too few dark frames, gain bits, clipped windows), whose warnings would be raised on
    the worker thread, where nobody sees them.

    Shown in the error's ⚠ style, in amber: the run stands, but its numbers may mislead.
    """

    def __init__(self):
        self.widget = widgets.HTML(value="")
        self.notes: tuple[str, ...] = ()

    def show(self, notes) -> None:
        """Show these notes instead of the last (none clears the line)."""
        self.notes = tuple(notes)
        self.widget.value = "<br>".join(
            f"<span style='color:#b35806'>⚠ {html.escape(note)}</span>" for note in self.notes)


def forward(ui: UiLoop, control: widgets.ValueWidget, node: Input, status: StatusLine,
            convert: Callable | None = None, shown: Callable = lambda value: value) -> None:
    """Send a control's new values to ``node`` on the UI thread.

    ipykernel 7 may call the observer on a subshell thread, so the observer only hands
    the value over. A value that ``convert`` rejects (ValueError, TypeError) is reported
    in ``status``, the node keeps its last good value and the control shows it again
    (``shown`` turns a node value into the control's), so that what the control shows
    is what runs.
    """
    def apply(value):
        try:
            node.set(convert(value) if convert is not None else value)
        except (ValueError, TypeError) as err:
            kept = shown(node.value)
            status.fail(f"{control.description or node.name}: {err}; kept {kept}")
            # Its echo converts to the node's own value, which changes nothing.
            control.value = kept

    control.observe(lambda change: ui.call_soon(apply, change["new"]), names="value")


#: Cluster sizes offered; any odd NYxNX from 3 to 11 can be typed.
CLUSTER_SIZES = ("3x3", "5x5", "7x7", "9x9", "11x11", "3x5", "5x3")


def cluster_size_box(size: tuple[int, int]) -> widgets.Combobox:
    """A box to pick or type a cluster size, showing ``size``."""
    return widgets.Combobox(value=size_text(size), options=CLUSTER_SIZES, ensure_option=False,
                            description="cluster", continuous_update=False)


def size_text(size) -> str:
    """``(3, 5)``, ``3`` or ``"3x5"`` as the text the cluster-size box shows."""
    return size if isinstance(size, str) else "x".join(str(int(v)) for v in np.broadcast_to(size, 2))


#: The highest nσ the widgets take. Test 3 asks a 3x3 window for 3 nσ σ, so 50σ asks for
#: 150σ: about a 20 keV photon at the simulator's noise and gain (8 keV is 64σ), and
#: more only loses photons; a wider range would make FinderControls' slider too coarse
#: to set in the range that matters (3 to 10σ).
N_SIGMA_MAX = 50.0


def n_sigma_value(value) -> float:
    """A threshold typed into a box: a finite number > 0."""
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"nσ must be a finite number > 0, got {value!r}")
    return value
