"""The serial timing model: pixels in raster order, each read seeing earlier updates.

The decision is the frozen finder's (``_decision``); the difference is that a
QUIET_UPDATE refreshes the pixel's pedestal-subtracted value at once, so pixels scanned
later in the same frame read the updated mean. This is PSI aare's classic ClusterFinder.

A row is processed in steps that give exactly the decisions of a tap-by-tap scan:

1. Vectorised, for every pixel of the row: its threshold and what its state and value
   would be once pushed (`pushed_row`), then its code from the window rows above (final:
   their pixels are done), the own row with the left taps as they are once pushed, and
   the rows below (untouched so far), added in the window's raster order
   (`first_codes`).
2. The scan in raster order (`scan_row`): a pixel whose left taps in the row were all
   pushed, as step 1 assumed, keeps its code; the others, near photons, are decided
   again from the values as they are now: by the window's maximum where that settles
   the decision before Test 3, else tap by tap. A store copies the window as it is at
   that point of the scan.
3. The pushes of the row's quiet pixels, all at once (`apply_pushes`): no read in step 2
   needs them before, except the left taps of a pixel decided again or stored, which
   step 2 writes first (`settle`).

A 3x3 window inside the frame, the common case, has one left tap in its row, so step 1
also gives each pixel's code with that tap not pushed (`first_codes_three`), and step 2
picks one of the two per pixel, walking only rows where they differ (`scan_three`).
Other windows sum up to nine taps a pass and take their maxima from each window row's
`row_max`, kept in a ring from row to row (`first_codes`).

With common mode (``cm`` not None) the offsets are estimated from the frame-start values
before any pixel of the frame is pushed, exactly as in the frozen model, and every value
and push of the frame is corrected by them. With a JUNGFRAU calibration (``gs`` not None,
`_gain`) the frame is decoded first and read as in the frozen model: values and thresholds
in keV, pushes of G0 pixels only; a pushed pixel reads back ``(y - s' / N) / gain[0]``, and
only pushed pixels count as quiet for step 2.
"""

import numpy as np
from numba import njit

from aare_lab.detector._gain_bit_loops import frame_above
from aare_lab.detector.arith import G0, QUIET_UPDATE, pushed_row, row_of, values_row

from ._buffers import reserve
from ._common_mode import corrections, estimate_serial, label_repeats
from ._decision import (
    add_tap_range,
    add_taps,
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
    decode_row,
    estimate_labels,
    gated,
    kev_thresholds_row,
    scale_row,
    statuses,
)

SCRATCH_ROWS = 9


@njit(cache=True, nogil=True, error_model="numpy")
def serial_chunk(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                 round_values, v, codes, rows,
                 win, ys, xs, n_out, n_found, n_kept, map_slot, maps, cm, gs, gain_bits):
    """Run the serial model over ``frames``; arguments as in ``frozen_chunk`` but for
    ``rows``, scratch of shape (SCRATCH_ROWS, nx)."""
    nf, ny = frames.shape[:2]
    for f in range(nf):
        if gs is None:
            if gain_bits is not None:
                # Counted right before the frame's values read it: from cache then.
                gain_bits[f] = frame_above(frames[f], ADC_LIMIT)
            win, ys, xs, n_out, found = serial_frame(
                frames[f], f, nf, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                round_values, v, codes, rows, win, ys, xs, n_out, cm, None)
        else:
            _, gain, adc, status, _, _, out_flagged = gs
            flagged = 0
            for i in range(ny):
                flagged += decode_row(frames[f, i], gain, i, adc[i], status[i])
            out_flagged[f] = flagged
            win, ys, xs, n_out, found = serial_frame(
                adc, f, nf, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                round_values, v, codes, rows, win, ys, xs, n_out, cm, gs)
        n_found[f] = found
        n_kept[f] = found if cap < 0 else min(found, cap)
        if map_slot[f] >= 0:
            maps[map_slot[f]] = codes
    return win, ys, xs, n_out


@njit(cache=True, nogil=True, error_model="numpy")
def serial_estimate(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, labels, f, cm):
    """Frame ``f``'s common-mode offsets into ``cm``'s outputs, and its corrected values."""
    _, repeats, centre, _, counts, _, _, corr, out_c, out_n = cm
    estimate_serial(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, labels, cm)
    out_c[f] = centre
    out_n[f] = counts
    corrections(labels, repeats, centre, corr)
    for i in range(frame.shape[0]):
        values_row(frame[i], off[i], s[i], N, v[i], corr[i])


@njit(cache=True, nogil=True, error_model="numpy")
def serial_frame(frame, f, nf, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                 round_values, v, codes, rows, win, ys, xs, n_out, cm, gs):
    """Frame ``f`` of the ``nf`` of `serial_chunk`; ``frame`` holds the counts, or with
    ``gs`` the ADC values. Returns the buffers, the new row count and the frame's stores."""
    ny, nx = frame.shape
    thr, new_s, new_s2, new_v = rows[0], rows[1], rows[2], rows[3]
    # Step 1's sums of the general path, with what `scan_row` continues from.
    sums = rows[4:]
    # 3x3 windows inside the frame take the fast path, the rest the general one, with
    # its ring of row maxima kept from row to row; the fast path's end rows fill it.
    three = gs is None and ry == 1 and rx == 1 and nx >= 3
    maxima = np.empty((2 * ry + 1, nx), v.dtype)
    kept = not three
    unpushed = np.empty(nx, np.uint8)
    stores = np.empty(nx, np.int64)
    if cm is None:
        for i in range(ny):
            values_row(frame[i], off[i], s[i], N, v[i], None)
    elif gs is None:
        serial_estimate(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, cm[0], f, cm)
    else:
        estimate_labels(cm[0], gs[3], gs[4])
        label_repeats(gs[4], cm[1])
        serial_estimate(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, gs[4], f, cm)
    if gs is not None:
        for i in range(ny):
            calibrate_row(gs[3][i], frame[i], gs[0], gs[1], i, v[i])
    if kept:
        for r in range(min(ry, ny)):
            row_max(v[r], rx, maxima[r % maxima.shape[0]])
    found = 0
    for i in range(ny):
        if kept and i + ry < ny:
            row_max(v[i + ry], rx, maxima[(i + ry) % maxima.shape[0]])
        if cm is None:
            pushed_row(frame[i], off[i], s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr,
                       new_s, new_s2, new_v, None)
        else:
            pushed_row(frame[i], off[i], s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr,
                       new_s, new_s2, new_v, cm[7][i])
        if n_out + nx > win.shape[0]:
            # Room for a whole row of clusters, so the scan never checks; reserve() is
            # too costly to call per cluster. The estimate: the rows so far of the
            # chunk's ``nf`` frames.
            win, ys, xs = reserve(win, ys, xs, n_out, n_out + nx,
                                  n_out * (nf * ny) // (f * ny + i + 1) + nx)
        if three and 0 < i < ny - 1:
            first_codes_three(v, i, new_v, thr, c3, codes[i], unpushed)
            n_out, found = scan_three(v, i, new_v, codes[i], unpushed, stores, cap,
                                      round_values, win, ys, xs, n_out, found)
            apply_pushes(codes[i], None, new_s, new_s2, new_v, s[i], s2[i], v[i])
        else:
            if gs is not None:
                kev_thresholds_row(gs[1], i, thr)
                scale_row(gs[1], i, new_v)
            status = row_of(statuses(gs), i)
            first_codes(v, i, new_v, thr, c3, ry, rx, sums, maxima, kept, codes[i], status)
            n_out, found = scan_row(v, i, new_v, thr, c3, ry, rx, sums, codes[i], status, cap,
                                    round_values, win, ys, xs, n_out, found)
            apply_pushes(codes[i], status, new_s, new_s2, new_v, s[i], s2[i], v[i])
            if kept:
                row_max(v[i], rx, maxima[i % maxima.shape[0]])
    return win, ys, xs, n_out, found


@njit(cache=True, nogil=True, error_model="numpy")
def first_codes(v, i, new_v, thr, c3, ry, rx, sums, maxima, kept, codes, status):
    """Step 1: row ``i``'s codes as if every left tap in the row had been pushed.

    ``new_v`` holds the row's pushed values, ``status`` the row's JUNGFRAU pixel status or
    None; ``sums`` is five rows of scratch, where `scan_row` finds each pixel's sum over
    the window rows above (``sums[2]``), the maximum of those and its own value
    (``sums[3]``), and its window's maximum without the left taps in its row
    (``sums[4]``). The sum takes up to nine taps a pass (`add_taps`); the maximum, in
    any order, each window row's `row_max`
    from ``maxima``, a ring of ``2 ry + 1`` rows that `serial_frame` keeps (``kept``:
    the rows above as pushed, the rows below as at the frame's start), else filled here.
    """
    ny, nx = v.shape
    ring = maxima.shape[0]
    tot, m, above_t, above_m, rest = sums[0], sums[1], sums[2], sums[3], sums[4]
    top, bottom = max(i - ry, 0), min(i + ry, ny - 1)
    if not kept:
        for r in range(top, bottom + 1):
            if r != i:
                row_max(v[r], rx, maxima[r % ring])
    tot[:] = 0
    for r in range(top, i):
        add_taps(v[r], rx, tot)
    copy_row(tot, above_t)
    add_tap_range(new_v, -rx, -1, tot)
    add_tap_range(v[i], 0, rx, tot)
    for r in range(i + 1, bottom + 1):
        add_taps(v[r], rx, tot)
    copy_row(v[i], above_m)
    for r in range(top, i):
        fold_max(above_m, maxima[r % ring])
    copy_row(above_m, rest)
    for b in range(1, min(rx, nx - 1) + 1):
        fold_max(rest[:nx - b], v[i, b:])
    for r in range(i + 1, bottom + 1):
        fold_max(rest, maxima[r % ring])
    copy_row(rest, m)
    for b in range(1, min(rx, nx - 1) + 1):
        fold_max(m[b:], new_v)
    for j in range(nx):
        code = classify(v[i, j], thr[j], m[j], tot[j], c3)
        if status is not None:
            code = gated(code, status[j])
        codes[j] = code


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def fold_max(out, values):
    """``out[k] = max(out[k], values[k])`` for every ``k`` of ``out``."""
    for k in range(len(out)):
        out[k] = max(out[k], values[k])


@njit(cache=True, nogil=True, error_model="numpy")
def scan_row(v, i, new_v, thr, c3, ry, rx, sums, codes, status, cap, round_values, win, ys,
             xs, n_out, found):
    """Step 2: row ``i`` in raster order; returns the new row count and stores so far.

    Arguments as in `first_codes` and `serial_chunk`; ``codes`` holds step 1's codes and
    gets the final ones.
    """
    nx = v.shape[1]
    above_t, above_m, rest = sums[2], sums[3], sums[4]
    quiet_run = rx
    # The scan's pushed pixels in [j - rx, settled) have their pushed values in v; earlier
    # ones are not read again.
    settled = 0
    for j in range(nx):
        code = codes[j]
        if quiet_run < rx:
            settle(v, i, new_v, codes, status, max(settled, j - rx), j)
            settled = j
            vp, thr_p = v[i, j], thr[j]
            mm = rest[j]
            for x in range(max(j - rx, 0), j):
                mm = max(mm, v[i, x])
            if vp < -thr_p or mm > thr_p:
                # Decided before Test 3, without the sum: near photons, the common case.
                code = classify(vp, thr_p, mm, above_t[j], c3)
            else:
                t, mm = window_taps(v, i, j, 0, ry, rx, above_t[j], above_m[j])
                code = classify(vp, thr_p, mm, t, c3)
            if status is not None:
                code = gated(code, status[j])
            codes[j] = code
        if pushed(codes, status, j):
            quiet_run += 1
        else:
            quiet_run = 0
            if is_store(code):
                n_out, found = store(v, i, j, ry, rx, new_v, codes, status, cap, round_values,
                                     win, ys, xs, n_out, found)
    return n_out, found


@njit(cache=True, nogil=True, error_model="numpy")
def first_codes_three(v, i, new_v, thr, c3, codes, unpushed):
    """`first_codes` of a 3x3 window inside the frame, and in ``unpushed`` the codes with
    the window's one left tap in its row not pushed: every code the scan can need is one
    of the two (`scan_three`)."""
    nx = v.shape[1]
    classify_three(v[i - 1], new_v, v[i], v[i + 1], thr, c3, codes, v[i], unpushed)
    # The row's end pixels tap by tap: the first has no left tap, the last no right one.
    zero = c3 - c3
    t, mm = window_taps(v, i, 0, -1, 1, 1, zero, v[i, 0])
    codes[0] = unpushed[0] = classify(v[i, 0], thr[0], mm, t, c3)
    j = nx - 1
    above, m_above = window_taps(v, i, j, -1, -1, 1, zero, v[i, j])
    for left, out in ((new_v[j - 1], codes), (v[i, j - 1], unpushed)):
        t, mm = window_taps(v, i, j, 0, 0, 0, above + left, max(m_above, left))
        t, mm = window_taps(v, i, j, 1, 1, 1, t, mm)
        out[j] = classify(v[i, j], thr[j], mm, t, c3)


@njit(cache=True, nogil=True, error_model="numpy")
def scan_three(v, i, new_v, codes, unpushed, stores, cap, round_values, win, ys, xs, n_out,
               found):
    """`scan_row` of a 3x3 window inside the frame; returns the new row count and stores.

    A 3x3 window has one left tap in its row, so a pixel's code is step 1's unless the
    pixel before it was not pushed, and then ``unpushed``'s. The two differ only where
    that tap's pushed value changes the decision, which is rare: the rows are compared
    whole (vector code), and only a row where they differ is walked pixel by pixel,
    each reading its left neighbour's final code. Then the stores, in order
    (`list_stores`, ``stores`` a row of scratch).
    """
    differ = codes[0] ^ unpushed[0]
    for j in range(1, len(codes)):
        differ |= codes[j] ^ unpushed[j]
    if differ:
        for j in range(1, len(codes)):
            if codes[j] != unpushed[j] and codes[j - 1] != QUIET_UPDATE:
                codes[j] = unpushed[j]
    for k in range(list_stores(codes, stores)):
        n_out, found = store(v, i, stores[k], 1, 1, new_v, codes, None, cap, round_values,
                             win, ys, xs, n_out, found)
    return n_out, found


@njit(cache=True, nogil=True, error_model="numpy")
def store(v, i, j, ry, rx, new_v, codes, status, cap, round_values, win, ys, xs, n_out,
          found):
    """Count the store at ``(i, j)`` and, below the cap, copy its window as the scan sees
    it (after `settle` of its left taps in the row); returns the new counts."""
    if cap < 0 or found < cap:
        settle(v, i, new_v, codes, status, j - rx, j)
        store_window(v, i, j, ry, rx, round_values, win, n_out)
        ys[n_out] = i
        xs[n_out] = j
        n_out += 1
    return n_out, found + 1


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def pushed(codes, status, j):
    """Whether pixel ``j`` of the row is pushed: QUIET_UPDATE, and G0 where gain bits."""
    if status is None:
        return codes[j] == QUIET_UPDATE
    return codes[j] == QUIET_UPDATE and status[j] == G0


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def settle(v, i, new_v, codes, status, a, b):
    """Write the pushed values of the row's pushed pixels ``a..b-1`` into ``v[i]`` ahead
    of `apply_pushes`, for a read of them in the scan."""
    for x in range(max(a, 0), b):
        if pushed(codes, status, x):
            v[i, x] = new_v[x]


@njit(cache=True, nogil=True, error_model="numpy")
def apply_pushes(codes, status, new_s, new_s2, new_v, s, s2, v):
    """Step 3: the state and value of the row's pushed pixels, branch-free (vector code)."""
    for j in range(len(codes)):
        p = pushed(codes, status, j)
        s[j] = new_s[j] if p else s[j]
        s2[j] = new_s2[j] if p else s2[j]
        v[j] = new_v[j] if p else v[j]
