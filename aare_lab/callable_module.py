"""Modules named after their main function, which can be called as that function.

``aare_lab.explain``, ``aare_lab.compare`` and ``aare_lab.spectra`` read as functions, and
are: ``aare_lab.explain(frames, 0, 10, 12, results)`` calls `aare_lab.analysis.explain.explain`,
while ``from aare_lab.analysis.explain import explain_sites`` and the module's other names
work as for any module. ``aare_lab.explain`` is the module `aare_lab.analysis.explain` itself
(`aare_lab.SUBMODULES`), so the call is the module's.
"""

from __future__ import annotations

import sys
import types


class CallableModule(types.ModuleType):
    """A module whose call is the call of its function of the same name."""

    def __call__(self, *args, **kwargs):
        return getattr(self, self.__name__.rpartition(".")[2])(*args, **kwargs)


def make_callable(name: str) -> None:
    """Let the module ``name`` (a ``__name__``) be called as its function of that name."""
    sys.modules[name].__class__ = CallableModule
