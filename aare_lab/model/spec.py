"""The finder specification: everything that, with the frames and the dark, fixes a result.

Every entry point builds one `FinderSpec` (a finder, `aare_lab.find_clusters`, the
explanation, the CLI) and the result attributes are derived from it, so a result names the
specification it was made with (`FinderSpec.from_result`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from aare_lab.checks import positive_int
from aare_lab.detector.common_mode import CommonMode, as_common_mode, region_attr
from aare_lab.detector.jungfrau import JungfrauCalibration
from aare_lab.detector.pedestal import NOISE_MODES, PEDESTAL_DTYPES, Pedestal
from aare_lab.model.capacity import cap_from_attr, cap_to_attr
from aare_lab.model.params import (
    INTEGER_WINDOW_DTYPES,
    WINDOW_DTYPES,
    format_cluster_size,
    parse_cluster_size,
)

#: The timing model of each finder (docs/algorithm.md); the names are those of
#: `aare_lab.finders.FINDERS`.
TIMING_MODELS = {"serial": "serial", "frozen": "frozen", "cuda": "frozen"}
#: The parameters a finder can change without a new compiled shape (`Finder.reconfigure`).
RECONFIGURABLE = ("n_sigma", "max_clusters_per_frame")
#: The result attribute that names a run's JUNGFRAU calibration by its checksum.
CALIBRATION_ATTR = "calibration_sha256"


def timing_model(finder: str) -> str:
    """The timing model of the finder named ``finder``; unknown finders are their own."""
    return TIMING_MODELS.get(finder, finder)


@dataclass(frozen=True)
class FinderSpec:
    """A finder and its parameters, validated.

    Parameters
    ----------
    finder
        A name from `aare_lab.finders.FINDERS`: ``"serial"``, ``"frozen"`` or ``"cuda"``.
    n_sigma
        Threshold in units of the pixel noise; finite and > 0.
    cluster_size
        ``(ny, nx)``, ``"NYxNX"`` or a square side; stored as ``(ny, nx)``, both odd, 3..11.
    pedestal_dtype
        ``"float64"`` or ``"float32"``.
    noise
        ``"running"`` or ``"fixed"``.
    max_clusters_per_frame
        Capacity per frame; None keeps every cluster.
    window_dtype
        ``"int32"`` (values rounded half away from zero), ``"int16"`` (rounded, then
        saturated to -32768..32767, half the bytes; the result counts the taps at those
        limits, ``n_window_clipped``), ``"float32"`` or ``"float64"``.
    n_pedestal
        The pedestal window N; None takes that of the pedestal the finder is given.
    common_mode
        None or ``"none"`` (no correction), ``"moench03"``, ``"jungfrau"``, ``"jungfrau-rows"``,
        a label map or a `aare_lab.detector.common_mode.CommonMode`; stored as a `CommonMode` or
        None.
    calibration
        None, or a `aare_lab.detector.jungfrau.JungfrauCalibration`: the frames are raw JUNGFRAU
        values with gain bits and everything found is in keV (docs/algorithm.md, "JUNGFRAU
        gain switching"); needs ``window_dtype`` ``"float32"`` or ``"float64"``.

    Examples
    --------
    >>> spec = FinderSpec("cuda", n_sigma=4, cluster_size="3x5")
    >>> spec.cluster_size, spec.timing_model, spec.radius
    ((3, 5), 'frozen', (1, 2))
    >>> spec.replace(n_sigma=6).n_sigma
    6.0
    """

    finder: str = "frozen"
    n_sigma: float = 5.0
    cluster_size: tuple[int, int] = (3, 3)
    pedestal_dtype: str = "float64"
    noise: str = "running"
    max_clusters_per_frame: int | None = None
    window_dtype: str = "int32"
    n_pedestal: int | None = None
    common_mode: CommonMode | None = None
    calibration: JungfrauCalibration | None = None

    def __post_init__(self):
        if self.finder not in TIMING_MODELS:
            raise ValueError(f"unknown finder {self.finder!r}; available: "
                             f"{', '.join(TIMING_MODELS)}")
        try:
            n_sigma = float(self.n_sigma)
        except (TypeError, ValueError):
            n_sigma = math.nan
        if isinstance(self.n_sigma, bool) or not math.isfinite(n_sigma) or n_sigma <= 0:
            raise ValueError(f"n_sigma must be a finite number > 0, got {self.n_sigma!r}")
        set_ = object.__setattr__
        set_(self, "n_sigma", n_sigma)
        set_(self, "cluster_size", parse_cluster_size(self.cluster_size))
        dtype = self.pedestal_dtype
        if dtype in (np.float32, np.float64):
            dtype = np.dtype(dtype).name
        if dtype not in PEDESTAL_DTYPES:
            raise ValueError(f"pedestal_dtype must be 'float64' or 'float32', got {dtype!r}")
        set_(self, "pedestal_dtype", str(dtype))
        largest = float(np.finfo(dtype).max)
        if n_sigma > largest:
            # The threshold is computed in the pedestal dtype: it would be infinite.
            raise ValueError(f"n_sigma={n_sigma:g} does not fit the {dtype} pedestal (at most "
                             f"{largest:.3g}): lower n_sigma (3 to 10 is usual)")
        if self.noise not in NOISE_MODES:
            raise ValueError(f"noise must be 'running' or 'fixed', got {self.noise!r}")
        if self.max_clusters_per_frame is not None:
            set_(self, "max_clusters_per_frame",
                 positive_int("max_clusters_per_frame", self.max_clusters_per_frame))
        if self.window_dtype not in WINDOW_DTYPES:
            raise ValueError(
                f"window_dtype={self.window_dtype!r} is not one of {', '.join(WINDOW_DTYPES)}")
        if self.n_pedestal is not None:
            set_(self, "n_pedestal", positive_int("n_pedestal", self.n_pedestal))
        set_(self, "common_mode", as_common_mode(self.common_mode))
        if self.calibration is not None:
            if not isinstance(self.calibration, JungfrauCalibration):
                raise TypeError("calibration must be an aare_lab.JungfrauCalibration "
                                f"or None, got {type(self.calibration).__name__}")
            if self.window_dtype in INTEGER_WINDOW_DTYPES:
                raise ValueError("a JUNGFRAU calibration gives windows in keV, which integers "
                                 "would round to whole keV: pass window_dtype='float32' or "
                                 f"'float64', not {self.window_dtype!r}")

    @classmethod
    def from_result(cls, result: xr.Dataset,
                    calibration: JungfrauCalibration | None = None) -> FinderSpec:
        """The specification a result was made with (from its attributes).

        Parameters
        ----------
        result
            A finder result.
        calibration
            The JUNGFRAU calibration of a calibrated result (a result records only its
            checksum); refused for an uncalibrated one.

        Raises
        ------
        ValueError
            When ``calibration`` is missing, not the one the result names, or superfluous.
        """
        a = result.attrs
        common_mode = str(a.get("common_mode", "none"))
        if common_mode == "labels":
            common_mode = result["common_mode_labels"].to_numpy()
        recorded = a.get(CALIBRATION_ATTR)
        given = None if calibration is None else calibration_checksum(calibration)
        if recorded != given:
            raise ValueError(
                "the result was made without a JUNGFRAU calibration: leave calibration out"
                if recorded is None else
                f"the result was made with the JUNGFRAU calibration of checksum {recorded}; "
                + ("pass it as calibration=" if given is None else f"the one given is {given}"))
        return cls(str(a["finder"]), float(a["n_sigma"]), str(a["cluster_size"]),
                   str(a["pedestal_dtype"]), str(a["noise"]),
                   cap_from_attr(a["max_clusters_per_frame"]), str(a["window_dtype"]),
                   int(a["n_pedestal"]), common_mode, calibration)

    @property
    def timing_model(self) -> str:
        """``"serial"`` or ``"frozen"`` (docs/algorithm.md); cuda runs the frozen model."""
        return TIMING_MODELS[self.finder]

    @property
    def radius(self) -> tuple[int, int]:
        """Half-sizes ``(ry, rx)`` of the cluster window."""
        return self.cluster_size[0] // 2, self.cluster_size[1] // 2

    @property
    def compiled_key(self) -> tuple:
        """What fixes a finder's compiled code and buffers (with the pedestal's frame shape),
        and the calibration when there is one.

        Two specifications with the same key differ only in `RECONFIGURABLE` parameters
        or ``n_pedestal``; a finder of one becomes the other with `Finder.reconfigure`
        when ``n_pedestal`` agrees too.
        """
        key = (self.finder, self.cluster_size, self.pedestal_dtype, self.window_dtype,
               self.noise, self.common_mode)
        return key if self.calibration is None else (*key, self.calibration)

    @property
    def units(self) -> str:
        """The units of values, windows and energies: ``"keV"`` with a calibration, else ADU."""
        return "ADU" if self.calibration is None else "keV"

    @property
    def attrs(self) -> dict:
        """The result attributes this specification implies (``n_pedestal`` when known)."""
        attrs = {"finder": self.finder, "n_sigma": self.n_sigma,
                 "cluster_size": format_cluster_size(self.cluster_size),
                 "pedestal_dtype": self.pedestal_dtype, "noise": self.noise,
                 "max_clusters_per_frame": cap_to_attr(self.max_clusters_per_frame),
                 "window_dtype": self.window_dtype,
                 "common_mode": region_attr(self.common_mode)}
        if self.n_pedestal is not None:
            attrs["n_pedestal"] = self.n_pedestal
        if self.calibration is not None:
            attrs[CALIBRATION_ATTR] = calibration_checksum(self.calibration)
        return attrs

    def replace(self, **changes) -> FinderSpec:
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    def check_pedestal(self, pedestal: Pedestal) -> None:
        """Raise if ``pedestal`` is not a `Pedestal` of this dtype, noise mode and N."""
        if not isinstance(pedestal, Pedestal):
            raise TypeError(
                f"pedestal must be an aare_lab.Pedestal, got {type(pedestal).__name__}")
        wanted = (self.pedestal_dtype, self.noise, self.n_pedestal or pedestal.n_pedestal)
        have = (pedestal.dtype.name, pedestal.noise, pedestal.n_pedestal)
        if wanted != have:
            raise ValueError(
                f"the {self.finder} finder needs a {wanted[0]} pedestal with {wanted[1]} noise "
                f"and n_pedestal={wanted[2]}, but the pedestal given is {have[0]}, {have[1]}, "
                f"n_pedestal={have[2]}")


def calibration_checksum(calibration: JungfrauCalibration) -> str:
    """``"sha256:..."`` of a calibration's frame shape, pedestals and gains (float64)."""
    digest = hashlib.sha256(np.asarray(calibration.frame_shape, np.int64).tobytes())
    for array in (calibration.pedestal, calibration.gain):
        digest.update(np.ascontiguousarray(array, np.float64).tobytes())
    return f"sha256:{digest.hexdigest()}"


__all__ = ["CALIBRATION_ATTR", "RECONFIGURABLE", "TIMING_MODELS", "FinderSpec",
           "calibration_checksum", "timing_model"]
