"""Every widget a notebook shows has a still of its figure stored in the notebook (for
readers without a kernel: GitHub, nbviewer), and a still is all a notebook stores."""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
WIDGET = re.compile(r"^(\w+) = aare_lab\.widgets\.\w+\(", re.M)
STILL = re.compile(r"^still\((\w+)\)$", re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_widget_has_a_stored_still(path):
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "code"]
    widgets, stills = [], []
    for cell in cells:
        source = "".join(cell["source"])
        widgets += WIDGET.findall(source)
        if "still" in cell.get("metadata", {}).get("tags", []):
            shown = STILL.findall(source)
            assert shown, f"{path.name}: a cell tagged still shows no widget"
            assert any("image/png" in o.get("data", {}) for o in cell["outputs"]), \
                f"{path.name}: the still of {shown} is not stored " \
                "(python tools/notebook_stills.py)"
            stills += shown
        else:
            assert not cell.get("outputs"), f"{path.name}: outputs other than stills stored"
    assert sorted(widgets) == sorted(stills), (path.name, widgets, stills)
