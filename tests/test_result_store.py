"""Results written to disk chunk by chunk (`aare_lab.storage.result_store`), the growing buffers and
the staging ring behind ``find()``, and ``aare-lab find --out``.

The file a run writes as it goes must equal the in-memory result; an interrupted run must
leave a readable file of whole chunks that says it is incomplete.
"""

import json
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import h5netcdf
import numpy as np
import pytest
import xarray as xr

import aare_lab.runtime.parallel
from aare_lab import FrozenFinder, Pedestal, SerialFinder, TruncationWarning
from aare_lab.cli import main
from aare_lab.finders._assembly import GrowingRows
from aare_lab.gpu.feed import StagingRing
from aare_lab.model.results import load_result, make_result
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.sources import ArraySource, FrameSource
from aare_lab.sources.base import FrameChunk
from aare_lab.storage.result_store import IncompleteResultWarning, ResultWriter

#: Enough dark frames that no DarkFrameWarning mixes into the warnings checked here.
N_DARK = 100
FINDERS = {"serial": SerialFinder, "frozen": FrozenFinder}


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=(40, 48)), Beam(photons_per_frame=25), seed=11)
    return sim.dark(N_DARK), sim.frames(50)[0]


def finder(run, name, **options):
    dark, _ = run
    ped = Pedestal(dark.shape[1:], N_DARK)
    ped.push_dark(dark)
    options.setdefault("chunk_frames", 8)
    return FINDERS[name](ped, 4.0, (3, 3), **options)


class FailingSource(FrameSource):
    """An array source whose reads fail from frame ``fail_at`` on (a detector gone away)."""

    def __init__(self, frames, fail_at: int, error: BaseException):
        self._base = ArraySource(frames)
        self.n_frames, self.frame_shape = self._base.n_frames, self._base.frame_shape
        self.has_frame_numbers = False
        self._fail_at, self._error = fail_at, error

    def describe(self):
        return "a failing source"

    @contextmanager
    def _reader(self):
        with self._base._reader() as read:
            def failing(start, stop):
                if stop > self._fail_at:
                    raise self._error
                return read(start, stop)
            yield failing


@pytest.mark.parametrize("name", list(FINDERS))
def test_the_file_equals_the_result_in_memory(run, name, tmp_path):
    _, frames = run
    path = tmp_path / "run.nc"
    in_memory = finder(run, name).find(frames, branch_maps=[3, 17, 40], progress=False)
    with finder(run, name).find(frames, branch_maps=[3, 17, 40], progress=False,
                                out=path) as lazy:
        assert lazy.sizes["cluster"] == in_memory.sizes["cluster"] > 500
        xr.testing.assert_identical(lazy.load(), in_memory)
    xr.testing.assert_identical(load_result(path), in_memory)
    with xr.open_dataset(path, engine="h5netcdf") as raw:
        assert raw.attrs["complete"] == 1 and raw.attrs["frames_written"] == len(frames)
    with h5netcdf.File(path, "r") as f:
        assert all(f.dimensions[d].isunlimited() for d in ("cluster", "frame", "branch_frame"))


def test_truncation_is_reported_from_the_file_as_in_memory(run, tmp_path):
    _, frames = run
    cap = int(np.median(finder(run, "frozen").find(frames, progress=False)["n_found"]))
    with pytest.warns(TruncationWarning) as memory:
        in_memory = finder(run, "frozen", max_clusters_per_frame=cap).find(frames,
                                                                           progress=False)
    with pytest.warns(TruncationWarning) as disk:
        lazy = finder(run, "frozen", max_clusters_per_frame=cap).find(
            frames, progress=False, out=tmp_path / "capped.nc")
    with lazy:
        xr.testing.assert_identical(lazy.load(), in_memory)
    over = int((in_memory["n_found"] > in_memory["n_kept"]).sum())
    assert f"truncated {over} of {len(frames)} frames" in str(disk[0].message)
    assert str(disk[0].message) == str(memory[0].message)


@pytest.mark.parametrize("error", [RuntimeError("detector went away"), KeyboardInterrupt()])
def test_an_interrupted_run_leaves_its_completed_chunks(run, tmp_path, error):
    _, frames = run
    path = tmp_path / "cut.nc"
    with pytest.raises(type(error)), pytest.warns(IncompleteResultWarning, match="after 16"):
        finder(run, "frozen").find(FailingSource(frames, 20, error), progress=False,
                                   out=tmp_path / "cut.nc")
    # Never under the result's own name: only whole runs are.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.partial.nc"]
    path = tmp_path / "cut.partial.nc"
    with xr.open_dataset(path, engine="h5netcdf") as raw:
        assert raw.attrs["complete"] == 0 and raw.attrs["frames_written"] == 16
    with pytest.warns(IncompleteResultWarning, match="16 frames completed"):
        cut = load_result(path)
    first = finder(run, "frozen").find(frames[:16], progress=False)
    xr.testing.assert_identical(cut, first)


def test_a_chunk_cut_off_half_way_is_dropped(tmp_path):
    spec = FinderSpec("frozen", n_pedestal=10)

    def result(n, k=2):
        return make_result(spec=spec, frame_shape=(4, 5), frame_numbers=np.arange(n),
                           n_found=np.full(n, k), n_kept=np.full(n, k),
                           cluster_frame=np.repeat(np.arange(n), k),
                           cluster_y=np.zeros(n * k, np.int32),
                           cluster_x=np.zeros(n * k, np.int32),
                           windows=np.ones((n * k, 3, 3), np.int32))

    whole = result(3)
    columns = {name: var.values for name, var in whole.variables.items()
               if var.dims and var.dims[0] in ("cluster", "frame")}
    writer = ResultWriter(tmp_path / "half.nc", result(0))
    writer.append(columns)
    with pytest.raises(TypeError):
        # Refused before any of its variables is staged.
        writer.append({**columns, "n_kept": np.full(3, "many")})
    with pytest.raises(ValueError, match="rows of shape"):
        writer.append({**columns, "window": np.ones((6, 2, 3), np.int32)})
    writer.close(complete=False)
    path = tmp_path / "half.partial.nc"
    with pytest.warns(IncompleteResultWarning):
        xr.testing.assert_identical(load_result(path), whole)
    with pytest.raises(ValueError, match="must give"):
        ResultWriter(tmp_path / "other.nc", result(0)).append({"y": np.zeros(1, np.int32)})


def test_a_killed_writer_leaves_the_chunks_of_its_last_checkpoint(tmp_path):
    """No close, no exception handling: the process ends at once after a checkpoint of two
    chunks and a third chunk."""
    path = tmp_path / "killed.partial.nc"
    script = f"""
import os
import numpy as np
from aare_lab.storage.result_store import ResultWriter
from aare_lab.model.results import make_result
from aare_lab.model.spec import FinderSpec

def result(n, start=0):
    return make_result(spec=FinderSpec("frozen", n_pedestal=10), frame_shape=(4, 5),
                       frame_numbers=np.arange(start, start + n), n_found=np.full(n, 2),
                       n_kept=np.full(n, 2),
                       cluster_frame=np.repeat(np.arange(start, start + n), 2),
                       cluster_y=np.zeros(2 * n, np.int32), cluster_x=np.ones(2 * n, np.int32),
                       windows=np.full((2 * n, 3, 3), 7, np.int32))

writer = ResultWriter({str(tmp_path / "killed.nc")!r}, result(0))
for start in (0, 3, 6):
    part = result(3, start)
    writer.append({{name: var.values for name, var in part.variables.items()
                    if var.dims and var.dims[0] in ("cluster", "frame")}})
    if start == 3:
        writer.checkpoint()
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    with pytest.warns(IncompleteResultWarning, match="6 frames completed"):
        cut = load_result(path)
    assert cut["frame"].values.tolist() == list(range(6))
    assert cut["frame_number"].values.tolist() == [f for f in range(6) for _ in range(2)]
    assert (cut["window"].values == 7).all() and (cut["x"].values == 1).all()


def test_cli_writes_the_result_as_it_goes(run, tmp_path, capsys):
    dark, frames = run
    np.save(tmp_path / "dark.npy", dark)
    np.save(tmp_path / "frames.npy", frames)
    out = tmp_path / "cli.nc"
    code = main(["find", "--dark", str(tmp_path / "dark.npy"), "--frames",
                 str(tmp_path / "frames.npy"), "--n-pedestal", str(N_DARK), "--n-sigma", "4",
                 "--out", str(out), "--quiet"])
    assert code == 0
    want = finder(run, "frozen").find(frames, progress=False)
    written = load_result(out)
    assert set(json.loads(written.attrs.pop("inputs"))) == {"dark", "frames"}
    xr.testing.assert_identical(written, want)
    assert f"{want.sizes['cluster']} clusters in {len(frames)} frames" in capsys.readouterr().out
    with h5netcdf.File(out, "r") as f:
        assert f.dimensions["cluster"].isunlimited() and f.attrs["complete"] == 1


def test_growing_rows_keep_what_was_appended():
    rows = GrowingRows(np.zeros((0, 2, 3), np.int16))
    expected = []
    for k, n in enumerate((0, 5, 1, 17, 3)):
        block = np.full((n, 2, 3), k, np.int16)
        rows.take(n)[...] = block
        expected.append(block)
        assert rows.capacity >= rows.size
    np.testing.assert_array_equal(rows.data, np.concatenate(expected))
    assert rows.capacity == 46   # 5, doubled to 10, 23 (more than double), doubled


def test_parallel_ranges_cover_every_item_once(monkeypatch):
    monkeypatch.setenv(aare_lab.runtime.parallel.THREADS_VARIABLE, "3")
    monkeypatch.setattr(aare_lab.runtime.parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(aare_lab.runtime.parallel, "_pools", {})
    hits = np.zeros(1000, np.int64)
    lock = threading.Lock()

    def work(a, b):
        with lock:
            hits[a:b] += 1

    aare_lab.runtime.parallel.parallel_ranges(work, len(hits), nbytes=1)
    np.testing.assert_array_equal(hits, 1)
    src = np.arange(30000, dtype=np.int32).reshape(100, 300)
    np.testing.assert_array_equal(aare_lab.runtime.parallel.parallel_copy(src), src)
    executor, threads = aare_lab.runtime.parallel._pools["default"]
    assert threads == executor._max_workers == 3
    executor.shutdown()


def test_pool_threads_default_per_pool_and_override(monkeypatch):
    from aare_lab.runtime.parallel import (
        DEFAULT_MAX_THREADS,
        MAX_THREADS,
        THREADS_VARIABLE,
        pool_threads,
    )

    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    monkeypatch.setattr(aare_lab.runtime.parallel, "_cores", lambda: 64)
    assert pool_threads() == DEFAULT_MAX_THREADS == 16
    assert pool_threads("staging") == MAX_THREADS["staging"] == 8
    monkeypatch.setattr(aare_lab.runtime.parallel, "_cores", lambda: 2)
    assert pool_threads() == pool_threads("staging") == 2
    monkeypatch.setenv(THREADS_VARIABLE, "5")
    assert pool_threads() == pool_threads("staging") == 5
    for bad in ("0", "-2", "four", ""):
        monkeypatch.setenv(THREADS_VARIABLE, bad)
        with pytest.raises(ValueError, match=f"{THREADS_VARIABLE}=.*whole number"):
            pool_threads()


class Fence:
    """Stands for the event of a device copy: its synchronize() is logged."""

    def __init__(self, log, k):
        self.log, self.k = log, k

    def synchronize(self):
        self.log.append(("sync", self.k))


def chunks_of(frames, n, fail_at=None):
    for start in range(0, len(frames), n):
        if fail_at is not None and start >= fail_at:
            raise OSError("read failed")
        yield FrameChunk(np.arange(start, min(start + n, len(frames))), frames[start:start + n])


def test_staging_ring_keeps_order_and_waits_for_each_buffer_to_be_read():
    frames = np.arange(23 * 2 * 2, dtype=np.uint16).reshape(23, 2, 2)
    log = []
    n_buffers = 3

    def copy(src, dst):
        log.append(("fill", int(src.ravel()[0]) // 4 // 2))
        dst[...] = src

    ring = StagingRing([np.empty((2, 2, 2), np.uint16) for _ in range(n_buffers)], copy=copy)
    taken = []
    # The fence handed back for a chunk is the one of the chunk taken last.
    for chunk in ring.stage(chunks_of(frames, 2), fence=lambda: Fence(log, len(taken) - 1)):
        np.testing.assert_array_equal(chunk.frames, frames[chunk.numbers])
        taken.append(chunk.numbers)
    np.testing.assert_array_equal(np.concatenate(taken), np.arange(23))
    # Chunk j reuses the buffer of chunk j - 3: it is filled after that chunk's fence.
    for j in range(n_buffers, len(taken)):
        assert log.index(("sync", j - n_buffers)) < log.index(("fill", j))


def test_staging_ring_raises_the_source_error_in_order_and_stops_when_closed():
    frames = np.zeros((10, 2, 2), np.uint16)
    ring = StagingRing([np.empty((2, 2, 2), np.uint16) for _ in range(3)])
    seen = []
    with pytest.raises(OSError, match="read failed"):
        for chunk in ring.stage(chunks_of(frames, 2, fail_at=6), fence=lambda: None):
            seen.append(int(chunk.numbers[0]))
    assert seen == [0, 2, 4]
    staged = ring.stage(chunks_of(np.zeros((1000, 2, 2), np.uint16), 2), fence=lambda: None)
    next(staged)
    staged.close()
    assert not [t for t in threading.enumerate() if t.name == "aare_lab-stage"]


@pytest.mark.skipif(aare_lab.runtime.parallel.pool_threads() < 2,
                    reason="one core: parallel_ranges runs every piece on the calling thread")
def test_work_of_one_pool_does_not_wait_behind_another_pool():
    """The GPU feed stages frames on its own pool while results are copied on another: a
    piece of one pool's work never queues behind another pool's blocked work."""
    from aare_lab.runtime.parallel import PARALLEL_MIN_BYTES, _pools, parallel_ranges, pool_threads

    threads = pool_threads("test-blocked")
    released, blocked_all = threading.Event(), threading.Barrier(threads + 1)

    def blocked(a, b):
        blocked_all.wait(10)   # every thread of the pool is busy here
        released.wait(10)

    worker = threading.Thread(target=parallel_ranges, args=(blocked, threads,
                                                             PARALLEL_MIN_BYTES),
                              kwargs={"pool": "test-blocked"})
    worker.start()
    blocked_all.wait(10)
    t0 = time.monotonic()
    parallel_ranges(lambda a, b: released.set(), threads, PARALLEL_MIN_BYTES,
                    pool="test-free")
    waited = time.monotonic() - t0
    worker.join(10)
    for name in ("test-blocked", "test-free"):
        _pools.pop(name)[0].shutdown()
    assert released.is_set() and waited < 5
