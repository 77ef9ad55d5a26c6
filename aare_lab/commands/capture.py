"""``aare-lab capture``: store a stretch of a live stream in HDF5, for offline replay."""

from __future__ import annotations

import argparse
import signal
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
                    "headers in chunked HDF5, until that many arrived or the acquisition "
                    "ended. The file is written as <name>.partial.h5, flushed after every "
                    "chunk, and renamed to --out once complete; SIGINT/SIGTERM or an error "
                    "stops the capture and leaves <name>.partial.h5 (readable, "
                    "complete=0; exit 130/143 on a signal). Replay it with `aare-lab find "
                    "--frames FILE:/frames` (the captured frame numbers come along).",
    )
    parser.add_argument("endpoints", nargs="+", metavar="ENDPOINT",
                        help="tcp://host:port of the receiver's stream, one per UDP interface")
    parser.add_argument("--frames", required=True, type=positive_int, metavar="N",
                        help="frames to capture at most")
    parser.add_argument("--out", required=True, type=Path,
                        help="the HDF5 file (.h5), written as <name>.partial.h5 until the "
                             "capture ends; an existing one is kept unless --overwrite, "
                             "and one capture at a time writes it")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --out once the new capture is complete, "
                             "and discard the <name>.partial.h5 of an earlier capture that "
                             "stopped early (kept without it)")
    parser.add_argument("--incomplete", choices=("skip", "mask"), default="skip",
                        help="frames with lost packets: leave them out (default) or store "
                             "them with their missing pixels masked")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab capture``; a capture stopped by a signal exits as the shell counts
    a process the signal ended (130, 143), its frames in the partial file."""
    from aare_lab.sources.sls_stream import StreamSource
    from aare_lab.stream.capture import capture, claim_capture

    if args.out.suffix.lower() not in (".h5", ".hdf5"):
        raise UsageError(f"--out must be an .h5 file, got {args.out}")
    stop = threading.Event()
    # Claimed before subscribing: a second capture to the same file stops here, and
    # the first one's file stays whole.
    with claim_capture(args.out, args.overwrite) as destination, \
            StreamSource(args.endpoints, incomplete=args.incomplete) as source:
        print(f"capture: {source.describe()} into {destination.partial}, renamed to "
              f"{args.out} once complete", flush=True)
        with stop_on_signals(lambda reason: stop.set()) as caught:
            summary = capture(source, destination, args.frames, stop=stop,
                              report=lambda line: print(line, flush=True))
    ended_by = f"{caught[0]} received" if caught and not summary["complete"] \
        else summary["ended_by"]
    if not summary["frames_captured"]:
        raise ValueError(f"no frames came from {source.describe()} before {ended_by}; "
                         f"nothing was written to {args.out}")
    path = summary["path"]
    if summary["complete"]:
        print(f"capture: {ended_by}; {summary['frames_captured']:,} frames in {path}; "
              f"replay with: aare-lab find --frames {path}:/frames ...", flush=True)
        return 0
    print(f"capture: {ended_by}; {summary['frames_captured']:,} frames in {path} "
          f"(complete=0; {args.out} not written); replay with: aare-lab find --frames "
          f"{path}:/frames ...", flush=True)
    return 128 + signal.Signals[caught[0]]
