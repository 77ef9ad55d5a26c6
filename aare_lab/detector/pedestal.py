"""The per-pixel pedestal (dark level and noise) of docs/algorithm.md.

Training accumulates exact float64 sums over the first ``n_pedestal`` dark frames. When it
completes the state becomes ``(off, s, s2)`` in the pedestal dtype: for float32 it is centred
on the rounded mean ``off`` (so that ``E[x²] − mean²`` does not cancel at pedestal levels of
thousands of ADU), for float64 ``off`` is 0 and ``s``, ``s2`` are the plain sums. Afterwards
every pushed value moves the state by an exponential moving average over ``n_pedestal``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from os import PathLike
from typing import NamedTuple

import numpy as np

from aare_lab._version import __version__
from aare_lab.checks import positive_int
from aare_lab.detector.arith import rms_map, round_half_away_array, update_frame
from aare_lab.detector.dark.photons import DarkPhotons
from aare_lab.frames import as_frame_stack
from aare_lab.sources import FrameSource, open_source
from aare_lab.sources.files import input_record
from aare_lab.storage.netcdf import read_netcdf, write_netcdf

#: Dark frames read from a source at a time.
DARK_CHUNK = 100
PEDESTAL_DTYPES = ("float64", "float32")
NOISE_MODES = ("running", "fixed")
#: The attribute that marks a pedestal file, and the version of its layout.
FILE_MARK, FILE_VERSION = "aare_lab_pedestal", 1
#: The file attributes that keep `Pedestal.dark_photons`: this prefix and each field.
PHOTONS_PREFIX = "dark_photons_"
DARK_PHOTON_FIELDS = tuple(field.name for field in fields(DarkPhotons))


class PedestalNotReady(RuntimeError):
    """Raised when clusters are requested before the pedestal is trained."""


class PedestalSnapshot(NamedTuple):
    """A copy of what the pedestal says about each pixel."""

    mean: np.ndarray
    rms: np.ndarray
    n_frames: int


class Pedestal:
    """Per-pixel pedestal state, trained on dark frames and tracked afterwards.

    Parameters
    ----------
    frame_shape
        ``(ny, nx)`` of the frames.
    n_pedestal
        The pedestal window N: dark frames needed for training and the EMA length.
    dtype
        ``"float64"`` or ``"float32"`` (centred on a per-pixel integer offset).
    noise
        ``"running"``: the rms follows the state every frame; ``"fixed"``: the rms is
        frozen when training completes.

    Attributes
    ----------
    dark_photons
        What `aare_lab.train_pedestal` found checking its dark frames for photon hits
        (`aare_lab.detector.dark.photons.DarkPhotons`), kept by `save` and `load`; None for dark
        frames pushed otherwise, or too few to check.
    inputs
        The files it came from, by role: ``dark`` (the dark frames' file, trained on by
        `push_dark` or `aare_lab.train_pedestal`) and, once loaded, ``pedestal`` (its file),
        each as `aare_lab.sources.files.input_record` gives it; results record them.
    dark_frames_skipped
        Dark frames left out at the start of their acquisitions before training
        (``skip_first``, `aare_lab.sources.without_first`), kept by `save` and `load`.

    Examples
    --------
    >>> import numpy as np
    >>> ped = Pedestal((4, 5), n_pedestal=2)
    >>> ped.push_dark(np.full((2, 4, 5), 1000, dtype=np.uint16))
    >>> ped.ready, float(ped.mean[0, 0]), float(ped.rms[0, 0])
    (True, 1000.0, 0.0)
    """

    def __init__(self, frame_shape: tuple[int, int], n_pedestal: int = 1000,
                 dtype: str = "float64", noise: str = "running"):
        shape = tuple(int(n) for n in frame_shape)
        if len(shape) != 2 or min(shape) < 1:
            raise ValueError(f"frame_shape must be (ny, nx) with ny, nx >= 1, got {frame_shape!r}")
        n_pedestal = positive_int("n_pedestal", n_pedestal)
        dtype_name = np.dtype(dtype).name if dtype in (np.float32, np.float64) else dtype
        if dtype_name not in PEDESTAL_DTYPES:
            raise ValueError(f"pedestal dtype must be 'float64' or 'float32', got {dtype!r}")
        if noise not in NOISE_MODES:
            raise ValueError(f"noise must be 'running' or 'fixed', got {noise!r}")
        self.frame_shape = shape
        self.n_pedestal = int(n_pedestal)
        self.dtype = np.dtype(dtype_name)
        self.noise = noise
        self.n_frames = 0
        self._sum = np.zeros(shape, np.float64)
        self._sum2 = np.zeros(shape, np.float64)
        self.off = self.s = self.s2 = None
        self.rms_fixed = np.zeros((0, 0), self.dtype)
        self._row = np.empty(shape[1], self.dtype)
        self.dark_photons = None
        self.inputs: dict[str, dict] = {}
        self.dark_frames_skipped = 0

    # ------------------------------------------------------------------ state
    @property
    def ready(self) -> bool:
        """Whether training is complete (every pixel has N dark samples)."""
        return self.s is not None

    @property
    def N(self):
        """The pedestal window as a scalar of the pedestal dtype."""
        return self.dtype.type(self.n_pedestal)

    def require_ready(self) -> None:
        """Raise `PedestalNotReady` unless training is complete."""
        if not self.ready:
            raise PedestalNotReady(
                f"pedestal not ready: {self.n_frames} of {self.n_pedestal} dark frames pushed; "
                f"push {self.n_pedestal - self.n_frames} more with push_dark() before finding "
                "clusters"
            )

    @property
    def mean(self) -> np.ndarray:
        """Current pedestal mean per pixel (a copy; float64 while training)."""
        if not self.ready:
            return self._training_mean()
        return self.off + self.s / self.N

    @property
    def rms(self) -> np.ndarray:
        """Current noise per pixel: the kept rms with ``noise="fixed"``, else the running one."""
        if not self.ready:
            mean = self._training_mean()
            var = self._sum2 / max(self.n_frames, 1) - mean * mean
            return np.sqrt(np.maximum(var, 0.0))
        if self.noise == "fixed":
            return self.rms_fixed.copy()
        out = np.empty(self.frame_shape, self.dtype)
        rms_map(self.s, self.s2, self.N, out)
        return out

    def snapshot(self) -> PedestalSnapshot:
        """Mean, rms and the number of dark frames pushed, as NumPy copies."""
        return PedestalSnapshot(self.mean, self.rms, self.n_frames)

    def state(self) -> dict[str, np.ndarray]:
        """The raw state (``off``, ``s``, ``s2`` and, with fixed noise, ``rms_fixed``), copied.

        Two pedestals that went through the same frames with the same model hold
        bit-identical state; tests compare this.
        """
        self.require_ready()
        out = {"off": self.off.copy(), "s": self.s.copy(), "s2": self.s2.copy()}
        if self.noise == "fixed":
            out["rms_fixed"] = self.rms_fixed.copy()
        return out

    def copy(self) -> Pedestal:
        """An independent pedestal in the same state (to run several finders from one dark)."""
        new = Pedestal(self.frame_shape, self.n_pedestal, self.dtype.name, self.noise)
        new.n_frames = self.n_frames
        new.dark_photons = self.dark_photons
        new.inputs = dict(self.inputs)
        new.dark_frames_skipped = self.dark_frames_skipped
        new._sum, new._sum2 = self._sum.copy(), self._sum2.copy()
        if self.ready:
            new.off, new.s, new.s2 = self.off.copy(), self.s.copy(), self.s2.copy()
            new.rms_fixed = self.rms_fixed.copy()
        return new

    def __repr__(self) -> str:
        status = "ready" if self.ready else f"training {self.n_frames}/{self.n_pedestal}"
        return (f"Pedestal({self.frame_shape[0]}x{self.frame_shape[1]}, N={self.n_pedestal}, "
                f"{self.dtype.name}, noise={self.noise!r}, {status})")

    # ---------------------------------------------------------------- pushing
    def push_dark(self, frames) -> None:
        """Push dark (no-photon) frames: training until N are in, EMA updates after.

        Parameters
        ----------
        frames
            One ``uint16`` frame ``(ny, nx)``, a stack ``(n, ny, nx)``, or what
            `aare_lab.find_clusters` reads frames from: a `aare_lab.sources.FrameSource`
            or a file (``"dark.npy"``, ``"dark.h5:/data"``, a master file...,
            `aare_lab.sources.open_source`), read in chunks of `DARK_CHUNK` frames.

        Raises
        ------
        TypeError, ValueError
            For frames that are not ``uint16`` of the pedestal's frame shape, and as
            `aare_lab.sources.open_source` does for a file.
        """
        if isinstance(frames, (FrameSource, str, PathLike)):
            source = open_source(frames)
            self.record_dark(source)
            if tuple(source.frame_shape) != self.frame_shape:
                raise ValueError(
                    f"the dark frames of {source.describe()} are "
                    f"{source.frame_shape[0]}x{source.frame_shape[1]} (ny x nx) but the "
                    f"pedestal is {self.frame_shape[0]}x{self.frame_shape[1]}")
            for chunk in source.chunks(DARK_CHUNK):
                self.push_dark(chunk.frames)
            self.dark_frames_skipped += source.frames_skipped
            return
        stack = as_frame_stack(frames, self.frame_shape, what="dark frames")
        for frame in stack:
            if self.ready:
                update_frame(frame, self.off, self.s, self.s2, self.N, self._row)
            else:
                self._train(frame)
            self.n_frames += 1

    def record_dark(self, source: FrameSource) -> None:
        """Note the file of the first dark frames pushed from a file (`inputs`)."""
        if source.origin is not None and "dark" not in self.inputs:
            self.inputs["dark"] = input_record(source.origin)

    def _train(self, frame: np.ndarray) -> None:
        x = frame.astype(np.float64)
        self._sum += x
        self._sum2 += x * x
        if self.n_frames + 1 == self.n_pedestal:
            self._finish_training()

    def _training_mean(self) -> np.ndarray:
        return self._sum / max(self.n_frames, 1)

    def _finish_training(self) -> None:
        n = np.float64(self.n_pedestal)
        total, total2 = self._sum, self._sum2
        if self.dtype == np.float32:
            off = round_half_away_array(total / n)
            self.off = off.astype(np.float32)
            self.s = (total - n * off).astype(np.float32)
            self.s2 = (total2 - 2 * off * total + n * off * off).astype(np.float32)
        else:
            self.off = np.zeros(self.frame_shape, np.float64)
            self.s = total.copy()
            self.s2 = total2.copy()
        if self.noise == "fixed":
            self.rms_fixed = np.empty(self.frame_shape, self.dtype)
            rms_map(self.s, self.s2, self.N, self.rms_fixed)

    # ------------------------------------------------------------------- files
    def save(self, path: str | os.PathLike) -> None:
        """Write the whole state to a netCDF file that `load` turns back into this pedestal.

        The training sums, the trained state (``off``, ``s``, ``s2``, ``rms_fixed``) in the
        pedestal dtype, N, the frames pushed, the dtype, the noise mode and the frame
        shape are stored exactly, so a loaded pedestal goes on bit for bit as this one
        would (also one saved while still training); the photon check of its dark frames
        (`dark_photons`) is kept as attributes ``dark_photons_<field>``.

        Parameters
        ----------
        path
            The file to write (``.nc`` by convention); replaced if it exists. It appears
            complete or not at all (`aare_lab.storage.netcdf.write_netcdf`).
        """
        import xarray as xr

        dims = ("y", "x")
        data = {"sum": (dims, self._sum), "sum2": (dims, self._sum2)}
        if self.ready:
            data.update(off=(dims, self.off), s=(dims, self.s), s2=(dims, self.s2))
            if self.noise == "fixed":
                data["rms_fixed"] = (dims, self.rms_fixed)
        attrs = {FILE_MARK: FILE_VERSION, "title": "aare_lab pedestal",
                 "n_pedestal": self.n_pedestal, "n_frames": self.n_frames,
                 "dtype": self.dtype.name, "noise": self.noise,
                 "frame_shape": np.asarray(self.frame_shape, np.int64),
                 "aare_lab_version": __version__}
        if self.dark_frames_skipped:
            attrs["dark_frames_skipped"] = self.dark_frames_skipped
        if self.dark_photons is not None:
            attrs.update({f"{PHOTONS_PREFIX}{name}": value
                          for name, value in asdict(self.dark_photons).items()})
        inputs = {role: record for role, record in self.inputs.items() if role != "pedestal"}
        if inputs:
            attrs["inputs"] = json.dumps(inputs, sort_keys=True)
        write_netcdf(xr.Dataset(data, attrs=attrs), path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Pedestal:
        """Read a pedestal written by `save` (or ``aare-lab find --save-pedestal``).

        Raises
        ------
        FileNotFoundError
            For a missing file.
        ValueError
            For a file that is not an aare_lab pedestal, naming it.
        """
        hint = ("pedestal files are written by Pedestal.save or "
                "`aare-lab find --save-pedestal FILE`")
        ds = read_netcdf(path, "a pedestal file", hint, (FILE_MARK, FILE_VERSION))
        a = ds.attrs
        try:
            ped = cls(tuple(a["frame_shape"]), int(a["n_pedestal"]), str(a["dtype"]),
                      str(a["noise"]))
            ped.n_frames = int(a["n_frames"])
            ped.dark_frames_skipped = int(a.get("dark_frames_skipped", 0))
            ped.inputs = {**json.loads(a.get("inputs", "{}")), "pedestal": input_record(path)}
            # Own, writable, C-ordered copies: the compiled updates write into them.
            ped._sum, ped._sum2 = (np.array(ds[name], np.float64, order="C")
                                   for name in ("sum", "sum2"))
            if ped.n_frames >= ped.n_pedestal:
                ped.off, ped.s, ped.s2 = (np.array(ds[name], ped.dtype, order="C")
                                          for name in ("off", "s", "s2"))
                if ped.noise == "fixed":
                    ped.rms_fixed = np.array(ds["rms_fixed"], ped.dtype, order="C")
            if any(PHOTONS_PREFIX + name in a for name in DARK_PHOTON_FIELDS):
                # All of them or a KeyError: a file with some was edited or damaged.
                ped.dark_photons = DarkPhotons(**{name: int(a[PHOTONS_PREFIX + name])
                                                  for name in DARK_PHOTON_FIELDS})
        except KeyError as err:
            raise ValueError(f"{path} is an incomplete pedestal file: {err} is missing; "
                             f"{hint}") from None
        arrays = [ped._sum, ped._sum2] + ([ped.off, ped.s, ped.s2] if ped.ready else [])
        if any(arr.shape != ped.frame_shape for arr in arrays):
            raise ValueError(f"{path} is a damaged pedestal file: its arrays are not of its "
                             f"frame shape {ped.frame_shape}; {hint}")
        return ped
