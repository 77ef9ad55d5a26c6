"""``aare-lab demo``: the main job on the embedded default (a simulated MÖNCH03 run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..results import save_result
from ..simulate import Beam, Detector
from .options import cluster_size, positive_float, positive_int


def register(subparsers) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo", help="simulate a MÖNCH03 run and find clusters with every finder",
        description="Simulate a MÖNCH03 run (400x400, Cu Kα/Kβ), train a pedestal, find "
                    "clusters with every finder available here, and report clusters, "
                    "agreement, the Kα peak and the energy resolution; writes the spectrum "
                    "PNG and the result netCDF files.",
    )
    parser.add_argument("--frames", type=positive_int, default=500, help="data frames (500)")
    parser.add_argument("--dark", type=positive_int, default=1000,
                        help="dark frames, also the pedestal window N (1000)")
    parser.add_argument("--shape", type=cluster_shape, default=(400, 400), metavar="NYxNX",
                        help="frame shape (400x400)")
    parser.add_argument("--photons", type=positive_float, default=2300.0,
                        help="mean photons per frame (2300)")
    parser.add_argument("--cluster-size", type=cluster_size, default=(3, 3), metavar="NYxNX")
    parser.add_argument("--n-sigma", type=positive_float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("demo"),
                        help="folder for spectrum.png and <finder>.nc (demo/)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=run)


def cluster_shape(text: str) -> tuple[int, int]:
    """argparse type for a frame shape ``NYxNX``."""
    try:
        ny, nx = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not of the form NYxNX") from None
    if ny < 1 or nx < 1:
        raise argparse.ArgumentTypeError(f"{text}: both sides must be >= 1")
    return ny, nx


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab demo``."""
    import matplotlib

    matplotlib.use("Agg")
    from ..demo import kalpha_window, run_demo, spectrum_bins
    from ..plots import spectrum_plot
    from ..spectra import spectra

    detector = Detector(frame_shape=args.shape)
    beam = Beam(photons_per_frame=args.photons)
    report = run_demo(args.dark, args.frames, seed=args.seed, detector=detector, beam=beam,
                      cluster_size=args.cluster_size, n_sigma=args.n_sigma,
                      progress=not args.quiet)
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, result in report.results.items():
        save_result(result, args.out / f"{name}.nc")
    reference = report.results[report.reference]
    figure = spectrum_plot(spectra(report.results, bins=spectrum_bins(detector, beam)),
                           fits=True, window=kalpha_window(reference, detector, beam))
    figure.savefig(args.out / "spectrum.png", dpi=120)
    print(f"wrote {args.out / 'spectrum.png'} and "
          f"{', '.join(str(args.out / f'{n}.nc') for n in report.results)}")
    return 0
