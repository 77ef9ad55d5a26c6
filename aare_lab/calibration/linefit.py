"""A fluorescence line fitted in every pixel's spectrum at once (vectorised
Levenberg-Marquardt over pixels).

The model is a gaussian ``A exp(-(E - mu)^2 / (2 sigma^2))``, or with ``doublet_ratio``
the Kα/Kβ doublet ``A [g(mu) + r g(mu * doublet_ratio)]`` with one sigma and a free
Kβ/Kα ratio ``r``. It minimises ``chi2 = sum((counts - model)^2 / err^2)`` with
``err = sqrt(max(counts, 1))`` by default, the chi-square aare's ``fit`` minimises with
Minuit2 given the same errors. Parameter errors are the square roots of the covariance's
diagonal (the inverse of JᵀWJ at the minimum), as Minuit's HESSE gives for a chi-square.
"""

from __future__ import annotations

import numpy as np

#: How many pixels one step of the fit holds at once (the Jacobian is pixels x bins x 4).
CHUNK_PIXELS = 8192


def _model(x, p, ratio):
    """Model and Jacobian (pixels, bins, parameters) at parameters ``p`` (pixels, k)."""
    a, mu, sigma = p[:, 0:1], p[:, 1:2], p[:, 2:3]
    u = (x - mu) / sigma
    g = np.exp(-0.5 * u * u)
    if ratio is None:
        f = a * g
        jac = np.stack([g, f * u / sigma, f * u * u / sigma], axis=-1)
        return f, jac
    r = p[:, 3:4]
    v = (x - mu * ratio) / sigma
    h = np.exp(-0.5 * v * v)
    f = a * (g + r * h)
    jac = np.stack([g + r * h, a * (g * u + r * h * v * ratio) / sigma,
                    a * (g * u * u + r * h * v * v) / sigma, a * h], axis=-1)
    return f, jac


def _solve(jtj, jtr, lam):
    """The damped Gauss-Newton step (JᵀWJ + λ diag(JᵀWJ)) δ = JᵀW r of every pixel."""
    damped = jtj.copy()
    diagonal = np.arange(jtj.shape[1])
    damped[:, diagonal, diagonal] *= 1.0 + lam[:, None]
    damped[:, diagonal, diagonal] += 1e-300  # a parameter without influence stays put
    try:
        return np.linalg.solve(damped, jtr[..., None])[..., 0]
    except np.linalg.LinAlgError:  # a pixel whose spectrum cannot fix every parameter
        return (np.linalg.pinv(damped) @ jtr[..., None])[..., 0]


def _fit_chunk(x, y, w, p, ratio, max_iterations, tolerance):
    lam = np.full(len(p), 1e-3)
    f, jac = _model(x, p, ratio)
    chi2 = np.sum(w * (y - f) ** 2, axis=1)
    converged = np.zeros(len(p), bool)
    for _ in range(max_iterations):
        active = ~converged
        if not active.any():
            break
        ja, wa, ra = jac[active], w[active], (y - f)[active]
        jtj = np.einsum("nmp,nm,nmq->npq", ja, wa, ja)
        jtr = np.einsum("nmp,nm,nm->np", ja, wa, ra)
        trial = p[active] + _solve(jtj, jtr, lam[active])
        trial[:, 2] = np.abs(trial[:, 2])
        f_trial, jac_trial = _model(x, trial, ratio)
        chi2_trial = np.sum(wa * (y[active] - f_trial) ** 2, axis=1)
        better = np.isfinite(chi2_trial) & (chi2_trial <= chi2[active])
        index = np.flatnonzero(active)
        gain = chi2[active] - chi2_trial
        done = better & (gain <= tolerance * np.maximum(chi2_trial, 1.0))
        take = index[better]
        p[take], f[take], jac[take] = trial[better], f_trial[better], jac_trial[better]
        chi2[take] = chi2_trial[better]
        lam[take] /= 10
        lam[index[~better]] *= 10
        converged[index[done | (lam[active] > 1e12)]] = True
    jtj = np.einsum("nmp,nm,nmq->npq", jac, w, jac)
    with np.errstate(invalid="ignore"):
        try:
            covariance = np.linalg.inv(jtj)
        except np.linalg.LinAlgError:
            covariance = np.linalg.pinv(jtj)
        errors = np.sqrt(np.diagonal(covariance, axis1=1, axis2=2))
    return p, errors, chi2, converged & (lam <= 1e12)


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
    x = np.asarray(x, np.float64)[None, :]
    counts = np.asarray(counts, np.float64)
    errors = np.sqrt(np.maximum(counts, 1.0)) if errors is None else np.asarray(errors, float)
    weights = 1.0 / errors ** 2
    start = np.array(start, np.float64)
    k = start.shape[1]
    par, par_err = np.empty_like(start), np.empty_like(start)
    chi2, converged = np.empty(len(start)), np.empty(len(start), bool)
    for first in range(0, len(start), CHUNK_PIXELS):
        part = slice(first, first + CHUNK_PIXELS)
        par[part], par_err[part], chi2[part], converged[part] = _fit_chunk(
            x, counts[part], weights[part], start[part, :k].copy(), doublet_ratio,
            max_iterations, tolerance)
    return {"par": par, "par_err": par_err, "chi2": chi2, "converged": converged}
