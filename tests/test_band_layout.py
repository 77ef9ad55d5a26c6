"""The cuda finder's cut of a frame into bands, checked on the CPU.

`aare_lab.gpu.bands.cut_bands` is the host's cut; the kernel's arithmetic that works on it
(``band_start``, ``sent_to_above``/``sent_to_below``, the tile rows ``t_lo``/``t_hi`` and
the place of a pixel in a tile, ``tile_index``, in ``kernels/frozen.cu``) is restated here,
and `test_the_restated_arithmetic_is_the_kernels` fails when the source's lines change.
Every band of every case must:

- hold at least one pixel, and no more than its threads cover;
- find each halo pixel its tile reads sent by the band that holds it;
- be read back by every band it reads, so that two exchange slots suffice (a band runs at
  most one frame ahead of the bands it reads, kernels/README.md);
- fit its tile into the rows the engine sizes the shared memory for (`Bands.tile_rows`);
- with whole-row bands (flags), take its halo from the adjacent bands alone;
- read its windows within the shared memory the engine allocates;
- read, from its tile, every window of the frame with zeros outside the frame.

That the GPU finds what the frozen finder finds with these cuts is `test_cuda.py`'s.
"""

from __future__ import annotations

import contextlib
import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from aare_lab.gpu.bands import Bands, cut_bands, pixels_per_thread
from aare_lab.gpu.kernels import SOURCE, kernel_dir

FRAMES = [(400, 400), (512, 1024), (257, 301), (64, 64), (20, 7), (9, 5)]
#: An H200's shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin).
H200_SHARED = 232448
#: Resident blocks on an H200 (132 SMs) at one and two blocks per SM, and smaller GPUs.
MAX_BANDS = [1, 2, 3, 7, 33, 100, 132, 264]


def band_start(b, ny, nx, bands):
    """The kernel's ``band_start``: equal shares of pixels with words, whole rows with flags."""
    if bands.words:
        return (b * ny * nx) // bands.count
    return ((b * ny) // bands.count) * nx


def tile_span(lo, hi, nx, ry):
    """The kernel's tile rows ``t_lo``, ``t_hi`` of the band of pixels ``lo..hi`` (those
    outside the frame hold zeros)."""
    return lo // nx - ry, (hi - 1) // nx + 1 + ry


def tile_size(t_lo, t_hi, nx, rx):
    """The kernel's ``tile_size``: values in a tile of rows ``t_lo..t_hi``."""
    return (t_hi - t_lo) * (nx + rx) + rx


def halo_span(t_lo, t_hi, ny, nx):
    """The kernel's ``halo_lo``, ``halo_hi``: the frame's pixels among a tile's rows."""
    return max(t_lo, 0) * nx, min(t_hi, ny) * nx


def tile_index(g, t_lo, nx, rx):
    """The kernel's place of frame pixel ``g`` in a tile of rows from ``t_lo``: rows
    ``nx + rx`` apart, ``rx`` zeros in front of each."""
    return g + (g // nx + 1) * rx - t_lo * (nx + rx)


#: Where a window's taps start, in the decision and in the stores alike.
CORNER = "const STATE_T* corner = window_corner(tile, i, j, t_lo);"
#: The lines of ``kernels/frozen.cu`` that `band_start`, `tile_span`, `tile_size`,
#: `halo_span`, `tile_index`, `layout_errors`, `window_errors` and `shared_read_errors`
#: restate.
KERNEL_LINES = [
    "return (int)(((long long)b * ny * FRAME_NX) / n_bands);",
    "return (int)(((long long)b * ny) / n_bands) * FRAME_NX;",
    "const int t_lo = band / nx - RY, t_hi = (band_end - 1) / nx + 1 + RY;",
    "#define TILE_NX (FRAME_NX + RX)",
    "const int i = g / FRAME_NX;\n    return g + (i + 1) * RX - t_lo * TILE_NX;",
    "const int tile_size = (t_hi - t_lo) * TILE_NX + RX;",
    "const int halo_lo = max(t_lo, 0) * nx, halo_hi = min(t_hi, ny) * nx;",
    "const int sent_to_above = b > 0 ? (band - 1) / nx + RY : -1;",
    "const int sent_to_below = b < G - 1 ? band_end / nx - RY : ny;",
    "if (i <= sent_to_above || i >= sent_to_below)",
    "STATE_T* tiles = (STATE_T*)(smem + SCAN_BYTES + WARP_STORE_BYTES + cm_bytes);",
    "STATE_T* tile = tiles + (f & 1) * tile_size;",
    "tile[tile_index(band + p, t_lo)] = v;",
    "const int idx = k < above ? halo_lo + k : band_end + (k - above);",
    "receive_value(&slot[idx], f + 1, tile[tile_index(idx, t_lo)]);",
    "tile[tile_index(idx, t_lo)] = __ldcg(&slot[idx]);",
    "for (int k = tid; k < 2 * tile_size; k += T)\n        tiles[k] = 0;",
    "return tile + (i - RY - t_lo) * TILE_NX + j;",
    CORNER,
    "const STATE_T vp = corner[RY * TILE_NX + RX];",
    "const STATE_T val = corner[a * TILE_NX + c];",
    "w[tap] = stored_value(corner[(tap / CLUSTER_NX) * TILE_NX + tap % CLUSTER_NX]);",
]


def test_the_restated_arithmetic_is_the_kernels():
    source = (kernel_dir() / SOURCE).read_text()
    assert [line for line in KERNEL_LINES if line not in source] == []
    assert source.count(CORNER) == 2


def layout_errors(ny, nx, ry, bands, send_margin=0, threads=1024):
    """What is wrong with ``bands`` of a ``ny`` x ``nx`` frame for windows ``2 ry + 1`` high
    and blocks of ``threads`` (``send_margin`` rows fewer sent on each side, to show that
    the check can fail)."""
    starts = [band_start(b, ny, nx, bands) for b in range(bands.count + 1)]
    errors, holder, sent, reads = [], {}, set(), []
    for b in range(bands.count):
        lo, hi = starts[b], starts[b + 1]
        above = (lo - 1) // nx + ry - send_margin if b > 0 else -1
        below = hi // nx - ry + send_margin if b < bands.count - 1 else ny
        for g in range(lo, hi):
            holder[g] = b
            if g // nx <= above or g // nx >= below:
                sent.add(g)
    for b in range(bands.count):
        lo, hi = starts[b], starts[b + 1]
        if not 0 < hi - lo <= min(bands.pixels, bands.per_thread * threads):
            errors.append(f"band {b} holds {hi - lo} pixels, {bands.pixels} at most, "
                          f"{bands.per_thread} per thread")
            reads.append(set())
            continue
        t_lo, t_hi = tile_span(lo, hi, nx, ry)
        if t_hi - t_lo > bands.tile_rows(ry):
            errors.append(f"band {b}'s tile of {t_hi - t_lo} rows overflows "
                          f"{bands.tile_rows(ry)}")
        read = set()
        halo_lo, halo_hi = halo_span(t_lo, t_hi, ny, nx)
        for g in itertools.chain(range(halo_lo, lo), range(hi, halo_hi)):
            if g not in sent:
                errors.append(f"band {b} reads pixel {g}, which band {holder[g]} never sends")
                break
            read.add(holder[g])
        if not bands.words and not read <= {b - 1, b + 1}:
            errors.append(f"band {b} with flags reads bands {sorted(read)}")
        reads.append(read)
    for b, read in enumerate(reads):
        errors += [f"band {b} reads band {c}, which does not read it" for c in read
                   if b not in reads[c]]
    return errors


@pytest.mark.parametrize("frame_shape", FRAMES)
def test_every_cut_sends_what_its_bands_read_and_fits_its_tiles(frame_shape):
    ny, nx = frame_shape
    checked = 0
    for ry, max_bands, threads, dtype in itertools.product(
            (1, 2, 3, 4, 5), MAX_BANDS, (256, 1024), ("float32", "float64")):
        bands = cut_bands(frame_shape, ry, max_bands, threads, dtype)
        assert layout_errors(ny, nx, ry, bands, threads=threads) == [], (frame_shape, ry, bands)
        checked += bands.words
    assert checked > 0, "no cut of this frame took the words"


def test_thin_bands_with_words_are_cut_and_checked():
    # MÖNCH 9x9 with float32 state: 132 equal shares of 1212 or 1213 pixels, three rows and
    # a bit, fewer than the four a window reaches above and below: a tile takes rows of two
    # bands on either side.
    bands = cut_bands((400, 400), 4, 132, 1024, "float32")
    assert bands == Bands(count=132, pixels=1213, rows=5, per_thread=2, words=True)
    assert layout_errors(400, 400, 4, bands) == []
    starts = [band_start(b, 400, 400, bands) for b in range(bands.count + 1)]
    assert {hi - lo for lo, hi in itertools.pairwise(starts)} == {1212, 1213}
    ny, nx, ry = 400, 400, 4
    lo, hi = starts[60], starts[61]
    t_lo, t_hi = lo // nx - ry, (hi - 1) // nx + 1 + ry
    holders = {b for b in range(bands.count) for g in (t_lo * nx, t_hi * nx - 1)
               if starts[b] <= g < starts[b + 1]}
    assert holders == {58, 62}


def test_flags_keep_whole_bands_at_least_ry_high():
    # float64 state never takes the words: MÖNCH 9x9 gets 100 bands of four rows.
    bands = cut_bands((400, 400), 4, 132, 1024, "float64")
    assert bands == Bands(count=100, pixels=1600, rows=4, per_thread=2, words=False)
    # JUNGFRAU-wide float32 frames need four pixels per thread: rows and flags.
    bands = cut_bands((512, 1024), 1, 132, 1024, "float32")
    assert (bands.words, bands.rows, bands.per_thread) == (False, 4, 4)


@pytest.mark.parametrize("dtype, ry", [("float32", 1), ("float64", 1), ("float64", 4)])
def test_the_check_fails_for_a_send_one_row_short(dtype, ry):
    bands = cut_bands((400, 400), ry, 132, 1024, dtype)
    assert bands.words is (dtype == "float32")
    assert any("never sends" in e for e in layout_errors(400, 400, ry, bands, send_margin=1))


def test_the_check_fails_for_whole_rows_thinner_than_ry_and_for_empty_bands():
    # 200 bands of two rows with flags: a window four rows high reaches two bands away.
    thin = Bands(count=200, pixels=800, rows=2, per_thread=1, words=False)
    assert any("with flags reads bands" in e for e in layout_errors(400, 400, 4, thin))
    crowded = Bands(count=8, pixels=1, rows=1, per_thread=1, words=True)
    assert any("holds 0 pixels" in e for e in layout_errors(1, 5, 1, crowded))


def test_a_tile_bound_one_row_short_fails():
    # The odd frame's 132 shares of 587 pixels: some span three rows, the bound.
    bands = cut_bands((257, 301), 4, 132, 1024, "float32")
    assert (bands.words, bands.rows) == (True, 3)
    assert layout_errors(257, 301, 4, bands) == []
    short = Bands(bands.count, bands.pixels, bands.rows - 1, bands.per_thread, bands.words)
    assert any("overflows" in e for e in layout_errors(257, 301, 4, short))


def test_a_tile_holds_the_rows_of_zeros_its_windows_read_beyond_the_frame():
    # A frame three rows high, 9x9 windows: a tile holds its band's two rows and four rows
    # either side, of which one row at most lies inside the frame.
    bands = cut_bands((3, 5000), 4, 132, 1024, "float32")
    assert bands.words and bands.rows == 2
    assert bands.tile_rows(4) == 10
    assert layout_errors(3, 5000, 4, bands) == []


def window_errors(ny, nx, cluster_size, bands, index=tile_index):
    """Where a band's windows, read from its tile as the kernel fills and reads it (frame
    pixel ``g`` at ``index(g, t_lo, nx, rx)``), differ from the frame's windows with zeros
    outside it."""
    ry, rx = cluster_size[0] // 2, cluster_size[1] // 2
    frame = np.random.default_rng(7).uniform(1, 2, (ny, nx))
    padded = np.pad(frame, ((ry, ry), (rx, rx)))
    taps = np.add.outer(np.arange(cluster_size[0]) * (nx + rx), np.arange(cluster_size[1]))
    errors = []
    for b in range(bands.count):
        lo, hi = band_start(b, ny, nx, bands), band_start(b + 1, ny, nx, bands)
        t_lo, t_hi = tile_span(lo, hi, nx, ry)
        tile = np.zeros(tile_size(t_lo, t_hi, nx, rx))
        g = np.arange(*halo_span(t_lo, t_hi, ny, nx))
        tile[index(g, t_lo, nx, rx)] = frame.flat[g]
        i, j = np.divmod(np.arange(lo, hi), nx)
        corner = (i - ry - t_lo) * (nx + rx) + j
        if corner.min() < 0 or corner.max() + taps.max() >= tile.size:
            errors.append(f"band {b}'s windows read outside its tile")
            continue
        windows = tile[corner[:, None, None] + taps]
        expected = np.stack([padded[y:y + 2 * ry + 1, x:x + 2 * rx + 1] for y, x in zip(i, j)])
        wrong = np.flatnonzero((windows != expected).any(axis=(1, 2)))
        if wrong.size:
            errors.append(f"band {b} reads a wrong window at pixel {lo + wrong[0]}")
    return errors


@pytest.mark.parametrize("frame_shape", [(9, 5), (20, 7), (64, 64), (3, 50)])
def test_every_window_reads_its_taps_and_zeros_outside_the_frame(frame_shape):
    for cluster_size, max_bands, dtype in itertools.product(
            [(3, 3), (5, 5), (9, 9), (3, 7), (7, 3)], MAX_BANDS, ("float32", "float64")):
        bands = cut_bands(frame_shape, cluster_size[0] // 2, max_bands, 256, dtype)
        assert window_errors(*frame_shape, cluster_size, bands) == [], (cluster_size, bands)


def test_the_window_check_fails_for_rows_without_their_gap():
    # Tile rows nx apart, no zeros between them: the windows at the frame's sides read
    # the next row's values.
    bands = cut_bands((20, 7), 1, 3, 256, "float32")
    no_gap = lambda g, t_lo, nx, rx: g - t_lo * nx + rx  # noqa: E731
    assert any("wrong window" in e for e in window_errors(20, 7, (3, 3), bands, no_gap))


def test_words_that_do_not_fit_give_way_to_whole_rows():
    # A wide, short frame: equal shares span two rows, whole rows one; with 3x3 windows a
    # words tile is four rows, a whole-row tile three (what fits in shared memory decides).
    words = cut_bands((16, 8192), 1, 132, 1024, "float32")
    assert (words.words, words.count, words.tile_rows(1)) == (True, 132, 4)
    rows = cut_bands((16, 8192), 1, 132, 1024, "float32",
                     fits=lambda cut: cut.tile_rows(1) <= 3)
    assert rows == Bands(count=16, pixels=8192, rows=1, per_thread=8, words=False)
    assert layout_errors(16, 8192, 1, rows) == []
    taken = cut_bands((16, 8192), 1, 132, 1024, "float32", fits=lambda cut: True)
    assert taken == words


@pytest.mark.parametrize("band_pixels, threads, expected",
                         [(1, 1024, 1), (1024, 1024, 1), (1025, 1024, 2), (1213, 1024, 2),
                          (1600, 1024, 2), (4096, 1024, 4), (4097, 1024, 8), (1600, 256, 8)])
def test_pixels_per_thread_is_the_power_of_two_that_covers_a_band(band_pixels, threads,
                                                                   expected):
    assert pixels_per_thread(band_pixels, threads) == expected


def configured(monkeypatch, shape, dtype, cluster_size, chunk_frames=512, limit=H200_SHARED):
    """`FrozenEngine._configure` for 132 blocks of 1024 threads on a GPU with ``limit`` bytes
    of shared memory per block, CuPy and the kernel's compilation left out."""
    from aare_lab.gpu import engine

    monkeypatch.setattr(engine, "load_kernel", lambda spec: SimpleNamespace(ptr=0))
    monkeypatch.setattr(engine, "cuda_context", lambda what: contextlib.nullcontext())
    driver = SimpleNamespace(funcSetAttribute=lambda *args: None,
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)
    runtime = SimpleNamespace(deviceGetAttribute=lambda attribute, device: limit)
    e = object.__new__(engine.FrozenEngine)
    e.cp = SimpleNamespace(cuda=SimpleNamespace(Device=lambda: SimpleNamespace(id=0),
                                                runtime=runtime, driver=driver))
    e.frame_shape, e.cluster_size, e.chunk_frames, e.threads = shape, cluster_size, \
        chunk_frames, 1024
    e.state_dtype, e.window_dtype = np.dtype(dtype), np.dtype("int32")
    e.labels, e.n_regions, e.calibration = None, 0, None
    e._configure(132)
    return e


def test_the_engine_cuts_equal_shares_where_words_pay(monkeypatch):
    e = configured(monkeypatch, (400, 400), "float32", (9, 9))
    assert (e.n_bands, e.band_pixels, e.spec.exchange_in_words) == (132, 1213, True)
    e = configured(monkeypatch, (400, 400), "float64", (9, 9))
    assert (e.n_bands, e.band_pixels, e.spec.exchange_in_words) == (100, 1600, False)


def test_the_engine_cuts_whole_rows_where_shares_do_not_fit(monkeypatch):
    e = configured(monkeypatch, (16, 8192), "float32", (3, 3))
    assert (e.n_bands, e.spec.exchange_in_words, e.spec.pixels_per_thread) == (16, False, 8)
    assert e.shared <= H200_SHARED
    shares = cut_bands((16, 8192), 1, 132, 1024, "float32")
    assert shares.words and e._shared_bytes(shares, 1)[0] > H200_SHARED
    # A GPU with room for the shares' tiles gets them.
    e = configured(monkeypatch, (16, 8192), "float32", (3, 3), limit=2 * H200_SHARED)
    assert (e.n_bands, e.spec.exchange_in_words) == (132, True)


def test_a_frame_shorter_than_its_tiles_is_refused_with_the_reason_and_the_cpu_named(
        monkeypatch):
    # One row of 12 000 pixels with 3x3 windows: a tile of the row and a row of zeros
    # above and below, 288 kB for two tiles with float32 state.
    with pytest.raises(ValueError, match=r"1 rows of zeros above and below a frame of 1 rows"
                                         r".*split the frame.*FrozenFinder") as refused:
        configured(monkeypatch, (1, 12000), "float32", (3, 3))
    assert "use float32 state" not in str(refused.value)
    # A frame as tall as its tiles needs as much, and the message says nothing of zeros.
    with pytest.raises(ValueError, match="FrozenFinder") as refused:
        configured(monkeypatch, (3, 12000), "float32", (3, 3))
    assert "rows of zeros" not in str(refused.value)
    # One row of 9 000 pixels fits, as three rows of them do.
    assert configured(monkeypatch, (1, 9000), "float32", (3, 3)).shared <= H200_SHARED


def test_the_engine_still_refuses_what_fits_no_cut(monkeypatch):
    with pytest.raises(ValueError, match="shared memory.*lower chunk_frames"):
        configured(monkeypatch, (64, 64), "float64", (3, 3), chunk_frames=100_000)
    with pytest.raises(ValueError, match="too large for the cuda finder.*split the frame"):
        configured(monkeypatch, (64, 40000), "float64", (11, 11))


def shared_read_errors(e):
    """Where the two tiles of the engine ``e``'s bands end past its shared memory (their
    windows read within them, `window_errors`)."""
    from aare_lab.gpu.engine import SCAN_BYTES

    ny, nx = e.frame_shape
    ry, rx = e.cluster_size[0] // 2, e.cluster_size[1] // 2
    size = e.state_dtype.itemsize
    bands = SimpleNamespace(count=e.n_bands, words=e.spec.exchange_in_words)
    first_tile = SCAN_BYTES + e.spec.pixels_per_thread * 32 * 4   # no common-mode regions
    errors = []
    for b in range(e.n_bands):
        lo, hi = band_start(b, ny, nx, bands), band_start(b + 1, ny, nx, bands)
        t_lo, t_hi = tile_span(lo, hi, nx, ry)
        end = first_tile + 2 * tile_size(t_lo, t_hi, nx, rx) * size
        if end > e.shared:
            errors.append(f"band {b} reads up to byte {end}, {e.shared} allocated")
    return errors


@pytest.mark.parametrize("shape, dtype, cluster_size",
                         [((400, 400), "float32", (9, 9)), ((400, 400), "float64", (3, 3)),
                          ((512, 1024), "float64", (9, 9)), ((257, 301), "float32", (11, 11)),
                          ((16, 8192), "float32", (3, 3)), ((9, 5), "float64", (3, 5))])
def test_windows_at_the_frame_edge_read_within_the_shared_memory(monkeypatch, shape, dtype,
                                                                 cluster_size):
    e = configured(monkeypatch, shape, dtype, cluster_size)
    assert shared_read_errors(e) == []


def test_the_read_check_fails_without_the_zeros_after_the_last_tile_row(monkeypatch):
    from aare_lab.gpu import engine

    original = engine.FrozenEngine._shared_bytes

    def without_them(self, bands, ry):
        total, tiles, cm_bytes = original(self, bands, ry)
        past = self.cluster_size[1] // 2 * self.state_dtype.itemsize
        return total - past, tiles - past, cm_bytes

    monkeypatch.setattr(engine.FrozenEngine, "_shared_bytes", without_them)
    # Bands of four whole rows, the frame's first and last too, fill the tiles (equal
    # shares' bound has a row to spare).
    e = configured(monkeypatch, (400, 400), "float64", (3, 3))
    assert any("allocated" in error for error in shared_read_errors(e))
