"""HDF5's scale-offset filter for integer chunks, encoded on aare_lab's threads.

The filter (``H5Z_FILTER_SCALEOFFSET``) is built into the HDF5 library: each chunk stores
its minimum, then every value's offset from it in the fewest bits that hold the chunk's
range, most significant bit first. Cluster windows span a few thousand ADU, so an int32 or
int16 window tap takes 11-13 bits: about 3x fewer bytes than raw, as many as deflate gives,
and every reader built on the HDF5 library (netCDF-C and its Python, Fortran and MATLAB
bindings, h5py, h5netcdf, xarray) decodes it, faster than deflate. HDF5 would encode it on
the writing thread; `encode` makes the same bytes (``tests/test_chunk_codec.py`` compares
them with HDF5's own) in a compiled loop that releases the GIL, on the writer's pool.

The encoding, as ``H5Zscaleoffset.c`` defines it for integers with the minimum bits left to
the filter: a 21-byte header (the bits per value, 4 bytes little-endian; the size of the
minimum, 1 byte, 8; the minimum, 8 bytes little-endian two's complement; 8 zero bytes),
then the values packed. Values equal to the dataset's fill value (HDF5's default: 0) are
left out of the range and stored as all ones. Values whose offsets would need every bit of
the type are stored as they are (little-endian), with the minimum, or 0 when the range is
within two of the type's own. (HDF5 encodes datasets without a fill value otherwise; the
result files never have those.)
"""

from __future__ import annotations

import h5py
import numba
import numpy as np

#: HDF5's filter id, and its bytes before the packed values.
FILTER_ID = h5py.h5z.FILTER_SCALEOFFSET
HEADER_BYTES = 21
#: The filter's parameter that says whether the dataset defines a fill value, and the
#: first of those holding it (``H5Z_SCALEOFFSET_PARM_FILAVAIL`` and ``..._FILVAL``).
_FILL_DEFINED_PARAMETER = 7
_FILL_PARAMETER = 8


def fill_value(dataset: h5py.Dataset) -> int:
    """The fill value the filter of ``dataset`` leaves out of each chunk's range, as HDF5
    recorded it in the filter's parameters when the dataset was made.

    Raises
    ------
    ValueError
        When ``dataset`` has no scale-offset filter or no fill value, or is not of integers
        of up to 64 bits (unsigned: up to 32).
    """
    dtype = dataset.dtype
    if dtype.kind not in "iu" or dtype.itemsize > (8 if dtype.kind == "i" else 4):
        raise ValueError(f"{dataset.name} is {dtype}: the scale-offset encoder takes signed "
                         "integers of up to 64 bits and unsigned ones of up to 32")
    found = dataset.id.get_create_plist().get_filter_by_id(FILTER_ID)
    if found is None:
        raise ValueError(f"{dataset.name} has no scale-offset filter")
    _, values, _ = found
    if not values[_FILL_DEFINED_PARAMETER]:
        raise ValueError(f"{dataset.name} has no fill value")
    words = values[_FILL_PARAMETER:_FILL_PARAMETER + (dtype.itemsize + 3) // 4]
    raw = b"".join(int(w).to_bytes(4, "little") for w in words)[:dtype.itemsize]
    return int(np.frombuffer(raw, dtype.newbyteorder("<"))[0])


def encode(chunk: np.ndarray, fill: int) -> np.ndarray:
    """One whole chunk of integers as HDF5's scale-offset filter stores it.

    Parameters
    ----------
    chunk
        The chunk's values (C order; every element of the chunk, padding included).
    fill
        `fill_value` of the dataset.

    Returns
    -------
    numpy.ndarray
        The encoded bytes (uint8), for ``write_direct_chunk``.
    """
    values = np.ascontiguousarray(chunk).reshape(-1)
    if not values.dtype.isnative:
        values = values.astype(values.dtype.newbyteorder("="))
    width = 8 * values.dtype.itemsize
    out = np.empty(HEADER_BYTES + (values.size * width) // 8 + 1, np.uint8)
    size = _encode(values, width, fill, out)
    return out[:size]


@numba.njit(nogil=True, cache=True)
def _range(values, fill):
    """The least and greatest value, fill values left out (0, 0 if all are)."""
    low = high = np.int64(0)
    seen = False
    for i in range(values.size):
        v = np.int64(values[i])
        if v == fill:
            continue
        if not seen:
            low = high = v
            seen = True
        elif v > high:
            high = v
        elif v < low:
            low = v
    return low, high


@numba.njit(nogil=True, cache=True)
def _log2_ceil(n):
    """The bits that hold ``n`` values, as HDF5 counts them (n up to 2**64 - 1)."""
    bits = 0
    power = np.uint64(1)
    rest = n >> np.uint64(1)
    while rest:
        rest >>= np.uint64(1)
        power <<= np.uint64(1)
        bits += 1
    return bits if power == n else bits + 1


@numba.njit(nogil=True, cache=True)
def _encode(values, width, fill, out):
    """Write the encoding of ``values`` (``width`` bits each) into ``out``; its length."""
    low, high = _range(values, fill)
    spread = np.uint64(high - low)  # two's complement: right even where high - low wraps
    full = spread > (np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(64 - width)) - np.uint64(2)
    if full:
        bits, minimum = width, np.int64(0)
    else:
        span = spread + np.uint64(1)
        bits = _log2_ceil(span + np.uint64(1))   # one more code: the fill value's
        minimum = low
    for i in range(4):
        out[i] = (bits >> (8 * i)) & 0xFF
    out[4] = 8
    m = np.uint64(minimum)
    for i in range(8):
        out[5 + i] = (m >> np.uint64(8 * i)) & np.uint64(0xFF)
    for i in range(13, HEADER_BYTES):
        out[i] = 0
    if bits == width:
        raw = values.view(np.uint8)
        out[HEADER_BYTES:HEADER_BYTES + raw.size] = raw
        return HEADER_BYTES + raw.size
    n_out = HEADER_BYTES + (values.size * bits) // 8 + 1
    all_ones = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    # Most significant bit first, through a 64-bit accumulator whose bits above the
    # pending ones are stale and never read: 32 bits at a time for values of up to 32
    # bits, a byte at a time (a value in two pushes) for wider ones.
    pending = np.uint64(0)
    n_pending = 0
    j = HEADER_BYTES
    if bits <= 32:
        for i in range(values.size):
            v = np.int64(values[i])
            u = all_ones if v == fill else np.uint64(v - minimum)
            pending = (pending << np.uint64(bits)) | u
            n_pending += bits
            if n_pending >= 32:
                n_pending -= 32
                word = pending >> np.uint64(n_pending)
                out[j] = (word >> np.uint64(24)) & np.uint64(0xFF)
                out[j + 1] = (word >> np.uint64(16)) & np.uint64(0xFF)
                out[j + 2] = (word >> np.uint64(8)) & np.uint64(0xFF)
                out[j + 3] = word & np.uint64(0xFF)
                j += 4
    else:
        for i in range(values.size):
            v = np.int64(values[i])
            u = all_ones if v == fill else np.uint64(v - minimum)
            for push in range(2):
                n = bits - 32 if push == 0 else 32
                part = u >> np.uint64(32) if push == 0 else u & np.uint64(0xFFFFFFFF)
                pending = (pending << np.uint64(n)) | part
                n_pending += n
                while n_pending >= 8:
                    n_pending -= 8
                    out[j] = (pending >> np.uint64(n_pending)) & np.uint64(0xFF)
                    j += 1
    while n_pending >= 8:
        n_pending -= 8
        out[j] = (pending >> np.uint64(n_pending)) & np.uint64(0xFF)
        j += 1
    if n_pending:
        out[j] = (pending << np.uint64(8 - n_pending)) & np.uint64(0xFF)
        j += 1
    out[j:n_out] = 0
    return n_out


__all__ = ["FILTER_ID", "HEADER_BYTES", "encode", "fill_value"]
