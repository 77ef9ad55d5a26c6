"""Result memory reused across runs: what is handed out, when it comes back, the limit."""

import gc
import threading

import numpy as np
import pytest

from aare_lab import FrozenFinder, Pedestal
from aare_lab.runtime import result_memory
from aare_lab.simulate import Beam, Detector, Simulator

MIB = 1 << 20


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch):
    monkeypatch.delenv(result_memory.IDLE_LIMIT_VARIABLE, raising=False)
    result_memory.release()
    yield
    result_memory.release()


def address(array):
    return array.__array_interface__["data"][0]


def test_a_dropped_array_lends_its_pages_to_the_next():
    first = result_memory.empty((32 * MIB) // 8, np.float64)
    first[:] = 1.5
    where = address(first)
    del first
    assert result_memory.idle_bytes() == 32 * MIB
    again = result_memory.empty((4 * MIB, 6), np.int32)        # 96 MiB: too big for it
    assert address(again) != where
    second = result_memory.empty((30 * MIB) // 4, np.int32)
    assert address(second) == where
    assert second.shape == ((30 * MIB) // 4,) and second.dtype == np.int32
    assert second.flags.c_contiguous and second.flags.writeable
    assert result_memory.idle_bytes() == 0


def test_memory_in_use_is_never_handed_out_twice():
    held = [result_memory.empty(20 * MIB, np.uint8) for _ in range(3)]
    dropped = address(held.pop())
    for k, array in enumerate(held):
        array[:] = k
    again = [result_memory.empty(20 * MIB, np.uint8) for _ in range(2)]
    assert address(again[0]) == dropped
    assert len({address(a) for a in held + again}) == 4
    again[0][:] = 7
    again[1][:] = 8
    assert [int(a.min()) for a in held] == [0, 1] == [int(a.max()) for a in held]


def test_a_buffer_taken_from_an_array_keeps_its_memory_in_use():
    array = result_memory.empty(20 * MIB, np.uint8)
    other = np.frombuffer(memoryview(array), np.uint8)
    del array
    assert result_memory.idle_bytes() == 0
    fresh = result_memory.empty(20 * MIB, np.uint8)
    assert address(fresh) != address(other)
    del other
    assert result_memory.idle_bytes() == 20 * MIB


def test_an_array_dropped_on_another_thread_comes_back():
    arrays = [result_memory.empty(20 * MIB, np.uint8)]
    worker = threading.Thread(target=arrays.clear)
    worker.start()
    worker.join()
    assert result_memory.idle_bytes() == 20 * MIB


def test_an_array_dropped_while_the_pool_is_busy_does_not_hang():
    # As when the garbage collector frees a view on a thread inside the pool's lock.
    done = threading.Event()

    def drop_inside_the_lock():
        array = result_memory.empty(20 * MIB, np.uint8)
        with result_memory._pool._lock:
            del array
        done.set()

    worker = threading.Thread(target=drop_inside_the_lock, daemon=True)
    worker.start()
    worker.join(10)
    assert done.is_set()
    assert result_memory.idle_bytes() == 20 * MIB


def test_a_view_keeps_the_memory_in_use():
    array = result_memory.empty(20 * MIB, np.uint8)
    view = array[5:10]
    del array
    assert result_memory.idle_bytes() == 0
    del view
    assert result_memory.idle_bytes() == 20 * MIB


def test_a_much_larger_idle_mapping_is_left_for_larger_arrays():
    big = result_memory.empty(200 * MIB, np.uint8)
    where = address(big)
    del big
    small = result_memory.empty(20 * MIB, np.uint8)
    assert address(small) != where
    assert result_memory.idle_bytes() == 200 * MIB


def test_small_arrays_come_from_numpy():
    small = result_memory.empty((10, 3), np.int16)
    del small
    assert result_memory.idle_bytes() == 0


def test_idle_memory_stays_under_the_limit(monkeypatch):
    monkeypatch.setenv(result_memory.IDLE_LIMIT_VARIABLE, "50")
    arrays = [result_memory.empty(20 * MIB, np.uint8) for _ in range(4)]
    del arrays
    gc.collect()
    assert result_memory.idle_bytes() == 40 * MIB
    assert result_memory.release() == 40 * MIB
    assert result_memory.idle_bytes() == 0


def test_a_limit_of_zero_turns_reuse_off(monkeypatch):
    monkeypatch.setenv(result_memory.IDLE_LIMIT_VARIABLE, "0")
    before = result_memory.stats()["mapped"]
    array = result_memory.empty(20 * MIB, np.uint8)
    del array
    assert result_memory.stats()["mapped"] == before
    assert result_memory.idle_bytes() == 0


@pytest.mark.parametrize("told", ["-1", "1.5", "lots"])
def test_a_bad_limit_names_the_variable(monkeypatch, told):
    monkeypatch.setenv(result_memory.IDLE_LIMIT_VARIABLE, told)
    with pytest.raises(ValueError, match=f"{result_memory.IDLE_LIMIT_VARIABLE}=.*MiB"):
        result_memory.empty(20 * MIB, np.uint8)


def test_results_in_reused_memory_are_the_results(monkeypatch):
    # Every array of these small runs goes through the pool, so the second run writes over
    # the first's dropped arrays: nothing of the first may show through.
    monkeypatch.setattr(result_memory, "MIN_BYTES", 0)
    sim = Simulator(Detector(frame_shape=(40, 48)), Beam(photons_per_frame=30), seed=3)
    ped = Pedestal((40, 48), 50, "float32")
    ped.push_dark(sim.dark(50))
    dense, _ = sim.frames(30)
    sparse = dense.copy()
    sparse[10:] = dense[0]
    expected = FrozenFinder(ped.copy(), 5.0, 3, chunk_frames=4).find(sparse, progress=False)
    expected = expected.copy(deep=True)
    assert result_memory.stats()["mapped"] > 0
    first = FrozenFinder(ped.copy(), 5.0, 3, chunk_frames=4).find(dense, progress=False)
    first.window.values[...] = 12345
    del first
    gc.collect()
    reused = result_memory.stats()["reused"]
    again = FrozenFinder(ped.copy(), 5.0, 3, chunk_frames=4).find(sparse, progress=False)
    assert result_memory.stats()["reused"] > reused
    assert again.identical(expected)
