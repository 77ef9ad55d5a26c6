"""The frozen CPU finder: the GPU's timing model on the CPU, rows in parallel."""

import numba
import numpy as np

from aare_lab.model.capacity import cap_to_attr

from ._frozen import block_buffers, frozen_chunk
from .base import CpuFinder


def max_threads() -> int:
    """The most threads the frozen finder can run on here (Numba's ``NUMBA_NUM_THREADS``)."""
    return numba.config.NUMBA_NUM_THREADS


class FrozenFinder(CpuFinder):
    """Every read in a frame sees the frame-start pedestal; updates apply after the frame.

    Parameters
    ----------
    *args, **kwargs
        As for `Finder`.
    threads
        Threads for the row-parallel loops (default: Numba's, i.e. all cores). The
        output does not depend on it.
    """

    name = "frozen"

    def __init__(self, *args, threads: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if threads is not None and (isinstance(threads, bool) or not 1 <= threads <= max_threads()):
            raise ValueError(f"threads must be between 1 and {max_threads()}, got {threads!r}")
        self.threads = threads
        ny = self.pedestal.frame_shape[0]
        self._row_counts = np.zeros(ny, np.int64)
        self._row_start = np.zeros(ny, np.int64)
        self._stores = np.empty(self.pedestal.frame_shape, np.int32)
        self._blocks = {}
        # The bands' start word, whether they once failed to start together, and each
        # band's progress (`_frozen.classify_block`).
        self._sync = np.zeros(2 + ny, np.int64)

    def _block(self, n_bands):
        """`_frozen.block_buffers` for ``n_bands`` bands, None for one."""
        if n_bands == 1:
            return None
        if n_bands not in self._blocks:
            self._blocks[n_bands] = block_buffers(
                self.pedestal.frame_shape, self.pedestal.dtype, self.spec.cluster_size,
                self.spec.window_dtype, n_bands, self.chunk_frames,
                cap_to_attr(self.spec.max_clusters_per_frame))
        return self._blocks[n_bands]

    def _run(self, frames, *, cap, round_values, win, ys, xs, n_found, n_kept,
             map_slot, maps, cm, gs, gain_bits):
        previous = numba.get_num_threads()
        threads = self.threads or max_threads()
        numba.set_num_threads(threads)
        n_bands = min(threads, self.pedestal.frame_shape[0])
        block = self._block(n_bands)
        row_bits = None
        if gain_bits is not None:
            row_bits = np.zeros((1 if block is None else block[1].shape[0],
                                 self.pedestal.frame_shape[0]), np.int64)
        try:
            return frozen_chunk(frames, *self._kernel_args(), cap, round_values,
                                self._v, self._codes, self._row_counts, self._row_start,
                                self._stores, win, ys, xs, 0, n_found, n_kept, map_slot,
                                maps, cm, gs, gain_bits, row_bits, block, self._sync,
                                n_bands)
        finally:
            numba.set_num_threads(previous)
