"""η, the charge shared between a cluster's pixels, as PSI aare defines it.

Each function takes the windows of a result (``window(cluster, wy, wx)``, raster order,
row ``wy = -r`` first) and returns a Dataset of DataArrays on ``cluster``: ``eta_x`` and
``eta_y`` (float64), ``sum`` (the window's dtype: the energy the η came from) and, for the
η2 kinds, ``corner``, the 2x2 block of largest sum with aare's codes. The arithmetic is
aare 2026.9.30's, operation for operation: sums are formed in the window's dtype in aare's
order (float32 sums round as aare's do), ratios are taken in float64, and a zero
denominator leaves η at 0. With int16 windows, intermediate sums are int32 (C++'s integer
promotion) and only the values aare stores in the window's type wrap to int16.

The arrays stay NumPy or CuPy as the windows are (`cupy.get_array_module`), so a
result whose windows are on the device gets its η there, from element-wise array
expressions; NumPy windows take compiled loops of the same arithmetic (`_eta_loops`), which
are several times faster on the CPU (``benchmarks/eta.py``). docs/imaging.md gives the
definitions with a figure of the corner convention.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import xarray as xr

from aare_lab.flags import cf_flags

from . import _eta_loops

#: aare's ``corner`` codes: the 2x2 block of the central 3x3 that holds the centre and
#: its neighbours on the lower (top = row -1) or higher (bottom = row +1) side.
CORNERS = ("top_left", "top_right", "bottom_left", "bottom_right")
#: Square windows that aare's η2 reads directly (sums in its generic order); every other
#: window size is reduced to its central 3x3 first.
AARE_GENERIC_SIZES = ((5, 5), (7, 7), (9, 9))


def array_module(array):
    """NumPy, or CuPy for a CuPy array."""
    try:
        import cupy
    except ImportError:
        return np
    return cupy.get_array_module(array)


def _windows(source) -> tuple:
    """The ``(n, wy, wx)`` windows of a result Dataset, a window DataArray or an array."""
    if isinstance(source, xr.Dataset):
        source = source["window"]
    windows = source.data if isinstance(source, xr.DataArray) else source
    if windows.ndim != 3 or windows.shape[1] < 3 or windows.shape[2] < 3:
        raise ValueError(f"η needs windows (cluster, wy, wx) of at least 3x3, got shape "
                         f"{tuple(windows.shape)}")
    return windows


def _taps(windows):
    """The central 3x3's taps d0..d8 (raster order) in the type C++ adds them in, and the
    window's type."""
    xp = array_module(windows)
    block = _central(windows)
    stored = windows.dtype
    arith = xp.int32 if np.issubdtype(stored, np.integer) and stored.itemsize < 4 else stored
    return [block[:, i // 3, i % 3].astype(arith) for i in range(9)], stored


def _ratio(xp, numerator, denominator):
    """float64 numerator / denominator where the denominator is not zero, else 0."""
    num, den = numerator.astype(xp.float64), denominator.astype(xp.float64)
    nonzero = denominator != 0
    return xp.where(nonzero, num / xp.where(nonzero, den, 1.0), 0.0)


def _sequential_sum(xp, taps, stored):
    """``std::accumulate`` over the taps in the window's type, left to right."""
    total = taps[0].astype(stored)
    for tap in taps[1:]:
        total = (total.astype(taps[0].dtype) + tap).astype(stored)
    return total


def _result(kind: str, eta_x, eta_y, total, corner=None) -> xr.Dataset:
    data = {"eta_x": ("cluster", eta_x, {"long_name": f"{kind} along x (columns)"}),
            "eta_y": ("cluster", eta_y, {"long_name": f"{kind} along y (rows)"}),
            "sum": ("cluster", total, {"long_name": f"window sum the {kind} is taken from"})}
    if corner is not None:
        data["corner"] = ("cluster", corner,
                          cf_flags(range(4), CORNERS, "2x2 block of largest sum (aare corner)",
                                   dtype="int8"))
    return xr.Dataset(data, attrs={"eta": kind})


def _max_block(windows):
    """aare's ``max_sum_2x2``: the four 2x2 sums around the centre, the first largest
    one's corner code and its sum."""
    xp = array_module(windows)
    d, stored = _taps(windows)
    if tuple(windows.shape[1:]) in AARE_GENERIC_SIZES:
        # aare's generic clusters add the centre first, then its row, then the other row.
        sums = [d[4] + d[3] + d[1] + d[0], d[4] + d[5] + d[1] + d[2],
                d[4] + d[3] + d[7] + d[6], d[4] + d[5] + d[7] + d[8]]
    else:
        sums = [d[0] + d[1] + d[3] + d[4], d[1] + d[2] + d[4] + d[5],
                d[3] + d[4] + d[6] + d[7], d[4] + d[5] + d[7] + d[8]]
    sums = xp.stack([s.astype(stored) for s in sums], axis=1)
    corner = xp.argmax(sums, axis=1).astype(xp.int8)
    total = xp.take_along_axis(sums, corner[:, None].astype(xp.int64), axis=1)[:, 0]
    return xp, d, corner, total


def _array_eta2(windows):
    xp, d, corner, total = _max_block(windows)
    left_side, top_side = (corner % 2) == 0, corner < 2
    left = xp.where(left_side, d[3], d[4])
    right = xp.where(left_side, d[4], d[5])
    above = xp.where(top_side, d[1], d[4])
    below = xp.where(top_side, d[4], d[7])
    return _ratio(xp, right, right + left), _ratio(xp, below, below + above), total, corner


def _array_full_eta2(windows):
    xp, d, corner, total = _max_block(windows)
    left_side, top_side = (corner % 2) == 0, corner < 2
    # The block's right column and bottom row, each a pair of taps.
    right = xp.where(top_side, xp.where(left_side, d[4] + d[1], d[5] + d[2]),
                     xp.where(left_side, d[4] + d[7], d[5] + d[8]))
    bottom = xp.where(top_side, xp.where(left_side, d[3] + d[4], d[4] + d[5]),
                      xp.where(left_side, d[7] + d[6], d[7] + d[8]))
    return _ratio(xp, right, total), _ratio(xp, bottom, total), total, corner


def _array_eta3(windows):
    xp = array_module(windows)
    d, stored = _taps(windows)
    total = _sequential_sum(xp, d, stored)
    columns = [(d[0] + d[3] + d[6]).astype(stored), (d[2] + d[5] + d[8]).astype(stored)]
    rows = [(d[0] + d[1] + d[2]).astype(stored), (d[6] + d[7] + d[8]).astype(stored)]
    arith = d[0].dtype
    eta_x = _ratio(xp, -columns[0].astype(arith) + columns[1].astype(arith), total)
    eta_y = _ratio(xp, -rows[0].astype(arith) + rows[1].astype(arith), total)
    return eta_x, eta_y, total, None


def _array_cross_eta3(windows):
    xp = array_module(windows)
    d, stored = _taps(windows)
    total = _sequential_sum(xp, d, stored)
    eta_x = _ratio(xp, -d[3] + d[5], d[3] + d[4] + d[5])
    eta_y = _ratio(xp, -d[1] + d[7], d[1] + d[4] + d[7])
    return eta_x, eta_y, total, None


def _central(windows) -> np.ndarray:
    cy, cx = windows.shape[1] // 2, windows.shape[2] // 2
    return windows[:, cy - 1:cy + 2, cx - 1:cx + 2]


def _compiled(kind: str, windows: np.ndarray):
    """`_eta_loops` on NumPy windows: the `_array_*` results, computed per cluster."""
    taps = _central(windows)
    n = len(windows)
    eta_x, eta_y = np.empty(n), np.empty(n)
    total = np.empty(n, windows.dtype)
    corner = None
    if kind in ("eta2", "full_eta2"):
        corner = np.empty(n, np.int8)
        generic = tuple(windows.shape[1:]) in AARE_GENERIC_SIZES
        _eta_loops.max_blocks(taps, generic, np.empty(4, windows.dtype), corner, total)
        if kind == "eta2":
            _eta_loops.eta2(taps, corner, eta_x, eta_y)
        else:
            _eta_loops.full_eta2(taps, corner, total, eta_x, eta_y)
    else:
        _eta_loops.sequential_sums(taps, total)
        if kind == "eta3":
            _eta_loops.eta3(taps, total, np.empty(2, windows.dtype), eta_x, eta_y)
        else:
            _eta_loops.cross_eta3(taps, eta_x, eta_y)
    return eta_x, eta_y, total, corner


_ARRAY_PATHS = {"eta2": _array_eta2, "full_eta2": _array_full_eta2, "eta3": _array_eta3,
                "cross_eta3": _array_cross_eta3}


def _eta(kind: str, source) -> xr.Dataset:
    windows = _windows(source)
    if array_module(windows) is np:
        values = _compiled(kind, windows)
    else:
        values = _ARRAY_PATHS[kind](windows)
    return _result(kind, *values)


def eta2(source) -> xr.Dataset:
    """η2: within the 2x2 block of largest sum, the share of its right column in the
    centre row and of its bottom row in the centre column (aare ``calculate_eta2``).

    Parameters
    ----------
    source
        A result, its ``window`` DataArray or an ``(n, wy, wx)`` NumPy or CuPy array.

    Returns
    -------
    xarray.Dataset
        ``eta_x``, ``eta_y`` in [0, 1], ``corner`` and ``sum`` (the block's sum).

    Examples
    --------
    >>> w = np.array([[[0, 0, 0], [0, 60, 40], [0, 0, 0]]], np.int32)
    >>> float(eta2(w)["eta_x"][0]), int(eta2(w)["corner"][0])
    (0.4, 1)
    """
    return _eta("eta2", source)


def full_eta2(source) -> xr.Dataset:
    """Full η2: the share of the 2x2 block's right column and bottom row in its whole
    sum (aare ``calculate_full_eta2``); arguments and returns as `eta2`.

    Examples
    --------
    >>> w = np.array([[[0, 0, 0], [0, 50, 30], [0, 10, 10]]], np.int32)
    >>> float(full_eta2(w)["eta_x"][0]), float(full_eta2(w)["eta_y"][0])
    (0.4, 0.2)
    """
    return _eta("full_eta2", source)


def eta3(source) -> xr.Dataset:
    """η3: over the central 3x3, (right column - left column) / sum and (bottom row - top
    row) / sum, in [-1, 1] (aare ``calculate_eta3``); ``sum`` is the 3x3's.

    Examples
    --------
    >>> w = np.array([[[0, 0, 0], [10, 60, 30], [0, 0, 0]]], np.int32)
    >>> float(eta3(w)["eta_x"][0]), float(eta3(w)["eta_y"][0])
    (0.2, 0.0)
    """
    return _eta("eta3", source)


def cross_eta3(source) -> xr.Dataset:
    """Cross η3: from the centre row (right - left) / (left + centre + right) and the centre
    column likewise, in [-1, 1] (aare ``calculate_cross_eta3``); ``sum`` is the 3x3's.

    Examples
    --------
    >>> w = np.array([[[9, 0, 9], [10, 60, 30], [9, 0, 9]]], np.int32)
    >>> float(cross_eta3(w)["eta_x"][0]), float(cross_eta3(w)["eta_y"][0])
    (0.2, 0.0)
    """
    return _eta("cross_eta3", source)


#: The η kinds by name, as `aare_lab.imaging.interpolation` and the CLI take them.
ETA_FUNCTIONS: dict[str, Callable[..., xr.Dataset]] = {
    "eta2": eta2, "full_eta2": full_eta2, "eta3": eta3, "cross_eta3": cross_eta3}
