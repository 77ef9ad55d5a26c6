"""Bad inputs that once ended in raw Python errors, silence or the wrong exit code: each
gets one clear line naming the file or option and what to do."""

import json
import sys

import numpy as np
import pytest
from compare_cases import run_pair, timing_frames, unit_pedestal

from aare_lab import FrozenFinder
from aare_lab.analysis.compare import compare
from aare_lab.cli import main
from aare_lab.finders.frozen import max_threads
from aare_lab.model.results import load_result, save_result
from aare_lab.sources import open_source


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    serial, frozen = run_pair(timing_frames())
    paths = {"serial": root / "serial.nc", "frozen": root / "frozen.nc"}
    save_result(serial, paths["serial"])
    save_result(frozen, paths["frozen"])
    return paths


def damaged(path, tmp_path, edit):
    result = load_result(path).load()
    edit(result)
    out = tmp_path / f"damaged_{path.name}"
    save_result(result, out)
    return out


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["frame_number"].values.__setitem__(0, 99),
     "1 clusters have a frame_number not among its frames (clusters [0])"),
    (lambda r: r["y"].values.__setitem__(-1, 12),
     "clusters have a y not within its 12x24 frames"),
    (lambda r: r["x"].values.__setitem__(0, -1),
     "clusters have a x not within its 12x24 frames"),
])
def test_compare_of_clusters_outside_the_frames_names_the_file(pair, tmp_path, capsys, edit,
                                                               message):
    bad = damaged(pair["frozen"], tmp_path, edit)
    assert main(["compare", str(pair["serial"]), str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"aare-lab compare: error: '{bad}' is damaged: ")
    assert message in err and len(err.splitlines()) == 1
    with pytest.raises(ValueError, match="frozen is damaged: "):
        compare(load_result(pair["serial"]), load_result(bad), labels=["serial", "frozen"])


def test_compare_of_a_malformed_cluster_size_names_the_file(pair, tmp_path, capsys):
    bad = damaged(pair["frozen"], tmp_path, lambda r: r.attrs.__setitem__("cluster_size", "3x"))
    assert main(["compare", str(pair["serial"]), str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"aare-lab compare: error: '{bad}' has a malformed cluster_size "
                          "attribute: ")
    assert len(err.splitlines()) == 1


@pytest.fixture
def npy_run(tmp_path):
    rng = np.random.default_rng(0)
    frames = rng.normal(1000, 5, (30, 16, 16)).round().astype(np.uint16)
    np.save(tmp_path / "dark.npy", frames[:20])
    np.save(tmp_path / "frames.npy", frames[20:])
    return ["find", "--dark", str(tmp_path / "dark.npy"), "--frames",
            str(tmp_path / "frames.npy"), "--n-pedestal", "20", "--quiet", "--out",
            str(tmp_path / "r.nc")]


def test_an_n_sigma_nothing_can_reach_is_said(npy_run, capsys):
    assert main([*npy_run, "--n-sigma", "1e300"]) == 0
    err = capsys.readouterr().err
    assert ("DarkPixelWarning: n_sigma=1e+300 times the smallest rms" in err
            and "no cluster can be found; lower n_sigma" in err)


def test_an_n_sigma_beyond_float32_is_a_usage_error_not_an_overflow(npy_run, capsys):
    assert main([*npy_run, "--n-sigma", "1e300", "--pedestal-dtype", "float32"]) == 2
    err = capsys.readouterr().err
    assert err == ("aare-lab find: error: n_sigma=1e+300 does not fit the float32 pedestal "
                   "(at most 3.4e+38): lower n_sigma (3 to 10 is usual)\n")
    with pytest.raises(ValueError, match="does not fit the float32 pedestal"):
        FrozenFinder(unit_pedestal(dtype="float32"), 1e300)
    finder = FrozenFinder(unit_pedestal(dtype="float32"))
    with pytest.raises(ValueError, match="does not fit the float32 pedestal"):
        finder.reconfigure(n_sigma=1e39)


def test_too_many_threads_is_a_usage_error(npy_run, capsys):
    with pytest.raises(SystemExit) as info:
        main([*npy_run, "--threads", str(max_threads() + 1)])
    assert info.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (f"aare-lab find: error: argument --threads: {max_threads() + 1} threads: "
                   f"this machine runs at most {max_threads()} (Numba's NUMBA_NUM_THREADS); "
                   "give fewer or leave --threads out")


@pytest.mark.parametrize("content, message", [
    ('{"a": 1}', "its JSON has no 'Version', 'Detector Type', 'Pixels'"),
    ("[1, 2]", "its JSON has no 'Version', 'Detector Type', 'Pixels'"),
    ("not json", "it is not JSON (Expecting value at line 1)"),
])
def test_a_json_that_is_no_master_file_is_not_blamed_on_aare(tmp_path, monkeypatch, content,
                                                             message):
    monkeypatch.setitem(sys.modules, "aare", None)  # as on Python 3.11 without aare
    master = tmp_path / "run_master_0.json"
    master.write_text(content)
    with pytest.raises(ValueError) as info:
        open_source(master)
    assert str(info.value).startswith(f"'{master}' is not an slsDetector master file: ")
    assert message in str(info.value)


def test_a_real_master_file_without_aare_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "aare", None)
    master = tmp_path / "run_master_0.json"
    master.write_text(json.dumps({"Version": 7.2, "Detector Type": "Jungfrau",
                                  "Pixels": {"x": 1024, "y": 512}}))
    with pytest.raises(ImportError, match=r'pip install "aare-lab\[aare\]", from a clone pip '
                                          r'install "\.\[aare\]" \(aare has wheels for '
                                          r"Python 3.12 and 3.13; on other versions pip "
                                          r"builds it from source, which needs a C\+\+17 "
                                          r"compiler and CMake\)"):
        open_source(master)
