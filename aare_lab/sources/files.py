"""The files behind a source spec, and their fingerprints: what a result records of its
inputs, what a command checks its outputs against, and what a campaign's manifest keys on.

A spec names a file, with ``:dataset`` (HDF5) or ``:member`` (``.npz``) after it; an
slsDetector master file brings its raw data files (``<prefix>_d*_f*_<index>.raw``).
The fingerprint of a file is the SHA-256 of its size, its modification time (ns) and
`SAMPLED_BLOCKS` blocks of `BLOCK_BYTES` spread evenly over it, the first and last
included: cheap for files of many GB (a few MB read), and it changes when a file is
rewritten, grown, truncated or touched. A copy elsewhere, with a new mtime, counts as new.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

SAMPLED_BLOCKS = 16
BLOCK_BYTES = 1 << 16
#: An slsDetector master file's name: its prefix and acquisition index.
MASTER = re.compile(r"(?P<prefix>.*)_master_(?P<index>\d+)\.(?:json|raw)", re.IGNORECASE)
#: ``file.h5:/dataset``, ``file.npz:member``: a file and what in it holds the frames.
MEMBER = re.compile(r"(?P<file>.*?\.(?:h5|hdf5|nxs|npz)):(?P<member>.+)", re.IGNORECASE)


def file_of(spec: str | os.PathLike) -> str:
    """The file a source spec names (without its ``:dataset`` or ``:member``).

    Examples
    --------
    >>> file_of("run.h5:/entry/data"), file_of("dark.npy")
    ('run.h5', 'dark.npy')
    """
    text = os.fspath(spec)
    match = None if os.path.exists(text) else MEMBER.fullmatch(text)
    return match["file"] if match else text


def files_of(spec: str | os.PathLike) -> list[Path]:
    """The files a source reads: the file itself, and a master file's raw data files."""
    path = Path(file_of(spec))
    files = [path]
    if master := MASTER.fullmatch(path.name):
        files += sorted(path.parent.glob(f"{master['prefix']}_d*_f*_{master['index']}.raw"))
    return files


def file_fingerprint(path: str | os.PathLike) -> str:
    """The fingerprint of one file (see the module); raises `OSError` if it cannot be read."""
    digest = hashlib.sha256()
    stat = os.stat(path)
    digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    with open(path, "rb") as file:
        step = max(stat.st_size - BLOCK_BYTES, 0) / max(SAMPLED_BLOCKS - 1, 1)
        for k in range(SAMPLED_BLOCKS if stat.st_size > BLOCK_BYTES else 1):
            file.seek(int(k * step))
            digest.update(file.read(BLOCK_BYTES))
    return digest.hexdigest()


def fingerprint(spec: str | os.PathLike) -> str | None:
    """The fingerprint of a source's files together, None if one is missing or unreadable."""
    digest = hashlib.sha256(os.fspath(spec).encode())
    try:
        for path in files_of(spec):
            digest.update(f"{path.name}:{file_fingerprint(path)}".encode())
    except OSError:
        return None
    return digest.hexdigest()


def input_record(spec: str | os.PathLike) -> dict:
    """What a result records of one input: the spec as given, and each of its files' path
    (absolute), size and fingerprint (None where a file cannot be read).

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "dark.npy"
    >>> _ = path.write_bytes(b"1234")
    >>> record = input_record(path)
    >>> record["files"][0]["bytes"], len(record["files"][0]["fingerprint"])
    (4, 64)
    """
    files = []
    for path in files_of(spec):
        try:
            size, print_ = path.stat().st_size, file_fingerprint(path)
        except OSError:
            size = print_ = None
        files.append({"path": str(path.resolve()), "bytes": size, "fingerprint": print_})
    return {"source": os.fspath(spec), "files": files}


__all__ = ["BLOCK_BYTES", "MASTER", "MEMBER", "SAMPLED_BLOCKS", "file_fingerprint", "file_of",
           "files_of", "fingerprint", "input_record"]
