"""How fast each of this host's cores runs while the others work: the ceiling on what any
finder's threads can get from all cores, whatever it does between them.

    python benchmarks/host_cores.py [--seconds 0.3]

Each test runs one Python thread per CPU, pinned to it (``os.sched_setaffinity``), each
calling the same compiled loop without the GIL, started together; a thread's rate is its
own work over its own time. Two loops: ``fma``, 64 independent multiply-adds an iteration
(vector code that fills the floating-point ports: two threads that share a physical core
share them), and ``chain``, one dependent multiply-add an iteration (bound by latency,
so only the clock moves it). Printed: each CPU alone; each CPU beside CPU 0 (a hidden
hyperthread sibling of CPU 0 halves both); the first 1, 2, 4, 8, ... CPUs together; and
the topology the kernel reports.
"""
import argparse
import os
import subprocess
import threading
import time

import numpy as np
from numba import njit

LANES = 64


@njit(nogil=True, cache=True)
def fma_loop(n, acc):
    """``n`` iterations of ``LANES`` independent multiply-adds."""
    for _ in range(n):
        for k in range(LANES):
            acc[k] = acc[k] * 0.999999 + 1e-6
    return acc.sum()


@njit(nogil=True, cache=True)
def chain_loop(n, x):
    """``n`` dependent multiply-adds."""
    for _ in range(n):
        x = x * 0.999999 + 1e-6
    return x


def run_loop(kind, n):
    if kind == "fma":
        fma_loop(n, np.ones(LANES))
    else:
        chain_loop(n, 1.0)


def rates(kind, cpus, n):
    """Iterations per second of each thread, one on each of ``cpus``, run together."""
    start = threading.Barrier(len(cpus))
    out = [0.0] * len(cpus)

    def work(slot, cpu):
        os.sched_setaffinity(0, {cpu})
        run_loop(kind, 1000)
        start.wait()
        t0 = time.perf_counter()
        run_loop(kind, n)
        out[slot] = n / (time.perf_counter() - t0)

    threads = [threading.Thread(target=work, args=(k, c)) for k, c in enumerate(cpus)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def calibrated(kind, cpu, seconds):
    """Iterations of ``kind`` that take about ``seconds`` on ``cpu`` alone."""
    n = 1000
    while n / rates(kind, [cpu], n)[0] < seconds / 4:
        n *= 4
    return int(seconds * rates(kind, [cpu], n)[0])


def describe(values):
    return f"{min(values):5.2f}..{max(values):5.2f} (mean {np.mean(values):5.2f})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=0.3)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    print(f"{len(cpus)} CPUs: {cpus}")
    for kind in ("fma", "chain"):
        n = calibrated(kind, cpus[0], args.seconds)
        alone = {c: rates(kind, [c], n)[0] for c in cpus}
        print(f"\n{kind}: {n} iterations a thread; each CPU alone, of CPU {cpus[0]}'s "
              f"({alone[cpus[0]] * (LANES if kind == 'fma' else 1) / 1e9:.2f} G "
              f"multiply-adds/s): {describe([alone[c] / alone[cpus[0]] for c in cpus])}")
        pairs = []
        for c in cpus[1:]:
            r0, rc = rates(kind, [cpus[0], c], n)
            pairs.append((c, r0 / alone[cpus[0]], rc / alone[c]))
        print(f"{kind}: beside CPU {cpus[0]}, each thread of its rate alone:")
        print("  " + "  ".join(f"{c}: {a:.2f}/{b:.2f}" for c, a, b in pairs))
        n_threads = 1
        while True:
            n_threads = min(n_threads, len(cpus))
            chosen = cpus[:n_threads]
            together = rates(kind, chosen, n)
            share = [r / alone[c] for r, c in zip(together, chosen)]
            print(f"{kind}: {n_threads:3d} CPUs together, each of its rate alone "
                  f"{describe(share)}; all together {sum(share):5.2f} CPUs' worth")
            if n_threads == len(cpus):
                break
            n_threads *= 2
    print()
    for cmd in (["lscpu"], ["sh", "-c", "grep -H . /sys/devices/system/cpu/cpu*/topology/"
                                        "thread_siblings_list | head -64"]):
        try:
            print(subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout)
        except OSError as error:
            print(f"{cmd[0]}: {error}")


if __name__ == "__main__":
    main()
