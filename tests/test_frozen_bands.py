"""The frozen finder cut into more bands than this machine has cores: a subprocess with
eight Numba threads runs every thread count from 1 to 8 on small frames, where a band is a
few rows and a window reaches across several bands, and each must give the clusters,
branch maps, counts and pedestal state of one thread. The bands' cut follows the threads'
rates (`aare_lab.finders._bands`), which eight threads on fewer cores make uneven; two runs
more on eight threads start from a cut with one thread far faster than the rest (bands of
one row beside one of 16, at the top and at the bottom of the frame).

A band reads its neighbours' edge rows, loaded before any band pushes a pixel
(`aare_lab.finders._frozen.load_edges`), and the clusters are written after every band has
counted its stores (`write_frame`): these cases cross every hand-over — chunks of one and of
several frames, a cap that cuts frames, windows 3 to 9 rows tall, common mode, whose
frame-wide estimate comes first, and frames where every pixel is a cluster (more clusters in
a chunk than the output buffers start with, so they grow part-way through it). That one
thread is the frozen model is `test_finders`'s.
"""

import os
import subprocess
import sys

SCRIPT = r"""
import warnings
import numpy as np
from aare_lab import FrozenFinder, Pedestal
from aare_lab.finders._bands import even_bands
from aare_lab.simulate import Beam, Detector, Simulator

warnings.simplefilter("ignore")
shape = (23, 19)
sim = Simulator(Detector(frame_shape=shape), Beam(photons_per_frame=12), seed=3)
dark = sim.dark(40)
frames, _ = sim.frames(9)
# Every pixel a cluster: a constant dark leaves threshold 0, and a constant frame tops
# every window; 12 such frames are 5 244 clusters, past the buffers' first 4 096 rows.
flat_dark = np.full((40, *shape), 1000, np.uint16)
flat = np.full((12, *shape), 2000, np.uint16)
labels = (np.arange(shape[1])[None, :] // 5 + 4 * (np.arange(shape[0])[:, None] // 12))
labels = np.broadcast_to(labels, shape).astype(np.int32)
cases = 0
for size in ("3x3", "5x3", "9x9", "3x7"):
    for cap, chunk, cm, inputs in ((None, 4, None, (dark, frames)), (2, 1, None, (dark, frames)),
                                   (None, 9, labels, (dark, frames)),
                                   (3, 2, labels, (dark, frames)),
                                   (None, 12, None, (flat_dark, flat)),
                                   (30, 3, None, (flat_dark, flat))):
        runs = []
        for threads, fast in [(t, None) for t in range(1, 9)] + [(8, 0), (8, 7)]:
            ped = Pedestal(shape, 40, "float64", "fixed")
            ped.push_dark(inputs[0])
            finder = FrozenFinder(ped, 3.0, size, cap, threads=threads, chunk_frames=chunk,
                                  common_mode=cm)
            if fast is not None:
                # One thread far faster than the seven others: bands of one row beside one
                # of 16, kept so through the run (a cost rises by a bounded step a frame).
                bounds, ticks, cost = even_bands(8, shape[0])
                bounds[1:-1] = np.arange(1, 8) + (15 if fast == 0 else 0)
                cost[:] = 1e9
                cost[fast] = 1.0
                finder._bands = bounds, ticks, cost
            result = finder.find(inputs[1], branch_maps=True, progress=False)
            if fast is not None:
                assert np.diff(finder._bands[0])[fast] > 10, finder._bands[0]
            label = f"{threads} threads" + ("" if fast is None else f", band {fast} fast")
            runs.append((label, result, ped.state()))
        (_, first, state), found = runs[0], int(runs[0][1]["n_found"].sum())
        assert found > 40, (size, found)
        if inputs[1] is flat:
            assert (first["n_found"] == shape[0] * shape[1]).all(), (size, cap)
            # Nothing pushed, so every window's centre reads 2000 - 1000, the first frames'
            # too, copied when the buffers grew.
            window = first["window"].to_numpy()
            centre = window[:, window.shape[1] // 2, window.shape[2] // 2]
            assert (centre == 1000).all(), (size, cap)
        if cap is not None:
            assert (first["n_found"] > first["n_kept"]).any(), (size, cap)
        for label, other, other_state in runs[1:]:
            for name in ("frame_number", "y", "x", "window", "energy", "n_found", "n_kept",
                         "branch_map"):
                np.testing.assert_array_equal(first[name], other[name],
                                              err_msg=f"{size} cap {cap} chunk {chunk} "
                                              f"{label}: {name}")
            for key in ("s", "s2"):
                np.testing.assert_array_equal(state[key], other_state[key])
        cases += 1
print("cases", cases)
"""


def test_every_thread_count_finds_what_one_thread_finds():
    env = dict(os.environ, NUMBA_NUM_THREADS="8")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["cases", "24"]
