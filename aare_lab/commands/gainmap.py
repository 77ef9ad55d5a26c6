"""``aare-lab gainmap``: a per-pixel gain map from a run under one fluorescence line."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from aare_lab.calibration import apply_gain, calibrate, save_gain_map
from aare_lab.calibration.apply import METHODS
from aare_lab.calibration.gain_map import FLAGS
from aare_lab.model.results import check_result, load_result, save_result

from .options import UsageError, positive_float, positive_int
from .outputs import check_outputs, refuse_existing_outputs


def register(subparsers) -> None:
    """Add the ``gainmap`` subcommand."""
    parser = subparsers.add_parser(
        "gainmap", help="per-pixel gain map from a fluorescence run",
        description="Fit the line in every pixel's spectrum of cluster sums (each tap "
                    "through its pixel's gain, iterated from a uniform map), write the "
                    "gain map (ADU/keV, with fit quality and flags) and optionally a "
                    "result with its energies in keV. Each file is written whole and "
                    "renamed into place in one step: an interrupted run leaves existing "
                    "files as they were and no half-written one.")
    parser.add_argument("result", metavar="RESULT.nc", help="a result (from 'aare-lab find')")
    parser.add_argument("--line", type=positive_float, required=True, metavar="KEV",
                        help="the line's energy in keV (Cu Kα: 8.05)")
    parser.add_argument("--fit-range", type=positive_float, nargs=2, required=True,
                        metavar=("LOW", "HIGH"), help="the fit range in keV")
    parser.add_argument("--kbeta", type=positive_float, metavar="KEV",
                        help="fit the Kα/Kβ doublet with the Kβ at this energy")
    parser.add_argument("--iterations", type=positive_int, default=4,
                        help="rounds of fits (default: 4)")
    parser.add_argument("--bins", type=positive_int, default=60,
                        help="spectrum bins over the fit range (default: 60)")
    parser.add_argument("--min-counts", type=positive_int, default=30,
                        help="pixels with fewer counts in the fit range are not fitted "
                             "(default: 30)")
    parser.add_argument("--out", metavar="GAIN.nc", type=Path, required=True,
                        help="write the gain map (never RESULT.nc)")
    parser.add_argument("--calibrated", metavar="CALIBRATED.nc", type=Path,
                        help="write RESULT.nc with its energies in keV (to another file)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --out or --calibrated once the new one "
                             "is complete; without it an existing file is refused before "
                             "any fit")
    parser.add_argument("--method", choices=METHODS, default="per_tap",
                        help="for --calibrated: divide each tap by its pixel's gain "
                             "(per_tap) or the sum by the seed's (seed) (default: per_tap)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Fit the map, write it and the calibrated result; returns the exit code."""
    low, high = args.fit_range
    if not low < high or not low < args.line < high:
        raise UsageError(f"--fit-range {low} {high} must hold --line {args.line}")
    outputs = {"--out": args.out, "--calibrated": args.calibrated}
    check_outputs(outputs, {"RESULT.nc": args.result})
    refuse_existing_outputs(outputs, args.overwrite)
    result = load_result(args.result)
    check_result(result, f"'{args.result}'")
    gain = calibrate(result, args.line, (low, high), bins=args.bins, kbeta_kev=args.kbeta,
                     iterations=args.iterations, min_counts=args.min_counts, progress=True)
    flags = np.bincount(gain["flag"].to_numpy().ravel(), minlength=len(FLAGS))
    values = gain["gain"].to_numpy()
    if not np.isfinite(values).any():
        raise ValueError(f"no pixel of '{args.result}' could be fitted ("
                         + ", ".join(f"{name} {n}" for name, n in zip(FLAGS, flags) if n)
                         + "): widen --fit-range, lower --min-counts or give more frames")
    print(f"gain map {values.shape[0]}x{values.shape[1]}: median "
          f"{np.nanmedian(values):.3f} ADU/keV, spread "
          f"{np.nanstd(values) / np.nanmedian(values):.2%} rms; "
          + ", ".join(f"{name} {n}" for name, n in zip(FLAGS, flags) if n))
    save_gain_map(gain, args.out)
    print(f"wrote {args.out}")
    if args.calibrated:
        save_result(apply_gain(result, gain, args.method), args.calibrated)
        print(f"wrote {args.calibrated}")
    return 0
