"""InterpolationViewer driven from Python, with the static PNG host and with the ipympl
canvas."""

import threading

import numpy as np
import pytest
import xarray as xr
from widget_helpers import browser_draw

from aare_lab.imaging import build_interpolation, image, interpolate
from aare_lab.widgets import InterpolationViewer


def clusters(n=3000, seed=0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    windows = rng.integers(1, 300, (n, 3, 3))
    windows[:, 1, 1] += rng.integers(500, 3000, n)
    return xr.Dataset(
        {"window": (("cluster", "wy", "wx"), windows.astype(np.int32)),
         "x": ("cluster", rng.integers(1, 19, n).astype(np.int32)),
         "y": ("cluster", rng.integers(1, 15, n).astype(np.int32)),
         "frame_number": ("cluster", np.arange(n, dtype=np.int64))},
        attrs={"frame_shape": np.array([16, 20])})


@pytest.fixture(scope="module")
def run():
    return clusters(seed=1), build_interpolation(clusters(seed=2), bins=20, energy_bins=3)


@pytest.fixture
def viewer_of(interactive):
    made = []

    def make(result, maps, **kwargs):
        viewer = InterpolationViewer(result, maps, interactive=interactive, **kwargs)
        made.append(viewer)
        viewer.wait()
        for host in (viewer.maps_host, viewer.image_host):
            browser_draw(host)
        viewer.wait()
        return viewer

    yield make
    for viewer in made:
        viewer.close()


def test_the_maps_of_the_chosen_energy_bin_are_shown(run, viewer_of):
    result, maps = run
    viewer = viewer_of(result, maps)
    for energy_bin in (2, 1):
        viewer.energy_bin = energy_bin
        viewer.wait()
        for name in ("histogram", "ietax", "ietay"):
            shown = viewer.maps_view.artists[name].get_array()
            np.testing.assert_array_equal(shown, maps[name][:, :, energy_bin].to_numpy().T)
    assert viewer.error is None
    assert set(viewer.maps_host.draw_threads) <= {threading.main_thread().ident}


def test_the_images_follow_the_sub_pixel_grid(run, viewer_of):
    result, maps = run
    viewer = viewer_of(result, maps, subpixels=2)
    photons = interpolate(result, maps)
    for subpixels in (2, 4):
        viewer.subpixels = subpixels
        viewer.wait()
        after = viewer.image_view.artists["after"].get_array()
        np.testing.assert_array_equal(after, image(photons, subpixels).to_numpy())
        before = viewer.image_view.artists["before"].get_array()
        assert before.shape == (16 * subpixels, 20 * subpixels)
        assert before.sum() == result.sizes["cluster"]
    assert f"of {result.sizes['cluster']} photons placed" in repr(viewer)


def test_an_energy_bin_the_maps_lack_is_refused(run):
    result, maps = run
    with pytest.raises(ValueError, match="energy_bin 3 is not one of the maps' 3 bins"):
        InterpolationViewer(result, maps, energy_bin=3)
