"""Energy bins for cluster spectra: integer-aligned edges and counts outside the edges.

Energies of integer windows are integers, so edges at ``k - 0.5`` with an integer width put
the same number of possible values in every bin; numpy's equal bins over the data range do
not, and its last bin, closed on the right, collects one value more (a spike). Energies in
keV (a JUNGFRAU calibration, docs/algorithm.md) are not whole numbers of anything: they get
equal bins over the data (``integer=False``), whose widths need not be whole.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_BINS = 200


def integer_edges(low: float, high: float, width: int = 1) -> np.ndarray:
    """Edges at ``k - 0.5``, ``width`` apart, from the bin holding ``low`` to the one
    holding ``high``.

    Parameters
    ----------
    low, high
        The lowest and highest energy to cover (ADU).
    width
        The bin width, a positive whole number of ADU.

    Returns
    -------
    numpy.ndarray
        Edges with ``edges[0] <= low`` and ``edges[-1] > high``.
    """
    if isinstance(width, bool) or int(width) != width or width < 1:
        raise ValueError(f"the bin width must be a positive whole number of ADU, got {width!r}")
    if not (np.isfinite(low) and np.isfinite(high) and low <= high):
        raise ValueError(f"need finite low <= high, got ({low!r}, {high!r})")
    first = np.floor(low + 0.5) - 0.5
    n = int(np.floor((high - first) / width)) + 1
    return first + int(width) * np.arange(n + 1, dtype=float)


def width_edges(low: float, high: float, width: float) -> np.ndarray:
    """Edges ``width`` apart from ``low``, the last above ``high`` (any positive width).

    Returns
    -------
    numpy.ndarray
        Edges with ``edges[0] == low`` and ``edges[-1] > high``.
    """
    if isinstance(width, bool) or not (np.isfinite(width) and width > 0):
        raise ValueError(f"the bin width must be a finite number > 0, got {width!r}")
    if not (np.isfinite(low) and np.isfinite(high) and low <= high):
        raise ValueError(f"need finite low <= high, got ({low!r}, {high!r})")
    n = int(np.floor((high - low) / width)) + 1
    return low + width * np.arange(n + 1, dtype=float)


def data_edges(energies: Sequence[np.ndarray], bins: int = DEFAULT_BINS,
               width: float | None = None, *, integer: bool = True) -> np.ndarray:
    """Edges over every energy of several spectra.

    Parameters
    ----------
    energies
        The energies of each spectrum (ADU, or keV with ``integer`` False).
    bins
        The number of bins. Integer-aligned: exactly ``bins`` bins of the smallest whole
        number of ADU that covers the data in ``bins`` bins, from the lowest energy (the
        bins above the highest energy are empty); when the data span fewer than ``bins``
        ADU, one bin per ADU, so fewer bins (a whole count cannot be split). With
        ``integer`` False exactly ``bins`` equal bins from the lowest to the highest
        energy (as `numpy.histogram`).
    width
        The bin width instead: a whole number of ADU, or with ``integer`` False any
        positive width from the lowest energy.
    integer
        Integer-aligned edges (energies in ADU); False for energies in keV.

    Returns
    -------
    numpy.ndarray
        Edges that hold every energy; without any, edges from -0.5 that hold 0 (one bin
        ``[-0.5, 0.5)`` without a width).
    """
    if width is None and (isinstance(bins, bool) or int(bins) != bins or bins < 1):
        raise ValueError(f"bins must be a positive number of bins, got {bins!r}")
    values = [np.asarray(e) for e in energies if np.size(e)]
    if not values:
        return integer_edges(0.0, 0.0, width or 1) if integer else \
            width_edges(-0.5, 0.0, width or 1.0)
    low, high = min(float(v.min()) for v in values), max(float(v.max()) for v in values)
    if not integer:
        if width is not None:
            return width_edges(low, high, width)
        return np.histogram_bin_edges(np.empty(0), bins=int(bins),
                                      range=(low, high) if high > low else (low - 0.5,
                                                                            low + 0.5))
    if width is None:
        span = np.floor(high + 0.5) - np.floor(low + 0.5) + 1
        width = int(np.ceil(span / int(bins)))
        if width > 1:
            # The bins asked for, those above the highest energy empty: a whole width
            # rarely divides the span.
            return integer_edges(low, low, width)[0] + width * np.arange(int(bins) + 1.0)
    return integer_edges(low, high, 1 if width is None else width)


def edges_for(energies: Sequence[np.ndarray], bins: int | np.ndarray = DEFAULT_BINS,
              range: tuple[float, float] | None = None,
              width: float | None = None, *, integer: bool = True) -> np.ndarray:
    """The edges that `aare_lab.model.results.spectrum` and `aare_lab.analysis.spectra.spectra` use.

    Parameters
    ----------
    energies
        The energies to bin, one array per spectrum.
    bins
        Edges, or a number of bins: equal bins over ``range`` as `numpy.histogram` makes
        them, or without ``range`` bins over all the data (`data_edges`).
    range
        ``(low, high)``, in the energies' units.
    width
        A bin width, over ``range`` or the data, instead of ``bins``: a whole number of
        ADU, or with ``integer`` False any positive width (from ``range[0]`` or the data).
    integer
        Energies in ADU (integer-aligned bins); False for keV (`data_edges`).

    Returns
    -------
    numpy.ndarray
    """
    if np.ndim(bins) == 1:
        if range is not None or width is not None:
            raise ValueError("give bin edges, or a number of bins or a width with a range")
        return np.asarray(bins, float)
    if width is not None:
        if range is None:
            return data_edges(energies, width=width, integer=integer)
        return integer_edges(*range, width) if integer else width_edges(*range, width)
    if range is not None:
        return np.histogram_bin_edges(np.empty(0), bins=int(bins), range=range)
    return data_edges(energies, bins, integer=integer)


def count(energies: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Histogram ``energies`` as `numpy.histogram` does, and count what falls outside.

    Returns
    -------
    counts : numpy.ndarray
        int64 per bin (the last bin closed on the right, as numpy's).
    underflow, overflow : int
        Energies below the first edge and above the last.
    """
    energies = np.asarray(energies)
    counts, _ = np.histogram(energies, bins=edges)
    return (counts.astype(np.int64), int(np.count_nonzero(energies < edges[0])),
            int(np.count_nonzero(energies > edges[-1])))
