"""Atomic counters for compiled loops whose threads share out work as they come free
(the frozen finder's bands, `_frozen`).

Numba has no atomics on the CPU; `take` emits LLVM's read-modify-write. It only hands out
distinct numbers: what a band writes is published by the end of the parallel region, not
by the counter, so the ordering can be the weakest (monotonic).
"""

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def take(typingctx, counters, index):
    """Add 1 to ``counters[index]`` (a 1-d int64 array) atomically; return what it held."""
    if not (isinstance(counters, types.Array) and counters.dtype == types.int64
            and counters.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        array = context.make_array(sig.args[0])(context, builder, args[0])
        index = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], array, [index],
                                       wraparound=False)
        return builder.atomic_rmw("add", ptr, context.get_constant(types.int64, 1),
                                  "monotonic")

    return types.int64(counters, index), codegen
