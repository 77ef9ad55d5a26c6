"""Per-pixel energy calibration: per-pixel spectra, vectorised line fits, gain maps."""

from .apply import apply_gain
from .calibrate import calibrate
from .gain_map import gain_map, load_gain_map, save_gain_map
from .linefit import fit_lines
from .pixel_spectra import pixel_spectra

__all__ = ["pixel_spectra", "fit_lines", "gain_map", "calibrate", "save_gain_map",
           "load_gain_map", "apply_gain"]
