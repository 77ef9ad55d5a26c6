"""The simulator's JUNGFRAU mode: dynamic gain switching and raw values with gain bits.

Photons deposit charge as in `aare_lab.simulate` (``charge_kev`` per pixel). A pixel
reads in the first gain stage whose range holds its charge (G0 below
``JungfrauDetector.g1_switch_kev``, G1 below ``g2_switch_kev``, G2 above), and the raw
value of data frame ``k`` is::

    adc = clip(rint(pedestal[g] + noise[g] * N(0, 1) + gain[g] * charge_kev
                    + drift * k * (g == 0)), 0, 16383)
    raw = GAIN_BITS[g] | adc

with the signed gains of `aare_lab.detector.jungfrau` (G1 and G2 fall with charge, so a pixel beyond
G2's range reads ``0xC000``: saturated). A detector with common mode adds its offsets (per
256x256 chip by default) in every gain stage: they are offsets of the readout, in ADU.
Dark frames read G0: ``pedestal[0] + noise[0] * N(0, 1)`` (plus common mode), exactly the
dark frames `Simulator` makes of the same G0 maps. Dead pixels
collect no charge and never switch; the truth calibration (`JungfrauSimulator.calibration`)
gives them gain 0 (uncalibrated) in every stage.

Beyond `Beam`'s photons, spread uniformly, `JungfrauBeam` adds Bragg-like spots: a Poisson
number per frame, at uniform centres, each with a Poisson number of photons of log-uniform
mean and a gaussian profile. They make the few hundred G1 and tens of G2 pixels per frame
a JUNGFRAU module sees at high flux.

Reproducibility: the G0 maps are `Simulator`'s for the same seed; the G1 and G2 maps
derive from their own stream of keys; spots and noise of data frame ``k`` from its key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aare_lab.detector.jungfrau import ADC_MASK, GAIN_BITS, GAIN_STAGES, JungfrauCalibration
from aare_lab.simulate.simulator import _DARK_STREAM, _DATA_STREAM, Beam, Detector, Simulator, Truth, _number

# Separate from every stream of `aare_lab.simulate`, so its maps and frames stay as they are.
_STAGE_MAPS_STREAM = 16
_PEDESTAL_MAP, _GAIN_MAP = range(2)


@dataclass(frozen=True)
class JungfrauDetector(Detector):
    """A JUNGFRAU module; the fields of `Detector` describe G0.

    The defaults: a 512x1024 module of 75 um pixels with G0 pedestals of 2900 +- 190 ADU
    and about 24 ADU of noise (as the real dark frames in aare's test data read, common
    mode included), 40 ADU/keV in G0, -1.5 in G1 and -0.11 in G2, switching to G1 above
    250 keV (about 20 photons of 12.4 keV) and to G2 above 6000 keV; common mode, when
    switched on, per 256x256 chip.

    Parameters
    ----------
    g1_pedestal_adu, g2_pedestal_adu
        Mean pedestal of G1 and G2 over pixels, ADU within 0..16383.
    g12_pedestal_spread_adu
        Rms over pixels of the G1 and G2 pedestals.
    g1_gain_adu_per_kev, g2_gain_adu_per_kev
        Gains of G1 and G2, < 0 (`aare_lab.detector.jungfrau`); ``gain_spread`` applies to them too.
    g1_noise_adu, g2_noise_adu
        Electronic noise of G1 and G2 per frame, ADU, the same in every pixel.
    g1_switch_kev, g2_switch_kev
        Charges above which a pixel reads in G1 and in G2; G0 and G1 must not leave the
        14-bit range before they switch.
    """

    frame_shape: tuple[int, int] = (512, 1024)
    pixel_pitch_um: float = 75.0
    pedestal_mean_adu: float = 2900.0
    pedestal_spread_adu: float = 190.0
    noise_adu: float = 24.0
    noise_spread_adu: float = 5.0
    gain_adu_per_kev: float = 40.0
    g1_pedestal_adu: float = 13500.0
    g2_pedestal_adu: float = 14200.0
    g12_pedestal_spread_adu: float = 200.0
    g1_gain_adu_per_kev: float = -1.5
    g2_gain_adu_per_kev: float = -0.11
    g1_noise_adu: float = 3.0
    g2_noise_adu: float = 3.0
    g1_switch_kev: float = 250.0
    g2_switch_kev: float = 6000.0
    common_mode_regions: str = "jungfrau"

    def __post_init__(self):
        super().__post_init__()
        checks = {
            "g1_pedestal_adu": dict(low=0.0, high=float(ADC_MASK)),
            "g2_pedestal_adu": dict(low=0.0, high=float(ADC_MASK)),
            "g12_pedestal_spread_adu": dict(low=0.0),
            "g1_gain_adu_per_kev": dict(high=0.0),
            "g2_gain_adu_per_kev": dict(high=0.0),
            "g1_noise_adu": dict(low=0.0),
            "g2_noise_adu": dict(low=0.0),
            "g1_switch_kev": dict(low=0.0, low_open=True),
            "g2_switch_kev": dict(low=0.0, low_open=True),
        }
        for name, bounds in checks.items():
            object.__setattr__(self, name, _number("JungfrauDetector", name,
                                                   getattr(self, name), **bounds))
        if 0.0 in (self.g1_gain_adu_per_kev, self.g2_gain_adu_per_kev):
            raise ValueError("JungfrauDetector G1 and G2 gains must be < 0 ADU/keV")
        if self.g2_switch_kev <= self.g1_switch_kev:
            raise ValueError(f"JungfrauDetector.g2_switch_kev ({self.g2_switch_kev}) must be "
                             f"above g1_switch_kev ({self.g1_switch_kev})")
        top_g0 = self.pedestal_mean_adu + self.gain_adu_per_kev * self.g1_switch_kev
        if top_g0 > ADC_MASK:
            raise ValueError(f"JungfrauDetector: G0 reads {top_g0:.0f} ADU at the switch to "
                             f"G1, beyond the 14-bit range {ADC_MASK}; lower g1_switch_kev")
        bottom_g1 = self.g1_pedestal_adu + self.g1_gain_adu_per_kev * self.g2_switch_kev
        if bottom_g1 < 0:
            raise ValueError(f"JungfrauDetector: G1 reads {bottom_g1:.0f} ADU at the switch "
                             f"to G2, below 0; lower g2_switch_kev")


@dataclass(frozen=True)
class JungfrauBeam(Beam):
    """Illumination of a JUNGFRAU module: uniform photons plus Bragg-like spots.

    The defaults: 12.4 keV photons, 2000 spread per frame, clouds of 10 um rms (320 um
    of silicon), and 30 spots of 50 to 10000 photons with 1 pixel rms, which give about
    400 G1 and 30 G2 pixels per frame on the default module (and no saturated one).

    Parameters
    ----------
    spots_per_frame
        Mean number of spots per frame (Poisson), >= 0.
    spot_photons
        ``(low, high)``: a spot's mean photon count is log-uniform between them,
        ``0 < low <= high``; its count is Poisson around that mean.
    spot_sigma_px
        Rms of a spot's gaussian profile in pixels, >= 0.
    """

    photons_per_frame: float = 2000.0
    lines: tuple[tuple[float, float], ...] = ((12.4, 1.0),)
    charge_cloud_sigma_um: float = 10.0
    spots_per_frame: float = 30.0
    spot_photons: tuple[float, float] = (50.0, 10000.0)
    spot_sigma_px: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        for name in ("spots_per_frame", "spot_sigma_px"):
            object.__setattr__(self, name, _number("JungfrauBeam", name, getattr(self, name),
                                                   low=0.0))
        try:
            low, high = self.spot_photons
        except (TypeError, ValueError):
            raise ValueError("JungfrauBeam.spot_photons must be a pair (low, high), got "
                             f"{self.spot_photons!r}") from None
        low = _number("JungfrauBeam", "spot_photons low", low, low=0.0, low_open=True)
        high = _number("JungfrauBeam", "spot_photons high", high, low=low)
        object.__setattr__(self, "spot_photons", (low, high))


@dataclass(frozen=True, eq=False)
class GainStageMaps:
    """The per-pixel truth of every gain stage, read-only ``(3, ny, nx)`` float64 arrays
    (index 0, 1, 2: G0, G1, G2): ``pedestal`` and ``noise`` in ADU, ``gain`` in ADU/keV."""

    pedestal: np.ndarray
    noise: np.ndarray
    gain: np.ndarray


class JungfrauSimulator(Simulator):
    """Dark and data frames of a simulated JUNGFRAU module with dynamic gain switching.

    The API of `Simulator`; the frames are raw uint16 with gain bits and the truth
    calibration is `calibration`.

    Parameters
    ----------
    detector
        ``JungfrauDetector()`` if omitted.
    beam
        ``JungfrauBeam()`` if omitted.
    seed
        As for `Simulator`.

    Examples
    --------
    >>> sim = JungfrauSimulator(JungfrauDetector(frame_shape=(32, 64)),
    ...                         JungfrauBeam(photons_per_frame=10, spots_per_frame=2), seed=1)
    >>> frames, truth = sim.frames(3)
    >>> frames.dtype, sim.calibration.frame_shape
    (dtype('uint16'), (32, 64))
    >>> energy, flags = sim.calibration.convert(frames)
    >>> bool((flags == 0).all())
    True
    """

    def __init__(self, detector: JungfrauDetector | None = None,
                 beam: JungfrauBeam | None = None, seed: int | None = 0):
        detector = JungfrauDetector() if detector is None else detector
        beam = JungfrauBeam() if beam is None else beam
        if not isinstance(detector, JungfrauDetector):
            raise ValueError(f"detector must be a JungfrauDetector, got {type(detector).__name__}")
        if not isinstance(beam, JungfrauBeam):
            raise ValueError(f"beam must be a JungfrauBeam, got {type(beam).__name__}")
        super().__init__(detector, beam, seed)
        self._stage_maps = self._make_stage_maps()
        self._calibration = JungfrauCalibration(pedestal=self._stage_maps.pedestal,
                                                gain=self._stage_maps.gain)

    @property
    def stage_maps(self) -> GainStageMaps:
        """Pedestal, noise and gain of every gain stage per pixel."""
        return self._stage_maps

    @property
    def calibration(self) -> JungfrauCalibration:
        """The truth: the calibration the frames were made with."""
        return self._calibration

    def _make_stage_maps(self) -> GainStageMaps:
        det, g0 = self._detector, self._maps
        shape = det.frame_shape
        pedestal, noise, gain = (np.empty((len(GAIN_STAGES), *shape)) for _ in range(3))
        pedestal[0], noise[0], gain[0] = g0.pedestal, g0.noise, g0.gain
        for stage, (ped, g, sigma) in enumerate(
                [(det.g1_pedestal_adu, det.g1_gain_adu_per_kev, det.g1_noise_adu),
                 (det.g2_pedestal_adu, det.g2_gain_adu_per_kev, det.g2_noise_adu)], start=1):
            normal = [self._rng(_STAGE_MAPS_STREAM, (stage - 1) * 2 + key)
                      .standard_normal(shape) for key in (_PEDESTAL_MAP, _GAIN_MAP)]
            pedestal[stage] = np.clip(ped + det.g12_pedestal_spread_adu * normal[0],
                                      0.0, ADC_MASK)
            noise[stage] = sigma
            # The gain keeps its sign: a spread never turns G1 or G2 positive.
            gain[stage] = np.minimum(g * (1.0 + det.gain_spread * normal[1]), 0.0)
        noise[:, g0.dead] = 0.0
        gain[:, g0.dead] = 0.0
        for array in (pedestal, noise, gain):
            array.setflags(write=False)
        return GainStageMaps(pedestal=pedestal, noise=noise, gain=gain)

    def _render_raw(self, rng: np.random.Generator, out: np.ndarray,
                    charge_kev: np.ndarray | None = None, g0_offset_adu: float = 0.0,
                    common_adu: np.ndarray | None = None) -> None:
        det, maps = self._detector, self._stage_maps
        ny, nx = det.frame_shape
        level = rng.standard_normal((ny, nx))
        if charge_kev is None:
            stage = np.zeros((ny, nx), np.intp)
        else:
            stage = (charge_kev >= det.g1_switch_kev).astype(np.intp)
            stage += charge_kev >= det.g2_switch_kev
        rows, cols = np.arange(ny)[:, None], np.arange(nx)[None, :]
        level *= maps.noise[stage, rows, cols]
        level += maps.pedestal[stage, rows, cols]
        if g0_offset_adu:
            level[stage == 0] += g0_offset_adu
        if common_adu is not None:
            level += common_adu[self._common_labels]
        if charge_kev is not None:
            level += maps.gain[stage, rows, cols] * charge_kev
        np.rint(level, out=level)
        np.clip(level, 0, ADC_MASK, out=level)
        out[...] = level.astype(np.uint16) | GAIN_BITS[stage]

    def _spot_photons(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Positions ``y, x`` of the spot photons of a frame that land on the sensor."""
        beam = self._beam
        ny, nx = self._detector.frame_shape
        n_spots = int(rng.poisson(beam.spots_per_frame))
        centre_y = rng.random(n_spots) * ny
        centre_x = rng.random(n_spots) * nx
        low, high = beam.spot_photons
        mean = np.exp(rng.uniform(math.log(low), math.log(high), n_spots))
        counts = rng.poisson(mean)
        y = np.repeat(centre_y, counts) + beam.spot_sigma_px * rng.standard_normal(counts.sum())
        x = np.repeat(centre_x, counts) + beam.spot_sigma_px * rng.standard_normal(counts.sum())
        inside = (y >= 0) & (y < ny) & (x >= 0) & (x < nx)
        return y[inside], x[inside]

    def _data_frame(self, k: int, out: np.ndarray) -> Truth:
        rng = self._rng(_DATA_STREAM, k)
        beam = self._beam
        ny, nx = self._detector.frame_shape
        n = int(rng.poisson(beam.photons_per_frame))
        iy = rng.integers(0, ny, n)
        ix = rng.integers(0, nx, n)
        fy = rng.random(n)
        fx = rng.random(n)
        spot_y, spot_x = self._spot_photons(rng)
        spot_iy, spot_ix = np.floor(spot_y).astype(np.int64), np.floor(spot_x).astype(np.int64)
        iy, ix = np.concatenate([iy, spot_iy]), np.concatenate([ix, spot_ix])
        fy, fx = np.concatenate([fy, spot_y - spot_iy]), np.concatenate([fx, spot_x - spot_ix])
        line = rng.choice(len(beam.lines), size=len(iy), p=beam.line_probabilities)
        energy_kev = beam.line_energies_kev[line]
        charge = self._charge_kev(iy, ix, fy, fx, energy_kev)
        charge[self._maps.dead] = 0.0
        self._render_raw(rng, out, charge, beam.pedestal_drift_adu_per_frame * k,
                         self.common_mode_offsets("data", k))
        return Truth(frame=np.full(len(iy), k), y=iy + fy, x=ix + fx, energy_kev=energy_kev,
                     line=line)

    def _dark_frame(self, k: int, out: np.ndarray) -> None:
        # G0 only: no charge, so every pixel reads gain bits 00.
        self._render_raw(self._rng(_DARK_STREAM, k), out,
                         common_adu=self.common_mode_offsets("dark", k))


__all__ = ["GainStageMaps", "JungfrauBeam", "JungfrauDetector", "JungfrauSimulator"]
