"""aare_lab: photon cluster finding for charge-integrating hybrid pixel X-ray detectors.

The public API is re-exported lazily, so ``import aare_lab`` stays cheap and never pulls
in matplotlib or widgets. The submodules in `SUBMODULES` are imported on first attribute
access too, under the short names users know (``aare_lab.compare`` is
`aare_lab.analysis.compare`). ``aare_lab.compare``, ``aare_lab.explain`` and
``aare_lab.spectra`` are modules named after their main function, and calling one calls that
function (`aare_lab.callable_module`): ``aare_lab.explain(frames, 0, 10, 12, results)``.

The folders say what the parts are; each imports only from those before it (a test holds
them to it): `runtime` (threads, memory, signals), `storage` (result files), `sources`
(frames from files, arrays and the stream), `detector` (pedestal, decision arithmetic,
common mode, JUNGFRAU, dark frames), `model` (the specification and the result Dataset),
`finders` and `gpu`, then `analysis`, `imaging`, `calibration` and `interop` (aare's
cluster files), `stream` (live runs), `campaign` and `simulate`, and last `plots`, `widgets`
and `commands`.
"""

from importlib import import_module

from aare_lab._version import __version__

_EXPORTS = {
    "Pedestal": "detector.pedestal",
    "PedestalNotReady": "detector.pedestal",
    "Finder": "finders",
    "SerialFinder": "finders",
    "FrozenFinder": "finders",
    "CudaFinder": "finders",
    "gpu_available": "gpu",
    "GpuUnavailable": "gpu",
    "GpuError": "gpu",
    "pinned_frames": "gpu",
    "get_finder": "finders",
    "make_finder": "finders",
    "available_finders": "finders",
    "FinderSpec": "model.spec",
    "parse_cluster_size": "model.params",
    "Branch": "detector.branches",
    "TruncationWarning": "model.capacity",
    "TruncationError": "model.capacity",
    "DarkFrameWarning": "detector.dark.quality",
    "DarkPixelWarning": "detector.dark.pixels",
    "IlluminatedDarkWarning": "detector.dark.photons",
    "WindowClippedWarning": "model.clipping",
    "GainBitsWarning": "detector.jungfrau",
    "train_pedestal": "pipeline",
    "find_clusters": "pipeline",
    "make_result": "model.results",
    "save_result": "model.results",
    "load_result": "model.results",
    "spectrum": "model.results",
    "branch_maps": "model.results",
    "truncated_frames": "model.results",
    "open_source": "sources",
    "split_dark": "sources",
    "StreamSource": "sources",
    "StreamPublisher": "stream.publisher",
    "fit_peak": "analysis.fit",
    "Simulator": "simulate",
    "simulate_run": "simulate",
    "compare_all": "analysis.compare",
    "cap_analysis": "analysis.caps",
    "fit_peaks": "analysis.spectra",
    "JungfrauCalibration": "detector.jungfrau",
    "read_clusterfile": "interop.clusterfile",
    "write_clusterfile": "interop.clusterfile",
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

#: Modules reached as attributes without an explicit import: the name and where it lives.
SUBMODULES = {
    **{name: name for name in ("analysis", "calibration", "campaign", "detector", "imaging",
                               "interop", "model", "plots", "runtime", "simulate", "sources",
                               "storage", "stream", "widgets")},
    "caps": "analysis.caps",
    "compare": "analysis.compare",
    "explain": "analysis.explain",
    "fit": "analysis.fit",
    "result_memory": "runtime.result_memory",
    "spectra": "analysis.spectra",
}

# Not in __all__: a star import must not pull in matplotlib or ipywidgets.
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    if name in SUBMODULES:
        return import_module(f".{SUBMODULES[name]}", __name__)
    raise AttributeError(f"module 'aare_lab' has no attribute {name!r}")


def __dir__():
    return sorted([*__all__, *SUBMODULES])
