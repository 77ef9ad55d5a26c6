"""Store the stills of the notebooks' widget figures: the only outputs the notebooks keep.

Usage: python tools/notebook_stills.py notebooks/01_quickstart.ipynb [...]

Runs each notebook top to bottom (headless, in its folder) and writes it back with the
outputs of its cells tagged ``still`` (PNG copies of a widget's figures, which GitHub and
nbviewer show where the widget itself does not render) and no other outputs; a still's
cell keeps an execution count, which nbval asks of a cell with outputs.
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

TAG = "still"


def store_stills(path: Path) -> int:
    """Run ``path`` and keep only its stills; the number of images stored."""
    notebook = nbformat.read(path, as_version=4)
    ran = nbformat.read(path, as_version=4)
    NotebookClient(ran, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    images = 0
    for cell, done in zip(notebook.cells, ran.cells):
        if cell.cell_type != "code":
            continue
        keep = TAG in cell.metadata.get("tags", [])
        cell.outputs = [o for o in done.outputs if "image/png" in o.get("data", {})] \
            if keep else []
        for output in cell.outputs:
            output.data = {"image/png": output.data["image/png"]}
            output.metadata = {}
        images += len(cell.outputs)
        # nbval refuses outputs of a cell that never ran; a still's cell did.
        cell.execution_count = 1 if cell.outputs else None
    nbformat.write(notebook, path)
    return images


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {store_stills(Path(name))} still(s)")
