"""BranchInspector: the branch every pixel took, per finder and frame, and why.

Branch lookups are cheap and done on the UI thread; reading a frame of the data and
explaining a pixel (`aare_lab.analysis.explain.explain`) run on the widget's worker. A click on
the canvas (ipympl ``button_press_event``, which `aare_lab.widgets.figures.FigureHost`
hands to the UI thread) selects the pixel under it; hovering shows its coordinates,
branch and value in the canvas footer (``ax.format_coord``).
"""

from __future__ import annotations

import html
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import numpy as np
import xarray as xr
from matplotlib.patches import Rectangle

from aare_lab.detector.branches import Branch
from aare_lab.model.labels import as_labelled
from aare_lab.model.params import parse_cluster_size

from .base import InteractiveWidget, _message, trim_oldest
from .graph import Input, ViewNode

#: Frames and explanations kept per widget, oldest dropped first.
CACHE_SIZE = 64
SELECTED_COLOUR = "#00e5ff"


def _window_table(values: np.ndarray, inside: np.ndarray | None = None) -> str:
    rows = []
    for r, row in enumerate(np.asarray(values)):
        cells = []
        for c, v in enumerate(row):
            text = "·" if inside is not None and not inside[r, c] else (
                str(int(v)) if float(v).is_integer() else f"{float(v):.6g}")
            bold = "font-weight:bold;" if (r, c) == (len(values) // 2, len(row) // 2) else ""
            cells.append(f"<td style='padding:0 6px;text-align:right;{bold}'>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return ("<table style='border-collapse:collapse;font-family:monospace'>"
            + "".join(rows) + "</table>")


class BranchInspector(InteractiveWidget):
    """Branch maps of several finders: frame slider, finder selector, difference view
    (with a toggle that zooms to the pixels that differ), and the window, branches and
    explanation of a clicked pixel.

    Parameters
    ----------
    results
        Results with branch maps (``find(..., branch_maps=...)``): a mapping
        ``label -> result`` or a sequence. Results without maps are listed in the status
        line and left out.
    frames
        The data frames (array, file spec or source): the window of a pixel that is not
        a cluster centre, the value under the cursor, and with ``dark`` or ``pedestal``
        the explanation of the selected pixel.
    dark
        Dark frames to train each finder's starting pedestal (for the explanation).
    pedestal
        Instead of ``dark``: the starting pedestal, or one per result with maps.
    labels
        Names for a sequence of results.
    frame
        The first frame shown (default: the first mapped).
    finder
        The label shown first (default: the first with maps).
    diff
        A second label: show where its branches differ from ``finder``'s (None: the
        branch map of ``finder``).
    region
        ``(y0, y1, x0, x1)`` to zoom into; the difference view comes back to it when
        `zoom` goes off.
    interactive, max_hz
        As for `aare_lab.widgets.base.InteractiveWidget`.

    Notes
    -----
    Setters (``frame``, ``finder``, ``diff``, ``zoom``, `select_pixel`) may be called from any
    thread; they act on the UI thread. Bad values (an unmapped frame, a pixel outside the
    frame, an unknown label) are reported in the status line and change nothing. Read
    the state on the UI thread, after `wait`.
    """

    def __init__(self, results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset], *,
                 frames=None, dark=None, pedestal=None, labels: Sequence[str] | None = None,
                 frame: int | None = None, finder: str | None = None, diff: str | None = None,
                 region: tuple[int, int, int, int] | None = None,
                 interactive: bool | None = None, max_hz: float = 4.0):
        super().__init__(interactive=interactive, max_hz=max_hz)
        all_labels, datasets = as_labelled(results, labels)
        self.results = {label: r for label, r in zip(all_labels, datasets) if "branch_map" in r}
        self.labels = list(self.results)
        self.unmapped = [label for label, r in zip(all_labels, datasets) if "branch_map" not in r]
        self.frames, self.dark, self.pedestal = frames, dark, pedestal
        self.can_explain = frames is not None and (dark is not None or pedestal is not None)
        self.region = region
        self._mapped = {label: [int(f) for f in r["branch_frame"].to_numpy()]
                        for label, r in self.results.items()}
        sets = [set(f) for f in self._mapped.values()]
        common = sorted(set.intersection(*sets)) if sets else []
        self.mapped_frames = common or (sorted(set.union(*sets)) if sets else [])
        self.frame_shape = tuple(int(n) for n in np.asarray(
            (self.results[self.labels[0]] if self.labels else datasets[0]).attrs["frame_shape"]))
        self._frames_read: OrderedDict = OrderedDict()  # worker-owned caches
        self._explained: OrderedDict = OrderedDict()
        self.view = None
        self._mode = None
        self._marker = None
        self._zoomed = False  # whether the view's limits show the differences
        self._shown: dict = {}

        # ------------------------------------------------------------- controls
        self.frame_slider = widgets.SelectionSlider(
            options=self.mapped_frames or [0], description="frame", continuous_update=False,
            disabled=not self.mapped_frames)
        self.finder_selector = widgets.Dropdown(options=self.labels, description="finder",
                                                disabled=not self.labels)
        self.diff_toggle = widgets.ToggleButton(value=False, description="difference",
                                                disabled=len(self.labels) < 2)
        self.diff_selector = widgets.Dropdown(options=self.labels, description="vs",
                                              disabled=len(self.labels) < 2)
        self.zoom_toggle = widgets.ToggleButton(
            value=False, description="zoom to differences", icon="search", disabled=True,
            tooltip="show the pixels that differ and a margin; off: the region given, or "
                    "the whole frame",
            layout=widgets.Layout(width="auto"))
        self.pixel_html = widgets.HTML(value="<i>click a pixel (or select_pixel(y, x))</i>")
        self.explanation_html = widgets.HTML(value="" if self.can_explain else (
            "<i>Give the frames (frames=) and the dark frames (dark=) or the starting "
            "pedestal (pedestal=) to see why each finder took its branch.</i>"))
        self.host = self.figure_host((7.5, 5.5))
        self.children = [
            widgets.HBox([self.frame_slider, self.finder_selector]),
            widgets.HBox([self.diff_toggle, self.diff_selector, self.zoom_toggle,
                          self.progress]),
            self.status.widget,
            self.host.widget,
            self.pixel_html,
            self.explanation_html,
        ]
        if not self.labels:
            self.status.fail("none of the results has branch maps: run the finders with "
                             "branch_maps=True (or a list of frame numbers), or the CLI "
                             "with --branch-maps")
            return

        finder = self.labels[0] if finder is None else str(finder)
        if finder not in self.results:
            raise ValueError(f"finder {finder!r} is not one of the results with branch "
                             f"maps: {', '.join(self.labels)}")
        if diff is not None and (diff not in self.results or diff == finder):
            raise ValueError(f"diff {diff!r} must be another result with branch maps: "
                             f"{', '.join(label for label in self.labels if label != finder)}")
        frame = self.mapped_frames[0] if frame is None else int(frame)
        if frame not in self.mapped_frames:
            raise ValueError(f"frame {frame} has no branch map; mapped frames: "
                             f"{self.mapped_frames[:10]}")

        # ---------------------------------------------------------------- graph
        self._frame = Input(frame, "frame")
        self._finder = Input(finder, "finder")
        self._diff = Input(diff, "diff")
        self._pixel = Input(None, "pixel")
        self._zoom = Input(False, "zoom")
        self._frame_task = self.task(self._read_frame, self._frame, name="frame") \
            if frames is not None else None
        self._explain_task = self.task(self._explain, self._frame, self._pixel,
                                       name="explain") if self.can_explain else None
        self._map_view = ViewNode(self._render_map, self._frame, self._finder, self._diff,
                                  self._pixel, self._zoom, pump=self.pump, figure=self.host)
        self._controls_view = ViewNode(self._render_controls, self._frame, self._finder,
                                       self._diff, self._zoom, pump=self.pump)
        self._pixel_view = ViewNode(self._render_pixel, self._frame, self._finder,
                                    self._pixel, pump=self.pump)
        self._explanation_view = ViewNode(self._render_explanation, self._frame,
                                          self._pixel, pump=self.pump)

        self.watch(self.frame_slider, lambda v: self._set_frame(v))
        self.watch(self.finder_selector, lambda v: self._set_finder(v))
        self.watch(self.diff_toggle, lambda on: self._set_diff(
            self.diff_selector.value if on else None))
        self.watch(self.diff_selector, lambda v: self._set_diff(
            v if self.diff_toggle.value else None))
        self.watch(self.zoom_toggle, lambda on: self._zoom.set(bool(on)))
        self.host.figure.canvas.mpl_connect("button_press_event", self._clicked)
        if self.unmapped:
            self.status.show(f"left out (no branch maps): {', '.join(self.unmapped)}")
        for view in (self._map_view, self._controls_view, self._pixel_view,
                     self._explanation_view):
            view.notify()
        if self._frame_task is not None:
            self._frame_task.submit()

    # ------------------------------------------------------------------ state
    @property
    def frame(self) -> int | None:
        """The frame shown."""
        return self._frame.value if self.labels else None

    @frame.setter
    def frame(self, frame: int) -> None:
        self._on_ui(self._set_frame, frame)

    @property
    def finder(self) -> str | None:
        """The label of the finder shown."""
        return self._finder.value if self.labels else None

    @finder.setter
    def finder(self, label: str) -> None:
        self._on_ui(self._set_finder, label)

    @property
    def diff(self) -> str | None:
        """The finder compared with `finder` (None: the branch map of `finder` alone)."""
        return self._diff.value if self.labels else None

    @diff.setter
    def diff(self, label: str | bool | None) -> None:
        self._on_ui(self._set_diff, label)

    @property
    def zoom(self) -> bool:
        """Whether the difference view shows only the pixels that differ (and
        `aare_lab.plots.branchmap.ZOOM_MARGIN` pixels around them), frame after frame;
        off, it shows ``region`` (default: the whole frame)."""
        return self._zoom.value if self.labels else False

    @zoom.setter
    def zoom(self, on: bool) -> None:
        self._on_ui(self._zoom.set, bool(on))

    @property
    def pixel(self) -> tuple[int, int] | None:
        """``(y, x)`` of the selected pixel."""
        return self._pixel.value if self.labels else None

    def select_pixel(self, y: int, x: int) -> None:
        """Select pixel ``(y, x)``, as a click on it does."""
        self._on_ui(self._set_pixel, y, x)

    @property
    def branches(self) -> dict[str, Branch]:
        """``label -> Branch`` at the selected pixel in the shown frame (finders that
        mapped the frame)."""
        if self.pixel is None:
            return {}
        y, x = self.pixel
        return {label: Branch(int(codes[y, x]))
                for label, codes in self._codes_of_frame(self.frame).items()}

    @property
    def window(self) -> tuple[str, np.ndarray] | None:
        """``(source, values)`` shown for the selected pixel: ``"cluster <label>"`` with
        the result's window when it is a centre of `finder`, else ``"frame"`` with the
        raw values around it (None without frames or before they are read)."""
        if self.pixel is None:
            return None
        return self._window(self.frame, self.finder, *self.pixel)

    @property
    def explanation(self):
        """The `aare_lab.analysis.explain.Explanation` of the selected pixel (None: not (yet))."""
        if self._explain_task is None or self.pixel is None:
            return None
        e = self._explain_task.value
        return e if e is not None and (e.frame, e.y, e.x) == (self.frame, *self.pixel) else None

    # --------------------------------------------------------- UI-thread side
    def _on_ui(self, func, *args) -> None:
        if not self.labels:
            self.status.fail("none of the results has branch maps")
            return
        self.on_ui(func, *args)

    def _set_frame(self, frame) -> None:
        try:
            frame = int(frame)
        except (TypeError, ValueError):
            self.status.fail(f"a frame number is an integer, got {frame!r}")
            return
        missing = [label for label in (self.finder, self.diff)
                   if label is not None and frame not in self._mapped[label]]
        if missing:
            self.status.fail(f"frame {frame} has no branch map in {', '.join(missing)}; "
                             f"mapped frames: {self._mapped[missing[0]][:10]}")
            return
        self._frame.set(frame)

    def _set_finder(self, label) -> None:
        label = str(label)
        if label not in self.results:
            self.status.fail(f"finder {label!r}: the results with branch maps are "
                             f"{', '.join(self.labels)}")
            return
        if self.frame not in self._mapped[label]:
            self.status.fail(f"{label} has no branch map of frame {self.frame}")
            return
        if label == self.diff:
            self._diff.set(self.finder)  # swap the two
        self._finder.set(label)

    def _set_diff(self, label) -> None:
        if label is True:
            others = [lab for lab in self.labels if lab != self.finder]
            label = others[0] if others else None
            if label is None:
                self.status.fail("a difference needs two results with branch maps")
                return
        if label in (None, False):
            self._diff.set(None)
            return
        label = str(label)
        if label not in self.results or label == self.finder:
            self.status.fail(f"difference: {label!r} is not another result with branch "
                             f"maps ({', '.join(lab for lab in self.labels if lab != self.finder)})")
            return
        if self.frame not in self._mapped[label]:
            self.status.fail(f"{label} has no branch map of frame {self.frame}")
            return
        self._diff.set(label)

    def _set_pixel(self, y, x) -> None:
        try:
            y, x = int(y), int(x)
        except (TypeError, ValueError):
            self.status.fail(f"a pixel is (y, x), got {(y, x)!r}")
            return
        ny, nx = self.frame_shape
        if not (0 <= y < ny and 0 <= x < nx):
            self.status.fail(f"pixel (y={y}, x={x}) is outside the {ny}x{nx} frame")
            return
        self._pixel.set((y, x))

    def _clicked(self, event) -> None:
        """A click on the canvas (on the UI thread: FigureHost re-routes the messages)."""
        if self.view is None or event.inaxes is not self.view.ax or event.xdata is None:
            return
        toolbar = getattr(self.host.manager, "toolbar", None)
        if toolbar is not None and getattr(toolbar, "mode", ""):
            return  # panning or zooming
        self._set_pixel(int(round(event.ydata)), int(round(event.xdata)))

    # -------------------------------------------------------------- data side
    def _codes_of_frame(self, frame: int) -> dict[str, np.ndarray]:
        out = {}
        for label, r in self.results.items():
            if frame in self._mapped[label]:
                k = self._mapped[label].index(frame)
                out[label] = r["branch_map"].to_numpy()[k]
        return out

    def _codes(self, label: str, frame: int) -> np.ndarray:
        from aare_lab.plots.branchmap import frame_codes

        return frame_codes(self.results[label], frame)

    def _raw_frame(self, frame: int) -> np.ndarray | None:
        task = self._frame_task
        if task is None or task.value is None or task.value[0] != frame:
            return None
        return task.value[1]

    def _window(self, frame: int, label: str, y: int, x: int):
        r = self.results[label]
        hit = np.flatnonzero((r["frame_number"].to_numpy() == frame)
                             & (r["y"].to_numpy() == y) & (r["x"].to_numpy() == x))
        if len(hit):
            return f"cluster {label}", r["window"].to_numpy()[hit[0]]
        raw = self._raw_frame(frame)
        if raw is None:
            return None
        ry, rx = (s // 2 for s in parse_cluster_size(r.attrs["cluster_size"]))
        ny, nx = raw.shape
        yy, xx = np.mgrid[y - ry:y + ry + 1, x - rx:x + rx + 1]
        inside = (yy >= 0) & (yy < ny) & (xx >= 0) & (xx < nx)
        values = np.where(inside, raw[np.clip(yy, 0, ny - 1), np.clip(xx, 0, nx - 1)], 0)
        return "frame", np.ma.masked_array(values, ~inside)

    def _read_frame(self, job, frame: int):
        """On the worker: the raw frame numbered ``frame``."""
        from aare_lab.sources import open_source

        if frame not in self._frames_read:
            for chunk in open_source(self.frames).chunks(64):
                job.check()
                hit = np.flatnonzero(chunk.numbers == frame)
                if len(hit):
                    self._frames_read[frame] = np.array(chunk.frames[hit[0]])
                    break
            else:
                raise ValueError(f"frame {frame} is not in the frames given")
            trim_oldest(self._frames_read, CACHE_SIZE)
        return frame, self._frames_read[frame]

    def _explain(self, job, frame: int, pixel):
        """On the worker: the explanation of ``pixel`` in ``frame`` for every finder."""
        from aare_lab.analysis.explain import explain

        if pixel is None:
            return None
        key = (frame, *pixel)
        if key not in self._explained:
            job.check()
            self._explained[key] = explain(self.frames, frame, *pixel, self.results,
                                           dark=self.dark, pedestal=self.pedestal)
            trim_oldest(self._explained, CACHE_SIZE)
        return self._explained[key]

    def _task_state(self, task) -> None:
        super()._task_state(task)
        if task is self._explain_task:
            self._explanation_view.notify()
        elif task is self._frame_task:
            self._pixel_view.notify()

    def state_lines(self) -> list[str]:
        """The frame, finders and pixel shown now (the status line says them only after
        a task)."""
        return [self.describe(None)] if self.labels else []

    def describe(self, task) -> str:
        """The status text: the frame, the finders shown and the selected pixel."""
        text = f"frame {self.frame}: {self.finder}" + (f" vs {self.diff}" if self.diff else "")
        if self.diff and self.zoom:
            text += " (zoomed to the differences)"
        if self.pixel is not None:
            y, x = self.pixel
            text += f"; pixel (y={y}, x={x}): " + ", ".join(
                f"{label} {b.name}" for label, b in self.branches.items())
        if self.unmapped:
            text += f" (left out, no branch maps: {', '.join(self.unmapped)})"
        return text

    # ----------------------------------------------------------------- views
    def _render_map(self, frame: int, finder: str, diff: str | None, pixel,
                    zoom: bool) -> None:
        from aare_lab.plots.branchmap import BranchDiffView, BranchMapView, frame_centres

        codes = self._codes(finder, frame)
        centres = frame_centres(self.results[finder], frame)
        mode = ("map", finder) if diff is None else ("diff", finder, diff)
        if diff is not None:
            codes_b = self._codes(diff, frame)
            centres_b = frame_centres(self.results[diff], frame)
            if codes_b.shape != codes.shape:
                raise ValueError(f"the frames of {finder} and {diff} differ in shape: "
                                 f"{codes.shape} and {codes_b.shape}")
        title = f"{finder}: branches of frame {frame}" if diff is None else \
            f"{{a}} vs {{b}}, frame {frame}: {{n}} pixels differ"
        if mode != self._mode:
            figure = self.host.figure
            figure.clear()
            if diff is None:
                self.view = BranchMapView(codes, centres, title=title, region=self.region,
                                          fig=figure)
            else:
                self.view = BranchDiffView(codes, codes_b, centres, centres_b,
                                           labels=(finder, diff), title=title,
                                           region=self.region, fig=figure)
            for role in ("branch", "differs"):
                if role in self.view.artists:
                    self.view.artists[role].set_mouseover(False)
            self._marker = self.view.ax.add_patch(Rectangle(
                (-0.5, -0.5), 1, 1, fill=False, edgecolor=SELECTED_COLOUR, linewidth=2,
                zorder=5, visible=False, gid="selected"))
            self.view.ax.format_coord = self._format_coord
            self._mode = mode
            self._zoomed = False
        elif diff is None:
            self.view.update(codes, centres, title=title)
        else:
            self.view.update(codes, codes_b, centres, centres_b, title=title)
        if diff is not None:
            self._apply_zoom(zoom)
        self._shown = {"frame": frame, "finder": finder, "diff": diff, "codes": codes,
                       "codes_b": codes_b if diff is not None else None}
        if pixel is not None:
            self._marker.set_xy((pixel[1] - 0.5, pixel[0] - 0.5))
        self._marker.set_visible(pixel is not None)

    def _apply_zoom(self, zoom: bool) -> None:
        """Zoom the difference view to the pixels that differ in the frame shown, or back
        to ``region``; unzoomed, the limits a user set with the toolbar stay."""
        if zoom:
            self.view.zoom_to_differences()
        elif self._zoomed:
            self.view.show_region(self.region)
        self._zoomed = zoom

    def _format_coord(self, x: float, y: float) -> str:
        """The footer text under the cursor (called on the UI thread)."""
        s = self._shown
        col, row = int(round(x)), int(round(y))
        codes = s.get("codes")
        if codes is None or not (0 <= row < codes.shape[0] and 0 <= col < codes.shape[1]):
            return f"x={x:.1f}, y={y:.1f}"
        text = f"(y={row}, x={col}) {s['finder']}: {Branch(int(codes[row, col])).name}"
        if s["diff"] is not None:
            text += f", {s['diff']}: {Branch(int(s['codes_b'][row, col])).name}"
        raw = self._raw_frame(s["frame"])
        if raw is not None:
            text += f", value {int(raw[row, col])} ADU"
        return text

    def _render_controls(self, frame: int, finder: str, diff: str | None, zoom: bool) -> None:
        with self.syncing():
            self.frame_slider.value = frame
            self.finder_selector.value = finder
            self.diff_toggle.value = diff is not None
            self.zoom_toggle.value = zoom
            self.zoom_toggle.disabled = diff is None
            if diff is not None:
                self.diff_selector.value = diff

    def _render_pixel(self, frame: int, finder: str, pixel) -> None:
        if pixel is None:
            return
        y, x = pixel
        rows = "".join(
            f"<tr><td style='padding:0 6px'>{html.escape(label)}</td>"
            f"<td style='padding:0 6px'><b>{b.name}</b></td></tr>"
            for label, b in self.branches.items())
        parts = [f"<h4>pixel (y={y}, x={x}) of frame {frame}</h4>",
                 f"<table style='border-collapse:collapse'>{rows}</table>"]
        shown = self._window(frame, finder, y, x)
        if shown is None:
            parts.append("<i>not a centre of " + html.escape(finder) + (
                "; reading the frame…" if self._frame_task is not None else
                "; give frames= to see the pixel values around it") + "</i>")
        else:
            source, values = shown
            inside = None if not np.ma.isMaskedArray(values) else ~np.ma.getmaskarray(values)
            what = f"window of the {source.split()[1]} cluster (pedestal-subtracted, ADU)" \
                if source.startswith("cluster") else "raw frame values around it (ADU)"
            parts += [f"<b>{html.escape(what)}</b>", _window_table(np.ma.getdata(values), inside)]
        self.pixel_html.value = "".join(parts)
        if not any(t.error is not None for t in self.tasks):
            self.status.show(self.describe(None))

    def _render_explanation(self, frame: int, pixel) -> None:
        from aare_lab.plots.explanation import ExplanationTable

        task = self._explain_task
        if task is None or pixel is None:
            return
        e = self.explanation
        where = f"pixel (y={pixel[0]}, x={pixel[1]}) of frame {frame}"
        if e is not None:
            self.explanation_html.value = ExplanationTable(e).html
        elif task.error is not None and not task.running:
            self.explanation_html.value = (
                f"<span style='color:#b2182b'>⚠ could not explain {where}: "
                f"{html.escape(_message(task.error))}</span>")
        else:
            self.explanation_html.value = f"<i>explaining {where}…</i>"
