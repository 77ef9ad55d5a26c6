"""Energy spectra of several finders, with their ratio and fitted peaks."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib import patheffects
from matplotlib.figure import Figure

from ..spectra import (
    RUN_COORDS,
    peak_fit,
    shown_energy,
    spectrum_ratio,
    spectrum_ratio_error,
    spectrum_units,
)
from ..results import spectrum_edges
from ._figure import figure_for
from ._view import View

#: Colour, line style and width of each finder's spectrum, in order: the first is widest
#: and lowest, so a curve identical to it still shows on top of it.
CURVE_STYLES = (("#1f77b4", "-", 2.2), ("#ff7f0e", "--", 1.6), ("#2ca02c", ":", 1.6),
                ("#9467bd", "-.", 1.4), ("#8c564b", (0, (5, 1, 1, 1)), 1.4))
#: Fitted curves contrast with every spectrum colour and sit above them.
FIT_COLOURS = ("#d62728", "#111111", "#e377c2", "#17becf", "#bcbd22")
#: Ratio limits come from bins with at least this many counts in both spectra.
MIN_RATIO_COUNTS = 10
RATIO_CLIP = (0.0, 3.0)


def _by_finder(spectra: xr.DataArray) -> xr.DataArray:
    """Spectra over ``finder``; one spectrum (`aare_lab.results.spectrum`) becomes a
    finder of its own, its run parameters taken from its attributes."""
    if "finder" in spectra.dims:
        return spectra
    a = spectra.attrs
    one = spectra.expand_dims(finder=[a.get("finder") or "spectrum"])
    return one.assign_coords({name: ("finder", [a[name]]) for name in
                              ("finder_name", *RUN_COORDS) if name in a})


def _per_finder(spectra: xr.DataArray, name: str, label: str):
    return spectra[name].sel(finder=label).item() if name in spectra.coords else 0


def _legend_label(spectra: xr.DataArray, label: str) -> str:
    text = f"{label}: {int(spectra.sel(finder=label).sum()):,} clusters"
    under, over = (int(_per_finder(spectra, n, label)) for n in ("underflow", "overflow"))
    outside = [f"{n:,} {where}" for n, where in ((under, "below"), (over, "above")) if n]
    return text + (f" ({' and '.join(outside)} the range)" if outside else "")


def run_title(spectra: xr.DataArray) -> str:
    """Finders, nσ, cluster size and frames of the spectra's runs, each value once."""
    def values(name):
        if name not in spectra.coords:
            return ""
        seen = dict.fromkeys(str(v.item()) if not isinstance(v.item(), float)
                             else f"{v.item():g}" for v in spectra[name])
        return "/".join(seen)

    finders = values("finder_name") or ", ".join(str(f) for f in spectra["finder"].to_numpy())
    parts = [finders]
    if values("n_sigma"):
        parts.append(f"nσ = {values('n_sigma')}")
    if values("cluster_size"):
        parts.append(f"{values('cluster_size')} clusters")
    if values("n_frames"):
        parts.append(f"{values('n_frames')} frames")
    return ", ".join(parts)


def ratio_limits(spectra: xr.DataArray, ratio: xr.DataArray, error: xr.DataArray,
                 reference: str, min_counts: int = MIN_RATIO_COUNTS) -> tuple[float, float]:
    """Y limits of the ratio panel: the ratios of the bins with at least ``min_counts`` in
    both spectra and their median error bar, with 1 in view, padded and clipped to
    `RATIO_CLIP` (the error bars of sparse bins may leave the panel rather than squash
    it, those of well-filled bins stay in it)."""
    ref = spectra.sel(finder=reference).to_numpy()
    others = [f for f in spectra["finder"].to_numpy() if f != reference]
    low, high = [1.0], [1.0]
    for label in others:
        good = (ref >= min_counts) & (spectra.sel(finder=label).to_numpy() >= min_counts)
        r = ratio.sel(finder=label).to_numpy()[good]
        if r.size:
            typical = float(np.median(error.sel(finder=label).to_numpy()[good]))
            low.extend(r - typical)
            high.extend(r + typical)
    lo, hi = min(low), max(high)
    pad = max(0.1 * (hi - lo), 0.02)
    return max(lo - pad, RATIO_CLIP[0]), min(hi + pad, RATIO_CLIP[1])


class SpectrumView(View):
    """Overlay the spectra of several finders, with a ratio panel and fitted peaks.

    Parameters
    ----------
    spectra
        Counts over ``(finder, energy)`` from `aare_lab.spectra.spectra`, or one spectrum
        over ``energy`` (`aare_lab.results.spectrum`, or counts accumulated over fixed
        edges), with the edges as ``energy_lo``/``energy_hi``; the axis is in their
        ``units`` (ADU, or keV for calibrated results).
    fits
        Peak fits from `aare_lab.spectra.fit_peaks`: each drawn over its spectrum, thick,
        dashed and in a contrasting colour (a Kα/Kβ doublet as one curve), its (Kα)
        position as a dotted line, with position, FWHM and resolution (and a doublet's
        Kβ/Kα intensity ratio) written in the corner.
    log
        Logarithmic count axis.
    ratio
        With two or more finders: a panel of each spectrum divided by the reference's,
        with Poisson error bars.
    reference
        The finder the ratios are taken to (default: the first).
    gain
        ADU per keV, for spectra in ADU: the energy axis (and the fits) in keV.
    min_counts
        Bins with fewer counts in either spectrum do not set the ratio panel's range.
    fig
        Figure to draw into (default: a new figure).
    managed
        For a new figure: create it through pyplot (see `aare_lab.plots.new_figure`).

    Attributes
    ----------
    artists
        Per finder: ``spectrum:<label>`` (StepPatch), ``fit:<label>`` (line),
        ``peak:<label>`` (vertical line), ``annotation:<label>`` (text), and with a ratio
        panel, for every finder but the reference, ``ratio:<label>`` (markers) and
        ``ratio_err:<label>`` (LineCollection); ``legend``, ``title``, ``unity`` (the
        ratio 1 line).
    units
        The units of the energy axis.

    Raises
    ------
    ValueError
        For a ``gain`` with spectra already in keV.
    """

    def __init__(self, spectra: xr.DataArray, fits: xr.Dataset | None = None, *,
                 log: bool = True, ratio: bool = True, reference: str | None = None,
                 gain: float | None = None, min_counts: int = MIN_RATIO_COUNTS,
                 fig: Figure | None = None, managed: bool = False):
        spectra = _by_finder(spectra)
        units = spectrum_units(spectra)
        if gain and units != "ADU":
            raise ValueError(f"the spectra are in {units} already: gain converts spectra in "
                             "ADU, leave it out")
        self._fit_scale, self.units = shown_energy(units, gain)
        self.labels = [str(f) for f in spectra["finder"].to_numpy()]
        self.reference = self.labels[0] if reference is None else reference
        self.gain, self.log, self.min_counts = gain, log, min_counts
        has_ratio = ratio and len(self.labels) > 1
        self.figure = figure_for(fig, (7.5, 6.0 if has_ratio else 4.5), managed)
        if has_ratio:
            self.ax, self.ratio_ax = self.figure.subplots(
                2, 1, sharex=True, gridspec_kw={"height_ratios": (3, 1)})
        else:
            self.ax, self.ratio_ax = self.figure.add_subplot(), None
        self.artists = {}
        ax, edges = self.ax, spectrum_edges(spectra)
        stroke = [patheffects.withStroke(linewidth=3.0, foreground="white")]
        for k, label in enumerate(self.labels):
            colour, style, width = CURVE_STYLES[k % len(CURVE_STYLES)]
            fit_colour = FIT_COLOURS[k % len(FIT_COLOURS)]
            self._keep(f"spectrum:{label}", ax.stairs(
                np.zeros(len(edges) - 1), edges, color=colour, ls=style, lw=width,
                zorder=2 + 0.1 * k, label=label))
            # Dashed, so that the shoulders it spans (Kβ beside Kα) show through.
            self._keep(f"fit:{label}", ax.plot([], [], color=fit_colour, lw=2.6,
                                               ls=(0, (4, 1.5)), zorder=10,
                                               path_effects=stroke)[0])
            self._keep(f"peak:{label}", ax.axvline(0, ls=":", lw=1.5, color=fit_colour,
                                                   zorder=9, visible=False))
            # Under the legend (one line per finder), right-aligned: clear of the curves'
            # rising edge on the left and of the legend's longer lines. Above the fit curve:
            # a doublet's line reaches across the peak, whose dashes hid its digits.
            self._keep(f"annotation:{label}", ax.text(
                0.98, 0.93 - 0.065 * (len(self.labels) + k), "", transform=ax.transAxes,
                va="top", ha="right", fontsize="small", color=fit_colour, zorder=11,
                bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 1.5}))
        ax.set_ylabel("clusters per bin")
        self._keep("legend", ax.legend(loc="upper right", frameon=False, fontsize="small"))
        self._keep("title", ax.set_title(""))
        if self.ratio_ax is not None:
            rax = self.ratio_ax
            self._keep("unity", rax.axhline(1.0, color="0.5", lw=0.8))
            for k, label in enumerate(self.labels):
                if label != self.reference:
                    colour = CURVE_STYLES[k % len(CURVE_STYLES)][0]
                    self._keep(f"ratio_err:{label}", rax.vlines([], [], [], color=colour,
                                                                lw=1.0, alpha=0.6))
                    self._keep(f"ratio:{label}", rax.plot([], [], "o", ms=2.5,
                                                          color=colour)[0])
            rax.set_ylabel(f"ratio to {self.reference}")
        (self.ratio_ax or ax).set_xlabel(f"energy ({self.units})")
        self.update(spectra, fits)
        if log:  # after the first counts: a log axis over no data warns
            ax.set_yscale("log")

    def _x(self, energy: np.ndarray | float):
        """Energies in the spectra's units on the axis (divided by the gain with one)."""
        return np.asarray(energy, float) / self.gain if self.gain else np.asarray(energy, float)

    def update(self, spectra: xr.DataArray, fits: xr.Dataset | None = None) -> None:
        """Show new counts, on the same or other edges, and new fits (None: no fits).

        Raises
        ------
        ValueError
            If the spectra are not of the finders the view was drawn for.
        """
        spectra = _by_finder(spectra)
        labels = [str(f) for f in spectra["finder"].to_numpy()]
        if labels != self.labels:
            raise ValueError(f"the view shows {self.labels}, not {labels}: draw a new view")
        edges = self._x(spectrum_edges(spectra))
        top = max(1, int(spectra.max())) if spectra.size else 1
        for label, text in zip(self.labels, self.artists["legend"].get_texts()):
            self.artists[f"spectrum:{label}"].set_data(spectra.sel(finder=label).to_numpy(),
                                                       edges)
            text.set_text(_legend_label(spectra, label))
            self._draw_fit(fits, label)
        self.ax.set_xlim(edges[0], edges[-1])
        self._top = top
        self._set_count_limits()
        self.artists["title"].set_text(run_title(spectra))
        if self.ratio_ax is not None:
            self._draw_ratio(spectra)

    def set_log(self, log: bool) -> None:
        """Show the counts on a log (True) or linear axis, limits fitted to the counts."""
        self.log = log
        self.ax.set_yscale("log" if log else "linear")
        self._set_count_limits()

    def _set_count_limits(self) -> None:
        top = self._top
        self.ax.set_ylim(*((0.5, 2.0 * top) if self.log else (0, 1.08 * top)))

    def _draw_fit(self, fits: xr.Dataset | None, label: str) -> None:
        curve, peak, note = (self.artists[f"{role}:{label}"]
                             for role in ("fit", "peak", "annotation"))
        if fits is None or label not in fits["finder"].to_numpy():
            curve.set_data([], [])
            peak.set_visible(False)
            note.set_text("")
            return
        fit = peak_fit(fits, label)
        energy = np.linspace(*fit.window, 200)
        curve.set_data(self._x(energy), fit.evaluate(energy))
        peak.set_xdata([self._x(fit.position)] * 2)
        peak.set_visible(True)
        note.set_text(f"{label}: {fit.summary(self._fit_scale, self.units)}")

    def _draw_ratio(self, spectra: xr.DataArray) -> None:
        ratio = spectrum_ratio(spectra, self.reference)
        error = spectrum_ratio_error(spectra, self.reference)
        x = self._x(spectra["energy"].to_numpy())
        for label in self.labels:
            if label == self.reference:
                continue
            r, e = ratio.sel(finder=label).to_numpy(), error.sel(finder=label).to_numpy()
            self.artists[f"ratio:{label}"].set_data(x, r)
            ok = np.isfinite(r)
            self.artists[f"ratio_err:{label}"].set_segments(
                [((xi, ri - ei), (xi, ri + ei)) for xi, ri, ei in zip(x[ok], r[ok], e[ok])])
        self.ratio_ax.set_ylim(*ratio_limits(spectra, ratio, error, self.reference,
                                             self.min_counts))


def spectrum_plot(spectra: xr.DataArray, fits: xr.Dataset | None = None, *, log: bool = True,
                  ratio: bool = True, reference: str | None = None, gain: float | None = None,
                  fig: Figure | None = None) -> Figure:
    """Draw a `SpectrumView` and return its figure.

    Spectra come from `aare_lab.spectra.spectra` (or `aare_lab.spectrum`), fits from
    `aare_lab.spectra.fit_peaks`; ``gain`` is for spectra in ADU only (`SpectrumView`).
    """
    return SpectrumView(spectra, fits, log=log, ratio=ratio, reference=reference, gain=gain,
                        fig=fig).figure
