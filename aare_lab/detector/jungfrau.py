"""JUNGFRAU raw frames: the gain bits, and the per-gain calibration that turns them into keV.

Raw format
----------
A JUNGFRAU pixel is a uint16: bits 15-14 are the gain stage the pixel ended the exposure
in (``00`` G0, ``01`` G1, ``11`` G2; ``10`` does not come from a working module), bits 13-0
the 14-bit ADC value.

Calibration convention
----------------------
``energy_keV = (adc - pedestal[g]) / gain[g]`` with the pedestal of gain stage ``g`` in ADU
and its gain in ADU/keV, **signed**: in G0 the ADC rises with the charge (about +40
ADU/keV), in G1 and G2 it falls from a high pedestal (about -1.5 and -0.1 ADU/keV), which
is why G2 saturates at ADC 0. This is the formula of ``aare.apply_calibration``. PSI's gain
map files (``gainMaps_M*.bin``: G0, G1, G2 in ADU/keV) store the magnitudes; multiply G1
and G2 by -1, as PSI's Jungfraujoch does, before building a `JungfrauCalibration`.

Flags
-----
A pixel whose value cannot be turned into an energy gets ``NaN`` keV and a flag, so that it
never becomes (part of) a photon by accident; `FLAG_MEANINGS` in order of precedence:

- ``invalid_gain``: gain bits ``10``;
- ``readout_error``: ``0x4000`` (G1 at ADC 0: G1 reaches its floor only when the switch to
  G2 failed) and ``0xFFFF`` (G2 at full scale, above any G2 pedestal), as Jungfraujoch;
- ``saturated``: ``0xC000`` (G2 at ADC 0: beyond the lowest gain's range, the charge is
  only a lower bound) and G0 at ADC ``0x3FFF`` (G0's ADC at full scale, which dynamic gain
  switching never reaches but a fixed-G0 mode does);
- ``uncalibrated``: the calibration's gain for the pixel's stage is 0 (how calibration
  files mark pixels they could not calibrate).

Raw frames without a calibration
--------------------------------
A value above ``ADC_MASK`` has gain bits set. Without a calibration it is taken as an ADC
count, so a pixel that switched gain becomes a cluster of a huge energy: every run without
one counts such pixels (`gain_bits_per_frame`, `GainBitsTally`) and warns
(`GainBitsWarning`), naming the remedy. A warning, not an error: aare_lab takes 16-bit
frames too (docs/algorithm.md, int16 windows), whose values may lawfully reach 65535, while
14-bit frames (MÖNCH, a JUNGFRAU G0 ADC value) never pass ``ADC_MASK``, so they never warn.
"""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from aare_lab._version import __version__
from aare_lab.flags import cf_flags
from aare_lab.frames import as_frame_stack
from aare_lab.sources.files import input_record
from aare_lab.storage.netcdf import read_netcdf, write_netcdf

from ._gain_bit_loops import count_above

#: The gain stages, and ``INVALID_GAIN``, the stage `decode` gives gain bits ``10``.
GAIN_STAGES = ("G0", "G1", "G2")
INVALID_GAIN = 3
ADC_BITS = 14
ADC_MASK = (1 << ADC_BITS) - 1
#: The gain bits of each stage, as they sit in a raw value.
GAIN_BITS = np.array([0b00, 0b01, 0b11], np.uint16) << ADC_BITS
_STAGE_OF_BITS = np.array([0, 1, INVALID_GAIN, 2], np.uint8)

FLAG_MEANINGS = ("valid", "invalid_gain", "readout_error", "saturated", "uncalibrated")
VALID, INVALID_GAIN_FLAG, READOUT_ERROR, SATURATED, UNCALIBRATED = range(len(FLAG_MEANINGS))
#: The raw values that carry no energy (the finders flag them too, `aare_lab.finders._gain`):
#: readout errors, and saturation (G2 at zero, G0 at full scale); and the gain bits no
#: stage has.
READOUT_ERROR_VALUES = (0x4000, 0xFFFF)
SATURATED_VALUES = (0xC000, ADC_MASK)
INVALID_GAIN_BITS = 0b10

ENERGY_DTYPES = ("float64", "float32")
#: The attribute that marks a calibration file, and the version of its layout.
FILE_MARK, FILE_VERSION = "aare_lab_jungfrau_calibration", 1
_FILE_HINT = "calibration files are written by JungfrauCalibration.save"


class GainBitsWarning(UserWarning):
    """Frames without a calibration hold values above the 14-bit ADC range: raw JUNGFRAU
    pixels that switched gain, taken as ADC counts."""


def gain_bits_per_frame(frames: np.ndarray) -> np.ndarray:
    """Per frame of a stack, the pixels whose gain bits are not G0's 00 (values above
    ``ADC_MASK``).

    The finders count them in their own loops, from the values they read anyway (the
    cuda finder in its kernel, ``kernels/frozen.cu``'s ``n_gain_bits``; the CPU finders row
    by row, `aare_lab.detector._gain_bit_loops`).

    Parameters
    ----------
    frames
        ``(n, ny, nx)`` uint16 counts.

    Returns
    -------
    numpy.ndarray
        int64 counts, one per frame.

    Examples
    --------
    >>> stack = np.zeros((3, 2, 2), np.uint16)
    >>> stack[1, 0, 0], stack[1, 1, 1], stack[2, 0, 1] = 0x4123, 0xC000, ADC_MASK
    >>> gain_bits_per_frame(stack).tolist()
    [0, 2, 0]
    """
    counts = np.zeros(len(frames), np.int64)
    count_above(frames, np.uint16(ADC_MASK), counts)
    return counts


class GainBitsTally:
    """Pixels and frames with gain bits counted chunk by chunk, reported once per run.

    Examples
    --------
    >>> tally = GainBitsTally()
    >>> tally.add(np.array([0, 3, 1]))
    >>> tally.counts()
    (4, 2, 3)
    >>> tally.take("frames.npy").startswith("4 pixels in 2 of 3 frames of frames.npy")
    True
    >>> tally.counts()
    (0, 0, 0)
    """

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Forget what was counted."""
        self._totals = (0, 0, 0)

    def add(self, per_frame: np.ndarray) -> None:
        """Count one chunk, given `gain_bits_per_frame` of it."""
        pixels, hit, frames = self._totals
        self._totals = (pixels + int(per_frame.sum()), hit + int((per_frame > 0).sum()),
                        frames + len(per_frame))

    def counts(self) -> tuple[int, int, int]:
        """``(pixels, frames with any, frames counted)`` so far."""
        return self._totals

    def take(self, what: str) -> str | None:
        """The warning for what was counted (None if no pixel had gain bits), and reset.

        Parameters
        ----------
        what
            How the message names the frames: a file, or ``"the frames"``.
        """
        pixels, hit, n_frames = self.counts()
        self.reset()
        if not pixels:
            return None
        return (f"{pixels:,} pixels in {hit:,} of {n_frames:,} frames of {what} read above "
                f"{ADC_MASK}, the 14-bit ADC range: {GAIN_BITS_REMEDY}")


#: What a `GainBitsWarning` says after the counts: why it matters and what to do.
GAIN_BITS_REMEDY = (
    "in raw JUNGFRAU frames, pixels whose gain bits say they switched to G1 or G2, which "
    "without a calibration count as ADC values of a huge energy. Give the module's "
    "calibration: --calibration FILE (aare-lab find, live), "
    "calibration=aare_lab.JungfrauCalibration.load(FILE) in Python (with "
    "window_dtype='float32'). Frames of a 16-bit detector may ignore this.")


def decode(raw) -> tuple[np.ndarray, np.ndarray]:
    """Split raw JUNGFRAU values into the gain stage and the ADC value.

    Parameters
    ----------
    raw
        uint16 raw values of any shape.

    Returns
    -------
    stage : numpy.ndarray
        uint8: 0, 1, 2 for G0, G1, G2 and `INVALID_GAIN` for gain bits ``10``.
    adc : numpy.ndarray
        uint16: the low 14 bits.

    Examples
    --------
    >>> stage, adc = decode(np.array([0x0123, 0x4123, 0x8123, 0xC123], np.uint16))
    >>> stage.tolist(), adc.tolist()
    ([0, 1, 3, 2], [291, 291, 291, 291])
    """
    raw = np.asarray(raw)
    if raw.dtype != np.uint16:
        raise TypeError(f"raw JUNGFRAU values must be uint16, got dtype {raw.dtype}")
    return _STAGE_OF_BITS[raw >> ADC_BITS], raw & np.uint16(ADC_MASK)


def _flags(raw: np.ndarray, stage: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """The flag of every raw value (`FLAG_MEANINGS`), given the gain of its stage."""
    flags = np.full(raw.shape, VALID, np.uint8)
    flags[gain == 0] = UNCALIBRATED
    flags[np.isin(raw, SATURATED_VALUES)] = SATURATED
    flags[np.isin(raw, READOUT_ERROR_VALUES)] = READOUT_ERROR
    flags[stage == INVALID_GAIN] = INVALID_GAIN_FLAG
    return flags


def flag_attrs() -> dict:
    """The CF attributes of a JUNGFRAU pixel flag variable."""
    return cf_flags(range(len(FLAG_MEANINGS)), FLAG_MEANINGS, "JUNGFRAU pixel status")


def _per_gain_array(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"JungfrauCalibration {name} must be numbers, got dtype {arr.dtype}")
    if arr.ndim != 3 or arr.shape[0] != len(GAIN_STAGES) or 0 in arr.shape:
        raise ValueError(f"JungfrauCalibration {name} must have shape (3, ny, nx): one "
                         f"(ny, nx) map per gain stage G0, G1, G2; got shape {arr.shape}")
    arr = np.array(arr, np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"JungfrauCalibration {name} has {np.count_nonzero(~np.isfinite(arr))}"
                         " values that are NaN or infinite; mark uncalibrated pixels with "
                         "gain 0 instead")
    arr.setflags(write=False)
    return arr


class JungfrauCalibration:
    """Per-gain pedestals and gains of a JUNGFRAU module, and the conversion to keV.

    Parameters
    ----------
    pedestal
        ``(3, ny, nx)``: the pedestal of G0, G1 and G2 per pixel, in ADU (0..16383).
    gain
        ``(3, ny, nx)``: the gain of G0, G1 and G2 per pixel, in ADU/keV, signed (see the
        module docstring): G0 >= 0, G1 and G2 <= 0; 0 marks an uncalibrated pixel.

    Attributes
    ----------
    inputs
        The file it came from, by role: ``calibration`` once read by `load`, as
        `aare_lab.sources.files.input_record` gives it; empty for one made in memory.
        Results found with it record it (their ``inputs`` attribute).

    Raises
    ------
    ValueError
        For other shapes, non-finite values, pedestals outside the 14-bit range or gains
        of the wrong sign.

    Examples
    --------
    >>> ped = np.stack([np.full((2, 3), v) for v in (3000.0, 13500.0, 14200.0)])
    >>> gain = np.stack([np.full((2, 3), v) for v in (40.0, -1.5, -0.1)])
    >>> cal = JungfrauCalibration(pedestal=ped, gain=gain)
    >>> raw = np.full((2, 3), 3000 + 400, np.uint16)        # G0, 10 keV above the pedestal
    >>> raw[0, 0] = 0x4000 | (13500 - 300)                  # G1, 200 keV
    >>> raw[0, 1] = 0xC000                                  # G2 at ADC 0: saturated
    >>> energy, flags = cal.convert(raw)
    >>> energy[0].tolist(), flags[0].tolist()
    ([200.0, nan, 10.0], [0, 3, 0])
    """

    def __init__(self, pedestal, gain):
        self._pedestal = _per_gain_array("pedestal", pedestal)
        self._gain = _per_gain_array("gain", gain)
        if self._pedestal.shape != self._gain.shape:
            raise ValueError(f"JungfrauCalibration pedestal and gain shapes differ: "
                             f"{self._pedestal.shape} and {self._gain.shape}")
        outside = np.count_nonzero((self._pedestal < 0) | (self._pedestal > ADC_MASK))
        if outside:
            raise ValueError(f"JungfrauCalibration pedestal has {outside} values outside the "
                             f"14-bit ADC range 0..{ADC_MASK} (ADU)")
        for stage, wrong in ((0, self._gain[0] < 0), (1, self._gain[1] > 0),
                             (2, self._gain[2] > 0)):
            if wrong.any():
                sign = "negative" if stage == 0 else "positive"
                raise ValueError(
                    f"JungfrauCalibration gain of {GAIN_STAGES[stage]} is {sign} in "
                    f"{np.count_nonzero(wrong)} pixels; gains are signed: G0 > 0, G1 and G2 "
                    "< 0 (their ADC falls with charge). PSI gain map files store magnitudes: "
                    "pass gain * [[[1]], [[-1]], [[-1]]]")
        self.inputs: dict[str, dict] = {}

    @property
    def pedestal(self) -> np.ndarray:
        """Read-only ``(3, ny, nx)`` pedestals in ADU (float64)."""
        return self._pedestal

    @property
    def gain(self) -> np.ndarray:
        """Read-only ``(3, ny, nx)`` gains in ADU/keV (float64)."""
        return self._gain

    @property
    def frame_shape(self) -> tuple[int, int]:
        """``(ny, nx)`` of the frames this calibration is for."""
        return self._pedestal.shape[1], self._pedestal.shape[2]

    def __repr__(self) -> str:
        ny, nx = self.frame_shape
        return f"<JungfrauCalibration {ny}x{nx}>"

    decode = staticmethod(decode)

    # ------------------------------------------------------------- conversion
    def _check_raw(self, raw) -> np.ndarray:
        stack = as_frame_stack(raw, what="raw JUNGFRAU frames")
        if stack.shape[1:] != self.frame_shape:
            raise ValueError(
                f"raw JUNGFRAU frames have shape {stack.shape[1]}x{stack.shape[2]} (ny x nx) "
                f"but the calibration is for {self.frame_shape[0]}x{self.frame_shape[1]}")
        return stack

    def _maps(self, pedestal_g0, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        if dtype not in ENERGY_DTYPES:
            raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        pedestal = self._pedestal.astype(dtype)
        if pedestal_g0 is not None:
            g0 = np.asarray(pedestal_g0)
            if g0.shape != self.frame_shape or g0.dtype.kind not in "iuf" \
                    or not np.isfinite(g0).all():
                raise ValueError(f"pedestal_g0 must be a finite (ny, nx) = {self.frame_shape} "
                                 f"map in ADU, got dtype {g0.dtype} and shape {g0.shape}")
            pedestal[0] = g0
        return pedestal, self._gain.astype(dtype)

    def convert(self, raw, pedestal_g0=None,
                dtype: str = "float64") -> tuple[np.ndarray, np.ndarray]:
        """Raw frames to energies in keV and pixel flags, as NumPy arrays.

        ``(adc - pedestal[g]) / gain[g]`` per pixel, in ``dtype`` arithmetic (the
        calibration is rounded to ``dtype`` first), with ``g`` the pixel's gain stage.

        Parameters
        ----------
        raw
            uint16 raw JUNGFRAU values: one ``(ny, nx)`` frame or a stack ``(n, ny, nx)``.
        pedestal_g0
            A ``(ny, nx)`` G0 pedestal in ADU that replaces the calibration's (G0 drifts and
            is tracked from dark frames; G1 and G2 always come from the calibration).
        dtype
            ``"float64"`` or ``"float32"``.

        Returns
        -------
        energy : numpy.ndarray
            keV, the shape of ``raw``; NaN where a pixel is flagged.
        flags : numpy.ndarray
            uint8 codes of `FLAG_MEANINGS`, the shape of ``raw``.

        Raises
        ------
        TypeError
            For raw values that are not uint16.
        ValueError
            For frames of another shape, or a bad ``pedestal_g0`` or ``dtype``.
        """
        return self._convert(raw, pedestal_g0, dtype)[:2]

    def _convert(self, raw, pedestal_g0, dtype: str) -> tuple[np.ndarray, ...]:
        """`convert`'s energies and flags, and the gain stages it decoded on the way."""
        single = np.ndim(raw) == 2
        stack = self._check_raw(raw)
        pedestal, gain = self._maps(pedestal_g0, dtype)
        stage, adc = decode(stack)
        index = np.minimum(stage, len(GAIN_STAGES) - 1)
        ny, nx = self.frame_shape
        rows, cols = np.arange(ny)[:, None], np.arange(nx)[None, :]
        pixel_gain = gain[index, rows, cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            energy = (adc.astype(dtype) - pedestal[index, rows, cols]) / pixel_gain
        flags = _flags(stack, stage, pixel_gain)
        energy[flags != VALID] = np.nan
        return (energy[0], flags[0], stage[0]) if single else (energy, flags, stage)

    def to_energy(self, raw, pedestal_g0=None, dtype: str = "float64") -> xr.Dataset:
        """Raw frames to a Dataset of energies (keV), flags and gain stages.

        Parameters
        ----------
        raw, pedestal_g0, dtype
            As for `convert`.

        Returns
        -------
        xarray.Dataset
            ``energy`` (keV, NaN where flagged), ``flag`` (CF flags, `FLAG_MEANINGS`) and
            ``gain_stage`` (CF flags G0 G1 G2 invalid), over ``(frame, y, x)`` for a stack
            or ``(y, x)`` for one frame.
        """
        energy, flags, stage = self._convert(raw, pedestal_g0, dtype)
        dims = ("y", "x") if energy.ndim == 2 else ("frame", "y", "x")
        return xr.Dataset(
            {"energy": (dims, energy, {"long_name": "deposited energy", "units": "keV"}),
             "flag": (dims, flags, flag_attrs()),
             "gain_stage": (dims, stage, cf_flags(range(4), [*GAIN_STAGES, "invalid"],
                                                  "gain stage of the raw value"))},
            attrs={"energy_formula": "(adc - pedestal[g]) / gain[g]",
                   "aare_lab_version": __version__})

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike) -> None:
        """Write the calibration as netCDF (CF attributes, units); `load` reads it back.

        The file appears complete or not at all (`aare_lab.storage.netcdf.write_netcdf`).
        """
        dims = ("gain_stage", "y", "x")
        stages = cf_flags(range(3), GAIN_STAGES, "JUNGFRAU gain stage")
        ds = xr.Dataset(
            {"pedestal": (dims, self._pedestal, {"long_name": "pedestal per gain stage",
                                                 "units": "ADU"}),
             "gain": (dims, self._gain, {"long_name": "signed gain per gain stage",
                                         "units": "ADU/keV"})},
            coords={"gain_stage": ("gain_stage", stages.pop("flag_values"), stages)},
            attrs={FILE_MARK: FILE_VERSION, "Conventions": "CF-1.10",
                   "title": "aare_lab JUNGFRAU calibration",
                   "energy_formula": "(adc - pedestal[g]) / gain[g]",
                   "frame_shape": np.asarray(self.frame_shape, np.int64),
                   "aare_lab_version": __version__})
        write_netcdf(ds, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> JungfrauCalibration:
        """Read a calibration written by `save`; it remembers the file (`inputs`).

        Raises
        ------
        FileNotFoundError
            For a missing file.
        ValueError
            For a file that is not a valid aare_lab JUNGFRAU calibration, naming it.
        """
        ds = read_netcdf(path, "a JUNGFRAU calibration file", _FILE_HINT,
                         (FILE_MARK, FILE_VERSION))
        missing = [name for name in ("pedestal", "gain") if name not in ds]
        if missing:
            raise ValueError(f"{path} is an incomplete JUNGFRAU calibration file: "
                             f"{', '.join(missing)} missing; {_FILE_HINT}")
        try:
            calibration = cls(pedestal=ds["pedestal"].to_numpy(), gain=ds["gain"].to_numpy())
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
        calibration.inputs = {"calibration": input_record(path)}
        return calibration


__all__ = ["ADC_MASK", "FLAG_MEANINGS", "GAIN_BITS", "GAIN_STAGES", "INVALID_GAIN",
           "GainBitsTally", "GainBitsWarning", "JungfrauCalibration", "decode", "flag_attrs",
           "gain_bits_per_frame"]
