"""`aare-lab campaign`: runs in, OUT/<run>/ and the combined table out, failed runs named."""

from __future__ import annotations

import csv

import pytest

pytest.importorskip("distributed", reason="the campaign needs the [campaign] extra")

from campaign_helpers import assert_run_equals, serial_loop, write_runs

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
