"""What common-mode correction does to false clusters and to the Kα resolution.

Run: ``/opt/aare-2026.9.30/bin/python benchmarks/common_mode.py`` (an interpreter with aare,
which reads the slsDetector raw files). Writes ``benchmarks/results/common_mode.json``.

(a) The real JUNGFRAU dark frames of ``../shared/data/aare_jungfrau`` (pedestal from the
    ``single`` run, N = 10, frames of the ``double`` run, 5σ, 3×3): ``n_found`` per frame
    without correction, with ``jungfrau`` (chips) and ``jungfrau-rows`` (chip rows); and each
    frame's own noise once chip-row offsets are gone (`residual_noise`).
(b) Simulated MÖNCH03 frames (400×400, noise 5 ADU) with common-mode noise: per-supercolumn
    offsets of rms 2 ADU and, on 20 % of the frames, a frame-wide jump of ±20 ADU (4σ), in
    dark and data frames alike: false clusters per dark frame, and the Kα peak (8.05 keV,
    window sum of 3×3) of a photon run, without and with ``moench03`` correction, next to
    the same detector without common mode.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from aare_lab.analysis.fit import fit_peak
from aare_lab.model.results import spectrum
from aare_lab.pipeline import find_clusters, train_pedestal
from aare_lab.simulate import Beam, Detector, Simulator

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data" / "aare_jungfrau"


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def jungfrau() -> dict:
    dark, frames = (str(DATA / f"jungfrau_{run}_master_0.json") for run in ("single", "double"))
    pedestal = quiet(train_pedestal, dark, 10, progress=False)
    out = {}
    for layout in ("none", "jungfrau", "jungfrau-rows"):
        r = quiet(find_clusters, frames, pedestal=pedestal, common_mode=layout, progress=False)
        out[layout] = {"n_found": r["n_found"].to_numpy().tolist()}
        if "common_mode" in r:
            out[layout]["offset_mean_adu"] = np.round(
                r["common_mode"].to_numpy().mean(axis=1), 2).tolist()
    out["noise_ratio_after_chip_rows"] = {
        run: residual_noise(str(DATA / f"jungfrau_{run}_master_0.json"),
                            str(DATA / f"jungfrau_{other}_master_0.json"))
        for run, other in (("single", "double"), ("double", "single"))}
    return out


def residual_noise(run: str, reference: str) -> list[float]:
    """Per frame of ``run``: the rms of its values less the other run's pixel means, once
    the median of every chip row (256 pixels) is removed, in units of the other run's pixel
    rms. Offsets of any region down to a chip row leave it unchanged: what it measures is
    the frame's own pixel noise, which no common-mode correction takes away."""
    from aare_lab.sources import open_source

    def frames(spec):
        source = open_source(spec)
        return np.concatenate([c.frames for c in source.chunks(64)]).astype(np.float64)

    data, ref = frames(run), frames(reference)
    mean, rms = ref.mean(axis=0), ref.std(axis=0)
    good = rms > 0
    ratios = []
    for frame in data:
        rows = (frame - mean).reshape(frame.shape[0], -1, 256)
        residual = (rows - np.median(rows, axis=2, keepdims=True)).reshape(frame.shape)
        ratios.append(round(float((residual[good] / rms[good]).std()), 4))
    return ratios


def simulated(n_dark: int, n_frames: int) -> dict:
    noisy = {"common_mode_sigma_adu": 2.0, "common_mode_jump_adu": 20.0,
             "common_mode_jump_probability": 0.2}
    out = {}
    for label, extra, layout in [("no common mode", {}, None),
                                 ("common mode, uncorrected", noisy, None),
                                 ("common mode, moench03", noisy, "moench03")]:
        det = Detector(**extra)
        dark_sim = Simulator(det, Beam(photons_per_frame=0), seed=1)
        dark = dark_sim.dark(n_dark)
        empty, _ = dark_sim.frames(n_frames)
        photons, _ = Simulator(det, Beam(), seed=2).frames(n_frames)
        t0 = time.perf_counter()
        false = quiet(find_clusters, empty, dark, n_pedestal=n_dark, common_mode=layout,
                      progress=False)
        beam = quiet(find_clusters, photons, Simulator(det, seed=2).dark(n_dark),
                     n_pedestal=n_dark, common_mode=layout, progress=False)
        counts = spectrum(beam, bins=np.arange(200.5, 420.5, 2.0))
        fit = fit_peak(counts["energy"].to_numpy(), counts.to_numpy(), window=(290, 350))
        out[label] = {
            "false_clusters_per_frame": float(false["n_found"].mean()),
            "false_clusters_max": int(false["n_found"].max()),
            "clusters_per_photon_frame": float(beam["n_found"].mean()),
            "kalpha_position_adu": round(fit.position, 2),
            "kalpha_fwhm_adu": round(fit.fwhm, 2),
            "kalpha_resolution": round(fit.resolution, 4),
            "seconds": round(time.perf_counter() - t0, 1)}
        if layout is not None:
            offsets = beam["common_mode"].to_numpy()
            out[label]["offset_abs_max_adu"] = round(float(np.abs(offsets).max()), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dark", type=int, default=300)
    parser.add_argument("--frames", type=int, default=100)
    args = parser.parse_args()
    report = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
              "jungfrau_real_dark": jungfrau() if DATA.is_dir() else "data not found",
              "simulated_moench03": simulated(args.dark, args.frames)}
    path = HERE / "results" / "common_mode.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
