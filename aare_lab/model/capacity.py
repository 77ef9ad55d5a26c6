"""Capacity (``max_clusters_per_frame``) bookkeeping: truncation is never silent.

In Python "no capacity" is None. Where an integer is needed (the result attribute, the
compiled loops, the CUDA kernel) it is `NO_CAP`; `cap_to_attr` and `cap_from_attr` are the
only translations between the two.
"""

from __future__ import annotations

import warnings

import numpy as np

from aare_lab.checks import positive_int

#: The integer that stands for "no capacity" in result attributes and compiled code.
NO_CAP = -1


def cap_to_attr(cap: int | None) -> int:
    """The integer encoding of a capacity: ``cap`` itself, or `NO_CAP` for None.

    Raises
    ------
    ValueError
        For anything but None or a positive integer.

    Examples
    --------
    >>> cap_to_attr(None), cap_to_attr(4000)
    (-1, 4000)
    """
    return NO_CAP if cap is None else positive_int("max_clusters_per_frame", cap)


def cap_from_attr(value) -> int | None:
    """The capacity an integer encoding stands for (None for `NO_CAP`).

    Examples
    --------
    >>> cap_from_attr(-1) is None, cap_from_attr(4000)
    (True, 4000)
    """
    value = int(value)
    return None if value == NO_CAP else positive_int("max_clusters_per_frame", value)


class TruncationWarning(UserWarning):
    """Some frames had more clusters than ``max_clusters_per_frame``."""


class TruncationError(RuntimeError):
    """Raised instead of `TruncationWarning` when the caller asked for errors.

    The complete (truncated) result is kept on the exception as ``result``.
    """

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result


ON_TRUNCATION = ("warn", "error")


def truncation_message(frame_numbers: np.ndarray, n_found: np.ndarray,
                       n_kept: np.ndarray, cap: int | None,
                       n_frames: int | None = None) -> str | None:
    """Describe the truncated frames of a run, or return None if there are none.

    ``n_frames`` counts the frames of the run when the arrays hold only some of them (at
    least every truncated one); by default they hold all.
    """
    over = n_found > n_kept
    if cap is None or not over.any():
        return None
    worst = int(np.argmax(n_found))
    lost = int((n_found - n_kept).sum())
    total = len(n_found) if n_frames is None else n_frames
    return (
        f"max_clusters_per_frame={cap} truncated {int(over.sum()):,} of {total:,} frames "
        f"({lost:,} clusters dropped); the largest count was {int(n_found[worst]):,} in frame "
        f"{int(frame_numbers[worst])}. Raise the cap, or see n_found/n_kept in the result."
    )


def report_truncation(message: str | None, on_truncation: str, result=None) -> None:
    """Warn or raise with ``message`` (no-op for None)."""
    if message is None:
        return
    if on_truncation == "error":
        raise TruncationError(message, result)
    warnings.warn(message, TruncationWarning, stacklevel=3)
