"""JUNGFRAU raw decoding, the calibration to keV, and the simulator's gain-switching mode.

Expected values come from a plain-Python implementation of the format and of
``(adc - pedestal[g]) / gain[g]`` written here, pixel by pixel, and from PSI aare's
``apply_calibration`` (in its own interpreter, see `aare_env`), never from the module.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import xarray as xr
from aare_env import aare_python

from aare_lab.detector.jungfrau import FLAG_MEANINGS, JungfrauCalibration, decode
from aare_lab.simulate import Detector, JungfrauBeam, JungfrauDetector, JungfrauSimulator, Simulator

SHAPE = (24, 40)
E_KEV = 12.4


def reference_pixel(value: int, pedestal, gain, y: int, x: int, as_float=float):
    """``(energy, flag name)`` of one raw value, straight from the format description."""
    bits, adc = value >> 14, value & 0x3FFF
    if bits == 0b10:
        return None, "invalid_gain"
    if value in (0x4000, 0xFFFF):
        return None, "readout_error"
    if value in (0xC000, 0x3FFF):
        return None, "saturated"
    g = {0b00: 0, 0b01: 1, 0b11: 2}[bits]
    if gain[g][y][x] == 0:
        return None, "uncalibrated"
    ped, gn = as_float(pedestal[g][y][x]), as_float(gain[g][y][x])
    return (as_float(adc) - ped) / gn, "valid"


def reference_convert(raw: np.ndarray, pedestal, gain, dtype="float64"):
    as_float = float if dtype == "float64" else np.float32
    energy = np.full(raw.shape, np.nan, dtype)
    flags = np.zeros(raw.shape, np.uint8)
    pedestal, gain = pedestal.tolist(), gain.tolist()
    for index in np.ndindex(*raw.shape):
        y, x = index[-2:]
        value, flag = reference_pixel(int(raw[index]), pedestal, gain, y, x, as_float)
        flags[index] = FLAG_MEANINGS.index(flag)
        if value is not None:
            energy[index] = value
    return energy, flags


def small_sim(shape=SHAPE, seed=0, detector_kw=None, **beam_kw) -> JungfrauSimulator:
    return JungfrauSimulator(JungfrauDetector(frame_shape=shape, **(detector_kw or {})),
                             JungfrauBeam(**beam_kw), seed=seed)


@pytest.fixture(scope="module")
def switching_run():
    """Frames with G0, G1 and G2 pixels, a dead (uncalibrated) pixel, and every special
    raw value planted at known pixels."""
    sim = small_sim(spots_per_frame=3, spot_photons=(2000, 9000), photons_per_frame=40,
                    detector_kw={"dead_fraction": 0.002})
    frames, _ = sim.frames(3)
    special = [0xC000, 0x4000, 0xFFFF, 0x8123, 0xBFFF, 0x3FFF, 0x0000, 0x7FFF]
    frames[1, 0, :len(special)] = special
    return sim, frames


# --- the raw format -------------------------------------------------------------------------

def test_decode_every_raw_value():
    raw = np.arange(1 << 16, dtype=np.uint16)
    stage, adc = decode(raw)
    expected_stage = [{0: 0, 1: 1, 2: 3, 3: 2}[v // 16384] for v in range(1 << 16)]
    assert stage.dtype == np.uint8 and adc.dtype == np.uint16
    np.testing.assert_array_equal(stage, expected_stage)
    np.testing.assert_array_equal(adc, [v % 16384 for v in range(1 << 16)])


def test_decode_refuses_other_dtypes():
    with pytest.raises(TypeError, match="uint16"):
        decode(np.zeros(3, np.int32))


def test_conversion_of_every_raw_value_is_exact():
    """All 65536 raw values, on a calibration with varied per-pixel constants."""
    rng = np.random.default_rng(5)
    shape = (256, 256)
    pedestal = np.stack([rng.uniform(1000, 4000, shape), rng.uniform(12000, 15000, shape),
                         rng.uniform(12000, 15000, shape)])
    gain = np.stack([rng.uniform(35, 45, shape), -rng.uniform(1.2, 1.8, shape),
                     -rng.uniform(0.08, 0.14, shape)])
    gain[:, 7, 9] = 0.0
    cal = JungfrauCalibration(pedestal=pedestal, gain=gain)
    raw = np.arange(1 << 16, dtype=np.uint16).reshape(shape)
    energy, flags = cal.convert(raw)
    ref_energy, ref_flags = reference_convert(raw, pedestal, gain)
    np.testing.assert_array_equal(flags, ref_flags)
    np.testing.assert_array_equal(energy, ref_energy)
    counts = np.bincount(flags.ravel(), minlength=len(FLAG_MEANINGS))
    assert dict(zip(FLAG_MEANINGS, counts.tolist())) == {
        "valid": 3 * 16384 - 5, "invalid_gain": 16384, "readout_error": 2, "saturated": 2,
        "uncalibrated": 1}


# --- conversion on simulated frames ----------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_conversion_equals_the_formula_on_simulated_frames(switching_run, dtype):
    sim, frames = switching_run
    stage = frames >> 14
    assert (stage == 1).sum() > 20 and (stage == 3).sum() > 3  # G1 and G2 are exercised
    cal = sim.calibration
    energy, flags = cal.convert(frames, dtype=dtype)
    ref_energy, ref_flags = reference_convert(frames, cal.pedestal, cal.gain, dtype)
    assert energy.dtype == dtype
    np.testing.assert_array_equal(flags, ref_flags)
    np.testing.assert_array_equal(energy, ref_energy)
    assert set(np.unique(flags).tolist()) == set(range(len(FLAG_MEANINGS)))


APPLY_CALIBRATION = """
import sys
import aare, numpy as np
raw, pedestal, gain, out = sys.argv[1:]
energy = aare.apply_calibration(np.load(raw), pd=np.load(pedestal), cal=np.load(gain))
np.save(out, np.asarray(energy))
"""


@pytest.mark.aare
@pytest.mark.parametrize("version", ["2026.3.17", "2026.9.30"])
def test_conversion_equals_aare_apply_calibration(switching_run, tmp_path, version):
    """PSI aare's own conversion agrees bit for bit wherever a pixel is valid (aare flags
    nothing: it reads gain bits 10 as G0 and converts saturated values)."""
    python = aare_python(version)
    if python is None:
        pytest.skip(f"aare {version} is not installed: run AARE_VERSION={version} "
                    f"VENV=/opt/aare-{version} bash tools/install_aare.sh "
                    f"(or set AARE_PYTHON_{version.replace('.', '_')})")
    sim, frames = switching_run
    paths = [tmp_path / f"{name}.npy" for name in ("raw", "pedestal", "gain", "aare")]
    for path, array in zip(paths, (frames, sim.calibration.pedestal, sim.calibration.gain)):
        np.save(path, array)
    subprocess.run([python, "-c", APPLY_CALIBRATION, *map(str, paths)], check=True,
                   timeout=120)
    energy, flags = sim.calibration.convert(frames)
    valid = flags == 0
    assert ((frames >> 14)[valid] == 3).sum() > 3
    np.testing.assert_array_equal(energy[valid], np.load(paths[3])[valid])


def test_a_given_g0_pedestal_replaces_the_calibrations(switching_run):
    sim, frames = switching_run
    cal = sim.calibration
    tracked = cal.pedestal[0] + np.linspace(-30, 30, cal.pedestal[0].size).reshape(SHAPE)
    energy, _ = cal.convert(frames[2], pedestal_g0=tracked)
    pedestal = cal.pedestal.copy()
    pedestal[0] = tracked
    ref_energy, _ = reference_convert(frames[2], pedestal, cal.gain)
    np.testing.assert_array_equal(energy, ref_energy)
    assert energy.shape == SHAPE


def test_to_energy_dataset(switching_run):
    sim, frames = switching_run
    ds = sim.calibration.to_energy(frames)
    assert ds["energy"].dims == ("frame", "y", "x") and ds["energy"].attrs["units"] == "keV"
    assert ds["flag"].attrs["flag_meanings"].split() == list(FLAG_MEANINGS)
    assert ds["gain_stage"].attrs["flag_meanings"] == "G0 G1 G2 invalid"
    np.testing.assert_array_equal(ds["gain_stage"] == 2, (frames >> 14) == 3)
    np.testing.assert_array_equal(ds["gain_stage"] == 3, (frames >> 14) == 2)
    assert sim.calibration.to_energy(frames[0])["energy"].dims == ("y", "x")


def test_conversion_refuses_bad_input(switching_run):
    sim, frames = switching_run
    cal = sim.calibration
    with pytest.raises(TypeError, match="uint16"):
        cal.convert(frames.astype(np.int32))
    with pytest.raises(ValueError, match=r"shape 24x39 .* calibration is for 24x40"):
        cal.convert(frames[:, :, :-1])
    with pytest.raises(ValueError, match="pedestal_g0"):
        cal.convert(frames, pedestal_g0=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="pedestal_g0"):
        cal.convert(frames, pedestal_g0=np.full(SHAPE, np.nan))
    with pytest.raises(ValueError, match="float32"):
        cal.convert(frames, dtype="int32")


# --- the calibration's validation and files --------------------------------------------------

def constant_calibration(shape=(2, 3), pedestal=(3000.0, 13500.0, 14200.0),
                         gain=(40.0, -1.5, -0.1)):
    return (np.stack([np.full(shape, v) for v in pedestal]),
            np.stack([np.full(shape, v) for v in gain]))


@pytest.mark.parametrize("change, message", [
    (lambda p, g: (p[:2], g[:2]), r"shape \(3, ny, nx\)"),
    (lambda p, g: (p, g[:, :1]), "shapes differ"),
    (lambda p, g: (p.astype(bool), g), "must be numbers"),
    (lambda p, g: (np.where(p == 3000.0, np.nan, p), g), "NaN or infinite"),
    (lambda p, g: (p + 5000, g), "outside the 14-bit ADC range"),
    (lambda p, g: (p, np.abs(g)), "gain of G1 is positive .* PSI gain map files"),
    (lambda p, g: (p, -g), "gain of G0 is negative"),
])
def test_calibration_validation(change, message):
    pedestal, gain = change(*constant_calibration())
    with pytest.raises(ValueError, match=message):
        JungfrauCalibration(pedestal=pedestal, gain=gain)


def test_calibration_is_read_only():
    cal = JungfrauCalibration(*constant_calibration())
    with pytest.raises(ValueError, match="read-only"):
        cal.gain[0, 0, 0] = 1.0


def test_save_and_load_round_trip(tmp_path, switching_run):
    cal = switching_run[0].calibration
    path = tmp_path / "cal.nc"
    cal.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["cal.nc"]  # no partial file left
    back = JungfrauCalibration.load(path)
    np.testing.assert_array_equal(back.pedestal, cal.pedestal)
    np.testing.assert_array_equal(back.gain, cal.gain)
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        assert ds["pedestal"].attrs["units"] == "ADU"
        assert ds["gain"].attrs["units"] == "ADU/keV"
        assert ds["gain_stage"].attrs["flag_meanings"] == "G0 G1 G2"
        assert ds.attrs["Conventions"].startswith("CF-")


def test_load_names_the_file_it_refuses(tmp_path):
    with pytest.raises(FileNotFoundError):
        JungfrauCalibration.load(tmp_path / "missing.nc")
    text = tmp_path / "notes.nc"
    text.write_text("not netCDF")
    with pytest.raises(ValueError, match=r"notes.nc is not a JUNGFRAU calibration file"):
        JungfrauCalibration.load(text)
    other = tmp_path / "other.nc"
    xr.Dataset({"a": ("x", [1, 2])}).to_netcdf(other, engine="h5netcdf")
    with pytest.raises(ValueError, match=r"other.nc is not a JUNGFRAU calibration file"):
        JungfrauCalibration.load(other)


# --- the simulator's JUNGFRAU mode -----------------------------------------------------------

def test_default_module_switches_like_a_real_one_at_high_flux():
    sim = JungfrauSimulator(seed=11)
    frames, truth = sim.frames(4)
    assert frames.shape == (4, 512, 1024) and frames.dtype == np.uint16
    bits = frames >> 14
    # Per frame on average: the counts vary with the few brightest spots.
    n_g1, n_g2 = (bits == 1).sum() / 4, (bits == 3).sum() / 4
    assert 200 <= n_g1 <= 800 and 10 <= n_g2 <= 80, (n_g1, n_g2)
    assert not (bits == 2).any()
    np.testing.assert_allclose(truth.energy_kev, E_KEV)


@pytest.mark.parametrize("common_mode", [{}, {"common_mode_sigma_adu": 8.0,
                                           "frame_shape": (256, 512)}])
def test_dark_frames_are_g0_and_those_of_the_plain_simulator(common_mode):
    det = JungfrauDetector(**{"frame_shape": SHAPE, **common_mode})
    dark = JungfrauSimulator(det, seed=4).dark(5)
    assert not (dark >> 14).any()
    plain = Simulator(Detector(**{f: getattr(det, f) for f in Detector.__dataclass_fields__}),
                      seed=4)
    np.testing.assert_array_equal(dark, plain.dark(5))


def test_frames_do_not_depend_on_chunking():
    sim = small_sim(spots_per_frame=2)
    frames, truth = sim.frames(4)
    again, truth_again = sim.frames(2, start=2)
    np.testing.assert_array_equal(again, frames[2:])
    np.testing.assert_array_equal(truth_again.x, truth.x[truth.frame >= 2])
    np.testing.assert_array_equal(sim.dark(3)[1:], sim.dark(2, start=1))


def test_beyond_g2_the_pixel_saturates_and_is_flagged():
    sim = small_sim(spots_per_frame=4, spot_photons=(5e4, 5e4), spot_sigma_px=0.0,
                    photons_per_frame=0)
    frames, truth = sim.frames(1)
    y, x = int(truth.y[0]), int(truth.x[0])
    assert frames[0, y, x] == 0xC000
    energy, flags = sim.calibration.convert(frames)
    assert np.isnan(energy[0, y, x]) and FLAG_MEANINGS[flags[0, y, x]] == "saturated"


@pytest.mark.parametrize("kw, message", [
    ({"g1_gain_adu_per_kev": 1.5}, "g1_gain_adu_per_kev must be <= 0"),
    ({"g2_gain_adu_per_kev": 0.0}, "must be < 0"),
    ({"g2_switch_kev": 100.0}, "must be above g1_switch_kev"),
    ({"g1_switch_kev": 400.0}, "beyond the 14-bit range"),
    ({"g2_switch_kev": 9500.0}, "below 0"),
    ({"g1_pedestal_adu": 17000.0}, "g1_pedestal_adu must be <= 16383"),
])
def test_detector_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        JungfrauDetector(**kw)


@pytest.mark.parametrize("kw, message", [
    ({"spot_photons": (10.0, 5.0)}, "spot_photons high must be >= 10"),
    ({"spot_photons": 10.0}, "must be a pair"),
    ({"spots_per_frame": -1}, "spots_per_frame must be >= 0"),
])
def test_beam_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        JungfrauBeam(**kw)


def test_the_simulator_needs_jungfrau_parts():
    with pytest.raises(ValueError, match="JungfrauDetector"):
        JungfrauSimulator(Detector())


# --- physics: the converted energies ---------------------------------------------------------

def deposits(truth, n_frames: int, shape) -> np.ndarray:
    """Energy per pixel when each photon leaves all its charge in the pixel it hits."""
    ny, nx = shape
    index = (truth.frame * ny + np.floor(truth.y).astype(int)) * nx + np.floor(truth.x).astype(int)
    return np.bincount(index, truth.energy_kev, minlength=n_frames * ny * nx).reshape(
        n_frames, ny, nx)


@pytest.fixture(scope="module")
def point_charge_run():
    """Spots of photons that leave all their charge in one pixel, so that a pixel holds a
    whole number of photons."""
    shape, n = (64, 128), 12
    sim = small_sim(shape, seed=7, spots_per_frame=8, spot_photons=(1000, 30000),
                    photons_per_frame=300, charge_cloud_sigma_um=0.0, spot_sigma_px=1.5)
    frames, truth = sim.frames(n)
    energy, flags = sim.calibration.convert(frames)
    return sim, frames, energy, flags, deposits(truth, n, shape)


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_converted_energy_is_the_deposit_within_the_noise(point_charge_run, stage):
    sim, frames, energy, flags, deposit = point_charge_run
    det = sim.detector
    in_stage = ((frames >> 14) == (0, 1, 3)[stage]) & (flags == 0)
    error = (energy - deposit)[in_stage]
    assert in_stage.sum() > (5000, 1000, 100)[stage]
    noise = np.sqrt((sim.stage_maps.noise[stage][in_stage.any(axis=0)] ** 2).mean())
    gain = (det.gain_adu_per_kev, det.g1_gain_adu_per_kev, det.g2_gain_adu_per_kev)[stage]
    expected = np.sqrt(noise ** 2 + 1 / 12) / abs(gain)  # electronic noise and rounding
    assert abs(error.mean()) < 4 * expected / np.sqrt(error.size)
    assert error.std() == pytest.approx(expected, rel=0.15)


def test_spectrum_peaks_at_the_photon_energy_and_its_multiples(point_charge_run):
    _, frames, energy, flags, _ = point_charge_run
    g0 = energy[((frames >> 14) == 0) & (flags == 0)]
    for k in (1, 2, 3):
        near = g0[np.abs(g0 - k * E_KEV) < 0.4 * E_KEV]
        assert near.size > 100
        assert np.median(near) == pytest.approx(k * E_KEV, rel=0.02)
    # G1 holds 20 to 480 photons per pixel; its noise (2 keV) still resolves them.
    g1 = energy[((frames >> 14) == 1) & (flags == 0)]
    residual = g1 - E_KEV * np.round(g1 / E_KEV)
    assert g1.size > 300 and abs(residual.mean()) < 0.3
    assert residual.std() < 0.75 * E_KEV / np.sqrt(12)  # a flat residual: no peaks


def test_cluster_sums_of_isolated_photons_peak_at_the_photon_energy():
    shape, n = (64, 128), 30
    sim = small_sim(shape, seed=8, spots_per_frame=0, photons_per_frame=60)
    frames, truth = sim.frames(n)
    energy, flags = sim.calibration.convert(frames)
    assert (flags == 0).all() and not (frames >> 14).any()
    iy, ix = np.floor(truth.y).astype(int), np.floor(truth.x).astype(int)
    inner = (iy >= 1) & (iy < shape[0] - 1) & (ix >= 1) & (ix < shape[1] - 1)
    sums = []
    for k, y, x in zip(truth.frame[inner], iy[inner], ix[inner]):
        others = (truth.frame == k) & (np.abs(iy - y) <= 2) & (np.abs(ix - x) <= 2)
        if others.sum() == 1:
            sums.append(energy[k, y - 1:y + 2, x - 1:x + 2].sum())
    # The cloud (0.13 pixel rms) stays inside the 3x3, so a sum is E plus symmetric noise.
    assert len(sums) > 1000
    assert np.median(sums) == pytest.approx(E_KEV, rel=0.02)
