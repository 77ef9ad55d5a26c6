"""The frozen finder's bands (`aare_lab.finders._frozen.frozen_bands`): one band of rows per
thread, each running through the frames at its own pace, give the clusters, counts, branch
maps and pedestal of one thread, for every thread count up to more threads than this
machine has cores (a fresh process with ``NUMBA_NUM_THREADS=7``), every window size,
both dtypes and noise modes, with and without a cap, over chunks longer than a part."""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import warnings
    import numpy as np
    from aare_lab import FrozenFinder, Pedestal
    from aare_lab.simulate import Beam, Detector, Simulator

    sim = Simulator(Detector(frame_shape=(40, 48)), Beam(photons_per_frame=30), seed=4)
    dark = sim.dark(20)
    frames, _ = sim.frames(45)

    def run(threads, size, dtype, noise, cap):
        ped = Pedestal((40, 48), 20, dtype, noise)
        ped.push_dark(dark)
        finder = FrozenFinder(ped, 4.0, size, cap, threads=threads, chunk_frames=40)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = finder.find(frames, branch_maps=[0, 17, 44], progress=False)
        bands = getattr(finder, "_pool", None)
        state = ped.state()
        return ([r[k].to_numpy() for k in ("frame_number", "y", "x", "window", "n_found",
                                           "n_kept", "branch_map")]
                + [state[k] for k in ("off", "s", "s2")],
                0 if bands is None else bands._max_workers)

    checked = 0
    for size in (3, 5, 9):
        for dtype, noise in (("float64", "fixed"), ("float32", "running")):
            for cap in (None, 4):
                one, _ = run(1, size, dtype, noise, cap)
                assert len(one[0]) >= 180 and (cap is None or (one[4] > cap).any())
                for threads in range(2, 8):
                    other, bands = run(threads, size, dtype, noise, cap)
                    assert bands == threads, (threads, bands)
                    for a, b in zip(one, other):
                        np.testing.assert_array_equal(a, b)
                    checked += 1
    print("checked", checked)
""")


def test_the_bands_give_one_threads_result_on_any_number_of_threads():
    env = {**os.environ, "NUMBA_NUM_THREADS": "7"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checked 72" in done.stdout
