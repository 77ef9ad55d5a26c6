"""The frozen timing model: every read in a frame sees the frame-start pedestal.

Each pixel's QUIET_UPDATE is applied to the pedestal state right after its row is
classified, but classification reads only ``v``, filled from the frame-start state before
any row is classified, and the row's own thresholds, taken before its update; so no read
sees an update of the same frame, and rows run in parallel. The passes are separate
functions so that Numba cannot fuse them: classifying a row reads the values of its
neighbouring rows. A ``prange`` index is unsigned in Numba, so each pass turns it into a
signed row before any ``-i`` arithmetic. Per-row intermediates live in small scratch rows
that stay in cache; only ``v`` and the codes span the frame.

With common mode (``cm`` not None) the frame-start values are computed twice: first
plain, for the estimate (``_common_mode``), then corrected by the offset of each pixel's
region; classification and pushes use the corrected values. The thresholds are computed
once, before the estimate, which reads them, and classification reads the same map, as
the GPU twin keeps each pixel's threshold for the frame.

With a JUNGFRAU calibration (``gs`` not None, `_gain`) each frame is decoded first: the
values are read from its ADC values (the estimate's from G0 pixels only), then turned into
keV before classification, the thresholds too, and only G0 pixels are pushed.

Twin: ``kernels/frozen.cu`` implements the same frame step on the GPU.
"""

import numpy as np
from numba import njit, prange

from .._arith import row_of, thresholds_row, update_quiet_row, values_row
from ._buffers import reserve
from ._common_mode import corrections, estimate_parallel, frame_thresholds
from ._decision import classify, is_store, store_window, window_rows
from ._gain import (
    calibrate_frame,
    decode_frame,
    estimate_labels,
    gated,
    kev_thresholds_row,
)

PARALLEL = {"cache": True, "nogil": True, "parallel": True, "error_model": "numpy"}
ROWS_PER_TASK = 8


@njit(**PARALLEL)
def load_frame(frame, off, s, N, v, corr):
    """Fill ``v`` from the frame-start state, corrected by ``corr`` unless it is None."""
    for row in prange(frame.shape[0]):
        i = np.int64(row)
        values_row(frame[i], off[i], s[i], N, v[i], row_of(corr, i))


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def push_row(i, codes, frame, off, s, s2, N, x, corr, status):
    """`update_quiet_row` of row ``i``, with ``corr`` and ``status`` None or frame arrays."""
    update_quiet_row(codes[i], frame[i], off[i], s[i], s2[i], N, x, row_of(corr, i),
                     row_of(status, i))


@njit(**PARALLEL)
def classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                   row_counts, corr, gs, thresholds):
    """Classify every pixel, push QUIET_UPDATE pixels (corrected by ``corr``), count stores.

    With ``gs`` (the `_gain` tuple), ``frame`` holds ADC values and ``v`` keV.
    ``thresholds`` are the frame's thresholds from its frame-start state when the caller
    has them already (the common-mode estimate reads them too), in ADU; None: computed
    here, row by row.
    """
    ny, nx = v.shape
    for task in prange((ny + ROWS_PER_TASK - 1) // ROWS_PER_TASK):
        scratch = np.empty((4, nx), dtype=v.dtype)
        thr, tot, m, x = scratch[0], scratch[1], scratch[2], scratch[3]
        first = np.int64(task) * ROWS_PER_TASK
        for i in range(first, min(first + ROWS_PER_TASK, ny)):
            if thresholds is None:
                thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr)
            else:
                thr[:] = thresholds[i]
            if gs is not None:
                kev_thresholds_row(gs[1], i, thr)
            for j in range(nx):
                tot[j] = 0
                m[j] = v[i, j]
            window_rows(v, i, -ry, ry, rx, tot, m)
            count = 0
            for j in range(nx):
                code = classify(v[i, j], thr[j], m[j], tot[j], c3)
                if gs is not None:
                    code = gated(code, gs[3][i, j])
                codes[i, j] = code
                count += is_store(code)
            row_counts[i] = count
            if gs is None:
                push_row(i, codes, frame, off, s, s2, N, x, corr, None)
            else:
                push_row(i, codes, frame, off, s, s2, N, x, corr, gs[3])


@njit(**PARALLEL)
def write_frame(v, codes, row_counts, row_start, kept, ry, rx, round_values,
                win, ys, xs, n_out):
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
                    k += 1


@njit(cache=True, nogil=True, error_model="numpy")
def estimate_frame(v, thr, labels, f, cm):
    """The frame's common-mode offsets into ``cm``'s outputs and its correction map."""
    _, centre, sums, counts, task_sums, task_counts, _, corr, out_c, out_n = cm
    estimate_parallel(v, thr, labels, centre, sums, counts, task_sums, task_counts)
    out_c[f] = centre
    out_n[f] = counts
    corrections(labels, centre, corr)


@njit(cache=True, nogil=True, error_model="numpy")
def classify_raw(frame, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                 row_counts, cm, gs):
    """Frame ``f``'s values (common mode with ``cm``, keV with ``gs``), codes and pushes.

    ``frame`` holds the counts, or with ``gs`` the ADC values `decode_frame` wrote.
    """
    load_frame(frame, off, s, N, v, None)
    if cm is None:
        if gs is not None:
            calibrate_frame(gs[3], frame, gs[0], gs[1], v)
        classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                       codes, row_counts, None, gs, None)
    else:
        thr, corr = cm[6], cm[7]
        frame_thresholds(s, s2, rms_fixed, fixed, N, nsig, thr)
        if gs is None:
            estimate_frame(v, thr, cm[0], f, cm)
        else:
            estimate_labels(cm[0], gs[3], gs[4])
            estimate_frame(v, thr, gs[4], f, cm)
        load_frame(frame, off, s, N, v, corr)
        if gs is not None:
            calibrate_frame(gs[3], frame, gs[0], gs[1], v)
        classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                       codes, row_counts, corr, gs, thr)


@njit(cache=True, nogil=True, error_model="numpy")
def frozen_chunk(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                 round_values, v, codes, row_counts, row_start,
                 win, ys, xs, n_out, n_found, n_kept, map_slot, maps, cm, gs):
    """Run the frozen model over ``frames`` (n, ny, nx), advancing the pedestal in place.

    Clusters are appended to ``win``/``ys``/``xs`` from row ``n_out`` on, in raster
    order of their centre, at most ``cap`` per frame (``cap < 0``: no capacity). ``v`` and
    ``codes`` are scratch of the frame's shape. ``cm`` is None, or the common-mode tuple of
    `aare_lab.finders.base.CpuFinder` (labels, scratch, and the per-frame offsets and pixel
    counts it fills); ``gs`` None, or its gain-switching tuple (the calibration, scratch,
    and the per-frame flagged pixels it fills). Returns the (possibly reallocated) buffers
    and the new row count.
    """
    nf, ny = frames.shape[:2]
    for f in range(nf):
        if gs is None:
            classify_raw(frames[f], f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                         codes, row_counts, cm, None)
        else:
            _, gain, adc, status, _, row_flagged, out_flagged = gs
            out_flagged[f] = decode_frame(frames[f], gain, adc, status, row_flagged)
            classify_raw(adc, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                         codes, row_counts, cm, gs)
        total = 0
        for i in range(ny):
            row_start[i] = total
            total += row_counts[i]
        kept = total if cap < 0 else min(total, cap)
        n_found[f] = total
        n_kept[f] = kept
        win, ys, xs = reserve(win, ys, xs, n_out + kept)
        write_frame(v, codes, row_counts, row_start, kept, ry, rx, round_values,
                    win, ys, xs, n_out)
        n_out += kept
        if map_slot[f] >= 0:
            maps[map_slot[f]] = codes
    return win, ys, xs, n_out
