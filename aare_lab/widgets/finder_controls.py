"""FinderControls: change the finder and its parameters, see the run and its spectrum."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from aare_lab.analysis.fit import line_energies
from aare_lab.analysis.spectra import fit_or_none, peak_fit, shown_energy, spectrum_units
from aare_lab.checks import positive_int
from aare_lab.detector.pedestal import NOISE_MODES, PEDESTAL_DTYPES
from aare_lab.finders import FINDERS, available_finders
from aare_lab.model.clipping import refuse_clipping
from aare_lab.model.params import parse_cluster_size
from aare_lab.model.results import spectrum, spectrum_edges
from aare_lab.model.spec import FinderSpec

from .base import InteractiveWidget
from .controls import (
    N_SIGMA_MAX,
    NotesLine,
    cluster_size_box,
    forward,
    n_sigma_value,
    size_text,
)
from .graph import Input, Node, ViewNode
from .run import FinderRunner, RunOutcome, spec_text


class FinderControls(InteractiveWidget):
    """Finder, nσ, cluster size, pedestal dtype, noise and cap; every change re-runs.

    The run starts from the same trained pedestal each time, on a bounded preview of the
    frames on the CPU, or on the frames kept on the GPU (from a device snapshot of the
    pedestal) for ``cuda``. It shows which finder ran, how long it took, frames/s and the
    ``n_found``/``n_kept`` totals, and updates every attached view (a spectrum by default).
    Under the status line, `notes` says what `find` would have warned about (too few dark
    frames, gain bits, clipped windows).

    Parameters
    ----------
    frames
        The frames to run on (array, file spec or source).
    dark
        Dark frames (to train a pedestal for each dtype and noise mode).
    pedestal
        A trained pedestal instead of ``dark`` (then dtype and noise are the pedestal's).
    spec
        The starting `aare_lab.FinderSpec` (default: frozen, 5σ, 3x3, no cap; ``cuda``
        where a GPU is present).
    preview_frames
        Frames each run uses at most (default: 200 on the CPU, all on the GPU).
    clusters
        Keep clusters (the result Dataset, for other views); False histograms on the fly
        (fastest on the GPU) over ``bins``.
    bins
        Spectrum bin edges (ADU). By default the first run of each cluster size picks them
        from its energies and later runs of that size keep them, so that spectra at other
        nσ, caps or pedestals are compared on the same bins (clusters outside are counted).
    gain
        ADU per keV, for an energy axis in keV.
    fit_window
        ``(low, high)`` in the spec's units (ADU, also with ``gain``; keV for a calibrated
        spec) for the peak fit drawn over every run's spectrum (default: around the
        highest bin); the fit follows each run, so that the position and resolution show
        what nσ, cluster size or pedestal do to the peak.
    lines
        For a source of known lines, the Kα and Kβ energies in keV (or
        `aare_lab.simulate.Beam.lines`): the fit is then the Kα/Kβ doublet of
        `aare_lab.analysis.fit`. Default: one gaussian.
    interactive, max_hz
        As for `aare_lab.widgets.base.InteractiveWidget`.

    Examples
    --------
    >>> from aare_lab.simulate import Beam, Detector, Simulator
    >>> sim = Simulator(Detector(frame_shape=(16, 16)), Beam(photons_per_frame=3), seed=0)
    >>> dark, (frames, _) = sim.dark(20), sim.frames(5)
    >>> controls = FinderControls(frames, dark, spec=FinderSpec("frozen"), interactive=False)
    >>> controls.set(n_sigma=4); controls.wait()
    >>> controls.spec.n_sigma, controls.outcome.frames
    (4.0, 5)
    """

    def __init__(self, frames, dark=None, *, pedestal=None, spec: FinderSpec | None = None,
                 preview_frames: int | None = None, clusters: bool = True,
                 bins: np.ndarray | None = None, gain: float | None = None,
                 fit_window: tuple[float, float] | None = None, lines=None,
                 interactive: bool | None = None, max_hz: float = 4.0):
        lines = line_energies(lines)
        if spec is not None:
            refuse_clipping(spec.window_dtype, "FinderControls", "find() the clusters")
        super().__init__(interactive=interactive, max_hz=max_hz)
        finders = available_finders()
        if spec is None:
            spec = FinderSpec("cuda" if "cuda" in finders else "frozen")
        if preview_frames is None and spec.finder != "cuda":
            preview_frames = 200
        self.runner = FinderRunner(frames, dark=dark, pedestal=pedestal,
                                   n_pedestal=spec.n_pedestal, preview_frames=preview_frames)
        if not clusters and bins is None:
            raise ValueError("clusters=False histograms on the fly: give the bin edges (bins=)")
        self.bins = None if bins is None else np.asarray(bins, float)
        # The bins each cluster size's first run picked, without ``bins``.
        self._picked_bins: dict[tuple[int, int], np.ndarray] = {}
        self.keep_clusters = clusters
        self.gain, self.fit_window, self.lines = gain, fit_window, lines

        # Every finder is offered: picking cuda without a GPU says what to install.
        self.finder = widgets.Dropdown(options=list(FINDERS), value=spec.finder,
                                       description="finder")
        # The box and the slider share one range: linked in the browser, a narrower
        # slider would clamp what was typed into the box.
        self.n_sigma = widgets.BoundedFloatText(value=spec.n_sigma, min=0.0, max=N_SIGMA_MAX,
                                                step=0.1, description="nσ")
        self.n_sigma_slider = widgets.FloatSlider(value=spec.n_sigma, min=0.0, max=N_SIGMA_MAX,
                                                  step=0.1, continuous_update=False,
                                                  readout=False)
        widgets.jslink((self.n_sigma, "value"), (self.n_sigma_slider, "value"))
        self.cluster_size = cluster_size_box(spec.cluster_size)
        self.pedestal_dtype = widgets.Dropdown(options=list(PEDESTAL_DTYPES),
                                               value=spec.pedestal_dtype,
                                               description="pedestal")
        self.noise = widgets.Dropdown(options=list(NOISE_MODES), value=spec.noise,
                                      description="noise")
        cap = spec.max_clusters_per_frame
        self.cap_enabled = widgets.Checkbox(value=cap is not None, description="cap",
                                            indent=False, layout=widgets.Layout(width="5em"))
        self.cap = widgets.IntText(value=cap or 4000, description="max/frame",
                                   disabled=cap is None)

        inputs = {
            "finder": Input(spec.finder, "finder"),
            "n_sigma": Input(spec.n_sigma, "n_sigma"),
            "cluster_size": Input(spec.cluster_size, "cluster_size"),
            "pedestal_dtype": Input(spec.pedestal_dtype, "pedestal_dtype"),
            "noise": Input(spec.noise, "noise"),
            "max_clusters_per_frame": Input(cap, "max_clusters_per_frame"),
        }
        self.inputs = inputs
        forward(self.ui, self.finder, inputs["finder"], self.status)
        forward(self.ui, self.n_sigma, inputs["n_sigma"], self.status, n_sigma_value)
        forward(self.ui, self.cluster_size, inputs["cluster_size"], self.status,
                parse_cluster_size, size_text)
        forward(self.ui, self.pedestal_dtype, inputs["pedestal_dtype"], self.status)
        forward(self.ui, self.noise, inputs["noise"], self.status)
        # While the cap is off its box is inert: a value typed there waits for the tick.
        forward(self.ui, self.cap, inputs["max_clusters_per_frame"], self.status,
                lambda v: positive_int("max_clusters_per_frame", v)
                if self.cap_enabled.value else None,
                lambda cap: self.cap.value if cap is None else cap)
        self.cap_enabled.observe(lambda change: self.ui.call_soon(self._cap_toggled,
                                                                  change["new"]),
                                 names="value")
        if pedestal is not None and dark is None:
            self.pedestal_dtype.disabled = self.noise.disabled = True

        # The controls' values over the given spec, which keeps what has no control
        # (window dtype, n_pedestal).
        self.spec_node = Node(lambda *values: spec.replace(**dict(zip(inputs, values))),
                              *inputs.values(), name="spec")
        self.run_node = self.task(self._run, self.spec_node, name="run")
        self.notes_line = NotesLine()
        self.spectrum_host = self.figure_host()
        self._spectrum_view = None  # drawn with the first outcome
        self.spectrum_node = ViewNode(self._draw_spectrum, self.run_node, pump=self.pump,
                                      figure=self.spectrum_host)
        self.children = [
            widgets.HBox([self.finder, self.n_sigma, self.n_sigma_slider]),
            widgets.HBox([self.cluster_size, self.pedestal_dtype, self.noise]),
            widgets.HBox([self.cap_enabled, self.cap, self.progress]),
            self.status.widget,
            self.notes_line.widget,
            self.spectrum_host.widget,
        ]
        self.run_node.submit()

    # ------------------------------------------------------------------ state
    @property
    def spec(self) -> FinderSpec:
        """The specification the controls show now."""
        return self.spec_node.value

    @property
    def outcome(self) -> RunOutcome | None:
        """The newest finished run."""
        return self.run_node.value

    @property
    def result(self):
        """The newest result Dataset (None before the first run, or without clusters)."""
        return None if self.outcome is None else self.outcome.result

    @property
    def notes(self) -> tuple[str, ...]:
        """What the newest finished run would have warned about outside a widget, shown
        under the status line (`aare_lab.widgets.run.RunOutcome.notes`)."""
        return self.notes_line.notes

    def state_lines(self) -> list[str]:
        """The spec the controls show, then the last run (its spec too while another
        runs, or when it failed) and its notes."""
        outcome = self.outcome
        if outcome is None:
            return [spec_text(self.spec)]
        ran = "" if outcome.spec == self.spec else f" ({spec_text(outcome.spec)})"
        fit = [] if outcome.fits is None else \
            [peak_fit(outcome.fits, outcome.spec.finder).summary(
                *shown_energy(spectrum_units(outcome.spectrum), self.gain))]
        return [spec_text(self.spec), f"last run{ran}: {outcome.figures()}", *fit,
                *self.notes]

    def set(self, **values) -> None:
        """Set controls as a user would: ``finder``, ``n_sigma``, ``cluster_size``,
        ``pedestal_dtype``, ``noise``, ``max_clusters_per_frame`` (None: no cap)."""
        unknown = set(values) - set(self.inputs)
        if unknown:
            raise TypeError(f"unknown controls {sorted(unknown)}; have {list(self.inputs)}")
        for name, value in values.items():
            if name == "max_clusters_per_frame":
                self.cap_enabled.value = value is not None
                if value is not None:
                    self.cap.value = value
            elif name == "cluster_size":
                self.cluster_size.value = size_text(value)
            else:
                getattr(self, name).value = value

    def attach(self, render, host=None) -> ViewNode:
        """Have ``render(outcome)`` called on the UI thread after every run.

        Parameters
        ----------
        render
            Updates a view from a `aare_lab.widgets.run.RunOutcome`.
        host
            The `aare_lab.widgets.figures.FigureHost` it draws into (redrawn once per tick).
        """
        view = ViewNode(render, self.run_node, pump=self.pump, figure=host)
        if self.run_node.ready:
            view.notify()
        return view

    # ---------------------------------------------------------------- helpers
    def _cap_toggled(self, enabled: bool) -> None:
        self.cap.disabled = not enabled
        node = self.inputs["max_clusters_per_frame"]
        if not enabled:
            node.set(None)
            return
        try:
            node.set(positive_int("max_clusters_per_frame", self.cap.value))
        except ValueError as err:
            self.status.fail(f"{err}; the cap stays off")
            self.cap_enabled.value = False

    def _run(self, job, spec: FinderSpec):
        outcome = self.runner.run(job, spec, clusters=self.keep_clusters, edges=self.bins)
        if outcome.spectrum is None:
            picked = self._picked_bins.get(spec.cluster_size)
            shown = spectrum(outcome.result) if picked is None else \
                spectrum(outcome.result, bins=picked)
            self._picked_bins.setdefault(spec.cluster_size, spectrum_edges(shown))
            outcome = outcome._replace(spectrum=shown)
        return outcome._replace(fits=fit_or_none(outcome.spectrum, spec.finder,
                                                 self.fit_window, self.lines))

    def describe(self, task) -> str:
        """The status text: which finder ran, how long, how fast, what it found."""
        return self.outcome.describe()

    def _task_state(self, task) -> None:
        super()._task_state(task)
        # A failed run keeps the last good run's notes, as the views keep its spectrum.
        if not task.running and task.error is None:
            self.notes_line.show(self.outcome.notes)

    def _draw_spectrum(self, outcome: RunOutcome) -> None:
        from aare_lab.plots import SpectrumView

        if self._spectrum_view is None:
            self._spectrum_view = SpectrumView(outcome.spectrum, outcome.fits,
                                               fig=self.spectrum_host.figure,
                                               ratio=False, gain=self.gain)
        else:
            self._spectrum_view.update(outcome.spectrum, outcome.fits)
