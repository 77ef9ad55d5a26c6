"""binder/ parses and pins what the [lab] extra needs (no network, no docker).

With ``AARE_LAB_BINDER_ENV=1`` (set by .ci/lab_checks.sh in the virtualenv it made from
binder/requirements.txt) the installed versions must equal the pins, so that CI tests
exactly what Binder builds.
"""

import importlib.metadata as md
import os
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
BINDER = REPO / "binder"


def _pins():
    pins, editable = {}, []
    for raw in (BINDER / "requirements.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-e"):
            editable.append(line[2:].strip())
            continue
        req = Requirement(line)
        (spec,) = list(req.specifier)
        assert spec.operator == "==", f"binder pins exact versions: {line}"
        pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins, editable


def _project():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_runtime_is_a_python_the_project_supports():
    text = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-(3\.\d+)", text)
    assert m, f"binder/runtime.txt must read python-3.X, not {text!r}"
    assert SpecifierSet(_project()["requires-python"]).contains(m.group(1) + ".0")


def test_requirements_install_the_project_with_the_lab_and_campaign_extras_and_pin_their_needs():
    pins, editable = _pins()
    assert editable == [".[lab,campaign]"], \
        f"binder/requirements.txt must hold '-e .[lab,campaign]' (notebook 05 runs a campaign), has {editable}"
    project = _project()
    extras = project["optional-dependencies"]
    needed = [Requirement(r) for r in extras["lab"] + extras["campaign"] + project["dependencies"]]
    for req in needed:
        name = canonicalize_name(req.name)
        assert name in pins, f"binder/requirements.txt pins no version of {req.name} (needed by {req})"
        assert req.specifier.contains(pins[name], prereleases=True), f"binder pin {name}=={pins[name]} breaks {req}"
    for name in ("jupyterlab", "ipywidgets", "ipympl", "ipykernel", "matplotlib", "numpy", "numba", "xarray"):
        assert name in pins, f"binder/requirements.txt must pin {name}"


# Only in the virtualenv made from binder/ (elsewhere other versions are fine, so the test
# is not defined there rather than skipped).
if os.environ.get("AARE_LAB_BINDER_ENV") == "1":
    def test_installed_versions_are_the_pinned_ones():
        pins, _ = _pins()
        wrong = {}
        for name, version in pins.items():
            try:
                got = Version(md.version(name))
            except md.PackageNotFoundError:
                got = None
            if got != version:
                wrong[name] = (str(version), str(got))
        assert not wrong, f"installed versions differ from binder's pins (pin, installed): {wrong}"
