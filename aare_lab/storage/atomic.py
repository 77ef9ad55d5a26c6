"""Files that appear complete or not at all."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def replace_atomically(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Write a file through ``write(temporary_path)`` and move it into place in one step.

    The temporary file lies next to ``path`` (so that `os.replace` stays on one file
    system, where it is atomic) and is removed if ``write`` fails: a failed write leaves
    neither a half-written file nor a changed older one. It is on the disk (fsync'd, and
    its folder after the rename) before it counts as written, so a power cut cannot leave
    a name for a file whose data never reached the disk.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> replace_atomically(folder / "a.txt", lambda p: p.write_text("done"))
    >>> sorted(p.name for p in folder.iterdir()), (folder / "a.txt").read_text()
    (['a.txt'], 'done')
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        write(temporary)
        move_into_place(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def move_into_place(finished: str | os.PathLike, path: str | os.PathLike) -> None:
    """Rename a finished file over ``path`` in one step, once its data are on the disk.

    ``finished`` is fsync'd before the rename and the folder after it, so that a power cut
    cannot leave ``path`` naming a file whose data never reached the disk. Both lie in one
    folder (`os.replace` is atomic within one file system).
    """
    fsync_path(finished)
    os.replace(finished, path)
    fsync_path(Path(path).parent)


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file's (or a folder's) data and metadata to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
