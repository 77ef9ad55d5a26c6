"""The frozen CPU finder: the GPU's timing model on the CPU, rows in parallel."""

import numba
import numpy as np

from ._bands import even_bands
from ._frozen import frozen_chunk
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
        self._row_bits = np.zeros(ny, np.int64)
        self._thresholds = np.empty(self.pedestal.frame_shape, self.pedestal.dtype)
        self._bands = even_bands(1, ny)

    def _run(self, frames, *, cap, round_values, win, ys, xs, n_found, n_kept,
             map_slot, maps, cm, gs, gain_bits):
        previous = numba.get_num_threads()
        threads = self.threads or max_threads()
        numba.set_num_threads(threads)
        # One band of rows a thread; their cut, which follows the threads' rates, is kept
        # from chunk to chunk while the thread count stays.
        n_bands = min(threads, self.pedestal.frame_shape[0])
        if len(self._bands[1]) != n_bands:
            self._bands = even_bands(n_bands, self.pedestal.frame_shape[0])
        try:
            return frozen_chunk(frames, *self._kernel_args(), cap, round_values,
                                self._v, self._codes, self._thresholds, self._row_counts,
                                self._row_start,
                                win, ys, xs, 0, n_found, n_kept, map_slot, maps, cm, gs,
                                gain_bits, None if gain_bits is None else self._row_bits,
                                self._bands)
        finally:
            numba.set_num_threads(previous)
