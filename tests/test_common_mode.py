"""Common-mode correction (docs/algorithm.md, "Common mode"): layouts, hand-built frames
with known offsets, the serial and frozen finders against tests/reference.py, driving
invariance, provenance, the CLI and the real JUNGFRAU dark frames."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from reference import RefPedestal, common_mode, find_frame

from aare_lab import FrozenFinder, Pedestal, SerialFinder, TruncationWarning
from aare_lab.cli import main
from aare_lab.detector.common_mode import CommonMode
from aare_lab.model.results import load_result, save_result
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import find_clusters

# The few dark frames here are deliberate (exact hand-built pedestals, small references).
pytestmark = pytest.mark.filterwarnings("ignore:the noise estimated from")
FINDERS = {"serial": SerialFinder, "frozen": FrozenFinder}
LEVEL = 3000
JUNGFRAU = Path(__file__).parent / "data" / "jungfrau_dark_crop.npz"


# ------------------------------------------------------------------ layouts
def test_moench03_supercolumns_are_those_of_slsdetectorcalibration():
    labels = CommonMode("moench03").labels((400, 400))
    for iy, ix in [(0, 0), (199, 24), (199, 25), (200, 0), (399, 399), (250, 130)]:
        assert labels[iy, ix] == ix // 25 + (iy // 200) * 16  # moench03CommonMode::getROI
    assert np.bincount(labels.ravel()).tolist() == [200 * 25] * 32


def test_jungfrau_chips():
    labels = CommonMode("jungfrau").labels((512, 1024))
    assert labels[0, 0] == 0 and labels[0, 256] == 1 and labels[255, 1023] == 3
    assert labels[256, 0] == 4 and labels[511, 1023] == 7
    assert np.bincount(labels.ravel()).tolist() == [256 * 256] * 8
    assert CommonMode("jungfrau").n_regions((1024, 1024)) == 16


def test_jungfrau_chip_rows():
    labels = CommonMode("jungfrau-rows").labels((512, 1024))
    assert labels[0, 0] == 0 and labels[0, 255] == 0 and labels[0, 256] == 1
    assert labels[1, 0] == 4 and labels[511, 1023] == 2047
    assert np.bincount(labels.ravel()).tolist() == [256] * 2048
    with pytest.raises(ValueError, match="jungfrau-rows.*256x256 chips"):
        CommonMode("jungfrau-rows").labels((400, 400))


@pytest.mark.parametrize("layout, shape, message", [
    ("moench03", (512, 1024), "needs 400x400"),
    ("jungfrau", (400, 400), "256x256 chips"),
    ("psana", (4, 4), "common_mode must be"),
    (np.zeros((4, 4), float), (4, 4), "integers"),
    (np.full((4, 4), -2), (4, 4), "-1 \\(excluded\\)"),
    (np.full((4, 4), -1), (4, 4), "at least one region"),
    (np.zeros((4, 5), int), (4, 4), "label map is 4x5 but the frames are 4x4"),
])
def test_layouts_that_do_not_fit_are_refused(layout, shape, message):
    with pytest.raises(ValueError, match=message):
        CommonMode(layout).labels(shape)


def test_label_maps_compare_by_content():
    a = CommonMode(np.array([[0, 1], [1, -1]]))
    assert a == CommonMode(np.array([[0, 1], [1, -1]], np.int64))
    assert hash(a) == hash(CommonMode(np.array([[0, 1], [1, -1]])))
    assert a != CommonMode(np.array([[0, 1], [1, 1]])) and a != CommonMode("jungfrau")


# --------------------------------------------------------- hand-built frames
def flat_pedestal(shape, dtype="float64", n_pedestal=2):
    """Dark frames LEVEL - 1 and LEVEL + 1: every pixel has mean LEVEL and rms exactly 1."""
    ped = Pedestal(shape, n_pedestal, dtype)
    ped.push_dark(np.stack([np.full(shape, LEVEL - 1), np.full(shape, LEVEL + 1)]
                           * (n_pedestal // 2)).astype(np.uint16))
    return ped


def hand_built():
    """A 12x12 frame, four 6x6 regions; with n_sigma=5 each pixel's threshold is 5 ADU.

    0: offset +6 with spread -3..3 (beyond the first pass's window: only the second finds
    it); 1: offset -4, flat; 2: offset +2 with one photon of 300 ADU (a candidate: neither
    it nor its 8 neighbours enter the second pass); -1 (excluded): +1, never corrected.
    """
    labels = np.full((12, 12), -1, np.int32)
    labels[:6, :6], labels[:6, 6:], labels[6:, :6] = 0, 1, 2
    offset = np.zeros((12, 12), np.int64)
    spread = np.append(np.arange(35) % 7 - 3, 0).reshape(6, 6)
    offset[:6, :6] = 6 + spread
    offset[:6, 6:] = -4
    offset[6:, :6] = 2
    offset[6:, 6:] = 1
    offset[9, 2] += 300
    return labels, (LEVEL + offset).astype(np.uint16)[np.newaxis]


@pytest.mark.parametrize("model", list(FINDERS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_known_offsets_are_recovered_exactly(model, dtype):
    labels, frames = hand_built()
    ped = flat_pedestal(labels.shape, dtype)
    start = ped.state()
    result = FINDERS[model](ped, 5.0, 3, common_mode=labels).find(frames, branch_maps=True,
                                                                 progress=False)
    assert result["common_mode"].to_numpy().tolist() == [[6.0, -4.0, 2.0]]
    assert result["common_mode"].dtype == np.dtype(dtype)
    assert result["common_mode_pixels"].to_numpy().tolist() == [[36, 36, 27]]
    assert result.attrs["common_mode"] == "labels"
    # The photon is the one cluster, its window corrected by its region's offset.
    assert (result["y"].item(), result["x"].item()) == (9, 2)
    assert result["window"].to_numpy()[0, 1, 1] == 300
    assert result["window"].to_numpy()[0, 0, 0] == 0
    branch = result["branch_map"].to_numpy()[0]
    assert (branch[:6, :] == 6).all(), "corrected regions 0 and 1 read 0 +- 3: all quiet"
    # Pushes are corrected: a pixel of region 1 pushes exactly its mean, so s stays; the
    # excluded corner pushes its raw value, 1 above the mean: s grows by 1 (N = 2).
    s0 = start["s"]
    assert ped.state()["s"][0, 6] == s0[0, 6]
    assert ped.state()["s"][11, 11] == s0[11, 11] + 1


@pytest.mark.parametrize("model", list(FINDERS))
def test_a_photons_charge_sharing_tail_stays_out_of_the_estimate(model):
    """Region 0 has no offset but a photon of 300 ADU whose 8 neighbours hold 4 ADU each,
    below the 5 ADU threshold: with them the offset would read 32 / 35 ADU."""
    labels = np.zeros((6, 6), np.int32)
    offset = np.zeros((6, 6), np.int64)
    offset[1:4, 1:4] = 4
    offset[2, 2] = 300
    frames = (LEVEL + offset).astype(np.uint16)[np.newaxis]
    result = FINDERS[model](flat_pedestal(labels.shape), 5.0, 3, common_mode=labels).find(
        frames, progress=False)
    assert result["common_mode"].to_numpy().tolist() == [[0.0]]
    assert result["common_mode_pixels"].to_numpy().tolist() == [[36 - 9]]
    assert result["window"].to_numpy()[0].tolist() == [[4, 4, 4], [4, 300, 4], [4, 4, 4]]


@pytest.mark.parametrize("model", list(FINDERS))
def test_tails_across_the_edges_of_row_blocks_stay_out(model):
    """The frozen finder sums blocks of ROWS_PER_TASK rows apart: a photon on the last row
    of one block (15) and on the first of another (32) must mask its tails in the block
    beside it, and a corner photon the tails inside the frame only."""
    from aare_lab.finders._common_mode import ROWS_PER_TASK

    assert ROWS_PER_TASK == 16, "the photons below sit on the blocks' edges"
    shape = (40, 6)
    offset = np.zeros(shape, np.int64)
    for y, x in ((15, 1), (32, 4), (0, 0), (39, 5)):
        offset[max(y - 1, 0):y + 2, max(x - 1, 0):x + 2] = 4
        offset[y, x] = 300
    frames = (LEVEL + offset).astype(np.uint16)[np.newaxis]
    result = FINDERS[model](flat_pedestal(shape), 5.0, 3,
                            common_mode=np.zeros(shape, np.int32)).find(frames, progress=False)
    assert result["common_mode"].to_numpy().tolist() == [[0.0]]
    assert result["common_mode_pixels"].to_numpy().tolist() == [[240 - 9 - 9 - 4 - 4]]
    assert result["y"].to_numpy().tolist() == [0, 15, 32, 39]


def test_without_common_mode_the_same_frame_is_full_of_clusters():
    labels, frames = hand_built()
    result = FrozenFinder(flat_pedestal(labels.shape), 5.0, 3).find(frames, progress=False)
    assert result["n_found"].item() > 5
    assert "common_mode" not in result and result.attrs["common_mode"] == "none"


# ------------------------------------------------------------ vs reference
def random_case(rng, shape, n_pedestal, n_frames, noise=3.0):
    dark = rng.normal(LEVEL, noise, (n_pedestal, *shape))
    data = rng.normal(LEVEL, noise, (n_frames, *shape))
    data += rng.choice([-25.0, -12.0, 0.0, 9.0, 20.0], n_frames)[:, None, None]
    hits = rng.random(data.shape) < 0.04
    data[hits] += rng.choice([15, 40, 300], hits.sum())
    return (np.clip(np.rint(dark), 0, 65535).astype(np.uint16),
            np.clip(np.rint(data), 0, 65535).astype(np.uint16))


@pytest.mark.parametrize("model", list(FINDERS))
@pytest.mark.parametrize("dtype, noise, cluster_size", [
    ("float64", "running", (3, 3)), ("float32", "running", (3, 5)),
    ("float64", "fixed", (5, 3)), ("float32", "fixed", (3, 3))])
def test_finders_match_the_reference(model, dtype, noise, cluster_size):
    rng = np.random.default_rng(hash((model, dtype, noise)) % 2**32)
    shape, n_pedestal = (10, 13), 6
    dark, frames = random_case(rng, shape, n_pedestal, 6)
    labels = rng.integers(-1, 3, shape)
    ref = RefPedestal(shape, n_pedestal, dtype, noise)
    for d in dark:
        ref.push_dark(d.tolist())
    expected, offsets, n_found, codes = [], [], [], []
    for k, frame in enumerate(frames):
        offsets.append(common_mode(ref, frame.tolist(), 5.0, labels.tolist()))
        cl, found, c = find_frame(ref, frame.tolist(), 5.0, cluster_size, model,
                                  labels=labels.tolist())
        expected += [(k, y, x, w) for y, x, w in cl]
        n_found.append(found)
        codes.append(c)
    ped = Pedestal(shape, n_pedestal, dtype, noise)
    ped.push_dark(dark)
    result = FINDERS[model](ped, 5.0, cluster_size, common_mode=labels).find(
        frames, branch_maps=True, progress=False)
    got = [(int(f), int(y), int(x), w.ravel().tolist()) for f, y, x, w in zip(
        *(result[k].to_numpy() for k in ("frame_number", "y", "x", "window")))]
    assert got == expected
    assert result["n_found"].to_numpy().tolist() == n_found
    np.testing.assert_array_equal(result["branch_map"].to_numpy(), np.array(codes, np.uint8))
    np.testing.assert_array_equal(result["common_mode"].to_numpy(),
                                  np.array([c for c, _ in offsets], dtype))
    assert result["common_mode_pixels"].to_numpy().tolist() == [n for _, n in offsets]
    for key, value in ref.state().items():
        np.testing.assert_array_equal(ped.state()[key], value, err_msg=key)


def moench_like(n_frames=6, jump=24.0, sigma=2.0):
    """MÖNCH03-sized frames, noise 4 ADU, photons, supercolumn offsets of rms ``sigma`` and
    ``jump`` ADU on every other frame."""
    rng = np.random.default_rng(3)
    shape = (400, 400)
    dark = rng.normal(LEVEL, 4.0, (20, *shape))
    data = rng.normal(LEVEL, 4.0, (n_frames, *shape))
    data += sigma * rng.normal(0, 1, (n_frames, 1, 16))[..., np.repeat(np.arange(16), 25)]
    data[::2] += jump
    hits = rng.random(data.shape) < 0.003
    data[hits] += 320
    return (np.rint(dark).astype(np.uint16), np.rint(data).astype(np.uint16))


@pytest.mark.parametrize("model", list(FINDERS))
def test_same_result_for_any_chunking_splitting_and_threads(model):
    dark, frames = moench_like()

    def run(calls, **options):
        ped = Pedestal(frames.shape[1:], 20)
        ped.push_dark(dark)
        finder = FINDERS[model](ped, common_mode="moench03", **options)
        parts = [finder.find(frames[a:b], range(a, b), progress=False) for a, b in calls]
        return parts, ped.state()

    (whole,), state = run([(0, 6)], chunk_frames=64)
    options = {"threads": 1} if model == "frozen" else {}
    split, split_state = run([(0, 1), (1, 4), (4, 6)], chunk_frames=2, **options)
    for name in ("common_mode", "common_mode_pixels", "n_found", "window"):
        got = np.concatenate([p[name].to_numpy() for p in split])
        np.testing.assert_array_equal(got, whole[name].to_numpy(), err_msg=name)
    for key in state:
        np.testing.assert_array_equal(split_state[key], state[key])


def test_serial_and_frozen_estimate_from_the_same_frame_start_state():
    dark, frames = moench_like(1)
    results = [find_clusters(frames, dark, finder=m, n_pedestal=20, common_mode="moench03",
                             progress=False) for m in FINDERS]
    np.testing.assert_array_equal(*(r["common_mode"].to_numpy() for r in results))


def test_a_frame_wide_jump_is_recovered_and_its_false_clusters_removed():
    dark, frames = moench_like(jump=24.0)   # 6 sigma of a 4 ADU noise
    _, without_jump = moench_like(jump=0.0, sigma=0.0)
    plain = find_clusters(frames, dark, n_pedestal=20, progress=False)["n_found"].to_numpy()
    fixed = find_clusters(frames, dark, n_pedestal=20, common_mode="moench03", progress=False)
    reference = find_clusters(without_jump, dark, n_pedestal=20,
                              progress=False)["n_found"].to_numpy()
    assert (plain[::2] > 5 * reference[::2]).all()
    assert (np.abs(fixed["n_found"].to_numpy() - reference) <= 0.03 * reference).all()
    offsets = fixed["common_mode"].to_numpy()
    assert np.abs(offsets[::2].mean() - 24.0) < 0.5 and np.abs(offsets[1::2].mean()) < 0.5


# ------------------------------------------------------------- provenance, CLI
def test_spec_round_trips_through_a_saved_result(tmp_path):
    labels, frames = hand_built()
    for layout in (labels, None):
        result = find_clusters(frames, pedestal=flat_pedestal(labels.shape),
                               common_mode=layout, progress=False)
        save_result(result, tmp_path / "r.nc")
        spec = FinderSpec.from_result(load_result(tmp_path / "r.nc"))
        assert spec.common_mode == (None if layout is None else CommonMode(labels))
    assert FinderSpec(common_mode="jungfrau").compiled_key != FinderSpec().compiled_key
    assert FinderSpec(common_mode="none").common_mode is None


def test_cli_takes_a_preset_or_a_label_map_file(tmp_path, capsys):
    labels, frames = hand_built()
    dark = np.stack([np.full((12, 12), LEVEL - 1), np.full((12, 12), LEVEL + 1)]).astype(
        np.uint16)
    np.save(tmp_path / "dark.npy", dark)
    np.save(tmp_path / "frames.npy", frames)
    np.save(tmp_path / "labels.npy", labels)
    base = ["find", "--dark", str(tmp_path / "dark.npy"), "--frames", str(tmp_path / "frames.npy"),
            "--n-pedestal", "2", "--out"]
    assert main([*base, str(tmp_path / "a.nc"), "--common-mode", str(tmp_path / "labels.npy")]) == 0
    assert load_result(tmp_path / "a.nc")["common_mode"].to_numpy().tolist() == [[6, -4, 2]]
    with pytest.raises(SystemExit) as exit_:
        main([*base, str(tmp_path / "b.nc"), "--common-mode", str(tmp_path / "missing.npy")])
    assert exit_.value.code == 2 and "missing.npy" in capsys.readouterr().err
    assert main([*base, str(tmp_path / "c.nc"), "--common-mode", "moench03"]) == 1
    assert "needs 400x400" in capsys.readouterr().err


# ------------------------------------------------------------ real JUNGFRAU
@pytest.mark.skipif(not JUNGFRAU.is_file(), reason=f"{JUNGFRAU.name} is not in tests/data")
def test_real_jungfrau_dark_frames_lose_their_common_mode_clusters():
    data = np.load(JUNGFRAU)
    dark, frames = data["single"], data["double"]
    labels = np.zeros(frames.shape[1:], np.int32)   # one region: the crop lies in one chip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        plain = find_clusters(frames, dark, n_pedestal=10, progress=False)
        fixed = find_clusters(frames, dark, n_pedestal=10, common_mode=labels, progress=False)
    found, corrected = plain["n_found"].to_numpy(), fixed["n_found"].to_numpy()
    offsets = fixed["common_mode"].to_numpy()[:, 0]
    assert offsets[0] > 25 and offsets[2] > 25
    quiet = np.abs(offsets) < 3    # frames without an offset
    assert found[0] > 20 * found[quiet].max() and found[2] > 20 * found[quiet].max()
    # Frame 2 carries an offset only: corrected, it is as quiet as the quiet frames. Frame 0
    # is also about 5 % noisier than the others, which no offset removes.
    assert corrected[1:].max() <= found[quiet].max()
    assert corrected[0] < found[0] / 20
    # Frame 0 also shifts row by row: regions of one chip row (the crop lies in chip 0, so
    # the preset's labels of the module, cropped) halve what is left of it.
    rows = CommonMode("jungfrau-rows").labels((512, 1024))[:frames.shape[1], :frames.shape[2]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        by_row = find_clusters(frames, dark, n_pedestal=10, common_mode=rows, progress=False)
    assert by_row["n_found"].to_numpy()[0] <= corrected[0] / 2
    assert by_row["n_found"].to_numpy()[1:].max() <= found[quiet].max()


# ------------------------------------------------------------------- cuda
GPU_SHAPES = {"moench03": (400, 400), "jungfrau": (512, 1024), "jungfrau-rows": (512, 1024),
              "labels": (257, 301)}


def gpu_case(layout, n_frames=24):
    """A simulated run with per-region offsets (rms 3 ADU) and +-25 ADU jumps on a third of
    the frames; for ``"labels"`` an irregular map with an excluded stripe."""
    from aare_lab.simulate import Beam, Detector, simulate_run

    shape = GPU_SHAPES[layout]
    run = simulate_run(64, n_frames, seed=11, detector=Detector(frame_shape=shape),
                       beam=Beam(photons_per_frame=2300 * shape[0] * shape[1] / 160000))
    if layout == "labels":
        i, j = np.mgrid[:shape[0], :shape[1]]
        labels = ((i // 50) * 7 + j // 43).astype(np.int32)
        labels[:, 140:150] = -1
        mode = labels
    else:
        mode = layout
        labels = CommonMode(layout).labels(shape)
    rng = np.random.default_rng(5)
    offsets = rng.normal(0, 3.0, (n_frames, labels.max() + 1))
    offsets[::3] += rng.choice([-25.0, 25.0], (len(offsets[::3]), 1))
    shifted = np.where(labels >= 0, offsets[:, np.maximum(labels, 0)], 0.0)
    frames = np.clip(run.frames + np.rint(shifted), 0, 65535).astype(np.uint16)
    return run.dark, frames, mode


def assert_same_runs(a, b, ped_a, ped_b):
    for name in ("frame_number", "y", "x", "window", "n_found", "n_kept", "common_mode",
                 "common_mode_pixels"):
        np.testing.assert_array_equal(a[name].to_numpy(), b[name].to_numpy(), err_msg=name)
    np.testing.assert_array_equal(a["branch_map"].to_numpy(), b["branch_map"].to_numpy())
    for key, value in ped_a.state().items():
        np.testing.assert_array_equal(ped_b.state()[key], value, err_msg=key)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", list(GPU_SHAPES))
@pytest.mark.parametrize("dtype, cluster_size, noise", [
    ("float64", (3, 3), "running"), ("float32", (3, 3), "running"),
    ("float32", (9, 9), "fixed"), ("float64", (3, 5), "fixed")])
def test_cuda_equals_frozen_with_common_mode(layout, dtype, cluster_size, noise):
    from aare_lab.finders import CudaFinder

    dark, frames, mode = gpu_case(layout)
    peds = []
    for _ in range(2):
        ped = Pedestal(frames.shape[1:], 64, dtype, noise)
        ped.push_dark(dark)
        peds.append(ped)
    cpu = FrozenFinder(peds[0], 5.0, cluster_size, common_mode=mode).find(
        frames, branch_maps=True, progress=False)
    gpu = CudaFinder(peds[1], 5.0, cluster_size, common_mode=mode, chunk_frames=16).find(
        frames, branch_maps=True, progress=False)
    assert cpu.sizes["cluster"] > 1000 and np.abs(cpu["common_mode"].to_numpy()).max() > 20
    assert_same_runs(cpu, gpu, peds[0], peds[1])


@pytest.mark.gpu
@pytest.mark.parametrize("layout", list(GPU_SHAPES))
def test_cuda_common_mode_for_any_chunking_split_and_block_size(layout):
    from aare_lab.finders import CudaFinder

    dark, frames, mode = gpu_case(layout)
    ped = Pedestal(frames.shape[1:], 64, "float32")
    ped.push_dark(dark)
    expected_ped = ped.copy()
    expected = FrozenFinder(expected_ped, 5.0, 3, common_mode=mode).find(
        frames, branch_maps=True, progress=False)
    for chunk, calls, threads in [(1, [(0, 24)], 1024), (7, [(0, 5), (5, 24)], 512),
                                  (16, [(0, 13), (13, 14), (14, 24)], 256)]:
        gpu_ped = ped.copy()
        finder = CudaFinder(gpu_ped, 5.0, 3, common_mode=mode, chunk_frames=chunk,
                            block_threads=threads)
        parts = [finder.find(frames[a:b], range(a, b), branch_maps=True, progress=False)
                 for a, b in calls]
        for name in ("y", "x", "window", "n_found", "common_mode", "common_mode_pixels",
                     "branch_map"):
            got = np.concatenate([p[name].to_numpy() for p in parts])
            np.testing.assert_array_equal(got, expected[name].to_numpy(),
                                          err_msg=f"{name}, chunk {chunk}, calls {calls}")
        for key, value in expected_ped.state().items():
            np.testing.assert_array_equal(gpu_ped.state()[key], value, err_msg=key)


@pytest.mark.gpu
def test_cuda_without_common_mode_records_none():
    from aare_lab.finders import CudaFinder

    dark, frames, _ = gpu_case("moench03", 4)
    ped = Pedestal(frames.shape[1:], 64)
    ped.push_dark(dark)
    result = CudaFinder(ped, chunk_frames=4).find(frames, progress=False)
    assert "common_mode" not in result and result.attrs["common_mode"] == "none"


# ------------------------------------------------------------------ explain
@pytest.mark.parametrize("model", list(FINDERS))
def test_explain_shows_the_offset_and_recomputes_the_finders_branch(model):
    from aare_lab.analysis.explain import explain

    dark, frames = moench_like(3)
    spec = FinderSpec(model, n_pedestal=20, common_mode="moench03")
    result = find_clusters(frames, dark, spec=spec, progress=False)
    site = (2, int(result["y"][-1]), int(result["x"][-1]))   # a cluster of frame 2
    e = explain(frames, *site, [spec], dark=dark)
    region = 16 + site[2] // 25 if site[1] >= 200 else site[2] // 25
    assert e.data["region"].item() == region
    assert e.data["common_mode"].item() == result["common_mode"].sel(frame=2)[region].item()
    assert e.data["branch"].item() == e.data["finder_branch"].item() in (3, 4)


def test_kernel_names_its_common_mode_twins():
    from aare_lab.gpu.kernels import SOURCE, kernel_dir

    text = (kernel_dir() / SOURCE).read_text()
    for twin in ("_common_mode.fixed_point", "_common_mode.region_means",
                 "_common_mode.mark_candidates", "_common_mode.near_candidates",
                 "arith.values_row with a correction row"):
        assert f"// {twin}" in text, twin
    source = Path(__file__).parent.parent / "aare_lab" / "finders" / "_common_mode.py"
    assert "kernels/frozen.cu" in source.read_text()
