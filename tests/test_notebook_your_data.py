"""notebooks/00_your_data.ipynb's raw-file cell: it reads slsDetector raw files where aare is
installed and says why it reads nothing elsewhere (CI's notebook environments lack aare, so
nbval runs only the second branch). The data files it reads are those it describes."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from aare_env import aare_python
from test_sources import write_raw

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK = NOTEBOOKS / "00_your_data.ipynb"
AARE_VERSION = "2026.9.30"


def raw_cell() -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    (cell,) = [c for c in cells if c["cell_type"] == "code"
               and "AARE_LAB_RAW_MASTER" in "".join(c["source"])]
    # What the cell takes from the notebook's first cells.
    return "from pathlib import Path\nimport aare_lab\n" + "".join(cell["source"])


def dark_crop() -> np.ndarray:
    with h5py.File(NOTEBOOKS / "data" / "jungfrau_dark.h5") as f:
        return f["dark"][:]


def test_the_data_is_small_and_licensed():
    files = list((NOTEBOOKS / "data").iterdir())
    assert sum(f.stat().st_size for f in files) < 500_000
    assert (NOTEBOOKS / "data" / "LICENSE").read_text().startswith(
        "Mozilla Public License Version 2.0")
    dark = dark_crop()
    with np.load(NOTEBOOKS / "data" / "jungfrau_photons.npz") as f:
        frames, n_added = f["frames"], len(f["truth_x"])
    assert dark.shape == frames.shape == (10, 96, 128) and dark.dtype == frames.dtype == np.uint16
    assert 1000 < n_added < 1300


def test_without_aare_the_raw_cell_says_why_and_reads_nothing(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "aare", None)  # as if aare were not installed
    monkeypatch.setenv("AARE_LAB_RAW_MASTER", str(tmp_path / "run_master_0.json"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(raw_cell(), {})
    assert printed.getvalue().startswith('aare is not installed here: pip install "aare_lab[aare]"')
    assert printed.getvalue().rstrip().endswith("nothing read")


@pytest.mark.aare
def test_with_aare_the_raw_cell_reads_the_raw_files(tmp_path):
    python = aare_python(AARE_VERSION)
    if python is None:
        pytest.skip(f"no Python with aare {AARE_VERSION}: set "
                    f"AARE_PYTHON_{AARE_VERSION.replace('.', '_')} or install it in "
                    f"/opt/aare-{AARE_VERSION}")
    dark = dark_crop()
    master = write_raw(tmp_path, [dark], np.arange(1, 11))  # the crop as slsReceiver writes it
    run = subprocess.run([python, "-c", raw_cell()], capture_output=True, text=True,
                         timeout=120, cwd=NOTEBOOKS,
                         env={**os.environ, "AARE_LAB_RAW_MASTER": str(master),
                              "PYTHONPATH": str(NOTEBOOKS.parent)})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"<RawSource '{master}': 10 frames of 96x128> -> frame shape (96, 128)"
    assert lines[1] == f"frame numbers [1 2 3] pixel (0, 0): {dark[:3, 0, 0]}"
