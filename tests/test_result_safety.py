"""A result file is complete and right, or visibly partial; never destroyed (issue: results
that are never lost).

Each fault is real: a reader holding the file in another process, a second writer, a small
tmpfs that fills up, signals sent to a running ``aare-lab find`` at random moments.
"""

import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import xarray as xr
from cli_process import CliProcess
from small_disk import small_disk

from aare_lab import find_clusters
from aare_lab.cli import main
from aare_lab.model.results import load_result, make_result
from aare_lab.model.spec import FinderSpec
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.storage.destination import RESERVE_BYTES, Destination, DestinationBusy
from aare_lab.storage.result_store import IncompleteResultWarning, ResultWriteError, ResultWriter


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Dark and data frames, and a long run (serial, 11x11: several seconds)."""
    folder = tmp_path_factory.mktemp("inputs")
    sim = Simulator(Detector(frame_shape=(64, 64)), Beam(photons_per_frame=80), seed=3)
    np.save(folder / "dark.npy", sim.dark(40))
    frames, _ = sim.frames(50)
    np.save(folder / "frames.npy", frames)
    np.save(folder / "long.npy", np.tile(frames, (120, 1, 1)))
    return folder


def find_args(files, out, *more, frames="frames.npy"):
    return ["find", "--dark", str(files / "dark.npy"), "--n-pedestal", "40",
            "--frames", str(files / frames), "--out", str(out), "--quiet", *more]


def long_run(files, out, *more):
    return CliProcess(*find_args(files, out, "--finder", "serial", "--cluster-size", "11x11",
                                 *more, frames="long.npy"))


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wait_for(path, seconds=120):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def leftovers(folder):
    """Files a writer keeps beside its result while it runs (none once it ended)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


HOLDER = """
import sys
import xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
print(int(ds["window"].isel(cluster=0).sum()), flush=True)
sys.stdin.readline()
print(int(ds["window"].sum()), int(ds.sizes["cluster"]), ds.attrs["n_sigma"], flush=True)
"""


@pytest.mark.slow
def test_a_result_held_by_a_reader_is_never_destroyed(files, tmp_path, capsys):
    out = tmp_path / "held.nc"
    assert main(find_args(files, out)) == 0
    before = load_result(out)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()   # the reader has the file open
        kept = digest(out)
        capsys.readouterr()
        assert main(find_args(files, out, "--n-sigma", "6")) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "held.nc exists: pass --overwrite" in err
        assert digest(out) == kept
        assert main(find_args(files, out, "--n-sigma", "6", "--overwrite")) == 0
        holder.stdin.write("\n")
        holder.stdin.flush()
        window_sum, n_clusters, n_sigma = holder.stdout.readline().split()
    finally:
        holder.kill()
    # The reader went on reading the file it had opened, whole.
    assert (int(window_sum), int(n_clusters), float(n_sigma)) == (
        int(before["window"].sum()), before.sizes["cluster"], 5.0)
    after = load_result(out)
    assert after.attrs["n_sigma"] == 6.0 and after.sizes["cluster"] < before.sizes["cluster"]
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_second_writer_of_one_file_refuses_and_the_first_result_is_intact(files, tmp_path,
                                                                           capsys):
    out = tmp_path / "same.nc"
    with long_run(files, out) as first:
        wait_for(tmp_path / "same.partial.nc")
        capsys.readouterr()
        assert main(find_args(files, out)) == 1
        err = capsys.readouterr().err
        assert f"is writing {out}: wait for it to finish or choose another --out" in err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert first.wait(120) == 0, first.output
    with xr.open_dataset(out, engine="h5netcdf") as raw:
        assert raw.attrs["complete"] == 1 and raw.sizes["frame"] == 6000
        assert int(raw["n_kept"].sum()) == raw.sizes["cluster"] > 0
    assert leftovers(tmp_path) == []


def test_the_lock_of_a_dead_writer_blocks_nobody(tmp_path):
    out = tmp_path / "x.nc"
    code = ("import sys, os; from aare_lab.storage.destination import Destination; "
            f"d = Destination({str(out)!r}); print('held', flush=True); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    with Destination(out) as claimed:   # the dead process's lock file is there, unlocked
        with pytest.raises(DestinationBusy, match=f"pid .* is writing {out}"):
            Destination(out)
        assert claimed.path == out
    assert leftovers(tmp_path) == []


@pytest.fixture(scope="module")
def pedestal_file(files, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pedestal")
    assert main(find_args(files, folder / "first.nc", "--save-pedestal",
                          str(folder / "dark.nc"))) == 0
    return folder / "dark.nc"


@pytest.mark.parametrize("case", ["--out is --pedestal", "--out's partial file is --pedestal",
                                  "--out is --calibration", "--save-pedestal is --out",
                                  "--out is --frames", "--out is --dark",
                                  "--save-pedestal is --dark"])
def test_an_out_that_is_an_input_is_refused_and_the_input_kept(files, pedestal_file, tmp_path,
                                                               capsys, case):
    ped = tmp_path / ("run.partial.nc" if "partial" in case else "dark.nc")
    ped.write_bytes(pedestal_file.read_bytes())
    frames, dark = tmp_path / "frames.npy", tmp_path / "darks.npy"
    frames.write_bytes((files / "frames.npy").read_bytes())
    dark.write_bytes((files / "dark.npy").read_bytes())
    base = ["find", "--quiet", "--overwrite"]
    base += [] if "--frames" in case else ["--frames", str(files / "frames.npy")]
    args = {
        "--out is --pedestal": ["--pedestal", str(ped), "--out", str(ped)],
        "--out's partial file is --pedestal": ["--pedestal", str(ped),
                                               "--out", str(tmp_path / "run.nc")],
        "--out is --calibration": ["--pedestal", str(pedestal_file), "--calibration", str(ped),
                                   "--out", str(ped)],
        "--save-pedestal is --out": ["--dark", str(files / "dark.npy"), "--n-pedestal", "40",
                                     "--save-pedestal", str(ped), "--out", str(ped)],
        "--out is --frames": ["--frames", str(frames), "--pedestal", str(pedestal_file),
                              "--out", str(frames)],
        "--out is --dark": ["--dark", str(dark), "--n-pedestal", "40", "--out", str(dark)],
        "--save-pedestal is --dark": ["--dark", str(dark), "--n-pedestal", "40",
                                      "--save-pedestal", str(dark),
                                      "--out", str(tmp_path / "run.nc")],
    }[case]
    kept = {path: digest(path) for path in (ped, frames, dark)}
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    # A frames or dark file is never a .nc result file, which --out must be.
    assert any(words in err for words in ("would overwrite the input", "are the same file",
                                          "--out must be a .nc file")), err
    assert {path: digest(path) for path in kept} == kept
    assert not (tmp_path / "run.nc").exists()


def test_an_existing_save_pedestal_is_kept_without_overwrite(files, pedestal_file, tmp_path,
                                                            capsys):
    ped = tmp_path / "dark.nc"
    ped.write_bytes(pedestal_file.read_bytes())
    kept = digest(ped)
    assert main(find_args(files, tmp_path / "r.nc", "--save-pedestal", str(ped))) == 1
    assert f"{ped} exists: pass --overwrite" in capsys.readouterr().err
    assert digest(ped) == kept and not (tmp_path / "r.nc").exists()


def test_find_clusters_replaces_an_existing_result_only_when_asked(files, tmp_path):
    out = tmp_path / "r.nc"
    out.write_bytes(b"a result of an earlier run")
    args = dict(dark=files / "dark.npy", n_pedestal=40, progress=False, out=out)
    with pytest.raises(FileExistsError, match=re.escape(f"{out} exists: pass --overwrite "
                                                        "(Python: overwrite=True)")):
        find_clusters(files / "frames.npy", **args)
    assert out.read_bytes() == b"a result of an earlier run"
    assert not (tmp_path / "r.partial.nc").exists()
    with find_clusters(files / "frames.npy", overwrite=True, **args) as result:
        assert int(result.sizes["frame"]) == 50
        assert load_result(out).identical(result.load())


def test_a_run_that_cannot_fit_stops_before_the_disk_is_full(files, tmp_path, capsys):
    with small_disk(tmp_path / "disk", "12m") as disk:
        out = disk / "x.nc"
        code = main(find_args(files, out, "--cluster-size", "9x9", "--window-dtype",
                              "float64", frames="long.npy"))
        err = capsys.readouterr()
        assert code == 1 and "wrote" not in err.out, err
        line = [text for text in err.err.splitlines() if "error:" in text]
        assert len(line) == 1 and "Traceback" not in err.err, err.err
        assert f"could not write {out}: the disk has" in line[0]
        assert "stopped before filling it" in line[0]
        saved = int(line[0].split(" frames saved in ")[0].rsplit(" ", 1)[1])
        assert f"frames saved in {disk / 'x.partial.nc'} (complete=0)" in line[0]
        assert not out.exists() and leftovers(disk) == []
        with pytest.warns(IncompleteResultWarning, match=f"the {saved} frames"):
            partial = load_result(disk / "x.partial.nc")
        assert 0 < saved == partial.sizes["frame"] < 6000
        assert int(partial["n_kept"].sum()) == partial.sizes["cluster"]


def columns_of(n, k, rng, start=0):
    """One chunk of ``n`` frames of ``k`` clusters with random (incompressible) windows."""
    return {"frame": np.arange(start, start + n), "n_found": np.full(n, k),
            "n_kept": np.full(n, k), "frame_number": np.repeat(np.arange(start, start + n), k),
            "y": rng.integers(0, 400, n * k).astype(np.int32),
            "x": rng.integers(0, 400, n * k).astype(np.int32),
            "window": rng.integers(-2**31, 2**31 - 1, (n * k, 3, 3)).astype(np.int32),
            "energy": rng.normal(size=n * k)}


def empty_result():
    return make_result(spec=FinderSpec("frozen", n_pedestal=10), frame_shape=(400, 400),
                       frame_numbers=np.zeros(0, np.int64), n_found=np.zeros(0, np.int64),
                       n_kept=np.zeros(0, np.int64), cluster_frame=np.zeros(0, np.int64),
                       cluster_y=np.zeros(0, np.int32), cluster_x=np.zeros(0, np.int32),
                       windows=np.zeros((0, 3, 3), np.int32))


def test_a_full_disk_stops_the_writer_with_every_saved_frame_readable(tmp_path):
    """No estimate to go by (the frames to come are unknown): the disk really fills."""
    rng = np.random.default_rng(5)
    with small_disk(tmp_path / "disk", "20m") as disk:
        written = []
        with pytest.raises(ResultWriteError) as info:
            with ResultWriter(disk / "full.nc", empty_result()) as writer:
                for start in range(0, 100000, 10):
                    written.append(columns_of(10, 300, rng, start))
                    writer.append(written[-1])
        error = info.value
        assert error.reason == "the disk is full" and error.frames_saved > 0
        assert str(error).startswith(f"could not write {disk / 'full.nc'}: the disk is full; "
                                     f"{error.frames_saved} frames saved in ")
        with pytest.warns(IncompleteResultWarning):
            saved = load_result(disk / "full.partial.nc")
        n = error.frames_saved
        assert saved.sizes["frame"] == n and n % 10 == 0
        want = {name: np.concatenate([c[name] for c in written[:n // 10]])
                for name in written[0]}
        for name in ("window", "y", "energy", "frame_number", "n_kept"):
            np.testing.assert_array_equal(saved[name].values, want[name])
        assert leftovers(disk) == [] and not (disk / "full.nc").exists()


def test_a_disk_without_room_for_the_file_refuses_at_once(tmp_path):
    with small_disk(tmp_path / "disk", f"{RESERVE_BYTES // 2}") as disk:
        with pytest.raises(ResultWriteError, match=f"could not write {disk / 'x.nc'}: the disk "
                                                   "is full"):
            ResultWriter(disk / "x.nc", empty_result())
        assert list(disk.iterdir()) == []


def test_a_tiny_result_takes_kilobytes(files, tmp_path):
    out = tmp_path / "one.nc"
    assert main(find_args(files, out, frames="frames.npy")) == 0
    one = tmp_path / "first.nc"
    np.save(tmp_path / "first.npy", np.load(files / "frames.npy")[:1])
    assert main(["find", "--dark", str(files / "dark.npy"), "--n-pedestal", "40", "--frames",
                 str(tmp_path / "first.npy"), "--out", str(one), "--quiet"]) == 0
    result = load_result(one)
    assert 20 < result.sizes["cluster"] < 200
    assert one.stat().st_size < 64_000   # 8.4 MB with megabyte chunks per variable


SIGNALS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated (SIGTERM)")}


def check_stopped(process, folder, number):
    """What a run stopped by ``number`` (or ended before it came) must have left: a complete
    result under its name, or a readable partial file of whole chunks (or nothing), never
    both, and one line saying why it stopped."""
    out, partial = folder / "run.nc", folder / "run.partial.nc"
    code = process.wait(120)
    text = process.output
    assert "Traceback" not in text and "Segmentation" not in text and code >= 0, text
    assert leftovers(folder) == [] and not (out.exists() and partial.exists()), text
    if code:
        want, word = SIGNALS[number]
        assert code == want and text.strip().splitlines()[-1] == f"aare-lab find: {word}", text
    if out.exists():
        # Finished; a signal after the rename may still have cut the summary short.
        with xr.open_dataset(out, engine="h5netcdf") as raw:
            assert raw.attrs["complete"] == 1 and raw.sizes["frame"] == 6000
        return "finished"
    assert code, text
    if partial.exists():
        with xr.open_dataset(partial, engine="h5netcdf") as raw:
            assert raw.attrs["complete"] == 0 and raw.sizes["frame"] > 0
            assert raw.attrs["frames_written"] == raw.sizes["frame"]
            assert int(raw["n_kept"].sum()) == raw.sizes["cluster"]
        return "partial"
    return "nothing"


def test_sigterm_while_finding_exits_143_with_a_partial_file(files, tmp_path):
    with long_run(files, tmp_path / "run.nc") as process:
        wait_for(tmp_path / "run.partial.nc")
        time.sleep(1.0)
        process.signal(signal.SIGTERM)
        assert check_stopped(process, tmp_path, signal.SIGTERM) == "partial"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(int(os.environ.get("AARE_LAB_SIGNAL_SEEDS", "10"))))
def test_a_signal_at_a_random_moment_leaves_a_clean_stop(files, tmp_path, seed):
    """Start-up, training, the file's creation, the first chunk, later chunks, the end.

    From 0.5 s on: before that the interpreter itself may still be starting (its site
    packages), where no program's handler can be in place yet.
    """
    rng = np.random.default_rng(seed)
    number = (signal.SIGINT, signal.SIGTERM)[seed % 2]
    with long_run(files, tmp_path / "run.nc") as process:
        time.sleep(rng.uniform(0.5, 6.0))
        process.signal(number)
        check_stopped(process, tmp_path, number)


#: Resizes and chunk writes on the main thread while another thread keeps silencing HDF5's
#: error printing, as each result writer's thread does once when it starts. HDF5 as h5py's
#: wheels build it is not thread-safe: unlocked, this fails within 0.1 s ("no VOL object
#: wrap context", "addr undefined", or a double free that kills the process).
SILENCING_BESIDE_WRITES = """
import sys, threading, time
import h5py, numpy as np
from aare_lab.storage.result_store import silence_hdf5_errors
stop = threading.Event()
def silence():
    while not stop.is_set():
        silence_hdf5_errors()
thread = threading.Thread(target=silence)
thread.start()
end, chunks = time.monotonic() + float(sys.argv[2]), 0
try:
    while time.monotonic() < end:
        with h5py.File(sys.argv[1], "w") as f:
            d = f.create_dataset("x", (0, 64), "i4", maxshape=(None, 64), chunks=(256, 64))
            for c in range(20):
                d.resize(((c + 1) * 256, 64))
                d.id.write_direct_chunk((c * 256, 0), np.full((256, 64), c, "i4").tobytes())
                chunks += 1
        with h5py.File(sys.argv[1], "r") as f:
            assert (f["x"][::256, 0] == np.arange(20)).all()
finally:
    stop.set()
    thread.join()
print("chunks", chunks)
"""


def test_a_writers_thread_starting_beside_another_threads_hdf5_calls_harms_neither(tmp_path):
    """A campaign's worker runs several runs at once; each run's writer thread, as it
    starts, silenced HDF5 without h5py's lock and could corrupt a call on another thread
    (a run failed: "Can't write unprocessed chunk data (addr undefined)")."""
    done = subprocess.run([sys.executable, "-c", SILENCING_BESIDE_WRITES,
                           str(tmp_path / "x.h5"), "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert int(done.stdout.split()[-1]) > 100


def test_the_writers_thread_is_silenced_under_h5pys_lock(tmp_path, monkeypatch):
    from aare_lab.storage import result_store

    threads = []
    monkeypatch.setattr(result_store, "silence_hdf5_errors",
                        lambda: threads.append(threading.current_thread().name))
    with ResultWriter(tmp_path / "x.nc", empty_result()) as writer:
        writer.append(columns_of(10, 50, np.random.default_rng(0)))
    assert threads and all(name.startswith("aare_lab-result-file") for name in threads)
