"""Photon hits in dark frames: dark frames taken with the beam on (open shutter, wrong file).

Photons in the dark frames raise the pedestal mean of the pixels they hit and inflate their
rms, so the finder then thresholds higher (missing photons) and subtracts a pedestal too
high (misreading energies), silently. The pedestal's own mean and rms cannot show it, since
the photons are in them; this check uses per-pixel statistics that photons hardly move.

Over a sample of the dark frames (`SAMPLE_FRAMES`, spread evenly over the run), each pixel
has a centre, the median of its values, and a spread, ``1.4826 (MAD + 0.5 ADU)`` (the
median absolute deviation from the centre, scaled to the rms of Gaussian noise), at least
half the median spread of all pixels. A *hit* is a sampled value more than `K_SPREADS`
spreads above its pixel's centre, once the frame's own offset (the median over its pixels
of the value less the centre) is taken away; a *dip* is the same test below the centre.
Photons only add charge, so they give hits and no dips, while symmetric noise and artefacts
give as many of each: the dips show what the hits owe to them.

- Why 0.5 ADU: integer values have integer deviations, and their median can fall up to
  half an ADU short (at 5 ADU of noise, 15 % low), shrinking the threshold with it.
- Why the floor: few frames estimate a pixel's spread poorly (from 9 frames, 1 % of the
  real JUNGFRAU pixels of PSI aare's test data, below, get a quarter of the median, 10 % a
  half), and a pixel whose few values happened to agree would read its noise as
  hits. A pixel truly that quiet only loses some sensitivity.
- Why the frame offset: common mode moves whole frames, by up to about 30 ADU in those
  JUNGFRAU dark frames, which reads as hits in every quiet pixel.
- Why 10 spreads: with a perfectly known centre and noise, Gaussian noise exceeds it with
  probability ``Q(10) = 7.6e-24``, i.e. 1e-15 false hits in 1000 frames of 400x400 pixels.
  Estimated from the sample, the low tail of the spread estimates dominates: a Monte Carlo of
  Gaussian noise of 5 and 24 ADU (rounded to whole ADU, a 10 % spread of the noise over
  pixels) gives at most 3e-5 false hits in those 1.6e8 values from 101 frames, 9 from 21
  frames and about 500 from 9 (a dark run of 10 frames; its 9 sampled frames' own values
  hold fewer, about 1 in 1e6, far below the rule below). Yet 10 spreads are low enough: an
  8 keV photon on a MÖNCH (320 ADU at 40 ADU/keV, noise 5 ADU, 10 spreads 58 ADU) gives a
  hit in at least one pixel even when its charge splits four ways.

`DarkPhotons.illuminated`, and with it `IlluminatedDarkWarning`, needs hits above the dips
by `MIN_HITS_PER_FRAME` (5) per frame, two or three photons a frame, which over 1000 dark
frames reach a few percent of a 400x400 detector's pedestals; and by `SIGNIFICANCE` (5)
standard deviations of their difference (``sqrt(hits + dips)``, counting as Poisson
events), so that a few hits in a sparse sample are not scaled up to a verdict. Simulated
dark frames give none. The real JUNGFRAU dark frames of PSI aare's test data (the two runs
``jungfrau_single_master_0.json`` and ``jungfrau_double_master_0.json`` in the ``data/``
folder of github.com/slsdetectorgroup/aare, MPL-2.0, 10 frames of 512x1024 each; a crop of
them is ``tests/data/jungfrau_dark_crop.npz``) give 2 hits in their 9 sampled frames (one
row in 16), 3.6 a frame, far from significant; every row tested, 17 and 12 against 3 and 0
dips, 1.9 and 1.3 a frame: pixels at the module's edges in the first frame of each run.

Cost: the sample is whole ``uint16`` values (an odd number of frames, so that each median is
one of the values), whose medians NumPy takes about ten times faster than those of floats,
and frames of more than `MAX_SAMPLE_PIXELS` pixels are sampled one row in a few (400x400:
one in 5), which bounds the sample at 101 x 2**15 values (6.6 MB) and its cost at about
0.02-0.03 s, whatever the detector, against 0.18-0.26 s for training on 1000 dark frames of
400x400 from a .npy file (two cores, one busy elsewhere). Sparse photons are found in
proportion to the rows sampled, which the numbers per frame scale back; a run lit in only
a few frames between the sampled ones (every 9th of 1000) can be missed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Dark frames sampled at most (odd: each median is then one of the values).
SAMPLE_FRAMES = 101
#: Fewer sampled frames give no robust centre: the check is skipped.
MIN_SAMPLE_FRAMES = 5
#: Pixels sampled per frame at most; larger frames are sampled every few rows.
MAX_SAMPLE_PIXELS = 2**15
#: A hit lies this many robust spreads above its pixel's centre (see the module).
K_SPREADS = 10.0
#: Hits above the dips per frame (the whole frame) that make dark frames illuminated...
MIN_HITS_PER_FRAME = 5.0
#: ...when that excess is also this many times ``sqrt(hits + dips)`` of the sample.
SIGNIFICANCE = 5.0
# The MAD of Gaussian noise is 0.6745 of its rms.
MAD_TO_RMS = 1.4826
# Pixels each frame's offset is taken from, about (every few of the sample): the median
# of 2000 noise values is off by 3 % of the noise, and more would cost more than the rest.
OFFSET_PIXELS = 2000


class IlluminatedDarkWarning(UserWarning):
    """Dark frames hold photon hits: the pedestal took photons into its mean and rms."""


@dataclass(frozen=True)
class DarkPhotons:
    """What the photon check found in a sample of a pedestal's dark frames.

    Attributes
    ----------
    dark_frames
        Dark frames the sample was drawn from.
    sampled_frames
        Frames in the sample.
    row_step
        Every ``row_step``-th row of a frame was sampled.
    n_pixels
        Pixels per frame.
    sampled_pixels
        Pixels per sampled frame.
    hits, dips
        Sampled values more than `K_SPREADS` spreads above, below their pixel's centre.
    frames_with_hits
        Sampled frames with at least one hit.
    pixels_with_hits
        Sampled pixels with a hit in at least one sampled frame.
    """

    dark_frames: int
    sampled_frames: int
    row_step: int
    n_pixels: int
    sampled_pixels: int
    hits: int
    dips: int
    frames_with_hits: int
    pixels_with_hits: int

    def _per_frame(self, count: int) -> float:
        return count / self.sampled_frames * self.n_pixels / self.sampled_pixels

    @property
    def hits_per_frame(self) -> float:
        """Hits per frame, for the whole frame."""
        return self._per_frame(self.hits)

    @property
    def dips_per_frame(self) -> float:
        """Dips per frame, for the whole frame: what noise and artefacts give as hits too."""
        return self._per_frame(self.dips)

    @property
    def frames_with_hits_fraction(self) -> float:
        """The fraction of the sampled frames with at least one hit."""
        return self.frames_with_hits / self.sampled_frames

    @property
    def illuminated(self) -> bool:
        """Whether hits exceed dips by `MIN_HITS_PER_FRAME` per frame and by
        `SIGNIFICANCE` standard deviations: photons."""
        excess = self.hits - self.dips
        return (self._per_frame(excess) >= MIN_HITS_PER_FRAME
                and excess >= SIGNIFICANCE * math.sqrt(self.hits + self.dips))

    @property
    def attrs(self) -> dict:
        """The numbers as netCDF attributes: ``dark_photon_hits_per_frame``,
        ``dark_photon_dips_per_frame``, ``dark_photon_frames_with_hits`` (a fraction) and
        ``dark_photon_sampled_frames``."""
        return {"dark_photon_hits_per_frame": self.hits_per_frame,
                "dark_photon_dips_per_frame": self.dips_per_frame,
                "dark_photon_frames_with_hits": self.frames_with_hits_fraction,
                "dark_photon_sampled_frames": self.sampled_frames}

    def _sample_text(self) -> str:
        text = f"{self.sampled_frames} sampled frames"
        if self.dark_frames > self.sampled_frames:
            text += f" of {self.dark_frames}"
        return text + (f" (one row in {self.row_step})" if self.row_step > 1 else "")

    def summary(self) -> str:
        """One sentence: the hits, the dips, the frames and pixels with hits, the verdict."""
        verdict = ("the dark frames held photons" if self.illuminated
                   else "no sign of photons")
        return (f"photon hits in the dark frames: {self.hits_per_frame:.3g} pixels per frame "
                f"more than {K_SPREADS:g} robust sd above their median against "
                f"{self.dips_per_frame:.3g} below it (noise alone gives as many of each); in "
                f"{self.frames_with_hits} of {self._sample_text()}, at "
                f"{self.pixels_with_hits} of {self.sampled_pixels} sampled pixels: {verdict}")

    def warning(self, what: str) -> str | None:
        """The text of an `IlluminatedDarkWarning` naming the dark frames ``what`` (a file),
        or None if not `illuminated` (training warns it, or hands it to a widget to show)."""
        return f"{what}: {self.summary()}. {ILLUMINATED_REMEDY}" if self.illuminated else None


#: What an `IlluminatedDarkWarning` says after the numbers: why it matters and what to do.
ILLUMINATED_REMEDY = (
    "Their photons are in the pedestal: it is too high and its rms inflated where they hit, "
    "so the finder misses photons there and misreads energies. Take dark frames with the "
    "beam off (shutter closed) and train on those. If the photons are meant to be there (a "
    "constant background the data share), the pedestal carries them as they are: go on "
    "(a warning stops nothing; in Python, warnings.filterwarnings('ignore', "
    "category=aare_lab.IlluminatedDarkWarning) silences it)")


def count_hits(frames: np.ndarray) -> tuple[int, int, int, int]:
    """Hits, dips, frames with hits and pixels with hits of a stack of dark frames.

    Parameters
    ----------
    frames
        ``uint16`` frames ``(m, ny, nx)``, ``m`` odd: the sample the centres and spreads
        are taken from and tested.

    Examples
    --------
    >>> frames = np.random.default_rng(0).normal(1000, 5, (11, 20, 30)).round()
    >>> frames[3, 4, 5] += 100                          # one photon
    >>> count_hits(frames.astype(np.uint16))
    (1, 0, 1, 1)
    """
    centre, spread = _centre_and_spread(frames)
    upper = (centre + K_SPREADS * spread).astype(np.float32)
    lower = (centre - K_SPREADS * spread).astype(np.float32)
    offsets = _frame_offsets(frames, centre)
    hit_pixels = np.zeros(centre.shape, bool)
    hits = dips = frames_with_hits = 0
    for frame, offset in zip(frames, offsets):
        above = frame > upper + offset
        n_above = int(np.count_nonzero(above))
        hits += n_above
        frames_with_hits += n_above > 0
        hit_pixels |= above
        dips += int(np.count_nonzero(frame < lower + offset))
    return hits, dips, frames_with_hits, int(np.count_nonzero(hit_pixels))


def _centre_and_spread(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # An odd count: the medians are values of the stack, so the deviations stay uint16.
    centre = np.median(frames, axis=0).astype(frames.dtype)
    deviation = np.maximum(frames, centre) - np.minimum(frames, centre)
    spread = MAD_TO_RMS * (np.median(deviation, axis=0) + 0.5)
    return centre, np.maximum(spread, 0.5 * np.median(spread))


def _frame_offsets(frames: np.ndarray, centre: np.ndarray) -> np.ndarray:
    m = len(frames)
    step = max(1, centre.size // OFFSET_PIXELS)
    some = frames.reshape(m, -1)[:, ::step].astype(np.float32) - centre.reshape(-1)[::step]
    return np.median(some, axis=1).astype(np.float32)


class DarkPhotonSample:
    """Dark frames sampled chunk by chunk as they train a pedestal, then checked for photons.

    Parameters
    ----------
    frame_shape
        ``(ny, nx)`` of the frames.
    n_frames
        The dark frames that will be added, when known: the sample then spreads over them
        all; else it is the first `SAMPLE_FRAMES`.

    Examples
    --------
    >>> sample = DarkPhotonSample((20, 30), 40)
    >>> dark = np.random.default_rng(1).normal(1000, 5, (40, 20, 30)).round().astype("uint16")
    >>> sample.add(dark)
    >>> photons = sample.result()
    >>> photons.sampled_frames, photons.hits, photons.illuminated
    (39, 0, False)
    """

    def __init__(self, frame_shape: tuple[int, int], n_frames: int | None = None):
        ny, nx = frame_shape
        self.frame_shape = (ny, nx)
        self.n_frames = n_frames
        self.row_step = math.ceil(ny * nx / MAX_SAMPLE_PIXELS)
        limit = SAMPLE_FRAMES if n_frames is None else min(SAMPLE_FRAMES, n_frames)
        self._stride = 1 if n_frames is None else max(1, n_frames // max(limit, 1))
        self._sample = np.empty((limit, len(range(0, ny, self.row_step)), nx), np.uint16)
        self._taken = self._seen = 0

    def add(self, frames: np.ndarray) -> None:
        """Take the frames of the sample among the next dark frames ``(n, ny, nx)``."""
        first = -self._seen % self._stride
        for frame in frames[first::self._stride]:
            if self._taken == len(self._sample):
                break
            self._sample[self._taken] = frame[::self.row_step]
            self._taken += 1
        self._seen += len(frames)

    def result(self) -> DarkPhotons | None:
        """What the sample holds (`DarkPhotons`); None with fewer than `MIN_SAMPLE_FRAMES`."""
        m = self._taken - (1 - self._taken % 2)
        if m < MIN_SAMPLE_FRAMES:
            return None
        sample = self._sample[:m]
        ny, nx = self.frame_shape
        return DarkPhotons(self._seen, m, self.row_step, ny * nx, sample[0].size,
                           *count_hits(sample))


__all__ = [
    "K_SPREADS",
    "MIN_HITS_PER_FRAME",
    "MIN_SAMPLE_FRAMES",
    "SIGNIFICANCE",
    "SAMPLE_FRAMES",
    "DarkPhotonSample",
    "DarkPhotons",
    "IlluminatedDarkWarning",
    "count_hits",
]
