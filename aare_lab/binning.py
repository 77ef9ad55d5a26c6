"""Energy bins for cluster spectra: integer-aligned edges and counts outside the edges.

Energies of integer windows are integers, so edges at ``k - 0.5`` with an integer width put
the same number of possible values in every bin; numpy's equal bins over the data range do
not, and its last bin, closed on the right, collects one value more (a spike).
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


def data_edges(energies: Sequence[np.ndarray], bins: int = DEFAULT_BINS,
               width: int | None = None) -> np.ndarray:
    """Integer-aligned edges over every energy of several spectra.

    Parameters
    ----------
    energies
        The energies of each spectrum (ADU).
    bins
        The most bins: the width is the smallest whole number of ADU that covers the data
        in ``bins`` bins.
    width
        The bin width instead (ADU).

    Returns
    -------
    numpy.ndarray
        Edges that hold every energy, one bin ``[-0.5, 0.5)`` when there is none.
    """
    values = [np.asarray(e) for e in energies if np.size(e)]
    if not values:
        return integer_edges(0.0, 0.0, width or 1)
    low, high = min(float(v.min()) for v in values), max(float(v.max()) for v in values)
    if width is None:
        if isinstance(bins, bool) or int(bins) != bins or bins < 1:
            raise ValueError(f"bins must be a positive number of bins, got {bins!r}")
        span = np.floor(high + 0.5) - np.floor(low + 0.5) + 1
        width = max(1, int(np.ceil(span / int(bins))))
    return integer_edges(low, high, width)


def edges_for(energies: Sequence[np.ndarray], bins: int | np.ndarray = DEFAULT_BINS,
              range: tuple[float, float] | None = None,
              width: int | None = None) -> np.ndarray:
    """The edges that `aare_lab.results.spectrum` and `aare_lab.spectra.spectra` use.

    Parameters
    ----------
    energies
        The energies to bin (ADU), one array per spectrum.
    bins
        Edges, or a number of bins: equal bins over ``range`` as `numpy.histogram` makes
        them, or without ``range`` integer-aligned bins over all the data (`data_edges`).
    range
        ``(low, high)`` (ADU).
    width
        An integer bin width (ADU), over ``range`` or the data, instead of ``bins``.

    Returns
    -------
    numpy.ndarray
    """
    if np.ndim(bins) == 1:
        if range is not None or width is not None:
            raise ValueError("give bin edges, or a number of bins or a width with a range")
        return np.asarray(bins, float)
    if width is not None:
        return integer_edges(*range, width) if range is not None else data_edges(energies,
                                                                                  width=width)
    if range is not None:
        return np.histogram_bin_edges(np.empty(0), bins=int(bins), range=range)
    return data_edges(energies, bins)


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
