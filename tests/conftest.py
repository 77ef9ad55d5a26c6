"""Shared test configuration."""

import os

import pytest

# Run by an interpreter with aare (see test_aare_oracle.py), never imported here.
collect_ignore = ["oracle_runner.py"]


def pytest_collection_modifyitems(config, items):
    """In CI (``AARE_LAB_REQUIRE_AARE=1``) an aare oracle test that would skip fails."""
    if os.environ.get("AARE_LAB_REQUIRE_AARE") != "1":
        return
    for item in items:
        if item.get_closest_marker("aare"):
            item.add_marker(pytest.mark.aare_required)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("aare_required"):
        report.outcome = "failed"
        report.longrepr = f"aare oracle required in CI but skipped: {report.longrepr}"
