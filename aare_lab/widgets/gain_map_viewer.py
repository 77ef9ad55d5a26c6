"""GainMapViewer: a gain map, the spread of its gains, and any pixel's spectrum and fit."""

from __future__ import annotations

import ipywidgets as widgets
import xarray as xr

from aare_lab.plots.gain_map import GainMapView

from .base import InteractiveWidget
from .graph import Input, ViewNode


class GainMapViewer(InteractiveWidget):
    """Browse a gain map pixel by pixel: type a pixel or click it on the map.

    Parameters
    ----------
    gain
        From `aare_lab.calibration.gain_map` or ``calibrate``.
    spectra
        The per-pixel spectra of its fits (`aare_lab.calibration.pixel_spectra`; for
        ``calibrate``'s map, the last round's: ``pixel_spectra(result, ..., gain=map)``).
    pixel
        ``(y, x)`` shown first; default the first pixel with a fit.
    interactive, max_hz
        As for the other widgets.
    """

    def __init__(self, gain: xr.Dataset, spectra: xr.DataArray, *,
                 pixel: tuple[int, int] | None = None, interactive: bool | None = None,
                 max_hz: float = 8.0):
        shape = gain["gain"].shape
        if spectra.shape[:2] != shape:
            raise ValueError(f"the spectra cover {spectra.shape[0]}x{spectra.shape[1]} "
                             f"pixels but the gain map {shape[0]}x{shape[1]}: give the "
                             "spectra its fits used")
        super().__init__(interactive=interactive, max_hz=max_hz)
        self.gain, self.spectra = gain, spectra
        if pixel is None:
            fitted = (gain["flag"] == 0).to_numpy().nonzero()
            pixel = (int(fitted[0][0]), int(fitted[1][0])) if len(fitted[0]) else (0, 0)
        self._check(pixel)
        self.y_box = widgets.BoundedIntText(value=pixel[0], min=0, max=shape[0] - 1,
                                            description="y", layout=widgets.Layout(width="10em"))
        self.x_box = widgets.BoundedIntText(value=pixel[1], min=0, max=shape[1] - 1,
                                            description="x", layout=widgets.Layout(width="10em"))
        self.pixel_node = Input(tuple(pixel), "pixel")
        self.watch(self.y_box, lambda value: self._select((value, self.pixel_node.value[1])))
        self.watch(self.x_box, lambda value: self._select((self.pixel_node.value[0], value)))
        self.host = self.figure_host(GainMapView.FIGSIZE)
        self.view = None
        self.figure_node = ViewNode(self._draw, self.pixel_node, pump=self.pump,
                                    figure=self.host)
        self.host.figure.canvas.mpl_connect("button_press_event", self.on_click)
        self.children = [widgets.HBox([self.y_box, self.x_box]), self.status.widget,
                         self.host.widget]
        self.figure_node.notify()

    @property
    def pixel(self) -> tuple[int, int]:
        """The pixel shown; set it as a user would type it."""
        return self.pixel_node.value

    @pixel.setter
    def pixel(self, value: tuple[int, int]) -> None:
        self.on_ui(self._select, tuple(value))

    def on_click(self, event) -> None:
        """A click on the map (UI thread) shows the pixel under it."""
        if self.view is None or event.inaxes is not self.view.map_axes or event.xdata is None:
            return
        self._select((int(round(event.ydata)), int(round(event.xdata))))

    def _check(self, pixel) -> None:
        ny, nx = self.gain["gain"].shape
        if not (0 <= pixel[0] < ny and 0 <= pixel[1] < nx):
            raise ValueError(f"pixel {tuple(pixel)} is outside the {ny}x{nx} map")

    def _select(self, pixel: tuple[int, int]) -> None:
        try:
            self._check(pixel)
        except ValueError as err:
            self.status.fail(f"{err}; the view still shows pixel {self.pixel}")
            return
        with self.syncing():
            self.y_box.value, self.x_box.value = pixel
        self.pixel_node.set(tuple(int(v) for v in pixel))

    def _draw(self, pixel: tuple[int, int]) -> None:
        if self.view is None:
            self.view = GainMapView(self.gain, self.spectra, pixel, fig=self.host.figure)
        else:
            self.view.update(pixel)
        flag = self.gain["flag"]
        meaning = flag.attrs["flag_meanings"].split()[int(flag[pixel])]
        self.status.show(f"pixel y={pixel[0]}, x={pixel[1]}: {meaning}")

    def state_lines(self) -> list[str]:
        """The pixel shown and its fit's outcome."""
        return [self.status.text]
