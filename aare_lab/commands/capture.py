"""``aare-lab capture``: store a stretch of a live stream in HDF5, for offline replay."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from .options import UsageError, positive_int
from .signals import stop_on_signals


def register(subparsers) -> None:
    """Add the ``capture`` subcommand."""
    parser = subparsers.add_parser(
        "capture", help="store frames of slsReceiver's ZeroMQ stream in HDF5 for replay",
        description="Subscribe to slsReceiver's ZeroMQ stream (or aare-lab stream-sim) and "
                    "store the next --frames frames, their frame numbers and the receiver's "
                    "headers in chunked HDF5, until that many arrived, the acquisition "
                    "ended, or SIGINT/SIGTERM; the file is flushed after every chunk. "
                    "Replay it with `aare-lab find --frames FILE:/frames` (the captured "
                    "frame numbers come along).",
    )
    parser.add_argument("endpoints", nargs="+", metavar="ENDPOINT",
                        help="tcp://host:port of the receiver's stream, one per UDP interface")
    parser.add_argument("--frames", required=True, type=positive_int, metavar="N",
                        help="frames to capture at most")
    parser.add_argument("--out", required=True, type=Path, help="the HDF5 file (.h5)")
    parser.add_argument("--incomplete", choices=("skip", "mask"), default="skip",
                        help="frames with lost packets: leave them out (default) or store "
                             "them with their missing pixels masked")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab capture``."""
    from aare_lab.sources.sls_stream import StreamSource
    from aare_lab.stream.capture import capture

    if args.out.suffix.lower() not in (".h5", ".hdf5"):
        raise UsageError(f"--out must be an .h5 file, got {args.out}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    reasons: list[str] = []

    def halt(reason: str) -> None:
        reasons.append(reason)
        stop.set()

    with StreamSource(args.endpoints, incomplete=args.incomplete) as source:
        print(f"capture: {source.describe()} into {args.out}", flush=True)
        with stop_on_signals(halt):
            summary = capture(source, args.out, args.frames, stop=stop,
                              report=lambda line: print(line, flush=True))
    ended_by = reasons[0] if reasons else summary["ended_by"]
    if not summary["frames_captured"]:
        raise ValueError(f"no frames came from {source.describe()} before {ended_by}; "
                         f"nothing was written to {args.out}")
    print(f"capture: {ended_by}; {summary['frames_captured']:,} frames in {args.out}; "
          f"replay with: aare-lab find --frames {args.out}:/frames ...", flush=True)
    return 0
