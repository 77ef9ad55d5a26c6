"""Campaign faults, for real: a worker killed mid-run (os.kill on its PID), and Ctrl-C
(SIGINT) to ``aare-lab campaign``; a corrupt or missing input is in test_campaign.py. And
the worker processes of a GPU node, each pinned to its GPU."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed",
                                  reason="the campaign needs the [campaign] extra")

from campaign_helpers import SPEC, assert_run_equals, serial_loop, write_runs
from cli_process import CliProcess

from aare_lab.campaign import Campaign
from aare_lab.campaign.manifest import MANIFEST, RUN_FILE
from aare_lab.campaign.task import PEDESTAL

#: Frames per run and chunk: long enough for a kill to land mid-find, on small files.
N_FRAMES, SHAPE, CHUNK = 600, (96, 96), 8


def _partial_attempt(out: Path) -> str | None:
    """The run whose attempt is finding frames now: its pedestal is saved (just before
    the find starts) and its row not yet written."""
    for folder in out.glob(".*.attempt-*"):
        if (folder / PEDESTAL).exists() and not (folder / RUN_FILE).exists():
            return folder.name[1:].split(".attempt-")[0]
    return None


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_redone_elsewhere_and_counted_once(tmp_path):
    paths = write_runs(tmp_path, n_runs=4, n_frames=N_FRAMES, shape=SHAPE)
    out = tmp_path / "out"
    campaign = Campaign([str(p) for p in paths], SPEC, dark=str(tmp_path / "dark.npy"),
                        out=out, finder_options={"chunk_frames": CHUNK})
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, silence_logs=40) as cluster, \
            distributed.Client(cluster) as client:
        done: dict = {}
        worker = threading.Thread(target=lambda: done.setdefault(
            "result", campaign.run(client, progress=False)))
        worker.start()
        deadline = time.monotonic() + 60
        victim = None
        while victim is None and time.monotonic() < deadline:
            if (run := _partial_attempt(out)) is not None:
                busy = [address for address, keys in client.processing().items()
                        if any(f"run-{run}-" in str(key) for key in keys)]
                if busy:
                    victim = run, busy[0], client.run(os.getpid, workers=busy)[busy[0]]
            time.sleep(0.005)
        assert victim is not None, "no run was caught mid-find"
        run, address, pid = victim
        os.kill(pid, signal.SIGKILL)
        worker.join(120)
    result = done["result"]
    assert list(result["status"].to_numpy()) == ["done"] * 4
    index = list(result["run"].to_numpy()).index(run)
    # Redone by another worker process than the one killed.
    assert result["worker"].to_numpy()[index] != address
    for path, expected in zip(paths, serial_loop(paths, tmp_path / "dark.npy")):
        assert_run_equals(out / path.stem, expected)
        assert result["clusters"].sel(run=path.stem) == expected.sizes["cluster"]
    assert result["spectrum"].sum() == result["clusters"].sum()
    assert sorted(p.name for p in out.iterdir()) == ["campaign.nc", "manifest.json", "run0",
                                                     "run1", "run2", "run3", "runs.csv"]


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_runs_and_a_consistent_manifest(tmp_path):
    paths = write_runs(tmp_path, n_runs=6, n_frames=N_FRAMES, shape=SHAPE)
    out = tmp_path / "out"
    args = ["campaign", *map(str, paths), "--dark", str(tmp_path / "dark.npy"), "--out",
            str(out), "--workers", "1", "--finder", "serial", "--n-pedestal", "40", "--quiet"]
    with CliProcess(*args) as cli:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _done_in(out):
            time.sleep(0.01)
        cli.signal(signal.SIGINT)
        assert cli.wait(60) == 130, cli.output
        assert "aare-lab campaign: interrupted" in cli.output
    finished = _done_in(out)
    assert 1 <= len(finished) < 6
    manifest = json.loads((out / MANIFEST).read_text())
    for name, row in manifest["runs"].items():
        assert row["status"] == "done"
        assert json.loads((out / name / RUN_FILE).read_text())["key"] == row["key"]
    written = {name: (out / name / RUN_FILE).stat().st_mtime_ns for name in finished}
    with CliProcess(*args) as again:
        assert again.wait(120) == 0, again.output
        assert f"{len(finished)} of 6 runs finished before: kept" in again.output
    assert {name: (out / name / RUN_FILE).stat().st_mtime_ns for name in finished} == written
    for path, expected in zip(paths, serial_loop(paths, tmp_path / "dark.npy")):
        assert_run_equals(out / path.stem, expected)
    assert not list(out.glob(".*.attempt-*"))


def _done_in(out: Path) -> list[str]:
    try:
        runs = json.loads((out / MANIFEST).read_text())["runs"]
    except (OSError, ValueError):
        return []
    return [name for name, row in runs.items() if row["status"] == "done"]


@pytest.mark.slow
def test_one_worker_per_gpu_each_pinned_by_cuda_visible_devices(monkeypatch):
    from aare_lab.campaign.cluster import connected, gpu_cluster

    # Through distributed alone, as without dask-cuda (which pins the same way).
    monkeypatch.setitem(sys.modules, "dask_cuda", None)
    with gpu_cluster(["2", "5"]) as cluster, connected(cluster.scheduler_address) as client:
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        names = {info["name"]: seen[address]
                 for address, info in client.scheduler_info()["workers"].items()}
    assert names == {"gpu-2": "2", "gpu-5": "5"}
