"""Explain one pixel's decision in one frame, side by side for several finders.

Each finder is replayed from its starting pedestal up to the frame before the target
(public `Finder.find`, on a copy of the pedestal), so its pedestal is exactly the one it
had there. The target frame is then run once more with a branch map (the finder's own
verdict) while the site's numbers are recomputed here from the frame-start state, with
the arithmetic of docs/algorithm.md in the pedestal dtype: the frozen model reads the
frame-start state; the serial model reads, for the window pixels scanned before the site
(rows above it, and its own row to its left), the state after their QUIET_UPDATE in this
frame if they had one. The recomputed branch therefore equals the finder's.

A calibrated finder (docs/algorithm.md, "JUNGFRAU gain switching") is replayed with its
calibration and its numbers recomputed in keV: the taps' values ``v``, the threshold and the
tests are in keV, the pedestal's ``mean`` and ``rms`` stay in ADU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from aare_lab.callable_module import make_callable
from aare_lab.detector.arith import G0
from aare_lab.detector.branches import Branch, cf_flag_attrs
from aare_lab.detector.jungfrau import ADC_MASK, JungfrauCalibration
from aare_lab.detector.pedestal import Pedestal
from aare_lab.finders import make_finder
from aare_lab.finders._gain import FLAGGED, calibration_arrays, pixel_status
from aare_lab.model.labels import as_labelled
from aare_lab.model.params import format_cluster_size
from aare_lab.model.spec import CALIBRATION_ATTR, FinderSpec
from aare_lab.pipeline import train_pedestal_for
from aare_lab.sources import open_source

TESTS = ("neg_skip", "test1", "local_max", "test3")
TEST_TITLES = {"neg_skip": "NEG_SKIP", "test1": "Test 1", "local_max": "local max",
               "test3": "Test 3"}
TEST_FORMULAS = {"neg_skip": "v < -thr", "test1": "m > thr", "local_max": "v >= max(others)",
                 "test3": "tot > c3*thr"}
#: A test is a near-tie when its margin is at most this many ULPs of float32: float32 and
#: float64 pedestals that saw the same frames differ by up to a few such ULPs.
NEAR_TIE_ULPS = 16.0


def _ulp(magnitude: float, dtype) -> float:
    return float(np.spacing(np.asarray(abs(magnitude), dtype)))


@dataclass(frozen=True)
class Explanation:
    """Why each finder decided what it did at one pixel of one frame.

    Attributes
    ----------
    frame, y, x
        The site.
    data
        Dataset over ``finder`` (the labels), ``wy``/``wx`` (window offsets) and ``test``:
        ``raw``, ``inside`` (the window clipped at the frame edge); per finder ``mean``,
        ``rms``, ``v`` (pedestal-subtracted) and ``updated`` (serial: pushed earlier in
        this frame) per tap, all at full precision of the pedestal dtype (stored exactly
        as float64); ``thr``, ``c3``, ``c3_thr``, ``m``, ``tot``, ``max_others``,
        ``branch`` (recomputed) and ``finder_branch`` (the finder's own map); per test
        ``lhs``, ``rhs``, ``outcome``, ``margin`` (``lhs - rhs``), ``margin_ulps`` (in
        ULPs of the finder's dtype at the larger operand), ``margin_f32_ulps`` and
        ``same_in_float32`` (the operands round to the same float32); ``common_mode``
        and ``region`` per finder: the frame's offset of the site's common-mode region
        (subtracted from every tap of that region; NaN and -1 without one).
    deciding_test
        The first test on the decision path whose outcome differs between the finders,
        or None when they all decide alike.
    reasons
        What distinguishes the finders here: ``"near_tie"`` (the deciding test's margin
        is within `NEAR_TIE_ULPS` float32 ULPs for some finder), ``"timing"`` (a serial
        finder read window pixels it had updated in this frame), ``"pedestal_diverged"``
        (finders of the same pedestal dtype and noise hold different pedestals in the
        window).
    """

    frame: int
    y: int
    x: int
    data: xr.Dataset
    deciding_test: str | None
    reasons: tuple[str, ...]

    @property
    def labels(self) -> list[str]:
        """The finders' labels."""
        return [str(f) for f in self.data["finder"].to_numpy()]

    def branch(self, label: str) -> Branch:
        """The branch the finder ``label`` took at the site."""
        return Branch(int(self.data["branch"].sel(finder=label)))

    def test(self, label: str, test: str) -> dict:
        """One finder's numbers for one test (``lhs``, ``rhs``, ``outcome``, ``margin``...)."""
        row = self.data[["lhs", "rhs", "outcome", "margin", "margin_ulps", "margin_f32_ulps",
                         "same_in_float32"]].sel(finder=label, test=test)
        return {name: row[name].item() for name in row.data_vars}

    def __repr__(self) -> str:
        # One line, not the dataclass's dump of `data`: what a notebook shows for ``e``.
        # The whole report is `aare_lab.plots.ExplanationTable` (or `explanation_text`).
        branches = ", ".join(f"{label} {self.branch(label).name}" for label in self.labels)
        if self.deciding_test is None:
            decides = "all take the same branch"
        else:
            why = f" ({', '.join(self.reasons)})" if self.reasons else ""
            decides = f"{TEST_TITLES[self.deciding_test]} decides{why}"
        return (f"<Explanation of pixel (y={self.y}, x={self.x}) of frame {self.frame}: "
                f"{branches}; {decides}>")


def _reading(spec: FinderSpec, pedestal: Pedestal) -> tuple:
    """What a finder reads every frame through, made once per explanation: its calibration
    cast to the pedestal dtype as the finder casts it (`calibration_arrays`), and its
    common-mode label map (None where it has none)."""
    labels = None if spec.common_mode is None else spec.common_mode.labels(pedestal.frame_shape)
    return calibration_arrays(spec.calibration, pedestal), labels


def _site_numbers(frame: np.ndarray, state: dict, codes: np.ndarray, config: FinderSpec,
                  pedestal: Pedestal, y: int, x: int, offsets: np.ndarray | None,
                  reading: tuple) -> dict:
    """Recompute the decision at ``(y, x)`` in the pedestal dtype, as the finder reads it.

    ``offsets`` are the frame's common-mode offsets per region (None without common mode).
    ``reading`` is the finder's `_reading`. With a calibration the values and threshold
    are in keV.
    """
    t = pedestal.dtype.type
    calibrated = config.calibration is not None
    cal, labels = reading
    if calibrated:
        cal_ped, cal_gain = cal
    n_, nsig = pedestal.N, t(config.n_sigma)
    cy, cx = config.cluster_size
    ry, rx = cy // 2, cx // 2
    c3 = np.sqrt(t(cy * cx))
    serial = config.timing_model == "serial"
    ny, nx = frame.shape
    shape = (cy, cx)
    mean, rms, v = (np.full(shape, np.nan) for _ in range(3))
    updated = np.zeros(shape, bool)
    values = []
    for a in range(cy):
        for b in range(cx):
            yy, xx = y - ry + a, x - rx + b
            if not (0 <= yy < ny and 0 <= xx < nx):
                continue
            raw = frame[yy, xx]
            status = pixel_status(raw, cal_gain, yy, xx) if calibrated else G0
            xt, off = t(raw & ADC_MASK if calibrated else raw), state["off"][yy, xx]
            s, s2 = state["s"][yy, xx], state["s2"][yy, xx]
            yv = xt - off
            # The common mode corrects G0 values only; other stages are outside its estimate.
            if offsets is not None and labels[yy, xx] >= 0 and status == G0:
                yv = yv - offsets[labels[yy, xx]]
            if serial and (a, b) < (ry, rx) and codes[yy, xx] == Branch.QUIET_UPDATE \
                    and status == G0:
                # update_pixel then refresh_value of the serial finder, in the same order.
                s = s + (yv - s / n_)
                s2 = s2 + (yv * yv - s2 / n_)
                updated[a, b] = True
            resid = s / n_
            val = yv - resid
            var = s2 / n_ - resid * resid
            sigma = state["rms_fixed"][yy, xx] if pedestal.noise == "fixed" else (
                np.sqrt(var) if var > 0 else t(0))
            if status == FLAGGED:
                val = t(0)
            elif status != G0:
                val = (xt - cal_ped[status, yy, xx]) / cal_gain[status, yy, xx]
            elif calibrated:
                val = val / cal_gain[0, yy, xx]
            mean[a, b], rms[a, b], v[a, b] = off + resid, sigma, val
            values.append(((a, b), val))
    vp = t(v[ry, rx])
    thr = nsig * t(rms[ry, rx])
    if calibrated:
        thr = thr / cal_gain[0, y, x]
    tot = t(0)
    for _, val in values:  # raster order, from 0, as the finders sum
        tot = tot + val
    m = max(val for _, val in values)
    others = [val for ab, val in values if ab != (ry, rx)]
    max_others = max(others) if others else t(-np.inf)
    c3_thr = c3 * thr
    if vp < -thr:
        code = Branch.NEG_SKIP
    elif m > thr:
        code = Branch.TEST1_STORE if vp == m else Branch.SHADOW
    elif tot > c3_thr:
        code = Branch.TEST3_STORE if vp == m else Branch.TEST3_SKIP
    else:
        code = Branch.QUIET_UPDATE
    if calibrated and pixel_status(frame[y, x], cal_gain, y, x) == FLAGGED:
        code = Branch.NEG_SKIP
    operands = {"neg_skip": (vp, -thr, vp < -thr), "test1": (m, thr, m > thr),
                "local_max": (vp, max_others, vp >= max_others),
                "test3": (tot, c3_thr, tot > c3_thr)}
    tests = {}
    for name, (lhs, rhs, outcome) in operands.items():
        magnitude = max(abs(float(lhs)), abs(float(rhs)))
        margin = float(lhs) - float(rhs)
        tests[name] = dict(lhs=float(lhs), rhs=float(rhs), outcome=bool(outcome), margin=margin,
                           margin_ulps=margin / _ulp(magnitude, pedestal.dtype),
                           margin_f32_ulps=margin / _ulp(magnitude, np.float32),
                           same_in_float32=bool(np.float32(lhs) == np.float32(rhs)))
    region = -1 if offsets is None else int(labels[y, x])
    return dict(common_mode=float(offsets[region]) if region >= 0 else np.nan, region=region,
                mean=mean, rms=rms, v=v, updated=updated, thr=float(thr), c3=float(c3),
                c3_thr=float(c3_thr), m=float(m), tot=float(tot), max_others=float(max_others),
                branch=code, finder_branch=Branch(int(codes[y, x])), tests=tests)


def _path(tests: dict) -> list[tuple[str, bool]]:
    """The tests a decision evaluates, in order, with their outcomes."""
    path = [("neg_skip", tests["neg_skip"]["outcome"])]
    if tests["neg_skip"]["outcome"]:
        return path
    path.append(("test1", tests["test1"]["outcome"]))
    if not tests["test1"]["outcome"]:
        path.append(("test3", tests["test3"]["outcome"]))
    if path[-1][1]:
        path.append(("local_max", tests["local_max"]["outcome"]))
    return path


def _deciding(numbers: list[dict]) -> str | None:
    paths = [_path(n["tests"]) for n in numbers]
    for step in range(max(len(p) for p in paths)):
        here = {p[step] if step < len(p) else None for p in paths}
        if len(here) > 1:
            return next(p[step][0] for p in paths if step < len(p))
    return None


def _build(frame_number: int, y: int, x: int, frame: np.ndarray, labels: list[str],
           configs: list[FinderSpec], pedestals: list[Pedestal], states: list[dict],
           numbers: list[dict]) -> Explanation:
    cy, cx = configs[0].cluster_size
    ry, rx = cy // 2, cx // 2
    ny, nx = frame.shape
    yy, xx = np.mgrid[y - ry:y + ry + 1, x - rx:x + rx + 1]
    inside = (yy >= 0) & (yy < ny) & (xx >= 0) & (xx < nx)
    raw = np.where(inside, frame[np.clip(yy, 0, ny - 1), np.clip(xx, 0, nx - 1)], 0)

    def stack(key):
        return np.stack([n[key] for n in numbers])

    def per_test(key):
        return np.array([[n["tests"][t][key] for t in TESTS] for n in numbers])

    win, fin, ft = ("wy", "wx"), ("finder", "wy", "wx"), ("finder", "test")
    units = configs[0].units
    raw_attrs = {"units": "ADU"} if units == "ADU" else {
        "long_name": "raw JUNGFRAU value (gain bits and ADC value)"}
    data = xr.Dataset(
        {"raw": (win, raw.astype(np.int64), raw_attrs), "inside": (win, inside),
         "mean": (fin, stack("mean"), {"units": "ADU"}),
         "rms": (fin, stack("rms"), {"units": "ADU"}),
         "v": (fin, stack("v"), {"units": units, "long_name": "pedestal-subtracted value"}),
         "updated": (fin, stack("updated")),
         **{k: ("finder", np.array([n[k] for n in numbers]))
            for k in ("thr", "c3", "c3_thr", "m", "tot", "max_others", "common_mode",
                      "region")},
         "branch": ("finder", np.array([n["branch"] for n in numbers], np.uint8),
                    cf_flag_attrs("branch recomputed from the pedestal state")),
         "finder_branch": ("finder", np.array([n["finder_branch"] for n in numbers], np.uint8),
                           cf_flag_attrs("branch in the finder's own branch map")),
         "finder_name": ("finder", [c.finder for c in configs]),
         "pedestal_dtype": ("finder", [p.dtype.name for p in pedestals]),
         "noise": ("finder", [p.noise for p in pedestals]),
         **{k: (ft, per_test(k)) for k in ("lhs", "rhs", "outcome", "margin", "margin_ulps",
                                           "margin_f32_ulps", "same_in_float32")}},
        coords={"finder": labels, "test": list(TESTS),
                "wy": np.arange(-ry, ry + 1), "wx": np.arange(-rx, rx + 1)},
        attrs={"frame": frame_number, "y": y, "x": x,
               "cluster_size": format_cluster_size((cy, cx)), "units": units},
    )
    deciding = _deciding(numbers)
    reasons = []
    if deciding is not None:
        if any(abs(n["tests"][deciding]["margin_f32_ulps"]) <= NEAR_TIE_ULPS for n in numbers):
            reasons.append("near_tie")
        if any(n["updated"].any() for n in numbers):
            reasons.append("timing")
        inside_taps = (np.clip(yy, 0, ny - 1)[inside], np.clip(xx, 0, nx - 1)[inside])
        for i in range(len(numbers)):
            for j in range(i + 1, len(numbers)):
                pi, pj = pedestals[i], pedestals[j]
                if (pi.dtype, pi.noise) == (pj.dtype, pj.noise) and any(
                        not np.array_equal(states[i][k][inside_taps], states[j][k][inside_taps])
                        for k in ("s", "s2")):
                    reasons.append("pedestal_diverged")
        reasons = list(dict.fromkeys(reasons))
    return Explanation(frame_number, y, x, data, deciding, tuple(reasons))


def _starting_pedestals(configs: list[FinderSpec], dark, pedestal) -> list[Pedestal]:
    if (dark is None) == (pedestal is None):
        raise ValueError("give either dark frames (dark=...) or the starting pedestal "
                         "(pedestal=...), one or one per finder")
    if dark is not None:
        trained = {}
        out = []
        for c in configs:
            if c.n_pedestal is None:
                raise ValueError(f"n_pedestal is needed to train the {c.finder} pedestal")
            key = (c.n_pedestal, c.pedestal_dtype, c.noise, c.calibration is not None)
            if key not in trained:
                # The results explained were found from these dark frames and warned
                # about them then: the replay's training says nothing again.
                trained[key] = train_pedestal_for(c, dark, c.n_pedestal, progress=False,
                                                  notes=[])
            out.append(trained[key])
        return out
    pedestals = [pedestal] * len(configs) if isinstance(pedestal, Pedestal) else list(pedestal)
    if len(pedestals) != len(configs):
        raise ValueError(f"{len(pedestals)} pedestals for {len(configs)} finders")
    for c, p in zip(configs, pedestals):
        p.require_ready()
        try:
            c.check_pedestal(p)
        except ValueError as err:
            raise ValueError(f"{err}; pass dark frames (dark=...) instead") from None
    return pedestals


def explain_sites(frames, sites: Sequence[tuple[int, int, int]],
                  finders: Mapping[str, xr.Dataset | FinderSpec]
                  | Sequence[xr.Dataset | FinderSpec], *, dark=None,
                  pedestal: Pedestal | Sequence[Pedestal] | None = None,
                  labels: Sequence[str] | None = None,
                  calibration: JungfrauCalibration | None = None,
                  chunk_frames: int = 64) -> list[Explanation]:
    """Explain several sites with one replay of each finder.

    Parameters
    ----------
    frames
        The data frames the finders ran on: an array, a file spec or a `FrameSource`.
    sites
        ``(frame number, y, x)`` triples.
    finders
        Result Datasets (their attributes give the specification) or `FinderSpec`\\ s,
        as a sequence or a mapping ``label -> finder``.
    dark
        Dark frames to train each finder's starting pedestal (with its dtype and noise).
    pedestal
        Instead of ``dark``: the trained starting pedestal, or one per finder. Copied,
        never advanced.
    labels
        Names of the finders (default: `aare_lab.model.labels.result_labels`).
    calibration
        The JUNGFRAU calibration of calibrated results (a result records only its
        checksum, ``calibration_sha256``); a `FinderSpec` carries its own.
    chunk_frames
        Frames read at a time.

    Returns
    -------
    list of Explanation
        In the order of ``sites``.

    Raises
    ------
    ValueError
        For a site outside the frame, a frame number not in ``frames``, finders with
        different cluster sizes, calibrated and uncalibrated finders together, a calibrated
        result without its ``calibration`` (or a ``calibration`` no result needs), or a
        pedestal that does not fit a finder.
    """
    labels, finders = as_labelled(finders, labels)
    if not finders:
        raise ValueError("give at least one finder to explain: a result or a FinderSpec")
    if calibration is not None and not any(
            isinstance(f, xr.Dataset) and CALIBRATION_ATTR in f.attrs for f in finders):
        raise ValueError("calibration= is for calibrated results, and no result given records "
                         "one; a FinderSpec carries its own calibration")
    configs = [f if isinstance(f, FinderSpec) else FinderSpec.from_result(
        f, calibration if CALIBRATION_ATTR in f.attrs else None) for f in finders]
    if len({c.units for c in configs}) > 1:
        raise ValueError("explain calibrated (keV) and uncalibrated (ADU) finders separately: "
                         + ", ".join(f"{lab} {c.units}" for lab, c in zip(labels, configs)))
    if len({c.cluster_size for c in configs}) > 1:
        raise ValueError("the finders use different cluster sizes: "
                         + ", ".join(f"{lab} {format_cluster_size(c.cluster_size)}"
                                     for lab, c in zip(labels, configs)))
    source = open_source(frames)
    ny, nx = source.frame_shape
    sites = [(int(f), int(y), int(x)) for f, y, x in sites]
    for f, y, x in sites:
        if not (0 <= y < ny and 0 <= x < nx):
            raise ValueError(f"pixel (y={y}, x={x}) is outside the {ny}x{nx} frame")
    pedestals = _starting_pedestals(configs, dark, pedestal)
    # The CPU finder of each timing model advances the pedestal: cuda equals frozen bit
    # for bit (tests/test_cuda.py), so a cuda result is explained on any machine. The
    # capacity cuts stored clusters only, never a branch or the pedestal: replay without.
    runners = [make_finder(c.replace(finder=c.timing_model, max_clusters_per_frame=None,
                                     n_pedestal=p.n_pedestal), p.copy())
               for c, p in zip(configs, pedestals)]
    readings = [_reading(r.spec, r.pedestal) for r in runners]
    wanted = sorted({f for f, _, _ in sites})
    done: dict[tuple[int, int, int], Explanation] = {}

    # Chunk by chunk, without a result Dataset: a replay reports nothing (the dark's
    # quality and the capacity were reported with the results being explained).
    def advance(block, numbers):
        if len(numbers):
            for r in runners:
                r.process_chunk(block, numbers)

    for chunk in source.chunks(chunk_frames):
        start = 0
        for i in np.flatnonzero(np.isin(chunk.numbers, wanted)):
            advance(chunk.frames[start:i], chunk.numbers[start:i])
            number, frame = int(chunk.numbers[i]), chunk.frames[i]
            states, codes, offsets = [], [], []
            for r in runners:
                states.append(r.pedestal.state())
                batch = r.process_chunk(frame[np.newaxis], np.array([number], np.int64),
                                        branch_maps=True)
                codes.append(batch.branch_maps[0])
                offsets.append(None if batch.common_mode is None else batch.common_mode[0])
            for f, y, x in sites:
                if f == number and (f, y, x) not in done:
                    numbers = [_site_numbers(frame, s, c, cfg, r.pedestal, y, x, o, reading)
                               for s, c, cfg, r, o, reading in zip(states, codes, configs,
                                                                   runners, offsets,
                                                                   readings)]
                    done[f, y, x] = _build(number, y, x, frame, labels, configs,
                                           [r.pedestal for r in runners], states, numbers)
            wanted.remove(number)
            start = i + 1
        if not wanted:
            break
        advance(chunk.frames[start:], chunk.numbers[start:])
    if wanted:
        raise ValueError(f"frames {wanted[:10]} are not in {source.describe()}")
    return [done[s] for s in sites]


def explain(frames, frame: int, y: int, x: int,
            finders: Mapping[str, xr.Dataset | FinderSpec]
            | Sequence[xr.Dataset | FinderSpec], *, dark=None,
            pedestal: Pedestal | Sequence[Pedestal] | None = None,
            labels: Sequence[str] | None = None,
            calibration: JungfrauCalibration | None = None) -> Explanation:
    """Explain the decision at pixel ``(y, x)`` of frame number ``frame``.

    Parameters as for `explain_sites`, with one site.

    Examples
    --------
    >>> from aare_lab.simulate import Beam, Detector, Simulator
    >>> sim = Simulator(Detector(frame_shape=(12, 12)), Beam(photons_per_frame=2), seed=1)
    >>> dark, (frames, _) = sim.dark(20), sim.frames(3)
    >>> e = explain(frames, 2, 5, 5, [FinderSpec("serial", n_pedestal=20),
    ...                               FinderSpec("frozen", n_pedestal=20)], dark=dark)
    >>> e.deciding_test is None, e.branch("serial") == e.branch("frozen")
    (True, True)
    """
    return explain_sites(frames, [(frame, y, x)], finders, dark=dark, pedestal=pedestal,
                         labels=labels, calibration=calibration)[0]


# aare_lab.analysis.explain(...) calls explain(...).
make_callable(__name__)
