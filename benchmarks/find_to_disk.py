"""A run of a million frames written to disk as it is found, with memory flat over the run.

``find(frames, out="run.nc")`` writes every chunk's clusters into a netCDF4 file and drops
them (`aare_lab.storage.result_store`). This runs it over ``--frames`` frames (a simulated stack of
``--unique`` frames repeated, read chunk by chunk, never materialised) and records the
resident memory: ``ru_maxrss`` (the peak) at the start and the end, and the current RSS
(``/proc/self/statm``) sampled at every chunk the finder reads, plus the rate, the file
size and what the file holds. The JSON goes to ``benchmarks/results/``.

On a CPU (here: a 2-core VM) a million MÖNCH frames would take hours, so the CPU variant
uses small frames::

    python benchmarks/find_to_disk.py --finder frozen --shape 32x32 --photons 4 --threads 1

(one thread: the frozen finder's rows in parallel synchronise every frame, which costs
more than 32 rows of work).

On the GPU machine, MÖNCH 400x400 with the cuda finder (sparse beam by default, so that a
million frames' results, about 13 GB, fit the disk)::

    python benchmarks/find_to_disk.py --finder cuda --shape 400x400 --photons 230
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import cpu_name, git_commit, write_record  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab import Pedestal, get_finder  # noqa: E402
from aare_lab.simulate import Beam, Detector, Simulator  # noqa: E402
from aare_lab.sources import FrameSource  # noqa: E402
from aare_lab.sources.base import FrameChunk  # noqa: E402

N_PEDESTAL = 1000
N_SIGMA = 5.0
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """Resident memory of this process now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far (``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class RepeatedSource(FrameSource):
    """``unique`` frames repeated to ``n_frames``, numbered 0, 1, ...; samples RSS per read.

    Reads are views of the unique stack when ``chunk`` divides its length.
    """

    def __init__(self, unique: np.ndarray, n_frames: int):
        self.unique = unique
        self.n_frames = n_frames
        self.frame_shape = unique.shape[1:]
        self.has_frame_numbers = False
        self.samples: list[tuple[int, int, float]] = []

    def describe(self) -> str:
        return f"{len(self.unique)} simulated frames repeated to {self.n_frames}"

    @contextmanager
    def _reader(self):
        m = len(self.unique)

        def read(start: int, stop: int) -> FrameChunk:
            self.samples.append((start, rss_bytes(), time.perf_counter()))
            a, b = start % m, (stop - 1) % m + 1
            frames = self.unique[a:b] if b - a == stop - start else \
                np.take(self.unique, np.arange(start, stop) % m, axis=0)
            return FrameChunk(np.arange(start, stop, dtype=np.int64), frames)

        yield read


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finder", default="frozen")
    parser.add_argument("--shape", default="32x32", help="frame shape NYxNX")
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--unique", type=int, default=4096)
    parser.add_argument("--photons", type=float, default=4.0, help="photons per frame")
    parser.add_argument("--chunk", type=int, default=None, help="frames per chunk "
                        "(default: 4096 on the CPU, the cuda finder's own on the GPU)")
    parser.add_argument("--cluster-size", default="3x3")
    parser.add_argument("--threads", type=int, default=None, help="threads of frozen")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the result file goes (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the result file")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    ny, nx = (int(v) for v in args.shape.split("x"))
    cls = get_finder(args.finder)
    cls.require_available()

    t0 = time.perf_counter()
    sim = Simulator(Detector(frame_shape=(ny, nx)), Beam(photons_per_frame=args.photons), seed=2)
    dark = sim.dark(N_PEDESTAL)
    unique = np.ascontiguousarray(sim.frames(args.unique)[0])
    ped = Pedestal((ny, nx), N_PEDESTAL, "float32")
    ped.push_dark(dark)
    options = {} if args.chunk is None and args.finder == "cuda" else \
        {"chunk_frames": args.chunk or 4096}
    if args.threads is not None:
        options["threads"] = args.threads
    # One small warm run: compilation and GPU buffers are not what is measured, and its
    # density gives the file size expected, refused early if the disk cannot hold it.
    probe = cls(ped.copy(), N_SIGMA, args.cluster_size, **options).find(unique,
                                                                        progress=False)
    bytes_per_frame = sum(v.nbytes for v in probe.data_vars.values()) / len(unique)
    folder = Path(tempfile.mkdtemp(dir=args.dir, prefix="find_to_disk_"))
    expected = bytes_per_frame * args.frames
    free = shutil.disk_usage(folder).free
    if expected > 0.9 * free:
        shutil.rmtree(folder)
        raise SystemExit(f"the result would take about {expected / 1e9:.1f} GB but "
                         f"{folder} has {free / 1e9:.1f} GB free: lower --frames or "
                         "--photons, or give --dir on a larger disk")
    print(f"simulated and warmed up in {time.perf_counter() - t0:.1f} s; about "
          f"{probe.sizes['cluster'] / len(unique):.1f} clusters and {bytes_per_frame:.0f} "
          f"bytes of results per frame, {expected / 1e9:.2f} GB expected", flush=True)
    del probe

    path = folder / "run.nc"
    source = RepeatedSource(unique, args.frames)
    finder = cls(ped.copy(), N_SIGMA, args.cluster_size, **options)
    start_peak, start_rss = peak_rss_bytes(), rss_bytes()
    t0 = time.perf_counter()
    with finder.find(source, progress=False, out=path) as result:
        seconds = time.perf_counter() - t0
        end_peak, end_rss = peak_rss_bytes(), rss_bytes()
        n_clusters = result.sizes["cluster"]
        n_frames = result.sizes["frame"]
        assert n_frames == args.frames
        # What a user does next: one frame's clusters, read lazily.
        last = result["frame_number"][-1000:].to_numpy()
        assert (last <= args.frames - 1).all()
    file_bytes = path.stat().st_size
    if not args.keep:
        shutil.rmtree(folder)

    samples = np.array([(s, r, t - t0) for s, r, t in source.samples])
    rss = samples[:, 1]
    tenth = max(1, len(rss) // 10)
    record = {
        "benchmark": "find_to_disk", "date": datetime.now(timezone.utc).isoformat(),
        "git_commit": git_commit(), "aare_lab_version": aare_lab.__version__,
        "host": {"cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)),
                 "python": platform.python_version(), "numpy": np.__version__},
        "parameters": {"finder": args.finder, "frame_shape": [ny, nx],
                       "n_frames": args.frames, "unique_frames": args.unique,
                       "photons_per_frame": args.photons, "cluster_size": args.cluster_size,
                       "chunk_frames": finder.chunk_frames, "threads": args.threads,
                       "pedestal_dtype": "float32",
                       "n_pedestal": N_PEDESTAL, "n_sigma": N_SIGMA},
        "seconds": seconds, "frames_per_s": args.frames / seconds,
        "clusters": int(n_clusters), "clusters_per_frame": n_clusters / args.frames,
        "file_bytes": int(file_bytes), "file_bytes_per_frame": file_bytes / args.frames,
        "peak_rss_bytes": {"start": start_peak, "end": end_peak},
        "rss_bytes": {"start": start_rss, "end": end_rss,
                      "first_tenth_max": int(rss[:tenth].max()),
                      "last_tenth_max": int(rss[-tenth:].max()), "max": int(rss.max())},
        # (frame position, RSS bytes, seconds) at every chunk read, thinned to ~500.
        "rss_samples": samples[::max(1, len(samples) // 500)].tolist(),
    }
    if args.finder == "cuda":
        from aare_lab.gpu import device_info

        record["gpu"] = device_info()
    mib = 1 << 20
    print(f"{args.frames} frames in {seconds:.1f} s ({record['frames_per_s']:.0f} frames/s), "
          f"{n_clusters} clusters, file {file_bytes / 1e9:.2f} GB", flush=True)
    print(f"peak RSS {start_peak / mib:.0f} MiB at the start, {end_peak / mib:.0f} MiB at the "
          f"end; RSS per chunk: first tenth max {rss[:tenth].max() / mib:.0f} MiB, last "
          f"tenth max {rss[-tenth:].max() / mib:.0f} MiB", flush=True)
    write_record(record, args.out)


if __name__ == "__main__":
    main()
