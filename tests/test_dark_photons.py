"""Photon hits in dark frames (`aare_lab.detector.dark.photons`): simulated and real dark frames
pass, simulated data frames given as dark frames warn at training, and the numbers reach the
dark report, ``aare-lab dark`` and a live run that trains on its stream."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from live_helpers import live_run

import aare_lab
from aare_lab import IlluminatedDarkWarning, find_clusters, train_pedestal
from aare_lab.cli import main
from aare_lab.detector.dark.report import dark_report
from aare_lab.simulate import Beam, Detector, Simulator

N_DARK = 101
JUNGFRAU = Path(__file__).parent / "data" / "jungfrau_dark_crop.npz"


def trained_quietly(dark, n_pedestal=None):
    """Training that must not warn of photons."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", IlluminatedDarkWarning)
        return train_pedestal(dark, n_pedestal or len(dark), progress=False)


@pytest.mark.parametrize("detector", [
    Detector(),
    # Defects and common mode, frame-wide jumps of 4 sigma included: none of them photons.
    Detector(dead_fraction=0.002, hot_fraction=0.003, common_mode_sigma_adu=2.0,
             common_mode_jump_adu=20.0, common_mode_jump_probability=0.2),
])
def test_simulated_dark_frames_hold_no_photons(detector):
    photons = trained_quietly(Simulator(detector, seed=4).dark(N_DARK)).dark_photons
    assert photons.sampled_frames == N_DARK
    assert (photons.hits, photons.dips, photons.frames_with_hits) == (0, 0, 0)
    assert not photons.illuminated


@pytest.mark.parametrize("run", ["single", "double"])
def test_real_jungfrau_dark_frames_hold_no_photons(run):
    """Real dark frames (with the frame-wide offsets of common mode in several frames)."""
    dark = np.load(JUNGFRAU)[run]
    photons = trained_quietly(dark).dark_photons
    assert photons.sampled_frames == 9  # 10 frames: a median needs an odd count
    assert not photons.illuminated


def illuminated_npy(tmp_path, photons_per_frame, n_frames):
    """Simulated MÖNCH data frames saved as a dark file; the photons per frame they hold."""
    sim = Simulator(beam=Beam(photons_per_frame=photons_per_frame), seed=1)
    frames, truth = sim.frames(n_frames)
    path = tmp_path / f"dark_{photons_per_frame}.npy"
    np.save(path, frames)
    return path, len(truth) / n_frames


@pytest.mark.parametrize("photons_per_frame, n_frames, min_with_hits", [
    (2300, N_DARK, 1.0),  # the MÖNCH default density
    (20, N_DARK, 0.9),    # sparse: a frame's sampled rows (one in 5) may miss all 20
    (20, 10, 0.7),        # and a short dark run
])
def test_data_frames_as_dark_frames_warn_with_their_photons(tmp_path, photons_per_frame,
                                                            n_frames, min_with_hits):
    path, per_frame = illuminated_npy(tmp_path, photons_per_frame, n_frames)
    with pytest.warns(IlluminatedDarkWarning) as record:
        pedestal = train_pedestal(path, n_frames, progress=False)
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith(f"'{path}' (dark frames): photon hits")
    assert "Take dark frames with the beam off" in message
    photons = pedestal.dark_photons
    assert photons.illuminated and photons.dips == 0
    # An 8 keV photon tops 10 sd (under 60 ADU of its 320) in the pixel it hits, and its
    # 6 um cloud on 25 um pixels reaches a neighbour or two at most.
    assert 1.0 <= photons.hits_per_frame / per_frame <= 3.0
    assert photons.frames_with_hits_fraction >= min_with_hits


def test_a_few_photons_are_counted_without_a_verdict(tmp_path):
    path, per_frame = illuminated_npy(tmp_path, 1, N_DARK)
    photons = trained_quietly(path, N_DARK).dark_photons
    assert photons.hits > 0 and photons.dips == 0 and not photons.illuminated


def test_find_clusters_warns_when_it_trains_on_illuminated_frames():
    sim = Simulator(Detector(frame_shape=(48, 40)), Beam(photons_per_frame=20), seed=2)
    frames, _ = sim.frames(40)
    with pytest.warns(IlluminatedDarkWarning, match="the dark frames held photons"):
        result = find_clusters(frames[10:], frames[:30], n_pedestal=30, progress=False)
    assert "dark_photon_hits_per_frame" not in result.attrs  # the result's attrs unchanged
    # Explaining that result trains on the same dark frames, and says nothing again.
    y, x = int(result["y"][0]), int(result["x"][0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", IlluminatedDarkWarning)
        aare_lab.explain.explain(frames[10:], int(result["frame_number"][0]), y, x,
                                 {"frozen": result}, dark=frames[:30])


def test_the_dark_report_shows_the_hits(tmp_path):
    path, _ = illuminated_npy(tmp_path, 20, 21)
    with pytest.warns(IlluminatedDarkWarning):
        report = dark_report(train_pedestal(path, 21, progress=False))
    assert "the dark frames held photons" in repr(report).splitlines()[-1]
    attrs = report.statistics.attrs
    assert attrs["dark_photon_hits_per_frame"] > 5
    assert attrs["dark_photon_sampled_frames"] == 21
    assert attrs["dark_photon_frames_with_hits"] > 0.5
    pushed = aare_lab.Pedestal((48, 40), 30)
    pushed.push_dark(Simulator(Detector(frame_shape=(48, 40)), seed=3).dark(30))
    assert repr(dark_report(pushed)).splitlines()[-1].startswith(
        "photon hits in the dark frames: not checked")


@pytest.mark.filterwarnings("default::aare_lab.detector.dark.photons.IlluminatedDarkWarning")
def test_aare_lab_dark_prints_the_hits_and_the_warning(tmp_path, capsys):
    path, _ = illuminated_npy(tmp_path, 20, 21)
    assert main(["dark", str(path), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "photon hits in the dark frames" in captured.out
    assert "the dark frames held photons" in captured.out
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"aare-lab dark: IlluminatedDarkWarning: '{path}' (dark frames): photon hits")
    np.save(tmp_path / "dark.npy", Simulator(seed=4).dark(21))
    assert main(["dark", str(tmp_path / "dark.npy"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "no sign of photons" in captured.out and "IlluminatedDark" not in captured.err


def test_a_live_run_warns_when_its_dark_frames_hold_photons(tmp_path):
    from aare_lab.model.spec import FinderSpec

    frames, _ = Simulator(Detector(frame_shape=(48, 40)), Beam(photons_per_frame=20),
                          seed=6).frames(40)
    source, caught = live_run(frames, FinderSpec(n_pedestal=30), tmp_path, n_dark=30)
    messages = [str(w.message) for w in caught if w.category is IlluminatedDarkWarning]
    assert len(messages) == 1
    assert messages[0].startswith(f"{source.describe()} (dark frames): photon hits")
    assert "in 29 of 29 sampled frames of 30" in messages[0]
