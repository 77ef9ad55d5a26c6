"""The main job on the embedded default: a simulated MÖNCH03 run through every finder.

`run_demo` simulates dark and data frames, trains one pedestal, compiles every finder
(or loads it from Numba's cache: `warm_up`), runs each from a copy of the pedestal, timed
warm, and measures what a beamline scientist would check first: how many clusters
each finder found, whether the finders agree, where the Kα line sits and how wide it is
(a Kα/Kβ doublet fit, `aare_lab.analysis.fit`, for a beam of two lines such as the default Cu),
and whether the cluster count recovers the simulated photons. A finder this machine
cannot run (cuda without CuPy or a GPU) is left out and the report says why.
`save_demo` writes what a user looks at (the spectrum, a summary, per-frame counts) and,
only on request, every finder's full result.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from aare_lab._version import __version__
from aare_lab.analysis.compare import compare
from aare_lab.analysis.fit import PeakFit, fit_peak, line_energies, value_and_error
from aare_lab.detector.pedestal import Pedestal
from aare_lab.finders import FINDERS, get_finder
from aare_lab.gpu import GpuUnavailable
from aare_lab.model.results import save_result, spectrum
from aare_lab.pipeline import DARK_CHUNK
from aare_lab.simulate import Beam, Detector, Simulator, Truth

SPECTRUM_BIN_ADU = 2


@dataclass
class DemoReport:
    """What `run_demo` found; ``str()`` gives the printed report."""

    detector: Detector
    beam: Beam
    n_dark: int
    n_frames: int
    seed: int
    cluster_size: tuple[int, int]
    results: dict[str, xr.Dataset]
    seconds: dict[str, float]
    agreement: list = field(default_factory=list)
    peak: PeakFit | None = None
    reference: str = ""
    truth: Truth | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0

    @property
    def kalpha_kev(self) -> float:
        """The simulated Kα energy."""
        return float(self.beam.lines[0][0])

    @property
    def peak_kev(self) -> float:
        """The fitted Kα position converted to keV with the simulated gain."""
        return self.peak.position / self.detector.gain_adu_per_kev

    @property
    def beta_ratio_simulated(self) -> float:
        """The simulated Kβ/Kα intensity ratio (NaN unless the beam has two lines)."""
        if len(self.beam.lines) != 2:
            return float("nan")
        (_, alpha), (_, beta) = sorted(self.beam.lines)
        return beta / alpha

    @property
    def photons_per_frame(self) -> float:
        """Simulated photons per frame."""
        return len(self.truth) / self.n_frames

    def clusters_per_frame(self, finder: str) -> float:
        """Clusters per frame found by ``finder``."""
        return self.results[finder].sizes["cluster"] / self.n_frames

    def __str__(self) -> str:
        ny, nx = self.detector.frame_shape
        lines = [
            f"aare-lab demo: simulated {ny}x{nx} detector, {self.n_dark} dark + "
            f"{self.n_frames} frames, {self.beam.photons_per_frame:g} photons/frame, "
            f"gain {self.detector.gain_adu_per_kev:g} ADU/keV, seed {self.seed}, "
            f"clusters {self.cluster_size[0]}x{self.cluster_size[1]}",
            f"finders compiled (or loaded from Numba's cache) in {self.compile_seconds:.1f} s "
            "before timing: the rates below are warm",
            f"{'finder':<8} {'clusters':>10} {'per frame':>10} {'seconds':>8} {'frames/s':>9}",
        ]
        for name, result in self.results.items():
            sec = self.seconds[name]
            lines.append(f"{name:<8} {result.sizes['cluster']:>10} "
                         f"{self.clusters_per_frame(name):>10.1f} {sec:>8.2f} "
                         f"{self.n_frames / sec:>9.0f}")
        lines += [f"{name:<8} skipped: {why}" for name, why in self.skipped.items()]
        lines += [f"agreement {row}" for row in self.agreement]
        lines.append(self._peak_line())
        lines.append(f"  {self.bias_note()}")
        found = self.clusters_per_frame(self.reference)
        lines.append(
            f"photons recovered: {found:.1f} clusters/frame for {self.photons_per_frame:.1f} "
            f"simulated photons/frame ({100 * (found / self.photons_per_frame - 1):+.1f} %, "
            "pile-up merges overlapping photons)")
        return "\n".join(lines)

    def bias_note(self) -> str:
        """The fit's numbers beside the truth, and why they differ by more than their
        (statistical) errors: what the report, the figure and the README say."""
        peak = self.peak
        text = f"Kα {100 * (self.peak_kev / self.kalpha_kev - 1):+.2f} %"
        if peak.lines is not None:
            text = (f"Kβ/Kα {value_and_error(peak.beta_ratio, peak.beta_ratio_err)} against "
                    f"{self.beta_ratio_simulated:.3f} simulated and {text}")
        return (f"errors are statistical (1σ); {text} are biases of pile-up and charge "
                f"sharing at {self.beam.photons_per_frame:g} photons per frame, not noise")

    def _peak_line(self) -> str:
        peak = self.peak
        rel = 100 * (self.peak_kev / self.kalpha_kev - 1)
        text = (f"Kα peak ({self.reference}, {peak.model}): "
                f"{value_and_error(peak.position, peak.position_err)} ADU = "
                f"{self.peak_kev:.3f} keV (simulated {self.kalpha_kev:.2f} keV, {rel:+.2f} %); "
                f"FWHM {value_and_error(peak.fwhm, peak.fwhm_err)} ADU, resolution "
                f"{100 * peak.resolution:.1f} %")
        if peak.lines is not None:
            text += (f"; Kβ/Kα {value_and_error(peak.beta_ratio, peak.beta_ratio_err)} "
                     f"(simulated {self.beta_ratio_simulated:.3f})")
        return text

    def to_dict(self) -> dict:
        """The report as plain JSON-able data (what ``summary.json`` holds)."""
        reference = self.results[self.reference]
        return {
            "aare_lab_version": __version__,
            "frame_shape": list(self.detector.frame_shape),
            "gain_adu_per_kev": self.detector.gain_adu_per_kev,
            "noise_adu": self.detector.noise_adu,
            "mean_photons_per_frame": self.beam.photons_per_frame,
            "n_dark": self.n_dark,
            "n_frames": self.n_frames,
            "seed": self.seed,
            "n_sigma": reference.attrs["n_sigma"],
            "cluster_size": reference.attrs["cluster_size"],
            "finders": {
                name: {"clusters": int(result.sizes["cluster"]),
                       "clusters_per_frame": self.clusters_per_frame(name),
                       "seconds": self.seconds[name]}
                for name, result in self.results.items()
            },
            "compile_seconds": self.compile_seconds,
            "skipped": dict(self.skipped),
            "agreement": list(self.agreement),
            "kalpha": {
                "finder": self.reference,
                "model": self.peak.model,
                "position_adu": self.peak.position,
                "position_err_adu": self.peak.position_err,
                "position_kev": self.peak_kev,
                "simulated_kev": self.kalpha_kev,
                "fwhm_adu": self.peak.fwhm,
                "fwhm_err_adu": self.peak.fwhm_err,
                "resolution": self.peak.resolution,
                # NaN (not JSON) for one gaussian: None then.
                "beta_ratio": _finite_or_none(self.peak.beta_ratio),
                "beta_ratio_err": _finite_or_none(self.peak.beta_ratio_err),
                "simulated_beta_ratio": _finite_or_none(self.beta_ratio_simulated),
            },
            "simulated_photons_per_frame": self.photons_per_frame,
        }


def run_demo(n_dark: int = 1000, n_frames: int = 500, *, seed: int = 0,
             detector: Detector | None = None, beam: Beam | None = None,
             cluster_size: tuple[int, int] = (3, 3), n_sigma: float = 5.0,
             finders: list[str] | None = None, progress: bool = True) -> DemoReport:
    """Simulate a run, find clusters with every finder and measure the result.

    Parameters
    ----------
    n_dark
        Dark frames; also the pedestal window N.
    n_frames
        Data frames.
    seed
        Seed of the simulation.
    detector, beam
        Simulation settings (default: MÖNCH03 with Cu Kα/Kβ).
    cluster_size, n_sigma
        Finder parameters.
    finders
        Finder names (default: every finder; one that cannot run here is skipped and
        the report's ``skipped`` says why).
    progress
        Show progress bars, and say on stderr that the finders are being compiled.

    Returns
    -------
    DemoReport
        Each finder's ``seconds`` are of a warm run: every finder is compiled (or loaded
        from Numba's cache) first, by `warm_up`, and its time is ``compile_seconds``.

    Raises
    ------
    GpuUnavailable
        When ``finders`` names cuda and this machine cannot run it.
    """
    detector = detector or Detector()
    beam = beam or Beam()
    names, skipped = (list(finders), {}) if finders else runnable_finders()
    sim = Simulator(detector, beam, seed)
    pedestal = Pedestal(detector.frame_shape, n_dark)
    with tqdm(total=n_dark, unit="frame", desc="dark frames", disable=not progress) as bar:
        for chunk in sim.iter_dark(n_dark, DARK_CHUNK):
            pedestal.push_dark(chunk)
            bar.update(len(chunk))
    frames, truth = sim.frames(n_frames)
    if progress:
        print("compiling the finders (first run only)…", file=sys.stderr, flush=True)
    start = time.perf_counter()
    for name in names:
        warm_up(get_finder(name)(pedestal.copy(), n_sigma, cluster_size), frames[:1])
    compile_seconds = time.perf_counter() - start
    results, seconds = {}, {}
    for name in names:
        finder = get_finder(name)(pedestal.copy(), n_sigma, cluster_size)
        finder.warmup()  # this finder's own buffers (and, for cuda, its kernel)
        start = time.perf_counter()
        results[name] = finder.find(frames, progress=progress)
        seconds[name] = time.perf_counter() - start
    reference = "frozen" if "frozen" in results else names[0]
    agreement = [compare(results[a], results[b], labels=(a, b)).summary()
                 for i, a in enumerate(names) for b in names[i + 1:]]
    return DemoReport(detector, beam, n_dark, n_frames, sim.seed, cluster_size, results,
                      seconds, agreement, kalpha_fit(results[reference], detector, beam),
                      reference, truth, skipped, compile_seconds)


def warm_up(finder, frames: np.ndarray) -> None:
    """Compile everything a finder's `find` runs (its chunk loop and the result's
    assembly), or load it from Numba's cache, by finding clusters in ``frames`` (a frame
    or two) with ``finder``, a throwaway: its pedestal moves on.

    What this run would warn about (the dark frames, say) the timed run warns about.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finder.find(frames, progress=False)


def runnable_finders() -> tuple[list[str], dict[str, str]]:
    """Every registered finder that can run here, and why each of the others cannot.

    Returns
    -------
    tuple
        The runnable names, and ``{name: reason}`` for the others (the message of the
        `GpuUnavailable` that the finder's availability check raised).
    """
    names, skipped = [], {}
    for name, finder in FINDERS.items():
        try:
            finder.require_available()
        except GpuUnavailable as err:
            skipped[name] = str(err)
        else:
            names.append(name)
    return names, skipped


def save_demo(report: DemoReport, out: str | Path, *, full_results: bool = False) -> list[Path]:
    """Write a demo's report into the folder ``out`` (created if needed).

    Parameters
    ----------
    report
        What `run_demo` returned.
    out
        The folder.
    full_results
        Also write every finder's full result as ``<finder>.nc`` (all windows: about
        0.13 MB per frame and finder at MÖNCH03's default occupancy, so 65 MB each for
        the default 500 frames).

    Returns
    -------
    list of pathlib.Path
        The files written: ``spectrum.png`` (the spectra with the fitted Kα peaks, the
        reference finder's fit region with its Kα, Kβ and background and the residuals,
        the bin width, the gain and `DemoReport.bias_note`),
        ``summary.txt`` (the printed report), ``summary.json`` (`DemoReport.to_dict`),
        ``summary.nc`` (``n_found``/``n_kept`` per finder and frame, and the spectra
        ``counts`` per finder and energy bin), then the full results if asked.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    view, spec = demo_view(report)
    figure = view.figure
    paths = [out / name for name in ("spectrum.png", "summary.txt", "summary.json",
                                     "summary.nc")]
    figure.savefig(paths[0], dpi=120)
    paths[1].write_text(f"{report}\n", encoding="utf-8")
    paths[2].write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    finder = xr.DataArray(list(report.results), dims="finder", name="finder")
    counts = xr.concat([r[["n_found", "n_kept"]] for r in report.results.values()], dim=finder)
    summary = counts.assign(counts=spec)
    summary.attrs = {"title": "aare-lab demo: clusters per frame and spectra per finder",
                     "aare_lab_version": __version__}
    save_result(summary, paths[3])
    if full_results:
        for name, result in report.results.items():
            paths.append(out / f"{name}.nc")
            save_result(result, paths[-1])
    return paths


def demo_view(report: DemoReport):
    """The demo's figure (``spectrum.png``): every finder's spectrum on integer-aligned
    bins of `SPECTRUM_BIN_ADU` (the pile-up too) in keV, their Kα fits, the reference
    finder's fit region with its parts and residuals, and `DemoReport.bias_note`.

    Returns
    -------
    tuple
        The `aare_lab.plots.SpectrumView`, and the spectra it draws (over ``finder``).
    """
    from aare_lab.analysis.spectra import fit_peaks, spectra
    from aare_lab.plots import SpectrumView

    spec = spectra(report.results, width=SPECTRUM_BIN_ADU)
    window = kalpha_window(report.results[report.reference], report.detector, report.beam)
    fits = fit_peaks(spec, window, doublet_lines(report.beam))
    view = SpectrumView(spec, fits, gain=report.detector.gain_adu_per_kev,
                        reference=report.reference, detail=True, note=report.bias_note())
    return view, spec


def doublet_lines(beam: Beam) -> tuple[float, float] | None:
    """The Kα and Kβ energies of a beam of two lines (the default Cu), else None."""
    return line_energies(sorted(beam.lines)) if len(beam.lines) == 2 else None


def kalpha_window(result: xr.Dataset, detector: Detector, beam: Beam) -> tuple[float, float]:
    """Fit window for the Kα line, from the noise of a cluster's pixels: for a doublet
    (`doublet_lines`) 3 expected sigmas below Kα to 3 above Kβ, else 2.5 below Kα to 1
    above, clear of the other lines."""
    lines = doublet_lines(beam)
    sigma = detector.noise_adu * np.sqrt(np.prod(result["window"].shape[1:]))
    if lines is None:
        kalpha = beam.lines[0][0] * detector.gain_adu_per_kev
        return kalpha - 2.5 * sigma, kalpha + sigma
    kalpha, kbeta = (energy * detector.gain_adu_per_kev for energy in lines)
    return kalpha - 3 * sigma, kbeta + 3 * sigma


def kalpha_fit(result: xr.Dataset, detector: Detector, beam: Beam) -> PeakFit:
    """Fit the Kα peak of ``result``'s spectrum: the Kα/Kβ doublet for a beam of two lines,
    else one gaussian (`aare_lab.analysis.fit.fit_peak`)."""
    spec = spectrum(result, width=SPECTRUM_BIN_ADU)
    return fit_peak(spec["energy"].to_numpy(), spec.to_numpy(),
                    window=kalpha_window(result, detector, beam), lines=doublet_lines(beam))


def _finite_or_none(value: float) -> float | None:
    return value if np.isfinite(value) else None
