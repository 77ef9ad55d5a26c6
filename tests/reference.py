"""A plain-Python transcription of docs/algorithm.md: slow and obviously correct.

Written from the specification alone, one scalar at a time with NumPy scalar types, and
independent of the Numba code: the float64 state keeps ``sum``, ``sum2`` and a cached
``mean``, the float32 state is centred exactly as the page describes. `RefCalibration` and
``find_frame(cal=...)`` read raw JUNGFRAU frames as its "JUNGFRAU gain switching" says.
"""

import math

import numpy as np

NOT_PROCESSED, NEG_SKIP, SHADOW, TEST1_STORE, TEST3_STORE, TEST3_SKIP, QUIET_UPDATE = range(7)
FLAGGED = "flagged"


class RefCalibration:
    """A JUNGFRAU calibration as the page's "JUNGFRAU gain switching" reads it: per-gain
    pedestals and gains (lists of rows per stage) rounded to the pedestal dtype."""

    def __init__(self, pedestal, gain, dtype="float64"):
        T = np.float32 if dtype == "float32" else np.float64
        self.ped = [[[T(v) for v in row] for row in stage] for stage in np.asarray(pedestal).tolist()]
        self.gain = [[[T(v) for v in row] for row in stage] for stage in np.asarray(gain).tolist()]

    def decode(self, x, i, j):
        """(stage 0/1/2 or FLAGGED, adc) of raw value x at (i, j)."""
        x = int(x)
        bits, adc = x // 16384, x % 16384
        if bits == 2 or x in (0x4000, 0xFFFF, 0xC000, 0x3FFF):
            return FLAGGED, adc
        g = {0: 0, 1: 1, 3: 2}[bits]
        return (FLAGGED if self.gain[g][i][j] == 0 else g), adc


def rha(value) -> int:
    """Round half away from zero, exactly (no x + 0.5 rounding trap)."""
    f = float(value)
    a = abs(f)
    t = math.floor(a)
    if a - t >= 0.5:
        t += 1
    return int(t) if f >= 0 else -int(t)


class RefPedestal:
    def __init__(self, shape, N, dtype="float64", noise="running"):
        self.shape, self.N, self.dtype, self.noise = shape, N, dtype, noise
        ny, nx = shape
        self.sum = [[np.float64(0)] * nx for _ in range(ny)]
        self.sum2 = [[np.float64(0)] * nx for _ in range(ny)]
        self.mean_ = [[np.float64(0)] * nx for _ in range(ny)]
        self.n = 0
        self.trained = False

    # -- training (float64 for both dtypes) --
    def push_dark(self, frame):
        ny, nx = self.shape
        if not self.trained:
            for i in range(ny):
                for j in range(nx):
                    x = np.float64(frame[i][j])
                    self.sum[i][j] = self.sum[i][j] + x
                    self.sum2[i][j] = self.sum2[i][j] + x * x
                    self.mean_[i][j] = self.sum[i][j] / np.float64(self.n + 1)
            self.n += 1
            if self.n == self.N:
                self._complete()
        else:
            for i in range(ny):
                for j in range(nx):
                    self.update(i, j, frame[i][j])

    def _complete(self):
        self.trained = True
        ny, nx = self.shape
        N = np.float64(self.N)
        if self.dtype == "float32":
            self.off = [[None] * nx for _ in range(ny)]
            self.s = [[None] * nx for _ in range(ny)]
            self.s2 = [[None] * nx for _ in range(ny)]
            for i in range(ny):
                for j in range(nx):
                    sm, sm2 = self.sum[i][j], self.sum2[i][j]
                    off = np.float64(rha(sm / N))
                    self.off[i][j] = np.float32(off)
                    self.s[i][j] = np.float32(sm - N * off)
                    self.s2[i][j] = np.float32(sm2 - np.float64(2) * off * sm + N * off * off)
        if self.noise == "fixed":
            self.kept = [[self._rms_now(i, j) for j in range(nx)] for i in range(ny)]

    def update(self, i, j, x, cm=None):
        """Push raw x, less the common-mode offset ``cm`` (in the dtype) when given."""
        if self.dtype == "float64":
            N = np.float64(self.N)
            xf = np.float64(x)
            if cm is not None:
                xf = xf - cm
            self.sum[i][j] = self.sum[i][j] + (xf - self.sum[i][j] / N)
            self.sum2[i][j] = self.sum2[i][j] + (xf * xf - self.sum2[i][j] / N)
            self.mean_[i][j] = self.sum[i][j] / N
        else:
            N = np.float32(self.N)
            y = np.float32(x) - self.off[i][j]
            if cm is not None:
                y = y - cm
            self.s[i][j] = self.s[i][j] + (y - self.s[i][j] / N)
            self.s2[i][j] = self.s2[i][j] + (y * y - self.s2[i][j] / N)

    def _rms_now(self, i, j):
        if self.dtype == "float64":
            m = self.mean_[i][j]
            var = self.sum2[i][j] / np.float64(self.N) - m * m
            var = max(var, np.float64(0))
            return np.sqrt(np.float64(var))
        N = np.float32(self.N)
        resid = self.s[i][j] / N
        var = self.s2[i][j] / N - resid * resid
        var = max(var, np.float32(0))
        return np.sqrt(np.float32(var))

    def rms(self, i, j):
        return self.kept[i][j] if self.noise == "fixed" else self._rms_now(i, j)

    def value(self, i, j, x, cm=None):
        """Pedestal-subtracted value of raw x at pixel (i, j), less ``cm`` when given."""
        if self.dtype == "float64":
            xf = np.float64(x)
            if cm is not None:
                xf = xf - cm
            return xf - self.mean_[i][j]
        resid = self.s[i][j] / np.float32(self.N)
        y = np.float32(x) - self.off[i][j]
        if cm is not None:
            y = y - cm
        return y - resid

    def state(self):
        """(off, s, s2) as arrays comparable with aare_lab.Pedestal.state()."""
        if self.dtype == "float64":
            return {"off": np.zeros(self.shape), "s": np.array(self.sum, np.float64),
                    "s2": np.array(self.sum2, np.float64)}
        return {"off": np.array(self.off, np.float32), "s": np.array(self.s, np.float32),
                "s2": np.array(self.s2, np.float32)}


def common_mode(ped: RefPedestal, frame, n_sigma, labels, cal: RefCalibration | None = None):
    """The two-pass offsets of docs/algorithm.md from the frame-start state.

    Returns (offsets per region in the dtype, pixel count per region of the last pass).
    Sums are Python integers (exact), the mean one float division. With ``cal`` the frame
    is raw JUNGFRAU: the estimate reads the ADC values of its G0 pixels only.
    """
    ny, nx = ped.shape
    T = np.float32 if ped.dtype == "float32" else np.float64
    nsig = T(n_sigma)
    regions = max(max(row) for row in labels) + 1
    if cal is not None:
        decoded = [[cal.decode(frame[i][j], i, j) for j in range(nx)] for i in range(ny)]
        frame = [[adc for _, adc in row] for row in decoded]
        labels = [[r if decoded[i][j][0] == 0 else -1 for j, r in enumerate(row)]
                  for i, row in enumerate(labels)]
    v0 = [[ped.value(i, j, frame[i][j]) for j in range(nx)] for i in range(ny)]
    thr = [[nsig * ped.rms(i, j) for j in range(nx)] for i in range(ny)]
    centre = [T(0)] * regions
    near = set()   # pixels with a candidate in their 3x3 neighbourhood (second pass)
    for k in range(2):
        if k == 1:
            candidates = [(i, j) for i in range(ny) for j in range(nx) if labels[i][j] >= 0
                          and v0[i][j] - centre[labels[i][j]] > thr[i][j]]
            near = {(i + di, j + dj) for i, j in candidates
                    for di in (-1, 0, 1) for dj in (-1, 0, 1)}
        sums, counts = [0] * regions, [0] * regions
        for i in range(ny):
            for j in range(nx):
                r = labels[i][j]
                if r >= 0 and abs(v0[i][j] - centre[r]) <= thr[i][j] and (i, j) not in near:
                    sums[r] += rha(float(v0[i][j]) * 65536.0)
                    counts[r] += 1
        centre = [T(float(sums[r]) / float(counts[r]) * 2.0 ** -16) if counts[r] else T(0)
                  for r in range(regions)]
    return centre, counts


def find_frame(ped: RefPedestal, frame, n_sigma, cluster_size, model, cap=None, labels=None,
               cal: RefCalibration | None = None, round_window=True):
    """Process one frame; return (clusters [(y, x, window list)], n_found, codes).

    With ``labels`` (a list of rows of region labels, -1 excluded) the frame's common mode
    is estimated first (`common_mode`, which gives the offsets) and subtracted. With
    ``cal`` the frame is raw JUNGFRAU and everything is in keV ("JUNGFRAU gain
    switching"). Windows are int32 values (``rha``) or, without ``round_window``, the
    values themselves as Python floats.
    """
    ny, nx = ped.shape
    cy, cx = cluster_size
    ry, rx = cy // 2, cx // 2
    f32 = ped.dtype == "float32"
    T = np.float32 if f32 else np.float64
    nsig = T(n_sigma)
    c3 = np.sqrt(T(cy * cx))
    cm = [[None] * nx for _ in range(ny)]
    if labels is not None:
        centre, _ = common_mode(ped, frame, n_sigma, labels, cal)
        cm = [[centre[r] if r >= 0 else None for r in row] for row in labels]
    stage = [[0] * nx for _ in range(ny)]
    if cal is not None:
        decoded = [[cal.decode(frame[i][j], i, j) for j in range(nx)] for i in range(ny)]
        stage = [[g for g, _ in row] for row in decoded]
        frame = [[adc for _, adc in row] for row in decoded]

    def energy(a, b, adu):
        """The value of pixel (a, b) from its ADU value ``adu`` (a thunk: read lazily)."""
        if cal is None:
            return adu()
        g = stage[a][b]
        if g == FLAGGED:
            return T(0)
        if g == 0:
            return adu() / cal.gain[0][a][b]
        return (T(frame[a][b]) - cal.ped[g][a][b]) / cal.gain[g][a][b]

    def threshold(a, b, rms):
        return nsig * rms if cal is None else (nsig * rms) / cal.gain[0][a][b]
    codes = [[NOT_PROCESSED] * nx for _ in range(ny)]
    clusters = []
    found = 0
    if model == "frozen":
        start_v = [[energy(i, j, lambda i=i, j=j: ped.value(i, j, frame[i][j], cm[i][j]))
                    for j in range(nx)] for i in range(ny)]
        start_rms = [[ped.rms(i, j) for j in range(nx)] for i in range(ny)]
        pending = []
    for i in range(ny):
        for j in range(nx):
            if model == "frozen":
                def val(a, b):
                    return start_v[a][b]
                rms = start_rms[i][j]
            else:
                def val(a, b):
                    return energy(a, b, lambda: ped.value(a, b, frame[a][b], cm[a][b]))
                rms = ped.rms(i, j)
            v = val(i, j)
            thr = threshold(i, j, rms)
            if stage[i][j] == FLAGGED or v < -thr:
                codes[i][j] = NEG_SKIP
                continue
            m = None
            tot = T(0)
            window = []
            for a in range(i - ry, i + ry + 1):
                for b in range(j - rx, j + rx + 1):
                    if 0 <= a < ny and 0 <= b < nx:
                        q = val(a, b)
                        m = q if m is None or q > m else m
                        tot = tot + q
                        window.append(q)
                    else:
                        window.append(None)
            if m > thr:
                code = TEST1_STORE if v == m else SHADOW
            elif tot > c3 * thr:
                code = TEST3_STORE if v == m else TEST3_SKIP
            else:
                code = QUIET_UPDATE
            codes[i][j] = code
            if code in (TEST1_STORE, TEST3_STORE):
                found += 1
                if cap is None or found <= cap:
                    clusters.append((i, j, [0 if q is None else rha(q) if round_window
                                            else float(q) for q in window]))
            elif code == QUIET_UPDATE and stage[i][j] == 0:
                if model == "frozen":
                    pending.append((i, j))
                else:
                    ped.update(i, j, frame[i][j], cm[i][j])
    if model == "frozen":
        for i, j in pending:
            ped.update(i, j, frame[i][j], cm[i][j])
    return clusters, found, codes
