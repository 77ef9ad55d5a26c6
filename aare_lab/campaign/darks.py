"""Where each run's pedestal comes from: one dark for all runs, a dark per run, or a saved
pedestal per run."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

from .runs import Run


@dataclass(frozen=True)
class OneDark:
    """The same dark frames train every run's pedestal (each run trains its own)."""

    source: str

    def apply(self, run: Run) -> Run:
        """``run`` with this dark."""
        return dataclasses.replace(run, dark=self.source, pedestal=None)


@dataclass(frozen=True)
class DarkPerRun:
    """Each run's own dark frames: a mapping ``run -> source``, or a pattern in which
    ``{run}`` stands for the run's name (``"darks/{run}_dark.npy"``)."""

    darks: Mapping[str, str] | str

    def apply(self, run: Run) -> Run:
        """``run`` with its dark."""
        return dataclasses.replace(run, dark=_for(self.darks, run, "dark"), pedestal=None)


@dataclass(frozen=True)
class SavedPedestals:
    """Each run's saved pedestal (`aare_lab.Pedestal.save`, ``aare-lab find
    --save-pedestal``): a mapping ``run -> file`` or a pattern with ``{run}``."""

    pedestals: Mapping[str, str] | str

    def apply(self, run: Run) -> Run:
        """``run`` with its pedestal file."""
        return dataclasses.replace(run, dark=None,
                                   pedestal=_for(self.pedestals, run, "saved pedestal"))


def _for(given: Mapping[str, str] | str, run: Run, what: str) -> str:
    if isinstance(given, str):
        return given.format(run=run.name)
    try:
        return os.fspath(given[run.name])
    except KeyError:
        raise ValueError(f"no {what} for the run {run.name!r}: the mapping names "
                         f"{', '.join(map(repr, given)) or 'no run'}") from None


def as_dark_policy(dark) -> OneDark | DarkPerRun | SavedPedestals | None:
    """A dark policy from what `aare_lab.campaign.Campaign` takes as ``dark``: a policy, a
    source (`OneDark`; with ``{run}`` in it, `DarkPerRun`), a mapping (`DarkPerRun`) or
    None (the runs table names each run's dark)."""
    if dark is None or isinstance(dark, (OneDark, DarkPerRun, SavedPedestals)):
        return dark
    if isinstance(dark, Mapping):
        return DarkPerRun({name: os.fspath(value) for name, value in dark.items()})
    text = os.fspath(dark)
    return DarkPerRun(text) if "{run}" in text else OneDark(text)


def with_darks(runs: list[Run], dark) -> list[Run]:
    """``runs`` with the dark policy ``dark`` applied (see `as_dark_policy`).

    Raises
    ------
    ValueError
        For a run left without a dark or a pedestal, naming it.
    """
    policy = as_dark_policy(dark)
    done = [run if policy is None else policy.apply(run) for run in runs]
    missing = [run.name for run in done if run.dark is None and run.pedestal is None]
    if missing:
        raise ValueError(f"no dark frames or saved pedestal for the runs {', '.join(missing)}: "
                         "give dark= (one for all, a mapping, or a pattern with {run}) or a "
                         "runs table with a dark column")
    return done


__all__ = ["DarkPerRun", "OneDark", "SavedPedestals", "as_dark_policy", "with_darks"]
