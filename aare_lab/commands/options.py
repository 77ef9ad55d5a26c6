"""Command-line options shared by the subcommands that run finders."""

from __future__ import annotations

import argparse

from .. import checks
from ..params import parse_cluster_size
from ..pedestal import NOISE_MODES, PEDESTAL_DTYPES
from ..spec import FinderSpec


def cluster_size(text: str) -> tuple[int, int]:
    """argparse type for ``NYxNX``."""
    try:
        return parse_cluster_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def positive_int(text: str) -> int:
    """argparse type for an integer >= 1 (argparse names the option in its message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    try:
        return checks.positive_int("the value", value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def positive_float(text: str) -> float:
    """argparse type for a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def add_finder_options(parser: argparse.ArgumentParser) -> None:
    """Options of the finder and its pedestal."""
    group = parser.add_argument_group("finder")
    group.add_argument("--n-sigma", type=positive_float, default=5.0,
                       help="threshold in units of the pixel noise (default 5)")
    group.add_argument("--cluster-size", type=cluster_size, default=(3, 3), metavar="NYxNX",
                       help="odd window size, rows x columns, 3..11 (default 3x3)")
    group.add_argument("--n-pedestal", type=positive_int, default=1000, metavar="N",
                       help="pedestal window: dark frames to train on (default 1000)")
    group.add_argument("--pedestal-dtype", choices=PEDESTAL_DTYPES, default="float64")
    group.add_argument("--noise", choices=NOISE_MODES, default="running",
                       help="'fixed' freezes the rms when training ends (default running)")
    group.add_argument("--cap", type=positive_int, default=None, metavar="N",
                       help="max_clusters_per_frame (default: unbounded)")
    group.add_argument("--on-truncation", choices=("warn", "error"), default="warn",
                       help="what a frame over the cap does (error: exit code 3)")


def finder_spec(args: argparse.Namespace) -> FinderSpec:
    """The `FinderSpec` of the parsed `add_finder_options` (and ``--finder``)."""
    return FinderSpec(args.finder, args.n_sigma, args.cluster_size, args.pedestal_dtype,
                      args.noise, args.cap, n_pedestal=args.n_pedestal)
