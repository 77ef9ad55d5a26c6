"""How result files store their chunks (`aare_lab.storage.scale_offset`,
`aare_lab.storage.chunk_codec`): the bytes must be HDF5's own, and the files must read back
bit for bit through h5py, xarray and netCDF-C.

HDF5 is the oracle here: each chunk encoded by aare_lab is compared with the chunk HDF5's
own filter wrote for the same values.
"""

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr

from aare_lab import FrozenFinder, Pedestal
from aare_lab.model.results import load_result
from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.storage import chunk_codec, scale_offset

RNG = np.random.default_rng(7)
INTEGERS = (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64)


def chunks(dtype):
    """Chunks that take each way through the encoder: packed narrow and wide, one value,
    fill values only, a range that needs every bit, one within two of the type's own."""
    info = np.iinfo(dtype)
    low, high = max(info.min, -300), min(info.max, 5000)
    return {
        "taps": RNG.integers(low, high, size=(1000, 3, 3)).astype(dtype),
        "zeros": np.zeros(777, dtype),
        "constant": np.full(333, 5, dtype),
        "any": RNG.integers(info.min, info.max, size=1001, dtype=dtype, endpoint=True),
        "extremes": np.array([info.min, info.max, 0, 1], dtype),
        "almost": np.array([info.min, info.max - 2, 7], dtype),
        "wide": (np.arange(-500, 500, dtype=np.int64) * 2**40).astype(dtype),
    }


def hdf5_chunk(path, values, fillvalue=None):
    """The chunk HDF5's own scale-offset filter writes for ``values``, and the dataset's
    fill value as the filter sees it."""
    with h5py.File(path, "w") as f:
        options = {} if fillvalue is None else {"fillvalue": fillvalue}
        d = f.create_dataset("v", shape=values.shape, dtype=values.dtype, chunks=values.shape,
                             scaleoffset=0, **options)
        d[...] = values
        return bytes(d.id.read_direct_chunk((0,) * values.ndim)[1]), scale_offset.fill_value(d)


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda t: np.dtype(t).name)
def test_scale_offset_chunks_are_the_bytes_hdf5_writes(dtype, tmp_path):
    for name, values in chunks(dtype).items():
        for fillvalue in (None, 3):
            expected, fill = hdf5_chunk(tmp_path / "hdf5.h5", values, fillvalue)
            ours = scale_offset.encode(values, fill).tobytes()
            assert ours == expected, (name, fillvalue)


def test_the_encoder_refuses_what_it_cannot_encode(tmp_path):
    with h5py.File(tmp_path / "f.h5", "w") as f:
        plain = f.create_dataset("plain", data=np.arange(4), chunks=(2,))
        floats = f.create_dataset("floats", data=np.zeros(4), chunks=(2,), scaleoffset=2)
        with pytest.raises(ValueError, match="no scale-offset filter"):
            scale_offset.fill_value(plain)
        with pytest.raises(ValueError, match="float64"):
            scale_offset.fill_value(floats)


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=(60, 64)), Beam(photons_per_frame=60), seed=5)
    dark, frames = sim.dark(100), sim.frames(40)[0]
    pedestal = Pedestal(dark.shape[1:], 100)
    pedestal.push_dark(dark)
    return pedestal, frames


@pytest.mark.parametrize("window_dtype", ["int32", "int16"])
def test_the_default_file_packs_windows_and_reads_back_everywhere(run, window_dtype, tmp_path):
    pedestal, frames = run
    in_memory = FrozenFinder(pedestal.copy(), 4.0, 3, window_dtype=window_dtype).find(
        frames, progress=False)
    path = tmp_path / "run.nc"
    FrozenFinder(pedestal.copy(), 4.0, 3, window_dtype=window_dtype).find(
        frames, progress=False, out=path).close()
    xr.testing.assert_identical(load_result(path), in_memory)
    with h5py.File(path) as f:
        window = f["window"]
        assert list(window._filters) == ["scaleoffset", "gzip"]
        assert "scaleoffset" not in f["x"]._filters and "gzip" in f["x"]._filters
        # A run this short fills no chunk: its one chunk, padded, is deflated too.
        assert window.id.get_num_chunks() == 1
        assert window.id.get_chunk_info(0).filter_mask == 0
        assert window.id.get_chunk_info(0).size < 0.1 * window.chunks[0] * 9 * window.dtype.itemsize
    with netCDF4.Dataset(path) as nc:   # netCDF-C, through HDF5's filters
        for name in ("window", "frame_number", "y", "x", "energy", "n_kept"):
            assert np.array_equal(np.asarray(nc[name][...]), in_memory[name].values), name


def test_whole_packed_chunks_skip_deflate(run, tmp_path, monkeypatch):
    pedestal, frames = run
    monkeypatch.setattr("aare_lab.storage.result_store.CHUNK_BYTES", 4096)
    path = tmp_path / "run.nc"
    finder = FrozenFinder(pedestal.copy(), 4.0, 3, chunk_frames=8)
    in_memory = FrozenFinder(pedestal.copy(), 4.0, 3).find(frames, progress=False)
    finder.find(frames, progress=False, out=path).close()
    xr.testing.assert_identical(load_result(path), in_memory)
    with h5py.File(path) as f:
        window = f["window"]
        n = window.id.get_num_chunks()
        masks = [window.id.get_chunk_info(k).filter_mask for k in range(n)]
        whole = window.shape[0] // window.chunks[0]
        assert n > 3 and masks[:whole] == [chunk_codec.DEFLATE_SKIPPED] * whole
        assert masks[whole:] == [0] * (n - whole)
    with netCDF4.Dataset(path) as nc:
        assert np.array_equal(np.asarray(nc["window"][...]), in_memory["window"].values)


def test_deflate_files_are_plain_netcdf4(run, tmp_path):
    pedestal, frames = run
    path = tmp_path / "run.nc"
    FrozenFinder(pedestal.copy(), 4.0, 3).find(frames, progress=False, out=path,
                                                compression="deflate").close()
    with h5py.File(path) as f:
        assert "_NCProperties" in f.attrs
        assert all(set(f[name]._filters) <= {"gzip", "shuffle"}
                   for name in ("window", "frame_number", "y", "x", "energy"))
    with netCDF4.Dataset(path) as nc:
        assert nc["window"].filters()["zlib"]
