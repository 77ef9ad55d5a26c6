"""LiveSpectrum: the cluster-energy spectrum of a run, growing while frames arrive."""

from __future__ import annotations

import html
import re
import threading
import time
from typing import NamedTuple

import ipywidgets as widgets
import numpy as np
import xarray as xr

from aare_lab.analysis.fit import line_energies
from aare_lab.analysis.spectra import fit_or_none, peak_fit, shown_energy
from aare_lab.detector.dark.quality import assess_dark
from aare_lab.detector.pedestal import Pedestal
from aare_lab.finders import available_finders, get_finder, make_finder
from aare_lab.model.binning import count
from aare_lab.model.capacity import TruncationError
from aare_lab.model.clipping import refuse_clipping
from aare_lab.model.params import parse_cluster_size
from aare_lab.model.results import counts_spectrum, window_energies
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import train_pedestal_for
from aare_lab.runtime.readahead import read_ahead
from aare_lab.sources import open_source
from aare_lab.stream.live import DEFAULT_EDGES, DEFAULT_KEV_EDGES

from .base import InteractiveWidget
from .controls import (
    N_SIGMA_MAX,
    NotesLine,
    cluster_size_box,
    forward,
    n_sigma_value,
    size_text,
)
from .graph import Input, ViewNode
from .loop import stop_at_exit, wait_until
from .run import default_n_pedestal

#: Seconds between peak fits on the consumer thread.
FIT_EVERY = 0.5


class Snapshot(NamedTuple):
    """The accumulated state the consumer hands to the UI thread (NumPy only)."""

    generation: int
    spectrum: xr.DataArray
    fits: xr.Dataset | None
    frames_processed: int
    frames_dropped: int
    stream: dict[str, int] | None
    frames_truncated: int
    clusters: int
    rate: float
    #: Frames per second of the finder's own time: above ``rate``, it keeps up.
    finder_rate: float
    finished: bool
    spec: FinderSpec


class LiveSpectrum(InteractiveWidget):
    """Consume a frame source in chunks on a worker and show the growing spectrum.

    Under the status line, `notes` says what a run outside a widget would warn about: too
    few dark frames for the nσ, and pixels with gain bits in the dark frames or (from the
    first chunk that has them) in the data.

    Parameters
    ----------
    source
        Any frame source: an array, a file spec, a `aare_lab.sources.FrameSource`, or a
        live stream: `aare_lab.sources.PacedSource`, or the detector's own
        (`aare_lab.sources.StreamSource`, whose lost, incomplete and malformed counts the
        status line shows; it ends at the end of an acquisition with ``stop_at_end``).
    dark
        Dark frames to train the pedestal (on the worker, before the first chunk).
    pedestal
        A trained pedestal instead of ``dark``; copied, then advanced by the run.
    spec
        The `aare_lab.FinderSpec` (default: ``cuda`` where a GPU is present, else
        ``frozen``); nσ and cluster size can change while the run goes on. With a
        JUNGFRAU calibration the spectrum is in keV.
    bins
        Fixed bin edges in the spec's units (`aare_lab.FinderSpec.units`); default
        `aare_lab.stream.live.DEFAULT_EDGES` in ADU, `aare_lab.stream.live.DEFAULT_KEV_EDGES` in
        keV. Clusters outside are counted.
    gain
        ADU per keV, for an uncalibrated spec: the energy axis in keV.
    chunk_frames
        Frames per chunk read from a file or an array (default 64 on the CPU, 512 on the
        GPU). A live stream (`aare_lab.sources.PacedSource`,
        `aare_lab.sources.StreamSource`) ignores it: it is read in the chunks it is sent
        in, of the ``chunk_frames`` it was made with.
    fit_window
        ``(low, high)`` in the spec's units for the peak fit (default: around the highest
        bin).
    lines
        For a source of known lines, the Kα and Kβ energies in keV (or
        `aare_lab.simulate.Beam.lines`): the peak fit is then the Kα/Kβ doublet of
        `aare_lab.analysis.fit`, and the Kα position and FWHM are not pulled up by Kβ. Default:
        one gaussian.
    autostart
        Start consuming at once (else call `start`).
    interactive, max_hz
        As for `aare_lab.widgets.base.InteractiveWidget`.
    """

    def __init__(self, source, dark=None, *, pedestal: Pedestal | None = None,
                 spec: FinderSpec | None = None, bins: np.ndarray | None = None,
                 gain: float | None = None, chunk_frames: int | None = None,
                 fit_window: tuple[float, float] | None = None, lines=None,
                 autostart: bool = True,
                 interactive: bool | None = None, max_hz: float = 4.0):
        # Set first: a widget refused here is still closed (ipywidgets' __del__), via stop().
        self._consumer: _Consumer | None = None
        if spec is None:
            spec = FinderSpec("cuda" if "cuda" in available_finders() else "frozen")
        refuse_clipping(spec.window_dtype, "LiveSpectrum", "find() the clusters offline")
        if gain and spec.units != "ADU":
            raise ValueError(f"a calibrated spec gives energies in {spec.units} already: gain "
                             "converts ADU, leave it out")
        # Checked here: on the worker a fit that cannot be made is only left out.
        lines = line_energies(lines)
        super().__init__(interactive=interactive, max_hz=max_hz)
        if dark is None and pedestal is None:
            raise ValueError("give dark frames (dark=...) or a trained pedestal (pedestal=...)")
        self.source = open_source(source)
        self.dark, self._pedestal = dark, pedestal
        if bins is None:
            bins = DEFAULT_EDGES if spec.units == "ADU" else DEFAULT_KEV_EDGES
        self.edges = np.asarray(bins, float)
        self.gain, self.fit_window, self.lines = gain, fit_window, lines
        self.chunk_frames = chunk_frames or get_finder(spec.finder).default_chunk_frames
        self._paused = threading.Event()
        self._spec = spec
        self.latest: Snapshot | None = None

        self.start_button = widgets.Button(description="start", icon="play")
        self.pause_button = widgets.ToggleButton(description="pause", icon="pause")
        self.reset_button = widgets.Button(description="reset", icon="undo")
        self.stop_button = widgets.Button(description="stop", icon="stop")
        self.log_scale = widgets.ToggleButton(value=True, description="log")
        self.n_sigma = widgets.BoundedFloatText(value=spec.n_sigma, min=0.0, max=N_SIGMA_MAX,
                                                step=0.1, description="nσ")
        self.cluster_size = cluster_size_box(spec.cluster_size)
        self.stats = widgets.HTML()
        self.notes_line = NotesLine()

        for button, action in ((self.start_button, self.start), (self.reset_button, self.reset),
                               (self.stop_button, self.stop)):
            button.on_click(lambda _, action=action: self.ui.call_soon(action))
        # The button's state decides when the callback runs, so the changes start() and
        # pause() make to it themselves cannot undo a later call.
        self.pause_button.observe(lambda change: self.ui.call_soon(self._pause_toggled),
                                  names="value")
        self.log_scale.observe(lambda change: self.ui.call_soon(self._set_log, change["new"]),
                         names="value")
        self.n_sigma_input = Input(spec.n_sigma, "n_sigma")
        self.cluster_size_input = Input(spec.cluster_size, "cluster_size")
        forward(self.ui, self.n_sigma, self.n_sigma_input, self.status, n_sigma_value)
        forward(self.ui, self.cluster_size, self.cluster_size_input, self.status,
                parse_cluster_size, size_text)
        for node in (self.n_sigma_input, self.cluster_size_input):
            node.children.append(_OnChange(self._parameters_changed))

        self.snapshot = Input(None, "snapshot")
        self.host = self.figure_host()
        self._view = None
        self.view_node = ViewNode(self._render, self.snapshot, pump=self.pump,
                                  figure=self.host)
        self.children = [
            widgets.HBox([self.start_button, self.pause_button, self.reset_button,
                          self.stop_button, self.log_scale]),
            widgets.HBox([self.n_sigma, self.cluster_size]),
            self.stats, self.status.widget, self.notes_line.widget, self.host.widget,
        ]
        if autostart:
            self.start()

    # ------------------------------------------------------------------ state
    @property
    def spec(self) -> FinderSpec:
        """The specification the run uses now."""
        return self._spec

    @property
    def running(self) -> bool:
        """Whether frames are being consumed (also while paused)."""
        return self._consumer is not None and self._consumer.alive

    @property
    def paused(self) -> bool:
        """Whether the run is paused."""
        return self._paused.is_set()

    @property
    def frames_processed(self) -> int:
        """Frames in the spectrum shown (since the last reset)."""
        return 0 if self.latest is None else self.latest.frames_processed

    @property
    def frames_dropped(self) -> int:
        """Frames the source dropped because the finder fell behind."""
        return 0 if self.latest is None else self.latest.frames_dropped

    @property
    def spectrum(self) -> xr.DataArray | None:
        """The accumulated spectrum shown (counts over ``energy``)."""
        return None if self.latest is None else self.latest.spectrum

    @property
    def notes(self) -> tuple[str, ...]:
        """What this run would have warned about outside a widget, shown under the status
        line."""
        return self.notes_line.notes

    @property
    def busy(self) -> bool:
        """Whether snapshots or redraws are still on their way to the screen."""
        return super().busy or (self._consumer is not None and self._consumer.unread)

    # --------------------------------------------------------------- actions
    def start(self) -> None:
        """Start consuming the source (again from its start after a stop)."""
        if self.running:
            return
        self._consumer = _Consumer(self)
        self.status.show("starting")
        self.notes_line.show(())
        self._consumer.start()

    def pause(self) -> None:
        """Stop taking chunks until `resume` (a live stream's sender may then drop).

        Before `start`, the run starts paused: it trains its pedestal and waits.
        """
        self._paused.set()
        self.pause_button.value = True

    def resume(self) -> None:
        """Take chunks again after `pause`."""
        self._paused.clear()
        self.pause_button.value = False

    def _pause_toggled(self) -> None:
        (self.pause if self.pause_button.value else self.resume)()

    def reset(self) -> None:
        """Empty the spectrum and the counters; the run goes on."""
        if self._consumer is not None:
            self._consumer.request(reset="reset by the user")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop consuming; the spectrum shown stays."""
        if self._consumer is not None:
            self._consumer.stop(timeout)

    def set(self, **values) -> None:
        """Set ``n_sigma`` or ``cluster_size`` as a user would (resets the spectrum)."""
        for name, value in values.items():
            if name == "n_sigma":
                self.n_sigma.value = value
            elif name == "cluster_size":
                self.cluster_size.value = size_text(value)
            else:
                raise TypeError(f"{name!r} cannot change during a run; have n_sigma, "
                                "cluster_size")

    def summary(self) -> str:
        """The stats line as plain text (frames, rates, drops, the stream's counts, the
        peak), for a notebook's ``print``; empty before the first snapshot."""
        if self.latest is None:
            return ""
        text = _stats_html(self.latest, self.gain).replace("<br>", "\n")
        return html.unescape(re.sub(r"<[^>]+>", "", text))

    def state_lines(self) -> list[str]:
        """The spec, what the run does (status line), its `summary` and `notes`."""
        s = self._spec
        spec = f"{s.finder}, nσ={s.n_sigma:g}, {size_text(s.cluster_size)}"
        return [spec, self.status.text, *self.summary().splitlines(), *self.notes]

    def wait_finished(self, timeout: float = 600.0) -> None:
        """Block until the source is exhausted and the last snapshot is on screen."""
        wait_until(self.ui, lambda: not self.running and not self.busy, timeout)

    def close(self) -> None:
        """Stop the run and close the widget."""
        self.stop()
        super().close()

    # ---------------------------------------------------------------- helpers
    def _parameters_changed(self) -> None:
        spec = self._spec.replace(n_sigma=self.n_sigma_input.value,
                                  cluster_size=self.cluster_size_input.value)
        if spec == self._spec:
            return
        self._spec = spec
        if self._consumer is not None:
            self._consumer.request(spec=spec, reset=f"nσ={spec.n_sigma:g}, "
                                   f"{spec.cluster_size[0]}x{spec.cluster_size[1]}: "
                                   "spectrum reset")

    def _set_log(self, log: bool) -> None:
        if self._view is not None:
            self._view.set_log(log)
            self.view_node.notify()

    def _deliver(self, snapshot: Snapshot) -> None:
        if self._consumer is None or snapshot.generation != self._consumer.generation:
            return
        self.latest = snapshot
        self.snapshot.set(snapshot)
        self.stats.value = _stats_html(snapshot, self.gain)

    def _render(self, snapshot: Snapshot) -> None:
        from aare_lab.plots import SpectrumView

        if self._view is None:
            self._view = SpectrumView(snapshot.spectrum, snapshot.fits, fig=self.host.figure,
                                      ratio=False, log=self.log_scale.value, gain=self.gain)
        else:
            self._view.update(snapshot.spectrum, snapshot.fits)

    def _failed(self, error: BaseException) -> None:
        self.status.fail(str(error) or type(error).__name__)


class _OnChange:
    """A graph child that calls a function when its parent changes."""

    def __init__(self, func):
        self.func = func

    def notify(self) -> None:
        self.func()


class _Consumer:
    """The thread that reads chunks, finds clusters and accumulates the spectrum."""

    def __init__(self, widget: LiveSpectrum):
        self.widget = widget
        self.ui = widget.ui
        self.paused = widget._paused
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pending_spec: FinderSpec | None = None
        self._pending_reset: str | None = None
        self.generation = 0
        self._mailbox: Snapshot | None = None
        self._mailbox_notes: tuple[str, ...] | None = None
        # The notes shown, in this order; set on this thread, shown on the UI thread.
        self._notes: dict[str, tuple[str, ...]] = dict.fromkeys(("gain_bits", "training",
                                                                 "dark"), ())
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="aare_lab-LiveSpectrum")
        self._spec = widget.spec
        stop_at_exit(self)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def request(self, spec: FinderSpec | None = None, reset: str | None = None) -> None:
        """Ask for a new spec and/or a reset, taken before the next chunk (UI thread)."""
        with self._lock:
            if spec is not None:
                self._pending_spec = spec
            if reset is not None:
                self._pending_reset = reset
                # Snapshots of the old generation still on their way are dropped.
                self.generation += 1

    def _run(self) -> None:
        w = self.widget
        try:
            get_finder(self._spec.finder).require_available()
            pedestal = w._pedestal.copy() if w._pedestal is not None else None
            if pedestal is None:
                self._status("training the pedestal")
                pedestal = self._train()
            self._note("dark", assess_dark(pedestal, self._spec.n_sigma).warning)
            # on_truncation="error": no warning on this thread, where nobody would see it;
            # truncated frames are counted and shown instead.
            finder = make_finder(self._spec, pedestal, on_truncation="error")
            # Before the first chunk is read: a live stream's queue would fill meanwhile.
            finder.warmup()
            edges = w.edges
            counts = np.zeros(len(edges) - 1, np.int64)
            under = over = outside = frames = clusters = truncated = 0
            busy = 0.0
            generation = self.generation
            started = time.perf_counter()
            last_fit, fits = 0.0, None
            self._status("running")
            for chunk in self._chunks():
                with self._lock:
                    spec, self._pending_spec = self._pending_spec, None
                    reset, self._pending_reset = self._pending_reset, None
                    generation = self.generation
                if spec is not None:
                    finder = self._switch(finder, spec)
                    self._note("dark", assess_dark(pedestal, spec.n_sigma).warning)
                if reset is not None:
                    counts[:] = 0
                    under = over = outside = frames = clusters = truncated = 0
                    busy, started, fits = 0.0, time.perf_counter(), None
                    self._status(reset)
                t0 = time.perf_counter()
                n_kept, found, cut = self._process(finder, chunk, edges)
                busy += time.perf_counter() - t0
                truncated += cut
                if finder.name == "cuda":
                    counts += found
                    outside += n_kept - int(found.sum())
                else:
                    part, low, high = count(found, edges)
                    counts += part
                    under += low
                    over += high
                frames += len(chunk.numbers)
                clusters += n_kept
                _mark_processed(w.source, len(chunk.numbers))
                now = time.perf_counter()
                spectrum = self._spectrum(finder, counts, edges, frames, under, over, outside)
                if now - last_fit > FIT_EVERY:
                    fits = fit_or_none(spectrum, self._spec.finder, w.fit_window, w.lines)
                    last_fit = now
                self._publish(Snapshot(generation, spectrum, fits, frames, _dropped(w.source),
                                       _stream_counts(w.source),
                                       truncated, clusters, frames / max(now - started, 1e-9),
                                       frames / max(busy, 1e-9), False, self._spec))
            spectrum = self._spectrum(finder, counts, edges, frames, under, over, outside)
            self._publish(Snapshot(generation, spectrum,
                                   fit_or_none(spectrum, self._spec.finder, w.fit_window,
                                               w.lines),
                                   frames, _dropped(w.source), _stream_counts(w.source),
                                   truncated, clusters,
                                   frames / max(time.perf_counter() - started, 1e-9),
                                   frames / max(busy, 1e-9), True, self._spec))
            self._status("stopped" if self._stop.is_set() else "end of the source")
        except Exception as err:  # shown in the widget, never a traceback
            self.ui.call_soon(w._failed, err)
        finally:
            self._stop.set()  # ends the read-ahead thread; the source stays open

    def _train(self) -> Pedestal:
        """The pedestal of the widget's dark frames; what training found in them (photons,
        pixels with gain bits), a note."""
        dark = open_source(self.widget.dark)
        notes = []
        pedestal = train_pedestal_for(self._spec, dark,
                                      self._spec.n_pedestal or default_n_pedestal(dark),
                                      progress=False, notes=notes)
        self._note("training", *notes)
        return pedestal

    def _note(self, kind: str, *texts: str | None) -> None:
        """Set the notes of ``kind`` (None: none), and show the notes if they changed."""
        texts = tuple(text for text in texts if text is not None)
        if self._notes[kind] == texts:
            return
        self._notes[kind] = texts
        self._publish(notes=tuple(note for notes in self._notes.values() for note in notes))

    def _chunks(self):
        """The source's chunks, read ahead; none is handed out while paused, nor once a
        stop is seen. A live stream that can take chunks back (`StreamSource.unread`) gets
        those read but never processed, so that a restarted run begins with them."""
        source = self.widget.source
        unread = getattr(source, "unread", None)
        if unread is None:
            items = source.chunks(self.widget.chunk_frames)
        else:
            items = source.chunks(self.widget.chunk_frames, until=self._stop)
        return read_ahead(items, self._stop, hold=self.paused, unread=unread)

    def _switch(self, finder, spec: FinderSpec):
        """The finder for ``spec``: re-configured when it can be, else a new one that
        continues from the pedestal the old one advanced."""
        old, self._spec = self._spec, spec
        if spec.compiled_key == old.compiled_key:
            finder.reconfigure(n_sigma=spec.n_sigma,
                               max_clusters_per_frame=spec.max_clusters_per_frame)
            return finder
        new = make_finder(spec, finder.pedestal, on_truncation="error")
        new.warmup()
        return new

    def _spectrum(self, finder, counts, edges, frames, under, over, outside):
        if finder.name == "cuda":  # the device histogram knows only how many fell outside
            return counts_spectrum(counts, edges, self._spec, frames, None, None, outside)
        return counts_spectrum(counts, edges, self._spec, frames, under, over)

    def _process(self, finder, chunk, edges):
        """Clusters kept and, on the GPU, the chunk's counts; on the CPU, its energies."""
        if finder.name == "cuda":
            try:
                out = finder.spectrum(chunk.frames, bins=len(edges) - 1,
                                      range=(float(edges[0]), float(edges[-1])),
                                      frame_numbers=chunk.numbers, progress=False, warn=False)
            except TruncationError as err:
                out = err.result
            self._note_gain_bits(finder)
            n_kept = out["n_kept"].to_numpy()
            cut = int((out["n_found"].to_numpy() > n_kept).sum())
            return int(n_kept.sum()), out["counts"].to_numpy(), cut
        batch = finder.process_chunk(chunk.frames, chunk.numbers)
        self._note_gain_bits(finder)
        return (len(batch.windows), window_energies(batch.windows),
                int(batch.truncated.sum()))

    def _note_gain_bits(self, finder) -> None:
        """Note the chunk's pixels with gain bits at once (a beamtime can still act on it);
        the first chunk that has them names the cause, later ones would only repeat it."""
        text = finder.take_gain_bits(self.widget.source.describe())
        if not self._notes["gain_bits"]:
            self._note("gain_bits", text)

    @property
    def unread(self) -> bool:
        """Whether a snapshot or notes wait for the UI thread."""
        with self._lock:
            return self._mailbox is not None or self._mailbox_notes is not None

    def _publish(self, snapshot: Snapshot | None = None,
                 notes: tuple[str, ...] | None = None) -> None:
        # One slot each: what is not yet taken is replaced by the newer, so the UI
        # thread's queue holds one hand-over at most however fast chunks come. Notes go
        # with the snapshots, first: no chunk's snapshot is on screen before its note.
        with self._lock:
            waiting = self._mailbox is not None or self._mailbox_notes is not None
            if snapshot is not None:
                self._mailbox = snapshot
            if notes is not None:
                self._mailbox_notes = notes
        if not waiting:
            self.ui.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        with self._lock:
            snapshot, self._mailbox = self._mailbox, None
            notes, self._mailbox_notes = self._mailbox_notes, None
        # A stopped run's notes, still on their way, must not replace a new run's.
        if notes is not None and self.widget._consumer is self:
            self.widget.notes_line.show(notes)
        if snapshot is not None:
            self.widget._deliver(snapshot)

    def _status(self, text: str) -> None:
        self.ui.call_soon(self.widget.status.show, text)


def _dropped(source) -> int:
    return int(getattr(source, "frames_dropped", 0))


def _mark_processed(source, n: int) -> None:
    """Tell a detector stream that ``n`` more frames are processed (it counts them)."""
    mark = getattr(source, "mark_processed", None)
    if mark is not None:
        mark(n)


def _stream_counts(source) -> dict[str, int] | None:
    """The counts of a detector stream (`aare_lab.sources.StreamSource`), else None."""
    stats = getattr(source, "stats", None)
    return None if stats is None else stats.as_dict()


def _stats_html(s: Snapshot, gain: float | None) -> str:
    a = s.spectrum.attrs
    text = (f"<b>{s.frames_processed:,}</b> frames processed ({s.rate:,.0f} frames/s; the "
            f"finder alone {s.finder_rate:,.0f} frames/s), <b>{s.frames_dropped:,}</b> "
            f"dropped, {s.clusters:,} clusters")
    if a["outside"]:
        text += f" ({a['outside']:,} outside the bins"
        if "underflow" in a:
            text += f": {a['underflow']:,} below, {a['overflow']:,} above"
        text += ")"
    if s.stream is not None:
        c = s.stream
        text += (f"<br>stream: {c['frames_received']:,} received, {c['frames_lost']:,} lost, "
                 f"{c['frames_incomplete']:,} incomplete, {c['messages_malformed']:,} "
                 "malformed")
    if s.fits is not None:
        fit = peak_fit(s.fits, str(s.fits["finder"][0].item()))
        text += f"<br>{fit.summary(*shown_energy(s.spec.units, gain))}"
    if s.frames_truncated:
        text += (f"<br><b>{s.frames_truncated:,}</b> frames truncated at "
                 f"max_clusters_per_frame={s.spec.max_clusters_per_frame}")
    if s.finished:
        text += " — finished"
    return text
