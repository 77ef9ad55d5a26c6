"""``aare-lab`` run as a subprocess, its output read line by line with timeouts."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parents[1]


class CliProcess:
    """``python -m aare_lab ARGS`` with stdout and stderr merged and collected.

    Killed at `close` (or the end of a ``with`` block) if it is still running.
    """

    def __init__(self, *args: str, cwd: Path | None = None):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
        # SIGINT as from a terminal: a test run started in the background (nohup, a CI
        # job) ignores it, and the child would inherit that.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aare_lab", *args], cwd=cwd, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.lines: list[str] = []
        self._new: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            self._new.put(line)

    @property
    def output(self) -> str:
        """Everything printed so far."""
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """Wait for a line matching ``pattern`` (among all lines printed so far)."""
        regex = re.compile(pattern)
        for line in list(self.lines):
            if found := regex.search(line):
                return found
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                break
            if found := regex.search(line):
                return found
        raise TimeoutError(f"no line matching {pattern!r} within {timeout} s; output:\n"
                           f"{self.output}")

    def signal(self, number: signal.Signals) -> None:
        """Send a signal to the process."""
        self.process.send_signal(number)

    def wait(self, timeout: float) -> int:
        """The exit code, once the process has ended within ``timeout`` seconds."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"still running after {timeout} s; output:\n"
                               f"{self.output}") from None

    def close(self) -> None:
        """Kill the process if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
