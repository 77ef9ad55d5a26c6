"""Small simulated campaigns on disk for the campaign tests: runs of one detector (one
set of pixel maps), each its own frames, and a serial loop of find_clusters to compare.

Imported also by aare's interpreter (`master_campaign`), which has no pytest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from aare_lab import find_clusters
from aare_lab.campaign import Campaign
from aare_lab.campaign.runs import run_name
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator

SPEC = FinderSpec("serial", n_pedestal=40)
SHAPE = (24, 24)
PEAK = (250.0, 400.0)


def write_runs(folder: Path, n_runs: int = 4, n_frames: int = 20, shape=SHAPE,
               photons: float = 6.0) -> list[Path]:
    """``n_runs`` data files ``run<k>.npy`` and one ``dark.npy`` in ``folder``."""
    sim = Simulator(Detector(frame_shape=shape), Beam(photons_per_frame=photons), seed=7)
    np.save(folder / "dark.npy", sim.dark(SPEC.n_pedestal))
    paths = []
    for k in range(n_runs):
        frames, _ = sim.frames(n_frames, start=k * n_frames)
        paths.append(folder / f"run{k}.npy")
        np.save(paths[-1], frames)
    return paths


def serial_loop(paths, dark, spec: FinderSpec = SPEC) -> list[xr.Dataset]:
    """find_clusters over each run, one after the other, in this process."""
    return [find_clusters(str(path), str(dark), spec=spec, progress=False) for path in paths]


def assert_run_equals(folder: Path, expected: xr.Dataset) -> None:
    """The run's clusters.nc holds exactly the serial result's clusters and counts."""
    with xr.open_dataset(folder / "clusters.nc") as found:
        for name in ("frame_number", "y", "x", "window", "energy", "n_found", "n_kept",
                     "frame"):
            np.testing.assert_array_equal(found[name].to_numpy(), expected[name].to_numpy(),
                                          err_msg=name)


def master_campaign(folder) -> None:
    """A campaign over the slsDetector acquisitions ``folder/runs/*_master_0.json`` with the
    dark ``folder/dark/dark_master_0.json`` into ``folder/out`` (one worker thread), and the
    serial loop's results as ``folder/serial/<run>.nc``; where aare reads raw files."""
    folder = Path(folder)
    runs = str(folder / "runs" / "*_master_0.json")
    dark = str(folder / "dark" / "dark_master_0.json")
    Campaign(runs, SPEC, dark=dark, out=folder / "out").run(workers=1, processes=False,
                                                             progress=False)
    (folder / "serial").mkdir()
    for master in sorted((folder / "runs").glob("*_master_0.json")):
        find_clusters(str(master), dark, spec=SPEC, progress=False,
                      out=folder / "serial" / f"{run_name(str(master))}.nc")
