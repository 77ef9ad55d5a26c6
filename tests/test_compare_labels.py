"""One cause, one label: a common-mode (or any configuration) difference between two
results is ``configuration`` whatever else the pair shares or not."""

import numpy as np
import pytest

from aare_lab import FrozenFinder, Pedestal
from aare_lab.analysis.compare import compare, configuration_differences
from aare_lab.simulate import Beam, Detector, Simulator

SHAPE = (48, 48)


@pytest.fixture(scope="module")
def runs():
    sim = Simulator(Detector(frame_shape=SHAPE), Beam(photons_per_frame=15), seed=7)
    dark, (frames, _) = sim.dark(100), sim.frames(30)
    # Each half of the detector moves by up to ±12 ADU from frame to frame.
    offsets = np.random.default_rng(1).integers(-12, 13, (len(frames), 2))
    frames = frames.astype(np.int64)
    frames[:, :24] += offsets[:, 0, None, None]
    frames[:, 24:] += offsets[:, 1, None, None]
    frames = frames.astype(np.uint16)
    halves = np.zeros(SHAPE, np.int32)
    halves[24:] = 1

    def run(dtype="float64", n_sigma=5.0, common_mode=None):
        pedestal = Pedestal(SHAPE, 100, dtype)
        pedestal.push_dark(dark)
        return FrozenFinder(pedestal, n_sigma, common_mode=common_mode).find(
            frames, branch_maps=True, progress=False)

    return {"cm": run(common_mode=halves), "plain": run(), "plain32": run("float32"),
            "plain6": run(n_sigma=6.0)}


@pytest.mark.parametrize("other, differences", [
    ("plain", ["common_mode"]),               # was unexplained
    ("plain32", ["common_mode"]),             # was precision
    ("plain6", ["n_sigma", "common_mode"]),   # was configuration
])
def test_a_common_mode_difference_is_configuration_in_every_pair(runs, other, differences):
    c = compare(runs["cm"], runs[other], labels=["cm", other])
    assert configuration_differences(runs["cm"], runs[other]) == differences
    causes = c.counts("cause")
    assert causes["configuration"] == c.sites.sizes["site"] > 0
    assert causes["unexplained"] == causes["precision"] == 0


def test_the_same_configuration_is_no_configuration_difference(runs):
    assert configuration_differences(runs["plain"], runs["plain32"]) == []
    c = compare(runs["plain"], runs["plain32"], labels=["plain", "plain32"])
    assert c.counts("cause")["configuration"] == 0
