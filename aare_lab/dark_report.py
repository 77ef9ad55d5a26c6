"""A dark run's statistics: the rms distribution, pixels with rms 0, hot pixels, photons.

`dark_report` summarises a trained pedestal for a notebook (``DarkReport`` shows as text
and as an HTML table) and for ``aare-lab dark``. A pixel with rms 0 (dead, or stuck at one
value) has threshold 0, so any rise above its mean (a drift, a common-mode offset) that
tops its window is a cluster (docs/algorithm.md); a hot pixel is one whose mean or rms lies more
than `HOT_ROBUST_Z` robust standard deviations (1.4826 × the median absolute deviation,
at least 1 ADU) above the median of all pixels. Photon hits in the dark frames are those
`aare_lab.train_pedestal` found (`aare_lab.dark_photons`), kept with the pedestal.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import xarray as xr

from .dark_photons import MIN_SAMPLE_FRAMES, DarkPhotons
from .dark_quality import DarkQuality, assess_dark
from .pedestal import Pedestal

QUANTILES = (0.0, 0.001, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 0.999, 1.0)
HOT_ROBUST_Z = 10.0
#: Pixels listed by position in the text report.
LISTED = 5


def _far_above(values: np.ndarray) -> np.ndarray:
    median = np.median(values)
    scale = max(1.4826 * float(np.median(np.abs(values - median))), 1.0)
    return values > median + HOT_ROBUST_Z * scale


def _positions(mask: np.ndarray) -> str:
    ys, xs = np.nonzero(mask)
    shown = ", ".join(f"({y}, {x})" for y, x in zip(ys[:LISTED], xs[:LISTED]))
    return shown + (", ..." if len(ys) > LISTED else "")


@dataclass(frozen=True)
class DarkReport:
    """A dark run's statistics and what its noise estimate means for false clusters.

    Attributes
    ----------
    statistics
        ``mean(y, x)`` and ``rms(y, x)`` (ADU), the masks ``zero_rms``, ``hot_mean`` and
        ``hot_rms`` ``(y, x)``, and ``mean_quantile``, ``rms_quantile`` over
        ``quantile``; attributes ``dark_frames``, ``n_pedestal`` and, when the dark
        frames were checked for photons, `aare_lab.dark_photons.DarkPhotons.attrs`.
    quality
        The `aare_lab.dark_quality.DarkQuality` at the report's nσ.
    photons
        The pedestal's ``dark_photons``: photon hits in its dark frames, None when they
        were not checked.
    """

    statistics: xr.Dataset
    quality: DarkQuality
    photons: DarkPhotons | None = None

    def lines(self) -> list[str]:
        """The report as text lines (``aare-lab dark`` prints them)."""
        s = self.statistics
        q = s["rms_quantile"]
        n_pixels = int(s["rms"].size)
        at = {float(v): float(r) for v, r in zip(q["quantile"].to_numpy(), q.to_numpy())}
        out = [(f"dark frames: {s.attrs['dark_frames']} (n_pedestal={s.attrs['n_pedestal']}), "
                f"{s.sizes['y']}x{s.sizes['x']} pixels"),
               "rms (ADU): " + ", ".join(f"{label} {at[p]:.3g}" for label, p in (
                   ("min", 0.0), ("1%", 0.01), ("median", 0.5), ("99%", 0.99), ("max", 1.0))),
               f"mean (ADU): median {float(s['mean_quantile'].sel(quantile=0.5)):.6g}"]
        far = f"far above the median (> {HOT_ROBUST_Z:g} robust sd)"
        for name, what in (("zero_rms", ("with rms 0 (dead or stuck: threshold 0, so any rise "
                                         "above their mean that tops their window is a "
                                         "cluster)")),
                           ("hot_mean", f"with a mean {far}"),
                           ("hot_rms", f"with an rms {far}")):
            mask = s[name].to_numpy()
            count = int(mask.sum())
            out.append(f"pixels {what}: {count} of {n_pixels}"
                       + (f" at (y, x) {_positions(mask)}" if count else ""))
        out.append(self.quality.summary())
        out.append(self.photons.summary() if self.photons is not None else
                   "photon hits in the dark frames: not checked (train_pedestal checks "
                   f"{MIN_SAMPLE_FRAMES} or more; these were pushed otherwise, or the "
                   "pedestal was loaded from a file)")
        return out

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        head, *rows = self.lines()
        cells = "".join(f"<tr><td style='text-align:left'>{html.escape(row)}</td></tr>"
                        for row in rows)
        return f"<table><caption>{html.escape(head)}</caption>{cells}</table>"


def dark_report(pedestal: Pedestal, n_sigma: float = 5.0) -> DarkReport:
    """The statistics of the dark frames a pedestal was trained on, at threshold nσ.

    Parameters
    ----------
    pedestal
        A trained `Pedestal` (e.g. from `aare_lab.train_pedestal`).
    n_sigma
        The threshold the false-cluster assessment is made for.

    Examples
    --------
    >>> frames = np.full((10, 4, 6), 1000, np.uint16)
    >>> frames[::2, 1, 1] += 3          # every pixel but (1, 1) is stuck at 1000
    >>> ped = Pedestal((4, 6), n_pedestal=10)
    >>> ped.push_dark(frames)
    >>> report = dark_report(ped)
    >>> int(report.statistics["zero_rms"].sum()), float(report.statistics["rms"][1, 1])
    (23, 1.5)
    """
    pedestal.require_ready()
    mean = np.asarray(pedestal.mean, np.float64)
    rms = np.asarray(pedestal.rms, np.float64)
    dims = ("y", "x")
    quantile = np.asarray(QUANTILES)
    stats = xr.Dataset(
        {"mean": (dims, mean, {"long_name": "pedestal mean", "units": "ADU"}),
         "rms": (dims, rms, {"long_name": "pedestal rms (noise)", "units": "ADU"}),
         "zero_rms": (dims, rms == 0, {"long_name": "pixel with rms 0 (dead or stuck)"}),
         "hot_mean": (dims, _far_above(mean), {"long_name": "mean far above the median"}),
         "hot_rms": (dims, _far_above(rms), {"long_name": "rms far above the median"}),
         "mean_quantile": ("quantile", np.quantile(mean, quantile), {"units": "ADU"}),
         "rms_quantile": ("quantile", np.quantile(rms, quantile), {"units": "ADU"})},
        coords={"quantile": quantile},
        attrs={"dark_frames": pedestal.n_frames, "n_pedestal": pedestal.n_pedestal,
               "hot_robust_z": HOT_ROBUST_Z},
    )
    photons = pedestal.dark_photons
    if photons is not None:
        stats.attrs.update(photons.attrs)
    return DarkReport(stats, assess_dark(pedestal, n_sigma), photons)


__all__ = ["HOT_ROBUST_Z", "QUANTILES", "DarkReport", "dark_report"]
