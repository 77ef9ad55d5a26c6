"""The common-mode estimate of docs/algorithm.md, shared by the serial and the frozen finder.

Per frame and region, two passes over the frame-start values ``v0`` of the region's pixels
(the first as the values and thresholds are computed, `first_pass_rows`; then
`second_pass_rows`): a pixel enters pass k when ``|v0 - c_(k-1)| <= thr``
(``c_0 = 0``), as the integer ``rha(v0 * 2**16)``, and in the second pass only if no pixel
of its 3x3 neighbourhood is a candidate at ``c_1`` (`mark_candidates`): photons'
charge-sharing tails below the threshold stay out of the estimate. The pass's offset
``c_k`` is the mean of the integers, one float64 division, scaled back and rounded to the
state dtype. The integer sums are exact, so the rows may be summed in any order and in
parallel.

Twin: ``kernels/frozen.cu`` (``COMMON_MODE``) sums the same integers with atomics.
"""

import numpy as np
from numba import njit, prange

from aare_lab.detector.arith import round_half_away, row_of, thresholds_row, values_row
from aare_lab.detector.common_mode import FRACTION_BITS, region_count

from ._decision import copy_row

SCALE = float(2 ** FRACTION_BITS)
INV_SCALE = 1.0 / SCALE
ROWS_PER_TASK = 16
#: Rows whose integers a column sums in float64 before they go to its region as int64:
#: ``|q| < 2**33`` (docs/algorithm.md), so any 2**19 of them add up exactly (< 2**52).
#: AVX2 has no vector conversion from float64 to int64: int64 sums per pixel went element
#: by element.
EXACT_ROWS = 2 ** 19


@njit(cache=True, nogil=True, error_model="numpy")
def fixed_point(value):
    """``rha(float64(value) * 2**16)``, an integer held exactly in a float64: the scale is
    a power of two."""
    return round_half_away(np.float64(value) * SCALE)


def estimate_scratch(labels, dtype):
    """What the estimate works in for a label map and a state dtype, as `estimate_serial`
    and `estimate_parallel` take it: ``(labels, repeats, centre, sums, counts, tasks, thr,
    corr)``.

    ``repeats[i]``: row ``i`` has the labels of row ``i - 1`` (`label_repeats`; with a
    calibration the estimate reads each frame's G0 labels, and its finder remakes them);
    ``centre``, ``sums``, ``counts`` per region; ``tasks`` each block of `ROWS_PER_TASK`
    rows' own sums and rows of scratch (`second_pass_rows`), made once: allocating them
    for every block took about 30 us a 400x400 frame on the 2-core VM; ``thr`` and
    ``corr`` maps of the frame's thresholds and corrections.
    """
    (ny, nx), regions = labels.shape, region_count(labels)
    n_tasks = -(-ny // ROWS_PER_TASK)
    repeats = np.zeros(ny, np.uint8)
    label_repeats(labels, repeats)
    tasks = (np.zeros((n_tasks, regions), np.int64), np.zeros((n_tasks, regions), np.int64),
             np.zeros((n_tasks, 2, nx)), np.zeros((n_tasks, 2, nx), dtype),
             np.zeros((n_tasks, 5, nx), np.uint8))
    return (labels, repeats, np.zeros(regions, dtype), np.zeros(regions, np.int64),
            np.zeros(regions, np.int64), tasks, np.empty((ny, nx), dtype),
            np.empty((ny, nx), dtype))


@njit(cache=True, nogil=True, error_model="numpy")
def label_repeats(labels, repeats):
    """``repeats[i] = 1`` where row ``i`` has the labels of row ``i - 1``, else 0."""
    repeats[0] = 0
    for i in range(1, labels.shape[0]):
        repeats[i] = same_labels(labels[i], labels[i - 1])


@njit(cache=True, nogil=True, error_model="numpy")
def task_of(tasks, t):
    """Task ``t``'s sums, counts and scratch rows from ``tasks`` (`estimate_scratch`)."""
    return tasks[0][t], tasks[1][t], tasks[2][t], tasks[3][t], tasks[4][t]


@njit(cache=True, nogil=True, error_model="numpy")
def first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, given, labels,
                    repeats, centre, i0, i1, task):
    """Rows ``i0..i1-1``: the plain values ``v`` and, unless ``given`` (already in
    ``thr``), the thresholds ``thr`` from the frame-start state, and the first pass's sums
    (``centre`` zeroed) into ``task`` (`task_of`, its sums zeroed first), each row summed
    while it is in cache."""
    sums, counts, columns, centres, marks = task
    sums[:] = 0
    counts[:] = 0
    near = marks[0]
    near[:] = 0
    first = i0
    for i in range(i0, i1):
        values_row(frame[i], row_of(off, i), s[i], N, v[i], None)
        if not given:
            thresholds_row(s[i], s2[i], rms_fixed[i], fixed, N, nsig, thr[i])
        first = next_row(labels, repeats, centre, i, i0, first, task)
        add_column_sums(v[i], thr[i], centres[0], near, columns[0], columns[1])
    end_rows(labels, i0, i1, first, task)


@njit(cache=True, nogil=True, error_model="numpy")
def second_pass_rows(v, thr, labels, repeats, centre, i0, i1, task):
    """The second pass over rows ``i0..i1-1``: add the pixels with ``|v - centre[label]| <=
    thr`` and no candidate (`mark_candidates`) in their 3x3 neighbourhood to their
    region's sum and count in ``task`` (`task_of`, its sums zeroed first).

    The candidates are marked one row ahead into a ring of three rows, rows ``i0 - 1`` and
    ``i1`` included, so that blocks of rows need nothing from each other.
    """
    ny = v.shape[0]
    sums, counts, columns, centres, marks = task
    sums[:] = 0
    counts[:] = 0
    near, column, ring = marks[0], marks[1], marks[2:]
    marked = -1
    for r in range(max(i0 - 1, 0), min(i0 + 1, ny)):
        marked = mark_candidates(v, thr, labels, repeats, centre, r, marked, centres[1],
                                 ring[r % 3])
    first = i0
    for i in range(i0, i1):
        first = next_row(labels, repeats, centre, i, i0, first, task)
        if i + 1 < ny:
            marked = mark_candidates(v, thr, labels, repeats, centre, i + 1, marked,
                                     centres[1], ring[(i + 1) % 3])
        near_candidates(ring[max(i - 1, 0) % 3], ring[i % 3], ring[min(i + 1, ny - 1) % 3],
                        column, near)
        add_column_sums(v[i], thr[i], centres[0], near, columns[0], columns[1])
    end_rows(labels, i0, i1, first, task)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def next_row(labels, repeats, centre, i, i0, first, task):
    """Before row ``i`` of a walk from row ``i0`` is summed, whose columns hold the sums of
    rows ``first..i-1``: where its labels differ from the row above (``repeats``; regions
    are mostly blocks of columns) or the columns hold `EXACT_ROWS` rows, they go to their
    regions (`columns_to_regions`) and the row's centres are gathered into ``task``.
    Returns the first row whose sums the columns hold with row ``i``'s."""
    if i > i0 and repeats[i] and i - first < EXACT_ROWS:
        return first
    sums, counts, columns, centres, _ = task
    if i > i0:
        columns_to_regions(labels[first], columns[0], columns[1], sums, counts)
    gather_centres(labels[i], centre, centres[0])
    return i


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def end_rows(labels, i0, i1, first, task):
    """The columns' sums of the last rows of a walk over ``i0..i1-1`` to their regions."""
    sums, counts, columns, _, _ = task
    if i1 > i0:
        columns_to_regions(labels[first], columns[0], columns[1], sums, counts)


@njit(cache=True, nogil=True, error_model="numpy")
def gather_centres(labels, centre, centres):
    """``centres[j] = centre[labels[j]]``, infinite for an excluded pixel: it is then
    neither within a threshold of its centre nor above it, so the row loops need not
    read the labels."""
    for j in range(len(labels)):
        r = labels[j]
        centres[j] = centre[r] if r >= 0 else np.inf


@njit(cache=True, nogil=True, error_model="numpy")
def mark_candidates(v, thr, labels, repeats, centre, i, last, centres, candidates):
    """``candidates[j] = 1`` for the pixels of row ``i`` in a region with
    ``v - centre[label] > thr`` (photon candidates at the first pass's offsets), else 0.
    ``centres`` holds row ``last``'s (none if negative), gathered again unless that is the
    row above with the same labels (row 0 repeats none). Returns ``i``, whose centres
    ``centres`` then holds.

    Twin: the candidates of ``kernels/frozen.cu``'s COMMON_MODE estimate.
    """
    if last != i - 1 or not repeats[i]:
        gather_centres(labels[i], centre, centres)
    mark_row(v[i], thr[i], centres, candidates)
    return i


@njit(cache=True, nogil=True, error_model="numpy")
def mark_row(v, thr, centres, candidates):
    """One row of `mark_candidates`, branch-free (vector code)."""
    for j in range(len(v)):
        candidates[j] = v[j] - centres[j] > thr[j]


@njit(cache=True, nogil=True, error_model="numpy")
def near_candidates(above, row, below, column, near):
    """``near[j] = 1`` where a pixel of the 3x3 neighbourhood of pixel ``j`` of ``row``
    inside the frame is a candidate; ``above`` and ``below`` are the candidates of the
    rows beside it (``row`` itself at the frame's edge), ``column`` scratch (the three
    rows or'ed).

    Element loops: with a slice copy and ``|=`` on rows this took 0.09 ms a 400x400
    frame against 0.016.
    """
    nx = len(row)
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
    0) to its column's fixed-point sum and count, both float64 (exact for up to
    `EXACT_ROWS` rows). Branch-free, so that it compiles to vector code."""
    for j in range(len(v)):
        take = (abs(v[j] - centres[j]) <= thr[j]) & (near[j] == 0)
        column_sums[j] += fixed_point(v[j]) if take else 0.0
        column_counts[j] += 1.0 if take else 0.0


@njit(cache=True, nogil=True, error_model="numpy")
def columns_to_regions(labels, column_sums, column_counts, sums, counts):
    """Add the columns' sums and counts to their regions as int64 (excluded columns: none)
    and zero them. The integer sums are exact, so the order does not matter.

    A run of columns of one region is added up first and to the region once: adding each
    column to the region's sum in memory waits on the previous add.
    """
    run_sum = run_count = 0
    for j in range(len(labels)):
        run_sum += np.int64(column_sums[j])
        run_count += np.int64(column_counts[j])
        column_sums[j] = 0
        column_counts[j] = 0
        r = labels[j]
        if j + 1 == len(labels) or labels[j + 1] != r:
            if r >= 0:
                sums[r] += run_sum
                counts[r] += run_count
            run_sum = run_count = 0


@njit(cache=True, nogil=True, error_model="numpy")
def region_means(sums, counts, centre):
    """``centre[r] = D((float64(sum) / float64(count)) * 2**-16)``, 0 for an empty region."""
    for r in range(len(centre)):
        if counts[r] > 0:
            centre[r] = (np.float64(sums[r]) / np.float64(counts[r])) * INV_SCALE
        else:
            centre[r] = 0


@njit(cache=True, nogil=True, error_model="numpy")
def corrections(labels, repeats, centre, corr):
    """Each pixel's correction: its region's offset, 0 for an excluded pixel. A row with
    the labels of the row above copies its corrections (gathering every row took about
    three times as long on a 400x400 frame)."""
    ny, nx = labels.shape
    for i in range(ny):
        if repeats[i]:
            copy_row(corr[i - 1], corr[i])
            continue
        for j in range(nx):
            r = labels[i, j]
            corr[i, j] = centre[r] if r >= 0 else 0


@njit(cache=True, nogil=True, error_model="numpy")
def estimate_serial(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, labels, cm):
    """The frame's values and thresholds (`first_pass_rows`) and both passes, in one
    thread, with ``cm`` (`estimate_scratch`, its labels ``labels``, perhaps followed by
    outputs); its ``centre`` ends as the offsets, its ``counts`` as the second pass's."""
    repeats, centre, sums, counts, tasks, thr = cm[1], cm[2], cm[3], cm[4], cm[5], cm[6]
    ny = v.shape[0]
    task = task_of(tasks, 0)
    centre[:] = 0
    first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, False, labels,
                    repeats, centre, 0, ny, task)
    task_means(tasks[0][:1], tasks[1][:1], sums, counts, centre)
    second_pass_rows(v, thr, labels, repeats, centre, 0, ny, task)
    task_means(tasks[0][:1], tasks[1][:1], sums, counts, centre)


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def estimate_parallel(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, given, labels, cm):
    """`estimate_serial` with row blocks in parallel; the integer totals are the same.
    ``given``: ``cm``'s ``thr`` holds the frame's thresholds already (fixed noise)."""
    repeats, centre, sums, counts, tasks, thr = cm[1], cm[2], cm[3], cm[4], cm[5], cm[6]
    ny = v.shape[0]
    n_tasks = tasks[0].shape[0]
    centre[:] = 0
    for k in prange(n_tasks):
        t = np.int64(k)
        task = task_of(tasks, t)
        i0 = t * ROWS_PER_TASK
        first_pass_rows(frame, off, s, s2, rms_fixed, fixed, N, nsig, v, thr, given,
                        labels, repeats, centre, i0, min(i0 + ROWS_PER_TASK, ny), task)
    task_means(tasks[0], tasks[1], sums, counts, centre)
    for k in prange(n_tasks):
        t = np.int64(k)
        task = task_of(tasks, t)
        i0 = t * ROWS_PER_TASK
        second_pass_rows(v, thr, labels, repeats, centre, i0, min(i0 + ROWS_PER_TASK, ny),
                         task)
    task_means(tasks[0], tasks[1], sums, counts, centre)


@njit(cache=True, nogil=True, error_model="numpy")
def task_means(task_sums, task_counts, sums, counts, centre):
    """`region_means` of the tasks' summed sums and counts."""
    sums[:] = 0
    counts[:] = 0
    for t in range(task_sums.shape[0]):
        sums += task_sums[t]
        counts += task_counts[t]
    region_means(sums, counts, centre)
