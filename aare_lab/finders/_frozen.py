"""The frozen timing model: every read in a frame sees the frame-start pedestal.

Each pixel's QUIET_UPDATE is applied to the pedestal state right after its row is
classified, but classification reads only ``v``, filled from the frame-start state before
any row is classified, and the row's own thresholds, taken before its update; so no read
sees an update of the same frame, and rows run in parallel. The passes are separate
functions so that Numba cannot fuse them: classifying a row reads the values of its
neighbouring rows. A ``prange`` index is unsigned in Numba, so each pass turns it into a
signed row before any ``-i`` arithmetic. Per-row intermediates live in small scratch rows
that stay in cache; only ``v`` and the codes span the frame.

Twin: ``kernels/frozen.cu`` implements the same frame step on the GPU.
"""

import numpy as np
from numba import njit, prange

from .._arith import thresholds_row, update_quiet_row, values_row
from ._buffers import reserve
from ._decision import classify, is_store, store_window, window_rows

PARALLEL = {"cache": True, "nogil": True, "parallel": True, "error_model": "numpy"}
ROWS_PER_TASK = 8


@njit(**PARALLEL)
def load_frame(frame, off, s, N, v):
    """Fill ``v`` from the frame-start state."""
    for row in prange(frame.shape[0]):
        i = np.int64(row)
        values_row(frame[i], off[i], s[i], N, v[i])


@njit(**PARALLEL)
def classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                   row_counts):
    """Classify every pixel, push QUIET_UPDATE pixels, count stores per row."""
    ny, nx = v.shape
    for task in prange((ny + ROWS_PER_TASK - 1) // ROWS_PER_TASK):
        scratch = np.empty((4, nx), dtype=v.dtype)
        thr, tot, m, x = scratch[0], scratch[1], scratch[2], scratch[3]
        first = np.int64(task) * ROWS_PER_TASK
        for i in range(first, min(first + ROWS_PER_TASK, ny)):
            thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr)
            for j in range(nx):
                tot[j] = 0
                m[j] = v[i, j]
            window_rows(v, i, -ry, ry, rx, tot, m)
            count = 0
            for j in range(nx):
                code = classify(v[i, j], thr[j], m[j], tot[j], c3)
                codes[i, j] = code
                count += is_store(code)
            row_counts[i] = count
            update_quiet_row(codes[i], frame[i], off[i], s[i], s2[i], N, x)


@njit(**PARALLEL)
def write_frame(v, codes, row_counts, row_start, kept, f, ry, rx, round_values,
                win, ys, xs, fidx, n_out):
    """Write the first ``kept`` clusters of the frame in raster order from row ``n_out``."""
    ny, nx = v.shape
    for row in prange(ny):
        i = np.int64(row)
        k = row_start[i]
        if row_counts[i] > 0 and k < kept:
            for j in range(nx):
                if k < kept and is_store(codes[i, j]):
                    store_window(v, i, j, ry, rx, round_values, win, n_out + k)
                    ys[n_out + k] = i
                    xs[n_out + k] = j
                    fidx[n_out + k] = f
                    k += 1


@njit(cache=True, nogil=True, error_model="numpy")
def frozen_chunk(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                 round_values, v, codes, row_counts, row_start,
                 win, ys, xs, fidx, n_out, n_found, n_kept, map_slot, maps):
    """Run the frozen model over ``frames`` (n, ny, nx), advancing the pedestal in place.

    Clusters are appended to ``win``/``ys``/``xs``/``fidx`` from row ``n_out`` on, in raster
    order of their centre, at most ``cap`` per frame (``cap < 0``: no capacity). ``v`` and
    ``codes`` are scratch of the frame's shape. Returns the (possibly reallocated) buffers
    and the new row count.
    """
    nf, ny, nx = frames.shape
    for f in range(nf):
        load_frame(frames[f], off, s, N, v)
        classify_frame(frames[f], off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                       codes, row_counts)
        total = 0
        for i in range(ny):
            row_start[i] = total
            total += row_counts[i]
        kept = total if cap < 0 else min(total, cap)
        n_found[f] = total
        n_kept[f] = kept
        win, ys, xs, fidx = reserve(win, ys, xs, fidx, n_out + kept)
        write_frame(v, codes, row_counts, row_start, kept, f, ry, rx, round_values,
                    win, ys, xs, fidx, n_out)
        n_out += kept
        if map_slot[f] >= 0:
            maps[map_slot[f]] = codes
    return win, ys, xs, fidx, n_out
