"""The result sinks write each cluster's frame number from its batch's clusters per frame,
and count int16 windows' taps at the limits, in the threaded pass that copies the clusters:
every share of the threads, a batch whose counts do not match its clusters, and the file
sink's reused column."""

import numpy as np
import pytest
import xarray as xr

import aare_lab.runtime.parallel
from aare_lab import FrozenFinder, Pedestal
from aare_lab.finders import _assembly
from aare_lab.finders._assembly import MemorySink
from aare_lab.finders._assembly_loops import copy_clusters
from aare_lab.finders.base import ClusterBatch
from aare_lab.model.clipping import CLIPPED_VARIABLE, clipped_taps
from aare_lab.simulate import Beam, Detector, Simulator


@pytest.fixture
def run():
    sim = Simulator(Detector(frame_shape=(40, 48)), Beam(photons_per_frame=25), seed=11)
    ped = Pedestal((40, 48), 50, "float32")
    ped.push_dark(sim.dark(50))
    frames, _ = sim.frames(24)
    # Some frames without a photon: runs of length zero, at the start, inside and at the end
    # of a chunk.
    for f in (0, 5, 6, 13, 23):
        frames[f] = sim.dark(1)[0]
    return ped, frames


@pytest.fixture
def small_shares(monkeypatch):
    """Every copy of a batch cut into four pieces, however small: the memory sink's compiled
    pass and the file sink's threads."""
    monkeypatch.setenv(aare_lab.runtime.parallel.THREADS_VARIABLE, "4")
    monkeypatch.setattr(aare_lab.runtime.parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(aare_lab.runtime.parallel, "_pools", {})
    monkeypatch.setattr(_assembly, "piece_count", lambda nbytes: 4)


def one_frame_at_a_time(ped, frames, numbers):
    """(frame, y, x) of each cluster, from a run split into one call per frame: the frame
    number comes from the call, not from any count of clusters."""
    finder = FrozenFinder(ped, 5.0, 3, chunk_frames=1)
    rows = []
    for number, frame in zip(numbers, frames):
        found = finder.find(frame[None], frame_numbers=[number], progress=False)
        rows += [(number, y, x) for y, x in zip(found.y.values, found.x.values)]
    return rows


def test_each_cluster_has_its_own_frame_number(run, small_shares):
    ped, frames = run
    numbers = np.arange(1000, 1000 + 3 * len(frames), 3)
    result = FrozenFinder(ped.copy(), 5.0, 3, chunk_frames=7).find(
        frames, frame_numbers=numbers, progress=False)
    found = list(zip(result.frame_number.values, result.y.values, result.x.values))
    assert found == one_frame_at_a_time(ped.copy(), frames, numbers)
    assert len(found) > 100 and (result.n_kept.values == 0).sum() >= 5


def test_the_file_sink_writes_the_same_frame_numbers(run, small_shares, tmp_path):
    ped, frames = run
    numbers = np.arange(len(frames)) * 2 + 7
    in_memory = FrozenFinder(ped.copy(), 5.0, 3, chunk_frames=5).find(
        frames, frame_numbers=numbers, progress=False)
    FrozenFinder(ped.copy(), 5.0, 3, chunk_frames=5).find(
        frames, frame_numbers=numbers, progress=False, out=tmp_path / "run.nc")
    with xr.open_dataset(tmp_path / "run.nc") as on_disk:
        np.testing.assert_array_equal(on_disk.frame_number.values,
                                      in_memory.frame_number.values)
        np.testing.assert_array_equal(on_disk.y.values, in_memory.y.values)
    assert in_memory.sizes["cluster"] > 100


def test_a_batch_whose_counts_miss_its_clusters_is_refused(run):
    ped, frames = run
    finder = FrozenFinder(ped, 5.0, 3)
    batch = finder.process_chunk(frames[:4], np.arange(4))
    sink = MemorySink(finder._empty_batch(), lambda **fields: fields, False)
    wrong = batch._replace(n_kept=batch.n_kept + np.array([0, 1, 0, 0]))
    with pytest.raises(ValueError, match=f"a batch of {len(batch.cluster_y)} clusters says "
                       f"it kept {len(batch.cluster_y) + 1}"):
        sink.add(wrong)
    with pytest.raises(ValueError, match=f"a batch of {len(batch.cluster_y)} clusters says "
                       "it kept 0"):
        sink.add(batch._replace(frame_numbers=batch.frame_numbers[:0], n_kept=batch.n_kept[:0]))
    with pytest.raises(ValueError, match="says it kept"):
        wrong.cluster_frame
    sink = MemorySink(finder._empty_batch(), lambda **fields: fields, False)
    sink.add(batch)
    np.testing.assert_array_equal(sink.result()["cluster_frame"],
                                  np.repeat(batch.frame_numbers, batch.n_kept))


@pytest.mark.parametrize("on_numba_threads", [False, True], ids=["pool", "numba"])
def test_int16_taps_at_the_limits_are_counted_per_frame_in_the_copying_pass(small_shares,
                                                                             on_numba_threads):
    """The memory sink counts each window's taps at the limits while it copies the windows
    (in four pieces, frames split between them, on the result pool's threads as after the
    GPU or on Numba's as after a CPU finder) and sums them per frame: the count NumPy
    gives, frame by frame, and `clipped_taps`' of the file sink and the live path."""
    rng = np.random.default_rng(4)
    n_kept = np.array([0, 40, 0, 0, 25, 70, 0, 33, 1, 0])
    windows = rng.integers(-300, 300, (n_kept.sum(), 3, 3)).astype(np.int16)
    hits = rng.random(windows.shape) < 0.02
    windows[hits] = rng.choice(np.array([-32768, 32767], np.int16), hits.sum())
    numbers = np.arange(len(n_kept)) + 50
    batch = ClusterBatch(numbers, n_kept, n_kept, np.zeros(len(windows), np.int32),
                         np.zeros(len(windows), np.int32), windows,
                         np.zeros((0, 4, 4), np.uint8), np.zeros(0, np.int64))
    empty = ClusterBatch(*(v[:0] for v in batch[:8]))
    sink = MemorySink(empty, lambda **fields: fields, False,
                      on_numba_threads=on_numba_threads)
    sink.add(batch)
    sink.add(batch._replace(frame_numbers=numbers + 100))
    per_window = (hits.sum(axis=(1, 2)))
    expected = np.array([per_window[a:b].sum() for a, b in
                         zip(np.cumsum(n_kept) - n_kept, np.cumsum(n_kept))])
    assert expected[[1, 4, 5, 7]].all() and not expected[[0, 2, 3, 6, 9]].any()
    result = sink.result()
    np.testing.assert_array_equal(result[CLIPPED_VARIABLE], np.tile(expected, 2))
    np.testing.assert_array_equal(clipped_taps(windows, n_kept), expected)
    np.testing.assert_array_equal(result["windows"], np.concatenate([windows, windows]))
    np.testing.assert_array_equal(result["energy"],
                                  np.tile(windows.sum(axis=(1, 2), dtype=float), 2))
    np.testing.assert_array_equal(result["cluster_frame"],
                                  np.tile(np.repeat(numbers, n_kept), 2) + np.repeat([0, 100],
                                                                                    n_kept.sum()))


@pytest.mark.parametrize("pieces", [1, 3, 7])
@pytest.mark.parametrize("dtype", ["int16", "int32", "float32", "float64"])
@pytest.mark.parametrize("size", [(3, 3), (9, 9)])
def test_the_copying_pass_writes_every_column_in_any_number_of_pieces(dtype, size, pieces):
    """`copy_clusters` in one piece, in three (runs of clusters split between pieces) and in
    seven (more than the threads, pieces without a cluster): the frame numbers NumPy's
    repeat gives, the centres and windows as they were, NumPy's float64 sums (integer
    extremes included) and, for integer windows, the taps at the limits."""
    rng = np.random.default_rng(5)
    n_kept = np.array([0, 2, 0, 1, 0, 0, 1, 0])
    n = int(n_kept.sum())
    info = np.iinfo(dtype) if dtype.startswith("int") else None
    low, high = (info.min, info.max) if info else (-1e6, 1e6)
    windows = rng.uniform(low, high, (n, *size)).astype(dtype)
    windows[0] = high
    if info:
        windows[1] = low
        windows[2, 0] = high
    frames = np.arange(len(n_kept), dtype=np.int64) + 30
    ys, xs = rng.integers(0, 400, (2, n)).astype(np.int32)
    out_frame, out_y, out_x = (np.full(n, -1, t) for t in (np.int64, np.int32, np.int32))
    out_windows, energy = np.zeros_like(windows), np.full(n, np.nan)
    at_limits = np.full(n, 99, np.uint8) if info else np.zeros(0, np.uint8)
    limits = (np.dtype(dtype).type(low), np.dtype(dtype).type(high)) if info else (0, 0)
    copy_clusters(frames, np.cumsum(n_kept), ys, xs, windows.reshape(n, -1), out_frame, out_y,
                  out_x, out_windows.reshape(n, -1), energy, info is not None, *limits,
                  at_limits, pieces)
    np.testing.assert_array_equal(out_frame, np.repeat(frames, n_kept))
    np.testing.assert_array_equal(out_y, ys)
    np.testing.assert_array_equal(out_x, xs)
    np.testing.assert_array_equal(out_windows, windows)
    expected = windows.sum(axis=(1, 2), dtype=np.float64)
    np.testing.assert_array_equal(energy.view(np.int64), expected.view(np.int64))
    if info:
        assert energy[0] == np.prod(size) * float(high)
        np.testing.assert_array_equal(at_limits, ((windows == low) | (windows == high)).sum(
            axis=(1, 2)))
        assert at_limits[0] == np.prod(size) and at_limits[1] == np.prod(size)


def test_taps_of_windows_larger_than_the_finders_are_counted_without_wrapping():
    """`clipped_taps` takes any windows: 17x17 ones at the limits count all 289 taps."""
    windows = np.full((3, 17, 17), 32767, np.int16)
    windows[1] = -32768
    windows[2, 0, 0] = 0
    np.testing.assert_array_equal(clipped_taps(windows, np.array([2, 0, 1])), [578, 0, 288])


@pytest.mark.parametrize("to_file", [False, True])
def test_on_batch_sees_every_chunk_with_the_energies_the_result_holds(run, tmp_path, to_file):
    ped, frames = run
    seen = []

    def look(batch, energies):
        # Copies: the arrays are valid during the call only.
        seen.append((batch.frame_numbers.copy(), batch.n_found.copy(), energies.copy()))

    finder = FrozenFinder(ped.copy(), 5.0, 3, chunk_frames=7, max_clusters_per_frame=2)
    out = tmp_path / "run.nc" if to_file else None
    with pytest.warns(UserWarning, match="truncated"):
        result = finder.find(frames, progress=False, out=out, on_batch=look)
    with result:
        assert [len(numbers) for numbers, _, _ in seen] == [7, 7, 7, 3]
        for k, name in enumerate(("frame", "n_found", "energy")):
            np.testing.assert_array_equal(np.concatenate([s[k] for s in seen]),
                                          result[name].to_numpy(), err_msg=name)
