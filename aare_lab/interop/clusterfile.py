"""PSI aare's binary cluster files (``aare.ClusterFile``), written and read without aare.

The format, as aare 2026.3.17 and 2026.9.30 write and read it (little-endian, no file
header, no record of the cluster size or value type)::

    per frame:    int32 frame_number, uint32 n_clusters, then n_clusters records
    per record:   the C struct aare::Cluster<T, NX, NY, uint16_t>:
                  uint16 x, uint16 y, padding to the alignment of T, T data[NY * NX]

``x`` is the column and ``y`` the row of the centre pixel, ``data`` the window in raster
order from its top-left pixel: ``data[i * NX + j]`` is pixel ``(y - NY//2 + i,
x - NX//2 + j)``, which is aare_lab's ``window[cluster, i, j]``. The padding is 4 bytes for
float64 values and none otherwise; aare leaves whatever was in memory there, so it is
ignored when reading and written as zeros. aare reads the sizes and types of
`AARE_FORMATS` (and even 2x2, which an aare_lab result cannot hold).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from aare_lab._version import __version__
from aare_lab.model.clipping import report_clipping
from aare_lab.model.params import format_cluster_size, parse_cluster_size

#: The value types aare compiles a ClusterFile for, and the odd square sizes of each.
AARE_FORMATS = {"int32": (3, 5, 7, 9), "float32": (3, 5, 7, 9), "float64": (3, 5, 7, 9),
                "int16": (3,)}
#: The value type a result's windows are written as unless told: their own, except int16
#: windows, which widen (exactly) to int32, the type every aare tool reads; aare's int16
#: files hold 3x3 clusters only.
DEFAULT_FILE_DTYPES = {"int16": "int32"}
#: The smallest magnitude that the bytes of a nonzero float32 give read as an int32 (those
#: of the smallest normal float32, 2**-126).
FLOAT32_BITS_MIN = 2 ** 23
_HEADER = np.dtype([("frame_number", "<i4"), ("n_clusters", "<u4")])
_COORD = np.dtype("<u2")
#: Result attributes an aare file cannot tell, and what a read result holds for them.
UNKNOWN_ATTRS = {"n_sigma": np.nan, "pedestal_dtype": "unknown", "noise": "unknown",
                 "n_pedestal": -1, "max_clusters_per_frame": -1}


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def record_dtype(cluster_size, dtype: str) -> np.dtype:
    """The NumPy dtype of one cluster record (``x``, ``y``, ``data``) as aare lays it out.

    Parameters
    ----------
    cluster_size
        ``(ny, nx)``, ``"NYxNX"`` or a side; a size aare supports for ``dtype``.
    dtype
        A key of `AARE_FORMATS`.

    Raises
    ------
    ValueError
        For a size or value type aare has no ClusterFile for.

    Examples
    --------
    >>> record_dtype(3, "float64").itemsize, record_dtype("3x3", "float64").fields["data"][1]
    (80, 8)
    """
    ny, nx = parse_cluster_size(cluster_size)
    if dtype not in AARE_FORMATS:
        raise ValueError(f"aare cluster files hold {', '.join(AARE_FORMATS)} values, "
                         f"not {dtype!r}")
    sides = AARE_FORMATS[dtype]
    if ny != nx or ny not in sides:
        raise ValueError(f"aare has no {dtype} cluster file for {ny}x{nx} clusters; it "
                         f"reads {', '.join(f'{s}x{s}' for s in sides)}")
    value = np.dtype(dtype).newbyteorder("<")
    # A C struct: each member aligned to its own size, the whole to the largest one.
    offset = _round_up(2 * _COORD.itemsize, value.itemsize)
    size = _round_up(offset + ny * nx * value.itemsize, max(value.itemsize, _COORD.itemsize))
    return np.dtype({"names": ["x", "y", "data"], "formats": [_COORD, _COORD, (value, (ny, nx))],
                     "offsets": [0, _COORD.itemsize, offset], "itemsize": size})


def file_dtype(window_dtype: str) -> str:
    """The value type `write_clusterfile` writes windows of ``window_dtype`` as by default.

    Examples
    --------
    >>> file_dtype("int16"), file_dtype("float32")
    ('int32', 'float32')
    """
    return DEFAULT_FILE_DTYPES.get(window_dtype, window_dtype)


def _exact(windows: np.ndarray, dtype: str, path) -> np.ndarray:
    """``windows`` converted by value to ``dtype``, refusing any value that would change
    (fractions, values beyond an integer type's limits, float64 digits float32 lacks)."""
    # NaN and values beyond the integer limits cast to arbitrary integers, and float64
    # values beyond float32's to infinities; the comparison below refuses them.
    with np.errstate(invalid="ignore", over="ignore"):
        converted = windows.astype(dtype)
    back = converted.astype(windows.dtype)
    changed = back != windows
    if windows.dtype.kind == "f":
        changed &= ~(np.isnan(back) & np.isnan(windows))
    if changed.any():
        first = np.flatnonzero(changed)[0]
        info = np.iinfo(dtype) if converted.dtype.kind == "i" else None
        limits = ("" if info is None else
                  f" ({dtype} holds whole numbers {info.min}..{info.max})")
        own = file_dtype(windows.dtype.name)
        raise ValueError(f"cannot write {path} as {dtype}: {np.count_nonzero(changed):,} of "
                         f"the {windows.size:,} {windows.dtype} window values would change, "
                         f"e.g. {windows.flat[first].item()!r} to "
                         f"{converted.flat[first].item()!r}{limits}; write dtype={own!r} "
                         f"(aare-lab convert: --dtype {own})")
    return converted


def write_clusterfile(result: xr.Dataset, path: str | os.PathLike,
                      dtype: str | None = None) -> None:
    """Write a finder result as an aare cluster file, every frame in the result's order.

    Frames without clusters are written too (a header with 0 clusters), as aare does.
    The file appears complete or not at all (`aare_lab.storage.atomic.replace_atomically`).

    Parameters
    ----------
    result
        A finder result (`aare_lab.model.results`).
    path
        The file to write (``.clust`` by aare's convention); replaced if it exists.
    dtype
        The value type of the file, a key of `AARE_FORMATS`; default `file_dtype` of the
        result's window dtype. Windows are converted by value, to another type only where
        it holds every window value exactly.

    Raises
    ------
    ValueError
        For a result that lacks a cluster variable, a window size or type aare cannot
        read, a type that would change some window values, frame numbers beyond int32,
        centres beyond uint16, or clusters of frames the result does not list.

    Warns
    -----
    aare_lab.model.clipping.WindowClippedWarning
        For int16 windows at their limits (`aare_lab.model.clipping.report_clipping`): the file
        does not keep the result's count of them.
    """
    from aare_lab.storage.atomic import replace_atomically

    missing = [v for v in ("frame", "frame_number", "y", "x", "window") if v not in result]
    if missing:
        raise ValueError(f"cannot write {path}: the result lacks {', '.join(missing)}; "
                         "write the Dataset of a finder or load_result")
    windows = result["window"].to_numpy()
    dtype = file_dtype(windows.dtype.name) if dtype is None else str(dtype)
    record = record_dtype(windows.shape[1:], dtype)
    frames = result["frame"].to_numpy()
    info = np.iinfo(np.int32)
    if len(frames) and (frames.min() < info.min or frames.max() > info.max):
        raise ValueError(f"cannot write {path}: aare stores frame numbers as int32, the "
                         f"result has {frames.min()}..{frames.max()}")
    ys, xs = result["y"].to_numpy(), result["x"].to_numpy()
    for name, values in (("y", ys), ("x", xs)):
        if len(values) and (values.min() < 0 or values.max() > np.iinfo(np.uint16).max):
            raise ValueError(f"cannot write {path}: aare stores centres as uint16, the result "
                             f"has {name} in {values.min()}..{values.max()}")
    order = np.argsort(frames, kind="stable")
    cluster_frames = result["frame_number"].to_numpy()
    position = np.searchsorted(frames, cluster_frames, sorter=order)
    position = order[np.minimum(position, len(frames) - 1)] if len(frames) else position
    if len(cluster_frames) and (not len(frames)
                                or not np.array_equal(frames[position], cluster_frames)):
        unlisted = np.setdiff1d(cluster_frames, frames)
        raise ValueError(f"cannot write {path}: clusters of frames {unlisted[:5].tolist()} "
                         "that the result's frame coordinate does not list")
    by_frame = np.argsort(position, kind="stable")
    records = np.zeros(len(by_frame), record)
    records["x"], records["y"] = xs[by_frame], ys[by_frame]
    records["data"] = _exact(windows[by_frame], dtype, path)
    counts = np.bincount(position, minlength=len(frames))
    headers = np.empty(len(frames), _HEADER)
    headers["frame_number"], headers["n_clusters"] = frames, counts
    starts = np.concatenate([[0], np.cumsum(counts)])

    def write(temporary: Path) -> None:
        with open(temporary, "wb") as file:
            for i in range(len(frames)):
                file.write(headers[i:i + 1].tobytes())
                file.write(records[starts[i]:starts[i + 1]].tobytes())

    replace_atomically(path, write)
    report_clipping(result)


def _frames_of(buffer: np.ndarray, record: np.dtype, path) -> tuple[list, list, list]:
    """Walk the frame headers: each frame's number, cluster count and byte offset."""
    numbers, counts, offsets = [], [], []
    at, end = 0, len(buffer)
    while at < end:
        if end - at < _HEADER.itemsize:
            raise ValueError(f"{path} ends in {end - at} stray bytes after frame "
                             f"{numbers[-1] if numbers else '(none)'}: truncated, or not an "
                             "aare cluster file")
        header = buffer[at:at + _HEADER.itemsize].view(_HEADER)[0]
        n = int(header["n_clusters"])
        at += _HEADER.itemsize
        if n * record.itemsize > end - at:
            raise ValueError(
                f"{path}: frame {int(header['frame_number'])} (number {len(numbers) + 1} "
                "in the file) "
                f"announces {n} clusters of {record.itemsize} bytes but {end - at} bytes "
                "remain: the file is truncated, or its clusters are not of the cluster_size "
                "and dtype given (the format does not record them)")
        numbers.append(int(header["frame_number"]))
        counts.append(n)
        offsets.append(at)
        at += n * record.itemsize
    return numbers, counts, offsets


def _refuse_other_type(windows: np.ndarray, dtype: str, path) -> None:
    """Refuse window values that only the bytes of another value type give read as ``dtype``.

    The format does not record the value type, and int32 and float32 records are the same
    size, so either type reads the other's files without a framing error. Integers read as
    floats are subnormal (NaN if negative), which no detector value is; floats
    read as int32 are 0 or at least `FLOAT32_BITS_MIN` in magnitude, while a detector's
    windows always hold smaller nonzero values (their noise).
    """
    if windows.dtype.kind == "f":
        tiny = np.finfo(windows.dtype).tiny
        odd = np.count_nonzero((windows != 0) & (windows > -tiny) & (windows < tiny))
        what, likely = f"subnormal (nonzero, below {tiny:.1g} in magnitude)", "int32"
    elif dtype == "int32":
        nonzero = np.count_nonzero(windows)
        small = np.count_nonzero((windows != 0) & (windows > -FLOAT32_BITS_MIN)
                                 & (windows < FLOAT32_BITS_MIN))
        odd = 0 if small else nonzero
        what, likely = f"at least {FLOAT32_BITS_MIN:,} in magnitude (the rest 0)", "float32"
    else:
        return
    if odd:
        raise ValueError(f"{path} does not hold {dtype} values: read as {dtype}, {odd:,} of "
                         f"its {windows.size:,} window values are {what}, as only the bytes of "
                         "another value type give (the format does not record the type). "
                         f"It probably holds {likely} values: read it with dtype={likely!r} "
                         f"(aare-lab convert: --dtype {likely})")


def read_clusterfile(path: str | os.PathLike, cluster_size=(3, 3), dtype: str = "int32",
                     frame_shape: tuple[int, int] | None = None,
                     provenance: dict | None = None) -> xr.Dataset:
    """Read an aare cluster file into an aare_lab result Dataset.

    Parameters
    ----------
    path
        The cluster file.
    cluster_size, dtype
        What the file holds (`record_dtype`); the format does not record it. A wrong
        value mostly fails on the frame headers; int32 and float32, of one record size,
        are told apart by their values (`_refuse_other_type`). Values are not converted:
        the windows keep ``dtype``, int16 widened to int32.
    frame_shape
        ``(ny, nx)`` of the detector, if known (the file does not record it); centres
        must lie inside. `aare_lab.analysis.compare` needs it.
    provenance
        Result attributes that are known from elsewhere (e.g. ``{"n_sigma": 5.0}``),
        among `UNKNOWN_ATTRS`.

    Returns
    -------
    xarray.Dataset
        The variables of a finder result (`aare_lab.model.results`); ``n_found`` equals
        ``n_kept`` (a file holds the kept clusters only). Attributes: ``finder`` "aare",
        ``source_file``, ``file_dtype``, the values of `UNKNOWN_ATTRS` for what neither the
        file nor ``provenance`` tells, listed in ``unknown_attrs``. int16 values become
        int32 windows; consecutive records of one frame number become one frame.

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a file that does not parse as clusters of this size and dtype, values that
        the bytes of another type give (int32 read as float32 and the reverse,
        `_refuse_other_type`), a frame number that comes back after other frames, centres
        outside ``frame_shape``, or unknown ``provenance`` keys.
    """
    from aare_lab.checks import existing_file
    from aare_lab.model.results import make_result
    from aare_lab.model.spec import FinderSpec

    path = existing_file(path)
    record = record_dtype(cluster_size, dtype)
    size = parse_cluster_size(cluster_size)
    provenance = dict(provenance or {})
    if set(provenance) - set(UNKNOWN_ATTRS):
        raise ValueError(f"provenance takes {', '.join(UNKNOWN_ATTRS)}; got "
                         f"{', '.join(sorted(set(provenance) - set(UNKNOWN_ATTRS)))}")
    buffer = np.fromfile(path, np.uint8)
    numbers, counts, offsets = _frames_of(buffer, record, path)
    parts = [buffer[o:o + n * record.itemsize].view(record) for o, n in zip(offsets, counts)]
    clusters = np.concatenate(parts) if parts else np.zeros(0, record)
    numbers, counts = np.asarray(numbers, np.int64), np.asarray(counts, np.int64)
    frame_of_cluster = np.repeat(numbers, counts)
    # aare may write one frame in several records; those follow each other.
    first = np.ones(len(numbers), bool)
    first[1:] = numbers[1:] != numbers[:-1]
    frames = numbers[first]
    per_frame = np.add.reduceat(counts, np.flatnonzero(first)) if len(frames) else counts
    if len(np.unique(frames)) != len(frames):
        ordered = np.sort(frames)
        repeated = ordered[1:][np.diff(ordered) == 0]
        raise ValueError(f"{path}: frame number {int(repeated[0])} appears again after other "
                         "frames; aare_lab results hold each frame once")
    ys, xs = clusters["y"].astype(np.int32), clusters["x"].astype(np.int32)
    if frame_shape is not None:
        ny, nx = (int(n) for n in frame_shape)
        outside = (ys >= ny) | (xs >= nx)
        if outside.any():
            raise ValueError(f"{path}: {np.count_nonzero(outside)} cluster centres lie outside "
                             f"the frame shape {ny}x{nx} given")
    windows = np.ascontiguousarray(clusters["data"])
    _refuse_other_type(windows, dtype, path)
    if dtype == "int16":
        windows = windows.astype(np.int32)
    # make_result lays out the variables; the provenance is the file's, not a finder's.
    result = make_result(spec=FinderSpec(cluster_size=size, window_dtype=windows.dtype.name,
                                         n_pedestal=1),
                         frame_shape=frame_shape or (0, 0), frame_numbers=frames,
                         n_found=per_frame, n_kept=per_frame, cluster_frame=frame_of_cluster,
                         cluster_y=ys, cluster_x=xs, windows=windows)
    unknown = [name for name in UNKNOWN_ATTRS if name not in provenance]
    result.attrs = {
        "Conventions": "CF-1.10", "title": "clusters read from an aare cluster file",
        "finder": "aare", "cluster_size": format_cluster_size(size),
        "window_dtype": windows.dtype.name, **UNKNOWN_ATTRS, **provenance,
        **({} if frame_shape is None else
           {"frame_shape": np.asarray(frame_shape, np.int64)}),
        "source_file": str(path), "file_dtype": dtype,
        "unknown_attrs": " ".join(unknown + ([] if frame_shape else ["frame_shape"])),
        "comment": "n_found equals n_kept: a cluster file holds the clusters kept, not how "
                   "many were found",
        "aare_lab_version": __version__,
    }
    return result


__all__ = ["AARE_FORMATS", "DEFAULT_FILE_DTYPES", "UNKNOWN_ATTRS", "file_dtype",
           "read_clusterfile", "record_dtype", "write_clusterfile"]
