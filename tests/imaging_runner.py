"""PSI aare's η functions and Interpolator on given clusters; run by an interpreter that has
aare (`aare_env`), never by pytest (aare is imported in `main` so that collecting this file
for doctests imports nothing).

Usage: python imaging_runner.py JOBS.json

Each job is a dict with ``"task"``:

- ``"eta"``: ``npz`` (``x``, ``y``, ``data`` of shape (n, s, s)), ``dtype``, ``out``: ``out``
  (.npz) gets ``<kind>_x``, ``<kind>_y``, ``<kind>_c``, ``<kind>_sum`` for each η kind aare
  defines on that cluster size (η3 and cross η3 after aare's ``reduce_to_3x3`` for s > 3).
- ``"interpolate"``: ``npz`` (``x``, ``y``, ``data`` of 3x3 windows, ``cube``, ``xbins``,
  ``ybins``, ``ebins``), ``dtype``, ``rosenblatt`` (bool), ``out``: ``ietax``, ``ietay`` of
  aare's Interpolator from that cube and, per η kind, ``<kind>_x``, ``<kind>_y``,
  ``<kind>_energy`` of its photons.
- ``"fit"``: ``npz`` (``x`` bin centres, ``y`` counts (rows, cols, bins), ``err``), ``out``:
  aare's ``fit`` of its ``Gaussian`` with errors computed: ``par``, ``par_err``, ``chi2``.
"""

import json
import sys

import numpy as np


def cluster_vector(aare, given, dtype):
    size = tuple(given["data"].shape[1:])
    vector = aare.ClusterVector(size, dtype)
    for x, y, data in zip(given["x"], given["y"], given["data"]):
        vector.push_back(aare.Cluster(int(x), int(y), data.ravel().astype(dtype), size, dtype))
    return vector


def eta(aare, job):
    given = np.load(job["npz"])
    dtype = np.dtype(job["dtype"])
    vector = cluster_vector(aare, given, dtype)
    kinds = {"eta2": (aare.calculate_eta2, vector), "full_eta2": (aare.calculate_full_eta2, vector)}
    three = vector if given["data"].shape[1] == 3 else aare.reduce_to_3x3(vector)
    kinds.update(eta3=(aare.calculate_eta3, three), cross_eta3=(aare.calculate_cross_eta3, three))
    out = {}
    for kind, (function, clusters) in kinds.items():
        values = np.array(function(clusters))
        for field in ("x", "y", "c", "sum"):
            out[f"{kind}_{field}"] = values[field]
    np.savez(job["out"], **out)


def interpolate(aare, job):
    given = np.load(job["npz"])
    dtype = np.dtype(job["dtype"])
    bins = [np.ascontiguousarray(given[name], np.float64) for name in ("xbins", "ybins", "ebins")]
    cube = np.ascontiguousarray(given["cube"], np.float64)
    if job["rosenblatt"]:
        interpolator = aare.Interpolator(*bins)
        interpolator.rosenblatttransform(cube)
    else:
        interpolator = aare.Interpolator(cube, *bins)
    out = {"ietax": np.array(interpolator.get_ietax()), "ietay": np.array(interpolator.get_ietay())}
    vector = cluster_vector(aare, given, dtype)
    for kind, method in job["kinds"].items():
        photons = np.array(getattr(interpolator, method)(vector))
        for field in ("x", "y", "energy"):
            out[f"{kind}_{field}"] = photons[field]
    np.savez(job["out"], **out)


def fit(aare, job):
    given = np.load(job["npz"])
    model = aare.Gaussian()
    model.compute_errors = True
    out = aare.fit(model, given["x"], given["y"], given["err"])
    np.savez(job["out"], par=out["par"], par_err=out["par_err"], chi2=out["chi2"])


def main(jobs_path):
    import aare

    for job in json.loads(open(jobs_path).read()):
        {"eta": eta, "interpolate": interpolate, "fit": fit}[job["task"]](aare, job)


if __name__ == "__main__":
    main(sys.argv[1])
