"""The frozen CPU finder: the GPU's timing model on the CPU, rows in parallel."""

import weakref
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from ._frozen import frozen_bands, frozen_chunk
from .base import CpuFinder

#: The most bytes of frame values the bands keep for a part of a chunk (`frozen_bands`).
PART_BYTES = 32 << 20
#: The most frames of a part: the bands wait for each other once per part.
PART_FRAMES = 16


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

    def _run(self, frames, *, cap, round_values, win, ys, xs, n_found, n_kept,
             map_slot, maps, cm, gs):
        threads = self.threads or max_threads()
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            # Bands of at least ry rows (`band_frames`), without common mode or a
            # calibration, whose frame-wide steps need every band at once.
            n_bands = min(threads, self.pedestal.frame_shape[0] // max(self.spec.radius[0], 1))
            if cm is None and gs is None and n_bands > 1:
                return frozen_bands(frames, *self._kernel_args(), cap, round_values,
                                    self._part_scratch(), win, ys, xs, 0, n_found, n_kept,
                                    map_slot, maps, self._band_pool(n_bands), n_bands)
            return frozen_chunk(frames, *self._kernel_args(), cap, round_values,
                                self._v, self._codes, self._row_counts, self._row_start,
                                win, ys, xs, 0, n_found, n_kept, map_slot, maps, cm, gs)
        finally:
            numba.set_num_threads(previous)

    def _band_pool(self, n_bands: int) -> ThreadPoolExecutor:
        """This finder's threads for its bands (`frozen_bands`), one per band."""
        pool = getattr(self, "_pool", None)
        if pool is None or pool._max_workers != n_bands:
            if pool is not None:
                pool.shutdown()
            pool = self._pool = ThreadPoolExecutor(n_bands, thread_name_prefix="aare_lab-band")
            weakref.finalize(self, pool.shutdown, wait=False)
        return pool

    def _part_scratch(self):
        """Per frame of a part (`PART_FRAMES`, `PART_BYTES`): values, codes, row counts,
        row starts, stores."""
        scratch = getattr(self, "_parts", None)
        if scratch is None:
            ny, nx = shape = self.pedestal.frame_shape
            k = int(np.clip(PART_BYTES // (ny * nx * self.pedestal.dtype.itemsize), 2,
                            PART_FRAMES))
            scratch = self._parts = (np.empty((k, *shape), self.pedestal.dtype),
                                     np.zeros((k, *shape), np.uint8),
                                     np.zeros((k, ny), np.int64), np.zeros((k, ny), np.int64),
                                     np.empty((k, *shape), np.int32))
        return scratch
