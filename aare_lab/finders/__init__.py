"""Cluster finders: ``serial`` and ``frozen`` on the CPU (Numba)."""

from .base import ClusterBatch, Finder
from .frozen import FrozenFinder
from .serial import SerialFinder

FINDERS: dict[str, type[Finder]] = {"serial": SerialFinder, "frozen": FrozenFinder}


def get_finder(name: str) -> type[Finder]:
    """The finder class registered under ``name``."""
    try:
        return FINDERS[name]
    except KeyError:
        raise ValueError(
            f"unknown finder {name!r}; available: {', '.join(available_finders())}"
        ) from None


def available_finders() -> list[str]:
    """Names of the finders that can run on this machine."""
    return list(FINDERS)


__all__ = ["ClusterBatch", "FINDERS", "Finder", "FrozenFinder", "SerialFinder",
           "available_finders", "get_finder"]
