"""The gain-map view: the map, the histogram of its gains, and one pixel's spectrum with
its fitted line."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ._view import View

MAP_CMAP = "viridis"
SPECTRUM_COLOUR = "#3182bd"
FIT_COLOUR = "#d7301f"
MARK_COLOUR = "#d7301f"


def fitted_line(gain: xr.Dataset, y: int, x: int, energy: np.ndarray) -> np.ndarray:
    """The fitted model of pixel ``(y, x)`` over ``energy`` (the spectra's units); NaN for
    a pixel without a fit."""
    a, mu, sigma = (float(gain[name][y, x]) for name in ("amplitude", "peak", "sigma"))
    line = a * np.exp(-0.5 * ((energy - mu) / sigma) ** 2)
    if "kbeta_ratio" in gain:
        ratio = gain.attrs["kbeta_kev"] / gain.attrs["line_kev"]
        line = line + a * float(gain["kbeta_ratio"][y, x]) * np.exp(
            -0.5 * ((energy - mu * ratio) / sigma) ** 2)
    return line


class GainMapView(View):
    """Three panels: ``gain`` as an image with the chosen pixel marked, the histogram of
    the fitted gains, and the chosen pixel's spectrum with its fit.

    Parameters
    ----------
    gain
        From `aare_lab.calibration.gain_map` or ``calibrate``.
    spectra
        The per-pixel spectra its fits used (`aare_lab.calibration.pixel_spectra`).
    pixel
        ``(y, x)`` shown first.
    fig
        The figure to draw into (a new one if None).
    """

    #: Inches, at most a notebook's width (968 px at 100 dpi in JupyterLab).
    FIGSIZE = (9.4, 3.6)

    def __init__(self, gain: xr.Dataset, spectra: xr.DataArray, pixel: tuple[int, int],
                 fig: Figure | None = None):
        self.figure = Figure(figsize=self.FIGSIZE, layout="constrained") if fig is None else fig
        self.artists = {}
        self.gain, self.spectra = gain, spectra
        self.map_axes, self.histogram_axes, self.spectrum_axes = self.figure.subplots(1, 3)
        values = gain["gain"].to_numpy()
        image = self.map_axes.imshow(values, cmap=MAP_CMAP, origin="upper",
                                     interpolation="nearest")
        self.figure.colorbar(image, ax=self.map_axes, label="gain (ADU/keV)")
        self._keep("map", image)
        self.map_axes.set(title="gain map", xlabel="x (column)", ylabel="y (row)")
        self._keep("mark", self.map_axes.plot([], [], "s", mfc="none", mec=MARK_COLOUR,
                                              ms=8)[0])
        fitted = values[np.isfinite(values)]
        self.histogram_axes.hist(fitted, bins=max(10, min(100, len(fitted) // 20 or 10)),
                                 color=SPECTRUM_COLOUR)
        spread = np.std(fitted) / np.median(fitted) if len(fitted) else np.nan
        self.histogram_axes.set(title=f"{len(fitted)} pixels fitted, {spread:.2%} rms",
                                xlabel="gain (ADU/keV)", ylabel="pixels")
        self._keep("gain_line", self.histogram_axes.axvline(np.nan, color=MARK_COLOUR))
        energy = spectra["energy"].to_numpy()
        self._keep("spectrum", self.spectrum_axes.step(energy, np.zeros_like(energy),
                                                       where="mid", color=SPECTRUM_COLOUR)[0])
        self._keep("fit", self.spectrum_axes.plot(energy, np.zeros_like(energy),
                                                  color=FIT_COLOUR)[0])
        self.spectrum_axes.set(xlabel=f"energy ({spectra['energy'].attrs.get('units', '')})",
                               ylabel="clusters")
        self.update(pixel)

    def update(self, pixel: tuple[int, int]) -> None:
        """Show pixel ``(y, x)``: its mark, its gain in the histogram, its spectrum and fit."""
        y, x = pixel
        self.artists["mark"].set_data([x], [y])
        self.artists["gain_line"].set_xdata([float(self.gain["gain"][y, x])] * 2)
        counts = self.spectra[y, x].to_numpy()
        energy = self.spectra["energy"].to_numpy()
        self.artists["spectrum"].set_ydata(counts)
        self.artists["fit"].set_ydata(fitted_line(self.gain, y, x, energy))
        self.spectrum_axes.set_ylim(0, max(1.0, 1.15 * float(counts.max(initial=0))))
        flag = self.gain["flag"]
        meaning = flag.attrs["flag_meanings"].split()[int(flag[y, x])]
        self.spectrum_axes.set_title(f"pixel y={y}, x={x}: {float(self.gain['gain'][y, x]):.3f}"
                                     f" ADU/keV ({meaning})")
