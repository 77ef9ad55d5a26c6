"""Our CPU finders against PSI aare, cluster for cluster, on simulated MÖNCH data.

aare 2026.3.17's ClusterFinder is the serial model with running noise; aare 2026.9.30's is
the frozen model with fixed noise. aare runs in its own interpreter (see `aare_env`);
``.ci/run`` builds both releases, elsewhere set ``AARE_PYTHON_2026_3_17`` /
``AARE_PYTHON_2026_9_30`` or build them with ``tools/install_aare.sh``.
"""

import subprocess
from pathlib import Path

import numpy as np
import pytest
from aare_env import aare_python

from aare_lab import FrozenFinder, Pedestal, SerialFinder
from aare_lab.simulate import Simulator

pytestmark = pytest.mark.aare

RUNNER = Path(__file__).with_name("oracle_runner.py")
N_PEDESTAL = 1000  # aare's fixed pedestal window
N_FRAMES = 120
ORACLES = {
    "2026.3.17": (SerialFinder, "running"),
    "2026.9.30": (FrozenFinder, "fixed"),
}


@pytest.fixture(scope="module")
def mönch_run(tmp_path_factory):
    """A simulated MÖNCH03 run (400x400, ~2300 photons per frame) saved as .npy."""
    folder = tmp_path_factory.mktemp("moench")
    sim = Simulator(seed=2026)
    dark = sim.dark(N_PEDESTAL)
    frames, _ = sim.frames(N_FRAMES)
    np.save(folder / "dark.npy", dark)
    np.save(folder / "frames.npy", frames)
    return folder, dark, frames


@pytest.mark.parametrize("version", sorted(ORACLES))
@pytest.mark.parametrize("cluster_size", [(3, 3), (9, 9)])
def test_finder_equals_aare_cluster_for_cluster(mönch_run, version, cluster_size):
    python = aare_python(version)
    if python is None:
        pytest.skip(f"aare {version} is not installed: run AARE_VERSION={version} "
                    f"VENV=/opt/aare-{version} bash tools/install_aare.sh "
                    f"(or set AARE_PYTHON_{version.replace('.', '_')})")
    folder, dark, frames = mönch_run
    out = folder / f"aare-{version}-{cluster_size[0]}x{cluster_size[1]}.npz"
    subprocess.run([python, str(RUNNER), str(folder / "dark.npy"), str(folder / "frames.npy"),
                    str(cluster_size[0]), str(cluster_size[1]), "5.0", str(out)],
                   check=True, timeout=600)
    theirs = np.load(out)

    finder_cls, noise = ORACLES[version]
    pedestal = Pedestal(frames.shape[1:], N_PEDESTAL, "float64", noise)
    pedestal.push_dark(dark)
    ours = finder_cls(pedestal, 5.0, cluster_size).find(frames, progress=False)

    assert ours.sizes["cluster"] > 1000 * N_FRAMES
    np.testing.assert_array_equal(ours["frame_number"], theirs["frame"])
    np.testing.assert_array_equal(ours["y"], theirs["y"])
    np.testing.assert_array_equal(ours["x"], theirs["x"])
    np.testing.assert_array_equal(ours["window"], theirs["window"])
