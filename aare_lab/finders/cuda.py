"""The cuda finder: the frozen timing model on an NVIDIA GPU, identical to `FrozenFinder`.

Frames in host memory travel in chunks (one bulk copy each, overlapped with the kernel of
the previous chunk); frames already on the GPU (a CuPy array) are read where they are.
The pedestal state lives on the device while a call runs and is written back to the
host `Pedestal` when it ends, so CPU and GPU finders can take turns on one pedestal.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import NamedTuple

import numpy as np
import xarray as xr

from aare_lab.checks import positive_int
from aare_lab.gpu.device import cupy_or_raise
from aare_lab.gpu.engine import FrozenEngine, Launch
from aare_lab.gpu.feed import HOST_MEMORY, HostFeed
from aare_lab.gpu.kernels import DEFAULT_BLOCK_THREADS
from aare_lab.gpu.source import DeviceArraySource
from aare_lab.model.capacity import report_truncation, truncation_message
from aare_lab.model.clipping import refuse_clipping
from aare_lab.model.results import energy_coords
from aare_lab.sources import ArraySource, FrameSource

from .base import ClusterBatch, Finder


class DeviceSnapshot(NamedTuple):
    """A copy of a finder's pedestal state, kept on the GPU (see `CudaFinder.snapshot`)."""

    frame_shape: tuple[int, int]
    dtype: str
    noise: str
    s: object
    s2: object


class CudaFinder(Finder):
    """The frozen model on the GPU: same parameters, same results as `FrozenFinder`.

    Parameters
    ----------
    *args, **kwargs
        As for `Finder`. ``chunk_frames`` (default 512) is the number of frames per
        kernel launch and per host-to-device copy; results do not depend on it.
    host_memory
        How host frames reach the GPU: ``"register"`` page-locks the caller's array for
        the call, ``"stage"`` copies chunks ahead, on a worker thread, through a ring of
        pinned buffers, ``"auto"`` stages (on the H200, staging 6 GB ran at 1.6x the
        rate of registering it: ``benchmarks/results/gpu_pipeline_20261201T111136.json``).
        Frames already in page-locked memory (`aare_lab.gpu.pinned_frames`) are always
        copied directly.
    block_threads
        Threads per GPU block: 1024 (the default) or 512, one block per multiprocessor, or
        256, two. Results do not depend on it, speed does: 1024 threads hide more of each
        frame's latency and were the fastest for every frame shape, cluster size and
        pedestal dtype measured (``benchmarks/kernel_variants.py --threads``).

    Raises
    ------
    GpuUnavailable
        Without CuPy or a GPU, naming the extra to install.
    """

    name = "cuda"
    default_chunk_frames = 512

    def __init__(self, *args, host_memory: str = "auto",
                 block_threads: int = DEFAULT_BLOCK_THREADS, **kwargs):
        super().__init__(*args, **kwargs)
        if host_memory not in HOST_MEMORY:
            raise ValueError(f"host_memory must be one of {', '.join(HOST_MEMORY)}, "
                             f"got {host_memory!r}")
        self.host_memory = host_memory
        self._cp = cupy_or_raise()
        ped, p = self.pedestal, self.spec
        self._engine = FrozenEngine(ped.frame_shape, ped.dtype.name, p.window_dtype,
                                    p.cluster_size, self.chunk_frames, block_threads,
                                    labels=self._cm_labels, calibration=self._calibration)
        self._reconfigured()
        self._feed: HostFeed | None = None
        self._synced: tuple[np.ndarray, np.ndarray] | None = None

    # ----------------------------------------------------------------- public
    @classmethod
    def require_available(cls) -> None:
        """Raise `GpuUnavailable` (naming the extra to install) without CuPy or a GPU."""
        cupy_or_raise()

    def warmup(self) -> None:
        """Load the kernel and run it once on scratch state, so no later call pays for it.

        The finder's pedestal is not touched.
        """
        self._to_device()
        self._engine.warmup()

    def snapshot(self) -> DeviceSnapshot:
        """Copy the pedestal state on the device (to re-find from the same start later)."""
        self._to_device()
        e = self._engine
        with e.compute:
            s, s2 = e.s.copy(), e.s2.copy()
        e.compute.synchronize()
        ped = self.pedestal
        return DeviceSnapshot(ped.frame_shape, ped.dtype.name, ped.noise, s, s2)

    def restore(self, snapshot: DeviceSnapshot) -> None:
        """Set the pedestal state, on the device and on the host, to a `snapshot`.

        The snapshot may come from another cuda finder whose pedestal has the same frame
        shape, dtype, noise mode and training (its offsets and kept rms are not copied).
        """
        ped = self.pedestal
        if (snapshot.frame_shape, snapshot.dtype, snapshot.noise) != \
                (ped.frame_shape, ped.dtype.name, ped.noise):
            raise ValueError(
                f"snapshot of a {snapshot.frame_shape} {snapshot.dtype} pedestal with "
                f"noise={snapshot.noise!r} does not fit this finder's {ped!r}")
        self._to_device()
        e = self._engine
        with e.compute:
            e.s[...] = snapshot.s
            e.s2[...] = snapshot.s2
        self._to_host()

    def spectrum(self, frames, bins: int = 200, range: tuple[float, float] = (0.0, 2000.0),
                 *, per_pixel: bool = False, frame_numbers=None,
                 progress: bool = True, warn: bool = True) -> xr.Dataset:
        """Find clusters and histogram their energies on the GPU, shipping no clusters.

        The pedestal advances as in `find`. Energies are window sums in ADU (keV with a
        calibration); the counts equal ``numpy.histogram`` of the same clusters' energies
        (`aare_lab.model.results.spectrum`).

        Parameters
        ----------
        frames, frame_numbers
            As for `find`.
        bins, range
            Number of equal bins over ``range`` (ADU).
        per_pixel
            Also count per centre pixel: ``pixel_counts(y, x, energy)``, for gain maps.
        progress
            Show a progress bar.
        warn
            False leaves the pixels with gain bits to the caller (`take_gain_bits`), who
            shows them another way; truncation is reported as ``on_truncation`` says
            either way.

        Returns
        -------
        xarray.Dataset
            ``counts(energy)``, optionally ``pixel_counts(y, x, energy)``, and
            ``n_found``/``n_kept`` per frame.

        Raises
        ------
        ValueError
            For a finder of int16 windows: their energies may be clipped sums, which only
            the shipped windows can tell (`aare_lab.model.clipping`), and a spectrum ships none.

        Warns
        -----
        aare_lab.detector.jungfrau.GainBitsWarning
            As `find`.
        """
        refuse_clipping(self.spec.window_dtype, "spectrum()", "use find()")
        bins = positive_int("bins", bins)
        lo, hi = (float(v) for v in range)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            raise ValueError(f"range must be finite (low, high) with low < high, got {range!r}")
        edges = np.histogram_bin_edges(np.zeros(0), bins=bins, range=(lo, hi))
        self._engine.set_spectrum(edges, per_pixel)
        self._restart_gain_bits()
        try:
            parts = list(self._batches(frames, frame_numbers, False, progress,
                                       clusters=False))
            counts, pixel = self._engine.spectrum()
        finally:
            self._engine.set_spectrum(None, False)
        numbers = np.concatenate([b.frame_numbers for b in parts]) if parts else np.zeros(0, int)
        n_found = np.concatenate([b.n_found for b in parts]) if parts else np.zeros(0, int)
        n_kept = np.concatenate([b.n_kept for b in parts]) if parts else np.zeros(0, int)
        attrs = self.spec.attrs
        ds = xr.Dataset(
            {"counts": ("energy", counts, {"long_name": "clusters per energy bin"}),
             "n_found": ("frame", n_found), "n_kept": ("frame", n_kept)},
            coords={**energy_coords(edges, self.spec.units), "frame": numbers},
            attrs={key: attrs[key]
                   for key in ("finder", "n_sigma", "cluster_size", "pedestal_dtype")},
        )
        if pixel is not None:
            ds["pixel_counts"] = (("y", "x", "energy"), pixel,
                                  {"long_name": "clusters per centre pixel and energy bin"})
        if warn:
            self.report_gain_bits(stacklevel=2)
        message = truncation_message(numbers, n_found, n_kept, self.spec.max_clusters_per_frame)
        report_truncation(message, self.on_truncation, ds)
        return ds

    def process_chunk(self, frames, numbers: np.ndarray,
                      branch_maps: bool | set[int] = False) -> ClusterBatch:
        """Find the clusters of one chunk ``(n, ny, nx)`` uint16, on the host or the GPU."""
        self.pedestal.require_ready()
        source = self._open(frames, numbers)
        if source.n_frames > self.chunk_frames:
            raise ValueError(f"a chunk holds at most chunk_frames={self.chunk_frames} frames, "
                             f"got {source.n_frames}; use find_batches for more")
        (batch,) = self._process_source(source, branch_maps)
        return batch

    # --------------------------------------------------------------- helpers
    def _reconfigured(self) -> None:
        # Kernel arguments only: the compiled kernel and the device pedestal stay.
        self._engine.configure(self.pedestal.N, self._nsig, self._c3,
                               self.spec.max_clusters_per_frame)

    def _open(self, frames, frame_numbers) -> FrameSource:
        if isinstance(frames, self._cp.ndarray):
            return DeviceArraySource(frames, frame_numbers)
        return super()._open(frames, frame_numbers)

    def _process_source(self, source: FrameSource, wanted: bool | set[int],
                        clusters: bool = True, borrow: bool = False) -> Iterator[ClusterBatch]:
        self._to_device()
        on_device = isinstance(source, DeviceArraySource)
        if not on_device and self._feed is None:
            self._feed = HostFeed(self._cp, self.pedestal.frame_shape, self.chunk_frames)
        engine, feed = self._engine, self._feed
        pending: deque[tuple[np.ndarray, np.ndarray | None, Launch]] = deque()
        try:
            with self._host_chunks(source) as chunks:
                for chunk in chunks:
                    if on_device:
                        frames, copied = chunk.frames, None
                    else:
                        frames, copied = feed.put(chunk.frames)
                    slots = self._map_slots(chunk.numbers, wanted) if wanted else None
                    launch = engine.launch(frames, slots, wait=copied, clusters=clusters)
                    if not on_device:
                        feed.read_by(launch.done)
                    pending.append((chunk.numbers, slots, launch))
                    if len(pending) == 2:
                        yield self._next_batch(pending, clusters, borrow)
                while pending:
                    yield self._next_batch(pending, clusters, borrow)
        finally:
            if pending:
                # Stopped early: the state goes back to the start of the first chunk
                # whose clusters were not handed out, as if it had never been queued.
                engine.rewind(pending[0][2])
            self._to_host()

    def _next_batch(self, pending: deque, clusters: bool, borrow: bool) -> ClusterBatch:
        # Collected before it leaves ``pending``: if collecting fails, the rewind still
        # starts from this launch, whose clusters never reached the caller.
        batch = self._batch(*pending[0], clusters, borrow)
        pending.popleft()
        return batch

    def _batch(self, numbers: np.ndarray, slots: np.ndarray | None, launch: Launch,
               clusters: bool, borrow: bool) -> ClusterBatch:
        # Borrowed clusters are views of the engine's pinned buffers, which the copies
        # queued behind the launch after next overwrite, and that launch is queued when
        # the caller asks for the next batch: the caller copies them before that.
        out = self._engine.collect(launch, clusters=clusters, copy=not borrow)
        # Counted by the kernel (frames without a calibration), taken as its chunk is
        # handed out, so a chunk rewound after an early stop is not counted.
        if out.gain_bits is not None and self._counting_gain_bits:
            self.gain_bits.add(out.gain_bits)
        numbers = np.asarray(numbers, np.int64)
        return ClusterBatch(
            frame_numbers=numbers, n_found=out.n_found, n_kept=out.n_kept,
            cluster_y=out.y, cluster_x=out.x,
            windows=out.windows, branch_maps=out.maps,
            branch_frames=numbers[slots >= 0] if slots is not None else np.zeros(0, np.int64),
            common_mode=out.common_mode, common_mode_pixels=out.common_mode_pixels,
            n_flagged=out.n_flagged)

    @contextmanager
    def _host_chunks(self, source: FrameSource) -> Iterator[Iterator]:
        """The source's chunks, each in memory the GPU can copy from at the PCIe rate.

        Frames on the device and arrays already page-locked come as they are; the caller's
        array is page-locked for the call when that is the cheaper way in; anything else
        is staged ahead on a worker thread (`aare_lab.gpu.feed.HostFeed.staged`).
        """
        chunks = source.chunks(self.chunk_frames)
        if isinstance(source, DeviceArraySource):
            yield chunks
            return
        if isinstance(source, ArraySource) and self.host_memory != "stage":
            array = source.array
            if self._feed.is_pinned(array.ctypes.data):
                yield chunks
                return
            if self.host_memory == "register":
                with self._feed.registered(array):
                    yield chunks
                return
        with closing(self._feed.staged(chunks)) as staged:
            yield staged

    def _to_device(self) -> None:
        """Upload the host pedestal unless the device already holds exactly that state."""
        ped = self.pedestal
        ped.require_ready()
        if self._synced is not None and np.array_equal(self._synced[0], ped.s) \
                and np.array_equal(self._synced[1], ped.s2):
            return
        self._engine.upload(ped.off, ped.s, ped.s2, ped.rms_fixed, ped.noise == "fixed")
        self._synced = (ped.s.copy(), ped.s2.copy())

    def _to_host(self) -> None:
        s, s2 = self._engine.download()
        ped = self.pedestal
        ped.s[...] = s
        ped.s2[...] = s2
        self._synced = (s, s2)


__all__ = ["CudaFinder", "DeviceSnapshot"]
