"""``aare-lab convert``: results to PSI aare's cluster files and back."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import UsageError, cluster_size, frame_shape

SUFFIXES = (".nc", ".clust")


def register(subparsers) -> None:
    """Add the ``convert`` subcommand."""
    from aare_lab.interop.clusterfile import AARE_FORMATS

    parser = subparsers.add_parser(
        "convert", help="convert results to aare cluster files (.clust) and back",
        description="RESULT.nc OUT.clust writes a result (from 'aare-lab find') as an aare "
                    "ClusterFile for aare's eta interpolation and calibration tools; "
                    "IN.clust RESULT.nc reads one into a result. The cluster file format "
                    "records neither the cluster size nor the value type: give them when "
                    "reading.")
    parser.add_argument("source", type=Path, metavar="IN", help="a result .nc or a .clust")
    parser.add_argument("target", type=Path, metavar="OUT", help="a .clust or a result .nc")
    parser.add_argument("--dtype", choices=tuple(AARE_FORMATS),
                        help="value type of the cluster file. Writing: the windows converted "
                             "by value, refused where a value would change (default the "
                             "result's window dtype, int32 for int16). Reading: the type the "
                             "file holds, not a conversion (default int32)")
    parser.add_argument("--cluster-size", type=cluster_size, metavar="NYxNX",
                        help="reading: the file's cluster size (default 3x3)")
    parser.add_argument("--frame-shape", type=frame_shape, metavar="NYxNX",
                        help="reading: the detector's frame shape (the file does not say)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab convert``."""
    from aare_lab.interop.clusterfile import file_dtype, read_clusterfile, write_clusterfile
    from aare_lab.model.results import load_result, save_result

    kinds = (args.source.suffix, args.target.suffix)
    if kinds == SUFFIXES:
        if args.cluster_size is not None or args.frame_shape is not None:
            raise UsageError("--cluster-size and --frame-shape apply to reading a .clust; "
                             "a result brings its own")
        result = load_result(args.source)
        write_clusterfile(result, args.target, dtype=args.dtype)
        dtype = args.dtype or file_dtype(result["window"].dtype.name)
    elif kinds == SUFFIXES[::-1]:
        dtype = args.dtype or "int32"
        result = read_clusterfile(args.source, args.cluster_size or (3, 3), dtype,
                                  frame_shape=args.frame_shape)
        save_result(result, args.target)
    else:
        raise UsageError(f"convert takes RESULT.nc OUT.clust or IN.clust RESULT.nc, got "
                         f"{args.source.name} and {args.target.name}")
    print(f"wrote {result.sizes['cluster']} clusters of {result.sizes['frame']} frames "
          f"({result.attrs['cluster_size']}, {dtype}) to {args.target}")
    return 0
