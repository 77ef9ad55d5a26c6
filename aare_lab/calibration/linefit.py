"""A fluorescence line fitted in every pixel's spectrum (Levenberg-Marquardt, compiled and
run over the pixels in parallel: `_lm_loops`).

The model is a gaussian ``A exp(-(E - mu)^2 / (2 sigma^2))``, or with ``doublet_ratio``
the Kα/Kβ doublet ``A [g(mu) + r g(mu * doublet_ratio)]`` with one sigma and a free
Kβ/Kα ratio ``r``. It minimises ``chi2 = sum((counts - model)^2 / err^2)`` with
``err = sqrt(max(counts, 1))`` by default, the chi-square aare's ``fit`` minimises with
Minuit2 given the same errors. Parameter errors are the square roots of the diagonal of
(JᵀWJ)⁻¹ at the minimum, the Gauss-Newton covariance; Minuit's HESSE takes the full second
derivative and differs on sparse spectra (docs/imaging.md).
"""

from __future__ import annotations

import numpy as np

from . import _lm_loops


def fit_lines(x: np.ndarray, counts: np.ndarray, start: np.ndarray,
              errors: np.ndarray | None = None, doublet_ratio: float | None = None,
              max_iterations: int = 100, tolerance: float = 1e-9) -> dict:
    """Fit the line model to each row of ``counts`` (pixels, bins) over bin centres ``x``.

    Parameters
    ----------
    x
        Bin centres (bins,).
    counts
        Counts (pixels, bins).
    start
        Start parameters (pixels, k): ``A, mu, sigma`` and with a doublet ``r``.
    errors
        Per-bin uncertainties like ``counts``; default ``sqrt(max(counts, 1))``.
    doublet_ratio
        Kβ over Kα energy for the doublet model; None: one gaussian.
    max_iterations, tolerance
        Stop a pixel when a step lowers its chi-square by less than ``tolerance`` times it.

    Returns
    -------
    dict
        ``par`` and ``par_err`` (pixels, k), ``chi2`` (pixels,) and ``converged``.

    Examples
    --------
    >>> x = np.arange(280.0, 360.0, 2.0)
    >>> y = 50 * np.exp(-0.5 * ((x - 321.0) / 6.0) ** 2)
    >>> out = fit_lines(x, y[None], np.array([[40.0, 318.0, 8.0]]))
    >>> np.round(out["par"][0], 6).tolist()
    [50.0, 321.0, 6.0]
    """
    x = np.asarray(x, np.float64)
    counts = np.ascontiguousarray(counts, np.float64)
    errors = np.sqrt(np.maximum(counts, 1.0)) if errors is None else np.asarray(errors, float)
    weights = np.ascontiguousarray(1.0 / errors ** 2)
    start = np.ascontiguousarray(start, np.float64)
    par, par_err = np.empty_like(start), np.empty_like(start)
    chi2, converged = np.empty(len(start)), np.empty(len(start), bool)
    doublet = doublet_ratio is not None
    _lm_loops.fit_pixels(x, counts, weights, start, float(doublet_ratio) if doublet else 1.0,
                         doublet, int(max_iterations), float(tolerance), par, par_err, chi2,
                         converged)
    return {"par": par, "par_err": par_err, "chi2": chi2, "converged": converged}
