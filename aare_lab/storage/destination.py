"""Where a result file goes, claimed by one writer, and never destroyed half-way.

A result is written to ``<stem>.partial.nc`` beside its destination and renamed over it
only once it is whole, flushed and on the disk (`ResultWriter`): a reader holding the old
file (a notebook) keeps reading the old file, and an interrupted or failed run leaves its
frames under a name that says it is partial, never over a previous good result.

One writer per destination: the writer holds an exclusive `fcntl.flock` on a small lock
file ``.<name>.lock`` beside it. The lock dies with its process, so a run that was killed
blocks nobody (a campaign's redone run, a user's second try), and no stale lock file has to
be cleaned up by hand.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from pathlib import Path
from typing import Self

#: Free space a writer holds back from the start, so that a disk that fills up still has
#: room to close the partial file readable (its last chunks and HDF5's metadata).
RESERVE_BYTES = 8 << 20


class DestinationBusy(OSError):
    """Another process is writing the same result file."""


class DestinationExists(FileExistsError):
    """The result file exists and replacing it was not asked for."""


def partial_path(path: str | os.PathLike) -> Path:
    """The name a result is written under until it is whole: ``x.nc`` → ``x.partial.nc``.

    Examples
    --------
    >>> partial_path("runs/x.nc").as_posix()
    'runs/x.partial.nc'
    """
    path = Path(path)
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def free_bytes(path: str | os.PathLike) -> int:
    """The bytes free for this user on the file system that holds ``path``'s folder."""
    return shutil.disk_usage(Path(path).parent).free


def human_bytes(n: float) -> str:
    """``n`` bytes in the unit that reads best.

    Examples
    --------
    >>> human_bytes(3 << 20), human_bytes(1.5e9)
    ('3.1 MB', '1.5 GB')
    """
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


class Destination:
    """A result file's destination, claimed for one writer until `release`.

    Parameters
    ----------
    path
        The result file (``.nc``).
    overwrite
        Whether an existing file at ``path`` may be replaced (once the new one is whole).

    Raises
    ------
    DestinationExists
        When ``path`` exists and ``overwrite`` is False.
    DestinationBusy
        When another process writes ``path``.
    """

    def __init__(self, path: str | os.PathLike, overwrite: bool = False):
        self.path = Path(path)
        self.partial = partial_path(self.path)
        self._lock_path = self.path.with_name(f".{self.path.name}.lock")
        self._reserve = self.path.with_name(f".{self.path.name}.reserve")
        self._fd: int | None = None
        if self.path.is_dir():
            raise IsADirectoryError(f"{self.path} is a folder: give a file name for the result")
        refuse_existing(self.path, "--out", overwrite)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock()

    def _lock(self) -> None:
        while True:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise DestinationBusy(
                    errno.EBUSY, f"another process (pid {holder}) is writing {self.path}: wait "
                    "for it to finish or choose another --out") from None
            # The lock file may have been removed (and a new one made) by the writer that
            # held it while this one waited for it: a lock on a removed file locks nothing.
            if os.path.exists(self._lock_path) and \
                    os.stat(self._lock_path).st_ino == os.fstat(fd).st_ino:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def hold_back_space(self) -> None:
        """Set `RESERVE_BYTES` aside (`give_back_space` frees them for the file's last writes).

        Raises
        ------
        OSError
            When the disk has not even that much free (ENOSPC), naming the file.
        """
        try:
            fd = os.open(self._reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError as err:
            self._reserve.unlink(missing_ok=True)
            if err.errno != errno.ENOSPC:
                raise
            raise OSError(errno.ENOSPC, f"no room to write {self.path}: "
                          f"{human_bytes(free_bytes(self.path))} free on its disk") from None

    def give_back_space(self) -> None:
        """Free the space `hold_back_space` set aside."""
        self._reserve.unlink(missing_ok=True)

    def release(self) -> None:
        """Give up the claim (the lock file goes too)."""
        self.give_back_space()
        if self._fd is not None:
            # Removed while still locked: a writer that opened it meanwhile sees that it
            # was removed once it gets the lock, and makes a new one (`_lock`).
            self._lock_path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Destination({str(self.path)!r})"


def refuse_existing(path: str | os.PathLike, option: str, overwrite: bool = False) -> None:
    """Refuse an existing ``path`` (given as ``option``) unless ``overwrite``.

    Raises
    ------
    DestinationExists
        Naming the file, ``--overwrite`` and ``option``.
    """
    if not overwrite and Path(path).exists():
        raise DestinationExists(
            f"{path} exists: pass --overwrite (Python: overwrite=True) to replace it once the "
            f"new file is complete, or choose another {option}")


def claim(out: str | os.PathLike | Destination, overwrite: bool = False) -> tuple[Destination, bool]:
    """``out`` as a claimed `Destination`, and whether the caller claimed it here (and so
    releases it)."""
    if isinstance(out, Destination):
        return out, False
    return Destination(out, overwrite), True


__all__ = ["Destination", "DestinationBusy", "DestinationExists", "RESERVE_BYTES", "claim",
           "refuse_existing",
           "free_bytes", "human_bytes", "partial_path"]
