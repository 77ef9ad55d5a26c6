"""How much the noise estimated from few dark frames raises the false-cluster rate.

A trained pedestal knows each pixel's mean and rms only from its dark frames. For pure
Gaussian noise of true rms σ, ``k`` equally weighted dark frames give a sample mean with
error of rms σ/√k and a sample rms ``r`` (the pedestal divides by ``k``) with
``k r² / σ² ~ χ²(k − 1)``, independent of the mean; its relative spread is about
``1 / sqrt(2 (k − 1))``. A new dark value ``x`` crosses the threshold when
``x − mean > n r``. Since ``x − mean`` is normal with variance ``σ² (1 + 1/k)`` and
independent of ``r``, the statistic ``(x − mean) / (r sqrt(k / (k − 1)) sqrt(1 + 1/k))`` is
Student-t with ``k − 1`` degrees of freedom, so a noise value crosses with probability

    p(k, n) = T_{k−1}.sf(n sqrt((k − 1) / (k + 1)))

against ``Q(n) = Φ(−n)`` for a perfectly known pedestal. Their ratio, `false_rate_factor`,
is the expected rise of the false-cluster rate: the average of the Gaussian tail over the
distribution of the estimates, ``E[Q((n r − δ) / σ)] / Q(n)``. It depends on ``k`` and
``n`` only, not on σ, so it holds for every pixel alike. Test 3 of the decision
(docs/algorithm.md) compares a window sum whose rms is ``sqrt(cy cx) σ`` with
``sqrt(cy cx) n r``, so it rises by the same factor.

Dark frames pushed after training move the state as an exponential moving average over
``N = n_pedestal``, so the frames weigh unequally (weights ``w``, ``Σ w = 1``). The mean's
error then has variance ``σ² Σ w²``; the rms is the weighted one, with
``E[r²] = σ² (1 − Σ w²)``, and is taken as a scaled χ² with the Satterthwaite degrees of
freedom ``ν = (1 − Σw²)² / (Σw² − 2 Σw³ + (Σw²)²)`` (``k − 1`` for equal weights). With
``noise="fixed"`` the rms keeps the training frames' equal weights. `estimate_spread`
computes these; `crossing_probability` is then ``T_ν.sf(n sqrt((1 − Σw²_rms) / (1 +
Σw²_mean)))``, exact for training alone and with fixed noise, a slight overestimate of the
tail for an EMA-updated running rms.

Clusters follow crossings one for one while crossings are sparse (a few per window at
most): there the measured rise of clusters per frame is the factor. When the estimate is
so poor that a good part of all pixels cross (3 dark frames: 3.6 % at 5σ), a crossing
pixel's value is often not its window's maximum and crossings merge, so clusters rise
less (about half the factor for 3 frames, tests/test_dark_quality.py); the warning is then
certain anyway. The model describes the pedestal as the dark frames left it, the state of
the first data frame: quiet data values move it on (towards ``2N − 1`` frames' worth). It
ignores ADC quantisation (the noise must be well above 1 ADU) and dead pixels (rms 0,
which `aare_lab.detector.dark.pixels` singles out).

A result records `DarkQuality.attrs`; `DarkFrameWarning` says when the rise is noticeable:
by more than `RATE_RISE` (20 %) and by at least `MIN_EXTRA_PER_FRAME` (0.1) expected noise
crossings per frame, i.e. one extra false cluster every ten frames. Both must hold: at 2σ
a 5 % rise is hundreds of clusters per frame but not a change of rate, and at 5σ a
doubling of 0.05 false clusters per frame is invisible.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

from scipy.special import ndtr, stdtr

from aare_lab.detector.dark.pixels import DarkPixels, DarkPixelWarning, dark_pixels
from aare_lab.detector.pedestal import Pedestal

#: Warn when the expected noise-crossing rate exceeds the ideal by more than this fraction...
RATE_RISE = 0.2
#: ...and by at least this many expected crossings per frame.
MIN_EXTRA_PER_FRAME = 0.1
#: The most dark frames `dark_frames_needed` searches.
MAX_DARK_FRAMES = 10**7


class DarkFrameWarning(UserWarning):
    """Too few dark frames: the noise estimate raises the false-cluster rate noticeably."""


class EstimateSpread(NamedTuple):
    """How well a pedestal knows each pixel, relative to the true noise σ.

    Attributes
    ----------
    mean_var
        ``Σ w²`` of the mean's weights: its error has variance ``σ² mean_var``.
    rms_sq
        ``Σ w²`` of the rms's weights: ``E[r²] = σ² (1 − rms_sq)``.
    dof
        The degrees of freedom of the rms estimate (``k − 1`` for ``k`` equal weights).
    """

    mean_var: float
    rms_sq: float
    dof: float

    @classmethod
    def equal(cls, frames: int) -> EstimateSpread:
        """The spread of a pedestal trained on ``frames`` frames and nothing more."""
        return cls(1.0 / frames, 1.0 / frames, frames - 1.0)

    @property
    def effective_frames(self) -> float:
        """The equally weighted frames the rms estimate is worth (Kish, ``1 / Σ w²``)."""
        return 1.0 / self.rms_sq

    @property
    def rms_relative_uncertainty(self) -> float:
        """The relative rms of a pixel's noise estimate, ``1 / sqrt(2 ν)``."""
        return 1.0 / math.sqrt(2.0 * self.dof) if self.dof > 0 else math.inf


def _ema_sums(n_frames: int, n_pedestal: int) -> tuple[float, float]:
    """``Σ w²`` and ``Σ w³`` of the weights of ``n_frames`` dark frames in the state.

    Training weighs its ``N`` frames ``1/N`` each; each of the ``m = n_frames − N`` frames
    pushed afterwards enters with ``1/N`` and shrinks every older weight by ``1 − 1/N``.
    """
    alpha, m = 1.0 / n_pedestal, n_frames - n_pedestal
    keep = (1.0 - alpha) ** m

    def power_sum(p: int) -> float:
        ema = 0.0 if m == 0 else alpha**p * (1.0 - (1.0 - alpha) ** (p * m)) / (
            1.0 - (1.0 - alpha) ** p)
        return keep**p / n_pedestal ** (p - 1) + ema
    return power_sum(2), power_sum(3)


def estimate_spread(n_frames: int, n_pedestal: int, noise: str = "running") -> EstimateSpread:
    """The `EstimateSpread` of a pedestal after ``n_frames`` dark frames.

    Examples
    --------
    >>> EstimateSpread.equal(100) == estimate_spread(100, 100)
    True
    >>> round(estimate_spread(10**5, 100).effective_frames, 3)   # a long EMA: 2N - 1
    199.0
    >>> estimate_spread(10**5, 100, "fixed").dof                 # the rms of training
    99.0
    """
    s2, s3 = _ema_sums(n_frames, n_pedestal)
    if noise == "fixed":
        return EstimateSpread(s2, 1.0 / n_pedestal, n_pedestal - 1.0)
    spread = s2 - 2.0 * s3 + s2 * s2
    # N = 1 keeps only the last frame: the rms is 0 and has no degrees of freedom.
    return EstimateSpread(s2, s2, (1.0 - s2) ** 2 / spread if spread > 0 else 0.0)


def crossing_probability(n_sigma: float, spread: EstimateSpread | None = None) -> float:
    """The probability that a noise value crosses ``n_sigma`` times the estimated rms.

    Parameters
    ----------
    n_sigma
        The threshold in units of the estimated rms.
    spread
        The pedestal's `EstimateSpread`; None for a perfectly known pedestal, which gives
        ``Q(n_sigma)``.

    Examples
    --------
    >>> round(crossing_probability(5.0, EstimateSpread.equal(3)), 4)   # vs Q(5) = 2.9e-07
    0.0358
    """
    if spread is None:
        return float(ndtr(-n_sigma))
    if spread.dof <= 0:
        return 0.5  # one frame: rms 0, so every value above the mean crosses
    t = n_sigma * math.sqrt((1.0 - spread.rms_sq) / (1.0 + spread.mean_var))
    return float(stdtr(spread.dof, -t))


def false_rate_factor(n_sigma: float, spread: EstimateSpread) -> float:
    """`crossing_probability` over its value for a perfectly known pedestal.

    Examples
    --------
    >>> [round(false_rate_factor(5.0, EstimateSpread.equal(k)), 2) for k in (200, 1000)]
    [2.45, 1.21]
    """
    ideal = crossing_probability(n_sigma)
    return crossing_probability(n_sigma, spread) / ideal if ideal > 0 else math.inf


def _noticeable(n_sigma: float, spread: EstimateSpread, n_pixels: int) -> bool:
    factor = false_rate_factor(n_sigma, spread)
    extra = (factor - 1.0) * crossing_probability(n_sigma) * n_pixels
    return factor > 1.0 + RATE_RISE and extra >= MIN_EXTRA_PER_FRAME


def dark_frames_needed(n_sigma: float, n_pixels: int) -> int:
    """The fewest training frames whose noise estimate does not raise the rate noticeably.

    Raises
    ------
    ValueError
        If even `MAX_DARK_FRAMES` are not enough (an absurd ``n_sigma``).
    """
    def noticeable(frames: int) -> bool:
        return _noticeable(n_sigma, EstimateSpread.equal(frames), n_pixels)

    if noticeable(MAX_DARK_FRAMES):
        raise ValueError(f"more than {MAX_DARK_FRAMES} dark frames would be needed at "
                         f"n_sigma={n_sigma}")
    low, high = 1, MAX_DARK_FRAMES  # the answer is in (low, high] unless low will do
    if not noticeable(low):
        return low
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if noticeable(mid) else (low, mid)
    return high


@dataclass(frozen=True)
class DarkQuality:
    """What the dark frames behind a pedestal mean for the false-cluster rate at nσ.

    Attributes
    ----------
    n_sigma
        The threshold assessed.
    dark_frames
        Dark frames pushed into the pedestal.
    n_pedestal
        The pedestal window N.
    spread
        The pedestal's `EstimateSpread`.
    n_pixels
        Pixels per frame.
    pixels
        The pedestal's pixels with rms 0 or far above the others
        (`aare_lab.detector.dark.pixels.DarkPixels`); None when not looked at.
    frames_skipped
        Dark frames left out at the start of their acquisitions before training
        (`aare_lab.Pedestal.dark_frames_skipped`).
    """

    n_sigma: float
    dark_frames: int
    n_pedestal: int
    spread: EstimateSpread
    n_pixels: int
    pixels: DarkPixels | None = field(default=None, compare=False, repr=False)
    frames_skipped: int = 0

    @property
    def false_rate_factor(self) -> float:
        """The expected rise of the noise-crossing (false-cluster) rate, see the module."""
        return false_rate_factor(self.n_sigma, self.spread)

    @property
    def ideal_per_frame(self) -> float:
        """Expected noise crossings per frame with a perfectly known pedestal."""
        return crossing_probability(self.n_sigma) * self.n_pixels

    @property
    def expected_per_frame(self) -> float:
        """Expected noise crossings per frame with this pedestal."""
        return crossing_probability(self.n_sigma, self.spread) * self.n_pixels

    @property
    def noticeable(self) -> bool:
        """Whether the rise exceeds `RATE_RISE` and `MIN_EXTRA_PER_FRAME` (a warning)."""
        return _noticeable(self.n_sigma, self.spread, self.n_pixels)

    @property
    def frames_needed(self) -> int:
        """The fewest dark frames (training, ``n_pedestal``) without a noticeable rise."""
        return dark_frames_needed(self.n_sigma, self.n_pixels)

    @property
    def attrs(self) -> dict:
        """The result attributes: ``dark_frames``, ``dark_effective_frames`` (of the rms),
        ``dark_rms_relative_uncertainty`` and ``dark_expected_false_rate_factor``; and
        ``dark_frames_skipped`` when some were skipped."""
        return {"dark_frames": self.dark_frames,
                "dark_effective_frames": self.spread.effective_frames,
                "dark_rms_relative_uncertainty": self.spread.rms_relative_uncertainty,
                "dark_expected_false_rate_factor": self.false_rate_factor,
                **({"dark_frames_skipped": self.frames_skipped} if self.frames_skipped
                   else {})}

    def summary(self) -> str:
        """One sentence: the uncertainty, the rise, and the dark frames that would do."""
        text = (f"the noise estimated from {self.dark_frames} dark frames "
                f"(n_pedestal={self.n_pedestal}) is uncertain by "
                f"{100 * self.spread.rms_relative_uncertainty:.2g} % per pixel, which raises "
                f"the expected noise clusters at {self.n_sigma:g} sigma "
                f"{self.false_rate_factor:.3g} times: {self.expected_per_frame:.3g} instead "
                f"of {self.ideal_per_frame:.2g} per frame of {self.n_pixels} pixels")
        if self.noticeable:
            text += (f"; train the pedestal on at least {self.frames_needed} dark frames to "
                     f"keep the rise within {100 * RATE_RISE:.0f} % or "
                     f"{MIN_EXTRA_PER_FRAME} per frame")
        return text

    @property
    def pixel_warning(self) -> str | None:
        """The text of `warn`'s `aare_lab.detector.dark.pixels.DarkPixelWarning`, None when no pixel
        stands out (`aare_lab.detector.dark.pixels.DarkPixels.warning`)."""
        return None if self.pixels is None else self.pixels.warning(self.n_sigma)

    @property
    def warning(self) -> str | None:
        """The texts of `warn`'s warnings (the `summary` when the rise is `noticeable`, and
        the `pixel_warning`), None when there are none: for a caller that shows them
        rather than warns (a widget)."""
        texts = [text for text in (self.summary() if self.noticeable else None,
                                   self.pixel_warning) if text is not None]
        return "; ".join(texts) if texts else None

    def warn(self, stacklevel: int = 2) -> None:
        """Issue `DarkFrameWarning` if the rise is `noticeable`, and
        `aare_lab.detector.dark.pixels.DarkPixelWarning` for the `pixel_warning`."""
        if self.noticeable:
            warnings.warn(self.summary(), DarkFrameWarning, stacklevel=stacklevel + 1)
        if (message := self.pixel_warning) is not None:
            warnings.warn(message, DarkPixelWarning, stacklevel=stacklevel + 1)


def assess_dark(pedestal: Pedestal, n_sigma: float) -> DarkQuality:
    """The `DarkQuality` of a trained pedestal at threshold ``n_sigma``, its pixels
    looked at (`aare_lab.detector.dark.pixels.dark_pixels`).

    Examples
    --------
    >>> import numpy as np
    >>> ped = Pedestal((400, 400), n_pedestal=3)
    >>> ped.push_dark(np.random.default_rng(0).normal(1000, 5, (3, 400, 400)).astype("uint16"))
    >>> quality = assess_dark(ped, 5.0)
    >>> quality.noticeable, quality.frames_needed
    (True, 152)
    """
    pedestal.require_ready()
    ny, nx = pedestal.frame_shape
    spread = estimate_spread(pedestal.n_frames, pedestal.n_pedestal, pedestal.noise)
    return DarkQuality(float(n_sigma), pedestal.n_frames, pedestal.n_pedestal, spread,
                       ny * nx, dark_pixels(pedestal.mean, pedestal.rms),
                       pedestal.dark_frames_skipped)


__all__ = [
    "MIN_EXTRA_PER_FRAME",
    "RATE_RISE",
    "DarkFrameWarning",
    "DarkQuality",
    "EstimateSpread",
    "assess_dark",
    "crossing_probability",
    "dark_frames_needed",
    "estimate_spread",
    "false_rate_factor",
]
