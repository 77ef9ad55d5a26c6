"""What every finder shares: validation, chunking, capacity, branch maps, the result."""

from __future__ import annotations

import dataclasses
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import ClassVar, NamedTuple

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from ..capacity import ON_TRUNCATION, cap_to_attr, report_truncation, truncation_message
from ..checks import positive_int
from ..frames import as_frame_stack
from ..pedestal import Pedestal
from ..results import make_result
from ..sources import FrameSource, open_source
from ..spec import RECONFIGURABLE, FinderSpec

INITIAL_CLUSTER_ROWS = 4096


class _Unchanged:
    """The default of `Finder.reconfigure`: keep the current value (None means no cap)."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()


class ClusterBatch(NamedTuple):
    """What a finder found in one chunk of frames (NumPy arrays, owned by the batch)."""

    frame_numbers: np.ndarray
    n_found: np.ndarray
    n_kept: np.ndarray
    cluster_frame: np.ndarray
    cluster_y: np.ndarray
    cluster_x: np.ndarray
    windows: np.ndarray
    branch_maps: np.ndarray
    branch_frames: np.ndarray


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
        ``"int32"`` (rounded half away from zero), ``"float32"`` or ``"float64"``.
    on_truncation
        ``"warn"`` (default) or ``"error"`` when a frame exceeds the capacity.
    chunk_frames
        Frames handed to the compiled loop at a time; results do not depend on it.

    Attributes
    ----------
    spec
        The `FinderSpec` of this finder (its pedestal's dtype, noise and N included).
    """

    name: ClassVar[str]

    def __init__(self, pedestal: Pedestal, n_sigma: float = 5.0,
                 cluster_size: int | str | tuple[int, int] = (3, 3),
                 max_clusters_per_frame: int | None = None, *, window_dtype: str = "int32",
                 on_truncation: str = "warn", chunk_frames: int = 64):
        if not isinstance(pedestal, Pedestal):
            raise TypeError(f"pedestal must be an aare_lab.Pedestal, got {type(pedestal).__name__}")
        if on_truncation not in ON_TRUNCATION:
            raise ValueError(f"on_truncation must be 'warn' or 'error', got {on_truncation!r}")
        self.chunk_frames = positive_int("chunk_frames", chunk_frames)
        self.pedestal = pedestal
        self.spec = FinderSpec(self.name, n_sigma, cluster_size, pedestal.dtype.name,
                               pedestal.noise, max_clusters_per_frame, window_dtype,
                               pedestal.n_pedestal)
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
            dtypes, noise...: ``finder.spec.replace(...).make_finder(pedestal)``).
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
                "finder.spec.replace(...).make_finder(pedestal)")
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
             progress: bool = True) -> xr.Dataset:
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

        Returns
        -------
        xarray.Dataset
            The clusters, ``n_found``/``n_kept`` per frame, provenance, and the branch maps
            if asked (see `aare_lab.results`).

        Raises
        ------
        PedestalNotReady
            Before training is complete.
        TruncationError
            With ``on_truncation="error"``, when a frame exceeded the capacity.
        """
        batches = list(self.find_batches(frames, frame_numbers, branch_maps=branch_maps,
                                         progress=progress))
        return self.assemble(batches, branch_maps)

    def find_batches(self, frames, frame_numbers: Iterable[int] | None = None, *,
                     branch_maps: bool | Iterable[int] | None = None,
                     progress: bool = False) -> Iterator[ClusterBatch]:
        """Find clusters chunk by chunk, yielding a `ClusterBatch` per chunk.

        For live use (spectra that grow while data arrive); parameters as in `find`.
        Capacity overflows are recorded in each batch's ``n_found``/``n_kept``; nothing
        is warned here, the caller reports them.
        """
        return self._batches(frames, frame_numbers, _branch_selection(branch_maps), progress)

    @abstractmethod
    def process_chunk(self, frames: np.ndarray, numbers: np.ndarray,
                      branch_maps: bool | set[int] = False) -> ClusterBatch:
        """Find the clusters of one validated chunk ``(n, ny, nx)`` uint16."""

    # --------------------------------------------------------------- helpers
    def _batches(self, frames, frame_numbers, wanted: bool | set[int], progress: bool,
                 **options) -> Iterator[ClusterBatch]:
        self.pedestal.require_ready()
        if frame_numbers is not None:
            frame_numbers = np.asarray(list(frame_numbers))
        source = self._open(frames, frame_numbers)
        if tuple(source.frame_shape) != self.pedestal.frame_shape:
            raise ValueError(
                f"frames are {source.frame_shape[0]}x{source.frame_shape[1]} (ny x nx) but the "
                f"pedestal is {self.pedestal.frame_shape[0]}x{self.pedestal.frame_shape[1]}"
            )
        with tqdm(total=source.n_frames, unit="frame", desc=f"{self.name} finder",
                  disable=not progress) as bar:
            for batch in self._process_source(source, wanted, **options):
                yield batch
                bar.update(len(batch.frame_numbers))

    def _open(self, frames, frame_numbers) -> FrameSource:
        return open_source(frames, frame_numbers=frame_numbers)

    def _process_source(self, source: FrameSource,
                        wanted: bool | set[int]) -> Iterator[ClusterBatch]:
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

    def assemble(self, batches: list[ClusterBatch], branch_maps=None) -> xr.Dataset:
        """The result Dataset of batches from `find_batches`, with truncation reported.

        For callers that consume batches themselves (a widget that checks for cancellation
        between chunks) and then want what `find` returns; ``branch_maps`` as given there.
        """
        ped = self.pedestal
        cy, cx = self.spec.cluster_size

        def cat(field, empty):
            parts = [getattr(b, field) for b in batches]
            return np.concatenate(parts) if parts else empty

        numbers = cat("frame_numbers", np.zeros(0, np.int64))
        n_found = cat("n_found", np.zeros(0, np.int64))
        n_kept = cat("n_kept", np.zeros(0, np.int64))
        want = _branch_selection(branch_maps)
        ds = make_result(
            spec=self.spec, frame_shape=ped.frame_shape,
            frame_numbers=numbers, n_found=n_found, n_kept=n_kept,
            cluster_frame=cat("cluster_frame", np.zeros(0, np.int64)),
            cluster_y=cat("cluster_y", np.zeros(0, np.int32)),
            cluster_x=cat("cluster_x", np.zeros(0, np.int32)),
            windows=cat("windows", np.zeros((0, cy, cx), np.dtype(self.spec.window_dtype))),
            branch_maps=cat("branch_maps", np.zeros((0, *ped.frame_shape), np.uint8))
            if want else None,
            branch_frames=cat("branch_frames", np.zeros(0, np.int64)) if want else None,
        )
        if isinstance(want, set):
            missing = sorted(want - set(numbers.tolist()))
            if missing:
                warnings.warn(f"branch maps were requested for frames not in this run: "
                              f"{missing[:20]}{' ...' if len(missing) > 20 else ''}",
                              stacklevel=3)
        message = truncation_message(numbers, n_found, n_kept,
                                     self.spec.max_clusters_per_frame)
        report_truncation(message, self.on_truncation, ds)
        return ds


class CpuFinder(Finder):
    """A finder whose chunk loop is compiled with Numba and runs in this process."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        shape = self.pedestal.frame_shape
        self._v = np.empty(shape, self.pedestal.dtype)
        self._codes = np.zeros(shape, np.uint8)
        self._out = None

    def process_chunk(self, frames: np.ndarray, numbers: np.ndarray,
                      branch_maps: bool | set[int] = False) -> ClusterBatch:
        """Run the compiled loop on one chunk ``(n, ny, nx)`` uint16 of the pedestal's shape.

        Raises
        ------
        TypeError, ValueError
            For frames the compiled loop cannot take (it would read and write outside
            its buffers): another dtype, dimension, frame shape or a non-contiguous stack.
        """
        ped = self.pedestal
        ped.require_ready()
        frames = as_frame_stack(frames, ped.frame_shape)
        n = frames.shape[0]
        slot = self._map_slots(numbers, branch_maps)
        n_maps = int((slot >= 0).sum())
        maps = np.zeros((n_maps, *ped.frame_shape), np.uint8)
        n_found = np.zeros(n, np.int64)
        n_kept = np.zeros(n, np.int64)
        win, ys, xs, fidx = self._buffers()
        win, ys, xs, fidx, n_out = self._run(
            frames, cap=cap_to_attr(self.spec.max_clusters_per_frame),
            round_values=self.spec.window_dtype == "int32",
            win=win, ys=ys, xs=xs, fidx=fidx, n_found=n_found, n_kept=n_kept,
            map_slot=slot, maps=maps)
        self._out = (win, ys, xs, fidx)
        return ClusterBatch(
            frame_numbers=np.asarray(numbers, np.int64), n_found=n_found, n_kept=n_kept,
            cluster_frame=np.asarray(numbers, np.int64)[fidx[:n_out]],
            cluster_y=ys[:n_out].copy(), cluster_x=xs[:n_out].copy(),
            windows=win[:n_out].copy(), branch_maps=maps,
            branch_frames=np.asarray(numbers, np.int64)[slot >= 0],
        )

    def _buffers(self):
        if self._out is None:
            cy, cx = self.spec.cluster_size
            rows = INITIAL_CLUSTER_ROWS
            self._out = (np.empty((rows, cy, cx), np.dtype(self.spec.window_dtype)),
                         np.empty(rows, np.int32), np.empty(rows, np.int32),
                         np.empty(rows, np.int64))
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
    def _run(self, frames, *, cap, round_values, win, ys, xs, fidx, n_found, n_kept,
             map_slot, maps):
        """Call the compiled chunk loop; return ``(win, ys, xs, fidx, n_out)``."""

