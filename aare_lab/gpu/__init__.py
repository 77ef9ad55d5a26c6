"""NVIDIA GPU support through CuPy: the device, the compiled kernels, the frame pipeline.

Nothing here imports CuPy at module import time; `cupy_or_raise` does, with an error that
names the extra to install.
"""

from .device import GpuError, GpuUnavailable, cupy_or_raise, device_info, gpu_available

__all__ = ["GpuError", "GpuUnavailable", "cupy_or_raise", "device_info", "gpu_available"]
