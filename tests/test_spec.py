"""One encoding per idea: the finder specification, re-configuration, the capacity and
branch-code tables, CF flags, positive-integer checks, round-half-away, and the top-level
API (lazy submodules, exports)."""

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import reference

import aare_lab
from aare_lab import Branch, FinderSpec, FrozenFinder, SerialFinder, TruncationWarning
from aare_lab.analysis.compare import compare, worst_mismatch
from aare_lab.checks import positive_int
from aare_lab.detector.arith import round_half_away, round_half_away_array
from aare_lab.finders import FINDERS, make_finder
from aare_lab.flags import cf_flags
from aare_lab.model.capacity import NO_CAP, cap_from_attr, cap_to_attr
from aare_lab.model.spec import TIMING_MODELS
from aare_lab.pipeline import find_clusters, train_pedestal
from aare_lab.simulate import Beam, Detector, simulate_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run():
    return simulate_run(n_dark=32, n_frames=24, seed=3, detector=Detector(frame_shape=(48, 40)),
                        beam=Beam(photons_per_frame=40))


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        return fn(*args, **kwargs)


# ------------------------------------------------------------------ the specification
def test_spec_normalises_and_derives():
    spec = FinderSpec("cuda", 4, "3x5", np.float32, "fixed", np.int64(7), "float64", 20)
    assert spec.cluster_size == (3, 5) and spec.radius == (1, 2)
    assert spec.n_sigma == 4.0 and type(spec.n_sigma) is float
    assert spec.pedestal_dtype == "float32" and spec.max_clusters_per_frame == 7
    assert spec.timing_model == "frozen"
    assert spec.compiled_key == ("cuda", (3, 5), "float32", "float64", "fixed", None)
    assert spec.replace(n_sigma=6, max_clusters_per_frame=None).compiled_key == spec.compiled_key
    assert spec.replace(cluster_size=5).compiled_key != spec.compiled_key
    assert spec.attrs == {"finder": "cuda", "n_sigma": 4.0, "cluster_size": "3x5",
                          "pedestal_dtype": "float32", "noise": "fixed",
                          "max_clusters_per_frame": 7, "window_dtype": "float64",
                          "n_pedestal": 20, "common_mode": "none"}
    assert "n_pedestal" not in FinderSpec().attrs
    assert FinderSpec().attrs["max_clusters_per_frame"] == NO_CAP


def test_timing_models_cover_the_registered_finders():
    assert set(TIMING_MODELS) == set(FINDERS)
    assert {FinderSpec(name).timing_model for name in FINDERS} == {"serial", "frozen"}


@pytest.mark.parametrize("changes, message", [
    ({"finder": "gpu"}, "unknown finder 'gpu'"),
    ({"n_sigma": 0}, "n_sigma"), ({"n_sigma": float("inf")}, "n_sigma"),
    ({"n_sigma": True}, "n_sigma"), ({"n_sigma": "five"}, "n_sigma"),
    ({"cluster_size": (4, 3)}, "even"), ({"cluster_size": 13}, "outside 3..11"),
    ({"pedestal_dtype": "float16"}, "pedestal_dtype"), ({"noise": "none"}, "noise"),
    ({"max_clusters_per_frame": 0}, "max_clusters_per_frame must be a positive integer"),
    ({"max_clusters_per_frame": 2.0}, "max_clusters_per_frame"),
    ({"max_clusters_per_frame": True}, "max_clusters_per_frame"),
    ({"window_dtype": "int8"}, "window_dtype"), ({"n_pedestal": 0}, "n_pedestal"),
])
def test_spec_refuses_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        FinderSpec(**changes)
    with pytest.raises(ValueError, match=message):
        FinderSpec().replace(**changes)


def test_finders_results_and_specs_round_trip(run):
    ped = train_pedestal(run.dark, 32, dtype="float32", progress=False)
    finder = FrozenFinder(ped.copy(), 4.5, "3x5", 9, window_dtype="float32")
    assert finder.spec == FinderSpec("frozen", 4.5, (3, 5), "float32", "running", 9,
                                     "float32", 32)
    result = quiet(finder.find, run.frames, progress=False)
    spec = FinderSpec.from_result(result)
    assert spec == finder.spec
    assert {k: result.attrs[k] for k in spec.attrs} == spec.attrs
    again = quiet(make_finder(spec, ped.copy()).find, run.frames, progress=False)
    np.testing.assert_array_equal(again["window"], result["window"])
    same = quiet(find_clusters, run.frames, run.dark, spec=spec, progress=False)
    np.testing.assert_array_equal(same["window"], result["window"])
    with pytest.raises(ValueError, match="needs a float64 pedestal"):
        make_finder(spec.replace(pedestal_dtype="float64"), ped.copy())
    with pytest.raises(ValueError, match="n_pedestal=33"):
        make_finder(spec.replace(n_pedestal=33), ped.copy())
    with pytest.raises(TypeError, match="Pedestal"):
        make_finder(spec, "pedestal")
    with pytest.raises(TypeError, match="not both"):
        find_clusters(run.frames, run.dark, spec=spec, n_sigma=3)


def test_find_clusters_with_a_pedestal_takes_its_configuration(run):
    ped = train_pedestal(run.dark, 32, dtype="float32", noise="fixed", progress=False)
    result = find_clusters(run.frames, pedestal=ped, progress=False)
    assert (result.attrs["pedestal_dtype"], result.attrs["noise"],
            result.attrs["n_pedestal"]) == ("float32", "fixed", 32)


# ------------------------------------------------------------------ re-configuration
@pytest.mark.parametrize("finder_cls", [SerialFinder, FrozenFinder])
@pytest.mark.parametrize(("dtype", "noise"), [("float64", "running"), ("float32", "running"),
                                              ("float64", "fixed"), ("float32", "fixed")])
def test_reconfigured_finder_equals_a_fresh_one(run, finder_cls, dtype, noise):
    """After some frames at 5 sigma, uncapped, the reconfigured finder gives exactly what a
    new finder on the same pedestal state gives, clusters and pedestal alike (with fixed
    noise the frozen finder makes its thresholds once a chunk: from the new n_sigma)."""
    ped = train_pedestal(run.dark, 32, dtype=dtype, noise=noise, progress=False)
    finder = finder_cls(ped, 5.0, (3, 3), None)
    finder.find(run.frames[:8], progress=False)
    for n_sigma, cap in ((3.5, 2), (4.0, None)):
        start = finder.pedestal.copy()
        finder.reconfigure(n_sigma=n_sigma, max_clusters_per_frame=cap)
        fresh = finder_cls(start, n_sigma, (3, 3), cap)
        assert finder.spec == fresh.spec
        got = quiet(finder.find, run.frames[8:], branch_maps=True, progress=False)
        want = quiet(fresh.find, run.frames[8:], branch_maps=True, progress=False)
        assert FinderSpec.from_result(got) == FinderSpec.from_result(want) == fresh.spec
        if cap is not None:
            assert (want["n_found"] > want["n_kept"]).any(), "the cap must cut"
        for name in ("frame_number", "y", "x", "window", "n_found", "n_kept", "branch_map"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        for key, value in finder.pedestal.state().items():
            np.testing.assert_array_equal(value, start.state()[key], err_msg=key)
    assert got.sizes["cluster"] > 0


def test_reconfigure_changes_only_what_it_is_given():
    finder = FrozenFinder(_pedestal(), 5.0, (3, 3), 10)
    finder.reconfigure(n_sigma=6)
    assert (finder.spec.n_sigma, finder.spec.max_clusters_per_frame) == (6.0, 10)
    finder.reconfigure(max_clusters_per_frame=None)
    assert (finder.spec.n_sigma, finder.spec.max_clusters_per_frame) == (6.0, None)
    finder.reconfigure()
    assert finder.spec.n_sigma == 6.0


def test_reconfigure_refuses_what_needs_a_new_finder():
    finder = SerialFinder(_pedestal())
    before = finder.spec
    with pytest.raises(ValueError, match="cluster_size cannot change.*new finder"):
        finder.reconfigure(n_sigma=4, cluster_size=5)
    with pytest.raises(ValueError, match="max_clusters_per_frame must be a positive integer"):
        finder.reconfigure(max_clusters_per_frame=0)
    with pytest.raises(TypeError, match="unknown parameters"):
        finder.reconfigure(nsigma=4)
    assert finder.spec == before


def _pedestal():
    ped = aare_lab.Pedestal((6, 6), 2)
    ped.push_dark(np.full((2, 6, 6), 100, np.uint16))
    return ped


# ------------------------------------------------------------------ one encoding per idea
def test_cap_encoding():
    assert cap_to_attr(None) == NO_CAP == -1 and cap_to_attr(np.int32(5)) == 5
    assert cap_from_attr(np.int64(-1)) is None and cap_from_attr(np.int64(5)) == 5
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="max_clusters_per_frame"):
            cap_to_attr(bad)
    with pytest.raises(ValueError):
        cap_from_attr(0)


def test_cuda_kernel_branch_codes_are_the_table():
    source = (ROOT / "kernels" / "frozen.cu").read_text()
    names = {b.name for b in Branch}
    defines = {name: int(value) for name, value in
               re.findall(r"^#define (\w+) (\d+)\b", source, re.MULTILINE) if name in names}
    assert defines == {b.name: b.value for b in Branch if b != Branch.NOT_PROCESSED}


def test_branch_meanings_are_the_algorithm_table():
    doc = (ROOT / "docs" / "algorithm.md").read_text()
    rows = {name: (int(value), meaning) for value, name, meaning in
            re.findall(r"^\| (\d) \| ([A-Z0-9_]+) \| (.+) \|$", doc, re.MULTILINE)}
    assert rows == {b.name: (b.value, b.meaning) for b in Branch}


def test_reference_branch_codes_are_the_table():
    """The transcription is independent on purpose (it imports nothing from aare_lab), so
    it is checked against the table instead of importing it."""
    assert {b.name: getattr(reference, b.name) for b in Branch} == {b.name: b.value
                                                                      for b in Branch}
    source = (ROOT / "tests" / "reference.py").read_text()
    assert not re.search(r"^\s*(from|import) aare_lab", source, re.MULTILINE)


def test_numba_branch_codes_are_the_table():
    from aare_lab.detector import arith as _arith
    from aare_lab.finders import _decision

    for module in (_arith, _decision):
        for b in Branch:
            if hasattr(module, b.name):
                assert getattr(module, b.name) == b.value and \
                    getattr(module, b.name).dtype == np.uint8


def test_cf_flags():
    attrs = cf_flags((-1, 0, 1), ("unknown", "no", "yes"), "tri-state", dtype="int8")
    assert attrs["flag_values"].dtype == np.int8 and attrs["flag_meanings"] == "unknown no yes"
    assert attrs["long_name"] == "tri-state"
    assert "long_name" not in cf_flags(range(1), ["one"])
    with pytest.raises(ValueError, match="one word per flag value"):
        cf_flags(range(2), ["a b", "c"])
    with pytest.raises(ValueError, match="one word per flag value"):
        cf_flags(range(3), ["a", "b"])


@pytest.mark.parametrize("value", [0, -1, 1.0, 2.5, True, "3", None])
def test_positive_int_refuses(value):
    with pytest.raises(ValueError, match=r"^chunk_frames must be a positive integer, got "):
        positive_int("chunk_frames", value)


@pytest.mark.parametrize("call", [
    lambda: aare_lab.Pedestal((2, 2), 0),
    lambda: SerialFinder(_pedestal(), chunk_frames=np.float64(4)),
    lambda: aare_lab.caps.cap_analysis(np.ones(3, int), True),
    lambda: aare_lab.sources.ArraySource(np.zeros((2, 2, 2), np.uint16)).chunks(0),
    lambda: next(aare_lab.simulate.Simulator(seed=0).iter_frames(4, chunk_frames=0)),
])
def test_positive_int_is_the_check_everywhere(call):
    with pytest.raises(ValueError, match="must be a positive integer, got"):
        call()


def test_round_half_away_array_is_the_scalar_rule():
    values = np.array([[0.5, 1.5, 2.5, -0.5, -2.5], [2.4999999999999996, 1e15 + 0.5, 0.0,
                                                   3.0, 0.49999999999999994]])
    got = round_half_away_array(values)
    want = np.array([[round_half_away(v) for v in row] for row in values])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[0], [1, 2, 3, -1, -3])
    assert [reference.rha(v) for v in values.ravel()] == got.ravel().astype(int).tolist()


# ------------------------------------------------------------------ the top-level API
def test_worst_mismatch_takes_one_comparison_or_many(run):
    ped = train_pedestal(run.dark, 32, progress=False)
    a = SerialFinder(ped.copy(), 3.0).find(run.frames, progress=False)
    b = FrozenFinder(ped.copy(), 3.0).find(run.frames, progress=False)
    c = compare(a, b)
    assert worst_mismatch(c) == worst_mismatch([c])


def test_top_level_exports():
    from aare_lab.gpu import GpuError, GpuUnavailable

    assert aare_lab.GpuUnavailable is GpuUnavailable and aare_lab.GpuError is GpuError
    assert aare_lab.FinderSpec is FinderSpec
    assert {"explain", "compare", "widgets", "FinderSpec"} <= set(dir(aare_lab))


def test_submodules_load_lazily_without_matplotlib():
    code = """
import sys, types
import aare_lab
assert "matplotlib" not in sys.modules
for name, where in (("explain", "analysis.explain"), ("compare", "analysis.compare"),
                    ("spectra", "analysis.spectra"), ("caps", "analysis.caps"),
                    ("simulate", "simulate"), ("sources", "sources")):
    module = getattr(aare_lab, name)
    assert isinstance(module, types.ModuleType) and module.__name__ == "aare_lab." + where
assert callable(aare_lab.explain.explain)
assert "matplotlib" not in sys.modules, "the compute modules must not import matplotlib"
assert aare_lab.plots.__name__ == "aare_lab.plots"
try:
    aare_lab.no_such_thing
except AttributeError as err:
    assert "no_such_thing" in str(err)
else:
    raise AssertionError
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("size", ["0x0", "1x3", "13x3"])
def test_cluster_sizes_out_of_range_say_so_before_parity(size):
    with pytest.raises(ValueError, match=r"outside 3\.\.11"):
        FinderSpec(cluster_size=size)
