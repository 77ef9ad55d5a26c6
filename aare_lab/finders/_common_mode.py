"""The common-mode estimate of docs/algorithm.md, shared by the serial and the frozen finder.

Per frame and region, two passes over the frame-start values ``v0`` of the region's pixels
(the first as the values and thresholds are computed, `first_pass_rows`):
a pixel enters pass k when ``|v0 - c_(k-1)| <= thr`` (``c_0 = 0``), as the integer
``rha(v0 * 2**16)``, and in the second pass only if no pixel of its 3x3 neighbourhood is
a candidate at ``c_1`` (`mark_candidates`): photons' charge-sharing tails below the
threshold stay out of the estimate. The pass's offset ``c_k`` is the mean of the integers,
one float64 division, scaled back and rounded to the state dtype. The integer sums are
exact, so the rows may be summed in any order and in parallel.

Twin: ``kernels/frozen.cu`` (``COMMON_MODE``) sums the same integers with atomics.
"""

import numpy as np
from numba import njit, prange

from aare_lab.detector.arith import round_half_away, row_of, thresholds_row, values_row
from aare_lab.detector.common_mode import FRACTION_BITS

SCALE = float(2 ** FRACTION_BITS)
INV_SCALE = 1.0 / SCALE
ROWS_PER_TASK = 16


@njit(cache=True, nogil=True, error_model="numpy")
def fixed_point(value):
    """``rha(float64(value) * 2**16)`` as an int64: exact, since the scale is a power of two."""
    return np.int64(round_half_away(np.float64(value) * SCALE))


@njit(cache=True, nogil=True, error_model="numpy")
def add_region_sums(v, thr, labels, centre, i0, i1, sums, counts, candidates):
    """Add the pixels of rows ``i0..i1-1`` with ``|v - centre[label]| <= thr`` to their
    region; with ``candidates`` (the second pass) only those with no candidate in their
    3x3 neighbourhood.

    Consecutive rows of the same labels (regions are mostly blocks of columns) are summed
    per column in full-row vector passes (`add_column_sums`), and the columns into their
    regions once per such block of rows (`columns_to_regions`).
    """
    nx = v.shape[1]
    column_sums = np.zeros(nx, np.int64)
    column_counts = np.zeros(nx, np.int64)
    centres = np.empty(nx, v.dtype)
    near = np.zeros(nx, np.uint8)
    column = np.zeros(nx, np.uint8)
    first = i0
    for i in range(i0, i1):
        if i == first or not same_labels(labels[i], labels[first]):
            if i > first:
                columns_to_regions(labels[first], column_sums, column_counts, sums, counts)
            first = i
            for j in range(nx):
                r = labels[i, j]
                centres[j] = centre[max(r, 0)]
        if candidates is not None:
            near_candidates(candidates, i, column, near)
        add_column_sums(v[i], thr[i], centres, near, column_sums, column_counts)
    if i1 > i0:
        columns_to_regions(labels[first], column_sums, column_counts, sums, counts)


@njit(cache=True, nogil=True, error_model="numpy")
def mark_candidates(v, thr, labels, centre, i0, i1, candidates):
    """``candidates[i, j] = 1`` for the pixels of rows ``i0..i1-1`` in a region with
    ``v - centre[label] > thr`` (photon candidates at the first pass's offsets), else 0.

    Twin: the candidates of ``kernels/frozen.cu``'s COMMON_MODE estimate.
    """
    nx = v.shape[1]
    centres = np.empty(nx, v.dtype)
    for i in range(i0, i1):
        if i == i0 or not same_labels(labels[i], labels[i - 1]):
            for j in range(nx):
                centres[j] = centre[max(labels[i, j], 0)]
        mark_row(v[i], thr[i], labels[i], centres, candidates[i])


@njit(cache=True, nogil=True, error_model="numpy")
def mark_row(v, thr, labels, centres, candidates):
    """One row of `mark_candidates`, branch-free (vector code)."""
    for j in range(len(v)):
        candidates[j] = (labels[j] >= 0) & (v[j] - centres[j] > thr[j])


@njit(cache=True, nogil=True, error_model="numpy")
def near_candidates(candidates, i, column, near):
    """``near[j] = 1`` where a pixel of the 3x3 neighbourhood of ``(i, j)`` inside the
    frame is a candidate; ``column`` is scratch (the rows ``i - 1 .. i + 1`` or'ed).

    Element loops: with a slice copy and ``|=`` on rows this took 0.09 ms a 400x400
    frame against 0.016.
    """
    ny, nx = candidates.shape
    above, below = candidates[max(i - 1, 0)], candidates[min(i + 1, ny - 1)]
    row = candidates[i]
    for j in range(nx):
        column[j] = above[j] | row[j] | below[j]
    for j in range(1, nx - 1):
        near[j] = column[j - 1] | column[j] | column[j + 1]
    near[0] = column[0] | (column[1] if nx > 1 else 0)
    near[nx - 1] = column[nx - 1] | (column[nx - 2] if nx > 1 else 0)


@njit(cache=True, nogil=True, error_model="numpy")
def same_labels(a, b):
    """Whether two rows of labels are equal."""
    differ = 0
    for j in range(len(a)):
        differ += a[j] != b[j]
    return differ == 0


@njit(cache=True, nogil=True, error_model="numpy")
def add_column_sums(v, thr, centres, near, column_sums, column_counts):
    """Add each pixel of a row with ``|v - centre| <= thr`` and no candidate near (``near``
    0) to its column's fixed-point sum and count. Branch-free, so that it compiles to
    vector code."""
    for j in range(len(v)):
        take = (abs(v[j] - centres[j]) <= thr[j]) & (near[j] == 0)
        column_sums[j] += fixed_point(v[j]) if take else 0
        column_counts[j] += take


@njit(cache=True, nogil=True, error_model="numpy")
def columns_to_regions(labels, column_sums, column_counts, sums, counts):
    """Add the columns' sums and counts to their regions (excluded columns: none) and
    zero them. The integer sums are exact, so the order does not matter."""
    for j in range(len(labels)):
        r = labels[j]
        if r >= 0:
            sums[r] += column_sums[j]
            counts[r] += column_counts[j]
        column_sums[j] = 0
        column_counts[j] = 0


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
def first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, given, labels,
                    centre, i0, i1, sums, counts):
    """Rows ``i0..i1-1``: the plain values ``v`` and, unless ``given`` (already in
    ``thr``), the thresholds ``thr`` from the frame-start state, and the first pass's sums
    (``centre`` zeroed), a few rows at a time while they are in cache."""
    for b0 in range(i0, i1, ROWS_PER_TASK):
        b1 = min(b0 + ROWS_PER_TASK, i1)
        for i in range(b0, b1):
            values_row(frame[i], row_of(off, i), s[i], N, v[i], None)
            if not given:
                thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr[i])
        add_region_sums(v, thr, labels, centre, b0, b1, sums, counts, None)


@njit(cache=True, nogil=True, error_model="numpy")
def estimate_serial(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, labels, centre,
                    sums, counts, candidates):
    """The frame's values and thresholds (`first_pass_rows`) and both passes, in one
    thread; ``centre`` ends as the offsets, ``candidates`` (scratch) as the first pass's
    candidates."""
    ny = v.shape[0]
    centre[:] = 0
    sums[:] = 0
    counts[:] = 0
    first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, False, labels,
                    centre, 0, ny, sums, counts)
    region_means(sums, counts, centre)
    mark_candidates(v, thr, labels, centre, 0, ny, candidates)
    sums[:] = 0
    counts[:] = 0
    add_region_sums(v, thr, labels, centre, 0, ny, sums, counts, candidates)
    region_means(sums, counts, centre)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def estimate_parallel(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, given, labels,
                      centre, sums, counts, task_sums, task_counts, candidates):
    """`estimate_serial` with row blocks in parallel; the integer totals are the same.
    ``given``: ``thr`` holds the frame's thresholds already (fixed noise)."""
    ny = v.shape[0]
    n_tasks = task_sums.shape[0]
    centre[:] = 0
    for task in prange(n_tasks):
        t = np.int64(task)
        task_sums[t] = 0
        task_counts[t] = 0
        i0 = t * ROWS_PER_TASK
        first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, given,
                        labels, centre, i0, min(i0 + ROWS_PER_TASK, ny), task_sums[t],
                        task_counts[t])
    task_means(task_sums, task_counts, sums, counts, centre)
    # Every row's candidates before any row's neighbours are read.
    for task in prange(n_tasks):
        i0 = np.int64(task) * ROWS_PER_TASK
        mark_candidates(v, thr, labels, centre, i0, min(i0 + ROWS_PER_TASK, ny), candidates)
    for task in prange(n_tasks):
        t = np.int64(task)
        task_sums[t] = 0
        task_counts[t] = 0
        i0 = t * ROWS_PER_TASK
        add_region_sums(v, thr, labels, centre, i0, min(i0 + ROWS_PER_TASK, ny),
                        task_sums[t], task_counts[t], candidates)
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
