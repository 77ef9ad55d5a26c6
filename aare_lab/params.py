"""Validated finder parameters shared by every finder, the CLI and the result model."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WINDOW_DTYPES = ("int32", "float32", "float64")
MIN_CLUSTER_SIDE = 3
MAX_CLUSTER_SIDE = 11


def parse_cluster_size(size: int | str | tuple[int, int]) -> tuple[int, int]:
    """Turn ``3``, ``"3x5"`` or ``(3, 5)`` into a validated ``(ny, nx)``.

    Parameters
    ----------
    size
        A square side, an ``"NYxNX"`` string (rows by columns) or a pair.

    Returns
    -------
    tuple
        ``(ny, nx)``, both odd and between 3 and 11.

    Raises
    ------
    ValueError
        For even, too small, too large or unparsable sizes.

    Examples
    --------
    >>> parse_cluster_size("3x5")
    (3, 5)
    >>> parse_cluster_size(9)
    (9, 9)
    """
    if isinstance(size, str):
        parts = size.lower().replace("×", "x").split("x")
        if len(parts) == 1:
            parts = parts * 2
        try:
            ny, nx = (int(p) for p in parts)
        except ValueError:
            raise ValueError(
                f"cluster size {size!r} is not of the form NYxNX, e.g. '3x3' or '3x5'"
            ) from None
    elif isinstance(size, (int, np.integer)):
        ny = nx = int(size)
    else:
        try:
            ny, nx = (int(s) for s in size)
        except (TypeError, ValueError):
            raise ValueError(f"cluster size {size!r} is not a pair (ny, nx)") from None
    for name, side in (("rows", ny), ("columns", nx)):
        if side % 2 == 0:
            raise ValueError(
                f"cluster size {ny}x{nx}: {name} = {side} is even; a cluster needs a "
                "centre pixel, so both sides must be odd (3, 5, 7, 9 or 11)"
            )
        if not MIN_CLUSTER_SIDE <= side <= MAX_CLUSTER_SIDE:
            raise ValueError(
                f"cluster size {ny}x{nx}: {name} = {side} is outside "
                f"{MIN_CLUSTER_SIDE}..{MAX_CLUSTER_SIDE}"
            )
    return ny, nx


def format_cluster_size(size: tuple[int, int]) -> str:
    """Write ``(ny, nx)`` as ``"NYxNX"``."""
    return f"{size[0]}x{size[1]}"


@dataclass(frozen=True)
class FinderParams:
    """Everything that, with the pedestal, determines a finder's output.

    Parameters
    ----------
    n_sigma
        Threshold in units of the pixel noise; finite and > 0.
    cluster_size
        ``(ny, nx)``, ``"NYxNX"`` or a square side.
    max_clusters_per_frame
        Capacity per frame; ``None`` keeps every cluster.
    window_dtype
        ``"int32"`` (values rounded half away from zero), ``"float32"`` or ``"float64"``.
    """

    n_sigma: float = 5.0
    cluster_size: tuple[int, int] = (3, 3)
    max_clusters_per_frame: int | None = None
    window_dtype: str = "int32"

    def __post_init__(self):
        n_sigma = float(self.n_sigma)
        if not math.isfinite(n_sigma) or n_sigma <= 0:
            raise ValueError(f"n_sigma must be a finite number > 0, got {self.n_sigma!r}")
        object.__setattr__(self, "n_sigma", n_sigma)
        object.__setattr__(self, "cluster_size", parse_cluster_size(self.cluster_size))
        cap = self.max_clusters_per_frame
        if cap is not None:
            if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
                raise ValueError(
                    f"max_clusters_per_frame must be a positive integer or None, got {cap!r}"
                )
            object.__setattr__(self, "max_clusters_per_frame", int(cap))
        if self.window_dtype not in WINDOW_DTYPES:
            raise ValueError(
                f"window_dtype={self.window_dtype!r} is not one of {', '.join(WINDOW_DTYPES)}"
            )

    @property
    def radius(self) -> tuple[int, int]:
        """Half-sizes ``(ry, rx)`` of the cluster window."""
        return self.cluster_size[0] // 2, self.cluster_size[1] // 2
