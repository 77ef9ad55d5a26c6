"""``aare-lab compare`` end to end on saved results."""

import json

import numpy as np
import pytest
from compare_cases import run_pair, timing_frames, unit_pedestal

from aare_lab import FrozenFinder
from aare_lab.cli import main
from aare_lab.model.results import load_result, save_result


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """serial.nc, frozen.nc and frozen32.nc on the timing case, and a run of other frames."""
    root = tmp_path_factory.mktemp("results")
    frames = timing_frames()
    serial, frozen = run_pair(frames)
    f32 = run_pair(frames, finders=(FrozenFinder,), dtypes=("float32",))[0]
    shifted = FrozenFinder(unit_pedestal()).find(frames, frame_numbers=[5, 6], progress=False)
    paths = {}
    for name, result in (("serial", serial), ("frozen", frozen), ("frozen32", f32),
                         ("shifted", shifted)):
        paths[name] = root / f"{name}.nc"
        save_result(result, paths[name])
    return paths


def test_compare_prints_writes_json_and_panel(files, tmp_path, capsys):
    summary, panel = tmp_path / "summary.json", tmp_path / "worst.png"
    code = main(["compare", str(files["serial"]), str(files["frozen"]),
                 "--json", str(summary), "--panel", str(panel)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == ("serial vs frozen: 1 only in serial, 4 only in frozen "
                                   "(83 % of all clusters), 0 matched windows differ")
    assert "classification: displaced 2, isolated 3" in out
    assert "cause: pedestal_diverged 1, timing 4" in out
    assert ("transitions: QUIET_UPDATE -> TEST3_STORE: 3, TEST3_STORE -> TEST3_SKIP: 1, "
            "QUIET_UPDATE -> TEST1_STORE: 1") in out
    data = json.loads(summary.read_text())
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"]) == ("serial", "frozen")
    assert (pair["a_only"], pair["b_only"], pair["matched"], pair["matched_value_diffs"]) == \
        (1, 4, 1, 0)
    assert pair["classification"] == {"truncated": 0, "duplicate_neighbour": 0, "displaced": 2,
                                      "near_neighbour": 0, "isolated": 3, "value_diff": 0}
    assert pair["cause"]["timing"] == 4 and pair["cause"]["unexplained"] == 0
    assert pair["deciding_test"]["test3"] == 3
    assert pair["transitions"]["QUIET_UPDATE -> TEST3_STORE"] == 3
    assert pair["first_divergent_frame"] == 0 and pair["first_disagreement_frame"] == 0
    assert data["worst"] == {"frame": 0, "y": 3, "x": 13}
    assert [r["label"] for r in data["results"]] == ["serial", "frozen"]
    assert data["results"][0]["n_clusters"] == 2
    assert panel.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_without_branch_maps_says_the_timing_cause_is_assumed(files, tmp_path,
                                                                      capsys):
    bare = []
    for name in ("serial", "frozen"):
        bare.append(tmp_path / f"{name}.nc")
        save_result(load_result(files[name]).drop_vars("branch_map"), bare[-1])
    assert main(["compare", *map(str, bare)]) == 0
    out = capsys.readouterr().out
    assert ("cause: timing 5 (5 timing assumed: no branch maps; find with --branch-maps all "
            "to check)") in out
    # With the maps, the causes were checked: no such note.
    assert main(["compare", str(files["serial"]), str(files["frozen"])]) == 0
    assert "assumed" not in capsys.readouterr().out


def test_compare_three_results_gives_every_pair(files, tmp_path, capsys):
    summary = tmp_path / "s.json"
    assert main(["compare", str(files["serial"]), str(files["frozen"]), str(files["frozen32"]),
                 "--json", str(summary)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "serial vs frozen/float64: 1 only in serial, 4 only in frozen/float64 (83 % of all "
        "clusters), 0 matched windows differ",
        "serial vs frozen/float32: 1 only in serial, 4 only in frozen/float32 (83 % of all "
        "clusters), 0 matched windows differ",
        "frozen/float64 vs frozen/float32: 0 only in frozen/float64, 0 only in frozen/float32 "
        "(0 % of all clusters), 0 matched windows differ"]
    pairs = json.loads(summary.read_text())["pairs"]
    assert [(p["a"], p["b"]) for p in pairs] == [("serial", "frozen/float64"),
                                                 ("serial", "frozen/float32"),
                                                 ("frozen/float64", "frozen/float32")]


def test_agreeing_results_write_no_panel(files, tmp_path, capsys):
    panel = tmp_path / "worst.png"
    assert main(["compare", str(files["frozen"]), str(files["frozen32"]),
                 "--panel", str(panel)]) == 0
    assert "no mismatch panel written" in capsys.readouterr().out
    assert not panel.exists()


def test_different_frames_are_refused_with_the_frames(files, capsys):
    assert main(["compare", str(files["frozen"]), str(files["shifted"])]) == 1
    err = capsys.readouterr().err
    assert "cannot compare frozen with shifted: frames differ: 2 only in frozen [0, 1], " \
        "2 only in shifted [5, 6]" in err


@pytest.mark.parametrize("argv, message, code", [
    (["missing.nc", "missing2.nc"], "no result file", 1),
    (["one.nc"], "at least two result files", 2),
])
def test_bad_input_exits_1_and_bad_usage_2(argv, message, code, capsys, tmp_path, files):
    argv = [str(files["frozen"]) if a == "one.nc" else str(tmp_path / a) for a in argv]
    assert main(["compare", *argv]) == code
    assert message in capsys.readouterr().err


def test_a_negative_tolerance_is_a_usage_error(files, capsys):
    with pytest.raises(SystemExit) as info:
        main(["compare", str(files["frozen"]), str(files["frozen"]), "--tolerance", "-1"])
    assert info.value.code == 2
    assert "--tolerance: -1 must be a finite number >= 0" in capsys.readouterr().err


def test_a_cluster_file_read_without_frame_shape_says_how_to_give_it(files, tmp_path,
                                                                     capsys):
    clust, read = tmp_path / "frozen.clust", tmp_path / "read.nc"
    assert main(["convert", str(files["frozen"]), str(clust)]) == 0
    assert main(["convert", str(clust), str(read)]) == 0
    capsys.readouterr()
    assert main(["compare", str(files["frozen"]), str(read)]) == 1
    err = capsys.readouterr().err
    assert f"'{read}' has no frame shape: it was read from the aare cluster file {clust}" in err
    assert f"aare-lab convert {clust} OUT.nc --frame-shape NYxNX" in err
    assert "not an aare_lab finder result" not in err
    assert main(["convert", str(clust), str(read), "--frame-shape", "12x24"]) == 0
    assert main(["compare", str(files["frozen"]), str(read)]) == 0


def test_a_file_that_is_not_a_result_is_a_clear_error(files, tmp_path, capsys):
    frames = tmp_path / "frames.npy"
    np.save(frames, np.zeros((2, 4, 4), np.uint16))
    assert main(["compare", str(files["frozen"]), str(frames)]) == 1
    err = capsys.readouterr().err
    assert "frames.npy is not an aare_lab result" in err and "Traceback" not in err


def test_the_panel_of_windows_a_few_adu_apart_shows_their_difference(files, tmp_path,
                                                                      capsys):
    from aare_lab.plots import mismatch_panel

    frozen = load_result(files["frozen"]).load()
    edited = frozen.copy(deep=True)
    edited["window"].values[0, 1, 2] += 3  # the same clusters, one tap 3 ADU apart
    save_result(edited, tmp_path / "edited.nc")
    panel = tmp_path / "worst.png"
    assert main(["compare", str(files["frozen"]), str(tmp_path / "edited.nc"),
                 "--panel", str(panel)]) == 0
    y, x = int(frozen["y"][0]), int(frozen["x"][0])
    assert (f"around (y={y}, x={x}), the site with most matched windows that differ (no "
            "cluster is in one result only), and frozen − edited, written to") \
        in capsys.readouterr().out
    assert panel.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = mismatch_panel([frozen, edited], int(frozen["frame_number"][0]), y, x,
                         labels=["before", "after"], difference=True)
    (image,) = [im for ax in fig.axes for im in ax.images if im.get_gid() == "difference"]
    shown = image.get_array()
    assert shown.count() > 1 and sorted(set(shown.compressed().tolist())) == [-3.0, 0.0]
    x0, _, _, y0 = (int(edge + 0.5) for edge in image.get_extent())
    assert shown[y - y0, x + 1 - x0] == -3  # window tap (1, 2): the pixel right of the centre
    assert "before − after: 1 pixel differ, by up to 3 ADU" in [
        ax.get_title() for ax in fig.axes]


def test_the_panel_prefers_clusters_one_result_lacks(files, tmp_path, capsys):
    assert main(["compare", str(files["serial"]), str(files["frozen"]), "--panel",
                 str(tmp_path / "p.png")]) == 0
    assert ("around (y=3, x=13), the site with most clusters that one result has and "
            "another lacks, and serial − frozen, written to") in capsys.readouterr().out
