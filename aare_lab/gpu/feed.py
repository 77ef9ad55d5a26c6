"""Host frames to the GPU: one bulk copy per chunk, overlapped with the kernel.

A copy from pageable memory is staged by the driver and runs far below the PCIe rate, so
frames already in page-locked memory (`pinned_array`, e.g. filled by a detector receiver)
are copied as they are, and other frames reach the device in one of two ways:

- ``"register"``: the caller's array is page-locked in place (``cudaHostRegister``) for the
  duration of a call, and each chunk is copied straight from it;
- ``"stage"``: each chunk is copied by a few host threads into one of two pinned staging
  buffers, which the copy engine then moves to the device. Pinned memory stays bounded
  (two chunks) and is reused.

Either way the copy of chunk k+1 runs on its own stream while the kernel of chunk k runs,
into the device frame slot that chunk k-1 has finished with.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from .device import cuda_context

HOST_MEMORY = ("auto", "register", "stage")
#: Below this an array is staged: page-locking costs more than it saves for small calls.
REGISTER_MIN_BYTES = 256 << 20
COPY_THREADS = 8
#: cudaMemoryTypeHost: page-locked host memory, which the copy engine reads directly.
_MEMORY_TYPE_HOST = 1
#: Below this a copy is not worth handing to threads.
PARALLEL_COPY_MIN_BYTES = 1 << 20


class HostFeed:
    """Two device frame slots, their pinned staging buffers, and the copy stream.

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
        self._staging = [None, None]
        self._copied = [None, None]
        self._readers = [None, None]
        self._registered: tuple[int, int] | None = None
        self._next = 0

    @contextmanager
    def registered(self, array: np.ndarray):
        """Page-lock ``array`` while the block runs, so chunks of it copy without staging."""
        cp = self.cp
        start = array.ctypes.data
        with cuda_context(f"page-locking {array.nbytes >> 20} MiB of frames"):
            cp.cuda.runtime.hostRegister(start, array.nbytes, 0)
        self._registered = (start, start + array.nbytes)
        try:
            yield
        finally:
            self.stream.synchronize()
            self._registered = None
            cp.cuda.runtime.hostUnregister(start)

    def put(self, frames: np.ndarray):
        """Queue the copy of host ``frames`` into the next slot.

        The copy waits for the launch that last read the slot (see `read_by`).

        Parameters
        ----------
        frames
            C-contiguous ``uint16`` frames, at most ``chunk_frames``.

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
            if not (self._is_registered(src, frames.nbytes) or self.is_pinned(src)):
                src = self._stage(slot, frames)
            dst = self.slots[slot][:n]
            cp.cuda.runtime.memcpyAsync(dst.data.ptr, src, frames.nbytes,
                                        cp.cuda.runtime.memcpyHostToDevice, self.stream.ptr)
            copied = cp.cuda.Event(disable_timing=True)
            copied.record(self.stream)
        self._copied[slot] = copied
        return dst, copied

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

    def _is_registered(self, start: int, nbytes: int) -> bool:
        span = self._registered
        return span is not None and span[0] <= start and start + nbytes <= span[1]

    def _stage(self, slot: int, frames: np.ndarray) -> int:
        if self._copied[slot] is not None:
            self._copied[slot].synchronize()   # the staging buffer's last copy has left
        if self._staging[slot] is None:
            self._staging[slot] = pinned_array(self.cp, (self.chunk_frames, *self.frame_shape),
                                               np.uint16)
        stage = self._staging[slot][:frames.shape[0]]
        parallel_copy(frames, stage)
        return stage.ctypes.data


def pinned_array(cp, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A NumPy array in page-locked host memory (from CuPy's pinned pool).

    Frames written into such an array reach the GPU at the full PCIe rate, with no
    staging copy and no page-locking per call.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    memory = cp.cuda.alloc_pinned_memory(max(count, 1) * dtype.itemsize)
    return np.frombuffer(memory, dtype, count).reshape(shape)


_pool: ThreadPoolExecutor | None = None


def parallel_copy(src: np.ndarray, dst: np.ndarray | None = None) -> np.ndarray:
    """Copy ``src`` into ``dst`` (a new array when None) with a few threads.

    NumPy releases the GIL while copying, so the pieces move in parallel; one thread alone
    copies at a fraction of the memory bandwidth.
    """
    global _pool
    if dst is None:
        dst = np.empty_like(src)
    flat_src, flat_dst = src.reshape(-1), dst.reshape(-1)
    if flat_src.nbytes < PARALLEL_COPY_MIN_BYTES:
        flat_dst[...] = flat_src
        return dst
    if _pool is None:
        _pool = ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="aare_lab-copy")
    bounds = np.linspace(0, flat_src.size, COPY_THREADS + 1).astype(np.int64)
    list(_pool.map(lambda k: np.copyto(flat_dst[bounds[k]:bounds[k + 1]],
                                       flat_src[bounds[k]:bounds[k + 1]]),
                   range(COPY_THREADS)))
    return dst
