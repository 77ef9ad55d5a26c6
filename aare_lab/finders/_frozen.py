"""The frozen timing model: every read in a frame sees the frame-start pedestal.

Each pixel's QUIET_UPDATE is applied to the pedestal state right after its row is
classified, but classification reads only ``v``, filled from the frame-start state, and
the row's own thresholds, taken before its update; so no read sees an update of the same
frame. The frame is cut into bands of rows, one per thread: each band's edge rows get
their values first, the rows a neighbouring band's windows read, before the band pushes a
pixel; then the band walks its rows once (`classify_band`), computing a row's values
``ry`` rows ahead of classifying it, so that a row's state is read from memory once per
frame. Per-row intermediates live in small scratch rows that stay in cache; only ``v``,
the codes and the stores' columns span the frame. A ``prange`` index is unsigned in Numba,
so each parallel loop turns it into a signed one before any ``-i`` arithmetic.

The bands go through plain frames at their own pace, in blocks of frames: one parallel
region a block (`classify_block`), where a band waits only for the neighbours whose edge
rows it reads, and stashes its clusters as it finds them, copied out in raster order
once the block is done (`write_block`). With common mode or a calibration, or on one
thread, the bands go in step, three parallel regions a frame: `load_edges`,
`classify_frame`, `write_frame`.

With common mode (``cm`` not None) the frame-start values are computed twice: first
plain, for the estimate (``_common_mode``), then corrected by the offset of each pixel's
region, in the bands; classification and pushes use the corrected values. The thresholds are computed
once, before the estimate, which reads them, and classification reads the same map, as
the GPU twin keeps each pixel's threshold for the frame.

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

from ._atomics import (
    SPINS_BEFORE_YIELD,
    compare_exchange,
    load_acquire,
    relax,
    store_release,
    wait_until_at_least,
    yield_core,
)
from ._buffers import reserve
from ._common_mode import corrections, estimate_parallel
from ._decision import (
    add_taps,
    add_three_taps,
    classify,
    classify_three,
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
#: Frames in a block of `frozen_frames` on several bands: the bands meet once a block.
BLOCK_FRAMES = 8
#: The most bytes a block's stash may take (`block_buffers`); fewer frames a block where
#: the windows would need more. Address space only: pages are touched as clusters come.
STASH_BYTES = 256 << 20
#: Spins a band waits for the others to join before the block runs in step (`join_all`).
START_PATIENCE = 1 << 24
#: ``sync[0]`` once a band gave up waiting for the others (`join_all`).
ABANDONED = -1


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def band_rows(band, n_bands, ny):
    """Rows ``y0..y1-1`` of band ``band`` of ``n_bands`` (contiguous, as even as may be)."""
    return band * ny // n_bands, (band + 1) * ny // n_bands


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
def load_edges(frame, off, s, N, v, corr, gs, ry, n_bands):
    """The values of every band's edge rows, before any band pushes a pixel."""
    ny = v.shape[0]
    for band in prange(n_bands):
        y0, y1 = band_rows(np.int64(band), n_bands, ny)
        for i in range(y0, y1):
            if is_edge(i, y0, y1, ry):
                value_row(i, frame, off, s, N, v, corr, gs)


@njit(**PARALLEL)
def classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                   row_counts, stores, corr, gs, thresholds, row_bits, n_bands):
    """Classify every pixel, push QUIET_UPDATE pixels (corrected by ``corr``), count stores
    (``row_counts``) and list their columns (``stores[i, :row_counts[i]]``): the frame's
    `classify_band` in ``n_bands`` bands of rows, one task each, after `load_edges`.

    With ``gs`` (the `_gain` tuple), ``frame`` holds ADC values and ``v`` keV.
    ``thresholds`` are the frame's thresholds from its frame-start state when the caller
    has them already (the common-mode estimate reads them too), in ADU; None: computed
    here, row by row. ``row_bits``: None, or each row's pixels with gain bits to count
    while the row's counts are in cache (`row_above`).
    """
    for band in prange(n_bands):
        y0, y1 = band_rows(np.int64(band), n_bands, v.shape[0])
        classify_band(y0, y1, frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                      codes, row_counts, stores, corr, gs, thresholds, row_bits,
                      band_scratch(ry, v), None, 0, 0, False)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def band_scratch(ry, v):
    """A band's scratch rows for `classify_band`."""
    return np.empty((4 + 2 * (2 * ry + 1), v.shape[1]), dtype=v.dtype)


@njit(cache=True, nogil=True, error_model="numpy")
def classify_band(y0, y1, frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                  codes, row_counts, stores, corr, gs, thresholds, row_bits, scratch,
                  stash, at, end, round_values):
    """Rows ``y0..y1-1`` of `classify_frame`, once the band's edge rows have their values
    and its neighbours' too. With ``stash`` (windows, rows, columns), each row's clusters
    are also written there from index ``at`` on, while their windows' rows hold this
    frame's values, up to index ``end``; return the index after the last (``at`` without).

    The band walks its rows once: the values of row ``i + ry`` (unless an edge row), then
    row ``i``'s windows, decision and push, so that each row's state is read while it is
    in cache. 3x3 windows inside the frame take `classify_three`, other 3-wide ones
    `add_three_taps`; wider windows the maximum from the `row_max` of their rows (the
    last ``2 ry + 1`` rows' in a small ring) and the sum from `add_taps`.
    """
    ny, nx = v.shape
    ring = 2 * ry + 1
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
        if thresholds is None:
            thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr)
        else:
            thr[:] = thresholds[i]
        if gs is not None:
            kev_thresholds_row(gs[1], i, thr)
        if gs is None and ry == 1 and three and 0 < i < ny - 1:
            # 3x3 inside the frame: the window and decision in one pass; the row's two
            # end pixels tap by tap.
            count = classify_three(v[i - 1], v[i], v[i], v[i + 1], thr, c3, codes[i],
                                   None, None)
            for j in (0, nx - 1):
                t, mm = window_taps(v, i, j, -1, 1, 1, thr[j] - thr[j], v[i, j])
                code = classify(v[i, j], thr[j], mm, t, c3)
                codes[i, j] = code
                count += is_store(code)
        else:
            tot[:] = 0
            if three:
                m[:] = v[i]
                for a in range(max(-ry, -i), min(ry, ny - 1 - i) + 1):
                    add_three_taps(v[i + a], tot, m)
            else:
                window_max(maxima, i, ry, ny, m)
                for a in range(max(-ry, -i), min(ry, ny - 1 - i) + 1):
                    add_taps(v[i + a], rx, tot)
            count = 0
            for j in range(nx):
                code = classify(v[i, j], thr[j], m[j], tot[j], c3)
                if gs is not None:
                    code = gated(code, gs[3][i, j])
                codes[i, j] = code
                count += is_store(code)
        row_counts[i] = count
        if count > 0:
            list_stores(codes[i], stores[i])
            if stash is not None:
                win, ys, xs = stash
                for c in range(min(count, end - at)):
                    store_window(v, i, stores[i, c], ry, rx, round_values, win, at)
                    ys[at] = i
                    xs[at] = stores[i, c]
                    at += 1
        if is_edge(i, y0, y1, ry):
            push_row(i, codes, frame, off, s, s2, N, x, corr, gs, None)
        else:
            push_row(i, codes, frame, off, s, s2, N, x, corr, gs, resid[i % ring])
    return at


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
    m[:] = maxima[i % ring]
    for r in range(max(0, i - ry), min(ny, i + ry + 1)):
        if r != i:
            mr = maxima[r % ring]
            for j in range(len(m)):
                m[j] = max(m[j], mr[j])


@njit(**PARALLEL)
def classify_block(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, round_values,
                   codes, row_counts, stores, row_bits, map_slot, maps, block, sync, n_bands):
    """`classify_frame` of every frame of ``frames`` (a block), each band through the
    frames at its own pace, in one parallel region; plain frames only (no common mode, no
    calibration). The clusters go to each band's part of the stash (``block``, `block_buffers`),
    frame after frame. Afterwards ``sync[0] == n_bands`` if it ran; when the bands did not
    all start, nothing was done.

    A band computes its edge rows' values of frame ``k``, publishes ``k + 1`` in
    ``sync[2 + band]``, and walks its rows once every band whose edge rows its windows
    read has published it (`wait_for_edges`): a band waits for its neighbours only, and
    not at all once they are ahead, where `classify_frame` has every band wait for the
    slowest at every frame. No band reads another's pedestal rows, and the values
    alternate between two buffers from frame to frame: a neighbour writes frame
    ``k + 2``'s edge rows only once it has this band's of ``k + 1``, published after this
    band's last read of frame ``k``. Codes go straight into the frame's branch map if it
    has one (``maps[map_slot[k]]``); the gain-bit counts of frame ``k`` into
    ``row_bits[k]``.

    The bands must run at the same time: each joins ``sync[0]`` first (`join_all`), and
    if they have not all joined within `START_PATIENCE` spins (fewer threads than bands,
    a scheduler that runs iterations one after another), none of them starts.
    """
    v, found, stashed, win, ys, xs, per_band, per_frame = block
    ny = v.shape[1]
    for band in prange(n_bands):
        b = np.int64(band)
        if join_all(sync, n_bands):
            y0, y1 = band_rows(b, n_bands, ny)
            scratch = band_scratch(ry, v[0])
            at = b * per_band
            for k in range(frames.shape[0]):
                vk = v[k % 2]
                codes_k = codes if map_slot[k] < 0 else maps[map_slot[k]]
                for i in range(y0, y1):
                    if is_edge(i, y0, y1, ry):
                        value_row(i, frames[k], off, s, N, vk, None, None)
                store_release(sync, 2 + b, k + 1)
                wait_for_edges(sync, b, n_bands, ny, ry, k + 1)
                after = classify_band(y0, y1, frames[k], off, s, s2, rms_fixed, fixed, N,
                                      nsig, c3, ry, rx, vk, codes_k, row_counts, stores, None,
                                      None, None, row_of(row_bits, k), scratch,
                                      (win, ys, xs), at, at + per_frame, round_values)
                found[k, b] = row_counts[y0:y1].sum()
                # Not `start = at` before the call: Numba's prange lowering took that copy
                # for ``at`` itself.
                stashed[k, b] = after - at
                at = after


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def wait_for_edges(sync, b, n_bands, ny, ry, k):
    """Wait until every other band with rows within ``ry`` of band ``b``'s has published
    frame ``k`` (`classify_block`)."""
    y0, y1 = band_rows(b, n_bands, ny)
    other = b - 1
    while other >= 0 and band_rows(other, n_bands, ny)[1] > y0 - ry:
        wait_until_at_least(sync, 2 + other, k)
        other -= 1
    other = b + 1
    while other < n_bands and band_rows(other, n_bands, ny)[0] < y1 + ry:
        wait_until_at_least(sync, 2 + other, k)
        other += 1


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def join_all(sync, n_bands):
    """Join the start word ``sync[0]``; return True once all ``n_bands`` bands have joined,
    False if it was abandoned.

    A band that waited `START_PATIENCE` spins abandons it, by the same compare-and-swap
    that joins, so that either every band starts or none does; a band that comes later
    finds it abandoned.
    """
    while True:
        seen = load_acquire(sync, 0)
        if seen < 0:
            return False
        if compare_exchange(sync, 0, seen, seen + 1) == seen:
            break
    spins = 0
    while True:
        seen = load_acquire(sync, 0)
        if seen == n_bands or seen < 0:
            return seen == n_bands
        spins += 1
        if spins > START_PATIENCE and compare_exchange(sync, 0, seen, ABANDONED) == seen:
            return False
        relax()
        if spins % SPINS_BEFORE_YIELD == 0:
            yield_core()


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


@njit(**PARALLEL)
def write_block(block, n, kept, first_row, win, ys, xs):
    """Copy the first ``kept[k]`` clusters of each frame ``k < n`` of a block from the
    bands' stashes (`classify_block`) to ``win``/``ys``/``xs`` from row ``first_row[k]``:
    band by band, which is raster order."""
    _, found, stashed, s_win, s_ys, s_xs, per_band, _ = block
    n_bands = found.shape[1]
    for task in prange(n * n_bands):
        k, b = divmod(np.int64(task), n_bands)
        before = found[k, :b].sum()
        src = b * per_band + stashed[:k, b].sum()
        dst = first_row[k] + before
        for c in range(max(0, min(stashed[k, b], kept[k] - before))):
            win[dst + c] = s_win[src + c]
            ys[dst + c] = s_ys[src + c]
            xs[dst + c] = s_xs[src + c]


@njit(cache=True, nogil=True, error_model="numpy")
def estimate_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, labels, f, cm):
    """The frame's plain values and thresholds (into ``cm``'s scratch), its common-mode
    offsets into ``cm``'s outputs and its correction map."""
    _, centre, sums, counts, task_sums, task_counts, thr, corr, candidates, out_c, out_n = cm
    estimate_parallel(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, labels, centre,
                      sums, counts, task_sums, task_counts, candidates)
    out_c[f] = centre
    out_n[f] = counts
    corrections(labels, centre, corr)


@njit(cache=True, nogil=True, error_model="numpy")
def classify_raw(frame, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v, codes,
                 row_counts, stores, cm, gs, row_bits, n_bands):
    """Frame ``f``'s values (common mode with ``cm``, keV with ``gs``), codes and pushes,
    in ``n_bands`` bands of rows; with ``row_bits``, its rows' pixels with gain bits.

    ``frame`` holds the counts, or with ``gs`` the ADC values `decode_frame` wrote.
    """
    if cm is None:
        load_edges(frame, off, s, N, v, None, gs, ry, n_bands)
        classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                       codes, row_counts, stores, None, gs, None, row_bits, n_bands)
    else:
        thr, corr = cm[6], cm[7]
        if gs is None:
            estimate_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, cm[0], f, cm)
        else:
            estimate_labels(cm[0], gs[3], gs[4])
            estimate_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, gs[4], f, cm)
        load_edges(frame, off, s, N, v, corr, gs, ry, n_bands)
        classify_frame(frame, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                       codes, row_counts, stores, corr, gs, thr, row_bits, n_bands)


@njit(cache=True, nogil=True, error_model="numpy")
def frozen_frames(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                  round_values, v, codes, row_counts, row_start, stores, win, ys, xs, n_out,
                  n_found, n_kept, map_slot, maps, cm, gs, gain_bits, row_bits, block, sync,
                  n_bands):
    """Run the frozen model over ``frames`` (n, ny, nx), advancing the pedestal in place.

    Clusters are appended to ``win``/``ys``/``xs`` from row ``n_out`` on, in raster
    order of their centre, at most ``cap`` per frame (``cap < 0``: no capacity). ``v``,
    ``codes`` and ``stores`` are scratch of the frame's shape, ``row_counts`` and
    ``row_start`` of its rows. ``cm`` is None, or the common-mode tuple of
    `aare_lab.finders.base.CpuFinder` (labels, scratch, and the per-frame offsets and
    pixel counts it fills); ``gs`` None, or its gain-switching tuple (the calibration,
    scratch, and the per-frame flagged pixels it fills). Returns the (possibly
    reallocated) buffers and the new row count. ``gain_bits``: None, or the per-frame
    count of pixels with gain bits to fill (frames read as counts, without ``gs``);
    ``row_bits`` the per-row scratch it is summed from, a row per frame of a block, None
    where ``gain_bits`` is. ``n_bands``: bands of rows, one per thread.

    ``block``: None, or the buffers of `block_buffers`: plain frames then go in blocks through
    `classify_block` and `write_block`, the bands meeting once a block. Otherwise, and
    from the first block whose bands could not all start (``sync[1]`` set, `join_all`),
    each frame goes through `classify_raw` and `write_frame`, the bands in step.
    """
    nf, ny = frames.shape[:2]
    size = max(nf, 1) if block is None else block[2].shape[0]
    kept = np.empty(size, np.int64)
    first_row = np.empty(size, np.int64)
    for f0 in range(0, nf, size):
        n = min(size, nf - f0)
        free = False
        if (block is not None and block[1].shape[1] == n_bands and cm is None and gs is None
                and sync[1] == 0):
            sync[0] = 0
            sync[2:] = 0
            classify_block(frames[f0:f0 + n], off, s, s2, rms_fixed, fixed, N, nsig, c3, ry,
                           rx, round_values, codes, row_counts, stores, row_bits,
                           map_slot[f0:f0 + n], maps, block, sync, n_bands)
            free = sync[0] == n_bands
            sync[1] = not free
        if free:
            found = block[1]
            for k in range(n):
                total = found[k].sum()
                kept[k] = total if cap < 0 else min(total, cap)
                n_found[f0 + k] = total
                n_kept[f0 + k] = kept[k]
                first_row[k] = n_out
                n_out += kept[k]
                if gain_bits is not None:
                    gain_bits[f0 + k] = row_bits[k].sum()
            win, ys, xs = reserve(win, ys, xs, n_out)
            write_block(block, n, kept, first_row, win, ys, xs)
            continue
        for f in range(f0, f0 + n):
            if gs is None:
                classify_raw(frames[f], f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx,
                             v, codes, row_counts, stores, cm, None, row_of(row_bits, 0),
                             n_bands)
                if gain_bits is not None:
                    gain_bits[f] = row_bits[0].sum()
            else:
                _, gain, adc, status, _, row_flagged, out_flagged = gs
                out_flagged[f] = decode_frame(frames[f], gain, adc, status, row_flagged)
                classify_raw(adc, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, v,
                             codes, row_counts, stores, cm, gs, None, n_bands)
            total = 0
            for i in range(ny):
                row_start[i] = total
                total += row_counts[i]
            kept_f = total if cap < 0 else min(total, cap)
            n_found[f] = total
            n_kept[f] = kept_f
            win, ys, xs = reserve(win, ys, xs, n_out + kept_f)
            write_frame(v, row_counts, row_start, stores, kept_f, ry, rx, round_values,
                        win, ys, xs, n_out)
            n_out += kept_f
            if map_slot[f] >= 0:
                maps[map_slot[f]] = codes
    return win, ys, xs, n_out


def block_buffers(shape, dtype, window, window_dtype, n_bands, frames, cap):
    """The buffers of `classify_block` and `write_block` for ``n_bands`` bands of frames of
    ``shape`` (values of ``dtype``), ``window`` (rows, columns) of ``window_dtype``,
    ``cap`` clusters a frame at most (< 0: none), blocks of up to ``frames`` frames.

    A tuple: the two value buffers, each frame's and band's clusters found and stashed
    ``(block, n_bands)``, the stash's windows, rows and columns, the stash's length a band
    and its most a band and frame. A band may store a cluster at every pixel of its rows
    (a flat region above threshold), or ``cap`` at most, so its part is sized for that,
    and a block takes as many frames as `STASH_BYTES` allow.
    """
    ny, nx = shape
    per_frame = -(-ny // n_bands) * nx
    if cap >= 0:
        per_frame = min(per_frame, cap)
    window_bytes = window[0] * window[1] * np.dtype(window_dtype).itemsize + 8
    size = min(BLOCK_FRAMES, frames,
               max(1, STASH_BYTES // max(1, n_bands * per_frame * window_bytes)))
    per_band = size * per_frame
    n = n_bands * per_band
    return (np.empty((2, ny, nx), dtype), np.zeros((size, n_bands), np.int64),
            np.zeros((size, n_bands), np.int64), np.empty((n, *window), window_dtype),
            np.empty(n, np.int32), np.empty(n, np.int32), per_band, per_frame)


def frozen_chunk(frames, off, *args):
    """`frozen_frames`, without reading ``off`` where it is all 0 (`zero_offsets`)."""
    return frozen_frames(frames, zero_offsets(off), *args)
