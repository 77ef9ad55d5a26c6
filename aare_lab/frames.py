"""Validation of frame arrays, shared by the pedestal, the finders and the sources."""

from __future__ import annotations

import numpy as np

FRAME_DTYPE = np.dtype(np.uint16)
#: Values read at a time when `check_dtype` looks at frames that are not ``uint16``.
SCAN_VALUES = 1 << 24


def check_dtype(data, what: str = "frames") -> None:
    """Refuse frames that are not ``uint16``, saying whether a conversion would be lossless.

    A float or signed frame usually means the data were already processed (pedestal-
    subtracted, gain-corrected), and ``astype(numpy.uint16)`` would silently turn NaN
    into 0 and wrap values outside 0..65535. So the values are counted, in slices of
    `SCAN_VALUES` along the first axis (``data`` may be a memory map or an HDF5 dataset):
    the conversion is offered only when every value is a whole number within 0..65535.

    Parameters
    ----------
    data
        Anything with ``dtype``, ``shape`` and NumPy slicing.
    what
        How the message names the data.

    Raises
    ------
    TypeError
        For a dtype other than ``uint16``.
    """
    dtype = np.dtype(data.dtype)
    if dtype == FRAME_DTYPE:
        return
    head = f"{what} must be uint16 raw detector counts, got dtype {dtype}"
    if dtype.kind not in "iuf" or not np.prod(data.shape, dtype=np.int64):
        raise TypeError(f"{head}; give the raw frames the detector wrote")
    bad = fractional = 0
    low, high = np.inf, -np.inf
    for part in _slices(data):
        values = np.asarray(part)
        if dtype.kind == "f":
            finite = np.isfinite(values)
            bad += int(values.size - np.count_nonzero(finite))
            values = values[finite]
            fractional += int(np.count_nonzero(values != np.round(values)))
        if values.size:
            low, high = min(low, float(values.min())), max(high, float(values.max()))
    if bad:
        raise TypeError(f"{head} with {bad} NaN or infinite values: not raw counts, and "
                        "astype(numpy.uint16) would turn them into 0 silently; give the raw "
                        "frames the detector wrote")
    if fractional or low < 0 or high > np.iinfo(FRAME_DTYPE).max:
        raise TypeError(f"{head} with values {low:g}..{high:g}"
                        + (f", {fractional} not whole numbers" if fractional else "")
                        + ": not raw 16-bit counts (pedestal-subtracted or gain-corrected?), "
                          "which astype(numpy.uint16) would change silently; give the raw "
                          "frames the detector wrote")
    raise TypeError(f"{head}; its values are whole numbers within {low:g}..{high:g}, so "
                    "`frames.astype(numpy.uint16)` converts them without loss")


def _slices(data):
    if data.ndim == 0:
        yield data[()]
        return
    step = max(1, SCAN_VALUES // max(1, int(np.prod(data.shape[1:], dtype=np.int64))))
    for start in range(0, data.shape[0], step):
        yield data[start:start + step]


def as_frame_stack(frames, frame_shape: tuple[int, int] | None = None,
                   what: str = "frames") -> np.ndarray:
    """Return ``frames`` as a C-contiguous ``uint16`` array of shape ``(n, ny, nx)``.

    A single 2-D frame becomes a stack of one. Nothing is converted silently: other
    dtypes are refused with the conversion to use, because a float or signed frame
    usually means the data were already processed (pedestal-subtracted, gain-corrected).

    Parameters
    ----------
    frames
        A 2-D frame or a 3-D stack (anything ``numpy.asarray`` accepts).
    frame_shape
        The ``(ny, nx)`` the frames must have, if known.
    what
        How the error messages name the data ("dark frames", "frames").

    Raises
    ------
    TypeError
        For a dtype other than ``uint16`` (see `check_dtype`).
    ValueError
        For the wrong number of dimensions, an empty frame, or a shape mismatch.
    """
    arr = np.asarray(frames)
    check_dtype(arr, what)
    if arr.ndim == 2:
        arr = arr[np.newaxis]
    if arr.ndim != 3:
        raise ValueError(
            f"{what} must be one 2-D frame (ny, nx) or a 3-D stack (n, ny, nx), "
            f"got an array of shape {arr.shape}"
        )
    if arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(f"{what} have an empty frame shape {arr.shape[1:]}")
    if frame_shape is not None and tuple(arr.shape[1:]) != tuple(frame_shape):
        raise ValueError(
            f"{what} have shape {arr.shape[1]}x{arr.shape[2]} (ny x nx) but the pedestal "
            f"was made for {frame_shape[0]}x{frame_shape[1]}"
        )
    return np.ascontiguousarray(arr)
