"""aare_lab: photon cluster finding for charge-integrating hybrid pixel X-ray detectors.

The public API is re-exported lazily, so ``import aare_lab`` stays cheap and never pulls
in matplotlib or widgets. The submodules in `SUBMODULES` are imported on first attribute
access too. ``aare_lab.compare``, ``aare_lab.explain`` and ``aare_lab.spectra`` are modules
named after their main function, and calling one calls that function
(`aare_lab.callable_module`): ``aare_lab.explain(frames, 0, 10, 12, results)``.
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
    "GpuUnavailable": "gpu",
    "GpuError": "gpu",
    "pinned_frames": "gpu",
    "get_finder": "finders",
    "available_finders": "finders",
    "FinderSpec": "spec",
    "parse_cluster_size": "params",
    "Branch": "branches",
    "TruncationWarning": "capacity",
    "TruncationError": "capacity",
    "DarkFrameWarning": "dark_quality",
    "DarkPixelWarning": "dark_pixels",
    "IlluminatedDarkWarning": "dark_photons",
    "WindowClippedWarning": "clipping",
    "GainBitsWarning": "jungfrau",
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
    "StreamSource": "sources",
    "StreamPublisher": "streamsim",
    "fit_peak": "fit",
    "Simulator": "simulate",
    "simulate_run": "simulate",
    "compare_all": "compare",
    "cap_analysis": "caps",
    "fit_peaks": "spectra",
    "JungfrauCalibration": "jungfrau",
    "read_clusterfile": "clusterfile",
    "write_clusterfile": "clusterfile",
    "eta2": "imaging",
    "full_eta2": "imaging",
    "eta3": "imaging",
    "cross_eta3": "imaging",
    "build_interpolation": "imaging",
    "interpolate": "imaging",
    "image": "imaging",
    "save_interpolation": "imaging",
    "load_interpolation": "imaging",
    "pixel_spectra": "calibration",
    "gain_map": "calibration",
    "calibrate": "calibration",
    "apply_gain": "calibration",
    "save_gain_map": "calibration",
    "load_gain_map": "calibration",
}

#: Submodules reached as attributes without an explicit import.
SUBMODULES = ("calibration", "caps", "compare", "explain", "imaging", "plots", "result_memory",
              "simulate", "sources", "spectra", "widgets")

# Not in __all__: a star import must not pull in matplotlib or ipywidgets.
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    if name in SUBMODULES:
        return import_module(f".{name}", __name__)
    raise AttributeError(f"module 'aare_lab' has no attribute {name!r}")


def __dir__():
    return sorted([*__all__, *SUBMODULES])
