"""CapTuner: choose ``max_clusters_per_frame`` from the clusters per frame of an uncapped run.

The tuner shows, for the cap on its slider, the histogram of clusters per frame with the
cap drawn on it (`aare_lab.plots.caps.CapView`), how many frames and clusters the cap
would truncate, and what a buffer at that cap costs in memory and in transfer at a frame
rate; it recommends a cap (see `recommend_cap`).
"""

from __future__ import annotations

import html
import math

import ipywidgets as widgets
import numpy as np
import xarray as xr

from aare_lab.analysis.caps import buffer_bytes_per_frame, byte_size, cap_analysis
from aare_lab.checks import positive_int
from aare_lab.model.params import WINDOW_DTYPES, parse_cluster_size

from .base import InteractiveWidget
from .graph import Input, ViewNode

#: Frames per second the transfer cost is quoted at by default (MÖNCH03 runs at 1 kHz).
DEFAULT_FRAME_RATE = 1000.0
#: Head-room of the recommended cap over the largest count seen.
DEFAULT_MARGIN = 0.2


def tidy_up(value: float) -> int:
    """``value`` rounded up to an integer with at most two significant digits (>= 1).

    Examples
    --------
    >>> tidy_up(2875.2), tidy_up(123), tidy_up(87), tidy_up(1001), tidy_up(0)
    (2900, 130, 87, 1100, 1)
    """
    value = math.ceil(value)
    if value <= 1:
        return 1
    step = 10 ** max(0, len(str(value)) - 2)
    return -(-value // step) * step


def recommend_cap(n_found, margin: float = DEFAULT_MARGIN, quantile: float = 1.0) -> int:
    """The cap the tuner recommends for clusters-per-frame counts ``n_found``.

    The rule: take the ``quantile`` of the counts (default 1.0, the largest count seen),
    add the ``margin`` (default 20 %), and round up to two significant digits
    (`tidy_up`): ``tidy_up(q * (1 + margin))``. With the default no frame of the run is
    truncated, and a frame denser by up to the margin than the densest seen would not be
    either. A ``quantile`` below 1 accepts truncating the densest frames for a smaller
    buffer.

    Examples
    --------
    >>> recommend_cap([1800, 2100, 2396])        # 2396 * 1.2 = 2875.2
    2900
    >>> recommend_cap([10, 20, 30], margin=0)
    30
    """
    counts = np.asarray(n_found)
    basis = float(np.quantile(counts, quantile, method="higher")) if counts.size else 0.0
    return tidy_up(basis * (1.0 + margin))


class CapTuner(InteractiveWidget):
    """A cap slider over the clusters per frame of an uncapped run, with what the cap costs.

    Moving the slider (or typing a cap) shows, for that cap: the histogram of clusters per
    frame with the cap line, the frames it would truncate and the clusters it would drop
    (in an HTML table, and in ``report``), the bytes of output buffer per frame at the
    window dtype (`aare_lab.analysis.caps.buffer_bytes_per_frame`), per 1000 frames, and per second
    at ``frame_rate`` (what moving full buffers over PCIe would take), beside the data
    actually kept. The recommended cap (`recommend_cap`) is one click away.

    Parameters
    ----------
    result_or_counts
        A finder result run without a cap (or whose cap truncated nothing): its
        ``n_found`` per frame, cluster size and window dtype are used. Or the clusters per
        frame as an array (or ``n_found`` DataArray).
    cap
        The cap shown first (default: the recommended one).
    margin
        Head-room of the recommended cap (0.2: 20 % over the basis count).
    quantile
        The basis of the recommendation: this quantile of the counts (1.0: the largest).
    frame_rate
        Frames per second for the transfer rate (default 1000 Hz, MÖNCH03's).
    cluster_size, window_dtype
        For the buffer cost; default those of the result, else 3x3 and int32.
    interactive, max_hz
        As for `aare_lab.widgets.base.InteractiveWidget`.

    Raises
    ------
    ValueError
        For a result already truncated by its own cap (its counts beyond the cap are
        known, but not its clusters: re-run without a cap, or pass ``result["n_found"]``
        to tune on the counts alone), for counts that are not non-negative integers, and
        for bad ``cap``, ``margin``, ``quantile`` or ``frame_rate``.

    Attributes
    ----------
    slider, cap_box
        The cap slider and the box to type a cap into (kept in step).
    use_recommended
        The button that sets the recommended cap.
    table
        The HTML table of the truncation and the costs.
    host
        The `aare_lab.widgets.figures.FigureHost` of the histogram.
    view
        The `aare_lab.plots.caps.CapView` (None until first drawn).

    Examples
    --------
    >>> import numpy as np
    >>> tuner = CapTuner(np.array([3, 5, 9, 4]), interactive=False)
    >>> tuner.cap = 4; tuner.wait()
    >>> tuner.report.attrs["frames_truncated"], tuner.report.attrs["clusters_dropped"]
    (2, 6)
    """

    def __init__(self, result_or_counts, *, cap: int | None = None,
                 margin: float = DEFAULT_MARGIN, quantile: float = 1.0,
                 frame_rate: float = DEFAULT_FRAME_RATE,
                 cluster_size: int | str | tuple[int, int] | None = None,
                 window_dtype: str | None = None, interactive: bool | None = None,
                 max_hz: float = 4.0):
        n_found, frames, size, dtype = _counts_of(result_or_counts, cluster_size,
                                                  window_dtype)
        self.margin = _number("margin", margin, low=0.0)
        self.quantile = _number("quantile", quantile, low=0.0, high=1.0)
        if self.quantile == 0.0:
            raise ValueError("quantile must be in (0, 1], got 0")
        self.frame_rate = _number("frame_rate", frame_rate, low=0.0)
        if self.frame_rate == 0.0:
            raise ValueError("frame_rate must be > 0 frames per second, got 0")
        super().__init__(interactive=interactive, max_hz=max_hz)
        self.n_found = n_found
        self.frame_numbers = frames
        self.cluster_size = size
        self.window_dtype = dtype
        self._recommended = recommend_cap(n_found, self.margin, self.quantile)
        cap = self._recommended if cap is None else positive_int("cap", cap)
        high = tidy_up(1.5 * max(self._recommended, int(n_found.max(initial=0)), cap))

        self.slider = widgets.IntSlider(value=cap, min=1, max=high, step=1,
                                        description="cap", continuous_update=True,
                                        layout=widgets.Layout(width="32em"))
        self.cap_box = widgets.IntText(value=cap, description="max/frame",
                                       layout=widgets.Layout(width="14em"))
        self.use_recommended = widgets.Button(
            description=f"use recommended ({self._recommended:,})",
            tooltip=self._rule_text(), layout=widgets.Layout(width="auto"))
        self.table = widgets.HTML(value="")
        self.cap_node = Input(cap, "cap")
        for control in (self.slider, self.cap_box):
            control.observe(
                lambda change, control=control: self.ui.call_soon(self._typed, control,
                                                                   change["new"]),
                names="value")
        self.use_recommended.on_click(
            lambda _: self.ui.call_soon(self._apply, None, self._recommended))

        self.analysis = self.task(self._analyse, self.cap_node, name="cap analysis")
        self.host = self.figure_host((7.0, 4.0))
        self.view = None
        self._shown: xr.Dataset | None = None
        self.figure_node = ViewNode(self._draw, self.analysis, pump=self.pump,
                                    figure=self.host)
        self.table_node = ViewNode(self._tabulate, self.analysis, pump=self.pump)
        self.children = [
            widgets.HBox([self.slider, self.cap_box]),
            widgets.HBox([self.use_recommended, self.progress]),
            self.status.widget,
            widgets.HBox([self.host.widget, self.table]),
        ]
        self.analysis.submit()

    # ------------------------------------------------------------------ state
    @property
    def cap(self) -> int:
        """The cap analysed (the last good value entered); set it as a user would type it."""
        return self.cap_node.value

    @cap.setter
    def cap(self, value) -> None:
        self.cap_box.value = value

    @property
    def report(self) -> xr.Dataset | None:
        """The `aare_lab.analysis.caps.cap_analysis` Dataset shown now (None before the first
        draw)."""
        return self._shown

    @property
    def recommended(self) -> int:
        """The recommended cap (`recommend_cap` of the counts with this margin/quantile)."""
        return self._recommended

    def costs(self, cap: int | None = None) -> dict[str, float]:
        """What a buffer at ``cap`` (default: the current one) costs, in bytes.

        Returns
        -------
        dict
            ``bytes_per_frame`` (the output buffer of one frame at the window dtype),
            ``bytes_per_1000_frames``, ``bytes_per_second`` (full buffers at
            ``frame_rate``, what a fixed-size transfer over PCIe moves), and
            ``kept_bytes_per_second`` (only the clusters kept, on average, at that rate).
        """
        cap = self.cap if cap is None else positive_int("cap", cap)
        per_frame = buffer_bytes_per_frame(cap, self.cluster_size, self.window_dtype)
        one = buffer_bytes_per_frame(1, self.cluster_size, self.window_dtype)
        per_cluster = buffer_bytes_per_frame(2, self.cluster_size, self.window_dtype) - one
        frame_bytes = one - per_cluster
        kept = float(np.minimum(self.n_found, cap).mean()) if self.n_found.size else 0.0
        return {"bytes_per_frame": per_frame, "bytes_per_1000_frames": 1000 * per_frame,
                "bytes_per_second": per_frame * self.frame_rate,
                "kept_bytes_per_second": (kept * per_cluster + frame_bytes) * self.frame_rate}

    # ---------------------------------------------------------------- helpers
    def _typed(self, control, value) -> None:
        """A control changed (UI thread); stale echoes of earlier values are dropped."""
        if value != control.value:
            return  # the control moved on since; its newer value is queued behind this
        self._apply(control, value)

    def _apply(self, source, value) -> None:
        try:
            cap = positive_int("cap", value)
        except ValueError as err:
            self.status.fail(f"{err}: a cap is a number of clusters per frame, at least 1; "
                             f"the view still shows cap {self.cap:,}")
            return
        if source is not self.slider:
            if cap > self.slider.max:
                self.slider.max = tidy_up(1.5 * cap)
            self.slider.value = cap
        if source is not self.cap_box:
            self.cap_box.value = cap
        if cap == self.cap_node.value and self.status.error is not None:
            self.status.show(self.describe(self.analysis))  # back to a good value
        self.cap_node.set(cap)

    def _analyse(self, job, cap: int) -> xr.Dataset:
        report = cap_analysis(self.n_found, cap, cluster_size=self.cluster_size,
                              window_dtype=self.window_dtype)
        report = report.assign_coords(frame=self.frame_numbers)
        report.attrs.update({f"{k}": float(v) for k, v in self.costs(cap).items()
                             if k != "bytes_per_frame"})
        report.attrs.update(recommended=self._recommended, margin=self.margin,
                            quantile=self.quantile, frame_rate=self.frame_rate)
        return report

    def state_lines(self) -> list[str]:
        """The cap and what it truncates, and the recommended cap."""
        return [*super().state_lines(), f"recommended {self._recommended:,}"]

    def describe(self, task) -> str:
        """The status text: the cap and what it truncates."""
        report = task.value
        if report is None:
            return ""
        a = report.attrs
        return (f"cap {a['cap']:,}: {a['frames_truncated']:,} of {a['frames']:,} frames "
                f"truncated, {a['clusters_dropped']:,} of {a['clusters']:,} clusters dropped; "
                f"{byte_size(a['bytes_per_frame'])} per frame")

    def _draw(self, report: xr.Dataset) -> None:
        from aare_lab.plots.caps import CapView

        if self.view is None:
            self.view = CapView(report, fig=self.host.figure)
        else:
            self.view.update(report)
        self._shown = report

    def _tabulate(self, report: xr.Dataset) -> None:
        self.table.value = _table(report, self.window_dtype, self._rule_text())

    def _rule_text(self) -> str:
        basis = "largest count" if self.quantile == 1.0 else f"{self.quantile:g} quantile"
        return (f"{basis} × (1 + {self.margin:g}), rounded up to two significant digits")


def _counts_of(data, cluster_size, window_dtype):
    """``n_found``, frame numbers, cluster size and window dtype of a result or counts."""
    if isinstance(data, xr.Dataset):
        if "n_found" not in data:
            raise ValueError("a CapTuner needs a finder result (with n_found per frame) or "
                             "an array of clusters per frame")
        n_found = data["n_found"].to_numpy()
        if "n_kept" in data:
            kept = data["n_kept"].to_numpy()
            lost = kept < n_found
            if lost.any():
                cap = data.attrs.get("max_clusters_per_frame")
                raise ValueError(
                    f"this result is truncated: its cap max_clusters_per_frame={cap} cut "
                    f"{int(lost.sum())} of {len(n_found)} frames (densest "
                    f"{int(n_found.max())} clusters), so it cannot show what a larger "
                    "cap keeps. Re-run the finder without a cap "
                    "(max_clusters_per_frame=None) and tune on that result, or pass "
                    "result['n_found'] to tune on the counts alone")
        frames = data["frame"].to_numpy() if "frame" in data.coords else np.arange(len(n_found))
        cluster_size = cluster_size or data.attrs.get("cluster_size") or (3, 3)
        window_dtype = window_dtype or data.attrs.get("window_dtype") or "int32"
    else:
        if isinstance(data, xr.DataArray) and data.ndim == 1:
            frames = data[data.dims[0]].to_numpy() if data.dims[0] in data.coords \
                else np.arange(data.size)
        else:
            frames = None
        n_found = np.asarray(data)
        if n_found.ndim != 1:
            raise ValueError(f"clusters per frame must be one-dimensional, got shape "
                             f"{n_found.shape}")
        frames = np.arange(len(n_found)) if frames is None else frames
        cluster_size = cluster_size or (3, 3)
        window_dtype = window_dtype or "int32"
    if n_found.size == 0:
        raise ValueError("no frames: the clusters per frame are empty")
    if not (np.issubdtype(n_found.dtype, np.integer) or
            (np.isfinite(n_found).all() and (n_found == np.round(n_found)).all())):
        raise ValueError("clusters per frame must be whole numbers")
    n_found = n_found.astype(np.int64)
    if (n_found < 0).any():
        raise ValueError("clusters per frame must be >= 0")
    size = parse_cluster_size(cluster_size)
    if window_dtype not in WINDOW_DTYPES:
        raise ValueError(f"window_dtype={window_dtype!r} is not one of {', '.join(WINDOW_DTYPES)}")
    return n_found, np.asarray(frames), size, str(window_dtype)


def _number(name: str, value, *, low: float, high: float | None = None) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(value) or value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return value


def _table(report: xr.Dataset, window_dtype: str, rule: str) -> str:
    a = report.attrs
    truncated = report["frame"].to_numpy()[report["truncated"].to_numpy()]
    first = ", ".join(str(int(f)) for f in truncated[:8]) + (" …" if len(truncated) > 8 else "")
    rows = [
        ("cap", f"{a['cap']:,} clusters per frame"),
        ("frames truncated", f"{a['frames_truncated']:,} of {a['frames']:,} "
                             f"({100 * a['truncated_fraction']:.3g} %)"
                             + (f": {first}" if len(truncated) else "")),
        ("clusters dropped", f"{a['clusters_dropped']:,} of {a['clusters']:,} "
                             f"({100 * a['dropped_fraction']:.3g} %)"),
        ("largest count", f"{a['max_count']:,}"),
        ("buffer per frame", f"{byte_size(a['bytes_per_frame'])} ({a['bytes_per_frame']:,} B, "
                             f"{a['cluster_size']} {window_dtype})"),
        ("per 1000 frames", byte_size(a["bytes_per_1000_frames"])),
        (f"at {a['frame_rate']:g} frames/s", f"{byte_size(a['bytes_per_second'])}/s full buffers "
                                             f"over PCIe; {byte_size(a['kept_bytes_per_second'])}"
                                             "/s of kept clusters"),
        ("recommended", f"{a['recommended']:,} ({rule})"),
    ]
    body = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(k)}</th>"
                   f"<td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table style='font-size:90%'>{body}</table>"
