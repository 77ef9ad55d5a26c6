"""`aare-lab live` over real sockets on 127.0.0.1: a `StreamPublisher` (stream-sim's engine)
in the test, the CLI in a subprocess; its files against `aare-lab find` on the same frames."""

import json
import signal
import time
import warnings

import numpy as np
import pytest
import xarray as xr
from cli_process import CliProcess
from live_helpers import live_cli

from aare_lab import FinderSpec, Pedestal, load_result
from aare_lab.analysis.spectra import fit_peaks, peak_fit
from aare_lab.cli import main
from aare_lab.simulate import Beam, Detector, simulate_run
from aare_lab.stream.live import fixed_edges
from aare_lab.stream.publisher import StreamPublisher

N_DARK = 30
COUNT_KEYS = {"frames_received", "frames_processed", "frames_lost", "frames_incomplete",
              "frames_dropped", "frames_queued", "messages_malformed",
              "messages_refused"}
START_TIMEOUT = 60  # seconds for a fresh interpreter to import, load Numba's cache, subscribe


@pytest.fixture(scope="module")
def run():
    return simulate_run(n_dark=N_DARK, n_frames=40, detector=Detector(frame_shape=(48, 40)),
                        seed=5)


@pytest.fixture(scope="module")
def offline(run, tmp_path_factory):
    """`aare-lab find` on the dark and data frames the stream sends, one after the other."""
    folder = tmp_path_factory.mktemp("offline")
    np.save(folder / "all.npy", np.concatenate([run.dark, run.frames]))
    assert main(["find", "--frames", str(folder / "all.npy"), "--n-dark", str(N_DARK),
                 "--n-pedestal", str(N_DARK), "--noise", "fixed", "--quiet",
                 "--save-pedestal", str(folder / "pedestal.nc"),
                 "--out", str(folder / "result.nc")]) == 0
    return load_result(folder / "result.nc"), folder / "pedestal.nc"


@pytest.fixture
def publisher():
    with StreamPublisher("tcp://127.0.0.1:0") as pub:  # a free port
        yield pub


def live(publisher, out, *options):
    return CliProcess("live", *publisher.endpoints, "--noise", "fixed", "--out", str(out),
                      *options)


def live_here(publisher, out, send, *options):
    """`aare-lab live` in this process (no interpreter to start) while ``send()`` runs on
    a thread once the CLI has subscribed; returns the exit code."""
    return live_cli(publisher, send, "--noise", "fixed", "--out", str(out), *options)


def assert_same_as_offline(out, offline, n_frames, first_number, extra_keys=()):
    """The live files hold the first ``n_frames`` data frames of the offline result, whose
    frames are numbered from 0 where the stream numbered them from ``first_number``;
    ``stats.json`` has the usual keys and ``extra_keys``."""
    expected = offline.isel(frame=slice(n_frames))
    expected = expected.isel(cluster=np.flatnonzero(offline["frame_number"] < n_frames))
    found = load_result(out / "clusters.nc")
    np.testing.assert_array_equal(found["frame"], expected["frame"] + first_number)
    np.testing.assert_array_equal(found["frame_number"], expected["frame_number"] + first_number)
    for name in ("y", "x", "window", "energy", "n_found", "n_kept"):
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)
    assert FinderSpec.from_result(found) == FinderSpec.from_result(expected)
    spectrum = xr.load_dataarray(out / "spectrum.nc")
    edges = np.append(spectrum["energy_lo"], spectrum["energy_hi"][-1])
    np.testing.assert_array_equal(edges, fixed_edges())
    np.testing.assert_array_equal(spectrum, np.histogram(expected["energy"], edges)[0])
    energies = expected["energy"].to_numpy()
    assert spectrum.attrs["overflow"] == np.count_nonzero(energies > edges[-1])
    assert spectrum.attrs["n_frames"] == n_frames
    stats = json.loads((out / "stats.json").read_text())
    assert set(stats) == COUNT_KEYS | set(extra_keys)
    return stats


def test_stop_at_end_gives_what_find_gives_offline(run, offline, publisher, tmp_path,
                                                   capsys):
    result, _ = offline

    def send():
        publisher.send_frames(run.dark)
        # In bursts, so that clusters.nc is appended to several times.
        for part in np.array_split(run.frames, 3):
            time.sleep(0.4)
            publisher.send_frames(part)
        publisher.end_acquisition()

    assert live_here(publisher, tmp_path, send, "--n-dark", str(N_DARK), "--n-pedestal",
                     str(N_DARK), "--stop-at-end", "--clusters", "--interval", "0.2") == 0
    output = capsys.readouterr().out
    assert "live: the stream ended; 40 data frames" in output
    assert output.count("processed") >= 3  # periodic status lines
    # 200 photons in a frame of 48x40 pixels pile up: no peak, and no fit is shown.
    assert "FWHM" not in output
    stats = assert_same_as_offline(tmp_path, result, 40, N_DARK + 1)
    assert stats == {"frames_received": 70, "frames_processed": 70, "frames_lost": 0,
                     "frames_incomplete": 0, "frames_dropped": 0, "frames_queued": 0,
                     "messages_malformed": 0, "messages_refused": {}}


@pytest.mark.parametrize("stray", ["shape", "detector type"])
def test_stray_frames_before_the_run_are_refused_and_shown(stray, run, offline, publisher,
                                                          tmp_path, capsys):
    """Three frames of another shape or detector type on the port before the run: the
    run is found as without them; the refusals are counted by kind and shown."""
    result, _ = offline

    def send():
        if stray == "shape":
            publisher.send_frames(run.frames[:3, :24, :20])
        else:
            publisher.detector = "jungfrau"
            publisher.send_frames(run.frames[:3])
            publisher.detector = "moench"
        publisher.send_frames(run.dark, numbers=range(1, N_DARK + 1))  # the run starts
        publisher.send_frames(run.frames)
        publisher.end_acquisition()

    assert live_here(publisher, tmp_path, send, "--n-dark", str(N_DARK), "--n-pedestal",
                     str(N_DARK), "--stop-at-end", "--clusters", "--interval", "0.2") == 0
    output = capsys.readouterr().out
    assert "live: the stream ended; 40 data frames" in output
    assert "malformed 3 (format 3)" in output.splitlines()[-2]  # the last status line
    stats = assert_same_as_offline(tmp_path, result, 40, N_DARK + 1)
    assert stats["messages_refused"] == {"format": 3} and stats["messages_malformed"] == 3
    assert stats["frames_received"] == stats["frames_processed"] == 70


def test_a_short_acquisition_of_another_shape_before_the_run_trains_nothing(
        run, offline, publisher, tmp_path, capsys):
    """Three frames of another shape that end their own acquisition are the stream's
    format until the run's frames settle theirs: the pedestal trained on them is dropped
    and trained again on the run, which is found as offline."""
    result, _ = offline

    def send():
        publisher.send_frames(run.frames[:3, :24, :20])
        publisher.end_acquisition()
        publisher.send_frames(run.dark)
        publisher.send_frames(run.frames)
        publisher.end_acquisition()

    assert live_here(publisher, tmp_path, send, "--n-dark", str(N_DARK), "--n-pedestal",
                     str(N_DARK), "--clusters", "--duration", "3", "--interval", "0.2") == 0
    output = capsys.readouterr().out
    assert ("now sends 48x40 frames, not 24x20: the 3 dark frames taken so far are "
            "discarded, the pedestal is trained on the next 30") in output
    assert "40 data frames" in output
    stats = assert_same_as_offline(tmp_path, result, 40, N_DARK + 1, {"dark_frames_discarded"})
    assert stats["dark_frames_discarded"] == 3 and stats["frames_processed"] == 73


def test_frames_queued_at_a_stop_are_counted(run, offline, publisher, tmp_path):
    from aare_lab.sources import StreamSource
    from aare_lab.stream.live import LiveRun

    _, pedestal_file = offline
    with StreamSource(publisher.endpoints, chunk_frames=8) as source:
        publisher.wait_for_subscribers()
        publisher.send_frames(run.frames)
        deadline = time.monotonic() + 10
        while source.stats.frames_queued < 40 and time.monotonic() < deadline:
            time.sleep(0.02)
        live = LiveRun(source, FinderSpec(n_pedestal=N_DARK, noise="fixed"), tmp_path,
                       pedestal=Pedestal.load(pedestal_file), report=lambda line: None)
        live.stop()  # before the first chunk: every frame received stays unprocessed
        counts = live.run()
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats == counts
    assert (stats["frames_received"], stats["frames_processed"], stats["frames_queued"]) == (
        40, 0, 40)


def test_clusters_record_each_frames_acquisition(run, offline, publisher, tmp_path):
    _, pedestal = offline

    def send():
        for part in (run.frames[:15], run.frames[15:]):
            publisher.send_frames(part)
            publisher.end_acquisition()
            time.sleep(0.3)

    assert live_here(publisher, tmp_path, send, "--pedestal", str(pedestal), "--clusters",
                     "--duration", "2.5", "--interval", "0.2") == 0
    found = load_result(tmp_path / "clusters.nc")
    assert found["acquisition"].dims == ("frame",)
    assert found["acquisition"].values.tolist() == [1] * 15 + [2] * 25
    assert found["frame"].values.tolist() == [*range(1, 16), *range(1, 26)]


def test_status_lines_end_with_the_peak_fit(publisher, tmp_path, capsys):
    """A sparse beam: each status line ends with the Kα/Kβ fit of the spectrum written
    with it (``--lines``)."""
    sparse = simulate_run(n_dark=N_DARK, n_frames=60, detector=Detector(frame_shape=(48, 40)),
                          beam=Beam(photons_per_frame=15), seed=6)

    def send():
        publisher.send_frames(sparse.dark)
        publisher.send_frames(sparse.frames)
        publisher.end_acquisition()

    assert live_here(publisher, tmp_path, send, "--n-dark", str(N_DARK), "--n-pedestal",
                     str(N_DARK), "--stop-at-end", "--lines", "8.05", "8.90") == 0
    output = capsys.readouterr().out
    spectrum = xr.load_dataarray(tmp_path / "spectrum.nc")
    fits = fit_peaks(spectrum.expand_dims(finder=["frozen"]), lines=(8.05, 8.90))
    fit = peak_fit(fits, "frozen").summary(1.0, "ADU")
    assert fit.startswith("Kα 3") and ", Kβ/Kα " in fit  # Cu Kα at 40 ADU/keV: 322 ADU
    last = [line for line in output.splitlines() if "frames/s" in line][-1]
    assert last.endswith(f"; {fit}")


def test_sigint_writes_everything_processed(run, offline, publisher, tmp_path):
    result, pedestal = offline
    # A long interval: only the end of the run writes the files.
    with live(publisher, tmp_path, "--pedestal", str(pedestal), "--clusters",
              "--interval", "600") as cli:
        publisher.wait_for_subscribers(timeout=START_TIMEOUT)
        publisher.send_frames(run.frames[:25])
        time.sleep(2.5)  # to process them (not observable: nothing is written before the end)
        assert not (tmp_path / "stats.json").exists()
        cli.signal(signal.SIGINT)
        assert cli.wait(30) == 0, cli.output
    assert "live: SIGINT received" in cli.output
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["frames_received"] == 25 and 0 < stats["frames_processed"] <= 25
    assert stats["frames_processed"] + stats["frames_queued"] == 25
    assert_same_as_offline(tmp_path, result, stats["frames_processed"], 1)


def test_duration_ends_an_open_run(run, offline, publisher, tmp_path, capsys):
    _, pedestal = offline

    def send():
        publisher.send_frames(run.frames[:5])
        publisher.end_acquisition()  # without --stop-at-end the run goes on

    assert live_here(publisher, tmp_path, send, "--pedestal", str(pedestal), "--duration",
                     "1.5", "--interval", "0.3") == 0
    assert "live: 1.5 s passed" in capsys.readouterr().out
    spectrum = xr.load_dataarray(tmp_path / "spectrum.nc")
    assert spectrum.attrs["n_frames"] == 5
    assert not (tmp_path / "clusters.nc").exists()


def test_bad_options_are_refused_before_connecting(tmp_path, capsys):
    assert main(["live", "tcp://127.0.0.1:1", "--n-dark", "10", "--out", str(tmp_path),
                 "--n-pedestal", "20"]) == 1
    assert "10 dark frames cannot train a pedestal of n_pedestal=20" in capsys.readouterr().err
    assert main(["live", "tcp://127.0.0.1:1", "--n-dark", "10", "--out", str(tmp_path),
                 "--energy-range", "0", "1005"]) == 2
    assert ("--energy-range, --bin-width: the energy range 0..1005 ADU must be a positive "
            "multiple of the bin width 10") in capsys.readouterr().err
    for option, message in ((["--lines", "8.90", "8.05"], "--lines: lines must be"),
                            (["--fit-window", "400", "200"], "--fit-window: the fit window")):
        assert main(["live", "tcp://127.0.0.1:1", "--n-dark", "10", "--out", str(tmp_path),
                     *option]) == 2
        assert message in capsys.readouterr().err


def test_a_live_run_on_too_few_dark_frames_warns(run, publisher, tmp_path):
    # As find does: a live spectrum on a noisy pedestal holds noise clusters.
    from aare_lab import DarkFrameWarning, train_pedestal
    from aare_lab.sources import StreamSource
    from aare_lab.stream.live import LiveRun

    pedestal = train_pedestal(run.dark[:5], 5, progress=False)
    with StreamSource(publisher.endpoints, frame_shape=run.dark.shape[1:]) as source:
        with pytest.warns(DarkFrameWarning, match="from 5 dark frames"):
            LiveRun(source, FinderSpec(n_pedestal=5), tmp_path, pedestal=pedestal,
                    report=lambda line: None)
        pedestal = train_pedestal(run.dark, N_DARK, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error", DarkFrameWarning)
            LiveRun(source, FinderSpec(n_pedestal=N_DARK), tmp_path, pedestal=pedestal,
                    report=lambda line: None)
