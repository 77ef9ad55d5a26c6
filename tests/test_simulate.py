"""Tests of the detector simulator: reproducibility, statistics and the physics of the model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from aare_lab.simulate import Beam, Detector, SimulatedRun, Simulator, Truth, simulate_run

SMALL = (32, 48)


def small_sim(shape=SMALL, seed=0, detector_kw=None, **beam_kw):
    return Simulator(Detector(frame_shape=shape, **(detector_kw or {})),
                     Beam(**beam_kw), seed=seed)


def isolated(truth: Truth, distance: float) -> np.ndarray:
    """Mask of photons with no other photon of their frame within ``distance`` (max-norm)."""
    keep = np.ones(len(truth), dtype=bool)
    for k in np.unique(truth.frame):
        idx = np.flatnonzero(truth.frame == k)
        dy = np.abs(truth.y[idx, None] - truth.y[None, idx])
        dx = np.abs(truth.x[idx, None] - truth.x[None, idx])
        close = (np.maximum(dy, dx) < distance).sum(axis=1) > 1
        keep[idx[close]] = False
    return keep


def assert_truth_equal(a: Truth, b: Truth):
    for name in ("frame", "y", "x", "energy_kev", "line"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


# --- shapes, dtypes, defaults ---------------------------------------------------------------

def test_defaults_resemble_moench03():
    det, beam = Detector(), Beam()
    assert det.frame_shape == (400, 400)
    assert det.pixel_pitch_um == 25.0
    assert beam.photons_per_frame == 2300
    np.testing.assert_allclose(beam.line_energies_kev, [8.05, 8.90])
    np.testing.assert_allclose(beam.line_probabilities, [0.87, 0.13])
    # An 8 keV photon shared equally by four pixels stays far above 5 sigma.
    assert 8.05 * det.gain_adu_per_kev / 4 > 10 * det.noise_adu


@pytest.mark.parametrize("shape", [(7, 13), (1, 1), (1, 9), (257, 301)])
def test_dtype_and_shape(shape):
    sim = small_sim(shape, photons_per_frame=20)
    dark = sim.dark(2)
    frames, truth = sim.frames(3)
    assert dark.dtype == np.uint16 and dark.shape == (2, *shape)
    assert frames.dtype == np.uint16 and frames.shape == (3, *shape)
    assert truth.frame.dtype == np.int64 and truth.line.dtype == np.int8
    assert truth.y.dtype == truth.x.dtype == truth.energy_kev.dtype == np.float64
    assert np.all((truth.y >= 0) & (truth.y <= shape[0]))
    assert np.all((truth.x >= 0) & (truth.x <= shape[1]))
    assert np.all(np.diff(truth.frame) >= 0) and set(truth.frame) <= {0, 1, 2}
    for m in (sim.maps.pedestal, sim.maps.noise, sim.maps.gain, sim.maps.dead, sim.maps.hot):
        assert m.shape == shape


def test_zero_frames():
    sim = small_sim()
    assert sim.dark(0).shape == (0, *SMALL)
    frames, truth = sim.frames(0)
    assert frames.shape == (0, *SMALL) and len(truth) == 0
    assert list(sim.iter_frames(0)) == []


def test_output_is_clipped_to_uint16_range():
    low = small_sim(detector_kw=dict(pedestal_mean_adu=0.0, pedestal_spread_adu=0.0,
                                     noise_adu=50.0), photons_per_frame=0)
    assert low.dark(5).min() == 0
    high = small_sim(detector_kw=dict(pedestal_mean_adu=65500.0, pedestal_spread_adu=0.0,
                                      gain_adu_per_kev=1000.0), charge_cloud_sigma_um=0.0,
                     photons_per_frame=50)
    frames, truth = high.frames(2)
    hit = frames[truth.frame, truth.y.astype(int), truth.x.astype(int)]
    assert np.all(hit == 65535)


# --- reproducibility ------------------------------------------------------------------------

def test_same_seed_same_everything():
    a, b = small_sim(seed=7, photons_per_frame=30), small_sim(seed=7, photons_per_frame=30)
    np.testing.assert_array_equal(a.maps.pedestal, b.maps.pedestal)
    np.testing.assert_array_equal(a.maps.noise, b.maps.noise)
    np.testing.assert_array_equal(a.dark(4), b.dark(4))
    fa, ta = a.frames(4)
    fb, tb = b.frames(4)
    np.testing.assert_array_equal(fa, fb)
    assert_truth_equal(ta, tb)


def test_different_seed_differs():
    a, b = small_sim(seed=1, photons_per_frame=30), small_sim(seed=2, photons_per_frame=30)
    assert not np.array_equal(a.maps.pedestal, b.maps.pedestal)
    assert not np.array_equal(a.dark(1), b.dark(1))
    assert not np.array_equal(a.frames(1)[0], b.frames(1)[0])


def test_chunk_independence():
    sim = small_sim(photons_per_frame=40, pedestal_drift_adu_per_frame=0.5)
    frames, truth = sim.frames(10)
    chunks = list(sim.iter_frames(10, chunk_frames=3))
    assert [len(f) for f, _ in chunks] == [3, 3, 3, 1]
    np.testing.assert_array_equal(np.concatenate([f for f, _ in chunks]), frames)
    assert_truth_equal(Truth.concat(t for _, t in chunks), truth)

    alone, alone_truth = sim.frames(1, start=6)
    np.testing.assert_array_equal(alone[0], frames[6])
    assert_truth_equal(alone_truth, Truth(*(a[truth.frame == 6] for a in
                                            (truth.frame, truth.y, truth.x,
                                             truth.energy_kev, truth.line))))
    later, later_truth = next(sim.iter_frames(2, chunk_frames=5, start=8))
    np.testing.assert_array_equal(later, frames[8:])
    assert set(later_truth.frame) == {8, 9}

    dark = sim.dark(7)
    np.testing.assert_array_equal(sim.dark(3, start=4), dark[4:])
    np.testing.assert_array_equal(np.concatenate(list(sim.iter_dark(7, chunk_frames=2))), dark)


def test_dark_and_data_use_separate_streams():
    sim = small_sim(photons_per_frame=0)
    assert not np.array_equal(sim.dark(1)[0], sim.frames(1)[0][0])


def test_maps_and_dark_frames_do_not_depend_on_the_beam():
    a = small_sim(photons_per_frame=10)
    b = small_sim(photons_per_frame=500, lines=((17.5, 1.0),), charge_cloud_sigma_um=2.0)
    np.testing.assert_array_equal(a.maps.pedestal, b.maps.pedestal)
    np.testing.assert_array_equal(a.dark(3), b.dark(3))


def test_maps_are_read_only():
    sim = small_sim()
    with pytest.raises(ValueError):
        sim.maps.pedestal[0, 0] = 0


def test_seed_none_is_recorded_and_repeatable():
    sim = Simulator(Detector(frame_shape=(8, 8)), seed=None)
    again = Simulator(Detector(frame_shape=(8, 8)), seed=sim.seed)
    np.testing.assert_array_equal(sim.dark(2), again.dark(2))


# --- photon statistics ----------------------------------------------------------------------

def test_photon_count_is_poisson_with_the_requested_mean():
    rate, n = 60.0, 300
    _, truth = small_sim((16, 16), photons_per_frame=rate, charge_cloud_sigma_um=0.0).frames(n)
    counts = np.bincount(truth.frame, minlength=n)
    assert abs(counts.mean() - rate) < 5 * math.sqrt(rate / n)
    # Poisson: variance equals mean; the sample variance has rms ~ rate * sqrt(2 / n).
    assert abs(counts.var(ddof=1) - rate) < 5 * rate * math.sqrt(2 / n)


def test_line_ratio_and_energies():
    beam_lines = ((8.05, 0.87), (8.90, 0.13))
    _, truth = small_sim((16, 16), photons_per_frame=500, lines=beam_lines).frames(20)
    n = len(truth)
    frac_kb = np.mean(truth.line == 1)
    assert abs(frac_kb - 0.13) < 5 * math.sqrt(0.13 * 0.87 / n)
    np.testing.assert_array_equal(truth.energy_kev[truth.line == 0], 8.05)
    np.testing.assert_array_equal(truth.energy_kev[truth.line == 1], 8.90)


def test_relative_intensities_are_normalised():
    beam = Beam(lines=((5.0, 2.0), (6.0, 6.0), (7.0, 0.0)))
    np.testing.assert_allclose(beam.line_probabilities, [0.25, 0.75, 0.0])
    _, truth = small_sim((16, 16), photons_per_frame=200, lines=beam.lines).frames(10)
    assert not np.any(truth.line == 2)
    assert abs(np.mean(truth.line == 1) - 0.75) < 5 * math.sqrt(0.75 * 0.25 / len(truth))


def test_positions_are_uniform():
    _, truth = small_sim((10, 20), photons_per_frame=400).frames(10)
    n = len(truth)
    # Sub-pixel offsets and whole rows are uniform: mean 1/2, rms of the mean 1/sqrt(12 n).
    for frac in (truth.y % 1, truth.x % 1, truth.y / 10, truth.x / 20):
        assert abs(frac.mean() - 0.5) < 5 / math.sqrt(12 * n)


# --- signal model ---------------------------------------------------------------------------

def signal(frames, maps):
    return frames.astype(np.float64) - maps.pedestal


@pytest.mark.parametrize("gain_spread", [0.0, 0.1])
def test_energy_conservation_without_sharing(gain_spread):
    # With no charge cloud each photon deposits energy * gain of the pixel it hit.
    sim = small_sim(detector_kw=dict(gain_spread=gain_spread), photons_per_frame=30,
                    charge_cloud_sigma_um=0.0)
    n = 20
    frames, truth = sim.frames(n)
    expected = truth.energy_kev * sim.maps.gain[truth.y.astype(int), truth.x.astype(int)]
    measured = signal(frames, sim.maps).sum(axis=(1, 2))
    per_frame = np.bincount(truth.frame, weights=expected, minlength=n)
    # Noise plus rounding, summed over the pixels of a frame.
    sd = math.sqrt(np.sum(sim.maps.noise ** 2 + 1 / 12))
    assert np.all(np.abs(measured - per_frame) < 5 * sd)
    assert abs((measured - per_frame).sum()) < 5 * sd * math.sqrt(n)


def test_gain_map_scales_each_pixel():
    sim = small_sim((40, 40), detector_kw=dict(noise_adu=0.0, noise_spread_adu=0.0,
                                                 gain_spread=0.05),
                    photons_per_frame=10, charge_cloud_sigma_um=0.0)
    gain = sim.maps.gain
    assert abs(gain.mean() / 40.0 - 1) < 5 * 0.05 / 40
    assert gain.std() / gain.mean() == pytest.approx(0.05, rel=0.1)
    frames, truth = sim.frames(10)
    keep = isolated(truth, 1.0)
    iy, ix = truth.y.astype(int), truth.x.astype(int)
    hit = signal(frames, sim.maps)[truth.frame, iy, ix][keep]
    # Noiseless, so only the rounding of the raw value separates it from energy * gain.
    np.testing.assert_allclose(hit, (truth.energy_kev * gain[iy, ix])[keep], atol=0.5 + 1e-9)


def test_energy_conservation_with_sharing_loses_only_charge_outside_the_sensor():
    sigma_um, pitch = 12.0, 25.0
    shape = (32, 32)
    sim = small_sim(shape, photons_per_frame=100, charge_cloud_sigma_um=sigma_um)
    n = 40
    frames, truth = sim.frames(n)
    deposited = np.sum(truth.energy_kev) * sim.detector.gain_adu_per_kev
    measured = signal(frames, sim.maps).sum()
    # A uniform photon loses, per edge of length L, sigma / (sqrt(2 pi) L) of its charge
    # on average (2.4 % here).
    s = sigma_um / pitch
    loss = s / math.sqrt(2 * math.pi) * (2 / shape[0] + 2 / shape[1]) * deposited
    sd = math.sqrt(n * np.sum(sim.maps.noise ** 2 + 1 / 12))
    assert abs(measured - (deposited - loss)) < 5 * sd + 0.15 * loss
    assert 5 * sd < 0.5 * loss  # so the loss is resolved


def sparse_noiseless(sigma_um, shape=(64, 64), n=40, photons=6):
    sim = small_sim(shape, detector_kw=dict(noise_adu=0.0, noise_spread_adu=0.0),
                    photons_per_frame=photons, lines=((8.0, 1.0),),
                    charge_cloud_sigma_um=sigma_um)
    frames, truth = sim.frames(n)
    return sim, signal(frames, sim.maps), truth


def hit_fraction(sim, sig, truth):
    iy, ix = truth.y.astype(int), truth.x.astype(int)
    return sig[truth.frame, iy, ix] / (truth.energy_kev * sim.detector.gain_adu_per_kev)


def test_tiny_cloud_puts_all_charge_in_the_hit_pixel():
    sim, sig, truth = sparse_noiseless(0.01)  # 0.0004 pixel
    # Photons right on a pixel border share their charge even with a tiny cloud.
    off_edge = np.minimum.reduce([truth.y % 1, 1 - truth.y % 1, truth.x % 1, 1 - truth.x % 1])
    keep = isolated(truth, 2.0) & (off_edge > 0.01)
    assert keep.sum() > 100
    # 0.5 ADU of rounding out of 320 ADU.
    np.testing.assert_allclose(hit_fraction(sim, sig, truth)[keep], 1.0, atol=0.005)


def test_large_cloud_spreads_the_charge():
    sim, sig, truth = sparse_noiseless(25.0)  # one pixel pitch
    keep = isolated(truth, 10.0)
    assert keep.sum() > 50
    frac = hit_fraction(sim, sig, truth)[keep]
    # At best (photon at the pixel centre) the hit pixel holds (2 Phi(0.5) - 1)^2 of it.
    assert np.all(frac <= (2 * ndtr(0.5) - 1) ** 2 + 0.005)
    assert np.all(frac > 0.02)


def test_default_cloud_depends_on_the_sub_pixel_position():
    sim, sig, truth = sparse_noiseless(6.0, n=150)
    keep = isolated(truth, 4.0)
    frac = hit_fraction(sim, sig, truth)
    fy, fx = truth.y % 1, truth.x % 1
    centre = keep & (np.abs(fy - 0.5) < 0.1) & (np.abs(fx - 0.5) < 0.1)
    corner = keep & (np.minimum(fy, 1 - fy) < 0.05) & (np.minimum(fx, 1 - fx) < 0.05)
    assert centre.sum() >= 10 and corner.sum() >= 3
    # sigma = 0.24 px: a photon 0.4 px from the nearest edge keeps Phi(0.4 / 0.24)^2 ~ 0.9.
    assert np.all(frac[centre] > 0.85)
    # Within 0.05 px of a corner the hit pixel holds between Phi(-0.21)^2 and Phi(0.21)^2.
    assert np.all((frac[corner] > 0.15) & (frac[corner] < 0.36))


def test_centre_of_gravity_follows_the_position_convention():
    sim, sig, truth = sparse_noiseless(12.0, n=20)
    keep = isolated(truth, 6.0)
    iy, ix = truth.y.astype(int), truth.x.astype(int)
    ny, nx = sig.shape[1:]
    inside = keep & (iy >= 2) & (iy < ny - 2) & (ix >= 2) & (ix < nx - 2)
    assert inside.sum() > 50
    offsets = np.arange(-2, 3)
    for k, y0, x0, y, x in zip(truth.frame[inside], iy[inside], ix[inside],
                               truth.y[inside], truth.x[inside]):
        window = sig[k, y0 - 2:y0 + 3, x0 - 2:x0 + 3]
        # Pixel centres are at index + 0.5.
        cy = np.sum(window.sum(axis=1) * (y0 + offsets + 0.5)) / window.sum()
        cx = np.sum(window.sum(axis=0) * (x0 + offsets + 0.5)) / window.sum()
        assert abs(cy - y) < 0.03 and abs(cx - x) < 0.03


# --- dark frames, drift, defects ------------------------------------------------------------

def test_dark_frames_recover_pedestal_and_noise_maps():
    n = 400
    sim = small_sim((24, 32), detector_kw=dict(noise_spread_adu=1.0))
    dark = sim.dark(n).astype(np.float64)
    noise = sim.maps.noise
    # Rounding to integers adds 1/12 ADU^2 of variance.
    expected_var = noise ** 2 + 1 / 12
    assert np.all(np.abs(dark.mean(axis=0) - sim.maps.pedestal)
                  < 6 * np.sqrt(expected_var / n))
    ratio = dark.var(axis=0, ddof=1) / expected_var
    assert np.all(np.abs(ratio - 1) < 6 * math.sqrt(2 / n))
    assert abs(ratio.mean() - 1) < 5 * math.sqrt(2 / n / ratio.size)
    # The maps vary from pixel to pixel as requested, and the estimate follows them.
    assert 2000 < sim.maps.pedestal.mean() < 3000 and sim.maps.pedestal.std() > 100
    assert np.corrcoef(dark.std(axis=0).ravel(), noise.ravel())[0, 1] > 0.9


def test_pedestal_drift_applies_to_data_frames_by_number():
    drift = 2.0
    sim = small_sim(photons_per_frame=0, pedestal_drift_adu_per_frame=drift)
    frames, _ = sim.frames(3, start=100)
    offsets = signal(frames, sim.maps).mean(axis=(1, 2))
    sd = 5 * math.sqrt(np.mean(sim.maps.noise ** 2) / sim.detector.n_pixels)
    np.testing.assert_allclose(offsets, drift * np.array([100, 101, 102]), atol=sd + 0.01)
    dark_offset = signal(sim.dark(3, start=100), sim.maps).mean()
    assert abs(dark_offset) < sd


def test_dead_and_hot_pixels():
    shape = (40, 50)
    sim = small_sim(shape, detector_kw=dict(dead_fraction=0.02, hot_fraction=0.01,
                                            hot_noise_factor=10.0),
                    photons_per_frame=300, charge_cloud_sigma_um=10.0)
    dead, hot = sim.maps.dead, sim.maps.hot
    assert dead.sum() == 40 and hot.sum() == 20 and not np.any(dead & hot)
    assert np.all(sim.maps.noise[dead] == 0) and np.all(sim.maps.gain[dead] == 0)

    dark = sim.dark(200)
    frames, truth = sim.frames(20)
    constant = np.rint(sim.maps.pedestal[dead])
    # Dead pixels read their pedestal always: no noise and no signal, even when hit.
    assert np.all(dark[:, dead] == constant) and np.all(frames[:, dead] == constant)
    hit = np.zeros(shape, dtype=bool)
    hit[truth.y.astype(int), truth.x.astype(int)] = True
    assert np.any(hit & dead)

    std = dark.astype(np.float64).std(axis=0)
    normal = ~dead & ~hot
    assert std[hot].min() > 3 * std[normal].max()
    np.testing.assert_allclose(std[hot] / sim.maps.noise[hot], 1.0, atol=0.3)
    assert np.median(sim.maps.noise[hot]) == pytest.approx(
        10.0 * np.median(sim.maps.noise[normal]), rel=0.2)


# --- truth, convenience ---------------------------------------------------------------------

def test_truth_concat_and_xarray():
    a = Truth(frame=[0, 0], y=[1.5, 2.5], x=[3.5, 4.5], energy_kev=[8.05, 8.9], line=[0, 1])
    b = Truth(frame=[3], y=[0.25], x=[0.75], energy_kev=[8.05], line=[0])
    both = Truth.concat([a, b])
    assert len(both) == 3
    np.testing.assert_array_equal(both.frame, [0, 0, 3])
    np.testing.assert_array_equal(both.x, [3.5, 4.5, 0.75])
    assert len(Truth.concat([])) == 0
    ds = both.to_xarray()
    assert set(ds.data_vars) == {"frame", "y", "x", "energy_kev", "line"}
    assert ds.sizes["photon"] == 3 and ds["energy_kev"].attrs["units"] == "keV"
    np.testing.assert_array_equal(ds["line"].values, [0, 1, 0])
    with pytest.raises(ValueError, match="equal length"):
        Truth(frame=[0], y=[1.0, 2.0], x=[1.0], energy_kev=[8.0], line=[0])


def test_simulate_run():
    det = Detector(frame_shape=(12, 10))
    run = simulate_run(n_dark=5, n_frames=4, seed=3, detector=det, beam=Beam(photons_per_frame=8))
    assert isinstance(run, SimulatedRun)
    assert run.dark.shape == (5, 12, 10) and run.frames.shape == (4, 12, 10)
    assert run.detector == det and run.seed == 3
    sim = Simulator(det, Beam(photons_per_frame=8), seed=3)
    np.testing.assert_array_equal(run.dark, sim.dark(5))
    frames, truth = sim.frames(4)
    np.testing.assert_array_equal(run.frames, frames)
    assert_truth_equal(run.truth, truth)
    np.testing.assert_array_equal(run.maps.pedestal, sim.maps.pedestal)


# --- validation -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(frame_shape=(0, 5)), "frame_shape"),
    (dict(frame_shape=(5,)), "frame_shape"),
    (dict(frame_shape=(5, 2.5)), "frame_shape"),
    (dict(frame_shape=5), "frame_shape"),
    (dict(pixel_pitch_um=0.0), "pixel_pitch_um must be > 0"),
    (dict(noise_adu=-1.0), "noise_adu must be >= 0"),
    (dict(noise_spread_adu=float("nan")), "noise_spread_adu must be a finite"),
    (dict(pedestal_mean_adu=70000.0), "pedestal_mean_adu must be <= 65535"),
    (dict(gain_adu_per_kev=0.0), "gain_adu_per_kev must be > 0"),
    (dict(gain_spread=-0.1), "gain_spread"),
    (dict(dead_fraction=1.5), "dead_fraction must be <= 1"),
    (dict(dead_fraction=0.6, hot_fraction=0.6), "dead_fraction \\+ hot_fraction"),
    (dict(hot_noise_factor=0.5), "hot_noise_factor must be >= 1"),
    (dict(noise_adu="loud"), "noise_adu must be a number"),
])
def test_invalid_detector(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Detector(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(photons_per_frame=-1.0), "photons_per_frame must be >= 0"),
    (dict(photons_per_frame=float("inf")), "photons_per_frame must be a finite"),
    (dict(lines=()), "non-empty"),
    (dict(lines=((0.0, 1.0),)), r"lines\[0\] energy_kev must be > 0"),
    (dict(lines=((8.0, 1.0), (-3.0, 1.0))), r"lines\[1\] energy_kev must be > 0"),
    (dict(lines=((8.0, -1.0),)), "relative_intensity must be >= 0"),
    (dict(lines=((8.0, 0.0), (9.0, 0.0))), "sum to 0"),
    (dict(lines=((8.0, 1.0, 2.0),)), "pairs"),
    (dict(lines=8.0), "pairs"),
    (dict(charge_cloud_sigma_um=-1.0), "charge_cloud_sigma_um must be >= 0"),
])
def test_invalid_beam(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Beam(**kwargs)


def test_invalid_simulator_arguments():
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        Simulator(seed=-1)
    with pytest.raises(ValueError, match="charge cloud sigma"):
        Simulator(Detector(frame_shape=(8, 8)), Beam(charge_cloud_sigma_um=500.0))
    sim = small_sim((4, 4))
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        sim.dark(-1)
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        sim.frames(2.5)
    with pytest.raises(ValueError, match="start must be an integer >= 0"):
        sim.frames(1, start=-3)
    with pytest.raises(ValueError, match="chunk_frames must be a positive integer"):
        next(sim.iter_frames(3, chunk_frames=0))


# --- edge and slit illumination ----------------------------------------------------------------

def test_an_edge_absorbs_the_flat_fields_photons_on_its_closed_side():
    from aare_lab.simulate import Edge

    edge = Edge(position=20.0, angle_deg=5.0)
    _, flat = small_sim(seed=4, photons_per_frame=40).frames(20)
    _, shaded = small_sim(seed=4, photons_per_frame=40, illumination=edge).frames(20)
    open_side = edge.distance(flat.y, flat.x) > 0
    assert 0 < len(shaded) < len(flat)
    np.testing.assert_array_equal(shaded.x, flat.x[open_side])
    np.testing.assert_array_equal(shaded.frame, flat.frame[open_side])
    assert np.all(edge.distance(shaded.y, shaded.x) > 0)


def test_a_slit_passes_only_its_width():
    from aare_lab.simulate import Slit

    slit = Slit(position=10.0, angle_deg=-3.0, width=2.5)
    _, truth = small_sim(seed=5, photons_per_frame=200, illumination=slit).frames(5)
    distance = slit.distance(truth.y, truth.x)
    assert len(truth) > 0 and distance.min() > 0 and distance.max() < 2.5
    assert distance.max() > 2.3  # the whole width is open


@pytest.mark.parametrize("beam_kw, message", [
    (dict(illumination="edge"), "Beam.illumination must be None"),
])
def test_illumination_other_than_an_edge_or_slit_is_refused(beam_kw, message):
    with pytest.raises(ValueError, match=message):
        Beam(**beam_kw)


def test_edges_refuse_steep_angles_and_slits_zero_width():
    from aare_lab.simulate import Edge, Slit

    with pytest.raises(ValueError, match="Edge.angle_deg must be <= 45"):
        Edge(1.0, angle_deg=60)
    with pytest.raises(ValueError, match="Slit.width must be > 0"):
        Slit(1.0, width=0)
