"""`open_source`: the frame source for an array, a source or a file name."""

from __future__ import annotations

import re
from os import PathLike, fspath

import numpy as np

from .arrays import ArraySource
from .base import FrameSource
from .hdf5 import Hdf5Source, list_stacks, open_hdf5
from .npy import NpySource, NpzSource
from .raw import RawSource

SUPPORTED = (
    "a NumPy array, a FrameSource, or a file: 'frames.npy', 'frames.npz' (or "
    "'frames.npz:member'), "
    "'file.h5:/path/to/dataset' (also .hdf5, .nxs), or an slsDetector master file "
    "'run_master_0.json' (or .raw)"
)

_HDF5 = re.compile(r"(?P<file>.*\.(?:h5|hdf5|nxs))(?::(?P<dataset>.+))?", re.IGNORECASE)
#: ``frames.npz:member``: one array of an ``.npz`` file (the spec's form of ``key=``).
_NPZ_MEMBER = re.compile(r"(?P<file>.*\.npz):(?P<member>[^/\\:]+)", re.IGNORECASE)


def open_source(spec, *, key: str | None = None, frame_numbers=None) -> FrameSource:
    """Open frames given as an array, a source or a file name.

    Parameters
    ----------
    spec
        A NumPy array (2-D frame or 3-D stack), a `FrameSource` (returned as it is), or a
        path: ``.npy``, ``.npz`` (``file.npz:member`` for one of several arrays),
        ``file.h5:/dataset`` (``.hdf5``, ``.nxs``), or an slsDetector master file
        ``*_master_*.json`` or ``*.raw``.
    key
        The member of an ``.npz`` file that holds the frames (as ``file.npz:member``).
    frame_numbers
        One unique integer per frame, for arrays, ``.npy``, ``.npz`` and HDF5 files; for
        HDF5 also the path of a dataset in the same file. Raw files and sources carry
        their own.

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For an unsupported spec, an HDF5 file without ``:/dataset`` (the message lists
        its 3-D datasets), or an option the spec does not take; and as the sources do.
    TypeError
        For frames other than ``uint16``, and as the sources do.
    """
    if isinstance(spec, FrameSource):
        _refuse_options(spec.describe(), key=key, frame_numbers=frame_numbers)
        return spec
    if isinstance(spec, np.ndarray):
        _refuse_options("an array", key=key)
        return ArraySource(spec, frame_numbers)
    if not isinstance(spec, (str, PathLike)):
        raise TypeError(f"cannot read frames from {type(spec).__name__}; give {SUPPORTED}")

    text = fspath(spec)
    source = _open_file(text, key, frame_numbers)
    source.origin = text
    return source


def _open_file(text: str, key, frame_numbers) -> FrameSource:
    lower = text.lower()
    if lower.endswith(".npy"):
        _refuse_options(text, key=key)
        return NpySource(text, frame_numbers)
    if lower.endswith(".npz"):
        return NpzSource(text, key, frame_numbers)
    if member := _NPZ_MEMBER.fullmatch(text):
        if key is not None:
            raise ValueError(f"{text!r} names its member already: leave out key={key!r}")
        return NpzSource(member["file"], member["member"], frame_numbers)
    if hdf5 := _HDF5.fullmatch(text):
        _refuse_options(text, key=key)
        return _open_hdf5(hdf5["file"], hdf5["dataset"], frame_numbers)
    if lower.endswith(".raw") or re.search(r"_master_\d+\.json$", lower):
        _refuse_options(text, key=key, frame_numbers=frame_numbers)
        return RawSource(text)
    raise ValueError(f"cannot read frames from '{text}'; give {SUPPORTED}")


def _open_hdf5(path: str, dataset: str | None, frame_numbers) -> Hdf5Source:
    if dataset is None:
        with open_hdf5(path) as file:
            stacks = list_stacks(file)
        raise ValueError(f"name the frames in '{path}' as '{path}:/path/to/dataset'; {stacks}")
    return Hdf5Source(path, dataset, frame_numbers)


def _refuse_options(what: str, **options) -> None:
    """Refuse options that would otherwise be silently ignored."""
    given = [name for name, value in options.items() if value is not None]
    if given:
        raise ValueError(f"{', '.join(given)} cannot be used with {what}")
