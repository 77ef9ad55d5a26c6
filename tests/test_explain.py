"""explain(): the numbers behind one decision, checked against the construction and the
finders' own branch maps."""

import math
import warnings

import numpy as np
import pytest
from compare_cases import (
    MEAN,
    NEAR_PIXEL,
    NEAR_SIGMA,
    P1,
    find_float32_tie,
    run_pair,
    threshold_frames,
    tie_frames,
    timing_frames,
    unit_pedestal,
)

import aare_lab
from aare_lab import Branch, FrozenFinder, SerialFinder
from aare_lab.analysis.explain import explain, explain_sites
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import train_pedestal
from aare_lab.plots.explanation import ExplanationTable, explanation_html, explanation_text, verdict
from aare_lab.simulate import Beam, Detector, Simulator

SERIAL_FROZEN = [FinderSpec("serial"), FinderSpec("frozen")]


def map_code(result, frame, y, x):
    return Branch(int(result["branch_map"].sel(branch_frame=frame).to_numpy()[y, x]))


@pytest.fixture(scope="module")
def timing():
    frames = timing_frames()
    return frames, run_pair(frames)


def test_timing_site_numbers(timing):
    frames, (serial, frozen) = timing
    e = explain(frames, 0, *P1, SERIAL_FROZEN, pedestal=unit_pedestal())
    d = e.data
    np.testing.assert_array_equal(d["raw"], MEAN + np.array([[0, 0, 4], [4, 5, 3], [0, 0, 0]]))
    # The serial finder pushed the 4s above-right and left of P1 (mean 101 -> 102) and the
    # 0 above-left (mean unchanged); the 0 above P1 was TEST3_SKIP, not pushed.
    np.testing.assert_array_equal(d["updated"].sel(finder="serial"),
                                  [[True, False, True], [True, False, False], [False] * 3])
    assert not d["updated"].sel(finder="frozen").any()
    np.testing.assert_array_equal(d["mean"].sel(finder="serial"),
                                  [[101, 101, 102], [102, 101, 101], [101, 101, 101]])
    np.testing.assert_array_equal(d["mean"].sel(finder="frozen"), np.full((3, 3), 101.0))
    np.testing.assert_array_equal(d["v"].sel(finder="serial"), [[0, 0, 3], [3, 5, 3], [0, 0, 0]])
    np.testing.assert_array_equal(d["v"].sel(finder="frozen"), [[0, 0, 4], [4, 5, 3], [0, 0, 0]])
    # Pushing 101 and 105 into (100, 102, 100, 102): var 0.75 and 3.75.
    rms = d["rms"].sel(finder="serial").to_numpy()
    assert rms[0, 0] == math.sqrt(0.75) and rms[0, 2] == rms[1, 0] == math.sqrt(3.75)
    assert (d["thr"] == 5).all() and (d["c3_thr"] == 15).all()
    assert d["tot"].sel(finder="serial") == 14 and d["tot"].sel(finder="frozen") == 16
    assert e.test("serial", "test3")["margin"] == -1
    assert e.test("frozen", "test3")["margin"] == 1
    assert e.branch("serial") == Branch.QUIET_UPDATE == map_code(serial, 0, *P1)
    assert e.branch("frozen") == Branch.TEST3_STORE == map_code(frozen, 0, *P1)
    assert e.deciding_test == "test3"
    assert e.reasons == ("timing",)
    # Both reports name the pixels the serial finder read updated: why the two disagree.
    y, x = P1
    taps = f"updated earlier in this frame (serial): ({y - 1}, {x - 1}), ({y - 1}, {x + 1}), " \
        f"({y}, {x - 1})"
    assert taps in explanation_text(e) and taps in explanation_html(e)
    assert repr(ExplanationTable(e)) == f"<ExplanationTable of frame 0 ({y}, {x}): {verdict(e)}>"
    assert repr(e) == (f"<Explanation of pixel (y={y}, x={x}) of frame 0: serial QUIET_UPDATE, "
                       "frozen TEST3_STORE; Test 3 decides (timing)>")


def test_diverged_pedestal_site(timing):
    frames, (serial, frozen) = timing
    e = explain(frames, 1, *P1, SERIAL_FROZEN, pedestal=unit_pedestal())
    s = e.data.sel(finder="serial")
    # Frame 0 pushed 106 into the serial pedestal of P1: sum 409, sum2 41842.
    assert s["mean"][1, 1] == 102.25
    assert s["rms"][1, 1] == math.sqrt(41842 / 4 - 102.25 ** 2)
    assert s["v"][1, 1] == 109 - 102.25
    assert e.data["v"].sel(finder="frozen")[1, 1] == 8
    assert e.test("frozen", "test1")["outcome"] and not e.test("serial", "test1")["outcome"]
    assert e.branch("serial") == map_code(serial, 1, *P1) == Branch.QUIET_UPDATE
    assert e.branch("frozen") == map_code(frozen, 1, *P1) == Branch.TEST1_STORE
    assert e.deciding_test == "test1"
    assert "pedestal_diverged" in e.reasons


def test_float32_near_threshold_in_ulps():
    frames = threshold_frames()
    shape = frames.shape[1:]
    results = run_pair(frames, finders=(FrozenFinder, FrozenFinder),
                       dtypes=("float64", "float32"), n_sigma=NEAR_SIGMA)
    e = explain(frames, 0, *NEAR_PIXEL, results,
                pedestal=[unit_pedestal(shape), unit_pedestal(shape, "float32")])
    f64, f32 = e.labels
    assert (f64, f32) == ("frozen/float64", "frozen/float32")
    assert e.data["thr"].sel(finder=f64) == NEAR_SIGMA
    assert e.data["thr"].sel(finder=f32) == 5.0, "5 - 1e-7 rounds to 5 in float32"
    t64, t32 = e.test(f64, "test1"), e.test(f32, "test1")
    assert t64["outcome"] and not t32["outcome"]
    assert t64["margin"] == 5 - NEAR_SIGMA
    assert t64["margin_f32_ulps"] == pytest.approx((5 - NEAR_SIGMA) / 2 ** -21)
    assert t64["same_in_float32"] and t32["margin"] == 0
    assert e.branch(f64) == map_code(results[0], 0, *NEAR_PIXEL) == Branch.TEST1_STORE
    assert e.branch(f32) == map_code(results[1], 0, *NEAR_PIXEL) == Branch.QUIET_UPDATE
    assert e.deciding_test == "test1" and e.reasons == ("near_tie",)
    text = explanation_text(e)
    assert "Test 1 decides (near_tie)" in text
    assert "+0.21 float32 ULP, the same number in float32" in text
    assert "4.9999999" in text, "thresholds at full precision"
    html = explanation_html(e)
    assert html.count("<table") == 1 + 2 * 5 and "frozen/float32" in html
    assert ExplanationTable(e)._repr_html_() == html and str(ExplanationTable(e)) == text


def test_float32_tie_in_ulps():
    found = find_float32_tie()
    dark, n_pedestal, frames, _ = tie_frames(found)
    pedestals = [train_pedestal(dark, n_pedestal, dtype=d, progress=False)
                 for d in ("float64", "float32")]
    results = run_pair(frames, finders=(FrozenFinder, FrozenFinder),
                       dtypes=("float64", "float32"), pedestals=pedestals)
    y, x = tie_frames(found)[3]
    smaller = (y, x + 1) if found[-1] == "left" else (y, x)
    e = explain(frames, 0, *smaller, results, dark=dark)
    f64, f32 = e.labels
    gate64, gate32 = e.test(f64, "local_max"), e.test(f32, "local_max")
    assert gate32["margin"] == 0 and gate32["outcome"]
    assert not gate64["outcome"] and -1 < gate64["margin_f32_ulps"] < 0
    assert gate64["same_in_float32"]
    assert e.branch(f64) == map_code(results[0], 0, *smaller) == Branch.SHADOW
    assert e.branch(f32) == map_code(results[1], 0, *smaller) == Branch.TEST1_STORE
    assert e.deciding_test == "local_max" and e.reasons == ("near_tie",)


def test_recomputed_branches_equal_the_finders_maps():
    """Random sites of a simulated run, four finders: every recomputed code is the map's."""
    sim = Simulator(Detector(frame_shape=(24, 24)), Beam(photons_per_frame=12), seed=4)
    dark, (frames, _) = sim.dark(20), sim.frames(12)
    results = {}
    for label, cls, dtype, noise in (("serial", SerialFinder, "float64", "running"),
                                     ("frozen", FrozenFinder, "float64", "running"),
                                     ("frozen32", FrozenFinder, "float32", "running"),
                                     ("serial32", SerialFinder, "float32", "fixed")):
        ped = train_pedestal(dark, 20, dtype=dtype, noise=noise, progress=False)
        results[label] = cls(ped).find(frames, branch_maps=True, progress=False)
    rng = np.random.default_rng(0)
    sites = [(int(f), int(y), int(x)) for f, y, x in
             zip(rng.integers(0, 12, 60), rng.integers(0, 24, 60), rng.integers(0, 24, 60))]
    # The first cluster of each finder, so that stores are among the sites.
    sites += [(int(r["frame_number"][0]), int(r["y"][0]), int(r["x"][0]))
              for r in results.values()]
    explanations = explain_sites(frames, sites, results, dark=dark)
    updated = 0
    for (f, y, x), e in zip(sites, explanations):
        assert (e.frame, e.y, e.x) == (f, y, x)
        for label, result in results.items():
            assert e.branch(label) == map_code(result, f, y, x)
            assert e.data["finder_branch"].sel(finder=label) == e.branch(label)
        updated += int(e.data["updated"].sel(finder="serial").any())
    assert updated > 10, "the serial in-frame reads were exercised"
    alike = next(e for e in explanations if e.deciding_test is None)
    assert repr(alike) == (f"<Explanation of pixel (y={alike.y}, x={alike.x}) of frame "
                           f"{alike.frame}: serial {alike.branch('serial').name}, frozen "
                           f"{alike.branch('frozen').name}, frozen32 "
                           f"{alike.branch('frozen32').name}, serial32 "
                           f"{alike.branch('serial32').name}; all take the same branch>")
    assert {e.branch("frozen") for e in explanations} >= {Branch.QUIET_UPDATE,
                                                         Branch.TEST1_STORE}


def test_replays_report_nothing_the_results_reported():
    sim = Simulator(Detector(frame_shape=(24, 24)), Beam(photons_per_frame=12), seed=4)
    dark, (frames, _) = sim.dark(4), sim.frames(6)
    with pytest.warns(aare_lab.DarkFrameWarning):
        result = FrozenFinder(train_pedestal(dark, 4, progress=False)).find(
            frames, branch_maps=True, progress=False)
    sites = [(int(f), int(y), int(x)) for f, y, x in
             zip(result["frame_number"][:5], result["y"][:5], result["x"][:5])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        explanations = explain_sites(frames, sites, {"frozen": result}, dark=dark)
    assert [e.branch("frozen") for e in explanations] == [map_code(result, *s) for s in sites]


def test_edge_site_is_clipped(timing):
    frames, _ = timing
    e = explain(frames, 0, 0, 0, SERIAL_FROZEN, pedestal=unit_pedestal())
    np.testing.assert_array_equal(e.data["inside"], [[False] * 3, [False, True, True],
                                                     [False, True, True]])
    assert np.isnan(e.data["v"].sel(finder="frozen")[0, 0])
    assert "·" in explanation_text(e)


def test_refusals(timing):
    frames, _ = timing
    ped = unit_pedestal()
    with pytest.raises(ValueError, match="outside the 12x24 frame"):
        explain(frames, 0, 12, 0, SERIAL_FROZEN, pedestal=ped)
    with pytest.raises(ValueError, match=r"frames \[5\] are not in"):
        explain(frames, 5, 1, 1, SERIAL_FROZEN, pedestal=ped)
    with pytest.raises(ValueError, match="needs a float32 pedestal"):
        explain(frames, 0, 1, 1, [FinderSpec("frozen", pedestal_dtype="float32")], pedestal=ped)
    with pytest.raises(ValueError, match="either dark frames"):
        explain(frames, 0, 1, 1, SERIAL_FROZEN)
    with pytest.raises(ValueError, match="different cluster sizes"):
        explain(frames, 0, 1, 1, [FinderSpec("serial"), FinderSpec("frozen", cluster_size=5)],
                pedestal=ped)


def test_a_cuda_result_is_explained_with_its_cpu_twin():
    """A result stamped "cuda" replays the frozen model, so no GPU is needed to explain it."""
    sim = Simulator(Detector(frame_shape=(16, 16)), Beam(photons_per_frame=8), seed=5)
    dark, (frames, _) = sim.dark(20), sim.frames(6)
    ped = train_pedestal(dark, 20, progress=False)
    frozen = FrozenFinder(ped).find(frames, branch_maps=True, progress=False)
    stamped = frozen.assign_attrs(finder="cuda")
    f, y, x = int(frozen["frame_number"][0]), int(frozen["y"][0]), int(frozen["x"][0])
    (e,) = explain_sites(frames, [(f, y, x)], {"gpu": stamped}, dark=dark)
    assert e.branch("gpu") == map_code(frozen, f, y, x) == Branch.TEST1_STORE
