"""Figures owned by a widget: drawn only on the UI thread, shown once, with any backend.

With the ipympl backend (``%matplotlib widget``) a figure gets its own ipympl canvas,
outside pyplot (so it is never displayed twice), and every message the browser sends it
(draw, resize, mouse events), which ipykernel 7 delivers on a subshell thread, is handed to
the UI thread before matplotlib sees it. With any other backend the figure is rendered to
a PNG shown in an ``ipywidgets.Image`` that is replaced when the figure changes.
"""

from __future__ import annotations

import io
import itertools
import threading
from collections import deque

import ipywidgets as widgets
import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .loop import UiLoop

_NUMBERS = itertools.count(1000)
#: Draws whose thread a figure host remembers.
DRAWS_KEPT = 1000
#: A constrained layout doubles the cost of a draw, and between two layouts mostly data
#: change, so a redraw keeps the axes where they are and the layout is redone, in a draw of
#: its own, this many seconds after a redraw (at most once per that time).
RELAYOUT_AFTER = 1.0


def ipympl_active() -> bool:
    """Whether matplotlib's backend is ipympl (``%matplotlib widget`` / ``ipympl``)."""
    backend = matplotlib.get_backend().lower()
    return "ipympl" in backend or backend.endswith("widget")


class FigureHost:
    """A matplotlib figure and the widget that shows it.

    Parameters
    ----------
    ui
        The UI loop; figures are drawn on its thread only.
    figsize
        Inches.
    interactive
        True: an ipympl canvas; False: a PNG image; None: ipympl where it is the backend.

    Attributes
    ----------
    figure
        The `matplotlib.figure.Figure` views draw into.
    widget
        The ipywidget to place in a layout (the canvas, or an ``Image``).
    draw_threads
        Thread idents of the figure's last `DRAWS_KEPT` draws (tests check they are the UI
        thread's).
    """

    def __init__(self, ui: UiLoop, figsize: tuple[float, float] = (7.0, 4.5), *,
                 interactive: bool | None = None):
        self.ui = ui
        self.interactive = ipympl_active() if interactive is None else bool(interactive)
        self.figure = Figure(figsize=figsize, layout="constrained")
        self._layout = self.figure.get_layout_engine()
        self._laid_out = False
        self._relayout_queued = False
        self.draw_threads: deque[int] = deque(maxlen=DRAWS_KEPT)
        if self.interactive:
            from ipympl.backend_nbagg import Canvas, FigureManager

            canvas = Canvas(self.figure)
            self.manager = FigureManager(canvas, next(_NUMBERS))
            canvas.header_visible = False
            canvas.toolbar_position = "left"
            for source in (canvas, self.manager.toolbar):
                source.on_msg(canvas._handle_message, remove=True)
                source.on_msg(self._on_message)
            self.widget = canvas
        else:
            FigureCanvasAgg(self.figure)
            self.manager = None
            self.widget = widgets.Image(format="png")
        self.figure.canvas.mpl_connect("draw_event", self._drawn)

    def _on_message(self, widget, content, buffers) -> None:
        # Comm messages arrive on whatever thread the kernel serves them on.
        if self.ui.on_ui_thread:
            self.figure.canvas._handle_message(widget, content, buffers)
        else:
            self.ui.call_soon(self.figure.canvas._handle_message, widget, content, buffers)

    def _drawn(self, event) -> None:
        self.draw_threads.append(threading.get_ident())

    def redraw(self) -> None:
        """Show the figure's current state: ``draw_idle`` on a canvas, a new PNG otherwise.

        The first redraw lays the figure out; later ones keep its layout, so that new data
        show as fast as possible, and queue one layout soon after.
        """
        if not self.ui.on_ui_thread:
            raise RuntimeError("figures are redrawn on the UI thread only")
        if not self._laid_out:
            self._laid_out = True
            self._render(self._layout)
            return
        self._render("none")
        if not self._relayout_queued:
            self._relayout_queued = True
            self.ui.call_later(RELAYOUT_AFTER, self._relayout)

    def _relayout(self) -> None:
        self._relayout_queued = False
        self._render(self._layout)

    def _render(self, layout) -> None:
        self.figure.set_layout_engine(layout)
        if self.interactive:
            self.figure.canvas.draw_idle()
        else:
            buffer = io.BytesIO()
            self.figure.savefig(buffer, format="png")
            self.widget.value = buffer.getvalue()

    def send_event(self, content: dict) -> None:
        """Deliver a browser message (``{"type": "button_press", "x": ..., ...}``) as the
        front end would, on the calling thread; for tests and notebooks without a browser."""
        if self.interactive:
            self._on_message(self.widget, content, [])
        else:
            raise RuntimeError("a static figure takes no browser events; use the view's "
                               "methods (e.g. select) instead")
