"""Validation of frame arrays, shared by the pedestal, the finders and the sources."""

from __future__ import annotations

import numpy as np

FRAME_DTYPE = np.dtype(np.uint16)


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
        For a dtype other than ``uint16``.
    ValueError
        For the wrong number of dimensions, an empty frame, or a shape mismatch.
    """
    arr = np.asarray(frames)
    if arr.dtype != FRAME_DTYPE:
        hint = ""
        if arr.dtype.kind == "f" and np.isnan(arr).any():
            hint = " They contain NaN, so they are not raw detector counts."
        elif arr.dtype.kind in "iuf":
            hint = (" If they are raw ADC counts, convert them with "
                    "`frames.astype(numpy.uint16)` after checking the range 0..65535.")
        raise TypeError(f"{what} must be uint16 raw detector counts, got dtype {arr.dtype}.{hint}")
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
