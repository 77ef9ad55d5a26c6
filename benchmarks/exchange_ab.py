"""The two exchanges of edge rows on the user's paths, alternately in one process.

``python benchmarks/exchange_ab.py`` times, for MÖNCH frames with float32 state (where
`aare_lab.gpu.kernels.KernelSpec.exchange_in_words` chooses words that carry their frame),
the chunk kernel alone, ``find_batches`` from device memory with the clusters brought to the
host, and the spectrum from device memory, once with words and once with rows and flags
(``WORDS_MAX_PIXELS_PER_THREAD`` set to 0 while the second finder is made: its cut of the
frame and its kernel spec take the choice then, and the spec keys the loaded kernel with
it), round after round: the kernel alone is what ``kernel_variants.py`` measures; the
others are what a user gets. ``--shape 512x1024 --words-max 4`` times words where the
shipped choice takes flags (JUNGFRAU-wide frames, four pixels per thread, cut into equal
shares of pixels with words). Results go to ``benchmarks/results/`` as JSON.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_pipeline import clusters_of, kernel_seconds, repeat  # noqa: E402
from kernel_variants import MOENCH_PHOTONS, MOENCH_PIXELS  # noqa: E402
from records import git_commit, summary, write_record  # noqa: E402

from aare_lab import Pedestal  # noqa: E402
from aare_lab.commands.options import frame_shape  # noqa: E402
from aare_lab.finders import CudaFinder  # noqa: E402
from aare_lab.gpu import cupy_or_raise, device_info, kernels  # noqa: E402
from aare_lab.model.params import parse_cluster_size  # noqa: E402
from aare_lab.simulate import Beam, Detector, Simulator  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10240)
    parser.add_argument("--unique", type=int, default=512)
    parser.add_argument("--sizes", default="3x3")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--shape", type=frame_shape, default=(400, 400), metavar="NYxNX",
                        help="frame shape NYxNX (photons per frame scale with the area)")
    parser.add_argument("--words-max", type=int, default=kernels.WORDS_MAX_PIXELS_PER_THREAD,
                        help="the most pixels per thread that take words in the words rounds "
                             "(default: the shipped %(default)s)")
    args = parser.parse_args(argv)
    cp = cupy_or_raise()
    ny, nx = args.shape
    sim = Simulator(Detector(frame_shape=(ny, nx)),
                    Beam(photons_per_frame=MOENCH_PHOTONS * ny * nx / MOENCH_PIXELS), seed=1)
    dark = sim.dark(1000)
    unique = sim.frames(args.unique)[0]
    dev = cp.asarray(np.resize(unique, (args.frames, *unique.shape[1:])))
    ped = Pedestal(unique.shape[1:], 1000, "float32")
    ped.push_dark(dark)
    words_max = kernels.WORDS_MAX_PIXELS_PER_THREAD
    record = {"benchmark": "exchange_ab", "date": datetime.now(timezone.utc).isoformat(),
              "git_commit": git_commit(), "gpu": device_info(),
              "parameters": {"frames": args.frames, "unique_frames": args.unique,
                             "rounds": args.rounds, "repeats": args.repeats,
                             "words_max_pixels_per_thread": args.words_max,
                             "state_dtype": "float32", "frame_shape": list(unique.shape[1:])},
              "cases": []}
    for size in (parse_cluster_size(s) for s in args.sizes.split(",")):
        for round_ in range(args.rounds):
            for exchange, limit in (("words", args.words_max), ("flags", 0)):
                kernels.WORDS_MAX_PIXELS_PER_THREAD = limit
                finders = [CudaFinder(ped.copy(), 5.0, size) for _ in range(3)]
                for f in finders:
                    f._to_device()
                assert all(f._engine.spec.exchange_in_words == (exchange == "words")
                           for f in finders)
                clusters = repeat(cp, lambda: clusters_of(finders[0].find_batches(dev)),
                                  args.repeats)
                spectrum = repeat(cp, lambda: int(finders[1].spectrum(
                    dev, progress=False)["counts"].sum()), args.repeats)
                kernel = kernel_seconds(cp, finders[2], dev, args.repeats)
                case = {"cluster_size": f"{size[0]}x{size[1]}", "round": round_,
                        "exchange": exchange,
                        "device_clusters": {**clusters, **summary(clusters["seconds"],
                                                                  args.frames)},
                        "device_spectrum": {**spectrum, **summary(spectrum["seconds"],
                                                                  args.frames)},
                        "kernel": {"seconds": kernel, **summary(kernel, args.frames)}}
                record["cases"].append(case)
                print(f"{size[0]}x{size[1]} round {round_} {exchange:5s}: kernel "
                      f"{case['kernel']['best_fps']:8.0f}, device clusters "
                      f"{case['device_clusters']['best_fps']:8.0f} "
                      f"({max(clusters['minor_faults'])} minor faults), device spectrum "
                      f"{case['device_spectrum']['best_fps']:8.0f} frames/s", flush=True)
    kernels.WORDS_MAX_PIXELS_PER_THREAD = words_max
    write_record(record, args.out)


if __name__ == "__main__":
    main()
