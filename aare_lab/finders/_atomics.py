"""Atomic reads and writes of int64 array elements for compiled loops whose iterations run
at the same time and hand work to each other (the frozen finder's bands, `_frozen`).

Numba has no atomics on the CPU; these emit LLVM's (acquire loads, release stores,
sequentially consistent read-modify-writes), so that what a thread wrote before a release
store is seen by a thread that loaded the stored value with acquire. `wait_until_at_least`
spins, with the CPU's pause hint, and gives its core away (``sched_yield``) every so often,
so that a waiter on a machine with fewer cores than threads lets the thread it waits for
run.
"""

import platform

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

ALIGN = 8
SPINS_BEFORE_YIELD = 1 << 10


def _element(context, builder, ary_type, ary, index):
    array = context.make_array(ary_type)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, ary_type, array, [index],
                                    wraparound=False)


def _int64_array(ary):
    return isinstance(ary, types.Array) and ary.dtype == types.int64 and ary.ndim == 1


@intrinsic
def load_acquire(typingctx, ary, index):
    """``ary[index]`` read with acquire ordering."""
    if not _int64_array(ary):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element(context, builder, sig.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "acquire", ALIGN)

    return types.int64(ary, index), codegen


@intrinsic
def store_release(typingctx, ary, index, value):
    """``ary[index] = value`` with release ordering."""
    if not _int64_array(ary):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element(context, builder, sig.args[0], args[0], args[1])
        value = context.cast(builder, args[2], sig.args[2], types.int64)
        builder.store_atomic(value, ptr, "release", ALIGN)
        return context.get_dummy_value()

    return types.none(ary, index, value), codegen


@intrinsic
def compare_exchange(typingctx, ary, index, expected, value):
    """Set ``ary[index]`` to ``value`` if it holds ``expected``, atomically; return what it
    held."""
    if not _int64_array(ary):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element(context, builder, sig.args[0], args[0], args[1])
        expected = context.cast(builder, args[2], sig.args[2], types.int64)
        value = context.cast(builder, args[3], sig.args[3], types.int64)
        pair = builder.cmpxchg(ptr, expected, value, "seq_cst", "seq_cst")
        return builder.extract_value(pair, 0)

    return types.int64(ary, index, expected, value), codegen


@intrinsic
def relax(typingctx):
    """The CPU's spin-wait hint (x86 ``pause``; nothing elsewhere)."""

    def codegen(context, builder, sig, args):
        if platform.machine().lower() in ("x86_64", "amd64", "i686", "x86"):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def yield_core(typingctx):
    """``sched_yield()``: let another thread run on this core."""

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []),
                                            "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.none(), codegen


@njit(cache=True, nogil=True, inline="always")
def wait_until_at_least(ary, index, value):
    """Spin until ``ary[index]`` (read with acquire) is at least ``value``."""
    spins = 0
    while load_acquire(ary, index) < value:
        relax()
        spins += 1
        if spins == SPINS_BEFORE_YIELD:
            yield_core()
            spins = 0
