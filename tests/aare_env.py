"""Find a Python interpreter that has a given version of PSI's aare package.

aare is an optional dependency, so tests that need it run it in a separate interpreter
(a virtual environment per aare version) rather than in the one running pytest.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path


@functools.cache
def aare_python(version: str) -> str | None:
    """Return the interpreter for aare ``version``, or None when there is none.

    It is ``$AARE_PYTHON_<version with dots as underscores>`` (e.g.
    ``AARE_PYTHON_2026_3_17``), else ``/opt/aare-<version>/bin/python``; None when that
    file is missing or cannot ``import aare``.
    """
    python = (os.environ.get(f"AARE_PYTHON_{version.replace('.', '_')}")
              or f"/opt/aare-{version}/bin/python")
    if not Path(python).is_file():
        return None
    check = subprocess.run([python, "-c", "import aare"], capture_output=True, timeout=120)
    return python if check.returncode == 0 else None
