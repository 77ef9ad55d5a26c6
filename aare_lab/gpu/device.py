"""Finding CuPy and a usable GPU, and turning CUDA failures into errors that say where."""

from __future__ import annotations

from contextlib import contextmanager

INSTALL_HINT = ("install CuPy for your CUDA driver: pip install 'aare-lab[cuda13]' (CUDA 13 "
                "drivers) or 'aare-lab[cuda12]' (CUDA 12); from a clone, pip install '.[cuda13]'")


class GpuUnavailable(RuntimeError):
    """CuPy is missing, or it finds no usable NVIDIA GPU."""


class GpuError(RuntimeError):
    """A CUDA call failed (out of memory, a launch error); the message says during what."""


def cupy_or_raise():
    """Import CuPy and check that it sees a GPU.

    Returns
    -------
    module
        The ``cupy`` module.

    Raises
    ------
    GpuUnavailable
        Naming the extra to install, or why the GPU cannot be used.
    """
    try:
        import cupy
    except ImportError as err:
        raise GpuUnavailable(f"the cuda finder needs CuPy, which is not installed: {INSTALL_HINT}") \
            from err
    try:
        available = cupy.cuda.is_available()
    except Exception as err:  # CuPy raises driver-specific errors when CUDA is broken
        raise GpuUnavailable(f"CuPy cannot talk to the CUDA driver ({err}); check "
                             f"nvidia-smi, or {INSTALL_HINT}") from err
    if not available:
        raise GpuUnavailable("CuPy is installed but finds no NVIDIA GPU (cupy.cuda.is_available() "
                             "is False); run on a machine with a GPU and a CUDA driver, or use "
                             "the 'frozen' CPU finder, which gives identical results")
    return cupy


def gpu_available() -> bool:
    """Whether the cuda finder can run here (CuPy importable and a GPU visible)."""
    try:
        cupy_or_raise()
    except GpuUnavailable:
        return False
    return True


def device_info() -> dict:
    """Name, memory, driver and CuPy version of the current GPU, for provenance and benchmarks."""
    cp = cupy_or_raise()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    return {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": dev.compute_capability,
        "multiprocessors": int(props["multiProcessorCount"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "driver_version": _driver_release(),
        "driver_cuda_version": cp.cuda.runtime.driverGetVersion(),
        "runtime_version": cp.cuda.runtime.runtimeGetVersion(),
        "cupy_version": cp.__version__,
    }


def _driver_release() -> str | None:
    """The NVIDIA kernel driver's release (e.g. 580.159.04), where the system tells it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # NVML missing or unusable: fall back to the kernel module's banner
        pass
    try:
        with open("/proc/driver/nvidia/version") as banner:
            for word in banner.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    return None


@contextmanager
def cuda_context(what: str):
    """Re-raise CUDA failures inside the block as `GpuError` naming ``what`` was being done."""
    import cupy

    try:
        yield
    except cupy.cuda.memory.OutOfMemoryError as err:
        raise GpuError(f"out of GPU memory while {what}: {err}. Lower chunk_frames, or free "
                       "other GPU arrays (cupy.get_default_memory_pool().free_all_blocks())") \
            from err
    except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as err:
        raise GpuError(f"CUDA failed while {what}: {err}") from err
