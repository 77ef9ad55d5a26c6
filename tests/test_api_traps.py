"""What a newcomer types first: the README's widget snippet, the functions the package's
names read as, spectra with the bins asked for, fits of a single spectrum, and the CLI's
long name of the cap."""

import re
from pathlib import Path

import numpy as np
import pytest

import aare_lab
from aare_lab import FrozenFinder, fit_peak, fit_peaks, spectrum, train_pedestal
from aare_lab.cli import main
from aare_lab.simulate import Beam, Detector, Simulator

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def run():
    sim = Simulator(Detector(frame_shape=(64, 64)), Beam(photons_per_frame=40), seed=1)
    dark, (frames, _) = sim.dark(100), sim.frames(60)
    pedestal = train_pedestal(dark, 100, progress=False)
    return dark, frames, FrozenFinder(pedestal).find(frames, branch_maps=True, progress=False)


def readme_block(containing: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if containing in b]
    return block


@pytest.mark.slow
def test_the_readme_widget_snippet_runs_as_written():
    pytest.importorskip("ipywidgets")
    namespace = {}
    exec(compile(readme_block("FinderControls("), str(README), "exec"), namespace)
    controls = namespace["controls"]
    assert controls.outcome.spec.n_sigma == 4
    assert controls.outcome.n_found > 0


def test_explain_compare_and_spectra_are_called_as_they_read(run):
    dark, frames, result = run
    other = FrozenFinder(train_pedestal(dark, 100, progress=False), 3.0).find(
        frames, branch_maps=True, progress=False)
    comparison = aare_lab.analysis.compare(result, other, labels=["at5", "at3"])
    assert comparison.a_only == 0 and comparison.b_only > 0  # noise above 3 sigma
    site = comparison.one_sided().sites.isel(site=0)
    frame, y, x = (int(site[name]) for name in ("frame_number", "y", "x"))
    explanation = aare_lab.analysis.explain(frames, frame, y, x, {"at5": result, "at3": other},
                                   dark=dark)
    assert explanation.branch("at5") != explanation.branch("at3")
    both = aare_lab.analysis.spectra([result, other], ["at5", "at3"])
    assert list(both["finder"].to_numpy()) == ["at5", "at3"]
    # and the modules are modules still
    from aare_lab.analysis.compare import compare_all
    from aare_lab.analysis.explain import explain_sites
    from aare_lab.analysis.spectra import spectrum_ratio
    assert callable(compare_all) and callable(explain_sites) and callable(spectrum_ratio)
    assert aare_lab.compare.worst_mismatch(comparison) is not None


@pytest.mark.parametrize("bins", [200, 186, 37, 1])
def test_a_spectrum_has_the_bins_asked_for(run, bins):
    _, _, result = run
    spec = spectrum(result, bins=bins)
    assert spec.sizes["energy"] == bins
    energy = result["energy"].to_numpy()
    assert int(spec.sum()) == len(energy) and spec.attrs["overflow"] == 0
    widths = spec["energy_hi"].to_numpy() - spec["energy_lo"].to_numpy()
    assert (widths == widths[0]).all() and widths[0] == int(widths[0])
    # every bin from the lowest energy, the empty ones above the highest
    assert spec["energy_lo"][0] <= energy.min() < spec["energy_hi"][0]


def test_a_spectrum_over_fewer_adu_than_bins_has_one_bin_per_adu(run):
    _, _, result = run
    narrow = result.isel(cluster=slice(0, 3)).assign(
        energy=("cluster", np.array([100, 103, 110])))
    spec = spectrum(narrow, bins=200)
    assert spec.sizes["energy"] == 11  # 100..110: a whole count is not split


def test_fit_peaks_and_fit_peak_take_the_spectrum_of_one_result(run):
    _, _, result = run
    spec = spectrum(result)
    fits = fit_peaks(spec)
    assert list(fits["finder"].to_numpy()) == ["frozen"]
    expected = fit_peak(spec["energy"].to_numpy(), spec.to_numpy())
    assert float(fits["position"].sel(finder="frozen")) == expected.position
    assert fit_peak(spec).position == expected.position
    windowed = fit_peak(spec, window=(250, 400))
    assert windowed == fit_peak(spec["energy"].to_numpy(), spec.to_numpy(), (250, 400))
    with pytest.raises(TypeError, match="several finders with aare_lab.fit_peaks"):
        fit_peak(aare_lab.analysis.spectra([result]))
    with pytest.raises(TypeError, match="or a spectrum of one result over energy"):
        fit_peak(spec.to_numpy())


def test_the_cli_takes_max_clusters_per_frame_for_cap(run, tmp_path, capsys):
    dark, frames, _ = run
    np.save(tmp_path / "dark.npy", dark)
    np.save(tmp_path / "frames.npy", frames)
    common = ["find", "--dark", str(tmp_path / "dark.npy"), "--frames",
              str(tmp_path / "frames.npy"), "--n-pedestal", "100", "--quiet"]
    assert main([*common, "--max-clusters-per-frame", "2", "--out",
                 str(tmp_path / "long.nc")]) == 0
    assert "TruncationWarning" in capsys.readouterr().err
    assert main([*common, "--cap", "2", "--out", str(tmp_path / "short.nc")]) == 0
    long, short = (aare_lab.load_result(tmp_path / f"{n}.nc") for n in ("long", "short"))
    assert long.attrs["max_clusters_per_frame"] == short.attrs["max_clusters_per_frame"] == 2
    assert int(long["n_kept"].max()) == 2 and long.sizes["cluster"] == short.sizes["cluster"]
