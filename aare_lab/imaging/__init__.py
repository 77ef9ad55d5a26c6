"""Sub-pixel imaging from clusters: η (charge sharing) and η interpolation."""

from .eta import ETA_FUNCTIONS, cross_eta3, eta2, eta3, full_eta2
from .interpolation import (
                            build_interpolation,
                            image,
                            interpolate,
                            load_interpolation,
                            save_interpolation,
)

__all__ = ["ETA_FUNCTIONS", "eta2", "full_eta2", "eta3", "cross_eta3", "build_interpolation",
           "interpolate", "image", "save_interpolation", "load_interpolation"]
