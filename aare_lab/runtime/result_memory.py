"""Host memory for large results, reused across runs instead of mapped afresh.

The kernel zeroes every page of a fresh allocation on the thread that first writes it, so
copying a run's clusters into new arrays runs at about 25 GB/s with 16 threads on the
H200's host, against 40-68 GB/s into memory already mapped
(``benchmarks/results/fresh_memory_20261201T164148.json``); that zeroing bounds `find()`
into the result Dataset. Large arrays are therefore carved from anonymous mappings that
come back to a process-wide pool when the last array viewing them is gone (a result
dropped, a batch counted), and the next run in the process writes into pages already
mapped. The first run of a process still maps its pages; so does any run while the
earlier results are still held.

The pool keeps at most `idle_limit` bytes mapped but unused (an eighth of the machine's
memory unless ``AARE_LAB_IDLE_RESULT_MIB`` says otherwise, as read by the last
allocation; 0 turns reuse off) and gives the rest back to the system; `release` gives back
all of it. Only views of an array keep its memory in use: code that holds its address
instead (``ctypes.data``, a registration with the GPU driver) must not outlive the array.
"""

from __future__ import annotations

import mmap
import os
import queue
import threading
import weakref

import numpy as np

#: Arrays of fewer bytes come from NumPy: the C library already reuses small blocks.
MIN_BYTES = 16 << 20
#: Mappings are rounded up to whole huge pages (transparent huge pages fault 2 MiB at once).
GRANULE = 2 << 20
#: An idle mapping serves a request of at least this share of its size, so that a small
#: array never keeps a large mapping from the run it would suit.
MIN_FILL = 0.5
#: Overrides the idle limit, in MiB (a whole number >= 0; 0: no reuse).
IDLE_LIMIT_VARIABLE = "AARE_LAB_IDLE_RESULT_MIB"


def idle_limit() -> int:
    """Bytes the pool may keep mapped but unused: ``AARE_LAB_IDLE_RESULT_MIB`` MiB if set,
    else an eighth of the physical memory."""
    told = os.environ.get(IDLE_LIMIT_VARIABLE)
    if told is None:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8
    try:
        mib = int(told)
    except ValueError:
        mib = -1
    if mib < 0:
        raise ValueError(f"{IDLE_LIMIT_VARIABLE}={told!r}: give a whole number of MiB >= 0 "
                         "(0 turns the reuse of result memory off), or unset it")
    return mib << 20


class _Pool:
    """Idle mappings, and the hand-back of those whose arrays are gone."""

    def __init__(self):
        self._reset_locks()
        self._idle: list[mmap.mmap] = []
        self._limit = 0
        self.reused = 0
        self.mapped = 0

    def _reset_locks(self) -> None:
        self._lock = threading.Lock()
        # Filled by the finalizers, which run on whichever thread drops an array's last
        # view, also inside the garbage collector while that thread holds the lock: a
        # SimpleQueue may be put to from there, a lock may not be taken twice.
        self._returned = queue.SimpleQueue()

    def take(self, nbytes: int, limit: int) -> mmap.mmap:
        size = -(-nbytes // GRANULE) * GRANULE
        with self._lock:
            self._limit = limit
            self._settle()
            fits = [m for m in self._idle if size <= len(m) and size >= MIN_FILL * len(m)]
            if fits:
                best = min(fits, key=len)
                self._idle.remove(best)
                self.reused += 1
                return best
            self.mapped += 1
        # Private, as malloc maps: shared anonymous memory is shmem, without huge pages.
        mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            mapping.madvise(mmap.MADV_HUGEPAGE)
        return mapping

    def give_back(self, mapping: mmap.mmap) -> None:
        self._returned.put(mapping)
        # The limit at once where the lock is free; where it is held (by this very thread,
        # in the collector, or by another) the pool's next call settles it.
        if self._lock.acquire(blocking=False):
            try:
                self._settle()
            finally:
                self._lock.release()

    def _settle(self) -> None:
        """Move the returned mappings to the idle ones and drop what exceeds the limit;
        with the lock held. A dropped mapping is never closed: a dying array may still
        export its buffer, and the last reference unmaps it."""
        while True:
            try:
                self._idle.append(self._returned.get_nowait())
            except queue.Empty:
                break
        self._idle.sort(key=len)
        total = sum(map(len, self._idle))
        while self._idle and total > self._limit:
            total -= len(self._idle.pop())

    def release(self) -> int:
        with self._lock:
            self._settle()
            freed = sum(map(len, self._idle))
            self._idle.clear()
        return freed

    def idle_bytes(self) -> int:
        with self._lock:
            self._settle()
            return sum(map(len, self._idle))


_pool = _Pool()
if hasattr(os, "register_at_fork"):
    # A lock held by another thread at the fork would stay held in the child forever.
    os.register_at_fork(after_in_child=_pool._reset_locks)


def empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array, in reused memory where it is large.

    Parameters
    ----------
    shape, dtype
        As for `numpy.empty`.

    Returns
    -------
    numpy.ndarray
        Below `MIN_BYTES`, or with the idle limit at 0, `numpy.empty`'s. Otherwise a view
        of a pooled mapping that goes back to the pool when no view of it remains.
    """
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    limit = idle_limit()
    if nbytes < MIN_BYTES or limit == 0:
        return np.empty(shape, dtype)
    mapping = _pool.take(nbytes, limit)
    whole = np.frombuffer(mapping, np.uint8)
    # Not at exit: the process gives its memory back anyway.
    weakref.finalize(whole, _pool.give_back, mapping).atexit = False
    return whole[:nbytes].view(dtype).reshape(shape)


def release() -> int:
    """Give every idle mapping back to the system; returns the bytes freed.

    Arrays still in use keep their memory; it is unmapped when they are gone.
    """
    return _pool.release()


def idle_bytes() -> int:
    """Bytes mapped in the pool, not in use by any array."""
    return _pool.idle_bytes()


def stats() -> dict[str, int]:
    """How many large arrays were served from the pool (``reused``) and from fresh
    mappings (``mapped``) since the process started, and the ``idle`` bytes now."""
    return {"reused": _pool.reused, "mapped": _pool.mapped, "idle": _pool.idle_bytes()}


__all__ = ["empty", "release", "idle_bytes", "idle_limit", "stats", "IDLE_LIMIT_VARIABLE"]
