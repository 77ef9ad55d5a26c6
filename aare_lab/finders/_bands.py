"""The frozen finder's bands of rows, one a thread, cut by how fast each thread ran them.

A frame's bands meet at the end of `_frozen.classify_frame`, so the frame takes as long as
its slowest band. Where the threads run at different rates (cores shared with other
processes or other guests, a laptop's efficiency cores), equal bands leave the fast threads
waiting: on one 16-core host, four of sixteen cores ran their bands at 0.55–0.6 of the
others' rate (``benchmarks/frozen_band_times.py``). So each band's time is read from the
processor's cycle counter as it runs, and after every frame the rows are cut again, in
proportion to each thread's rate so far (`rebalance`). The cut changes nothing in the
result: every read of a frame sees the frame-start state whatever band a row is in
(`_frozen`), and the clusters are written in raster order after the bands.

Numba's OpenMP layer deals a ``prange`` over as many bands as threads statically, one band
to each thread, the same one every frame, so a band's rate is its thread's (under TBB, which
deals work dynamically, the cut is as good as even). The counter is read where it is cheap
and unprivileged, on x86-64 (``rdtsc``); elsewhere it reads 0 and the bands stay even.
"""

import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: Whether the cycle counter can be read (x86's time-stamp counter; AArch64's cycle counter
#: traps in user space unless the kernel allows it).
HAS_COUNTER = platform.machine().lower() in ("x86_64", "amd64")
#: How far a slower frame moves a thread's cost a row towards its time: a thread whose
#: core slows for good is followed within some twenty frames.
RISE = 0.0625
#: The most one frame can raise the cost, as a factor: a band that lost its core for a
#: moment (the host's other work) is one slow frame, whose time says nothing of the next.
STEP = 2.0


@intrinsic
def _read_counter(typingctx):
    def codegen(context, builder, signature, args):
        if not HAS_COUNTER:
            return ir.Constant(ir.IntType(64), 0)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


@njit(cache=True, nogil=True, inline="always")
def counter():
    """The processor's cycle counter (0 where it cannot be read)."""
    return _read_counter()


def even_bands(n_bands, ny):
    """Band state for ``n_bands`` bands of ``ny`` rows: even bounds, no rate yet.

    Returns
    -------
    bounds
        ``n_bands + 1`` row indices, band ``b`` being rows ``bounds[b]..bounds[b+1]-1``.
    ticks
        Each band's counter ticks in the last frame (`classify_frame` fills it).
    cost
        Each band's thread's ticks a row, smoothed over the frames (0: none yet).
    """
    bounds = np.arange(n_bands + 1, dtype=np.int64) * ny // n_bands
    return bounds, np.zeros(n_bands, np.int64), np.zeros(n_bands, np.float64)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def band_rows(bounds, band):
    """Rows ``y0..y1-1`` of band ``band``."""
    return bounds[band], bounds[band + 1]


@njit(cache=True, nogil=True, error_model="numpy")
def rebalance(bounds, ticks, cost):
    """Fold the frame's band ``ticks`` into each thread's ``cost`` a row, and cut the rows
    again in proportion to the threads' rates (``1 / cost``), each band at least one row.

    A thread's cost follows its fastest frames: it falls to any frame's lower time at once
    and rises towards a higher one slowly, by a bounded step (`RISE`, `STEP`). A thread
    that is preempted now and then runs most frames at its core's rate and stalls one;
    were the cost a mean, its stalls would keep rows from it in the frames it runs at
    full rate.

    A frame with a band of no ticks (no counter here, or a counter that went backwards
    between CPUs) leaves everything as it was.
    """
    n = len(ticks)
    if n < 2:
        return
    for b in range(n):
        if ticks[b] <= 0:
            return
    total = 0.0
    for b in range(n):
        per_row = ticks[b] / (bounds[b + 1] - bounds[b])
        if cost[b] == 0 or per_row < cost[b]:
            cost[b] = per_row
        else:
            cost[b] += RISE * (min(per_row, cost[b] * STEP) - cost[b])
        total += 1.0 / cost[b]
    ny = bounds[n]
    share = 0.0
    for b in range(1, n):
        share += 1.0 / cost[b - 1]
        row = np.int64(round(ny * share / total))
        bounds[b] = min(max(row, bounds[b - 1] + 1), ny - (n - b))
