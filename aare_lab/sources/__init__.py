"""Frame sources: frames and their frame numbers, read in chunks from arrays and files,
or live from slsReceiver's ZeroMQ stream (`StreamSource`).

`open_source` picks the source for an array or a file name; `split_dark` divides one
into dark and data frames; `without_first` leaves out the first frames of each
acquisition (`aare_lab.sources.skip`).
"""

from __future__ import annotations

from .arrays import ArraySource
from .base import FrameChunk, FrameSource, SourceView, split_dark
from .hdf5 import Hdf5Source
from .npy import NpySource, NpzSource
from .opening import open_source
from .paced import PacedSource
from .raw import RawSource
from .skip import LiveSkipFirst, SkipFirst, without_first

#: Loaded on first use: the stream needs pyzmq, which reading files does not.
_STREAM_NAMES = ("StreamSource", "StreamStats", "StreamTimeout")


def __getattr__(name: str):
    if name in _STREAM_NAMES:
        from . import sls_stream

        return getattr(sls_stream, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ArraySource",
    "FrameChunk",
    "FrameSource",
    "Hdf5Source",
    "LiveSkipFirst",
    "NpySource",
    "NpzSource",
    "PacedSource",
    "RawSource",
    "SkipFirst",
    "SourceView",
    "StreamSource",
    "StreamStats",
    "StreamTimeout",
    "open_source",
    "split_dark",
    "without_first",
]
