"""Cluster finders: ``serial`` and ``frozen`` on the CPU (Numba), ``cuda`` on an NVIDIA GPU."""

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


def available_finders() -> list[str]:
    """Names of the finders that can run on this machine (``cuda`` needs CuPy and a GPU)."""
    from ..gpu import gpu_available

    return [name for name in FINDERS if name != "cuda" or gpu_available()]


__all__ = ["ClusterBatch", "CpuFinder", "CudaFinder", "DeviceSnapshot", "FINDERS", "Finder",
           "FrozenFinder", "SerialFinder", "available_finders", "get_finder"]
