"""The runs of a campaign: each run's name, its data frames and its dark.

A campaign's runs are given as sources (paths, globs, slsDetector master files,
``file.h5:/dataset``), as a mapping ``name -> source``, or as a CSV table with the columns
``run``, ``frames`` and ``dark`` (or ``pedestal``: a saved pedestal file); paths in a table
are relative to the table's folder.
"""

from __future__ import annotations

import csv
import glob
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aare_lab.sources.files import MASTER, file_of

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Run:
    """One run of a campaign.

    Attributes
    ----------
    name
        The run's name: its folder under the campaign's output and its row in the table.
    frames
        Its data frames, as `aare_lab.sources.open_source` reads them.
    dark
        Its dark frames, trained into its pedestal; None with ``pedestal``.
    pedestal
        A saved pedestal file (`aare_lab.Pedestal.save`) instead of dark frames.
    """

    name: str
    frames: str
    dark: str | None = None
    pedestal: str | None = None


def absolute(source: str | None) -> str | None:
    """``source`` with its file's path made absolute (workers elsewhere, in other folders,
    read the same file)."""
    if source is None:
        return None
    path = file_of(source)
    return os.path.abspath(path) + source[len(path):]


def absolute_run(run: Run) -> Run:
    """``run`` with every input's path made absolute."""
    return Run(run.name, absolute(run.frames), absolute(run.dark), absolute(run.pedestal))


def run_name(source: str) -> str:
    """The name a run takes from its source: the file's stem, ``<prefix>_<index>`` for an
    slsDetector master file, with characters other than letters, digits, ``.``, ``_`` and
    ``-`` replaced by ``_``.

    Examples
    --------
    >>> run_name("beam/run_12_master_3.json"), run_name("scan 1.h5:/entry/data")
    ('run_12_3', 'scan_1')
    """
    path = Path(file_of(source))
    master = MASTER.fullmatch(path.name)
    name = f"{master['prefix']}_{master['index']}" if master else path.stem
    return safe_name(name)


def safe_name(name: str) -> str:
    """``name`` usable as a folder name (never hidden: the campaign's attempts are)."""
    safe = _UNSAFE.sub("_", str(name)).lstrip(".")
    if not safe:
        raise ValueError(f"the run name {name!r} has no letter or digit to name its folder")
    return safe


def _expanded(source) -> list[str]:
    text = os.fspath(source)
    if glob.has_magic(file_of(text)):
        member = text[len(file_of(text)):]
        found = sorted(glob.glob(file_of(text)))
        if not found:
            raise FileNotFoundError(f"no file matches {text!r}: check the pattern")
        return [path + member for path in found]
    return [text]


def read_table(path: str | os.PathLike) -> list[Run]:
    """The runs of a CSV table with the columns ``run``, ``frames`` and ``dark`` or
    ``pedestal`` (either may be empty where the campaign's ``dark`` gives it).

    Raises
    ------
    ValueError
        For a table without ``run`` and ``frames`` columns, naming it.
    """
    path = Path(path)
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    if not rows or not {"run", "frames"} <= set(rows[0]):
        raise ValueError(f"{path} is not a runs table: it needs a header with the columns run, "
                         "frames and dark (or pedestal), and a row per run")

    def resolved(value: str | None) -> str | None:
        value = (value or "").strip()
        if not value:
            return None
        return value if os.path.isabs(file_of(value)) else str(path.parent / value)

    return [Run(safe_name(row["run"]), resolved(row["frames"]), resolved(row.get("dark")),
                resolved(row.get("pedestal"))) for row in rows]


def runs_table(runs) -> list[Run]:
    """The campaign's runs from sources, a mapping ``name -> source``, `Run` objects or a
    CSV table (see the module).

    Raises
    ------
    FileNotFoundError
        For a glob that matches nothing.
    ValueError
        For no runs, or two runs of one name.
    """
    if isinstance(runs, (str, os.PathLike)) and os.fspath(runs).lower().endswith(".csv"):
        table = read_table(runs)
    elif isinstance(runs, (str, os.PathLike)):
        table = [Run(run_name(source), source) for source in _expanded(runs)]
    elif isinstance(runs, Mapping):
        table = [Run(safe_name(name), os.fspath(source)) for name, source in runs.items()]
    else:
        table = []
        for item in runs:
            table.extend([item] if isinstance(item, Run) else runs_table(item))
    if not table:
        raise ValueError("the campaign has no runs: give data files, globs or a runs table")
    seen: dict[str, str] = {}
    for run in table:
        if run.name in seen:
            raise ValueError(f"two runs are named {run.name!r} ({seen[run.name]} and "
                             f"{run.frames}): name them in a runs table (CSV: run, frames, "
                             "dark)")
        seen[run.name] = run.frames
    return table


__all__ = ["Run", "absolute", "absolute_run", "read_table", "run_name", "runs_table",
           "safe_name"]
