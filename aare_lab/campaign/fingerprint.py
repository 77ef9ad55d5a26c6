"""An input file's fingerprint: whether a run's inputs are still those it was found from.

The fingerprint of a file is the SHA-256 of its size, its modification time (ns) and
`SAMPLED_BLOCKS` blocks of `BLOCK_BYTES` spread evenly over it, the first and last
included: cheap for files of many GB (a few MB read), and it changes when a file is
rewritten, grown, truncated or touched. A copy elsewhere, with a new mtime, counts as new.
An slsDetector master file brings its raw data files (``<prefix>_d*_f*_<index>.raw``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .runs import MASTER, file_of

SAMPLED_BLOCKS = 16
BLOCK_BYTES = 1 << 16


def files_of(source: str) -> list[Path]:
    """The files a source reads: the file itself, and an slsDetector master file's raw data
    files."""
    path = Path(file_of(source))
    files = [path]
    if master := MASTER.fullmatch(path.name):
        files += sorted(path.parent.glob(f"{master['prefix']}_d*_f*_{master['index']}.raw"))
    return files


def file_fingerprint(path: Path) -> str:
    """The fingerprint of one file (see the module); raises `OSError` if it cannot be read."""
    digest = hashlib.sha256()
    stat = path.stat()
    digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    with open(path, "rb") as file:
        step = max(stat.st_size - BLOCK_BYTES, 0) / max(SAMPLED_BLOCKS - 1, 1)
        for k in range(SAMPLED_BLOCKS if stat.st_size > BLOCK_BYTES else 1):
            file.seek(int(k * step))
            digest.update(file.read(BLOCK_BYTES))
    return digest.hexdigest()


def fingerprint(source: str) -> str | None:
    """The fingerprint of a source's files, None if one is missing or unreadable (the run
    is then never taken as finished; the worker says what is wrong)."""
    digest = hashlib.sha256(source.encode())
    try:
        for path in files_of(source):
            digest.update(f"{path.name}:{file_fingerprint(path)}".encode())
    except OSError:
        return None
    return digest.hexdigest()


__all__ = ["BLOCK_BYTES", "SAMPLED_BLOCKS", "file_fingerprint", "files_of", "fingerprint"]
