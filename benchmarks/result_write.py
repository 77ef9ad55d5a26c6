"""Results written to disk: bytes per frame, frames per second, and the disk's own rate.

In one process, on the same simulated MÖNCH run (``--unique`` frames repeated to
``--frames``, read chunk by chunk, never materialised):

1. **the codecs**: every growing variable of the warm-up's result encoded as the writer
   could store it (deflate at ISA-L's levels 0-2 and zlib's 1, with and without HDF5's
   byte shuffle; integers also by HDF5's scale-offset filter), on one thread: the ratio and
   MB/s of each (`aare_lab.storage.chunk_codec`, `aare_lab.storage.scale_offset`);
2. **the disk's own rate**: the bytes of the uncompressed result written from memory in
   8 MiB blocks and fsync'd, as the writer's files are;
3. **find() into memory**: the finder alone, the bound of every file written; and **the
   writer alone**: the warm-up's result appended again and again to a file of each
   ``--variants`` (no finder running), the bound the writer sets on this host;
4. **find(out=...)** for each ``--variants`` (compression and window dtype): frames/s,
   bytes per frame, the byte rate reached against the disk's, and the frames/s against
   the uncompressed file's in the same rounds (what the writer did before it encoded).

Variants alternate over ``--repeats`` rounds, so that the host's drift falls on all of them
alike. The JSON goes to ``benchmarks/results/``. On the GPU machine::

    python benchmarks/result_write.py --finder cuda --frames 60000 --dir /tmp/disk

and on a CPU (small frames; a full MÖNCH frame takes the frozen finder milliseconds)::

    python benchmarks/result_write.py --finder frozen --shape 200x200 --photons 575 \\
        --frames 2000 --unique 200
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from find_to_disk import RepeatedSource  # noqa: E402
from records import cpu_name, git_commit, write_record  # noqa: E402

import aare_lab  # noqa: E402
from aare_lab import Pedestal, get_finder  # noqa: E402
from aare_lab.runtime.parallel import pool_threads  # noqa: E402
from aare_lab.simulate import Beam, Detector, Simulator  # noqa: E402
from aare_lab.storage import result_store, scale_offset  # noqa: E402
from aare_lab.storage.chunk_codec import DEFLATE_LIBRARY, shuffle  # noqa: E402
from aare_lab.storage.result_store import CHUNK_BYTES, GROWING  # noqa: E402

N_PEDESTAL = 1000
N_SIGMA = 5.0
BLOCK = 8 << 20


def codecs() -> dict:
    """The deflate encoders compared: name -> compress(bytes)."""
    out = {"zlib-1": lambda b: zlib.compress(b, 1)}
    try:
        from isal import isal_zlib

        for level in (0, 1, 2):
            out[f"isal-{level}"] = lambda b, level=level: isal_zlib.compress(b, level)
    except ImportError:
        pass
    return out


def codec_table(result) -> list[dict]:
    """Each growing variable, one writer-sized chunk of it, through each encoder."""
    rows = []
    for name, var in result.data_vars.items():
        if not var.dims or var.dims[0] not in GROWING or var.size == 0:
            continue
        values = var.values
        per_row = max(1, values[:1].nbytes)
        chunk = np.ascontiguousarray(values[:max(1, CHUNK_BYTES // per_row)])
        for shuffled in (False, True):
            data = (shuffle(chunk) if shuffled else chunk.reshape(-1).view(np.uint8)).tobytes()
            for codec, compress in codecs().items():
                t0 = time.perf_counter()
                for _ in range(3):
                    encoded = compress(data)
                seconds = (time.perf_counter() - t0) / 3
                rows.append({"variable": name, "dtype": str(values.dtype),
                             "shuffle": shuffled, "codec": codec,
                             "ratio": len(data) / len(encoded),
                             "mb_per_s_one_thread": len(data) / seconds / 1e6})
        if values.dtype.kind == "i":
            scale_offset.encode(chunk, 0)   # compiled for this dtype
            t0 = time.perf_counter()
            for _ in range(3):
                encoded = scale_offset.encode(chunk, 0)
            seconds = (time.perf_counter() - t0) / 3
            rows.append({"variable": name, "dtype": str(values.dtype), "shuffle": False,
                         "codec": "scaleoffset", "ratio": chunk.nbytes / len(encoded),
                         "mb_per_s_one_thread": chunk.nbytes / seconds / 1e6})
    return rows


def disk_rate(folder: Path, nbytes: int) -> dict:
    """Write ``nbytes`` from memory in 8 MiB blocks and fsync: the disk's own rate."""
    block = np.random.default_rng(0).integers(0, 255, BLOCK, dtype=np.uint8).tobytes()
    path = folder / "raw.bin"
    t0 = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        for _ in range(max(1, nbytes // BLOCK)):
            f.write(block)
        os.fsync(f.fileno())
    seconds = time.perf_counter() - t0
    written = path.stat().st_size
    path.unlink()
    return {"bytes": written, "seconds": seconds, "mb_per_s": written / seconds / 1e6}


def writer_alone(result, path: Path, frames: int, compression: str, window_dtype: str) -> dict:
    """Append ``result``'s growing variables to ``path`` until it holds ``frames`` frames,
    with no finder running: the writer's own rate (fsync and rename included)."""
    growing = [name for name, var in result.variables.items()
               if var.dims and var.dims[0] in GROWING]
    result = result.assign(window=result["window"].astype(window_dtype))
    template = result.isel({dim: slice(0, 0) for dim in GROWING if dim in result.dims})
    columns = {name: result[name].values for name in growing}
    per_append = result.sizes["frame"]
    t0 = time.perf_counter()
    with result_store.ResultWriter(path, template, compression=compression) as writer:
        for _ in range(max(1, frames // per_append)):
            writer.append(columns)
    seconds = time.perf_counter() - t0
    written = writer.frames_written
    size = path.stat().st_size
    path.unlink()
    return {"variant": f"writer alone {compression}:{window_dtype}", "seconds": seconds,
            "frames_per_s": written / seconds, "bytes_per_frame": size / written,
            "mb_per_s_written": size / seconds / 1e6}


#: The time accounts (`ResultWriter.seconds`) of the writers closed, in order.
ACCOUNTS: list[dict] = []


def _accounted(close):
    def close_and_account(self, complete):
        try:
            close(self, complete)
        finally:
            ACCOUNTS.append(dict(self.seconds))
    return close_and_account


result_store.ResultWriter.close = _accounted(result_store.ResultWriter.close)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finder", default="frozen")
    parser.add_argument("--shape", default="400x400", help="frame shape NYxNX")
    parser.add_argument("--photons", type=float, default=2300.0, help="photons per frame")
    parser.add_argument("--frames", type=int, default=60000)
    parser.add_argument("--unique", type=int, default=512)
    parser.add_argument("--cluster-size", default="3x3")
    parser.add_argument("--pedestal-dtype", default="float32")
    parser.add_argument("--variants",
                        default="none:int32,deflate:int32,scaleoffset:int32,scaleoffset:int16",
                        help="comma-separated compression:window_dtype pairs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the files go (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    ny, nx = (int(v) for v in args.shape.split("x"))
    cls = get_finder(args.finder)
    cls.require_available()
    variants = [tuple(v.split(":")) for v in args.variants.split(",")]

    t0 = time.perf_counter()
    sim = Simulator(Detector(frame_shape=(ny, nx)), Beam(photons_per_frame=args.photons), seed=2)
    dark = sim.dark(N_PEDESTAL)
    unique = np.ascontiguousarray(sim.frames(args.unique)[0])
    ped = Pedestal((ny, nx), N_PEDESTAL, args.pedestal_dtype)
    ped.push_dark(dark)
    del dark

    def finder(window_dtype="int32"):
        return cls(ped.copy(), N_SIGMA, args.cluster_size, window_dtype=window_dtype)

    warm = finder().find(unique, progress=False)
    raw_per_frame = sum(v.nbytes for name, v in warm.data_vars.items()
                        if v.dims and v.dims[0] in GROWING) / len(unique)
    print(f"simulated and warmed up in {time.perf_counter() - t0:.1f} s: "
          f"{warm.sizes['cluster'] / len(unique):.0f} clusters, {raw_per_frame / 1e3:.1f} kB "
          "of results per frame", flush=True)
    table = codec_table(warm)
    for row in table:
        print(f"  {row['variable']:>14} {row['dtype']:>7} shuffle={row['shuffle']:d} "
              f"{row['codec']:>11}: ratio {row['ratio']:6.2f}, "
              f"{row['mb_per_s_one_thread']:6.0f} MB/s on one thread", flush=True)
    for v in variants:
        finder(v[1]).find(unique[:8], progress=False)   # compiled for each window dtype

    folder = Path(tempfile.mkdtemp(dir=args.dir, prefix="result_write_"))
    expected = raw_per_frame * args.frames
    if expected > 0.8 * shutil.disk_usage(folder).free:
        shutil.rmtree(folder)
        raise SystemExit(f"{expected / 1e9:.1f} GB of results would not fit in {folder}: "
                         "lower --frames or give --dir on a larger disk")
    runs: list[dict] = []
    disks: list[dict] = []
    try:
        for round_ in range(args.repeats):
            disks.append(disk_rate(folder, int(expected)))
            print(f"round {round_ + 1}: disk {disks[-1]['mb_per_s']:.0f} MB/s "
                  f"({disks[-1]['bytes'] / 1e9:.1f} GB written and fsync'd)", flush=True)
            t0 = time.perf_counter()
            result = finder().find(RepeatedSource(unique, args.frames), progress=False)
            seconds = time.perf_counter() - t0
            runs.append({"variant": "memory", "round": round_, "seconds": seconds,
                         "frames_per_s": args.frames / seconds,
                         "clusters": int(result.sizes["cluster"])})
            del result
            print(f"  in memory: {runs[-1]['frames_per_s']:.0f} frames/s", flush=True)
            for compression, window_dtype in variants:
                runs.append({"round": round_, **writer_alone(
                    warm, folder / "alone.nc", args.frames, compression, window_dtype)})
                r = runs[-1]
                print(f"  {r['variant']}: {r['frames_per_s']:7.0f} frames/s, "
                      f"{r['bytes_per_frame'] / 1e3:6.1f} kB/frame, "
                      f"{r['mb_per_s_written']:5.0f} MB/s written", flush=True)
            for compression, window_dtype in variants:
                path = folder / f"{compression}_{window_dtype}.nc"
                t0 = time.perf_counter()
                with finder(window_dtype).find(RepeatedSource(unique, args.frames),
                                               progress=False, out=path,
                                               compression=compression) as result:
                    seconds = time.perf_counter() - t0
                    clusters = int(result.sizes["cluster"])
                    clipped = int(result["n_window_clipped"].sum()) \
                        if "n_window_clipped" in result else 0
                size = path.stat().st_size
                path.unlink()
                runs.append({
                    "variant": f"{compression}:{window_dtype}", "round": round_,
                    "compression": compression, "window_dtype": window_dtype,
                    "seconds": seconds, "frames_per_s": args.frames / seconds,
                    "file_bytes": size, "bytes_per_frame": size / args.frames,
                    "mb_per_s_written": size / seconds / 1e6, "clusters": clusters,
                    "window_taps_clipped": clipped, "writer_seconds": ACCOUNTS[-1]})
                r = runs[-1]
                print(f"  {r['variant']:>14}: {r['frames_per_s']:7.0f} frames/s, "
                      f"{r['bytes_per_frame'] / 1e3:6.1f} kB/frame, "
                      f"{r['mb_per_s_written']:5.0f} MB/s written; "
                      + ", ".join(f"{k} {v:.2f} s" for k, v in r["writer_seconds"].items()),
                      flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    def best(variant, key="frames_per_s"):
        return max(r[key] for r in runs if r["variant"] == variant)

    disk = max(d["mb_per_s"] for d in disks)
    summary = {"disk_mb_per_s": {"min": min(d["mb_per_s"] for d in disks), "max": disk},
               "memory_frames_per_s": best("memory"),
               "raw_bytes_per_frame": raw_per_frame,
               "writer_alone_frames_per_s": {
                   ":".join(v): {"min": min(r["frames_per_s"] for r in runs
                                            if r["variant"] == "writer alone " + ":".join(v)),
                                 "max": best("writer alone " + ":".join(v))}
                   for v in variants}}
    for v in variants:
        name = ":".join(v)
        fps = [r["frames_per_s"] for r in runs if r["variant"] == name]
        summary[name] = {
            "frames_per_s": {"min": min(fps), "max": max(fps)},
            "bytes_per_frame": min(r["bytes_per_frame"] for r in runs if r["variant"] == name),
            "of_memory_rate": max(fps) / best("memory"),
            "written_of_disk_rate": best(name, "mb_per_s_written") / disk,
            "frames_per_s_disk_bound": disk * 1e6 / min(
                r["bytes_per_frame"] for r in runs if r["variant"] == name)}
        if ("none", "int32") in variants:
            ratios = [r["frames_per_s"] / u["frames_per_s"] for r in runs for u in runs
                      if r["variant"] == name and u["variant"] == "none:int32"
                      and u["round"] == r["round"]]
            summary[name]["of_uncompressed_rate"] = {"min": min(ratios), "max": max(ratios)}
    record = {
        "benchmark": "result_write", "git_commit": git_commit(HERE.parent),
        "aare_lab_version": aare_lab.__version__, "deflate_library": DEFLATE_LIBRARY,
        "writer_threads": pool_threads("result_file"),
        "host": {"cpu": cpu_name(), "cores": len(os.sched_getaffinity(0)),
                 "numpy": np.__version__},
        "parameters": {"finder": args.finder, "frame_shape": [ny, nx],
                       "photons_per_frame": args.photons, "frames": args.frames,
                       "unique_frames": args.unique, "cluster_size": args.cluster_size,
                       "pedestal_dtype": args.pedestal_dtype, "n_sigma": N_SIGMA,
                       "repeats": args.repeats},
        "codecs": table, "disk": disks, "runs": runs, "summary": summary}
    if args.finder == "cuda":
        from aare_lab.gpu import device_info

        record["gpu"] = device_info()
    for name, s in summary.items():
        if isinstance(s, dict) and "bytes_per_frame" in s:
            versus = s.get("of_uncompressed_rate")
            print(f"{name}: {s['frames_per_s']['min']:.0f}-{s['frames_per_s']['max']:.0f} "
                  f"frames/s ({s['of_memory_rate']:.0%} of in memory"
                  + (f", {versus['min']:.2f}-{versus['max']:.2f}x uncompressed" if versus
                     else "") + f"), {s['bytes_per_frame'] / 1e3:.1f} kB/frame, writes at "
                  f"{s['written_of_disk_rate']:.0%} of the disk's {disk:.0f} MB/s")
    write_record(record, args.out)


if __name__ == "__main__":
    main()
