"""Cluster finders: ``serial`` and ``frozen`` on the CPU (Numba), ``cuda`` on an NVIDIA GPU."""

from aare_lab.detector.pedestal import Pedestal
from aare_lab.model.spec import FinderSpec

from .base import ClusterBatch, CpuFinder, Finder
from .cuda import CudaFinder, DeviceSnapshot
from .frozen import FrozenFinder
from .serial import SerialFinder

FINDERS: dict[str, type[Finder]] = {"serial": SerialFinder, "frozen": FrozenFinder,
                                    "cuda": CudaFinder}


def get_finder(name: str) -> type[Finder]:
    """The finder class registered under ``name``."""
    try:
        return FINDERS[name]
    except KeyError:
        raise ValueError(
            f"unknown finder {name!r}; available: {', '.join(FINDERS)}"
        ) from None


def make_finder(spec: FinderSpec, pedestal: Pedestal, **options) -> Finder:
    """A finder of the specification ``spec`` bound to ``pedestal``.

    Parameters
    ----------
    spec
        The `FinderSpec`: finder, threshold, cluster size, dtypes, cap, common mode
        and calibration.
    pedestal
        A `Pedestal` of the specification's dtype, noise mode and (if set)
        ``n_pedestal``; the finder advances it.
    **options
        Options of the finder class that do not change its output (``on_truncation``,
        ``chunk_frames``, ``threads``, ``host_memory``, ``block_threads``).

    Raises
    ------
    TypeError, ValueError
        If the pedestal does not fit the specification.
    GpuUnavailable
        For ``cuda`` without CuPy or a GPU.
    """
    spec.check_pedestal(pedestal)
    return get_finder(spec.finder)(pedestal, spec.n_sigma, spec.cluster_size,
                                   spec.max_clusters_per_frame,
                                   window_dtype=spec.window_dtype,
                                   common_mode=spec.common_mode,
                                   calibration=spec.calibration, **options)


def available_finders() -> list[str]:
    """Names of the finders that can run on this machine (``cuda`` needs CuPy and a GPU)."""
    from aare_lab.gpu import gpu_available

    return [name for name in FINDERS if name != "cuda" or gpu_available()]


__all__ = ["ClusterBatch", "CpuFinder", "CudaFinder", "DeviceSnapshot", "FINDERS", "Finder",
           "FrozenFinder", "SerialFinder", "available_finders", "get_finder", "make_finder"]
