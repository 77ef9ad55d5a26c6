"""One UI thread, workers that only compute, and a throttled pump between them.

JupyterLab ≥ 4.4 with ipykernel ≥ 7 delivers widget messages on subshell threads, and
matplotlib is not thread-safe (ipympl#610, plopp#596). So every figure and widget-state
change happens on the thread that created the widget, the kernel's main thread, through
its event loop:

- `UiLoop` captures that thread and its asyncio loop; `call_soon` from any thread queues
  a callback there. Without a running loop (a script, a test) the queue is drained by
  `UiLoop.drain`, which `wait` helpers call on the same thread.
- `Worker` runs the newest job on its own thread; an older queued job is dropped, a
  running one is told to stop at its next chunk.
- `Pump` refreshes stale views at most ``max_hz`` times a second and redraws each figure
  once per tick.
"""

from __future__ import annotations

import asyncio
import atexit
import heapq
import itertools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

#: Redraws per second at most, whatever the input rate.
DEFAULT_MAX_HZ = 4.0


class Cancelled(Exception):
    """Raised inside a job when a newer one replaced it (see `Job.check`)."""


class UiLoop:
    """The thread that owns figures and widgets, and a way to run code on it.

    Create it on the kernel's main thread (in a notebook cell); it then uses the
    kernel's running asyncio loop. Without a running loop, callbacks wait in a queue
    until `drain` runs them.
    """

    def __init__(self):
        self.thread_id = threading.get_ident()
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        self._queue: deque = deque()
        self._timers: list = []
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._timer_handle = None
        #: Called with the exception of a callback that raised (a widget shows it in its
        #: status line); by default it is printed.
        self.on_error: Callable[[BaseException], None] = _print_error

    @property
    def on_ui_thread(self) -> bool:
        """Whether the caller runs on the UI thread."""
        return threading.get_ident() == self.thread_id

    def call_soon(self, func: Callable, *args) -> None:
        """Run ``func(*args)`` on the UI thread, soon; safe from any thread."""
        with self._lock:
            self._queue.append((func, args))
            wake = self.loop is not None and not self._wake_pending
            self._wake_pending = self._wake_pending or wake
        if wake:
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:  # the loop is closed: the kernel is shutting down
                pass

    def call_later(self, delay: float, func: Callable, *args) -> None:
        """Run ``func(*args)`` on the UI thread after ``delay`` seconds."""
        with self._lock:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._order),
                                          func, args))
        if self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:
                pass

    def drain(self) -> int:
        """Run the queued callbacks and the due timers; on the UI thread only.

        Returns
        -------
        int
            How many callbacks ran.
        """
        if not self.on_ui_thread:
            raise RuntimeError("UiLoop.drain runs on the UI thread only")
        ran = 0
        while True:
            with self._lock:
                self._wake_pending = False
                now = time.monotonic()
                if self._queue:
                    func, args = self._queue.popleft()
                elif self._timers and self._timers[0][0] <= now:
                    _, _, func, args = heapq.heappop(self._timers)
                else:
                    self._arm_timer()
                    return ran
            try:
                func(*args)
            except Exception as err:  # one failing callback must not stall the others
                self.on_error(err)
            ran += 1

    def _arm_timer(self) -> None:
        """Have the event loop call `drain` when the next timer is due (lock held)."""
        if self.loop is None or not self._timers:
            return
        if self._timer_handle is not None:
            self._timer_handle.cancel()
        # A little late rather than early, so the timer is due when drain looks at it.
        delay = self._timers[0][0] - time.monotonic() + 1e-3
        self._timer_handle = self.loop.call_later(max(delay, 0.0), self.drain)

    def next_timer(self) -> float | None:
        """Seconds until the next timer is due (None: no timer)."""
        with self._lock:
            return max(0.0, self._timers[0][0] - time.monotonic()) if self._timers else None


def _print_error(error: BaseException) -> None:
    import traceback

    traceback.print_exception(error)


class Job:
    """One submission to a `Worker`: the function's handle on cancellation and progress."""

    def __init__(self, func: Callable[[Job], object], on_done, on_progress):
        self.func = func
        self.on_done = on_done
        self.on_progress = on_progress
        self.key = None  # set by Worker.submit: jobs of one key replace each other
        self._cancel = threading.Event()

    @property
    def cancelled(self) -> bool:
        """Whether a newer job replaced this one (or the worker stopped)."""
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Ask the job to stop at its next check."""
        self._cancel.set()

    def check(self) -> None:
        """Raise `Cancelled` if the job was cancelled; call it between chunks."""
        if self._cancel.is_set():
            raise Cancelled

    def progress(self, fraction: float, text: str = "") -> None:
        """Report progress (delivered to the UI thread)."""
        if self.on_progress is not None:
            self.on_progress(float(fraction), text)


_WORKERS: weakref.WeakSet = weakref.WeakSet()


class Worker:
    """A thread that runs the newest submitted job; a finder is never shared by threads.

    Jobs are submitted under a ``key`` (a `aare_lab.widgets.graph.Task` uses itself): a new
    job replaces the waiting job of its key and cancels the running one of its key, so
    several tasks of one widget share the thread without dropping each other's jobs.

    Parameters
    ----------
    name
        The thread's name.
    """

    def __init__(self, name: str = "aare_lab-worker"):
        self._cond = threading.Condition()
        self._waiting: dict = {}  # key -> the newest job of that key, in submission order
        self._current: Job | None = None
        self._stopped = False
        # Started by the first job, so a widget whose construction fails leaves no thread.
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        stop_at_exit(self)

    @property
    def busy(self) -> bool:
        """Whether a job is running or waiting."""
        with self._cond:
            return self._current is not None or bool(self._waiting)

    def submit(self, func: Callable[[Job], object], on_done: Callable[[object, BaseException | None], None],
               on_progress: Callable[[float, str], None] | None = None, key=None) -> Job:
        """Queue ``func(job)``, replacing the waiting job and cancelling the running one
        of the same ``key``; jobs of other keys wait their turn (first come, first run).

        ``on_done(value, error)`` and ``on_progress(fraction, text)`` are called on the
        worker thread: they should only hand over to the UI thread.
        """
        job = Job(func, on_done, on_progress)
        job.key = key
        with self._cond:
            if self._stopped:
                raise RuntimeError("the worker has stopped")
            waiting = self._waiting.pop(key, None)
            if waiting is not None:
                waiting.cancel()
            if self._current is not None and self._current.key == key:
                self._current.cancel()
            self._waiting[key] = job
            self._cond.notify()
            if not self._thread.is_alive():
                self._thread.start()
        return job

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel everything and end the thread (waits up to ``timeout`` seconds)."""
        with self._cond:
            self._stopped = True
            for job in (*self._waiting.values(), self._current):
                if job is not None:
                    job.cancel()
            self._waiting.clear()
            self._cond.notify()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                job = self._waiting.pop(next(iter(self._waiting)))
                self._current = job
            try:
                value, error = job.func(job), None
            except Cancelled:
                value, error = None, None
            except Exception as err:  # shown in the widget; the thread lives on
                value, error = None, err
            with self._cond:
                self._current = None
            if not job.cancelled:
                job.on_done(value, error)


def stop_at_exit(thread_owner) -> None:
    """Have ``thread_owner.stop(timeout=...)`` called at interpreter exit (kernel shutdown)."""
    _WORKERS.add(thread_owner)


@atexit.register
def _stop_workers() -> None:
    """At kernel shutdown, stop every worker so no thread outlives the interpreter's state."""
    for worker in list(_WORKERS):
        worker.stop(timeout=1.0)


class Pump:
    """Refreshes stale views on the UI thread at a bounded rate, one redraw per figure.

    Parameters
    ----------
    ui
        The `UiLoop`.
    max_hz
        Ticks per second at most.
    on_error
        Called as ``on_error(view, error)`` when a view fails to render; the others still
        render, the failed one keeps its last picture.
    """

    def __init__(self, ui: UiLoop, max_hz: float = DEFAULT_MAX_HZ,
                 on_error: Callable[[object, BaseException], None] | None = None):
        if not max_hz > 0:
            raise ValueError(f"max_hz must be > 0, got {max_hz!r}")
        self.ui = ui
        self.period = 1.0 / max_hz
        self.on_error = on_error
        self.ticks = 0
        self.redraws = 0
        self._dirty: dict = {}
        self._scheduled = False
        self._next = -float("inf")

    @property
    def pending(self) -> bool:
        """Whether views wait for a refresh."""
        return bool(self._dirty)

    def mark_dirty(self, view) -> None:
        """Queue ``view`` for the next tick (UI thread)."""
        self._dirty[view] = None
        if not self._scheduled:
            self._scheduled = True
            self.ui.call_later(max(0.0, self._next - time.monotonic()), self.tick)

    def tick(self) -> None:
        """Refresh every stale view, then redraw each touched figure once."""
        self._scheduled = False
        start = time.monotonic()
        views, self._dirty = list(self._dirty), {}
        figures = {}
        for view in views:
            try:
                if view.refresh() and view.figure is not None:
                    figures[id(view.figure)] = view.figure
            except Exception as err:
                if self.on_error is None:
                    raise
                self.on_error(view, err)
        for figure in figures.values():
            try:
                figure.redraw()
            except Exception as err:
                if self.on_error is None:
                    raise
                self.on_error(figure, err)
            self.redraws += 1
        self.ticks += 1
        # A tick that took longer than the period (a PNG rendered on a slow machine) is
        # followed by as long a rest, so the UI thread never spends more than half its
        # time drawing and the kernel stays responsive.
        end = time.monotonic()
        self._next = start + max(self.period, 2 * (end - start))


def wait_until(ui: UiLoop, done: Callable[[], bool], timeout: float = 60.0,
               poll: float = 0.01) -> None:
    """Run the UI queue on this thread until ``done()`` holds (scripts, tests, asserting cells).

    In a notebook, call it from a cell: the cell holds the main thread, so the callbacks
    that the kernel's loop would run are run here instead.

    Raises
    ------
    TimeoutError
        If ``done()`` is still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        ui.drain()
        if done():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"still busy after {timeout:g} s")
        due = ui.next_timer()
        time.sleep(poll if due is None else min(poll, max(due, 0.001)))
