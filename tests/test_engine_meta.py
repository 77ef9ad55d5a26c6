"""The launch's counts (`aare_lab.gpu.engine.Meta`): one array, its views in the kernel's order.

The kernel takes ``n_found, n_kept, n_out, overflow`` and, as its last parameter,
the per-frame count (``n_gain_bits`` or ``n_flagged``) as pointers into one int64 array
that the host zeroes before each run and copies back in one piece; the host reads the copy
through the same views. Checked on the CPU; the GPU suite checks the values.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from aare_lab.gpu.engine import Meta
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


def test_a_write_through_a_view_reaches_the_array():
    meta = np.zeros(Meta.length(4), np.int64)
    views = Meta.of(meta, 4)
    views.overflow[0] = 1
    views.counted[2] = 7
    assert meta[2 * 4 + 1] == 1 and meta[2 * 4 + 2 + 2] == 7 and meta.sum() == 8


def test_the_kernel_takes_the_views_in_the_same_order():
    source = (kernel_dir() / SOURCE).read_text()
    start = source.index("frozen_chunk(")
    signature = source[start:source.index("{", start)]
    names = re.findall(r"\*\s*(\w+)\s*[,)/]", signature)
    counts = [n for n in names if n in ("n_found", "n_kept", "n_out", "overflow")]
    assert counts == ["n_found", "n_kept", "n_out", "overflow"]
    # Both variants end with the per-frame count, the host's `Meta.counted`.
    for variant in re.split(r"#else", signature[signature.index("#if GAIN_SWITCHING"):]):
        assert re.findall(r"\*\s*(\w+)", variant)[-1] in ("n_flagged", "n_gain_bits")
