"""The energy bins every run of a campaign is counted on, so that their spectra add.

Without fixed edges, each run is counted on the part of one lattice of bins ``width``
apart that its clusters reach: edges at ``k * width - 0.5`` in ADU (integer-aligned, as
`aare_lab.model.binning.integer_edges`), at ``k * width`` in keV. Runs' spectra then add bin by
bin on the union of their parts, exactly as one histogram of all their clusters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aare_lab.model.binning import count

#: The lattice's width in ADU and in keV (a JUNGFRAU calibration).
DEFAULT_WIDTH = {"ADU": 1.0, "keV": 0.05}


@dataclass(frozen=True)
class CampaignBins:
    """The lattice (or the fixed edges) of a campaign's spectra.

    Parameters
    ----------
    units
        ``"ADU"`` or ``"keV"``, the finder's (`aare_lab.model.spec.FinderSpec.units`).
    width
        The lattice's bin width (a whole number of ADU); default `DEFAULT_WIDTH`.
    edges
        Fixed edges for every run instead of the lattice; clusters outside are counted as
        under- and overflow.
    """

    units: str = "ADU"
    width: float | None = None
    edges: tuple[float, ...] | None = None

    def __post_init__(self):
        width = DEFAULT_WIDTH[self.units] if self.width is None else float(self.width)
        if not (np.isfinite(width) and width > 0) or (self.units == "ADU" and width != int(width)):
            kind = "whole number of ADU" if self.units == "ADU" else "number of keV"
            raise ValueError(f"the bin width must be a positive {kind}, got {self.width!r}")
        object.__setattr__(self, "width", width)
        if self.edges is not None:
            edges = np.asarray(self.edges, float)
            if edges.ndim != 1 or len(edges) < 2 or np.any(np.diff(edges) <= 0):
                raise ValueError("the bin edges must be at least two increasing numbers")
            object.__setattr__(self, "edges", tuple(edges.tolist()))

    @property
    def origin(self) -> float:
        """The lattice's edge ``k = 0``."""
        return -0.5 if self.units == "ADU" else 0.0

    def edges_for(self, energies: np.ndarray) -> np.ndarray:
        """The edges a run with these cluster energies is counted on."""
        if self.edges is not None:
            return np.asarray(self.edges)
        if len(energies) == 0:
            return self.lattice(0, 1)
        low = int(np.floor((np.min(energies) - self.origin) / self.width))
        high = int(np.floor((np.max(energies) - self.origin) / self.width)) + 1
        # The division may round across an edge: the edges themselves decide.
        while self.lattice(low, low)[0] > np.min(energies):
            low -= 1
        while self.lattice(high, high)[0] <= np.max(energies):
            high += 1
        return self.lattice(low, high)

    def lattice(self, first: int, stop: int) -> np.ndarray:
        """The lattice's edges ``first..stop`` (``stop - first`` bins)."""
        return self.origin + self.width * np.arange(first, stop + 1, dtype=float)

    def index(self, edges: np.ndarray) -> int:
        """The lattice number of ``edges[0]``."""
        return int(round((edges[0] - self.origin) / self.width))

    def count(self, energies: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
        """The edges, counts, underflow and overflow of a run's energies."""
        edges = self.edges_for(energies)
        return (edges, *count(energies, edges))

    def common_edges(self, parts) -> tuple[np.ndarray, int]:
        """The edges that spectra ``(edges, counts)`` counted on these bins add on: the fixed
        edges, or the lattice's span of them all (of none: as `count` of no energies); and
        the lattice number of the first edge (0 with fixed edges)."""
        if self.edges is not None:
            return np.asarray(self.edges), 0
        if not parts:
            return self.lattice(0, 1), 0
        first = min(self.index(e) for e, _ in parts)
        stop = max(self.index(e) + len(c) for e, c in parts)
        return self.lattice(first, stop), first

    def offset(self, edges: np.ndarray, first: int) -> int:
        """Where a spectrum counted on ``edges`` starts on `common_edges` from ``first``."""
        return 0 if self.edges is not None else self.index(edges) - first


class RunningCount:
    """A run's spectrum counted chunk by chunk on `CampaignBins`, equal to
    `CampaignBins.count` of all its energies at once: each chunk is counted on its own edges
    and added on `CampaignBins.common_edges`, as the runs of a campaign add
    (`aare_lab.campaign.combine`), and the under- and overflows add."""

    def __init__(self, bins: CampaignBins):
        self._bins = bins
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._outside = [0, 0]

    def add(self, energies: np.ndarray) -> None:
        """Count one chunk's energies."""
        if len(energies) == 0:
            return
        edges, counts, underflow, overflow = self._bins.count(energies)
        self._outside[0] += underflow
        self._outside[1] += overflow
        # The sum so far is the one part kept: memory does not grow with the chunks.
        self._parts = [self._sum([*self._parts, (edges, counts)])]

    def _sum(self, parts) -> tuple[np.ndarray, np.ndarray]:
        edges, first = self._bins.common_edges(parts)
        total = np.zeros(len(edges) - 1, np.int64)
        for part_edges, counts in parts:
            at = self._bins.offset(part_edges, first)
            total[at:at + len(counts)] += counts
        return edges, total

    def result(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        """The edges, counts, underflow and overflow, as `CampaignBins.count` gives them."""
        return (*self._sum(self._parts), *self._outside)


__all__ = ["CampaignBins", "DEFAULT_WIDTH", "RunningCount"]
