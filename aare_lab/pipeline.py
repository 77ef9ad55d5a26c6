"""One-call workflows: train a pedestal from dark frames, find clusters with a named finder."""

from __future__ import annotations

from collections.abc import Iterable

import xarray as xr
from tqdm.auto import tqdm

from .pedestal import Pedestal
from .sources import open_source
from .spec import FinderSpec

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
                  spec: FinderSpec | None = None, finder: str = "frozen", n_sigma: float = 5.0,
                  cluster_size: int | str | tuple[int, int] = (3, 3),
                  n_pedestal: int = 1000, pedestal_dtype: str = "float64",
                  noise: str = "running", max_clusters_per_frame: int | None = None,
                  window_dtype: str = "int32",
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
    spec
        The finder and its parameters as one `FinderSpec`, instead of ``finder`` to
        ``window_dtype`` (which are then refused). A given ``pedestal`` must have its
        dtype, noise mode and ``n_pedestal`` (if set; 1000 when training).
    finder
        A name from `aare_lab.finders.available_finders`.
    n_sigma, cluster_size, max_clusters_per_frame, window_dtype
        Finder parameters (see `aare_lab.spec.FinderSpec`).
    n_pedestal, pedestal_dtype, noise
        Pedestal configuration when training from ``dark`` (a given ``pedestal`` brings
        its own).
    branch_maps
        True for every frame, or frame numbers.
    progress
        Show progress bars.
    **finder_options
        Passed to the finder class (``threads``, ``on_truncation``, ``chunk_frames``...).

    Returns
    -------
    xarray.Dataset
        See `aare_lab.results`.

    Raises
    ------
    TypeError
        For ``spec`` together with any of ``finder`` to ``window_dtype``.
    ValueError
        For an invalid parameter, or a pedestal that does not fit the specification.

    Examples
    --------
    >>> from aare_lab.simulate import Detector, simulate_run
    >>> run = simulate_run(n_dark=20, n_frames=5, detector=Detector(frame_shape=(32, 32)))
    >>> result = find_clusters(run.frames, run.dark, n_pedestal=20, progress=False)
    >>> int(result.sizes["frame"])
    5
    >>> again = find_clusters(run.frames, run.dark, spec=FinderSpec.from_result(result),
    ...                       progress=False)
    >>> bool((again["energy"] == result["energy"]).all())
    True
    """
    given = {name: value for name, value, default in (
        ("finder", finder, "frozen"), ("n_sigma", n_sigma, 5.0),
        ("cluster_size", cluster_size, (3, 3)), ("n_pedestal", n_pedestal, 1000),
        ("pedestal_dtype", pedestal_dtype, "float64"), ("noise", noise, "running"),
        ("max_clusters_per_frame", max_clusters_per_frame, None),
        ("window_dtype", window_dtype, "int32")) if value != default}
    if spec is None:
        if pedestal is not None:
            # A trained pedestal brings its own configuration.
            pedestal_dtype, noise, n_pedestal = (pedestal.dtype.name, pedestal.noise,
                                                 pedestal.n_pedestal)
        spec = FinderSpec(finder, n_sigma, cluster_size, pedestal_dtype, noise,
                          max_clusters_per_frame, window_dtype, n_pedestal)
    elif given:
        raise TypeError(f"give the finder parameters either as spec= or as arguments, not "
                        f"both (got spec and {', '.join(given)})")
    if pedestal is None:
        if dark is None:
            raise ValueError("give dark frames (dark=...) or a trained pedestal (pedestal=...)")
        pedestal = train_pedestal(dark, spec.n_pedestal or n_pedestal,
                                  dtype=spec.pedestal_dtype, noise=spec.noise,
                                  progress=progress)
    else:
        pedestal.require_ready()
        pedestal = pedestal.copy()
    runner = spec.make_finder(pedestal, **finder_options)
    return runner.find(frames, branch_maps=branch_maps, progress=progress)
