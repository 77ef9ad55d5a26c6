"""Branch codes: which path of the per-pixel decision a pixel took in one frame.

The numbering is fixed by docs/algorithm.md. This enum is the one table: the Numba constants
(``aare_lab/_arith.py``) are derived from it, and the tests check the ``#define``\\ s of the
CUDA kernel (``kernels/frozen.cu``) and the independent transcription
(``tests/reference.py``) against it.
"""

from enum import IntEnum

from .flags import cf_flags


class Branch(IntEnum):
    """The per-pixel outcome of the cluster-finding decision."""

    NOT_PROCESSED = 0
    NEG_SKIP = 1
    SHADOW = 2
    TEST1_STORE = 3
    TEST3_STORE = 4
    TEST3_SKIP = 5
    QUIET_UPDATE = 6


def cf_flag_attrs(long_name: str = "branch taken by the cluster-finding decision") -> dict:
    """CF ``flag_values``/``flag_meanings`` attributes for a variable of branch codes."""
    return cf_flags([b.value for b in Branch], [b.name for b in Branch], long_name)
