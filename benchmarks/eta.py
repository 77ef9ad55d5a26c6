"""η, interpolation and per-pixel line fits: aare_lab against PSI aare in the same run.

Times, over ``--clusters`` photon-like 3x3 int32 clusters: the four η functions of
`aare_lab.imaging` and `aare_lab.imaging.interpolate` (maps built once, 100x100 η bins, one
energy bin), on the CPU (NumPy) or with ``--device cuda`` on the GPU (CuPy arrays, CUDA
events around each call, after a warm-up call), and with ``--aare VERSION`` PSI aare's
``calculate_*`` and ``Interpolator.interpolate`` on the same clusters in the same run
(aare's interpreter, `aare_eta_timing.py`; its clusters are read from an aare cluster file,
not timed). With ``--fit-pixels N`` it also times `aare_lab.calibration.gain_map` on NxN
pixels' synthetic spectra (60 bins, a doublet-free gaussian line of ~100 counts).

Usage: ``python benchmarks/eta.py [--clusters 1000000] [--repeats 5] [--device cpu|cuda]
[--aare 2026.9.30] [--fit-pixels 400]``; writes ``benchmarks/results/eta_<time>.json``
(or under ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from records import git_commit, write_record  # noqa: E402

from aare_lab.calibration import gain_map  # noqa: E402
from aare_lab.imaging import ETA_FUNCTIONS, build_interpolation, interpolate  # noqa: E402
from aare_lab.interop.clusterfile import write_clusterfile  # noqa: E402
from aare_lab.model.results import make_result  # noqa: E402
from aare_lab.model.spec import FinderSpec  # noqa: E402


def photon_clusters(n: int, seed: int = 0) -> xr.Dataset:
    """A result of ``n`` clusters: a bright centre, charge shared with a random neighbour."""
    rng = np.random.default_rng(seed)
    windows = rng.integers(0, 15, (n, 3, 3))  # no negative tap: aare raises for η2 > 1
    windows[:, 1, 1] += rng.integers(150, 320, n)
    share = rng.integers(0, 4, n)
    rows, cols = np.array([1, 1, 0, 2])[share], np.array([0, 2, 1, 1])[share]
    windows[np.arange(n), rows, cols] += rng.integers(0, 150, n)
    return make_result(spec=FinderSpec(cluster_size=(3, 3), n_pedestal=1000),
                       frame_shape=(400, 400), frame_numbers=np.array([0]),
                       n_found=np.array([n]), n_kept=np.array([n]),
                       cluster_frame=np.zeros(n, np.int64),
                       cluster_y=rng.integers(1, 399, n), cluster_x=rng.integers(1, 399, n),
                       windows=windows.astype(np.int32))


def timed_cpu(call, repeats):
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def timed_cuda(call, repeats):
    import cupy

    call()  # compile the elementwise kernels
    seconds = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        call()
        stop.record()
        stop.synchronize()
        seconds.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return seconds


def ours(result, maps, device, repeats):
    if device == "cuda":
        import cupy

        result = result.copy()
        result["window"] = result["window"].copy(data=cupy.asarray(result["window"].data))
        result["x"] = result["x"].copy(data=cupy.asarray(result["x"].data))
        result["y"] = result["y"].copy(data=cupy.asarray(result["y"].data))
        result["frame_number"] = result["frame_number"].copy(
            data=cupy.asarray(result["frame_number"].data))
    timer = timed_cuda if device == "cuda" else timed_cpu
    work = {name: (lambda f=f: f(result)) for name, f in ETA_FUNCTIONS.items()}
    work["interpolate_eta2"] = lambda: interpolate(result, maps)
    return {name: timer(call, repeats) for name, call in work.items()}


def theirs(result, maps, version, repeats):
    from aare_env import aare_python  # noqa: PLC0415 (tests/ holds the interpreter finder)

    python = aare_python(version)
    if python is None:
        raise SystemExit(f"aare {version} is not installed (tools/install_aare.sh)")
    with tempfile.TemporaryDirectory() as folder:
        clusters, cube = Path(folder) / "c.clust", Path(folder) / "maps.npz"
        write_clusterfile(result, clusters)
        np.savez(cube, cube=maps["histogram"], xbins=maps["eta_x_edges"],
                 ybins=maps["eta_y_edges"], ebins=maps["energy_edges"])
        out = subprocess.run([python, str(HERE / "aare_eta_timing.py"), str(clusters),
                              str(result.sizes["cluster"]), str(cube), str(repeats)],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def fits(pixels, repeats):
    rng = np.random.default_rng(2)
    edges = np.linspace(250, 400, 61)
    centres = 0.5 * (edges[1:] + edges[:-1])
    mu = rng.normal(322, 10, (pixels, pixels, 1))
    counts = rng.poisson(15 * np.exp(-0.5 * ((centres - mu) / 7.0) ** 2))
    spectra = xr.DataArray(counts.astype(np.int32), dims=("y", "x", "energy"),
                           coords={"energy": ("energy", centres, {"units": "ADU"})})
    return timed_cpu(lambda: gain_map(spectra, 8.05), repeats)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clusters", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--aare", metavar="VERSION")
    parser.add_argument("--fit-pixels", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent / "tests"))
    result = photon_clusters(args.clusters)
    maps = build_interpolation(result, bins=100)
    record = {"benchmark": "eta", "commit": git_commit(HERE.parent),
              "clusters": args.clusters, "repeats": args.repeats, "device": args.device,
              "cpus": os.cpu_count(), "aare_lab": ours(result, maps, args.device, args.repeats)}
    if args.aare:
        record["aare"] = theirs(result, maps, args.aare, args.repeats)
        record["ratio_aare_over_ours_best"] = {
            name: min(record["aare"]["seconds"][name]) / min(record["aare_lab"][name])
            for name in record["aare_lab"]}
    if args.fit_pixels:
        record["gain_map_seconds"] = {"pixels": [args.fit_pixels, args.fit_pixels],
                                      "bins": 60, "seconds": fits(args.fit_pixels, 1)}
    for name, seconds in record["aare_lab"].items():
        line = f"{name}: aare_lab {min(seconds) * 1e3:.1f}-{max(seconds) * 1e3:.1f} ms"
        if args.aare:
            theirs_s = record["aare"]["seconds"][name]
            line += f", aare {min(theirs_s) * 1e3:.1f}-{max(theirs_s) * 1e3:.1f} ms"
        print(line)
    if args.fit_pixels:
        print(f"gain_map {args.fit_pixels}x{args.fit_pixels}: "
              f"{record['gain_map_seconds']['seconds'][0]:.1f} s")
    write_record(record, args.out)


if __name__ == "__main__":
    main()
