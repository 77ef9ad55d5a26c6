"""Acquire loads and release stores of int64 flags, for compiled threads that hand work
to each other through memory (`aare_lab.finders._frozen.band_frames`), and a wait on them.

Numba has no atomics for the CPU; these are LLVM's atomic load and store, so that the
compiler neither keeps a flag in a register across a wait nor moves the writes it
publishes past it, on any target.
"""

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


def _pointer(context, builder, array_type, array, index):
    ary = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, ary, [index])


@intrinsic
def load_acquire(typingctx, flags, index):
    """``flags[index]`` (int64), read after every write released before it."""
    if flags != types.Array(types.int64, 1, "C") and flags != types.Array(types.int64, 1, "A"):
        return None

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_pointer(context, builder, signature.args[0], *args),
                                   "acquire", 8)

    return types.int64(flags, index), codegen


@intrinsic
def store_release(typingctx, flags, index, value):
    """``flags[index] = value`` (int64), after every write before it."""
    if flags != types.Array(types.int64, 1, "C") and flags != types.Array(types.int64, 1, "A"):
        return None

    def codegen(context, builder, signature, args):
        array, index, value = args
        value = context.cast(builder, value, signature.args[2], types.int64)
        builder.store_atomic(value, _pointer(context, builder, signature.args[0], array, index),
                             "release", 8)
        return context.get_dummy_value()

    return types.void(flags, index, value), codegen


@intrinsic
def yield_thread(typingctx):
    """Give the core to another thread (POSIX ``sched_yield``): a waiting thread must not
    hold the core of the thread it waits for where there are more threads than cores."""

    def codegen(context, builder, signature, args):
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(function, [])
        return context.get_dummy_value()

    return types.void(), codegen


#: Reads of a flag between two yields (`wait_until`): about a microsecond.
SPINS = 256


@njit(cache=True, nogil=True, error_model="numpy")
def wait_until(flags, index, value):
    """Return once ``flags[index] >= value`` (acquired)."""
    spins = 0
    while load_acquire(flags, index) < value:
        spins += 1
        if spins == SPINS:
            yield_thread()
            spins = 0
