"""The compiled pass that copies a batch's clusters into a result, on Numba's threads.

A CPU finder's loop runs on Numba's OpenMP threads, which keep spinning for a while after
each parallel region (libgomp's default wait) in case another follows. Work handed to a
pool of other threads right after the loop competes with them for the cores: on a 16-core
host, copying the clusters with 16 pool threads took 27 % of the frozen finder's ``find``,
with 4 pool threads 12 % (``benchmarks/results/frozen_scaling_env_20261206T0245_H100host.log``).
Run as a parallel region of Numba's own, the copy lands on those same threads; for the GPU
finder, whose loop leaves Numba's threads idle, it is one more pool of threads like any.
"""

import numba
import numpy as np
from numba import njit, prange

from aare_lab.model.window_sums import copy_float_windows, copy_integer_windows
from aare_lab.runtime.repeat import fill_runs

#: A piece of the copy moves at least this many bytes: below, handing out costs more.
PIECE_MIN_BYTES = 1 << 18


def piece_count(nbytes: int) -> int:
    """Pieces to cut a copy of ``nbytes`` into: one per Numba thread, fewer when small."""
    return int(max(1, min(numba.get_num_threads(), nbytes // PIECE_MIN_BYTES)))


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def copy_clusters(frame_numbers, ends, ys, xs, windows, out_frame, out_y, out_x, out_windows,
                  out_energy, integer, low, high, at_limits, pieces):
    """Copy the clusters of a batch into a result's rows, in ``pieces`` consecutive pieces.

    Each cluster gets its frame number from the runs ``frame_numbers``/``ends``
    (`fill_runs`), its centre and its window (flattened ``(n, taps)``), its energy
    (`copy_integer_windows` for ``integer`` windows, `copy_float_windows` for float ones) and,
    given an ``at_limits`` of one element per cluster, its taps equal to ``low`` or ``high``.
    Float windows have at most `aare_lab.model.window_sums.PAIRWISE_BLOCK` taps (the finders' at most 11x11).
    """
    n = len(ys)
    count = len(at_limits) > 0
    for piece in prange(pieces):
        p = np.int64(piece)
        a, b = p * n // pieces, (p + 1) * n // pieces
        fill_runs(frame_numbers, ends, a, out_frame[a:b])
        out_y[a:b] = ys[a:b]
        out_x[a:b] = xs[a:b]
        if integer:
            copy_integer_windows(windows[a:b], out_windows[a:b], out_energy[a:b], low, high,
                                 at_limits[a:b] if count else at_limits)
        else:
            copy_float_windows(windows[a:b], out_windows[a:b], out_energy[a:b])
