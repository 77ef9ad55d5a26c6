"""Host frames to the GPU: one bulk copy per chunk, overlapped with the kernel.

A copy from pageable memory is staged by the driver and runs far below the PCIe rate, so
frames already in page-locked memory (`pinned_array`, e.g. filled by a detector receiver)
are copied as they are, and other frames reach the device in one of two ways:

- ``"register"``: the caller's array is page-locked in place (``cudaHostRegister``) for the
  duration of a call, and each chunk is copied straight from it;
- ``"stage"``: a worker thread reads the source ahead and copies each chunk (with a few
  threads of their own, `aare_lab.runtime.parallel`'s ``"staging"`` pool, so that they never
  wait behind the copies of the results) into a ring of pinned staging buffers
  (`StagingRing`), from which the copy engine moves it to the device. Pinned memory
  stays bounded (`STAGING_BUFFERS` chunks) and is reused, and the host copy of the next
  chunks overlaps with the collection of the previous chunk's clusters on the calling
  thread.

Either way the copy of chunk k+1 runs on its own stream while the kernel of chunk k runs,
into the device frame slot that chunk k-1 has finished with.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial

import numpy as np

from aare_lab.runtime.parallel import parallel_copy
from aare_lab.sources.base import FrameChunk

from .device import cuda_context

HOST_MEMORY = ("auto", "register", "stage")
#: Pinned staging buffers: one being copied to the device, one ready, one being filled.
STAGING_BUFFERS = 3
#: cudaMemoryTypeHost: page-locked host memory, which the copy engine reads directly.
_MEMORY_TYPE_HOST = 1


class StagingRing:
    """Chunks of frames copied ahead, on a worker thread, into a ring of reused buffers.

    The worker fills the buffers in turn and hands each filled one to the consumer; a
    buffer is filled again only once the consumer has moved past it and the fence it
    left then (the device copy out of it) has passed.

    Parameters
    ----------
    buffers
        C-contiguous buffers ``(chunk_frames, ny, nx)`` (page-locked for the GPU).
    worker_context
        Entered by the worker thread around its work (the CUDA device, so that it may
        wait on the fences).
    copy
        ``copy(src, dst)``: how a chunk is copied into its buffer.
    """

    def __init__(self, buffers: list[np.ndarray],
                 worker_context: Callable[[], object] = nullcontext,
                 copy: Callable[[np.ndarray, np.ndarray], object] = partial(parallel_copy,
                                                                            pool="staging")):
        self.buffers = buffers
        self._context = worker_context
        self._copy = copy
        # What must pass before each buffer is written again; kept across calls.
        self._fences: list[object | None] = [None] * len(buffers)

    def stage(self, chunks: Iterator[FrameChunk],
              fence: Callable[[], object]) -> Iterator[FrameChunk]:
        """Yield the ``chunks`` in order, each a view of one of the buffers.

        A chunk's buffer is reused once the next chunk is asked for (or the iteration
        ends); ``fence()`` is called then and gives what the worker must ``synchronize()``
        before it overwrites that buffer (None: nothing), e.g. the event of the device
        copy queued from it. An exception of the source is raised here, in order.
        """
        free: queue.Queue = queue.Queue()
        ready: queue.Queue = queue.Queue()
        stop = threading.Event()
        for index in range(len(self.buffers)):
            free.put(index)
        worker = threading.Thread(target=self._work, args=(chunks, free, ready, stop),
                                  name="aare_lab-stage", daemon=True)
        worker.start()
        held: deque[int] = deque()
        try:
            while True:
                if held:
                    # The consumer is back for the next chunk: it is done with this one.
                    self._release(held.popleft(), fence(), free)
                item = ready.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                index, chunk = item
                held.append(index)
                yield chunk
        finally:
            stop.set()
            while held:
                self._release(held.popleft(), fence(), free)
            free.put(None)
            # A worker blocked inside its source (a stream with nothing to send) sees
            # ``stop`` at its next chunk and writes no buffer: the caller need not wait.
            worker.join(timeout=1.0)

    def _release(self, index: int, fence, free: queue.Queue) -> None:
        self._fences[index] = fence
        free.put(index)

    def _work(self, chunks: Iterator[FrameChunk], free: queue.Queue, ready: queue.Queue,
              stop: threading.Event) -> None:
        try:
            with self._context():
                for chunk in chunks:
                    index = free.get()
                    if index is None or stop.is_set():
                        return
                    if self._fences[index] is not None:
                        self._fences[index].synchronize()
                    view = self.buffers[index][:len(chunk.numbers)]
                    self._copy(chunk.frames, view)
                    ready.put((index, FrameChunk(chunk.numbers, view)))
            ready.put(None)
        except BaseException as err:  # noqa: BLE001 (the source's errors go to the consumer)
            ready.put(err)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()


class HostFeed:
    """Two device frame slots, the copy stream, and the ring that stages pageable frames.

    Parameters
    ----------
    cp
        The ``cupy`` module.
    frame_shape
        ``(ny, nx)``.
    chunk_frames
        Frames per slot.
    """

    def __init__(self, cp, frame_shape: tuple[int, int], chunk_frames: int):
        self.cp = cp
        self.frame_shape = frame_shape
        self.chunk_frames = chunk_frames
        self.stream = cp.cuda.Stream(non_blocking=True)
        with cuda_context("allocating the GPU frame buffers"):
            self.slots = [cp.empty((chunk_frames, *frame_shape), cp.uint16) for _ in range(2)]
        self._readers = [None, None]
        self._next = 0
        self._ring: StagingRing | None = None
        self._last_copy = None

    @contextmanager
    def registered(self, array: np.ndarray):
        """Page-lock ``array`` while the block runs, so chunks of it copy without staging."""
        cp = self.cp
        start = array.ctypes.data
        with cuda_context(f"page-locking {array.nbytes >> 20} MiB of frames"):
            cp.cuda.runtime.hostRegister(start, array.nbytes, 0)
        try:
            yield
        finally:
            self.stream.synchronize()
            cp.cuda.runtime.hostUnregister(start)

    def put(self, frames: np.ndarray):
        """Queue the copy of host ``frames`` into the next slot.

        The copy waits for the launch that last read the slot (see `read_by`).

        Parameters
        ----------
        frames
            C-contiguous ``uint16`` frames, at most ``chunk_frames``, in page-locked
            memory (pinned, `registered`, or `staged`) for the full PCIe rate.

        Returns
        -------
        tuple
            The device frames (a view of the slot) and the event of their copy.
        """
        cp = self.cp
        slot = self._next
        n = frames.shape[0]
        src = frames.ctypes.data
        with cuda_context(f"copying {n} frames to the GPU"):
            if self._readers[slot] is not None:
                self.stream.wait_event(self._readers[slot])
            dst = self.slots[slot][:n]
            cp.cuda.runtime.memcpyAsync(dst.data.ptr, src, frames.nbytes,
                                        cp.cuda.runtime.memcpyHostToDevice, self.stream.ptr)
            copied = cp.cuda.Event(disable_timing=True)
            copied.record(self.stream)
        self._last_copy = copied
        return dst, copied

    def staged(self, chunks: Iterator[FrameChunk]) -> Iterator[FrameChunk]:
        """The ``chunks`` copied ahead into pinned staging buffers, on a worker thread.

        Each chunk must be `put` before the next is asked for: its buffer is refilled once
        that copy has left it. Close the iterator when stopping early.
        """
        if self._ring is None:
            shape = (self.chunk_frames, *self.frame_shape)
            device = self.cp.cuda.Device()
            with cuda_context("allocating the pinned staging buffers"):
                buffers = [pinned_array(self.cp, shape, np.uint16)
                           for _ in range(STAGING_BUFFERS)]
            self._ring = StagingRing(buffers,
                                     worker_context=lambda: self.cp.cuda.Device(device.id))
        return self._ring.stage(chunks, fence=lambda: self._last_copy)

    def read_by(self, done) -> None:
        """Record the event after which the launch fed by the last `put` is done with it."""
        self._readers[self._next] = done
        self._next = 1 - self._next

    def is_pinned(self, start: int) -> bool:
        """Whether the memory at ``start`` is already page-locked (see `pinned_array`)."""
        try:
            attributes = self.cp.cuda.runtime.pointerGetAttributes(start)
        except self.cp.cuda.runtime.CUDARuntimeError:
            return False
        return attributes.type == _MEMORY_TYPE_HOST


def pinned_array(cp, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A NumPy array in page-locked host memory (from CuPy's pinned pool).

    Frames written into such an array reach the GPU at the full PCIe rate, with no
    staging copy and no page-locking per call.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    memory = cp.cuda.alloc_pinned_memory(max(count, 1) * dtype.itemsize)
    return np.frombuffer(memory, dtype, count).reshape(shape)
