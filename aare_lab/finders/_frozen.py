"""The frozen timing model: every read in a frame sees the frame-start pedestal.

Each pixel's QUIET_UPDATE is applied to the pedestal state during classification, but
classification reads only the buffers ``v`` and ``thr`` filled from the frame-start
state, so no read sees an update of the same frame; rows therefore run in parallel.
The three row-parallel passes are separate functions so that Numba cannot fuse them:
classifying a row reads the loaded values of its neighbouring rows. A ``prange`` index is
unsigned in Numba, so each pass turns it into a signed row before any ``-i`` arithmetic.
Twin: ``kernels/frozen.cu`` implements the same frame step on the GPU.
"""

import numpy as np
from numba import njit, prange

from .._arith import QUIET_UPDATE, load_row, update_masked_row
from ._buffers import reserve
from ._decision import classify, is_store, store_window, window_rows

PARALLEL = {"cache": True, "nogil": True, "parallel": True, "error_model": "numpy"}


@njit(**PARALLEL)
def load_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, xT, v, thr, tot, m):
    """Fill ``v``/``thr`` from the frame-start state and reset the window accumulators."""
    ny, nx = frame.shape
    for row in prange(ny):
        i = np.int64(row)
        load_row(frame[i], off[i], s[i], s2[i], rms_fixed[i], fixed, N, nsig, xT[i], v[i],
                 thr[i])
        for j in range(nx):
            tot[i, j] = 0
            m[i, j] = v[i, j]


@njit(**PARALLEL)
def classify_frame(off, s, s2, N, c3, ry, rx, xT, v, thr, tot, m, codes, row_counts,
                   pushed):
    """Classify every pixel, push QUIET_UPDATE pixels, count stores per row."""
    ny, nx = v.shape
    for row in prange(ny):
        i = np.int64(row)
        window_rows(v, i, -ry, ry, rx, tot, m)
        count = 0
        for j in range(nx):
            code = classify(v[i, j], thr[i, j], m[i, j], tot[i, j], c3)
            codes[i, j] = code
            count += is_store(code)
        row_counts[i] = count
        update_masked_row(codes[i] == QUIET_UPDATE, off[i], s[i], s2[i], N, xT[i],
                          pushed[0, i], pushed[1, i], pushed[2, i])


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
                 round_values, xT, v, thr, tot, m, codes, pushed, row_counts, row_start,
                 win, ys, xs, fidx, n_out, n_found, n_kept, map_slot, maps):
    """Run the frozen model over ``frames`` (n, ny, nx), advancing the pedestal in place.

    Clusters are appended to ``win``/``ys``/``xs``/``fidx`` from row ``n_out`` on, in raster
    order of their centre, at most ``cap`` per frame (``cap < 0``: no capacity). ``tot``
    and ``m`` are scratch of the frame's shape, ``pushed`` of shape (3, ny, nx). Returns the (possibly reallocated)
    buffers and the new row count.
    """
    nf, ny, nx = frames.shape
    for f in range(nf):
        load_frame(frames[f], off, s, s2, rms_fixed, fixed, N, nsig, xT, v, thr, tot, m)
        classify_frame(off, s, s2, N, c3, ry, rx, xT, v, thr, tot, m, codes, row_counts,
                       pushed)
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
