"""Dark frames whose residual noise stands out from the others.

A frame's residual noise is the rms over its pixels of the frame minus the pedestal mean,
once the frame's median residual (its common offset, which common mode removes) is taken
off. In a good dark run every frame has about the same; a frame well above the others is
noisier than the pedestal's rms says, so it raises the false-cluster rate where it is found
and widens the rms where it is trained on.

A frame stands out when its residual noise exceeds the median of the frames' by more than
`FRAME_ROBUST_Z` robust standard deviations (1.4826 times the median absolute deviation,
which the outliers themselves do not move) and by more than `FRAME_MIN_EXCESS` of the
median (over 10⁵ pixels the frames' residuals agree to a fraction of a percent, so a
robust z alone would name differences no finder notices). At least `MIN_FRAMES` frames are
needed to tell.

In the real JUNGFRAU dark runs of PSI aare's test data (benchmarks/first_frame_noise.py)
the first frame of each acquisition stands out: 27.5 and 27.0 ADU against 23.4-23.7 ADU
for the other nine, so `FrameNoise.suggested_skip` proposes ``--skip-first 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from aare_lab.detector.pedestal import DARK_CHUNK, Pedestal

#: A frame stands out above the median by more than this many robust standard deviations...
FRAME_ROBUST_Z = 5.0
#: ...and by more than this fraction of the median.
FRAME_MIN_EXCESS = 0.02
#: The fewest frames whose median and spread can single one out.
MIN_FRAMES = 3
#: Frames that stand out are blamed on the start of the acquisition (and ``--skip-first``
#: proposed) when all of them lie within this many first frames of their acquisitions.
MAX_SUGGESTED_SKIP = 5


@dataclass(frozen=True)
class FrameNoise:
    """The residual noise of each dark frame, and the frames that stand out.

    Attributes
    ----------
    numbers
        Each frame's number.
    in_acquisition
        Each frame's place in its acquisition, from 0 (after the frames already skipped).
    offset
        Each frame's median residual (ADU): its common offset.
    residual_rms
        Each frame's residual noise (ADU, the offset taken off).
    skip_first
        Frames already left out at the start of each acquisition.
    """

    numbers: np.ndarray
    in_acquisition: np.ndarray
    offset: np.ndarray
    residual_rms: np.ndarray
    skip_first: int = 0

    @property
    def median(self) -> float:
        """The median residual noise of the frames (ADU)."""
        return float(np.median(self.residual_rms))

    @property
    def robust_sigma(self) -> float:
        """1.4826 times the median absolute deviation of the residual noise (ADU)."""
        return 1.4826 * float(np.median(np.abs(self.residual_rms - self.median)))

    @property
    def threshold(self) -> float:
        """The residual noise above which a frame stands out (ADU)."""
        return max(self.median + FRAME_ROBUST_Z * self.robust_sigma,
                   self.median * (1.0 + FRAME_MIN_EXCESS))

    @property
    def outliers(self) -> np.ndarray:
        """The indices of the frames that stand out (none with fewer than `MIN_FRAMES`)."""
        if len(self.residual_rms) < MIN_FRAMES:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.residual_rms > self.threshold)

    @property
    def suggested_skip(self) -> int | None:
        """The ``skip_first`` that would leave out every frame that stands out, when they
        all lie within the first `MAX_SUGGESTED_SKIP` frames of their acquisitions; None
        otherwise (or when none stands out)."""
        out = self.outliers
        if not len(out):
            return None
        last = int(self.in_acquisition[out].max())
        return self.skip_first + last + 1 if last < MAX_SUGGESTED_SKIP else None

    def lines(self) -> list[str]:
        """The assessment as text lines (`aare_lab.detector.dark.report.DarkReport` shows them)."""
        rms = self.residual_rms
        head = (f"residual noise per frame (ADU, frame minus pedestal mean, its offset taken "
                f"off): median {self.median:.3g}, range {rms.min():.3g}-{rms.max():.3g} "
                f"over {len(rms)} frames")
        if self.skip_first:
            head += (f", the first {self.skip_first} of each acquisition left out")
        if len(rms) < MIN_FRAMES:
            return [head + f"; fewer than {MIN_FRAMES} frames: no frame can stand out"]
        message = self.message()
        return [head, message if message is not None else
                f"no frame stands out (threshold {self.threshold:.3g} ADU)"]

    def message(self) -> str | None:
        """Name the frames that stand out, with their numbers and what to do; None when
        none does."""
        out = self.outliers
        if not len(out):
            return None
        named = ", ".join(
            f"{int(self.numbers[k])} ({self.residual_rms[k]:.3g} ADU, "
            f"{_place(int(self.in_acquisition[k]), self.skip_first)})" for k in out[:10])
        more = f" and {len(out) - 10} more" if len(out) > 10 else ""
        text = (f"{len(out)} dark frame{'s' if len(out) > 1 else ''} stand"
                f"{'' if len(out) > 1 else 's'} out by residual noise: frame {named}{more}, "
                f"against a median of {self.median:.3g} ADU (threshold {self.threshold:.3g} "
                f"ADU: median + {FRAME_ROBUST_Z:g} x {self.robust_sigma:.2g} robust sigma, "
                f"at least {100 * FRAME_MIN_EXCESS:g} % above the median)")
        skip = self.suggested_skip
        if skip is not None:
            words = ("they are", "their acquisitions", "them") if len(out) > 1 else \
                ("it is", "its acquisition", "it")
            text += (f"; {words[0]} among the first frames of {words[1]}: leave {words[2]} "
                     f"out with --skip-first {skip} (skip_first={skip} in Python)")
        return text


def _place(index: int, skipped: int) -> str:
    if index == 0:
        return ("first of its acquisition" if not skipped
                else "first kept of its acquisition")
    return f"frame {index + 1} of its acquisition" + (" after those left out" if skipped
                                                      else "")


def frame_noise(pedestal: Pedestal, source, progress: bool = False) -> FrameNoise:
    """The residual noise of each frame of ``source`` against ``pedestal``'s mean.

    Parameters
    ----------
    pedestal
        A trained pedestal, usually trained on ``source``.
    source
        The dark frames, a finite `aare_lab.sources.FrameSource` (read once more, in
        chunks of `aare_lab.detector.pedestal.DARK_CHUNK`).
    progress
        Show a progress bar.

    Raises
    ------
    ValueError
        For frames of another shape than the pedestal's.
    """
    pedestal.require_ready()
    if tuple(source.frame_shape) != pedestal.frame_shape:
        raise ValueError(f"the frames of {source.describe()} are not of the pedestal's "
                         f"shape {pedestal.frame_shape}")
    mean = np.asarray(pedestal.mean, np.float64)
    numbers, offsets, rms = [], [], []
    with tqdm(total=source.n_frames, unit="frame", desc="frame noise",
              disable=not progress) as bar:
        for chunk in source.chunks(DARK_CHUNK):
            numbers.append(chunk.numbers)
            for frame in chunk.frames:
                residual = frame - mean
                offset = float(np.median(residual))
                offsets.append(offset)
                rms.append(float(np.sqrt(np.mean((residual - offset) ** 2))))
            bar.update(len(chunk.numbers))
    n = len(offsets)
    starts = source.acquisition_starts()
    position = np.arange(n)
    in_acquisition = position - starts[np.searchsorted(starts, position, side="right") - 1]
    return FrameNoise(np.concatenate(numbers), in_acquisition, np.asarray(offsets),
                      np.asarray(rms), source.skip_first)


__all__ = ["FRAME_MIN_EXCESS", "FRAME_ROBUST_Z", "FrameNoise", "frame_noise"]
