"""``aare-lab demo``: the main job on the embedded default (a simulated MÖNCH03 run)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from aare_lab.simulate import Beam, Detector

from .options import cluster_size, frame_shape, non_negative_int, positive_float, positive_int


def register(subparsers) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo", help="simulate a MÖNCH03 run and find clusters with every finder",
        description="Simulate a MÖNCH03 run (400x400, Cu Kα/Kβ), train a pedestal, find "
                    "clusters with every finder that can run here (a skipped one is named, "
                    "with the reason), and report clusters, agreement, the Kα peak and the "
                    "energy resolution; writes spectrum.png, summary.txt, summary.json and "
                    "summary.nc (per-frame counts and spectra), and with --full-results "
                    "every finder's result.",
    )
    parser.add_argument("--frames", type=positive_int, default=500, help="data frames (500)")
    parser.add_argument("--dark", type=positive_int, default=1000,
                        help="dark frames, also the pedestal window N (1000)")
    parser.add_argument("--shape", type=frame_shape, default=(400, 400), metavar="NYxNX",
                        help="frame shape (400x400)")
    parser.add_argument("--photons", type=positive_float,
                        help="mean photons per frame (MÖNCH03's density: 2300 per 400x400 "
                             "frame, scaled with --shape)")
    parser.add_argument("--cluster-size", type=cluster_size, default=(3, 3), metavar="NYxNX",
                        help="odd window size of every finder, rows x columns (3x3)")
    parser.add_argument("--n-sigma", type=positive_float, default=5.0,
                        help="threshold in units of the pixel noise (5)")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seed of the simulation: the same seed, the same run (0)")
    parser.add_argument("--out", type=Path, default=Path("demo"),
                        help="folder for the files written (demo/)")
    parser.add_argument("--full-results", action="store_true",
                        help="also write every finder's full result as <finder>.nc "
                             "(about 65 MB each for the default run)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab demo``."""
    from aare_lab.demo import run_demo, save_demo

    detector = Detector(frame_shape=args.shape)
    # The default beam's density on the default detector, over the frames asked for.
    area = args.shape[0] * args.shape[1] / float(np.prod(Detector().frame_shape))
    photons = args.photons if args.photons is not None else Beam().photons_per_frame * area
    beam = Beam(photons_per_frame=photons)
    report = run_demo(args.dark, args.frames, seed=args.seed, detector=detector, beam=beam,
                      cluster_size=args.cluster_size, n_sigma=args.n_sigma,
                      progress=not args.quiet)
    print(report)
    paths = save_demo(report, args.out, full_results=args.full_results)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    if not args.full_results:
        print("(--full-results also writes every finder's clusters and windows as <finder>.nc)")
    return 0
