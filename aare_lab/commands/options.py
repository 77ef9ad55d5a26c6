"""Command-line options shared by the subcommands that run finders."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aare_lab import checks
from aare_lab.detector.common_mode import PRESETS, load_label_map
from aare_lab.detector.jungfrau import JungfrauCalibration
from aare_lab.detector.pedestal import NOISE_MODES, PEDESTAL_DTYPES, Pedestal
from aare_lab.finders import FINDERS, get_finder
from aare_lab.finders.frozen import max_threads
from aare_lab.model.params import WINDOW_DTYPES, parse_cluster_size
from aare_lab.model.spec import FinderSpec

#: The defaults of the pedestal options, which a ``--pedestal FILE`` replaces by its own.
PEDESTAL_DEFAULTS = {"n_pedestal": 1000, "pedestal_dtype": "float64", "noise": "running"}


class UsageError(ValueError):
    """A bad option value or combination of options that a command finds after parsing;
    ``aare-lab`` exits 2 on it, as argparse does on its own usage errors."""


@contextmanager
def usage_of(options: str) -> Iterator[None]:
    """Within the block, a `ValueError` is the fault of ``options`` (``"--energy-range,
    --bin-width"``): it is raised again as a `UsageError` naming them."""
    try:
        yield
    except ValueError as err:
        raise UsageError(f"{options}: {err}") from None


def cluster_size(text: str) -> tuple[int, int]:
    """argparse type for ``NYxNX``."""
    try:
        return parse_cluster_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def frame_shape(text: str) -> tuple[int, int]:
    """argparse type for a frame shape ``NYxNX``, both sides >= 1."""
    try:
        ny, nx = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a frame shape NYxNX, e.g. "
                                         "512x1024") from None
    if ny < 1 or nx < 1:
        raise argparse.ArgumentTypeError(f"frame shape {text}: both sides must be >= 1")
    return ny, nx


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number")
    return value


def positive_int(text: str) -> int:
    """argparse type for an integer >= 1 (argparse names the option in its message)."""
    try:
        return checks.positive_int("the value", _integer(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def thread_count(text: str) -> int:
    """argparse type for ``--threads``: an integer from 1 to the threads Numba has here."""
    value = positive_int(text)
    if value > max_threads():
        raise argparse.ArgumentTypeError(
            f"{text} threads: this machine runs at most {max_threads()} (Numba's "
            "NUMBA_NUM_THREADS); give fewer or leave --threads out")
    return value


def non_negative_int(text: str) -> int:
    """argparse type for an integer >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be an integer >= 0")
    return value


def positive_float(text: str) -> float:
    """argparse type for a finite number > 0."""
    value = _finite(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def non_negative_float(text: str) -> float:
    """argparse type for a finite number >= 0."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return value


def common_mode(text: str):
    """argparse type for ``--common-mode``: a preset name or a ``.npy`` label map file."""
    if text == "none" or text in PRESETS:
        return text
    try:
        return load_label_map(text)
    except (FileNotFoundError, ValueError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_finder_options(parser: argparse.ArgumentParser) -> None:
    """Options of the finder and its pedestal."""
    group = parser.add_argument_group("finder")
    group.add_argument("--finder", choices=tuple(FINDERS), default="frozen",
                       help="serial, frozen (cuda where a GPU is available); default frozen")
    group.add_argument("--threads", type=thread_count,
                       help=f"threads of the frozen finder, 1..{max_threads()} here")
    group.add_argument("--n-sigma", type=positive_float, default=5.0,
                       help="threshold in units of the pixel noise (default 5)")
    group.add_argument("--cluster-size", type=cluster_size, default=(3, 3), metavar="NYxNX",
                       help="odd window size, rows x columns, 3..11 (default 3x3)")
    group.add_argument("--n-pedestal", type=positive_int,
                       default=PEDESTAL_DEFAULTS["n_pedestal"], metavar="N",
                       help="pedestal window: dark frames to train on (default 1000)")
    group.add_argument("--pedestal-dtype", choices=PEDESTAL_DTYPES,
                       default=PEDESTAL_DEFAULTS["pedestal_dtype"],
                       help="value type of the pedestal state after training: float64 "
                            "(default) or float32, centred on the dark level to keep "
                            "precision")
    group.add_argument("--noise", choices=NOISE_MODES, default=PEDESTAL_DEFAULTS["noise"],
                       help="'fixed' freezes the rms when training ends (default running)")
    group.add_argument("--common-mode", type=common_mode, default=None,
                       metavar="none|moench03|jungfrau|jungfrau-rows|FILE",
                       help="subtract a per-frame offset per region: MÖNCH03 supercolumns, "
                            "JUNGFRAU chips, each row of each JUNGFRAU chip, or a .npy label "
                            "map (-1: excluded); default none")
    group.add_argument("--cap", "--max-clusters-per-frame", type=positive_int, default=None,
                       metavar="N", dest="cap",
                       help="keep at most N clusters per frame, max_clusters_per_frame in "
                            "Python (default: unbounded)")
    group.add_argument("--on-truncation", choices=("warn", "error"), default="warn",
                       help="what a frame over the cap does (error: exit code 3)")
    group.add_argument("--window-dtype", choices=WINDOW_DTYPES,
                       metavar="{" + ",".join(WINDOW_DTYPES) + "}",
                       help="stored window values: int32 rounded half away from zero (the "
                            "default); int16 rounded and saturated to -32768..32767, half "
                            "int32's bytes (taps at those limits are counted per frame, "
                            "n_window_clipped, and warned about); float32 or float64 as "
                            "read (float32 is the default with --calibration)")


def window_dtype(args: argparse.Namespace) -> str:
    """``--window-dtype``, or its default: int32, float32 with a ``--calibration``."""
    if args.window_dtype is None:
        return "int32" if getattr(args, "calibration", None) is None else "float32"
    return args.window_dtype


def finder_spec(args: argparse.Namespace) -> FinderSpec:
    """The `FinderSpec` of the parsed `add_finder_options`.

    Raises
    ------
    UsageError
        For ``--threads`` with another finder than frozen, and for values that do not go
        together (``--n-sigma`` beyond the ``--pedestal-dtype``'s range).
    GpuUnavailable
        For ``--finder cuda`` without a usable GPU, before any frame is read.
    """
    if args.threads is not None and args.finder != "frozen":
        raise UsageError(f"--threads applies to the frozen finder only, not --finder "
                         f"{args.finder}")
    try:
        spec = FinderSpec(args.finder, args.n_sigma, args.cluster_size, args.pedestal_dtype,
                          args.noise, args.cap, window_dtype(args), n_pedestal=args.n_pedestal,
                          common_mode=args.common_mode)
    except ValueError as err:
        # Each value passed its own check: what is left is a combination of them.
        raise UsageError(str(err)) from None
    get_finder(spec.finder).require_available()
    return spec


def finder_options(args: argparse.Namespace) -> dict:
    """The options of `add_finder_options` that `aare_lab.finders.make_finder` takes."""
    return {} if args.threads is None else {"threads": args.threads}


def add_skip_first_option(parser: argparse.ArgumentParser) -> None:
    """``--skip-first N``: leave out the first frames of each acquisition
    (`aare_lab.sources.without_first`), from dark training and from finding."""
    parser.add_argument("--skip-first", type=non_negative_int, default=0, metavar="N",
                        help="leave out the first N frames of each acquisition (a file, or "
                             "the stream's acquisitions) from the dark frames and the data "
                             "frames, counted in the result (default 0: none); `aare-lab "
                             "dark` names frames whose noise stands out")


def add_calibration_option(parser: argparse.ArgumentParser) -> None:
    """``--calibration FILE``: raw JUNGFRAU frames, found in keV (`calibrated`)."""
    parser.add_argument("--calibration", type=Path, metavar="FILE",
                        help="a JUNGFRAU calibration (.nc, JungfrauCalibration.save): the "
                             "frames are raw with gain bits, the dark frames all G0, and "
                             "windows (float32 unless --window-dtype float64) and energies are "
                             "in keV")


def calibrated(spec: FinderSpec, path) -> FinderSpec:
    """``spec`` with the JUNGFRAU calibration in ``path`` (in keV; the windows float32
    unless ``--window-dtype`` says otherwise, `window_dtype`), or ``spec`` itself when
    ``path`` is None.

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing file or one that is not a JUNGFRAU calibration, naming it.
    UsageError
        For an integer ``--window-dtype``.
    """
    if path is None:
        return spec
    calibration = JungfrauCalibration.load(path)
    with usage_of(f"--window-dtype {spec.window_dtype} with --calibration"):
        return spec.replace(calibration=calibration)


def load_pedestal(path, spec: FinderSpec,
                  calibration_file=None) -> tuple[Pedestal, FinderSpec]:
    """Load a ``--pedestal FILE`` and the spec that fits it.

    A pedestal file brings its own N, dtype and noise mode; ``--n-pedestal``,
    ``--pedestal-dtype`` or ``--noise`` set to a value that is neither its default nor the
    file's is refused rather than silently replaced. With a calibration in ``spec`` (from
    ``calibration_file``, `calibrated`) the pedestal must be for its frame shape.

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing file, one that is not a pedestal, an untrained pedestal, options
        that contradict it, or a pedestal for other frames than the calibration.
    """
    pedestal = Pedestal.load(path)
    if not pedestal.ready:
        raise ValueError(f"the pedestal in {path} is not trained ({pedestal.n_frames} of "
                         f"{pedestal.n_pedestal} dark frames); save one after training")
    own = {"n_pedestal": pedestal.n_pedestal, "pedestal_dtype": pedestal.dtype.name,
           "noise": pedestal.noise}
    for name, value in own.items():
        given = getattr(spec, name)
        if given not in (PEDESTAL_DEFAULTS[name], value):
            raise ValueError(f"--{name.replace('_', '-')} {given} contradicts the pedestal in "
                             f"{path} ({value}); leave the option out, the file brings its own")
    if spec.calibration is not None and pedestal.frame_shape != spec.calibration.frame_shape:
        (py, px), (cy, cx) = pedestal.frame_shape, spec.calibration.frame_shape
        raise ValueError(f"the pedestal in {path} is for {py}x{px} frames but the "
                         f"calibration{'' if calibration_file is None else ' in ' + str(calibration_file)} "
                         f"for {cy}x{cx}: give the G0 "
                         "pedestal of this module (--save-pedestal of a calibrated run)")
    return pedestal, spec.replace(**own)
