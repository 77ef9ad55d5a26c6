"""One run of a campaign, as a worker does it: train (or load) the pedestal, find, and
write the clusters, the spectrum, the pedestal and the run's row to ``DIR/<run>/``.

Everything of an attempt is written into its own hidden folder
``DIR/.<run>.attempt-<uuid>/`` that is renamed to ``DIR/<run>/`` only once complete
(`publish`): a run done again after its worker died never meets the dead worker's files,
and ``DIR/<run>/`` is always one whole attempt. The task returns the run's row (small);
what goes wrong with its inputs is caught and returned as a failed row with a one-line
reason, so that one bad run stops no other.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from aare_lab.analysis.fit import fit_peak
from aare_lab.detector.dark.quality import assess_dark
from aare_lab.detector.pedestal import Pedestal
from aare_lab.finders import make_finder
from aare_lab.model.results import counts_spectrum
from aare_lab.model.spec import FinderSpec
from aare_lab.pipeline import check_frame_shapes, train_pedestal_for
from aare_lab.sources import open_source
from aare_lab.sources.files import fingerprint
from aare_lab.storage.netcdf import write_netcdf

from .bins import CampaignBins, RunningCount
from .manifest import RUN_FILE
from .runs import Run

CLUSTERS, SPECTRUM, PEDESTAL = "clusters.nc", "spectrum.nc", "pedestal.nc"
#: The attribute that marks a run's ``spectrum.nc`` (`aare_lab.storage.netcdf.read_netcdf`).
SPECTRUM_MARK = ("aare_lab_campaign_spectrum", 1)
#: A run's row: what the campaign's table holds per run (`aare_lab.campaign.combine`).
NUMBERS = ("frames", "clusters", "truncated_frames", "ka_position", "ka_position_err",
           "ka_fwhm", "ka_fwhm_err", "dark_frames", "dark_false_rate_factor", "seconds")


@dataclass(frozen=True)
class Peak:
    """The peak fitted in each run's spectrum (`aare_lab.analysis.fit.fit_peak`): its window
    ``(low, high)`` in the spectrum's units, and optionally the Kα/Kβ ``lines``."""

    window: tuple[float, float]
    lines: tuple[float, float] | None = None


@dataclass(frozen=True)
class RunTask:
    """What a worker needs for the runs of one campaign besides the run itself."""

    spec: FinderSpec
    out: str
    bins: CampaignBins
    peak: Peak | None = None
    finder_options: tuple = ()


def attempt_folder(out: Path, name: str) -> Path:
    """A new attempt's folder for the run ``name``."""
    return out / f".{name}.attempt-{uuid.uuid4().hex}"


def is_attempt(path: Path) -> bool:
    """Whether ``path`` is an attempt's folder (finished or left by a dead worker)."""
    return path.name.startswith(".") and ".attempt-" in path.name


def worker_name() -> str:
    """The Dask worker running this (its address), else ``host:pid``."""
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def process_run(run: Run, key: str | None, task: RunTask) -> dict:
    """Do ``run`` (see the module) and return its row.

    Parameters
    ----------
    run
        The run.
    key
        Its run key (`aare_lab.campaign.manifest.run_key`), written with its row.
    task
        The campaign's spec, output folder, bins, peak and finder options.

    Returns
    -------
    dict
        The row: ``run``, ``status`` (``"done"`` or ``"failed"``), ``reason``, `NUMBERS`,
        ``dark_ok`` (`dark_is_ok`), ``warnings`` (categories of the warnings the run gave),
        ``notes`` (their first lines), ``worker``, ``key``; a finished run's also has its
        ``spectrum`` (as in its ``spectrum.nc``), which saves the campaign reading it. Workers that are threads of one
        process share Python's warning filters: there, the warnings of runs that overlap
        may be missing from their rows.
    """
    start = time.perf_counter()
    out = Path(task.out)
    attempt = attempt_folder(out, run.name)
    row = {"run": run.name, "key": key, "worker": worker_name(), "status": "failed",
           "reason": "", **{name: np.nan for name in NUMBERS}, "dark_ok": False,
           "warnings": "", "notes": []}
    try:
        attempt.mkdir(parents=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found, spectrum = _find(run, task, attempt)
            row.update(found)
        row["warnings"] = ",".join(sorted({w.category.__name__ for w in caught}))
        row["notes"] = [str(w.message).splitlines()[0] for w in caught]
        row.update(status="done", seconds=time.perf_counter() - start)
        (attempt / RUN_FILE).write_text(json.dumps(row, default=float))
        publish(attempt, out / run.name)
        row["spectrum"] = spectrum
    except Exception as err:  # noqa: BLE001: the run has failed, not the campaign
        shutil.rmtree(attempt, ignore_errors=True)
        row.update(status="failed", reason=one_line(err), seconds=time.perf_counter() - start)
    return row


def _find(run: Run, task: RunTask, attempt: Path) -> tuple[dict, xr.DataArray]:
    spec = task.spec
    frames = open_source(run.frames)
    if run.pedestal is not None:
        pedestal = Pedestal.load(run.pedestal)
    else:
        dark = open_source(run.dark)
        check_frame_shapes(dark, frames)
        pedestal = trained_pedestal(spec, run.dark, dark)
    dark_ok = dark_is_ok(pedestal, spec.n_sigma)
    finder = make_finder(spec, pedestal, **dict(task.finder_options))
    # The spectrum and the truncated frames are counted as the clusters pass, not read
    # back from the file: decoding a run's energies again costs as much as a tenth of the
    # finding.
    counted = RunningCount(task.bins)
    truncated = 0

    def count(batch, energies: np.ndarray) -> None:
        nonlocal truncated
        counted.add(energies)
        truncated += int(np.count_nonzero(batch.truncated))

    with ThreadPoolExecutor(1) as saver:
        # As trained, before the data frames move it; written while the finder works.
        saved = saver.submit(pedestal.copy().save, attempt / PEDESTAL)
        with finder.find(frames, progress=False, out=attempt / CLUSTERS,
                         on_batch=count) as result:
            n_frames = int(result.sizes["frame"])
            row = {"dark_ok": dark_ok, "frames": n_frames,
                   "clusters": int(result.sizes["cluster"]), "truncated_frames": truncated,
                   "dark_frames": int(result.attrs.get("dark_frames", pedestal.n_frames)),
                   "dark_false_rate_factor": float(result.attrs.get(
                       "dark_expected_false_rate_factor", np.nan))}
        saved.result()
    edges, counts, underflow, overflow = counted.result()
    spectrum = counts_spectrum(counts, edges, spec, n_frames, underflow, overflow)
    write_netcdf(spectrum.to_dataset().assign_attrs(dict([SPECTRUM_MARK])),
                 attempt / SPECTRUM)
    if task.peak is not None:
        row.update(fitted_peak(spectrum["energy"].to_numpy(), counts, task.peak))
    return row, spectrum


#: Pedestals trained in this process, by `trained_pedestal`'s key: (the pedestal, the
#: warnings its training gave). A worker's runs under one dark train the same pedestal.
_TRAINED: dict = {}
#: How many trained pedestals a process keeps (the most recent).
TRAINED_KEPT = 2


def trained_pedestal(spec: FinderSpec, source: str, dark) -> Pedestal:
    """The pedestal ``spec`` trains from the dark frames ``dark`` (opened from ``source``):
    trained once per process and dark, a copy for each run.

    Training reads only the dark frames, in order, so every run of one dark starts from the
    same state, bit for bit; the warnings of training are given again for each run, so that
    every run's row says what its dark said. The key is the dark's fingerprint
    (`aare_lab.sources.files.fingerprint`: names, sizes, times and sampled content), a dark
    that cannot be fingerprinted is trained for every run.
    """
    print_ = fingerprint(source)
    key = None if print_ is None else (print_, spec.n_pedestal, spec.pedestal_dtype,
                                       spec.noise, spec.calibration is not None)
    entry = _TRAINED.get(key)
    if entry is None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            entry = (train_pedestal_for(spec, dark, spec.n_pedestal or 1000, progress=False),
                     caught)
        if key is not None:
            # Workers that are threads of one process share the cache: the entry is held
            # here, whatever another thread evicts.
            while len(_TRAINED) >= TRAINED_KEPT:
                _TRAINED.pop(next(iter(_TRAINED)), None)
            _TRAINED[key] = entry
    pedestal, caught = entry
    _rewarn(caught)
    return pedestal.copy()


def _rewarn(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def dark_is_ok(pedestal: Pedestal, n_sigma: float) -> bool:
    """Whether nothing is wanting in a trained pedestal's dark frames: enough of them
    (`aare_lab.detector.dark.quality`), no pixel that stands out
    (`aare_lab.detector.dark.pixels`), no photons in them (`aare_lab.detector.dark.photons`);
    what the warnings of training and finding say, decided from the pedestal rather than from
    caught warnings (which threads of one process share)."""
    quality = assess_dark(pedestal, n_sigma)
    photons = pedestal.dark_photons
    return not (quality.noticeable or quality.pixel_warning is not None
                or (photons is not None and photons.illuminated))


def fitted_peak(centres: np.ndarray, counts: np.ndarray, peak: Peak) -> dict:
    """Kα's position and FWHM with their errors; NaN with a warning where the fit fails."""
    try:
        fit = fit_peak(centres, counts, peak.window, peak.lines)
    except ValueError as err:
        warnings.warn(f"no Kα fit: {err}", UserWarning, stacklevel=2)
        return {}
    return {"ka_position": fit.position, "ka_position_err": fit.position_err,
            "ka_fwhm": fit.fwhm, "ka_fwhm_err": fit.fwhm_err}


def publish(attempt: Path, folder: Path) -> None:
    """Rename a finished attempt to the run's folder; an older result there is moved
    aside first and then removed, so the folder is one attempt or the other, never a mix."""
    old = None
    if folder.exists():
        old = folder.with_name(f".{folder.name}.attempt-{uuid.uuid4().hex}-replaced")
        os.replace(folder, old)
    os.replace(attempt, folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def one_line(err: BaseException) -> str:
    """An error as one line: its message (with its type where that says more)."""
    text = (str(err).strip().splitlines() or [""])[0]
    if isinstance(err, (OSError, ValueError, TypeError)) and text:
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


__all__ = ["CLUSTERS", "NUMBERS", "PEDESTAL", "SPECTRUM", "SPECTRUM_MARK", "Peak", "RunTask",
           "dark_is_ok", "is_attempt", "one_line", "process_run", "publish"]
