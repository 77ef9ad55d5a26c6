"""Atomic counters for compiled loops whose threads share out work as they come free
(the frozen finder's bands, `_frozen`).

Numba has no atomics on the CPU; `take` emits LLVM's read-modify-write and `peek` its
atomic load. They only hand out distinct numbers: what a band writes is published by the
end of the parallel region, not by the counters, so the ordering can be the weakest
(monotonic). A counter a thread, each on a cache line of its own (`COUNTER_STRIDE`), read
before it is taken from: an atomic add on a line other threads read makes them all fetch
it again.
"""

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Elements of int64 between two threads' counters: 64 bytes, a cache line.
COUNTER_STRIDE = 8


def _element(context, builder, sig, args):
    array = context.make_array(sig.args[0])(context, builder, args[0])
    index = context.cast(builder, args[1], sig.args[1], types.intp)
    return cgutils.get_item_pointer(context, builder, sig.args[0], array, [index],
                                    wraparound=False)


def _counter(counters, index):
    return (isinstance(counters, types.Array) and counters.dtype == types.int64
            and counters.ndim == 1 and isinstance(index, types.Integer))


@intrinsic
def take(typingctx, counters, index):
    """Add 1 to ``counters[index]`` (a 1-d int64 array) atomically; return what it held."""
    if not _counter(counters, index):
        return None

    def codegen(context, builder, sig, args):
        return builder.atomic_rmw("add", _element(context, builder, sig, args),
                                  context.get_constant(types.int64, 1), "monotonic")

    return types.int64(counters, index), codegen


@intrinsic
def peek(typingctx, counters, index):
    """``counters[index]`` (a 1-d int64 array) read atomically, without taking."""
    if not _counter(counters, index):
        return None

    def codegen(context, builder, sig, args):
        return builder.load_atomic(_element(context, builder, sig, args), "monotonic", 8)

    return types.int64(counters, index), codegen
