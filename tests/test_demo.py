"""The main job: physics recovered from the simulation, and the `aare-lab demo` command."""

import numpy as np
import pytest

from aare_lab.cli import main
from aare_lab.demo import run_demo
from aare_lab.results import load_result
from aare_lab.simulate import Beam, Detector

KALPHA_KEV = 8.05


@pytest.fixture(scope="module")
def report():
    # MÖNCH03's occupancy (2300 photons on 400x400) on a 160x160 detector.
    return run_demo(n_dark=200, n_frames=150, seed=5, detector=Detector(frame_shape=(160, 160)),
                    beam=Beam(photons_per_frame=2300 * (160 / 400) ** 2), progress=False)


def test_kalpha_peak_sits_at_gain_times_line_energy(report):
    gain = report.detector.gain_adu_per_kev
    assert report.peak.position == pytest.approx(gain * KALPHA_KEV, rel=0.01)
    assert report.peak_kev == pytest.approx(KALPHA_KEV, rel=0.01)
    # resolution: 3x3 sum of 5 ADU noise is 15 ADU rms, FWHM 35 ADU of 322: about 11 %
    assert 0.08 < report.peak.resolution < 0.14


def test_every_finder_ran_and_they_agree(report):
    assert set(report.results) == {"serial", "frozen"}
    serial, frozen = report.results["serial"], report.results["frozen"]
    assert serial.sizes["cluster"] > 300 * report.n_frames
    diff = abs(serial.sizes["cluster"] - frozen.sizes["cluster"])
    assert diff < 1e-3 * frozen.sizes["cluster"]
    assert report.agreement[0].startswith("serial vs frozen: ")


def test_photons_are_recovered_at_moderate_occupancy():
    # 0.3 % occupancy: little pile-up, so one cluster per photon within a few %.
    shape = (128, 128)
    beam = Beam(photons_per_frame=0.003 * shape[0] * shape[1])
    report = run_demo(n_dark=100, n_frames=200, seed=11, detector=Detector(frame_shape=shape),
                      beam=beam, finders=["frozen"], progress=False)
    found = report.clusters_per_frame("frozen")
    assert found == pytest.approx(report.photons_per_frame, rel=0.03)
    # and the clusters sit on the photons: most truth positions have a centre within 1 pixel
    result, truth = report.results["frozen"], report.truth
    centres = set(zip(result["frame_number"].to_numpy().tolist(),
                      result["y"].to_numpy().tolist(), result["x"].to_numpy().tolist()))
    ty, tx = np.floor(truth.y).astype(int), np.floor(truth.x).astype(int)
    near = [any((f, y + dy, x + dx) in centres for dy in (-1, 0, 1) for dx in (-1, 0, 1))
            for f, y, x in zip(truth.frame.tolist(), ty.tolist(), tx.tolist())]
    assert np.mean(near) > 0.97


def test_demo_command_writes_report_png_and_results(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--frames", "30", "--dark", "60", "--shape", "96x96", "--photons",
                 "130", "--out", str(out), "--quiet"])
    assert code == 0
    text = capsys.readouterr().out
    assert "Kα peak (frozen)" in text and "agreement serial vs frozen" in text
    assert (out / "spectrum.png").stat().st_size > 10_000
    for name in ("serial", "frozen"):
        result = load_result(out / f"{name}.nc")
        assert result.attrs["finder"] == name
        assert result.sizes["frame"] == 30


def test_demo_command_refuses_bad_input(capsys):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--cluster-size", "4x4"])
    assert info.value.code == 2
    assert "even" in capsys.readouterr().err
