"""``aare-lab compare``: do finder results agree, and why not where they don't?"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aare_lab.analysis.compare import check_clusters, compare_all, summary_table, worst_mismatch
from aare_lab.model.labels import result_labels
from aare_lab.model.params import parse_cluster_size
from aare_lab.model.results import check_result, load_result

from .options import UsageError, non_negative_float

PANEL_SIZE = (4.2, 4.4)


def register(subparsers) -> None:
    """Add the ``compare`` subcommand."""
    parser = subparsers.add_parser(
        "compare", help="compare finder results over the same frames",
        description="Match the clusters of two or more result files (from 'aare-lab find') "
                    "by frame and centre, print A-only / B-only counts per pair and why "
                    "each disagreement happened (branch maps make the reasons precise).")
    parser.add_argument("results", nargs="+", metavar="RESULT.nc",
                        help="result files over the same frames, frame shape and cluster size")
    parser.add_argument("--json", metavar="SUMMARY.json", type=Path,
                        help="write the summary and the classification counts as JSON")
    parser.add_argument("--panel", metavar="WORST.png", type=Path,
                        help="draw the mismatch panel of the worst disagreement: the site "
                             "with most clusters in one result only around it, else (only "
                             "matched windows differ) the one with most differing windows; "
                             "for two results with a panel of their difference")
    parser.add_argument("--tolerance", type=non_negative_float, default=0.0,
                        help="largest window difference (ADU) that counts as equal "
                             "(default: 0, exact)")
    parser.set_defaults(run=run)


def _nonzero(counts: dict[str, int]) -> str:
    shown = [f"{name} {n}" for name, n in counts.items() if n]
    return ", ".join(shown) if shown else "none"


def _worst_site(comparisons, half: int) -> tuple[tuple[int, int, int] | None, str]:
    """The site the panel shows, and why: clusters one result lacks show in the panels
    themselves, so they come first; a window a few ADU apart shows in the difference only."""
    worst = worst_mismatch([c.one_sided() for c in comparisons], half)
    if worst is not None:
        return worst, "the site with most clusters that one result has and another lacks"
    return (worst_mismatch(comparisons, half),
            "the site with most matched windows that differ (no cluster is in one result "
            "only)")


def run(args: argparse.Namespace) -> int:
    """Compare the result files; returns the exit code."""
    if len(args.results) < 2:
        raise UsageError("give at least two result files to compare")
    results = [load_result(path) for path in args.results]
    for path, result in zip(args.results, results):
        check_result(result, f"'{path}'")
        check_clusters(result, f"'{path}'")
    labels = result_labels(results)
    stems = [Path(path).stem for path in args.results]
    if any("#" in label for label in labels) and len(set(stems)) == len(stems):
        labels = stems  # the attributes do not tell the runs apart; the file names do
    comparisons = compare_all(results, labels, tolerance=args.tolerance)
    print(summary_table(comparisons))
    for c in comparisons:
        print(f"{c.labels[0]} vs {c.labels[1]}:")
        print(f"  classification: {_nonzero(c.counts('classification'))}")
        assumed = c.assumed_timing()
        print(f"  cause: {_nonzero(c.counts('cause'))}" + (
            f" ({assumed} timing assumed: no branch maps; find with --branch-maps all to "
            "check)" if assumed else ""))
        print(f"  deciding test: {_nonzero(c.counts('deciding_test'))}")
        transitions = c.transition_counts()
        if transitions:
            print("  transitions: " + ", ".join(f"{k}: {n}" for k, n in transitions.items()))
    ry, rx = (s // 2 for s in parse_cluster_size(results[0].attrs["cluster_size"]))
    half = 3 * max(ry, rx) + 2
    worst, why = _worst_site(comparisons, half)
    if args.json is not None:
        summary = {
            "results": [{"label": label, "path": str(path), "finder": r.attrs["finder"],
                         "pedestal_dtype": r.attrs["pedestal_dtype"],
                         "n_frames": int(r.sizes["frame"]), "n_clusters": int(r.sizes["cluster"])}
                        for label, path, r in zip(labels, args.results, results)],
            "pairs": [c.to_dict() for c in comparisons],
            "worst": None if worst is None else dict(zip(("frame", "y", "x"), worst)),
        }
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"summary written to {args.json}")
    if args.panel is not None:
        if worst is None:
            print(f"the results agree: no mismatch panel written to {args.panel}")
        else:
            from matplotlib.figure import Figure

            from aare_lab.plots import mismatch_panel

            difference = len(results) == 2
            fig = Figure(figsize=(PANEL_SIZE[0] * (len(results) + difference) + 1.5,
                                  PANEL_SIZE[1]))
            mismatch_panel(results, *worst, labels=labels, half_size=half, fig=fig,
                           difference=difference)
            fig.savefig(args.panel, dpi=120)
            frame, y, x = worst
            print(f"mismatch panel of frame {frame} around (y={y}, x={x}), {why}"
                  + (f", and {labels[0]} − {labels[1]}" if difference else "")
                  + f", written to {args.panel}")
    return 0
