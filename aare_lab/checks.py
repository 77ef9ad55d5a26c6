"""Argument checks shared by every part of the package, with messages naming the argument."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np


def positive_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is an integer >= 1, else raise naming ``name``.

    Booleans and integral floats are refused: ``True`` or ``3.0`` for a count is a mistake.

    Raises
    ------
    ValueError
        For a non-integer, a boolean or a value below 1.

    Examples
    --------
    >>> positive_int("chunk_frames", 64)
    64
    >>> positive_int("chunk_frames", 0)
    Traceback (most recent call last):
    ...
    ValueError: chunk_frames must be a positive integer, got 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def existing_file(path) -> Path:
    """Return ``path`` as a `Path`, refusing a missing file or a folder before any reader
    sees it (readers would fail with messages that name neither)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"'{path}' is a folder, not a file: give a file in it")
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, "No such file", str(path))
    return path
