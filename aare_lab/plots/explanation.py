"""Text and HTML renderings of an `aare_lab.analysis.explain.Explanation` (no matplotlib)."""

from __future__ import annotations

import html

import numpy as np

from aare_lab.analysis.explain import TEST_FORMULAS, TEST_TITLES, TESTS, Explanation
from aare_lab.detector.branches import Branch

#: The columns of each finder's table of tests.
TEST_COLUMNS = ("test", "rule", "operands", "true", "margin", "ULPs")


def _fmt(value, dtype: np.dtype) -> str:
    """Shortest text that reads back as the same number of ``dtype``."""
    if dtype.kind in "iu":
        return str(int(value))
    if not np.isfinite(value):
        return str(value)
    return np.format_float_positional(dtype.type(value), trim="-")


def _dtype(e: Explanation, label: str) -> np.dtype:
    return np.dtype(str(e.data["pedestal_dtype"].sel(finder=label).item()))


def _grid(e: Explanation, name: str, label: str | None) -> list[list[str]]:
    inside = e.data["inside"].to_numpy()
    if label is None:
        values, dtype = e.data[name].to_numpy(), np.dtype(np.int64)
    else:
        values, dtype = e.data[name].sel(finder=label).to_numpy(), _dtype(e, label)
    return [[_fmt(v, dtype) if ok else "·" for v, ok in zip(row, okrow)]
            for row, okrow in zip(values, inside)]


def _scalars(e: Explanation, label: str) -> list[tuple[str, str]]:
    d, dt = e.data.sel(finder=label), _dtype(e, label)
    return [(name, _fmt(d[key].item(), dt)) for name, key in
            (("thr", "thr"), ("c3", "c3"), ("c3*thr", "c3_thr"), ("m", "m"),
             ("tot", "tot"), ("max(others)", "max_others"))]


def test_rows(e: Explanation, label: str) -> list[tuple[str, ...]]:
    """One finder's tests as rows of `TEST_COLUMNS`: title, rule, operands at full
    precision, outcome, margin (``lhs - rhs``) and the margin in ULPs."""
    dt = _dtype(e, label)
    rows = []
    for test in TESTS:
        t = e.test(label, test)
        ulps = f"{t['margin_ulps']:+.3g} ULP"
        if dt != np.float32:
            ulps += f" ({t['margin_f32_ulps']:+.3g} float32 ULP" + (
                ", the same number in float32)" if t["same_in_float32"] else ")")
        rows.append((TEST_TITLES[test], TEST_FORMULAS[test],
                     f"{_fmt(t['lhs'], dt)} vs {_fmt(t['rhs'], dt)}",
                     "yes" if t["outcome"] else "no", f"{t['margin']:.6g}", ulps))
    return rows


def _header(e: Explanation) -> str:
    ny, nx = e.data.sizes["wy"], e.data.sizes["wx"]
    return f"pixel (y={e.y}, x={e.x}) of frame {e.frame}, {ny}x{nx} window"


def verdict(e: Explanation) -> str:
    """The deciding test, why the finders differ there, and each finder's margin."""
    test = e.deciding_test
    if test is None:
        return "all finders take the same branch"
    parts = []
    for label in e.labels:
        t = e.test(label, test)
        same = t["same_in_float32"] and _dtype(e, label) != np.float32
        parts.append(f"{label}: {TEST_FORMULAS[test]} is {'true' if t['outcome'] else 'false'}"
                     f" (margin {t['margin']:.6g} = {t['margin_f32_ulps']:+.3g} float32 ULP"
                     f"{', the same number in float32' if same else ''})")
    why = ", ".join(e.reasons) or "no near-tie, timing or pedestal divergence found"
    return f"{TEST_TITLES[test]} decides ({why}): " + "; ".join(parts)


def _finder_title(e: Explanation, label: str) -> str:
    d = e.data.sel(finder=label)
    code = Branch(int(d["branch"]))
    own = Branch(int(d["finder_branch"]))
    check = "" if code == own else f" (the finder's map says {own.name}!)"
    return (f"{label}: {d['finder_name'].item()} finder, {d['pedestal_dtype'].item()} "
            f"pedestal, {d['noise'].item()} noise -> {code.name}{check}")


def _updated_line(e: Explanation, label: str) -> str | None:
    """The window's pixels that ``label`` updated earlier in the frame (the serial model
    reads them updated), or None."""
    updated = np.argwhere(e.data["updated"].sel(finder=label).to_numpy())
    if not len(updated):
        return None
    ry, rx = e.data.sizes["wy"] // 2, e.data.sizes["wx"] // 2
    taps = ", ".join(f"({e.y + a - ry}, {e.x + b - rx})" for a, b in updated)
    return f"updated earlier in this frame (serial): {taps}"


def explanation_text(e: Explanation) -> str:
    """A plain-text report of an explanation: the window's numbers per finder, each test
    with its margin, and the verdict."""
    def grid(rows):
        width = max(len(c) for r in rows for c in r)
        return ["    " + " ".join(c.rjust(width) for c in r) for r in rows]

    lines = [_header(e), "raw:", *grid(_grid(e, "raw", None))]
    for label in e.labels:
        lines += ["", _finder_title(e, label)]
        for name in ("mean", "rms", "v"):
            lines += [f"  {name}:", *grid(_grid(e, name, label))]
        updated = _updated_line(e, label)
        if updated is not None:
            lines.append(f"  {updated}")
        lines.append("  " + ", ".join(f"{k} = {v}" for k, v in _scalars(e, label)))
        for row in test_rows(e, label):
            lines.append("  {:<9} {:<16} {:<30} {:<4} margin {} = {}".format(*row))
    lines += ["", verdict(e)]
    return "\n".join(lines)


def _table(rows, head=None) -> str:
    out = ["<table style='border-collapse:collapse;font-family:monospace'>"]
    if head:
        out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(
            f"<td style='padding:0 6px;text-align:right'>{html.escape(c)}</td>"
            for c in r) + "</tr>")
    return "".join(out) + "</table>"


def explanation_html(e: Explanation) -> str:
    """An HTML report of an explanation: the tables of `explanation_text`."""
    parts = [f"<h4>{html.escape(_header(e))}</h4>", "<b>raw</b>", _table(_grid(e, "raw", None))]
    for label in e.labels:
        parts.append(f"<h5>{html.escape(_finder_title(e, label))}</h5>")
        parts.append("<div style='display:flex;flex-wrap:wrap;gap:16px'>" + "".join(
            f"<div><b>{name}</b>{_table(_grid(e, name, label))}</div>"
            for name in ("mean", "rms", "v")) + "</div>")
        updated = _updated_line(e, label)
        if updated is not None:
            parts.append(f"<p>{html.escape(updated)}</p>")
        parts.append(_table([[k, v] for k, v in _scalars(e, label)]))
        parts.append(_table(test_rows(e, label), TEST_COLUMNS))
    parts.append(f"<p><b>{html.escape(verdict(e))}</b></p>")
    # Sized by the space it is given, not by its widest table: a wide table scrolls, the
    # text wraps where it can be read (a widget's HTML box is otherwise as wide as its
    # widest table, and the notebook clips what sticks out, the verdict's ends included).
    return ("<div style='width:0;min-width:100%;overflow-x:auto'>" + "".join(parts)
            + "</div>")


class ExplanationTable:
    """The explanation of one site as HTML, replaced by ``update``.

    Parameters
    ----------
    explanation
        From `aare_lab.analysis.explain.explain`.

    Attributes
    ----------
    explanation
        The explanation shown.
    """

    def __init__(self, explanation: Explanation):
        self.explanation = explanation

    @property
    def html(self) -> str:
        """The HTML shown (`explanation_html`), for an ``ipywidgets.HTML`` value."""
        return explanation_html(self.explanation)

    def update(self, explanation: Explanation) -> None:
        """Show another explanation."""
        self.explanation = explanation

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        e = self.explanation
        return f"<ExplanationTable of frame {e.frame} ({e.y}, {e.x}): {verdict(e)}>"

    def __str__(self) -> str:
        return explanation_text(self.explanation)
