"""What Numba compiles the CPU finders for on this host, and the frozen finder's rate when
it is told to compile for other CPUs.

    python benchmarks/cpu_target.py [--frames 150] [default haswell sapphirerapids ...]
    python benchmarks/cpu_target.py default/-prefer-256-bit znver4/+prefer-256-bit

Prints Numba's CPU name and features (what LLVM tunes and vectorises for: a virtual
machine that hides its CPU model may leave the name generic while the features stay) and
the kernel's model name and vector flags; then, for each name given (``default``: Numba's
own choice), a fresh process with ``NUMBA_CPU_NAME`` set and a cache of its own compiles
the frozen finder and times ``find`` on one thread, 3x3, on the simulated MÖNCH run of
``frozen_scaling.py`` (best of 4). ``name/feature``: the CPU ``name`` (``default``: the
host's) with this host's features and one more, ``NUMBA_CPU_FEATURES``: LLVM tunes its
Intel AVX-512 CPUs to ``prefer-256-bit`` vectors and AMD's Zen 4 and 5 not, so
``sapphirerapids/-prefer-256-bit`` and ``znver4/+prefer-256-bit`` tell what the vector
width is worth. The same clusters whatever the target: the finders use
no fast math, so every operation rounds as specified on any instruction set.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import llvmlite.binding as llvm
from numba.misc.numba_sysinfo import get_sysinfo

HERE = Path(__file__).resolve().parent
TIMED = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
from frozen_scaling import moench_run
from aare_lab import FrozenFinder
ped, frames, _ = moench_run(int(sys.argv[2]))
t = time.perf_counter()
FrozenFinder(ped.copy(), 5.0, 3, threads=1).find(frames[:2], progress=False)
compile_s = time.perf_counter() - t
best = float("inf")
for _ in range(4):
    finder = FrozenFinder(ped.copy(), 5.0, 3, threads=1)
    t = time.perf_counter()
    finder.find(frames, progress=False)
    best = min(best, time.perf_counter() - t)
print(f"compile {compile_s:5.1f} s, frozen 3x3 1 thread {len(frames) / best:6.0f} frames/s")
'''


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("targets", nargs="*", default=["default"])
    args = parser.parse_args()
    info = get_sysinfo()
    print(f"Numba's CPU name: {info.get('CPU Name')}\nNumba's CPU features: "
          f"{info.get('CPU Features')}", flush=True)
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                print(f"model name: {value.strip()}")
            if key.strip() == "flags":
                flags = set(value.split())
                print("vector flags:", " ".join(sorted(f for f in flags
                                                       if f.startswith(("avx", "fma", "sse4")))))
                break
    for target in args.targets:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            name, _, feature = target.partition("/")
            if name != "default":
                env["NUMBA_CPU_NAME"] = name
            if feature:
                env["NUMBA_CPU_FEATURES"] = f"{llvm.get_host_cpu_features().flatten()},{feature}"
            run = subprocess.run([sys.executable, "-c", TIMED, str(HERE), str(args.frames)],
                                 env=env, capture_output=True, text=True)
            last = (run.stderr.strip().splitlines() or ["no output"])[-1]
            result = run.stdout.strip() or f"failed: {last}"
            print(f"{target:>28}: {result}", flush=True)


if __name__ == "__main__":
    main()
