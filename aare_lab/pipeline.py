"""One-call workflows: train a pedestal from dark frames, find clusters with a named finder."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from os import PathLike

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from aare_lab.detector.dark.photons import DarkPhotonSample, IlluminatedDarkWarning
from aare_lab.detector.jungfrau import GainBitsTally, GainBitsWarning, gain_bits_per_frame
from aare_lab.detector.pedestal import DARK_CHUNK, Pedestal
from aare_lab.finders import make_finder
from aare_lab.model.spec import FinderSpec
from aare_lab.sources import FrameSource, open_source, without_first
from aare_lab.storage.destination import Destination
from aare_lab.storage.result_store import DEFAULT_COMPRESSION


def check_frame_shapes(dark: FrameSource, frames) -> None:
    """Refuse data frames whose frame shape is not that of the dark frames, naming both.

    Checked before training, so that a mismatch is the first thing said rather than
    what training or finding trips over later.

    Parameters
    ----------
    dark
        The dark frames.
    frames
        The data frames: a `FrameSource` or an array (NumPy or CuPy); anything else is
        left to the finder's own checks.

    Raises
    ------
    ValueError
        For different frame shapes.
    """
    if isinstance(frames, FrameSource):
        shape, name = tuple(frames.frame_shape), frames.describe()
    elif len(getattr(frames, "shape", ())) >= 2:
        shape, name = tuple(frames.shape[-2:]), "the frames array"
    else:
        return
    if shape != tuple(dark.frame_shape):
        raise ValueError(
            f"the frames of {name} are {shape[0]}x{shape[1]} (ny x nx) but the dark frames "
            f"of {dark.describe()} are {dark.frame_shape[0]}x{dark.frame_shape[1]}: give "
            "dark frames of the same detector and region of interest")


def train_pedestal(dark, n_pedestal: int = 1000, *, dtype: str = "float64",
                   noise: str = "running", progress: bool = True,
                   option: str = "n_pedestal", g0_only: bool = False,
                   notes: list[str] | None = None, skip_first: int = 0) -> Pedestal:
    """Train a `Pedestal` on dark frames.

    Parameters
    ----------
    dark
        Dark frames: an array, a file spec or a `FrameSource` (see
        `aare_lab.sources.open_source`). Frames beyond ``n_pedestal`` update the trained
        pedestal.
    n_pedestal
        The pedestal window N.
    dtype, noise
        As for `Pedestal`.
    progress
        Show a progress bar.
    option
        How the error messages name ``n_pedestal`` (the CLI: ``"--n-pedestal"``).
    g0_only
        Raw JUNGFRAU dark frames for a calibrated run: refuse any pixel whose gain bits
        are not G0's 00 (the pedestal is the G0 pedestal, docs/algorithm.md).
    notes
        A list that receives the texts of the warnings below instead of their warnings,
        for a caller whose warnings nobody would see (a widget's worker thread).
    skip_first
        Leave out the first frames of each acquisition of ``dark``
        (`aare_lab.sources.without_first`); the pedestal counts them
        (``dark_frames_skipped``).

    Raises
    ------
    ValueError
        If there are fewer than ``n_pedestal`` dark frames (after ``skip_first``), or with
        ``g0_only`` a dark frame that is not all G0.

    Warns
    -----
    aare_lab.detector.jungfrau.GainBitsWarning
        Without ``g0_only``, when dark frames hold values above the 14-bit ADC range (raw
        JUNGFRAU pixels that switched gain), once, counting them.
    aare_lab.detector.dark.photons.IlluminatedDarkWarning
        When a sample of the dark frames holds photon hits (the beam was on); the numbers
        are kept as the pedestal's ``dark_photons`` either way.
    """
    source = without_first(open_source(dark), skip_first)
    if source.n_frames is not None and source.n_frames < n_pedestal:
        raise ValueError(
            f"too few dark frames in {source.describe()}: {source.n_frames} given, "
            f"{option}={n_pedestal} needed (record more dark frames or lower {option})"
        )
    pedestal = Pedestal(source.frame_shape, n_pedestal, dtype, noise)
    pedestal.record_dark(source)
    checks = DarkChecks(source, g0_only, source.n_frames)
    with tqdm(total=source.n_frames, unit="frame", desc="pedestal", disable=not progress) as bar:
        for chunk in source.chunks(DARK_CHUNK):
            checks.add(chunk)
            pedestal.push_dark(chunk.frames)
            bar.update(len(chunk.numbers))
    pedestal.require_ready()
    pedestal.dark_frames_skipped += source.frames_skipped
    checks.report(pedestal, notes, stacklevel=2)
    return pedestal


class DarkChecks:
    """What training checks in dark frames as they go into a pedestal: that each pixel
    reads G0 for a calibrated run, else how many pixels have gain bits; and photon hits in
    a sample of them (`aare_lab.detector.dark.photons`). `train_pedestal` and a live run that
    trains on its stream (`aare_lab.stream.live.LiveRun`) share it.

    Parameters
    ----------
    source
        The dark frames' source, named by the messages.
    g0_only
        Refuse any pixel whose gain bits are not G0's 00 (`require_g0`), rather than count
        them.
    n_frames
        The dark frames that will be added, when known (`DarkPhotonSample`).
    """

    def __init__(self, source, g0_only: bool, n_frames: int | None):
        self.source, self.g0_only, self._n_frames = source, g0_only, n_frames
        self._gain_bits = GainBitsTally()
        self._photons: DarkPhotonSample | None = None

    def add(self, chunk) -> None:
        """Check a chunk of dark frames before it is pushed.

        Raises
        ------
        ValueError
            With ``g0_only``, for a pixel outside G0.
        """
        if self.g0_only:
            require_g0(chunk, self.source)
        else:
            self._gain_bits.add(gain_bits_per_frame(chunk.frames))
        if self._photons is None:
            self._photons = DarkPhotonSample(chunk.frames.shape[1:], self._n_frames)
        self._photons.add(chunk.frames)

    def report(self, pedestal: Pedestal, notes: list[str] | None = None,
               stacklevel: int = 2) -> None:
        """Keep the photon check as ``pedestal.dark_photons``, and warn of photon hits
        (`IlluminatedDarkWarning`) and of pixels with gain bits (`GainBitsWarning`), or
        put the texts into ``notes`` (as `train_pedestal` says).

        Parameters
        ----------
        stacklevel
            As for `warnings.warn`, counted from the caller.
        """
        photons = None if self._photons is None else self._photons.result()
        pedestal.dark_photons = photons
        found = ((None if photons is None else
                  photons.warning(f"{self.source.describe()} (dark frames)"),
                  IlluminatedDarkWarning),
                 (self._gain_bits.take(dark_frames_of(self.source)), GainBitsWarning))
        for text, category in found:
            if text is not None and notes is not None:
                notes.append(text)
            elif text is not None:
                warnings.warn(text, category, stacklevel=stacklevel + 1)


def dark_frames_of(source) -> str:
    """How a `GainBitsWarning` names dark frames, which went into the pedestal as read."""
    return f"{source.describe()} (dark frames, trained into the pedestal as they are)"


def train_pedestal_for(spec: FinderSpec, dark, n_pedestal: int, *, progress: bool = True,
                       option: str = "n_pedestal", notes: list[str] | None = None,
                       skip_first: int = 0) -> Pedestal:
    """`train_pedestal` as ``spec`` asks: its dtype and noise model, and all-G0 dark
    frames when it has a calibration; ``spec.n_pedestal`` wins over ``n_pedestal``."""
    return train_pedestal(dark, spec.n_pedestal or n_pedestal, dtype=spec.pedestal_dtype,
                          noise=spec.noise, progress=progress, option=option,
                          g0_only=spec.calibration is not None, notes=notes,
                          skip_first=skip_first)


def require_g0(chunk, source: FrameSource) -> None:
    """Refuse a chunk of JUNGFRAU dark frames with a pixel outside G0 (gain bits 00)."""
    switched = gain_bits_per_frame(chunk.frames)
    if switched.any():
        k = int(np.argmax(switched > 0))
        raise ValueError(
            f"dark frame {int(chunk.numbers[k])} of {source.describe()} has {switched[k]} "
            "pixels with gain bits other than G0's: the dark frames of a calibrated JUNGFRAU "
            "run train the G0 pedestal and must all read G0 (record them without beam)")


def find_clusters(frames, dark=None, *, pedestal: Pedestal | None = None,
                  spec: FinderSpec | None = None, finder: str = "frozen", n_sigma: float = 5.0,
                  cluster_size: int | str | tuple[int, int] = (3, 3),
                  n_pedestal: int = 1000, pedestal_dtype: str = "float64",
                  noise: str = "running", max_clusters_per_frame: int | None = None,
                  window_dtype: str = "int32", common_mode=None, calibration=None,
                  branch_maps: bool | Iterable[int] | None = None, progress: bool = True,
                  out: str | PathLike | None = None, overwrite: bool = False,
                  compression: str = DEFAULT_COMPRESSION, skip_first: int = 0,
                  **finder_options) -> xr.Dataset:
    """Train a pedestal on ``dark`` (or take ``pedestal``) and find clusters in ``frames``.

    Parameters
    ----------
    frames
        The data frames (array, file spec or `FrameSource`).
    dark
        The dark frames; not needed when ``pedestal`` is given.
    pedestal
        A trained pedestal to start from; it is copied, never advanced.
    spec
        The finder and its parameters as one `FinderSpec`, instead of ``finder`` to
        ``window_dtype`` (which are then refused). A given ``pedestal`` must have its
        dtype, noise mode and ``n_pedestal`` (if set; 1000 when training).
    finder
        A name from `aare_lab.finders.available_finders`.
    n_sigma, cluster_size, max_clusters_per_frame, window_dtype, common_mode, calibration
        Finder parameters (see `aare_lab.model.spec.FinderSpec`); with a calibration the dark
        frames must all be G0.
    n_pedestal, pedestal_dtype, noise
        Pedestal configuration when training from ``dark`` (a given ``pedestal`` brings
        its own).
    branch_maps
        True for every frame, or frame numbers.
    progress
        Show progress bars.
    out, overwrite, compression
        A result file to write chunk by chunk, whether an existing one may be replaced, and
        how it is stored (`aare_lab.finders.Finder.find`); the result is then opened lazily
        from it.
    skip_first
        Leave out the first frames of each acquisition of ``frames`` and ``dark``
        (`aare_lab.sources.without_first`: a file is one acquisition); the result counts
        them (attributes ``skip_first``, ``frames_skipped``, ``dark_frames_skipped``).
    **finder_options
        Passed to the finder class (``threads``, ``on_truncation``, ``chunk_frames``...).

    Returns
    -------
    xarray.Dataset
        See `aare_lab.model.results`.

    Raises
    ------
    TypeError
        For ``spec`` together with any of ``finder`` to ``window_dtype``.
    ValueError
        For an invalid parameter, or a pedestal that does not fit the specification.

    Warns
    -----
    aare_lab.detector.jungfrau.GainBitsWarning
        Without a calibration, for dark or data frames with values above 14 bits: raw
        JUNGFRAU pixels that switched gain, which only ``calibration=`` can read.

    Examples
    --------
    >>> from aare_lab.simulate import Detector, simulate_run
    >>> run = simulate_run(n_dark=20, n_frames=5, detector=Detector(frame_shape=(32, 32)))
    >>> result = find_clusters(run.frames, run.dark, n_pedestal=20, progress=False)
    >>> int(result.sizes["frame"])
    5
    >>> again = find_clusters(run.frames, run.dark, spec=FinderSpec.from_result(result),
    ...                       progress=False)
    >>> bool((again["energy"] == result["energy"]).all())
    True
    """
    given = {name: value for name, value, default in (
        ("finder", finder, "frozen"), ("n_sigma", n_sigma, 5.0),
        ("cluster_size", cluster_size, (3, 3)), ("n_pedestal", n_pedestal, 1000),
        ("pedestal_dtype", pedestal_dtype, "float64"), ("noise", noise, "running"),
        ("max_clusters_per_frame", max_clusters_per_frame, None),
        ("window_dtype", window_dtype, "int32")) if value != default}
    for name, value in (("common_mode", common_mode), ("calibration", calibration)):
        if value is not None:
            given[name] = value
    if spec is None:
        if pedestal is not None:
            # A trained pedestal brings its own configuration.
            pedestal_dtype, noise, n_pedestal = (pedestal.dtype.name, pedestal.noise,
                                                 pedestal.n_pedestal)
        spec = FinderSpec(finder, n_sigma, cluster_size, pedestal_dtype, noise,
                          max_clusters_per_frame, window_dtype, n_pedestal, common_mode,
                          calibration)
    elif given:
        raise TypeError(f"give the finder parameters either as spec= or as arguments, not "
                        f"both (got spec and {', '.join(given)})")
    destination = None if out is None else Destination(out, overwrite)
    try:
        pedestal, frames = _pedestal_for(spec, frames, dark, pedestal, n_pedestal, progress,
                                         skip_first)
        runner = make_finder(spec, pedestal, **finder_options)
        return runner.find(frames, branch_maps=branch_maps, progress=progress,
                           out=destination, compression=compression)
    finally:
        if destination is not None:
            destination.release()


def _pedestal_for(spec, frames, dark, pedestal, n_pedestal, progress, skip_first):
    """`find_clusters`' pedestal (trained on ``dark``, or a copy of ``pedestal``) and its
    frames (a file opened once, without its first ``skip_first`` frames)."""
    if hasattr(frames, "__cuda_array_interface__"):
        frames = _device_frames_without_first(frames, skip_first)
    elif isinstance(frames, (str, PathLike)) or skip_first:
        frames = without_first(open_source(frames), skip_first)
    if pedestal is None:
        if dark is None:
            raise ValueError("give dark frames (dark=...) or a trained pedestal (pedestal=...)")
        dark = open_source(dark)
        check_frame_shapes(dark, frames)
        return train_pedestal_for(spec, dark, n_pedestal, progress=progress,
                                  skip_first=skip_first), frames
    pedestal.require_ready()
    return pedestal.copy(), frames


def _device_frames_without_first(frames, skip_first: int):
    """Frames on the GPU (a CuPy array, one acquisition) without their first
    ``skip_first``: a view that stays on the device, as the cuda finder reads it, counting
    what it left out."""
    if not skip_first:
        return frames
    from aare_lab.gpu.source import DeviceArraySource

    stack = frames if frames.ndim != 2 else frames[None]
    if skip_first >= len(stack):
        raise ValueError(f"skip_first={skip_first} leaves no frame of the {len(stack)} "
                         "frames on the GPU: skip fewer")
    source = DeviceArraySource(stack[skip_first:])
    source.skip_first, source.frames_skipped = skip_first, skip_first
    return source
