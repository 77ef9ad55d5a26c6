"""Host-memory work spread over a few threads: copies and row-wise passes over big arrays.

NumPy copies and reductions, and the compiled ``nogil`` functions, release the GIL, so the
pieces of one large array run in parallel; one thread alone moves a fraction of the memory
bandwidth, and first touches of fresh memory (page faults) are spread over the cores too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: Threads of each pool: enough for one kind of work to saturate host memory bandwidth.
COPY_THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else os.cpu_count() or 1))
#: Below this many bytes the work runs on the calling thread: handing it out costs more.
PARALLEL_MIN_BYTES = 1 << 20

#: One pool per kind of work, so that work of one kind does not queue behind another's
#: (the GPU feed stages frames while the results of earlier chunks are copied).
_pools: dict[str, ThreadPoolExecutor] = {}


def parallel_ranges(work: Callable[[int, int], None], n: int, nbytes: int, *,
                    pool: str = "default") -> None:
    """Call ``work(start, stop)`` over consecutive pieces covering ``range(n)``.

    Parameters
    ----------
    work
        Processes the items ``start:stop``; pieces are disjoint, so it may write their
        slices of shared arrays.
    n
        Number of items.
    nbytes
        About how many bytes the whole work touches: small work runs in one piece here.
    pool
        The name of the pool of `COPY_THREADS` threads to run on (made at first use).
    """
    pieces = min(COPY_THREADS, n)
    if nbytes < PARALLEL_MIN_BYTES or pieces <= 1:
        if n:
            work(0, n)
        return
    executor = _pools.get(pool)
    if executor is None:
        executor = _pools.setdefault(pool, ThreadPoolExecutor(
            COPY_THREADS, thread_name_prefix=f"aare_lab-{pool}"))
    bounds = np.linspace(0, n, pieces + 1).astype(np.int64)
    # list() waits for every piece and re-raises the first failure here.
    list(executor.map(lambda k: work(int(bounds[k]), int(bounds[k + 1])), range(pieces)))


def parallel_copy(src: np.ndarray, dst: np.ndarray | None = None, *,
                  pool: str = "default") -> np.ndarray:
    """Copy ``src`` into ``dst`` (a new array when None) with a few threads of ``pool``
    (`parallel_ranges`); return ``dst``."""
    if dst is None:
        dst = np.empty_like(src)
    if not dst.flags.c_contiguous:
        raise ValueError("parallel_copy writes into C-contiguous arrays only")
    flat_src, flat_dst = src.reshape(-1), dst.reshape(-1)
    parallel_ranges(lambda a, b: np.copyto(flat_dst[a:b], flat_src[a:b]), flat_src.size,
                    flat_src.nbytes, pool=pool)
    return dst
