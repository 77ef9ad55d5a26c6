"""Write the crop of PSI aare's real JUNGFRAU dark frames that 00_your_data.ipynb reads.

Usage: python make_jungfrau_crop.py AARE_JUNGFRAU_FOLDER

The folder holds aare's test files (slsdetectorgroup/aare, ``data/``, MPL-2.0): two dark
runs of one 512x1024 module, ``jungfrau_single_*`` and, a minute later,
``jungfrau_double_*`` (10 frames each, raw slsDetector files: a 112-byte header, then
512x1024 uint16 per frame). Writes beside this script:

- ``jungfrau_dark.h5``: dataset ``/dark``, the single run's 10 frames, rows and columns
  `CROP`, as recorded;
- ``jungfrau_photons.npz``: ``frames``, the double run's 10 frames on the same pixels with
  simulated Mo Kα/Kβ photons (`LINES`) added (`GAIN_ADU_PER_KEV`, charge sharing of the simulator;
  the dark files have no photons), and ``truth_*``, the photons added.
"""

import json
import sys
from pathlib import Path

import h5py
import numpy as np

from aare_lab.simulate import Beam, Detector, Simulator

CROP = (slice(64, 160), slice(64, 192))  # 96 x 128 pixels of the first readout chip
GAIN_ADU_PER_KEV = 40.0
PHOTONS_PER_FRAME = 120
#: Mo Kα and Kβ (keV, share of the photons) of a Mo tube behind a Zr filter, which cuts
#: Kβ to about 2 %.
LINES = ((17.48, 0.98), (19.61, 0.02))
SEED = 33
HEADER_BYTES = 112


def read_run(folder: Path, run: str) -> np.ndarray:
    """The frames of one run's first data files (``d0``: all 512 rows of the single run,
    rows 0-255 of the double run, either way the rows of `CROP`)."""
    master = json.loads((folder / f"jungfrau_{run}_master_0.json").read_text())
    shape = master["Pixels"]["y"], master["Pixels"]["x"]
    files = sorted(folder.glob(f"jungfrau_{run}_d0_f*_0.raw"))
    raw = np.concatenate([np.fromfile(f, np.uint8) for f in files])
    raw = raw.reshape(master["Total Frames"], HEADER_BYTES + 2 * shape[0] * shape[1])
    return raw[:, HEADER_BYTES:].copy().view(np.uint16).reshape(-1, *shape)


def main(folder: str) -> None:
    folder, here = Path(folder), Path(__file__).parent
    dark = read_run(folder, "single")[(slice(None), *CROP)]
    base = read_run(folder, "double")[(slice(None), *CROP)]
    shape = dark.shape[1:]
    photons = Simulator(Detector(frame_shape=shape, pixel_pitch_um=75.0, pedestal_mean_adu=0.0,
                                 pedestal_spread_adu=0.0, noise_adu=0.0, noise_spread_adu=0.0,
                                 gain_adu_per_kev=GAIN_ADU_PER_KEV),
                        Beam(photons_per_frame=PHOTONS_PER_FRAME, lines=LINES,
                             charge_cloud_sigma_um=12.0),
                        SEED)
    signal, truth = photons.frames(len(base))
    frames = np.minimum(base.astype(np.int64) + signal, 2**14 - 1).astype(np.uint16)
    with h5py.File(here / "jungfrau_dark.h5", "w") as f:
        f.create_dataset("dark", data=dark, compression="gzip", compression_opts=9,
                         shuffle=True)
        f["dark"].attrs["source"] = ("slsdetectorgroup/aare data/jungfrau_single_master_0.json, "
                                     f"rows {CROP[0].start}-{CROP[0].stop - 1}, columns "
                                     f"{CROP[1].start}-{CROP[1].stop - 1} (MPL-2.0)")
    t = truth.to_xarray()
    np.savez_compressed(here / "jungfrau_photons.npz", frames=frames,
                        **{f"truth_{name}": t[name].to_numpy() for name in t.data_vars})


if __name__ == "__main__":
    main(*sys.argv[1:])
