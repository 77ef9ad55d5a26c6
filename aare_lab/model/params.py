"""Cluster sizes and window dtypes: the parsing shared by `aare_lab.model.spec` and the CLI."""

from __future__ import annotations

import numpy as np

#: Window dtypes, the default first.
WINDOW_DTYPES = ("int32", "int16", "float32", "float64")
#: Window dtypes that store values rounded half away from zero (docs/algorithm.md, "The
#: stored cluster"); the float dtypes store them as read.
INTEGER_WINDOW_DTYPES = ("int32", "int16")
#: Integer window dtypes too narrow for some values (16-bit frames): those are saturated to
#: the dtype's range, and every tap at its limits is counted (``n_window_clipped``).
SATURATED_WINDOW_DTYPES = ("int16",)
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
        # The range first: "0 is even" would be true and useless.
        if not MIN_CLUSTER_SIDE <= side <= MAX_CLUSTER_SIDE:
            raise ValueError(
                f"cluster size {ny}x{nx}: {name} = {side} is outside "
                f"{MIN_CLUSTER_SIDE}..{MAX_CLUSTER_SIDE}"
            )
        if side % 2 == 0:
            raise ValueError(
                f"cluster size {ny}x{nx}: {name} = {side} is even; a cluster needs a "
                "centre pixel, so both sides must be odd (3, 5, 7, 9 or 11)"
            )
    return ny, nx


def format_cluster_size(size: tuple[int, int]) -> str:
    """Write ``(ny, nx)`` as ``"NYxNX"``."""
    return f"{size[0]}x{size[1]}"
