"""Matplotlib views of comparisons, branch maps, spectra and capacities.

Every function takes an optional ``ax`` (one-axes views) or ``fig`` (views of several
axes), returns the figure and never calls ``show()``, so the views work headless (Agg),
in scripts and in notebooks (inline or ipympl). Artists carry a ``gid`` naming their
role ("footprints", "centres", "rings", ...), for tests and for widgets that update them.
"""

from .branchmap import BRANCH_COLOURS, branch_diff_plot, branch_map_plot
from .caps import cap_plot
from .mismatch import mismatch_panel
from .spectrum import spectrum_plot

__all__ = ["BRANCH_COLOURS", "branch_diff_plot", "branch_map_plot", "cap_plot",
           "mismatch_panel", "spectrum_plot"]
