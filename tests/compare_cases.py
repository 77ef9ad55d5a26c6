"""Hand-built runs where two finders disagree by design, with the answers worked out,
and a synthetic result with chosen cluster energies.

Pedestals have mean 101 and rms 1 exactly (N = 4 dark frames alternating 100 and 102), so
with n_sigma = 5 the threshold is 5 and Test 3 needs a 3x3 window sum above 15. A pixel
whose pedestal-subtracted value is ``v`` reads 101 + v. A QUIET_UPDATE of a pixel at
``v`` moves its mean to 101 + v / 4, so a value read after the update is 3/4 of ``v``.
"""

from __future__ import annotations

import numpy as np

from aare_lab import FrozenFinder, SerialFinder
from aare_lab.detector.pedestal import Pedestal
from aare_lab.model.results import make_result
from aare_lab.model.spec import FinderSpec

MEAN, N_DARK = 101, 4
SHAPE = (12, 24)

# Timing case, frame 0 (serial = A, frozen = B). Pattern "store": the frozen finder stores
# P1 by Test 3 (4 + 4 + 5 + 3 = 16 > 15); the serial finder has already pushed the 4s above
# and to the left (read as 3 each), sums 14 and pushes P1 instead.
P1 = (3, 4)
P1_BIS = (9, 6)
# Pattern "shift": Q = 5 left of P2 = 4 with a column of 4s to the right. Frozen: P2 is not
# the maximum (TEST3_SKIP) and its right neighbour R2 stores (4 + 4 + 4 + 4 = 16).
# Serial: Q is pushed (3.75) before P2, which becomes the maximum and stores (18.75);
# R2 then reads the pushed 4 above it as 3 and sums 15: QUIET_UPDATE.
P2 = (3, 13)
R2 = (3, 14)
PHOTON = (9, 20)  # v = 20: TEST1_STORE in both, the one agreed cluster


def unit_pedestal(shape=SHAPE, dtype="float64") -> Pedestal:
    dark = np.empty((N_DARK, *shape), np.uint16)
    dark[0::2] = MEAN - 1
    dark[1::2] = MEAN + 1
    ped = Pedestal(shape, N_DARK, dtype)
    ped.push_dark(dark)
    return ped


def raw(v) -> np.ndarray:
    return (MEAN + np.asarray(v)).astype(np.uint16)


def store_pattern(v, p):
    y, x = p
    v[y, x - 1] = 4
    v[y, x] = 5
    v[y - 1, x + 1] = 4
    v[y, x + 1] = 3


def shift_pattern(v, p):
    y, x = p
    v[y, x - 1] = 5
    v[y, x] = 4
    v[y - 1:y + 2, x + 1] = 4


def timing_frames() -> np.ndarray:
    """Frame 0: the patterns; frame 1: only P1 at v = 8 on the frozen pedestal.

    In frame 1 the frozen finder (which stored P1 in frame 0, pedestal untouched) sees
    8 > 5: TEST1_STORE. The serial finder pushed 106 into P1 in frame 0 (mean 102.25,
    rms sqrt(5.4375) = 2.33, threshold 11.7), reads 6.75 and pushes it again.
    """
    v0 = np.zeros(SHAPE, int)
    store_pattern(v0, P1)
    store_pattern(v0, P1_BIS)
    shift_pattern(v0, P2)
    v0[PHOTON] = 20
    v1 = np.zeros(SHAPE, int)
    v1[P1] = 8
    return raw(np.stack([v0, v1]))


def run_pair(frames, finders=(SerialFinder, FrozenFinder), dtypes=("float64", "float64"),
             caps=(None, None), n_sigma=5.0, pedestals=None, **kwargs):
    out = []
    for k, (cls, dtype, cap) in enumerate(zip(finders, dtypes, caps)):
        ped = unit_pedestal(frames.shape[1:], dtype) if pedestals is None else pedestals[k].copy()
        out.append(cls(ped, n_sigma, 3, cap, **kwargs).find(frames, branch_maps=True,
                                                             progress=False))
    return out


# Float32 near-threshold case: n_sigma = 5 - 1e-7 is 4.9999999 in float64 but rounds to
# 5.0 in float32 (a float32 ULP at 5 is 4.8e-7), so with rms 1 a pixel at v = 5 passes
# Test 1 in float64 (5 > 4.9999999) and fails it in float32 (5 > 5 is false); its window
# sum 5 is far below Test 3's 15, so float32 pushes it.
NEAR_SIGMA = 5 - 1e-7
NEAR_PIXEL = (4, 7)


def threshold_frames() -> np.ndarray:
    v = np.zeros((10, 16), int)
    v[NEAR_PIXEL] = 5
    v[6, 13] = 30  # a photon both store
    return raw(v[np.newaxis])


def find_float32_tie(seed: int = 0, shape=(96, 96), n_pedestal=16, level=1000):
    """Search a random dark for two horizontal neighbours that tie in float32 only.

    Trains float64 and float32 pedestals on the same dark (plus a few EMA updates, so
    that the means are not multiples of 1/N) and gives the left pixel ``level`` ADU
    above its pedestal and the right one the nearest integer to the same value. Returns
    the first pair whose values are equal in the float32 arithmetic of docs/algorithm.md but
    differ in float64 while rounding to the same float32 (half an ULP apart, at most):
    ``(dark, (y, x_left), raw_left, raw_right, larger_in_float64)``.
    """
    rng = np.random.default_rng(seed)
    for _ in range(50):
        dark = np.rint(rng.normal(2500, 5, (n_pedestal + 6, *shape))).astype(np.uint16)
        p64 = Pedestal(shape, n_pedestal, "float64")
        p32 = Pedestal(shape, n_pedestal, "float32")
        p64.push_dark(dark)
        p32.push_dark(dark)
        s64, st32 = p64.state()["s"], p32.state()
        mean64 = s64 / p64.N
        xl = np.rint(mean64[:, :-1]) + level
        xr = xl + np.rint(mean64[:, 1:] - mean64[:, :-1])
        v64l, v64r = xl - mean64[:, :-1], xr - mean64[:, 1:]

        def v32(x, sl):
            return (x.astype(np.float32) - st32["off"][:, sl]) - st32["s"][:, sl] / p32.N

        v32l, v32r = v32(xl, slice(0, -1)), v32(xr, slice(1, None))
        hit = (v32l == v32r) & (v64l != v64r) \
            & (v64l.astype(np.float32) == v64r.astype(np.float32))
        if hit.any():
            y, x = (int(i) for i in np.argwhere(hit)[0])
            larger = "left" if v64l[y, x] > v64r[y, x] else "right"
            return dark, (y, x), int(xl[y, x]), int(xr[y, x]), larger
    raise AssertionError("no float32-only tie found")


def tie_frames(found, shape=(16, 16)):
    """Crop the dark around the pair; a frame with the pair at the pedestal elsewhere."""
    dark, (y, x), xl, xr, _ = found
    y0 = min(max(y - shape[0] // 2, 0), dark.shape[1] - shape[0])
    x0 = min(max(x - shape[1] // 2, 0), dark.shape[2] - shape[1])
    crop = np.ascontiguousarray(dark[:, y0:y0 + shape[0], x0:x0 + shape[1]])
    n_pedestal = dark.shape[0] - 6
    ped = Pedestal(shape, n_pedestal, "float64")
    ped.push_dark(crop)
    frame = np.rint(ped.mean)
    frame[y - y0, x - x0] = xl
    frame[y - y0, x - x0 + 1] = xr
    return crop, n_pedestal, frame.astype(np.uint16)[np.newaxis], (y - y0, x - x0)


def synthetic_result(energies, finder="frozen"):
    """A result whose clusters hold their whole energy in the centre pixel, one per frame."""
    n = len(energies)
    windows = np.zeros((n, 3, 3), np.float64)
    windows[:, 1, 1] = energies
    return make_result(spec=FinderSpec(finder, window_dtype="float64", n_pedestal=10),
                       frame_shape=(8, 8), frame_numbers=np.arange(n), n_found=np.ones(n),
                       n_kept=np.ones(n), cluster_frame=np.arange(n), cluster_y=np.full(n, 4),
                       cluster_x=np.full(n, 4), windows=windows)
