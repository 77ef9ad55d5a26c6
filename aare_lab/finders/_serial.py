"""The serial timing model: pixels in raster order, each read seeing earlier updates.

The decision is the frozen finder's (``_decision``); the difference is that a
QUIET_UPDATE refreshes the pixel's pedestal-subtracted value at once, so pixels scanned
later in the same frame read the updated mean. This is PSI aare's classic ClusterFinder.

A row is processed in two steps that give exactly the sums of a tap-by-tap scan:

1. Vectorised, for every pixel of the row: the window rows above (final: their pixels are
   done), the own row with the left taps as they are once pushed, and the rows below
   (untouched so far), added in the window's raster order.
2. The scan in raster order: a pixel whose left taps in the row were all quiet (so pushed,
   as step 1 assumed) takes its step-1 sums; the others, near photons, continue their
   sums over the rows above tap by tap from the values as they are now. Quiet pixels are
   pushed as they are passed.

With common mode (``cm`` not None) the offsets are estimated from the frame-start values
before any pixel of the frame is pushed, exactly as in the frozen model, and every value
and push of the frame is corrected by them. With a JUNGFRAU calibration (``gs`` not None,
`_gain`) the frame is decoded first and read as in the frozen model: values and thresholds
in keV, pushes of G0 pixels only; a pushed pixel reads back ``(y - s' / N) / gain[0]``, and
only pushed pixels count as quiet for step 2.
"""

from numba import njit

from aare_lab.detector.arith import G0, QUIET_UPDATE, pushed_row, thresholds_row, values_row

from ._buffers import reserve
from ._common_mode import corrections, estimate_serial
from ._decision import (
    add_row_taps,
    classify,
    is_store,
    store_window,
    window_rows,
    window_taps,
)
from ._gain import (
    calibrate_row,
    decode_row,
    estimate_labels,
    gated,
    kev_thresholds_row,
    scale_row,
)

SCRATCH_ROWS = 8


@njit(cache=True, nogil=True, error_model="numpy")
def serial_chunk(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                 round_values, v, codes, rows,
                 win, ys, xs, n_out, n_found, n_kept, map_slot, maps, cm, gs):
    """Run the serial model over ``frames``; arguments as in ``frozen_chunk`` but for
    ``rows``, scratch of shape (SCRATCH_ROWS, nx)."""
    nf, ny = frames.shape[:2]
    for f in range(nf):
        if gs is None:
            win, ys, xs, n_out, found = serial_frame(
                frames[f], f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                round_values, v, codes, rows, win, ys, xs, n_out, cm, None)
        else:
            _, gain, adc, status, _, _, out_flagged = gs
            flagged = 0
            for i in range(ny):
                flagged += decode_row(frames[f, i], gain, i, adc[i], status[i])
            out_flagged[f] = flagged
            win, ys, xs, n_out, found = serial_frame(
                adc, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                round_values, v, codes, rows, win, ys, xs, n_out, cm, gs)
        n_found[f] = found
        n_kept[f] = found if cap < 0 else min(found, cap)
        if map_slot[f] >= 0:
            maps[map_slot[f]] = codes
    return win, ys, xs, n_out


@njit(cache=True, nogil=True, error_model="numpy")
def serial_estimate(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, labels, f, cm):
    """Frame ``f``'s common-mode offsets into ``cm``'s outputs, and its corrected values."""
    _, centre, sums, counts, _, _, thr_f, corr, candidates, out_c, out_n = cm
    estimate_serial(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr_f, labels, centre,
                    sums, counts, candidates)
    out_c[f] = centre
    out_n[f] = counts
    corrections(labels, centre, corr)
    for i in range(frame.shape[0]):
        values_row(frame[i], off[i], s[i], N, v[i], corr[i])


@njit(cache=True, nogil=True, error_model="numpy")
def serial_frame(frame, f, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                 round_values, v, codes, rows, win, ys, xs, n_out, cm, gs):
    """One frame of `serial_chunk`; ``frame`` holds the counts, or with ``gs`` the ADC
    values. Returns the buffers, the new row count and the frame's stores."""
    ny, nx = frame.shape
    thr, tot, m, above_t, above_m = rows[0], rows[1], rows[2], rows[3], rows[4]
    new_s, new_s2, new_v = rows[5], rows[6], rows[7]
    if cm is None:
        for i in range(ny):
            values_row(frame[i], off[i], s[i], N, v[i], None)
    elif gs is None:
        serial_estimate(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, cm[0], f, cm)
    else:
        estimate_labels(cm[0], gs[3], gs[4])
        serial_estimate(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, gs[4], f, cm)
    if gs is not None:
        for i in range(ny):
            calibrate_row(gs[3][i], frame[i], gs[0], gs[1], i, v[i])
    found = 0
    for i in range(ny):
        thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr)
        if cm is None:
            pushed_row(frame[i], off[i], s[i], s2[i], N, new_s, new_s2, new_v, None)
        else:
            pushed_row(frame[i], off[i], s[i], s2[i], N, new_s, new_s2, new_v, cm[7][i])
        if gs is not None:
            kev_thresholds_row(gs[1], i, thr)
            scale_row(gs[1], i, new_v)
        for j in range(nx):
            tot[j] = 0
            m[j] = v[i, j]
        window_rows(v, i, -ry, -1, rx, tot, m)
        above_t[:] = tot
        above_m[:] = m
        add_row_taps(new_v, -rx, -1, tot, m)
        add_row_taps(v[i], 0, rx, tot, m)
        window_rows(v, i, 1, ry, rx, tot, m)
        if n_out + nx > win.shape[0]:
            # Room for a whole row of clusters, so the scan never checks; reserve() is
            # too costly to call per cluster.
            win, ys, xs = reserve(win, ys, xs, n_out + nx)
        quiet_run = rx
        for j in range(nx):
            if quiet_run >= rx:
                t, mm = tot[j], m[j]
            else:
                t, mm = window_taps(v, i, j, 0, ry, rx, above_t[j], above_m[j])
            code = classify(v[i, j], thr[j], mm, t, c3)
            push = code == QUIET_UPDATE
            if gs is not None:
                code = gated(code, gs[3][i, j])
                push = push and gs[3][i, j] == G0
            codes[i, j] = code
            if push:
                s[i, j] = new_s[j]
                s2[i, j] = new_s2[j]
                v[i, j] = new_v[j]
                quiet_run += 1
            else:
                quiet_run = 0
                if is_store(code):
                    if cap < 0 or found < cap:
                        store_window(v, i, j, ry, rx, round_values, win, n_out)
                        ys[n_out] = i
                        xs[n_out] = j
                        n_out += 1
                    found += 1
    return win, ys, xs, n_out, found
