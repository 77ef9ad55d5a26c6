"""A small disk of its own for a test: a tmpfs mounted for it (the machines here run tests as
root), so that a full disk is a real one."""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(folder: Path, size: str):
    """A tmpfs of ``size`` (``"12m"``) mounted at ``folder`` for the block.

    Where mounting is not allowed the test is skipped with the reason, except in CI
    (``CI`` set), where a full-disk test that cannot run is a failure.
    """
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode:
        why = f"cannot mount a small tmpfs here ({done.stderr.strip()}); run as root"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
