"""Capacity analysis: what a cap truncates and what it costs."""

import numpy as np
import pytest
from compare_cases import raw, unit_pedestal

from aare_lab import FrozenFinder, TruncationWarning
from aare_lab.analysis.caps import buffer_bytes_per_frame, cap_analysis

COUNTS = [0, 3, 5, 5, 10]


def test_counts_array():
    report = cap_analysis(np.array(COUNTS), 4)
    assert report["truncated"].to_numpy().tolist() == [False, False, True, True, True]
    a = report.attrs
    assert (a["frames"], a["frames_truncated"], a["clusters"], a["clusters_dropped"]) == \
        (5, 3, 23, 1 + 1 + 6)
    assert a["truncated_fraction"] == 3 / 5 and a["dropped_fraction"] == 8 / 23
    assert a["max_count"] == 10
    hist = report["histogram"]
    assert hist.sel(clusters_per_frame=5) == 2 and hist.sel(clusters_per_frame=10) == 1
    assert int(hist.sum()) == 5 and len(hist) == 11
    # Per cluster: 3x3 int32 window (36 B) + y, x (int32) + frame number (int64); per frame
    # n_found and n_kept (int64).
    assert a["bytes_per_frame"] == 4 * (36 + 16) + 16
    assert "dropped" not in report


def test_buffer_cost_follows_cluster_size_and_dtype():
    assert buffer_bytes_per_frame(100, "5x5", "float64") == 100 * (25 * 8 + 16) + 16
    assert buffer_bytes_per_frame(100, (3, 5), "float32") == 100 * (15 * 4 + 16) + 16
    with pytest.raises(ValueError, match="even"):
        buffer_bytes_per_frame(10, 4)


def photon_frames():
    v = np.zeros((2, 10, 12), int)
    for y, x in [(2, 9), (2, 2), (7, 3), (5, 6)]:
        v[0, y, x] = 20
    v[1, 4, 4] = 20
    return raw(v)


def test_result_marks_the_clusters_a_cap_drops():
    result = FrozenFinder(unit_pedestal((10, 12)), cluster_size="3x5").find(
        photon_frames(), progress=False)
    report = cap_analysis(result, 2)
    assert report.attrs["cluster_size"] == "3x5" and report.attrs["window_dtype"] == "int32"
    assert report.attrs["bytes_per_frame"] == 2 * (15 * 4 + 16) + 16
    dropped = {(int(f), int(y), int(x)) for f, y, x, d in zip(
        result["frame_number"].to_numpy(), result["y"].to_numpy(), result["x"].to_numpy(),
        report["dropped"].to_numpy()) if d}
    # Raster order in frame 0: (2, 2), (2, 9), (5, 6), (7, 3): the last two go.
    assert dropped == {(0, 5, 6), (0, 7, 3)}
    assert report["n_found"].to_numpy().tolist() == [4, 1]


def test_refuses_a_result_truncated_below_the_cap():
    with pytest.warns(TruncationWarning):
        result = FrozenFinder(unit_pedestal((10, 12)), max_clusters_per_frame=2).find(
            photon_frames(), progress=False)
    with pytest.raises(ValueError, match="truncated at max_clusters_per_frame=2 < cap=3"):
        cap_analysis(result, 3)
    assert cap_analysis(result, 2).attrs["clusters_dropped"] == 2
    assert cap_analysis(result["n_found"].to_numpy(), 3).attrs["clusters_dropped"] == 1
    with pytest.raises(ValueError, match="positive integer"):
        cap_analysis(result, 0)
