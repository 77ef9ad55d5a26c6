"""Shared test configuration."""

import os

import pytest
from hang_guard import (  # noqa: F401  (a hook and a fixture for every test)
    _end_the_run_if_this_test_hangs,
    pytest_configure,
    pytest_unconfigure,
)

# Run by an interpreter with aare (see test_aare_oracle.py), never imported here.
collect_ignore = ["oracle_runner.py", "clusterfile_runner.py"]
# CI runs the browser tests in its ipykernel virtualenvs (.ci/lab_checks.sh), not in the
# README's test command, so there they are not collected at all rather than skipped.
if os.environ.get("AARE_LAB_SKIP_BROWSER"):
    collect_ignore.append("browser")


@pytest.fixture(params=[False, True], ids=["png", "ipympl"])
def interactive(request):
    """Figures as static PNGs (False) and as ipympl canvases (True)."""
    return request.param


#: Tests that must not run beside each other, by marker, and the pytest-xdist group that
#: runs them one after the other on one worker (``--dist loadgroup``, pyproject.toml): the
#: real slsReceiver and virtual detector servers (each a shared-memory detector id and
#: ports probed free, then taken), and JupyterLab in Chromium (a server each on a probed
#: port, one artefacts folder, and a minute or more of both cores).
SERIAL_GROUPS = {"slsdet": "slsreceiver", "browser": "browser"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Skip GPU tests, with the reason, where the cuda finder cannot run, and the kernel's
    compile tests where NVRTC is not installed; in CI (``AARE_LAB_REQUIRE_AARE=1``,
    ``AARE_LAB_REQUIRE_NVRTC=1``) an aare oracle or compile test that would skip fails, and
    so does an slsReceiver test wherever ``AARE_LAB_SLSDET`` names the binaries. Tests of
    `SERIAL_GROUPS` get their ``xdist_group``."""
    for item in items:
        for marker, group in SERIAL_GROUPS.items():
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.xdist_group(group))
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_tests:
        from aare_lab.gpu import GpuUnavailable, cupy_or_raise

        try:
            cupy_or_raise()
        except GpuUnavailable as err:
            skip = pytest.mark.skip(reason=f"no usable GPU: {err}")
            for item in gpu_tests:
                item.add_marker(skip)
    nvrtc_tests = [item for item in items if item.get_closest_marker("nvrtc")]
    if nvrtc_tests:
        from aare_lab.gpu.nvrtc import NvrtcUnavailable, library_path

        required = os.environ.get("AARE_LAB_REQUIRE_NVRTC") == "1"
        try:
            library_path()
            missing = None
        except NvrtcUnavailable as err:
            missing = pytest.mark.skip(reason=f"cannot compile the kernel here: {err}")
        for item in nvrtc_tests:
            if required:
                item.add_marker(pytest.mark.nvrtc_required)
            if missing:
                item.add_marker(missing)
    if os.environ.get("AARE_LAB_SLSDET"):
        for item in items:
            if item.get_closest_marker("slsdet"):
                item.add_marker(pytest.mark.slsdet_required)
    if os.environ.get("AARE_LAB_REQUIRE_AARE") != "1":
        return
    for item in items:
        if item.get_closest_marker("aare"):
            item.add_marker(pytest.mark.aare_required)


#: Markers with which a skip is a failure, and what the failure says (CI sets them where
#: a test must run: the aare oracles, the browser tests).
REQUIRED = {"aare_required": "aare oracle required in CI but skipped",
            "browser_required": "browser test required in CI (AARE_LAB_REQUIRE_BROWSER=1) "
                                "but skipped",
            "slsdet_required": "slsReceiver test required (AARE_LAB_SLSDET is set) but skipped",
            "nvrtc_required": "kernel compile test required (AARE_LAB_REQUIRE_NVRTC=1) but "
                              "skipped"}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped:
        return
    for marker, failure in REQUIRED.items():
        if item.get_closest_marker(marker):
            report.outcome = "failed"
            report.longrepr = f"{failure}: {report.longrepr}"
            return
