"""What every aare_lab widget shares: its UI loop, worker, pump, status line and figures."""

from __future__ import annotations

import functools
from collections import OrderedDict
from contextlib import contextmanager

import ipywidgets as widgets

from .controls import StatusLine
from .figures import FigureHost
from .graph import Task
from .loop import DEFAULT_MAX_HZ, Pump, UiLoop, Worker, wait_until


def _marks_built(cls):
    """Have ``cls``'s constructor mark an instance built (``_built``) when the constructor
    of the instance's own class returns, so that `InteractiveWidget.__repr__` of one whose
    constructor raised says so without hiding the errors of a built one."""
    init = cls.__init__

    @functools.wraps(init)
    def init_and_mark(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if type(self).__init__ is init_and_mark:  # the outermost constructor
            self._built = True

    cls.__init__ = init_and_mark
    return cls


@_marks_built
class InteractiveWidget(widgets.VBox):
    """A widget box that computes on a worker and draws on the UI thread.

    Create it in a notebook cell (on the kernel's main thread). Subclasses build their
    graph with `task` and `view`, and lay out their children with `layout_children`.

    Parameters
    ----------
    interactive
        Figures as ipympl canvases (True), static PNGs (False), or by the backend (None).
    max_hz
        Redraws per second at most.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            _marks_built(cls)

    def __init__(self, *, interactive: bool | None = None, max_hz: float = DEFAULT_MAX_HZ):
        super().__init__()
        self.ui = UiLoop()
        self.worker = Worker(f"aare_lab-{type(self).__name__}")
        self.status = StatusLine()
        self.progress = widgets.FloatProgress(value=0.0, min=0.0, max=1.0,
                                              layout=widgets.Layout(width="12em"))
        self.pump = Pump(self.ui, max_hz, on_error=self._view_failed)
        self.ui.on_error = lambda error: self.status.fail(_message(error))
        self._interactive = interactive
        self.hosts: list[FigureHost] = []
        self.tasks: list[Task] = []
        self._syncing = False

    def figure_host(self, figsize: tuple[float, float] = (7.0, 4.5)) -> FigureHost:
        """A new figure owned by this widget."""
        host = FigureHost(self.ui, figsize, interactive=self._interactive)
        self.hosts.append(host)
        return host

    def task(self, func, *parents, name: str) -> Task:
        """A graph node computed on this widget's worker, reported in the status line."""
        node = Task(func, *parents, worker=self.worker, ui=self.ui, name=name,
                    on_state=self._task_state)
        self.tasks.append(node)
        return node

    def on_ui(self, func, *args) -> None:
        """Run ``func(*args)`` now on the UI thread, or queue it there from another."""
        if self.ui.on_ui_thread:
            func(*args)
        else:
            self.ui.call_soon(func, *args)

    def watch(self, control: widgets.ValueWidget, apply) -> None:
        """Call ``apply(new value)`` on the UI thread when a user changes ``control``;
        changes the widget makes itself (inside `syncing`) are not echoed back."""
        def changed(change):
            if self._syncing and self.ui.on_ui_thread:
                return
            self.ui.call_soon(apply, change["new"])

        control.observe(changed, names="value")

    @contextmanager
    def syncing(self):
        """Set controls to match the widget's state without triggering `watch`."""
        self._syncing = True
        try:
            yield
        finally:
            self._syncing = False

    @property
    def busy(self) -> bool:
        """Whether a computation runs or waits, or views wait for a redraw."""
        return self.worker.busy or any(t.running for t in self.tasks) or self.pump.pending

    @property
    def error(self) -> str | None:
        """The error shown in the status line, if any."""
        return self.status.error

    def wait(self, timeout: float = 120.0) -> None:
        """Block until computations and redraws are done (scripts, tests, asserting cells).

        Runs the UI thread's queue meanwhile, so it must be called on that thread.
        """
        wait_until(self.ui, lambda: not self.busy, timeout)

    def __repr__(self) -> str:
        """The widget's state in one line, for ``print`` and plain consoles; Jupyter still
        shows the widget itself (ipywidgets' ``_repr_mimebundle_``)."""
        if not getattr(self, "_built", False):  # its constructor raised, or still runs
            return f"{type(self).__name__}(not built)"
        parts = self.state_lines()
        parts = (["running"] if self.busy else []) + parts + \
            ([f"error: {self.error}"] if self.error else [])
        return f"{type(self).__name__}({'; '.join(part for part in parts if part)})"

    def state_lines(self) -> list[str]:
        """What `repr` shows besides whether it runs and the error: by default the status
        line's text; a widget whose status may lag its state says more."""
        return [self.status.text]

    def close(self) -> None:
        """Stop the worker and close the widget."""
        worker = getattr(self, "worker", None)  # absent if __init__ failed before it
        if worker is not None:
            worker.stop()
        super().close()

    def _task_state(self, task: Task) -> None:
        fraction, text = task.progress
        self.progress.value = 1.0 if not task.running else fraction
        if task.error is not None:
            self.status.fail(_message(task.error))
        elif task.running:
            self.progress.bar_style = "info"
            self.progress.description = text[:40]
        else:
            self.progress.bar_style = "success"
            self.progress.description = ""
            self.status.show(self.describe(task))

    def describe(self, task: Task) -> str:
        """The status text after ``task`` finished."""
        return f"{task.name} done"

    def _view_failed(self, view, error: BaseException) -> None:
        self.status.fail(f"drawing failed: {_message(error)}")


def trim_oldest(cache: OrderedDict, size: int) -> None:
    """Drop the oldest entries of a worker's cache beyond ``size``."""
    while len(cache) > size:
        cache.popitem(last=False)


def _message(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if isinstance(error, (ValueError, RuntimeError)) \
        else f"{type(error).__name__}: {text}"
