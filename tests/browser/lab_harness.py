"""Drive a real JupyterLab in Debian's headless Chromium through Playwright.

Used by ``test_browser_notebooks.py``; also runnable by hand on one notebook::

    python tests/browser/lab_harness.py notebooks/01_quickstart.ipynb [--mode disabled]

A temporary JupyterLab (loopback, free port, no token, its own config/data/settings/
workspace/runtime dirs so that nothing of the user's leaks in) is started per
``commsOverSubshells`` mode. For a notebook the harness opens it, runs all cells, waits
for the kernel to go idle, then checks that no cell shows an error, that the ipympl
canvas and the ipywidgets controls rendered, and that moving each control that the
notebook declares changes the figure's pixels.

Notebook authors declare the controls in the notebook's metadata (Edit → Notebook
metadata, or in the JSON)::

    "aare_lab": {
      "browser_check": {
        "checks": [
          {"control": "n_sigma"},                              # a widget's description
          {"control": ".widget-dropdown select", "action": "select", "figure": 1},
          {"control": "Run", "action": "click"}
        ],
        "run_timeout_s": 300,          # optional: Run All must finish within this
        "canvases": 1, "controls": 1,  # optional: minimum counts (0 to not require)
        "allow_stderr": ["regex", ...] # optional: stderr lines matching these are no error
      }
    }

A single check may stand directly under ``browser_check`` (``{"control": ...}``).
Keys of a check:

``control``
    a CSS selector, or the text of a widget's description (its label). A selector that
    matches nothing is then tried as a description. ``selector``/``description``
    say which it is explicitly. ``index`` picks the n-th match (default 0).
``action``
    ``auto`` (default: by widget kind), ``keys`` (focus the slider handle or the control
    and press ``keys``, default three ArrowRight), ``select`` (a ``<select>``: the next
    option, or ``value``), ``click``, ``fill`` (type ``value`` and press Enter).
``figure``
    the index of the ipympl canvas (in page order) that must change; default: any.
``change_timeout_s``
    how long to wait for the pixels to change (default 30).
``settle_s``
    before moving the control the figures must stay unchanged this long (default 1),
    so that a figure that redraws by itself (a live stream) cannot pass the check.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHROMIUM = os.environ.get("AARE_LAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# JupyterLab's setting (plugin @jupyterlab/apputils-extension:kernels-settings, key
# commsOverSubshells); "perCommTarget" is the default, used by ipykernel >= 7.
SUBSHELL_PLUGIN = "@jupyterlab/apputils-extension:kernels-settings"
SUBSHELL_KEY = "commsOverSubshells"
MODES = {"subshells-on": "perCommTarget", "subshells-off": "disabled"}
DEFAULT_ARTEFACTS = "/tmp/aare_lab_browser_artefacts"
# Notebooks whose figure must follow a control (issue 9): they must declare a check.
MUST_DECLARE_CONTROL = {"01_quickstart.ipynb", "04_beamtime_live_spectra.ipynb",
                        "06_subpixel_imaging.ipynb", "07_gain_calibration.ipynb"}

CANVAS_SELECTOR = ".jupyter-matplotlib-canvas-div canvas"  # per figure: the image, then the overlay
CANVAS_DIV_SELECTOR = ".jupyter-matplotlib-canvas-div"
#: Seconds an empty canvas is given, after the kernel went idle, to receive its image.
CANVAS_GRACE_S = 20.0
FIGURE_SELECTOR = ".jupyter-matplotlib"
CONTROL_SELECTOR = ", ".join(
    f".jupyter-widgets{kind}"
    for kind in (
        ".widget-slider",
        ".widget-dropdown",
        ".widget-toggle-buttons",
        ".widget-checkbox",
        ".widget-text",
        ".widget-inttext",
        ".widget-floattext",
        ".widget-select",
        ".widget-button",
        ".widget-toggle-button",
        ".widget-play",
    )
)
#: Outputs wider than the notebook, which JupyterLab clips at its right edge (a figure wider
#: than the page, a table that sets its box's width and with it where the text around it
#: wraps): per cell, its index, the widest element's width, the room and what it is.
CLIPPED_OUTPUTS_JS = """() => {
  const found = [];
  document.querySelectorAll('.jp-Notebook .jp-Cell').forEach((cell, index) => {
    for (const out of cell.querySelectorAll('.jp-OutputArea-output')) {
      if (out.scrollWidth <= out.clientWidth + 2) continue;
      let widest = out, width = 0;
      for (const el of out.querySelectorAll('*')) {
        const w = el.getBoundingClientRect().width;
        if (w > width) { widest = el; width = w; }
      }
      const text = (widest.innerText || '').trim().slice(0, 60);
      found.push([index, Math.round(Math.max(width, out.scrollWidth)), out.clientWidth,
                  `<${widest.tagName.toLowerCase()} class="${widest.className}">` +
                  (text ? ` "${text}"` : '')]);
      break;
    }
  });
  return found;
}"""
ERROR_TEXT = re.compile(r"Traceback|\b[A-Z]\w*Error\b|^Error\b", re.M)


class HarnessError(AssertionError):
    """A notebook failed a browser check; the message says which and why."""


def artefacts_dir() -> Path:
    path = Path(os.environ.get("ARTEFACTS") or DEFAULT_ARTEFACTS)
    path.mkdir(parents=True, exist_ok=True)
    return path


def notebooks_to_check() -> list[Path]:
    """``$AARE_LAB_BROWSER_NOTEBOOKS`` (paths, os.pathsep-separated), else
    ``notebooks/*.ipynb``, else the stand-in fixture."""
    listed = os.environ.get("AARE_LAB_BROWSER_NOTEBOOKS")
    if listed:
        return [Path(p).resolve() for p in listed.split(os.pathsep) if p]
    found = sorted((REPO / "notebooks").glob("*.ipynb"))
    return found or [FIXTURES / "standin_widgets.ipynb"]


def missing_requirements() -> str | None:
    """Why the browser test cannot run here, or None."""
    why = []
    for module, extra in (
        ("playwright", "playwright (the [test] extra)"),
        ("jupyterlab", "jupyterlab (the [lab] extra)"),
        ("ipywidgets", "ipywidgets (the [lab] extra)"),
        ("ipympl", "ipympl (the [lab] extra)"),
        ("ipykernel", "ipykernel"),
    ):
        try:
            __import__(module)
        except ImportError:
            why.append(extra)
    if why:
        why = ["not installed: " + ", ".join(why) + ' (pip install -e ".[test,lab]")']
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        why.append(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set AARE_LAB_CHROMIUM)")
    return "; ".join(why) or None


def kernel_label() -> str:
    import ipykernel

    return f"ipykernel{ipykernel.__version__.split('.')[0]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def notebook_spec(path: Path) -> dict[str, Any]:
    meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    spec = dict((meta.get("aare_lab") or {}).get("browser_check") or {})
    checks = spec.pop("checks", None)
    if checks is None:
        checks = [spec] if ("control" in spec or "selector" in spec or "description" in spec) else []
    spec["checks"] = [dict(c) for c in checks]
    return spec


# --------------------------------------------------------------------------- server


class LabServer:
    """A throwaway JupyterLab on 127.0.0.1 with ``commsOverSubshells`` set to ``subshells``.

    It serves a temporary root: ``stage`` copies a notebook's folder there, so that
    neither JupyterLab nor the notebook writes into the work tree."""

    def __init__(self, subshells: str, python: str = sys.executable):
        self.subshells = subshells
        self.python = python
        self.tmp = Path(tempfile.mkdtemp(prefix="aare_lab_lab_"))
        self.root = self.tmp / "root"
        self.root.mkdir()
        self._staged: dict[Path, Path] = {}
        self.page = None
        self.on_stop: list = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.tmp / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    def _write_settings(self) -> Path:
        settings = self.tmp / "user-settings"
        values = {
            SUBSHELL_PLUGIN: {SUBSHELL_KEY: self.subshells},
            # Every cell in the DOM, so that the checks see all outputs.
            "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
            # Never write outputs back into a notebook.
            "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
            # No news or update requests (the network is closed) and no toast asking.
            "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
        }
        for plugin, value in values.items():
            package, name = plugin.split(":")
            target = settings / package / f"{name}.jupyterlab-settings"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(value, indent=2), encoding="utf-8")
        return settings

    def start(self, timeout: float = 120.0) -> "LabServer":
        settings = self._write_settings()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        env.pop("MPLBACKEND", None)  # a kernel picks its own backend, as a user's does
        env.pop("IPYTHONDIR", None)
        for var, sub in (
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_DATA_DIR", "data"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("IPYTHONDIR", "ipython"),
            ("MPLCONFIGDIR", "mpl"),
        ):
            (self.tmp / sub).mkdir(exist_ok=True)
            env[var] = str(self.tmp / sub)
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
        env["JUPYTERLAB_WORKSPACES_DIR"] = str(self.tmp / "workspaces")
        env["PYTHONUNBUFFERED"] = "1"
        cmd = [
            self.python, "-m", "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={self.root}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.tmp / 'workspaces'}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--ServerApp.jpserver_extensions={'jupyter_lsp': False}",
            "--LabApp.extension_manager=readonly",
            "--MappingKernelManager.cull_idle_timeout=0",
            "--ServerApp.allow_root=True",
        ]
        log = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            cmd, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        self._check_kernelspec()
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def _check_kernelspec(self):
        """The notebooks' kernel "python3" must be this environment's interpreter."""
        with urllib.request.urlopen(f"{self.url}/api/kernelspecs", timeout=10) as r:
            specs = json.load(r)
        argv = specs["kernelspecs"]["python3"]["spec"]["argv"]
        exe = argv[0]
        if exe not in ("python", "python3") and Path(exe).resolve() != Path(self.python).resolve():
            raise RuntimeError(f"kernel python3 runs {exe}, not {self.python}")

    def stage(self, notebook: Path) -> Path:
        """The copy of ``notebook`` (with the rest of its folder) under the served root."""
        folder = notebook.resolve().parent
        if folder not in self._staged:
            try:
                rel = folder.relative_to(REPO)
            except ValueError:
                rel = Path(folder.name)
            target = self.root / rel
            shutil.copytree(
                folder, target, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"),
                dirs_exist_ok=True,
            )
            self._staged[folder] = target
        return self._staged[folder] / notebook.name

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.url}{path}", method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self):
        with contextlib.suppress(OSError):
            for session in self.api("/api/sessions"):
                self.api(f"/api/sessions/{session['id']}", method="DELETE")

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        for call in self.on_stop:
            with contextlib.suppress(Exception):
                call()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        keep = artefacts_dir() / f"jupyterlab__{kernel_label()}__{self.subshells}.log"
        with contextlib.suppress(OSError):
            shutil.copyfile(self.log_path, keep)
        shutil.rmtree(self.tmp, ignore_errors=True)


# --------------------------------------------------------------------------- browser


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


# Page-side helpers. `window.jupyterapp` is there through --LabApp.expose_app_in_browser.
_JS_STATE = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = panel.content.widgets.map((cell, i) => {
    const m = cell.model;
    const out = {index: i, type: m.type, source: m.sharedModel.getSource()};
    if (m.type === 'code') {
      out.count = m.executionCount;
      out.prompt = (cell.node.querySelector('.jp-InputPrompt') || {}).textContent || '';
      out.outputs = [];
      for (let k = 0; k < m.outputs.length; k++) {
        const o = m.outputs.get(k).toJSON();
        out.outputs.push({type: o.output_type, name: o.name || null, ename: o.ename || null,
                          evalue: o.evalue || null,
                          text: o.text ? (Array.isArray(o.text) ? o.text.join('') : o.text) : null,
                          mimes: o.data ? Object.keys(o.data) : []});
      }
    }
    return out;
  });
  return {
    ready: panel.context.isReady && panel.sessionContext.isReady,
    kernelStatus: kernel ? kernel.status : null,
    connection: kernel ? kernel.connectionStatus : null,
    supportsSubshells: kernel ? !!kernel.supportsSubshells : null,
    commsOverSubshells: app.serviceManager.kernels.commsOverSubshells,
    kernelName: kernel ? kernel.name : null,
    cells,
  };
}"""

# One entry per ipympl figure: its canvases (the image, then the rubber-band overlay).
_JS_CANVASES = """(selector) => Array.from(document.querySelectorAll(selector)).map(div =>
  Array.from(div.querySelectorAll('canvas')).map(c => {
    try { return {w: c.width, h: c.height, url: c.toDataURL('image/png')}; }
    catch (e) { return {w: c.width, h: c.height, url: null, error: String(e)}; }
  }))"""


@dataclasses.dataclass
class CanvasShot:
    width: int
    height: int
    digest: str
    colours: int

    @property
    def looks_empty(self) -> bool:
        """Too small, or fewer than 3 colours: no figure drawn into it yet."""
        return self.width < 10 or self.height < 10 or self.colours < 3

    @classmethod
    def from_js(cls, items: list[dict]) -> "CanvasShot":
        """A figure's canvases: the digest covers all their pixels; the size and the
        number of colours are those of the image canvas."""
        from PIL import Image

        digest = hashlib.sha256()
        colours = 0
        for k, item in enumerate(items):
            url = item.get("url") or ""
            raw = base64.b64decode(url.split(",", 1)[1]) if "," in url else b""
            if not raw:
                digest.update(b"unreadable")
                continue
            img = Image.open(io.BytesIO(raw)).convert("RGBA")
            digest.update(f"{img.size}".encode() + img.tobytes())
            if k == 0:
                colours = len(img.convert("RGB").getcolors(maxcolors=1 << 24) or [])
        first = items[0] if items else {"w": 0, "h": 0}
        return cls(first["w"], first["h"], digest.hexdigest(), colours)


@dataclasses.dataclass
class NotebookReport:
    notebook: str
    mode: str
    kernel: str
    seconds: float = 0.0
    supports_subshells: bool | None = None
    comms_over_subshells: str | None = None
    canvases: int = 0
    controls: int = 0
    checks: list = dataclasses.field(default_factory=list)
    problems: list = dataclasses.field(default_factory=list)
    screenshots: list = dataclasses.field(default_factory=list)
    steps: dict = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        head = (
            f"{self.notebook} [{self.kernel}, {self.mode}: commsOverSubshells={self.comms_over_subshells}, "
            f"kernel subshells={self.supports_subshells}] {self.seconds:.1f} s, "
            f"{self.canvases} canvas(es), {self.controls} control(s); "
            + ", ".join(f"{k} {v:.1f} s" for k, v in self.steps.items())
        )
        lines = [head] + [f"  check: {c}" for c in self.checks] + [f"  PROBLEM: {p}" for p in self.problems]
        lines += [f"  screenshot: {s}" for s in self.screenshots]
        return "\n".join(lines)


class NotebookRun:
    """One notebook in one browser page of a running LabServer."""

    def __init__(self, page, server: LabServer, notebook: Path, mode: str):
        self.page = page
        self.server = server
        self.notebook = notebook
        self.mode = mode
        self.spec = notebook_spec(notebook)
        self.name = f"{notebook.stem}__{kernel_label()}__{mode}"
        self.report = NotebookReport(notebook.name, mode, kernel_label())
        self.console: list[str] = []
        self._on_console = lambda m: self.console.append(f"[{m.type}] {m.text}")
        self._on_error = lambda e: self.console.append(f"[pageerror] {e}")
        page.on("console", self._on_console)
        page.on("pageerror", self._on_error)

    # -- helpers
    def state(self) -> dict:
        return self.page.evaluate(_JS_STATE)

    def wait_until(self, predicate, timeout: float, what: str, poll: float = 0.25):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(poll)
        raise HarnessError(f"{self.notebook.name} [{self.mode}]: timed out after {timeout:.0f} s waiting for {what}")

    def screenshot(self, suffix: str, element=None) -> Path:
        path = artefacts_dir() / f"{self.name}{suffix}.png"
        (element or self.page).screenshot(path=str(path))
        self.report.screenshots.append(str(path))
        return path

    def canvases(self) -> list[CanvasShot]:
        return [CanvasShot.from_js(c) for c in self.page.evaluate(_JS_CANVASES, CANVAS_DIV_SELECTOR)]

    def wait_idle(self, timeout: float, what: str, started=None):
        """Idle kernel, no cell queued or running ([*]), the same state twice in a row;
        with ``started`` (a predicate on the state), only once it has held."""
        previous = {}
        seen = {"started": started is None}

        def settled():
            s = self.state()
            if s and not seen["started"]:
                seen["started"] = bool(started(s))
                return False
            if not s or not s["ready"] or s["kernelStatus"] != "idle":
                previous.clear()
                return False
            busy = [c for c in s["cells"] if c["type"] == "code" and "*" in c["prompt"]]
            if busy:
                previous.clear()
                return False
            key = json.dumps([(c.get("count"), len(c.get("outputs") or [])) for c in s["cells"]])
            if previous.get("key") == key:
                return s
            previous["key"] = key
            return False

        return self.wait_until(settled, timeout, what, poll=0.5)

    # -- steps
    def open(self, timeout: float = 90):
        """Load JupyterLab in the page once (a fresh workspace), then open the notebook
        in it as File → Open does (the lab's docmanager:open command)."""
        rel = self.server.stage(self.notebook).relative_to(self.server.root).as_posix()
        self.page.set_viewport_size({"width": 1400, "height": 1000})
        if not self.page.url.startswith(self.server.url):
            self.page.goto(f"{self.server.url}/lab?reset", wait_until="domcontentloaded", timeout=timeout * 1000)
            self.page.wait_for_function("() => !!window.jupyterapp", timeout=timeout * 1000)
            # Restored: the workspace reset is done (it would close a tab opened before).
            self.page.evaluate("async () => { await window.jupyterapp.restored; }")
            self.page.wait_for_function(
                "() => !location.search.includes('reset') && window.jupyterapp.commands.hasCommand('docmanager:open')",
                timeout=timeout * 1000,
            )
        self.page.evaluate(
            "path => window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'})", rel
        )
        self.page.wait_for_function(
            "path => { const w = window.jupyterapp.shell.currentWidget;"
            " return w && w.context && w.context.path === path && w.node.querySelector('.jp-Cell'); }",
            arg=rel,
            timeout=timeout * 1000,
        )
        s = self.wait_until(
            lambda: (st := self.state()) and st["ready"] and st["kernelStatus"] == "idle" and st,
            timeout,
            "the notebook's kernel to start",
        )
        self.report.supports_subshells = s["supportsSubshells"]
        self.report.comms_over_subshells = s["commsOverSubshells"]
        expected = MODES[self.mode]
        if s["commsOverSubshells"] != expected:
            raise HarnessError(
                f"JupyterLab runs with commsOverSubshells={s['commsOverSubshells']!r}, not {expected!r}: "
                "the temporary settings did not take"
            )

    def run_all(self):
        """Run → Run All Cells, through the menu as a person would."""
        self.page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        menubar = self.page.locator("#jp-menu-panel, .lm-MenuBar").first
        menubar.get_by_text("Run", exact=True).click()
        self.page.locator(".lm-Menu-content").get_by_text("Run All Cells", exact=True).click()

    def run_timeout(self) -> float:
        return float(self.spec.get("run_timeout_s") or os.environ.get("AARE_LAB_BROWSER_RUN_TIMEOUT") or 300)

    def collect_problems(self, s: dict, when: str) -> list[str]:
        problems = []
        allow = [re.compile(p) for p in self.spec.get("allow_stderr", [])]
        for c in s["cells"]:
            if c["type"] != "code" or not c["source"].strip():
                continue
            where = f"cell {c['index']} ({when})"
            if c.get("count") is None:
                problems.append(f"{where} did not run")
            for o in c["outputs"]:
                if o["type"] == "error":
                    problems.append(f"{where}: {o['ename']}: {o['evalue']}")
                elif o["type"] == "stream" and o["name"] == "stderr" and o["text"]:
                    bad = [
                        line for line in o["text"].splitlines()
                        if ERROR_TEXT.search(line) and not any(a.search(line) for a in allow)
                    ]
                    if bad:
                        problems.append(f"{where} stderr: " + " | ".join(bad[:5]))
        # What the page shows, beyond the model: rendered stderr, widget render errors.
        shown = self.page.evaluate(
            """() => {
              const bad = [];
              for (const el of document.querySelectorAll(
                  '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) {
                bad.push(['stderr', el.innerText.slice(0, 400)]);
              }
              for (const el of document.querySelectorAll('.jp-OutputArea-output')) {
                const t = el.innerText || '';
                if (/Error displaying widget|Failed to (load|create) (model|view)|Loading widget\\.\\.\\./.test(t))
                  bad.push(['widget', t.slice(0, 300)]);
              }
              return bad;
            }"""
        )
        for kind, text in shown:
            if kind == "widget":
                problems.append(f"a widget did not render ({when}): {text}")
            elif ERROR_TEXT.search(text) and not any(a.search(text) for a in allow):
                if not any(text[:80] in p for p in problems):
                    problems.append(f"stderr shown ({when}): {text[:300]}")
        # Widget outputs the model holds must be rendered as widgets, not as text.
        n_widget_outputs = sum(
            "application/vnd.jupyter.widget-view+json" in o["mimes"]
            for c in s["cells"] if c["type"] == "code" for o in c["outputs"]
        )
        # A widget output's node holds the widget's view somewhere below it (an ipympl
        # figure shown by pyplot sits one level deeper than a displayed box).
        n_rendered = self.page.evaluate(
            """() => [...document.querySelectorAll('.jp-OutputArea-output')].filter(
                 el => el.classList.contains('jupyter-widgets')
                       || el.querySelector('.jupyter-widgets, .jupyter-matplotlib')).length"""
        )
        if n_rendered < n_widget_outputs:
            problems.append(
                f"{n_widget_outputs} widget output(s) in the notebook, {n_rendered} rendered as widgets ({when})"
            )
        return problems

    def check_rendered(self) -> list[str]:
        problems = []
        want_canvases = int(self.spec.get("canvases", 1))
        want_controls = int(self.spec.get("controls", 1))
        # A figure's image comes in its own messages after the kernel went idle (the front
        # end asks for it once the view is laid out), so an empty canvas is given a while
        # to fill before it counts as a problem; how long it took goes into the report.
        t0 = time.monotonic()
        while True:
            shots = self.canvases()
            empty = [i for i, shot in enumerate(shots[:want_canvases]) if shot.looks_empty]
            if (not empty and len(shots) >= want_canvases) or time.monotonic() - t0 > CANVAS_GRACE_S:
                break
            time.sleep(0.25)
        if time.monotonic() - t0 > 0.5:
            late = "still empty or missing" if empty or len(shots) < want_canvases else "drawn"
            self.report.checks.append(
                f"canvas(es) {empty or 'all'} {late} {time.monotonic() - t0:.1f} s after the "
                "kernel went idle"
            )
        self.report.canvases = len(shots)
        self.report.controls = self.page.locator(CONTROL_SELECTOR).count()
        if len(shots) < want_canvases:
            problems.append(
                f"{len(shots)} ipympl canvas(es) ({CANVAS_SELECTOR}) in the page, at least {want_canvases} expected"
            )
        for i in empty:
            shot = shots[i]
            problems.append(f"canvas {i} looks empty ({shot.width}×{shot.height}, {shot.colours} colours)")
        if self.report.controls < want_controls:
            problems.append(f"{self.report.controls} ipywidgets control(s) in the page, at least {want_controls} expected")
        return problems

    def clipped_outputs(self) -> list[str]:
        """Outputs wider than the notebook (`CLIPPED_OUTPUTS_JS`), as problems."""
        return [f"cell {cell}'s output is {width} px wide in the notebook's {room} px and "
                f"clipped on the right: {what}"
                for cell, width, room, what in self.page.evaluate(CLIPPED_OUTPUTS_JS)]

    def locate(self, check: dict):
        index = int(check.get("index", 0))
        if "selector" in check:
            candidates = [("selector", check["selector"])]
        elif "description" in check:
            candidates = [("description", check["description"])]
        else:
            candidates = [("selector", check["control"]), ("description", check["control"])]
        for kind, value in candidates:
            if kind == "selector":
                try:
                    loc = self.page.locator(value)
                    if loc.count() > index:
                        return loc.nth(index)
                except Exception:  # not a valid selector: try it as a description
                    continue
            else:
                label = self.page.locator(".widget-label").filter(
                    has_text=re.compile(rf"^\s*{re.escape(value)}\s*$")
                )
                control = self.page.locator(CONTROL_SELECTOR).filter(has=label)
                if control.count() > index:
                    return control.nth(index)
                button = self.page.locator("button.jupyter-button, .widget-toggle-button").filter(
                    has_text=re.compile(rf"^\s*{re.escape(value)}\s*$")
                )
                if button.count() > index:
                    return button.nth(index)
        raise HarnessError(f"{self.notebook.name}: no control matches {check}")

    def act(self, control, check: dict):
        action = check.get("action", "auto")
        classes = control.get_attribute("class") or ""
        tag = control.evaluate("el => el.tagName.toLowerCase()")
        if action == "auto":
            if "widget-slider" in classes:
                action = "keys"
            elif tag == "select" or "widget-dropdown" in classes or "widget-select" in classes:
                action = "select"
            elif tag == "input" or "widget-text" in classes:
                action = "fill"
            else:
                action = "click"
        if action == "keys":
            handle = control.locator(".noUi-handle, [role=slider]")
            target = handle.first if handle.count() else control
            target.focus()
            for key in check.get("keys", ["ArrowRight"] * 3):
                target.press(key)
                time.sleep(0.05)
        elif action == "select":
            select = control if tag == "select" else control.locator("select").first
            options = select.evaluate("s => Array.from(s.options).map(o => o.value)")
            current = select.evaluate("s => s.value")
            value = check.get("value")
            if value is None:
                value = options[(options.index(current) + 1) % len(options)] if current in options else options[-1]
            select.select_option(str(value))
        elif action == "fill":
            box = control if tag in ("input", "textarea") else control.locator("input, textarea").first
            box.fill(str(check["value"]))
            box.press("Enter")
        elif action == "click":
            button = control.locator("button")
            (button.first if tag != "button" and button.count() else control).click()
        else:
            raise HarnessError(f"unknown action {action!r} in {check}")
        return action

    def check_control(self, check: dict, n: int) -> str:
        control = self.locate(check)
        control.scroll_into_view_if_needed()
        settle = float(check.get("settle_s", 1.0))
        before = self.canvases()
        stable_since = time.monotonic()
        deadline = stable_since + 15 + settle
        while time.monotonic() - stable_since < settle:
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"{self.notebook.name} [{self.mode}]: the figures keep changing by themselves, so moving a "
                    "control proves nothing: stop the live update before the checked control, or lower settle_s"
                )
            time.sleep(0.25)
            now = self.canvases()
            if [c.digest for c in now] != [c.digest for c in before]:
                before, stable_since = now, time.monotonic()
        figure = check.get("figure")
        action = self.act(control, check)
        timeout = float(check.get("change_timeout_s", 30))
        what = f"canvas {figure}" if figure is not None else "any canvas"

        def changed():
            after = self.canvases()
            if figure is not None:
                i = int(figure)
                return i < len(after) and i < len(before) and after[i].digest != before[i].digest
            return len(after) != len(before) or any(a.digest != b.digest for a, b in zip(after, before))

        label = check.get("control") or check.get("selector") or check.get("description")
        try:
            self.wait_until(changed, timeout, f"{what} to change after moving {label!r}")
        except HarnessError:
            self.screenshot(f"__check{n}_unchanged")
            raise HarnessError(
                f"{self.notebook.name} [{self.mode}]: moving {label!r} ({action}) did not change {what} "
                f"within {timeout:.0f} s"
            ) from None
        return f"{label!r} ({action}) changed {what}"

    def step(self, name: str, t0: float) -> float:
        now = time.monotonic()
        self.report.steps[name] = now - t0
        return now

    def run(self) -> NotebookReport:
        t0 = t = time.monotonic()
        try:
            self.open()
            t = self.step("open", t)
            before = self.state()
            counts = [c.get("count") for c in before["cells"]]
            self.run_all()
            t_run = time.monotonic()

            def started(s):
                now = [c.get("count") for c in s["cells"]]
                return (
                    now != counts
                    or s["kernelStatus"] != "idle"
                    or any("*" in c.get("prompt", "") for c in s["cells"])
                    or time.monotonic() - t_run > 20  # nothing ran at all: reported below
                )

            s = self.wait_idle(
                self.run_timeout(), "Run All Cells to finish and the kernel to go idle", started=started
            )
            t = self.step("run all", t)
            problems = self.collect_problems(s, "after Run All")
            not_rendered = self.check_rendered()
            problems += not_rendered
            if not self.spec["checks"] and self.notebook.name in MUST_DECLARE_CONTROL:
                problems.append(
                    "declares no control to move: add metadata aare_lab.browser_check.checks "
                    "(see tests/browser/lab_harness.py)"
                )
            if not not_rendered:
                for n, check in enumerate(self.spec["checks"]):
                    try:
                        self.report.checks.append(self.check_control(check, n))
                    except HarnessError as err:
                        problems.append(str(err))
                s = self.wait_idle(60, "the kernel to go idle after moving the controls")
                seen = {p.replace("after Run All", "") for p in problems}
                problems += [
                    p for p in self.collect_problems(s, "after moving the controls")
                    if p.replace("after moving the controls", "") not in seen
                ]
                t = self.step("controls", t)
            # Last, so that what the controls showed (an explanation, a wider table) counts.
            problems += self.clipped_outputs()
            self.report.problems = problems
        except Exception as err:
            self.report.problems.append(f"{type(err).__name__}: {err}")
        finally:
            self.report.seconds = time.monotonic() - t0
            with contextlib.suppress(Exception):
                self.final_screenshots()
                self.step("screenshots", t)
            (artefacts_dir() / f"{self.name}__console.log").write_text("\n".join(self.console), encoding="utf-8")
            self.page.remove_listener("console", self._on_console)
            self.page.remove_listener("pageerror", self._on_error)
        return self.report

    def close(self):
        """Shut the notebook's kernel down and drop its tab without saving it."""
        self.server.shutdown_kernels()
        with contextlib.suppress(Exception):
            self.page.evaluate(
                "() => { for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) w.dispose(); }"
            )

    def final_screenshots(self):
        """The whole notebook (viewport grown to its height) and each figure on its own."""
        height = self.page.evaluate(
            """() => { const el = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')
                       || document.querySelector('.jp-Notebook');
                       return el ? el.scrollHeight : 1000; }"""
        )
        size = self.page.viewport_size or {"width": 1400, "height": 1000}
        self.page.set_viewport_size({"width": size["width"], "height": int(min(max(height + 250, 800), 12000))})
        time.sleep(0.3)
        self.screenshot("")
        for i, fig in enumerate(self.page.locator(FIGURE_SELECTOR).all()):
            with contextlib.suppress(Exception):
                self.screenshot(f"__fig{i}", fig)


def check_notebook(browser, server: LabServer, notebook: Path, mode: str) -> NotebookReport:
    """Check one notebook; the notebooks of one server share one page (JupyterLab loads
    once), each opened in a new tab with a new kernel, the tab and kernel dropped after."""
    page = getattr(server, "page", None)
    if page is None or page.is_closed():
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(30_000)
        server.page = page
        server.on_stop.append(context.close)
    run = NotebookRun(page, server, notebook, mode)
    try:
        return run.run()
    finally:
        run.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--mode", choices=sorted(MODES), action="append")
    args = parser.parse_args(argv)
    why = missing_requirements()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    notebooks = [p.resolve() for p in args.notebooks] or notebooks_to_check()
    failed = 0
    with sync_playwright() as pw:
        browser = launch_browser(pw)
        for mode in args.mode or list(MODES):
            server = LabServer(MODES[mode]).start()
            try:
                for nb in notebooks:
                    report = check_notebook(browser, server, nb, mode)
                    print(report.summary(), flush=True)
                    failed += bool(report.problems)
            finally:
                server.stop()
        browser.close()
    print(f"artefacts: {artefacts_dir()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
