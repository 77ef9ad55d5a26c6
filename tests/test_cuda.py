"""The cuda finder against the frozen CPU finder, bit for bit (docs/algorithm.md, "Equality
promises"), and its promises of its own: chunking, streams, split runs, device-resident
frames, snapshots, device spectra, early stops and bad input.

Every test here needs an NVIDIA GPU and CuPy (marker ``gpu``); without them they are
skipped with the reason, and the CPU-side checks at the end still run.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import MEAN, unit_pedestal

import aare_lab
from aare_lab import Branch, FrozenFinder, Pedestal, TruncationWarning
from aare_lab.finders import CudaFinder
from aare_lab.gpu import GpuUnavailable
from aare_lab.model.results import spectrum
from aare_lab.simulate import Beam, Detector, simulate_run

N_PEDESTAL = 64
SHAPES = {"moench": (400, 400), "jungfrau": (512, 1024), "odd": (257, 301)}
#: Frame shapes of single tests: "wide" is cut into whole rows where equal shares' tiles
#: would not fit an H200's shared memory (tests/test_band_layout.py).
OTHER_SHAPES = {"wide": (16, 8192)}


@pytest.fixture(scope="module")
def runs():
    """One simulated run per frame shape: dark frames, then data with dense photon hits."""
    made = {}

    def get(name, n_frames=40, photons=None):
        key = (name, n_frames, photons)
        if key not in made:
            shape = {**SHAPES, **OTHER_SHAPES}[name]
            area = shape[0] * shape[1] / 160000
            beam = Beam(photons_per_frame=(2300 if photons is None else photons) * area)
            made[key] = simulate_run(N_PEDESTAL, n_frames, seed=7,
                                     detector=Detector(frame_shape=shape), beam=beam)
        return made[key]

    return get


def trained(run, dtype="float64", noise="running") -> Pedestal:
    ped = Pedestal(run.dark.shape[1:], N_PEDESTAL, dtype, noise)
    ped.push_dark(run.dark)
    return ped


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        return fn(*args, **kwargs)


def assert_same(a, b, ped_a=None, ped_b=None):
    """Clusters (order included), per-frame counts, branch maps, and pedestal state."""
    for name in ("frame_number", "y", "x", "window", "n_found", "n_kept"):
        np.testing.assert_array_equal(a[name].to_numpy(), b[name].to_numpy(), err_msg=name)
    assert a["window"].dtype == b["window"].dtype
    if "branch_map" in a or "branch_map" in b:
        np.testing.assert_array_equal(a["branch_map"].to_numpy(), b["branch_map"].to_numpy())
    if ped_a is not None:
        sa, sb = ped_a.state(), ped_b.state()
        assert sa.keys() == sb.keys()
        for key in sa:
            np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)


def both(run, dtype, cluster_size, cap=None, noise="running", frames=None, **cuda_options):
    frames = run.frames if frames is None else frames
    ped_cpu, ped_gpu = trained(run, dtype, noise), trained(run, dtype, noise)
    cpu = quiet(FrozenFinder(ped_cpu, 5.0, cluster_size, cap).find, frames, branch_maps=True,
                progress=False)
    gpu = quiet(CudaFinder(ped_gpu, 5.0, cluster_size, cap, **cuda_options).find, frames,
                branch_maps=True, progress=False)
    return cpu, gpu, ped_cpu, ped_gpu


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("cluster_size", [(3, 3), (5, 5), (9, 9), (3, 5)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cuda_equals_frozen(runs, shape, cluster_size, dtype):
    cpu, gpu, ped_cpu, ped_gpu = both(runs(shape), dtype, cluster_size, chunk_frames=16)
    assert cpu.sizes["cluster"] > 1000, "the case must find clusters to compare"
    assert gpu.attrs["finder"] == "cuda"
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("cluster_size", [(3, 3), (9, 9), (3, 5)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("noise", ["running", "fixed"])
def test_windows_below_zero_at_the_frame_edge_decide_as_the_frozen_finder(cluster_size, dtype,
                                                                          noise):
    """The kernel's windows read zeros outside the frame (``tile_index`` in
    kernels/frozen.cu), where the frozen finder leaves those taps out: a zero raises the
    maximum of a window whose taps are all below zero, and must change no decision. These
    frames fill the window's reach of every edge with values between the threshold's
    negative and zero, at it, and below it, with photons among them, and the first three
    columns have no noise (threshold 0)."""
    rng = np.random.default_rng(3)
    shape = (40, 48)
    ry, rx = cluster_size[0] // 2, cluster_size[1] // 2
    v = rng.integers(-5, 0, size=(6, *shape))
    v[:, ry + 1:-ry - 1, rx + 1:-rx - 1] = rng.integers(-3, 4, size=(6, 38 - 2 * ry, 46 - 2 * rx))
    v[rng.random(v.shape) < 0.02] = -7
    v[rng.random(v.shape) < 0.01] = 40
    frames = (MEAN + v).astype(np.uint16)
    zero_rms = np.zeros(shape, bool)
    zero_rms[:, :3] = True
    ped_cpu, ped_gpu = (unit_pedestal(shape, dtype, noise, zero_rms) for _ in range(2))
    cpu = FrozenFinder(ped_cpu, 5.0, cluster_size).find(frames, branch_maps=True,
                                                         progress=False)
    gpu = CudaFinder(ped_gpu, 5.0, cluster_size, chunk_frames=4).find(
        frames, branch_maps=True, progress=False)
    edge = np.ones(shape, bool)
    edge[ry:-ry or None, rx:-rx or None] = False
    codes = cpu["branch_map"].to_numpy()[:, edge]
    assert (codes == Branch.QUIET_UPDATE).sum() > 100 and (codes == Branch.NEG_SKIP).any()
    assert cpu.sizes["cluster"] > 20
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dtype, cluster_size", [("float32", (3, 3)), ("float64", (9, 9))])
@pytest.mark.parametrize("threads", [256, 512])
def test_cuda_equals_frozen_for_every_block_size(runs, shape, dtype, cluster_size, threads):
    """Two blocks of 256 threads per multiprocessor, or one of 512 (128 registers each);
    the default, 1024 threads (64 registers), is every other test's."""
    cpu, gpu, ped_cpu, ped_gpu = both(runs(shape), dtype, cluster_size, chunk_frames=16,
                                      block_threads=threads)
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("noise", ["running", "fixed"])
def test_cuda_equals_frozen_over_capacity(runs, shape, dtype, noise):
    run = runs(shape)
    ped = trained(run, dtype, noise)
    uncapped = FrozenFinder(ped, 5.0, 3).find(run.frames, progress=False)["n_found"]
    cap = int(np.median(uncapped))  # about half of the frames overflow
    cpu, gpu, ped_cpu, ped_gpu = both(run, dtype, (3, 3), cap, noise, chunk_frames=16)
    over = (cpu["n_found"] > cap).to_numpy()
    assert over.sum() >= 10 and (~over).sum() >= 10
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("window_dtype", ["float32", "float64"])
def test_float_windows(runs, window_dtype):
    run = runs("moench", 12)
    ped_cpu, ped_gpu = trained(run, "float32"), trained(run, "float32")
    cpu = FrozenFinder(ped_cpu, 4.0, 5, window_dtype=window_dtype).find(run.frames,
                                                                        progress=False)
    gpu = CudaFinder(ped_gpu, 4.0, 5, window_dtype=window_dtype).find(run.frames,
                                                                      progress=False)
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
def test_regions_that_overflow_are_repeated(runs):
    """A band region too small for a chunk: the chunk is repeated, nothing is lost."""
    run = runs("moench")
    ped_cpu, ped_gpu = trained(run), trained(run)
    cpu = FrozenFinder(ped_cpu, 5.0, 3).find(run.frames, progress=False)
    finder = CudaFinder(ped_gpu, 5.0, 3, chunk_frames=8)
    finder._engine.region_cap = 4
    gpu = finder.find(run.frames, progress=False)
    assert finder._engine.region_cap > 4
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
def test_clusters_copied_behind_the_kernel_are_the_frozen_finders(runs, monkeypatch):
    """Chunks of 8 frames, dense, sparse, sparse, then medium: the sparse chunks find fewer
    clusters than were copied behind their kernels (as many as the chunks before found),
    and the medium ones more, into pinned buffers the dense chunk made large enough, so
    that only the rest is fetched when they are collected, at an offset. Either way the
    result is the frozen finder's."""
    from aare_lab.gpu.engine import FrozenEngine

    dense, sparse, medium = runs("moench"), runs("moench", photons=150), \
        runs("moench", photons=1000)
    frames = np.concatenate([dense.frames[:8], sparse.frames[:16], medium.frames[:16]])
    seen = []
    collect = FrozenEngine.collect

    def spy(self, launch, *args, **kwargs):
        held = self._host[launch.slot]
        room = 0 if held is None else len(held[0])
        out = collect(self, launch, *args, **kwargs)
        seen.append((launch.prefetched, len(out.y), room))
        return out

    monkeypatch.setattr(FrozenEngine, "collect", spy)
    cpu, gpu, ped_cpu, ped_gpu = both(dense, "float32", (3, 3), frames=frames, chunk_frames=8)
    assert_same(cpu, gpu, ped_cpu, ped_gpu)
    assert any(copied > found for copied, found, _ in seen), seen
    # The rest fetched at an offset, into buffers that held all of it already.
    assert any(0 < copied < found <= room for copied, found, room in seen), seen


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_same_result_for_any_chunking_splitting_and_repetition(runs, dtype):
    run = runs("moench", 150)
    start = trained(run, dtype)
    reference = None
    for chunk in (1, 7, 64, 1000):
        ped = start.copy()
        result = CudaFinder(ped, 5.0, 3, chunk_frames=chunk).find(run.frames, progress=False)
        if reference is None:
            reference, ref_ped = result, ped
        else:
            assert_same(reference, result, ref_ped, ped)
    ped = start.copy()
    finder = CudaFinder(ped, 5.0, 3, chunk_frames=64)
    parts = [finder.find(run.frames[a:b], np.arange(a, b), progress=False)
             for a, b in ((0, 5), (5, 97), (97, 150))]
    for name in ("frame_number", "y", "x", "window", "n_found"):
        np.testing.assert_array_equal(np.concatenate([p[name].to_numpy() for p in parts]),
                                      reference[name].to_numpy(), err_msg=name)
    for key, value in ped.state().items():
        np.testing.assert_array_equal(value, ref_ped.state()[key])
    for _ in range(5):
        ped = start.copy()
        again = CudaFinder(ped, 5.0, 3, chunk_frames=64).find(run.frames, progress=False)
        assert_same(reference, again, ref_ped, ped)


@pytest.mark.gpu
def test_register_stage_and_pinned_frames_give_the_same_result(runs):
    from aare_lab import pinned_frames

    run = runs("moench", 60)
    pinned = pinned_frames(60, (400, 400))
    pinned[...] = run.frames
    results = []
    for mode, frames in (("register", run.frames), ("stage", run.frames), ("auto", pinned)):
        ped = trained(run)
        results.append((CudaFinder(ped, 5.0, 3, chunk_frames=16, host_memory=mode)
                        .find(frames, progress=False), ped))
    for other in results[1:]:
        assert_same(results[0][0], other[0], results[0][1], other[1])


@pytest.mark.gpu
def test_device_resident_frames_and_snapshots(runs):
    import cupy as cp

    run = runs("moench", 60)
    start = trained(run, "float32")
    on_device = cp.asarray(run.frames)
    finder = CudaFinder(start.copy(), 5.0, 3, chunk_frames=16)
    snap = finder.snapshot()
    first = finder.find(on_device, progress=False)
    host_ped = start.copy()
    from_host = CudaFinder(host_ped, 5.0, 3).find(run.frames, progress=False)
    assert_same(from_host, first, host_ped, finder.pedestal)

    # A slider: the same stack again from the same start, with another n_sigma.
    retuned = CudaFinder(start.copy(), 4.0, 3, chunk_frames=16)
    retuned.restore(snap)
    again = retuned.find(on_device, progress=False)
    cpu_ped = start.copy()
    cpu = FrozenFinder(cpu_ped, 4.0, 3).find(run.frames, progress=False)
    assert_same(cpu, again, cpu_ped, retuned.pedestal)
    assert again.sizes["cluster"] > first.sizes["cluster"]


@pytest.mark.gpu
@pytest.mark.parametrize(("per_pixel", "bins"), [(False, 150), (True, 150), (False, 40000)])
def test_device_spectrum_equals_the_histogram_of_the_clusters(runs, per_pixel, bins):
    """150 bins are counted per block in shared memory; 40 000 fit into no band's tiles
    (which hold 4 000 to 5 000 counts on an H200) and go straight to global memory."""
    run = runs("moench", 40)
    ped_a, ped_b = trained(run), trained(run)
    clusters = CudaFinder(ped_a, 5.0, 3).find(run.frames, progress=False)
    spec = CudaFinder(ped_b, 5.0, 3, chunk_frames=16).spectrum(
        run.frames, bins=bins, range=(-100.0, 1400.0), per_pixel=per_pixel, progress=False)
    host = spectrum(clusters, bins=bins, range=(-100.0, 1400.0))
    np.testing.assert_array_equal(spec["counts"].to_numpy(), host.to_numpy())
    np.testing.assert_array_equal(spec["energy_lo"].to_numpy(), host["energy_lo"].to_numpy())
    assert spec["counts"].sum() > 10000
    np.testing.assert_array_equal(spec["n_found"].to_numpy(), clusters["n_found"].to_numpy())
    for key, value in ped_a.state().items():
        np.testing.assert_array_equal(value, ped_b.state()[key])
    if per_pixel:
        energy = clusters["energy"].to_numpy()
        edges = host["energy_lo"].to_numpy().tolist() + [1400.0]
        inside = (energy >= -100.0) & (energy <= 1400.0)
        index = np.clip(np.searchsorted(edges, energy[inside], side="right") - 1, 0, bins - 1)
        expected = np.zeros((400, 400, bins), np.int64)
        np.add.at(expected, (clusters["y"].to_numpy()[inside], clusters["x"].to_numpy()[inside],
                             index), 1)
        np.testing.assert_array_equal(spec["pixel_counts"].to_numpy(), expected)
    else:
        assert "pixel_counts" not in spec


@pytest.mark.gpu
def test_stopping_early_leaves_the_pedestal_after_the_last_batch_handed_out(runs):
    run = runs("moench", 60)
    ped_gpu, ped_cpu = trained(run), trained(run)
    batches = CudaFinder(ped_gpu, 5.0, 3, chunk_frames=16).find_batches(run.frames)
    first = next(batches)
    batches.close()
    cpu = FrozenFinder(ped_cpu, 5.0, 3).find(run.frames[:16], progress=False)
    np.testing.assert_array_equal(first.windows, cpu["window"].to_numpy())
    for key, value in ped_cpu.state().items():
        np.testing.assert_array_equal(value, ped_gpu.state()[key])


@pytest.mark.gpu
def test_subnormal_float32_state_is_not_flushed():
    """CuPy's own compile cache adds -ftz=true; the finder must keep IEEE subnormals."""
    ped_cpu = Pedestal((8, 8), 4, "float32")
    ped_cpu.push_dark(np.full((4, 8, 8), 1000, np.uint16))
    ped_cpu.s[::2] = np.float32(1e-41)
    ped_cpu.s[1::2] = np.float32(-1e-41)
    ped_gpu = ped_cpu.copy()
    frames = np.full((3, 8, 8), 1000, np.uint16)
    cpu = FrozenFinder(ped_cpu, 5.0, 3).find(frames, branch_maps=True, progress=False)
    gpu = CudaFinder(ped_gpu, 5.0, 3).find(frames, branch_maps=True, progress=False)
    codes = cpu["branch_map"].to_numpy()
    assert (codes[0, ::2] == 1).all(), "a subnormal positive resid makes v < -0: NEG_SKIP"
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
def test_bad_device_frames_are_refused_before_launch(runs):
    import cupy as cp

    run = runs("moench", 4)
    finder = CudaFinder(trained(run), 5.0, 3)
    before = finder.pedestal.state()
    frames = cp.asarray(run.frames)
    with pytest.raises(ValueError, match="C-contiguous"):
        finder.find(frames[:, :, ::-1], progress=False)
    with pytest.raises(TypeError, match="uint16"):
        finder.find(frames.astype(cp.float32), progress=False)
    with pytest.raises(ValueError, match="400x400"):
        finder.find(cp.ascontiguousarray(frames[:, :200]), progress=False)
    for key, value in finder.pedestal.state().items():
        np.testing.assert_array_equal(value, before[key])


@pytest.mark.gpu
def test_no_frames_are_refused_and_never_launched(runs):
    import cupy as cp

    run = runs("moench", 4)
    finder = CudaFinder(trained(run), 5.0, 3)
    before = finder.pedestal.state()
    for empty in (run.frames[:0], cp.asarray(run.frames[:0])):
        with pytest.raises(ValueError, match="holds no frames"):
            finder.find(empty, progress=False)
    with pytest.raises(ValueError, match="at least one frame"):
        finder._engine.launch(cp.asarray(run.frames[:0]), None)
    for key, value in finder.pedestal.state().items():
        np.testing.assert_array_equal(value, before[key])


@pytest.mark.gpu
def test_too_wide_frames_are_refused_with_the_reason():
    ped = Pedestal((64, 40000), 2, "float64")
    ped.push_dark(np.full((2, 64, 40000), 10, np.uint16))
    with pytest.raises(ValueError, match="too large for the cuda finder.*split the frame"):
        CudaFinder(ped, 5.0, 11)
    ped = Pedestal((64, 64), 2, "float64")
    ped.push_dark(np.full((2, 64, 64), 10, np.uint16))
    with pytest.raises(ValueError, match="shared memory.*lower chunk_frames"):
        CudaFinder(ped, 5.0, 3, chunk_frames=100_000)


# ------------------------------------------------------------------ without a GPU


def test_missing_cupy_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    ped = Pedestal((4, 4), 1)
    ped.push_dark(np.ones((1, 4, 4), np.uint16))
    with pytest.raises(GpuUnavailable, match=r"aare-lab\[cuda13\]"):
        CudaFinder(ped, 5.0, 3)


def test_cli_reports_a_missing_gpu(monkeypatch, tmp_path, capsys):
    from aare_lab.cli import main

    monkeypatch.setitem(sys.modules, "cupy", None)
    frames = np.full((6, 8, 8), 100, np.uint16)
    np.save(tmp_path / "f.npy", frames)
    code = main(["find", "--frames", str(tmp_path / "f.npy"), "--n-dark", "3", "--n-pedestal", "3",
                 "--finder", "cuda", "--out", str(tmp_path / "r.nc"), "--quiet"])
    assert code == 1
    assert "cuda13" in capsys.readouterr().err


def test_kernel_source_names_its_cpu_twins():
    """The kernel mirrors the CPU functions by name, and each side names the other."""
    from aare_lab.gpu.kernels import SOURCE, kernel_dir

    text = (kernel_dir() / SOURCE).read_text()
    for twin in ("arith.values_row", "arith.thresholds_row", "arith.ema",
                 "arith.update_quiet_row", "arith.round_half_away", "_decision.classify",
                 "_decision.store_window"):
        assert f"// {twin}" in text, twin
    package = Path(aare_lab.__file__).parent
    for module in ("detector/arith.py", "finders/_decision.py", "finders/_frozen.py"):
        assert "kernels/frozen.cu" in (package / module).read_text(), module


def test_the_exchange_is_chosen_once_and_keys_the_loaded_kernel(monkeypatch):
    """A variant's exchange is fixed when its spec is made and is part of its key, so a
    process that builds both (exchange_ab.py) never loads the words' kernel for rows."""
    from aare_lab.gpu import kernels

    words = kernels.KernelSpec("float32", "int32", (3, 3), 2, 400, 1024)
    monkeypatch.setattr(kernels, "WORDS_MAX_PIXELS_PER_THREAD", 0)
    rows = kernels.KernelSpec("float32", "int32", (3, 3), 2, 400, 1024)
    assert words.exchange_in_words and not rows.exchange_in_words
    assert words != rows and len({words, rows}) == 2
    assert "-DEXCHANGE_IN_WORDS=1" in words.defines()
    assert "-DEXCHANGE_IN_WORDS=0" in rows.defines()


@pytest.mark.gpu
def test_both_exchanges_in_one_process_are_the_frozen_finders(runs, monkeypatch):
    from aare_lab.gpu import kernels

    run = runs("moench")
    ped_cpu = trained(run, "float32")
    cpu = FrozenFinder(ped_cpu, 5.0, 3).find(run.frames, progress=False)
    peds = [trained(run, "float32"), trained(run, "float32")]
    words = CudaFinder(peds[0], 5.0, 3, chunk_frames=16)
    monkeypatch.setattr(kernels, "WORDS_MAX_PIXELS_PER_THREAD", 0)
    rows = CudaFinder(peds[1], 5.0, 3, chunk_frames=16)
    assert words._engine.spec.exchange_in_words and not rows._engine.spec.exchange_in_words
    for finder, ped in zip((words, rows), peds):
        assert_same(cpu, finder.find(run.frames, progress=False), ped_cpu, ped)


@pytest.mark.gpu
def test_a_wide_short_frame_is_the_frozen_finders(runs):
    """16x8192 float32 frames, 3x3: refused before whole rows took over where equal shares
    do not fit; found bit for bit as the frozen finder finds them, whichever cut it gets."""
    cpu, gpu, ped_cpu, ped_gpu = both(runs("wide"), "float32", (3, 3), chunk_frames=16)
    assert int(cpu["n_found"].sum()) > 0
    assert_same(cpu, gpu, ped_cpu, ped_gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_reconfigure_keeps_the_kernel_and_the_device_pedestal(runs, dtype):
    """nσ and the cap change on the same compiled kernel, with no pedestal upload, and give
    what a new finder at the new parameters gives, bit for bit."""
    run = runs("moench")
    ped = trained(run, dtype)
    finder = CudaFinder(ped.copy(), 5.0, (3, 3))
    start = finder.snapshot()
    quiet(finder.find, run.frames, progress=False)
    finder.restore(start)
    engine = finder._engine
    kernel, uploads, upload = engine.kernel, [], engine.upload
    engine.upload = lambda *args: (uploads.append(args), upload(*args))
    for n_sigma, cap in ((4.0, 50), (6.0, None)):
        finder.restore(start)
        finder.reconfigure(n_sigma=n_sigma, max_clusters_per_frame=cap)
        got = quiet(finder.find, run.frames, branch_maps=True, progress=False)
        fresh_ped = ped.copy()
        want = quiet(CudaFinder(fresh_ped, n_sigma, (3, 3), cap).find, run.frames,
                     branch_maps=True, progress=False)
        assert got.attrs["n_sigma"] == n_sigma
        assert_same(got, want, finder.pedestal, fresh_ped)
        if cap is not None:
            assert (got["n_found"] > got["n_kept"]).any(), "the cap must cut"
    assert finder._engine is engine and engine.kernel is kernel
    assert not uploads, "reconfigure must not re-upload the pedestal"
