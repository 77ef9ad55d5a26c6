"""slsReceiver's ZeroMQ JSON header: read it (`parse_message`) and write it (`format_header`).

The format is that of slsDetectorPackage 9.2.0 (``slsSupportLib/src/ZmqSocket.cpp``,
``SendHeader``; ``docs/src/zmqjsonheaderformat.rst``): each frame part is a two-part
message, the JSON header then exactly ``size`` bytes of image, and the end of an
acquisition is a one-part header with ``"data":0``. ``shape`` and ``detshape`` are
``[x, y]``: columns first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

#: The header versions read: 4 (slsDetectorPackage 6.x and 7.x) and 5 (8.x, 9.x).
JSON_VERSIONS = (4, 5)
#: The one header version written, as 9.2.0 does.
JSON_VERSION = 5
#: The only pixel depth a finder takes.
BITMODE = 16
#: ``detType`` of the detectors aare_lab knows by name (slsDetectorDefs::detectorType).
DETECTOR_TYPES = {"jungfrau": 3, "moench": 5}

_PIXEL = np.dtype("<u2")
#: Integer fields every data header must carry, besides the arrays.
_INTEGERS = ("bitmode", "fileIndex", "size", "frameIndex", "frameNumber", "row", "column",
             "completeImage", "detType")


#: Why messages are refused, by kind (`MalformedMessage.kind`, the keys of
#: ``StreamStats.refused``).
REFUSALS = {
    "not_json": "the header is not a JSON object",
    "version": "another jsonversion than 4 or 5",
    "header": "a header field missing or out of range",
    "bitmode": "another bit depth than 16",
    "size": "a data part missing, extra or of the wrong size",
    "repeated": "a second copy of a frame's part",
    "format": "another detector type or frame shape than the stream's",
}


class MalformedMessage(ValueError):
    """A message that cannot be used; the text says why, ``kind`` (a key of `REFUSALS`)
    what kind of refusal it is."""

    def __init__(self, text: str, kind: str):
        super().__init__(text)
        self.kind = kind


@dataclass(frozen=True, eq=False)
class Part:
    """One port's part of a frame, as one message brought it.

    Attributes
    ----------
    header
        The JSON header as a dict.
    image
        ``(rows, columns)`` ``uint16`` view of the data part (not a copy).
    """

    header: dict
    image: np.ndarray

    @property
    def number(self) -> int:
        """The detector's frame number."""
        return self.header["frameNumber"]

    @property
    def position(self) -> tuple[int, int]:
        """``(row, column)`` of the part in the detector."""
        return self.header["row"], self.header["column"]

    @property
    def ports(self) -> tuple[int, int]:
        """Parts of a whole frame, ``(rows, columns)`` (``detshape`` reversed)."""
        x, y = self.header["detshape"]
        return y, x

    @property
    def complete(self) -> bool:
        """Whether the receiver got every packet of this part."""
        return bool(self.header["completeImage"])

    @property
    def format(self) -> tuple[int, tuple[int, int], tuple[int, int]]:
        """``(detType, ports, part shape)``: what every part of one stream has alike."""
        return self.header["detType"], self.ports, self.image.shape

    @property
    def frame_shape(self) -> tuple[int, int]:
        """``(ny, nx)`` of the whole frame this is a part of."""
        (py, px), (ny, nx) = self.ports, self.image.shape
        return ny * py, nx * px

    @property
    def acquisition_frames(self) -> int | None:
        """Frames in this part's acquisition as its ``progress`` tells them, or None.

        The receiver writes ``progress = 100 * (frameIndex + 1) / total``; None where that
        says nothing: no progress (0), or above 100 (frames beyond those the receiver was
        told of, as when packets are sent to it by hand).
        """
        progress = self.header.get("progress")
        if type(progress) not in (int, float) or not 0 < progress <= 100:
            return None
        return round(100 * (self.header["frameIndex"] + 1) / progress)

    @property
    def acquisition_key(self) -> tuple[int, int]:
        """``(fileIndex, first frame number)``: constant within one acquisition of a port."""
        return self.header["fileIndex"], self.number - self.header["frameIndex"]


def parse_message(parts) -> Part | None:
    """Read one ZeroMQ message of the stream.

    Parameters
    ----------
    parts
        The message's frames (``bytes`` or buffers): header, then data.

    Returns
    -------
    Part or None
        The part of a frame, or None for an end-of-acquisition header.

    Raises
    ------
    MalformedMessage
        For a header that does not parse or lacks fields, another version or bit depth,
        a missing, extra or wrongly sized data part, or a position outside ``detshape``.
    """
    try:
        header = json.loads(bytes(parts[0]))
    except (UnicodeDecodeError, ValueError) as err:
        raise MalformedMessage(f"header is not JSON ({err})", "not_json") from None
    if not isinstance(header, dict):
        raise MalformedMessage("header is not a JSON object", "not_json")
    version = header.get("jsonversion")
    if version not in JSON_VERSIONS:
        raise MalformedMessage(f"jsonversion {version!r}, not one of {JSON_VERSIONS}",
                               "version")
    data = header.get("data")
    if data == 0:
        if len(parts) != 1:
            raise MalformedMessage(
                f"end-of-acquisition header followed by {len(parts) - 1} parts", "size")
        return None
    if data != 1:
        raise MalformedMessage(f"'data' is {data!r}, not 1 (frame) or 0 (end)", "header")
    if not all(_is_count(header.get(key)) for key in _INTEGERS):
        key = next(key for key in _INTEGERS if not _is_count(header.get(key)))
        raise MalformedMessage(f"'{key}' is {header.get(key)!r}, not an integer >= 0",
                               "header")
    shape, ports = header.get("shape"), header.get("detshape")
    for key, value in (("shape", shape), ("detshape", ports)):
        if not (isinstance(value, list) and len(value) == 2 and all(map(_is_count, value))
                and all(value)):
            raise MalformedMessage(f"'{key}' is {value!r}, not [x, y] of two integers >= 1",
                                   "header")
    if header["bitmode"] != BITMODE:
        raise MalformedMessage(f"bitmode {header['bitmode']}: only {BITMODE}-bit frames",
                               "bitmode")
    if header["row"] >= ports[1] or header["column"] >= ports[0]:
        raise MalformedMessage(f"row {header['row']}, column {header['column']} outside "
                               f"detshape {ports}", "header")
    if header["frameIndex"] > header["frameNumber"]:
        raise MalformedMessage(f"frameIndex {header['frameIndex']} above frameNumber "
                               f"{header['frameNumber']}", "header")
    size = shape[0] * shape[1] * _PIXEL.itemsize
    if header["size"] != size:
        raise MalformedMessage(f"size {header['size']} for shape {shape} at {BITMODE} bits "
                               f"(expected {size})", "size")
    if len(parts) != 2:
        raise MalformedMessage(f"data header followed by {len(parts) - 1} parts, not 1",
                               "size")
    buffer = memoryview(parts[1])
    if buffer.nbytes != size:
        raise MalformedMessage(f"data part of {buffer.nbytes} bytes, header says {size}",
                               "size")
    image = np.frombuffer(buffer, _PIXEL).reshape(shape[1], shape[0])
    return Part(header, image)


def _is_count(value) -> bool:
    return type(value) is int and value >= 0  # a bool is no count


def format_header(*, frame_number: int, frame_index: int, shape: tuple[int, int],
                  detshape: tuple[int, int] = (1, 1), row: int = 0, column: int = 0,
                  det_type: int = DETECTOR_TYPES["moench"], file_index: int = 0,
                  progress: float = 0.0, fname: str = "//run", packets: int = 0,
                  complete: bool = True, timestamp: int = 0, mod_id: int = 0) -> bytes:
    """A data header, field for field and in the order 9.2.0's receiver writes it.

    Parameters
    ----------
    frame_number
        The detector's frame number (also ``acqIndex``).
    frame_index
        The frame's index in its acquisition, from 0.
    shape
        ``(rows, columns)`` of this part (written as ``[columns, rows]``).
    detshape
        ``(rows, columns)`` of parts in the detector (written as ``[columns, rows]``).
    row, column
        This part's position.
    det_type
        slsDetector's detector type number (`DETECTOR_TYPES`).
    progress
        Per cent of the acquisition done, written as C++'s ``operator<<`` writes a double.
    fname
        The file name streamed; ``"//run"`` is what 9.2.0 sends with its default path and
        name.
    packets
        UDP packets caught for this part.
    complete
        ``completeImage``.
    """
    ny, nx = shape
    py, px = detshape
    size = ny * nx * _PIXEL.itemsize
    text = (
        f'{{"jsonversion":{JSON_VERSION}, "bitmode":{BITMODE}, "fileIndex":{file_index}, '
        f'"detshape":[{px}, {py}], "shape":[{nx}, {ny}], "size":{size}, '
        f'"acqIndex":{frame_number}, "frameIndex":{frame_index}, "progress":{progress:g}, '
        f'"fname":"{fname}", "data":1, "completeImage":{int(complete)}, '
        f'"frameNumber":{frame_number}, "expLength":0, "packetNumber":{packets}, '
        f'"detSpec1":0, "timestamp":{timestamp}, "modId":{mod_id}, "row":{row}, '
        f'"column":{column}, "detSpec2":0, "detSpec3":0, "detSpec4":0, "detType":{det_type}, '
        f'"version":2, "flipRows":0, "quad":0, "rx_roi":[0, {nx - 1}, 0, {ny - 1}]}}\n'
    )
    return text.encode()


#: The end-of-acquisition header: 9.2.0's ``SendDummyHeader``, a default ``zmqHeader``.
END_HEADER = (
    b'{"jsonversion":5, "bitmode":0, "fileIndex":0, "detshape":[0, 0], "shape":[0, 0], '
    b'"size":0, "acqIndex":0, "frameIndex":0, "progress":0, "fname":"", "data":0, '
    b'"completeImage":0, "frameNumber":0, "expLength":0, "packetNumber":0, "detSpec1":0, '
    b'"timestamp":0, "modId":0, "row":0, "column":0, "detSpec2":0, "detSpec3":0, '
    b'"detSpec4":0, "detType":0, "version":0, "flipRows":0, "quad":0, '
    b'"rx_roi":[0, 0, 0, 0]}\n'
)
