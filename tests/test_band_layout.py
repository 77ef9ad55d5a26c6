"""The cuda finder's cut of a frame into bands, checked on the CPU.

`aare_lab.gpu.bands.cut_bands` is the host's cut; the kernel's arithmetic that works on it
(``band_start``, ``sent_to_above``/``sent_to_below``, the tile rows ``t_lo``/``t_hi`` in
``kernels/frozen.cu``) is restated here, and every band of every case must:

- find each halo pixel its tile reads sent by the band that holds it;
- be read back by every band it reads, so that two exchange slots suffice (a band runs at
  most one frame ahead of the bands it reads, kernels/README.md);
- fit its tile into the ``rows + 2 ry`` rows the engine sizes the shared memory for;
- with whole-row bands (flags), take its halo from the adjacent bands alone.

That the GPU finds what the frozen finder finds with these cuts is `test_cuda.py`'s.
"""

from __future__ import annotations

import itertools

import pytest

from aare_lab.gpu.bands import Bands, cut_bands, pixels_per_thread

FRAMES = [(400, 400), (512, 1024), (257, 301), (64, 64), (20, 7), (9, 5)]
#: Resident blocks on an H200 (132 SMs) at one and two blocks per SM, and smaller GPUs.
MAX_BANDS = [1, 2, 3, 7, 33, 100, 132, 264]


def band_start(b, ny, nx, bands):
    """The kernel's ``band_start``: equal shares of pixels with words, whole rows with flags."""
    if bands.words:
        return (b * ny * nx) // bands.count
    return ((b * ny) // bands.count) * nx


def layout_errors(ny, nx, ry, bands, send_margin=0):
    """What is wrong with ``bands`` of a ``ny`` x ``nx`` frame for windows ``2 ry + 1`` high
    (``send_margin`` rows fewer sent on each side, to show that the check can fail)."""
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
        if hi - lo > bands.pixels:
            errors.append(f"band {b} holds {hi - lo} pixels, more than {bands.pixels}")
        t_lo, t_hi = max(lo // nx - ry, 0), min((hi - 1) // nx + 1 + ry, ny)
        if t_hi - t_lo > bands.rows + 2 * ry:
            errors.append(f"band {b}'s tile of {t_hi - t_lo} rows overflows {bands.rows} + 2 ry")
        read = set()
        for g in itertools.chain(range(t_lo * nx, lo), range(hi, t_hi * nx)):
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
        assert layout_errors(ny, nx, ry, bands) == [], (frame_shape, ry, bands)
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


def test_a_tile_bound_one_row_short_fails():
    # The odd frame's 132 shares of 587 pixels: some span three rows, the bound.
    bands = cut_bands((257, 301), 4, 132, 1024, "float32")
    assert (bands.words, bands.rows) == (True, 3)
    assert layout_errors(257, 301, 4, bands) == []
    short = Bands(bands.count, bands.pixels, bands.rows - 1, bands.per_thread, bands.words)
    assert any("overflows" in e for e in layout_errors(257, 301, 4, short))


@pytest.mark.parametrize("band_pixels, threads, expected",
                         [(1, 1024, 1), (1024, 1024, 1), (1025, 1024, 2), (1213, 1024, 2),
                          (1600, 1024, 2), (4096, 1024, 4), (4097, 1024, 8), (1600, 256, 8)])
def test_pixels_per_thread_is_the_power_of_two_that_covers_a_band(band_pixels, threads,
                                                                   expected):
    assert pixels_per_thread(band_pixels, threads) == expected
