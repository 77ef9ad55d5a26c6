"""Where the chunk kernel's time per frame goes: time variants that leave one stage out.

Run on a machine with an NVIDIA GPU: ``python benchmarks/kernel_variants.py``. Each
variant is the source of ``kernels/frozen.cu`` with one stage removed by a text patch
(its results are wrong by design; only its time matters), compiled with the finder's own
options and timed with CUDA events on device-resident MÖNCH frames, chunk after chunk,
in the same process. The differences to ``as shipped`` place the time inside the kernel
without hardware counters (METHOD.md). ``--baseline FILE`` also times the kernel of another
source as it is, e.g. an earlier commit's (``git show HEAD:kernels/frozen.cu > FILE``), with
the same finder and shared memory, so old and new are measured in one run; ``--threads``
times each at several block sizes. ``--path spectrum`` times ``finder.spectrum()`` from
device memory (the slider's re-find) instead of the launches alone. Each compiled kernel's
registers per thread and local memory (spills) are recorded beside its time. Results go to
``benchmarks/results/`` as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_pipeline import kernel_seconds, repeat  # noqa: E402
from records import git_commit, write_record  # noqa: E402

from aare_lab import Pedestal  # noqa: E402
from aare_lab.commands.options import frame_shape  # noqa: E402
from aare_lab.finders import CudaFinder  # noqa: E402
from aare_lab.gpu import cupy_or_raise, device_info  # noqa: E402
from aare_lab.gpu.kernels import (  # noqa: E402
    DEFAULT_BLOCK_THREADS,
    ENTRY,
    OPTIONS,
    SOURCE,
    kernel_dir,
)
from aare_lab.model.params import parse_cluster_size  # noqa: E402
from aare_lab.simulate import Beam, Detector, Simulator  # noqa: E402

#: The simulator's MÖNCH beam: 2300 photons on 400x400 pixels, kept per pixel on other shapes.
MOENCH_PHOTONS, MOENCH_PIXELS = 2300, 400 * 400

#: No waits for the neighbouring bands' flags.
_NO_WAIT = ("await(&sync", "(void)(&sync")
#: No waits, and with words no sending (with flags the rows are still sent).
_NO_WAIT_OR_SEND = [_NO_WAIT, ("send_value(&slot[band + p], v, f + 1);", "(void)slot;")]
_NO_EXCHANGE = [*_NO_WAIT_OR_SEND, ("for (int k = tid; k < above + below; k += T)",
                                    "for (int k = tid; k < 0; k += T)")]
_OWN_VALUE = "tile[tile_index(idx, t_lo)] = tile[tile_index(band + k % P, t_lo)];"
_NO_WRITES = [("unsigned int pending = ballot;", "unsigned int pending = 0;")]
#: name: (what is left out, [(text, replacement), ...])
VARIANTS = {
    "as shipped": ("nothing", []),
    "no neighbour wait": ("the waits for the neighbouring bands (halo data stale): with flags "
                          "no wait for them, with words each word read once",
                          [_NO_WAIT,
                           ("} while ((unsigned int)(w >> 32) != frame);", "} while (0);")]),
    "no halo exchange": ("the waits and the halo's reads, and with words the sending (with "
                         "flags the rows are still sent and the flag published); the halo "
                         "rows keep their zeros, so at 9x9 the decisions change",
                         _NO_EXCHANGE),
    "no cluster writes": ("writing the stored windows (whose region entries the last phase "
                          "then moves unwritten, so it may fault)", _NO_WRITES),
    "band alone": ("as 'no halo exchange', and writing the stored windows (whose region "
                   "entries the last phase then moves unwritten, so it may fault)",
                   [*_NO_EXCHANGE, *_NO_WRITES]),
    "halo from the band": ("as 'no halo exchange', with the halo rows filled from the band's "
                           "own values (photons as dense, the decisions not the same): an "
                           "estimate of the work with temporal blocking's exchange gone and "
                           "its halo free",
                           [*_NO_WAIT_OR_SEND,
                            ("receive_value(&slot[idx], f + 1, tile[tile_index(idx, t_lo)]);",
                             _OWN_VALUE),
                            ("tile[tile_index(idx, t_lo)] = __ldcg(&slot[idx]);", _OWN_VALUE)]),
    "first window row": ("every window row but the first in the decision's taps (so the "
                         "decisions differ)",
                         [("for (int a = 0; a < CLUSTER_NY; ++a)", "for (int a = 0; a < 1; ++a)")]),
    "one thread waits": ("nothing (flags only; with words, as shipped): thread 0 alone "
                         "acquires the neighbours' flags and the block meets at a barrier "
                         "before the halo copy (three block barriers per frame, not two)",
                         [("if (b > 0)\n                await(",
                           "if (tid == 0 && b > 0)\n                await("),
                          ("if (b < G - 1)\n                await(&sync[(b + 1) * FLAG_STRIDE], "
                           "f + 1);",
                           "if (tid == 0 && b < G - 1)\n                await(&sync[(b + 1) * "
                           "FLAG_STRIDE], f + 1);\n            __syncthreads();")]),
}


def device_frames(cp, shape: tuple[int, int], n_frames: int):
    """The simulator's MÖNCH beam on frames of ``shape`` (photons per pixel kept): the
    simulator, 1000 dark frames, and ``n_frames`` frames in GPU memory, 512 unique ones
    repeated."""
    ny, nx = shape
    sim = Simulator(Detector(frame_shape=(ny, nx)),
                    Beam(photons_per_frame=MOENCH_PHOTONS * ny * nx / MOENCH_PIXELS), seed=1)
    dark = sim.dark(1000)
    unique = sim.frames(512)[0]
    return sim, dark, cp.asarray(np.resize(unique, (n_frames, ny, nx)))


def patched(source: str, name: str) -> str:
    """``source`` with the text patches of the variant ``name``."""
    for old, new in VARIANTS[name][1]:
        assert old in source, (name, old)
        source = source.replace(old, new)
    return source


def fits_engine(source: str, spec) -> bool:
    """Whether the engine's exchange buffer suits ``source`` for ``spec``: a source that
    sends every variant's edge rows in words (``send_value`` without ``EXCHANGE_IN_WORDS``,
    as ``ll_exchange_20261202.patch``) needs the words' buffer, which the engine lays out
    only where `KernelSpec.exchange_in_words` holds; elsewhere it would write past the rows'
    buffer (an illegal address ends the run)."""
    words_only = "send_value(" in source and "EXCHANGE_IN_WORDS" not in source
    return spec.exchange_in_words or not words_only


#: cuFuncGetAttribute: CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
_ATTR_REGS, _ATTR_LOCAL_BYTES = 4, 3


def compile_variant(cp, source: str, spec, extra=()):
    from cupy.cuda import compiler

    cubin, _ = compiler.compile_using_nvrtc(source, [*OPTIONS, *spec.defines(), *extra],
                                            compiler._get_arch(), filename=SOURCE)
    module = cp.cuda.function.Module()
    module.load(cubin)
    return module, module.get_function(ENTRY)


def time_kernel(cp, finder, kernel, dev, repeats, path="kernel"):
    """Seconds of ``path`` with ``kernel`` in place of the finder's own: ``kernel`` as
    `gpu_pipeline.kernel_seconds`; ``spectrum`` the wall time of ``finder.spectrum(dev)``
    (the slider's re-find, the finder's state restored before each run) as
    `gpu_pipeline.repeat` times it."""
    engine = finder._engine
    engine.kernel = kernel
    cp.cuda.driver.funcSetAttribute(
        kernel.ptr, cp.cuda.driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, engine.shared)
    if path == "kernel":
        return kernel_seconds(cp, finder, dev, repeats)
    snap = finder.snapshot()
    return repeat(cp, lambda: finder.spectrum(dev, progress=False), repeats,
                  lambda: finder.restore(snap))["seconds"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--baseline", type=Path, action="append", default=[],
                        help="also time the kernel of this source as it is (repeatable)")
    parser.add_argument("--threads", default=str(DEFAULT_BLOCK_THREADS),
                        help="block sizes to time each kernel at, comma-separated")
    parser.add_argument("--chunk-frames", default=str(CudaFinder.default_chunk_frames),
                        help="frames per launch to time each kernel at, comma-separated")
    parser.add_argument("--sizes", default="3x3,9x9", help="cluster sizes, comma-separated")
    parser.add_argument("--shape", type=frame_shape, default=(400, 400), metavar="NYxNX",
                        help="frame shape NYxNX (photons per frame scale with the area)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="the variants to time, comma-separated (default: all)")
    parser.add_argument("--path", choices=("kernel", "spectrum"), default="kernel",
                        help="what to time: the kernel's launches alone (CUDA events), or "
                             "finder.spectrum() from device memory (wall time)")
    parser.add_argument("--lineinfo", action="store_true",
                        help="compile with -lineinfo, so that a profiler maps samples to lines")
    args = parser.parse_args(argv)
    chosen = args.variants.split(",")
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    cp = cupy_or_raise()
    ny, nx = args.shape
    sim, dark, dev = device_frames(cp, (ny, nx), args.frames)
    source = (kernel_dir() / SOURCE).read_text()
    kernels = [(name, left_out, patched(source, name)) for name, (left_out, _) in VARIANTS.items()
               if name in chosen]
    kernels += [(f"baseline {path.name}", f"nothing: the kernel of {path}", path.read_text())
                for path in args.baseline]
    record = {"benchmark": "kernel_variants", "date": datetime.now(timezone.utc).isoformat(),
              "git_commit": git_commit(), "gpu": device_info(),
              "parameters": {"frames": args.frames, "repeats": args.repeats,
                             "threads": args.threads, "chunk_frames": args.chunk_frames,
                             "frame_shape": [ny, nx], "path": args.path,
                             "photons_per_frame": sim.beam.photons_per_frame},
              "cases": []}
    for dtype in args.dtypes.split(","):
        ped = Pedestal((ny, nx), 1000, dtype)
        ped.push_dark(dark)
        for size in (parse_cluster_size(s) for s in args.sizes.split(",")):
            for threads, chunk in itertools.product(
                    [int(t) for t in args.threads.split(",")],
                    [int(c) for c in args.chunk_frames.split(",")]):
                finder = CudaFinder(ped.copy(), 5.0, size, chunk_frames=chunk,
                                    block_threads=threads)
                finder._to_device()
                spec = finder._engine.spec
                for name, left_out, text in kernels:
                    line = (f"{dtype} {size[0]}x{size[1]} {threads:4d} threads {chunk:5d} "
                            f"frames {name:24s}")
                    if not fits_engine(text, spec):
                        print(f"{line} skipped: it sends words, the engine laid out rows",
                              flush=True)
                        continue
                    module, kernel = compile_variant(cp, text, spec,
                                                     ["-lineinfo"] if args.lineinfo else [])
                    regs = cp.cuda.driver.funcGetAttribute(_ATTR_REGS, kernel.ptr)
                    local = cp.cuda.driver.funcGetAttribute(_ATTR_LOCAL_BYTES, kernel.ptr)
                    seconds = time_kernel(cp, finder, kernel, dev, args.repeats, args.path)
                    us = [s / args.frames * 1e6 for s in seconds]
                    record["cases"].append({
                        "pedestal_dtype": dtype, "cluster_size": f"{size[0]}x{size[1]}",
                        "block_threads": threads, "chunk_frames": chunk,
                        "bands": finder._engine.n_bands,
                        "pixels_per_thread": spec.pixels_per_thread,
                        "registers": regs, "local_bytes": local,
                        "variant": name, "left_out": left_out, "seconds": seconds,
                        "us_per_frame_best": min(us), "us_per_frame_median": statistics.median(us)})
                    print(f"{line} {min(us):6.2f} us/frame (median {statistics.median(us):6.2f}) "
                          f"{regs} regs, {local} B local", flush=True)
    write_record(record, args.out)


if __name__ == "__main__":
    main()
