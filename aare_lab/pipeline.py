"""One-call workflows: train a pedestal from dark frames, find clusters with a named finder."""

from __future__ import annotations

from collections.abc import Iterable

import xarray as xr
from tqdm.auto import tqdm

from .finders import get_finder
from .pedestal import Pedestal
from .sources import open_source

DARK_CHUNK = 100


def train_pedestal(dark, n_pedestal: int = 1000, *, dtype: str = "float64",
                   noise: str = "running", progress: bool = True) -> Pedestal:
    """Train a `Pedestal` on dark frames.

    Parameters
    ----------
    dark
        Dark frames: an array, a file spec or a `FrameSource` (see
        `aare_lab.sources.open_source`). Frames beyond ``n_pedestal`` update the trained
        pedestal.
    n_pedestal
        The pedestal window N.
    dtype, noise
        As for `Pedestal`.
    progress
        Show a progress bar.

    Raises
    ------
    ValueError
        If there are fewer than ``n_pedestal`` dark frames.
    """
    source = open_source(dark)
    if source.n_frames is not None and source.n_frames < n_pedestal:
        raise ValueError(
            f"too few dark frames: {source.n_frames} given, n_pedestal={n_pedestal} needed "
            "(record more dark frames or lower n_pedestal)"
        )
    pedestal = Pedestal(source.frame_shape, n_pedestal, dtype, noise)
    with tqdm(total=source.n_frames, unit="frame", desc="pedestal", disable=not progress) as bar:
        for chunk in source.chunks(DARK_CHUNK):
            pedestal.push_dark(chunk.frames)
            bar.update(len(chunk.numbers))
    pedestal.require_ready()
    return pedestal


def find_clusters(frames, dark=None, *, pedestal: Pedestal | None = None,
                  finder: str = "frozen", n_sigma: float = 5.0,
                  cluster_size: int | str | tuple[int, int] = (3, 3),
                  n_pedestal: int = 1000, pedestal_dtype: str = "float64",
                  noise: str = "running", max_clusters_per_frame: int | None = None,
                  branch_maps: bool | Iterable[int] | None = None, progress: bool = True,
                  **finder_options) -> xr.Dataset:
    """Train a pedestal on ``dark`` (or take ``pedestal``) and find clusters in ``frames``.

    Parameters
    ----------
    frames
        The data frames (array, file spec or `FrameSource`).
    dark
        The dark frames; not needed when ``pedestal`` is given.
    pedestal
        A trained pedestal to start from; it is copied, never advanced.
    finder
        A name from `aare_lab.finders.available_finders`.
    n_sigma, cluster_size, max_clusters_per_frame
        Finder parameters (see `aare_lab.finders.Finder`).
    n_pedestal, pedestal_dtype, noise
        Pedestal configuration when training from ``dark``.
    branch_maps
        True for every frame, or frame numbers.
    progress
        Show progress bars.
    **finder_options
        Passed to the finder class (``threads``, ``on_truncation``, ``window_dtype``...).

    Returns
    -------
    xarray.Dataset
        See `aare_lab.results`.

    Examples
    --------
    >>> from aare_lab.simulate import Detector, simulate_run
    >>> run = simulate_run(n_dark=20, n_frames=5, detector=Detector(frame_shape=(32, 32)))
    >>> result = find_clusters(run.frames, run.dark, n_pedestal=20, progress=False)
    >>> int(result.sizes["frame"])
    5
    """
    if pedestal is None:
        if dark is None:
            raise ValueError("give dark frames (dark=...) or a trained pedestal (pedestal=...)")
        pedestal = train_pedestal(dark, n_pedestal, dtype=pedestal_dtype, noise=noise,
                                  progress=progress)
    else:
        pedestal.require_ready()
        pedestal = pedestal.copy()
    finder_cls = get_finder(finder)
    runner = finder_cls(pedestal, n_sigma, cluster_size, max_clusters_per_frame,
                        **finder_options)
    return runner.find(frames, branch_maps=branch_maps, progress=progress)
