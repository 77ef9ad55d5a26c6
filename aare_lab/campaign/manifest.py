"""The campaign's manifest: which runs are finished, for which finder spec and inputs.

``DIR/manifest.json`` holds the campaign key (the finder spec, the bins and the peak
asked for) and one entry per run: its row of the table (`aare_lab.campaign.task`) and its
run key, the campaign key with the fingerprints of the run's inputs
(`aare_lab.sources.files.fingerprint`). Only the process that runs the campaign writes it, each
time a run ends, replacing it whole (`aare_lab.storage.atomic.replace_atomically`): interrupted at
any moment, it names only runs whose folders are complete. A run counts as finished when
its entry is ``done`` under the same run key and its folder holds the ``run.json`` of that
key; anything else is done again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from aare_lab.model.spec import FinderSpec
from aare_lab.sources.files import fingerprint
from aare_lab.storage.atomic import replace_atomically

from .runs import Run

MANIFEST = "manifest.json"
#: The file in a run's folder with its row and run key, written last.
RUN_FILE = "run.json"
FORMAT = "aare_lab campaign manifest"
VERSION = 1


def campaign_key(spec: FinderSpec, settings: dict) -> str:
    """The SHA-256 of what fixes every run's results besides its inputs: the spec's result
    attributes (with its label map, where it has one) and ``settings`` (bins, peak)."""
    described = {"spec": spec.attrs, "settings": settings}
    digest = hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode())
    if spec.common_mode is not None and spec.common_mode.label_map is not None:
        digest.update(np.ascontiguousarray(spec.common_mode.label_map).tobytes())
    return digest.hexdigest()


def run_key(key: str, run: Run) -> str | None:
    """The run's key: the campaign key with the run's name and inputs' fingerprints; None
    when an input is missing (never finished)."""
    prints = [fingerprint(source) for source in (run.frames, run.dark, run.pedestal)
              if source is not None]
    if None in prints:
        return None
    return hashlib.sha256("\n".join([key, run.name, *prints]).encode()).hexdigest()


def read_run_file(folder: Path) -> dict | None:
    """A run folder's row, None if there is none."""
    try:
        return json.loads((folder / RUN_FILE).read_text())
    except (OSError, ValueError):
        return None


class Manifest:
    """``DIR/manifest.json``, read at the start and replaced after each run (see the
    module).

    Raises
    ------
    ValueError
        For a ``manifest.json`` that is not a campaign's, naming it.
    """

    def __init__(self, out: str | os.PathLike, key: str):
        self.path = Path(out) / MANIFEST
        self.key = key
        self.runs: dict[str, dict] = {}
        if self.path.exists():
            try:
                held = json.loads(self.path.read_text())
            except ValueError:
                held = None
            if not isinstance(held, dict) or held.get("format") != FORMAT:
                raise ValueError(f"{self.path} is not an aare_lab campaign manifest: give "
                                 "another --out, or remove the file")
            self.runs = held.get("runs", {})

    def finished(self, run: Run, key: str | None) -> bool:
        """Whether ``run`` was found under ``key`` and its folder holds that result."""
        entry = self.runs.get(run.name)
        if key is None or entry is None or entry.get("status") != "done" \
                or entry.get("key") != key:
            return False
        held = read_run_file(self.path.parent / run.name)
        return held is not None and held.get("key") == key

    def record(self, row: dict) -> None:
        """Enter a run's row and write the manifest."""
        self.runs[row["run"]] = row
        text = json.dumps({"format": FORMAT, "version": VERSION, "campaign_key": self.key,
                           "runs": self.runs}, indent=1, sort_keys=True, default=_plain)
        replace_atomically(self.path, lambda path: path.write_text(text))


def _plain(value):
    """NumPy scalars as JSON numbers."""
    return value.item() if isinstance(value, np.generic) else str(value)


__all__ = ["MANIFEST", "RUN_FILE", "Manifest", "campaign_key", "read_run_file", "run_key"]
