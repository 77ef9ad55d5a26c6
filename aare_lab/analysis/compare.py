"""Compare finder results over the same frames and classify every disagreement.

A cluster is identified by ``(frame number, y, x)``. Two results *agree* on a cluster when
both have it (a *matched* cluster); a matched cluster whose windows differ by more than
the tolerance is a *value difference*. Every cluster present in one result only, and every
value difference, is a *site* of the comparison, and each site gets

- a ``classification`` (where it lies): ``truncated`` (cut by the capacity of the result
  that lacks it), ``duplicate_neighbour`` (an agreed centre at Chebyshev distance 1),
  ``displaced`` (the other result has its own extra centre at distance 1: the same photon,
  centred elsewhere), ``near_neighbour`` (an agreed centre within the cluster radius),
  ``isolated`` (none of these: an extra photon or noise hit), ``value_diff``;
- a ``cause`` (why the finders could disagree there): ``capacity``, ``configuration``
  (n_sigma, noise, n_pedestal, common mode or calibration differ, or for values the
  window dtype: `configuration_differences`),
  ``pedestal_diverged`` (a pixel of the site's window was pushed into the pedestal by one
  finder but not the other in an earlier frame, so their pedestals differ there),
  ``timing`` (serial against frozen: the serial finder read a pixel of the window that it
  had updated earlier in the same frame), ``precision`` (the pedestal dtypes differ), or
  ``unexplained`` (none applies: a bug in one of the finders);
- from the branch maps, when both results have them for the site's frame, the two branch
  codes and the ``deciding_test``: ``neg_skip``, ``test1``, ``local_max`` (the ``v == m``
  gate), ``test3``, ``both_store`` (both decided to store: capacity), ``none`` (same
  decision, different values) or ``unknown`` (no map).

Without branch maps the timing cause cannot be checked and is assumed whenever the timing
models differ; the pedestal divergence needs the maps of every frame of both runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import xarray as xr
from scipy.spatial import cKDTree

from aare_lab.callable_module import make_callable
from aare_lab.detector.branches import Branch, cf_flag_attrs
from aare_lab.flags import cf_flags
from aare_lab.model.labels import as_labelled
from aare_lab.model.params import parse_cluster_size
from aare_lab.model.results import check_result
from aare_lab.model.spec import CALIBRATION_ATTR, timing_model

CLASSIFICATIONS = ("truncated", "duplicate_neighbour", "displaced", "near_neighbour",
                   "isolated", "value_diff")
CAUSES = ("capacity", "configuration", "pedestal_diverged", "timing", "precision",
          "unexplained")
DECIDING_TESTS = ("unknown", "neg_skip", "test1", "local_max", "test3", "both_store", "none")
KINDS = ("a_only", "b_only", "value_diff")
UNKNOWN, NO, YES = -1, 0, 1
#: The result attributes that change what a finder decides (besides the capacity and
#: the timing model, which have causes of their own, and the pedestal dtype: precision).
_CONFIGURATION = ("n_sigma", "noise", "n_pedestal", "common_mode", CALIBRATION_ATTR)
_CHUNK = 1 << 20


def _deciding_table() -> np.ndarray:
    """``table[code of the result with the cluster, code of the one without]``."""
    b = Branch
    table = np.full((len(b), len(b)), DECIDING_TESTS.index("unknown"), np.uint8)
    for has in (b.TEST1_STORE, b.TEST3_STORE):
        table[has, b.NEG_SKIP] = DECIDING_TESTS.index("neg_skip")
        for other in (b.TEST1_STORE, b.TEST3_STORE):
            table[has, other] = DECIDING_TESTS.index("both_store")
    table[b.TEST1_STORE, b.SHADOW] = table[b.TEST3_STORE, b.TEST3_SKIP] = \
        DECIDING_TESTS.index("local_max")
    table[b.TEST1_STORE, [b.TEST3_SKIP, b.QUIET_UPDATE]] = DECIDING_TESTS.index("test1")
    table[b.TEST3_STORE, b.SHADOW] = DECIDING_TESTS.index("test1")
    table[b.TEST3_STORE, b.QUIET_UPDATE] = DECIDING_TESTS.index("test3")
    return table


_DECIDING = _deciding_table()


# ------------------------------------------------------------------- validation
def _frame_shape(result: xr.Dataset) -> tuple[int, int]:
    ny, nx = np.asarray(result.attrs["frame_shape"]).tolist()
    return int(ny), int(nx)


def _listing(values: np.ndarray, limit: int = 10) -> str:
    shown = ", ".join(str(v) for v in values[:limit].tolist())
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


def check_clusters(result: xr.Dataset, name: str = "the result") -> None:
    """Refuse a result whose attributes or cluster positions cannot be read as the
    comparison reads them: a malformed ``cluster_size`` or ``frame_shape``, a cluster
    whose ``frame_number`` is not one of the result's frames, or whose ``y``/``x`` lies
    outside the frame (a damaged or edited file).

    Parameters
    ----------
    result
        A finder result (`aare_lab.model.results.check_result` passed).
    name
        How the message names it (a file).

    Raises
    ------
    ValueError
        Naming ``name``, what is wrong and a few of the offending clusters.
    """
    try:
        parse_cluster_size(result.attrs["cluster_size"])
    except ValueError as err:
        raise ValueError(f"{name} has a malformed cluster_size attribute: {err}; it is no "
                         "result of an aare_lab finder as written, or it was edited") from None
    try:
        ny, nx = _frame_shape(result)
    except (TypeError, ValueError):
        raise ValueError(f"{name} has a malformed frame_shape attribute "
                         f"{result.attrs['frame_shape']!r}: it must be (ny, nx)") from None
    frames = result["frame"].to_numpy()
    problems = []
    for variable, bad in (
            ("frame_number", ~np.isin(result["frame_number"].to_numpy(), frames)),
            ("y", ~((result["y"].to_numpy() >= 0) & (result["y"].to_numpy() < ny))),
            ("x", ~((result["x"].to_numpy() >= 0) & (result["x"].to_numpy() < nx)))):
        if bad.any():
            where = "among its frames" if variable == "frame_number" else \
                f"within its {ny}x{nx} frames"
            problems.append(f"{int(bad.sum())} clusters have a {variable} not {where} "
                            f"(clusters {_listing(np.flatnonzero(bad), 5)})")
    if problems:
        raise ValueError(f"{name} is damaged: " + "; ".join(problems)
                         + "; find clusters again to get a result that can be compared")


def check_comparable(results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset],
                     labels: Sequence[str] | None = None) -> None:
    """Refuse results that do not cover the same frames, frame shape and cluster size,
    or that `check_clusters` refuses.

    Raises
    ------
    ValueError
        Naming what differs; frames present in one result only are listed.
    """
    labels, results = as_labelled(results, labels)
    if len(results) < 2:
        raise ValueError(f"need at least two results to compare, got {len(results)}")
    for label, result in zip(labels, results):
        check_result(result, label)
        check_clusters(result, label)
    ref_label, ref = labels[0], results[0]
    for label, result in zip(labels[1:], results[1:]):
        problems = []
        if _frame_shape(ref) != _frame_shape(result):
            problems.append("frame shapes differ: {}x{} and {}x{}".format(
                *_frame_shape(ref), *_frame_shape(result)))
        if parse_cluster_size(ref.attrs["cluster_size"]) != \
                parse_cluster_size(result.attrs["cluster_size"]):
            problems.append(f"cluster sizes differ: {ref.attrs['cluster_size']} and "
                            f"{result.attrs['cluster_size']}")
        fa, fb = ref["frame"].to_numpy(), result["frame"].to_numpy()
        only_a, only_b = np.setdiff1d(fa, fb), np.setdiff1d(fb, fa)
        if len(only_a) or len(only_b):
            problems.append(
                f"frames differ: {len(only_a)} only in {ref_label} {_listing(only_a)}, "
                f"{len(only_b)} only in {label} {_listing(only_b)}")
        if problems:
            raise ValueError(f"cannot compare {ref_label} with {label}: " + "; ".join(problems))


def configuration_differences(a: xr.Dataset, b: xr.Dataset) -> list[str]:
    """The parameters besides capacity, timing model and pedestal dtype in which two
    results differ: `_CONFIGURATION` and the label map of a ``common_mode = "labels"``.

    A parameter one result does not record counts as differing only when the other
    records it (``common_mode`` is ``"none"`` then).

    Examples
    --------
    >>> configuration_differences(xr.Dataset(attrs={"n_sigma": 5.0, "common_mode": "none"}),
    ...                           xr.Dataset(attrs={"n_sigma": 5.0, "common_mode": "jungfrau"}))
    ['common_mode']
    """
    def value(result, name):
        # A result without the attribute was found without common mode (older files).
        return str(result.attrs.get(name, "none" if name == "common_mode" else None))

    names = [name for name in _CONFIGURATION if value(a, name) != value(b, name)]
    if value(a, "common_mode") == "labels" == value(b, "common_mode") and not \
            np.array_equal(a["common_mode_labels"], b["common_mode_labels"]):
        names.append("common_mode_labels")
    return names


# -------------------------------------------------------------------- geometry
def _window_offsets(radius: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    ry, rx = radius
    dy, dx = np.mgrid[-ry:ry + 1, -rx:rx + 1]
    return dy.ravel(), dx.ravel()


def _gather(array: np.ndarray, layer: np.ndarray | None, ys: np.ndarray, xs: np.ndarray,
            dy: np.ndarray, dx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values of ``array`` at ``(y + dy, x + dx)`` per site, and which taps are inside."""
    ny, nx = array.shape[-2:]
    yy = ys[:, None] + dy
    xx = xs[:, None] + dx
    inside = (yy >= 0) & (yy < ny) & (xx >= 0) & (xx < nx)
    yy, xx = np.clip(yy, 0, ny - 1), np.clip(xx, 0, nx - 1)
    if layer is None:
        return array[yy, xx], inside
    return array[layer[:, None], yy, xx], inside


def _nearest(frame: np.ndarray, y: np.ndarray, x: np.ndarray, tree_frame: np.ndarray,
             tree_y: np.ndarray, tree_x: np.ndarray, spacing: int) -> np.ndarray:
    """Chebyshev distance to the nearest tree point in the same frame (inf: none)."""
    out = np.full(len(frame), np.inf)
    keep = np.isin(tree_frame, np.unique(frame))
    if not len(frame) or not keep.any():
        return out
    # Frames are spread ``spacing`` apart, more than any distance within a frame.
    points = np.column_stack([tree_frame[keep] * spacing, tree_y[keep], tree_x[keep]])
    dist, _ = cKDTree(points).query(np.column_stack([frame * spacing, y, x]), p=np.inf)
    return np.where(dist < spacing, dist, np.inf)


# ------------------------------------------------------------------ comparison
@dataclass(frozen=True)
class Comparison:
    """The comparison of two results; build it with `compare`.

    Attributes
    ----------
    labels
        Names of result A and result B.
    per_frame
        Dataset over ``frame`` (A's processing order): ``a_only``, ``b_only``,
        ``matched``, ``matched_value_diffs``, ``truncated_a``, ``truncated_b``.
    sites
        Dataset over ``site``, one per disagreement, in processing order of the frames,
        then raster order:
        ``frame_number``, ``y``, ``x``, ``kind``, ``classification``, ``cause``,
        ``deciding_test``, ``branch_a``, ``branch_b`` (categorical, with CF flags),
        ``distance`` (to the nearest agreed centre), ``counterpart_distance``,
        ``max_abs_diff`` (value differences), ``truncated``, ``pedestal_diverged`` and
        ``in_frame_update`` (-1 unknown, 0 no, 1 yes).
    attrs
        ``n_a``, ``n_b``, ``first_divergent_frame`` (None: not diverged or unknown),
        ``tolerance`` and the pair's finders, pedestal dtypes and timing models.
    """

    labels: tuple[str, str]
    per_frame: xr.Dataset
    sites: xr.Dataset
    attrs: dict

    @property
    def a_only(self) -> int:
        """Clusters in A only."""
        return int(self.per_frame["a_only"].sum())

    @property
    def b_only(self) -> int:
        """Clusters in B only."""
        return int(self.per_frame["b_only"].sum())

    @property
    def matched(self) -> int:
        """Clusters in both."""
        return int(self.per_frame["matched"].sum())

    @property
    def matched_value_diffs(self) -> int:
        """Matched clusters whose windows differ by more than the tolerance."""
        return int(self.per_frame["matched_value_diffs"].sum())

    @property
    def disagreement_percent(self) -> float:
        """Clusters in one result only, in percent of the distinct clusters of both."""
        union = self.matched + self.a_only + self.b_only
        return 100.0 * (self.a_only + self.b_only) / union if union else 0.0

    @property
    def first_disagreement_frame(self) -> int | None:
        """The first frame (processing order) with any site, or None."""
        pf = self.per_frame
        bad = (pf["a_only"] + pf["b_only"] + pf["matched_value_diffs"]).to_numpy() > 0
        return int(pf["frame"][np.argmax(bad)]) if bad.any() else None

    def counts(self, variable: str = "classification") -> dict[str, int]:
        """Sites per category of ``variable`` (``classification``, ``cause``,
        ``deciding_test`` or ``kind``), every category listed."""
        da = self.sites[variable]
        names = da.attrs["flag_meanings"].split()
        tally = np.bincount(da.to_numpy(), minlength=len(names))
        return {name: int(n) for name, n in zip(names, tally)}

    def one_sided(self) -> Comparison:
        """The comparison with only the sites one result has and the other lacks (no
        value differences of matched clusters), e.g. for `worst_mismatch`."""
        keep = np.flatnonzero(self.sites["kind"].to_numpy() != KINDS.index("value_diff"))
        return dataclasses.replace(self, sites=self.sites.isel(site=keep))

    def assumed_timing(self) -> int:
        """Sites whose cause ``timing`` is assumed, not checked: without branch maps for
        their frame, neither an in-frame update nor an earlier divergence could be seen."""
        s = self.sites
        return int(((s["cause"] == CAUSES.index("timing"))
                    & (s["in_frame_update"] == UNKNOWN)).sum())

    def transitions(self) -> xr.DataArray:
        """Branch transitions at the sites present in one result only.

        Returns
        -------
        xarray.DataArray
            Counts over ``(branch_a, branch_b)``, the codes of A and B at the site, for
            sites whose frame is mapped in both results.
        """
        s = self.sites
        keep = (s["kind"].to_numpy() != KINDS.index("value_diff")) \
            & (s["branch_a"].to_numpy() != Branch.NOT_PROCESSED) \
            & (s["branch_b"].to_numpy() != Branch.NOT_PROCESSED)
        n = len(Branch)
        flat = s["branch_a"].to_numpy()[keep].astype(np.int64) * n + s["branch_b"].to_numpy()[keep]
        names = [b.name for b in Branch]
        return xr.DataArray(np.bincount(flat, minlength=n * n).reshape(n, n),
                            dims=("branch_a", "branch_b"),
                            coords={"branch_a": names, "branch_b": names}, name="transitions",
                            attrs={"long_name": f"branch codes at the sites: "
                                                f"{self.labels[0]} -> {self.labels[1]}"})

    def transition_counts(self) -> dict[str, int]:
        """Non-zero transitions as ``{"QUIET_UPDATE -> TEST3_STORE": 11}``, largest first."""
        table = self.transitions()
        counts = table.to_numpy()
        a, b = np.nonzero(counts)
        order = np.argsort(-counts[a, b], kind="stable")
        names = [code.name for code in Branch]
        return {f"{names[i]} -> {names[j]}": int(counts[i, j])
                for i, j in zip(a[order], b[order])}

    def summary(self) -> str:
        """One line: ``"serial vs frozen: 8 only in serial, 11 only in frozen (0.000082 % of
        all clusters), 0 matched windows differ"``."""
        a, b = self.labels
        percent = np.format_float_positional(self.disagreement_percent, precision=2,
                                             unique=False, fractional=False, trim="-")
        return (f"{a} vs {b}: {self.a_only:,} only in {a}, {self.b_only:,} only in {b} "
                f"({percent} % of all clusters), {self.matched_value_diffs:,} matched "
                + ("window differs" if self.matched_value_diffs == 1 else "windows differ"))

    def to_dict(self) -> dict:
        """The comparison as plain JSON-able data (see the ``aare-lab compare`` JSON)."""
        return {
            "a": self.labels[0], "b": self.labels[1],
            "n_a": self.attrs["n_a"], "n_b": self.attrs["n_b"],
            "a_only": self.a_only, "b_only": self.b_only, "matched": self.matched,
            "matched_value_diffs": self.matched_value_diffs,
            "disagreement_percent": self.disagreement_percent,
            "first_disagreement_frame": self.first_disagreement_frame,
            "first_divergent_frame": self.attrs["first_divergent_frame"],
            "classification": self.counts("classification"),
            "cause": self.counts("cause"),
            "deciding_test": self.counts("deciding_test"),
            "transitions": self.transition_counts(),
        }

    def __repr__(self) -> str:
        return f"<Comparison {self.summary()}>"


class _Side:
    """One result prepared for matching: cluster keys, capacity, branch-map lookup."""

    def __init__(self, result: xr.Dataset, sorter: np.ndarray, sorted_frames: np.ndarray,
                 n_pixels: int, nx: int):
        self.pos = sorter[np.searchsorted(sorted_frames, result["frame_number"].to_numpy())]
        self.y = result["y"].to_numpy().astype(np.int64)
        self.x = result["x"].to_numpy().astype(np.int64)
        self.keys = self.pos * n_pixels + self.y * nx + self.x
        frames = result["frame"].to_numpy()
        order = sorter[np.searchsorted(sorted_frames, frames)]
        n = len(sorted_frames)
        self.truncated = np.zeros(n, bool)
        self.truncated[order] = result["n_found"].to_numpy() > result["n_kept"].to_numpy()
        self.last_key = np.full(n, -1, np.int64)
        ks = np.sort(self.keys)
        if len(ks):
            fr = ks // n_pixels
            last = np.flatnonzero(np.diff(fr, append=-1) != 0)
            self.last_key[fr[last]] = ks[last]
        self.maps = result["branch_map"].to_numpy() if "branch_map" in result else None
        if self.maps is not None:
            mapped = result["branch_frame"].to_numpy()
            self.map_of_pos = np.full(n, -1, np.int64)
            self.map_of_pos[sorter[np.searchsorted(sorted_frames, mapped)]] = np.arange(len(mapped))
            self.full_history = np.array_equal(mapped, frames)
        else:
            self.map_of_pos = np.full(n, -1, np.int64)
            self.full_history = False

    def codes(self, pos: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Branch code at each site, NOT_PROCESSED where the frame has no map."""
        layer = self.map_of_pos[pos]
        out = np.zeros(len(pos), np.uint8)
        have = layer >= 0
        if have.any():
            out[have] = self.maps[layer[have], y[have], x[have]]
        return out


def _window_diff(wa: np.ndarray, wb: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Largest absolute difference of the matched windows, in chunks to bound memory."""
    out = np.zeros(len(ia))
    for start in range(0, len(ia), _CHUNK):
        sl = slice(start, start + _CHUNK)
        a, b = wa[ia[sl]], wb[ib[sl]]
        # Most windows are equal: take differences only where some value differs.
        rows = np.flatnonzero((a != b).reshape(len(a), -1).any(axis=1))
        if len(rows):
            d = np.abs(a[rows].astype(np.float64) - b[rows])
            out[start + rows] = d.reshape(len(rows), -1).max(axis=1)
    return out


def _first_divergence(a: _Side, b: _Side, n_frames: int) -> np.ndarray:
    """Per pixel, the first processing position where exactly one finder updated it."""
    first = np.full(a.maps.shape[1:], n_frames, np.int64)
    for start in range(0, n_frames, 64):
        differ = a.maps[start:start + 64] == Branch.QUIET_UPDATE
        np.not_equal(differ, b.maps[start:start + 64] == Branch.QUIET_UPDATE, out=differ)
        for k in np.flatnonzero(differ.reshape(len(differ), -1).any(axis=1)):
            first[differ[k] & (first == n_frames)] = start + k
    return first


def _history(sa: _Side, sb: _Side, frames: np.ndarray, same_order: bool, pos: np.ndarray,
             y: np.ndarray, x: np.ndarray, offsets) -> tuple[np.ndarray, int | None]:
    """Per site, whether a window pixel's pedestal had diverged; the first divergent frame."""
    if not (sa.full_history and sb.full_history and same_order):
        return np.full(len(pos), UNKNOWN, np.int8), None
    first = _first_divergence(sa, sb, len(frames))
    first_frame = int(frames[first.min()]) if (first < len(frames)).any() else None
    values, inside = _gather(first, None, y, x, *offsets)
    return (inside & (values < pos[:, None])).any(axis=1).astype(np.int8), first_frame


def _in_frame_updates(serial: _Side | None, pos: np.ndarray, y: np.ndarray, x: np.ndarray,
                      offsets) -> np.ndarray:
    """Per site, whether the serial finder pushed a window pixel scanned before the site."""
    out = np.full(len(pos), UNKNOWN, np.int8)
    if serial is None or serial.maps is None:
        return out
    layer = serial.map_of_pos[pos]
    mapped = layer >= 0
    dy, dx = offsets
    before = slice(0, len(dy) // 2)  # the taps before the centre in raster order
    codes, inside = _gather(serial.maps, layer[mapped], y[mapped], x[mapped],
                            dy[before], dx[before])
    out[mapped] = (inside & (codes == Branch.QUIET_UPDATE)).any(axis=1)
    return out


def compare(a: xr.Dataset, b: xr.Dataset, *, labels: Sequence[str] | None = None,
            tolerance: float = 0.0) -> Comparison:
    """Match the clusters of two results and classify every disagreement.

    Parameters
    ----------
    a, b
        Finder results over the same frames, frame shape and cluster size.
    labels
        Names of the two results (default: `aare_lab.model.labels.result_labels`).
    tolerance
        Largest absolute window difference (ADU) that still counts as equal; 0: exact.

    Returns
    -------
    Comparison

    Raises
    ------
    ValueError
        If the results cannot be compared (`check_comparable`) or for a negative
        tolerance.
    """
    labels, (a, b) = as_labelled([a, b], labels)
    check_comparable([a, b], labels)
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    ny, nx = _frame_shape(a)
    ry, rx = (s // 2 for s in parse_cluster_size(a.attrs["cluster_size"]))
    frames = a["frame"].to_numpy()
    sorter = np.argsort(frames, kind="stable")
    n_frames, n_pixels = len(frames), ny * nx
    sa, sb = (_Side(r, sorter, frames[sorter], n_pixels, nx) for r in (a, b))

    common, ia, ib = np.intersect1d(sa.keys, sb.keys, assume_unique=True, return_indices=True)
    only_a = np.ones(len(sa.keys), bool)
    only_a[ia] = False
    only_b = np.ones(len(sb.keys), bool)
    only_b[ib] = False
    diff = _window_diff(a["window"].to_numpy(), b["window"].to_numpy(), ia, ib)
    differs = diff > tolerance

    def tally(pos):
        return np.bincount(pos, minlength=n_frames)

    per_frame = xr.Dataset(
        {"a_only": ("frame", tally(sa.pos[only_a]), {"long_name": f"clusters in {labels[0]} only"}),
         "b_only": ("frame", tally(sb.pos[only_b]), {"long_name": f"clusters in {labels[1]} only"}),
         "matched": ("frame", tally(sa.pos[ia]), {"long_name": "clusters in both"}),
         "matched_value_diffs": ("frame", tally(sa.pos[ia[differs]]),
                                 {"long_name": "matched clusters whose windows differ"}),
         "truncated_a": ("frame", sa.truncated), "truncated_b": ("frame", sb.truncated)},
        coords={"frame": frames},
    )

    # Sites: A only, B only, value differences, in frame and raster order.
    keys = np.concatenate([sa.keys[only_a], sb.keys[only_b], common[differs]])
    kind = np.repeat(np.arange(3, dtype=np.uint8),
                     [int(only_a.sum()), int(only_b.sum()), int(differs.sum())])
    max_diff = np.concatenate([np.zeros(len(keys) - int(differs.sum())), diff[differs]])
    order = np.lexsort((kind, keys))
    keys, kind, max_diff = keys[order], kind[order], max_diff[order]
    pos, rest = np.divmod(keys, n_pixels)
    y, x = np.divmod(rest, nx)
    is_a, is_b, is_v = (kind == k for k in range(3))

    # Geometry: nearest agreed centre, nearest extra centre of the other result.
    cpos, crest = np.divmod(common, n_pixels)
    cy, cx = np.divmod(crest, nx)
    spacing = ny + nx + 1
    distance = np.zeros(len(keys))
    distance[~is_v] = _nearest(pos[~is_v], y[~is_v], x[~is_v], cpos, cy, cx, spacing)
    counterpart = np.full(len(keys), np.inf)
    for mine, theirs in ((is_a, is_b), (is_b, is_a)):
        counterpart[mine] = _nearest(pos[mine], y[mine], x[mine],
                                     pos[theirs], y[theirs], x[theirs], spacing)

    # Capacity: missing from a truncated frame, after the last cluster kept there.
    truncated = (is_a & sb.truncated[pos] & (keys > sb.last_key[pos])) \
        | (is_b & sa.truncated[pos] & (keys > sa.last_key[pos]))

    # Branch maps: the codes, the pedestal history, in-frame updates of the serial model.
    code_a, code_b = sa.codes(pos, y, x), sb.codes(pos, y, x)
    offsets = _window_offsets((ry, rx))
    diverged, first_divergent = _history(sa, sb, frames,
                                         np.array_equal(frames, b["frame"].to_numpy()),
                                         pos, y, x, offsets)
    models = [timing_model(r.attrs["finder"]) for r in (a, b)]
    models_differ = models[0] != models[1]
    serial = sa if models[0] == "serial" else sb if models[1] == "serial" else None
    in_frame = _in_frame_updates(serial if models_differ else None, pos, y, x, offsets)

    config_differs = bool(configuration_differences(a, b))
    window_differs = a.attrs["window_dtype"] != b.attrs["window_dtype"]
    # Timing is ruled out only where the maps show neither an in-frame update nor an
    # earlier divergence (which an earlier timing difference may have caused).
    timing_possible = models_differ & ~((in_frame == NO) & (diverged == NO))
    cause = np.select(
        [truncated, np.full(len(keys), config_differs) | (is_v & window_differs),
         diverged == YES, timing_possible,
         np.full(len(keys), a.attrs["pedestal_dtype"] != b.attrs["pedestal_dtype"])],
        [CAUSES.index(c) for c in CAUSES[:-1]], CAUSES.index("unexplained")).astype(np.uint8)

    classification = np.select(
        [is_v, truncated, distance == 1, counterpart == 1, distance <= max(ry, rx)],
        [CLASSIFICATIONS.index(c) for c in ("value_diff", "truncated", "duplicate_neighbour",
                                            "displaced", "near_neighbour")],
        CLASSIFICATIONS.index("isolated")).astype(np.uint8)

    has = np.where(is_a, code_a, code_b)
    lacks = np.where(is_a, code_b, code_a)
    deciding = np.where(is_v, DECIDING_TESTS.index("none"), _DECIDING[has, lacks])
    deciding = np.where((code_a == Branch.NOT_PROCESSED) | (code_b == Branch.NOT_PROCESSED),
                        DECIDING_TESTS.index("unknown"), deciding).astype(np.uint8)

    def categories(names, long_name):
        return cf_flags(range(len(names)), names, long_name)

    def tri(long_name):
        return cf_flags((UNKNOWN, NO, YES), ("unknown", "no", "yes"), long_name, dtype="int8")

    sites = xr.Dataset(
        {"frame_number": ("site", frames[pos]),
         "y": ("site", y.astype(np.int32)), "x": ("site", x.astype(np.int32)),
         "kind": ("site", kind, categories(KINDS, "where the cluster is")),
         "classification": ("site", classification,
                            categories(CLASSIFICATIONS, "where the disagreement lies")),
         "cause": ("site", cause, categories(CAUSES, "why the finders can disagree here")),
         "deciding_test": ("site", deciding,
                           categories(DECIDING_TESTS, "the test whose outcome differs")),
         "branch_a": ("site", code_a, cf_flag_attrs(f"branch in {labels[0]}")),
         "branch_b": ("site", code_b, cf_flag_attrs(f"branch in {labels[1]}")),
         "distance": ("site", distance,
                      {"long_name": "Chebyshev distance to the nearest agreed centre",
                       "units": "pixel"}),
         "counterpart_distance": ("site", counterpart, {
             "long_name": "Chebyshev distance to the nearest centre the other result alone has",
             "units": "pixel"}),
         "max_abs_diff": ("site", max_diff, {"long_name": "largest window difference",
                                             "units": "ADU"}),
         "truncated": ("site", truncated),
         "pedestal_diverged": ("site", diverged, tri(
             "a window pixel was updated by one finder only in an earlier frame")),
         "in_frame_update": ("site", in_frame, tri(
             "the serial finder updated a window pixel before the site in this frame")),
         },
        attrs={"a": labels[0], "b": labels[1], "tolerance": float(tolerance)},
    )
    attrs = {"n_a": len(sa.keys), "n_b": len(sb.keys), "tolerance": float(tolerance),
             "first_divergent_frame": first_divergent,
             "finders": (a.attrs["finder"], b.attrs["finder"]),
             "pedestal_dtypes": (a.attrs["pedestal_dtype"], b.attrs["pedestal_dtype"]),
             "timing_models": tuple(models)}
    return Comparison((labels[0], labels[1]), per_frame, sites, attrs)


def compare_all(results: Mapping[str, xr.Dataset] | Sequence[xr.Dataset],
                labels: Sequence[str] | None = None, *,
                tolerance: float = 0.0) -> list[Comparison]:
    """Compare every pair of a set of results (A before B in the order given).

    Raises
    ------
    ValueError
        If any two results cannot be compared; nothing is computed then.
    """
    labels, results = as_labelled(results, labels)
    check_comparable(results, labels)
    return [compare(results[i], results[j], labels=[labels[i], labels[j]], tolerance=tolerance)
            for i, j in combinations(range(len(results)), 2)]


def summary_table(comparisons: Sequence[Comparison]) -> str:
    """The summary line of each comparison, one per line."""
    return "\n".join(c.summary() for c in comparisons)


def worst_mismatch(comparisons: Comparison | Sequence[Comparison],
                   half_size: int = 5) -> tuple[int, int, int] | None:
    """The frame with most sites over all comparisons, and the site there with the most
    other sites within ``half_size`` pixels (Chebyshev).

    Parameters
    ----------
    comparisons
        One `Comparison` or several (e.g. from `compare_all`).
    half_size
        Half-size of the neighbourhood counted around each site.

    Returns
    -------
    tuple or None
        ``(frame, y, x)``, or None when no comparison has a site.
    """
    if isinstance(comparisons, Comparison):
        comparisons = [comparisons]
    sites = [c.sites for c in comparisons if c.sites.sizes["site"]]
    if not sites:
        return None
    frame = np.concatenate([s["frame_number"].to_numpy() for s in sites])
    y = np.concatenate([s["y"].to_numpy() for s in sites]).astype(np.int64)
    x = np.concatenate([s["x"].to_numpy() for s in sites]).astype(np.int64)
    numbers, first, counts = np.unique(frame, return_index=True, return_counts=True)
    # Ties go to the frame seen first, which is the earliest in processing order.
    best = numbers[np.lexsort((first, -counts))[0]]
    here = frame == best
    fy, fx = y[here], x[here]
    near = (np.maximum(np.abs(fy[:, None] - fy), np.abs(fx[:, None] - fx)) <= half_size).sum(1)
    k = int(np.argmax(near))
    return int(best), int(fy[k]), int(fx[k])


# aare_lab.analysis.compare(...) calls compare(...).
make_callable(__name__)
