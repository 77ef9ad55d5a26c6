"""A dark that `aare-lab dark` finds wanting makes `find` warn in its words: an all-zero
dark, stuck spots, a light leak, and a threshold no pixel can reach."""

import warnings
from pathlib import Path

import numpy as np
import pytest

import aare_lab
from aare_lab import DarkPixelWarning, FrozenFinder, train_pedestal
from aare_lab.cli import main
from aare_lab.detector.dark.report import dark_report
from aare_lab.simulate import Beam, Detector, Simulator

SHAPE = (48, 48)


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=SHAPE), Beam(photons_per_frame=20), seed=3)
    return sim.dark(60), sim.frames(10)[0]


def find_warnings(dark, frames, n_sigma=5.0):
    pedestal = train_pedestal(dark, len(dark), progress=False)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = FrozenFinder(pedestal, n_sigma).find(frames, progress=False)
    pixel = [str(w.message) for w in record if w.category is DarkPixelWarning]
    return result, pixel, dark_report(pedestal, n_sigma).lines()


def test_a_good_dark_gives_no_pixel_warning(run):
    _, pixel, lines = find_warnings(*run)
    assert pixel == []
    assert "pixels with rms 0 (dead or stuck" in lines[3] and lines[3].endswith(": 0 of 2304")


def test_an_all_zero_dark_is_named_as_such(run):
    dark, frames = run
    result, pixel, lines = find_warnings(np.zeros_like(dark), frames)
    assert len(pixel) == 1
    assert pixel[0].startswith("every pixel of the dark frames has rms 0 (an "
                               "all-zero or constant dark")
    assert "give dark frames recorded by the detector" in pixel[0]
    assert result.sizes["cluster"] > 0  # what the warning is about: clusters of whole counts
    assert "pixels with rms 0 (dead or stuck: threshold 0" in lines[3]
    assert lines[3].startswith("pixels with rms 0") and ": 2304 of 2304" in lines[3]


def test_stuck_spots_are_warned_about_in_the_dark_reports_words(run):
    dark, frames = run
    dark = dark.copy()
    dark[:, 10:12, 20] = 1234  # two pixels stuck at one value
    _, pixel, lines = find_warnings(dark, frames)
    stuck = "pixels with rms 0 (dead or stuck: threshold 0, so any rise above their mean " \
            "that tops their window is a cluster): 2 of 2304 at (y, x) (10, 20), (11, 20)"
    assert stuck in lines
    assert pixel == [f"dark frames: {stuck} (`aare-lab dark` reports the dark frames in full)"]


def test_a_light_leak_is_warned_about_in_the_dark_reports_words(run):
    dark, frames = run
    dark = dark.copy()
    dark[:, 30:33, 5:8] += 3000  # a spot lit in every dark frame (pedestals spread 200)
    _, pixel, lines = find_warnings(dark, frames)
    leak = [line for line in lines if line.startswith("pixels with a mean far above")]
    assert leak == ["pixels with a mean far above the median (> 10 robust sd): 9 of 2304 at "
                    "(y, x) (30, 5), (30, 6), (30, 7), (31, 5), (31, 6), ..."]
    assert len(pixel) == 1 and leak[0] in pixel[0]


def test_the_cli_find_warns_in_one_line(run, tmp_path, capsys):
    dark, frames = run
    np.save(tmp_path / "dark.npy", np.zeros_like(dark))
    np.save(tmp_path / "frames.npy", frames)
    assert main(["find", "--dark", str(tmp_path / "dark.npy"), "--frames",
                 str(tmp_path / "frames.npy"), "--n-pedestal", "60", "--out",
                 str(tmp_path / "r.nc"), "--quiet"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "DarkPixelWarning" in line]
    assert len(err) == 1
    assert err[0].startswith("aare-lab find: DarkPixelWarning: every pixel of the dark frames")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_unreachable_threshold_says_so(run, dtype):
    dark, frames = run
    pedestal = train_pedestal(dark, len(dark), dtype=dtype, progress=False)
    with pytest.warns(DarkPixelWarning, match=r"n_sigma=1e\+30 times the smallest rms .* no "
                                              r"cluster can be found; lower n_sigma"):
        result = FrozenFinder(pedestal, 1e30).find(frames, progress=False)
    assert result.sizes["cluster"] == 0
    line = [x for x in dark_report(pedestal, 1e30).lines() if "no cluster can be found" in x]
    assert len(line) == 1


def test_the_package_refers_to_nothing_outside_the_repository():
    package = Path(aare_lab.__file__).parent
    outside = [str(path.relative_to(package)) for path in package.rglob("*")
               if path.suffix in (".py", ".cu", ".md", ".json")
               and "../shared" in path.read_text(encoding="utf-8", errors="replace")]
    assert outside == []
