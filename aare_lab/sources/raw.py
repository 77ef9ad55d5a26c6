"""slsDetector raw files (JUNGFRAU, MÖNCH, ...) read through PSI's aare package."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike

import numpy as np

from aare_lab.checks import existing_file

from .base import FrameChunk, FrameSource, Reader, check_not_empty

#: Fields that every slsDetector master file in JSON (version 7 on) has.
MASTER_FIELDS = ("Version", "Detector Type", "Pixels")


def import_aare():
    """Import aare, which is optional because only raw files need it."""
    try:
        import aare
    except ImportError as err:
        raise ImportError(
            "reading slsDetector raw files needs PSI's aare package: "
            'pip install "aare-lab[aare]", from a clone pip install ".[aare]" (aare has '
            "wheels for Python 3.12 and 3.13; on other versions pip builds it from source, "
            "which needs a C++17 compiler and CMake)"
        ) from err
    return aare


def check_master_json(path) -> None:
    """Refuse a ``.json`` file that is no slsDetector master file, naming it, before aare
    is needed.

    Raises
    ------
    ValueError
        For a file that is not JSON, or JSON without the `MASTER_FIELDS`.
    """
    hint = ("open the *_master_<index>.json file that slsReceiver wrote beside the "
            "acquisition's *_d<module>_f<file>_<index>.raw files")
    try:
        fields = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as err:
        raise ValueError(f"'{path}' is not an slsDetector master file: it is not JSON "
                         f"({err.msg} at line {err.lineno}); {hint}") from None
    missing = [name for name in MASTER_FIELDS
               if not isinstance(fields, dict) or name not in fields]
    if missing:
        raise ValueError(f"'{path}' is not an slsDetector master file: its JSON has no "
                         f"{', '.join(repr(name) for name in missing)}; {hint}")


class RawSource(FrameSource):
    """Frames of an slsDetector acquisition, with the frame numbers of its headers.

    Parameters
    ----------
    path
        The master file, ``*_master_<index>.json`` (or ``.raw`` for versions before 7).
        aare finds the data files ``*_d<module>_f<file>_<index>.raw`` beside it and
        assembles the modules into one frame.

    Raises
    ------
    ImportError
        When aare is not installed.
    FileNotFoundError
        For a missing master file.
    ValueError
        For a data file instead of the master file, a JSON file that is no master file,
        a file aare cannot read, or one without frames.
    TypeError
        For a bit depth other than 16.
    """

    def __init__(self, path: str | PathLike):
        self.path = existing_file(path)
        if "_master_" not in self.path.name:
            raise ValueError(
                f"'{self.path}' is not an slsDetector master file: open the "
                "*_master_<index>.json (or .raw) file of the acquisition"
            )
        if self.path.suffix.lower() == ".json":
            check_master_json(self.path)
        raw = self._open()
        if raw.bitdepth != 16:
            raise TypeError(
                f"{self.describe()} has {raw.bitdepth}-bit pixels; frames must be 16-bit "
                "raw detector counts"
            )
        self.n_frames = raw.total_frames
        self.frame_shape = (raw.rows(), raw.cols())
        check_not_empty(self.n_frames, (self.n_frames, *self.frame_shape), self.describe())
        self.has_frame_numbers = True

    def describe(self) -> str:
        return f"'{self.path}'"

    def _open(self):
        aare = import_aare()
        try:
            return aare.RawFile(self.path)
        except RuntimeError as err:
            raise ValueError(f"aare cannot read {self.describe()}: {err}") from err

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        # aare.RawFile rather than aare.File: only its read_n returns the headers.
        raw = self._open()

        def read(start: int, stop: int) -> FrameChunk:
            raw.seek(start)
            headers, frames = raw.read_n(stop - start)
            # read_n labels the headers (modules, frames) but fills them frame after
            # frame, so the flat order gives (frames, modules); all modules of a frame
            # carry its number once aare has synchronised them.
            numbers = np.ravel(headers["frameNumber"]).reshape(len(frames), -1)[:, 0]
            return FrameChunk(numbers.astype(np.int64), frames)
        yield read
