"""Simulated raw frames of a charge-integrating hybrid pixel detector, with ground truth.

The model, per pixel ``(iy, ix)`` of frame ``k``::

    raw = clip(rint(pedestal + drift * k + noise * N(0, 1) + gain * charge_kev), 0, 65535)

where ``charge_kev`` is the energy that the photons of the frame deposit in the pixel.
Photons arrive as a Poisson process (``Beam.photons_per_frame`` per frame on average),
uniformly over the sensor, each with the energy of one fluorescence line picked with the
line's relative intensity. Each photon's charge spreads as a 2-D gaussian cloud of rms
``Beam.charge_cloud_sigma_um``; a pixel receives the integral of the cloud over its area
(a product of two 1-D differences of the normal CDF). Charge that falls outside the
sensor is lost.

Conventions
-----------
Positions are in pixel units: pixel ``(iy, ix)`` covers ``[iy, iy + 1) x [ix, ix + 1)``,
so its centre is at ``(iy + 0.5, ix + 0.5)`` and ``floor(y), floor(x)`` is the pixel a
photon hit. Dark frames and data frames are numbered separately from 0. The pedestal
drift applies to data frames only: data frame ``k`` reads ``pedestal + drift * k``, dark
frames read the plain pedestal (they are taken before the run).

Dead pixels collect no charge and have no noise: they read their pedestal (rounded, plus
the drift of data frames) in every frame. Hot pixels have ``Detector.hot_noise_factor``
times their normal noise and respond to photons normally.

Reproducibility
---------------
Everything random derives from ``seed`` through :class:`numpy.random.SeedSequence` spawn
keys: one key per detector map, ``(1, k)`` for dark frame ``k`` and ``(2, k)`` for data
frame ``k``. A frame is therefore the same whether it is generated alone or in any chunk,
the detector maps do not depend on the beam, and dark frames do not depend on the beam.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.special import ndtr

from aare_lab.checks import positive_int
from aare_lab.detector.common_mode import PRESETS, CommonMode, region_count
from aare_lab.frames import FRAME_DTYPE

_MAPS_STREAM = 0
_DARK_STREAM = 1
_DATA_STREAM = 2
# Common-mode offsets draw from streams of their own, so frames without them stay as they were.
_DARK_COMMON_STREAM = 3
_DATA_COMMON_STREAM = 4
_PEDESTAL_MAP, _NOISE_MAP, _GAIN_MAP, _DEFECT_MAP = range(4)

ADU_MAX = int(np.iinfo(FRAME_DTYPE).max)
# The deposit holds (2r + 1)^2 weights per photon with r = ceil(4 sigma); larger clouds
# would need tens of MB per frame and are far beyond any real sensor of this kind.
MAX_CLOUD_SIGMA_PIXELS = 5.0
_CLOUD_RADIUS_SIGMAS = 4.0


def _number(owner: str, name: str, value, *, low: float | None = None,
            low_open: bool = False, high: float | None = None) -> float:
    """Return ``value`` as a finite float within bounds, or raise a ValueError naming it."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}.{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise ValueError(f"{owner}.{name} must be a finite number, got {value!r}")
    if low is not None and (number <= low if low_open else number < low):
        raise ValueError(f"{owner}.{name} must be {'>' if low_open else '>='} {low}, "
                         f"got {value!r}")
    if high is not None and number > high:
        raise ValueError(f"{owner}.{name} must be <= {high}, got {value!r}")
    return number


def _count(name: str, value) -> int:
    """``value`` as an integer >= 0 (counts and positions; `positive_int` for sizes)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Detector:
    """The static description of a detector; the defaults resemble PSI's MÖNCH03.

    With the defaults an 8 keV photon gives about 320 ADU against 5 ADU of noise
    (an equivalent noise charge of about 0.13 keV), so even a photon shared equally
    over four pixels is far above a 5 sigma threshold in each.

    Parameters
    ----------
    frame_shape
        ``(ny, nx)`` pixels, both >= 1.
    pixel_pitch_um
        Pixel size in micrometres, > 0.
    pedestal_mean_adu, pedestal_spread_adu
        Mean and rms over pixels of the per-pixel pedestal (dark level), in ADU. The map
        is drawn from a normal distribution and clipped to 0..65535.
    noise_adu, noise_spread_adu
        Mean and rms over pixels of the per-pixel electronic noise (rms per frame), in
        ADU. The map is drawn from a normal distribution and clipped at 0.
    gain_adu_per_kev
        Signal per deposited keV, > 0.
    gain_spread
        Relative rms of the per-pixel gain map around ``gain_adu_per_kev`` (0: uniform).
    dead_fraction, hot_fraction
        Fractions of pixels that are dead or hot; the counts are rounded to whole
        pixels and the two sets are disjoint.
    hot_noise_factor
        How many times its normal noise a hot pixel has, >= 1.
    common_mode_sigma_adu
        Rms of a per-frame offset added to every pixel of a common-mode region (dark and
        data frames), in ADU; 0: none.
    common_mode_jump_adu, common_mode_jump_probability
        With this probability per frame, the whole frame is also offset by
        ``±common_mode_jump_adu`` (random sign), as seen on real JUNGFRAU dark frames.
    common_mode_regions
        The layout of the regions, a preset of `aare_lab.detector.common_mode` (``"moench03"``,
        ``"jungfrau"``, ``"jungfrau-rows"``) that fits ``frame_shape``.
    """

    frame_shape: tuple[int, int] = (400, 400)
    pixel_pitch_um: float = 25.0
    pedestal_mean_adu: float = 2500.0
    pedestal_spread_adu: float = 200.0
    noise_adu: float = 5.0
    noise_spread_adu: float = 0.5
    gain_adu_per_kev: float = 40.0
    gain_spread: float = 0.0
    dead_fraction: float = 0.0
    hot_fraction: float = 0.0
    hot_noise_factor: float = 10.0
    common_mode_sigma_adu: float = 0.0
    common_mode_jump_adu: float = 0.0
    common_mode_jump_probability: float = 0.0
    common_mode_regions: str = "moench03"

    def __post_init__(self):
        try:
            shape = tuple(self.frame_shape)
        except TypeError:
            shape = ()
        if len(shape) != 2 or any(isinstance(n, bool) or not isinstance(n, (int, np.integer))
                                  or n < 1 for n in shape):
            raise ValueError("Detector.frame_shape must be two integers (ny, nx) >= 1, "
                             f"got {self.frame_shape!r}")
        object.__setattr__(self, "frame_shape", (int(shape[0]), int(shape[1])))
        checks = {
            "pixel_pitch_um": dict(low=0.0, low_open=True),
            "pedestal_mean_adu": dict(low=0.0, high=float(ADU_MAX)),
            "pedestal_spread_adu": dict(low=0.0),
            "noise_adu": dict(low=0.0),
            "noise_spread_adu": dict(low=0.0),
            "gain_adu_per_kev": dict(low=0.0, low_open=True),
            "gain_spread": dict(low=0.0),
            "dead_fraction": dict(low=0.0, high=1.0),
            "hot_fraction": dict(low=0.0, high=1.0),
            "hot_noise_factor": dict(low=1.0),
            "common_mode_sigma_adu": dict(low=0.0),
            "common_mode_jump_adu": dict(low=0.0),
            "common_mode_jump_probability": dict(low=0.0, high=1.0),
        }
        for name, bounds in checks.items():
            object.__setattr__(self, name, _number("Detector", name, getattr(self, name),
                                                   **bounds))
        if self.common_mode_regions not in PRESETS:
            raise ValueError(f"Detector.common_mode_regions must be one of "
                             f"{', '.join(PRESETS)}, got {self.common_mode_regions!r}")
        if self.has_common_mode:
            CommonMode(self.common_mode_regions).labels(self.frame_shape)
        if self.dead_fraction + self.hot_fraction > 1.0:
            raise ValueError(
                f"Detector.dead_fraction + hot_fraction must be <= 1 (the sets are disjoint), "
                f"got {self.dead_fraction} + {self.hot_fraction}"
            )

    @property
    def has_common_mode(self) -> bool:
        """Whether frames carry common-mode offsets."""
        return self.common_mode_sigma_adu > 0 or (
            self.common_mode_jump_adu > 0 and self.common_mode_jump_probability > 0)

    @property
    def n_pixels(self) -> int:
        """Number of pixels of a frame."""
        return self.frame_shape[0] * self.frame_shape[1]


@dataclass(frozen=True)
class Edge:
    """A straight absorbing edge in front of the sensor: photons reach it only where
    ``x - position > y * tan(angle_deg)`` (pixel units; the edge crosses row 0 at column
    ``position`` and leans by ``angle_deg`` from the columns). A small angle samples every
    phase of the edge within the pixels, as a slanted-edge resolution measurement does.
    """

    position: float
    angle_deg: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "position", _number("Edge", "position", self.position))
        object.__setattr__(self, "angle_deg", _number("Edge", "angle_deg", self.angle_deg,
                                                      low=-45.0, high=45.0))

    def distance(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Signed distance (pixels) of positions from the edge along its normal, positive
        on the open side."""
        angle = math.radians(self.angle_deg)
        return (x - self.position) * math.cos(angle) - y * math.sin(angle)

    def transmits(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Whether photons at these positions reach the sensor."""
        return self.distance(y, x) > 0


@dataclass(frozen=True)
class Slit(Edge):
    """An open slit ``width`` pixels wide along the normal of an `Edge` at ``position``:
    photons reach the sensor only at distances from that edge in ``(0, width)``."""

    width: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "width", _number("Slit", "width", self.width, low=0.0,
                                                  low_open=True))

    def transmits(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        distance = self.distance(y, x)
        return (distance > 0) & (distance < self.width)


@dataclass(frozen=True)
class Beam:
    """What hits the detector during a run, and how the run drifts.

    Parameters
    ----------
    photons_per_frame
        Mean number of photons per data frame (Poisson distributed), >= 0.
    lines
        ``(energy_kev, relative_intensity)`` pairs; energies > 0, intensities >= 0 with
        a positive sum (they are normalised). The default is Cu K-alpha and K-beta with
        K-beta at 13 % of the photons.
    charge_cloud_sigma_um
        Rms of the gaussian charge cloud in micrometres, >= 0 (0: all charge in the hit
        pixel). At most 5 pixel pitches.
    pedestal_drift_adu_per_frame
        Linear pedestal drift of the data frames (e.g. from warming up), in ADU per frame.
    illumination
        None for a flat field (photons uniform over the sensor), or an `Edge` or `Slit`
        that absorbs the photons of the flat field it covers (``photons_per_frame`` is
        the rate before it).
    """

    photons_per_frame: float = 2300.0
    lines: tuple[tuple[float, float], ...] = ((8.05, 0.87), (8.90, 0.13))
    charge_cloud_sigma_um: float = 6.0
    pedestal_drift_adu_per_frame: float = 0.0
    illumination: Edge | None = None

    def __post_init__(self):
        for name, bounds in (("photons_per_frame", dict(low=0.0)),
                             ("charge_cloud_sigma_um", dict(low=0.0)),
                             ("pedestal_drift_adu_per_frame", {})):
            object.__setattr__(self, name, _number("Beam", name, getattr(self, name),
                                                   **bounds))
        try:
            pairs = [tuple(pair) for pair in self.lines]
        except TypeError:
            raise ValueError("Beam.lines must be a sequence of (energy_kev, "
                             f"relative_intensity) pairs, got {self.lines!r}") from None
        if not pairs or any(len(pair) != 2 for pair in pairs):
            raise ValueError("Beam.lines must be a non-empty sequence of (energy_kev, "
                             f"relative_intensity) pairs, got {self.lines!r}")
        if len(pairs) > np.iinfo(np.int8).max:
            raise ValueError(f"Beam.lines has {len(pairs)} lines; at most 127 are supported")
        lines = tuple(
            (_number("Beam", f"lines[{i}] energy_kev", energy, low=0.0, low_open=True),
             _number("Beam", f"lines[{i}] relative_intensity", weight, low=0.0))
            for i, (energy, weight) in enumerate(pairs)
        )
        if self.illumination is not None and not isinstance(self.illumination, Edge):
            raise ValueError("Beam.illumination must be None (a flat field), an Edge or a "
                             f"Slit, got {self.illumination!r}")
        if sum(weight for _, weight in lines) <= 0:
            raise ValueError(f"Beam.lines relative intensities sum to 0: {self.lines!r}")
        object.__setattr__(self, "lines", lines)

    @property
    def line_energies_kev(self) -> np.ndarray:
        """Energy of each line in keV."""
        return np.array([energy for energy, _ in self.lines])

    @property
    def line_probabilities(self) -> np.ndarray:
        """Probability that a photon belongs to each line (the normalised intensities)."""
        weights = np.array([weight for _, weight in self.lines])
        return weights / weights.sum()


@dataclass(frozen=True, eq=False)
class DetectorMaps:
    """The per-pixel truth of a simulated detector, as read-only ``(ny, nx)`` arrays.

    Attributes
    ----------
    pedestal
        Dark level in ADU (float64).
    noise
        Electronic noise rms in ADU (float64); 0 for dead pixels.
    gain
        ADU per keV (float64); 0 for dead pixels.
    dead, hot
        Boolean masks; disjoint.
    """

    pedestal: np.ndarray
    noise: np.ndarray
    gain: np.ndarray
    dead: np.ndarray
    hot: np.ndarray


@dataclass(frozen=True, eq=False)
class Truth:
    """Where the simulated photons were: equal-length 1-D arrays, one entry per photon.

    Attributes
    ----------
    frame
        Data frame number (int64).
    y, x
        Position in pixel units (float64); pixel ``(iy, ix)`` covers
        ``[iy, iy + 1) x [ix, ix + 1)``, so its centre is at ``iy + 0.5, ix + 0.5``.
    energy_kev
        Photon energy in keV (float64).
    line
        Index into ``Beam.lines`` (int8).
    """

    frame: np.ndarray
    y: np.ndarray
    x: np.ndarray
    energy_kev: np.ndarray
    line: np.ndarray

    def __post_init__(self):
        dtypes = {"frame": np.int64, "y": np.float64, "x": np.float64,
                  "energy_kev": np.float64, "line": np.int8}
        for name, dtype in dtypes.items():
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        shapes = {name: getattr(self, name).shape for name in dtypes}
        if any(len(shape) != 1 for shape in shapes.values()) \
                or len(set(shapes.values())) != 1:
            raise ValueError(
                f"Truth fields must be 1-D arrays of equal length, got shapes {shapes}")

    def __len__(self) -> int:
        return len(self.frame)

    @classmethod
    def empty(cls) -> Truth:
        """Truth without photons."""
        return cls(*(np.empty(0) for _ in range(5)))

    @classmethod
    def concat(cls, truths: Iterable[Truth]) -> Truth:
        """Join the photons of several truths, in order."""
        truths = list(truths)
        if not truths:
            return cls.empty()
        return cls(*(np.concatenate([getattr(t, name) for t in truths])
                     for name in ("frame", "y", "x", "energy_kev", "line")))

    def to_xarray(self) -> xr.Dataset:
        """The photons as an :class:`xarray.Dataset` over the dimension ``"photon"``."""
        return xr.Dataset(
            {
                "frame": ("photon", self.frame, {"long_name": "data frame number"}),
                "y": ("photon", self.y, {"units": "pixel", "long_name": "row position"}),
                "x": ("photon", self.x, {"units": "pixel", "long_name": "column position"}),
                "energy_kev": ("photon", self.energy_kev, {"units": "keV"}),
                "line": ("photon", self.line, {"long_name": "index into Beam.lines"}),
            },
            attrs={"position_convention": "pixel (iy, ix) covers [iy, iy+1) x [ix, ix+1); "
                                          "its centre is at (iy+0.5, ix+0.5)"},
        )


class Simulator:
    """Generates dark and data frames of one simulated detector, reproducibly.

    Parameters
    ----------
    detector
        The detector; ``Detector()`` (MÖNCH03-like) if omitted.
    beam
        The illumination; ``Beam()`` (Cu fluorescence) if omitted.
    seed
        Non-negative integer from which the maps and every frame derive; ``None`` draws
        fresh entropy, kept in :attr:`seed` so that the run can be repeated.

    Examples
    --------
    >>> sim = Simulator(Detector(frame_shape=(16, 24)), Beam(photons_per_frame=3), seed=1)
    >>> sim.dark(2).shape, sim.dark(2).dtype
    ((2, 16, 24), dtype('uint16'))
    >>> frames, truth = sim.frames(5)
    >>> bool((sim.frames(2, start=3)[0] == frames[3:]).all())
    True
    """

    def __init__(self, detector: Detector | None = None, beam: Beam | None = None,
                 seed: int | None = 0):
        self._detector = Detector() if detector is None else detector
        self._beam = Beam() if beam is None else beam
        if not isinstance(self._detector, Detector):
            raise ValueError(f"detector must be a Detector, got {type(detector).__name__}")
        if not isinstance(self._beam, Beam):
            raise ValueError(f"beam must be a Beam, got {type(beam).__name__}")
        self._seed = np.random.SeedSequence().entropy if seed is None else _count("seed", seed)
        sigma_px = self._beam.charge_cloud_sigma_um / self._detector.pixel_pitch_um
        if sigma_px > MAX_CLOUD_SIGMA_PIXELS:
            raise ValueError(
                f"charge cloud sigma {self._beam.charge_cloud_sigma_um} um is {sigma_px:.3g} "
                f"pixels of {self._detector.pixel_pitch_um} um; at most "
                f"{MAX_CLOUD_SIGMA_PIXELS} pixels are supported"
            )
        self._sigma_px = sigma_px
        self._radius = math.ceil(_CLOUD_RADIUS_SIGMAS * sigma_px)
        self._maps = self._make_maps()
        self._common_labels = CommonMode(self._detector.common_mode_regions).labels(
            self._detector.frame_shape) if self._detector.has_common_mode else None
        self._n_regions = (0 if self._common_labels is None
                           else region_count(self._common_labels))

    @property
    def detector(self) -> Detector:
        """The simulated detector."""
        return self._detector

    @property
    def beam(self) -> Beam:
        """The simulated illumination."""
        return self._beam

    @property
    def seed(self) -> int:
        """The seed everything derives from."""
        return self._seed

    @property
    def maps(self) -> DetectorMaps:
        """The per-pixel pedestal, noise, gain and defect masks."""
        return self._maps

    def _rng(self, stream: int, index: int) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence(self._seed,
                                                            spawn_key=(stream, index)))

    def _make_maps(self) -> DetectorMaps:
        det = self._detector
        shape = det.frame_shape
        pedestal = np.clip(det.pedestal_mean_adu + det.pedestal_spread_adu
                           * self._rng(_MAPS_STREAM, _PEDESTAL_MAP).standard_normal(shape),
                           0.0, ADU_MAX)
        noise = np.maximum(det.noise_adu + det.noise_spread_adu
                           * self._rng(_MAPS_STREAM, _NOISE_MAP).standard_normal(shape), 0.0)
        gain = np.maximum(det.gain_adu_per_kev * (1.0 + det.gain_spread * self._rng(
            _MAPS_STREAM, _GAIN_MAP).standard_normal(shape)), 0.0)
        # Ranks of one permutation give exact counts and disjoint dead and hot sets.
        rank = self._rng(_MAPS_STREAM, _DEFECT_MAP).permutation(det.n_pixels).reshape(shape)
        n_dead = round(det.dead_fraction * det.n_pixels)
        n_hot = round(det.hot_fraction * det.n_pixels)
        dead = rank < n_dead
        hot = (rank >= n_dead) & (rank < n_dead + n_hot)
        noise[hot] *= det.hot_noise_factor
        noise[dead] = 0.0
        gain[dead] = 0.0
        for array in (pedestal, noise, gain, dead, hot):
            array.setflags(write=False)
        return DetectorMaps(pedestal=pedestal, noise=noise, gain=gain, dead=dead, hot=hot)

    def _charge_kev(self, iy: np.ndarray, ix: np.ndarray, fy: np.ndarray, fx: np.ndarray,
                    energy_kev: np.ndarray) -> np.ndarray:
        """Energy (keV) per pixel from photons at offsets ``fy, fx`` within pixels ``iy, ix``."""
        r = self._radius
        ny, nx = self._detector.frame_shape
        side = 2 * r + 1
        # Pixel j (relative to the hit pixel) spans [j, j+1); the outermost pixels of the
        # neighbourhood take the cloud's tails too, so no charge is dropped inside the sensor.
        inner_edges = np.arange(1 - r, r + 1, dtype=np.float64)
        cdf_y = ndtr((inner_edges - fy[:, None]) / self._sigma_px)
        cdf_x = ndtr((inner_edges - fx[:, None]) / self._sigma_px)
        outer = np.ones((len(energy_kev), 1))
        share_y = np.diff(cdf_y, prepend=np.zeros_like(outer), append=outer, axis=1)
        share_x = np.diff(cdf_x, prepend=np.zeros_like(outer), append=outer, axis=1)
        weights = energy_kev[:, None, None] * share_y[:, :, None] * share_x[:, None, :]
        # A margin of r pixels around the frame catches charge leaving the sensor.
        padded_nx = nx + 2 * r
        corner = iy * padded_nx + ix
        offsets = np.arange(side)[:, None] * padded_nx + np.arange(side)[None, :]
        charge = np.bincount((corner[:, None, None] + offsets).ravel(), weights.ravel(),
                             minlength=(ny + 2 * r) * padded_nx)
        return charge.reshape(ny + 2 * r, padded_nx)[r:r + ny, r:r + nx]

    def common_mode_offsets(self, stream: str, k: int) -> np.ndarray | None:
        """The common-mode offset (ADU) of each region in dark (``"dark"``) or data frame
        ``k``; None for a detector without common mode."""
        det = self._detector
        if self._common_labels is None:
            return None
        rng = self._rng(_DARK_COMMON_STREAM if stream == "dark" else _DATA_COMMON_STREAM, k)
        offsets = det.common_mode_sigma_adu * rng.standard_normal(self._n_regions)
        if rng.random() < det.common_mode_jump_probability:
            offsets += det.common_mode_jump_adu * rng.choice([-1.0, 1.0])
        return offsets

    def _render(self, rng: np.random.Generator, out: np.ndarray, offset_adu: float = 0.0,
                signal_adu: np.ndarray | None = None,
                common_adu: np.ndarray | None = None) -> None:
        level = rng.standard_normal(self._detector.frame_shape)
        level *= self._maps.noise
        level += self._maps.pedestal
        if offset_adu:
            level += offset_adu
        if common_adu is not None:
            level += common_adu[self._common_labels]
        if signal_adu is not None:
            level += signal_adu
        np.rint(level, out=level)
        np.clip(level, 0, ADU_MAX, out=level)
        out[...] = level

    def _data_frame(self, k: int, out: np.ndarray) -> Truth:
        rng = self._rng(_DATA_STREAM, k)
        ny, nx = self._detector.frame_shape
        n = int(rng.poisson(self._beam.photons_per_frame))
        # The pixel and the offset within it are kept apart: iy + fy may round up to iy + 1.
        iy = rng.integers(0, ny, n)
        ix = rng.integers(0, nx, n)
        fy = rng.random(n)
        fx = rng.random(n)
        line = rng.choice(len(self._beam.lines), size=n, p=self._beam.line_probabilities)
        if self._beam.illumination is not None:
            # The same draws as the flat field, less what the mask absorbs.
            keep = self._beam.illumination.transmits(iy + fy, ix + fx)
            iy, ix, fy, fx, line = iy[keep], ix[keep], fy[keep], fx[keep], line[keep]
        energy_kev = self._beam.line_energies_kev[line]
        signal_adu = self._charge_kev(iy, ix, fy, fx, energy_kev) * self._maps.gain
        self._render(rng, out, self._beam.pedestal_drift_adu_per_frame * k, signal_adu,
                     self.common_mode_offsets("data", k))
        return Truth(frame=np.full(len(iy), k), y=iy + fy, x=ix + fx, energy_kev=energy_kev,
                     line=line)

    def _empty_stack(self, n: int) -> np.ndarray:
        return np.empty((n, *self._detector.frame_shape), dtype=FRAME_DTYPE)

    def dark(self, n: int, start: int = 0) -> np.ndarray:
        """Dark frames ``start .. start + n - 1``: pedestal and noise, no photons, no drift
        (the JUNGFRAU simulator's: raw G0 values, gain bits 00).

        Parameters
        ----------
        n
            Number of frames, >= 0.
        start
            Number of the first dark frame, >= 0.

        Returns
        -------
        numpy.ndarray
            ``(n, ny, nx)`` uint16 raw counts.
        """
        n, start = _count("n", n), _count("start", start)
        out = self._empty_stack(n)
        for i in range(n):
            self._dark_frame(start + i, out[i])
        return out

    def _dark_frame(self, k: int, out: np.ndarray) -> None:
        self._render(self._rng(_DARK_STREAM, k), out,
                     common_adu=self.common_mode_offsets("dark", k))

    def frames(self, n: int, start: int = 0) -> tuple[np.ndarray, Truth]:
        """Data frames ``start .. start + n - 1`` with photons, and their truth.

        Parameters
        ----------
        n
            Number of frames, >= 0.
        start
            Number of the first data frame, >= 0; it sets the drift and the random keys.

        Returns
        -------
        frames : numpy.ndarray
            ``(n, ny, nx)`` uint16 raw counts.
        truth : Truth
            The photons of these frames, ordered by frame.
        """
        n, start = _count("n", n), _count("start", start)
        out = self._empty_stack(n)
        truth = Truth.concat(self._data_frame(start + i, out[i]) for i in range(n))
        return out, truth

    def iter_dark(self, n: int, chunk_frames: int = 100, start: int = 0) -> Iterator[np.ndarray]:
        """Dark frames ``start .. start + n - 1`` in chunks of at most ``chunk_frames``."""
        n, start = _count("n", n), _count("start", start)
        chunk_frames = positive_int("chunk_frames", chunk_frames)
        for first in range(start, start + n, chunk_frames):
            yield self.dark(min(chunk_frames, start + n - first), start=first)

    def iter_frames(self, n: int, chunk_frames: int = 100,
                    start: int = 0) -> Iterator[tuple[np.ndarray, Truth]]:
        """Data frames ``start .. start + n - 1`` and their truth, in chunks.

        Parameters
        ----------
        n
            Number of frames, >= 0.
        chunk_frames
            Most frames per chunk, >= 1; only one chunk is in memory at a time.
        start
            Number of the first data frame, >= 0.

        Yields
        ------
        frames : numpy.ndarray
            ``(m, ny, nx)`` uint16 with ``m <= chunk_frames``.
        truth : Truth
            The photons of these frames.
        """
        n, start = _count("n", n), _count("start", start)
        chunk_frames = positive_int("chunk_frames", chunk_frames)
        for first in range(start, start + n, chunk_frames):
            yield self.frames(min(chunk_frames, start + n - first), start=first)


@dataclass(frozen=True, eq=False)
class SimulatedRun:
    """A simulated run held in memory: dark frames, data frames and what made them."""

    dark: np.ndarray
    frames: np.ndarray
    truth: Truth
    maps: DetectorMaps
    detector: Detector
    beam: Beam
    seed: int


def simulate_run(n_dark: int = 1000, n_frames: int = 100, seed: int | None = 0,
                 detector: Detector | None = None, beam: Beam | None = None) -> SimulatedRun:
    """Simulate ``n_dark`` dark frames and ``n_frames`` data frames in memory.

    With the default 400x400 detector each frame takes 320 kB; use
    :meth:`Simulator.iter_frames` for runs that do not fit in memory.

    Parameters
    ----------
    n_dark
        Number of dark frames (for training a pedestal), >= 0.
    n_frames
        Number of data frames, >= 0.
    seed, detector, beam
        As for :class:`Simulator`.
    """
    sim = Simulator(detector, beam, seed)
    frames, truth = sim.frames(n_frames)
    return SimulatedRun(dark=sim.dark(n_dark), frames=frames, truth=truth, maps=sim.maps,
                        detector=sim.detector, beam=sim.beam, seed=sim.seed)


__all__ = [
    "Beam", "Detector", "DetectorMaps", "Edge", "SimulatedRun", "Simulator", "Slit", "Truth",
    "simulate_run",
]
