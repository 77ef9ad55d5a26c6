"""CF flag attributes (``flag_values``, ``flag_meanings``) of categorical variables."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def cf_flags(values: Iterable[int], meanings: Iterable[str], long_name: str | None = None,
             *, dtype: str = "uint8") -> dict:
    """The CF attributes of a variable whose values ``values`` mean ``meanings``.

    Parameters
    ----------
    values
        The codes; ``dtype`` must be the variable's, as CF requires.
    meanings
        One word per code, in the same order.
    long_name
        The variable's description, if any.
    dtype
        The codes' dtype.

    Examples
    --------
    >>> cf_flags(range(2), ["no", "yes"], "answer")["flag_meanings"]
    'no yes'
    """
    values = np.asarray(list(values), dtype)
    meanings = list(meanings)
    if len(values) != len(meanings) or any(not m or " " in m for m in meanings):
        raise ValueError(f"need one word per flag value, got {list(values)} and {meanings}")
    attrs = {"flag_values": values, "flag_meanings": " ".join(meanings)}
    if long_name is not None:
        attrs["long_name"] = long_name
    return attrs
