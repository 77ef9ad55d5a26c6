"""HDF5 chunks encoded by aare_lab's own threads, exactly as HDF5's standard filters would.

A result file's growing variables are stored with HDF5's built-in ``shuffle`` and
``deflate`` filters, which every netCDF4 and HDF5 reader decodes without plugins. HDF5
would run the filters on the one thread that writes, at about 75 MB/s; here each chunk is
shuffled with NumPy and deflated with ISA-L (``isal``, 4-5x zlib's speed at level 1, the
same zlib stream format) or, without it, zlib, on a pool of threads (both release the GIL),
and the encoded chunks go into the file as they are (``write_direct_chunk``).
"""

from __future__ import annotations

import numpy as np

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


__all__ = ["DEFLATE_LEVEL", "DEFLATE_LIBRARY", "HDF5_DEFLATE_LEVEL", "encode", "shuffle"]
