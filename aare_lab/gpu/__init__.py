"""NVIDIA GPU support through CuPy: the device, the compiled kernels, the frame pipeline.

Nothing here imports CuPy at module import time; `cupy_or_raise` does, with an error that
names the extra to install.
"""

from .device import GpuError, GpuUnavailable, cupy_or_raise, device_info, gpu_available


def pinned_frames(n_frames: int, frame_shape: tuple[int, int]):
    """A ``uint16`` NumPy stack ``(n_frames, ny, nx)`` in page-locked memory.

    Fill it with frames (from a detector receiver, a file) and hand it to the cuda finder:
    it is copied to the GPU at the PCIe rate, with no staging. Needs CuPy and a GPU.
    """
    from .feed import pinned_array

    return pinned_array(cupy_or_raise(), (int(n_frames), *map(int, frame_shape)), "uint16")


__all__ = ["GpuError", "GpuUnavailable", "cupy_or_raise", "device_info", "gpu_available",
           "pinned_frames"]
