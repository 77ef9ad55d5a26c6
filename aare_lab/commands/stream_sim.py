"""``aare-lab stream-sim``: simulated frames published as slsReceiver streams them."""

from __future__ import annotations

import argparse
import signal
import time

from .options import UsageError, non_negative_int, positive_float, positive_int

#: Distinct simulated frames of each kind; the run cycles through them.
BANK = 100
#: Seconds between binding and the first frame, as slsReceiver waits for a slow joiner.
SLOW_JOINER = 0.2


def register(subparsers) -> None:
    """Add the ``stream-sim`` subcommand."""
    parser = subparsers.add_parser(
        "stream-sim", help="publish simulated frames in slsReceiver's ZeroMQ format",
        description="Publish frames on a ZeroMQ endpoint exactly as slsReceiver 9.2.0 "
                    "streams them (two-part messages: JSON header and image; the "
                    "end-of-acquisition header after each acquisition), at a chosen rate: "
                    "a detector stand-in for `aare-lab live`, notebooks and tests. Each "
                    "acquisition is --n-dark dark frames then --frames frames with photons "
                    "(simulated MÖNCH03-like, cycling through --bank distinct frames of "
                    "each kind), or the frames of --from FILE. Ctrl-C ends the acquisition "
                    "with its end message.",
    )
    parser.add_argument("--endpoint", default="tcp://127.0.0.1:30001",
                        help="where to bind (default tcp://127.0.0.1:30001); more "
                             "interfaces bind the following ports")
    parser.add_argument("--frames", type=positive_int, default=1000,
                        help="frames with photons per acquisition (1000)")
    parser.add_argument("--rate", type=positive_float, default=1000.0,
                        help="frames per second (1000)")
    parser.add_argument("--detector", choices=("moench", "jungfrau"), default="moench",
                        help="detector type and module shape: moench 400x400, "
                             "jungfrau 512x1024 (moench)")
    parser.add_argument("--n-dark", type=non_negative_int, default=0, metavar="K",
                        help="dark frames first in each acquisition (0)")
    parser.add_argument("--acquisitions", type=positive_int, default=1,
                        help="acquisitions, each followed by its end message (1)")
    parser.add_argument("--interfaces", type=positive_int, default=1,
                        help="ports the rows are split over, like numinterfaces (1)")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seed of the simulated frames (0)")
    parser.add_argument("--bank", type=positive_int, default=BANK,
                        help=f"distinct simulated frames of each kind ({BANK})")
    parser.add_argument("--wait-subscribers", type=non_negative_int, default=0, metavar="N",
                        help="wait until N subscribers have subscribed on every interface "
                             "before the first frame, so that none misses the start (0: "
                             f"start at once, {SLOW_JOINER:g} s after binding)")
    parser.add_argument("--wait-timeout", type=positive_float, default=60.0, metavar="S",
                        help="seconds to wait for them, then exit 1 (60)")
    parser.add_argument("--from", dest="source", metavar="FILE", default=None,
                        help="send the frames of FILE (anything `find` reads) instead of "
                             "simulated ones")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``aare-lab stream-sim``."""
    from aare_lab.stream.publisher import MODULE_SHAPES, StreamPublisher

    if args.source is not None:
        if args.n_dark:
            raise UsageError("--n-dark simulates dark frames: with --from the file's frames "
                             "are sent as they are")
        from aare_lab.sources import open_source

        source = open_source(args.source)
        stop = min(args.frames, source.n_frames or args.frames)
        frames, dark, what = source.read(0, stop).frames, None, source.describe()
    else:
        from aare_lab.simulate import Detector, Simulator

        sim = Simulator(Detector(frame_shape=MODULE_SHAPES[args.detector]), seed=args.seed)
        frames = sim.frames(min(args.frames, args.bank))[0]
        dark = sim.dark(min(args.n_dark, args.bank)) if args.n_dark else None
        what = f"simulated {args.detector} frames (seed {args.seed})"
    with StreamPublisher(args.endpoint, detector=args.detector, interfaces=args.interfaces,
                         total_frames=args.n_dark + args.frames) as publisher:
        if args.wait_subscribers:
            print(f"waiting for {args.wait_subscribers} subscriber(s) on "
                  f"{', '.join(publisher.endpoints)} (at most {args.wait_timeout:g} s)",
                  flush=True)
            publisher.wait_for_subscribers(args.wait_subscribers, args.wait_timeout)
        else:
            time.sleep(SLOW_JOINER)
        ny, nx = frames.shape[1:]
        print(f"publishing on {', '.join(publisher.endpoints)}: {args.acquisitions} "
              f"acquisition(s) of {args.n_dark} dark + {args.frames} frames, {ny}x{nx}, "
              f"{what}, at {args.rate:g} frames/s", flush=True)
        # A signal stops the sender between frames, never inside a two-part message, so
        # the acquisition still ends with its end message.
        stopped = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: (stopped.append(True), publisher.stop()))
        sent = publisher.stream(frames, args.rate, acquisitions=args.acquisitions,
                                n_frames=args.frames, dark=dark, n_dark=args.n_dark,
                                report=lambda line: print(line, flush=True))
    print(f"{'stopped' if stopped else 'done'}: {sent} frames sent", flush=True)
    return 0
