"""Device state and launches of the frozen chunk kernel (``kernels/frozen.cu``) for one finder.

The engine owns everything a finder keeps on the GPU: the pedestal state, the scratch the
kernel works in, two output slots (so that the clusters of one chunk travel to the host
while the next chunk is computed), and the device spectra. `FrozenEngine.launch` queues one
chunk on the compute stream, and behind its kernel the copy of its counts and of as many
clusters as the last chunks found into the slot's pinned host buffers, and returns at once;
so the copy runs while the host is still busy with the previous chunk's clusters.
`FrozenEngine.collect` waits for those copies and fetches only what they missed.

If a band of the frame finds more clusters in a chunk than its region holds, the kernel
writes nothing out; `collect` then enlarges the regions to the counts the kernel reported
and repeats the chunk from a copy of the state it started from, so the live state is never
advanced twice and nothing is lost.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from aare_lab.detector.common_mode import region_count
from aare_lab.model.capacity import cap_to_attr
from aare_lab.runtime.parallel import parallel_copy

from .bands import Bands, cut_bands
from .device import cuda_context, cupy_or_raise
from .feed import pinned_array
from .kernels import (
    BLOCK_THREADS,
    DEFAULT_BLOCK_THREADS,
    FLAG_STRIDE,
    MAX_PIXELS_PER_THREAD,
    SCAN_BYTES,
    SM_THREADS,
    KernelSpec,
    load_kernel,
)

#: cudaDevAttrMaxSharedMemoryPerBlockOptin, cudaDevAttrMultiProcessorCount
_ATTR_SHARED_OPTIN = 97
_ATTR_SMS = 16
#: Clusters a band's region holds at first, per frame of a chunk and per pixel of the band;
#: MÖNCH beam data find about 1.3 % (3x3). Regions grow to what a chunk needed.
INITIAL_REGION_DENSITY = 0.02
#: Clusters copied to the host behind each kernel, as a multiple of the most that either
#: of the last two chunks found; a chunk that finds more has the rest fetched when
#: collected.
PREFETCH_MARGIN = 1.1


class ChunkOutput(NamedTuple):
    """What the kernel found in one chunk, on the host (NumPy arrays no other chunk shares:
    the counts are views of the launch's own copy of `Meta`).

    The clusters come frame by frame, ``n_kept[k]`` of them for frame ``k``. Per frame,
    ``n_flagged`` counts the pixels a calibration flags and ``gain_bits`` (frames without a
    calibration) the pixels whose gain bits are set
    (`aare_lab.detector.jungfrau.gain_bits_per_frame`).
    """

    n_found: np.ndarray
    n_kept: np.ndarray
    y: np.ndarray
    x: np.ndarray
    windows: np.ndarray
    maps: np.ndarray
    common_mode: np.ndarray | None
    common_mode_pixels: np.ndarray | None
    n_flagged: np.ndarray | None = None
    gain_bits: np.ndarray | None = None


class Launch(NamedTuple):
    """A queued chunk: what `FrozenEngine.collect` needs to fetch or repeat it.

    ``fetched`` is the event of the copies queued behind the kernel (its counts, and its
    first ``prefetched`` clusters into the slot's pinned buffers).
    """

    slot: int
    n: int
    frames: object
    map_slot: object
    maps: object
    done: object
    fetched: object
    prefetched: int


class Meta(NamedTuple):
    """A launch's counts: views of one int64 array of `length` values, zeroed before each
    run of a chunk and copied to the host in one piece (the same views on either side).

    ``counted`` holds, per frame, the pixels with gain bits (no calibration: the kernel's
    ``n_gain_bits``) or the pixels the calibration flags (``n_flagged``).
    """

    n_found: object
    n_kept: object
    n_out: object
    overflow: object
    counted: object

    @staticmethod
    def length(chunk_frames: int) -> int:
        """Values in the array for chunks of ``chunk_frames``."""
        return 3 * chunk_frames + 2

    @classmethod
    def of(cls, meta, chunk_frames: int) -> Meta:
        """The views of ``meta`` (a device or host array of `length` values)."""
        c = chunk_frames
        return cls(meta[:c], meta[c:2 * c], meta[2 * c:2 * c + 1], meta[2 * c + 1:2 * c + 2],
                   meta[2 * c + 2:])


class FrozenEngine:
    """GPU buffers and kernel launches of the frozen model for one frame shape and parameters.

    Parameters
    ----------
    frame_shape
        ``(ny, nx)``.
    state_dtype
        ``"float64"`` or ``"float32"`` (centred), as the host `Pedestal`.
    window_dtype
        ``"int32"``, ``"int16"``, ``"float32"`` or ``"float64"``.
    cluster_size
        ``(ny, nx)`` of the window, both odd.
    chunk_frames
        The most frames one launch processes.
    threads
        Threads per block, 256, 512 or 1024 (`aare_lab.gpu.kernels.BLOCK_THREADS`).
    labels
        The common-mode region of every pixel, ``(ny, nx)`` integers with -1 for pixels
        outside every region (`aare_lab.detector.common_mode.CommonMode.labels`), or None for no
        common-mode correction (the kernel variant without it).
    calibration
        A JUNGFRAU calibration's ``(pedestal, gain)``, both ``(3, ny, nx)`` in
        ``state_dtype`` (`aare_lab.finders._gain.calibration_arrays`), or None for frames
        without gain bits (the kernel variant without ``GAIN_SWITCHING``).

    Raises
    ------
    ValueError
        When a band of the frame does not fit into the shared memory of one block.
    """

    def __init__(self, frame_shape: tuple[int, int], state_dtype: str, window_dtype: str,
                 cluster_size: tuple[int, int], chunk_frames: int,
                 threads: int = DEFAULT_BLOCK_THREADS,
                 labels: np.ndarray | None = None,
                 calibration: tuple[np.ndarray, np.ndarray] | None = None):
        if threads not in BLOCK_THREADS:
            raise ValueError(f"block_threads must be one of {BLOCK_THREADS}, got {threads!r}")
        cp = cupy_or_raise()
        self.cp = cp
        self.frame_shape = frame_shape
        self.state_dtype = np.dtype(state_dtype)
        self.window_dtype = np.dtype(window_dtype)
        self.cluster_size = cluster_size
        self.chunk_frames = chunk_frames
        self.threads = threads
        self.labels = labels
        self.n_regions = 0 if labels is None else region_count(labels)
        self.calibration = calibration
        device = cp.cuda.Device()
        # The driver calls below need a current context; a runtime call makes the device's
        # primary context current on a thread that has not used CUDA yet (a widget's worker).
        cp.cuda.runtime.deviceSynchronize()
        sms = cp.cuda.runtime.deviceGetAttribute(_ATTR_SMS, device.id)
        # Every band's block must be resident at once: as many blocks per SM as fit.
        for per_sm in range(max(1, SM_THREADS // threads), 0, -1):
            self._configure(sms * per_sm)
            resident = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                self.kernel.ptr, threads, self.shared)
            if resident * sms >= self.n_bands:
                break
        else:
            raise ValueError(f"the cuda finder's blocks do not fit on this GPU "
                             f"({self.shared} bytes of shared memory each); lower chunk_frames")
        self.compute = cp.cuda.Stream(non_blocking=True)
        # Copies queued behind each kernel, and copies a collection waits for at once: on
        # separate streams, so that the latter never wait for the next chunk's kernel.
        self.fetch = cp.cuda.Stream(non_blocking=True)
        self.fetch_now = cp.cuda.Stream(non_blocking=True)
        with cuda_context("allocating the finder's GPU buffers"), self.compute:
            self._allocate()
        self.region_cap = max(64, int(np.ceil(INITIAL_REGION_DENSITY * chunk_frames
                                              * self.band_pixels)))
        self._region = None
        self._outputs = [None, None]
        self._host = [None, None]
        self._launches = 0
        self._found_rows = [0, 0]
        self.hist = None
        self._pixel = self._pixel_host = None

    def _configure(self, max_bands: int) -> None:
        """Cut the frame into bands for at most ``max_bands`` blocks and load the kernel."""
        cp = self.cp
        ny, nx = self.frame_shape
        ry = self.cluster_size[0] // 2
        device = cp.cuda.Device()
        limit = cp.cuda.runtime.deviceGetAttribute(_ATTR_SHARED_OPTIN, device.id)
        bands = cut_bands(self.frame_shape, ry, max_bands, self.threads, self.state_dtype.name,
                          fits=lambda cut: self._shared_bytes(cut, ry)[0] <= limit)
        self.n_bands, self.band_pixels = bands.count, bands.pixels
        band_rows, per_thread, words = bands.rows, bands.per_thread, bands.words
        if per_thread > MAX_PIXELS_PER_THREAD:
            raise ValueError(
                f"a {ny}x{nx} frame is too large for the cuda finder: a band of {band_rows} rows "
                f"would need {per_thread} pixels per thread, at most {MAX_PIXELS_PER_THREAD} fit "
                "in registers; split the frame (e.g. per detector module)")
        self.shared, tiles, cm_bytes = self._shared_bytes(bands, ry)
        if self.shared > limit:
            regions = (f", {cm_bytes} for {self.n_regions} common-mode regions"
                       if cm_bytes else "")
            remedies = ["split the frame (e.g. per detector module)"]
            if self.state_dtype != np.float32:
                remedies.insert(0, "use float32 state")
            if cm_bytes:
                remedies.append("use fewer common-mode regions")
            if 4 * self.chunk_frames > tiles:
                remedies.append("lower chunk_frames")
            remedies.append("find on the CPU (FrozenFinder finds the same clusters)")
            # A tile holds the rows its windows read beyond the frame, as zeros.
            short = (f", {ry} rows of zeros above and below a frame of {ny} rows included"
                     if bands.tile_rows(ry) > ny else "")
            raise ValueError(
                f"a {ny}x{nx} frame is too wide for the cuda finder with "
                f"{self.state_dtype.name} state: one band of {band_rows} rows needs "
                f"{self.shared} bytes of shared memory ({tiles} for its two tiles{short}"
                f"{regions}), this GPU has {limit}; {', '.join(remedies[:-1])} or {remedies[-1]}"
            )
        with cuda_context("compiling the frozen kernel"):
            self.spec = KernelSpec(self.state_dtype.name, self.window_dtype.name,
                                   tuple(self.cluster_size), per_thread, nx, self.threads,
                                   common_mode=self.labels is not None,
                                   gain_switching=self.calibration is not None,
                                   exchange_in_words=words)
            self.kernel = load_kernel(self.spec)
            cp.cuda.driver.funcSetAttribute(
                self.kernel.ptr, cp.cuda.driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                self.shared)

    def _shared_bytes(self, bands: Bands, ry: int) -> tuple[int, int, int]:
        """Shared memory per block for ``bands``: in all, for the two tiles, for the
        common-mode regions (the layout of ``smem`` in the source)."""
        nx = self.frame_shape[1]
        # Two tiles of the band and its halo, one per frame parity, RX zeros before each row
        # and after the last (``tiles``, ``TILE_NX`` in the source); after the last frame
        # their memory holds a count per frame (``band_first``).
        rx = self.cluster_size[1] // 2
        size = self.state_dtype.itemsize
        tiles = 2 * (bands.tile_rows(ry) * (nx + rx) + rx) * size
        # Per region the block's sums, counts and offsets (``cm_bytes`` in the source).
        cm_bytes = -(-self.n_regions * (16 + size) // 16) * 16
        total = (SCAN_BYTES + bands.per_thread * 32 * 4 + cm_bytes
                 + max(tiles, 4 * self.chunk_frames))
        return total, tiles, cm_bytes

    def _allocate(self) -> None:
        cp, shape, dt, c, G = self.cp, self.frame_shape, self.state_dtype, self.chunk_frames, \
            self.n_bands
        self.off = cp.zeros(shape, dt)
        self.s = cp.zeros(shape, dt)
        self.s2 = cp.zeros(shape, dt)
        self.rms_fixed = cp.zeros(shape, dt)
        self.fixed = False
        self.starts = [(cp.empty(shape, dt), cp.empty(shape, dt)) for _ in range(2)]
        # Edge rows by frame parity; in words of 32 bits and the frame's number where the
        # kernel sends them so (``send_value``), zeroed before each launch like the flags.
        self.exchange = cp.zeros((2, *shape), cp.uint64 if self.spec.exchange_in_words else dt)
        self.sync = cp.zeros((G + 1) * FLAG_STRIDE, cp.uint32)
        self.seg_start = cp.zeros((c, G), cp.int32)
        self.frame_start = cp.zeros(c, cp.int32)
        self.counts = [cp.zeros((c, G), cp.int32) for _ in range(2)]
        self.meta = [cp.zeros(Meta.length(c), cp.int64) for _ in range(2)]
        self.meta_host = [pinned_array(cp, (Meta.length(c),), np.int64) for _ in range(2)]
        self.no_maps = cp.full(c, -1, cp.int64)
        self.no_map_buffer = cp.zeros(1, cp.uint8)
        self.no_edges = cp.zeros(2, cp.float64)
        self.no_hist = cp.zeros(1, cp.uint64)
        self.no_pixel_hist = cp.zeros(1, cp.uint32)
        R = max(self.n_regions, 1)
        self.cm_labels = (cp.zeros(1, cp.int32) if self.labels is None
                          else cp.asarray(self.labels, cp.int32))
        # [frame][pass][sums, counts][region], zeroed before every run of a chunk
        self.cm_acc = cp.zeros(c * 4 * R, cp.uint64)
        # the frame's candidates between the estimate's passes (kernels/frozen.cu)
        self.cm_candidates = cp.zeros(1 if self.labels is None else self.labels.size, cp.uint8)
        self.cm_out = [cp.zeros((c, R), dt) for _ in range(2)]
        self.cm_pixels = [cp.zeros((c, R), cp.int64) for _ in range(2)]
        if self.calibration is not None:
            self.cal = tuple(cp.asarray(a, dt) for a in self.calibration)

    # ------------------------------------------------------------------ state
    def upload(self, off, s, s2, rms_fixed, fixed: bool) -> None:
        """Copy a host pedestal state to the device."""
        with cuda_context("copying the pedestal to the GPU"), self.compute:
            for dst, src in ((self.off, off), (self.s, s), (self.s2, s2)) + \
                    (((self.rms_fixed, rms_fixed),) if fixed else ()):
                dst.set(np.ascontiguousarray(src, self.state_dtype), stream=self.compute)
            self.fixed = fixed
            self.compute.synchronize()

    def download(self) -> tuple[np.ndarray, np.ndarray]:
        """The device's ``(s, s2)`` on the host, after all queued work."""
        with cuda_context("copying the pedestal back from the GPU"):
            self.compute.synchronize()
            return self.s.get(), self.s2.get()

    # ---------------------------------------------------------------- spectra
    def set_spectrum(self, edges: np.ndarray | None, per_pixel: bool) -> None:
        """Accumulate a cluster-energy histogram over ``edges`` (None: stop), per pixel too."""
        cp = self.cp
        self.compute.synchronize()
        if edges is None:
            self.hist = None
            return
        n_bins = len(edges) - 1
        ny, nx = self.frame_shape
        with cuda_context("allocating the device spectra"), self.compute:
            pixel = None
            if per_pixel:
                # Kept across calls (ny*nx*bins counters, 128 MB for MÖNCH and 200 bins)
                # and zeroed on the device: allocating them per call cost more than a run.
                if self._pixel is None or self._pixel.shape[2] != n_bins:
                    self._pixel = cp.empty((ny, nx, n_bins), cp.uint32)
                pixel = self._pixel
                cp.cuda.runtime.memsetAsync(pixel.data.ptr, 0, pixel.nbytes, self.compute.ptr)
            self.hist = (cp.asarray(edges, cp.float64), cp.zeros(n_bins, cp.uint64), pixel)

    def spectrum(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The accumulated ``(counts, per-pixel counts or None)`` on the host."""
        cp = self.cp
        self.compute.synchronize()
        _, counts, pixel = self.hist
        if pixel is None:
            return counts.get().astype(np.int64), None
        with cuda_context("copying the per-pixel spectra from the GPU"):
            # Through a reused pinned buffer at the PCIe rate, then a parallel host copy
            # into the caller's own array.
            if self._pixel_host is None or self._pixel_host.shape != pixel.shape:
                self._pixel_host = pinned_array(cp, pixel.shape, np.uint32)
            host = self._pixel_host
            cp.cuda.runtime.memcpyAsync(host.ctypes.data, pixel.data.ptr, pixel.nbytes,
                                        cp.cuda.runtime.memcpyDeviceToHost, self.compute.ptr)
            self.compute.synchronize()
        return counts.get().astype(np.int64), parallel_copy(host)

    # ---------------------------------------------------------------- launches
    def launch(self, frames, map_slot: np.ndarray | None, wait=None,
               clusters: bool = False) -> Launch:
        """Queue the frames ``(n, ny, nx)`` (a device array) on the compute stream, and
        behind them the copy of what they find to the host.

        ``map_slot`` gives per frame its index in the chunk's branch maps, or -1 (None: no
        maps); ``wait`` is an event the launch must wait for (the frames' copy). With
        ``clusters`` the clusters are copied too, as many as the last chunks found (the
        rest when collected), so that the copy runs while the host handles the previous
        chunk's; their pinned buffers are then overwritten here, so a batch collected
        without ``copy`` is used before the launch after next.
        """
        cp = self.cp
        n = int(frames.shape[0])
        if n < 1:
            # The kernel's last block reads frame n - 1's counts: no frames, no launch.
            raise ValueError("a launch needs at least one frame")
        slot = self._launches % 2
        self._launches += 1
        with cuda_context(f"queueing {n} frames on the GPU"), self.compute:
            if wait is not None:
                self.compute.wait_event(wait)
            if map_slot is None or not (map_slot >= 0).any():
                slot_dev, maps = self.no_maps[:n], self.no_map_buffer
            else:
                slot_dev = cp.asarray(map_slot, cp.int64)
                maps = cp.zeros((int((map_slot >= 0).sum()), *self.frame_shape), cp.uint8)
            start_s, start_s2 = self.starts[slot]
            start_s.data.copy_from_device_async(self.s.data, self.s.nbytes, self.compute)
            start_s2.data.copy_from_device_async(self.s2.data, self.s2.nbytes, self.compute)
            self._ensure_outputs(slot)
            self._run(frames, n, slot, self.s, self.s2, slot_dev, maps)
            done = cp.cuda.Event(disable_timing=True)
            done.record(self.compute)
            rows = 0
            if clusters:
                rows = min(int(max(self._found_rows) * PREFETCH_MARGIN),
                           len(self._outputs[slot][1]))
            fetched = self._queue_fetch(slot, done, rows)
        return Launch(slot, n, frames, slot_dev, maps, done, fetched, rows)

    def collect(self, launch: Launch, clusters: bool = True, copy: bool = True) -> ChunkOutput:
        """Wait for a launch and bring its results to the host (the clusters only if asked).

        Without ``copy`` the clusters are views of the slot's pinned host buffers, valid
        until the launch after next is queued (its copies behind the kernel overwrite
        them, `launch`).
        """
        n, slot = launch.n, launch.slot
        with cuda_context(f"fetching the clusters of {n} frames from the GPU"):
            c = self.chunk_frames
            meta = Meta.of(self._wait_fetched(launch), c)
            prefetched = launch.prefetched
            if meta.overflow[0]:
                self._repeat(launch)
                meta = Meta.of(self._fetch_meta(launch), c)
                prefetched = 0
            n_out = int(meta.n_out[0])
            self._found_rows[slot] = n_out
            n_found, n_kept, counted = meta.n_found[:n], meta.n_kept[:n], meta.counted[:n]
            flagged, gain_bits = (None, counted) if self.calibration is None else (counted, None)
            wy, wx = self.cluster_size
            if clusters and n_out:
                held = self._host[slot]
                if held is None or len(held[0]) < n_out:
                    prefetched = 0
                host = self._host_buffers(slot, n_out)
                if n_out > prefetched:
                    self._copy_rows(host, slot, prefetched, n_out, self.fetch_now)
                    self.fetch_now.synchronize()
                windows, ys, xs = (parallel_copy(h[:n_out]) if copy else h[:n_out]
                                   for h in host)
            else:
                windows = np.zeros((0, wy, wx), self.window_dtype)
                ys = xs = np.zeros(0, np.int32)
            maps = launch.maps.get() if launch.maps is not self.no_map_buffer else \
                np.zeros((0, *self.frame_shape), np.uint8)
            common = pixels = None
            if self.labels is not None:
                common = self.cm_out[slot][:n].get()
                pixels = self.cm_pixels[slot][:n].get()
        return ChunkOutput(n_found, n_kept, ys, xs, windows, maps, common, pixels, flagged,
                           gain_bits)

    # --------------------------------------------------------------- helpers
    def _queue_fetch(self, slot: int, done, rows: int):
        """Queue on the fetch stream, behind ``done``, the copy of the slot's counts and of
        its first ``rows`` clusters to the host; return the event of those copies."""
        cp = self.cp
        self.fetch.wait_event(done)
        host = self.meta_host[slot]
        cp.cuda.runtime.memcpyAsync(host.ctypes.data, self.meta[slot].data.ptr, host.nbytes,
                                    cp.cuda.runtime.memcpyDeviceToHost, self.fetch.ptr)
        if rows:
            self._copy_rows(self._host_buffers(slot, rows), slot, 0, rows, self.fetch)
        fetched = cp.cuda.Event(disable_timing=True)
        fetched.record(self.fetch)
        return fetched

    def _copy_rows(self, host, slot: int, start: int, stop: int, stream) -> None:
        """Queue on ``stream`` the copy of the slot's clusters ``start:stop`` into the pinned
        ``host`` buffers (windows, y, x)."""
        cp = self.cp
        for dst, src in zip(host, self._outputs[slot]):
            row = dst[0].nbytes
            cp.cuda.runtime.memcpyAsync(dst.ctypes.data + start * row, src.data.ptr + start * row,
                                        (stop - start) * row, cp.cuda.runtime.memcpyDeviceToHost,
                                        stream.ptr)

    def _wait_fetched(self, launch: Launch) -> np.ndarray:
        """Wait for the launch's kernel and the copies queued behind it; its counts."""
        launch.fetched.synchronize()
        return self.meta_host[launch.slot].copy()

    def _fetch_meta(self, launch: Launch) -> np.ndarray:
        """The launch's counts, copied now (after a repeat of its chunk)."""
        cp = self.cp
        host = self.meta_host[launch.slot]
        self.fetch_now.wait_event(launch.done)
        cp.cuda.runtime.memcpyAsync(host.ctypes.data, self.meta[launch.slot].data.ptr,
                                    host.nbytes, cp.cuda.runtime.memcpyDeviceToHost,
                                    self.fetch_now.ptr)
        self.fetch_now.synchronize()
        return host.copy()

    def _repeat(self, launch: Launch) -> None:
        """Enlarge the regions and run the chunk again from the state it started from."""
        self.compute.synchronize()
        per_band = self.counts[launch.slot][:launch.n].get().sum(axis=0)
        self.region_cap = int(int(per_band.max()) * 1.25) + 64
        self._region = None
        self._outputs[launch.slot] = None
        with self.compute:
            self._ensure_outputs(launch.slot)
            start_s, start_s2 = self.starts[launch.slot]
            self._run(launch.frames, launch.n, launch.slot, start_s.copy(), start_s2.copy(),
                      launch.map_slot, launch.maps)
        self.compute.synchronize()

    def _ensure_outputs(self, slot: int) -> None:
        cp = self.cp
        wy, wx = self.cluster_size
        rows = self.n_bands * self.region_cap
        if self._region is None:
            self._region = (cp.empty((rows, wy, wx), self.window_dtype),
                            cp.empty((rows, 3), cp.int32))
        # The other slot may still hold a chunk's clusters: only this one is replaced.
        if self._outputs[slot] is None or self._outputs[slot][0].shape[0] < rows:
            self._outputs[slot] = (cp.empty((rows, wy, wx), self.window_dtype),
                                   cp.empty(rows, cp.int32), cp.empty(rows, cp.int32))

    def _host_buffers(self, slot: int, rows: int):
        """Pinned ``(windows, y, x)`` of at least ``rows`` clusters, grown by doubling."""
        held = self._host[slot]
        if held is None or held[0].shape[0] < rows:
            wy, wx = self.cluster_size
            size = max(rows, 2 * (0 if held is None else held[0].shape[0]))
            held = (pinned_array(self.cp, (size, wy, wx), self.window_dtype),
                    pinned_array(self.cp, (size,), np.int32),
                    pinned_array(self.cp, (size,), np.int32))
            self._host[slot] = held
        return held

    def _run(self, frames, n, slot, s, s2, map_slot, maps) -> None:
        cp = self.cp
        t = self.state_dtype.type
        meta = Meta.of(self.meta[slot], self.chunk_frames)
        region_win, region_pos = self._region
        out_win, out_y, out_x = self._outputs[slot]
        if self.hist is None:
            edges, n_bins, hist, pixel = self.no_edges, 0, self.no_hist, None
        else:
            edges, hist, pixel = self.hist
            n_bins = len(hist)
        ny = self.frame_shape[0]
        zeroed = [self.sync, self.meta[slot]]
        if self.spec.exchange_in_words:
            zeroed.append(self.exchange)
        if self.labels is not None:
            zeroed.append(self.cm_acc)
        for buffer in zeroed:
            cp.cuda.runtime.memsetAsync(buffer.data.ptr, 0, buffer.nbytes, self.compute.ptr)
        calibration = () if self.calibration is None else self.cal
        args = (frames, np.int32(n), np.int32(ny),
                self.off, s, s2, self.rms_fixed, np.int32(self.fixed),
                t(self.N), t(self.nsig), t(self.c3), np.int32(self.cap),
                self.exchange, self.sync, self.counts[slot], np.int32(self.region_cap),
                region_win, region_pos, self.seg_start, self.frame_start,
                meta.n_found, meta.n_kept, meta.n_out, meta.overflow,
                out_win, out_y, out_x, map_slot, maps,
                edges, np.int32(n_bins), hist,
                np.int32(pixel is not None), self.no_pixel_hist if pixel is None else pixel,
                self.cm_labels, np.int32(self.n_regions), self.cm_acc, self.cm_candidates,
                self.cm_out[slot],
                self.cm_pixels[slot], *calibration, meta.counted)
        self.kernel((self.n_bands, 1, 1), (self.threads, 1, 1), args, shared_mem=self.shared,
                    stream=self.compute, enable_cooperative_groups=True)

    def rewind(self, launch: Launch) -> None:
        """Set the state back to what it was when ``launch`` started (after all queued work)."""
        with cuda_context("rewinding the GPU pedestal"), self.compute:
            start_s, start_s2 = self.starts[launch.slot]
            self.s[...] = start_s
            self.s2[...] = start_s2
            self.compute.synchronize()
            # Copies behind uncollected launches may still be writing pinned buffers that
            # the pool would hand out again once dropped.
            self.fetch.synchronize()

    def warmup(self) -> None:
        """Launch the kernel once on scratch state, so that loading it costs no later call."""
        cp = self.cp
        hist, self.hist = self.hist, None
        try:
            with cuda_context("warming up the frozen kernel"), self.compute:
                self._ensure_outputs(0)
                frames = cp.zeros((1, *self.frame_shape), cp.uint16)
                self._run(frames, 1, 0, self.s.copy(), self.s2.copy(), self.no_maps[:1],
                          self.no_map_buffer)
                self.compute.synchronize()
        finally:
            self.hist = hist

    def configure(self, N, nsig, c3, cap: int | None) -> None:
        """Set the scalars of the decision (in the state dtype) and the capacity."""
        self.N, self.nsig, self.c3 = N, nsig, c3
        self.cap = cap_to_attr(cap)
