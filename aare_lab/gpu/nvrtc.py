"""The chunk kernel compiled without a GPU, by NVRTC from PyPI (``nvidia-cuda-nvrtc``).

`aare_lab.gpu.kernels.load_kernel` compiles ``kernels/frozen.cu`` through CuPy on the
machine that runs it. This module compiles the same source with the same options for a
named GPU architecture on any Linux machine, GPU or not, so that CI and a laptop see
whether every variant compiles, and what each costs in registers and spills (ptxas' own
report), before a GPU ever runs it. Install it with ``pip install 'aare-lab[nvrtc]'``.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import NamedTuple

from .kernels import OPTIONS, SOURCE, KernelSpec, kernel_dir

#: Hopper, the architecture of the H100 and H200.
DEFAULT_ARCH = 90
_INSTALL = "install it with: pip install 'aare-lab[nvrtc]' (NVIDIA's nvidia-cuda-nvrtc wheel)"


class NvrtcUnavailable(RuntimeError):
    """NVRTC's library is not installed (the message says how to install it)."""


class KernelCompileError(RuntimeError):
    """NVRTC refused the source; the message holds its log."""


class Compiled(NamedTuple):
    """One compiled variant and what ptxas reported of it."""

    cubin: bytes
    log: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


def library_path() -> Path:
    """NVRTC's shared library as NVIDIA's wheels install it (``nvidia/*/lib/libnvrtc.so.*``).

    Raises
    ------
    NvrtcUnavailable
        Where no such wheel is installed.
    """
    try:
        import nvidia
    except ImportError:
        raise NvrtcUnavailable(f"NVRTC is not installed; {_INSTALL}") from None
    found = [path for root in nvidia.__path__ for path in Path(root).glob("*/lib/libnvrtc.so.*")
             if re.fullmatch(r"libnvrtc\.so(\.\d+)+", path.name)]
    if found:
        # The newest CUDA's, where wheels of several are installed.
        return max(found, key=lambda path: [int(n) for n in path.name.split(".")[2:]])
    raise NvrtcUnavailable(f"no libnvrtc.so under {list(nvidia.__path__)}; {_INSTALL}")


def _nvrtc():
    lib = ctypes.CDLL(str(library_path()))
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def compile_offline(spec: KernelSpec, arch: int = DEFAULT_ARCH, source: str | None = None,
                    extra: tuple[str, ...] = ()) -> Compiled:
    """Compile the chunk kernel's variant ``spec`` for ``sm_<arch>`` with the finder's options.

    Parameters
    ----------
    spec
        The variant (`aare_lab.gpu.kernels.KernelSpec`).
    arch
        The compute capability without its dot (90: Hopper).
    source
        CUDA source to compile instead of the shipped ``kernels/frozen.cu``.
    extra
        More NVRTC options.

    Raises
    ------
    NvrtcUnavailable
        Without NVRTC's library.
    KernelCompileError
        With NVRTC's log, where the source does not compile.
    """
    nv = _nvrtc()
    text = (kernel_dir() / SOURCE).read_text() if source is None else source
    options = [*OPTIONS, *spec.defines(), f"-arch=sm_{arch}", "-Xptxas=-v", *extra]
    program = ctypes.c_void_p()
    _check(nv, nv.nvrtcCreateProgram(ctypes.byref(program), text.encode(), SOURCE.encode(),
                                     0, None, None))
    try:
        encoded = [option.encode() for option in options]
        status = nv.nvrtcCompileProgram(program, len(encoded),
                                        (ctypes.c_char_p * len(encoded))(*encoded))
        size = ctypes.c_size_t()
        _check(nv, nv.nvrtcGetProgramLogSize(program, ctypes.byref(size)))
        log = ctypes.create_string_buffer(size.value)
        _check(nv, nv.nvrtcGetProgramLog(program, log))
        log_text = log.value.decode(errors="replace")
        if status:
            raise KernelCompileError(
                f"NVRTC could not compile {SOURCE} for sm_{arch} with "
                f"{' '.join(spec.defines())}:\n{log_text}")
        _check(nv, nv.nvrtcGetCUBINSize(program, ctypes.byref(size)))
        cubin = ctypes.create_string_buffer(size.value)
        _check(nv, nv.nvrtcGetCUBIN(program, cubin))
    finally:
        nv.nvrtcDestroyProgram(ctypes.byref(program))
    return Compiled(cubin.raw, log_text, *_resources(log_text))


def _check(nv, status: int) -> None:
    if status:
        raise KernelCompileError(f"NVRTC: {nv.nvrtcGetErrorString(status).decode()}")


def _resources(log: str) -> tuple[int, int, int, int]:
    """Registers, stack frame, spill stores and spill loads (bytes) from ptxas' report."""
    registers = re.search(r"Used (\d+) registers", log)
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", log)
    if registers is None or frame is None:
        raise KernelCompileError(f"no resource report from ptxas in NVRTC's log:\n{log}")
    return (int(registers.group(1)), *(int(n) for n in frame.groups()))
