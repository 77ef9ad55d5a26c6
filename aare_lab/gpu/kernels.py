"""The CUDA sources of ``kernels/``, specialised by preprocessor defines and cached on disk.

Each variant (pedestal dtype, window dtype, cluster size, frame width, block size, common
mode on or off, JUNGFRAU gain switching on or off) is an ``extern "C"`` entry point
compiled by NVRTC with the defines of `KernelSpec`, and its cubin is kept under
`cache_dir`, keyed by the source, the options, the GPU architecture and the NVRTC version:
a new process loads it without compiling. The module is compiled here rather than through
``cupy.RawModule`` because CuPy adds ``-ftz=true`` to every compilation it caches, and
flushing float32 subnormals to zero would break bit-identity with the CPU finders.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from aare_lab.model.params import INTEGER_WINDOW_DTYPES, SATURATED_WINDOW_DTYPES

from .device import cupy_or_raise

SOURCE = "frozen.cu"
ENTRY = "frozen_chunk"
#: IEEE arithmetic exactly as written: no contraction into FMAs, no flush-to-zero,
#: correctly rounded division and square root.
OPTIONS = ("-fmad=false", "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-std=c++17")
#: Threads per block the kernel can be built for (``MAX_THREADS``). 512 threads share an
#: SM's registers at 128 each, so a block of 256 runs two to an SM; a block of 1024 gets 64
#: registers per thread and is the fastest in every case measured
#: (``benchmarks/results/kernel_variants_20261201T185458.json``, ``…185601.json``).
BLOCK_THREADS = (256, 512, 1024)
DEFAULT_BLOCK_THREADS = 1024
#: Threads of one SM that get 128 registers each: the blocks per SM tried start at
#: SM_THREADS // block threads (at least one).
SM_THREADS = 512
#: Shared memory of the kernel ahead of its tile: the block scan, then the store counts of
#: each warp per round of pixels (``SCAN_BYTES``, ``WARP_STORE_BYTES`` in the source).
SCAN_BYTES = 256
#: Flags of neighbouring bands sit this many uint32 apart (``FLAG_STRIDE`` in the source).
FLAG_STRIDE = 32
#: Edge rows travel in words that carry their frame (`KernelSpec.exchange_in_words`) up to
#: this many pixels per thread: MÖNCH frames (two per thread at 1024 threads) gained 16 %
#: per frame with float32 state, JUNGFRAU-wide ones (four) lost 3 %.
WORDS_MAX_PIXELS_PER_THREAD = 2
#: The register budget allows at most this many pixels per thread (a power of two). Up to
#: four per thread were measured at 1024 threads (JUNGFRAU-wide frames, which spill up to
#: 296 bytes and still run faster than at 512); more were not.
MAX_PIXELS_PER_THREAD = 16


def words_pay(state_dtype: str, pixels_per_thread: int) -> bool:
    """Whether edge rows were measured faster in words that carry their frame than as rows
    and flags: float32 state with at most `WORDS_MAX_PIXELS_PER_THREAD` pixels per thread."""
    return state_dtype == "float32" and pixels_per_thread <= WORDS_MAX_PIXELS_PER_THREAD


_C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int16": "short"}
_loaded: dict[tuple, object] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class KernelSpec:
    """What a compiled variant is specialised for."""

    state_dtype: str
    window_dtype: str
    cluster_size: tuple[int, int]
    pixels_per_thread: int
    frame_nx: int
    threads: int
    common_mode: bool = False
    gain_switching: bool = False
    #: Whether edge rows travel between bands in 8-byte words that carry their frame's
    #: number (``EXCHANGE_IN_WORDS``; bands then are equal shares of the frame's pixels)
    #: rather than as rows followed by a flag (bands of whole rows). None (the default)
    #: chooses where words were measured faster, `words_pay`
    #: (``benchmarks/results/kernel_variants_20261202T104847.json``, ``…105037``). A field,
    #: not a property, so that the choice is part of the key of a loaded kernel.
    exchange_in_words: bool | None = None

    def __post_init__(self):
        if self.exchange_in_words is None:
            object.__setattr__(self, "exchange_in_words",
                               words_pay(self.state_dtype, self.pixels_per_thread))

    def defines(self) -> tuple[str, ...]:
        """The ``-D`` options of this variant."""
        ny, nx = self.cluster_size
        return (f"-DSTATE_T={_C_TYPES[self.state_dtype]}",
                f"-DWINDOW_T={_C_TYPES[self.window_dtype]}",
                f"-DROUND_WINDOW={int(self.window_dtype in INTEGER_WINDOW_DTYPES)}",
                f"-DSATURATE_WINDOW={int(self.window_dtype in SATURATED_WINDOW_DTYPES)}",
                f"-DCLUSTER_NY={ny}", f"-DCLUSTER_NX={nx}",
                f"-DPIXELS_PER_THREAD={self.pixels_per_thread}", f"-DFRAME_NX={self.frame_nx}",
                f"-DMAX_THREADS={self.threads}", f"-DCOMMON_MODE={int(self.common_mode)}",
                f"-DGAIN_SWITCHING={int(self.gain_switching)}",
                f"-DEXCHANGE_IN_WORDS={int(self.exchange_in_words)}")


def kernel_dir() -> Path:
    """Where the CUDA sources are: ``aare_lab/kernels`` in a wheel, ``kernels/`` in a checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "kernels", package.parent / "kernels"):
        if (candidate / SOURCE).is_file():
            return candidate
    raise FileNotFoundError(f"CUDA source {SOURCE} not found beside {package}; the installation "
                            "is incomplete (the wheel ships it as aare_lab/kernels)")


def cache_dir() -> Path:
    """The cubin cache: ``$AARE_LAB_KERNEL_CACHE``, else ``~/.cache/aare_lab/kernels``."""
    env = os.environ.get("AARE_LAB_KERNEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "aare_lab" / "kernels"


def load_kernel(spec: KernelSpec):
    """The compiled entry point of ``spec`` on the current device (compiled once per machine).

    Returns
    -------
    cupy.cuda.function.Function
    """
    cp = cupy_or_raise()
    device = cp.cuda.Device().id
    with _lock:
        key = (spec, device)
        if key not in _loaded:
            module = cp.cuda.function.Module()
            module.load(_cubin(cp, spec))
            _loaded[key] = (module, module.get_function(ENTRY))
        return _loaded[key][1]


def _cubin(cp, spec: KernelSpec) -> bytes:
    from cupy.cuda import compiler

    source = (kernel_dir() / SOURCE).read_text()
    arch = compiler._get_arch()
    options = OPTIONS + spec.defines()
    version = cp.cuda.nvrtc.getVersion()
    key = hashlib.sha256(
        "\0".join([source, *options, str(arch), str(version), cp.__version__]).encode()
    ).hexdigest()
    path = cache_dir() / f"{ENTRY}-{key[:32]}.cubin"
    if path.is_file():
        return path.read_bytes()
    cubin, _ = compiler.compile_using_nvrtc(source, options, arch, filename=SOURCE)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(cubin)
    os.replace(partial, path)  # atomic: concurrent processes never read half a file
    return cubin
