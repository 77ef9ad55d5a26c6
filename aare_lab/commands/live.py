"""``aare-lab live``: find clusters in a detector's ZeroMQ stream while it runs, headless."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from aare_lab.analysis.fit import line_energies
from aare_lab.finders import get_finder
from aare_lab.stream.live import LiveRun, checked_fit_window, fixed_edges

from .options import (
    add_calibration_option,
    add_finder_options,
    add_skip_first_option,
    calibrated,
    finder_options,
    finder_spec,
    load_pedestal,
    positive_float,
    positive_int,
    usage_of,
)
from .signals import stop_on_signals


def register(subparsers) -> None:
    """Add the ``live`` subcommand."""
    parser = subparsers.add_parser(
        "live", help="find clusters in slsReceiver's ZeroMQ stream live, headless",
        description="Subscribe to slsReceiver's ZeroMQ stream (or aare-lab stream-sim), find "
                    "clusters while frames arrive, print the counts periodically and keep "
                    "DIR/spectrum.nc (the cluster-energy spectrum on fixed bins, in keV "
                    "with --calibration) and DIR/stats.json (the stream's counts, and the "
                    "pixels flagged with --calibration) up to date: every --interval, "
                    "when the run ends (with --stop-at-end: at the first end of "
                    "acquisition) and on SIGINT/SIGTERM (a second one interrupts: exit "
                    "130/143, the files still agree, clusters.nc left as "
                    "clusters.partial.nc).",
    )
    parser.add_argument("endpoints", nargs="+", metavar="ENDPOINT",
                        help="tcp://host:port of the receiver's stream, one per UDP "
                             "interface (rx_zmqport, rx_zmqport + 1, ...)")
    dark = parser.add_mutually_exclusive_group(required=True)
    dark.add_argument("--n-dark", type=positive_int, metavar="N",
                      help="train the pedestal on the first N frames of the stream (at "
                           "least --n-pedestal; dark frames, taken before the beam is on; "
                           "all G0 with --calibration)")
    dark.add_argument("--pedestal", type=Path, metavar="FILE",
                      help="a trained pedestal (aare-lab find --save-pedestal); it brings "
                           "its own N, dtype and noise mode (with --calibration: the G0 "
                           "pedestal of a calibrated run)")
    add_finder_options(parser)
    add_skip_first_option(parser)
    add_calibration_option(parser)
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="folder for spectrum.nc, stats.json (and clusters.nc)")
    parser.add_argument("--stop-at-end", action="store_true",
                        help="exit after the first end of acquisition (default: go on "
                             "with the next acquisitions)")
    parser.add_argument("--duration", type=positive_float, metavar="S",
                        help="stop after S seconds")
    parser.add_argument("--clusters", action="store_true",
                        help="also write every cluster to DIR/clusters.nc (appended at each "
                             "interval, so memory holds one interval's clusters)")
    parser.add_argument("--interval", type=positive_float, default=2.0, metavar="S",
                        help="seconds between writes and status lines (default 2)")
    parser.add_argument("--energy-range", type=float, nargs=2, default=(None, None),
                        metavar=("LOW", "HIGH"),
                        help="the spectrum's fixed range: in ADU edges LOW-0.5 ... HIGH-0.5 "
                             "(default 0 2000), in keV with --calibration LOW ... HIGH "
                             "(default 0 50); clusters outside are counted")
    parser.add_argument("--bin-width", type=positive_float, default=None, metavar="WIDTH",
                        help="bin width: whole ADU (default 10), or keV with --calibration "
                             "(default 0.1)")
    parser.add_argument("--lines", type=positive_float, nargs=2, metavar=("E_ALPHA", "E_BETA"),
                        help="the source's Kα and Kβ energies in keV (e.g. 8.05 8.90 for Cu): "
                             "the peak fit at the end of each status line is then the "
                             "Kα/Kβ doublet (default: one gaussian)")
    parser.add_argument("--fit-window", type=float, nargs=2, metavar=("LOW", "HIGH"),
                        help="the energy range of that fit, in ADU (keV with --calibration); "
                             "default: around the spectrum's highest bin")
    parser.add_argument("--incomplete", choices=("skip", "mask"), default="skip",
                        help="frames with lost packets: skip them (default) or find clusters "
                             "with their missing pixels masked")
    parser.add_argument("--queue-chunks", type=positive_int, default=8, metavar="K",
                        help="chunks held between the socket and the finder before whole "
                             "chunks are dropped (default 8)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab live``."""
    from aare_lab.sources import without_first
    from aare_lab.sources.sls_stream import StreamSource

    spec = calibrated(finder_spec(args), args.calibration)
    with usage_of("--energy-range, --bin-width"):
        edges = fixed_edges(*args.energy_range, args.bin_width, units=spec.units)
    with usage_of("--lines"):
        lines = line_energies(args.lines)
    with usage_of("--fit-window"):
        checked_fit_window(args.fit_window)
    pedestal = None
    if args.pedestal is not None:
        pedestal, spec = load_pedestal(args.pedestal, spec, args.calibration)
    options = finder_options(args)
    chunk_frames = get_finder(spec.finder).default_chunk_frames
    with StreamSource(args.endpoints, chunk_frames=chunk_frames,
                      queue_chunks=args.queue_chunks, incomplete=args.incomplete,
                      stop_at_end=args.stop_at_end) as source:
        live = LiveRun(without_first(source, args.skip_first), spec, args.out,
                       pedestal=pedestal, n_dark=args.n_dark,
                       edges=edges, clusters=args.clusters, interval=args.interval,
                       duration=args.duration, on_truncation=args.on_truncation,
                       report=lambda line: print(line, flush=True),
                       calibration_name=f"the calibration in {args.calibration}",
                       fit_window=args.fit_window, lines=lines, **options)
        with stop_on_signals(live.stop, live.interrupt) as caught:
            print(f"live: {source.describe()} with the {spec.finder} finder, energies in "
                  f"{spec.units}; writing to {args.out}/ every {args.interval:g} s",
                  flush=True)
            live.run()
    clusters = live.clusters_file
    partial = clusters is not None and clusters.name != "clusters.nc"
    print(f"live: {live.interrupted or live.ended_by}; {live.frames:,} data frames, "
          f"{live.n_clusters:,} clusters; wrote {args.out}/"
          + (f" (the clusters in {clusters.name}, complete=0)" if partial else ""), flush=True)
    # Interrupted: as the shell counts a process the signal ended, 128 + its number.
    return 0 if live.interrupted is None else 128 + signal.Signals[caught[1]]
