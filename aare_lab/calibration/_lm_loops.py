"""The compiled Levenberg-Marquardt loop of `aare_lab.calibration.linefit`: one pixel per
iteration of a parallel loop, its 3 or 4 parameters' normal equations solved by Gaussian
elimination with partial pivoting."""

import numpy as np
from numba import njit, prange

_TINY = 1e-300


@njit(cache=True, nogil=True, error_model="numpy")
def model(x, p, ratio, doublet, grad):
    """The line model at ``x`` and its gradient (into ``grad``) at parameters ``p``."""
    a, mu, sigma = p[0], p[1], p[2]
    u = (x - mu) / sigma
    g = np.exp(-0.5 * u * u)
    if not doublet:
        f = a * g
        grad[0], grad[1], grad[2] = g, f * u / sigma, f * u * u / sigma
        return f
    r = p[3]
    v = (x - mu * ratio) / sigma
    h = np.exp(-0.5 * v * v)
    grad[0] = g + r * h
    grad[1] = a * (g * u + r * h * v * ratio) / sigma
    grad[2] = a * (g * u * u + r * h * v * v) / sigma
    grad[3] = a * h
    return a * (g + r * h)


@njit(cache=True, nogil=True, error_model="numpy")
def solve(matrix, vector, out):
    """``out = matrix⁻¹ vector`` for a small system (both overwritten); False if singular."""
    k = len(vector)
    for col in range(k):
        pivot = col
        for row in range(col + 1, k):
            if abs(matrix[row, col]) > abs(matrix[pivot, col]):
                pivot = row
        if matrix[pivot, col] == 0.0 or not np.isfinite(matrix[pivot, col]):
            return False
        if pivot != col:
            for j in range(k):
                matrix[col, j], matrix[pivot, j] = matrix[pivot, j], matrix[col, j]
            vector[col], vector[pivot] = vector[pivot], vector[col]
        for row in range(col + 1, k):
            factor = matrix[row, col] / matrix[col, col]
            for j in range(col, k):
                matrix[row, j] -= factor * matrix[col, j]
            vector[row] -= factor * vector[col]
    for row in range(k - 1, -1, -1):
        total = vector[row]
        for j in range(row + 1, k):
            total -= matrix[row, j] * out[j]
        out[row] = total / matrix[row, row]
    return True


@njit(cache=True, nogil=True, error_model="numpy")
def normal_equations(x, y, w, p, ratio, doublet, jtj, jtr, grad):
    """JᵀWJ and JᵀW r at ``p``; returns the chi-square."""
    k = len(p)
    jtj[:] = 0.0
    jtr[:] = 0.0
    chi2 = 0.0
    for m in range(len(x)):
        residual = y[m] - model(x[m], p, ratio, doublet, grad)
        chi2 += w[m] * residual * residual
        for a in range(k):
            jtr[a] += w[m] * grad[a] * residual
            for b in range(a + 1):
                jtj[a, b] += w[m] * grad[a] * grad[b]
    for a in range(k):
        for b in range(a + 1, k):
            jtj[a, b] = jtj[b, a]
    return chi2


@njit(cache=True, nogil=True, error_model="numpy")
def chi_square(x, y, w, p, ratio, doublet, grad):
    chi2 = 0.0
    for m in range(len(x)):
        residual = y[m] - model(x[m], p, ratio, doublet, grad)
        chi2 += w[m] * residual * residual
    return chi2


@njit(cache=True, parallel=True, error_model="numpy")
def fit_pixels(x, counts, weights, start, ratio, doublet, max_iterations, tolerance,
               par, par_err, chi2_out, converged):
    """Fit every row of ``counts``; results into ``par``, ``par_err``, ``chi2_out`` and
    ``converged`` (see `aare_lab.calibration.linefit.fit_lines`)."""
    n, k = start.shape
    for i in prange(n):
        y, w = counts[i], weights[i]
        p = start[i].copy()
        trial, step = np.empty(k), np.empty(k)
        jtj, jtr = np.empty((k, k)), np.empty(k)
        damped, rhs, grad = np.empty((k, k)), np.empty(k), np.empty(k)
        lam = 1e-3
        chi2 = chi_square(x, y, w, p, ratio, doublet, grad)
        done = False
        for _ in range(max_iterations):
            normal_equations(x, y, w, p, ratio, doublet, jtj, jtr, grad)
            damped[:, :] = jtj
            for a in range(k):
                damped[a, a] = damped[a, a] * (1.0 + lam) + _TINY
            rhs[:] = jtr
            better = False
            chi2_trial = np.inf
            if solve(damped, rhs, step):
                for a in range(k):
                    trial[a] = p[a] + step[a]
                trial[2] = abs(trial[2])
                chi2_trial = chi_square(x, y, w, trial, ratio, doublet, grad)
                better = np.isfinite(chi2_trial) and chi2_trial <= chi2
            if better:
                gain = chi2 - chi2_trial
                p[:] = trial
                chi2 = chi2_trial
                lam /= 10.0
                if gain <= tolerance * max(chi2_trial, 1.0):
                    done = True
                    break
            else:
                lam *= 10.0
                if lam > 1e12:
                    break
        normal_equations(x, y, w, p, ratio, doublet, jtj, jtr, grad)
        for a in range(k):
            rhs[:] = 0.0
            rhs[a] = 1.0
            damped[:, :] = jtj
            if solve(damped, rhs, step):
                par_err[i, a] = np.sqrt(step[a]) if step[a] >= 0 else np.nan
            else:
                par_err[i, a] = np.nan
        par[i] = p
        chi2_out[i] = chi2
        converged[i] = done
