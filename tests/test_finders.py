"""The serial and frozen finders against the plain-Python transcription of docs/algorithm.md,
and the promises that do not depend on the data: chunking, threads, splitting a run,
capacity, branch maps, frame numbers and bad input."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import RefPedestal, find_frame

from aare_lab import (
    FrozenFinder,
    Pedestal,
    PedestalNotReady,
    SerialFinder,
    TruncationError,
    TruncationWarning,
)
from aare_lab.finders._buffers import ESTIMATE_LIMIT, reserve
from aare_lab.finders.base import INITIAL_CLUSTER_ROWS

FINDERS = {"serial": SerialFinder, "frozen": FrozenFinder}


def random_case(rng, shape, n_pedestal, n_frames, level=3000, noise=3.0, photons=0.05):
    dark = rng.normal(level, noise, (n_pedestal + 2, *shape))
    data = rng.normal(level, noise, (n_frames, *shape))
    hits = rng.random(data.shape) < photons
    data[hits] += rng.choice([8, 15, 40, 300], hits.sum())
    data[rng.random(data.shape) < 0.02] -= 25
    return (np.clip(np.rint(dark), 0, 65535).astype(np.uint16),
            np.clip(np.rint(data), 0, 65535).astype(np.uint16))


def reference_run(dark, frames, model, dtype, noise, n_pedestal, n_sigma, cluster_size, cap):
    ref = RefPedestal(dark.shape[1:], n_pedestal, dtype, noise)
    for d in dark:
        ref.push_dark(d.tolist())
    clusters, n_found, codes = [], [], []
    for k, frame in enumerate(frames):
        cl, found, c = find_frame(ref, frame.tolist(), n_sigma, cluster_size, model, cap)
        clusters += [(k, y, x, w) for y, x, w in cl]
        n_found.append(found)
        codes.append(c)
    return clusters, n_found, np.array(codes, np.uint8), ref.state()


def finder_run(dark, frames, model, dtype, noise, n_pedestal, n_sigma, cluster_size, cap,
               **kwargs):
    ped = Pedestal(dark.shape[1:], n_pedestal, dtype, noise)
    ped.push_dark(dark)
    finder = FINDERS[model](ped, n_sigma, cluster_size, cap, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        result = finder.find(frames, branch_maps=True, progress=False)
    clusters = [(int(f), int(y), int(x), w.ravel().tolist()) for f, y, x, w in zip(
        result["frame_number"].to_numpy(), result["y"].to_numpy(), result["x"].to_numpy(),
        result["window"].to_numpy())]
    return result, clusters, ped


def assert_matches_reference(dark, frames, model, dtype, noise, n_pedestal, n_sigma,
                             cluster_size, cap):
    expected, n_found, codes, state = reference_run(
        dark, frames, model, dtype, noise, n_pedestal, n_sigma, cluster_size, cap)
    result, clusters, ped = finder_run(
        dark, frames, model, dtype, noise, n_pedestal, n_sigma, cluster_size, cap)
    assert clusters == expected
    assert result["n_found"].to_numpy().tolist() == n_found
    np.testing.assert_array_equal(result["branch_map"].to_numpy(), codes)
    got = ped.state()
    for key in ("off", "s", "s2"):
        np.testing.assert_array_equal(got[key], state[key], err_msg=key)
        assert got[key].dtype == np.dtype(dtype)


SWEEP = [
    # shape, cluster size, n_pedestal
    ((9, 11), (3, 3), 5),
    ((12, 10), (5, 5), 4),
    ((8, 13), (3, 5), 3),
    ((13, 9), (7, 3), 6),
    ((10, 12), (9, 9), 2),
    ((6, 7), (11, 11), 3),
    ((1, 17), (3, 3), 3),
    ((15, 1), (5, 3), 2),
    ((4, 2), (3, 9), 2),
    ((2, 3), (11, 5), 1),
]


@pytest.mark.parametrize("model", ["serial", "frozen"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("noise", ["running", "fixed"])
@pytest.mark.parametrize("case", range(len(SWEEP)))
def test_seeded_sweep_equals_transcription(model, dtype, noise, case):
    shape, cluster_size, n_pedestal = SWEEP[case]
    rng = np.random.default_rng(1000 + case)
    dark, frames = random_case(rng, shape, n_pedestal, 4)
    cap = 2 if case % 3 == 0 else None
    assert_matches_reference(dark, frames, model, dtype, noise, n_pedestal, 4.0,
                             cluster_size, cap)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    ny=st.integers(1, 12), nx=st.integers(1, 12),
    cy=st.sampled_from([3, 5, 7]), cx=st.sampled_from([3, 5, 9]),
    n_pedestal=st.integers(1, 6),
    n_sigma=st.sampled_from([0.5, 1.0, 2.5, 5.0]),
    model=st.sampled_from(["serial", "frozen"]),
    dtype=st.sampled_from(["float64", "float32"]),
    noise=st.sampled_from(["running", "fixed"]),
    cap=st.one_of(st.none(), st.integers(1, 4)),
    level=st.sampled_from([5, 1000, 40000]),
)
# Levels near 40000 ADU exercise 16-bit values, not raw JUNGFRAU frames.
@pytest.mark.filterwarnings("ignore::aare_lab.detector.jungfrau.GainBitsWarning")
def test_random_frames_equal_transcription(seed, ny, nx, cy, cx, n_pedestal, n_sigma, model,
                                           dtype, noise, cap, level):
    rng = np.random.default_rng(seed)
    dark, frames = random_case(rng, (ny, nx), n_pedestal, 3, level=level, noise=2.0)
    assert_matches_reference(dark, frames, model, dtype, noise, n_pedestal, n_sigma,
                             (cy, cx), cap)


@pytest.fixture(scope="module")
def mid_run():
    rng = np.random.default_rng(7)
    return random_case(rng, (48, 40), 20, 30, photons=0.01)


def run_clusters(result):
    return {k: result[k].to_numpy() for k in ("frame_number", "y", "x", "window", "n_found")}


def assert_same(a, b):
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("model", ["serial", "frozen"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_results_do_not_depend_on_chunks_or_calls(mid_run, model, dtype):
    dark, frames = mid_run
    base, _, base_ped = finder_run(dark, frames, model, dtype, "running", 20, 4.0, (3, 3),
                                   None, chunk_frames=64)
    for chunk in (1, 7):
        other, _, ped = finder_run(dark, frames, model, dtype, "running", 20, 4.0, (3, 3),
                                   None, chunk_frames=chunk)
        assert_same(run_clusters(base), run_clusters(other))
        assert_same(base_ped.state(), ped.state())
    ped = Pedestal(dark.shape[1:], 20, dtype)
    ped.push_dark(dark)
    finder = FINDERS[model](ped, 4.0, (3, 3))
    parts = [finder.find(frames[a:b], frame_numbers=range(a, b), progress=False)
             for a, b in ((0, 11), (11, 12), (12, 30))]
    joined = {k: np.concatenate([p[k].to_numpy() for p in parts])
              for k in ("frame_number", "y", "x", "window", "n_found")}
    assert_same(run_clusters(base), joined)
    assert_same(base_ped.state(), ped.state())
    assert base.sizes["cluster"] > 50


@pytest.mark.parametrize("model", ["serial", "frozen"])
def test_warmup_leaves_the_pedestal_and_the_results_alone(mid_run, model):
    dark, frames = mid_run
    base, _, base_ped = finder_run(dark, frames, model, "float32", "running", 20, 4.0, (3, 3),
                                   None)
    ped = Pedestal(dark.shape[1:], 20, "float32")
    ped.push_dark(dark)
    finder = FINDERS[model](ped, 4.0, (3, 3))
    trained = ped.state()
    finder.warmup()
    assert finder.pedestal is ped
    assert_same(trained, ped.state())
    result = finder.find(frames, progress=False)
    assert_same(run_clusters(base), run_clusters(result))
    assert_same(base_ped.state(), ped.state())


WARM_RUN = """
import numpy as np
from aare_lab import FrozenFinder, Pedestal, SerialFinder
from aare_lab.detector.common_mode import CommonMode
from aare_lab.finders import _frozen, _serial

rng = np.random.default_rng(3)
frames = rng.normal(1000, 4, (12, 32, 50)).astype(np.uint16)
for name, loop in (("frozen", _frozen.frozen_frames), ("serial", _serial.serial_chunk)):
    for dtype, noise, cm in (("float64", "fixed", None), ("float32", "running", None),
                             ("float64", "running", CommonMode(np.zeros((32, 50), np.int32)))):
        ped = Pedestal((32, 50), 4, dtype, noise)
        ped.push_dark(frames[:4])
        cls = FrozenFinder if name == "frozen" else SerialFinder
        finder = cls(ped, 5.0, (3, 3), common_mode=cm)
        finder.warmup()
        compiled = len(loop.overloads)
        result = finder.find(frames[4:], progress=False)
        assert result.sizes["frame"] == 8
        print(name, dtype, noise, cm is not None, compiled, len(loop.overloads))
"""


def test_warmup_compiles_the_loop_the_run_calls():
    """In a fresh process, where nothing was compiled: after `warmup` (a stack of no
    frames), the run's chunk loop needs no other compilation."""
    run = subprocess.run([sys.executable, "-c", WARM_RUN], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    lines = [line.split() for line in run.stdout.splitlines()]
    assert len(lines) == 6
    for *case, after_warmup, after_run in lines:
        assert int(after_warmup) >= 1 and after_run == after_warmup, case


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_frozen_does_not_depend_on_threads_or_repetition(mid_run, dtype):
    dark, frames = mid_run
    runs = [finder_run(dark, frames, "frozen", dtype, "fixed", 20, 4.0, (5, 5), None,
                       threads=t)[0] for t in (1, 2, 2, 1, 2)]
    for other in runs[1:]:
        assert_same(run_clusters(runs[0]), run_clusters(other))
        np.testing.assert_array_equal(runs[0]["branch_map"], other["branch_map"])


def test_clusters_come_out_in_raster_order(mid_run):
    dark, frames = mid_run
    for model in FINDERS:
        result = finder_run(dark, frames, model, "float64", "running", 20, 4.0, (3, 3), None)[0]
        key = (result["frame_number"].to_numpy() * 10**6 + result["y"].to_numpy() * 1000
               + result["x"].to_numpy())
        assert (np.diff(key) > 0).all()


def test_capacity_keeps_the_first_clusters_and_warns(mid_run):
    dark, frames = mid_run
    for model in FINDERS:
        full = finder_run(dark, frames, model, "float64", "running", 20, 4.0, (3, 3), None)[0]
        cap = int(np.median(full["n_found"]))
        ped = Pedestal(dark.shape[1:], 20)
        ped.push_dark(dark)
        with pytest.warns(TruncationWarning) as caught:
            capped = FINDERS[model](ped, 4.0, (3, 3), cap).find(frames, progress=False)
        n_found = full["n_found"].to_numpy()
        over = n_found > cap
        assert over.any()
        message = str(caught[0].message)
        assert f"truncated {over.sum()} of {len(n_found)} frames" in message
        assert f"largest count was {n_found.max()}" in message
        np.testing.assert_array_equal(capped["n_found"], n_found)
        np.testing.assert_array_equal(capped["n_kept"], np.minimum(n_found, cap))
        frame = full["frame_number"].to_numpy()
        rank = np.arange(len(frame)) - np.searchsorted(frame, frame)
        keep = rank < cap
        for key in ("frame_number", "y", "x", "window"):
            np.testing.assert_array_equal(capped[key], full[key].to_numpy()[keep])


def test_capacity_error_keeps_the_result(mid_run):
    dark, frames = mid_run
    ped = Pedestal(dark.shape[1:], 20)
    ped.push_dark(dark)
    with pytest.raises(TruncationError, match="max_clusters_per_frame=1 truncated") as info:
        FrozenFinder(ped, 4.0, (3, 3), 1, on_truncation="error").find(frames, progress=False)
    assert (info.value.result["n_kept"] <= 1).all()
    assert (info.value.result["n_found"] > 1).any()


def test_no_warning_when_nothing_is_truncated(mid_run):
    dark, frames = mid_run
    ped = Pedestal(dark.shape[1:], 20)
    ped.push_dark(dark)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)  # 20 dark frames do warn
        result = FrozenFinder(ped, 4.0, (3, 3), 10**6).find(frames, progress=False)
    assert result.attrs["max_clusters_per_frame"] == 10**6


def test_branch_maps_for_chosen_frames_and_frame_numbers(mid_run):
    dark, frames = mid_run
    numbers = np.arange(100, 100 + len(frames)) * 3
    everything, _, _ = finder_run(dark, frames, "serial", "float64", "running", 20, 4.0,
                                  (3, 3), None)
    ped = Pedestal(dark.shape[1:], 20)
    ped.push_dark(dark)
    chosen = [int(numbers[4]), int(numbers[17])]
    with pytest.warns(UserWarning, match=r"not in this run: \[1\]"):
        result = SerialFinder(ped, 4.0, (3, 3)).find(
            frames, frame_numbers=numbers, branch_maps=[*chosen, 1], progress=False)
    np.testing.assert_array_equal(result["frame"], numbers)
    np.testing.assert_array_equal(result["branch_frame"], chosen)
    np.testing.assert_array_equal(result["branch_map"].to_numpy(),
                                  everything["branch_map"].to_numpy()[[4, 17]])
    np.testing.assert_array_equal(result["frame_number"],
                                  numbers[everything["frame_number"].to_numpy()])


def test_serial_and_frozen_differences_are_explained_by_update_timing():
    # Realistic data: the finders agree on almost every cluster, and each frame where
    # they differ either started from diverged pedestals or has a pixel in a differing
    # cluster's window that the serial finder pushed earlier in the same frame.
    from aare_lab.simulate import Beam, Detector, Simulator

    sim = Simulator(Detector(frame_shape=(64, 64)), Beam(photons_per_frame=60), seed=3)
    dark = sim.dark(50)
    frames, _ = sim.frames(60)
    serial_ped = Pedestal((64, 64), 50)
    serial_ped.push_dark(dark)
    frozen_ped = serial_ped.copy()
    serial = SerialFinder(serial_ped, 3.0, (3, 3))
    frozen = FrozenFinder(frozen_ped, 3.0, (3, 3))
    n_clusters = n_diff = 0
    for k, frame in enumerate(frames):
        start_serial = serial_ped.copy()
        a = serial.find(frame, frame_numbers=[k], branch_maps=True, progress=False)
        b = frozen.find(frame, frame_numbers=[k], branch_maps=True, progress=False)
        sa = set(zip(a["y"].to_numpy().tolist(), a["x"].to_numpy().tolist()))
        sb = set(zip(b["y"].to_numpy().tolist(), b["x"].to_numpy().tolist()))
        n_clusters += len(sa)
        if sa == sb:
            continue
        n_diff += len(sa ^ sb)
        same_start = FrozenFinder(start_serial, 3.0, (3, 3)).find(
            frame, frame_numbers=[k], progress=False)
        sc = set(zip(same_start["y"].to_numpy().tolist(), same_start["x"].to_numpy().tolist()))
        codes = a["branch_map"].to_numpy()[0]
        for y, x in (sa ^ sc):
            earlier = [(yy, xx) for yy in range(max(y - 1, 0), min(y + 2, 64))
                       for xx in range(max(x - 1, 0), min(x + 2, 64)) if (yy, xx) < (y, x)]
            assert any(codes[p] == 6 for p in earlier), (k, y, x)
    assert n_clusters > 2000
    assert 0 < n_diff < 0.01 * n_clusters, (n_diff, n_clusters)


def test_not_ready_pedestal_is_refused_with_counts():
    ped = Pedestal((4, 4), 10)
    ped.push_dark(np.zeros((3, 4, 4), np.uint16))
    with pytest.raises(PedestalNotReady, match="3 of 10 dark frames"):
        FrozenFinder(ped).find(np.zeros((1, 4, 4), np.uint16), progress=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"cluster_size": (4, 3)}, "even"),
    ({"cluster_size": "2x2"}, "outside 3..11"),  # the range is checked before parity
    ({"cluster_size": (13, 13)}, "outside 3..11"),
    ({"cluster_size": "3by3"}, "NYxNX"),
    ({"n_sigma": 0}, "n_sigma"),
    ({"n_sigma": float("nan")}, "n_sigma"),
    ({"max_clusters_per_frame": 0}, "max_clusters_per_frame"),
    ({"on_truncation": "ignore"}, "on_truncation"),
    ({"chunk_frames": 0}, "chunk_frames"),
    ({"window_dtype": "int8"}, "window_dtype"),
])
def test_bad_parameters_are_refused(kwargs, message):
    ped = Pedestal((4, 4), 1)
    ped.push_dark(np.zeros((1, 4, 4), np.uint16))
    with pytest.raises(ValueError, match=message):
        SerialFinder(ped, **kwargs)


def test_bad_frames_are_refused_before_anything_runs():
    ped = Pedestal((4, 4), 1)
    ped.push_dark(np.full((1, 4, 4), 10, np.uint16))
    before = ped.state()
    finder = FrozenFinder(ped)
    with pytest.raises(TypeError, match="uint16"):
        finder.find(np.zeros((2, 4, 4), np.float32), progress=False)
    with pytest.raises(TypeError, match="NaN"):
        finder.find(np.full((2, 4, 4), np.nan), progress=False)
    with pytest.raises(ValueError, match="5x4"):
        finder.find(np.zeros((2, 5, 4), np.uint16), progress=False)
    with pytest.raises(ValueError):
        finder.find(np.zeros((2, 2, 4, 4), np.uint16), progress=False)
    with pytest.raises(TypeError, match="Pedestal"):
        FrozenFinder("not a pedestal")
    with pytest.raises(ValueError, match="threads"):
        FrozenFinder(ped, threads=0)
    for key, value in before.items():
        np.testing.assert_array_equal(ped.state()[key], value)


def test_provenance_is_stamped_once():
    import aare_lab

    ped = Pedestal((6, 6), 2, "float32", "fixed")
    ped.push_dark(np.full((2, 6, 6), 10, np.uint16))
    result = SerialFinder(ped, 4.5, "3x5", 7).find(np.full((2, 6, 6), 10, np.uint16),
                                                    progress=False)
    assert result.attrs["finder"] == "serial"
    assert result.attrs["n_sigma"] == 4.5
    assert result.attrs["cluster_size"] == "3x5"
    assert result.attrs["pedestal_dtype"] == "float32"
    assert result.attrs["noise"] == "fixed"
    assert result.attrs["n_pedestal"] == 2
    assert result.attrs["max_clusters_per_frame"] == 7
    assert result.attrs["aare_lab_version"] == aare_lab.__version__
    assert list(result.attrs["frame_shape"]) == [6, 6]
    assert result.sizes["cluster"] == 0 and result.sizes["frame"] == 2


@pytest.mark.parametrize("finder", ["serial", "frozen"])
def test_process_chunk_refuses_frames_of_another_shape(finder):
    # The compiled loop would write outside its buffers: a clear error instead.
    from helpers import unit_pedestal

    from aare_lab.finders import get_finder

    runner = get_finder(finder)(unit_pedestal((8, 8)))
    with pytest.raises(ValueError, match="16x16"):
        runner.process_chunk(np.zeros((2, 16, 16), np.uint16), np.arange(2))
    with pytest.raises(TypeError, match="uint16"):
        runner.process_chunk(np.zeros((2, 8, 8), np.float32), np.arange(2))


def test_output_buffers_grow_to_the_estimate_within_a_limit():
    win = np.arange(4 * 9, dtype=np.int32).reshape(4, 3, 3)
    ys, xs = np.arange(4, dtype=np.int32), np.arange(10, 14, dtype=np.int32)
    same = reserve(win, ys, xs, 3, 4, 10**6)
    assert same[0] is win
    for estimate, rows in ((0, 8), (30, 30), (10**6, ESTIMATE_LIMIT * 6)):
        grown = reserve(win, ys, xs, 3, 6, estimate)
        assert [len(a) for a in grown] == [rows] * 3
        np.testing.assert_array_equal(grown[0][:3], win[:3])
        np.testing.assert_array_equal(grown[1][:3], ys[:3])
        np.testing.assert_array_equal(grown[2][:3], xs[:3])


@pytest.mark.parametrize("model", ["serial", "frozen"])
def test_clusters_survive_the_buffers_growing_within_a_chunk(model):
    """Every pixel a cluster (a constant dark: threshold 0; a constant frame tops every
    window), more in one chunk than the buffers' first rows: nothing pushed, so every
    window's centre reads 2000 - 1000, the first frames' too, copied as the buffers grew."""
    shape = (23, 19)
    n = INITIAL_CLUSTER_ROWS // (shape[0] * shape[1]) + 3
    ped = Pedestal(shape, 40, "float64", "fixed")
    ped.push_dark(np.full((40, *shape), 1000, np.uint16))
    finder = FINDERS[model](ped, 3.0, (3, 3), chunk_frames=n)
    result = finder.find(np.full((n, *shape), 2000, np.uint16), progress=False)
    assert (result["n_found"] == shape[0] * shape[1]).all()
    assert result.sizes["cluster"] > INITIAL_CLUSTER_ROWS
    np.testing.assert_array_equal(result["window"][:, 1, 1], 1000)
    assert (result["y"].to_numpy() == np.tile(np.repeat(np.arange(shape[0]), shape[1]), n)).all()
