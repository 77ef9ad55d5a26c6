"""A campaign with the cuda finder, one worker per GPU pinned by CUDA_VISIBLE_DEVICES,
against a serial loop of find_clusters on the GPU of this process."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("distributed", reason="the campaign needs the [campaign] extra")

from campaign_helpers import SPEC, assert_run_equals, serial_loop, write_runs

from aare_lab.campaign import Campaign
from aare_lab.campaign.cluster import connected, visible_gpus


@pytest.mark.gpu
def test_a_gpu_campaign_equals_a_serial_loop(tmp_path):
    spec = SPEC.replace(finder="cuda")
    paths = write_runs(tmp_path, n_runs=4, n_frames=200, shape=(64, 64), photons=30)
    gpus = visible_gpus()
    campaign = Campaign([str(p) for p in paths], spec, dark=str(tmp_path / "dark.npy"),
                        out=tmp_path / "out")
    with connected(gpus=gpus) as client:
        # A lambda, looked up on the worker: a bound os.environ.get would be pickled with
        # this process's environment and read it there.
        pinned = set(client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES")).values())
        result = campaign.run(client, progress=False)
    assert pinned == set(gpus)
    assert set(result["status"].to_numpy()) == {"done"}
    serial = serial_loop(paths, tmp_path / "dark.npy", spec)
    for path, expected in zip(paths, serial):
        assert_run_equals(tmp_path / "out" / path.stem, expected)
    edges = np.r_[result["energy_lo"].to_numpy(), result["energy_hi"].to_numpy()[-1]]
    energies = np.concatenate([s["energy"].to_numpy() for s in serial])
    np.testing.assert_array_equal(result["spectrum"].to_numpy(),
                                  np.histogram(energies, edges)[0])
