"""Interactive widgets for Jupyter: tune, watch and validate finders.

Each widget is an ``ipywidgets`` box: display it in a notebook cell, or drive it from
Python (set its controls, call ``wait()``, read its state). Computation runs on a worker
thread per widget; figures and widget state change only on the kernel's main thread
(see `aare_lab.widgets.loop`). Nothing else in aare_lab imports this package.
"""

from importlib import import_module

_EXPORTS = {
    "FinderControls": "finder_controls",
    "LiveSpectrum": "live_spectrum",
    "MismatchBrowser": "mismatch_browser",
    "BranchInspector": "branch_inspector",
    "CapTuner": "cap_tuner",
    "GainMapViewer": "gain_map_viewer",
    "InterpolationViewer": "interpolation_viewer",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'aare_lab.widgets' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
