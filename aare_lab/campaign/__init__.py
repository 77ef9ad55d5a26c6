"""Campaigns: a beamtime's runs found on a Dask cluster (one task per run, one worker per
GPU where there are GPUs) and their results combined into one table and summed spectrum.

Needs the ``campaign`` extra (``dask``, ``distributed``). See docs/campaigns.md.
"""

from .campaign import Campaign
from .combine import failed_runs
from .darks import DarkPerRun, OneDark, SavedPedestals
from .runs import Run, runs_table

__all__ = ["Campaign", "DarkPerRun", "OneDark", "Run", "SavedPedestals", "failed_runs",
           "runs_table"]
