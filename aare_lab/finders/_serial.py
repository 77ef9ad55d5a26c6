"""The serial timing model: pixels in raster order, each read seeing earlier updates.

The decision is the frozen finder's (``_decision``); the difference is that a
QUIET_UPDATE refreshes the pixel's pedestal-subtracted value at once, so pixels scanned
later in the same frame read the updated mean. Window rows above the pixel's row are
final when the row starts and are summed for the whole row at once; the pixel's own row
and those below are continued tap by tap, because pixels to the left change as the row
is scanned. This is PSI aare's classic ClusterFinder.
"""

from numba import njit

from .._arith import QUIET_UPDATE, load_pixel, refresh_value, update_pixel
from ._buffers import reserve
from ._decision import classify, is_store, store_window, window_rows, window_taps


@njit(cache=True, nogil=True, error_model="numpy")
def serial_chunk(frames, off, s, s2, rms_fixed, fixed, N, nsig, c3, ry, rx, cap,
                 round_values, xT, v, thr, tot, m, codes,
                 win, ys, xs, fidx, n_out, n_found, n_kept, map_slot, maps):
    """Run the serial model over ``frames``; arguments as in ``frozen_chunk``."""
    nf, ny, nx = frames.shape
    for f in range(nf):
        frame = frames[f]
        for i in range(ny):
            for j in range(nx):
                load_pixel(frame, off, s, s2, rms_fixed, fixed, N, nsig, xT, v, thr, i, j)
        found = 0
        for i in range(ny):
            for j in range(nx):
                tot[i, j] = v[i, j] - v[i, j]
                m[i, j] = v[i, j]
            window_rows(v, i, -ry, -1, rx, tot, m)
            for j in range(nx):
                t, mm = window_taps(v, i, j, 0, ry, rx, tot[i, j], m[i, j])
                code = classify(v[i, j], thr[i, j], mm, t, c3)
                codes[i, j] = code
                if code == QUIET_UPDATE:
                    update_pixel(off, s, s2, N, xT, i, j)
                    refresh_value(off, s, N, xT, v, i, j)
                elif is_store(code):
                    if cap < 0 or found < cap:
                        win, ys, xs, fidx = reserve(win, ys, xs, fidx, n_out + 1)
                        store_window(v, i, j, ry, rx, round_values, win, n_out)
                        ys[n_out] = i
                        xs[n_out] = j
                        fidx[n_out] = f
                        n_out += 1
                    found += 1
        n_found[f] = found
        n_kept[f] = found if cap < 0 else min(found, cap)
        if map_slot[f] >= 0:
            maps[map_slot[f]] = codes
    return win, ys, xs, fidx, n_out
