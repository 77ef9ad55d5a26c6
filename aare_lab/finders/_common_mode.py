"""The common-mode estimate of docs/algorithm.md, shared by the serial and the frozen finder.

Per frame and region, two passes over the frame-start values ``v0`` of the region's pixels
(the first as the values and thresholds are computed, `first_pass_rows`):
a pixel enters pass k when ``|v0 - c_(k-1)| <= thr`` (``c_0 = 0``), as the integer
``rha(v0 * 2**16)``; the pass's offset ``c_k`` is the mean of the integers, one float64
division, scaled back and rounded to the state dtype. The integer sums are exact, so the
rows may be summed in any order and in parallel.

Twin: ``kernels/frozen.cu`` (``COMMON_MODE``) sums the same integers with atomics.
"""

import numpy as np
from numba import njit, prange

from .._arith import round_half_away, thresholds_row, values_row
from ..common_mode import FRACTION_BITS

SCALE = float(2 ** FRACTION_BITS)
INV_SCALE = 1.0 / SCALE
PASSES = 2
ROWS_PER_TASK = 8


@njit(cache=True, nogil=True, error_model="numpy")
def fixed_point(value):
    """``rha(float64(value) * 2**16)`` as an int64: exact, since the scale is a power of two."""
    return np.int64(round_half_away(np.float64(value) * SCALE))


@njit(cache=True, nogil=True, error_model="numpy")
def add_region_sums(v, thr, labels, centre, i0, i1, sums, counts):
    """Add the pixels of rows ``i0..i1-1`` with ``|v - centre[label]| <= thr`` to their region.

    A row is taken as runs of pixels of one label (regions are runs of columns), each
    summed by `run_sums` in one vectorised pass.
    """
    nx = v.shape[1]
    for i in range(i0, i1):
        j = 0
        while j < nx:
            r = labels[i, j]
            k = j + 1
            while k < nx and labels[i, k] == r:
                k += 1
            if r >= 0:
                total, n = run_sums(v[i, j:k], thr[i, j:k], centre[r])
                sums[r] += total
                counts[r] += n
            j = k


@njit(cache=True, nogil=True, error_model="numpy")
def run_sums(v, thr, centre):
    """The fixed-point sum and the count of the pixels with ``|v - centre| <= thr``.

    Branch-free, so that it compiles to vector code; the sum is exact in any order.
    """
    total = np.int64(0)
    n = np.int64(0)
    for j in range(len(v)):
        take = abs(v[j] - centre) <= thr[j]
        total += fixed_point(v[j]) if take else 0
        n += take
    return total, n


@njit(cache=True, nogil=True, error_model="numpy")
def region_means(sums, counts, centre):
    """``centre[r] = D((float64(sum) / float64(count)) * 2**-16)``, 0 for an empty region."""
    for r in range(len(centre)):
        if counts[r] > 0:
            centre[r] = (np.float64(sums[r]) / np.float64(counts[r])) * INV_SCALE
        else:
            centre[r] = 0


@njit(cache=True, nogil=True, error_model="numpy")
def corrections(labels, centre, corr):
    """Each pixel's correction: its region's offset, 0 for an excluded pixel."""
    ny, nx = labels.shape
    for i in range(ny):
        for j in range(nx):
            r = labels[i, j]
            corr[i, j] = centre[r] if r >= 0 else 0


@njit(cache=True, nogil=True, error_model="numpy")
def first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, labels, centre,
                    i0, i1, sums, counts):
    """Rows ``i0..i1-1``: the plain values ``v`` and thresholds ``thr`` from the frame-start
    state, and the first pass's sums (``centre`` zeroed), each row while it is in cache."""
    for i in range(i0, i1):
        values_row(frame[i], off[i], s[i], N, v[i], None)
        thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr[i])
        add_region_sums(v, thr, labels, centre, i, i + 1, sums, counts)


@njit(cache=True, nogil=True, error_model="numpy")
def estimate_serial(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, labels, centre,
                    sums, counts):
    """The frame's values and thresholds (`first_pass_rows`) and both passes, in one
    thread; ``centre`` ends as the offsets."""
    centre[:] = 0
    sums[:] = 0
    counts[:] = 0
    first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, labels, centre,
                    0, v.shape[0], sums, counts)
    region_means(sums, counts, centre)
    for _ in range(PASSES - 1):
        sums[:] = 0
        counts[:] = 0
        add_region_sums(v, thr, labels, centre, 0, v.shape[0], sums, counts)
        region_means(sums, counts, centre)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def estimate_parallel(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, labels, centre,
                      sums, counts, task_sums, task_counts):
    """`estimate_serial` with row blocks in parallel; the integer totals are the same."""
    ny = v.shape[0]
    n_tasks = task_sums.shape[0]
    centre[:] = 0
    for task in prange(n_tasks):
        t = np.int64(task)
        task_sums[t] = 0
        task_counts[t] = 0
        i0 = t * ROWS_PER_TASK
        first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, labels,
                        centre, i0, min(i0 + ROWS_PER_TASK, ny), task_sums[t],
                        task_counts[t])
    task_means(task_sums, task_counts, sums, counts, centre)
    for _ in range(PASSES - 1):
        for task in prange(n_tasks):
            t = np.int64(task)
            task_sums[t] = 0
            task_counts[t] = 0
            i0 = t * ROWS_PER_TASK
            add_region_sums(v, thr, labels, centre, i0, min(i0 + ROWS_PER_TASK, ny),
                            task_sums[t], task_counts[t])
        task_means(task_sums, task_counts, sums, counts, centre)


@njit(cache=True, nogil=True, error_model="numpy")
def task_means(task_sums, task_counts, sums, counts, centre):
    """`region_means` of the tasks' summed sums and counts."""
    sums[:] = 0
    counts[:] = 0
    for t in range(task_sums.shape[0]):
        sums += task_sums[t]
        counts += task_counts[t]
    region_means(sums, counts, centre)
