"""What page-locking the caller's frames costs, piece by piece, and what feeding the GPU
from them reaches against staging (on the GPU machine).

``find()`` from a NumPy array stages every chunk through pinned buffers on the host: a
read and a write of every frame's bytes, on the memory system that the result's copy also
needs. Page-locking the caller's array instead (``cudaHostRegister``) moves no data, but
as one call over the whole array it runs before anything else can (0.16-0.22 s per 6 GB,
``README.md``). This script measures, on one NumPy array of frames:

- registering and unregistering it in page-aligned pieces of several sizes, one thread;
- the same with several threads registering disjoint pieces at once;
- registering while 16 threads copy between mapped buffers (does either slow the other?);
- the frames' way to the GPU in 512-frame chunks, no kernel: already pinned, staged by
  8 threads into a ring of pinned buffers, and registered piece by piece on a worker
  thread a few chunks ahead (unregistered once their copies are done).

Every raw time goes to ``--out``/register_pieces_<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

PAGE = os.sysconf("SC_PAGE_SIZE")


def pieces(start: int, nbytes: int, piece: int) -> list[tuple[int, int]]:
    """Page-aligned ``(address, size)`` pieces covering ``[start, start + nbytes)``."""
    lo = start // PAGE * PAGE
    hi = -(-(start + nbytes) // PAGE) * PAGE
    step = max(PAGE, piece // PAGE * PAGE)
    return [(a, min(a + step, hi) - a) for a in range(lo, hi, step)]


def time_register(cp, parts, threads: int = 1) -> tuple[float, float]:
    rt = cp.cuda.runtime
    t0 = time.perf_counter()
    if threads == 1:
        for a, n in parts:
            rt.hostRegister(a, n, 0)
    else:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(lambda p: rt.hostRegister(p[0], p[1], 0), parts))
    t1 = time.perf_counter()
    for a, _ in parts:
        rt.hostUnregister(a)
    return t1 - t0, time.perf_counter() - t1


def copy_load(src, dst, threads, seconds, out):
    """Copy src into dst on ``threads`` threads until ``seconds`` pass; GB/s into out."""
    bounds = np.linspace(0, src.size, threads + 1).astype(int)
    done = 0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        while time.perf_counter() - t0 < seconds:
            list(ex.map(lambda k: np.copyto(dst[bounds[k]:bounds[k + 1]],
                                            src[bounds[k]:bounds[k + 1]]), range(threads)))
            done += src.nbytes
    out.append(done / (time.perf_counter() - t0) / 1e9)


def feed_pinned(cp, frames, chunk, slots, stream):
    rt = cp.cuda.runtime
    n = len(frames)
    t0 = time.perf_counter()
    for k, a in enumerate(range(0, n, chunk)):
        part = frames[a:a + chunk]
        rt.memcpyAsync(slots[k % 2].data.ptr, part.ctypes.data, part.nbytes,
                       rt.memcpyHostToDevice, stream.ptr)
    stream.synchronize()
    return time.perf_counter() - t0


def feed_staged(cp, frames, chunk, slots, stream, ring, threads):
    """8 threads copy each chunk into one of the pinned ring buffers; the copy engine
    moves it on (the ring buffer reused once its device copy is done)."""
    rt = cp.cuda.runtime
    n = len(frames)
    events = [None] * len(ring)
    ex = ThreadPoolExecutor(threads)
    t0 = time.perf_counter()
    for k, a in enumerate(range(0, n, chunk)):
        part = frames[a:a + chunk]
        b = k % len(ring)
        if events[b] is not None:
            events[b].synchronize()
        dst = ring[b][:len(part)].reshape(-1)
        src = part.reshape(-1)
        bounds = np.linspace(0, src.size, threads + 1).astype(int)
        list(ex.map(lambda i: np.copyto(dst[bounds[i]:bounds[i + 1]],
                                        src[bounds[i]:bounds[i + 1]]), range(threads)))
        rt.memcpyAsync(slots[k % 2].data.ptr, dst.ctypes.data, dst.nbytes,
                       rt.memcpyHostToDevice, stream.ptr)
        events[b] = cp.cuda.Event(disable_timing=True)
        events[b].record(stream)
    stream.synchronize()
    ex.shutdown()
    return time.perf_counter() - t0


def feed_registered(cp, frames, chunk, slots, stream, piece, ahead, split=False):
    """A worker registers pieces ``ahead`` of the copies and unregisters each once the
    copies out of it are done; copies are split at piece boundaries."""
    rt = cp.cuda.runtime
    n = len(frames)
    parts = pieces(frames.ctypes.data, frames.nbytes, piece)
    ready = [threading.Event() for _ in parts]
    finished: queue.Queue = queue.Queue()
    device = cp.cuda.Device().id
    freed = threading.Semaphore(ahead)

    def unregister():
        with cp.cuda.Device(device):
            while True:
                item = finished.get()
                if item is None:
                    return
                j, ev = item
                ev.synchronize()
                rt.hostUnregister(parts[j][0])
                freed.release()

    def work():
        held = 0
        with cp.cuda.Device(device):
            for i, (a, size) in enumerate(parts):
                if split:
                    freed.acquire()
                while not split and held >= ahead:
                    j, ev = finished.get()
                    ev.synchronize()
                    rt.hostUnregister(parts[j][0])
                    held -= 1
                rt.hostRegister(a, size, 0)
                held += 1
                ready[i].set()

    t0 = time.perf_counter()
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    if split:
        releaser = threading.Thread(target=unregister, daemon=True)
        releaser.start()
    base = parts[0][0]
    step = parts[0][1]
    last_piece_done = -1
    for k, a in enumerate(range(0, n, chunk)):
        part = frames[a:a + chunk]
        lo, hi = part.ctypes.data, part.ctypes.data + part.nbytes
        first, last = (lo - base) // step, (hi - 1 - base) // step
        dst = slots[k % 2].data.ptr
        for i in range(first, last + 1):
            ready[i].wait()
            s = max(lo, parts[i][0])
            e = min(hi, parts[i][0] + parts[i][1])
            rt.memcpyAsync(dst + (s - lo), s, e - s, rt.memcpyHostToDevice, stream.ptr)
        ev = cp.cuda.Event(disable_timing=True)
        ev.record(stream)
        # pieces wholly before this chunk's end are done once this copy is
        for i in range(last_piece_done + 1, last if hi < parts[last][0] + parts[last][1]
                       else last + 1):
            finished.put((i, ev))
            last_piece_done = i
    stream.synchronize()
    for i in range(last_piece_done + 1, len(parts)):
        finished.put((i, ev))
    worker.join()
    if split:
        finished.put(None)
        releaser.join()
    while True:
        try:
            j, e = finished.get_nowait()
        except queue.Empty:
            break
        e.synchronize()
        rt.hostUnregister(parts[j][0])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    import cupy as cp
    rec = {"commit": os.environ.get("AARE_LAB_COMMIT", "?"), "host_cores": len(os.sched_getaffinity(0)),
           "gpu": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True,
                                 text=True).stdout.strip(),
           "cupy": cp.__version__, "numpy": np.__version__, "frames": args.frames,
           "thp": open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()}
    frames = np.empty((args.frames, 400, 400), np.uint16)
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: frames[k::16].fill(k), range(16)))
    gb = frames.nbytes / 1e9
    rec["gb"] = gb
    print(rec["thp"])
    print(f"{gb:.2f} GB of frames at {frames.ctypes.data % PAGE} bytes past a page", flush=True)
    reg = rec["register"] = {}
    for mib in (2, 8, 32, 128, 512, 0):
        size = mib << 20 if mib else frames.nbytes + PAGE
        parts = pieces(frames.ctypes.data, frames.nbytes, size)
        runs = [time_register(cp, parts) for _ in range(args.repeats)]
        reg[str(mib or "whole")] = runs
        best = min(r[0] for r in runs), min(r[1] for r in runs)
        print(f"register in {mib or 'one'} MiB pieces: {gb / best[0]:.1f} GB/s, "
              f"unregister {gb / best[1]:.1f} GB/s", flush=True)
    par = rec["register_threads"] = {}
    for threads in (2, 4, 8):
        parts = pieces(frames.ctypes.data, frames.nbytes, 32 << 20)
        runs = [time_register(cp, parts, threads) for _ in range(args.repeats)]
        par[str(threads)] = runs
        print(f"register 32 MiB pieces on {threads} threads: "
              f"{gb / min(r[0] for r in runs):.1f} GB/s", flush=True)
    # registering beside a memory-bound copy on 16 threads
    src = np.ones(1 << 30, np.uint8)
    dst = np.ones(1 << 30, np.uint8)
    alone: list = []
    copy_load(src, dst, 16, 2.0, alone)
    beside: list = []
    th = threading.Thread(target=copy_load, args=(src, dst, 16, 3.0, beside))
    th.start()
    time.sleep(0.3)
    parts = pieces(frames.ctypes.data, frames.nbytes, 32 << 20)
    under = [time_register(cp, parts) for _ in range(args.repeats)]
    th.join()
    rec["under_copy"] = {"copy_alone_gbps": alone, "copy_beside_gbps": beside,
                         "register_runs": under}
    print(f"16-thread copy alone {alone[0]:.1f} GB/s, beside registering {beside[0]:.1f}; "
          f"registering beside it {gb / min(r[0] for r in under):.1f} GB/s", flush=True)
    del src, dst
    chunk = 512
    stream = cp.cuda.Stream(non_blocking=True)
    slots = [cp.empty((chunk, 400, 400), cp.uint16) for _ in range(2)]
    ring = [np.frombuffer(cp.cuda.alloc_pinned_memory(chunk * 400 * 400 * 2), np.uint16,
                          chunk * 400 * 400).reshape(chunk, 400, 400) for _ in range(3)]
    feeds = rec["feed"] = {}
    feeds["staged_8"] = [feed_staged(cp, frames, chunk, slots, stream, ring, 8)
                         for _ in range(args.repeats)]
    last = (len(range(0, args.frames, chunk)) - 1) % 2
    tail = frames[(args.frames - 1) // chunk * chunk:]
    rec["last_chunk_arrived"] = {}
    for mib, ahead, split in ((64, 4, False), (160, 3, False), (32, 8, False),
                             (64, 4, True), (32, 8, True), (16, 16, True)):
        name = f"registered_{mib}MiB_ahead{ahead}" + ("_split" if split else "")
        slots[last].fill(0)
        feeds[name] = [feed_registered(cp, frames, chunk, slots, stream, mib << 20, ahead,
                                       split) for _ in range(args.repeats)]
        rec["last_chunk_arrived"][name] = bool((slots[last][:len(tail)].get() == tail).all())
    print("last chunk arrived intact:", rec["last_chunk_arrived"], flush=True)
    cp.cuda.runtime.hostRegister(frames.ctypes.data, frames.nbytes, 0)
    feeds["pinned_floor"] = [feed_pinned(cp, frames, chunk, slots, stream)
                             for _ in range(args.repeats)]
    cp.cuda.runtime.hostUnregister(frames.ctypes.data)
    for name, runs in feeds.items():
        print(f"feed {name}: {args.frames / min(runs):,.0f} frames/s "
              f"({gb / min(runs):.1f} GB/s)", flush=True)
    path = os.path.join(args.out, time.strftime("register_pieces_%Y%m%dT%H%M%S.json"))
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
