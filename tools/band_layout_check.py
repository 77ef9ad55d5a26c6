"""Check, on the CPU, how the kernel candidate of ``pixel_bands_20261202.patch`` cuts frames.

With words that carry their frame the candidate cuts a frame into bands of equal pixels
(``band_start`` in its ``kernels/frozen.cu``), which may be thinner than the window's
half-height ``RY``: a band's tile then holds rows of bands other than its neighbours. This
script restates the candidate's arithmetic (``band_start``, ``sent_to_above``,
``sent_to_below``, the tile rows ``t_lo``/``t_hi`` and the engine's bound ``band_rows``)
and checks, for every band of each case:

- every pixel its tile reads that it does not hold is sent by the band that holds it;
- a band it reads reads it back (so the two exchange slots suffice, kernels/README.md);
- its tile fits the shared memory the engine sizes for ``band_rows + 2 RY`` rows;
- with whole-row bands (flags), the halo comes from the adjacent bands alone.

``python tools/band_layout_check.py`` prints the number of cases checked, or stops at the
first that fails.
"""

from __future__ import annotations

import itertools


def band_start(b: int, ny: int, nx: int, bands: int, words: bool) -> int:
    return (b * ny * nx) // bands if words else ((b * ny) // bands) * nx


def check(ny: int, nx: int, ry: int, bands: int, words: bool) -> None:
    case = dict(ny=ny, nx=nx, ry=ry, bands=bands, words=words)
    starts = [band_start(b, ny, nx, bands, words) for b in range(bands + 1)]
    band_px = -(-ny * nx // bands)
    band_rows = (band_px + nx - 2) // nx + 1 if words else -(-ny // bands)
    holder, sent, reads = {}, set(), []
    for b in range(bands):
        lo, hi = starts[b], starts[b + 1]
        above = (lo - 1) // nx + ry if b > 0 else -1
        below = hi // nx - ry if b < bands - 1 else ny
        for g in range(lo, hi):
            holder[g] = b
            if g // nx <= above or g // nx >= below:
                sent.add(g)
    for b in range(bands):
        lo, hi = starts[b], starts[b + 1]
        t_lo, t_hi = max(lo // nx - ry, 0), min((hi - 1) // nx + 1 + ry, ny)
        assert t_hi - t_lo <= band_rows + 2 * ry, ("tile too large", b, case)
        halo = itertools.chain(range(t_lo * nx, lo), range(hi, t_hi * nx))
        read = set()
        for g in halo:
            assert g in sent, ("read, never sent", b, g, case)
            read.add(holder[g])
        if not words:
            assert read <= {b - 1, b + 1}, ("halo beyond the neighbours", b, case)
        reads.append(read)
    for b, read in enumerate(reads):
        for c in read:
            assert b in reads[c], ("read one way only", b, c, case)


def main() -> None:
    n = 0
    for (ny, nx), ry in itertools.product(
            [(400, 400), (257, 301), (512, 1024), (64, 64), (20, 7), (9, 5)], (1, 2, 3, 4, 5)):
        for bands in sorted({1, 2, 3, 7, 33, 100, 132, 264, max(1, ny // ry)}):
            if bands > ny * nx:
                continue
            check(ny, nx, ry, bands, words=True)
            n += 1
            if bands <= ny // ry:
                check(ny, nx, ry, bands, words=False)
                n += 1
    print(f"{n} cases checked: every halo pixel is sent, reads are mutual, tiles fit")


if __name__ == "__main__":
    main()
