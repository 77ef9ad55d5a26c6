"""What every finder shares: validation, chunking, capacity, branch maps, the result."""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing
from typing import ClassVar, NamedTuple

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from aare_lab.checks import positive_int
from aare_lab.detector.common_mode import region_count
from aare_lab.detector.dark.quality import assess_dark
from aare_lab.detector.jungfrau import GainBitsTally, GainBitsWarning
from aare_lab.detector.pedestal import Pedestal
from aare_lab.frames import as_frame_stack
from aare_lab.model.capacity import (
    ON_TRUNCATION,
    cap_to_attr,
    report_truncation,
    truncation_message,
)
from aare_lab.model.clipping import report_clipping
from aare_lab.model.params import INTEGER_WINDOW_DTYPES
from aare_lab.model.results import make_result
from aare_lab.model.spec import RECONFIGURABLE, FinderSpec
from aare_lab.runtime import interrupt
from aare_lab.runtime.repeat import repeat, run_ends
from aare_lab.sources import FrameSource, open_source
from aare_lab.sources.files import input_record
from aare_lab.storage.destination import Destination
from aare_lab.storage.result_store import DEFAULT_COMPRESSION, open_result

from ._assembly import FileSink, MemorySink, RunTally
from ._common_mode import estimate_scratch
from ._gain import calibration_arrays

INITIAL_CLUSTER_ROWS = 4096


class _Unchanged:
    """The default of `Finder.reconfigure`: keep the current value (None means no cap)."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()


class ClusterBatch(NamedTuple):
    """What a finder found in one chunk of frames (NumPy arrays, owned by the batch).

    Clusters come in frame order, ``n_kept`` of each frame, so each cluster's frame number
    is not stored but derived (`cluster_frame`); the result sinks write it straight into the
    result. A batch of `CudaFinder.spectrum` counts its clusters but carries none.
    """

    frame_numbers: np.ndarray
    n_found: np.ndarray
    n_kept: np.ndarray
    cluster_y: np.ndarray
    cluster_x: np.ndarray
    windows: np.ndarray
    branch_maps: np.ndarray
    branch_frames: np.ndarray
    #: With common mode: per frame and region, the offset (ADU) and the pixels it came from.
    common_mode: np.ndarray | None = None
    common_mode_pixels: np.ndarray | None = None
    #: With a JUNGFRAU calibration: per frame, the pixels flagged (never photons).
    n_flagged: np.ndarray | None = None

    @property
    def cluster_frame(self) -> np.ndarray:
        """Each kept cluster's frame number (a new array)."""
        return repeat(self.frame_numbers, self.kept_ends())

    @property
    def truncated(self) -> np.ndarray:
        """Per frame, whether the cap cut its clusters (it found more than it kept)."""
        return self.n_found > self.n_kept

    def kept_ends(self) -> np.ndarray:
        """The clusters kept up to each frame: frame ``k``'s are the rows
        ``ends[k - 1]:ends[k]``.

        Raises
        ------
        ValueError
            When ``n_kept`` does not count the clusters the batch holds (a spectrum's batch
            counts clusters it does not carry).
        """
        ends = run_ends(self.n_kept, len(self.frame_numbers))
        kept, held = (int(ends[-1]) if len(ends) else 0), len(self.cluster_y)
        if kept != held:
            raise ValueError(f"a batch of {held} clusters says it kept {kept}: its n_kept "
                             "must count the clusters it holds, frame by frame")
        return ends


def _branch_selection(branch_maps) -> bool | set[int]:
    if branch_maps is None or branch_maps is False:
        return False
    if branch_maps is True:
        return True
    try:
        return {int(f) for f in np.atleast_1d(np.asarray(branch_maps))}
    except (TypeError, ValueError):
        raise ValueError(
            f"branch_maps must be True, False/None, or frame numbers, got {branch_maps!r}"
        ) from None


class Finder(ABC):
    """A cluster finder bound to a pedestal, which it advances frame by frame.

    Parameters
    ----------
    pedestal
        A trained `Pedestal`. The finder updates it in place, so a run split into several
        `find` calls gives the same clusters as one call; use ``pedestal.copy()`` to run
        several finders from the same dark.
    n_sigma
        Threshold in units of each pixel's noise.
    cluster_size
        ``(ny, nx)``, ``"NYxNX"`` or a side; both odd, 3..11.
    max_clusters_per_frame
        Capacity per frame (the first ones in raster order are kept); None: unbounded.
    window_dtype
        ``"int32"`` (rounded half away from zero), ``"int16"`` (rounded, saturated and
        counted: `aare_lab.model.spec.FinderSpec`), ``"float32"`` or ``"float64"``.
    on_truncation
        ``"warn"`` (default) or ``"error"`` when a frame exceeds the capacity.
    chunk_frames
        Frames handed to the compiled loop at a time (default `default_chunk_frames`);
        results do not depend on it.
    common_mode
        None (default) or ``"none"``; ``"moench03"``, ``"jungfrau"``, ``"jungfrau-rows"``
        or a label map (see `aare_lab.detector.common_mode.CommonMode`): subtract a per-frame offset
        per region.
    calibration
        None (default), or a `aare_lab.detector.jungfrau.JungfrauCalibration` of the frames' shape:
        the frames are raw JUNGFRAU values with gain bits, the pedestal is the G0 pedestal
        in ADU, and values, thresholds, windows and energies are in keV (window_dtype
        float32 or float64).

    Attributes
    ----------
    spec
        The `FinderSpec` of this finder (its pedestal's dtype, noise and N included).
    gain_bits
        Without a calibration, a `aare_lab.detector.jungfrau.GainBitsTally` of the pixels with gain
        bits (values above 14 bits) in the frames processed since `find` or `spectrum`
        began, or since the last `report_gain_bits`, until the finder has warned; None with
        one. `report_gain_bits` warns about them.
    """

    name: ClassVar[str]
    #: Frames per chunk when ``chunk_frames`` is not given.
    default_chunk_frames: ClassVar[int] = 64
    #: Whether a result in memory is copied on Numba's threads (`MemorySink`): where the
    #: finder itself worked, so that no other pool fights them for the cores.
    assembles_on_numba_threads: ClassVar[bool] = False

    def __init__(self, pedestal: Pedestal, n_sigma: float = 5.0,
                 cluster_size: int | str | tuple[int, int] = (3, 3),
                 max_clusters_per_frame: int | None = None, *, window_dtype: str = "int32",
                 on_truncation: str = "warn", chunk_frames: int | None = None, common_mode=None,
                 calibration=None):
        if not isinstance(pedestal, Pedestal):
            raise TypeError(f"pedestal must be an aare_lab.Pedestal, got {type(pedestal).__name__}")
        if on_truncation not in ON_TRUNCATION:
            raise ValueError(f"on_truncation must be 'warn' or 'error', got {on_truncation!r}")
        self.chunk_frames = positive_int(
            "chunk_frames", self.default_chunk_frames if chunk_frames is None else chunk_frames)
        self.pedestal = pedestal
        self.spec = FinderSpec(self.name, n_sigma, cluster_size, pedestal.dtype.name,
                               pedestal.noise, max_clusters_per_frame, window_dtype,
                               pedestal.n_pedestal, common_mode=common_mode,
                               calibration=calibration)
        cm = self.spec.common_mode
        self._cm_labels = None if cm is None else cm.labels(pedestal.frame_shape)
        self._calibration = calibration_arrays(self.spec.calibration, pedestal)
        self.gain_bits = GainBitsTally() if self._calibration is None else None
        self._gain_bits_reported = False
        self.on_truncation = on_truncation
        t = pedestal.dtype.type
        self._nsig = t(self.spec.n_sigma)
        cy, cx = self.spec.cluster_size
        self._c3 = np.sqrt(t(cy * cx))

    @classmethod
    def require_available(cls) -> None:
        """Raise if this finder cannot run on this machine (before any work is done)."""

    def __repr__(self) -> str:
        p = self.spec
        return (f"{type(self).__name__}(n_sigma={p.n_sigma}, cluster_size={p.cluster_size}, "
                f"max_clusters_per_frame={p.max_clusters_per_frame}, {self.pedestal!r})")

    def reconfigure(self, *, n_sigma: float | _Unchanged = UNCHANGED,
                    max_clusters_per_frame: int | None | _Unchanged = UNCHANGED,
                    **others) -> None:
        """Change the parameters that keep the compiled shape: nσ and the capacity.

        Nothing is recompiled or re-allocated, and the pedestal (on the GPU too) stays
        as it is; the next `find` gives what a new finder with these parameters on the
        same pedestal would give, bit for bit.

        Parameters
        ----------
        n_sigma
            The new threshold; omitted: unchanged.
        max_clusters_per_frame
            The new capacity, None for none; omitted: unchanged.
        **others
            Any other `FinderSpec` parameter is refused.

        Raises
        ------
        ValueError
            For an invalid value, or for a parameter that needs a new finder (cluster size,
            dtypes, noise...: ``make_finder(finder.spec.replace(...), pedestal)``).
        TypeError
            For a name that is not a `FinderSpec` parameter.
        """
        fields = {f.name for f in dataclasses.fields(FinderSpec)}
        unknown = sorted(set(others) - fields)
        if unknown:
            raise TypeError(f"reconfigure() got unknown parameters {unknown}; FinderSpec has "
                            f"{', '.join(sorted(fields))}")
        if others:
            raise ValueError(
                f"{', '.join(sorted(others))} cannot change on a finder (only "
                f"{' and '.join(RECONFIGURABLE)} can): build a new finder, e.g. "
                "make_finder(finder.spec.replace(...), pedestal)")
        changes = {name: value for name, value in zip(
            RECONFIGURABLE, (n_sigma, max_clusters_per_frame)) if value is not UNCHANGED}
        self.spec = self.spec.replace(**changes)
        self._nsig = self.pedestal.dtype.type(self.spec.n_sigma)
        self._reconfigured()

    def _reconfigured(self) -> None:
        """Hand the new `spec` to state kept outside the finder (the GPU's scalars)."""

    # ----------------------------------------------------------------- public
    def find(self, frames, frame_numbers: Iterable[int] | None = None, *,
             branch_maps: bool | Iterable[int] | None = None,
             progress: bool = True, out: str | os.PathLike | Destination | None = None,
             overwrite: bool = False, compression: str = DEFAULT_COMPRESSION,
             on_batch: Callable[[ClusterBatch, np.ndarray], None] | None = None) -> xr.Dataset:
        """Find clusters in ``frames`` and return the result Dataset.

        Parameters
        ----------
        frames
            A ``uint16`` stack ``(n, ny, nx)`` or frame, a path or spec understood by
            `aare_lab.sources.open_source`, or a `FrameSource`.
        frame_numbers
            Numbers of the frames of an array (default 0, 1, 2, ...).
        branch_maps
            True for a branch map of every frame, or the frame numbers to map.
        progress
            Show a progress bar.
        out
            A netCDF file to write the result into chunk by chunk while it is found, so
            that memory stays flat however long the run (`aare_lab.storage.result_store`): written
            as ``<stem>.partial.nc`` and renamed to ``out`` once the run ended.
        overwrite
            Whether an existing file at ``out`` may be replaced (once the new one is whole).
        compression
            How ``out`` stores its growing variables: ``"scaleoffset"`` (integer windows
            packed by HDF5's scale-offset filter, the rest shuffled and deflated; about a
            quarter of the bytes, decoded by every reader built on the HDF5 library),
            ``"deflate"`` (HDF5's shuffle and deflate filters only, for readers that lack
            scale-offset, such as netCDF-Java) or ``"none"``
            (`aare_lab.storage.result_store.COMPRESSIONS`).
        on_batch
            Called with each chunk's `ClusterBatch` and its clusters' energies as they are
            found, for what is counted on the way (a spectrum, the truncated frames) rather
            than read back from ``out``; both are valid during the call only, and read-only.

        Returns
        -------
        xarray.Dataset
            The clusters, ``n_found``/``n_kept`` per frame, provenance, and the branch maps
            if asked (see `aare_lab.model.results`). With ``out``, opened lazily from the file
            (`aare_lab.storage.result_store.open_result`; close it when done).

        Raises
        ------
        PedestalNotReady
            Before training is complete.
        TruncationError
            With ``on_truncation="error"``, when a frame exceeded the capacity.
        aare_lab.storage.destination.DestinationExists, aare_lab.storage.destination.DestinationBusy
            With ``out``, when it exists (without ``overwrite``) or another process
            writes it; nothing was run.
        aare_lab.storage.result_store.ResultWriteError
            With ``out``, when the disk is full or a write fails: the run stops at once,
            and the error says how many frames the partial file keeps.
        KeyboardInterrupt
            On Ctrl-C (`aare_lab.runtime.interrupt.Terminated` on the command line's SIGTERM),
            raised between two chunks, never inside one.

        Warns
        -----
        aare_lab.model.clipping.WindowClippedWarning
            With int16 windows, when stored values sit at the int16 limits (the count per
            frame is ``n_window_clipped``).
        aare_lab.storage.result_store.IncompleteResultWarning
            With ``out``, when the run stops early (an exception, Ctrl-C): the partial file
            keeps every chunk completed before, marked ``complete = 0``.
        aare_lab.detector.jungfrau.GainBitsWarning
            Without a calibration, for frames with values above 14 bits (`report_gain_bits`).
        """
        want = _branch_selection(branch_maps)
        source = self._checked_source(frames, frame_numbers)
        self._restart_gain_bits()
        dark = assess_dark(self.pedestal, self.spec.n_sigma)
        make = self._result_maker(dark, source)
        self._prepare()
        # Ctrl-C is taken between chunks only: raised inside one, it would unwind while
        # worker threads still fill the result's buffers, or half-way through a write.
        with interrupt.deferred_interrupts():
            if out is None:
                sink = MemorySink(self._empty_batch(), make, want, n_frames=source.n_frames,
                                  on_numba_threads=self.assembles_on_numba_threads)
            else:
                sink = FileSink(out, self._empty_batch(), make, want, overwrite=overwrite,
                                compression=compression, frames_expected=source.n_frames)
            with sink, closing(self._iterate(source, want, progress, borrow=True)) as batches:
                tally = self._collect(batches, sink, want, on_batch)
        result = sink.result() if out is None else open_result(sink.writer.path)
        return self._report(result, tally, dark, source.describe())

    def find_batches(self, frames, frame_numbers: Iterable[int] | None = None, *,
                     branch_maps: bool | Iterable[int] | None = None,
                     progress: bool = False) -> Iterator[ClusterBatch]:
        """Find clusters chunk by chunk, yielding a `ClusterBatch` per chunk.

        For live use (spectra that grow while data arrive); parameters as in `find`.
        Capacity overflows are recorded in each batch's ``n_found``/``n_kept`` and pixels
        with gain bits in `gain_bits`, counted from this call on (as in `find`); nothing is
        warned here, the caller reports them (`assemble`, `report_gain_bits`,
        `take_gain_bits`).
        """
        # Counted afresh: a run given up half-way (a widget's cancelled re-run) must not
        # add its pixels to the next run's.
        self._restart_gain_bits()
        return self._batches(frames, frame_numbers, _branch_selection(branch_maps), progress)

    @abstractmethod
    def process_chunk(self, frames: np.ndarray, numbers: np.ndarray,
                      branch_maps: bool | set[int] = False) -> ClusterBatch:
        """Find the clusters of one validated chunk ``(n, ny, nx)`` uint16."""

    def report_gain_bits(self, what: str = "the frames", stacklevel: int = 2) -> None:
        """Warn about the pixels with gain bits counted in `gain_bits`, at most once per
        finder.

        Without a calibration such values are ADC counts of a huge energy: the warning
        names the remedy (`aare_lab.detector.jungfrau.GainBitsWarning`). Once is enough: a run split
        into several calls, a widget's re-runs of one stack and a stream's chunks all have
        the same cause. `find` and `assemble` call it; callers of `process_chunk` or
        `find_batches` call it themselves, after each chunk to warn early in a long run.

        Parameters
        ----------
        what
            How the message names the frames (a file).
        stacklevel
            As for `warnings.warn`, counted from the caller.
        """
        if self._gain_bits_reported:
            return
        message = self.take_gain_bits(what)
        if message is not None:
            warnings.warn(message, GainBitsWarning, stacklevel=stacklevel + 1)
            self._gain_bits_reported = True

    def take_gain_bits(self, what: str = "the frames") -> str | None:
        """The text of `report_gain_bits`' warning for the pixels with gain bits counted
        so far, None if there are none (or with a calibration); the count starts again.

        For a caller that shows it rather than warns (a widget's worker thread, whose
        warnings nobody sees), after every run: unlike `report_gain_bits`, it answers
        every time there are some.

        Parameters
        ----------
        what
            How the message names the frames (a file).
        """
        return None if self.gain_bits is None else self.gain_bits.take(what)

    def _restart_gain_bits(self) -> None:
        """Count gain bits from the start of a run (`find`, `spectrum`)."""
        if self.gain_bits is not None:
            self.gain_bits.reset()

    @property
    def _counting_gain_bits(self) -> bool:
        """Whether chunks are counted for gain bits: without a calibration, which alone
        reads them, until this finder has warned about them (it never warns again)."""
        return self.gain_bits is not None and not self._gain_bits_reported

    # --------------------------------------------------------------- helpers
    def _batches(self, frames, frame_numbers, wanted: bool | set[int], progress: bool,
                 **options) -> Iterator[ClusterBatch]:
        source = self._checked_source(frames, frame_numbers)
        yield from self._iterate(source, wanted, progress, **options)

    def _checked_source(self, frames, frame_numbers) -> FrameSource:
        self.pedestal.require_ready()
        if frame_numbers is not None:
            frame_numbers = np.asarray(list(frame_numbers))
        source = self._open(frames, frame_numbers)
        if tuple(source.frame_shape) != self.pedestal.frame_shape:
            raise ValueError(
                f"frames of {source.describe()} are {source.frame_shape[0]}x"
                f"{source.frame_shape[1]} (ny x nx) but the "
                f"pedestal is {self.pedestal.frame_shape[0]}x{self.pedestal.frame_shape[1]}"
            )
        return source

    def _iterate(self, source: FrameSource, wanted: bool | set[int], progress: bool,
                 **options) -> Iterator[ClusterBatch]:
        with tqdm(total=source.n_frames, unit="frame", desc=f"{self.name} finder",
                  disable=not progress) as bar:
            for batch in self._process_source(source, wanted, **options):
                yield batch
                bar.update(len(batch.frame_numbers))

    def _open(self, frames, frame_numbers) -> FrameSource:
        return open_source(frames, frame_numbers=frame_numbers)

    def _process_source(self, source: FrameSource, wanted: bool | set[int],
                        borrow: bool = False) -> Iterator[ClusterBatch]:
        """The batches of ``source``, chunk by chunk.

        With ``borrow`` the caller copies each batch before it asks for the next, so a
        finder may hand out views of buffers it reuses.
        """
        for chunk in source.chunks(self.chunk_frames):
            yield self.process_chunk(chunk.frames, chunk.numbers, wanted)

    @staticmethod
    def _map_slots(numbers: np.ndarray, branch_maps: bool | set[int]) -> np.ndarray:
        """Per frame of a chunk, its index among the chunk's mapped frames, or -1."""
        n = len(numbers)
        if branch_maps is True:
            return np.arange(n, dtype=np.int64)
        if branch_maps:
            hits = np.fromiter((int(f) in branch_maps for f in numbers), bool, n)
            return np.where(hits, np.cumsum(hits) - 1, -1).astype(np.int64)
        return np.full(n, -1, np.int64)

    def assemble(self, batches: list[ClusterBatch], branch_maps=None, *,
                 warn: bool = True) -> xr.Dataset:
        """The result Dataset of batches from `find_batches`, with truncation, gain bits,
        clipped int16 windows and too few dark frames
        (`aare_lab.detector.dark.quality.DarkFrameWarning`) reported.

        For callers that consume batches themselves (a widget that checks for cancellation
        between chunks) and then want what `find` returns; ``branch_maps`` as given there.

        Parameters
        ----------
        warn
            False leaves gain bits, clipped windows and the dark frames to the caller, who
            shows them another way (`take_gain_bits`,
            `aare_lab.model.clipping.clipping_message`, `aare_lab.detector.dark.quality.DarkQuality.warning`);
            truncation is reported as ``on_truncation`` says either way.
        """
        want = _branch_selection(branch_maps)
        dark = assess_dark(self.pedestal, self.spec.n_sigma)
        sink = MemorySink(self._empty_batch(), self._result_maker(dark), want,
                          n_frames=sum(len(b.frame_numbers) for b in batches),
                          n_clusters=sum(len(b.cluster_y) for b in batches),
                          on_numba_threads=self.assembles_on_numba_threads)
        tally = self._collect(batches, sink, want)
        return self._report(sink.result(), tally, dark, "the frames", warn)

    @staticmethod
    def _collect(batches: Iterable[ClusterBatch], sink, want: bool | set[int],
                 on_batch: Callable[[ClusterBatch, np.ndarray], None] | None = None) -> RunTally:
        tally = RunTally(want)
        for batch in batches:
            energies = sink.add(batch)
            if on_batch is not None:
                on_batch(batch, energies)
            tally.add(batch)
            interrupt.check()
        return tally

    def _result_maker(self, dark, source: FrameSource | None = None):
        """`make_result` with this run's parameters bound, and its inputs (the pedestal's,
        the calibration's and the common-mode label map's files, and, from a file, the
        frames'): it takes the batch fields."""
        inputs = dict(self.pedestal.inputs)
        for part in (self.spec.calibration, self.spec.common_mode):
            if part is not None:
                inputs.update(part.inputs)
        if source is not None and source.origin is not None:
            inputs["frames"] = input_record(source.origin)
        skipped = None if source is None else {"skip_first": source.skip_first,
                                                "frames_skipped": source.frames_skipped}
        return functools.partial(make_result, spec=self.spec,
                                 frame_shape=self.pedestal.frame_shape, dark=dark,
                                 inputs=inputs, skipped=skipped)

    def _report(self, ds: xr.Dataset, tally: RunTally, dark, what: str,
                warn: bool = True) -> xr.Dataset:
        """Warn about missing branch maps and, with ``warn``, about gain bits in ``what``
        (the frames), clipped int16 windows and the dark frames; report truncation."""
        missing = tally.missing_maps
        if missing:
            warnings.warn(f"branch maps were requested for frames not in this run: "
                          f"{missing[:20]}{' ...' if len(missing) > 20 else ''}",
                          stacklevel=3)
        if warn:
            # Before truncation, which may raise: gain bits make every other number
            # meaningless.
            self.report_gain_bits(what, stacklevel=3)
            report_clipping(ds, stacklevel=3)
        message = truncation_message(*tally.truncated, self.spec.max_clusters_per_frame,
                                     n_frames=tally.n_frames)
        report_truncation(message, self.on_truncation, ds)
        if warn:
            dark.warn(stacklevel=3)
        return ds

    def open_result_file(self, path: str | os.PathLike | Destination, *,
                         overwrite: bool = False,
                         frame_variables: Mapping[str, np.dtype] | None = None) -> FileSink:
        """A result file that batches from `find_batches` are written to as they come
        (`FileSink.add`), laid out as ``find(..., out=path)`` writes it, without branch maps;
        `FileSink.close` marks it complete or not (and, complete, moves it into place).
        For callers that consume batches themselves (`aare_lab.stream.live.LiveRun`);
        ``overwrite`` and ``frame_variables`` as for `FileSink`."""
        dark = assess_dark(self.pedestal, self.spec.n_sigma)
        return FileSink(path, self._empty_batch(), self._result_maker(dark), False,
                        overwrite=overwrite, frame_variables=frame_variables)

    def _prepare(self) -> None:
        """Get ready to run before a run's signals are deferred: what takes long once
        (compiling) stays interruptible."""

    def _empty_batch(self) -> ClusterBatch:
        """A batch of no frames: every field's dtype and row shape (None: not produced)."""
        ped = self.pedestal
        cy, cx = self.spec.cluster_size
        none = np.zeros(0, np.int64)
        common = {}
        if self._cm_labels is not None:
            regions = region_count(self._cm_labels)
            common = {"common_mode": np.zeros((0, regions), ped.dtype),
                      "common_mode_pixels": np.zeros((0, regions), np.int64)}
        if self._calibration is not None:
            common["n_flagged"] = none
        return ClusterBatch(none, none, none, np.zeros(0, np.int32),
                            np.zeros(0, np.int32),
                            np.zeros((0, cy, cx), np.dtype(self.spec.window_dtype)),
                            np.zeros((0, *ped.frame_shape), np.uint8), none, **common)


class CpuFinder(Finder):
    """A finder whose chunk loop is compiled with Numba and runs in this process."""

    assembles_on_numba_threads = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._warm = False
        shape = self.pedestal.frame_shape
        self._v = np.empty(shape, self.pedestal.dtype)
        self._codes = np.zeros(shape, np.uint8)
        self._out = None
        self._cm_scratch = None
        if self._cm_labels is not None:
            self._cm_scratch = estimate_scratch(self._cm_labels, self.pedestal.dtype)
        self._gs_scratch = None
        if self._calibration is not None:
            # Per frame: the ADC values, the pixel status, the estimate's labels, and the
            # flagged pixels per row (`_gain`).
            self._gs_scratch = (*self._calibration, np.empty(shape, np.uint16),
                                np.empty(shape, np.uint8), np.empty(shape, np.int32),
                                np.zeros(shape[0], np.int64))

    def _prepare(self) -> None:
        if not self._warm:
            self.warmup()

    def warmup(self) -> None:
        """Compile the chunk loop, or load it from Numba's cache, by running it once on a
        stack of no frames, so that the first chunk of a live run does not pay for it.

        The finder's pedestal and `gain_bits` are not touched: no frame is pushed or
        counted. (The loop's types do not depend on the number of frames, so no frame is
        needed, nor a copy of the pedestal to push one into.)
        """
        self._chunk(np.zeros((0, *self.pedestal.frame_shape), np.uint16),
                    np.zeros(0, np.int64), False, copy=False)
        self._warm = True

    def process_chunk(self, frames: np.ndarray, numbers: np.ndarray,
                      branch_maps: bool | set[int] = False) -> ClusterBatch:
        """Run the compiled loop on one chunk ``(n, ny, nx)`` uint16 of the pedestal's shape.

        Raises
        ------
        TypeError, ValueError
            For frames the compiled loop cannot take (it would read and write outside
            its buffers): another dtype, dimension, frame shape or a non-contiguous stack.
        """
        return self._chunk(frames, numbers, branch_maps, copy=True)

    def _process_source(self, source: FrameSource, wanted: bool | set[int],
                        borrow: bool = False) -> Iterator[ClusterBatch]:
        for chunk in source.chunks(self.chunk_frames):
            yield self._chunk(chunk.frames, chunk.numbers, wanted, copy=not borrow)

    def _chunk(self, frames, numbers, branch_maps, copy: bool) -> ClusterBatch:
        """`process_chunk`; without ``copy`` the clusters are views of the reused output
        buffers, valid until the next chunk."""
        ped = self.pedestal
        ped.require_ready()
        frames = as_frame_stack(frames, ped.frame_shape)
        n = frames.shape[0]
        # Counted by the compiled loop as it reads each frame (`_counting_gain_bits`).
        gain_bits = np.zeros(n, np.int64) if self._counting_gain_bits else None
        slot = self._map_slots(numbers, branch_maps)
        n_maps = int((slot >= 0).sum())
        maps = np.zeros((n_maps, *ped.frame_shape), np.uint8)
        n_found = np.zeros(n, np.int64)
        n_kept = np.zeros(n, np.int64)
        win, ys, xs = self._buffers()
        cm = cm_c = cm_n = None
        if self._cm_scratch is not None:
            regions = len(self._cm_scratch[2])
            cm_c = np.zeros((n, regions), ped.dtype)
            cm_n = np.zeros((n, regions), np.int64)
            cm = (*self._cm_scratch, cm_c, cm_n)
        gs = n_flagged = None
        if self._gs_scratch is not None:
            n_flagged = np.zeros(n, np.int64)
            gs = (*self._gs_scratch, n_flagged)
        win, ys, xs, n_out = self._run(
            frames, cap=cap_to_attr(self.spec.max_clusters_per_frame),
            round_values=self.spec.window_dtype in INTEGER_WINDOW_DTYPES,
            win=win, ys=ys, xs=xs, n_found=n_found, n_kept=n_kept,
            map_slot=slot, maps=maps, cm=cm, gs=gs, gain_bits=gain_bits)
        if gain_bits is not None:
            self.gain_bits.add(gain_bits)
        self._out = (win, ys, xs)
        keep = np.copy if copy else np.asarray
        return ClusterBatch(
            frame_numbers=np.asarray(numbers, np.int64), n_found=n_found, n_kept=n_kept,
            cluster_y=keep(ys[:n_out]), cluster_x=keep(xs[:n_out]),
            windows=keep(win[:n_out]), branch_maps=maps,
            branch_frames=np.asarray(numbers, np.int64)[slot >= 0],
            common_mode=cm_c, common_mode_pixels=cm_n, n_flagged=n_flagged,
        )

    def _buffers(self):
        if self._out is None:
            cy, cx = self.spec.cluster_size
            rows = INITIAL_CLUSTER_ROWS
            self._out = (np.empty((rows, cy, cx), np.dtype(self.spec.window_dtype)),
                         np.empty(rows, np.int32), np.empty(rows, np.int32))
        return self._out

    def _kernel_args(self):
        ped = self.pedestal
        ry, rx = self.spec.radius
        fixed = ped.noise == "fixed"
        # With running noise the kept rms is never read; any array of the frame's shape
        # and dtype fills its place.
        rms_fixed = ped.rms_fixed if fixed else self._v
        return (ped.off, ped.s, ped.s2, rms_fixed, fixed, ped.N, self._nsig, self._c3, ry, rx)

    @abstractmethod
    def _run(self, frames, *, cap, round_values, win, ys, xs, n_found, n_kept,
             map_slot, maps, cm, gs, gain_bits):
        """Call the compiled chunk loop; return ``(win, ys, xs, n_out)``. ``gain_bits``:
        None, or the per-frame counts of pixels with gain bits for the loop to fill."""

