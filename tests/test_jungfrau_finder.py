"""The finders on raw JUNGFRAU frames with a calibration (docs/algorithm.md, "JUNGFRAU gain
switching"): the spectrum in keV, flagged and switched pixels, the conversion against the
formula written here, the serial and frozen finders against tests/reference.py, and the
cuda finder against the frozen one (on a GPU).

Expected values come from the simulator's truth, from the raw format decoded here, and from
the independent reference; never from `aare_lab.finders`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from reference import RefCalibration, RefPedestal, common_mode, find_frame

from aare_lab import Branch, FrozenFinder, Pedestal, SerialFinder
from aare_lab.cli import main
from aare_lab.detector.jungfrau import JungfrauCalibration
from aare_lab.model.results import load_result, save_result, spectrum
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import find_clusters
from aare_lab.simulate import JungfrauBeam, JungfrauDetector, JungfrauSimulator

# The dark runs here are short on purpose (small, fast tests).
pytestmark = pytest.mark.filterwarnings("ignore:the noise estimated from")
FINDERS = {"serial": SerialFinder, "frozen": FrozenFinder}
SHAPE = (64, 128)
E_KEV = 12.4
N_DARK = 100
#: Raw values that carry no energy, planted in isolated pixels of the run below:
#: saturated (G2 at 0, G0 at full scale), readout errors, invalid gain bits.
SPECIAL = (0xC000, 0x3FFF, 0x4000, 0xFFFF, 0x8123, 0xBFFF)


def decode(raw):
    """``(g, adc)`` per pixel from the format: g = 0, 1, 2 for bits 00, 01, 11, else -1."""
    bits = raw.astype(np.int64) // 16384
    g = np.select([bits == 0, bits == 1, bits == 3], [0, 1, 2], -1)
    return g, raw.astype(np.int64) % 16384


def flagged(raw, gain):
    """Pixels that carry no energy: invalid bits, the special values, gain 0 of their stage."""
    g, _ = decode(raw)
    rows, cols = np.indices(raw.shape[-2:])
    uncalibrated = gain[np.maximum(g, 0), rows, cols] == 0
    return (g < 0) | np.isin(raw, SPECIAL[:4]) | uncalibrated


@pytest.fixture(scope="module")
def run():
    """Point-charge photons (so that a pixel or a 3x3 holds whole photons), spots that
    switch to G1 and G2, dead (uncalibrated) pixels, and the special values planted."""
    sim = JungfrauSimulator(
        JungfrauDetector(frame_shape=SHAPE, dead_fraction=0.002),
        JungfrauBeam(photons_per_frame=150, charge_cloud_sigma_um=0.0, spots_per_frame=1.5,
                     spot_photons=(300, 10000), spot_sigma_px=1.0), seed=3)
    dark = sim.dark(N_DARK)
    frames, truth = sim.frames(30)
    for k, value in enumerate(SPECIAL):
        frames[k::len(SPECIAL), 10, 10 + 20 * k] = value
    return sim, dark, frames, truth


def trained(dark, dtype="float64", noise="running"):
    ped = Pedestal(SHAPE, N_DARK, dtype, noise)
    ped.push_dark(dark)
    return ped


@pytest.fixture(scope="module")
def results(run):
    """Each finder's result on the run (float64 pedestal and windows), and its pedestal."""
    sim, dark, frames, _ = run
    out = {}
    for name, cls in FINDERS.items():
        ped = trained(dark)
        result = cls(ped, 5.0, 3, window_dtype="float64", calibration=sim.calibration).find(
            frames, branch_maps=True, progress=False)
        out[name] = result, ped
    return out


# ------------------------------------------------------------------ physics
@pytest.mark.parametrize("model", list(FINDERS))
def test_spectrum_peaks_at_the_photon_energy_and_its_multiples(results, model):
    result, _ = results[model]
    energy = result["energy"].to_numpy()
    for k in (1, 2, 3):
        near = energy[np.abs(energy - k * E_KEV) < 0.3 * E_KEV]
        assert near.size > (1000, 100, 10)[k - 1], k
        assert np.median(near) == pytest.approx(k * E_KEV, rel=0.02)
    hist = spectrum(result, bins=np.arange(2.0, 45.0, 1.0))
    assert hist["energy"].attrs["units"] == "keV"
    assert abs(float(hist["energy"][int(np.argmax(hist.to_numpy()))]) - E_KEV) < 1.0


def test_switched_pixels_are_in_the_run(run, results):
    _, _, frames, _ = run
    g, _ = decode(frames)
    genuine = ~np.isin(frames, SPECIAL)
    assert ((g == 1) & genuine).sum() > 100 and ((g == 2) & genuine).sum() > 5
    # Clusters far above G0's range: the spots, in keV.
    assert (results["frozen"][0]["energy"] > 300).sum() >= 10


# ------------------------------------------------------------------ flags
@pytest.mark.parametrize("model", list(FINDERS))
def test_flagged_pixels_are_never_photons_and_read_zero(run, results, model):
    sim, _, frames, _ = run
    result, _ = results[model]
    bad = flagged(frames, sim.calibration.gain)
    np.testing.assert_array_equal(result["n_flagged"], bad.sum(axis=(1, 2)))
    assert result["n_flagged"].sum() >= 30
    f, y, x = (result[k].to_numpy() for k in ("frame_number", "y", "x"))
    assert not bad[f, y, x].any()
    maps = result["branch_map"].to_numpy()
    assert (maps[bad] == 1).all()  # NEG_SKIP: nothing stored, nothing pushed
    # Every tap of a stored window that is flagged holds exactly 0 keV.
    windows = result["window"].to_numpy()
    taps = 0
    for c, (k, i, j) in enumerate(zip(f, y, x)):
        for a in range(3):
            for b in range(3):
                yy, xx = i - 1 + a, j - 1 + b
                if 0 <= yy < SHAPE[0] and 0 <= xx < SHAPE[1] and bad[k, yy, xx]:
                    assert windows[c, a, b] == 0.0
                    taps += 1
    assert taps > 0
    assert np.isfinite(windows).all()


@pytest.mark.parametrize("model", list(FINDERS))
def test_g1_and_g2_pixels_never_update_the_pedestal(run, model):
    """Pixels planted in G1 and G2 at their pedestal read about 0 keV, are decided
    QUIET_UPDATE and still leave their G0 pedestal as trained; their G0 neighbours move."""
    sim, dark, frames, _ = run
    cal = sim.calibration
    frames = frames[:6].copy()
    # G2 reads 9 keV per ADU: a pixel whose G2 pedestal is nearly a whole number of ADU.
    g2 = cal.pedestal[2, 30, 60:100]
    planted = [(30, 40, 1), (30, 60 + int(np.argmin(np.abs(g2 - np.rint(g2)))), 2)]
    for i, j, g in planted:
        adc = int(np.rint(cal.pedestal[g, i, j]))
        frames[:, i, j] = (0b01 if g == 1 else 0b11) << 14 | adc
    ped = trained(dark)
    start = ped.state()
    result = FINDERS[model](ped, 5.0, 3, window_dtype="float64", calibration=cal).find(
        frames, branch_maps=True, progress=False)
    maps = result["branch_map"].to_numpy()
    for i, j, _ in planted:
        assert (maps[:, i, j] == 6).sum() >= 4     # QUIET_UPDATE, most frames
        for key in ("s", "s2"):
            assert ped.state()[key][i, j] == start[key][i, j]
        assert ped.state()["s"][i, j + 3] != start["s"][i, j + 3]


# ------------------------------------------------------------------ the formula, exactly
def test_stored_windows_are_the_formula_of_the_frame_start_pedestal(run):
    """The frozen finder, one frame per call: every stored tap equals
    ``(adc - pedestal[g]) / gain[g]`` with the G0 pedestal as it was at the frame's start
    (float64: the finder's value is ``(adc - mean) / gain[0]`` exactly), 0 if flagged."""
    sim, dark, frames, _ = run
    cal = sim.calibration
    ped = trained(dark)
    finder = FrozenFinder(ped, 5.0, 3, window_dtype="float64", calibration=cal)
    bad = flagged(frames, cal.gain)
    g, adc = decode(frames)
    checked = np.zeros(3, int)
    for k in range(len(frames)):
        mean = ped.mean.copy()
        result = finder.find(frames[k:k + 1], [k], progress=False)
        for i, j, window in zip(result["y"].to_numpy(), result["x"].to_numpy(),
                                result["window"].to_numpy()):
            for a in range(3):
                for b in range(3):
                    yy, xx = i - 1 + a, j - 1 + b
                    if not (0 <= yy < SHAPE[0] and 0 <= xx < SHAPE[1]):
                        continue
                    stage = g[k, yy, xx]
                    if bad[k, yy, xx]:
                        expected = 0.0
                    else:
                        pedestal = mean[yy, xx] if stage == 0 else cal.pedestal[stage, yy, xx]
                        expected = (float(adc[k, yy, xx]) - float(pedestal)) \
                            / float(cal.gain[stage, yy, xx])
                        checked[stage] += 1
                    assert window[a, b] == expected, (k, yy, xx, stage)
    assert checked[0] > 1000 and checked[1] > 20 and checked[2] > 0, checked


# ------------------------------------------------------------------ vs reference
def reference_case(seed, shape=(10, 13), n_dark=6, n_frames=6):
    """Raw frames with every status: G0 around 3000 ADU with photons and an offset per
    frame, G1 and G2 pixels, the special values, and uncalibrated pixels."""
    rng = np.random.default_rng(seed)
    pedestal = np.stack([rng.uniform(2900, 3100, shape), rng.uniform(13000, 14000, shape),
                         rng.uniform(13500, 14500, shape)])
    gain = np.stack([rng.uniform(35, 45, shape), -rng.uniform(1.3, 1.7, shape),
                     -rng.uniform(0.09, 0.13, shape)])
    gain[:, 2, 3] = 0.0
    gain[1, 5, 5] = 0.0
    gain[0, 7, 8] = 0.0   # flagged in G0, calibrated in G1: its pushed value is never read
    dark = np.rint(rng.normal(pedestal[0], 3.0, (n_dark, *shape))).astype(np.uint16)
    adc = rng.normal(pedestal[0], 3.0, (n_frames, *shape))
    adc += rng.choice([-15.0, 0.0, 9.0], n_frames)[:, None, None]
    hits = rng.random(adc.shape) < 0.05
    adc[hits] += rng.choice([60, 400, 1200], hits.sum())
    raw = np.clip(np.rint(adc), 0, 16382).astype(np.uint16)
    for g, bits in ((1, 0b01), (2, 0b11)):
        where = rng.random(raw.shape) < 0.04
        level = pedestal[g] + gain[g] * rng.uniform(0, 400 if g == 1 else 4000, raw.shape)
        raw[where] = (bits << 14) | np.clip(np.rint(level), 0, 16383).astype(np.uint16)[where]
    specials = rng.random(raw.shape) < 0.02
    raw[specials] = rng.choice(SPECIAL, specials.sum())
    raw[1::2, 7, 8] = (0b01 << 14) | int(pedestal[1, 7, 8] + gain[1, 7, 8] * 200)
    return dark, raw, JungfrauCalibration(pedestal=pedestal, gain=gain)


@pytest.mark.parametrize("model", list(FINDERS))
@pytest.mark.parametrize("dtype, noise, with_cm, size", [
    ("float64", "running", False, (3, 3)),
    ("float32", "fixed", True, (3, 3)),
    # Other windows: the CPU finders' general paths.
    ("float64", "running", False, (5, 3)),
    ("float32", "fixed", True, (3, 5)),
])
def test_finders_match_the_reference(model, dtype, noise, with_cm, size):
    dark, frames, cal = reference_case(hash((model, dtype)) % 2**32)
    shape = frames.shape[1:]
    labels = np.random.default_rng(1).integers(-1, 2, shape) if with_cm else None
    ref = RefPedestal(shape, len(dark), dtype, noise)
    for d in dark:
        ref.push_dark(d.tolist())
    ref_cal = RefCalibration(cal.pedestal, cal.gain, dtype)
    expected, n_found, codes, offsets = [], [], [], []
    with np.errstate(divide="ignore", invalid="ignore"):   # the uncalibrated G0 pixel
        for k, frame in enumerate(frames):
            if with_cm:
                offsets.append(common_mode(ref, frame.tolist(), 5.0, labels.tolist(), ref_cal))
            cl, found, c = find_frame(ref, frame.tolist(), 5.0, size, model,
                                      labels=None if labels is None else labels.tolist(),
                                      cal=ref_cal, round_window=False)
            expected += [(k, y, x, w) for y, x, w in cl]
            n_found.append(found)
            codes.append(c)
    ped = Pedestal(shape, len(dark), dtype, noise)
    ped.push_dark(dark)
    result = FINDERS[model](ped, 5.0, size, window_dtype=dtype, common_mode=labels,
                            calibration=cal).find(frames, branch_maps=True, progress=False)
    got = [(int(f), int(y), int(x), w.ravel().tolist()) for f, y, x, w in zip(
        *(result[k].to_numpy() for k in ("frame_number", "y", "x", "window")))]
    assert len(expected) > 20 and any(c == 1 for frame in codes for row in frame for c in row)
    assert got == expected
    assert result["n_found"].to_numpy().tolist() == n_found
    np.testing.assert_array_equal(result["branch_map"].to_numpy(), np.array(codes, np.uint8))
    np.testing.assert_array_equal(result["n_flagged"], flagged(frames, cal.gain).sum(axis=(1, 2)))
    if with_cm:
        np.testing.assert_array_equal(result["common_mode"].to_numpy(),
                                      np.array([c for c, _ in offsets], dtype))
        assert result["common_mode_pixels"].to_numpy().tolist() == [n for _, n in offsets]
    for key, value in ref.state().items():
        np.testing.assert_array_equal(ped.state()[key], value, err_msg=key)


@pytest.mark.parametrize("model", list(FINDERS))
def test_same_result_for_any_chunking_and_splitting(run, results, model):
    sim, dark, frames, _ = run
    whole, whole_ped = results[model]
    ped = trained(dark)
    finder = FINDERS[model](ped, 5.0, 3, window_dtype="float64", calibration=sim.calibration,
                            chunk_frames=4)
    parts = [finder.find(frames[a:b], range(a, b), progress=False)
             for a, b in ((0, 1), (1, 11), (11, 30))]
    for name in ("frame_number", "y", "x", "window", "n_found", "n_flagged"):
        got = np.concatenate([p[name].to_numpy() for p in parts])
        np.testing.assert_array_equal(got, whole[name].to_numpy(), err_msg=name)
    for key, value in whole_ped.state().items():
        np.testing.assert_array_equal(ped.state()[key], value, err_msg=key)


# ------------------------------------------------------------------ the result and the API
def test_result_units_provenance_and_round_trip(run, results, tmp_path):
    sim, _, _, _ = run
    result, _ = results["frozen"]
    assert result["window"].attrs["units"] == result["energy"].attrs["units"] == "keV"
    assert result.attrs["calibration_sha256"].startswith("sha256:")
    path = tmp_path / "result.nc"
    save_result(result, path)
    back = load_result(path)
    np.testing.assert_array_equal(back["n_flagged"], result["n_flagged"])
    spec = FinderSpec.from_result(back, calibration=sim.calibration)
    assert spec.calibration is sim.calibration and spec.units == "keV"
    with pytest.raises(ValueError, match="pass it as calibration="):
        FinderSpec.from_result(back)
    other = JungfrauCalibration(pedestal=sim.calibration.pedestal,
                                gain=sim.calibration.gain * 1.01)
    with pytest.raises(ValueError, match="the one given is sha256:"):
        FinderSpec.from_result(back, calibration=other)


def test_without_a_calibration_nothing_changes(run):
    """An uncalibrated run has no JUNGFRAU variables or attributes, and ADU units."""
    _, dark, _, _ = run
    frames = dark[:3]
    result = FrozenFinder(trained(dark), 5.0, 3).find(frames, progress=False)
    assert "n_flagged" not in result and "calibration_sha256" not in result.attrs
    assert result["energy"].attrs["units"] == "ADU"
    assert spectrum(result)["energy"].attrs["units"] == "ADU"
    with pytest.raises(ValueError, match="made without a JUNGFRAU calibration"):
        FinderSpec.from_result(result, calibration=JungfrauSimulator(
            JungfrauDetector(frame_shape=SHAPE)).calibration)


def test_bad_calibrated_setups_are_refused(run):
    sim, dark, frames, _ = run
    with pytest.raises(ValueError, match="window_dtype='float32' or 'float64'"):
        FinderSpec(calibration=sim.calibration)
    with pytest.raises(TypeError, match="JungfrauCalibration"):
        FinderSpec(window_dtype="float32", calibration=sim.calibration.pedestal)
    small = JungfrauSimulator(JungfrauDetector(frame_shape=(32, 64))).calibration
    with pytest.raises(ValueError, match="calibration is for 32x64 frames but the pedestal "
                                         "is 64x128"):
        FrozenFinder(trained(dark), window_dtype="float32", calibration=small)
    switched = dark.copy()
    switched[7, 3, 4] |= 0x4000
    with pytest.raises(ValueError, match="dark frame 7 of .* 1 pixels with gain bits"):
        find_clusters(frames[:2], switched, n_pedestal=N_DARK, window_dtype="float32",
                      calibration=sim.calibration, progress=False)


def test_find_clusters_and_the_cli_take_a_calibration(run, results, tmp_path, capsys):
    sim, dark, frames, _ = run
    expected, _ = results["frozen"]
    result = find_clusters(frames, dark, n_pedestal=N_DARK, window_dtype="float64",
                           calibration=sim.calibration, progress=False)
    np.testing.assert_array_equal(result["window"], expected["window"])
    cal_path, dark_path, frames_path = (tmp_path / n for n in ("cal.nc", "dark.npy", "f.npy"))
    sim.calibration.save(cal_path)
    np.save(dark_path, dark)
    np.save(frames_path, frames)
    out = tmp_path / "out.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["find", "--dark", str(dark_path), "--frames", str(frames_path),
                     "--n-pedestal", str(N_DARK), "--calibration", str(cal_path),
                     "--out", str(out), "--quiet"])
    assert code in (0, None)
    cli = load_result(out)
    assert cli["window"].dtype == np.float32 and cli["energy"].attrs["units"] == "keV"
    np.testing.assert_array_equal(cli["window"], expected["window"].astype(np.float32))
    assert main(["find", "--dark", str(dark_path), "--frames", str(frames_path),
                 "--calibration", str(tmp_path / "missing.nc"),
                 "--out", str(tmp_path / "other.nc")]) == 1
    assert "missing.nc" in capsys.readouterr().err


# ------------------------------------------------------------------ cuda ≡ frozen
GPU_SHAPE = (256, 512)


def gpu_case(n_frames=24, common_mode_sigma=0.0):
    """Two JUNGFRAU chips' worth of frames with spots, dead pixels and specials."""
    sim = JungfrauSimulator(
        JungfrauDetector(frame_shape=GPU_SHAPE, dead_fraction=0.001,
                         common_mode_sigma_adu=common_mode_sigma),
        JungfrauBeam(photons_per_frame=800, spots_per_frame=4, spot_photons=(300, 5000)),
        seed=9)
    dark = sim.dark(64)
    frames, _ = sim.frames(n_frames)
    for k, value in enumerate(SPECIAL):
        frames[k::len(SPECIAL), 100, 10 + 40 * k] = value
    return sim, dark, frames


def assert_same_runs(a, b, ped_a, ped_b, names=("frame_number", "y", "x", "window", "n_found",
                                                "n_kept", "n_flagged", "branch_map")):
    for name in names + (("common_mode", "common_mode_pixels") if "common_mode" in a else ()):
        np.testing.assert_array_equal(a[name].to_numpy(), b[name].to_numpy(), err_msg=name)
    for key, value in ped_a.state().items():
        np.testing.assert_array_equal(ped_b.state()[key], value, err_msg=key)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, window_dtype, noise, cm", [
    ("float64", "float64", "running", None), ("float32", "float32", "running", None),
    ("float64", "float32", "fixed", "jungfrau"), ("float32", "float64", "running", "jungfrau")])
def test_cuda_equals_frozen_with_a_calibration(dtype, window_dtype, noise, cm):
    from aare_lab.finders import CudaFinder

    sim, dark, frames = gpu_case(common_mode_sigma=0.0 if cm is None else 6.0)
    peds = []
    for _ in range(2):
        ped = Pedestal(GPU_SHAPE, 64, dtype, noise)
        ped.push_dark(dark)
        peds.append(ped)
    options = {"window_dtype": window_dtype, "common_mode": cm, "calibration": sim.calibration}
    cpu = FrozenFinder(peds[0], 5.0, 3, **options).find(frames, branch_maps=True,
                                                         progress=False)
    gpu = CudaFinder(peds[1], 5.0, 3, chunk_frames=16, **options).find(
        frames, branch_maps=True, progress=False)
    assert cpu.sizes["cluster"] > 1000 and cpu["n_flagged"].sum() > 24
    assert (cpu["energy"] > 300).sum() > 0   # G1 and G2 clusters
    assert_same_runs(cpu, gpu, peds[0], peds[1])


@pytest.mark.gpu
@pytest.mark.parametrize("cm", [None, "jungfrau"])
def test_cuda_with_a_calibration_for_any_chunking_split_and_block_size(cm):
    from aare_lab.finders import CudaFinder

    sim, dark, frames = gpu_case(common_mode_sigma=0.0 if cm is None else 6.0)
    ped = Pedestal(GPU_SHAPE, 64, "float32")
    ped.push_dark(dark)
    options = {"window_dtype": "float32", "common_mode": cm, "calibration": sim.calibration}
    expected_ped = ped.copy()
    expected = FrozenFinder(expected_ped, 5.0, 3, **options).find(
        frames, branch_maps=True, progress=False)
    for chunk, calls, threads in [(1, [(0, 24)], 1024), (7, [(0, 5), (5, 24)], 512),
                                  (16, [(0, 13), (13, 14), (14, 24)], 256)]:
        gpu_ped = ped.copy()
        finder = CudaFinder(gpu_ped, 5.0, 3, chunk_frames=chunk, block_threads=threads,
                            **options)
        parts = [finder.find(frames[a:b], range(a, b), branch_maps=True, progress=False)
                 for a, b in calls]
        names = ["y", "x", "window", "n_found", "n_flagged", "branch_map"]
        if cm is not None:
            names += ["common_mode", "common_mode_pixels"]
        for name in names:
            got = np.concatenate([p[name].to_numpy() for p in parts])
            np.testing.assert_array_equal(got, expected[name].to_numpy(),
                                          err_msg=f"{name}, chunk {chunk}, calls {calls}")
        for key, value in expected_ped.state().items():
            np.testing.assert_array_equal(gpu_ped.state()[key], value, err_msg=key)


def test_kernel_names_its_gain_switching_twins():
    import re
    from pathlib import Path

    from aare_lab.finders import _gain
    from aare_lab.gpu.kernels import SOURCE, kernel_dir

    text = (kernel_dir() / SOURCE).read_text()
    defines = dict(re.findall(r"^#define ST_(\w+) (\d+)$", text, re.MULTILINE))
    assert {name: int(value) for name, value in defines.items()} == {
        name: int(getattr(_gain, name)) for name in ("G0", "G1", "G2", "FLAGGED")}
    for twin in ("_gain.pixel_status", "_gain.calibrate_row", "_gain.kev_thresholds_row",
                 "_gain.gated", "_gain.estimate_labels", "_gain.decode_row"):
        assert f"// {twin}" in text, twin
    source = Path(__file__).parent.parent / "aare_lab" / "finders" / "_gain.py"
    assert "kernels/frozen.cu" in source.read_text()


def test_the_kernel_flags_the_raw_values_aare_lab_jungfrau_flags():
    """The CUDA twin spells the special raw values out; they must be jungfrau.py's."""
    import re

    from aare_lab.detector import jungfrau
    from aare_lab.gpu.kernels import SOURCE, kernel_dir

    text = (kernel_dir() / SOURCE).read_text()
    status = text[text.index("int pixel_status("):]
    condition = re.search(r"if \(bits == (\d+)((?: \|\| x == \w+)+)\)", status)
    assert condition, "pixel_status's flag test not found in the kernel"
    adc_mask = int(re.search(r"^#define ADC_MASK (0x[0-9A-Fa-f]+)$", text, re.MULTILINE)[1], 16)
    values = {adc_mask if v == "ADC_MASK" else int(v, 16)
              for v in re.findall(r"x == (\w+)", condition[2])}
    assert int(condition[1]) == jungfrau.INVALID_GAIN_BITS
    assert adc_mask == jungfrau.ADC_MASK
    assert values == {*jungfrau.READOUT_ERROR_VALUES, *jungfrau.SATURATED_VALUES}
    assert f"x >> {jungfrau.ADC_BITS};" in status


# ------------------------------------------------------------------ explain
@pytest.mark.parametrize("dtype, with_cm", [("float64", False), ("float32", True)])
def test_explain_recomputes_calibrated_decisions_in_kev(dtype, with_cm):
    """explain's recomputed branch equals each calibrated finder's own map at every pixel,
    and its tap values are the formula in keV written here."""
    from aare_lab.analysis.explain import explain_sites

    dark, frames, cal = reference_case(11)
    shape = frames.shape[1:]
    labels = np.random.default_rng(2).integers(-1, 2, shape) if with_cm else None
    results = {}
    for model, cls in FINDERS.items():
        ped = Pedestal(shape, len(dark), dtype)
        ped.push_dark(dark)
        results[model] = cls(ped, 5.0, 3, window_dtype=dtype, common_mode=labels,
                             calibration=cal).find(frames, progress=False)
    sites = [(f, y, x) for f in (1, 4) for y in range(shape[0]) for x in range(shape[1])]
    with np.errstate(divide="ignore", invalid="ignore"):   # the uncalibrated G0 pixel
        explained = explain_sites(frames, sites, results, dark=dark, calibration=cal)
    g, adc = decode(frames)
    bad = flagged(frames, cal.gain)
    t = np.dtype(dtype).type
    checked = 0
    for (f, y, x), e in zip(sites, explained):
        d = e.data
        assert d.attrs["units"] == d["v"].attrs["units"] == "keV"
        np.testing.assert_array_equal(d["branch"], d["finder_branch"])
        if bad[f, y, x]:
            assert (d["branch"] == Branch.NEG_SKIP).all()
            assert (d["v"].sel(wy=0, wx=0) == 0).all()
        elif g[f, y, x] > 0:
            stage = g[f, y, x]
            expected = (t(adc[f, y, x]) - t(cal.pedestal[stage, y, x])) / t(cal.gain[stage, y, x])
            assert (d["v"].sel(wy=0, wx=0) == expected).all()
            checked += 1
    assert checked > 5
    with pytest.raises(ValueError, match="pass it as calibration="):
        explain_sites(frames, sites[:1], results, dark=dark)
    ped = Pedestal(shape, len(dark))
    ped.push_dark(dark)
    plain = FrozenFinder(ped, 5.0, 3).find(dark[:2], progress=False)
    with pytest.raises(ValueError, match="explain calibrated .* separately"):
        explain_sites(frames, sites[:1], [results["frozen"], FinderSpec("frozen")],
                      dark=dark, calibration=cal)
    with pytest.raises(ValueError, match="no result given records one"):
        explain_sites(dark, [(0, 0, 0)], [plain], dark=dark, calibration=cal)
