"""``aare-lab find``: run one finder over dark and data frames and save the result."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..finders import get_finder
from ..pipeline import train_pedestal
from ..results import save_result, truncated_frames
from ..sources import open_source, split_dark
from .options import add_finder_options, finder_spec, positive_int


def register(subparsers) -> None:
    """Add the ``find`` subcommand."""
    parser = subparsers.add_parser(
        "find", help="find clusters in frames and write the result netCDF",
        description="Train a pedestal on dark frames, find clusters in the data frames and "
                    "write the result Dataset as netCDF. Sources: .npy, .npz, "
                    "file.h5:/dataset, or an slsDetector master file.",
    )
    parser.add_argument("--dark", help="dark frames (default: the first --n-dark of --frames)")
    parser.add_argument("--frames", required=True, help="data frames")
    parser.add_argument("--n-dark", type=positive_int, metavar="K",
                        help="take the first K frames of --frames as dark frames")
    parser.add_argument("--finder", default="frozen", help="serial, frozen"
                        " (cuda where a GPU is available); default frozen")
    add_finder_options(parser)
    parser.add_argument("--threads", type=positive_int, help="threads of the frozen finder")
    parser.add_argument("--branch-maps", nargs="?", const="all", metavar="FRAMES",
                        help="store branch maps: all frames, or comma-separated frame numbers")
    parser.add_argument("--out", required=True, type=Path, help="result file (.nc)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=run)


def _branch_selection(text: str | None):
    if text is None:
        return None
    if text == "all":
        return True
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--branch-maps takes 'all' or frame numbers like 147,148; got {text!r}")


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab find``."""
    spec = finder_spec(args)
    get_finder(spec.finder).require_available()
    if args.threads is not None and args.finder != "frozen":
        raise ValueError("--threads applies to the frozen finder only")
    if (args.dark is None) == (args.n_dark is None):
        raise ValueError("give exactly one of --dark FILE or --n-dark K")
    if args.out.suffix != ".nc":
        raise ValueError(f"--out must be a .nc file, got {args.out}")
    frames = open_source(args.frames)
    if args.n_dark is not None:
        dark, frames = split_dark(frames, args.n_dark)
    else:
        dark = open_source(args.dark)
    progress = not args.quiet
    pedestal = train_pedestal(dark, spec.n_pedestal, dtype=spec.pedestal_dtype,
                              noise=spec.noise, progress=progress)
    options = {"on_truncation": args.on_truncation}
    if args.threads is not None:
        options["threads"] = args.threads
    finder = spec.make_finder(pedestal, **options)
    result = finder.find(frames, branch_maps=_branch_selection(args.branch_maps),
                         progress=progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_result(result, args.out)
    n_frames = result.sizes["frame"]
    n_clusters = result.sizes["cluster"]
    print(f"{args.finder}: {n_clusters} clusters in {n_frames} frames "
          f"({n_clusters / max(n_frames, 1):.1f} per frame), "
          f"{len(truncated_frames(result))} frames truncated; wrote {args.out}")
    if n_frames:
        print(f"clusters per frame: min {int(np.min(result.n_found))}, "
              f"max {int(np.max(result.n_found))}")
    return 0
