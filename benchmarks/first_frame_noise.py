"""The residual noise of each frame of the real JUNGFRAU dark runs (PSI aare's test data).

For each run (``jungfrau_single``, ``jungfrau_double``, 10 dark frames each) and each
frame: the rms over pixels of the frame minus the pedestal mean of the *other* nine frames
(leave one out, so a frame never lowers its own residual), in ADU and in units of each
pixel's rms (of the other nine), with the frame's median offset (common mode) removed;
and the pixels above 5 sigma of that residual. The raw files are read with NumPy (a
112-byte sls header before each 512x1024 uint16 frame; the double run's d1 files hold rows
256-511), so neither aare nor aare_lab takes part. Then what it means for finding: the
frozen finder at 5 sigma, 3x3, common mode "jungfrau", fixed noise, the pedestal trained
on 9 frames of the other run, clusters found per frame with ``skip_first`` 0 and 1 (with 1
the first frame of each run is left out of training and finding). Writes
benchmarks/results/first_frame_noise.json.

Run: ``python3 benchmarks/first_frame_noise.py [../shared/data/aare_jungfrau]``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HEADER = 112
SHAPE = (512, 1024)


def read_run(folder: Path, prefix: str, ports: int) -> np.ndarray:
    """The run's frames ``(n, 512, 1024)`` uint16 from its ``.raw`` files."""
    rows = SHAPE[0] // ports
    parts = []
    for port in range(ports):
        chunks = []
        for path in sorted(folder.glob(f"{prefix}_d{port}_f*_0.raw")):
            data = np.fromfile(path, np.uint8).reshape(-1, HEADER + rows * SHAPE[1] * 2)
            chunks.append(data[:, HEADER:].copy().view(np.uint16).reshape(-1, rows, SHAPE[1]))
        parts.append(np.concatenate(chunks))
    return np.concatenate(parts, axis=1)


def frame_residuals(frames: np.ndarray, n_sigma: float = 5.0) -> list[dict]:
    """Per frame, the leave-one-out residual noise and the pixels above ``n_sigma``."""
    x = frames.astype(np.float64)
    n = len(x)
    total, total2 = x.sum(0), (x * x).sum(0)
    out = []
    for k in range(n):
        mean = (total - x[k]) / (n - 1)
        rms = np.sqrt(np.maximum((total2 - x[k] ** 2) / (n - 1) - mean**2, 0))
        residual = x[k] - mean
        offset = float(np.median(residual))
        residual -= offset
        good = rms > 0
        z = residual[good] / rms[good]
        out.append({"frame": k + 1, "offset_adu": round(offset, 2),
                    "residual_rms_adu": round(float(np.sqrt(np.mean(residual**2))), 3),
                    "residual_rms_sigma": round(float(np.sqrt(np.mean(z**2))), 4),
                    "above_n_sigma": int((z > n_sigma).sum())})
    return out


def main(folder: Path) -> dict:
    runs = {}
    for prefix, ports in (("jungfrau_single", 1), ("jungfrau_double", 2)):
        rows = frame_residuals(read_run(folder, prefix, ports))
        rest = rows[1:]
        runs[prefix] = {
            "frames": rows,
            "first_residual_rms_sigma": rows[0]["residual_rms_sigma"],
            "others_residual_rms_sigma_range": [min(r["residual_rms_sigma"] for r in rest),
                                                max(r["residual_rms_sigma"] for r in rest)],
            "first_above_5_sigma": rows[0]["above_n_sigma"],
            "others_above_5_sigma_median": float(np.median([r["above_n_sigma"]
                                                            for r in rest])),
        }
    return {"data": str(folder), "method": __doc__.split("\n\n")[1], "n_sigma": 5.0,
            "runs": runs, "clusters_per_frame": clusters_per_frame(folder)}


def clusters_per_frame(folder: Path) -> dict:
    """n_found per frame of each run, the pedestal from the other, per skip_first."""
    import warnings

    import aare_lab

    single = read_run(folder, "jungfrau_single", 1)
    double = read_run(folder, "jungfrau_double", 2)
    out = {}
    for dark, data, name in ((single, double, "dark single, data double"),
                             (double, single, "dark double, data single")):
        for skip in (0, 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # too few dark frames: known, and said
                result = aare_lab.find_clusters(data, dark, n_pedestal=9, noise="fixed",
                                                common_mode="jungfrau", skip_first=skip,
                                                progress=False)
            out[f"{name}, skip_first {skip}"] = result["n_found"].values.tolist()
    return out


if __name__ == "__main__":
    data = Path(sys.argv[1] if len(sys.argv) > 1 else
                Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "aare_jungfrau")
    record = main(data.resolve())
    out = Path(__file__).parent / "results" / "first_frame_noise.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    for name, run in record["runs"].items():
        print(name, [(r["residual_rms_adu"], r["offset_adu"]) for r in run["frames"]])
    for name, counts in record["clusters_per_frame"].items():
        print(name, counts)
