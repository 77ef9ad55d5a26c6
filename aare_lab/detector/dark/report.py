"""A dark run's statistics: the rms distribution, pixels with rms 0, hot pixels, photons.

`dark_report` summarises a trained pedestal for a notebook (``DarkReport`` shows as text and as
an HTML table) and for ``aare-lab dark``: the pixels with rms 0 and the hot pixels of
`aare_lab.detector.dark.pixels`, in the words a finder's
`aare_lab.detector.dark.pixels.DarkPixelWarning` uses. Photon hits in the dark frames are those
`aare_lab.train_pedestal` found (`aare_lab.detector.dark.photons`), kept with the pedestal.
Given the dark frames, it names those whose residual noise stands out
(`aare_lab.detector.dark.frame_noise`) and proposes ``--skip-first`` when they start
acquisitions.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import xarray as xr

from aare_lab.detector.dark.frame_noise import FrameNoise, frame_noise
from aare_lab.detector.dark.photons import MIN_SAMPLE_FRAMES, DarkPhotons
from aare_lab.detector.dark.pixels import HOT_ROBUST_Z
from aare_lab.detector.dark.quality import DarkQuality, assess_dark
from aare_lab.detector.pedestal import Pedestal

QUANTILES = (0.0, 0.001, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 0.999, 1.0)


@dataclass(frozen=True)
class DarkReport:
    """A dark run's statistics and what its noise estimate means for false clusters.

    Attributes
    ----------
    statistics
        ``mean(y, x)`` and ``rms(y, x)`` (ADU), the masks ``zero_rms``, ``hot_mean`` and
        ``hot_rms`` ``(y, x)``, and ``mean_quantile``, ``rms_quantile`` over
        ``quantile``; attributes ``dark_frames``, ``n_pedestal`` and, when the dark
        frames were checked for photons, `aare_lab.detector.dark.photons.DarkPhotons.attrs`.
    quality
        The `aare_lab.detector.dark.quality.DarkQuality` at the report's nσ.
    photons
        The pedestal's ``dark_photons``: photon hits in its dark frames, None when they
        were not checked.
    frames
        The residual noise of each dark frame (`aare_lab.detector.dark.frame_noise.FrameNoise`),
        None when the frames were not given.
    """

    statistics: xr.Dataset
    quality: DarkQuality
    photons: DarkPhotons | None = None
    frames: FrameNoise | None = None

    def lines(self) -> list[str]:
        """The report as text lines (``aare-lab dark`` prints them)."""
        s = self.statistics
        q = s["rms_quantile"]
        at = {float(v): float(r) for v, r in zip(q["quantile"].to_numpy(), q.to_numpy())}
        skipped = self.quality.frames_skipped
        out = [(f"dark frames: {s.attrs['dark_frames']} (n_pedestal={s.attrs['n_pedestal']}), "
                f"{s.sizes['y']}x{s.sizes['x']} pixels"
                + (f"; {skipped} left out at the start of acquisitions" if skipped else "")),
               "rms (ADU): " + ", ".join(f"{label} {at[p]:.3g}" for label, p in (
                   ("min", 0.0), ("1%", 0.01), ("median", 0.5), ("99%", 0.99), ("max", 1.0))),
               f"mean (ADU): median {float(s['mean_quantile'].sel(quantile=0.5)):.6g}",
               *self.quality.pixels.lines()]
        if self.quality.pixels.unreachable(self.quality.n_sigma):
            out.append(self.quality.pixel_warning)
        out.append(self.quality.summary())
        if self.frames is not None:
            out.extend(self.frames.lines())
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


def dark_report(pedestal: Pedestal, n_sigma: float = 5.0, frames=None,
                progress: bool = False) -> DarkReport:
    """The statistics of the dark frames a pedestal was trained on, at threshold nσ.

    Parameters
    ----------
    pedestal
        A trained `Pedestal` (e.g. from `aare_lab.train_pedestal`).
    n_sigma
        The threshold the false-cluster assessment is made for.
    frames
        The dark frames it was trained on (a finite `aare_lab.sources.FrameSource`, read
        once more), to name those whose residual noise stands out
        (`aare_lab.detector.dark.frame_noise.frame_noise`); None leaves them out.
    progress
        Show a progress bar while ``frames`` are read.

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
    quality = assess_dark(pedestal, n_sigma)
    mean = np.asarray(pedestal.mean, np.float64)
    rms = np.asarray(pedestal.rms, np.float64)
    pixels = quality.pixels
    dims = ("y", "x")
    quantile = np.asarray(QUANTILES)
    stats = xr.Dataset(
        {"mean": (dims, mean, {"long_name": "pedestal mean", "units": "ADU"}),
         "rms": (dims, rms, {"long_name": "pedestal rms (noise)", "units": "ADU"}),
         "zero_rms": (dims, pixels.zero_rms, {"long_name": "pixel with rms 0 (dead or stuck)"}),
         "hot_mean": (dims, pixels.hot_mean, {"long_name": "mean far above the median"}),
         "hot_rms": (dims, pixels.hot_rms, {"long_name": "rms far above the median"}),
         "mean_quantile": ("quantile", np.quantile(mean, quantile), {"units": "ADU"}),
         "rms_quantile": ("quantile", np.quantile(rms, quantile), {"units": "ADU"})},
        coords={"quantile": quantile},
        attrs={"dark_frames": pedestal.n_frames, "n_pedestal": pedestal.n_pedestal,
               "hot_robust_z": HOT_ROBUST_Z},
    )
    photons = pedestal.dark_photons
    if photons is not None:
        stats.attrs.update(photons.attrs)
    noise = None if frames is None else frame_noise(pedestal, frames, progress)
    if noise is not None:
        stats["frame_residual_rms"] = ("dark_frame", noise.residual_rms,
                                       {"long_name": "residual noise of the dark frame",
                                        "units": "ADU"})
        stats["frame_offset"] = ("dark_frame", noise.offset,
                                 {"long_name": "median residual of the dark frame",
                                  "units": "ADU"})
        stats = stats.assign_coords(dark_frame=noise.numbers)
    return DarkReport(stats, quality, photons, noise)


__all__ = ["HOT_ROBUST_Z", "QUANTILES", "DarkReport", "dark_report"]
