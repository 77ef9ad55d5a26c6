"""A campaign's results combined: the per-run table and the summed spectrum, as one
xarray Dataset (``DIR/campaign.nc``) and the table as CSV (``DIR/runs.csv``)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import xarray as xr

from aare_lab._version import __version__
from aare_lab.model.results import energy_coords, spectrum_edges
from aare_lab.storage.atomic import replace_atomically
from aare_lab.storage.netcdf import read_netcdf, write_netcdf

from .runs import Run
from .task import NUMBERS, SPECTRUM, SPECTRUM_MARK, RunTask, fitted_peak

COMBINED, TABLE_CSV = "campaign.nc", "runs.csv"
#: The table's columns over ``run`` that are whole numbers; -1 where a run failed.
COUNTS = ("frames", "clusters", "truncated_frames", "dark_frames")
#: What each column is, for the Dataset's ``long_name``.
LONG_NAMES = {
    "status": "done or failed", "reason": "why the run failed (one line)",
    "frames": "data frames found (-1: failed)", "clusters": "clusters found (-1: failed)",
    "truncated_frames": "frames whose clusters were cut by the cap (-1: failed)",
    "ka_position": "fitted K-alpha position", "ka_position_err": "its standard error",
    "ka_fwhm": "fitted K-alpha full width at half maximum", "ka_fwhm_err": "its standard error",
    "dark_frames": "dark frames trained into the pedestal (-1: failed)",
    "dark_false_rate_factor": "expected rise of the noise-cluster rate from the dark's "
                              "uncertainty (aare_lab.detector.dark.quality)",
    "dark_ok": "nothing wanting in the run's dark frames (enough of them, no pixel that "
               "stands out, no photons)",
    "seconds": "wall time of the run on its worker", "worker": "the worker that did the run",
    "warnings": "categories of the warnings the run gave",
}
CSV_COLUMNS = ("run", "status", "frames", "clusters", "truncated_frames", "ka_position",
               "ka_position_err", "ka_fwhm", "ka_fwhm_err", "dark_ok", "dark_frames",
               "dark_false_rate_factor", "seconds", "worker", "warnings", "reason")


def combine(runs: list[Run], rows: dict[str, dict], task: RunTask,
            spectra: dict[str, xr.DataArray] | None = None) -> xr.Dataset:
    """The campaign's Dataset from its runs' rows and spectra.

    Parameters
    ----------
    runs
        The campaign's runs, in the table's order.
    rows
        Each run's row (`aare_lab.campaign.task.process_run`); a run without one is failed.
    task
        The campaign's spec, output folder, bins and peak.
    spectra
        Spectra of finished runs at hand (as their workers returned them); the others are
        read from their ``spectrum.nc``.

    Returns
    -------
    xarray.Dataset
        Over ``run``: the columns of `LONG_NAMES` and ``run_spectrum`` (``run``,
        ``energy``); ``spectrum`` over ``energy``, the sum of every finished run's counts on
        the same bins, with the Kα fit of the sum as attributes where a peak is asked for.
    """
    out = Path(task.out)
    names = [run.name for run in runs]
    rows = {name: rows.get(name) or {"run": name, "status": "failed",
                                     "reason": "the run did not finish"} for name in names}
    given = spectra or {}
    spectra = {name: given[name] if name in given else read_netcdf(
                   out / name / SPECTRUM, "a campaign run's spectrum",
                   "run the campaign again to redo it", SPECTRUM_MARK)["counts"]
               for name in names if rows[name]["status"] == "done"}
    edges, counts, outside = _aligned(names, spectra, task)
    table = {}
    for column in LONG_NAMES:
        values = [rows[name].get(column) for name in names]
        if column in COUNTS:
            data = np.array([-1 if _missing(v) else int(v) for v in values], np.int64)
        elif column in NUMBERS:
            data = np.array([np.nan if _missing(v) else float(v) for v in values])
        elif column == "dark_ok":
            data = np.array([bool(v) for v in values])
        else:
            data = np.array(["" if v is None else str(v) for v in values], dtype=str)
        table[column] = ("run", data, {"long_name": LONG_NAMES[column]})
    units = task.spec.units
    for column in ("ka_position", "ka_position_err", "ka_fwhm", "ka_fwhm_err"):
        table[column][2]["units"] = units
    table["seconds"][2]["units"] = "s"
    summed = counts.sum(axis=0)
    spectrum_attrs = {"long_name": "clusters per energy bin, all finished runs",
                      "underflow": int(outside[:, 0].sum()), "overflow": int(outside[:, 1].sum())}
    if task.peak is not None:
        spectrum_attrs.update({f"sum_{name}": value for name, value in fitted_peak(
            0.5 * (edges[:-1] + edges[1:]), summed, task.peak).items()})
    ds = xr.Dataset(
        {**table,
         "run_spectrum": (("run", "energy"), counts, {"long_name": "clusters per energy bin"}),
         "spectrum": ("energy", summed, spectrum_attrs)},
        coords={"run": ("run", np.array(names, dtype=str)), **energy_coords(edges, units)},
        attrs={"title": "aare_lab campaign", "aare_lab_version": __version__,
               **task.spec.attrs, "runs": len(names),
               "failed_runs": " ".join(failed_runs_of(rows.values())),
               "bin_width": task.bins.width if task.bins.edges is None else np.nan})
    return ds


def _aligned(names, spectra: dict[str, xr.DataArray], task: RunTask):
    """The common edges, the counts of each run on them, and each run's under/overflow."""
    bins = task.bins
    parts = {name: (spectrum_edges(s), s.to_numpy()) for name, s in spectra.items()}
    edges, first = bins.common_edges(list(parts.values()))
    counts = np.zeros((len(names), len(edges) - 1), np.int64)
    outside = np.zeros((len(names), 2), np.int64)
    for i, name in enumerate(names):
        if name in parts:
            run_edges, run_counts = parts[name]
            at = bins.offset(run_edges, first)
            counts[i, at:at + len(run_counts)] = run_counts
            attrs = spectra[name].attrs
            outside[i] = attrs.get("underflow", 0), attrs.get("overflow", 0)
    return edges, counts, outside


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def failed_runs_of(rows) -> list[str]:
    """The names of the failed runs among ``rows``."""
    return [row["run"] for row in rows if row.get("status") != "done"]


def failed_runs(campaign: xr.Dataset) -> dict[str, str]:
    """The failed runs of a combined campaign and why: ``{run: reason}``."""
    failed = campaign["status"].to_numpy() != "done"
    return dict(zip(campaign["run"].to_numpy()[failed].tolist(),
                    campaign["reason"].to_numpy()[failed].tolist()))


def write_table(campaign: xr.Dataset, path: str | Path) -> None:
    """The per-run table as CSV (numbers empty where a run failed)."""
    def cell(column, k):
        value = campaign[column].to_numpy()[k]
        if column in COUNTS and value < 0 or isinstance(value, float) and math.isnan(value):
            return ""
        return value.item() if isinstance(value, np.generic) else value

    def write(temporary: Path) -> None:
        with open(temporary, "w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(CSV_COLUMNS)
            for k in range(campaign.sizes["run"]):
                writer.writerow([cell(column, k) for column in CSV_COLUMNS])

    replace_atomically(path, write)


def save_combined(campaign: xr.Dataset, out: str | Path) -> None:
    """Write ``DIR/campaign.nc`` and ``DIR/runs.csv``."""
    write_netcdf(campaign, Path(out) / COMBINED)
    write_table(campaign, Path(out) / TABLE_CSV)


__all__ = ["COMBINED", "CSV_COLUMNS", "TABLE_CSV", "combine", "failed_runs", "save_combined",
           "write_table"]
