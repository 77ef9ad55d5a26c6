"""Registers and spills of the chunk kernel's variants, compiled here without a GPU.

``python benchmarks/kernel_resources.py [--source FILE ...]`` compiles the shipped
``kernels/frozen.cu`` (and each ``--source``, e.g. an earlier commit's or a patched one) for
Hopper with NVRTC from PyPI (``pip install '.[nvrtc]'``, `aare_lab.gpu.nvrtc`) for MÖNCH
and JUNGFRAU-wide frames, both state dtypes, 3x3 and 9x9 windows, and prints what ptxas
reports: registers per thread, stack frame and spill bytes. No GPU is needed, so a change
that costs registers shows before device time is spent on it; the NVRTC here need not be
the GPU machine's, whose counts ``kernel_variants.py`` records beside its timings.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import git_commit, write_record  # noqa: E402

from aare_lab.gpu.kernels import DEFAULT_BLOCK_THREADS, SOURCE, KernelSpec, kernel_dir  # noqa: E402
from aare_lab.gpu.nvrtc import DEFAULT_ARCH, compile_offline, library_path  # noqa: E402

#: (frame width, pixels per thread at 1024 threads) of the frames timed on the GPU machine.
FRAMES = {"MÖNCH 400x400": (400, 2), "JUNGFRAU-wide 512x1024": (1024, 4)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, action="append", default=[],
                        help="also compile this CUDA source (repeatable)")
    parser.add_argument("--arch", type=int, default=DEFAULT_ARCH,
                        help="compute capability without its dot (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the record as JSON into this folder")
    args = parser.parse_args(argv)
    sources = {"shipped": (kernel_dir() / SOURCE).read_text()}
    sources.update({path.name: path.read_text() for path in args.source})
    record = {"benchmark": "kernel_resources", "date": datetime.now(timezone.utc).isoformat(),
              "git_commit": git_commit(), "nvrtc": library_path().name, "arch": args.arch,
              "cases": []}
    for frame, (nx, per_thread) in FRAMES.items():
        for dtype in ("float32", "float64"):
            for size in ((3, 3), (9, 9)):
                spec = KernelSpec(dtype, "int32", size, per_thread, nx, DEFAULT_BLOCK_THREADS)
                for name, text in sources.items():
                    c = compile_offline(spec, args.arch, source=text)
                    record["cases"].append({
                        "frame": frame, "state_dtype": dtype,
                        "cluster_size": f"{size[0]}x{size[1]}", "source": name,
                        "registers": c.registers, "stack_bytes": c.stack_bytes,
                        "spill_store_bytes": c.spill_store_bytes,
                        "spill_load_bytes": c.spill_load_bytes})
                    print(f"{frame:24s} {dtype} {size[0]}x{size[1]} {name:24s} "
                          f"{c.registers:3d} registers, stack {c.stack_bytes:4d} B, spills "
                          f"{c.spill_store_bytes:4d} B stored / {c.spill_load_bytes:4d} B loaded",
                          flush=True)
    if args.out is not None:
        write_record(record, args.out)


if __name__ == "__main__":
    main()
