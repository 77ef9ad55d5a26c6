"""The launch's counts (`aare_lab.gpu.engine.Meta`): one array, its views in the kernel's order.

The kernel takes ``n_found, n_kept, n_out, overflow`` and, as its last parameter,
the per-frame count (``n_gain_bits`` or ``n_flagged``) as pointers into one int64 array
that the host zeroes before each run and copies back in one piece; the host reads the copy
through the same views. Checked on the CPU; the GPU suite checks the values.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from aare_lab.gpu.engine import FrozenEngine, Meta
from aare_lab.gpu.kernels import SOURCE, kernel_dir


@pytest.mark.parametrize("chunk_frames", [1, 3, 512])
def test_the_views_tile_the_array_in_order(chunk_frames):
    meta = np.arange(Meta.length(chunk_frames), dtype=np.int64)
    views = Meta.of(meta, chunk_frames)
    sizes = {"n_found": chunk_frames, "n_kept": chunk_frames, "n_out": 1, "overflow": 1,
             "counted": chunk_frames}
    assert [len(v) for v in views] == [sizes[name] for name in Meta._fields]
    np.testing.assert_array_equal(np.concatenate(views), meta)
    for view in views:
        assert np.shares_memory(view, meta)


def kernel_parameters(gain_switching: bool) -> list[str]:
    """The names of ``frozen_chunk``'s parameters in order, for one GAIN_SWITCHING variant."""
    source = (kernel_dir() / SOURCE).read_text()
    start = source.index("frozen_chunk(") + len("frozen_chunk(")
    lines, keep = [], [True]
    for line in source[start:source.index("{", start)].splitlines():
        word = line.strip()
        if word.startswith("#if"):
            keep.append(gain_switching if "GAIN_SWITCHING" in word else True)
        elif word.startswith("#else"):
            keep[-1] = not keep[-1]
        elif word.startswith("#endif"):
            keep.pop()
        elif all(keep):
            lines.append(line.split("//")[0])
    params = " ".join(lines).rsplit(")", 1)[0].split(",")
    return [re.findall(r"\w+", param)[-1] for param in params if param.strip()]


class DeviceArray(np.ndarray):
    """A NumPy array with a CuPy array's ``data.ptr``, for the engine's memsets (no-ops)."""

    @property
    def data(self):
        return SimpleNamespace(ptr=0)


class Recorder:
    """Stands for the CuPy kernel: keeps the arguments of the launch."""

    def __call__(self, grid, block, args, **options):
        self.args = args


@pytest.mark.parametrize("calibrated", [False, True])
def test_the_launch_passes_the_counts_where_the_kernel_takes_them(calibrated):
    """`FrozenEngine._run`'s arguments against the kernel's parameters: as many, and each
    of the launch's counts (values that tell the views apart) at its parameter's place,
    the per-frame count last in both variants."""
    c = 4
    engine = object.__new__(FrozenEngine)
    noop = SimpleNamespace(ptr=0)
    engine.cp = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(
        memsetAsync=lambda *args: None)))
    engine.compute = noop
    engine.chunk_frames = c
    engine.state_dtype = np.dtype(np.float32)
    engine.meta = [np.arange(Meta.length(c), dtype=np.int64).view(DeviceArray)]
    engine.spec = SimpleNamespace(exchange_in_words=False)
    engine.hist = None
    engine.labels = None
    engine.calibration = object() if calibrated else None
    engine.cal = ("cal_pedestal", "cal_gain")
    buffer = SimpleNamespace(data=noop, nbytes=0)
    for name in ("sync", "exchange", "cm_acc"):
        setattr(engine, name, buffer)
    engine._region = ("region_win", "region_pos")
    engine._outputs = [("out_win", "out_y", "out_x")]
    engine.frame_shape = (5, 7)
    engine.counts = engine.cm_out = engine.cm_pixels = [None]
    for name in ("off", "rms_fixed", "fixed", "N", "nsig", "c3", "cap", "region_cap",
                 "seg_start", "frame_start", "no_edges", "no_hist", "no_pixel_hist",
                 "cm_labels", "cm_candidates", "n_regions", "n_bands", "threads", "shared"):
        setattr(engine, name, 0)
    engine.kernel = Recorder()
    engine._run("frames", c, 0, "s", "s2", "map_slot", "maps")
    args = engine.kernel.args
    names = kernel_parameters(calibrated)
    assert len(args) == len(names)
    views = Meta.of(engine.meta[0], c)
    per_frame = "n_flagged" if calibrated else "n_gain_bits"
    for name, view in (("n_found", views.n_found), ("n_kept", views.n_kept),
                       ("n_out", views.n_out), ("overflow", views.overflow),
                       (per_frame, views.counted)):
        np.testing.assert_array_equal(args[names.index(name)], view, err_msg=name)
    assert names[-1] == per_frame
    for name in ("frames", "s", "s2", "region_win", "region_pos", "out_win", "out_y", "out_x",
                 "map_slot", "maps") + (("cal_pedestal", "cal_gain") if calibrated else ()):
        assert args[names.index(name)] == name
