"""Window values saturated to int16: counted per frame, and reported, never silent.

An int16 window stores each value rounded, then saturated to -32768..32767
(docs/algorithm.md, "The stored cluster"). What is counted is every stored tap *at* one of
those limits: a tap of exactly ±limit counts too, so nothing clipped goes uncounted, and
the count needs nothing but the stored windows. So every path to a result (in memory,
into a file, live, any finder, the GPU's too) counts the same way, here, from what it
stored, and no finder needs a counter of its own.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from aare_lab.model.params import SATURATED_WINDOW_DTYPES
from aare_lab.model.window_sums import window_taps_at_limits
from aare_lab.runtime.parallel import parallel_ranges

#: The result variable of the count, per frame (only in results of a saturated dtype).
CLIPPED_VARIABLE = "n_window_clipped"
CLIPPED_ATTRS = {"long_name": "stored window taps at the limits of the window dtype",
                 "comment": "each may have been clipped (saturated): the cluster's energy "
                            "is then the clipped sum; window_dtype='int32' stores them "
                            "exactly"}
#: Frame numbers a message names at most.
SHOWN_FRAMES = 5


class WindowClippedWarning(UserWarning):
    """Stored window values sit at the limits of the window dtype (int16): they may have
    been clipped, and their clusters' energies with them."""


def counts_clipping(window_dtype: str) -> bool:
    """Whether results of ``window_dtype`` carry `CLIPPED_VARIABLE`."""
    return window_dtype in SATURATED_WINDOW_DTYPES


def refuse_clipping(window_dtype: str, where: str, instead: str) -> None:
    """Raise for a saturated ``window_dtype`` where energies are binned without the windows
    that could tell the clipped ones (`counts_clipping`).

    Parameters
    ----------
    window_dtype
        The finder's window dtype.
    where
        What refuses, for the message (``"spectrum()"``).
    instead
        What the user may do instead, beside ``window_dtype='int32'``.

    Raises
    ------
    ValueError
        For int16.
    """
    if counts_clipping(window_dtype):
        raise ValueError(f"{where} bins cluster energies without their windows, so it cannot "
                         f"report {window_dtype} windows clipped at their limits (and saves "
                         f"nothing by them): use window_dtype='int32', or {instead}")


def tap_count_dtype(taps: int) -> np.dtype:
    """The dtype of per-window counts of taps at the limits, for windows of ``taps`` taps:
    a byte for every cluster size the finders take (at most 11x11), int64 beyond."""
    return np.dtype(np.uint8 if taps <= np.iinfo(np.uint8).max else np.int64)


def tap_limits(dtype) -> tuple:
    """The lowest and highest value of an integer dtype.

    Parameters
    ----------
    dtype
        An integer dtype (or its name).

    Returns
    -------
    tuple
        ``(lowest, highest)``, scalars of that dtype.
    """
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    return dtype.type(info.min), dtype.type(info.max)


def taps_per_frame(at_limits: np.ndarray, n_kept: np.ndarray) -> np.ndarray:
    """Per frame, the taps at the limits of its windows, from each window's count.

    Parameters
    ----------
    at_limits
        Per window, its taps at the limits, frame after frame.
    n_kept
        Windows per frame; they add up to ``len(at_limits)``.

    Returns
    -------
    numpy.ndarray
        int64, one count per frame.

    Raises
    ------
    ValueError
        When ``n_kept`` does not add up to the windows counted.

    Examples
    --------
    >>> taps_per_frame(np.array([1, 0, 2], np.uint8), np.array([0, 2, 1, 0]))
    array([0, 1, 2, 0])
    """
    n_kept = np.asarray(n_kept, np.int64)
    if int(n_kept.sum()) != len(at_limits):
        raise ValueError(f"n_kept adds up to {int(n_kept.sum())} clusters, but "
                         f"{len(at_limits)} windows were given")
    if not at_limits.any():
        # The common case, decided in one pass over a byte per window.
        return np.zeros(len(n_kept), np.int64)
    upto = np.concatenate(([0], np.cumsum(at_limits, dtype=np.int64)))
    return np.diff(upto[np.cumsum(n_kept)], prepend=0)


def clipped_taps(windows: np.ndarray, n_kept: np.ndarray) -> np.ndarray:
    """Per frame, the stored taps at the limits of the windows' integer dtype.

    Parameters
    ----------
    windows
        The kept clusters' windows ``(n, wy, wx)``, frame after frame.
    n_kept
        Clusters kept per frame; they add up to ``n``.

    Returns
    -------
    numpy.ndarray
        int64, one count per frame.

    Raises
    ------
    ValueError
        When ``n_kept`` does not add up to the windows given.

    Examples
    --------
    >>> w = np.array([[[32767, 0]], [[-32768, -32768]], [[5, 6]]], np.int16)
    >>> clipped_taps(w, np.array([1, 2, 0]))
    array([1, 2, 0])
    """
    flat = np.ascontiguousarray(windows).reshape(len(windows), int(np.prod(windows.shape[1:])))
    at_limits = np.empty(len(flat), tap_count_dtype(flat.shape[1]))
    low, high = tap_limits(flat.dtype)
    parallel_ranges(lambda a, b: window_taps_at_limits(flat[a:b], low, high, at_limits[a:b]),
                    len(flat), flat.nbytes)
    return taps_per_frame(at_limits, n_kept)


def clipping_message(result: xr.Dataset) -> str | None:
    """What a result's `CLIPPED_VARIABLE` says, for a warning; None when nothing sits at
    the limits (or the result has no such count)."""
    if CLIPPED_VARIABLE not in result:
        return None
    counts = result[CLIPPED_VARIABLE].to_numpy()
    hit = np.flatnonzero(counts)
    first = result["frame"].to_numpy()[hit[:SHOWN_FRAMES]].tolist()
    return clipped_text(int(counts.sum()), len(hit), len(counts), first,
                        result.attrs.get("window_dtype", "int16"))


def clipped_text(n_taps: int, n_hit: int, n_frames: int, first: list[int],
                 dtype: str) -> str | None:
    """The warning for ``n_taps`` taps at the limits in ``n_hit`` of ``n_frames`` frames,
    the first of them numbered ``first``; None when there are none."""
    if not n_taps:
        return None
    info = np.iinfo(dtype)
    more = ", ..." if n_hit > len(first) else ""
    return (f"{n_taps:,} stored window values in {n_hit:,} of "
            f"{n_frames:,} frames sit at the {dtype} limits ({info.min} or {info.max}) "
            f"and may have been clipped (frames {', '.join(map(str, first))}{more}); those "
            f"clusters' energies are the clipped sums. To store every value exactly, use "
            f"window_dtype='int32' (aare-lab: --window-dtype int32); "
            f"{CLIPPED_VARIABLE} counts them per frame.")


def report_clipping(result: xr.Dataset, stacklevel: int = 2) -> None:
    """Warn (`WindowClippedWarning`) once if any of the result's stored taps sit at the
    limits of its window dtype."""
    message = clipping_message(result)
    if message is not None:
        warnings.warn(message, WindowClippedWarning, stacklevel=stacklevel + 1)


__all__ = ["CLIPPED_VARIABLE", "WindowClippedWarning", "clipped_taps", "clipped_text",
           "clipping_message", "counts_clipping", "refuse_clipping", "report_clipping",
           "tap_count_dtype", "tap_limits", "taps_per_frame"]
