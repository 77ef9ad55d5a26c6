"""The widgets' graph, UI loop, worker, pump and figure hosts, without any finder."""

import asyncio
import threading
import time

import numpy as np
import pytest

from aare_lab.widgets.base import InteractiveWidget
from aare_lab.widgets.figures import FigureHost
from aare_lab.widgets.graph import Input, Node, Task, ViewNode
from aare_lab.widgets.loop import Pump, UiLoop, Worker, wait_until


# --------------------------------------------------------------------- graph
def test_node_caches_until_a_parent_changes():
    calls = []
    a = Input(2, "a")
    b = Node(lambda v: calls.append(v) or v * 10, a)
    assert b.value == 20 and b.value == 20
    assert calls == [2]
    a.set(3)
    assert b.value == 30 and calls == [2, 3]


def test_input_tells_dependents_only_on_a_real_change():
    seen = []

    class Probe:
        def notify(self):
            seen.append(1)

    a = Input(1.0, "a")
    a.views.append(Probe())
    a.set(1.0)
    assert seen == []
    a.set(2.0)
    assert seen == [1]
    a.set(np.array([1, 2]))  # arrays compare element-wise: still a change
    assert seen == [1, 1]


def test_task_delivers_only_its_newest_generation():
    ui = UiLoop()
    worker = Worker()
    gate = threading.Event()
    a = Input(1, "a")

    def slow(job, value):
        if value == 1:
            gate.wait(5)
        return value * 100

    task = Task(slow, a, worker=worker, ui=ui)
    task.submit()
    a.set(2)          # a newer generation while the first still runs
    gate.set()
    wait_until(ui, lambda: not task.running, timeout=10)
    assert task.value == 200
    worker.stop()


def test_task_keeps_the_last_good_value_when_a_run_fails():
    ui = UiLoop()
    worker = Worker()
    a = Input(1, "a")

    def compute(job, value):
        if value < 0:
            raise ValueError("negative input")
        return value

    task = Task(compute, a, worker=worker, ui=ui)
    task.submit()
    wait_until(ui, lambda: not task.running)
    a.set(-1)
    wait_until(ui, lambda: not task.running)
    assert task.value == 1
    assert str(task.error) == "negative input"
    worker.stop()


# ---------------------------------------------------------------------- loop
def test_call_soon_from_another_thread_runs_on_the_ui_thread():
    ui = UiLoop()
    ran_on = []
    threads = [threading.Thread(target=ui.call_soon,
                                args=(lambda: ran_on.append(threading.get_ident()),))
               for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ran_on == []           # nothing runs behind the UI thread's back
    assert ui.drain() == 5
    assert set(ran_on) == {threading.get_ident()}


def test_call_soon_wakes_a_running_asyncio_loop():
    async def main():
        ui = UiLoop()
        assert ui.loop is asyncio.get_running_loop()
        done = asyncio.Event()
        ran_on = []

        def callback():
            ran_on.append(threading.get_ident())
            done.set()

        threading.Thread(target=ui.call_soon, args=(callback,)).start()
        await asyncio.wait_for(done.wait(), 5)
        return ran_on

    ran_on = asyncio.run(main())
    assert ran_on == [threading.get_ident()]


def test_worker_cancels_the_running_job_for_a_newer_one():
    worker = Worker()
    started, results = threading.Event(), []

    def long_job(job):
        started.set()
        for _ in range(500):
            job.check()
            time.sleep(0.01)
        return "old"

    worker.submit(long_job, on_done=lambda v, e: results.append(v))
    started.wait(5)
    worker.submit(lambda job: "new", on_done=lambda v, e: results.append(v))
    deadline = time.monotonic() + 5
    while worker.busy and time.monotonic() < deadline:
        time.sleep(0.01)
    assert results == ["new"]
    worker.stop()


def test_pump_redraws_at_a_bounded_rate():
    ui = UiLoop()
    pump = Pump(ui, max_hz=10)
    refreshed = []

    class Figure:
        redraws = 0

        def redraw(self):
            Figure.redraws += 1

    figure = Figure()

    class View:
        def __init__(self):
            self.figure = figure

        def refresh(self):
            refreshed.append(time.monotonic())
            return True

    views = [View(), View()]
    start = time.monotonic()
    while time.monotonic() - start < 1.0:
        for v in views:
            pump.mark_dirty(v)     # far faster than 10 Hz
        ui.drain()
        time.sleep(0.002)
    wait_until(ui, lambda: not pump.pending)
    assert 5 <= pump.ticks <= 13
    assert Figure.redraws == pump.ticks          # one redraw per tick for both views
    assert np.all(np.diff(refreshed[::2]) >= 0.09)


# -------------------------------------------------------------------- figures
@pytest.mark.parametrize("interactive", [True, False], ids=["ipympl", "static"])
def test_view_refreshes_and_draws_only_on_the_ui_thread(interactive):
    ui = UiLoop()
    host = FigureHost(ui, interactive=interactive)
    ax = host.figure.add_subplot()
    (line,) = ax.plot([0, 1], [0, 0])
    pump = Pump(ui, max_hz=50)
    value = Input(0.0, "y")
    rendered_on = []

    def render(y):
        rendered_on.append(threading.get_ident())
        line.set_ydata([y, y])

    ViewNode(render, value, pump=pump, figure=host)
    # A widget callback on a "subshell" thread only forwards the value.
    for k in range(1, 6):
        t = threading.Thread(target=ui.call_soon, args=(value.set, float(k)))
        t.start()
        t.join()
    wait_until(ui, lambda: not pump.pending)
    assert line.get_ydata()[0] == 5.0
    assert set(rendered_on) == {ui.thread_id}
    if interactive:
        # ipympl asks to draw; the browser's draw request arrives on another thread.
        t = threading.Thread(target=host.send_event, args=({"type": "draw"},))
        t.start()
        t.join()
        ui.drain()
    else:
        assert bytes(host.widget.value).startswith(b"\x89PNG")
    assert host.draw_threads and set(host.draw_threads) == {ui.thread_id}


def test_canvas_messages_from_another_thread_wait_for_the_ui_thread():
    ui = UiLoop()
    host = FigureHost(ui, interactive=True)
    host.figure.add_subplot().plot([0, 1])
    clicks = []
    host.figure.canvas.mpl_connect(
        "button_press_event", lambda event: clicks.append(threading.get_ident()))
    event = {"type": "button_press", "x": 200, "y": 200, "button": 0, "buttons": 1, "step": 0,
             "modifiers": [], "guiEvent": {"isTrusted": True}}
    t = threading.Thread(target=host.send_event, args=(event,))
    t.start()
    t.join()
    assert clicks == []
    ui.drain()
    assert clicks == [ui.thread_id]


def test_a_failing_callback_does_not_stall_the_queue():
    ui = UiLoop()
    errors, ran = [], []
    ui.on_error = errors.append
    ui.call_soon(lambda: 1 / 0)
    ui.call_soon(lambda: ran.append("after"))
    ui.drain()
    assert ran == ["after"]
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)


def test_a_worker_starts_its_thread_with_the_first_job():
    worker = Worker(name="aare_lab-lazy-test")
    assert "aare_lab-lazy-test" not in {t.name for t in threading.enumerate()}
    done = []
    worker.submit(lambda job: 1, on_done=lambda v, e: done.append(v))
    deadline = time.monotonic() + 5
    while not done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done == [1]
    worker.stop()


# ------------------------------------------------------------------- widgets
class Doubler(InteractiveWidget):
    """The smallest widget: one task, its status text."""

    def describe(self, task) -> str:
        return f"doubled: {task.value}"


def test_repr_is_the_state_in_one_line_and_jupyter_still_shows_the_widget():
    w = Doubler(interactive=False)
    try:
        assert repr(w) == "Doubler()"
        w.task(lambda job, v: 2 * v, Input(21, "v"), name="double").submit()
        assert repr(w) == "Doubler(running)"  # until its value reaches the UI thread
        w.wait()
        assert repr(w) == str(w) == "Doubler(doubled: 42)"
        w.status.fail("a bad value")
        assert repr(w) == "Doubler(doubled: 42; error: a bad value)"
        bundle = w._repr_mimebundle_()
        assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == w.model_id
        assert bundle["text/plain"] == repr(w)
    finally:
        w.close()
    assert repr(Doubler.__new__(Doubler)) == "Doubler(not built)"


class Failing(Doubler):
    """A widget whose constructor raises after the base was built."""

    def __init__(self):
        super().__init__(interactive=False)
        self.base_built = True
        raise ValueError("a bad argument")


class Buggy(Doubler):
    """A built widget whose state_lines has a bug."""

    def __init__(self):
        super().__init__(interactive=False)

    def state_lines(self):
        return [self.no_such_state]


def test_repr_tells_a_half_built_widget_from_a_bug_in_a_built_one(monkeypatch):
    """A subclass whose constructor raised after its base's returned is "not built"; the
    AttributeError of a built widget's own state_lines is raised, not hidden."""
    made = []
    original = InteractiveWidget.__init__

    def keep(self, *args, **kwargs):
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(InteractiveWidget, "__init__", keep)
    with pytest.raises(ValueError, match="a bad argument"):
        Failing()
    (failed,) = made
    assert failed.base_built and repr(failed) == "Failing(not built)"
    failed.close()
    buggy = Buggy()
    try:
        with pytest.raises(AttributeError, match="no_such_state"):
            repr(buggy)
    finally:
        buggy.close()
