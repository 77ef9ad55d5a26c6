"""The serial CPU finder (PSI aare's classic ClusterFinder timing model)."""

import numpy as np

from ._serial import SCRATCH_ROWS, serial_chunk
from .base import CpuFinder


class SerialFinder(CpuFinder):
    """Pixels in raster order; each read sees the updates of pixels scanned before it.

    Single-threaded by nature. Parameters as in `Finder`.
    """

    name = "serial"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._rows = np.empty((SCRATCH_ROWS, self.pedestal.frame_shape[1]), self.pedestal.dtype)

    def _run(self, frames, *, cap, round_values, win, ys, xs, n_found, n_kept,
             map_slot, maps, cm, gs, gain_bits):
        return serial_chunk(frames, *self._kernel_args(), cap, round_values,
                            self._v, self._codes, self._rows,
                            win, ys, xs, 0, n_found, n_kept, map_slot, maps, cm, gs, gain_bits)
