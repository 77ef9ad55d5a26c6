"""Branch codes: which path of the per-pixel decision a pixel took in one frame.

The numbering is fixed by docs/algorithm.md. This enum is the one table: the Numba constants
(``aare_lab/detector/arith.py``) are derived from it, and the tests check the ``#define``\\ s of the
CUDA kernel (``kernels/frozen.cu``) and the independent transcription
(``tests/reference.py``) against it.
"""

from enum import IntEnum

from aare_lab.flags import cf_flags


class Branch(IntEnum):
    """The per-pixel outcome of the cluster-finding decision."""

    NOT_PROCESSED = 0
    NEG_SKIP = 1
    SHADOW = 2
    TEST1_STORE = 3
    TEST3_STORE = 4
    TEST3_SKIP = 5
    QUIET_UPDATE = 6

    @property
    def meaning(self) -> str:
        """What the code says of the pixel, in a line (docs/algorithm.md's table).

        Examples
        --------
        >>> Branch.SHADOW.meaning
        'Test 1 passed, but a tap in the window is larger'
        """
        return MEANINGS[self]


#: One line per code, as docs/algorithm.md's table of branch codes words it (a test
#: checks that the two agree).
MEANINGS = {
    Branch.NOT_PROCESSED: "no decision recorded (e.g. a frame without a map in a comparison); "
                          "a finder never writes it for a pixel it processed",
    Branch.NEG_SKIP: "the value is below `−thr` (or, with a JUNGFRAU calibration, the pixel "
                     "is flagged)",
    Branch.SHADOW: "Test 1 passed, but a tap in the window is larger",
    Branch.TEST1_STORE: "Test 1 passed and `p` is the window maximum: stored",
    Branch.TEST3_STORE: "Test 1 failed, Test 3 passed and `p` is the maximum: stored",
    Branch.TEST3_SKIP: "Test 3 passed, but a tap is larger",
    Branch.QUIET_UPDATE: "nothing passed: the value went into the pedestal",
}


def cf_flag_attrs(long_name: str = "branch taken by the cluster-finding decision") -> dict:
    """CF ``flag_values``/``flag_meanings`` attributes for a variable of branch codes."""
    return cf_flags([b.value for b in Branch], [b.name for b in Branch], long_name)
