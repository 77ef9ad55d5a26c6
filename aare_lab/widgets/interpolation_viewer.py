"""InterpolationViewer: η interpolation maps by energy bin, and a run's image before and
after interpolation on a chosen sub-pixel grid."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import xarray as xr

from aare_lab.plots.interpolation import BeforeAfterView, InterpolationMapsView

from .base import InteractiveWidget
from .graph import Input, ViewNode


class InterpolationViewer(InteractiveWidget):
    """Look at interpolation maps and what they do to a run.

    Parameters
    ----------
    result
        A finder result to interpolate.
    maps
        From `aare_lab.imaging.build_interpolation` or ``load_interpolation``.
    energy_bin, subpixels
        The maps' energy bin and the images' bins per pixel shown first.
    interactive, max_hz
        As for the other widgets.
    """

    def __init__(self, result: xr.Dataset, maps: xr.Dataset, *, energy_bin: int = 0,
                 subpixels: int = 5, interactive: bool | None = None, max_hz: float = 4.0):
        n_bins = maps.sizes["energy"]
        if not 0 <= energy_bin < n_bins:
            raise ValueError(f"energy_bin {energy_bin} is not one of the maps' {n_bins} bins")
        if not 1 <= subpixels <= 20:
            raise ValueError(f"subpixels must be 1 to 20, got {subpixels}")
        super().__init__(interactive=interactive, max_hz=max_hz)
        self.result, self.maps = result, maps
        self.energy_slider = widgets.IntSlider(value=energy_bin, min=0, max=n_bins - 1,
                                               description="energy bin",
                                               disabled=n_bins == 1)
        self.subpixel_slider = widgets.IntSlider(value=subpixels, min=1, max=20,
                                                 description="sub-pixels",
                                                 continuous_update=False)
        self.energy_node = Input(energy_bin, "energy bin")
        self.subpixel_node = Input(subpixels, "sub-pixels")
        self.watch(self.energy_slider, self.energy_node.set)
        self.watch(self.subpixel_slider, self.subpixel_node.set)
        self.photons = self.task(self._interpolate, name="interpolation")
        self.images = self.task(self._images, self.photons, self.subpixel_node, name="images")
        self.maps_host = self.figure_host(InterpolationMapsView.FIGSIZE)
        self.image_host = self.figure_host(BeforeAfterView.FIGSIZE)
        self.maps_view = self.image_view = None
        self.maps_node = ViewNode(self._draw_maps, self.energy_node, pump=self.pump,
                                  figure=self.maps_host)
        self.image_node = ViewNode(self._draw_images, self.images, pump=self.pump,
                                   figure=self.image_host)
        self.children = [widgets.HBox([self.energy_slider, self.subpixel_slider,
                                       self.progress]),
                         self.status.widget, self.maps_host.widget, self.image_host.widget]
        self.maps_node.notify()
        self.photons.submit()

    @property
    def energy_bin(self) -> int:
        """The maps' energy bin shown; set it as a user would move the slider."""
        return self.energy_node.value

    @energy_bin.setter
    def energy_bin(self, value: int) -> None:
        self.energy_slider.value = value

    @property
    def subpixels(self) -> int:
        """The images' bins per pixel; set it as a user would move the slider."""
        return self.subpixel_node.value

    @subpixels.setter
    def subpixels(self, value: int) -> None:
        self.subpixel_slider.value = value

    def _interpolate(self, job) -> xr.Dataset:
        from aare_lab.imaging import interpolate

        return interpolate(self.result, self.maps)

    def _images(self, job, photons: xr.Dataset, subpixels: int):
        from aare_lab.imaging import image

        centres = xr.Dataset({"x": ("cluster", self.result["x"].to_numpy() + 0.5),
                              "y": ("cluster", self.result["y"].to_numpy() + 0.5)},
                             attrs=photons.attrs)
        return image(centres, subpixels), image(photons, subpixels)

    def _draw_maps(self, energy_bin: int) -> None:
        if self.maps_view is None:
            self.maps_view = InterpolationMapsView(self.maps, energy_bin,
                                                   fig=self.maps_host.figure)
        else:
            self.maps_view.update(energy_bin)

    def _draw_images(self, images) -> None:
        if self.image_view is None:
            self.image_view = BeforeAfterView(*images, fig=self.image_host.figure)
        else:
            self.image_view.update(*images)

    def describe(self, task) -> str:
        """The status text: the photons placed and those without a position."""
        photons = self.photons.value
        if photons is None:
            return f"{task.name} done"
        placed = int(np.isfinite(photons["x"].to_numpy()).sum())
        return (f"{placed} of {photons.sizes['cluster']} photons placed "
                f"({photons.attrs['outside_map']} beyond the maps' energies)")
