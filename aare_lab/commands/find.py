"""``aare-lab find``: run one finder over dark and data frames and save the result."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from aare_lab.finders import make_finder
from aare_lab.model.capacity import TruncationError
from aare_lab.model.results import truncated_frames
from aare_lab.pipeline import check_frame_shapes, train_pedestal_for
from aare_lab.sources import open_source, split_dark, without_first
from aare_lab.storage.destination import Destination
from aare_lab.storage.result_store import COMPRESSIONS, DEFAULT_COMPRESSION

from .options import (
    UsageError,
    add_calibration_option,
    add_finder_options,
    add_skip_first_option,
    calibrated,
    finder_options,
    finder_spec,
    load_pedestal,
    positive_int,
)
from .outputs import check_outputs, refuse_existing_outputs


def register(subparsers) -> None:
    """Add the ``find`` subcommand."""
    parser = subparsers.add_parser(
        "find", help="find clusters in frames and write the result netCDF",
        description="Train a pedestal on dark frames, find clusters in the data frames and "
                    "write the result Dataset as netCDF. Sources: .npy, .npz "
                    "(file.npz:member for one of several arrays), file.h5:/dataset, or an "
                    "slsDetector master file.",
    )
    parser.add_argument("--dark", help="dark frames (give one of --dark, --n-dark and "
                                       "--pedestal)")
    parser.add_argument("--frames", required=True, help="data frames")
    parser.add_argument("--n-dark", type=positive_int, metavar="K",
                        help="take the first K frames of --frames as dark frames")
    parser.add_argument("--pedestal", type=Path, metavar="FILE",
                        help="a trained pedestal (from --save-pedestal) instead of dark "
                             "frames; it brings its own N, dtype and noise mode (with "
                             "--calibration: the G0 pedestal of a calibrated run)")
    parser.add_argument("--save-pedestal", type=Path, metavar="FILE",
                        help="write the pedestal as trained, before the data frames move "
                             "it, for later runs' --pedestal (.nc)")
    add_finder_options(parser)
    add_calibration_option(parser)
    add_skip_first_option(parser)
    parser.add_argument("--branch-maps", nargs="?", const="all", metavar="FRAMES",
                        help="store branch maps: all frames, or comma-separated frame numbers")
    parser.add_argument("--out", required=True, type=Path,
                        help="result file (.nc), written as <name>.partial.nc until the run "
                             "ends; never one of the inputs")
    parser.add_argument("--compression", choices=COMPRESSIONS, default=DEFAULT_COMPRESSION,
                        help="how --out stores the clusters: scaleoffset (default; windows "
                             "packed by HDF5's scale-offset filter, the rest deflated, read "
                             "by every reader built on the HDF5 library, about a quarter of "
                             "the bytes), deflate (HDF5's shuffle and deflate only, for "
                             "readers without scale-offset such as netCDF-Java) or none")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --out (and --save-pedestal) once the new "
                             "one is complete; a reader holding the old file keeps it")
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
        raise UsageError(f"--branch-maps takes 'all' or frame numbers like 147,148; got {text!r}")


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab find``.

    With ``--calibration`` and dark frames, the dark frames are checked to be all G0
    (`aare_lab.pipeline.train_pedestal_for`). A ``--pedestal`` file records no gain stages, so
    only its frame shape is checked against the calibration's: it must be a G0 pedestal,
    such as the ``--save-pedestal`` of a calibrated run (whose dark frames were checked);
    one trained on raw frames with gain bits would be taken as it is.
    """
    if sum(option is not None for option in (args.dark, args.n_dark, args.pedestal)) != 1:
        raise UsageError("give exactly one of --dark FILE, --n-dark K or --pedestal FILE")
    if args.out.suffix != ".nc":
        raise UsageError(f"--out must be a .nc file, got {args.out}")
    # A --common-mode label map is a .npy file, never a .nc one.
    check_outputs({"--out": args.out, "--save-pedestal": args.save_pedestal},
                  {"--frames": args.frames, "--dark": args.dark, "--pedestal": args.pedestal,
                   "--calibration": args.calibration})
    refuse_existing_outputs({"--save-pedestal": args.save_pedestal}, args.overwrite)
    # Claimed before any work: a second run writing the same file stops here, not after
    # the first one's result is gone.
    with Destination(args.out, overwrite=args.overwrite) as destination:
        return _find(args, destination)


def _find(args: argparse.Namespace, destination: Destination) -> int:
    spec = calibrated(finder_spec(args), args.calibration)
    frames = without_first(open_source(args.frames), args.skip_first)
    progress = not args.quiet
    if args.pedestal is not None:
        pedestal, spec = load_pedestal(args.pedestal, spec, args.calibration)
    else:
        if args.n_dark is not None:
            dark, frames = split_dark(frames, args.n_dark)
        else:
            dark = without_first(open_source(args.dark), args.skip_first)
            check_frame_shapes(dark, frames)
        pedestal = train_pedestal_for(spec, dark, spec.n_pedestal, progress=progress,
                                      option="--n-pedestal")
    if args.save_pedestal is not None:
        args.save_pedestal.parent.mkdir(parents=True, exist_ok=True)
        pedestal.save(args.save_pedestal)
    finder = make_finder(spec, pedestal, on_truncation=args.on_truncation,
                              **finder_options(args))
    # Written chunk by chunk as found: memory stays flat, and an interrupted run leaves
    # the chunks done so far in the partial file (marked complete=0, with a warning).
    try:
        result = finder.find(frames, branch_maps=_branch_selection(args.branch_maps),
                             progress=progress, out=destination,
                             compression=args.compression)
    except TruncationError as err:
        raise TruncationError(f"{err}; {args.out} holds the whole run, each truncated frame "
                              "with the clusters kept") from None
    with result:
        n_frames = result.sizes["frame"]
        n_clusters = result.sizes["cluster"]
        n_found = int(result.n_found.sum())
        found = f" kept of {n_found} found" if n_found != n_clusters else ""
        print(f"{args.finder}: {n_clusters} clusters{found} in {n_frames} frames "
              f"({n_clusters / max(n_frames, 1):.1f} per frame), "
              f"{len(truncated_frames(result))} frames truncated; wrote {args.out}")
        if n_frames:
            print(f"clusters per frame: min {int(np.min(result.n_found))}, "
                  f"max {int(np.max(result.n_found))}")
    return 0
