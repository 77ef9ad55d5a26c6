"""Browser tests (``@pytest.mark.browser``): a real JupyterLab in Debian's Chromium.

They skip, with the reason, where Playwright, the [lab] extra or Chromium is missing; in
CI (``AARE_LAB_REQUIRE_BROWSER=1``, set by .ci/run) such a skip is a failure (the
``browser_required`` marker, see tests/conftest.py).
``AARE_LAB_SKIP_BROWSER=<reason>`` leaves them out of the collection (tests/conftest.py;
CI does so in the main environment, because it runs them in its ipykernel environments).
"""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lab_harness  # noqa: E402


def pytest_collection_modifyitems(config, items):
    browser = [item for item in items if item.get_closest_marker("browser")]
    if not browser:
        return
    why = lab_harness.missing_requirements()
    required = os.environ.get("AARE_LAB_REQUIRE_BROWSER") == "1"
    for item in browser:
        if why:
            item.add_marker(pytest.mark.skip(reason=f"browser test cannot run: {why}"))
        if required:
            item.add_marker(pytest.mark.browser_required)


@pytest.fixture(scope="session")
def artefacts():
    path = lab_harness.artefacts_dir()
    print(f"\nbrowser test artefacts (screenshots, console and JupyterLab logs): {path}")
    return path


@pytest.fixture(scope="module")
def browser(artefacts):
    # Module-scoped: while sync_playwright is open, the main thread has a running asyncio
    # loop, which would break every later test that starts one (asyncio.run).
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = lab_harness.launch_browser(pw)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def lab(request, artefacts):
    """One temporary JupyterLab per commsOverSubshells mode (session-scoped, indirect)."""
    mode = request.param
    server = lab_harness.LabServer(lab_harness.MODES[mode]).start()
    try:
        yield mode, server
    finally:
        server.stop()
