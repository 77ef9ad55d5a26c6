"""`aare-lab live --calibration` on raw JUNGFRAU frames over real sockets on 127.0.0.1 (a
`StreamPublisher` in the test, the CLI in this process): its files against `aare-lab find
--calibration` on the same frames, the flagged pixels against the raw format decoded here,
and the refusals (a dark frame outside G0, a calibration of another frame shape)."""

import json

import numpy as np
import pytest
import xarray as xr
from live_helpers import live_cli

from aare_lab import FinderSpec, Pedestal, load_result
from aare_lab.cli import main
from aare_lab.simulate import JungfrauBeam, JungfrauDetector, JungfrauSimulator
from aare_lab.stream.live import fixed_edges
from aare_lab.stream.publisher import StreamPublisher

# Short dark runs on purpose (a small, fast test).
pytestmark = pytest.mark.filterwarnings("ignore:the noise estimated from")
SHAPE = (32, 64)
N_DARK = 30
N_FRAMES = 40
COUNT_KEYS = {"frames_received", "frames_processed", "frames_lost", "frames_incomplete",
              "frames_dropped", "frames_queued", "messages_malformed",
              "messages_refused", "n_flagged"}
#: Raw values that carry no energy: saturated (G2 at ADC 0), readout error, invalid gain.
SPECIAL = (0xC000, 0x4000, 0x8123)


def flagged(raw, gain):
    """Pixels that carry no energy, from the raw format: gain bits 10, the special values,
    and gain 0 (uncalibrated) in the pixel's stage (bits 00, 01, 11: G0, G1, G2)."""
    bits = raw.astype(np.int64) // 16384
    stage = np.select([bits == 0, bits == 1, bits == 3], [0, 1, 2], -1)
    rows, cols = np.indices(raw.shape[-2:])
    uncalibrated = gain[np.maximum(stage, 0), rows, cols] == 0
    return (stage < 0) | np.isin(raw, SPECIAL[:2]) | uncalibrated


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Spots that switch pixels to G1 and G2, dead (uncalibrated) pixels, special values
    planted; the calibration file and `aare-lab find --calibration` on the same frames."""
    sim = JungfrauSimulator(
        JungfrauDetector(frame_shape=SHAPE, dead_fraction=0.003),
        JungfrauBeam(photons_per_frame=40, spots_per_frame=1.5, spot_photons=(300, 10000),
                     spot_sigma_px=1.0), seed=7)
    dark = sim.dark(N_DARK)
    frames, _ = sim.frames(N_FRAMES)
    for k, value in enumerate(SPECIAL):
        frames[k::len(SPECIAL), 5, 8 + 20 * k] = value
    folder = tmp_path_factory.mktemp("offline")
    sim.calibration.save(folder / "cal.nc")
    np.save(folder / "all.npy", np.concatenate([dark, frames]))
    assert main(["find", "--frames", str(folder / "all.npy"), "--n-dark", str(N_DARK),
                 "--n-pedestal", str(N_DARK), "--noise", "fixed", "--quiet",
                 "--calibration", str(folder / "cal.nc"),
                 "--out", str(folder / "result.nc")]) == 0
    return sim, dark, frames, folder / "cal.nc", load_result(folder / "result.nc")


@pytest.fixture
def publisher():
    with StreamPublisher("tcp://127.0.0.1:0", detector="jungfrau") as pub:  # a free port
        yield pub


def live_here(publisher, out, frames, *options):
    """`aare-lab live --stop-at-end` in this process while ``frames`` are sent in one
    acquisition from a thread once the CLI has subscribed; returns the exit code."""
    def send():
        publisher.send_frames(frames)
        publisher.end_acquisition()

    return live_cli(publisher, send, "--noise", "fixed", "--n-pedestal", str(N_DARK),
                    "--stop-at-end", "--out", str(out), *options)


# cuda is frozen bit for bit (docs/algorithm.md), so offline frozen is its reference too.
@pytest.mark.parametrize("finder", ["frozen", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_live_in_kev_gives_what_find_gives_offline(run, publisher, tmp_path, capsys, finder):
    sim, dark, frames, cal, expected = run
    stage = frames >> 14
    assert (stage == 1).sum() > 50 and (stage == 3).sum() > 0  # gain switching happens
    assert live_here(publisher, tmp_path, np.concatenate([dark, frames]), "--n-dark",
                     str(N_DARK), "--calibration", str(cal), "--clusters",
                     "--finder", finder) == 0
    output = capsys.readouterr().out
    assert "energies in keV" in output
    assert f"live: the stream ended; {N_FRAMES} data frames" in output

    found = load_result(tmp_path / "clusters.nc")
    np.testing.assert_array_equal(found["frame_number"], expected["frame_number"] + N_DARK + 1)
    for name in ("y", "x", "window", "energy", "n_found", "n_kept", "n_flagged"):
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)
    assert found["energy"].attrs["units"] == "keV"
    spec = FinderSpec.from_result(found, calibration=sim.calibration)
    assert spec.finder == finder
    assert spec.replace(finder="frozen") == \
        FinderSpec.from_result(expected, calibration=sim.calibration)

    spectrum = xr.load_dataarray(tmp_path / "spectrum.nc")
    edges = np.append(spectrum["energy_lo"], spectrum["energy_hi"][-1])
    np.testing.assert_allclose(edges, np.arange(501) * 0.1, rtol=0, atol=1e-12)
    assert spectrum["energy"].attrs["units"] == spectrum["energy_lo"].attrs["units"] == "keV"
    energies = expected["energy"].to_numpy()
    np.testing.assert_array_equal(spectrum, np.histogram(energies, edges)[0])
    assert spectrum.attrs["overflow"] == np.count_nonzero(energies > 50) > 0  # the spots
    assert spectrum.attrs["n_frames"] == N_FRAMES

    stats = json.loads((tmp_path / "stats.json").read_text())
    assert set(stats) == COUNT_KEYS
    assert stats["frames_processed"] == N_DARK + N_FRAMES
    n_flagged = int(flagged(frames, sim.calibration.gain).sum())
    assert stats["n_flagged"] == n_flagged >= N_FRAMES  # dead pixels in every frame
    in_range = int(spectrum.sum())
    assert f"{len(energies):,} clusters, {in_range:,} in 0..50 keV; " \
           f"{n_flagged:,} pixels flagged" in output


def test_a_dark_frame_outside_g0_exits_1(run, publisher, tmp_path, capsys):
    _, dark, frames, cal, _ = run
    dark = dark.copy()
    dark[12, 3, 4] = 0x4000 | 2000  # G1 in the 13th frame of the stream
    assert live_here(publisher, tmp_path, np.concatenate([dark, frames[:5]]), "--n-dark",
                     str(N_DARK), "--calibration", str(cal)) == 1
    err = capsys.readouterr().err
    assert "dark frame 13 of the ZeroMQ stream" in err
    assert "has 1 pixels with gain bits other than G0's" in err


def test_a_calibration_of_another_shape_exits_1_naming_the_file(run, publisher, tmp_path,
                                                                capsys):
    _, dark, frames, _, _ = run
    other = tmp_path / "other_cal.nc"
    JungfrauSimulator(JungfrauDetector(frame_shape=(32, 32))).calibration.save(other)
    assert live_here(publisher, tmp_path / "out", dark, "--n-dark", str(N_DARK),
                     "--calibration", str(other)) == 1
    err = capsys.readouterr().err
    assert f"sends 32x64 frames but the calibration in {other} is for 32x32" in err


def test_a_pedestal_of_another_shape_than_the_calibration_is_refused(run, tmp_path, capsys):
    _, dark, _, cal, _ = run
    narrow = Pedestal((SHAPE[0], 32), N_DARK)
    narrow.push_dark(dark[:, :, :32])
    narrow.save(tmp_path / "ped.nc")
    assert main(["live", "tcp://127.0.0.1:1", "--pedestal", str(tmp_path / "ped.nc"),
                 "--calibration", str(cal), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "ped.nc is for 32x32 frames" in err and f"calibration in {cal} for 32x64" in err


def test_fixed_kev_edges_and_their_refusals():
    np.testing.assert_allclose(fixed_edges(5, 15, 2.5, units="keV"), [5, 7.5, 10, 12.5, 15])
    assert fixed_edges(units="keV")[[0, -1]].tolist() == [0.0, 50.0]
    with pytest.raises(ValueError, match="positive multiple of the bin width 0.3 keV"):
        fixed_edges(0, 1, 0.3, units="keV")
    with pytest.raises(ValueError, match="must be whole numbers"):
        fixed_edges(0, 25, 2.5)
    with pytest.raises(ValueError, match="must be finite"):
        fixed_edges(0, float("nan"), 1, units="keV")
