"""``aare-lab interpolate``: η interpolation maps from a flat field, and sub-pixel photons."""

from __future__ import annotations

import argparse
from pathlib import Path

from aare_lab.imaging import (
    ETA_FUNCTIONS,
    build_interpolation,
    image,
    interpolate,
    load_interpolation,
    save_interpolation,
)
from aare_lab.imaging.interpolation import METHODS
from aare_lab.model.results import check_result, load_result
from aare_lab.storage.netcdf import write_netcdf

from .options import UsageError, positive_int
from .outputs import check_outputs, refuse_existing_outputs


def register(subparsers) -> None:
    """Add the ``interpolate`` subcommand."""
    parser = subparsers.add_parser(
        "interpolate", help="sub-pixel photon positions by η interpolation",
        description="Build η interpolation maps from the clusters of a flat-field run "
                    "(--flat, saved with --save-maps) or read them (--maps), and with a "
                    "RESULT.nc write its photons' sub-pixel positions (--out) and an image "
                    "on a sub-pixel grid (--image). Each file is written whole and renamed "
                    "into place in one step: an interrupted run leaves existing files as "
                    "they were and no half-written one.")
    parser.add_argument("result", nargs="?", metavar="RESULT.nc",
                        help="a result (from 'aare-lab find') to interpolate")
    maps = parser.add_mutually_exclusive_group(required=True)
    maps.add_argument("--flat", metavar="FLAT.nc", type=Path,
                      help="a result of a flat (uniform) illumination to build the maps from")
    maps.add_argument("--maps", metavar="MAPS.nc", type=Path,
                      help="maps written before with --save-maps")
    parser.add_argument("--save-maps", metavar="MAPS.nc", type=Path,
                        help="write the maps built from --flat")
    parser.add_argument("--eta", choices=tuple(ETA_FUNCTIONS), default="eta2",
                        help="the η kind (default: eta2)")
    parser.add_argument("--method", choices=METHODS, default="rosenblatt",
                        help="rosenblatt: marginal CDF of η_x and CDF of η_y given η_x; "
                             "conditional: each given the other (default: rosenblatt)")
    parser.add_argument("--bins", type=positive_int, default=100,
                        help="η bins per axis (default: 100)")
    parser.add_argument("--energy-bins", type=positive_int, default=1,
                        help="energy bins, one map each (default: 1)")
    parser.add_argument("--out", metavar="PHOTONS.nc", type=Path,
                        help="write the photons (x, y, energy per cluster)")
    parser.add_argument("--image", metavar="IMAGE.nc", type=Path,
                        help="write the photons counted on a sub-pixel grid")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --out, --image or --save-maps once the "
                             "new one is complete; without it an existing file is refused "
                             "before any work")
    parser.add_argument("--subpixels", type=positive_int, default=5,
                        help="image bins per pixel along each axis (default: 5)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Build or read the maps and interpolate; returns the exit code."""
    if args.save_maps and not args.flat:
        raise UsageError("--save-maps writes maps built from --flat; give --flat FLAT.nc")
    if (args.out or args.image) and not args.result:
        raise UsageError("--out and --image need a RESULT.nc to interpolate")
    if not (args.result or args.save_maps):
        raise UsageError("nothing to do: give a RESULT.nc to interpolate or --save-maps")
    outputs = {"--out": args.out, "--image": args.image, "--save-maps": args.save_maps}
    check_outputs(outputs, {"RESULT.nc": args.result, "--flat": args.flat, "--maps": args.maps})
    refuse_existing_outputs(outputs, args.overwrite)
    if args.flat:
        flat = load_result(args.flat)
        check_result(flat, f"'{args.flat}'")
        maps = build_interpolation(flat, bins=args.bins, energy_bins=args.energy_bins,
                                   eta=args.eta, method=args.method)
        print(f"maps: {args.eta}, {args.method}, {args.bins}x{args.bins} η bins, "
              f"{args.energy_bins} energy bin(s), from {maps.attrs['n_clusters']} clusters")
        if args.save_maps:
            save_interpolation(maps, args.save_maps)
            print(f"wrote {args.save_maps}")
    else:
        maps = load_interpolation(args.maps)
    if not args.result:
        return 0
    result = load_result(args.result)
    check_result(result, f"'{args.result}'")
    photons = interpolate(result, maps)
    print(f"{photons.sizes['cluster']} photons, {photons.attrs['outside_map']} beyond the "
          f"maps' energies (no position), {photons.attrs['eta_clamped']} with η beyond the "
          "maps (last bin)")
    if args.out:
        write_netcdf(photons, args.out)
        print(f"wrote {args.out}")
    if args.image:
        write_netcdf(image(photons, subpixels=args.subpixels), args.image)
        print(f"wrote {args.image}")
    return 0
