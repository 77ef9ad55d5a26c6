"""Matching and classification on runs where the finders disagree by design.

The expected sites, branches and categories follow from the constructions documented in
compare_cases.py; none is taken from the code under test.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from compare_cases import (
    NEAR_PIXEL,
    NEAR_SIGMA,
    P1,
    P1_BIS,
    P2,
    PHOTON,
    R2,
    find_float32_tie,
    raw,
    run_pair,
    threshold_frames,
    tie_frames,
    timing_frames,
    unit_pedestal,
)

from aare_lab import FrozenFinder, SerialFinder, TruncationWarning
from aare_lab.analysis.compare import (
    check_comparable,
    compare,
    compare_all,
    summary_table,
    worst_mismatch,
)
from aare_lab.pipeline import train_pedestal
from aare_lab.simulate import Simulator


def site_table(comparison, variable):
    """``{(frame, y, x): value}`` of one site variable; categories by name."""
    s = comparison.sites
    values = s[variable].to_numpy().tolist()
    attrs = s[variable].attrs
    if "flag_meanings" in attrs:
        names = dict(zip(attrs["flag_values"].tolist(), attrs["flag_meanings"].split()))
        values = [names[v] for v in values]
    keys = zip(s["frame_number"].to_numpy().tolist(), s["y"].to_numpy().tolist(),
               s["x"].to_numpy().tolist())
    return dict(zip(keys, values))


def present(counts):
    return {name for name, n in counts.items() if n}


@pytest.fixture(scope="module")
def timing():
    serial, frozen = run_pair(timing_frames())
    return serial, frozen, compare(serial, frozen)


def test_timing_case_counts(timing):
    *_, c = timing
    assert (c.a_only, c.b_only, c.matched, c.matched_value_diffs) == (1, 4, 1, 0)
    assert c.per_frame["a_only"].to_numpy().tolist() == [1, 0]
    assert c.per_frame["b_only"].to_numpy().tolist() == [3, 1]
    assert site_table(c, "kind") == {
        (0, *P1): "b_only", (0, *P1_BIS): "b_only", (0, *P2): "a_only", (0, *R2): "b_only",
        (1, *P1): "b_only"}
    assert c.summary() == ("serial vs frozen: 1 only in serial, 4 only in frozen (83 % of all "
                           "clusters), 0 matched windows differ")


def test_timing_case_transitions(timing):
    *_, c = timing
    assert c.transition_counts() == {"QUIET_UPDATE -> TEST3_STORE": 3,
                                     "TEST3_STORE -> TEST3_SKIP": 1,
                                     "QUIET_UPDATE -> TEST1_STORE": 1}
    table = c.transitions()
    assert int(table.sel(branch_a="QUIET_UPDATE", branch_b="TEST3_STORE")) == 3
    assert int(table.sum()) == 5


def test_timing_case_classification(timing):
    *_, c = timing
    assert site_table(c, "classification") == {
        (0, *P1): "isolated", (0, *P1_BIS): "isolated", (0, *P2): "displaced",
        (0, *R2): "displaced", (1, *P1): "isolated"}
    # Frame 0 reads differ only through in-frame updates; in frame 1 P1's own pedestal
    # differs (the serial finder pushed it in frame 0, the frozen one stored it).
    assert site_table(c, "cause") == {
        (0, *P1): "timing", (0, *P1_BIS): "timing", (0, *P2): "timing", (0, *R2): "timing",
        (1, *P1): "pedestal_diverged"}
    assert site_table(c.one_sided(), "cause") == site_table(c, "cause")
    assert site_table(c, "deciding_test") == {
        (0, *P1): "test3", (0, *P1_BIS): "test3", (0, *P2): "local_max", (0, *R2): "test3",
        (1, *P1): "test1"}
    assert site_table(c, "pedestal_diverged") == {
        (0, *P1): "no", (0, *P1_BIS): "no", (0, *P2): "no", (0, *R2): "no", (1, *P1): "yes"}
    assert set(site_table(c, "in_frame_update").values()) == {"yes"}
    assert c.assumed_timing() == 0
    assert c.attrs["first_divergent_frame"] == 0
    assert c.counts("cause")["unexplained"] == 0


def test_distances_to_agreed_and_counterpart(timing):
    *_, c = timing
    cheb = {p: max(abs(p[0] - PHOTON[0]), abs(p[1] - PHOTON[1])) for p in (P1, P1_BIS, P2, R2)}
    distance = site_table(c, "distance")
    assert {k: v for k, v in distance.items() if k[0] == 0} == {(0, *p): d for p, d in cheb.items()}
    assert distance[(1, *P1)] == np.inf, "frame 1 has no agreed centre"
    counterpart = site_table(c, "counterpart_distance")
    assert counterpart[(0, *P2)] == counterpart[(0, *R2)] == 1


def test_without_branch_maps_causes_are_assumed_and_tests_unknown(timing):
    serial, frozen, _ = timing
    c = compare(serial.drop_vars("branch_map"), frozen.drop_vars("branch_map"))
    assert c.counts("cause") == {"capacity": 0, "configuration": 0, "pedestal_diverged": 0,
                                 "timing": 5, "precision": 0, "unexplained": 0}
    assert c.counts("deciding_test")["unknown"] == 5
    assert c.assumed_timing() == 5
    assert c.transition_counts() == {}
    assert c.attrs["first_divergent_frame"] is None
    assert set(site_table(c, "pedestal_diverged").values()) == {"unknown"}


def truncation_frames():
    v = np.zeros((2, 8, 16), int)
    for y, x in [(2, 2), (2, 8), (5, 4), (5, 12)]:
        v[0, y, x] = 20
    v[1, 4, 6] = 20
    return raw(v)


def test_truncated_frame():
    with pytest.warns(TruncationWarning):
        full, capped = run_pair(truncation_frames(), finders=(FrozenFinder, FrozenFinder),
                                caps=(None, 2))
    c = compare(full, capped, labels=["full", "capped"])
    assert (c.a_only, c.b_only, c.matched) == (2, 0, 3)
    assert site_table(c, "classification") == {(0, 5, 4): "truncated", (0, 5, 12): "truncated"}
    assert set(site_table(c, "cause").values()) == {"capacity"}
    assert set(site_table(c, "deciding_test").values()) == {"both_store"}
    assert c.per_frame["truncated_b"].to_numpy().tolist() == [True, False]
    assert not c.per_frame["truncated_a"].to_numpy().any()
    assert c.transition_counts() == {"TEST1_STORE -> TEST1_STORE": 2}


def test_float32_near_threshold():
    f64, f32 = run_pair(threshold_frames(), finders=(FrozenFinder, FrozenFinder),
                        dtypes=("float64", "float32"), n_sigma=NEAR_SIGMA)
    c = compare(f64, f32)
    assert c.labels == ("frozen/float64", "frozen/float32")
    assert (c.a_only, c.b_only, c.matched) == (1, 0, 1)
    key = (0, *NEAR_PIXEL)
    assert site_table(c, "classification") == {key: "isolated"}
    assert site_table(c, "cause") == {key: "precision"}
    assert site_table(c, "deciding_test") == {key: "test1"}
    assert c.transition_counts() == {"TEST1_STORE -> QUIET_UPDATE": 1}


@pytest.fixture(scope="module")
def tie():
    found = find_float32_tie()
    dark, n_pedestal, frames, (y, x) = tie_frames(found)
    pedestals = [train_pedestal(dark, n_pedestal, dtype=d, progress=False)
                 for d in ("float64", "float32")]
    f64, f32 = run_pair(frames, finders=(FrozenFinder, FrozenFinder),
                        dtypes=("float64", "float32"), pedestals=pedestals)
    smaller = (y, x + 1) if found[-1] == "left" else (y, x)
    return dict(frames=frames, pedestals=pedestals, results=(f64, f32), smaller=smaller,
                larger=(y, x) if found[-1] == "left" else (y, x + 1))


def test_float32_tie_is_a_duplicate_neighbour(tie):
    c = compare(*tie["results"])
    key = (0, *tie["smaller"])
    assert (c.a_only, c.b_only, c.matched) == (0, 1, 1)
    assert site_table(c, "classification") == {key: "duplicate_neighbour"}
    assert site_table(c, "distance") == {key: 1.0}
    assert site_table(c, "cause") == {key: "precision"}
    assert site_table(c, "deciding_test") == {key: "local_max"}
    assert c.transition_counts() == {"SHADOW -> TEST1_STORE": 1}


def test_value_differences_respect_the_tolerance_and_flag_tampering():
    a, b = run_pair(truncation_frames(), finders=(FrozenFinder, FrozenFinder))
    b = b.copy(deep=True)
    b["window"][1, 0, 0] = b["window"][1, 0, 0] + 2
    exact = compare(a, b, labels=["a", "b"])
    assert exact.matched_value_diffs == 1
    assert site_table(exact, "classification") == {(0, 2, 8): "value_diff"}
    assert site_table(exact, "max_abs_diff") == {(0, 2, 8): 2.0}
    # Same finder, same pedestal, same frames: nothing can explain a difference.
    assert site_table(exact, "cause") == {(0, 2, 8): "unexplained"}
    # Only the value difference: nothing is one-sided.
    assert exact.one_sided().sites.sizes["site"] == 0
    assert exact.one_sided().summary() == exact.summary()
    assert compare(a, b, labels=["a", "b"], tolerance=1.5).matched_value_diffs == 1
    assert compare(a, b, labels=["a", "b"], tolerance=2).matched_value_diffs == 0
    with pytest.raises(ValueError, match="tolerance"):
        compare(a, b, tolerance=-1)


def test_refuses_different_frames_naming_them():
    frames = truncation_frames()
    a = FrozenFinder(unit_pedestal(frames.shape[1:])).find(frames, progress=False)
    b = FrozenFinder(unit_pedestal(frames.shape[1:])).find(frames, frame_numbers=[1, 7],
                                                           progress=False)
    with pytest.raises(ValueError, match=r"frames differ: 1 only in a \[0\], 1 only in b \[7\]"):
        compare(a, b, labels=["a", "b"])


def test_refuses_different_shape_and_cluster_size():
    frames = truncation_frames()
    a = FrozenFinder(unit_pedestal(frames.shape[1:])).find(frames, progress=False)
    b = FrozenFinder(unit_pedestal(frames.shape[1:]), 5.0, (3, 5)).find(frames, progress=False)
    c = FrozenFinder(unit_pedestal((8, 15))).find(np.ascontiguousarray(frames[:, :, :15]),
                                                  progress=False)
    with pytest.raises(ValueError, match="cluster sizes differ: 3x3 and 3x5"):
        check_comparable([a, b], ["a", "b"])
    with pytest.raises(ValueError, match="frame shapes differ: 8x16 and 8x15"):
        compare_all([a, c], ["a", "c"])


def test_compare_all_pairs_and_worst(timing):
    serial, frozen, _ = timing
    frames = timing_frames()
    f32 = run_pair(frames, finders=(FrozenFinder,), dtypes=("float32",))[0]
    comparisons = compare_all({"serial": serial, "frozen": frozen, "f32": f32})
    assert [c.labels for c in comparisons] == [("serial", "frozen"), ("serial", "f32"),
                                               ("frozen", "f32")]
    # Values are exact in both dtypes here, so float32 agrees with frozen float64.
    assert (comparisons[2].a_only, comparisons[2].b_only) == (0, 0)
    assert summary_table(comparisons).splitlines()[0].startswith(
        "serial vs frozen: 1 only in serial, 4 only in frozen")
    # Frame 0 has 8 sites over the two disagreeing pairs; P2 and R2 are next to each other.
    assert worst_mismatch(comparisons, half_size=5) == (0, *P2)
    assert worst_mismatch(comparisons[2:]) is None


def simulated_monch_runs(n_frames=2000, n_pedestal=100):
    """Serial, frozen and frozen float32 runs with branch maps of a simulated MÖNCH03.

    The machine has two cores: the frames are simulated in two halves at once, and the
    single-threaded serial finder runs beside the frozen finders (one thread each).
    """
    sim = Simulator(seed=0)
    half = n_frames // 2
    with ThreadPoolExecutor(2) as pool:
        second = pool.submit(sim.frames, n_frames - half, half)
        dark = sim.dark(n_pedestal)
        frames = np.concatenate([sim.frames(half)[0], second.result()[0]])
        pedestals = {dtype: train_pedestal(dark, n_pedestal, dtype=dtype, progress=False)
                     for dtype in ("float64", "float32")}
        serial = pool.submit(SerialFinder(pedestals["float64"].copy()).find, frames,
                             branch_maps=True, progress=False)
        runs = {label: FrozenFinder(pedestals[dtype], threads=1).find(
                    frames, branch_maps=True, progress=False)
                for label, dtype in (("frozen", "float64"), ("frozen32", "float32"))}
        runs["serial"] = serial.result()
    return runs


@pytest.mark.slow
def test_simulated_monch_run_is_fully_explained():
    """2000 MÖNCH frames: serial vs frozen and frozen float32 vs float64, all explained."""
    runs = simulated_monch_runs()
    timing_pair = compare(runs["serial"], runs["frozen"], labels=["serial", "frozen"])
    precision_pair = compare(runs["frozen"], runs["frozen32"], labels=["frozen", "frozen32"])
    for c in (timing_pair, precision_pair):
        assert c.matched > 4_000_000
        n_sites = c.a_only + c.b_only + c.matched_value_diffs
        assert n_sites > 0
        assert sum(c.counts("cause").values()) == n_sites
        assert c.counts("cause")["unexplained"] == 0
        assert c.counts("deciding_test")["unknown"] == 0
    assert present(timing_pair.counts("cause")) <= {"pedestal_diverged", "timing"}
    assert present(precision_pair.counts("cause")) <= {"pedestal_diverged", "precision"}
    # A float32 value difference in an int32 window is one rounding step of a value
    # within ULPs of a half-integer.
    values = precision_pair.sites["kind"].to_numpy() == 2
    assert (precision_pair.sites["max_abs_diff"].to_numpy()[values] == 1).all()
