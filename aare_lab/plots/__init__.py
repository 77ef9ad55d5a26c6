"""Views of comparisons, branch maps, spectra, capacities, campaigns and explanations.

Each view is a class drawn once from finished analysis objects (spectra, fits,
comparison sites, cap reports, branch codes, explanations) whose ``update`` sets new data
on the same artists (``artists``: role -> artist) without drawing, so widgets redraw it in
place. Views draw into the caller's axes or figure, or a new figure that is displayed only
where it is returned (`new_figure`); they never call ``show()``, so they work headless
(Agg), in scripts and in notebooks (inline or ipympl). The ``*_plot``/``mismatch_panel``
functions draw a view and return its figure. Artists carry a ``gid`` naming their role.
"""

from ._figure import new_figure
from .branchmap import (
                        BRANCH_COLOURS,
                        BranchDiffView,
                        BranchMapView,
                        branch_diff_plot,
                        branch_map_plot,
                        frame_centres,
                        frame_codes,
)
from .campaign import CampaignView, campaign_plot
from .caps import CapView, cap_plot
from .explanation import ExplanationTable, explanation_html, explanation_text
from .mismatch import MismatchView, mismatch_panel
from .spectrum import SpectrumView, spectrum_plot

__all__ = ["BRANCH_COLOURS", "BranchDiffView", "BranchMapView", "CampaignView", "CapView",
           "ExplanationTable", "MismatchView", "SpectrumView", "branch_diff_plot",
           "branch_map_plot", "campaign_plot", "cap_plot", "explanation_html",
           "explanation_text", "frame_centres", "frame_codes", "mismatch_panel", "new_figure",
           "spectrum_plot"]
