"""The CUDA kernel compiles, for every kind of variant the finder builds, on a machine
without a GPU (NVRTC from PyPI, `aare_lab.gpu.nvrtc`): a broken kernel fails here, in CI,
not first on the GPU machine. Its results are tested on a GPU (test_cuda.py and others)."""

import importlib
import sys
from pathlib import Path

import pytest

from aare_lab.gpu.kernels import MAX_PIXELS_PER_THREAD, SM_THREADS, KernelSpec, kernel_dir
from aare_lab.gpu.nvrtc import KernelCompileError, compile_offline

pytestmark = pytest.mark.nvrtc

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

#: One of each kind: both state dtypes, every window dtype, square and oblong windows up to
#: 11x11, every block size, one to MAX_PIXELS_PER_THREAD pixels per thread, MÖNCH and
#: JUNGFRAU widths, common mode and gain switching, alone and together, both exchanges of
#: edge rows (`KernelSpec.exchange_in_words`).
VARIANTS = {
    "moench-3x3-f32": KernelSpec("float32", "int32", (3, 3), 2, 400, 1024),
    "moench-9x9-f64": KernelSpec("float64", "int32", (9, 9), 2, 400, 1024),
    "int16-saturated": KernelSpec("float64", "int16", (3, 3), 2, 400, 1024),
    "float32-windows": KernelSpec("float32", "float32", (5, 3), 1, 400, 512),
    "float64-windows": KernelSpec("float64", "float64", (11, 11), 2, 400, 256),
    "jungfrau-gain-common-mode": KernelSpec("float64", "int32", (3, 3), 4, 1024, 1024,
                                            common_mode=True, gain_switching=True),
    "jungfrau-gain-9x9-f32": KernelSpec("float32", "int16", (9, 9), 4, 1024, 1024,
                                        gain_switching=True),
    "common-mode-256": KernelSpec("float32", "int32", (3, 3), 8, 1024, 256, common_mode=True),
    "most-pixels-per-thread": KernelSpec("float32", "int32", (3, 3),
                                         MAX_PIXELS_PER_THREAD, 1024, 256),
    "words-gain-common-mode": KernelSpec("float32", "int32", (3, 3), 1, 400, 1024,
                                         common_mode=True, gain_switching=True),
}


def test_both_exchanges_are_compiled():
    kinds = [spec.exchange_in_words for spec in VARIANTS.values()]
    assert kinds.count(True) >= 3 and kinds.count(False) >= 3


def benchmark(name: str):
    """The module ``benchmarks/<name>.py``."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def register_budget(threads: int) -> int:
    """Registers per thread that keep a block resident as the engine plans it: a block of
    ``threads`` shares an SM with others up to `SM_THREADS` (``__launch_bounds__``)."""
    return 65536 // max(threads, SM_THREADS)


@pytest.mark.parametrize("spec", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_kind_of_variant_compiles_within_its_register_budget(spec):
    compiled = compile_offline(spec)
    assert compiled.cubin[:4] == b"\x7fELF"
    # The cooperative launch needs every block resident at once: more registers per thread
    # than the launch bounds allow would fail it on the GPU.
    assert 0 < compiled.registers <= register_budget(spec.threads), compiled.log


def test_a_source_that_does_not_compile_is_refused_with_nvrtc_s_words():
    spec = VARIANTS["moench-3x3-f32"]
    broken = ((kernel_dir() / "frozen.cu").read_text()
              + "\n__device__ int n_used() { return n_missing; }\n")
    with pytest.raises(KernelCompileError, match=r"(?s)frozen\.cu.*error.*n_missing"):
        compile_offline(spec, source=broken)


def test_the_benchmark_times_a_words_only_source_only_where_the_engine_lays_out_words():
    kernel_variants = benchmark("kernel_variants")
    shipped = (kernel_dir() / "frozen.cu").read_text()
    words_only = shipped.replace("EXCHANGE_IN_WORDS", "ALWAYS_WORDS")
    words, rows = VARIANTS["moench-3x3-f32"], VARIANTS["moench-9x9-f64"]
    assert words.exchange_in_words and not rows.exchange_in_words
    assert kernel_variants.fits_engine(shipped, words)
    assert kernel_variants.fits_engine(shipped, rows)
    assert kernel_variants.fits_engine(words_only, words)
    assert not kernel_variants.fits_engine(words_only, rows)


def test_the_benchmark_s_variants_still_patch_and_compile():
    """``benchmarks/kernel_variants.py`` times the kernel with stages removed by text
    patches of the shipped source; a patch that no longer applies, or no longer compiles,
    would only show on the GPU machine."""
    kernel_variants = benchmark("kernel_variants")
    source = (kernel_dir() / "frozen.cu").read_text()
    for spec in (VARIANTS["moench-3x3-f32"], VARIANTS["moench-9x9-f64"]):
        for name in kernel_variants.VARIANTS:
            text = kernel_variants.patched(source, name)
            assert (text == source) == (name == "as shipped"), name
            assert compile_offline(spec, source=text).registers > 0, name
