"""aare_lab: photon cluster finding for charge-integrating hybrid pixel X-ray detectors.

The public API is re-exported lazily, so ``import aare_lab`` stays cheap and never pulls
in matplotlib or widgets. The modules `aare_lab.compare`, `aare_lab.explain` and
`aare_lab.spectra` are imported by name (their main functions share the module's name).
"""

from importlib import import_module

from ._version import __version__

_EXPORTS = {
    "Pedestal": "pedestal",
    "PedestalNotReady": "pedestal",
    "Finder": "finders",
    "SerialFinder": "finders",
    "FrozenFinder": "finders",
    "CudaFinder": "finders",
    "gpu_available": "gpu",
    "pinned_frames": "gpu",
    "get_finder": "finders",
    "available_finders": "finders",
    "FinderParams": "params",
    "parse_cluster_size": "params",
    "Branch": "branches",
    "TruncationWarning": "capacity",
    "TruncationError": "capacity",
    "train_pedestal": "pipeline",
    "find_clusters": "pipeline",
    "make_result": "results",
    "save_result": "results",
    "load_result": "results",
    "spectrum": "results",
    "branch_maps": "results",
    "truncated_frames": "results",
    "open_source": "sources",
    "split_dark": "sources",
    "fit_peak": "fit",
    "Simulator": "simulate",
    "simulate_run": "simulate",
    "compare_all": "compare",
    "FinderConfig": "explain",
    "cap_analysis": "caps",
    "fit_peaks": "spectra",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'aare_lab' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
