"""Pixels of a trained pedestal that make clusters meaningless: rms 0, hot mean or rms.

A pixel with rms 0 (dead, stuck at one value, or an all-zero dark) has threshold 0, so any
rise above its mean (a drift, a common-mode offset) that tops its window is a cluster
(docs/algorithm.md): an all-zero dark gives hundreds of clusters per frame of a MÖNCH03
run, at energies of the pixels' whole counts. A hot pixel is one whose mean or rms lies
more than `HOT_ROBUST_Z` robust standard deviations (1.4826 × the median absolute
deviation, at least 1 ADU) above the median of all pixels (of `MEDIAN_SAMPLE` of them,
evenly spaced, on a larger detector): a stuck spot, or a light leak
that lit part of the dark frames. Simulated dark frames and the real JUNGFRAU dark frames
of PSI aare's test data (``tests/data/jungfrau_dark_crop.npz``) have none of them, so one
is worth a word.

`aare_lab.detector.dark.report` lists them (``aare-lab dark``), and every run of a finder warns
about them with the same words (`DarkPixelWarning`, through
`aare_lab.detector.dark.quality.DarkQuality`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOT_ROBUST_Z = 10.0
#: Pixels listed by position in a message.
LISTED = 5
#: The largest value a pixel can read (uint16 frames).
MAX_COUNT = int(np.iinfo(np.uint16).max)
#: The largest ``sqrt(cy · cx)`` of a cluster window (11x11).
MAX_WINDOW_ROOT = 11

ZERO_RMS = ("with rms 0 (dead or stuck: threshold 0, so any rise above their mean that tops "
            "their window is a cluster)")


class DarkPixelWarning(UserWarning):
    """The dark frames leave pixels with rms 0, or pixels far above the others (stuck
    spots, a light leak), or a threshold no pixel can reach."""


#: Pixels the median and its absolute deviation are taken over, at most: evenly spaced
#: over the frame, so a finder's every run pays about 1 ms rather than 10 (400x400) for
#: them, and a hot pixel stands out of 10 robust sd all the same.
MEDIAN_SAMPLE = 1 << 15


def _far_above(values: np.ndarray) -> np.ndarray:
    flat = values.ravel()
    sample = flat[::-(-flat.size // MEDIAN_SAMPLE)]
    median = np.median(sample)
    scale = max(1.4826 * float(np.median(np.abs(sample - median))), 1.0)
    return values > median + HOT_ROBUST_Z * scale


def positions(mask: np.ndarray) -> str:
    """The first `LISTED` ``(y, x)`` of ``mask``, then ``...`` if there are more."""
    ys, xs = np.nonzero(mask)
    shown = ", ".join(f"({y}, {x})" for y, x in zip(ys[:LISTED], xs[:LISTED]))
    return shown + (", ..." if len(ys) > LISTED else "")


@dataclass(frozen=True, eq=False)
class DarkPixels:
    """The pixels of a pedestal that `dark_pixels` singles out.

    Attributes
    ----------
    zero_rms, hot_mean, hot_rms
        ``(ny, nx)`` masks: rms 0; a mean, an rms far above the median.
    min_rms
        The smallest rms above 0 (ADU), NaN if there is none.
    """

    zero_rms: np.ndarray
    hot_mean: np.ndarray
    hot_rms: np.ndarray
    min_rms: float

    @property
    def n_pixels(self) -> int:
        """Pixels per frame."""
        return int(self.zero_rms.size)

    def lines(self) -> list[str]:
        """One line per kind of pixel, with its count (0 too) and the first positions."""
        far = f"far above the median (> {HOT_ROBUST_Z:g} robust sd)"
        out = []
        for mask, what in ((self.zero_rms, ZERO_RMS), (self.hot_mean, f"with a mean {far}"),
                           (self.hot_rms, f"with an rms {far}")):
            count = int(mask.sum())
            out.append(f"pixels {what}: {count} of {self.n_pixels}"
                       + (f" at (y, x) {positions(mask)}" if count else ""))
        return out

    def unreachable(self, n_sigma: float) -> bool:
        """Whether no cluster can be found at ``n_sigma``: no pixel has rms 0 and
        ``n_sigma`` times the smallest rms exceeds what a pixel (Test 1) or an 11x11 window
        of full-scale pixels (Test 3, at most ``cy · cx · 65535 = sqrt(cy · cx) · c3 ·
        65535``) can reach above the pedestal."""
        return (not self.zero_rms.any() and np.isfinite(self.min_rms)
                and n_sigma * self.min_rms > MAX_WINDOW_ROOT * MAX_COUNT)

    def warning(self, n_sigma: float) -> str | None:
        """The text of `DarkPixelWarning` at ``n_sigma``, None when nothing stands out."""
        if self.zero_rms.all():
            return ("every pixel of the dark frames has rms 0 (an all-zero or constant dark: "
                    "threshold 0, so any rise above the mean that tops its window is a "
                    "cluster, at the energy of its whole count); give dark frames recorded "
                    "by the detector, with the beam off")
        found = [line for line, mask in zip(self.lines(), (self.zero_rms, self.hot_mean,
                                                           self.hot_rms)) if mask.any()]
        texts = []
        if found:
            texts.append("dark frames: " + "; ".join(found)
                         + " (`aare-lab dark` reports the dark frames in full)")
        if self.unreachable(n_sigma):
            texts.append(f"n_sigma={n_sigma:g} times the smallest rms ({self.min_rms:.3g} ADU) "
                         f"is above anything a {MAX_COUNT}-ADU pixel can reach: no cluster "
                         "can be found; lower n_sigma (3 to 10 is usual)")
        return "; ".join(texts) if texts else None


def dark_pixels(mean: np.ndarray, rms: np.ndarray) -> DarkPixels:
    """The `DarkPixels` of a pedestal's ``mean`` and ``rms`` maps."""
    mean, rms = np.asarray(mean, np.float64), np.asarray(rms, np.float64)
    positive = rms[rms > 0]
    return DarkPixels(rms == 0, _far_above(mean), _far_above(rms),
                      float(positive.min()) if positive.size else float("nan"))


__all__ = ["HOT_ROBUST_Z", "DarkPixelWarning", "DarkPixels", "dark_pixels"]
