"""Branch codes: which path of the per-pixel decision a pixel took in one frame.

The numbering is fixed by ALGORITHM.md and shared with the CUDA kernel
(``kernels/frozen.cu``) and the Numba decision (``aare_lab/finders/_decision.py``).
"""

from enum import IntEnum

import numpy as np


class Branch(IntEnum):
    """The per-pixel outcome of the cluster-finding decision."""

    NOT_PROCESSED = 0
    NEG_SKIP = 1
    SHADOW = 2
    TEST1_STORE = 3
    TEST3_STORE = 4
    TEST3_SKIP = 5
    QUIET_UPDATE = 6


FLAG_VALUES = np.array([b.value for b in Branch], dtype=np.uint8)
FLAG_MEANINGS = " ".join(b.name for b in Branch)


def cf_flag_attrs() -> dict:
    """CF ``flag_values``/``flag_meanings`` attributes for a branch-code map."""
    return {
        "flag_values": FLAG_VALUES,
        "flag_meanings": FLAG_MEANINGS,
        "long_name": "branch taken by the cluster-finding decision",
    }
