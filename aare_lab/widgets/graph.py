"""The widgets' model graph: parameters → runs → analyses → views, in the manner of plopp.

A `Node` caches its value until a parent changes; `notify` invalidates it and tells its
children and views, which pull new values when they next refresh. A `Task` is a node whose
function runs on a `aare_lab.widgets.loop.Worker`: it keeps its last finished value (and
the last error) while a newer one is computed, and drops results of older generations.
Every change to the graph happens on the UI thread (`aare_lab.widgets.loop.UiLoop`);
workers only compute, so no node is ever touched by two threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_UNSET = object()


class Node:
    """A value computed from its parents' values, cached until one of them changes.

    Parameters
    ----------
    func
        Called with the parents' values; its return value is the node's value.
    *parents
        The nodes this one depends on.
    name
        For messages and ``repr``.
    """

    def __init__(self, func: Callable[..., Any], *parents: Node, name: str | None = None):
        self.func = func
        self.parents = parents
        self.name = name or getattr(func, "__name__", type(self).__name__)
        self.children: list[Node] = []
        self.views: list[ViewNode] = []
        self._value = _UNSET
        for parent in parents:
            parent.children.append(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    @property
    def ready(self) -> bool:
        """Whether the node and all its ancestors have a value."""
        return all(p.ready for p in self.parents)

    @property
    def value(self):
        """The cached value, computed on first use after a change."""
        if self._value is _UNSET:
            self._value = self.func(*(p.value for p in self.parents))
        return self._value

    def notify(self) -> None:
        """A parent changed: forget the cached value and pass the news on."""
        self._value = _UNSET
        self._tell_dependents()

    def _tell_dependents(self) -> None:
        for child in self.children:
            child.notify()
        for view in self.views:
            view.notify()


class Input(Node):
    """A parameter: a value set from outside (a widget, a test, a notebook cell).

    Parameters
    ----------
    value
        The initial value.
    name
        The parameter's name.
    """

    def __init__(self, value, name: str):
        super().__init__(lambda: None, name=name)
        self._value = value

    @property
    def value(self):
        """The current value."""
        return self._value

    def set(self, value) -> None:
        """Change the value; dependents are told only when it really changed."""
        if _same(value, self._value):
            return
        self._value = value
        self._tell_dependents()


class Task(Node):
    """A node whose function runs on a worker; it holds the newest finished value.

    Parameters
    ----------
    func
        Called on the worker as ``func(job, *parent values)``; ``job`` has ``cancelled``
        (checked between chunks) and ``progress(fraction, text)``.
    *parents
        The nodes it depends on (read on the UI thread when the task is submitted).
    worker
        The `aare_lab.widgets.loop.Worker` that runs it.
    ui
        The `aare_lab.widgets.loop.UiLoop` results are delivered on.
    name
        For messages.
    on_state
        Called on the UI thread as ``on_state(task)`` when the task starts, progresses,
        finishes or fails (for status lines).
    """

    def __init__(self, func: Callable[..., Any], *parents: Node, worker, ui,
                 name: str | None = None, on_state: Callable[[Task], None] | None = None):
        super().__init__(func, *parents, name=name)
        self.worker, self.ui = worker, ui
        self.generation = 0
        self.error: BaseException | None = None
        self.running = False
        self.progress: tuple[float, str] = (0.0, "")
        self.on_state = on_state

    @property
    def ready(self) -> bool:
        """Whether a value has been delivered."""
        return self._value is not _UNSET

    @property
    def value(self):
        """The newest delivered value (None before the first)."""
        return None if self._value is _UNSET else self._value

    def notify(self) -> None:
        """A parent changed: start a new generation on the worker."""
        self.submit()

    def submit(self) -> None:
        """Run the function on the worker for the parents' current values."""
        if not all(p.ready for p in self.parents):
            return
        self.generation += 1
        generation = self.generation
        args = [p.value for p in self.parents]
        self.running = True
        self.progress = (0.0, "")
        self.worker.submit(
            lambda job: self.func(job, *args),
            on_done=lambda value, error: self.ui.call_soon(self._deliver, generation,
                                                           value, error),
            on_progress=lambda fraction, text: self.ui.call_soon(
                self._progress, generation, fraction, text),
            key=self)
        self._state()

    def _progress(self, generation: int, fraction: float, text: str) -> None:
        if generation == self.generation:
            self.progress = (fraction, text)
            self._state()

    def _deliver(self, generation: int, value, error: BaseException | None) -> None:
        if generation != self.generation:
            return  # a newer generation is on its way; this one answers an old question
        self.running = False
        if error is not None:
            # The last good value stays on screen; the error is shown beside it.
            self.error = error
            self._state()
            return
        self.error = None
        self._value = value
        # Dependents first: a status line written on this state reads their new values.
        self._tell_dependents()
        self._state()

    def _state(self) -> None:
        if self.on_state is not None:
            self.on_state(self)


class ViewNode:
    """A view's link to the graph: notified by its parents, refreshed by the pump.

    Parameters
    ----------
    render
        Called on the UI thread as ``render(*parent values)`` to update artists in place.
    *parents
        The nodes whose values it shows.
    pump
        The `aare_lab.widgets.loop.Pump` that refreshes it at a bounded rate.
    figure
        The `aare_lab.widgets.figures.FigureHost` it draws into, redrawn once per tick.
    """

    def __init__(self, render: Callable[..., None], *parents: Node, pump, figure=None):
        self.render = render
        self.parents = parents
        self.pump = pump
        self.figure = figure
        for parent in parents:
            parent.views.append(self)

    def notify(self) -> None:
        """Mark the view as stale; the pump refreshes it on its next tick."""
        self.pump.mark_dirty(self)

    def refresh(self) -> bool:
        """Pull the parents' values and render them; False while one has no value yet."""
        if not all(p.ready for p in self.parents):
            return False
        self.render(*(p.value for p in self.parents))
        return True


def _same(a, b) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except (TypeError, ValueError):
        return a is b
