"""`Campaign`: a beamtime's runs found on a Dask cluster, one task per run, the results
combined (see docs/campaigns.md)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import xarray as xr

from aare_lab.model.spec import FinderSpec

from .bins import CampaignBins
from .cluster import connected, dashboard, require_gpus, visible_gpus
from .combine import combine, save_combined
from .darks import with_darks
from .manifest import Manifest, campaign_key, run_key
from .progress import RunsProgress
from .runs import Run, absolute_run, runs_table
from .task import Peak, RunTask, is_attempt, one_line, process_run


class Campaign:
    """A campaign's runs, how to find them, and where their results go.

    Parameters
    ----------
    runs
        Data sources (paths, globs, slsDetector master files, ``file.h5:/dataset``), a
        mapping ``name -> source``, `Run` objects, or a CSV runs table (run, frames, dark or
        pedestal): `aare_lab.campaign.runs.runs_table`.
    spec
        The finder and its parameters (default ``FinderSpec()``).
    dark
        One dark for every run (a source), a dark per run (a mapping, or a pattern with
        ``{run}``), a policy of `aare_lab.campaign.darks`, or None where the runs table
        names each run's dark.
    out
        The campaign's folder: ``<run>/`` per run (clusters.nc, spectrum.nc, pedestal.nc,
        run.json), ``manifest.json``, ``campaign.nc`` and ``runs.csv``.
    width, edges
        The spectra's bins (`aare_lab.campaign.bins.CampaignBins`).
    peak, lines
        The window ``(low, high)`` of the Kα peak to fit in each run's spectrum (and the
        sum), with the Kα/Kβ ``lines`` for a doublet (`aare_lab.analysis.fit.fit_peak`).
    finder_options
        Options of the finder that leave its output alone (``threads``, ``chunk_frames``,
        ``on_truncation``...).

    Raises
    ------
    ValueError, FileNotFoundError
        For runs that cannot be told apart, a glob matching nothing, a run without a dark.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from aare_lab.simulate import Detector, simulate_run
    >>> folder = tempfile.mkdtemp()
    >>> run = simulate_run(n_dark=20, n_frames=4, detector=Detector(frame_shape=(16, 16)))
    >>> np.save(f"{folder}/dark.npy", run.dark); np.save(f"{folder}/a.npy", run.frames)
    >>> campaign = Campaign([f"{folder}/a.npy"], FinderSpec("serial", n_pedestal=20),
    ...                     dark=f"{folder}/dark.npy", out=f"{folder}/out")
    >>> [r.name for r in campaign.runs]
    ['a']
    """

    def __init__(self, runs, spec: FinderSpec | None = None, *, dark=None,
                 out: str | os.PathLike, width: float | None = None, edges=None,
                 peak: tuple[float, float] | None = None, lines=None,
                 finder_options: dict | None = None):
        self.spec = FinderSpec() if spec is None else spec
        self.runs: list[Run] = [absolute_run(run) for run in
                                with_darks(runs_table(runs), dark)]
        self.out = Path(out)
        bins = CampaignBins(self.spec.units, width, None if edges is None else tuple(edges))
        self.task = RunTask(self.spec, str(self.out.resolve()), bins,
                            None if peak is None else Peak(tuple(peak), lines),
                            tuple(sorted((finder_options or {}).items())))
        self.key = campaign_key(self.spec, {"bins": bins, "peak": self.task.peak})

    def pending(self, force: bool = False) -> list[Run]:
        """The runs a `run` would do: all with ``force``, else those not finished under
        their current inputs (`aare_lab.campaign.manifest.Manifest.finished`)."""
        return self._pending(Manifest(self.out, self.key), self._keys(), force)

    def _keys(self) -> dict[str, str | None]:
        return {run.name: run_key(self.key, run) for run in self.runs}

    def _pending(self, manifest: Manifest, keys: dict, force: bool) -> list[Run]:
        return [run for run in self.runs
                if force or not manifest.finished(run, keys[run.name])]

    def run(self, client=None, *, force: bool = False, workers: int | None = None,
            gpus: list[str] | None = None, processes: bool = True, progress: bool = True,
            report: Callable[[str], None] | None = None) -> xr.Dataset:
        """Do the pending runs on a Dask cluster and combine every run's results.

        Parameters
        ----------
        client
            A `distributed.Client`, a scheduler address, or None for a cluster made here:
            one worker per GPU of ``gpus``, else a `distributed.LocalCluster` of
            ``workers`` (``processes=False``: threads of this process).
        force
            Redo every run, finished or not.
        gpus
            The GPUs of the cluster made here (``CUDA_VISIBLE_DEVICES`` names). Left out
            with the cuda finder, and no local cluster asked for (``workers``,
            ``processes=False``): every GPU visible here
            (`aare_lab.campaign.cluster.visible_gpus`).
        progress
            Dask's bar (`distributed.progress`) where stdout is a terminal, else a tqdm
            line (`aare_lab.campaign.progress.RunsProgress`); False: none.
        report
            Receives one-line messages (the dashboard's link, the GPUs picked, runs
            skipped); default none.

        Returns
        -------
        xarray.Dataset
            `aare_lab.campaign.combine.combine`'s, also written as ``campaign.nc`` and
            ``runs.csv``; failed runs are rows with ``status`` "failed" and a ``reason``
            (`aare_lab.campaign.combine.failed_runs`).

        Raises
        ------
        ValueError
            For the cuda finder on a cluster made here where no GPU is visible.
        KeyboardInterrupt
            On Ctrl-C: the runs not yet finished are cancelled; the finished ones stay, and
            the manifest names only them.
        """
        say = report or (lambda line: None)
        self.out.mkdir(parents=True, exist_ok=True)
        manifest = Manifest(self.out, self.key)
        keys = self._keys()
        todo = self._pending(manifest, keys, force)
        if len(todo) < len(self.runs):
            say(f"{len(self.runs) - len(todo)} of {len(self.runs)} runs finished before: kept")
        self._remove_attempts()
        spectra: dict[str, xr.DataArray] = {}
        if todo:
            gpus = self._gpus(client, gpus, workers, processes, say)
            with connected(client, workers=workers, gpus=gpus, processes=processes) as c:
                say(dashboard(c))
                self._submit(c, todo, keys, manifest, spectra, progress)
        self._remove_attempts()
        rows = {name: manifest.runs.get(name) for name in keys}
        campaign = combine(self.runs, rows, self.task, spectra)
        save_combined(campaign, self.out)
        return campaign

    def _gpus(self, client, gpus: list[str] | None, workers: int | None, processes: bool,
              say: Callable[[str], None]) -> list[str] | None:
        """The GPUs of a cluster made here: ``gpus`` as given; left out, with the cuda
        finder and neither ``workers`` nor ``processes=False``, every GPU visible here."""
        if gpus is not None or client is not None or workers is not None or not processes \
                or self.spec.finder != "cuda":
            return gpus
        found = require_gpus(visible_gpus(), "the cuda finder needs one: run where the GPUs "
                             "are, give a client whose workers have them, or use the frozen "
                             "finder")
        say(f"one worker per GPU: {', '.join(found)} (CUDA_VISIBLE_DEVICES)")
        return found

    def _submit(self, client, todo: list[Run], keys: dict, manifest: Manifest,
                spectra: dict, progress: bool) -> None:
        from distributed import as_completed

        futures = {client.submit(process_run, run, keys[run.name], self.task, pure=False,
                                 key=f"run-{run.name}-{os.urandom(4).hex()}"): run
                   for run in todo}
        try:
            with RunsProgress(client, futures, progress) as bar:
                for future in as_completed(futures):
                    row = self._row_of(future, futures[future])
                    if (spectrum := row.pop("spectrum", None)) is not None:
                        spectra[row["run"]] = spectrum
                    manifest.record(row)
                    bar.update()
        except BaseException:
            # Ctrl-C or a lost scheduler: what finished is in the manifest already.
            client.cancel(list(futures))
            raise

    def _row_of(self, future, run: Run) -> dict:
        """A finished task's row; a task that never finished (its workers kept dying)
        becomes a failed row."""
        try:
            return future.result()
        except Exception as err:  # noqa: BLE001: KilledWorker, a lost connection...
            return {"run": run.name, "status": "failed", "key": None,
                    "reason": f"no worker finished it: {one_line(err)}"}

    def _remove_attempts(self) -> None:
        """Remove what attempts left behind (workers that died), when none is running."""
        for path in self.out.iterdir():
            if is_attempt(path):
                shutil.rmtree(path, ignore_errors=True)

    def __repr__(self) -> str:
        return f"Campaign({len(self.runs)} runs, {self.spec.finder}, out={str(self.out)!r})"



__all__ = ["Campaign"]
