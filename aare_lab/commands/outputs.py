"""A command's output files checked against its inputs, and against the files already
there, before any work is done."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from aare_lab.sources.files import file_of
from aare_lab.storage.destination import partial_path, refuse_existing

from .options import UsageError


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (one that exists: by its inode, so links count)."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def check_outputs(outputs: Mapping[str, os.PathLike | None],
                  inputs: Mapping[str, str | os.PathLike | None]) -> None:
    """Refuse an output that is one of the inputs, or another output, by its option.

    Parameters
    ----------
    outputs
        Output files by option (None: not given); a result's partial file
        (`aare_lab.storage.destination.partial_path`) counts as the output too.
    inputs
        Input files or source specs by option (None: not given).

    Raises
    ------
    UsageError
        Naming both options and the file.
    """
    given_inputs = {option: Path(file_of(spec)) for option, spec in inputs.items()
                    if spec is not None}
    seen: dict[str, Path] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        path = Path(path)
        for name in (path, partial_path(path)):
            for other, source in given_inputs.items():
                if same_file(name, source):
                    raise UsageError(f"{option} {path} would overwrite the input {other} "
                                     f"{source}: choose another {option}")
        for other, earlier in seen.items():
            if same_file(path, earlier):
                raise UsageError(f"{option} and {other} are the same file, {path}: give each "
                                 "its own name")
        seen[option] = path


def refuse_existing_outputs(outputs: Mapping[str, os.PathLike | None], overwrite: bool) -> None:
    """Refuse an output file that exists, unless ``overwrite`` (``--overwrite``) was given.

    For the outputs written whole (`aare_lab.storage.netcdf.write_netcdf`, which replaces
    a file in one step once the new one is complete); a result written as it is found is
    checked by its `aare_lab.storage.destination.Destination`.

    Parameters
    ----------
    outputs
        Output files by option (None: not given).
    overwrite
        Whether existing files may be replaced.

    Raises
    ------
    aare_lab.storage.destination.DestinationExists
        Naming the first file that exists and its option.
    """
    for option, path in outputs.items():
        if path is not None:
            refuse_existing(path, option, overwrite)


__all__ = ["check_outputs", "refuse_existing_outputs", "same_file"]
