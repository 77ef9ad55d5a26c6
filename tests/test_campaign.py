"""aare_lab.campaign: runs tables, dark policies, fingerprints, the manifest, and
campaigns on a local Dask cluster (npy files, HDF5 datasets, a runs table, slsDetector
master files) against a serial loop of find_clusters; the GPUs a cuda campaign picks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

distributed = pytest.importorskip("distributed",
                                  reason="the campaign needs the [campaign] extra")

from aare_env import aare_python
from campaign_helpers import (
    PEAK,
    SPEC,
    assert_run_equals,
    serial_loop,
    write_runs,
)
from test_sources import write_raw

from aare_lab.campaign import Campaign, DarkPerRun, Run, SavedPedestals, failed_runs, runs_table
from aare_lab.campaign import cluster
from aare_lab.campaign.bins import CampaignBins, RunningCount
from aare_lab.campaign.darks import with_darks
from aare_lab.campaign.manifest import MANIFEST
from aare_lab.campaign.task import publish
from aare_lab.model.results import truncated_frames
from aare_lab.pipeline import train_pedestal_for
from aare_lab.sources.files import fingerprint


def test_runs_from_globs_master_files_hdf5_and_a_table(tmp_path):
    for name in ("b.npy", "a.npy"):
        (tmp_path / name).write_bytes(b"")
    table = tmp_path / "runs.csv"
    table.write_text("run,frames,dark\nfirst,a.npy,d.npy\nsecond,/abs/b.h5:/entry/data,\n")
    assert [r.name for r in runs_table(str(tmp_path / "*.npy"))] == ["a", "b"]
    assert [r.name for r in runs_table(["x/scan_master_3.json", "y/z.h5:/entry/data"])] == \
        ["scan_3", "z"]
    assert runs_table(str(table)) == [
        Run("first", str(tmp_path / "a.npy"), str(tmp_path / "d.npy")),
        Run("second", "/abs/b.h5:/entry/data")]
    with pytest.raises(ValueError, match="two runs are named 'a'"):
        runs_table(["p/a.npy", "q/a.npy"])
    with pytest.raises(FileNotFoundError, match="no file matches"):
        runs_table(str(tmp_path / "none*.npy"))


def test_dark_policies():
    runs = [Run("a", "a.npy"), Run("b", "b.npy")]
    assert [r.dark for r in with_darks(runs, "d.npy")] == ["d.npy", "d.npy"]
    assert [r.dark for r in with_darks(runs, "darks/{run}.npy")] == ["darks/a.npy",
                                                                    "darks/b.npy"]
    assert [r.dark for r in with_darks(runs, {"a": "x.npy", "b": "y.npy"})] == ["x.npy",
                                                                              "y.npy"]
    saved = with_darks(runs, SavedPedestals("peds/{run}.nc"))
    assert [(r.dark, r.pedestal) for r in saved] == [(None, "peds/a.nc"), (None, "peds/b.nc")]
    with pytest.raises(ValueError, match="no dark for the run 'b'"):
        with_darks(runs, DarkPerRun({"a": "x.npy"}))
    with pytest.raises(ValueError, match="no dark frames or saved pedestal for the runs a, b"):
        with_darks(runs, None)


def test_fingerprint_follows_content_and_mtime(tmp_path):
    path = tmp_path / "f.npy"
    np.save(path, np.zeros((300, 32, 32), np.uint16))
    first = fingerprint(str(path))
    assert fingerprint(str(path)) == first
    data = np.zeros((300, 32, 32), np.uint16)
    data[-1, -1, -1] = 1
    np.save(path, data)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns))
    assert fingerprint(str(path)) not in (first, None)
    assert fingerprint(str(tmp_path / "gone.npy")) is None


def test_lattice_bins_add_up_to_one_histogram():
    bins = CampaignBins("ADU", width=3)
    a, b = np.array([10.0, 11, 40]), np.array([-7.0, 12, 90])
    ea, ca, *_ = bins.count(a)
    eb, cb, *_ = bins.count(b)
    first = min(bins.index(ea), bins.index(eb))
    edges = bins.lattice(first, max(bins.index(ea) + len(ca), bins.index(eb) + len(cb)))
    summed = np.zeros(len(edges) - 1, np.int64)
    for e, c in ((ea, ca), (eb, cb)):
        summed[bins.index(e) - first:][:len(c)] += c
    np.testing.assert_array_equal(summed, np.histogram(np.r_[a, b], edges)[0])


def test_campaign_equals_a_serial_loop(tmp_path):
    paths = write_runs(tmp_path)
    campaign = Campaign([str(p) for p in paths], SPEC, dark=str(tmp_path / "dark.npy"),
                        out=tmp_path / "out", peak=PEAK)
    result = campaign.run(workers=2, processes=False, progress=False)
    serial = serial_loop(paths, tmp_path / "dark.npy")
    for path, expected in zip(paths, serial):
        assert_run_equals(tmp_path / "out" / path.stem, expected)
    edges = np.r_[result["energy_lo"].to_numpy(), result["energy_hi"].to_numpy()[-1]]
    energies = np.concatenate([s["energy"].to_numpy() for s in serial])
    np.testing.assert_array_equal(result["spectrum"].to_numpy(),
                                  np.histogram(energies, edges)[0])
    assert result["spectrum"].sum() == len(energies)
    assert list(result["clusters"].to_numpy()) == [s.sizes["cluster"] for s in serial]
    assert list(result["frames"].to_numpy()) == [20] * 4
    assert set(result["status"].to_numpy()) == {"done"}
    assert np.all(np.abs(result["ka_position"].to_numpy() - 322) < 15)
    assert len(set(result["worker"].to_numpy())) == 2
    table = (tmp_path / "out" / "runs.csv").read_text().splitlines()
    assert table[0].startswith("run,status,frames,clusters,truncated_frames,ka_position")
    assert [line.split(",")[0] for line in table[1:]] == ["run0", "run1", "run2", "run3"]
    assert not [p for p in (tmp_path / "out").iterdir() if ".attempt-" in p.name]


def test_a_second_run_skips_what_is_finished_and_redoes_what_changed(tmp_path):
    paths = write_runs(tmp_path, n_runs=3)
    def campaign(**changes):
        options = dict(dark=str(tmp_path / "dark.npy"), out=tmp_path / "out") | changes
        return Campaign([str(p) for p in paths], options.pop("spec", SPEC), **options)
    campaign().run(workers=1, processes=False, progress=False)
    assert campaign().pending() == []
    np.save(paths[1], np.load(paths[0]))
    assert [r.name for r in campaign().pending()] == ["run1"]
    assert [r.name for r in campaign(spec=SPEC.replace(n_sigma=4)).pending()] == \
        ["run0", "run1", "run2"]
    assert len(campaign().pending(force=True)) == 3
    before = (tmp_path / "out" / "run0" / "run.json").stat().st_mtime_ns
    result = campaign().run(workers=1, processes=False, progress=False)
    assert (tmp_path / "out" / "run0" / "run.json").stat().st_mtime_ns == before
    assert result["clusters"][1] == result["clusters"][0]
    assert campaign().pending() == []


def test_bad_inputs_fail_their_runs_alone(tmp_path):
    paths = write_runs(tmp_path, n_runs=2)
    (tmp_path / "corrupt.npy").write_bytes(b"\x93NUMPY garbage")
    runs = [str(paths[0]), str(tmp_path / "corrupt.npy"), str(tmp_path / "missing.npy"),
            str(paths[1])]
    result = Campaign(runs, SPEC, dark=str(tmp_path / "dark.npy"), out=tmp_path / "out").run(
        workers=2, processes=False, progress=False)
    failed = failed_runs(result)
    assert list(failed) == ["corrupt", "missing"]
    assert "corrupt.npy" in failed["corrupt"] and "missing.npy" in failed["missing"]
    assert all("\n" not in reason for reason in failed.values())
    assert list(result["status"].to_numpy()) == ["done", "failed", "failed", "done"]
    assert list(result["clusters"].to_numpy()[[1, 2]]) == [-1, -1]
    assert result.attrs["failed_runs"] == "corrupt missing"
    assert not (tmp_path / "out" / "corrupt").exists()
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert {name: row["status"] for name, row in manifest["runs"].items()} == {
        "run0": "done", "corrupt": "failed", "missing": "failed", "run1": "done"}


def test_a_dead_attempts_leftovers_neither_block_nor_mix(tmp_path):
    paths = write_runs(tmp_path, n_runs=1)
    out = tmp_path / "out"
    leftover = out / ".run0.attempt-deadbeef"
    leftover.mkdir(parents=True)
    (leftover / "clusters.partial.nc").write_bytes(b"half")
    (out / "run0").mkdir()
    (out / "run0" / "clusters.nc").write_bytes(b"an older, unfinished result")
    result = Campaign([str(paths[0])], SPEC, dark=str(tmp_path / "dark.npy"), out=out).run(
        workers=1, processes=False, progress=False)
    assert result["status"].item() == "done"
    assert sorted(p.name for p in out.iterdir()) == ["campaign.nc", "manifest.json", "run0",
                                                     "runs.csv"]
    assert_run_equals(out / "run0", serial_loop(paths, tmp_path / "dark.npy")[0])


def test_publish_replaces_an_older_result_whole(tmp_path):
    old, new = tmp_path / "run", tmp_path / ".run.attempt-1"
    for folder, text in ((old, "old"), (new, "new")):
        folder.mkdir()
        (folder / "a").write_text(text)
    (old / "only_old").write_text("")
    publish(new, old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert sorted(p.name for p in old.iterdir()) == ["a"] and (old / "a").read_text() == "new"


def test_saved_pedestals_per_run(tmp_path):
    paths = write_runs(tmp_path, n_runs=2)
    from aare_lab.sources import open_source

    for path in paths:
        pedestal = train_pedestal_for(SPEC, open_source(str(tmp_path / "dark.npy")), 40,
                                      progress=False)
        pedestal.save(tmp_path / f"{path.stem}.nc")
    result = Campaign([str(p) for p in paths], SPEC,
                      dark=SavedPedestals(str(tmp_path / "{run}.nc")),
                      out=tmp_path / "out").run(workers=1, processes=False, progress=False)
    for path, expected in zip(paths, serial_loop(paths, tmp_path / "dark.npy")):
        assert_run_equals(tmp_path / "out" / path.stem, expected)
    assert set(result["status"].to_numpy()) == {"done"}


def test_the_drift_figure_shows_each_run_and_the_sum(tmp_path):
    from aare_lab.plots import campaign_plot

    paths = write_runs(tmp_path, n_runs=3)
    runs = [str(paths[0]), str(tmp_path / "missing.npy"), *map(str, paths[1:])]
    result = Campaign(runs, SPEC, dark=str(tmp_path / "dark.npy"), out=tmp_path / "out",
                      peak=PEAK).run(workers=1, processes=False, progress=False)
    figure = campaign_plot(result)
    by_gid = {a.get_gid(): a for ax in figure.axes for a in ax.get_children()}
    x, y = by_gid["position"].get_data()
    np.testing.assert_array_equal(x, [0, 1, 2, 3])
    np.testing.assert_array_equal(y[[0, 2, 3]], result["ka_position"].to_numpy()[[0, 2, 3]])
    assert np.isnan(y[1])
    np.testing.assert_array_equal(by_gid["failed"].get_data()[0], [1])
    np.testing.assert_array_equal(by_gid["fwhm"].get_data()[1][[0, 2, 3]],
                                  result["ka_fwhm"].to_numpy()[[0, 2, 3]])
    counts, edges = by_gid["spectrum"].get_data()[:2]
    np.testing.assert_array_equal(counts, result["spectrum"].to_numpy())
    assert counts.sum() == result["clusters"].to_numpy()[[0, 2, 3]].sum()
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == [
        "run0", "missing", "run1", "run2"]


def test_a_dark_taken_with_the_beam_on_is_flagged(tmp_path):
    paths = write_runs(tmp_path, n_runs=2, n_frames=SPEC.n_pedestal)
    np.save(tmp_path / "beam_on.npy", np.load(paths[0])[:SPEC.n_pedestal])
    darks = {"run0": str(tmp_path / "dark.npy"), "run1": str(tmp_path / "beam_on.npy")}
    result = Campaign([str(p) for p in paths], SPEC, dark=darks, out=tmp_path / "out").run(
        workers=2, processes=False, progress=False)
    assert list(result["status"].to_numpy()) == ["done", "done"], failed_runs(result)
    assert list(result["dark_ok"].to_numpy()) == [True, False]


def test_runs_of_one_dark_train_it_once_per_worker_and_each_hears_its_warnings(
        tmp_path, monkeypatch):
    """Three runs of one beam-on dark on one worker: one training, each run's pedestal the
    trained one, and each row names the dark's warning."""
    from aare_lab.campaign import task

    paths = write_runs(tmp_path, n_runs=3, n_frames=SPEC.n_pedestal)
    np.save(tmp_path / "beam_on.npy", np.load(paths[0])[:SPEC.n_pedestal])
    trainings = []
    monkeypatch.setattr(task, "_TRAINED", {})
    monkeypatch.setattr(task, "train_pedestal_for",
                        lambda *args, **kw: trainings.append(1) or train_pedestal_for(*args, **kw))
    out = tmp_path / "out"
    result = Campaign([str(p) for p in paths], SPEC, dark=str(tmp_path / "beam_on.npy"),
                      out=out).run(workers=1, processes=False, progress=False)
    assert list(result["status"].to_numpy()) == ["done"] * 3, failed_runs(result)
    assert len(trainings) == 1
    rows = [json.loads((out / p.stem / "run.json").read_text()) for p in paths]
    assert rows[0]["warnings"] and all(row["warnings"] == rows[0]["warnings"] for row in rows)
    assert all(row["notes"] == rows[0]["notes"] for row in rows)
    expected = train_pedestal_for(SPEC, str(tmp_path / "beam_on.npy"), SPEC.n_pedestal,
                                  progress=False).state()
    for path in paths:
        saved = xr.load_dataset(out / path.stem / "pedestal.nc")
        for name, value in expected.items():
            np.testing.assert_array_equal(saved[name].to_numpy(), value, err_msg=name)


def test_the_inputs_reach_the_workers_as_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    campaign = Campaign(["data/a.h5:/entry/data"], SPEC, dark="darks/{run}.npy", out="out")
    assert campaign.runs == [Run("a", f"{tmp_path}/data/a.h5:/entry/data",
                                 f"{tmp_path}/darks/a.npy")]
    assert campaign.task.out == str(tmp_path / "out")


def test_a_campaign_on_hdf5_datasets_equals_a_serial_loop(tmp_path):
    for path in [*write_runs(tmp_path, n_runs=2), tmp_path / "dark.npy"]:
        with h5py.File(path.with_suffix(".h5"), "w") as file:
            file["entry/data"] = np.load(path)
    runs = sorted(f"{p}:/entry/data" for p in tmp_path.glob("run*.h5"))
    dark = f"{tmp_path / 'dark.h5'}:/entry/data"
    result = Campaign(str(tmp_path / "run*.h5:/entry/data"), SPEC, dark=dark,
                      out=tmp_path / "out").run(workers=1, processes=False, progress=False)
    assert list(result["run"].to_numpy()) == ["run0", "run1"]
    assert set(result["status"].to_numpy()) == {"done"}, failed_runs(result)
    for name, expected in zip(["run0", "run1"], serial_loop(runs, dark)):
        assert_run_equals(tmp_path / "out" / name, expected)


def test_a_campaign_from_a_runs_table_equals_a_serial_loop(tmp_path):
    paths = write_runs(tmp_path, n_runs=2)
    # run1's own dark, 3 ADU above run0's: every energy of run1 moves with it.
    np.save(tmp_path / "dark1.npy", np.load(tmp_path / "dark.npy") + 3)
    (tmp_path / "table").mkdir()
    table = tmp_path / "table" / "runs.csv"
    table.write_text("run,frames,dark\nfirst,../run0.npy,../dark.npy\n"
                     "second,../run1.npy,../dark1.npy\n")
    result = Campaign(str(table), SPEC, out=tmp_path / "out").run(workers=1, processes=False,
                                                                  progress=False)
    assert list(result["run"].to_numpy()) == ["first", "second"]
    assert set(result["status"].to_numpy()) == {"done"}, failed_runs(result)
    serial = [*serial_loop(paths[:1], tmp_path / "dark.npy"),
              *serial_loop(paths[1:], tmp_path / "dark1.npy")]
    for name, expected in zip(["first", "second"], serial):
        assert_run_equals(tmp_path / "out" / name, expected)
    assert list(result["clusters"].to_numpy()) == [s.sizes["cluster"] for s in serial]


def _write_masters(folder, paths, dark) -> None:
    """The runs ``paths`` (and their ``dark``) as slsDetector acquisitions under ``folder``
    (the layout of `campaign_helpers.master_campaign`)."""
    for path in paths:
        frames = np.load(path)
        write_raw(folder / "runs", [frames], np.arange(1, len(frames) + 1), name=path.stem)
    frames = np.load(dark)
    write_raw(folder / "dark", [frames], np.arange(1, len(frames) + 1), name="dark")


def _check_master_campaign(folder, paths) -> None:
    """`master_campaign`'s campaign equals its serial loop, and the raw files gave the
    frames of the ``paths`` they were written from."""
    names = [f"{path.stem}_0" for path in paths]
    result = xr.load_dataset(folder / "out" / "campaign.nc")
    assert list(result["run"].to_numpy()) == names
    assert set(result["status"].to_numpy()) == {"done"}, failed_runs(result)
    for name in names:
        with xr.open_dataset(folder / "serial" / f"{name}.nc") as expected:
            assert_run_equals(folder / "out" / name, expected)
    from_npy = serial_loop(paths, paths[0].parent / "dark.npy")
    assert list(result["clusters"].to_numpy()) == [s.sizes["cluster"] for s in from_npy]
    assert list(result["frames"].to_numpy()) == [s.sizes["frame"] for s in from_npy]


@pytest.mark.aare
@pytest.mark.slow
def test_a_campaign_on_master_files_in_aares_interpreter_equals_a_serial_loop(tmp_path):
    python = aare_python("2026.9.30")
    if python is None:
        pytest.skip("aare 2026.9.30 is not installed (/opt/aare-2026.9.30, tests/aare_env.py)")
    paths = write_runs(tmp_path, n_runs=2)
    _write_masters(tmp_path / "raw", paths, tmp_path / "dark.npy")
    tests = Path(__file__).resolve().parent
    # aare's interpreter has no Dask: it borrows this one's, after its own packages (the
    # same Python: checked first, as compiled modules need it).
    script = ("import sys; assert sys.version_info[:2] == tuple(map(int, sys.argv[3:5])), "
              "'aare has another Python than the tests'; sys.path.append(sys.argv[1]); "
              "from campaign_helpers import master_campaign; master_campaign(sys.argv[2])")
    done = subprocess.run(
        [python, "-c", script, str(Path(distributed.__file__).parents[1]),
         str(tmp_path / "raw"), *map(str, sys.version_info[:2])],
        check=False, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)])})
    assert done.returncode == 0, done.stderr[-3000:]
    _check_master_campaign(tmp_path / "raw", paths)


class _Made(Exception):
    """The cluster `Campaign.run` would make, instead of making it."""


@pytest.mark.parametrize("finder, visible, count, options, made", [
    ("cuda", None, 3, {}, ("gpus", ["0", "1", "2"])),
    ("cuda", "2,5", 8, {}, ("gpus", ["2", "5"])),
    ("cuda", None, 3, {"workers": 2}, ("local", 2)),
    ("cuda", None, 3, {"processes": False}, ("local", None)),
    ("serial", None, 3, {}, ("local", None)),
    ("cuda", None, 3, {"gpus": ["1"]}, ("gpus", ["1"])),
], ids=["count", "CUDA_VISIBLE_DEVICES", "workers", "threads", "serial", "given"])
def test_the_cuda_finder_gets_one_worker_per_visible_gpu(tmp_path, monkeypatch, finder,
                                                         visible, count, options, made):
    def gpu_cluster(gpus):
        raise _Made("gpus", gpus)

    def local_cluster(workers=None, processes=True):
        raise _Made("local", workers)

    monkeypatch.setattr(cluster, "gpu_cluster", gpu_cluster)
    monkeypatch.setattr(cluster, "local_cluster", local_cluster)
    monkeypatch.setattr(cluster, "gpu_count", lambda: count)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    said = []
    campaign = Campaign(["a.npy"], SPEC.replace(finder=finder), dark="d.npy", out=tmp_path)
    with pytest.raises(_Made) as make:
        campaign.run(report=said.append, **options)
    assert make.value.args == made
    picked = made[0] == "gpus" and "gpus" not in options
    assert said == (["one worker per GPU: " + ", ".join(made[1]) + " (CUDA_VISIBLE_DEVICES)"]
                    if picked else [])


@pytest.mark.parametrize("visible", [None, ""])
def test_the_cuda_finder_without_a_visible_gpu_is_refused(tmp_path, monkeypatch, visible):
    monkeypatch.setattr(cluster, "gpu_count", lambda: 0)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    campaign = Campaign(["a.npy"], SPEC.replace(finder="cuda"), dark="d.npy", out=tmp_path)
    with pytest.raises(ValueError, match="no GPU is visible here .*the cuda finder needs one: "
                                         ".*use the frozen finder"):
        campaign.run()


def _malloc_trim():
    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


@pytest.mark.parametrize("make", [lambda: cluster.local_cluster(1),
                                  lambda: cluster.gpu_cluster(["0"])], ids=["local", "gpu"])
def test_the_clusters_made_here_start_workers_without_dasks_malloc_trim(make, monkeypatch):
    """dask's nannies set MALLOC_TRIM_THRESHOLD_ in their workers (runs 12 % slower); the
    workers of a campaign's own cluster start without it, and dask's config is as before."""
    import dask

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    before = dask.config.get("distributed.nanny.pre-spawn-environ")
    assert before.get("MALLOC_TRIM_THRESHOLD_") is not None, "dask no longer sets it"
    with make() as made, distributed.Client(made) as client:
        seen = set(client.run(_malloc_trim).values())
    assert seen == {None}
    assert dask.config.get("distributed.nanny.pre-spawn-environ") == before


def _thread_settings():
    import numba
    return (*(os.environ.get(name) for name in cluster.THREAD_VARIABLES),
            numba.config.NUMBA_NUM_THREADS)


def test_local_workers_share_the_cores_unless_told(monkeypatch):
    """Two worker processes each get half the cores (at least one) for Numba's threads and
    the copy pools; a variable set in this process is what they inherit instead."""
    for name in cluster.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    with cluster.local_cluster(2) as made, distributed.Client(made) as client:
        seen = set(client.run(_thread_settings).values())
    assert seen == {(str(share), str(share), share)}
    assert [name for name in cluster.THREAD_VARIABLES if name in os.environ] == [], \
        "the workers' share leaked into this process's environment"
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    with cluster.local_cluster(2) as made, distributed.Client(made) as client:
        seen = set(client.run(_thread_settings).values())
    assert seen == {("3", str(share), 3)}


def test_this_process_finds_clusters_after_a_local_campaign():
    """Numba's threads already running here, a cluster of worker processes comes and goes,
    and a finder compiled afterwards still runs here (Numba refuses a changed
    NUMBA_NUM_THREADS once its threads run, and it re-reads the variable at every
    compilation)."""
    script = textwrap.dedent("""
        import os
        import numba
        import numpy as np
        from distributed import Client
        from aare_lab.campaign.cluster import local_cluster

        @numba.njit(parallel=True)
        def before(a):
            for i in numba.prange(a.size):
                a[i] += 1
        before(np.zeros(8))
        with local_cluster(2) as made, Client(made) as client:
            client.run(lambda: None)

        @numba.njit(parallel=True)
        def after(a):
            for i in numba.prange(a.size):
                a[i] += 2
        a = np.zeros(8)
        after(a)
        print(a.sum(), os.environ.get("NUMBA_NUM_THREADS"))
    """)
    env = {k: v for k, v in os.environ.items() if k not in cluster.THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["16.0", "None"]


@pytest.mark.parametrize("make", ["local_cluster(1)", "gpu_cluster(['0'])"])
def test_a_cluster_made_first_in_a_fresh_process_keeps_dasks_config(make):
    """In a process that has not imported distributed yet (a script's first campaign), the
    cluster starts, a client connects and dask's distributed settings are all still there."""
    script = textwrap.dedent(f"""
        import sys
        sys.modules["dask_cuda"] = None
        import dask
        from aare_lab.campaign.cluster import gpu_cluster, local_cluster
        with {make} as made:
            from distributed import Client
            with Client(made) as client:
                print(len(client.scheduler_info()["workers"]))
        print(dask.config.get("distributed.comm.timeouts.connect"))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "30s"]


def test_a_single_gpus_worker_may_use_the_hosts_memory(monkeypatch):
    """dask's default gives a one-thread worker one core's share of memory (8 GiB of a
    16-core 128 GiB host), too little for a GPU run's host buffers: the worker was paused and
    restarted mid-campaign. The GPUs' workers share the host's memory instead."""
    from distributed.system import MEMORY_LIMIT

    monkeypatch.setitem(sys.modules, "dask_cuda", None)
    with cluster.gpu_cluster(["0"]) as made, distributed.Client(made) as client:
        limits = [info["memory_limit"] for info in client.scheduler_info()["workers"].values()]
    assert limits == [MEMORY_LIMIT]


@pytest.mark.parametrize("bins", [CampaignBins("ADU"), CampaignBins("ADU", width=3),
                                  CampaignBins("keV"),
                                  CampaignBins("ADU", edges=(0.0, 10.0, 100.0, 1000.0))])
def test_a_runs_spectrum_counted_chunk_by_chunk_is_one_histogram(bins):
    rng = np.random.default_rng(5)
    # Energies on edges (of the lattice and of the fixed bins), beyond both ends, a chunk
    # with nothing, chunks far below and above the others.
    energies = np.r_[rng.normal(500, 300, 5000), np.arange(-6, 6) - 0.5, 0.0, 100.0, 1000.0]
    chunks = [*np.array_split(energies, 9), np.zeros(0), np.array([-3000.0]),
              np.array([9000.0])]
    counted = RunningCount(bins)
    for chunk in chunks:
        counted.add(chunk)
    edges, counts, underflow, overflow = counted.result()
    everything = np.concatenate(chunks)
    np.testing.assert_array_equal(counts, np.histogram(everything, edges)[0])
    assert (underflow, overflow) == (np.sum(everything < edges[0]),
                                     np.sum(everything > edges[-1]))
    if bins.edges is None:
        assert underflow == overflow == 0 and edges[0] <= -3000 < 9000 < edges[-1]
        assert np.allclose(np.diff(edges), bins.width)
    else:
        np.testing.assert_array_equal(edges, bins.edges)
        assert underflow > 0 and overflow > 0
    assert RunningCount(bins).result()[1].sum() == 0


def test_the_table_counts_the_truncated_frames_of_each_run(tmp_path):
    paths = write_runs(tmp_path, n_runs=2)
    spec = SPEC.replace(max_clusters_per_frame=3)
    with pytest.warns(UserWarning):
        result = Campaign([str(p) for p in paths], spec, dark=str(tmp_path / "dark.npy"),
                          out=tmp_path / "out").run(workers=1, processes=False,
                                                    progress=False)
        serial = serial_loop(paths, tmp_path / "dark.npy", spec)
    expected = [len(truncated_frames(s)) for s in serial]
    assert min(expected) > 0
    assert list(result["truncated_frames"].to_numpy()) == expected
