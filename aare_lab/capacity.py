"""Capacity (``max_clusters_per_frame``) bookkeeping: truncation is never silent."""

from __future__ import annotations

import warnings

import numpy as np


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
                       n_kept: np.ndarray, cap: int | None) -> str | None:
    """Describe the truncated frames of a run, or return None if there are none."""
    over = n_found > n_kept
    if cap is None or not over.any():
        return None
    worst = int(np.argmax(n_found))
    lost = int((n_found - n_kept).sum())
    return (
        f"max_clusters_per_frame={cap} truncated {int(over.sum())} of {len(n_found)} frames "
        f"({lost} clusters dropped); the largest count was {int(n_found[worst])} in frame "
        f"{int(frame_numbers[worst])}. Raise the cap, or see n_found/n_kept in the result."
    )


def report_truncation(message: str | None, on_truncation: str, result=None) -> None:
    """Warn or raise with ``message`` (no-op for None)."""
    if message is None:
        return
    if on_truncation == "error":
        raise TruncationError(message, result)
    warnings.warn(message, TruncationWarning, stacklevel=3)
