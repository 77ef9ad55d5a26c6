"""``aare-lab dark``: the statistics of a dark run and what its size means for false clusters."""

from __future__ import annotations

import argparse

from .options import add_skip_first_option, positive_float, positive_int


def register(subparsers) -> None:
    """Add the ``dark`` subcommand."""
    parser = subparsers.add_parser(
        "dark", help="report a dark run: rms distribution, dead and hot pixels, photons",
        description="Train a pedestal on dark frames and report the rms distribution, the "
                    "pixels with rms 0 and the hot pixels, how much the noise estimated "
                    "from this many frames raises the false-cluster rate at --n-sigma "
                    "(with the number of dark frames that would keep it within bounds), the "
                    "frames whose residual noise stands out (with the --skip-first that "
                    "leaves them out when they start acquisitions), and the photon hits in "
                    "a sample of the dark frames (the beam on).")
    parser.add_argument("dark", metavar="DARK",
                        help="dark frames: .npy, .npz (file.npz:member), file.h5:/dataset "
                             "or a master file")
    parser.add_argument("--n-pedestal", type=positive_int, metavar="N",
                        help="train on the first N frames (default: all of them)")
    parser.add_argument("--n-sigma", type=positive_float, default=5.0,
                        help="the threshold the false-cluster rate is assessed at (default 5)")
    add_skip_first_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab dark``."""
    from aare_lab.detector.dark.report import dark_report
    from aare_lab.pipeline import train_pedestal
    from aare_lab.sources import open_source, without_first

    dark = without_first(open_source(args.dark), args.skip_first)
    n_pedestal = dark.n_frames if args.n_pedestal is None else args.n_pedestal
    if n_pedestal is None:
        raise ValueError(f"{dark.describe()} is an endless stream: give --n-pedestal")
    pedestal = train_pedestal(dark, n_pedestal, progress=not args.quiet,
                              option="--n-pedestal")
    print(dark_report(pedestal, args.n_sigma, frames=dark, progress=not args.quiet))
    return 0
