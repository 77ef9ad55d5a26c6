"""How the cuda finder cuts a frame into bands, one per block of its chunk kernel.

A block holds the pedestal state of its band in registers for a whole launch and exchanges
the rows other bands read through global memory (``kernels/frozen.cu``, "Layout of one
launch"). How the frame is cut depends on how those rows travel:

- in words that carry their frame (``EXCHANGE_IN_WORDS``), any band may read any other, so
  the frame is cut into equal shares of its cost (below), bands thinner than the window's
  half-height included: no band has a third more pixels than another for rows' sake, and
  frames with large windows get as many bands as blocks;
- as rows behind a flag, a band waits for its two neighbours alone, so bands are whole rows
  and at least the window's half-height ``ry`` high.

The cost: a pixel in the ``ry`` rows at the frame's top or bottom weighs `EDGE_ROW_WEIGHT`
against one inside (its window crosses the frame's edge, and the warps there take the
slower way through the window taps); as every band waits for the bands it reads, the
slowest sets the pace of all (kernels/README.md, 2026-12-03: 6 % at MÖNCH 9x9).

`cut_bands` makes that choice and `band_start` places the bands; the kernel's
``band_start`` is their twin on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .kernels import words_pay

#: What a pixel of the ``ry`` rows at the frame's top or bottom costs against one inside,
#: as (numerator, denominator), where bands are equal shares (words); 3/2 to 3 measured
#: within 1 % of each other (benchmarks/results/kernel_variants_20261203T090923.json).
EDGE_ROW_WEIGHT = (2, 1)


@dataclass(frozen=True)
class Bands:
    """A frame cut into bands (`cut_bands`)."""

    #: Bands, one block each.
    count: int
    #: Pixels of the largest band.
    pixels: int
    #: The most rows a band spans, partial rows at either end included (with words a bound:
    #: a share of ``pixels`` may start anywhere in a row).
    rows: int
    #: Pixels each thread of a block holds (a power of two).
    per_thread: int
    #: Whether edge rows travel in words that carry their frame, the bands being equal
    #: shares of the frame's cost; otherwise whole rows behind flags.
    words: bool
    #: The weight of a pixel of the top and bottom ``ry`` rows, as (numerator, denominator):
    #: `EDGE_ROW_WEIGHT` with words, (1, 1) with whole rows.
    edge_weight: tuple[int, int] = (1, 1)

    def tile_rows(self, ry: int, ny: int) -> int:
        """The most rows of a band's tile: the band and ``ry`` rows either side, within a
        frame of ``ny`` rows (``t_lo``, ``t_hi`` in the source)."""
        return min(self.rows + 2 * ry, ny)


def band_start(b: int, bands: Bands, frame_shape: tuple[int, int], ry: int) -> int:
    """The first pixel (raster order) of band ``b`` of ``bands`` (``b = bands.count``: the
    frame's pixels); the kernel's ``band_start``.

    With words, the frame's cost, a pixel of the top and bottom ``ry`` rows weighing
    ``bands.edge_weight``, is shared out equally; with flags, its rows are.
    """
    ny, nx = frame_shape
    if not bands.words:
        return (b * ny // bands.count) * nx
    w, d = bands.edge_weight
    edge, inner = ry * nx, (ny - 2 * ry) * nx
    if inner <= 0:
        return b * ny * nx // bands.count
    t = b * (2 * w * edge + d * inner) // bands.count
    if t <= w * edge:
        return t // w
    if t <= w * edge + d * inner:
        return edge + (t - w * edge) // d
    return edge + inner + (t - w * edge - d * inner) // w


def pixels_per_thread(band_pixels: int, threads: int) -> int:
    """The power of two of pixels per thread that covers ``band_pixels`` with ``threads``."""
    return 1 << max(0, (-(-band_pixels // threads) - 1).bit_length())


def cut_bands(frame_shape: tuple[int, int], ry: int, max_bands: int, threads: int,
              state_dtype: str, fits: Callable[[Bands], bool] | None = None) -> Bands:
    """Cut a frame into at most ``max_bands`` bands for blocks of ``threads`` threads.

    Parameters
    ----------
    frame_shape
        ``(ny, nx)`` of the frame.
    ry
        Half the window's height (at least 1): the rows above and below a pixel its window
        reads.
    max_bands
        The most blocks that are resident at once.
    threads
        Threads per block.
    state_dtype
        The pedestal state's dtype name, which decides with the pixels per thread whether
        words pay (`aare_lab.gpu.kernels.words_pay`).
    fits
        Whether a cut fits the GPU (its shared memory); a cut in words that does not gives
        way to whole rows, whose bands can be one row high where equal shares of a wide,
        short frame would span two. None: every cut fits.
    """
    ny, nx = frame_shape
    count = max(1, min(max_bands, ny * nx))
    # Weighed where that leaves every band a pixel, each thread as many pixels as equal
    # shares would and the cut within the GPU; else equal pixels.
    even = pixels_per_thread(-(-ny * nx // count), threads)
    for weight in dict.fromkeys((EDGE_ROW_WEIGHT, (1, 1))):
        cut = Bands(count, 0, 0, 1, True, weight)
        starts = [band_start(b, cut, frame_shape, ry) for b in range(count + 1)]
        sizes = [hi - lo for lo, hi in zip(starts, starts[1:])]
        pixels = max(sizes)
        per_thread = pixels_per_thread(pixels, threads)
        # A band of ``pixels`` that starts at the end of a row spans a row more.
        rows = (pixels + nx - 2) // nx + 1
        words = Bands(count, pixels, rows, per_thread, True, weight)
        if (min(sizes) > 0 and per_thread == even and words_pay(state_dtype, per_thread)
                and (fits is None or fits(words))):
            return words
    count = max(1, min(max_bands, ny // ry))
    rows = -(-ny // count)
    return Bands(count, rows * nx, rows, pixels_per_thread(rows * nx, threads), False)
