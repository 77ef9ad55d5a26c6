"""MismatchBrowser: step through the disagreements of two or more results and see why.

The comparison of the selected pair (`aare_lab.analysis.compare.compare`) and the explanations of
its sites (`aare_lab.analysis.explain.explain_sites`) run on the widget's worker; the site list,
the mismatch panel (`aare_lab.plots.mismatch.MismatchView`) and the explanation table
(`aare_lab.plots.explanation.ExplanationTable`) change on the UI thread only.
"""

from __future__ import annotations

import html
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import NamedTuple

import ipywidgets as widgets
import numpy as np
import xarray as xr

from aare_lab.analysis.compare import CAUSES, CLASSIFICATIONS, Comparison, compare
from aare_lab.model.labels import as_labelled

from .base import InteractiveWidget, _message, trim_oldest
from .graph import Input, Node, ViewNode

Site = tuple[int, int, int]

#: Explanations (and comparisons) kept per widget, oldest dropped first.
CACHE_SIZE = 256


class SiteList(NamedTuple):
    """The sites of a comparison that pass the filters: the clusters one finder alone
    has first, then the value differences of matched clusters, each in the comparison's
    order.

    Attributes
    ----------
    comparison
        The comparison listed (None: none yet).
    positions
        Indices into ``Comparison.sites``.
    sites
        ``(frame, y, x)`` per listed site.
    texts
        ``"frame 147 (12, 30): b_only, duplicate_neighbour, timing"`` per listed site.
    lookup
        ``site -> position in this list``.
    """

    comparison: Comparison | None
    positions: np.ndarray
    sites: list[Site]
    texts: list[str]
    lookup: dict


def _names(da: xr.DataArray) -> np.ndarray:
    """The category names of a CF-flagged site variable, per site."""
    meanings = np.array(da.attrs["flag_meanings"].split())
    values = np.asarray(da.attrs["flag_values"]).tolist()
    index = {v: i for i, v in enumerate(values)}
    return meanings[[index[v] for v in da.to_numpy().tolist()]] if da.size else \
        np.empty(0, meanings.dtype)


def site_list(comparison: Comparison | None, classification: str | None = None,
              cause: str | None = None) -> SiteList:
    """The sites of ``comparison`` of one classification and cause (None: any)."""
    if comparison is None:
        return SiteList(None, np.empty(0, np.int64), [], [], {})
    s = comparison.sites
    kind, cls, why = (_names(s[v]) for v in ("kind", "classification", "cause"))
    keep = np.ones(s.sizes["site"], bool)
    if classification is not None:
        keep &= cls == classification
    if cause is not None:
        keep &= why == cause
    positions = np.flatnonzero(keep)
    positions = positions[np.argsort(kind[positions] == "value_diff", kind="stable")]
    frame, y, x = (s[v].to_numpy()[positions].tolist() for v in ("frame_number", "y", "x"))
    sites = [(int(f), int(a), int(b)) for f, a, b in zip(frame, y, x)]
    texts = [f"frame {f} ({a}, {b}): {kind[p]}" + ("" if cls[p] == kind[p] else f", {cls[p]}")
             + f", {why[p]}" for (f, a, b), p in zip(sites, positions)]
    # A value difference and a one-sided cluster can share a position: the first wins.
    lookup = {}
    for i, site in enumerate(sites):
        lookup.setdefault(site, i)
    return SiteList(comparison, positions, sites, texts, lookup)


class MismatchBrowser(InteractiveWidget):
    """The disagreements between finder results, one site at a time, with the reason.

    Parameters
    ----------
    results
        Two or more results over the same frames: a mapping ``label -> result`` or a
        sequence (labelled by `aare_lab.model.labels.result_labels`, or ``labels``).
    frames
        The data frames the results were found in (array, file spec or source); with
        ``dark`` or ``pedestal`` each selected site is explained (`aare_lab.analysis.explain`).
    dark
        Dark frames to train each finder's starting pedestal.
    pedestal
        Instead of ``dark``: the starting pedestal, or one per result of the pair.
    labels
        Names for a sequence of results.
    pair
        The two labels compared first (default: the first two results).
    tolerance
        Window differences up to this (ADU) count as equal (`aare_lab.analysis.compare.compare`).
    half_size
        Half-size of the mismatch panel's patch (default: the view's).
    prefetch
        Sites after the selected one explained in the same replay, so that stepping on
        is immediate.
    max_listed
        Sites shown in the list widget at most (next/previous step through all).
    interactive, max_hz
        As for `aare_lab.widgets.base.InteractiveWidget`.

    Notes
    -----
    Setters (``index``, ``site``, ``pair``, `select`, `filter`, ...) may be called from
    any thread; they act on the UI thread. Bad values (a site outside the frame, an index
    past the list, an unknown label) are reported in the status line and change nothing.
    Read the state on the UI thread, after `wait`.

    In a notebook: ``browser = MismatchBrowser({"serial": a, "frozen": b}, frames=frames,
    dark=dark)`` in one cell, then ``browser.next()``, ``browser.site`` and
    ``browser.explanation.deciding_test`` (after ``browser.wait()``) in the next;
    ``notebooks/02_validate_finders.ipynb`` walks through it.
    """

    def __init__(self, results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset], *,
                 frames=None, dark=None, pedestal=None, labels: Sequence[str] | None = None,
                 pair: tuple[str, str] | None = None, tolerance: float = 0.0,
                 half_size: int | None = None, prefetch: int = 8, max_listed: int = 2000,
                 interactive: bool | None = None, max_hz: float = 4.0):
        super().__init__(interactive=interactive, max_hz=max_hz)
        self.labels, datasets = as_labelled(results, labels)
        if len(datasets) < 2:
            raise ValueError(f"need at least two results to compare, got {len(datasets)}")
        self.results = dict(zip(self.labels, datasets))
        self.frames, self.dark, self.pedestal = frames, dark, pedestal
        self.can_explain = frames is not None and (dark is not None or pedestal is not None)
        self.tolerance = float(tolerance)
        self.half_size = half_size
        self.prefetch = int(prefetch)
        self.max_listed = int(max_listed)
        self.pairs = list(combinations(self.labels, 2))
        pair = self.pairs[0] if pair is None else tuple(pair)
        if pair not in self.pairs:
            raise ValueError(f"pair {pair!r} is not one of {self.pairs}")
        # Owned by the worker thread only (the tasks read and fill them there).
        self._compared: OrderedDict = OrderedDict()
        self._explained: OrderedDict = OrderedDict()
        self._comparison_shown = None  # the comparison and filters the options were made for
        self.view = None  # the MismatchView, once a site is shown
        self._view_pair = None

        # ---------------------------------------------------------------- graph
        self._pair = Input(pair, "pair")
        self._classification = Input(None, "classification")
        self._cause = Input(None, "cause")
        self._request = Input(None, "site")  # ((frame, y, x), free) or None
        self._compare_task = self.task(self._compare_pair, self._pair, name="compare")
        self._listing = Node(site_list, self._compare_task, self._classification,
                             self._cause, name="listing")
        self._current = Node(self._resolve, self._listing, self._request, name="current")
        self._explain_request = Node(self._batch, self._current, self._listing,
                                     name="explain request")
        self._explain_task = self.task(self._explain, self._explain_request,
                                       name="explain") if self.can_explain else None

        # ------------------------------------------------------------- controls
        self.pair_selector = widgets.Dropdown(
            options=[(f"{a} vs {b}", (a, b)) for a, b in self.pairs], value=pair,
            description="pair")
        self.classification = widgets.Dropdown(options=[("all classes", None)], value=None,
                                               description="class")
        self.cause = widgets.Dropdown(options=[("all causes", None)], value=None,
                                      description="cause")
        self.site_select = widgets.Select(options=[], rows=8,
                                          layout=widgets.Layout(width="34em"))
        self.previous_button = widgets.Button(description="◀ previous", disabled=True)
        self.next_button = widgets.Button(description="next ▶", disabled=True)
        self.position = widgets.Label(value="")
        self.watch(self.pair_selector, self.set_pair)
        self.watch(self.classification, lambda v: self.filter(classification=v))
        self.watch(self.cause, lambda v: self.filter(cause=v))
        self.watch(self.site_select, lambda v: None if v is None else self.select(v))
        self.previous_button.on_click(lambda _: self.previous())
        self.next_button.on_click(lambda _: self.next())

        # ---------------------------------------------------------------- views
        self.panel_host = self.figure_host((9.5, 4.4))
        self.explanation_html = widgets.HTML(value=self._placeholder())
        self._controls_view = ViewNode(self._render_controls, self._listing, self._current,
                                       pump=self.pump)
        self._panel_view = ViewNode(self._render_panel, self._listing, self._current,
                                    pump=self.pump, figure=self.panel_host)
        self._explanation_view = ViewNode(self._render_explanation, self._current,
                                          pump=self.pump)
        head = [self.pair_selector] if len(self.pairs) > 1 else []
        self.children = [
            widgets.HBox([*head, self.classification, self.cause]),
            widgets.HBox([self.site_select,
                          widgets.VBox([self.previous_button, self.next_button,
                                        self.position, self.progress])]),
            self.status.widget,
            self.panel_host.widget,
            self.explanation_html,
        ]
        self._compare_task.submit()

    # ------------------------------------------------------------------ state
    @property
    def pair(self) -> tuple[str, str]:
        """The labels of the two results asked for (`comparison` is the pair shown: the
        last that could be compared)."""
        return self._pair.value

    @pair.setter
    def pair(self, pair: tuple[str, str]) -> None:
        self.set_pair(pair)

    @property
    def comparison(self) -> Comparison | None:
        """The comparison shown (None before the first is done)."""
        return self._listing.value.comparison if self._listing.ready else None

    @property
    def sites(self) -> list[Site]:
        """The listed sites (after the filters)."""
        return list(self._listing.value.sites) if self._listing.ready else []

    @property
    def index(self) -> int | None:
        """Position of the shown site in `sites` (None: none, or a site set freely)."""
        return self._current.value[0] if self._listing.ready else None

    @index.setter
    def index(self, i: int) -> None:
        self.select(i)

    @property
    def site(self) -> Site | None:
        """``(frame, y, x)`` of the shown site."""
        return self._current.value[1] if self._listing.ready else None

    @site.setter
    def site(self, site: Site) -> None:
        self.on_ui(self._set_site, site)

    @property
    def filters(self) -> dict:
        """``{"classification": ..., "cause": ...}`` (None: any)."""
        return {"classification": self._classification.value, "cause": self._cause.value}

    @property
    def explanation(self):
        """The `aare_lab.analysis.explain.Explanation` of the shown site (None: not (yet) explained)."""
        if self._explain_task is None:
            return None
        e, c, site = self._explain_task.value, self.comparison, self.site
        return e if e is not None and site is not None and (e.frame, e.y, e.x) == site \
            and e.labels == list(c.labels) else None

    def select(self, i: int) -> None:
        """Show the ``i``-th listed site."""
        self.on_ui(self._select, i)

    def next(self) -> None:
        """Show the next listed site (the first, after a site set freely)."""
        self.on_ui(self._step, +1)

    def previous(self) -> None:
        """Show the previous listed site."""
        self.on_ui(self._step, -1)

    def filter(self, **filters) -> None:
        """List only the sites of ``classification=`` and/or ``cause=`` (None or "all":
        any); the shown site is kept when it passes, else the first listed is shown."""
        unknown = set(filters) - {"classification", "cause"}
        if unknown:
            raise TypeError(f"unknown filters {sorted(unknown)}; have classification, cause")
        self.on_ui(self._filter, filters)

    def set_pair(self, pair: tuple[str, str]) -> None:
        """Compare another pair of the results (labels in either order)."""
        self.on_ui(self._set_pair, pair)

    # --------------------------------------------------------- UI-thread side
    def _listed(self) -> SiteList | None:
        if not self._listing.ready:
            self.status.fail("the comparison is not ready yet")
            return None
        return self._listing.value

    def _select(self, i) -> None:
        listing = self._listed()
        if listing is None:
            return
        n = len(listing.sites)
        try:
            i = int(i)
        except (TypeError, ValueError):
            self.status.fail(f"site index must be an integer, got {i!r}")
            return
        if not 0 <= i < n:
            self.status.fail(f"site {i} is not in the list: {n} site{'' if n == 1 else 's'} "
                             f"listed" + ("" if n == 0 else f" (0..{n - 1})"))
            return
        self._request.set((listing.sites[i], False))

    def _step(self, step: int) -> None:
        listing = self._listed()
        if listing is None or not listing.sites:
            return
        i = self.index
        i = 0 if i is None else min(max(i + step, 0), len(listing.sites) - 1)
        self._request.set((listing.sites[i], False))

    def _set_site(self, site) -> None:
        try:
            frame, y, x = (int(v) for v in site)
        except (TypeError, ValueError):
            self.status.fail(f"a site is (frame, y, x), got {site!r}")
            return
        a = self.results[self.labels[0]]
        ny, nx = (int(n) for n in np.asarray(a.attrs["frame_shape"]))
        if not (0 <= y < ny and 0 <= x < nx):
            self.status.fail(f"pixel (y={y}, x={x}) is outside the {ny}x{nx} frame")
            return
        if frame not in a["frame"].to_numpy():
            self.status.fail(f"frame {frame} is not in the results")
            return
        self._request.set(((frame, y, x), True))

    def _pin(self) -> None:
        """Ask for the site shown now, so that a new list keeps it when it is listed."""
        if self._listing.ready and self.site is not None:
            self._request.set((self.site, self.index is None))

    def _filter(self, filters: dict) -> None:
        self._pin()
        for name, names, node in (("classification", CLASSIFICATIONS, self._classification),
                                  ("cause", CAUSES, self._cause)):
            if name not in filters:
                continue
            value = filters[name]
            value = None if value in (None, "all") else str(value)
            if value is not None and value not in names:
                self.status.fail(f"{name} must be one of {', '.join(names)} (or all), "
                                 f"got {value!r}")
                return
            node.set(value)

    def _set_pair(self, pair) -> None:
        try:
            a, b = (str(v) for v in pair)
        except (TypeError, ValueError):
            self.status.fail(f"a pair is two labels, got {pair!r}")
            return
        if (a, b) not in self.pairs and (b, a) in self.pairs:
            a, b = b, a
        if (a, b) not in self.pairs:
            self.status.fail(f"pair {pair!r}: the labels are {', '.join(self.labels)}")
            return
        self._pin()
        self._pair.set((a, b))

    # -------------------------------------------------------------- graph side
    @staticmethod
    def _resolve(listing: SiteList, request) -> tuple[int | None, Site | None]:
        """The shown site: the one asked for when listed or set freely, else the first."""
        site, free = request if request is not None else (None, False)
        if site is not None and site in listing.lookup:
            return listing.lookup[site], site
        if site is not None and free:
            return None, site
        return (0, listing.sites[0]) if listing.sites else (None, None)

    def _batch(self, current, listing: SiteList):
        index, site = current
        pair = None if listing.comparison is None else listing.comparison.labels
        after = [] if index is None else listing.sites[index + 1:index + 1 + self.prefetch]
        return pair, site, [s for s in after if s != site]

    def _compare_pair(self, job, pair):
        """On the worker: the comparison of ``pair``, cached."""
        if pair not in self._compared:
            job.progress(0.0, f"comparing {pair[0]} with {pair[1]}")
            a, b = (self.results[label] for label in pair)
            self._compared[pair] = compare(a, b, labels=list(pair), tolerance=self.tolerance)
            trim_oldest(self._compared, CACHE_SIZE)
        return self._compared[pair]

    def _explain(self, job, request):
        """On the worker: the explanation of the shown site (and a few after it)."""
        from aare_lab.analysis.explain import explain_sites

        pair, site, after = request
        if site is None or pair is None:
            return None
        key = (pair, site)
        if key not in self._explained:
            finders = {label: self.results[label] for label in pair}
            todo = [site] + [s for s in after if (pair, s) not in self._explained]
            job.check()
            try:
                found = explain_sites(self.frames, todo, finders, dark=self.dark,
                                      pedestal=self.pedestal)
            except ValueError:
                if len(todo) == 1:
                    raise
                todo = [site]  # a prefetched site failed: explain the one asked for
                found = explain_sites(self.frames, todo, finders, dark=self.dark,
                                      pedestal=self.pedestal)
            for s, e in zip(todo, found):
                self._explained[pair, s] = e
            trim_oldest(self._explained, CACHE_SIZE)
        return self._explained[key]

    def _task_state(self, task) -> None:
        super()._task_state(task)
        if task is self._explain_task:
            self._explanation_view.notify()

    def describe(self, task) -> str:
        """The status text: the pair's summary and the shown site."""
        return self._status_text()

    def _status_text(self) -> str:
        c = self.comparison
        if c is None:
            return "comparing…"
        counts = ", ".join(f"{n} {name}" for name, n in c.counts("classification").items() if n)
        text = f"{c.summary()}; {c.sites.sizes['site']} sites" + (f" ({counts})" if counts else "")
        e = self.explanation
        if e is not None:
            text += f" · frame {e.frame} ({e.y}, {e.x}): " + (
                "all finders take the same branch" if e.deciding_test is None else
                f"{e.deciding_test} decides" + (f" ({', '.join(e.reasons)})" if e.reasons else ""))
        return text

    # ----------------------------------------------------------------- views
    def _render_controls(self, listing: SiteList, current) -> None:
        index, site = current
        c = listing.comparison
        with self.syncing():
            # A filter chosen by name is offered even when no site has it.
            previous, filters = self._comparison_shown, self.filters
            if c is not None and (previous is None or previous[0] is not c
                                  or previous[1] != filters):
                self._comparison_shown = (c, filters)
                for control, variable, names, everything in (
                        (self.classification, "classification", CLASSIFICATIONS, "all classes"),
                        (self.cause, "cause", CAUSES, "all causes")):
                    counts = c.counts(variable)
                    chosen = self.filters[variable]
                    assumed = c.assumed_timing() if variable == "cause" else 0
                    control.options = [(f"{everything} ({c.sites.sizes['site']})", None)] + [
                        (f"{name} ({counts[name]}"
                         + (f", {assumed} assumed: no branch maps" if name == "timing"
                            and assumed else "") + ")", name)
                        for name in names if counts[name] or name == chosen]
            self.classification.value = self._classification.value
            self.cause.value = self._cause.value
            self.pair_selector.value = self.pair
            shown = listing.texts[:self.max_listed]
            options = list(zip(shown, range(len(shown))))
            if list(self.site_select.options) != options:
                self.site_select.options = options
            self.site_select.value = index if index is not None and index < len(shown) else None
        n = len(listing.sites)
        self.previous_button.disabled = not n or index == 0
        self.next_button.disabled = not n or index == n - 1
        more = f" (first {self.max_listed} listed)" if n > self.max_listed else ""
        if site is None:
            self.position.value = "" if n else "no disagreement" \
                if c is None or not c.sites.sizes["site"] else "no site passes the filters"
        elif index is None:
            self.position.value = f"frame {site[0]} ({site[1]}, {site[2]}): not a listed site"
        else:
            self.position.value = f"site {index + 1} of {n}{more}"

    def _render_panel(self, listing: SiteList, current) -> None:
        from aare_lab.plots.mismatch import MismatchView

        _, site = current
        figure = self.panel_host.figure
        c = listing.comparison
        if site is None or c is None:
            if self.view is not None or not figure.texts:
                figure.clear()
                self.view, self._view_pair = None, None
                what = "the comparison failed" if c is None else \
                    f"{c.labels[0]} and {c.labels[1]} agree" if not c.sites.sizes["site"] \
                    else "no site passes the filters"
                figure.text(0.5, 0.5, what, ha="center", va="center", gid="empty")
            return
        pair = c.labels
        results = [self.results[label] for label in pair]
        if self.view is None or self._view_pair != pair:
            figure.clear()  # the pair was compared, so the view can be built
            self.view = MismatchView(results, *site, labels=pair, half_size=self.half_size,
                                     fig=figure)
            self._view_pair = pair
        else:
            self.view.update(*site)

    def _placeholder(self) -> str:
        if self.can_explain:
            return "<i>explaining…</i>"
        return ("<i>Give the frames (frames=) and the dark frames (dark=) or the starting "
                "pedestal (pedestal=) to see why the finders disagree at each site.</i>")

    def _render_explanation(self, current) -> None:
        from aare_lab.plots.explanation import ExplanationTable

        _, site = current
        if self._explain_task is None:
            return
        task = self._explain_task
        e = self.explanation
        if site is None:
            text = "<i>no site to explain</i>"
        elif e is not None:
            text = ExplanationTable(e).html
        else:
            where = f"frame {site[0]} (y={site[1]}, x={site[2]})"
            if task.running:
                text = f"<i>explaining {where}…</i>"
            elif task.error is not None:
                text = (f"<span style='color:#b2182b'>⚠ could not explain {where}: "
                        f"{html.escape(_message(task.error))}</span>")
            else:
                text = f"<i>explaining {where}…</i>"
        self.explanation_html.value = text
