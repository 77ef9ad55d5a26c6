"""Capture a stretch of a live stream into HDF5, to replay it offline bit for bit.

The file, written chunk by chunk and flushed after each, so that an interrupted capture
leaves a readable file of the frames captured so far:

- ``/frames``: ``uint16`` ``(n, ny, nx)``, one HDF5 chunk per frame, growing; its attribute
  ``frame_numbers`` names ``/frame_numbers``, which `aare_lab.sources.Hdf5Source` then uses,
  so ``aare-lab find --frames run.h5:/frames`` replays the captured numbers;
- ``/frame_numbers``: ``int64`` ``(n,)``, the detector's frame numbers;
- ``/headers``: one string per frame, the JSON list of the headers of its parts (one per
  port) as the receiver sent them;
- attributes of the file: ``aare_lab_capture`` (the layout version), ``source``,
  ``endpoints``, ``frames_requested``, ``created``, ``aare_lab_version``, and once the
  capture ends ``frames_captured``, ``ended_by`` and ``stats`` (the stream's counts, JSON).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import h5py
import numpy as np

from aare_lab._version import __version__
from aare_lab.checks import positive_int
from aare_lab.runtime.readahead import read_ahead
from aare_lab.sources.base import counts_text

#: The file attribute that marks a capture, and the version of its layout.
FILE_MARK, FILE_VERSION = "aare_lab_capture", 1
#: Frame numbers and headers per HDF5 chunk.
INDEX_CHUNK = 4096


class CaptureFile:
    """An HDF5 capture being written (see the module docstring for the layout).

    Parameters
    ----------
    path
        The file, replaced if it exists.
    frame_shape
        ``(ny, nx)`` of the frames.
    attrs
        File attributes to set now.
    """

    def __init__(self, path: str | os.PathLike, frame_shape: tuple[int, int], **attrs):
        self.path = Path(path)
        self.file = h5py.File(self.path, "w")
        self.file.attrs.update({FILE_MARK: FILE_VERSION, "aare_lab_version": __version__,
                                **attrs})
        ny, nx = frame_shape
        self.frames = self.file.create_dataset("frames", (0, ny, nx), np.uint16,
                                               maxshape=(None, ny, nx), chunks=(1, ny, nx))
        self.frames.attrs["frame_numbers"] = "/frame_numbers"
        self.numbers = self.file.create_dataset("frame_numbers", (0,), np.int64,
                                                maxshape=(None,), chunks=(INDEX_CHUNK,))
        self.headers = self.file.create_dataset("headers", (0,), h5py.string_dtype(),
                                                maxshape=(None,), chunks=(INDEX_CHUNK,))
        self.file.flush()

    @property
    def n_frames(self) -> int:
        """Frames written so far."""
        return len(self.numbers)

    def append(self, numbers: np.ndarray, frames: np.ndarray, headers) -> None:
        """Add frames, their numbers and their headers (one sequence of dicts per frame)."""
        n0, n = self.n_frames, len(numbers)
        columns = ((self.frames, frames), (self.numbers, numbers),
                   (self.headers, [json.dumps(list(parts)) for parts in headers]))
        try:
            for dataset, values in columns:
                dataset.resize(n0 + n, axis=0)
                dataset[n0:] = values
        except BaseException:
            # All three keep the same length: a replay pairs frames with their numbers.
            for dataset, _ in columns:
                dataset.resize(n0, axis=0)
            raise
        # On disk after every chunk: a capture cut short keeps what it had.
        self.file.flush()

    def close(self, **attrs) -> None:
        """Set the closing attributes and close the file."""
        if self.file:
            self.file.attrs.update(attrs)
            self.file.close()


def capture(source, path: str | os.PathLike, n_frames: int, *,
            stop: threading.Event | None = None, report=None) -> dict:
    """Store the next ``n_frames`` frames of a live source (fewer if it ends or is stopped).

    Parameters
    ----------
    source
        A live source with ``chunks(with_headers=True)``, ``stats``, ``mark_processed``
        (`aare_lab.sources.sls_stream.StreamSource`).
    path
        The HDF5 file to write.
    n_frames
        Frames to capture at most.
    stop
        Set to end the capture early (a signal handler does); the file keeps what came.
    report
        Called about once a second with a progress line.

    Returns
    -------
    dict
        ``frames_captured``, ``ended_by`` and the stream's ``stats``.
    """
    n_frames = positive_int("n_frames", n_frames)
    stop = threading.Event() if stop is None else stop
    out: CaptureFile | None = None
    ended_by = "the stream ended"
    last = time.monotonic()
    try:
        for item in read_ahead(source.chunks(with_headers=True), stop, tick=True):
            if stop.is_set():
                ended_by = "stopped"
                break
            if item is not None:
                (numbers, frames), headers = item
                if out is None:
                    out = CaptureFile(path, frames.shape[1:], source=source.describe(),
                                      endpoints=list(getattr(source, "endpoints", [])),
                                      frames_requested=n_frames,
                                      created=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                k = min(len(numbers), n_frames - out.n_frames)
                out.append(numbers[:k], frames[:k], headers[:k])
                source.mark_processed(k)
                if out.n_frames == n_frames:
                    ended_by = f"{n_frames} frames captured"
                    break
            if report is not None and time.monotonic() - last >= 1:
                report(f"{0 if out is None else out.n_frames:,} of {n_frames:,} frames "
                       f"captured; {counts_text(source.stats.as_dict())}")
                last = time.monotonic()
        else:
            if stop.is_set():
                ended_by = "stopped"
    except BaseException as err:
        ended_by = f"error: {type(err).__name__}: {err}"
        raise
    finally:
        stop.set()
        summary = {"frames_captured": 0 if out is None else out.n_frames,
                   "ended_by": ended_by, "stats": source.stats.as_dict()}
        if out is not None:
            out.close(frames_captured=summary["frames_captured"], ended_by=ended_by,
                      stats=json.dumps(summary["stats"]))
    return summary
