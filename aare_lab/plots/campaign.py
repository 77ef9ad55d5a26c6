"""The campaign view: Kα position and FWHM against run (drift over the campaign) beside
the summed spectrum."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ._figure import figure_for
from ._view import View

POSITION_COLOUR = "#08519c"
FWHM_COLOUR = "#d94801"
FAILED_COLOUR = "#bdbdbd"
SPECTRUM_COLOUR = "#252525"


class CampaignView(View):
    """Left: each run's fitted Kα position (with its error) and, on a second axis, its
    FWHM; runs whose dark is flagged are drawn hollow, failed runs marked on the axis.
    Right: the summed spectrum of every finished run.

    Parameters
    ----------
    campaign
        A combined campaign (`aare_lab.campaign.Campaign.run`).
    fig
        A figure to fill (default: a new one).
    log
        Counts on a log scale.
    managed
        For a new figure: create it through pyplot (see `aare_lab.plots.new_figure`).

    Attributes
    ----------
    artists
        ``position``, ``position_flagged`` and ``fwhm`` (Line2D over the run index),
        ``position_err`` (LineCollection of the error bars), ``failed`` (Line2D at the axis),
        ``spectrum`` (StepPatch).
    """

    def __init__(self, campaign: xr.Dataset, *, fig: Figure | None = None, log: bool = True,
                 managed: bool = False):
        self.figure = figure_for(fig, (11, 4.2), managed)
        self.artists = {}
        self.drift, self.summed = self.figure.subplots(1, 2, width_ratios=(3, 2))
        self.width_axes = self.drift.twinx()
        nothing = np.zeros(0)
        self._keep("position", self.drift.plot(nothing, nothing, "o-", color=POSITION_COLOUR,
                                               label="Kα position")[0])
        self._keep("position_flagged", self.drift.plot(
            nothing, nothing, "o", mfc="white", color=POSITION_COLOUR,
            label="dark flagged")[0])
        self._keep("position_err", self.drift.vlines([], [], [], color=POSITION_COLOUR,
                                                     alpha=0.5))
        self._keep("failed", self.drift.plot(nothing, nothing, "x", color=FAILED_COLOUR,
                                             ms=9, label="failed")[0])
        self._keep("fwhm", self.width_axes.plot(nothing, nothing, "s--", color=FWHM_COLOUR,
                                                label="Kα FWHM")[0])
        self._keep("spectrum", self.summed.stairs(np.ones(1), [0.0, 1.0],
                                                  color=SPECTRUM_COLOUR))
        if log:
            self.summed.set_yscale("log")
        self.drift.set_xlabel("run")
        self.width_axes.set_ylabel("FWHM", color=FWHM_COLOUR)
        self.summed.set_ylabel("clusters per bin")
        self.drift.legend(handles=[self.artists[r] for r in ("position", "position_flagged",
                                                             "failed", "fwhm")],
                          loc="best", fontsize="small", frameon=False)
        self.update(campaign)

    def update(self, campaign: xr.Dataset) -> None:
        """Show another campaign (or the same one with more runs finished)."""
        index = np.arange(campaign.sizes["run"], dtype=float)
        done = campaign["status"].to_numpy() == "done"
        flagged = done & ~campaign["dark_ok"].to_numpy()
        position = campaign["ka_position"].to_numpy()
        fwhm = campaign["ka_fwhm"].to_numpy()
        self.artists["position"].set_data(index, np.where(done, position, np.nan))
        self.artists["position_flagged"].set_data(index[flagged], position[flagged])
        self.artists["fwhm"].set_data(index, np.where(done, fwhm, np.nan))
        low = np.nanmin(position) if np.isfinite(position).any() else 0.0
        self.artists["failed"].set_data(index[~done], np.full((~done).sum(), low))
        error = np.where(done, campaign["ka_position_err"].to_numpy(), np.nan)
        self.artists["position_err"].set_segments(
            [[(i, p - e), (i, p + e)] for i, p, e in zip(index, position, error)
             if np.isfinite(p) and np.isfinite(e)])
        units = campaign["energy"].attrs.get("units", "ADU")
        self.drift.set_ylabel(f"Kα position ({units})", color=POSITION_COLOUR)
        self.width_axes.set_ylabel(f"FWHM ({units})", color=FWHM_COLOUR)
        self.drift.set_xticks(index, campaign["run"].to_numpy(), rotation=60,
                              fontsize="small")
        counts = campaign["spectrum"].to_numpy()
        edges = np.r_[campaign["energy_lo"].to_numpy(), campaign["energy_hi"].to_numpy()[-1]]
        self.artists["spectrum"].set_data(counts, edges)
        self.summed.set_xlim(edges[0], edges[-1])
        self.summed.set_ylim(0.5 if self.summed.get_yscale() == "log" else 0,
                             max(1, counts.max()) * 1.5)
        self.summed.set_xlabel(f"energy ({units})")
        self.summed.set_title(f"{int(done.sum())} of {len(done)} runs, "
                              f"{int(counts.sum()):,} clusters", fontsize="medium")
        for axes in (self.drift, self.width_axes):
            axes.relim()
            axes.autoscale_view()


def campaign_plot(campaign: xr.Dataset, *, fig: Figure | None = None,
                  log: bool = True) -> Figure:
    """Draw a `CampaignView` and return its figure."""
    return CampaignView(campaign, fig=fig, log=log).figure
