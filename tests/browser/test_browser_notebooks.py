"""Every notebook, run in a real JupyterLab in headless Chromium, with
``commsOverSubshells`` on (JupyterLab's default, used with ipykernel >= 7) and off.

The notebooks are ``notebooks/*.ipynb`` (or ``$AARE_LAB_BROWSER_NOTEBOOKS``; the
stand-in under ``fixtures/`` while there are none); what each one must show is in
its metadata, see ``lab_harness.py``. ``AARE_LAB_BROWSER_MODES`` (comma-separated,
from ``subshells-on``/``subshells-off``) narrows the modes. Screenshots go to
``$ARTEFACTS`` (default /tmp/aare_lab_browser_artefacts).
"""

import os

import lab_harness
import pytest

MODES = [m for m in os.environ.get("AARE_LAB_BROWSER_MODES", ",".join(lab_harness.MODES)).split(",") if m]
NOTEBOOKS = lab_harness.notebooks_to_check()
REPO = lab_harness.REPO


def _id(path):
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return path.name


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("lab", MODES, indirect=True)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_id)
def test_notebook_in_jupyterlab(lab, browser, notebook):
    mode, server = lab
    report = lab_harness.check_notebook(browser, server, notebook, mode)
    print(report.summary())
    assert not report.problems, report.summary()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("lab", MODES[:1], indirect=True)
def test_harness_catches_a_broken_notebook(lab, browser):
    """The checks are not vacuous: a raising cell, a control that leaves the figure alone
    and an output wider than the notebook are all reported."""
    mode, server = lab
    report = lab_harness.check_notebook(browser, server, lab_harness.FIXTURES / "broken_notebook.ipynb", mode)
    print(report.summary())
    text = "\n".join(report.problems)
    assert "ValueError: deliberate failure" in text, report.summary()
    assert "did not change" in text, report.summary()
    assert "cell 3's output is" in text and "clipped on the right" in text, report.summary()
    assert report.canvases == 1 and report.controls == 1, report.summary()


def test_notebook_metadata_parses():
    """Every notebook's browser_check declaration is well formed (runs without a browser)."""
    known = {"checks", "control", "selector", "description", "index", "action", "keys", "value",
             "figure", "change_timeout_s", "settle_s", "run_timeout_s", "canvases", "controls", "allow_stderr"}
    for nb in NOTEBOOKS + [lab_harness.FIXTURES / "broken_notebook.ipynb"]:
        spec = lab_harness.notebook_spec(nb)
        unknown = set(spec) - known
        assert not unknown, f"{nb.name}: unknown browser_check keys {unknown}"
        for check in spec["checks"]:
            assert {"control", "selector", "description"} & set(check), f"{nb.name}: {check} names no control"
            assert set(check) <= known, f"{nb.name}: unknown keys in {check}"
            assert check.get("action", "auto") in {"auto", "keys", "select", "click", "fill"}, check
        if nb.name in lab_harness.MUST_DECLARE_CONTROL:
            assert spec["checks"], f"{nb.name} must declare a control whose move changes the figure"
