"""Energy spectra of several finders, with their ratio, fitted peaks and the fit region."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib import patheffects
from matplotlib.figure import Figure

from aare_lab.analysis.fit import value_and_error
from aare_lab.analysis.spectra import (
    RUN_COORDS,
    peak_fit,
    shown_energy,
    spectrum_ratio,
    spectrum_ratio_error,
    spectrum_units,
)
from aare_lab.model.results import spectrum_edges

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
#: What the ratio panel's error bars are, written in it.
RATIO_ERROR_NOTE = ("bars: Poisson, as if the spectra were independent; finders that share "
                    "their clusters differ far less")
#: Colours of the fit region's parts: Kα, Kβ, the background, and a second model's fit.
COMPONENT_COLOURS = {"Kα": "#9467bd", "Kβ": "#17becf", "background": "0.45",
                     "compare": "#2ca02c"}


def _by_finder(spectra: xr.DataArray) -> xr.DataArray:
    """Spectra over ``finder``; one spectrum (`aare_lab.model.results.spectrum`) becomes a
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


def bin_width(edges: np.ndarray) -> float | None:
    """The width of equal bins, None for bins of different widths."""
    widths = np.diff(np.asarray(edges, float))
    return float(widths[0]) if widths.size and np.allclose(widths, widths[0]) else None


def scale_text(edges: np.ndarray, units: str, gain: float | None) -> str:
    """The bin width (in keV too, with a gain) and the gain, as the figure states them.

    Examples
    --------
    >>> scale_text(np.array([0.0, 2.0, 4.0]), "ADU", 40.0)
    'bins of 2 ADU (0.05 keV), gain 40 ADU/keV'
    """
    width = bin_width(edges)
    text = "bins of different widths" if width is None else f"bins of {width:g} {units}"
    if gain:
        text += (f" ({width / gain:.3g} keV)" if width is not None else "") + \
            f", gain {gain:g} ADU/keV"
    return text


def fit_components(fit, x: np.ndarray) -> dict[str, np.ndarray]:
    """The parts of a fitted curve at ``x``: ``Kα`` (the peak of one gaussian), ``Kβ``
    (doublets only) and the linear ``background``; they add up to ``fit.evaluate(x)``."""
    x = np.asarray(x, float)
    def line(centre, amplitude):
        return amplitude * np.exp(-0.5 * ((x - centre) / fit.sigma) ** 2)
    parts = {"Kα": line(fit.position, fit.amplitude)}
    if fit.lines is not None:
        parts["Kβ"] = line(fit.beta_position, fit.beta_ratio * fit.amplitude)
    parts["background"] = fit.offset + fit.slope * (x - fit.position)
    return parts


def fit_residuals(fit, centres: np.ndarray, counts: np.ndarray):
    """The bins of a spectrum inside a fit's window: their centres, the residuals
    ``(counts - fit) / sqrt(fit)`` (Poisson, 1 where the fit is below 1) and chi²/ndf."""
    inside = (centres >= fit.window[0]) & (centres <= fit.window[1])
    x, n = centres[inside], counts[inside].astype(float)
    model = fit.evaluate(x)
    pull = (n - model) / np.sqrt(np.maximum(model, 1.0))
    n_free = 5 if fit.lines is None else 6
    return x, pull, float(np.sum(pull ** 2) / max(len(x) - n_free, 1))


def _fit_dashes(k: int, n: int):
    """The dashes of the k-th of n fit curves: interleaved, so that where fits coincide
    each shows in its own colour, the colour its annotation is written in."""
    if n == 1:
        return (0, (4, 1.5))
    return (3.0 * k, (3.0, 3.0 * (n - 1)))


class SpectrumView(View):
    """Overlay the spectra of several finders, with a ratio panel and fitted peaks.

    Parameters
    ----------
    spectra
        Counts over ``(finder, energy)`` from `aare_lab.analysis.spectra.spectra`, or one spectrum
        over ``energy`` (`aare_lab.model.results.spectrum`, or counts accumulated over fixed
        edges), with the edges as ``energy_lo``/``energy_hi``; the axis is in their
        ``units`` (ADU, or keV for calibrated results).
    fits
        Peak fits from `aare_lab.analysis.spectra.fit_peaks`: each drawn over its spectrum, thick,
        dashed and in a contrasting colour (a Kα/Kβ doublet as one curve; fits that
        coincide in interleaved dashes, so each shows in its annotation's colour), its
        (Kα) position as a dotted line, with position, FWHM and resolution (and a
        doublet's Kβ/Kα intensity ratio) written in the corner.
    log
        Logarithmic count axis.
    ratio
        With two or more finders: a panel of each spectrum divided by the reference's,
        with Poisson error bars (an upper bound for finders that share clusters; the
        panel says so).
    reference
        The finder the ratios are taken to, and whose fit the fit region shows (default:
        the first).
    gain
        ADU per keV, for spectra in ADU: the energy axis (and the fits) in keV.
    min_counts
        Bins with fewer counts in either spectrum do not set the ratio panel's range.
    detail
        Add a column for the reference's fit: its window on a linear axis with the counts
        and their Poisson errors, the fitted curve, its Kα, Kβ and background parts, and
        below it the residuals ``(counts - fit) / sqrt(fit)`` with chi²/ndf.
    compare_fits
        Fits of the same spectra by another model (`aare_lab.analysis.spectra.fit_peaks`, e.g. one
        gaussian beside the doublet): the reference's is drawn in the fit region with its
        residuals and summary.
    note
        A line written under the panels (say, known biases of the numbers shown).
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
        ratio 1 line), ``ratio_note`` (what the error bars are), ``scale`` (the bin
        width and gain), ``note``. With ``detail``: ``detail:counts`` (StepPatch),
        ``detail:errors`` (LineCollection), ``detail:fit``, ``detail:Kα``, ``detail:Kβ``,
        ``detail:background``, ``detail:compare`` (lines), ``detail:legend``,
        ``residual:fit``, ``residual:compare`` (markers), ``residual:zero``.
    units
        The units of the energy axis.
    fit_ax, residual_ax
        The fit region's axes (None without ``detail``).

    Raises
    ------
    ValueError
        For a ``gain`` with spectra already in keV.
    """

    def __init__(self, spectra: xr.DataArray, fits: xr.Dataset | None = None, *,
                 log: bool = True, ratio: bool = True, reference: str | None = None,
                 gain: float | None = None, min_counts: int = MIN_RATIO_COUNTS,
                 detail: bool = False, compare_fits: xr.Dataset | None = None,
                 note: str | None = None, fig: Figure | None = None, managed: bool = False):
        spectra = _by_finder(spectra)
        units = spectrum_units(spectra)
        if gain and units != "ADU":
            raise ValueError(f"the spectra are in {units} already: gain converts spectra in "
                             "ADU, leave it out")
        self._fit_scale, self.units = shown_energy(units, gain)
        self._data_units = units
        self.labels = [str(f) for f in spectra["finder"].to_numpy()]
        self.reference = self.labels[0] if reference is None else reference
        self.gain, self.log, self.min_counts = gain, log, min_counts
        has_ratio = ratio and len(self.labels) > 1
        height = 6.0 if has_ratio or detail else 4.5
        self.figure = figure_for(fig, (12.5 if detail else 7.5, height + 0.3 * bool(note)),
                                 managed)
        self._layout_axes(has_ratio, detail)
        self._annotation_lines = 3 if detail else 1
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
                                               ls=_fit_dashes(k, len(self.labels)),
                                               zorder=10, path_effects=stroke)[0])
            self._keep(f"peak:{label}", ax.axvline(0, ls=":", lw=1.5, color=fit_colour,
                                                   zorder=9, visible=False))
            # Under the legend (one line per finder), right-aligned: clear of the curves'
            # rising edge on the left and of the legend's longer lines. Above the fit curve:
            # a doublet's line reaches across the peak, whose dashes hid its digits.
            # Beside the fit region the panel is narrower: one line per quantity there.
            self._keep(f"annotation:{label}", ax.text(
                0.98, 0.93 - 0.065 * (len(self.labels) + k * self._annotation_lines),
                "", transform=ax.transAxes,
                va="top", ha="right", fontsize="small", color=fit_colour, zorder=11,
                bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 1.5}))
        ax.set_ylabel("clusters per bin")
        self._keep("legend", ax.legend(loc="upper right", frameon=False, fontsize="small"))
        self._keep("title", ax.set_title(""))
        # Bottom left: clear of the legend and the peaks; over the few noise counts there.
        self._keep("scale", ax.text(0.02, 0.02, "", transform=ax.transAxes, va="bottom",
                                    ha="left", fontsize="small", color="0.25", zorder=11,
                                    bbox={"facecolor": "white", "alpha": 0.8,
                                          "edgecolor": "none", "pad": 1.5}))
        if self.ratio_ax is not None:
            rax = self.ratio_ax
            self._keep("unity", rax.axhline(1.0, color="0.5", lw=0.8))
            for k, label in enumerate(self.labels):
                if label != self.reference:
                    colour = CURVE_STYLES[k % len(CURVE_STYLES)][0]
                    self._keep(f"ratio_err:{label}", rax.vlines([], [], [], color=colour,
                                                                lw=0.8, alpha=0.3))
                    self._keep(f"ratio:{label}", rax.plot([], [], "o", ms=2.5,
                                                          color=colour)[0])
            rax.set_ylabel(f"ratio to {self.reference}")
            self._keep("ratio_note", rax.text(
                0.01, 0.04, RATIO_ERROR_NOTE, transform=rax.transAxes, fontsize="x-small",
                va="bottom", ha="left", color="0.2", zorder=11,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1.0}))
        (self.ratio_ax or ax).set_xlabel(f"energy ({self.units})")
        if detail:
            self._draw_detail_artists()
        self._keep("note", self.figure.text(0.01, 0.005, note or "", fontsize="small",
                                            va="bottom", ha="left", color="0.2", wrap=True))
        engine = self.figure.get_layout_engine()
        if note and hasattr(engine, "set") and "rect" in engine.get():
            # Constrained layout places the axes only: leave the note its line(s).
            engine.set(rect=(0, 0.03 * (1 + note.count("\n")), 1,
                             1 - 0.03 * (1 + note.count("\n"))))
        self.update(spectra, fits, compare_fits)
        if log:  # after the first counts: a log axis over no data warns
            ax.set_yscale("log")

    def _layout_axes(self, has_ratio: bool, detail: bool) -> None:
        """The spectrum (and ratio) axes on the left, the fit region (and its residuals)
        on the right with ``detail``."""
        if not detail:
            if has_ratio:
                self.ax, self.ratio_ax = self.figure.subplots(
                    2, 1, sharex=True, gridspec_kw={"height_ratios": (3, 1)})
            else:
                self.ax, self.ratio_ax = self.figure.add_subplot(), None
            self.fit_ax = self.residual_ax = None
            return
        grid = self.figure.add_gridspec(2, 2, height_ratios=(3, 1), width_ratios=(3, 2))
        self.ax = self.figure.add_subplot(grid[0, 0] if has_ratio else grid[:, 0])
        self.ratio_ax = self.figure.add_subplot(grid[1, 0], sharex=self.ax) \
            if has_ratio else None
        if has_ratio:
            self.ax.tick_params(labelbottom=False)
        self.fit_ax = self.figure.add_subplot(grid[0, 1])
        self.residual_ax = self.figure.add_subplot(grid[1, 1], sharex=self.fit_ax)
        self.fit_ax.tick_params(labelbottom=False)

    def _draw_detail_artists(self) -> None:
        fax, rax = self.fit_ax, self.residual_ax
        k = self.labels.index(self.reference)
        colour = CURVE_STYLES[k % len(CURVE_STYLES)][0]
        fit_colour = FIT_COLOURS[k % len(FIT_COLOURS)]
        self._keep("detail:counts", fax.stairs([0], [0, 1], color=colour, lw=1.2,
                                               label=f"{self.reference}: counts"))
        self._keep("detail:errors", fax.vlines([], [], [], color=colour, lw=0.8))
        self._keep("detail:fit", fax.plot([], [], color=fit_colour, lw=2.2, zorder=5)[0])
        for part in ("Kα", "Kβ", "background"):
            self._keep(f"detail:{part}", fax.plot([], [], color=COMPONENT_COLOURS[part],
                                                  lw=1.4, ls="--", zorder=4)[0])
        self._keep("detail:compare", fax.plot([], [], color=COMPONENT_COLOURS["compare"],
                                              lw=1.6, ls="-.", zorder=4)[0])
        fax.set_ylabel("clusters per bin")
        fax.set_title(f"fit region ({self.reference})", fontsize="medium")
        self._keep("residual:zero", rax.axhline(0.0, color="0.5", lw=0.8))
        self._keep("residual:fit", rax.plot([], [], "o", ms=2.5, color=fit_colour)[0])
        self._keep("residual:compare", rax.plot([], [], "s", ms=2.5, mfc="none",
                                                color=COMPONENT_COLOURS["compare"])[0])
        rax.set_ylabel("(counts − fit)/√fit")
        rax.set_xlabel(f"energy ({self.units})")

    def _x(self, energy: np.ndarray | float):
        """Energies in the spectra's units on the axis (divided by the gain with one)."""
        return np.asarray(energy, float) / self.gain if self.gain else np.asarray(energy, float)

    def update(self, spectra: xr.DataArray, fits: xr.Dataset | None = None,
               compare_fits: xr.Dataset | None = None) -> None:
        """Show new counts, on the same or other edges, and new fits (None: no fits);
        ``compare_fits`` as for the view.

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
        self.artists["scale"].set_text(scale_text(spectrum_edges(spectra), self._data_units,
                                                  self.gain))
        if self.ratio_ax is not None:
            self._draw_ratio(spectra)
        if self.fit_ax is not None:
            self._draw_detail(spectra, fits, compare_fits)

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
        text = f"{label}: {fit.summary(self._fit_scale, self.units)}"
        note.set_text(text.replace(", ", ",\n") if self._annotation_lines > 1 else text)

    def _draw_detail(self, spectra: xr.DataArray, fits: xr.Dataset | None,
                     compare_fits: xr.Dataset | None) -> None:
        """The reference's fit window: counts with Poisson errors, the fit and its parts,
        a second model's fit, and both residuals with their chi²/ndf in the legend."""
        a, label = self.artists, self.reference
        fitted = fits is not None and label in fits["finder"].to_numpy()
        other = compare_fits is not None and label in compare_fits["finder"].to_numpy()
        for role in ("fit", "Kα", "Kβ", "background", "compare"):
            a[f"detail:{role}"].set_data([], [])
            a[f"detail:{role}"].set_label(f"_{role}")  # out of the legend unless drawn below
        a["residual:fit"].set_data([], [])
        a["residual:compare"].set_data([], [])
        a["detail:errors"].set_segments([])
        if not fitted:
            a["detail:counts"].set_data([0], [0, 1])
            a["detail:legend"] = self._detail_legend()
            return
        fit = peak_fit(fits, label)
        one = spectra.sel(finder=label)
        edges, counts = spectrum_edges(one), one.to_numpy()
        centres = 0.5 * (edges[:-1] + edges[1:])
        inside = (edges[:-1] >= fit.window[0]) & (edges[1:] <= fit.window[1])
        first, last = np.flatnonzero(inside)[[0, -1]] if inside.any() else (0, 0)
        a["detail:counts"].set_data(counts[first:last + 1], self._x(edges[first:last + 2]))
        x, n = self._x(centres[first:last + 1]), counts[first:last + 1]
        a["detail:errors"].set_segments([((xi, ni - np.sqrt(ni)), (xi, ni + np.sqrt(ni)))
                                         for xi, ni in zip(x, n)])
        energy = np.linspace(*fit.window, 300)
        resid_x, pull, chi2 = fit_residuals(fit, centres, counts)
        a["detail:fit"].set_data(self._x(energy), fit.evaluate(energy))
        a["detail:fit"].set_label(f"{fit.model} fit, χ²/ndf {chi2:.2f}")
        for part, values in fit_components(fit, energy).items():
            a[f"detail:{part}"].set_data(self._x(energy), values)
            a[f"detail:{part}"].set_label(part if part != "Kβ" else
                                          f"Kβ ({fit.beta_ratio:.3f} × Kα)")
        a["residual:fit"].set_data(self._x(resid_x), pull)
        if other:
            second = peak_fit(compare_fits, label)
            energy2 = np.linspace(*second.window, 300)
            x2, pull2, chi2_2 = fit_residuals(second, centres, counts)
            a["detail:compare"].set_data(self._x(energy2), second.evaluate(energy2))
            peak = value_and_error(second.position * self._fit_scale,
                                   second.position_err * self._fit_scale)
            a["detail:compare"].set_label(f"{second.model} fit, χ²/ndf {chi2_2:.2f},\n"
                                          f"peak {peak} {self.units}")
            a["residual:compare"].set_data(self._x(x2), pull2)
        self.fit_ax.set_xlim(*self._x(np.array(fit.window)))
        # Head room for the legend above the peak.
        self.fit_ax.set_ylim(0, 1.6 * max(1.0, float(np.max(n + np.sqrt(n)))))
        self.residual_ax.relim()
        self.residual_ax.autoscale_view(scalex=False)
        a["detail:legend"] = self._detail_legend()

    def _detail_legend(self):
        """The fit region's legend, made anew: its entries are the parts drawn now."""
        legend = self.fit_ax.legend(loc="upper right", fontsize="x-small", frameon=False)
        legend.set_gid("detail:legend")
        return legend

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
                  detail: bool = False, compare_fits: xr.Dataset | None = None,
                  note: str | None = None, fig: Figure | None = None) -> Figure:
    """Draw a `SpectrumView` and return its figure.

    Spectra come from `aare_lab.analysis.spectra.spectra` (or `aare_lab.spectrum`), fits from
    `aare_lab.analysis.spectra.fit_peaks`; ``gain`` is for spectra in ADU only; ``detail`` adds the
    fit region with the fit's parts and residuals, ``compare_fits`` a second model's fits
    there (`SpectrumView`).
    """
    return SpectrumView(spectra, fits, log=log, ratio=ratio, reference=reference, gain=gain,
                        detail=detail, compare_fits=compare_fits, note=note, fig=fig).figure
