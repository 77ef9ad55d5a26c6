"""Builders for hand-made test cases with exactly known pedestals."""

import numpy as np

from aare_lab.detector.pedestal import Pedestal

#: Dark frames alternating 100/102 give mean 101 and rms 1 exactly, in both dtypes.
MEAN = 101
N_DARK = 4


def unit_pedestal(shape, dtype="float64", noise="running", zero_rms=None) -> Pedestal:
    """A trained pedestal with mean 101 and rms 1 everywhere (rms 0 where ``zero_rms``)."""
    dark = np.empty((N_DARK, *shape), np.uint16)
    dark[0::2] = MEAN - 1
    dark[1::2] = MEAN + 1
    if zero_rms is not None:
        dark[:, zero_rms] = MEAN
    ped = Pedestal(shape, N_DARK, dtype, noise)
    ped.push_dark(dark)
    return ped


def frame_from_values(v) -> np.ndarray:
    """A raw frame whose pedestal-subtracted values on `unit_pedestal` are ``v``."""
    return (MEAN + np.asarray(v)).astype(np.uint16)[np.newaxis]
