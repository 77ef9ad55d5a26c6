"""HDF5 chunks encoded by aare_lab's own threads, exactly as HDF5's built-in filters would.

A result file's growing variables are stored with HDF5's built-in filters, which readers
built on the HDF5 library decode without plugins: ``shuffle`` and ``deflate`` (every netCDF4
reader), and for integer windows ``scaleoffset`` (`aare_lab.storage.scale_offset`). HDF5
would run the filters on the one thread that writes, at about 75 MB/s for deflate; here
each chunk is shuffled with NumPy and deflated with ISA-L (``isal``, 4-5x zlib's speed at
level 1, the same zlib stream format) or, without it, zlib, or packed by a compiled loop,
on a pool of threads (all release the GIL), and the encoded chunks go into the file as
they are (``write_direct_chunk``).
"""

from __future__ import annotations

import numpy as np

from aare_lab.storage import scale_offset

try:
    from isal import isal_zlib as _deflate
    #: The library that deflates: ``"isal"`` or ``"zlib"``.
    DEFLATE_LIBRARY = "isal"
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
    import zlib as _deflate
    DEFLATE_LIBRARY = "zlib"

#: The deflate level of `encode` (ISA-L's 0-3, zlib's 0-9; 1 in both is fast and close to
#: the best ratio on cluster windows: benchmarks/result_write.py).
DEFLATE_LEVEL = 1
#: HDF5's deflate level recorded in the file (it only matters to HDF5 writing the same
#: variable itself, which aare_lab never does).
HDF5_DEFLATE_LEVEL = 1
#: The filters of a packed variable, in HDF5's order: scale-offset, then deflate (for
#: ``h5py``'s ``create_dataset``).
PACKED_FILTERS = {"scaleoffset": 0, "compression": "gzip", "compression_opts": HDF5_DEFLATE_LEVEL}
#: ``write_direct_chunk``'s filter mask of a packed chunk that skipped deflate (the
#: pipeline's second filter).
DEFLATE_SKIPPED = 0b10


def shuffle(chunk: np.ndarray) -> np.ndarray:
    """The bytes of ``chunk`` in HDF5's shuffle order: every element's first byte, then
    every element's second byte, and so on.

    Examples
    --------
    >>> shuffle(np.array([1, 2, 3], np.uint16)).tolist()
    [1, 2, 3, 0, 0, 0]
    """
    size = chunk.dtype.itemsize
    raw = np.ascontiguousarray(chunk).reshape(-1).view(np.uint8).reshape(-1, size)
    return np.ascontiguousarray(raw.T).reshape(-1)


def encode(chunk: np.ndarray, shuffled: bool) -> bytes:
    """One whole chunk as HDF5's filter pipeline stores it: shuffled (if ``shuffled``),
    then deflated."""
    data = shuffle(chunk) if shuffled and chunk.dtype.itemsize > 1 else np.ascontiguousarray(chunk)
    return _deflate.compress(memoryview(data).cast("B"), DEFLATE_LEVEL)


def encode_packed(chunk: np.ndarray, padded: bool, fill: int) -> tuple[bytes | np.ndarray, int]:
    """One whole chunk of a variable with `PACKED_FILTERS`, and its filter mask.

    A full chunk is only packed (deflate adds little to packed taps, at a quarter of the
    speed); the last chunk of a run, ``padded`` with fill values past its rows, is deflated
    too, so that a result of a few clusters takes kilobytes, not a packed megabyte.

    Parameters
    ----------
    chunk
        The chunk's values.
    padded
        Whether rows past the data pad the chunk.
    fill
        `aare_lab.storage.scale_offset.fill_value` of the variable.
    """
    packed = scale_offset.encode(chunk, fill)
    if padded:
        return _deflate.compress(packed, DEFLATE_LEVEL), 0
    return packed, DEFLATE_SKIPPED


__all__ = ["DEFLATE_LEVEL", "DEFLATE_LIBRARY", "DEFLATE_SKIPPED", "HDF5_DEFLATE_LEVEL",
           "PACKED_FILTERS", "encode", "encode_packed", "shuffle"]
