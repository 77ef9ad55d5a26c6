"""The frozen timing model: every read in a frame sees the frame-start pedestal.

Each pixel's QUIET_UPDATE is applied to the pedestal state right after its row is
classified, but classification reads only ``v``, filled from the frame-start state, and
the row's own thresholds, taken before its update; so no read sees an update of the same
frame. The frame is cut into bands of rows, one per thread (`classify_frame`), each as
long as its thread's rate so far allows (`_bands`): first every band's edge rows get their
values (`load_edges`), the rows a neighbouring band's windows read, before any band pushes
a pixel; then each band walks its rows once, computing a row's values ``ry`` rows ahead of
classifying it, so that a row's state is read from memory once per frame. Per-row
intermediates live in small scratch rows that stay in cache; only ``v``, the codes, the
stores' columns and the thresholds span the frame. A ``prange`` index is unsigned in Numba,
so each parallel loop turns it into a signed one before any ``-i`` arithmetic.

With common mode (``cm`` not None) the frame-start values are computed twice: first
plain, for the estimate (``_common_mode``), then corrected by the offset of each pixel's
region, in the bands; classification and pushes use the corrected values. The thresholds
are computed once, before the estimate, which reads them, and classification reads the
same map, as the GPU twin keeps each pixel's threshold for the frame. With fixed noise the
map is made once a chunk (`fixed_thresholds`), with common mode or without: the kept rms
does not move.

With a JUNGFRAU calibration (``gs`` not None, `_gain`) each frame is decoded first: the
values are read from its ADC values (the estimate's from G0 pixels only), then turned into
keV before classification, the thresholds too, and only G0 pixels are pushed.

Twin: ``kernels/frozen.cu`` implements the same frame step on the GPU.
"""

import numpy as np
from numba import njit, prange

from aare_lab.detector._gain_bit_loops import row_above
from aare_lab.detector.arith import (
    row_of,
    thresholds_row,
    update_quiet_row,
    values_resid_row,
    values_row,
    zero_offsets,
)

from ._bands import band_rows, counter, rebalance
from ._buffers import reserve
from ._common_mode import corrections, estimate_parallel, label_repeats
from ._decision import (
    add_taps,
    add_three_taps,
    classify,
    classify_three,
    copy_row,
    is_store,
    list_stores,
    row_max,
    store_window,
    window_taps,
)
from ._gain import (
    ADC_LIMIT,
    calibrate_row,
    decode_frame,
    estimate_labels,
    gated,
    kev_thresholds_row,
    statuses,
)

PARALLEL = {"cache": True, "nogil": True, "parallel": True, "error_model": "numpy"}


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def is_edge(i, y0, y1, ry):
    """Whether row ``i`` of band ``y0..y1-1`` is one of its first or last ``ry`` rows: the
    rows whose values a neighbouring band's windows read (`load_edges`)."""
    return i - y0 < ry or y1 - 1 - i < ry


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def value_row(i, frame, off, s, N, v, corr, gs):
    """Row ``i``'s values from the frame-start state (`values_row`, keV with ``gs``)."""
    values_row(frame[i], row_of(off, i), s[i], N, v[i], row_of(corr, i))
    if gs is not None:
        calibrate_row(gs[3][i], frame[i], gs[0], gs[1], i, v[i])


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def value_resid_row(i, frame, off, s, N, v, corr, gs, resid):
    """`value_row`, keeping the row's ``s / N`` in ``resid`` (`values_resid_row`)."""
    values_resid_row(frame[i], row_of(off, i), s[i], N, v[i], row_of(corr, i), resid)
    if gs is not None:
        calibrate_row(gs[3][i], frame[i], gs[0], gs[1], i, v[i])


@njit(**PARALLEL)
def load_edges(frame, off, s, N, v, corr, gs, ry, bounds):
    """The values of every band's edge rows, before any band pushes a pixel (band ``b``:
    rows ``bounds[b]..bounds[b+1]-1``)."""
    for band in prange(len(bounds) - 1):
        y0, y1 = band_rows(bounds, np.int64(band))
        for i in range(y0, y1):
            if is_edge(i, y0, y1, ry):
                value_row(i, frame, off, s, N, v, corr, gs)


@njit(**PARALLEL)
def fixed_thresholds(s, s2, rms_fixed, N, nsig, out):
    """Every row's thresholds with fixed noise (`thresholds_row`): they read only the kept
    rms, so they hold for every frame of a chunk."""
    for row in prange(out.shape[0]):
        i = np.int64(row)
        thresholds_row(s[i], s2[i], rms_fixed[i], True, N, nsig, out[i])


@njit(**PARALLEL)
def classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                   row_counts, stores, corr, gs, thresholds, given, row_bits, bounds, ticks):
    """Classify every pixel, push QUIET_UPDATE pixels (corrected by ``corr``), count stores
    (``row_counts``) and list their columns (``stores[i, :row_counts[i]]``).

    The frame is cut into bands of rows, one task each (band ``b``: rows
    ``bounds[b]..bounds[b+1]-1``), after `load_edges`; ``ticks[b]`` is band ``b``'s time
    in counter ticks (`_bands.counter`), which `_bands.rebalance` cuts the next frame by.
    A band walks its rows once: the values of row ``i + ry`` (unless an edge row), then
    row ``i``'s windows, decision and push, so that each row's state is read while it is
    in cache. 3x3 windows inside the frame take `classify_three`, other 3-wide ones
    `add_three_taps`; wider windows the maximum from the `row_max` of their rows (the
    last ``2 ry + 1`` rows' in a small ring) and the sum from `add_taps`.

    With ``gs`` (the `_gain` tuple), ``frame`` holds ADC values and ``v`` keV.
    ``thresholds`` are the frame's thresholds from its frame-start state, in ADU, where
    the caller has them already (``given``: the common-mode estimate reads them too, and
    fixed noise gives the same for every frame, `fixed_thresholds`); else they are
    computed here, row by row. ``row_bits``: None, or each row's pixels with gain bits to
    count while the row's counts are in cache (`row_above`).
    """
    for b in prange(len(ticks)):
        band = np.int64(b)
        start = counter()
        classify_band(band, frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                      codes, row_counts, stores, corr, gs, thresholds, given, row_bits, bounds)
        ticks[band] = counter() - start


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def classify_band(band, frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                  row_counts, stores, corr, gs, thresholds, given, row_bits, bounds):
    """Band ``band`` of `classify_frame`: its rows' windows, decisions, stores and pushes,
    computing each row's values ``ry`` rows ahead of classifying it."""
    ny, nx = v.shape
    ring = 2 * ry + 1
    y0, y1 = band_rows(bounds, band)
    scratch = np.empty((4 + 2 * ring, nx), dtype=v.dtype)
    thr, tot, m, x = scratch[0], scratch[1], scratch[2], scratch[3]
    maxima = scratch[4:4 + ring]
    # Each non-edge row's s / N from its values, for its push ry rows later.
    resid = scratch[4 + ring:]
    # Three taps a row: sum and maximum in one pass per window row (`add_three_taps`);
    # wider: the maximum from each row's `row_max`, kept in the ring.
    three = rx == 1 and nx >= 2
    if not three:
        for r in range(max(0, y0 - ry), min(ny, y0 + ry)):
            row_max(v[r], rx, maxima[r % ring])
    for i in range(y0, y1):
        r = i + ry
        if r < ny:
            if not is_edge(r, y0, y1, ry):
                value_resid_row(r, frame, off, s, N, v, corr, gs, resid[r % ring])
            if not three:
                row_max(v[r], rx, maxima[r % ring])
        if row_bits is not None:
            row_bits[i] = row_above(frame[i], ADC_LIMIT)
        if not given:
            thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr)
        elif gs is not None:
            copy_row(thresholds[i], thr)
        if gs is not None:
            kev_thresholds_row(gs[1], i, thr)
        # A given row that keV leaves alone is read where it is, not copied.
        th = thresholds[i] if given and gs is None else thr
        if gs is None and ry == 1 and three and 0 < i < ny - 1:
            # 3x3 inside the frame: the window and decision in one pass; the row's two
            # end pixels tap by tap.
            count = classify_three(v[i - 1], v[i], v[i], v[i + 1], th, c3, codes[i],
                                   None, None)
            for j in (0, nx - 1):
                t, mm = window_taps(v, i, j, -1, 1, 1, th[j] - th[j], v[i, j])
                code = classify(v[i, j], th[j], mm, t, c3)
                codes[i, j] = code
                count += is_store(code)
        else:
            tot[:] = 0
            if three:
                copy_row(v[i], m)
                for a in range(max(-ry, -i), min(ry, ny - 1 - i) + 1):
                    add_three_taps(v[i + a], tot, m)
            else:
                window_max(maxima, i, ry, ny, m)
                for a in range(max(-ry, -i), min(ry, ny - 1 - i) + 1):
                    add_taps(v[i + a], rx, tot)
            count = 0
            for j in range(nx):
                code = classify(v[i, j], th[j], m[j], tot[j], c3)
                if gs is not None:
                    code = gated(code, gs[3][i, j])
                codes[i, j] = code
                count += is_store(code)
        row_counts[i] = count
        if count > 0:
            list_stores(codes[i], stores[i])
        if is_edge(i, y0, y1, ry):
            push_row(i, codes, frame, off, s, s2, N, x, corr, gs, None)
        else:
            push_row(i, codes, frame, off, s, s2, N, x, corr, gs, resid[i % ring])


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def push_row(i, codes, frame, off, s, s2, N, x, corr, gs, resid):
    """`update_quiet_row` of row ``i``; with ``gs``, of its G0 pixels only; ``resid`` the
    row's ``s / N`` from its values, or None."""
    update_quiet_row(codes[i], frame[i], row_of(off, i), s[i], s2[i], N, x,
                     row_of(corr, i), row_of(statuses(gs), i), resid)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def window_max(maxima, i, ry, ny, m):
    """Row ``i``'s window maximum from the `row_max` of rows ``i-ry..i+ry`` in the frame."""
    ring = maxima.shape[0]
    copy_row(maxima[i % ring], m)
    for r in range(max(0, i - ry), min(ny, i + ry + 1)):
        if r != i:
            mr = maxima[r % ring]
            for j in range(len(m)):
                m[j] = max(m[j], mr[j])


@njit(**PARALLEL)
def write_frame(v, row_counts, row_start, stores, kept, ry, rx, round_values,
                win, ys, xs, n_out):
    """Write the first ``kept`` clusters of the frame in raster order from row ``n_out``:
    row ``i``'s at the columns ``stores[i, :row_counts[i]]``."""
    ny = v.shape[0]
    for row in prange(ny):
        i = np.int64(row)
        k0 = row_start[i]
        for c in range(min(row_counts[i], kept - k0)):
            j = stores[i, c]
            store_window(v, i, j, ry, rx, round_values, win, n_out + k0 + c)
            ys[n_out + k0 + c] = i
            xs[n_out + k0 + c] = j


@njit(cache=True, nogil=True, error_model="numpy")
def estimate_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, labels, f, cm):
    """The frame's plain values and thresholds (into ``cm``'s scratch, where fixed noise
    has not put them for the chunk), its common-mode offsets into ``cm``'s outputs and its
    correction map."""
    _, repeats, centre, _, counts, _, _, corr, out_c, out_n = cm
    estimate_parallel(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, fixed, labels, cm)
    out_c[f] = centre
    out_n[f] = counts
    corrections(labels, repeats, centre, corr)


@njit(cache=True, nogil=True, error_model="numpy")
def classify_raw(frame, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                 thresholds, row_counts, stores, cm, gs, row_bits, bands):
    """Frame ``f``'s values (common mode with ``cm``, keV with ``gs``), codes and pushes,
    in the bands of rows of ``bands`` (`_bands.even_bands`); with ``row_bits``, its rows'
    pixels with gain bits.

    ``frame`` holds the counts, or with ``gs`` the ADC values `decode_frame` wrote;
    ``thresholds`` those of `fixed_thresholds` with fixed noise, else scratch.
    """
    bounds, ticks, _ = bands
    if cm is None:
        load_edges(frame, off, s, N, v, None, gs, ry, bounds)
        classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                       codes, row_counts, stores, None, gs, thresholds, fixed, row_bits,
                       bounds, ticks)
    else:
        thr, corr = cm[6], cm[7]
        if gs is None:
            estimate_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, cm[0], f, cm)
        else:
            estimate_labels(cm[0], gs[3], gs[4])
            label_repeats(gs[4], cm[1])
            estimate_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, gs[4], f, cm)
        load_edges(frame, off, s, N, v, corr, gs, ry, bounds)
        classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                       codes, row_counts, stores, corr, gs, thr, True, row_bits, bounds,
                       ticks)


@njit(cache=True, nogil=True, error_model="numpy")
def frozen_frames(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                  round_values, v, codes, thresholds, row_counts, row_start,
                  win, ys, xs, n_out, n_found, n_kept, map_slot, maps, cm, gs, gain_bits,
                  row_bits, bands):
    """Run the frozen model over ``frames`` (n, ny, nx), advancing the pedestal in place.

    Clusters are appended to ``win``/``ys``/``xs`` from row ``n_out`` on, in raster
    order of their centre, at most ``cap`` per frame (``cap < 0``: no capacity). ``v``,
    ``codes`` and ``thresholds`` are scratch of the frame's shape (the last filled once
    with fixed noise and no common mode, `fixed_thresholds`, else unused; with common
    mode and fixed noise ``cm``'s map of thresholds is filled once instead). ``cm`` is
    None, or the common-mode tuple of `aare_lab.finders.base.CpuFinder` (labels, scratch,
    and the per-frame offsets and pixel counts it fills); ``gs`` None, or its
    gain-switching tuple (the calibration, scratch, and the per-frame flagged pixels it
    fills). Returns the (possibly reallocated) buffers and the new row count.
    ``gain_bits``: None, or the per-frame count of pixels with gain bits to fill (frames
    read as counts, without ``gs``); ``row_bits`` the per-row scratch it is summed from,
    None where ``gain_bits`` is. ``bands``: the bands of rows (`classify_frame`) as
    `_bands.even_bands` makes them, one a thread, cut again after every frame by the
    threads' rates (`_bands.rebalance`).
    """
    nf, ny = frames.shape[:2]
    stores = np.empty(v.shape, np.int32)
    if fixed and nf > 0:
        fixed_thresholds(s, s2, rms_fixed, N, nsig, thresholds if cm is None else cm[6])
    for f in range(nf):
        if gs is None:
            classify_raw(frames[f], f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                         codes, thresholds, row_counts, stores, cm, None, row_bits, bands)
            if gain_bits is not None:
                gain_bits[f] = row_bits.sum()
        else:
            _, gain, adc, status, _, row_flagged, out_flagged = gs
            out_flagged[f] = decode_frame(frames[f], gain, adc, status, row_flagged)
            classify_raw(adc, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                         codes, thresholds, row_counts, stores, cm, gs, None, bands)
        rebalance(*bands)
        total = 0
        for i in range(ny):
            row_start[i] = total
            total += row_counts[i]
        kept = total if cap < 0 else min(total, cap)
        n_found[f] = total
        n_kept[f] = kept
        win, ys, xs = reserve(win, ys, xs, n_out, n_out + kept,
                              (n_out + kept) * nf // (f + 1))
        write_frame(v, row_counts, row_start, stores, kept, ry, rx, round_values,
                    win, ys, xs, n_out)
        n_out += kept
        if map_slot[f] >= 0:
            maps[map_slot[f]] = codes
    return win, ys, xs, n_out


def frozen_chunk(frames, off, *args):
    """`frozen_frames` without reading ``off`` where it is all 0 (`zero_offsets`)."""
    return frozen_frames(frames, zero_offsets(off), *args)
