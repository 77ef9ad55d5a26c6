"""GainMapViewer driven from Python, with the static PNG host and with the ipympl canvas."""

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr
from widget_helpers import browser_draw

from aare_lab.calibration import gain_map
from aare_lab.widgets import GainMapViewer


@pytest.fixture(scope="module")
def fitted():
    """A 4x5 map fitted on Poisson spectra, one dead pixel among them."""
    rng = np.random.default_rng(0)
    edges = np.linspace(250, 400, 61)
    centres = 0.5 * (edges[1:] + edges[:-1])
    true = rng.normal(40, 1.2, (4, 5))
    counts = rng.poisson(60 * np.exp(-0.5 * ((centres - true[..., None] * 8.05) / 6.0) ** 2))
    counts[0, 0] = 0
    spectra = xr.DataArray(counts.astype(np.int32), dims=("y", "x", "energy"),
                           coords={"energy": ("energy", centres, {"units": "ADU"})})
    return gain_map(spectra, 8.05), spectra


@pytest.fixture
def viewer_of(interactive):
    made = []

    def make(gain, spectra, **kwargs):
        viewer = GainMapViewer(gain, spectra, interactive=interactive, **kwargs)
        made.append(viewer)
        viewer.wait()
        browser_draw(viewer.host)
        viewer.wait()
        return viewer

    yield make
    for viewer in made:
        viewer.close()


def test_it_opens_on_the_first_fitted_pixel_and_follows_the_chosen_one(fitted, viewer_of):
    gain, spectra = fitted
    viewer = viewer_of(gain, spectra)
    assert viewer.pixel == (0, 1) and viewer.error is None  # (0, 0) has no counts
    viewer.pixel = (2, 3)
    viewer.wait()
    artists = viewer.view.artists
    np.testing.assert_array_equal(artists["spectrum"].get_ydata(), spectra[2, 3])
    fit = artists["fit"].get_ydata()
    assert fit.max() == pytest.approx(float(gain["amplitude"][2, 3]), rel=0.02)
    assert artists["gain_line"].get_xdata()[0] == float(gain["gain"][2, 3])
    assert (viewer.y_box.value, viewer.x_box.value) == (2, 3)
    assert "pixel y=2, x=3: ok" in repr(viewer)
    assert set(viewer.host.draw_threads) <= {threading.main_thread().ident}


def test_typing_a_pixel_and_clicking_one_show_it(fitted, viewer_of):
    gain, spectra = fitted
    viewer = viewer_of(gain, spectra)
    viewer.x_box.value = 4
    viewer.wait()
    assert viewer.pixel == (0, 4)
    viewer.on_click(SimpleNamespace(inaxes=viewer.view.map_axes, xdata=2.2, ydata=0.8))
    viewer.wait()
    assert viewer.pixel == (1, 2)
    np.testing.assert_array_equal(viewer.view.artists["mark"].get_xdata(), [2])


def test_a_pixel_off_the_map_keeps_the_view_and_says_why(fitted, viewer_of):
    gain, spectra = fitted
    viewer = viewer_of(gain, spectra, pixel=(1, 1))
    viewer.pixel = (9, 0)
    viewer.wait()
    assert viewer.pixel == (1, 1)
    assert "outside the 4x5 map" in viewer.error


def test_a_dead_pixel_shows_its_flag(fitted, viewer_of):
    gain, spectra = fitted
    viewer = viewer_of(gain, spectra, pixel=(0, 0))
    assert "too_few_counts" in viewer.status.text


def test_spectra_of_another_shape_are_refused(fitted):
    gain, spectra = fitted
    with pytest.raises(ValueError, match="the spectra cover 3x5 pixels"):
        GainMapViewer(gain, spectra[:3])
