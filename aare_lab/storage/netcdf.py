"""Whole netCDF files: written so that they appear complete or not at all, read with a check.

Results, pedestals, calibrations, spectra and maps that aare_lab writes whole go through
here; results written chunk by chunk while a run goes are `aare_lab.storage.result_store`'s.
"""

from __future__ import annotations

import os

import xarray as xr

from aare_lab.checks import existing_file
from aare_lab.storage.atomic import replace_atomically

#: The netCDF4 engine aare_lab reads and writes with (HDF5 through h5py).
NETCDF_ENGINE = "h5netcdf"


def write_netcdf(data: xr.Dataset | xr.DataArray, path: str | os.PathLike) -> None:
    """Write a Dataset or DataArray to netCDF so that the file appears complete or not at all.

    Every file aare_lab writes whole goes through here
    (`aare_lab.storage.atomic.replace_atomically`).
    """
    replace_atomically(path, lambda temporary: data.to_netcdf(temporary, engine=NETCDF_ENGINE))


def read_netcdf(path: str | os.PathLike, what: str, hint: str,
                mark: tuple[str, int]) -> xr.Dataset:
    """Read a whole netCDF file that aare_lab wrote with the attribute ``mark`` (name, version).

    Parameters
    ----------
    path
        The file.
    what, hint
        What the file should be (``"a pedestal file"``) and where such files come from,
        for the messages.
    mark
        The attribute and value every file of that kind carries.

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a file that is not netCDF or lacks ``mark``, naming it, ``what`` and ``hint``.
    """
    path = existing_file(path)
    try:
        with xr.open_dataset(path, engine=NETCDF_ENGINE) as ds:
            ds = ds.load()
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is not {what} ({err}); {hint}") from None
    name, version = mark
    if ds.attrs.get(name) != version:
        raise ValueError(f"{path} is not {what} (no {name}={version} attribute); {hint}")
    return ds


__all__ = ["NETCDF_ENGINE", "read_netcdf", "write_netcdf"]
