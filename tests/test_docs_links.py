"""Every relative link of the repository's Markdown leads to a file in the repository, and
every ``#anchor`` to a heading of that file, as GitHub renders it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: [text](target) outside code; images too. Code spans are removed first.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
FENCE = re.compile(r"^(```|~~~)")


def markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True,
                            text=True, check=False)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout ({listed.stderr.strip()}): no list of tracked files",
                    allow_module_level=True)
    return [ROOT / name for name in listed.stdout.split()]


def prose_lines(path: Path) -> list[str]:
    """The lines of ``path`` outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: dict[str, int] = {}
    result = set()
    for line in prose_lines(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            n = found.get(base, 0)
            found[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
    return result


def links(path: Path) -> list[str]:
    return [target for line in prose_lines(path)
            for target in LINK.findall(CODE_SPAN.sub("", line))]


def test_slug_follows_github():
    assert slug("2026-12-01 evening: the kernel at 1024 threads, and where issue 10 stands") \
        == "2026-12-01-evening-the-kernel-at-1024-threads-and-where-issue-10-stands"
    assert slug("`fresh_memory.py`: why the copy into the result is slow") \
        == "fresh_memorypy-why-the-copy-into-the-result-is-slow"
    assert anchors(ROOT / "README.md"), "README.md must have headings"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
            continue
        name, _, anchor = unquote(target).partition("#")
        dest = (path.parent / name).resolve() if name else path
        if not dest.exists():
            broken.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif not dest.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in "
                          f"{dest.relative_to(ROOT)}")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)
