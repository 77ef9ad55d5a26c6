"""The sustained rate of publisher -> StreamSource -> finder on loopback with zero drops,
beside the bare pyzmq PUB -> SUB limit of 320 kB frames measured in the same run.

Run: ``python benchmarks/live_stream.py [--finder frozen|cuda] [--seconds 4]`` (self-contained:
the publishers run in a child process, so they do not share this process's GIL; the
machine needs no network, only loopback).

- **Loopback limit**: a bare ZeroMQ PUB in the child sends 320 000-byte messages (one MÖNCH
  frame) as fast as it can for ``--loopback-seconds``; a SUB here counts what arrives. Frames/s
  and GB/s received, and how many the PUB dropped at its high-water mark.
- **Pipeline**: the child's `aare_lab.stream.publisher.StreamPublisher` streams simulated MÖNCH03
  frames (400x400, ~2300 photons per frame, a bank of ``--bank`` distinct frames cycled) in
  slsReceiver's format at a fixed rate for ``--seconds``, then the end of acquisition; here
  `aare_lab.stream.live.LiveRun` consumes them from a `StreamSource` (the headless ``aare-lab live``
  path: assembly, finder, spectrum, counts; pedestal trained beforehand on simulated dark
  frames, nσ 5, 3x3, float64). A rate holds when every frame sent was received and processed,
  none lost (ZeroMQ's high-water marks), dropped (the source's bounded queue) or incomplete,
  and the consumer finished at most `LAG_LIMIT` seconds plus two chunks' worth of frames
  after the publisher: the queues between them hold up to ~2000 frames, which would hide a
  consumer slower than the rate in a short step.
  The rates step up by ``--factor`` from ``--start`` until one fails, then bisect ``--refine``
  times; the highest rate that held is reported with its ratio to the loopback limit.
- **Finder alone**: the same finder on the bank in memory, for what bounds the pipeline.

The record goes to ``benchmarks/results/live_stream_<finder>_<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import zmq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

FRAME_BYTES = 400 * 400 * 2
N_PEDESTAL = 200
#: Messages queued at each end of the bare PUB -> SUB (64 MB each at 320 kB).
LOOPBACK_HWM = 200
#: Seconds the consumer may end after the publisher (plus two chunks at the rate).
LAG_LIMIT = 0.5


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finder", default="frozen", help="frozen (default), serial or cuda")
    parser.add_argument("--seconds", type=float, default=4.0, help="streaming per rate step")
    parser.add_argument("--loopback-seconds", type=float, default=3.0)
    parser.add_argument("--start", type=float, default=None,
                        help="first rate, frames/s (default 100 on the CPU, 1300 on the GPU)")
    parser.add_argument("--factor", type=float, default=1.5, help="rate step while it holds")
    parser.add_argument("--refine", type=int, default=2, help="bisections after a failure")
    parser.add_argument("--max-rate", type=float, default=40000.0)
    parser.add_argument("--bank", type=int, default=50, help="distinct simulated frames")
    parser.add_argument("--queue-chunks", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="frozen finder threads")
    parser.add_argument("--budget", type=float, default=170.0,
                        help="seconds: no new rate step starts after this")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    return parser.parse_args(argv)


# ------------------------------------------------------------------ the child process
def child(conn, bank_path: str) -> None:
    """Serve the parent's requests: ("loopback", seconds) or ("stream", rate, n)."""
    from aare_lab.stream.publisher import StreamPublisher

    frames = np.load(bank_path)
    with StreamPublisher("tcp://127.0.0.1:0") as publisher:
        conn.send(publisher.endpoints[0])
        while True:
            request = conn.recv()
            if request[0] == "quit":
                return
            if request[0] == "loopback":
                conn.send(bare_pub(request[1], frames[0].tobytes(), conn))
            else:
                _, rate, n = request
                publisher.wait_for_subscribers(timeout=60)  # each step's new source
                start = time.perf_counter()
                sent = publisher.stream(frames, rate, n_frames=n)
                conn.send((sent, time.perf_counter() - start))


def bare_pub(seconds: float, payload: bytes, conn) -> dict:
    """Send ``payload`` on a bare PUB as fast as possible; the SUB address goes to the parent."""
    context = zmq.Context.instance()
    socket = context.socket(zmq.XPUB)  # PUB's sending, plus the subscription to wait for
    socket.setsockopt(zmq.SNDHWM, LOOPBACK_HWM)
    socket.bind("tcp://127.0.0.1:0")
    conn.send(socket.getsockopt(zmq.LAST_ENDPOINT).decode())
    socket.recv()  # the subscription
    message = zmq.Frame(payload)
    sent, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            socket.send(message, copy=False)
        sent += 100
    elapsed = time.perf_counter() - start
    for _ in range(100):  # the end marker, repeated in case the SUB's queue is full
        socket.send(b"end")
        time.sleep(0.01)
    socket.close(linger=1000)
    return {"sent": sent, "send_seconds": elapsed}


# -------------------------------------------------------------------- the measurements
def loopback(conn, seconds: float) -> dict:
    conn.send(("loopback", seconds))
    endpoint = conn.recv()
    socket = zmq.Context.instance().socket(zmq.SUB)
    socket.setsockopt(zmq.RCVHWM, LOOPBACK_HWM)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(endpoint)
    received, first, last = 0, None, None
    while socket.poll(10_000):
        message = socket.recv(copy=False)
        if len(message) < FRAME_BYTES:
            break
        last = time.perf_counter()
        first = first or last
        received += 1
    socket.close(linger=0)
    sender = conn.recv()
    seconds = (last - first) if received > 1 else float("nan")
    fps = (received - 1) / seconds
    return {**sender, "received": received, "receive_seconds": seconds,
            "frames_per_s": fps, "GB_per_s": fps * FRAME_BYTES / 1e9,
            "dropped_at_pub": sender["sent"] - received, "message_bytes": FRAME_BYTES}


def step(conn, endpoint: str, spec, pedestal, rate: float, seconds: float, out: Path,
         source_options: dict, options: dict) -> dict:
    """One acquisition at ``rate`` into a fresh source and `LiveRun`, so that what a failed
    step left behind never counts in the next."""
    from aare_lab.sources import StreamSource
    from aare_lab.stream.live import LiveRun

    n = max(1, int(rate * seconds))
    with StreamSource(endpoint, **source_options) as source:
        # The guard: a PUB that drops the end message at its high-water mark too.
        live = LiveRun(source, spec, out, pedestal=pedestal, interval=3600.0,
                       duration=2 * seconds + 15, report=lambda line: None, **options)
        conn.send(("stream", rate, n))
        start = time.perf_counter()
        live.run()
        consumed = time.perf_counter() - start
        sent, send_seconds = conn.recv()
        counts = source.stats.as_dict()
    problems = {k: counts[k] for k in ("frames_lost", "frames_dropped", "frames_incomplete",
                                       "messages_malformed") if counts[k]}
    lag = consumed - send_seconds
    kept_up = lag <= LAG_LIMIT + 2 * source_options["chunk_frames"] / rate
    held = (kept_up and not problems
            and counts["frames_received"] == counts["frames_processed"] == sent)
    return {"rate": rate, "sent": sent, "publisher_frames_per_s": sent / send_seconds,
            "consumer_seconds": consumed, "lag_seconds": lag,
            "consumer_frames_per_s": counts["frames_processed"] / consumed, **counts,
            "clusters": live.n_clusters, "held": held}


def finder_alone(spec, pedestal, bank: np.ndarray, options: dict, repeats: int = 3) -> dict:
    from aare_lab.finders import make_finder

    finder = make_finder(spec, pedestal.copy(), **options)
    chunk = finder.chunk_frames
    stack = np.ascontiguousarray(np.concatenate([bank] * max(1, -(-chunk // len(bank)))))
    finder.process_chunk(stack[:min(chunk, len(stack))], np.arange(min(chunk, len(stack))))
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for first in range(0, len(stack), chunk):
            part = stack[first:first + chunk]
            finder.process_chunk(part, np.arange(first, first + len(part)))
        best = max(best, len(stack) / (time.perf_counter() - start))
    return {"frames": len(stack), "best_frames_per_s": best}


def rates(start: float, factor: float, refine: int, max_rate: float, run_step):
    """Step up until a rate fails, then bisect; returns every step."""
    steps, rate, good, bad = [], start, None, None
    while rate <= max_rate:
        result = run_step(rate)
        if result is None:
            return steps
        steps.append(result)
        if not result["held"]:
            bad = rate
            break
        good, rate = rate, rate * factor
    for _ in range(refine if bad is not None else 0):
        rate = bad / factor if good is None else (good + bad) / 2
        result = run_step(rate)
        if result is None:
            break
        steps.append(result)
        good, bad = (rate, bad) if result["held"] else (good, rate)
    return steps


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads is not None:
        os.environ["NUMBA_NUM_THREADS"] = str(args.threads)
    import numba
    from records import cpu_name, git_commit, write_record

    import aare_lab
    from aare_lab.model.spec import FinderSpec
    from aare_lab.simulate import Simulator

    t0 = time.monotonic()
    load_before = list(os.getloadavg())
    spec = FinderSpec(args.finder, n_pedestal=N_PEDESTAL)
    aare_lab.get_finder(spec.finder).require_available()
    start_rate = args.start or (1300.0 if spec.finder == "cuda" else 100.0)
    options = {"threads": args.threads} if args.threads and spec.finder == "frozen" else {}
    chunk_frames = 512 if spec.finder == "cuda" else 64
    source_options = {"chunk_frames": chunk_frames, "queue_chunks": args.queue_chunks}
    sim = Simulator(seed=0)
    pedestal = aare_lab.train_pedestal(sim.dark(N_PEDESTAL), N_PEDESTAL, progress=False)
    bank, _ = sim.frames(args.bank)
    print(f"simulated {N_PEDESTAL} dark and {args.bank} frames in {time.monotonic() - t0:.1f} s",
          flush=True)
    alone = finder_alone(spec, pedestal, bank, options)
    print(f"{spec.finder} alone: {alone['best_frames_per_s']:,.0f} frames/s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "bank.npy", bank)
        context = multiprocessing.get_context("spawn")
        conn, child_conn = context.Pipe()
        process = context.Process(target=child, args=(child_conn, str(Path(tmp) / "bank.npy")),
                                  daemon=True)
        process.start()
        try:
            endpoint = conn.recv()
            limit = loopback(conn, args.loopback_seconds)
            print(f"loopback PUB->SUB of {FRAME_BYTES} B: {limit['frames_per_s']:,.0f} "
                  f"frames/s, {limit['GB_per_s']:.2f} GB/s", flush=True)

            def run_step(rate):
                if time.monotonic() - t0 > args.budget:
                    return None
                result = step(conn, endpoint, spec, pedestal, rate, args.seconds,
                              Path(tmp) / f"live_{rate:.0f}", source_options, options)
                print(f"{rate:8,.0f} frames/s: {'held' if result['held'] else 'FAILED'}; "
                      + ", ".join(f"{k} {result[k]:,}" for k in (
                          "sent", "frames_received", "frames_processed", "frames_lost",
                          "frames_dropped", "frames_incomplete"))
                      + f"; consumer {result['consumer_frames_per_s']:,.0f} frames/s, lag "
                        f"{result['lag_seconds']:.2f} s", flush=True)
                return result

            steps = rates(start_rate, args.factor, args.refine, args.max_rate, run_step)
            conn.send(("quit",))
        finally:
            process.join(10)
            if process.is_alive():
                process.kill()
    held = [s["rate"] for s in steps if s["held"]]
    best = max(held) if held else None
    failed = [s for s in steps if not s["held"] and (best is None or s["rate"] > best)]
    record = {
        "benchmark": f"live_stream_{spec.finder}",
        "date": datetime.now(UTC).isoformat(),
        "git_commit": git_commit(),
        "aare_lab_version": aare_lab.__version__,
        "host": {"cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
                 "numpy": np.__version__, "numba": numba.__version__,
                 "numba_threads": numba.config.NUMBA_NUM_THREADS,
                 "pyzmq": zmq.__version__, "libzmq": zmq.zmq_version()},
        "parameters": {"finder": spec.finder, "frame_shape": [400, 400], "n_sigma": 5.0,
                       "cluster_size": "3x3", "pedestal_dtype": "float64",
                       "n_pedestal": N_PEDESTAL, "bank": args.bank, "seconds": args.seconds,
                       "chunk_frames": chunk_frames, "queue_chunks": args.queue_chunks,
                       "start": start_rate, "factor": args.factor, "refine": args.refine,
                       "lag_limit_s": LAG_LIMIT},
        "loopback": limit,
        "finder_alone": alone,
        "steps": steps,
        "highest_zero_drop_rate": best,
        "ratio_to_loopback": None if best is None else best / limit["frames_per_s"],
        "first_failure_above": failed[0] if failed else None,
        "wall_seconds": time.monotonic() - t0,
        # Other work on the machine lowers every rate here: the 1, 5, 15 min load averages.
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
    }
    print(f"highest rate with zero drops: {best} frames/s "
          f"({record['ratio_to_loopback'] or 0:.3f} of the loopback limit)", flush=True)
    write_record(record, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
