"""The interpolation views: the η histogram and the two maps of one energy bin, and the
image before (cluster centres) and after interpolation."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ._view import View

CMAP = "viridis"


def _extent(maps: xr.Dataset) -> list[float]:
    x, y = maps["eta_x_edges"].to_numpy(), maps["eta_y_edges"].to_numpy()
    return [x[0], x[-1], y[0], y[-1]]


class InterpolationMapsView(View):
    """The (η_x, η_y) histogram, ``ietax`` and ``ietay`` of one energy bin, η_x along the
    horizontal axis."""

    #: Inches, at most a notebook's width (968 px at 100 dpi in JupyterLab).
    FIGSIZE = (9.4, 3.4)

    def __init__(self, maps: xr.Dataset, energy_bin: int, fig: Figure | None = None):
        self.figure = Figure(figsize=self.FIGSIZE, layout="constrained") if fig is None else fig
        self.artists = {}
        self.maps = maps
        self.axes = self.figure.subplots(1, 3)
        for axes, name, title in zip(self.axes, ("histogram", "ietax", "ietay"),
                                     ("flat-field clusters", "ietax (x in the pixel)",
                                      "ietay (y in the pixel)")):
            image = axes.imshow(np.zeros(maps[name].shape[1::-1]), origin="lower",
                                extent=_extent(maps), aspect="auto", cmap=CMAP,
                                interpolation="nearest")
            self.figure.colorbar(image, ax=axes)
            kind = maps.attrs["eta"]
            axes.set(title=title, xlabel=f"{kind} x", ylabel=f"{kind} y")
            self._keep(name, image)
        self.update(energy_bin)

    def update(self, energy_bin: int) -> None:
        """Show energy bin ``energy_bin``."""
        for name in ("histogram", "ietax", "ietay"):
            values = self.maps[name][:, :, energy_bin].to_numpy().T
            self.artists[name].set_data(values)
            finite = values[np.isfinite(values)]
            self.artists[name].set_clim(finite.min(initial=0),
                                        max(finite.max(initial=1), 1e-12))
        energy = self.maps["energy"].to_numpy()[energy_bin]
        self.axes[0].set_title(f"flat-field clusters, energy bin {energy_bin} ({energy:.4g})")


class BeforeAfterView(View):
    """The photons counted at the cluster centres (before) and at their interpolated
    positions (after), on the same sub-pixel grid."""

    FIGSIZE = (9.0, 4.2)

    def __init__(self, before: xr.DataArray, after: xr.DataArray, fig: Figure | None = None):
        self.figure = Figure(figsize=self.FIGSIZE, layout="constrained") if fig is None else fig
        self.artists = {}
        self.axes = self.figure.subplots(1, 2, sharex=True, sharey=True)
        for axes, role, title in zip(self.axes, ("before", "after"),
                                     ("cluster centres", "interpolated")):
            self._keep(role, axes.imshow(np.zeros((1, 1)), origin="upper", cmap="gray",
                                         interpolation="nearest"))
            axes.set(title=title, xlabel="x (pixel)", ylabel="y (pixel)")
        self.update(before, after)

    def update(self, before: xr.DataArray, after: xr.DataArray) -> None:
        """Show new images (any sub-pixel grid)."""
        for role, picture in (("before", before), ("after", after)):
            ny, nx = (int(n) for n in np.round(np.array(picture.shape)
                                               / picture.attrs["subpixels"]))
            self.artists[role].set_data(picture.to_numpy())
            self.artists[role].set_extent([0, nx, ny, 0])
            self.artists[role].set_clim(0, max(1, int(picture.max())))
        self.axes[1].set_title(f"interpolated, {after.attrs['subpixels']}x"
                               f"{after.attrs['subpixels']} per pixel")
