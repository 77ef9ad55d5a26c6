"""Where a campaign's runs go: an embedded local cluster, one worker per GPU, or a Dask
cluster that is already running.

Each worker runs one run at a time (one thread): a run's pedestal is sequential in frame
order, and the finder spreads its own work over threads (``threads=``) or a GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

GPU_VARIABLE = "CUDA_VISIBLE_DEVICES"
#: dask's nannies start workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (memory back to the
#: system early, against fragmentation); glibc then maps every large array afresh, and a
#: run's result buffers and chunk encodings fault in new pages each time: a run took 12 %
#: longer on the CPU with it (docs/campaigns.md). The clusters made here start their
#: workers without it; a cluster of one's own takes the same setting in its dask config.
UNSET_MALLOC_TRIM = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


#: What bounds a worker's threads: Numba's (the CPU finders' loops, the result's assembly)
#: and the copy pools' (`aare_lab.runtime.parallel`).
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "AARE_LAB_COPY_THREADS")


def _worker_environment(threads: int | None = None):
    """dask's config with `UNSET_MALLOC_TRIM`, for the workers started inside it; given
    ``threads``, each worker also gets that many threads of `THREAD_VARIABLES` (those this
    process's environment does not set: the workers inherit them).

    The thread counts go in ``distributed.nanny.environ``, which the worker process sets
    on itself, and not in ``pre-spawn-environ``, which the nanny writes into this process's
    own ``os.environ`` for good: Numba re-reads ``NUMBA_NUM_THREADS`` at every compilation
    and refuses a changed value once its threads run, so this process's next finder failed.
    """
    import dask
    # Imported first: distributed adds its defaults to dask's config on its first import,
    # and a setting made before them takes them all away on leaving (KeyError 'distributed'
    # in every later dask call).
    import distributed  # noqa: F401

    settings = dict(UNSET_MALLOC_TRIM)
    if threads is not None:
        settings.update({f"distributed.nanny.environ.{name}": str(threads)
                         for name in THREAD_VARIABLES if name not in os.environ})
    return dask.config.set(settings)


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (its entries,
    else ``0 .. n - 1`` for the `gpu_count` devices)."""
    told = os.environ.get(GPU_VARIABLE)
    if told is not None:
        return [gpu.strip() for gpu in told.split(",") if gpu.strip()]
    return [str(k) for k in range(gpu_count())]


def gpu_count() -> int:
    """The GPUs of this machine: as CuPy counts them (`aare_lab.gpu.cupy_or_raise`), else
    as ``nvidia-smi -L`` lists them (the workers may have CuPy where this process has none),
    else 0."""
    from aare_lab.gpu import GpuUnavailable, cupy_or_raise

    try:
        return int(cupy_or_raise().cuda.runtime.getDeviceCount())
    except GpuUnavailable:
        pass
    if shutil.which("nvidia-smi") is None:
        return 0
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(line.startswith("GPU") for line in listed.stdout.splitlines())


def require_gpus(gpus: list[str], hint: str) -> list[str]:
    """``gpus``, refused in one line that says where GPUs are looked for when it is empty.

    Raises
    ------
    ValueError
        Without a GPU, ending with ``hint`` (what to do instead).
    """
    if not gpus:
        raise ValueError(f"no GPU is visible here (CUDA_VISIBLE_DEVICES, CuPy, nvidia-smi): "
                         f"{hint}")
    return gpus


def gpu_cluster(gpus: list[str]):
    """One worker per GPU, each seeing only its own (``CUDA_VISIBLE_DEVICES``):
    `dask_cuda.LocalCUDACluster` where dask-cuda is installed, else the same through
    `distributed` alone (a `distributed.SpecCluster` of nannies with that variable)."""
    require_gpus(gpus, "leave out --gpus, or run where the GPUs are")
    from distributed import Nanny, Scheduler, SpecCluster

    with _worker_environment():
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            # The host's memory shared by the GPUs' workers, as dask-cuda shares it: dask's
            # default (a core's share, 8 GiB of a 16-core 128 GiB host) paused a GPU run's
            # worker and then restarted it mid-campaign.
            workers = {f"gpu-{gpu}": {"cls": Nanny, "options": {
                "nthreads": 1, "name": f"gpu-{gpu}", "env": {GPU_VARIABLE: gpu},
                "memory_limit": 1 / len(gpus)}} for gpu in gpus}
            return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {
                "dashboard_address": ":8787"}}, silence_logs=40)
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(gpus), threads_per_worker=1)


def local_cluster(workers: int | None = None, processes: bool = True):
    """A `distributed.LocalCluster` of ``workers`` one-thread workers (default: one per
    core); ``processes=False`` keeps them in this process (tests, notebooks).

    Each worker process spreads its finder's work over its share of the cores (``cores //
    workers``, at least one; `THREAD_VARIABLES`, unless set here): every worker on every
    core would oversubscribe them, and Numba's OpenMP threads keep spinning for a while
    after each parallel region, taking the cores from the other workers' finders.
    """
    from distributed import LocalCluster

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = workers or cores or 1
    with _worker_environment(max(1, (cores or 1) // n)):
        return LocalCluster(n_workers=n, threads_per_worker=1, processes=processes,
                            silence_logs=40)


@contextmanager
def connected(client=None, *, workers: int | None = None, gpus: list[str] | None = None,
              processes: bool = True) -> Iterator:
    """A `distributed.Client` for the campaign, closed afterwards if made here.

    Parameters
    ----------
    client
        A `distributed.Client` (used as it is), a scheduler address (connected to), or None
        for a cluster made here: `gpu_cluster` with ``gpus``, else `local_cluster`.
    workers, processes
        For `local_cluster`.
    gpus
        The GPUs of `gpu_cluster`.
    """
    from distributed import Client

    if isinstance(client, Client):
        yield client
        return
    with ExitStack() as stack:
        if client is None:
            cluster = stack.enter_context(gpu_cluster(gpus) if gpus else
                                          local_cluster(workers, processes))
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(Client(str(client)))
        yield client


def dashboard(client) -> str:
    """The dashboard's link (without bokeh where the scheduler runs, its page says what to
    install), or that the scheduler serves none."""
    if "dashboard" not in client.scheduler_info().get("services", {}):
        return "no dashboard: the scheduler serves none"
    return f"dashboard {client.dashboard_link}"


__all__ = ["GPU_VARIABLE", "THREAD_VARIABLES", "UNSET_MALLOC_TRIM", "connected", "dashboard",
           "gpu_cluster", "gpu_count", "local_cluster", "require_gpus", "visible_gpus"]
