"""Capture a stretch of a live stream into HDF5, to replay it offline bit for bit.

A capture is either complete under its name, or visibly partial beside it; an existing
file is never destroyed (the rule of `aare_lab.storage.destination`): the frames go to
``<stem>.partial.h5``, flushed after every chunk, which is renamed over ``<stem>.h5`` only
once the capture ended (the frames asked for, or the end of the acquisition) and the file is
closed and on the disk. A capture stopped early (SIGINT/SIGTERM, an error) leaves the
partial file, readable, with every chunk flushed before, marked ``complete = 0``. One
capture writes a file at a time (the destination's lock).

The layout:

- ``/frames``: ``uint16`` ``(n, ny, nx)``, one HDF5 chunk per frame, growing; its attribute
  ``frame_numbers`` names ``/frame_numbers``, which `aare_lab.sources.Hdf5Source` then uses,
  so ``aare-lab find --frames run.h5:/frames`` replays the captured numbers;
- ``/frame_numbers``: ``int64`` ``(n,)``, the detector's frame numbers;
- ``/headers``: one string per frame, the JSON list of the headers of its parts (one per
  port) as the receiver sent them;
- attributes of the file: ``aare_lab_capture`` (the layout version), ``source``,
  ``endpoints``, ``frames_requested``, ``created``, ``aare_lab_version``, ``complete`` (0
  until the capture ended, 1 then), and once the capture stops ``frames_captured``,
  ``ended_by`` and ``stats`` (the stream's counts, JSON).
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings

import h5py
import numpy as np

from aare_lab._version import __version__
from aare_lab.checks import positive_int
from aare_lab.runtime.readahead import read_ahead
from aare_lab.sources.base import counts_text
from aare_lab.storage.atomic import fsync_path, move_into_place
from aare_lab.storage.destination import Destination, DestinationExists
from aare_lab.storage.result_store import IncompleteResultWarning, interrupted

#: The file attribute that marks a capture, and the version of its layout.
FILE_MARK, FILE_VERSION = "aare_lab_capture", 1
#: Frame numbers and headers per HDF5 chunk.
INDEX_CHUNK = 4096


def claim_capture(path: str | os.PathLike, overwrite: bool = False) -> Destination:
    """Claim a capture's destination before any frame is read.

    Parameters
    ----------
    path
        The capture file (``.h5``).
    overwrite
        Whether an existing file at ``path`` may be replaced (once the new capture is
        complete), and an earlier capture's partial file beside it discarded.

    Returns
    -------
    Destination
        Claimed for this capture, with `aare_lab.storage.destination.RESERVE_BYTES` held
        back; release it when done (it is a context manager).

    Raises
    ------
    aare_lab.storage.destination.DestinationExists
        When ``path`` or its partial file exists and ``overwrite`` is False.
    aare_lab.storage.destination.DestinationBusy
        When another process writes ``path``.
    OSError
        When the disk has not even the space held back free (ENOSPC), naming the file.
    """
    destination = Destination(path, overwrite)
    try:
        # Checked under the lock: a partial file now is no running capture's, but the
        # frames of one that stopped early, which no second run of the detector gives back.
        if not overwrite and destination.partial.exists():
            raise DestinationExists(
                f"{destination.partial} holds the frames of an earlier capture that stopped "
                "early: rename it to keep them, or pass --overwrite (Python: overwrite=True) "
                "to discard it")
        destination.hold_back_space()
    except BaseException:
        destination.release()
        raise
    return destination


class CaptureFile:
    """An HDF5 capture being written (see the module docstring for the layout), under its
    partial name until `close` makes it complete.

    Parameters
    ----------
    destination
        Where the capture goes, claimed (`claim_capture`); an earlier partial file is
        replaced.
    frame_shape
        ``(ny, nx)`` of the frames.
    attrs
        File attributes to set now.
    """

    def __init__(self, destination: Destination, frame_shape: tuple[int, int], **attrs):
        self.destination = destination
        destination.partial.unlink(missing_ok=True)
        self.file = h5py.File(destination.partial, "w-")
        try:
            self.file.attrs.update({FILE_MARK: FILE_VERSION, "aare_lab_version": __version__,
                                    "complete": 0, **attrs})
            ny, nx = frame_shape
            self.frames = self.file.create_dataset("frames", (0, ny, nx), np.uint16,
                                                   maxshape=(None, ny, nx), chunks=(1, ny, nx))
            self.frames.attrs["frame_numbers"] = "/frame_numbers"
            self.numbers = self.file.create_dataset("frame_numbers", (0,), np.int64,
                                                    maxshape=(None,), chunks=(INDEX_CHUNK,))
            self.headers = self.file.create_dataset("headers", (0,), h5py.string_dtype(),
                                                    maxshape=(None,), chunks=(INDEX_CHUNK,))
            self.file.flush()
        except BaseException:
            self.file.close()
            destination.partial.unlink(missing_ok=True)
            raise

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

    def close(self, complete: bool, **attrs) -> None:
        """Set the closing attributes and close the file; ``complete``, rename it over the
        destination, else leave it under its partial name (marked ``complete = 0``; removed
        if it holds no frame)."""
        if not self.file:
            return
        n = self.n_frames
        # The space held back lets the last writes through on a disk that is full.
        self.destination.give_back_space()
        try:
            self.file.attrs.update(attrs, complete=int(complete))
        finally:
            self.file.close()
        if complete:
            move_into_place(self.destination.partial, self.destination.path)
        elif n:
            fsync_path(self.destination.partial)
        else:
            self.destination.partial.unlink()


def capture(source, out: str | os.PathLike | Destination, n_frames: int, *,
            overwrite: bool = False, stop: threading.Event | None = None,
            report=None) -> dict:
    """Store the next ``n_frames`` frames of a live source (fewer if it ends or is stopped).

    Parameters
    ----------
    source
        A live source with ``chunks(with_headers=True)``, ``stats``, ``mark_processed``
        (`aare_lab.sources.sls_stream.StreamSource`).
    out
        The HDF5 file to write, or its destination claimed already (`claim_capture`).
    n_frames
        Frames to capture at most.
    overwrite
        With a path for ``out``: whether an existing file may be replaced once the capture
        is complete, and an earlier capture's partial file discarded.
    stop
        Set to end the capture early (a signal handler does): the partial file keeps
        what came, and the destination is not written.
    report
        Called about once a second with a progress line.

    Returns
    -------
    dict
        ``frames_captured``, ``ended_by``, the stream's ``stats``, ``complete`` (the
        capture ended by itself and is under its name) and ``path`` (the file that holds
        the frames: the destination, or the partial file of a capture stopped early; None
        without frames).

    Raises
    ------
    aare_lab.storage.destination.DestinationExists, aare_lab.storage.destination.DestinationBusy
        As `claim_capture`, before anything is read.

    Warns
    -----
    aare_lab.storage.result_store.IncompleteResultWarning
        When an error or an interrupt stopped the capture after frames were written,
        naming the partial file that holds them.
    """
    n_frames = positive_int("n_frames", n_frames)
    stop = threading.Event() if stop is None else stop
    owned = not isinstance(out, Destination)
    destination = claim_capture(out, overwrite) if owned else out
    file: CaptureFile | None = None
    ended_by = None
    complete = False
    error: BaseException | None = None
    last = time.monotonic()
    try:
        for item in read_ahead(source.chunks(with_headers=True), stop, tick=True):
            if stop.is_set():
                break
            if item is not None:
                (numbers, frames), headers = item
                if file is None:
                    file = CaptureFile(destination, frames.shape[1:], source=source.describe(),
                                       endpoints=list(getattr(source, "endpoints", [])),
                                       frames_requested=n_frames,
                                       created=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                k = min(len(numbers), n_frames - file.n_frames)
                file.append(numbers[:k], frames[:k], headers[:k])
                source.mark_processed(k)
                if file.n_frames == n_frames:
                    ended_by = f"{n_frames} frames captured"
                    break
            if report is not None and time.monotonic() - last >= 1:
                report(f"{0 if file is None else file.n_frames:,} of {n_frames:,} frames "
                       f"captured; {counts_text(source.stats.as_dict())}")
                last = time.monotonic()
        if ended_by is None:
            ended_by = "stopped" if stop.is_set() else "the stream ended"
        complete = ended_by != "stopped"
    except BaseException as err:
        error = err
        ended_by = "interrupted" if interrupted(err) else f"error: {type(err).__name__}: {err}"
        raise
    finally:
        stop.set()
        n = 0 if file is None else file.n_frames
        held_in = destination.path if complete else destination.partial
        summary = {"frames_captured": n, "ended_by": ended_by, "stats": source.stats.as_dict(),
                   "complete": complete, "path": held_in if n else None}
        try:
            if file is not None:
                file.close(complete, frames_captured=n, ended_by=ended_by,
                           stats=json.dumps(summary["stats"]))
        finally:
            if owned:
                destination.release()
        if error is not None and n:
            warnings.warn(f"the capture stopped ({ended_by}) after {n} frames: "
                          f"{destination.partial} holds them and is marked complete=0",
                          IncompleteResultWarning, stacklevel=2)
    return summary
