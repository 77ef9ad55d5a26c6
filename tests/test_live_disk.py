"""`aare-lab live --clusters` on a disk that fills up: one line, the frames kept in
``clusters.partial.nc``, never a ``clusters.nc`` that looks complete and is not."""

import numpy as np
import pytest
import xarray as xr
from live_helpers import live_cli
from small_disk import small_disk

from aare_lab.simulate import Beam, Detector, Simulator
from aare_lab.stream.publisher import StreamPublisher


@pytest.mark.slow
def test_live_clusters_on_a_full_disk_stop_with_the_frames_kept(tmp_path, capsys):
    sim = Simulator(Detector(frame_shape=(64, 64)), Beam(photons_per_frame=150), seed=9)
    dark, (frames, _) = sim.dark(30), sim.frames(100)
    with small_disk(tmp_path / "disk", "12m") as disk, \
            StreamPublisher("tcp://127.0.0.1:0") as publisher:
        def send():
            publisher.send_frames(dark)
            for _ in range(6):
                publisher.send_frames(frames)
            publisher.end_acquisition()

        code = live_cli(publisher, send, "--n-dark", "30", "--n-pedestal", "30",
                        "--cluster-size", "9x9", "--window-dtype", "float64",
                        "--stop-at-end", "--clusters", "--interval", "0.2",
                        "--out", str(disk / "live"))
        err = capsys.readouterr().err
        assert code == 1, err
        lines = [line for line in err.splitlines() if "error:" in line]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert f"could not write {disk / 'live' / 'clusters.nc'}: the disk is full" in lines[0]
        saved = int(lines[0].split(" frames saved in ")[0].rsplit(" ", 1)[1])
        assert not (disk / "live" / "clusters.nc").exists()
        with xr.open_dataset(disk / "live" / "clusters.partial.nc", engine="h5netcdf") as kept:
            assert kept.attrs["complete"] == 0 and kept.sizes["frame"] == saved > 0
            assert kept.attrs["frames_written"] == saved
            assert int(kept["n_kept"].sum()) == kept.sizes["cluster"]
            assert np.all(np.diff(kept["frame"].to_numpy()) > 0)
