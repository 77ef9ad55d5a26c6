"""What every benchmark records beside its numbers: the commit, the host, and the file.

Each script writes one JSON record to ``benchmarks/results/<benchmark>_<UTC time>.json``
(`write_record`) with the tree's commit (`git_commit`) and the host's CPU (`cpu_name`).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The tree these scripts belong to.
TREE = HERE.parent


def git_commit(tree: Path = TREE) -> str:
    """HEAD of ``tree``, with ``+dirty`` when its working tree differs from it; "unknown"
    where ``tree`` is not the root of a git checkout.

    ``$AARE_LAB_COMMIT`` overrides it for this scripts' tree, for copies whose ``.git`` is
    missing or not the tree's (the GPU machine's copy may hold an older one: set it there).
    """
    if Path(tree).resolve() == TREE and os.environ.get("AARE_LAB_COMMIT"):
        return os.environ["AARE_LAB_COMMIT"]
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=tree,
                             capture_output=True, text=True, check=True).stdout.strip()
        if Path(top).resolve() != Path(tree).resolve():
            # A folder inside another checkout (a `git archive` of some commit): git would
            # name that checkout's HEAD.
            return "unknown"
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=tree, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty.strip() else "")


def cpu_name() -> str:
    """The host CPU's model name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def summary(seconds, n_frames) -> dict:
    """Frames per second of repeated timings: the best and the median."""
    return {"best_fps": n_frames / min(seconds),
            "median_fps": n_frames / statistics.median(seconds)}


def write_record(record: dict, folder: Path) -> None:
    """Write a benchmark record as ``<benchmark>_<UTC time>.json`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['benchmark']}_{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps(record, indent=1))
    print(f"wrote {path}")
