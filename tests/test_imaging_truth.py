"""η interpolation against the simulator's truth: positions on a flat field and the
line spread of an edge (crops of 32x32 and 48x48 pixels, MÖNCH's defaults otherwise)."""

from __future__ import annotations

import numpy as np
import pytest

from aare_lab import find_clusters
from aare_lab.imaging import build_interpolation, interpolate
from aare_lab.imaging.resolution import edge_spread
from aare_lab.simulate import Beam, Detector, Edge, Simulator


def found(shape, beam, seed, n_frames):
    sim = Simulator(Detector(frame_shape=shape), beam, seed=seed)
    dark, (frames, truth) = sim.dark(200), sim.frames(n_frames)
    return find_clusters(frames, dark, n_pedestal=200, progress=False), truth


def matched_errors(result, x, y, truth):
    """Per cluster matched to the nearest true photon of its frame (within 1.5 pixels):
    the position errors (x, y) of ``x``, ``y``."""
    errors = []
    frames = result["frame_number"].to_numpy()
    centre_x, centre_y = result["x"].to_numpy() + 0.5, result["y"].to_numpy() + 0.5
    for k in np.unique(frames):
        ours, true = np.flatnonzero(frames == k), np.flatnonzero(truth.frame == k)
        if len(true) == 0:
            continue
        distance = np.hypot(centre_x[ours, None] - truth.x[None, true],
                            centre_y[ours, None] - truth.y[None, true])
        nearest = distance.argmin(axis=1)
        close = distance[np.arange(len(ours)), nearest] < 1.5
        errors.append(np.c_[x[ours][close] - truth.x[true][nearest][close],
                            y[ours][close] - truth.y[true][nearest][close]])
    return np.concatenate(errors)


@pytest.fixture(scope="module")
def flat_maps():
    flat, _ = found((32, 32), Beam(photons_per_frame=8), seed=1, n_frames=1500)
    return flat


@pytest.mark.parametrize("eta", ["eta2", "full_eta2", "eta3", "cross_eta3"])
def test_interpolation_halves_the_position_error_on_a_flat_field(flat_maps, eta):
    result, truth = found((32, 32), Beam(photons_per_frame=8), seed=2, n_frames=300)
    photons = interpolate(result, build_interpolation(flat_maps, bins=50, eta=eta))
    centre = matched_errors(result, result["x"].to_numpy() + 0.5,
                            result["y"].to_numpy() + 0.5, truth)
    interpolated = matched_errors(result, photons["x"].to_numpy(), photons["y"].to_numpy(),
                                  truth)
    assert len(centre) > 2000
    rms_centre = np.sqrt(np.mean(centre ** 2, axis=0))
    rms_interpolated = np.sqrt(np.mean(interpolated ** 2, axis=0))
    np.testing.assert_allclose(rms_centre, 1 / np.sqrt(12), rtol=0.05)  # uniform in a pixel
    assert np.all(rms_interpolated * 2 <= rms_centre), (rms_centre, rms_interpolated)


def test_interpolation_narrows_the_line_spread_of_an_edge():
    flat, _ = found((48, 48), Beam(photons_per_frame=15), seed=1, n_frames=1000)
    edge = Edge(position=20.3, angle_deg=4.0)
    result, truth = found((48, 48), Beam(photons_per_frame=30, illumination=edge), seed=2,
                          n_frames=1500)
    photons = interpolate(result, build_interpolation(flat, bins=50))
    centre = edge_spread(result["x"].to_numpy() + 0.5, result["y"].to_numpy() + 0.5, edge)
    interpolated = edge_spread(photons["x"], photons["y"], edge)
    true = edge_spread(truth.x, truth.y, edge)
    assert true.attrs["fwhm"] < 0.1
    assert centre.attrs["fwhm"] > 0.6
    assert interpolated.attrs["fwhm"] < centre.attrs["fwhm"] / 3
