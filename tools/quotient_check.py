"""Check, exhaustively on the CPU, a branch-free float32 quotient for the GPU kernel.

The kernel divides each pixel's ``s`` and ``s2`` by the pedestal count ``N`` every frame.
Correctly rounded division (``-prec-div=true``) compiles to MUFU.RCP, FCHK and a branch to
a slow path, so a thread's divisions run one after the other and a second pixel's cannot
run beside its first (``kernels/README.md``). Every pixel divides by the same ``N``, so a
reciprocal ``r = RN(1/N)`` could be formed once per launch and each quotient finished with
Markstein's correction, ``q = RN(s·r)``, ``q' = fma(fma(-q, N, s), r, q)``: two FMAs and a
product, no branch. Where nothing under- or overflows, scaling ``s`` or ``N`` by a power of
two scales every step exactly, so one binade of ``s`` and the odd ``N`` cover all normal
``s`` and every ``N``; this script compares ``q'`` with NumPy's IEEE division for every
float32 significand and the ``N`` given, emulating the FMAs exactly.

``python tools/quotient_check.py 1 3 999 1001`` (odd N; even N are covered by their odd
part). Zero, subnormal and huge ``s`` are not covered: the kernel would send them to the
division it has now (``-0 / N`` is ``-0``, the correction gives ``+0``).
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np

#: The float32 significands: one binade of s.
ONE = int(np.array(np.float32(1.0)).view(np.uint32))
BINADE = 1 << 23


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``RN32(a·b + c)`` for float32 arrays, exactly: the product is exact in float64, the
    sum rounds once to float64, and only where that lands on a float32 midpoint can the
    second rounding differ from one rounding of the exact value, so those few are redone
    in rational arithmetic."""
    x = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
    out = x.astype(np.float32)
    low = x.view(np.uint64) & np.uint64((1 << 29) - 1)
    for i in np.flatnonzero((low == np.uint64(1 << 28)) & np.isfinite(x) & (x != 0)):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        near = np.float32(float(exact))
        candidates = (np.nextafter(near, np.float32(-np.inf)), near,
                      np.nextafter(near, np.float32(np.inf)))
        out[i] = min(candidates, key=lambda v: (abs(Fraction(float(v)) - exact),
                                                int(np.array(v).view(np.uint32)) & 1))
    return out


def mismatches(n: int, chunk: int = 1 << 23) -> int:
    """How many float32 significands ``s`` in [1, 2) give a corrected quotient other than
    ``s / n`` rounded."""
    n32 = np.float32(n)
    r = np.float32(1) / n32
    bad = 0
    for start in range(ONE, ONE + BINADE, chunk):
        s = np.arange(start, min(start + chunk, ONE + BINADE), dtype=np.uint32).view(np.float32)
        q = s * r
        e = fma32(-q, np.full_like(q, n32), s)
        corrected = fma32(e, np.full_like(q, r), q)
        bad += int(np.count_nonzero(corrected.view(np.uint32) != (s / n32).view(np.uint32)))
    return bad


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="+", help="pedestal counts N (odd)")
    args = parser.parse_args(argv)
    started, total = time.time(), 0
    for n in args.n:
        bad = mismatches(n)
        total += bad
        print(f"N = {n}: {bad} of {BINADE} significands differ", flush=True)
    print(f"{len(args.n)} values of N, {total} mismatches, {time.time() - started:.0f} s")
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
