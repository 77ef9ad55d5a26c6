"""Common-mode regions: which pixels share one per-frame offset (docs/algorithm.md).

A `CommonMode` names a layout of regions: a preset of a detector (``"moench03"``,
``"jungfrau"``, ``"jungfrau-rows"``) or a user's label map. For a frame shape it gives the label
of every pixel, ``0 .. n_regions - 1``, or -1 for a pixel that neither enters an estimate nor is
corrected. The finders estimate and subtract the offsets (`aare_lab.finders`); this module holds
only the layouts and the fixed-point scale that makes the estimate exact.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from aare_lab.sources.files import input_record

#: Values enter a region's sum as integers ``rha(v * 2**FRACTION_BITS)``: multiplying by a
#: power of two is exact, and integer sums do not depend on their order (CPU and GPU agree).
FRACTION_BITS = 16
#: The most regions a layout may have (the GPU keeps one accumulator per region per block).
MAX_REGIONS = 4096
#: The layouts known by name; ``"labels"`` is a user's label map.
PRESETS = ("moench03", "jungfrau", "jungfrau-rows")
#: MÖNCH03: two halves of 200 rows, 16 supercolumns of 25 columns each (slsDetectorCalibration's
#: ``moench03CommonMode``: ``ix / 25 + (iy / 200) * 16``).
MOENCH03_SHAPE = (400, 400)
MOENCH03_HALF_ROWS = 200
MOENCH03_SUPERCOLUMN = 25
#: JUNGFRAU: readout chips of 256 x 256 pixels (a 512 x 1024 module has 2 x 4 of them);
#: ``"jungfrau-rows"`` gives each row of each chip its own region, because a real module's
#: first frame of an acquisition shifts chip rows independently (benchmarks/README.md).
JUNGFRAU_CHIP = 256


class CommonMode:
    """A layout of common-mode regions.

    Parameters
    ----------
    layout
        ``"moench03"``, ``"jungfrau"`` (chips), ``"jungfrau-rows"`` (each row of each chip),
        or a label map: an integer array of the frame's shape with labels ``0 .. R - 1``
        for the regions and -1 for excluded pixels.

    Attributes
    ----------
    inputs
        The file of a label map read by `load_label_map`, by role: ``common_mode``, as
        `aare_lab.sources.files.input_record` gives it; empty for a preset or a map made in
        memory. Results found with it record it (their ``inputs`` attribute); two layouts
        with the same labels are equal wherever they came from.

    Raises
    ------
    ValueError
        For an unknown name or an invalid label map.

    Examples
    --------
    >>> CommonMode("jungfrau").n_regions((512, 1024))
    8
    >>> CommonMode("jungfrau-rows").n_regions((512, 1024))
    2048
    >>> CommonMode(np.array([[0, 0, -1], [1, 1, 1]])).name
    'labels'
    """

    def __init__(self, layout: str | np.ndarray):
        if isinstance(layout, str):
            if layout not in PRESETS:
                raise ValueError(f"common_mode must be None, 'none', "
                                 f"{', '.join(repr(p) for p in PRESETS)} or a label map, "
                                 f"got {layout!r}")
            self.name, self._labels = layout, None
        else:
            self.name, self._labels = "labels", _checked_label_map(layout)
        self.inputs: dict[str, dict] = {}

    @property
    def label_map(self) -> np.ndarray | None:
        """The user's label map (read-only int32), None for a preset."""
        return self._labels

    def labels(self, frame_shape: tuple[int, int]) -> np.ndarray:
        """The label of every pixel of a frame, int32, -1 for excluded pixels.

        Raises
        ------
        ValueError
            When the layout does not fit ``frame_shape``.
        """
        ny, nx = frame_shape
        if self.name == "labels":
            if self._labels.shape != (ny, nx):
                raise ValueError(f"the common-mode label map is {self._labels.shape[0]}x"
                                 f"{self._labels.shape[1]} but the frames are {ny}x{nx}")
            return self._labels
        i, j = np.mgrid[:ny, :nx]
        if self.name == "moench03":
            if (ny, nx) != MOENCH03_SHAPE:
                raise ValueError(f"common_mode='moench03' needs 400x400 frames, got {ny}x{nx}; "
                                 "give a label map for other detectors")
            labels = (i // MOENCH03_HALF_ROWS) * (nx // MOENCH03_SUPERCOLUMN) \
                + j // MOENCH03_SUPERCOLUMN
        else:
            if ny % JUNGFRAU_CHIP or nx % JUNGFRAU_CHIP:
                raise ValueError(f"common_mode={self.name!r} needs frames made of 256x256 chips, "
                                 f"got {ny}x{nx}; give a label map for a cropped or other "
                                 "detector")
            rows = i if self.name == "jungfrau-rows" else i // JUNGFRAU_CHIP
            labels = rows * (nx // JUNGFRAU_CHIP) + j // JUNGFRAU_CHIP
        if labels.max() >= MAX_REGIONS:
            raise ValueError(f"{ny}x{nx} frames have more than {MAX_REGIONS} "
                             f"{self.name} regions")
        return labels.astype(np.int32)

    def n_regions(self, frame_shape: tuple[int, int]) -> int:
        """The number of regions ``R`` (labels ``0 .. R - 1``) for ``frame_shape``."""
        return region_count(self.labels(frame_shape))

    def __eq__(self, other) -> bool:
        if not isinstance(other, CommonMode):
            return NotImplemented
        return self.name == other.name and (
            self._labels is None or np.array_equal(self._labels, other._labels))

    def __hash__(self) -> int:
        digest = b"" if self._labels is None else hashlib.sha256(self._labels).digest()
        return hash((self.name, self._labels is None or self._labels.shape, digest))

    def __repr__(self) -> str:
        if self._labels is None:
            return f"CommonMode({self.name!r})"
        return f"CommonMode(<label map {self._labels.shape[0]}x{self._labels.shape[1]}>)"


def region_count(labels: np.ndarray) -> int:
    """The number of regions ``R`` of a label map (labels ``0 .. R - 1``, -1 excluded)."""
    return int(labels.max()) + 1


def _checked_label_map(labels) -> np.ndarray:
    array = np.asarray(labels)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"a common-mode label map must be a non-empty 2-D array of the frame's "
                         f"shape, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"a common-mode label map must hold integers (-1: excluded), got "
                         f"{array.dtype}")
    low, high = int(array.min()), int(array.max())
    if low < -1 or high < 0 or high >= MAX_REGIONS:
        raise ValueError(f"common-mode labels must be -1 (excluded) or 0..{MAX_REGIONS - 1}, "
                         f"with at least one region; got {low}..{high}")
    out = np.ascontiguousarray(array, np.int32)
    if out is array:
        out = out.copy()
    out.setflags(write=False)
    return out


def as_common_mode(value) -> CommonMode | None:
    """``common_mode=`` as given by a user: None/``"none"``, a preset, a label map, a
    `CommonMode`."""
    if value is None or (isinstance(value, str) and value == "none"):
        return None
    if isinstance(value, CommonMode):
        return value
    return CommonMode(value)


def load_label_map(path: str | os.PathLike) -> CommonMode:
    """A `CommonMode` from a ``.npy`` file holding an integer label map; it remembers the
    file (`CommonMode.inputs`).

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a file that is not a ``.npy`` label map.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no common-mode label map at {path} (give none, moench03, "
                                "jungfrau, jungfrau-rows or a .npy file of integer labels)")
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ValueError(f"{path} is not a .npy label map ({err}); save one with numpy.save "
                         "(integers, -1 for excluded pixels)") from None
    try:
        common_mode = CommonMode(array)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    common_mode.inputs = {"common_mode": input_record(path)}
    return common_mode


def region_attr(common_mode: CommonMode | None) -> str:
    """The result attribute ``common_mode``: ``"none"``, a preset, or ``"labels"``."""
    return "none" if common_mode is None else common_mode.name


__all__ = ["FRACTION_BITS", "MAX_REGIONS", "PRESETS", "CommonMode", "as_common_mode",
           "load_label_map", "region_attr", "region_count"]
