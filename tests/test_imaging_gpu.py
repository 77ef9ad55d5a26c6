"""η and interpolation of CuPy windows on the device equal NumPy's bit for bit (the
element-wise expressions against the compiled loops)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from aare_lab.imaging import ETA_FUNCTIONS, build_interpolation, interpolate

pytestmark = pytest.mark.gpu


def on_device(result: xr.Dataset) -> xr.Dataset:
    import cupy

    moved = result.copy()
    for name in ("window", "x", "y", "frame_number"):
        moved[name] = result[name].copy(data=cupy.asarray(result[name].to_numpy()))
    return moved


def clusters(n=20_000, size=3, dtype="int32", seed=0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    windows = rng.integers(-20, 300, (n, size, size))
    windows[:, size // 2, size // 2] += 2000
    return xr.Dataset(
        {"window": (("cluster", "wy", "wx"), windows.astype(dtype)),
         "x": ("cluster", rng.integers(1, 399, n).astype(np.int32)),
         "y": ("cluster", rng.integers(1, 399, n).astype(np.int32)),
         "frame_number": ("cluster", np.arange(n, dtype=np.int64))},
        attrs={"frame_shape": np.array([400, 400])})


@pytest.mark.parametrize("kind", ETA_FUNCTIONS)
@pytest.mark.parametrize("size, dtype", [(3, "int32"), (3, "float32"), (5, "float32"),
                                         (9, "float64"), (3, "int16")])
def test_eta_on_the_device_equals_the_host(kind, size, dtype):
    import cupy

    host = clusters(size=size, dtype=dtype)
    ours, theirs = ETA_FUNCTIONS[kind](on_device(host)), ETA_FUNCTIONS[kind](host)
    for name in theirs:
        assert isinstance(ours[name].data, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(ours[name].data), theirs[name].to_numpy())


@pytest.mark.parametrize("kind", ETA_FUNCTIONS)
def test_interpolation_on_the_device_equals_the_host(kind):
    import cupy

    host = clusters(seed=1)
    maps = build_interpolation(clusters(seed=2), bins=50, energy_bins=3, eta=kind)
    ours, theirs = interpolate(on_device(host), maps), interpolate(host, maps)
    for name in ("x", "y", "energy"):
        np.testing.assert_array_equal(cupy.asnumpy(ours[name].data), theirs[name].to_numpy())
    assert ours.attrs["eta_clamped"] == theirs.attrs["eta_clamped"]
