"""The main job: physics recovered from the simulation, and the `aare-lab demo` command."""

import json

import numpy as np
import pytest
import xarray as xr

from aare_lab.cli import main
from aare_lab.demo import run_demo
from aare_lab.finders import FINDERS, CudaFinder
from aare_lab.gpu import GpuUnavailable, cupy_or_raise, gpu_available
from aare_lab.model.results import load_result
from aare_lab.simulate import Beam, Detector

KALPHA_KEV = 8.05
# The default output is a summary: far below the 0.13 MB per frame of a full result.
SMALL_FILE_BYTES = 200_000
SMALL_RUN = ["demo", "--frames", "30", "--dark", "60", "--shape", "96x96", "--photons", "130",
             "--quiet"]


@pytest.fixture(scope="module")
def report():
    # MÖNCH03's occupancy (2300 photons on 400x400) on a 160x160 detector.
    return run_demo(n_dark=200, n_frames=150, seed=5, detector=Detector(frame_shape=(160, 160)),
                    beam=Beam(photons_per_frame=2300 * (160 / 400) ** 2), progress=False)


def test_kalpha_peak_sits_at_gain_times_line_energy(report):
    gain = report.detector.gain_adu_per_kev
    # The Kα/Kβ doublet: Kβ does not pull Kα up (one gaussian sits about 0.5 % high).
    assert report.peak.model == "Kα/Kβ doublet"
    assert report.peak.position == pytest.approx(gain * KALPHA_KEV, rel=0.003)
    assert report.peak_kev == pytest.approx(KALPHA_KEV, rel=0.003)
    # resolution: 3x3 sum of 5 ADU noise is 15 ADU rms, FWHM 35 ADU of 322: about 11 %
    assert 0.10 < report.peak.resolution < 0.12
    # Kβ/Kα is 0.13/0.87 = 0.149 simulated; at this occupancy pile-up adds about 10 %.
    assert report.beta_ratio_simulated == pytest.approx(0.13 / 0.87)
    assert 0.12 < report.peak.beta_ratio < 0.19
    assert f"Kα peak (frozen, Kα/Kβ doublet): {report.peak.position:.2f}" in str(report)
    assert "; Kβ/Kα 0.1" in str(report) and "(simulated 0.149)" in str(report)


def test_a_beam_of_one_line_gets_one_gaussian():
    report = run_demo(n_dark=60, n_frames=40, seed=2, detector=Detector(frame_shape=(64, 64)),
                      beam=Beam(photons_per_frame=40, lines=((8.05, 1.0),)),
                      finders=["frozen"], progress=False)
    assert report.peak.model == "gaussian"
    assert report.peak.position == pytest.approx(40 * KALPHA_KEV, rel=0.01)
    assert "Kβ" not in str(report) and report.to_dict()["kalpha"]["beta_ratio"] is None


def test_every_finder_ran_or_was_skipped_with_the_reason(report):
    assert set(report.results) | set(report.skipped) == set(FINDERS)
    assert {"serial", "frozen"} <= set(report.results)
    if not gpu_available():
        with pytest.raises(GpuUnavailable) as missing:
            cupy_or_raise()
        assert report.skipped == {"cuda": str(missing.value)}
        assert f"cuda     skipped: {missing.value}" in str(report)


def test_every_cpu_finder_agrees(report):
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


def test_demo_command_writes_a_small_summary_by_default(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main([*SMALL_RUN, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Kα peak (frozen, Kα/Kβ doublet)" in text and "agreement serial vs frozen" in text
    assert "--full-results" in text
    written = {p.name: p.stat().st_size for p in out.iterdir()}
    assert set(written) == {"spectrum.png", "summary.txt", "summary.json", "summary.nc"}
    assert written["spectrum.png"] > 10_000
    assert max(written.values()) < SMALL_FILE_BYTES
    assert (out / "summary.txt").read_text(encoding="utf-8") in text
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["kalpha"]["finder"] == "frozen"
    assert summary["kalpha"]["model"] == "Kα/Kβ doublet"
    assert summary["kalpha"]["simulated_beta_ratio"] == pytest.approx(0.13 / 0.87)
    assert 0 < summary["kalpha"]["beta_ratio_err"] < summary["kalpha"]["beta_ratio"]
    assert summary["finders"]["serial"]["clusters"] == summary["finders"]["frozen"]["clusters"]
    with xr.open_dataset(out / "summary.nc", engine="h5netcdf") as small:
        assert small["n_found"].sizes == {"finder": 2, "frame": 30}
        assert int(small["n_kept"].sel(finder="frozen").sum()) \
            == summary["finders"]["frozen"]["clusters"]
        assert small["counts"].dims == ("finder", "energy")


def test_demo_command_writes_full_results_on_request(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main([*SMALL_RUN, "--out", str(out), "--full-results"]) == 0
    assert "--full-results also" not in capsys.readouterr().out
    for name in ("serial", "frozen"):
        result = load_result(out / f"{name}.nc")
        assert result.attrs["finder"] == name
        assert result.sizes["frame"] == 30


def test_demo_command_says_why_cuda_is_skipped(tmp_path, capsys, monkeypatch):
    # The machine's own check, made to fail, so the message is tested with and without a GPU.
    def no_gpu(cls):
        raise GpuUnavailable("no GPU in this test")

    monkeypatch.setattr(CudaFinder, "require_available", classmethod(no_gpu))
    assert main([*SMALL_RUN, "--out", str(tmp_path / "demo")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "cuda     skipped: no GPU in this test" in table
    assert not any(line.startswith("cuda ") and "skipped" not in line for line in table)


def test_demo_command_refuses_bad_input(capsys):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--cluster-size", "4x4"])
    assert info.value.code == 2
    assert "even" in capsys.readouterr().err


def test_every_finder_is_compiled_before_any_is_timed(monkeypatch, capsys):
    from aare_lab.finders.base import Finder

    frames_found = []
    find = Finder.find

    def spy(self, frames, *args, **kwargs):
        frames_found.append((self.name, len(frames)))
        return find(self, frames, *args, **kwargs)

    monkeypatch.setattr(Finder, "find", spy)
    report = run_demo(n_dark=40, n_frames=12, seed=3, detector=Detector(frame_shape=(32, 32)),
                      beam=Beam(photons_per_frame=6), finders=["serial", "frozen"])
    # one frame each to compile (and assemble a result), then the timed runs
    assert frames_found == [("serial", 1), ("frozen", 1), ("serial", 12), ("frozen", 12)]
    assert "compiling the finders (first run only)…" in capsys.readouterr().err
    assert report.compile_seconds > 0
    assert report.to_dict()["compile_seconds"] == report.compile_seconds
    assert (f"finders compiled (or loaded from Numba's cache) in "
            f"{report.compile_seconds:.1f} s before timing: the rates below are warm") \
        in str(report)
    quiet = run_demo(n_dark=40, n_frames=12, seed=3, detector=Detector(frame_shape=(32, 32)),
                     beam=Beam(photons_per_frame=6), finders=["frozen"], progress=False)
    assert "compiling" not in capsys.readouterr().err and quiet.compile_seconds > 0


def test_the_figure_shows_the_fit_region_scale_and_biases(report):
    from aare_lab.demo import demo_view

    view, spec = demo_view(report)
    assert set(view.figure.axes) == {view.ax, view.ratio_ax, view.fit_ax, view.residual_ax}
    assert view.fit_ax.get_title() == "fit region (frozen)"
    # The fit drawn in the region is the report's Kα fit (the same spectrum and window).
    x, y = view.artists["detail:fit"].get_data()
    gain = report.detector.gain_adu_per_kev
    np.testing.assert_allclose(y, report.peak.evaluate(x * gain), rtol=1e-9)
    assert len(view.artists["detail:Kβ"].get_xdata()) == len(x)
    assert view.artists["scale"].get_text() == "bins of 2 ADU (0.05 keV), gain 40 ADU/keV"
    assert view.artists["note"].get_text() == report.bias_note()
    assert "Poisson" in view.artists["ratio_note"].get_text()
    assert list(spec["finder"].to_numpy()) == list(report.results)


def test_the_report_says_the_errors_are_statistical_and_names_the_biases(report):
    note = report.bias_note()
    assert note.startswith("errors are statistical (1σ); Kβ/Kα ")
    assert f"against {report.beta_ratio_simulated:.3f} simulated" in note
    assert f"Kα {100 * (report.peak_kev / KALPHA_KEV - 1):+.2f} %" in note
    density = f"{report.beam.photons_per_frame:g} photons per frame"
    assert f"pile-up and charge sharing at {density}" in note
    assert f"\n  {note}\n" in str(report)
