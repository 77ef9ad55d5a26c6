"""Peak fits on spectra: a gaussian, or a Kα/Kβ doublet, on a linear background.

The doublet is for a fluorescence source of known lines (Cu Kα 8.05 keV, Kβ 8.90 keV): one
gaussian over both puts the peak above Kα and widens it, so the gain and the resolution
taken from it are biased. In the doublet the Kβ position follows Kα's by the ratio of the
line energies (pedestal-subtracted ADU are proportional to energy) and both lines share
one width: the width is dominated by the electronic noise of the cluster's pixels (15 ADU
rms for a 3 × 3 MÖNCH03 cluster), while silicon's Fano term (about 2.3 ADU at 8 keV) adds
in quadrature and makes Kβ wider than Kα by 0.1 % only — far below what a 13 % line can
resolve, and a width scaling as sqrt(E) (5 %) would be wrong. Free are the Kα amplitude,
position and width, the Kβ/Kα intensity ratio and the background.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy.optimize import curve_fit

FWHM_PER_SIGMA = 2.0 * np.sqrt(2.0 * np.log(2.0))
#: The Kβ/Kα intensity ratio a doublet fit starts from (Cu: about 0.14).
BETA_RATIO_START = 0.15


def gaussian_on_line(x, amplitude, centre, sigma, offset, slope):
    """``amplitude * exp(-(x - centre)² / 2σ²) + offset + slope * (x - centre)``."""
    return amplitude * np.exp(-0.5 * ((x - centre) / sigma) ** 2) + offset + slope * (x - centre)


def doublet_on_line(x, amplitude, centre, sigma, offset, slope, beta_ratio, energy_ratio):
    """`gaussian_on_line` for Kα plus a Kβ gaussian of the same ``sigma`` at
    ``centre * energy_ratio`` with ``beta_ratio`` times Kα's amplitude (and area)."""
    beta = beta_ratio * amplitude * np.exp(-0.5 * ((x - centre * energy_ratio) / sigma) ** 2)
    return gaussian_on_line(x, amplitude, centre, sigma, offset, slope) + beta


def line_energies(lines) -> tuple[float, float] | None:
    """The ``(E_alpha, E_beta)`` of a doublet from energies or ``(energy, intensity)`` pairs,
    or None for None (one gaussian), as every ``lines=`` of a fit takes them.

    Parameters
    ----------
    lines
        Two energies, ``(E_alpha, E_beta)``, or two ``(energy, intensity)`` pairs such as
        `aare_lab.simulate.Beam.lines`; or None.

    Raises
    ------
    ValueError
        Unless there are two lines with ``0 < E_alpha < E_beta``.

    Examples
    --------
    >>> line_energies(((8.05, 0.87), (8.90, 0.13))), line_energies(None)
    ((8.05, 8.9), None)
    """
    if lines is None:
        return None
    energies = [pair[0] if np.ndim(pair) else pair for pair in lines]
    if len(energies) != 2 or not 0 < float(energies[0]) < float(energies[1]):
        raise ValueError("lines must be the Kα and Kβ energies (E_alpha, E_beta) with "
                         f"0 < E_alpha < E_beta, or two (energy, intensity) pairs; got {lines!r}")
    return float(energies[0]), float(energies[1])


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
    """Result of `fit_peak`; positions and widths in the units of the spectrum's axis.

    With ``lines`` (a doublet fit) ``position``, ``sigma`` and ``amplitude`` are Kα's, and
    ``beta_ratio`` is the fitted Kβ/Kα intensity ratio; a single gaussian has no ``lines``
    and a NaN ``beta_ratio``.
    """

    position: float
    position_err: float
    sigma: float
    sigma_err: float
    amplitude: float
    offset: float
    slope: float
    window: tuple[float, float]
    lines: tuple[float, float] | None = None
    beta_ratio: float = float("nan")
    beta_ratio_err: float = float("nan")

    @property
    def model(self) -> str:
        """``"gaussian"`` or ``"Kα/Kβ doublet"``."""
        return "gaussian" if self.lines is None else "Kα/Kβ doublet"

    @property
    def beta_position(self) -> float:
        """Kβ's position, tied to Kα's by the line energies (NaN for a single gaussian)."""
        return float("nan") if self.lines is None else self.position * _energy_ratio(self.lines)

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
        """The fitted curve at ``x`` (both lines of a doublet)."""
        params = (self.amplitude, self.position, self.sigma, self.offset, self.slope)
        x = np.asarray(x, float)
        if self.lines is None:
            return gaussian_on_line(x, *params)
        return doublet_on_line(x, *params, self.beta_ratio, _energy_ratio(self.lines))

    def rows(self) -> list[tuple[str, str]]:
        """``(quantity, value ± error)`` of the fit: model, peak (Kα) position, FWHM,
        resolution and, for a doublet, the Kβ/Kα intensity ratio."""
        line = "" if self.lines is None else "Kα "
        rows = [("model", self.model),
                (f"{line}position", value_and_error(self.position, self.position_err)),
                (f"{line}FWHM", value_and_error(self.fwhm, self.fwhm_err)),
                (f"{line}resolution", value_and_error(100 * self.resolution,
                                                      100 * self.resolution_err) + " %")]
        if self.lines is not None:
            rows.append(("Kβ/Kα intensity", value_and_error(self.beta_ratio,
                                                            self.beta_ratio_err)))
        return rows

    def summary(self, scale: float = 1.0, unit: str = "") -> str:
        """The fit in one line, as the spectrum view and the live spectrum show it: the
        peak's (Kα's) position and FWHM with their errors, the resolution and, for a
        doublet, the Kβ/Kα intensity ratio.

        Parameters
        ----------
        scale
            Multiplies the energies (``1 / gain`` to show ADU fits in keV).
        unit
            The energies' unit, written after each.

        Examples
        --------
        >>> fit = PeakFit(position=322.4, position_err=0.21, sigma=14.6, sigma_err=0.3,
        ...               amplitude=1000.0, offset=0.0, slope=0.0, window=(270.0, 410.0))
        >>> fit.summary(1 / 40, "keV")
        'peak 8.0600 ± 0.0053 keV, FWHM 0.860 ± 0.018 keV (10.66 %)'
        """
        unit = f" {unit}" if unit else ""
        text = (f"{'peak' if self.lines is None else 'Kα'} "
                f"{value_and_error(self.position * scale, self.position_err * scale)}{unit}, "
                f"FWHM {value_and_error(self.fwhm * scale, self.fwhm_err * scale)}{unit} "
                f"({100 * self.resolution:.2f} %)")
        if self.lines is not None:
            text += f", Kβ/Kα {value_and_error(self.beta_ratio, self.beta_ratio_err)}"
        return text

    def __str__(self) -> str:
        (_, model), *rows = self.rows()
        return f"{model}: " + ", ".join(f"{name} {value}" for name, value in rows)

    def _repr_html_(self) -> str:
        cells = "".join(f"<tr><td style='text-align:left'>{html.escape(name)}</td>"
                        f"<td style='text-align:left'>{html.escape(value)}</td></tr>"
                        for name, value in self.rows())
        return f"<table>{cells}</table>"


def _spectrum_arrays(spectrum) -> tuple[np.ndarray, np.ndarray]:
    """The bin centres and counts of a spectrum of one result (a DataArray over energy)."""
    if getattr(spectrum, "dims", None) != ("energy",):
        what = f"a spectrum over {spectrum.dims}" if hasattr(spectrum, "dims") else \
            type(spectrum).__name__
        raise TypeError(
            f"fit_peak takes bin centres and counts, or a spectrum of one result over "
            f"energy (aare_lab.spectrum(result)) alone; got {what} without counts"
            + ("; fit the spectra of several finders with aare_lab.fit_peaks"
               if "finder" in getattr(spectrum, "dims", ()) else ""))
    return spectrum["energy"].to_numpy(), spectrum.to_numpy()


def fit_peak(centres, counts=None, window: tuple[float, float] | None = None,
             lines=None) -> PeakFit:
    """Fit a gaussian, or a Kα/Kβ doublet, on a linear background to a histogram.

    Parameters
    ----------
    centres
        Bin centres, in ADU after pedestal subtraction or in keV (zero at zero energy);
        or a spectrum (`aare_lab.spectrum`, a DataArray over ``energy``) alone, whose
        coordinate ``energy`` gives the centres.
    counts
        Counts per bin (Poisson errors ``sqrt(max(counts, 1))`` weight the fit); left out
        for a spectrum.
    window
        ``(low, high)`` range of bin centres to fit; default: from 3 estimated sigmas
        below the highest bin to 3 above it (above Kβ's expected position with ``lines``).
    lines
        None: one gaussian. The Kα and Kβ energies ``(E_alpha, E_beta)`` in keV, or
        ``(energy, intensity)`` pairs (`aare_lab.simulate.Beam.lines`): the doublet of the
        module's docstring, Kβ at ``position * E_beta / E_alpha`` with Kα's width.

    Returns
    -------
    PeakFit

    Raises
    ------
    TypeError
        Without ``counts`` for anything but a spectrum of one result.
    ValueError
        For ``lines`` that are not a doublet (`line_energies`), if the window holds no
        counts or no more bins than the model has parameters (6 bins for a gaussian, 7
        for a doublet), ends below Kβ's expected position, the fit does not converge, or
        it puts the peak outside the window.
    """
    if counts is None:
        centres, counts = _spectrum_arrays(centres)
    centres = np.asarray(centres, float)
    counts = np.asarray(counts, float)
    if centres.shape != counts.shape or centres.ndim != 1:
        raise ValueError("centres and counts must be 1-D arrays of the same length")
    lines = line_energies(lines)
    ratio = 1.0 if lines is None else _energy_ratio(lines)
    if window is None:
        window = _auto_window(centres, counts, ratio)
    window = (float(window[0]), float(window[1]))
    sel = (centres >= window[0]) & (centres <= window[1])
    x, y = centres[sel], counts[sel]
    span, held = f"{window[0]:g}..{window[1]:g}", f"{y.sum():.0f} counts in {len(x)} bins"
    p0 = _start(x, y, window, lines, span, held)
    model = gaussian_on_line if lines is None else partial(doublet_on_line, energy_ratio=ratio)
    try:
        popt, pcov = curve_fit(model, x, y, p0=p0, sigma=np.sqrt(np.maximum(y, 1)),
                               absolute_sigma=True, maxfev=20000)
    except RuntimeError as err:
        raise ValueError(f"the peak fit in {span} did not converge ({held}): {err}") from None
    err = np.sqrt(np.diag(pcov))
    if not window[0] <= popt[1] <= window[1]:
        # The curve went elsewhere: no peak the window holds, whatever its numbers say.
        raise ValueError(f"the peak fit in {span} put the peak at {popt[1]:.4g}, outside the "
                         f"window ({held}): too few counts or no peak there")
    beta = {} if lines is None else {"beta_ratio": float(popt[5]),
                                     "beta_ratio_err": float(err[5])}
    return PeakFit(position=float(popt[1]), position_err=float(err[1]),
                   sigma=float(abs(popt[2])), sigma_err=float(err[2]),
                   amplitude=float(popt[0]), offset=float(popt[3]), slope=float(popt[4]),
                   window=window, lines=lines, **beta)


def _start(x: np.ndarray, y: np.ndarray, window: tuple[float, float],
           lines: tuple[float, float] | None, span: str, held: str) -> list[float]:
    """The fit's starting parameters; refuses a window that cannot hold the model."""
    if len(x) <= (5 if lines is None else 6) or y.sum() <= 0:
        raise ValueError(f"cannot fit a peak in {span}: {held}")
    peak = int(np.argmax(y))
    ratio = 1.0 if lines is None else _energy_ratio(lines)
    if x[peak] * ratio > window[1]:
        # Kβ beyond the window: with its intensity free the fit could put anything there.
        raise ValueError(f"cannot fit the Kα/Kβ doublet in {span}: Kβ is expected at "
                         f"{x[peak] * ratio:.4g}, above the window; widen it or fit one "
                         "gaussian (lines=None)")
    # The window spans ±3 sigma around the line(s): its width less Kβ's offset is 6 sigma.
    sigma = max((x[-1] - x[0] - x[peak] * (ratio - 1)) / 6, x[1] - x[0])
    background = min(y[0], y[-1])
    return [y[peak] - background, x[peak], sigma, background, 0.0,
            *([] if lines is None else [BETA_RATIO_START])]


def _energy_ratio(lines: tuple[float, float]) -> float:
    return lines[1] / lines[0]


def _auto_window(centres: np.ndarray, counts: np.ndarray,
                 ratio: float = 1.0) -> tuple[float, float]:
    """From 3 sigma below the highest bin to 3 sigma above ``ratio`` times it (Kβ's
    position for a doublet), sigma from the half-maximum crossing."""
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
    return float(centres[peak] - 3 * sigma), float(centres[peak] * ratio + 3 * sigma)
