"""The campaign's progress over its runs: dask's own bar where it fits, a tqdm line
otherwise."""

from __future__ import annotations

import asyncio
import sys
from contextlib import suppress
from typing import Self

from tqdm.auto import tqdm

#: How long the end waits for dask's bar to draw its last state.
LAST_DRAW_S = 5.0


def terminal() -> bool:
    """Whether stdout is a terminal (not a log, a pipe or a notebook's output)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # no stdout (pythonw), or a closed one
        return False


class RunsProgress:
    """Progress over a campaign's futures, one `update` per finished run.

    In a terminal, dask's text bar follows the futures on the scheduler (what
    `distributed.progress` draws in a console; here on the client's event loop, so that the
    campaign records each run as it ends). Elsewhere, and where dask's bar cannot follow
    them (it could not start, or it stopped before the runs did: the scheduler refused it,
    a task erred), a tqdm line counts the runs; in a notebook that is tqdm's widget.

    Parameters
    ----------
    client
        The `distributed.Client` of the futures.
    futures
        The runs' futures.
    shown
        False: no progress at all.
    """

    def __init__(self, client, futures, shown: bool = True):
        self.total = len(futures)
        self.done = 0
        self.bar = self.drawn = None
        self.line: tqdm | None = None
        if shown and terminal():
            self._follow(client, futures)
        if shown and self.drawn is None:
            self._count()

    def _follow(self, client, futures) -> None:
        try:
            from distributed.diagnostics.progressbar import TextProgressBar

            self.bar = TextProgressBar(list(futures), scheduler=client.scheduler.address,
                                       loop=client.loop, start=False)
            self.drawn = asyncio.run_coroutine_threadsafe(self.bar.listen(),
                                                          client.loop.asyncio_loop)
        except Exception:  # noqa: BLE001: a distributed whose bar is not there, or moved
            self.bar = self.drawn = None

    def _count(self) -> None:
        self.line = tqdm(total=self.total, initial=self.done, unit="run", desc="campaign")

    def _stopped_early(self) -> bool:
        return (self.drawn is not None and self.drawn.done()
                and getattr(self.bar, "status", None) != "finished")

    def update(self) -> None:
        """Count one finished run."""
        if self.line is None and self._stopped_early():
            self._count()
        self.done += 1
        if self.line is not None:
            self.line.update()

    def close(self, finished: bool = True) -> None:
        """End the progress: dask's bar draws its last state (and clears its line) when
        all runs ``finished``; else it stops where it is, its line kept."""
        if self.drawn is not None and finished:
            with suppress(Exception):  # late, or failed: stopped below all the same
                self.drawn.result(LAST_DRAW_S)
        if self.drawn is not None and not self.drawn.done():
            self.drawn.cancel()
            sys.stdout.write("\n")
        if self.line is not None:
            self.line.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind, error, trace) -> None:
        self.close(finished=kind is None)


__all__ = ["RunsProgress", "terminal"]
