"""`aare-lab campaign`: runs in, OUT/<run>/ and the combined table out, failed runs named;
on a running scheduler; its progress and dashboard line."""

from __future__ import annotations

import csv
import json
import sys
from types import SimpleNamespace

import pytest

distributed = pytest.importorskip("distributed",
                                  reason="the campaign needs the [campaign] extra")

import xarray as xr
from campaign_helpers import PEAK, SPEC, assert_run_equals, serial_loop, write_runs

from aare_lab.campaign import Campaign
from aare_lab.campaign.cluster import dashboard
from aare_lab.campaign.manifest import MANIFEST, RUN_FILE
from aare_lab.cli import main


@pytest.mark.slow
def test_campaign_writes_every_run_and_names_the_failed_ones(tmp_path, capsys):
    paths = write_runs(tmp_path, n_runs=3)
    (tmp_path / "corrupt.npy").write_bytes(b"not frames")
    out = tmp_path / "out"
    code = main(["campaign", str(tmp_path / "run*.npy"), str(tmp_path / "corrupt.npy"),
                 "--dark", str(tmp_path / "dark.npy"), "--out", str(out), "--workers", "2",
                 "--finder", "serial", "--n-pedestal", "40", "--peak", "250,400", "--quiet"])
    captured = capsys.readouterr()
    assert code == 1
    assert "error: 1 of 4 runs failed: corrupt ('" in captured.err
    assert "campaign: 3 of 4 runs done" in captured.out
    assert "dashboard" in captured.out
    with open(out / "runs.csv", newline="") as file:
        rows = {row["run"]: row for row in csv.DictReader(file)}
    serial = serial_loop(paths, tmp_path / "dark.npy")
    assert [int(rows[p.stem]["clusters"]) for p in paths] == [s.sizes["cluster"] for s in serial]
    assert rows["corrupt"]["status"] == "failed" and "corrupt.npy" in rows["corrupt"]["reason"]
    assert all(rows[p.stem]["ka_fwhm"] for p in paths)

    again = main(["campaign", *map(str, paths), "--dark", str(tmp_path / "dark.npy"), "--out",
                  str(out), "--finder", "serial", "--n-pedestal", "40", "--peak", "250,400",
                  "--quiet"])
    assert again == 0
    assert "3 of 3 runs finished before: kept" in capsys.readouterr().out

    saved = main(["campaign", *map(str, paths), "--pedestal", str(out / "{run}" / "pedestal.nc"),
                  "--out", str(tmp_path / "from_saved"), "--finder", "serial", "--quiet"])
    assert saved == 0, capsys.readouterr().err
    for path, expected in zip(paths, serial):
        assert_run_equals(tmp_path / "from_saved" / path.stem, expected)


@pytest.mark.parametrize("options, message", [
    (["--peak", "400,250"], "--peak 400,250: LOW must be below HIGH"),
    (["--peak", "x"], "--peak takes LOW,HIGH"),
])
def test_campaign_usage_errors(tmp_path, capsys, options, message):
    assert main(["campaign", "a.npy", "--dark", "d.npy", "--out", str(tmp_path),
                 *options]) == 2
    assert message in capsys.readouterr().err


def test_workers_gpus_and_scheduler_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["campaign", "a.npy", "--out", str(tmp_path), "--workers", "2", "--gpus", "all"])
    assert exit_.value.code == 2
    assert "not allowed with argument --workers" in capsys.readouterr().err


@pytest.fixture
def scheduler():
    """A running scheduler at a TCP address, as --scheduler finds one at a facility; its
    one worker is a thread of this process (cheap to start)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  protocol="tcp", host="127.0.0.1", dashboard_address=":0",
                                  silence_logs=40) as cluster:
        yield cluster


def _campaign_args(paths, out, scheduler) -> list[str]:
    return ["campaign", *map(str, paths), "--dark", str(paths[0].parent / "dark.npy"),
            "--out", str(out), "--finder", "serial", "--n-pedestal", "40", "--peak",
            "250,400", "--scheduler", scheduler.scheduler_address]


def test_a_running_scheduler_gives_the_embedded_clusters_results_and_force_redoes(
        tmp_path, capsys, scheduler):
    paths = write_runs(tmp_path, n_runs=2)
    out = tmp_path / "out"
    args = [*_campaign_args(paths, out, scheduler), "--quiet"]
    assert main(args) == 0, capsys.readouterr().err
    Campaign([str(p) for p in paths], SPEC, dark=str(tmp_path / "dark.npy"),
             out=tmp_path / "embedded", peak=PEAK).run(workers=1, processes=False,
                                                       progress=False)
    found, embedded = (xr.load_dataset(folder / "campaign.nc")
                       for folder in (out, tmp_path / "embedded"))
    assert set(found["status"].to_numpy()) == {"done"}
    assert set(found["worker"].to_numpy()) == {w.address for w in scheduler.workers.values()}
    per_host = ["seconds", "worker"]
    xr.testing.assert_identical(found.drop_vars(per_host), embedded.drop_vars(per_host))

    def written():
        return {p.stem: (out / p.stem / RUN_FILE).stat().st_mtime_ns for p in paths}

    before = written()
    capsys.readouterr()
    assert main(args) == 0
    assert "campaign: 2 of 2 runs finished before: kept" in capsys.readouterr().out
    assert written() == before
    assert main([*args, "--force"]) == 0
    assert "finished before" not in capsys.readouterr().out
    after = written()
    assert all(after[name] != before[name] for name in before)
    manifest = json.loads((out / MANIFEST).read_text())["runs"]
    for path in paths:
        row = json.loads((out / path.stem / RUN_FILE).read_text())
        assert manifest[path.stem]["status"] == "done"
        assert manifest[path.stem]["seconds"] == row["seconds"]


@pytest.mark.parametrize("terminal, refused, shown", [
    (True, False, "dask"), (False, False, "tqdm"), (True, True, "tqdm")],
    ids=["terminal: dask's bar", "a log: tqdm", "dask's bar refused: tqdm"])
def test_the_command_shows_its_progress_and_the_dashboard(tmp_path, capsys, monkeypatch,
                                                          scheduler, terminal, refused, shown):
    from distributed.diagnostics.progressbar import TextProgressBar

    monkeypatch.setattr(sys.stdout, "isatty", lambda: terminal)
    if refused:
        async def closed(self):
            """As when the scheduler closes the bar's connection at once."""

        monkeypatch.setattr(TextProgressBar, "listen", closed)
    paths = write_runs(tmp_path, n_runs=2)
    assert main(_campaign_args(paths, tmp_path / "out", scheduler)) == 0
    captured = capsys.readouterr()
    assert f"campaign: dashboard {scheduler.dashboard_link}\n" in captured.out
    dask_line = "[########################################] | 100% Completed |"
    tqdm_line = "campaign: 100%|"
    assert (dask_line in captured.out) == (shown == "dask")
    assert (tqdm_line in captured.err and "| 2/2 [" in captured.err) == (shown == "tqdm")


def test_a_scheduler_without_a_dashboard_is_said_to_serve_none():
    # Every scheduler of distributed >= 2024 serves one (without bokeh, a page saying what
    # to install); others need not.
    client = SimpleNamespace(scheduler_info=lambda: {"services": {}})
    assert dashboard(client) == "no dashboard: the scheduler serves none"
