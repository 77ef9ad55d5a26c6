"""Compiled map lookup for NumPy photons: `aare_lab.imaging.interpolation.interpolate`'s
array expressions (which CuPy takes), one cluster at a time."""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def place(eta_x, eta_y, energy, corner, column, row, x_edges, y_edges, e_edges, ietax, ietay,
          out_x, out_y, flags):
    """Photon positions into ``out_x``, ``out_y`` (NaN beyond the last energy edge) and per
    cluster ``flags``: bit 0 beyond the energies, bit 1 η clamped to the last bin.
    ``corner`` is empty for the η3 kinds."""
    nx, ny, ne = len(x_edges) - 1, len(y_edges) - 1, len(e_edges) - 1
    with_corner = len(corner) > 0
    for i in range(len(eta_x)):
        ix = np.searchsorted(x_edges[1:], eta_x[i])
        iy = np.searchsorted(y_edges[1:], eta_y[i])
        ie = np.searchsorted(e_edges[1:], energy[i])
        flags[i] = 0
        if ie >= ne:
            out_x[i] = np.nan
            out_y[i] = np.nan
            flags[i] = 1
            continue
        if ix >= nx or iy >= ny:
            flags[i] = 2
            ix, iy = min(ix, nx - 1), min(iy, ny - 1)
        ux, uy = ietax[ix, iy, ie], ietay[ix, iy, ie]
        if with_corner:
            c = corner[i]
            out_x[i] = np.float64(column[i]) + 0.5 + ux + (-1.0 if c % 2 == 0 else 0.0)
            out_y[i] = np.float64(row[i]) + 0.5 + uy + (-1.0 if c < 2 else 0.0)
        else:
            out_x[i] = np.float64(column[i]) + ux
            out_y[i] = np.float64(row[i]) + uy
