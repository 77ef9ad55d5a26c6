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

from aare_lab.runtime import result_memory

#: Threads per pool, as measured on a 16-core host (benchmarks/fresh_memory.py): work that
#: writes fresh memory (a run's results) scales with the cores, since the kernel zeroes each
#: new page on the thread that first writes it (25 GB/s with 16 threads, 17 with 8), while
#: copies between mapped buffers (frames into pinned staging) saturate memory bandwidth with
#: fewer (68 GB/s with 8, 39 with 16). Pools not named here get `DEFAULT_MAX_THREADS`.
MAX_THREADS = {"staging": 8}
DEFAULT_MAX_THREADS = 16
#: Overrides the thread count of every pool (a whole number ≥ 1), e.g. on a shared machine.
THREADS_VARIABLE = "AARE_LAB_COPY_THREADS"


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def pool_threads(pool: str = "default") -> int:
    """Threads of the pool ``pool``: ``AARE_LAB_COPY_THREADS`` if set, else `MAX_THREADS`'s
    (or `DEFAULT_MAX_THREADS`) and at most the cores this process may use."""
    told = os.environ.get(THREADS_VARIABLE)
    if told is None:
        return max(1, min(MAX_THREADS.get(pool, DEFAULT_MAX_THREADS), _cores()))
    try:
        threads = int(told)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{THREADS_VARIABLE}={told!r}: give a whole number of threads >= 1, "
                         "or unset it for the default")
    return threads


#: Below this many bytes the work runs on the calling thread: handing it out costs more.
PARALLEL_MIN_BYTES = 1 << 20

#: One pool per kind of work, so that work of one kind does not queue behind another's
#: (the GPU feed stages frames while the results of earlier chunks are copied): the
#: executor and its number of threads.
_pools: dict[str, tuple[ThreadPoolExecutor, int]] = {}


def _pool(name: str) -> tuple[ThreadPoolExecutor, int]:
    found = _pools.get(name)
    if found is None:
        threads = pool_threads(name)
        found = _pools.setdefault(name, (ThreadPoolExecutor(
            threads, thread_name_prefix=f"aare_lab-{name}"), threads))
    return found


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
        The name of the pool to run on (made at first use, with `pool_threads` threads).
    """
    executor, threads = _pool(pool)
    pieces = min(threads, n)
    if nbytes < PARALLEL_MIN_BYTES or pieces <= 1:
        if n:
            work(0, n)
        return
    bounds = np.linspace(0, n, pieces + 1).astype(np.int64)
    # list() waits for every piece and re-raises the first failure here.
    list(executor.map(lambda k: work(int(bounds[k]), int(bounds[k + 1])), range(pieces)))


def parallel_copy(src: np.ndarray, dst: np.ndarray | None = None, *,
                  pool: str = "default") -> np.ndarray:
    """Copy ``src`` into ``dst`` (when None, a new C-contiguous array from
    `aare_lab.runtime.result_memory`) with a few threads of ``pool`` (`parallel_ranges`); return
    ``dst``."""
    if dst is None:
        dst = result_memory.empty(src.shape, src.dtype)
    if not dst.flags.c_contiguous:
        raise ValueError("parallel_copy writes into C-contiguous arrays only")
    flat_src, flat_dst = src.reshape(-1), dst.reshape(-1)
    parallel_ranges(lambda a, b: np.copyto(flat_dst[a:b], flat_src[a:b]), flat_src.size,
                    flat_src.nbytes, pool=pool)
    return dst
