"""How the cuda finder cuts a frame into bands, one per block of its chunk kernel.

A block holds the pedestal state of its band in registers for a whole launch and exchanges
the rows other bands read through global memory (``kernels/frozen.cu``, "Layout of one
launch"). How the frame is cut depends on how those rows travel:

- in words that carry their frame (``EXCHANGE_IN_WORDS``), any band may read any other, so
  the frame is cut into equal shares of its pixels, bands thinner than the window's
  half-height included: no band has a third more pixels than another, and frames with
  large windows get as many bands as blocks;
- as rows behind a flag, a band waits for its two neighbours alone, so bands are whole rows
  and at least the window's half-height ``ry`` high.

`cut_bands` makes that choice; the kernel's ``band_start`` is its twin on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .kernels import words_pay


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
    #: shares of the frame's pixels; otherwise whole rows behind flags.
    words: bool

    def tile_rows(self, ry: int) -> int:
        """The most rows of a band's tile: the band and ``ry`` rows either side, zeros where
        they lie outside the frame (``t_lo``, ``t_hi`` in the source)."""
        return self.rows + 2 * ry


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
    pixels = -(-ny * nx // count)
    per_thread = pixels_per_thread(pixels, threads)
    if words_pay(state_dtype, per_thread):
        # A share of ``pixels`` that starts at the end of a row spans a row more.
        rows = (pixels + nx - 2) // nx + 1
        words = Bands(count, pixels, rows, per_thread, True)
        if fits is None or fits(words):
            return words
    count = max(1, min(max_bands, ny // ry))
    rows = -(-ny // count)
    return Bands(count, rows * nx, rows, pixels_per_thread(rows * nx, threads), False)
