"""A test that hangs ends the run, with every thread's stack (tests/hang_guard.py)."""

import os
import subprocess
import sys
import time
from pathlib import Path


def run_pytest(folder: Path, test: str, hang_s: str) -> subprocess.CompletedProcess:
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_case.py").write_text(f"import time\n\n\n{test}\n")
    env = {**os.environ, "AARE_LAB_TEST_HANG_S": hang_s,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent),
                                          os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "hang_guard", "-p",
                           "no:cacheprovider", "test_case.py"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_hanging_test_ends_the_run_with_its_stack(tmp_path):
    start = time.monotonic()
    run = run_pytest(tmp_path, "def test_waits_forever():\n    time.sleep(600)", "2")
    assert time.monotonic() - start < 60
    assert run.returncode != 0
    assert "Timeout (0:00:02)!" in run.stderr
    assert "test_waits_forever" in run.stderr


def test_a_test_within_the_limit_is_not_disturbed(tmp_path):
    run = run_pytest(tmp_path, "def test_quick():\n    time.sleep(0.2)", "30")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
