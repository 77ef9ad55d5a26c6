"""Energy spectra of several finders, with their ratio and fitted peaks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..spectra import fit_peaks, peak_fit, spectra, spectrum_ratio
from ._figure import new_figure


def spectrum_plot(data: xr.DataArray | Mapping[str, xr.Dataset] | Sequence[xr.Dataset], *,
                  log: bool = True, ratio: bool = True, reference: str | None = None,
                  fits: bool | xr.Dataset = False, window: tuple[float, float] | None = None,
                  bins: int | np.ndarray = 200, fig: Figure | None = None) -> Figure:
    """Overlay the spectra of several finders, with a ratio panel and fitted peaks.

    Parameters
    ----------
    data
        Spectra from `aare_lab.spectra.spectra`, or results to histogram with ``bins``.
    log
        Logarithmic count axis.
    ratio
        Add a panel with each spectrum divided by the reference's.
    reference
        The finder the ratios are taken to (default: the first).
    fits
        True to fit a peak to every spectrum (in ``window``), or a `fit_peaks` Dataset;
        the fitted curve is drawn dashed, its position as a dotted vertical line, and
        position, FWHM and resolution are written next to it.
    window
        Fit window ``(low, high)`` in ADU for ``fits=True``.
    bins
        Bins for results.
    fig
        Figure to draw into (default: a new pyplot figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    spec = data if isinstance(data, xr.DataArray) else spectra(data, bins=bins)
    if fits is True:
        fits = fit_peaks(spec, window)
    fig = new_figure(fig, (7.5, 6.0 if ratio else 4.5))
    if ratio:
        ax, rax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": (3, 1)})
    else:
        ax, rax = fig.add_subplot(), None
    energy = spec["energy"].to_numpy()
    edges = np.r_[spec["energy_lo"].to_numpy(), spec["energy_hi"].to_numpy()[-1:]]
    colours = {}
    for label in spec["finder"].to_numpy():
        artist = ax.stairs(spec.sel(finder=label).to_numpy(), edges, label=str(label),
                           gid=f"spectrum:{label}")
        colours[str(label)] = artist.get_edgecolor()
    if isinstance(fits, xr.Dataset):
        for k, label in enumerate(fits["finder"].to_numpy()):
            fit = peak_fit(fits, label)
            x = np.linspace(*fit.window, 200)
            colour = colours.get(str(label), "black")
            ax.plot(x, fit.evaluate(x), ls="--", color=colour, gid=f"fit:{label}")
            ax.axvline(fit.position, ls=":", color=colour, gid=f"peak:{label}")
            ax.text(0.02, 0.95 - 0.07 * k,
                    f"{label}: {fit.position:.2f} ± {fit.position_err:.2f} ADU, FWHM "
                    f"{fit.fwhm:.2f} ± {fit.fwhm_err:.2f} ({100 * fit.resolution:.2f} %)",
                    transform=ax.transAxes, va="top", fontsize="small", color=colour,
                    gid=f"annotation:{label}")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("clusters per bin")
    ax.legend(loc="upper right", frameon=False)
    if rax is not None:
        ratios = spectrum_ratio(spec, reference)
        ref = ratios.attrs["reference"]
        for label in spec["finder"].to_numpy():
            if label != ref:
                rax.step(energy, ratios.sel(finder=label).to_numpy(), where="mid",
                         color=colours[str(label)], gid=f"ratio:{label}")
        rax.axhline(1.0, color="0.5", lw=0.8)
        rax.set_ylabel(f"ratio to {ref}")
        rax.set_xlabel("energy (ADU)")
    else:
        ax.set_xlabel("energy (ADU)")
    return fig
