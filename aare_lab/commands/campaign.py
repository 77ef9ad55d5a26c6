"""``aare-lab campaign``: a beamtime's runs on a Dask cluster, results combined."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aare_lab.gpu import GpuUnavailable
from aare_lab.model.spec import FinderSpec

from .options import (
    PEDESTAL_DEFAULTS,
    UsageError,
    add_calibration_option,
    add_finder_options,
    calibrated,
    finder_options,
    finder_spec,
    positive_float,
    positive_int,
    window_dtype,
)

#: `aare_lab.cli.EXIT_BAD_INPUT`: some runs failed (cli imports the commands, not back).
EXIT_FAILED_RUNS = 1


def register(subparsers) -> None:
    """Add the ``campaign`` subcommand."""
    parser = subparsers.add_parser(
        "campaign", help="find clusters in many runs on a Dask cluster and combine them",
        description="Find clusters in every run of a campaign, one Dask task per run (an "
                    "embedded local cluster, one worker per GPU, or a running scheduler), "
                    "write each run's clusters, spectrum and pedestal to OUT/<run>/, and "
                    "the per-run table (runs.csv) and summed spectrum (campaign.nc). "
                    "Running it again skips the runs finished with the same finder "
                    "options and inputs. Exit code 1 names the runs that failed.")
    parser.add_argument("runs", nargs="+", metavar="RUNS",
                        help="data sources (files, globs, slsDetector master files, "
                             "file.h5:/dataset) or one CSV table with the columns run, frames "
                             "and dark (or pedestal)")
    dark = parser.add_mutually_exclusive_group()
    dark.add_argument("--dark", help="dark frames for every run, or a pattern with {run} for "
                                     "a dark per run (darks/{run}_dark.npy)")
    dark.add_argument("--pedestal", metavar="PATTERN",
                      help="a saved pedestal per run, a pattern with {run} "
                           "(peds/{run}.nc, from find --save-pedestal, or OUT/{run}/pedestal.nc "
                           "of a campaign); it brings its own N")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="the campaign's folder")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, metavar="N",
                       help="workers of the local cluster (default: one per core)")
    where.add_argument("--gpus", metavar="all|0,1,...",
                       help="one worker per GPU, each pinned by CUDA_VISIBLE_DEVICES "
                            "(with --finder cuda and no --workers: all, the default)")
    where.add_argument("--scheduler", metavar="ADDR",
                       help="a running Dask scheduler (tcp://host:8786)")
    parser.add_argument("--force", action="store_true", help="redo the finished runs too")
    parser.add_argument("--peak", metavar="LOW,HIGH",
                        help="fit the K-alpha peak in this energy window of each spectrum")
    parser.add_argument("--bin-width", type=positive_float, metavar="W",
                        help="the spectra's bin width (default 1 ADU, 0.05 keV calibrated)")
    add_finder_options(parser)
    add_calibration_option(parser)
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (dask's in a terminal, a tqdm line elsewhere)")
    parser.set_defaults(run=run)


def _spec(args: argparse.Namespace) -> FinderSpec:
    """The finder spec; for a remote scheduler the GPUs are the workers', not this host's."""
    try:
        return calibrated(finder_spec(args), args.calibration)
    except GpuUnavailable:
        if args.scheduler is None:
            raise
    spec = FinderSpec(args.finder, args.n_sigma, args.cluster_size, args.pedestal_dtype,
                      args.noise, args.cap, window_dtype(args), n_pedestal=args.n_pedestal,
                      common_mode=args.common_mode)
    return calibrated(spec, args.calibration)


def _peak(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--peak takes LOW,HIGH (e.g. 250,400), got {text!r}") from None
    if not low < high:
        raise UsageError(f"--peak {text}: LOW must be below HIGH")
    return low, high


def _gpus(text: str | None) -> list[str] | None:
    from aare_lab.campaign.cluster import require_gpus, visible_gpus

    if text is None:
        return None
    gpus = visible_gpus() if text == "all" else [g.strip() for g in text.split(",") if g.strip()]
    try:
        return require_gpus(gpus, "leave out --gpus, or run where the GPUs are")
    except ValueError as err:
        raise UsageError(f"--gpus {text}: {err}") from None


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab campaign``."""
    from aare_lab.campaign import Campaign, SavedPedestals, failed_runs

    spec = _spec(args)
    if args.pedestal is not None:
        if args.n_pedestal != PEDESTAL_DEFAULTS["n_pedestal"]:
            raise UsageError("--n-pedestal with --pedestal: a saved pedestal brings its own N; "
                             "leave the option out")
        spec = spec.replace(n_pedestal=None)
    dark = SavedPedestals(args.pedestal) if args.pedestal is not None else args.dark
    options = {**finder_options(args), "on_truncation": args.on_truncation}
    campaign = Campaign(args.runs, spec, dark=dark, out=args.out, width=args.bin_width,
                        peak=_peak(args.peak), finder_options=options)
    result = campaign.run(args.scheduler, force=args.force, workers=args.workers,
                          gpus=_gpus(args.gpus), progress=not args.quiet,
                          report=lambda line: print(f"campaign: {line}", flush=True))
    failed = failed_runs(result)
    done = result["status"].to_numpy() == "done"
    print(f"campaign: {int(done.sum())} of {len(done)} runs done, "
          f"{int(result['clusters'].to_numpy()[done].sum())} clusters in "
          f"{int(result['frames'].to_numpy()[done].sum())} frames; wrote "
          f"{args.out / 'campaign.nc'} and {args.out / 'runs.csv'}", flush=True)
    if failed:
        print(f"aare-lab campaign: error: {len(failed)} of {len(done)} runs failed: "
              + "; ".join(f"{name} ({reason})" for name, reason in failed.items()),
              file=sys.stderr)
        return EXIT_FAILED_RUNS
    return 0
