"""The compiled pass that copies a batch's clusters into a result: a range of them
(`copy_cluster_range`, for a pool's threads) or all of them in pieces on Numba's threads
(`copy_clusters`).

Where it runs follows where the finder worked. A CPU finder's loop runs on Numba's OpenMP
threads, which keep spinning for a while after each parallel region (libgomp's default
wait) in case another follows; work handed to a pool of other threads right after the loop
competes with them for the cores: on a 16-core host, copying the clusters with 16 pool
threads took 27 % of the frozen finder's ``find``, with 4 pool threads 12 %
(``benchmarks/results/frozen_scaling_env_20261206T0245_H100host.log``), on Numba's threads
3-5 % (``frozen_scaling_20261206T0410_H100host.log``). The GPU finder leaves Numba's
threads idle, and its frames are staged into pinned memory by a pool of threads at the same
time: there, spinning OpenMP threads would take the stagers' cores, so its copy stays on the
result pool (`aare_lab.runtime.parallel`).
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


@njit(cache=True, nogil=True, error_model="numpy")
def copy_cluster_range(frame_numbers, ends, ys, xs, windows, out_frame, out_y, out_x,
                       out_windows, out_energy, integer, low, high, at_limits, a, b):
    """Copy the clusters ``a:b`` of a batch into the same rows of a result.

    Each cluster gets its frame number from the runs ``frame_numbers``/``ends``
    (`fill_runs`), its centre and its window (flattened ``(n, taps)``), its energy
    (`copy_integer_windows` for ``integer`` windows, `copy_float_windows` for float ones) and,
    given an ``at_limits`` of one element per cluster, its taps equal to ``low`` or ``high``.
    Float windows have at most `aare_lab.model.window_sums.PAIRWISE_BLOCK` taps (the
    finders' at most 11x11).
    """
    fill_runs(frame_numbers, ends, a, out_frame[a:b])
    out_y[a:b] = ys[a:b]
    out_x[a:b] = xs[a:b]
    if integer:
        copy_integer_windows(windows[a:b], out_windows[a:b], out_energy[a:b], low, high,
                             at_limits[a:b] if len(at_limits) > 0 else at_limits)
    else:
        copy_float_windows(windows[a:b], out_windows[a:b], out_energy[a:b])


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def copy_clusters(frame_numbers, ends, ys, xs, windows, out_frame, out_y, out_x, out_windows,
                  out_energy, integer, low, high, at_limits, pieces):
    """`copy_cluster_range` of every cluster of a batch, in ``pieces`` consecutive pieces on
    Numba's threads."""
    n = len(ys)
    for piece in prange(pieces):
        p = np.int64(piece)
        copy_cluster_range(frame_numbers, ends, ys, xs, windows, out_frame, out_y, out_x,
                           out_windows, out_energy, integer, low, high, at_limits,
                           p * n // pieces, (p + 1) * n // pieces)
