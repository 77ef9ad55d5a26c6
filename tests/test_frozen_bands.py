"""The frozen finder cut into more bands than this machine has cores: a subprocess with
eight Numba threads runs every thread count from 1 to 8 on small frames, where a band is a
few rows and a window reaches across several bands, and each must give the clusters,
branch maps, counts and pedestal state of one thread.

Plain frames go in blocks, each band through a block's frames at its own pace
(`aare_lab.finders._frozen.classify_block`): a band reads its neighbours' edge rows once
they have published them, the values alternate between two buffers, and each band stashes
its clusters, copied out once the block is done (`write_block`). With common mode, whose
frame-wide estimate comes first, the bands go in step: a band reads its neighbours' edge
rows, loaded before any band pushes a pixel (`load_edges`), and the clusters are written
after every band has counted its stores (`write_frame`). These cases cross every
hand-over — chunks and blocks of one and of several frames, a cap that cuts frames,
windows 3 to 9 rows tall, frames where every pixel is a cluster (what a band's stash is
sized for) — and check which way each run went, including bands that cannot all run at
once (more bands than threads), which must go in step rather than wait for each other.
That one thread is the frozen model is `test_finders`'s.
"""

import os
import subprocess
import sys

SCRIPT = r"""
import warnings
import numpy as np
from aare_lab import FrozenFinder, Pedestal
from aare_lab.simulate import Beam, Detector, Simulator

warnings.simplefilter("ignore")
shape = (23, 19)
sim = Simulator(Detector(frame_shape=shape), Beam(photons_per_frame=12), seed=3)
dark = sim.dark(40)
frames, _ = sim.frames(9)
# Every pixel a cluster: a constant dark leaves threshold 0, and a constant frame tops
# every window.
flat_dark = np.full((40, *shape), 1000, np.uint16)
flat = np.full((3, *shape), 2000, np.uint16)
labels = (np.arange(shape[1])[None, :] // 5 + 4 * (np.arange(shape[0])[:, None] // 12))
labels = np.broadcast_to(labels, shape).astype(np.int32)


def run(size, cap, chunk, cm, threads, dark, frames):
    ped = Pedestal(shape, 40, "float64", "fixed")
    ped.push_dark(dark)
    finder = FrozenFinder(ped, 3.0, size, cap, threads=threads, chunk_frames=chunk,
                          common_mode=cm)
    result = finder.find(frames, branch_maps=True, progress=False)
    # In step: common mode, one band, or bands that could not all start.
    in_step = cm is not None or threads == 1 or bool(finder._sync[1])
    return result, ped.state(), in_step


cases = 0
for size in ("3x3", "5x3", "9x9", "3x7"):
    for cap, chunk, cm, inputs in ((None, 4, None, (dark, frames)), (2, 1, None, (dark, frames)),
                                   (None, 9, labels, (dark, frames)),
                                   (3, 2, labels, (dark, frames)),
                                   (None, 2, None, (flat_dark, flat)),
                                   (30, 3, None, (flat_dark, flat))):
        runs = [run(size, cap, chunk, cm, threads, *inputs) for threads in range(1, 9)]
        (first, state, _), found = runs[0], int(runs[0][0]["n_found"].sum())
        assert found > 40, (size, found)
        if inputs[1] is flat:
            assert (first["n_found"] == shape[0] * shape[1]).all(), (size, cap)
        if cap is not None:
            assert (first["n_found"] > first["n_kept"]).any(), (size, cap)
        assert [r[2] for r in runs[1:]] == [cm is not None] * 7, (size, cap, cm)
        for threads, (other, other_state, _) in enumerate(runs[1:], 2):
            for name in ("frame_number", "y", "x", "window", "energy", "n_found", "n_kept",
                         "branch_map"):
                np.testing.assert_array_equal(first[name], other[name],
                                              err_msg=f"{size} cap {cap} chunk {chunk} "
                                              f"{threads} threads: {name}")
            for key in ("s", "s2"):
                np.testing.assert_array_equal(state[key], other_state[key])
        cases += 1

# Four bands on two threads: the bands cannot all run at once, so none may start (each
# would wait for one that runs only after it); the finder goes in step instead.
import numba
from aare_lab.finders import frozen

class HalfThreads:
    config = numba.config
    get_num_threads = staticmethod(numba.get_num_threads)

    @staticmethod
    def set_num_threads(n):
        numba.set_num_threads(max(1, n // 2))

reference = run("3x3", None, 4, None, 1, dark, frames)
frozen.numba = HalfThreads
crowded = run("3x3", None, 4, None, 4, dark, frames)
frozen.numba = numba
assert crowded[2], "four bands on two threads did not go in step"
for name in ("y", "x", "window", "n_found", "branch_map"):
    np.testing.assert_array_equal(reference[0][name], crowded[0][name], err_msg=name)
print("cases", cases)
"""


def test_every_thread_count_finds_what_one_thread_finds():
    env = dict(os.environ, NUMBA_NUM_THREADS="8")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["cases", "24"]
