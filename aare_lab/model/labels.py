"""Short, unique names for finder results, used in tables, legends and JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import xarray as xr

# Attributes that tell runs apart, in the order they are added to a label.
_DISTINGUISHING = ("finder", "pedestal_dtype", "noise", "n_sigma", "max_clusters_per_frame")


def result_labels(results: Sequence[xr.Dataset]) -> list[str]:
    """Name each result by its finder, adding attributes where names collide.

    Parameters
    ----------
    results
        Finder results (see `aare_lab.model.results`).

    Returns
    -------
    list of str
        The finder names, with ``/pedestal dtype``, ``/noise``, ``/n_sigma`` and
        ``/capacity`` appended, in this order, to the names still shared by several
        results, wherever that attribute tells them apart; a ``#i`` suffix when nothing
        does.

    Examples
    --------
    >>> import xarray as xr
    >>> runs = [xr.Dataset(attrs={"finder": f, "pedestal_dtype": d})
    ...         for f, d in (("serial", "float64"), ("frozen", "float64"), ("frozen", "float32"))]
    >>> result_labels(runs)
    ['serial', 'frozen/float64', 'frozen/float32']
    """
    parts = [[str(r.attrs.get(_DISTINGUISHING[0], "?"))] for r in results]
    for name in _DISTINGUISHING[1:]:
        labels = ["/".join(p) for p in parts]
        for label in {lab for lab in labels if labels.count(lab) > 1}:
            group = [i for i, lab in enumerate(labels) if lab == label]
            values = [str(results[i].attrs.get(name, "?")) for i in group]
            if len(set(values)) > 1:
                for i, value in zip(group, values):
                    parts[i].append(value)
    labels = ["/".join(p) for p in parts]
    return [f"{lab}#{i}" if labels.count(lab) > 1 else lab for i, lab in enumerate(labels)]


def as_labelled(results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset],
                labels: Sequence[str] | None = None) -> tuple[list[str], list[xr.Dataset]]:
    """Split ``results`` into labels and Datasets.

    Parameters
    ----------
    results
        A mapping ``label -> result`` or a sequence of results.
    labels
        Labels for a sequence (default: `result_labels`); not allowed with a mapping.

    Raises
    ------
    TypeError
        For results without attributes (a file name instead of a loaded result...).
    ValueError
        For labels given with a mapping, a wrong number of labels, or repeated labels.
    """
    if isinstance(results, Mapping):
        if labels is not None:
            raise ValueError("give labels either as the keys of a mapping or as labels=, "
                             "not both")
        labels, datasets = list(map(str, results)), list(results.values())
    else:
        datasets = list(results)
    for item in datasets:
        if not isinstance(getattr(item, "attrs", None), Mapping):
            raise TypeError(f"expected finder results (Datasets from a finder or "
                            f"aare_lab.load_result), got {type(item).__name__} {item!r:.60}")
    labels = result_labels(datasets) if labels is None else [str(s) for s in labels]
    if len(labels) != len(datasets):
        raise ValueError(f"{len(labels)} labels for {len(datasets)} results")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels must be unique, got {labels}")
    return labels, datasets
