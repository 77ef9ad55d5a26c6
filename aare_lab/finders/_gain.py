"""JUNGFRAU gain switching in the finders (docs/algorithm.md, "JUNGFRAU gain switching").

Per frame, `decode_row` splits each raw value into its 14-bit ADC value and a pixel
status: the gain stage G0, G1 or G2, or FLAGGED (`aare_lab.detector.jungfrau`'s flags: invalid
gain bits, a readout error, saturation, an uncalibrated gain). The finder's ADU pedestal
reads the ADC values of G0 pixels as it reads a frame without gain bits; `calibrate_row`
then turns every value into keV (G0: the ADU value over the G0 gain; G1, G2: the
calibration's formula; FLAGGED: 0), and `kev_thresholds_row` the thresholds. A flagged
pixel's decision is NEG_SKIP (`gated`), and only G0 pixels are pushed.

The calibration arrives as ``(pedestal, gain)``, both ``(3, ny, nx)`` in the pedestal
dtype, cast once by `aare_lab.finders.base.Finder`.

Twin: ``kernels/frozen.cu`` (``GAIN_SWITCHING``) mirrors these functions line for line.
"""

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from aare_lab.detector.arith import G0, NEG_SKIP
from aare_lab.detector.jungfrau import (
    ADC_BITS,
    ADC_MASK,
    INVALID_GAIN_BITS,
    READOUT_ERROR_VALUES,
    SATURATED_VALUES,
)

#: Pixel status of one frame: its gain stage (G0 = 0, the one pushed), or FLAGGED.
G1, G2, FLAGGED = np.uint8(1), np.uint8(2), np.uint8(3)
#: Raw values that carry no energy, as `aare_lab.detector.jungfrau` flags them (scalars for Numba).
_READOUT_ERROR_LOW, _READOUT_ERROR_HIGH = READOUT_ERROR_VALUES
_SATURATED_G2, _SATURATED_G0 = SATURATED_VALUES
#: The ADC bits of a raw value, and the largest value without gain bits (a uint16 for Numba).
ADC_LIMIT = np.uint16(ADC_MASK)


@njit(cache=True, nogil=True, error_model="numpy")
def pixel_status(x, gain, i, j):
    """The status of raw value ``x`` at pixel ``(i, j)`` given the ``(3, ny, nx)`` gains."""
    bits = x >> ADC_BITS
    if bits == INVALID_GAIN_BITS or x == _READOUT_ERROR_LOW or x == _READOUT_ERROR_HIGH \
            or x == _SATURATED_G2 or x == _SATURATED_G0:
        return FLAGGED
    g = G0 if bits == 0 else (G1 if bits == 1 else G2)
    return FLAGGED if gain[g, i, j] == 0 else g


@njit(cache=True, nogil=True, error_model="numpy")
def decode_row(raw, gain, i, adc, status):
    """Row ``i``: the ADC values and the pixel status; returns the row's flagged pixels."""
    flagged = 0
    for j in range(len(raw)):
        x = raw[j]
        adc[j] = x & ADC_LIMIT
        st = pixel_status(x, gain, i, j)
        status[j] = st
        flagged += st == FLAGGED
    return flagged


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def decode_frame(raw, gain, adc, status, row_flagged):
    """`decode_row` of every row in parallel; returns the frame's flagged pixels."""
    for row in prange(raw.shape[0]):
        i = np.int64(row)
        row_flagged[i] = decode_row(raw[i], gain, i, adc[i], status[i])
    return row_flagged.sum()


@njit(cache=True, nogil=True, error_model="numpy")
def calibrate_row(status, adc, pedestal, gain, i, v):
    """Row ``i`` of ``v`` in keV: ``v`` holds the G0 pedestal-subtracted ADU values.

    G0: ``v / gain[0]``; G1, G2: ``(D(adc) - pedestal[g]) / gain[g]``; FLAGGED: 0. One IEEE
    division (and for G1, G2 one subtraction) in the pedestal dtype.
    """
    for j in range(len(v)):
        st = status[j]
        if st == G0:
            v[j] = v[j] / gain[0, i, j]
        elif st == FLAGGED:
            v[j] = 0
        else:
            v[j] = adc[j]
            v[j] = (v[j] - pedestal[st, i, j]) / gain[st, i, j]


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def calibrate_frame(status, adc, pedestal, gain, v):
    """`calibrate_row` of every row in parallel."""
    for row in prange(v.shape[0]):
        i = np.int64(row)
        calibrate_row(status[i], adc[i], pedestal, gain, i, v[i])


@njit(cache=True, nogil=True, error_model="numpy")
def kev_thresholds_row(gain, i, thr):
    """Row ``i``'s thresholds from ADU to keV: ``thr / gain[0]`` (the G0 noise in keV)."""
    for j in range(len(thr)):
        thr[j] = thr[j] / gain[0, i, j]


@njit(cache=True, nogil=True, error_model="numpy")
def scale_row(gain, i, v):
    """Row ``i``'s G0 ADU values to keV, ``v / gain[0]`` (the serial model's pushed reads)."""
    for j in range(len(v)):
        v[j] = v[j] / gain[0, i, j]


def statuses(gs):
    """The frame's pixel status from the gain-switching tuple ``gs``, or None without one:
    with `aare_lab.detector.arith.row_of`, a row's ``status`` for the row functions."""
    return None if gs is None else gs[3]


@overload(statuses, jit_options={"cache": True, "nogil": True, "error_model": "numpy"})
def _statuses(gs):
    # Decided when the caller compiles, from the argument's type.
    if isinstance(gs, types.NoneType):
        return lambda gs: None
    return lambda gs: gs[3]


@njit(cache=True, nogil=True, error_model="numpy")
def gated(code, st):
    """A flagged pixel's decision is NEG_SKIP, whatever its window: never a centre, no push."""
    return NEG_SKIP if st == FLAGGED else code


@njit(cache=True, nogil=True, error_model="numpy")
def estimate_labels(labels, status, out):
    """The common-mode labels of the frame: G0 pixels only, every other pixel excluded."""
    ny, nx = labels.shape
    for i in range(ny):
        for j in range(nx):
            out[i, j] = labels[i, j] if status[i, j] == G0 else -1


def calibration_arrays(calibration, pedestal) -> tuple[np.ndarray, np.ndarray] | None:
    """A calibration's ``(pedestal, gain)`` cast once to the pedestal's dtype; None without.

    Raises
    ------
    ValueError
        When the calibration is not for the pedestal's frame shape.
    """
    if calibration is None:
        return None
    if calibration.frame_shape != pedestal.frame_shape:
        raise ValueError(
            f"the JUNGFRAU calibration is for {calibration.frame_shape[0]}x"
            f"{calibration.frame_shape[1]} frames but the pedestal is "
            f"{pedestal.frame_shape[0]}x{pedestal.frame_shape[1]}: give the calibration of "
            "this module and region of interest")
    dtype = pedestal.dtype
    return (np.ascontiguousarray(calibration.pedestal, dtype),
            np.ascontiguousarray(calibration.gain, dtype))
