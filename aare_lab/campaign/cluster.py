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


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (its entries,
    else ``0 .. n - 1`` for the devices CuPy or ``nvidia-smi`` count)."""
    told = os.environ.get(GPU_VARIABLE)
    if told is not None:
        return [gpu.strip() for gpu in told.split(",") if gpu.strip()]
    try:
        import cupy

        return [str(k) for k in range(cupy.cuda.runtime.getDeviceCount())]
    except Exception:  # noqa: BLE001: no CuPy, no driver, no device: ask nvidia-smi
        pass
    if shutil.which("nvidia-smi") is None:
        return []
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return [str(k) for k, line in enumerate(listed.stdout.splitlines()) if line.startswith("GPU")]


def gpu_cluster(gpus: list[str]):
    """One worker per GPU, each seeing only its own (``CUDA_VISIBLE_DEVICES``):
    `dask_cuda.LocalCUDACluster` where dask-cuda is installed, else the same through
    `distributed` alone (a `distributed.SpecCluster` of nannies with that variable)."""
    if not gpus:
        raise ValueError("no GPU is visible here (CUDA_VISIBLE_DEVICES, CuPy, nvidia-smi): "
                         "leave out --gpus, or run where the GPUs are")
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        from distributed import Nanny, Scheduler, SpecCluster

        workers = {f"gpu-{gpu}": {"cls": Nanny, "options": {
            "nthreads": 1, "name": f"gpu-{gpu}", "env": {GPU_VARIABLE: gpu}}} for gpu in gpus}
        return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {
            "dashboard_address": ":8787"}}, silence_logs=40)
    return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(gpus), threads_per_worker=1)


def local_cluster(workers: int | None = None, processes: bool = True):
    """A `distributed.LocalCluster` of ``workers`` one-thread workers (default: one per
    core); ``processes=False`` keeps them in this process (tests, notebooks)."""
    from distributed import LocalCluster

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return LocalCluster(n_workers=workers or cores or 1, threads_per_worker=1,
                        processes=processes, silence_logs=40)


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
    """The dashboard's link, or what is missing for one."""
    if "dashboard" not in client.scheduler_info().get("services", {}):
        return "no dashboard (the scheduler's needs bokeh: pip install bokeh)"
    return f"dashboard {client.dashboard_link}"


__all__ = ["GPU_VARIABLE", "connected", "dashboard", "gpu_cluster", "local_cluster",
           "visible_gpus"]
