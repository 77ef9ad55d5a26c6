"""Peak fits on spectra: a gaussian on a linear background."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import curve_fit

FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))


def gaussian_on_line(x, amplitude, centre, sigma, offset, slope):
    """``amplitude * exp(-(x - centre)² / 2σ²) + offset + slope * (x - centre)``."""
    return amplitude * np.exp(-0.5 * ((x - centre) / sigma) ** 2) + offset + slope * (x - centre)


def value_and_error(value: float, error: float) -> str:
    """``value ± error`` to the decimal of the error's second significant digit.

    Examples
    --------
    >>> value_and_error(8.12204, 0.00137), value_and_error(322.46, 12.3)
    ('8.1220 ± 0.0014', '322 ± 12')
    """
    if not (np.isfinite(error) and error > 0):
        return f"{value:.4g} ± {error:.2g}"
    decimals = max(0, 1 - int(np.floor(np.log10(error))))
    return f"{value:.{decimals}f} ± {error:.{decimals}f}"


@dataclass(frozen=True)
class PeakFit:
    """Result of `fit_peak`; positions and widths in the units of the spectrum's axis."""

    position: float
    position_err: float
    sigma: float
    sigma_err: float
    amplitude: float
    offset: float
    slope: float
    window: tuple[float, float]

    @property
    def fwhm(self) -> float:
        """Full width at half maximum."""
        return FWHM_PER_SIGMA * self.sigma

    @property
    def fwhm_err(self) -> float:
        """Uncertainty of the FWHM."""
        return FWHM_PER_SIGMA * self.sigma_err

    @property
    def resolution(self) -> float:
        """Relative energy resolution FWHM / position."""
        return self.fwhm / self.position

    @property
    def resolution_err(self) -> float:
        """Uncertainty of the relative resolution (first order)."""
        return self.resolution * np.hypot(self.fwhm_err / self.fwhm,
                                          self.position_err / self.position)

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """The fitted curve at ``x``."""
        return gaussian_on_line(np.asarray(x, float), self.amplitude, self.position,
                                self.sigma, self.offset, self.slope)

    def __str__(self) -> str:
        return (f"peak at {value_and_error(self.position, self.position_err)}, FWHM "
                f"{value_and_error(self.fwhm, self.fwhm_err)} (resolution "
                f"{value_and_error(100 * self.resolution, 100 * self.resolution_err)} %)")


def fit_peak(centres: np.ndarray, counts: np.ndarray,
             window: tuple[float, float] | None = None) -> PeakFit:
    """Fit a gaussian on a linear background to a histogram.

    Parameters
    ----------
    centres
        Bin centres.
    counts
        Counts per bin (Poisson errors ``sqrt(max(counts, 1))`` weight the fit).
    window
        ``(low, high)`` range of bin centres to fit; default: ±3 estimated sigmas around
        the highest bin.

    Returns
    -------
    PeakFit

    Raises
    ------
    ValueError
        If the window holds fewer than 6 bins or no counts, the fit does not converge, or
        it puts the peak outside the window.
    """
    centres = np.asarray(centres, float)
    counts = np.asarray(counts, float)
    if centres.shape != counts.shape or centres.ndim != 1:
        raise ValueError("centres and counts must be 1-D arrays of the same length")
    if window is None:
        window = _auto_window(centres, counts)
    sel = (centres >= window[0]) & (centres <= window[1])
    x, y = centres[sel], counts[sel]
    span = f"{float(window[0]):g}..{float(window[1]):g}"
    held = f"{y.sum():.0f} counts in {len(x)} bins"
    if len(x) < 6 or y.sum() <= 0:
        raise ValueError(f"cannot fit a peak in {span}: {held}")
    peak = int(np.argmax(y))
    p0 = [y[peak] - min(y[0], y[-1]), x[peak], (x[-1] - x[0]) / 6, min(y[0], y[-1]), 0.0]
    try:
        popt, pcov = curve_fit(gaussian_on_line, x, y, p0=p0, sigma=np.sqrt(np.maximum(y, 1)),
                               absolute_sigma=True, maxfev=20000)
    except RuntimeError as err:
        raise ValueError(f"the peak fit in {span} did not converge ({held}): {err}") from None
    err = np.sqrt(np.diag(pcov))
    if not window[0] <= popt[1] <= window[1]:
        # The curve went elsewhere: no peak the window holds, whatever its numbers say.
        raise ValueError(f"the peak fit in {span} put the peak at {popt[1]:.4g}, outside the "
                         f"window ({held}): too few counts or no peak there")
    return PeakFit(position=float(popt[1]), position_err=float(err[1]),
                   sigma=float(abs(popt[2])), sigma_err=float(err[2]),
                   amplitude=float(popt[0]), offset=float(popt[3]), slope=float(popt[4]),
                   window=(float(window[0]), float(window[1])))


def _auto_window(centres: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """±3 sigma around the highest bin, sigma from the half-maximum crossing."""
    peak = int(np.argmax(counts))
    half = counts[peak] / 2
    left = peak
    while left > 0 and counts[left] > half:
        left -= 1
    right = peak
    while right < len(counts) - 1 and counts[right] > half:
        right += 1
    sigma = max((centres[right] - centres[left]) / FWHM_PER_SIGMA,
                2 * (centres[1] - centres[0]) if len(centres) > 1 else 1.0)
    return float(centres[peak] - 3 * sigma), float(centres[peak] + 3 * sigma)
