// The frozen timing model of docs/algorithm.md on an NVIDIA GPU, one launch per chunk of frames.
//
// Twin: aare_lab/detector/arith.py (values_row, thresholds_row, ema, update_quiet_row,
// round_half_away), aare_lab/finders/_decision.py (classify, the window sum in raster
// order, store_window) and aare_lab/finders/_gain.py (pixel_status, calibrate_row,
// kev_thresholds_row, gated, estimate_labels), driven like aare_lab/finders/_frozen.py. Each __device__ function
// below mirrors its namesake there operation for operation; the quotients are formed
// otherwise, to the same bits (corrected_quotient). The module is compiled with
// -fmad=false and without fast math (aare_lab/gpu/kernels.py), so every product rounds on
// its own, as on the CPU, and the only FMAs are those written out.
//
// Specialised by preprocessor defines, so that CuPy's on-disk cache serves each compiled
// variant to later processes:
//   STATE_T                  float (the centred float32 state) or double
//   WINDOW_T, ROUND_WINDOW   stored window values: int or short rounded half away from
//                            zero (1), or float / double kept as they are (0)
//   SATURATE_WINDOW          1: rounded values limited to short's -32768..32767 (int16
//                            windows; a conversion would wrap them); 0 (or undefined):
//                            converted as they are
//   CLUSTER_NY, CLUSTER_NX   the cluster window, both odd
//   PIXELS_PER_THREAD        a bound on the band pixels of one thread (registers)
//   FRAME_NX                 the frame's width
//   MAX_THREADS              threads per block, 256, 512 or 1024; 512 of them share an
//                            SM's registers at 128 per thread, 1024 at 64
//   COMMON_MODE              1: estimate and subtract a common-mode offset per region and
//                            frame (twin: aare_lab/finders/_common_mode.py); 0 (or
//                            undefined): the code below compiles exactly as without it
//   GAIN_SWITCHING           1: the frames are raw JUNGFRAU values with gain bits, decoded
//                            and converted to keV with a calibration (twin:
//                            aare_lab/finders/_gain.py); 0 (or undefined): the raw values
//                            are taken as they are, and the pixels above ADC_MASK (gain
//                            bits set) are counted per frame (n_gain_bits, the last
//                            parameter) for the host's GainBitsWarning
//   EXCHANGE_IN_WORDS        1 (float state only): edge rows travel in 8-byte words that carry
//                            their frame's number (send_value); 0 (or undefined): as rows,
//                            then a flag per band (publish). The host chooses by what was
//                            measured faster (aare_lab/gpu/kernels.py, KernelSpec)
//
// Layout of one launch (cooperative, so every block is resident at once):
// - Block b owns the pixels [band_start(b), band_start(b + 1)) in raster order, its "band",
//   for the whole launch: whole rows with flags, equal shares of the frame's pixels with words.
//   Thread t holds the pedestal state of band pixels t, t + T, t + 2T, ... in registers
//   from the first frame to the last, so no other thread ever reads it.
// - Per frame the block computes the values v of its band from the frame-start state into
//   one of two tiles in shared memory (by frame parity; rows TILE_NX apart, the gaps and
//   the rows outside the frame zeroed once per launch) and sends the rows that other bands
//   read (within RY rows of them) to a two-slot exchange buffer, then receives the rows
//   within RY of its own from the bands that hold them. So every read of a frame sees the
//   frame-start state, and no thread reads what another thread of the same frame has
//   updated. A band runs at most one frame ahead of the bands it reads, which read it too,
//   and two slots allow that. With flags, bands are at least RY rows high, so a halo comes
//   from the adjacent bands alone, whose flags a band waits for; with words each value
//   says whose frame it is, so bands may be thinner.
// - Classification and the QUIET_UPDATE pushes of the band follow. Only the pushes feed
//   the next frame, so the stores are written one frame late: between sending frame
//   f + 1's edge rows and receiving its halo, the block ranks frame f's stores in raster
//   order with warp ballots and appends their windows, from frame f's tile, to the band's
//   own region.
// - With COMMON_MODE, before the values of a frame: two passes in which every block adds
//   its pixels' fixed-point integers to per-region sums in shared memory (warp-aggregated
//   atomics), then to global sums, then a grid barrier; every block reads the totals and
//   turns them into the offsets (integer sums are exact, so the order of the atomics does
//   not matter and every block sees the same offsets). Between the passes each block marks
//   its pixels that are candidates at the first offsets in a global map, and a third grid
//   barrier lets the second pass read the marks of the neighbouring bands' edge rows.
// - With GAIN_SWITCHING, first of all per frame: each thread decodes its raw values into
//   their ADC values (kept in raw[]) and a status (G0, G1, G2 or flagged, in registers),
//   and counts the flagged ones; the estimate reads G0 pixels only, the values and
//   thresholds become keV, a flagged pixel's code is NEG_SKIP, and only G0 is pushed.
//   Without it, after the previous frame's stores, each warp counts its pixels above
//   ADC_MASK into the frame's n_gain_bits (one vote when none has gain bits).
// - After the last frame, a grid barrier; block 0 turns the per-band counts into
//   raster-order offsets with the capacity applied; a second barrier; each block then
//   moves its clusters to their place in the compact output, each warp 32 clusters'
//   windows as one coalesced run of taps, and bins their energies.

#ifndef COMMON_MODE
#define COMMON_MODE 0
#endif
#ifndef GAIN_SWITCHING
#define GAIN_SWITCHING 0
#endif
#ifndef SATURATE_WINDOW
#define SATURATE_WINDOW 0
#endif
#ifndef EXCHANGE_IN_WORDS
#define EXCHANGE_IN_WORDS 0
#endif

#ifndef STATE_T
#error "STATE_T, WINDOW_T, ROUND_WINDOW, CLUSTER_NY, CLUSTER_NX, PIXELS_PER_THREAD, FRAME_NX, MAX_THREADS: see above"
#endif

#define RY (CLUSTER_NY / 2)
#define RX (CLUSTER_NX / 2)
#define WINDOW_SIZE (CLUSTER_NY * CLUSTER_NX)
#define WARPS (MAX_THREADS / 32)  // the host launches exactly MAX_THREADS threads per block
#define SCAN_BYTES 256   // shared memory of the block scan (33 ints), rounded up
#define FLAG_STRIDE 32   // one 128-byte line per band's flag: no false sharing while polling
#define WARP_STORE_BYTES (PIXELS_PER_THREAD * 32 * 4)
// Tile rows are TILE_NX apart: RX zeros before each frame row and after the last, and a
// tile's rows outside the frame hold zeros, so that every window takes the same unrolled
// taps, those outside the frame reading zeros. Why zeros leave every decision as the
// frozen finder's, which leaves those taps out: see tile_index.
#define TILE_NX (FRAME_NX + RX)

typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;
#if EXCHANGE_IN_WORDS
typedef u64 exchange_t;   // send_value
#else
typedef STATE_T exchange_t;
#endif

// Branch codes: aare_lab/branches.py.
#define NEG_SKIP 1
#define SHADOW 2
#define TEST1_STORE 3
#define TEST3_STORE 4
#define TEST3_SKIP 5
#define QUIET_UPDATE 6

#if GAIN_SWITCHING
// Pixel status of a JUNGFRAU frame: _gain.G0 (= arith.G0), G1, G2, FLAGGED.
#define ST_G0 0
#define ST_G1 1
#define ST_G2 2
#define ST_FLAGGED 3
#endif
// The 14 bits of a JUNGFRAU count below its gain bits (jungfrau.ADC_MASK).
#define ADC_MASK 0x3FFF

// ---------------------------------------------------------------- the contract's arithmetic

// `mean` and `mean2` are a pixel's s / N and s2 / N at the start of the frame, formed once
// per frame: the CPU twins divide where they need them, the same quotients of the same
// state, so everything computed from them is the same. Here each
// quotient is finished from r = RN(1 / N), formed once per launch, by Markstein's
// correction: q = RN(s·r), q' = RN(q + RN(s - q·N)·r) is the correctly rounded s / N, the
// same bits, wherever the residual neither under- nor overflows (checked over every float32
// significand, tools/quotient_check.py, and for float64 next to every kind of rounding
// midpoint, tools/quotient_check_f64.c). Other s, zero among them (-0 / N is -0, the
// correction gives +0), are divided. A correctly rounded division compiles to a reciprocal,
// a check and a branch to a slow path, so a thread's divisions ran one after the other;
// the corrections of all its pixels run side by side.
__device__ __forceinline__ STATE_T corrected_quotient(STATE_T s, STATE_T N, STATE_T r)
{
    const STATE_T q = s * r;
    return fma(fma(-q, N, s), r, q);
}

__device__ __forceinline__ bool correction_exact(STATE_T s)
{
    const STATE_T a = fabs(s);
    return a >= (STATE_T)0x1p-60 && a <= (STATE_T)0x1p60;
}

__device__ __forceinline__ void quotients(const STATE_T (&s)[PIXELS_PER_THREAD], STATE_T N,
                                          STATE_T r, STATE_T (&q)[PIXELS_PER_THREAD])
{
    bool divide = false;
#pragma unroll
    for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
        q[k] = corrected_quotient(s[k], N, r);
        divide |= !correction_exact(s[k]);
    }
    if (divide) {
#pragma unroll
        for (int k = 0; k < PIXELS_PER_THREAD; ++k)
            if (!correction_exact(s[k]))
                q[k] = s[k] / N;
    }
}

__device__ __forceinline__ STATE_T pixel_value(u16 x, STATE_T off, STATE_T mean)
{
    // arith.values_row
    STATE_T v = (STATE_T)x;
    return (v - off) - mean;
}

__device__ __forceinline__ STATE_T corrected_value(u16 x, STATE_T off, STATE_T corr,
                                                   STATE_T mean)
{
    // arith.values_row with a correction row
    STATE_T v = (STATE_T)x;
    STATE_T y = (v - off) - corr;
    return y - mean;
}

__device__ __forceinline__ STATE_T pixel_threshold(STATE_T mean, STATE_T mean2,
                                                   STATE_T rms_fixed, int fixed, STATE_T nsig)
{
    // arith.thresholds_row
    if (fixed)
        return nsig * rms_fixed;
    const STATE_T zero = 0;
    STATE_T resid = mean;
    STATE_T var = mean2 - resid * resid;
    return nsig * sqrt(var > zero ? var : zero);
}

__device__ __forceinline__ void ema(STATE_T& s, STATE_T& s2, STATE_T y, STATE_T mean,
                                    STATE_T mean2)
{
    // arith.ema
    STATE_T new_s = s + (y - mean);
    STATE_T new_s2 = s2 + (y * y - mean2);
    s = new_s;
    s2 = new_s2;
}

__device__ __forceinline__ int classify(STATE_T vp, STATE_T thr_p, STATE_T m, STATE_T tot,
                                        STATE_T c3)
{
    // _decision.classify
    if (vp < -thr_p)
        return NEG_SKIP;
    if (m > thr_p)
        return vp == m ? TEST1_STORE : SHADOW;
    if (tot > c3 * thr_p)
        return vp == m ? TEST3_STORE : TEST3_SKIP;
    return QUIET_UPDATE;
}

__device__ __forceinline__ STATE_T round_half_away(STATE_T value)
{
    // arith.round_half_away
    STATE_T a = fabs(value);
    STATE_T t = floor(a);
    if (a - t >= (STATE_T)0.5)
        t += 1;
    return value >= 0 ? t : -t;
}

__device__ __forceinline__ long long fixed_point(STATE_T v)
{
    // _common_mode.fixed_point: round_half_away in double of v * 2^16 (exact product)
    double t = (double)v * 65536.0;
    double a = fabs(t);
    double r = floor(a);
    if (a - r >= 0.5)
        r += 1;
    return (long long)(t >= 0 ? r : -r);
}

__device__ __forceinline__ STATE_T region_mean(long long sum, long long count)
{
    // _common_mode.region_means
    if (count <= 0)
        return (STATE_T)0;
    return (STATE_T)(((double)sum / (double)count) * (1.0 / 65536.0));
}

// _common_mode.near_candidates: whether a pixel of the 3x3 neighbourhood of (i, j) inside
// the frame is a candidate. The marks are rewritten every frame by other blocks: read
// through L2 (__ldcg), never a stale L1 line.
__device__ __forceinline__ bool near_candidate(const u8* candidates, int i, int j, int ny)
{
    unsigned int any = 0;
    for (int di = -1; di <= 1; ++di) {
        const int r = i + di;
        if (r < 0 || r >= ny)
            continue;
        for (int dj = -1; dj <= 1; ++dj) {
            const int c = j + dj;
            if (c >= 0 && c < FRAME_NX)
                any |= __ldcg(&candidates[(long long)r * FRAME_NX + c]);
        }
    }
    return any != 0;
}

// Add one pixel's integer to its region (label -1: nothing). The lanes of a warp that
// share a label are summed with shuffles first, so a region sees one atomic per warp.
__device__ __forceinline__ void add_to_region(int label, long long q, unsigned long long* sums,
                                              unsigned long long* counts)
{
    const unsigned int peers = __match_any_sync(0xffffffffu, label);
    if (peers == 0xffffffffu) {
        if (label < 0)
            return;
        long long sum = q;
        for (int d = 16; d > 0; d >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, d);
        if ((threadIdx.x & 31) == 0) {
            atomicAdd(&sums[label], (unsigned long long)sum);
            atomicAdd(&counts[label], 32ull);
        }
    } else if (label >= 0) {
        atomicAdd(&sums[label], (unsigned long long)q);
        atomicAdd(&counts[label], 1ull);
    }
}

#if GAIN_SWITCHING
__device__ __forceinline__ int pixel_status(u16 x, const STATE_T* __restrict__ gain,
                                            long long p, long long frame_px)
{
    // _gain.pixel_status; gain is [3][ny][nx], p the pixel's index in a frame
    const int bits = x >> 14;
    if (bits == 2 || x == 0x4000 || x == 0xFFFF || x == 0xC000 || x == ADC_MASK)
        return ST_FLAGGED;
    const int g = bits == 0 ? ST_G0 : (bits == 1 ? ST_G1 : ST_G2);
    return __ldg(&gain[g * frame_px + p]) == (STATE_T)0 ? ST_FLAGGED : g;
}

__device__ __forceinline__ STATE_T calibrated_value(int status, u16 adc, STATE_T v,
                                                    const STATE_T* __restrict__ pedestal,
                                                    const STATE_T* __restrict__ gain,
                                                    long long p, long long frame_px)
{
    // _gain.calibrate_row: v is the G0 pedestal-subtracted value in ADU
    if (status == ST_G0)
        return v / __ldg(&gain[p]);
    if (status == ST_FLAGGED)
        return (STATE_T)0;
    const STATE_T a = (STATE_T)adc;
    return (a - __ldg(&pedestal[status * frame_px + p])) / __ldg(&gain[status * frame_px + p]);
}

__device__ __forceinline__ STATE_T kev_threshold(STATE_T thr, const STATE_T* __restrict__ gain,
                                                 long long p)
{
    // _gain.kev_thresholds_row
    return thr / __ldg(&gain[p]);
}

__device__ __forceinline__ int gated(int code, int status)
{
    // _gain.gated
    return status == ST_FLAGGED ? NEG_SKIP : code;
}
#endif

__device__ __forceinline__ WINDOW_T stored_value(STATE_T v)
{
    // _decision.store_window (and _decision.saturated)
#if ROUND_WINDOW && SATURATE_WINDOW
    const STATE_T r = round_half_away(v), low = -32768, high = 32767;
    return (WINDOW_T)(r < low ? low : r > high ? high : r);
#elif ROUND_WINDOW
    return (WINDOW_T)round_half_away(v);
#else
    return (WINDOW_T)v;
#endif
}

__device__ __forceinline__ int histogram_bin(double e, const double* edges, int n_bins)
{
    // numpy.histogram's uniform-bin path, so that device and host spectra agree exactly.
    double first = edges[0], last = edges[n_bins];
    if (!(e >= first && e <= last))
        return -1;
    int i = (int)(((e - first) / (last - first)) * (double)n_bins);
    if (i == n_bins)
        i -= 1;
    if (e < edges[i])
        i -= 1;
    else if (e >= edges[i + 1] && i != n_bins - 1)
        i += 1;
    return i;
}

// Where frame pixel g lies in a tile of rows [t_lo, t_hi) (row g / nx, RX zeros in front
// of each row). A window reads zeros where its taps lie outside the frame: in the gaps
// between rows, and in the tile's rows above the frame's first or below its last. The
// frozen finder leaves those taps out of the window's sum and maximum
// (_decision.window_taps, add_taps); zeros give the same decision, bit for bit:
// - the sum starts at +0 and so is never -0 (x + -x is +0), and adding +0 leaves it as it is;
// - a zero raises the maximum m only where every tap inside is below zero, v(p) among them.
//   Then classify answers the same with either m: v(p) < -thr is NEG_SKIP for both; else
//   -thr <= v(p) < 0, so thr > 0 and neither m exceeds it, and Test 3's sum, below zero
//   or NaN, never exceeds c3 * thr, c3 = sqrt(cy * cx) being positive: QUIET_UPDATE for
//   both (a NaN thr fails every test for both; a NaN tap never raises m, a NaN v(p) is m).
//   tests/test_decision.py checks the argument on the CPU.
__device__ __forceinline__ int tile_index(int g, int t_lo)
{
    const int i = g / FRAME_NX;
    return g + (i + 1) * RX - t_lo * TILE_NX;
}

// The first tap of the window centred on frame pixel (i, j), in a tile of rows from t_lo
// (tile_index's layout; the centre is corner[RY * TILE_NX + RX]). The decision and the
// stores read every window from here.
__device__ __forceinline__ const STATE_T* window_corner(const STATE_T* tile, int i, int j,
                                                         int t_lo)
{
    return tile + (i - RY - t_lo) * TILE_NX + j;
}

// ---------------------------------------------------------------- synchronisation

// Exclusive scan of one int per thread; blockDim.x is a multiple of 32. `sums` holds 33
// ints of shared memory; the block's total is returned in `total`.
__device__ int block_exclusive_scan(int value, int* sums, int& total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n_warps = blockDim.x >> 5;
    int incl = value;
    for (int d = 1; d < 32; d <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d)
            incl += y;
    }
    if (lane == 31)
        sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        int w = lane < n_warps ? sums[lane] : 0;
        int w_incl = w;
        for (int d = 1; d < 32; d <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, w_incl, d);
            if (lane >= d)
                w_incl += y;
        }
        sums[lane] = w_incl - w;
        if (lane == 31)
            sums[32] = w_incl;
    }
    __syncthreads();
    int result = sums[warp] + incl - value;
    total = sums[32];
    __syncthreads();
    return result;
}

// The pattern of cooperative_groups' grid sync: every block arrives once per barrier, on a
// counter zeroed before the launch; the k-th barrier waits for k * gridDim.x arrivals.
__device__ void grid_barrier(unsigned int* counter, unsigned int k)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter, 1u);
        const unsigned int target = k * gridDim.x;
        while (*(volatile unsigned int*)counter < target) {
        }
        __threadfence();
    }
    __syncthreads();
}

// The first pixel (raster order) of band b; its twin on the host is cut_bands
// (aare_lab/gpu/bands.py). With flags a band waits for its two neighbours
// alone, so bands are whole rows, at least RY of them (the host cuts no more bands). With
// words every value names its frame and any band may read it, so the frame is cut into
// bands of equal pixels: a thread's second pixel costs most of a first, and rows would
// leave some bands a third more pixels than others; every pixel costs the same, the
// windows at the frame's edge reading zeros in the tiles (kernels/README.md, "Bands").
__device__ __forceinline__ int band_start(int b, int ny, int n_bands)
{
#if EXCHANGE_IN_WORDS
    return (int)(((long long)b * ny * FRAME_NX) / n_bands);
#else
    return (int)(((long long)b * ny) / n_bands) * FRAME_NX;
#endif
}

#if EXCHANGE_IN_WORDS
// Edge rows in words that carry their frame, as NCCL's LL protocol sends data: each 8-byte
// word holds a value's 32 bits and the number of the frame it belongs to (frame + 1; the
// host zeroes the buffer before each launch), stored and loaded as one access, so a reader
// that sees the number sees the value. No fence, no flag and no second trip through L2.
// Faster where a thread receives few values (MÖNCH frames, float32: 5.1 -> 4.2 us per
// frame); slower with JUNGFRAU-wide bands, and with float64, whose values would take two
// words (kernels/README.md, "Tried and not shipped").
static_assert(sizeof(STATE_T) == 4, "EXCHANGE_IN_WORDS sends float values");

__device__ __forceinline__ void send_value(u64* word, float v, unsigned int frame)
{
    const u64 w = ((u64)frame << 32) | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(word), "l"(w) : "memory");
}

__device__ __forceinline__ void receive_value(const u64* word, unsigned int frame, float& v)
{
    u64 w;
    do {
        asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(word) : "memory");
    } while ((unsigned int)(w >> 32) != frame);
    v = __uint_as_float((unsigned int)w);
}
#else
// A band publishes how many frames' edge rows it has written; its neighbours wait for it.
// All threads write, the block synchronises, then one thread releases (the pattern of
// CUTLASS's semaphore); a reader acquires, then the block synchronises before reading.
__device__ __forceinline__ void publish(unsigned int* flag, unsigned int value)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ void await(const unsigned int* flag, unsigned int value)
{
    unsigned int seen;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
    } while (seen < value);
}
#endif

// ---------------------------------------------------------------- the chunk kernel

extern "C" __global__ void __launch_bounds__(MAX_THREADS, MAX_THREADS < 512 ? 512 / MAX_THREADS : 1)
frozen_chunk(
    const u16* __restrict__ frames, const int n_frames, const int ny,
    const STATE_T* __restrict__ off, STATE_T* __restrict__ s, STATE_T* __restrict__ s2,
    const STATE_T* __restrict__ rms_fixed, const int fixed,
    const STATE_T N, const STATE_T nsig, const STATE_T c3, const int cap,
    exchange_t* exchange,         // [2][ny][nx] band edge rows, by frame parity (with
                                  // EXCHANGE_IN_WORDS zeroed before the launch)
    unsigned int* sync,           // [gridDim.x + 1][FLAG_STRIDE]: frames published per band
                                  // (not with EXCHANGE_IN_WORDS), then the barrier; zeroed
                                  // before the launch
    int* counts,                  // [n_frames][gridDim.x] stores per frame and band
    const int region_cap,         // clusters each band can hold in its region
    WINDOW_T* region_win, int* region_pos,   // windows; (y, x, frame) per cluster
    int* seg_start,               // [n_frames][gridDim.x] first kept rank of a band in a frame
    int* frame_start,             // [n_frames] first output row of a frame
    // n_found ... overflow and the last parameter lie in one array, zeroed before each run
    // and copied to the host in one piece (engine.Meta)
    long long* n_found, long long* n_kept,   // [n_frames]
    long long* n_out,             // clusters written to the output
    long long* overflow,          // set when a band found more than region_cap clusters
    WINDOW_T* out_win, int* out_y, int* out_x,
    const long long* __restrict__ map_slot, u8* maps,
    const double* __restrict__ hist_edges, const int n_bins, unsigned long long* hist,
    const int pixel_spectra, unsigned int* pixel_hist,
    const int* __restrict__ cm_labels,   // [ny][nx] region of each pixel, -1 excluded
    const int n_regions,
    unsigned long long* cm_acc,   // [n_frames][2 passes][2: sums, counts][n_regions], zeroed
    u8* cm_candidates,            // [ny][nx] the frame's candidates at the first pass's offsets
    STATE_T* cm_out,              // [n_frames][n_regions] the offsets
    long long* cm_pixels          // [n_frames][n_regions] pixels of the last pass
#if GAIN_SWITCHING
    ,
    const STATE_T* __restrict__ cal_pedestal,   // [3][ny][nx] per-gain pedestals (ADU)
    const STATE_T* __restrict__ cal_gain,       // [3][ny][nx] per-gain gains (ADU/keV)
    unsigned long long* n_flagged               // [n_frames] flagged pixels
#else
    ,
    unsigned long long* n_gain_bits             // [n_frames] pixels above ADC_MASK
#endif
    )
{
    extern __shared__ __align__(16) unsigned char smem[];
    int* scan_sums = (int*)smem;                                 // 33 ints
    int* warp_stores = (int*)(smem + SCAN_BYTES);                // [PIXELS_PER_THREAD][32]
#if COMMON_MODE
    // Per region: the block's sums and counts, then the offsets.
    unsigned long long* cm_sums = (unsigned long long*)(smem + SCAN_BYTES + WARP_STORE_BYTES);
    unsigned long long* cm_counts = cm_sums + n_regions;
    STATE_T* cm_centre = (STATE_T*)(cm_counts + n_regions);
    const int cm_bytes = ((n_regions * (16 + (int)sizeof(STATE_T)) + 15) / 16) * 16;
#else
    const int cm_bytes = 0;
#endif
    // Two tiles of the band and its halo: frame f's values go to tiles[f & 1], so frame
    // f - 1's windows are still there while frame f is exchanged (see write_stores).
    STATE_T* tiles = (STATE_T*)(smem + SCAN_BYTES + WARP_STORE_BYTES + cm_bytes);

    const int nx = FRAME_NX;   // a constant: divisions by it are multiplications
    const int G = gridDim.x, b = blockIdx.x, T = blockDim.x, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int band = band_start(b, ny, G), band_end = band_start(b + 1, ny, G);
    const int P = band_end - band;                               // band pixels
    const int rounds = (P + T - 1) / T;      // pixel k of a thread: p = k * T + tid
    const int t_lo = band / nx - RY, t_hi = (band_end - 1) / nx + 1 + RY;
    const long long frame_px = (long long)ny * nx;
    // Tile rows [t_lo, t_hi), RX zeros before each and after the last (TILE_NX); the
    // frame's rows among them, which the band and its halo fill.
    const int tile_size = (t_hi - t_lo) * TILE_NX + RX;
    const int halo_lo = max(t_lo, 0) * nx, halo_hi = min(t_hi, ny) * nx;
    // Rows other bands read: up to RY below the band before's last row, and from RY above
    // the band after's first row (with whole-row bands, the first and last RY rows).
    const int sent_to_above = b > 0 ? (band - 1) / nx + RY : -1;
    const int sent_to_below = b < G - 1 ? band_end / nx - RY : ny;
    unsigned int* barrier = sync + G * FLAG_STRIDE;
    unsigned int barriers = 0;   // grid barriers passed so far
    const STATE_T recip_N = (STATE_T)1 / N;   // see corrected_quotient

    // The band's state stays in registers for the whole chunk: one thread, one pixel's state,
    // its offset, and per frame its quotients and threshold (from the frame-start state).
    STATE_T s_r[PIXELS_PER_THREAD], s2_r[PIXELS_PER_THREAD], off_r[PIXELS_PER_THREAD];
    STATE_T mean_r[PIXELS_PER_THREAD], mean2_r[PIXELS_PER_THREAD], thr_r[PIXELS_PER_THREAD];
    u16 raw[PIXELS_PER_THREAD];
#if GAIN_SWITCHING
    u8 status[PIXELS_PER_THREAD];   // of the current frame; raw[] then holds its ADC values
#endif
#pragma unroll
    for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
        const int p = k * T + tid;
        if (p < P) {
            s_r[k] = s[band + p];
            s2_r[k] = s2[band + p];
            off_r[k] = off[band + p];
            raw[k] = frames[band + p];
        } else {
            // Padding: quotients are formed for every k, none of them divides.
            s_r[k] = s2_r[k] = 1;
            off_r[k] = 0;
            raw[k] = 0;
        }
    }

    // Frame fs's stores, ranked in raster order: round by round, warp by warp, lane by lane.
    // `stores` holds this thread's (bit k: pixel k), warp_stores each warp's count per round,
    // both from classifying fs and followed by a block barrier. Each store is written by the
    // whole warp, one tap per lane, from tiles[fs & 1] to the band's own region. Nothing of
    // it feeds a later frame's decision, so it runs a frame late, while the next frame's
    // neighbours catch up.
    int region_used = 0;
    unsigned int stores = 0;
    auto write_stores = [&](int fs) {
        const STATE_T* tile = tiles + (fs & 1) * tile_size;
        int band_stores = 0;
#pragma unroll
        for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
            if (k >= rounds)
                break;
            const unsigned int ballot = __ballot_sync(0xffffffffu, (stores >> k) & 1u);
            // Lane w reads warp w's count; a scan across the lanes gives the stores of the
            // warps before this one and the round's total.
            const int c = lane < WARPS ? warp_stores[k * 32 + lane] : 0;
            int incl = c;
#pragma unroll
            for (int d = 1; d < 32; d <<= 1) {
                const int y = __shfl_up_sync(0xffffffffu, incl, d);
                if (lane >= d)
                    incl += y;
            }
            const int before = __shfl_sync(0xffffffffu, incl - c, warp);
            const int in_round = __shfl_sync(0xffffffffu, incl, 31);
            unsigned int pending = ballot;
            while (pending) {
                const int src = __ffs(pending) - 1;
                pending &= pending - 1;
                const int rank = region_used + band_stores + before
                    + __popc(ballot & ((1u << src) - 1u));
                if (rank >= region_cap) {
                    if (lane == 0)
                        *overflow = 1;
                    continue;
                }
                const int g = band + k * T + warp * 32 + src;
                const int i = g / nx, j = g % nx;
                const long long r = (long long)b * region_cap + rank;
                WINDOW_T* w = region_win + r * WINDOW_SIZE;
                // Taps outside the frame read zeros, stored as 0 (_decision.store_window).
                const STATE_T* corner = window_corner(tile, i, j, t_lo);
                for (int tap = lane; tap < WINDOW_SIZE; tap += 32)
                    w[tap] = stored_value(corner[(tap / CLUSTER_NX) * TILE_NX + tap % CLUSTER_NX]);
                if (lane == 0) {
                    region_pos[3 * r] = i;
                    region_pos[3 * r + 1] = j;
                    region_pos[3 * r + 2] = fs;
                }
            }
            band_stores += in_round;
        }
        if (tid == 0)
            counts[fs * G + b] = band_stores;
        region_used += band_stores;
    };

    // The zeros of the tiles' gaps and rows outside the frame, never written in the launch.
    for (int k = tid; k < 2 * tile_size; k += T)
        tiles[k] = 0;
#if COMMON_MODE
    // Each pass leaves the block's sums zeroed behind it: only the first frame's start here.
    for (int r = tid; r < n_regions; r += T) {
        cm_sums[r] = 0;
        cm_counts[r] = 0;
    }
#endif
    __syncthreads();

    // Two block barriers per frame (and those of the common-mode estimate): one after the
    // values (with flags, before the band publishes them), one after the halo is received.
    // Each shared buffer is written and read on opposite sides of one of them:
    //   tiles[f & 1]  written with frame f's values and halo before f's second barrier;
    //                 read by classify(f) after it and by write_stores(f) before frame
    //                 f + 1's second; written again by values(f + 2), after that
    //   warp_stores   written by classify(f) after f's second barrier; read by
    //                 write_stores(f) between frame f + 1's first and second; written
    //                 again by classify(f + 1), after that
    //   cm_*          the estimate's own barriers, each grid barrier a block barrier first
    for (int f = 0; f < n_frames; ++f) {
        exchange_t* slot = exchange + (f & 1) * frame_px;
        STATE_T* tile = tiles + (f & 1) * tile_size;
        const long long map = map_slot[f];

        // The frame-start state's quotients and thresholds, once per pixel and frame: s / N
        // now, for the values; s2 / N and the thresholds after the exchange, so that fewer
        // registers are live across it (the common-mode estimate needs them first).
        quotients(s_r, N, recip_N, mean_r);
        auto thresholds = [&]() {
            quotients(s2_r, N, recip_N, mean2_r);
#pragma unroll
            for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
                const int p = min(k * T + tid, P - 1);
                thr_r[k] = pixel_threshold(mean_r[k], mean2_r[k], __ldg(&rms_fixed[band + p]),
                                           fixed, nsig);
            }
        };
#if COMMON_MODE
        thresholds();
#endif

#if GAIN_SWITCHING
        // _gain.decode_row: the ADC values and the status of the band's pixels.
        {
            unsigned long long flagged = 0;
#pragma unroll
            for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
                const int p = k * T + tid;
                if (p < P) {
                    status[k] = (u8)pixel_status(raw[k], cal_gain, band + p, frame_px);
                    raw[k] = raw[k] & ADC_MASK;
                    flagged += status[k] == ST_FLAGGED;
                }
            }
            if (flagged)
                atomicAdd(&n_flagged[f], flagged);
        }
#endif

#if COMMON_MODE
        // The offsets of the frame from its frame-start values (_common_mode.estimate_*).
        // cm_centre still holds the previous frame's offsets, read by its pushes until the
        // first grid barrier: pass 0 is centred on 0 (c_0) without reading it.
        auto estimate_label = [&](int k, int p) {
            if (p >= P)
                return -1;
#if GAIN_SWITCHING
            // _gain.estimate_labels: G0 pixels only
            if (status[k] != ST_G0)
                return -1;
#endif
            return __ldg(&cm_labels[band + p]);
        };
        for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
            for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
                const int p = k * T + tid;
                int label = estimate_label(k, p);
                long long q = 0;
                if (label >= 0) {
                    const STATE_T v0 = pixel_value(raw[k], off_r[k], mean_r[k]);
                    const STATE_T thr = thr_r[k];
                    const STATE_T centre = pass == 0 ? (STATE_T)0 : cm_centre[label];
                    if (fabs(v0 - centre) <= thr && (pass == 0 || !near_candidate(
                            cm_candidates, (band + p) / nx, (band + p) % nx, ny)))
                        q = fixed_point(v0);
                    else
                        label = -1;
                }
                add_to_region(label, q, cm_sums, cm_counts);
            }
            __syncthreads();
            unsigned long long* acc = cm_acc + ((long long)f * 2 + pass) * 2 * n_regions;
            for (int r = tid; r < n_regions; r += T) {
                if (cm_counts[r]) {
                    atomicAdd(&acc[r], cm_sums[r]);
                    atomicAdd(&acc[n_regions + r], cm_counts[r]);
                }
                cm_sums[r] = 0;
                cm_counts[r] = 0;
            }
            grid_barrier(barrier, ++barriers);
            for (int r = tid; r < n_regions; r += T) {
                const long long sum = (long long)__ldcg(&acc[r]);
                const long long count = (long long)__ldcg(&acc[n_regions + r]);
                cm_centre[r] = region_mean(sum, count);
                if (pass == 1 && b == 0) {
                    cm_out[(long long)f * n_regions + r] = cm_centre[r];
                    cm_pixels[(long long)f * n_regions + r] = count;
                }
            }
            __syncthreads();
            if (pass == 0) {
                // _common_mode.mark_candidates, then a grid barrier: the second pass reads
                // the candidates of the neighbouring bands' edge rows. The next frame's
                // marks come after this frame's second pass, behind its grid barrier.
#pragma unroll
                for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
                    const int p = k * T + tid;
                    const int label = estimate_label(k, p);
                    if (p < P)
                        cm_candidates[band + p] = label >= 0 &&
                            pixel_value(raw[k], off_r[k], mean_r[k]) - cm_centre[label] > thr_r[k];
                }
                grid_barrier(barrier, ++barriers);
            }
        }
#endif

        // Values of the band from the frame-start state; its edge rows go to the neighbours.
#pragma unroll
        for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
            const int p = k * T + tid;
            if (p < P) {
                const int i = (band + p) / nx;
#if COMMON_MODE
                const int label = __ldg(&cm_labels[band + p]);
                const STATE_T v_adu = corrected_value(raw[k], off_r[k],
                                                      label >= 0 ? cm_centre[label] : (STATE_T)0,
                                                      mean_r[k]);
#else
                const STATE_T v_adu = pixel_value(raw[k], off_r[k], mean_r[k]);
#endif
#if GAIN_SWITCHING
                const STATE_T v = calibrated_value(status[k], raw[k], v_adu, cal_pedestal,
                                                   cal_gain, band + p, frame_px);
#else
                const STATE_T v = v_adu;
#endif
                tile[tile_index(band + p, t_lo)] = v;
                if (i <= sent_to_above || i >= sent_to_below)
#if EXCHANGE_IN_WORDS
                    send_value(&slot[band + p], v, f + 1);
#else
                    slot[band + p] = v;
#endif
            }
        }
        // The next frame's counts load while this frame is exchanged and classified: with
        // flags before the exchange (after it, float64 and JUNGFRAU-wide frames were up to 6 %
        // slower), with words after the halo is received, which was faster (kernels/README.md).
        u16 next[PIXELS_PER_THREAD];
        auto load_next = [&]() {
            const u16* next_frame = frames + (f + 1 < n_frames ? f + 1 : f) * frame_px + band;
#pragma unroll
            for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
                const int p = k * T + tid;
                if (p < P)
                    next[k] = next_frame[p];
            }
        };
#if !EXCHANGE_IN_WORDS
        load_next();
#endif

        // Send the edge rows, write the previous frame's stores while the neighbouring bands
        // catch up, then receive the halo rows from them. With flags, every thread acquires
        // them itself, so its own loads of the halo see the neighbours' rows without a block
        // barrier between the wait and the copy; with words, every word is its own flag. A
        // band receives frame f's halo only once every band it reads has sent it, which
        // they do after receiving frame f - 1's, their halo including this band's rows; so
        // it writes frame f + 1's edge rows (slot (f + 1) & 1) only after every read of
        // frame f - 1's in that slot: a band is at most one frame ahead, which two slots
        // allow.
        __syncthreads();
#if !EXCHANGE_IN_WORDS
        if (G > 1 && tid == 0)
            publish(&sync[b * FLAG_STRIDE], f + 1);
#endif
        if (f > 0)
            write_stores(f - 1);
#if !GAIN_SWITCHING
        // The pixels whose gain bits are not G0's (jungfrau.gain_bits_per_frame, the host's
        // twin), counted from the values already in registers while the neighbouring bands
        // catch up: a pass of its own over the frames cost the slider's re-find 6.8 ms per
        // 10 240 frames; here float64 3x3 pays 0.3 us a frame, as it did before the values,
        // and the other cases nothing measurable (kernels/README.md, "Gain bits"). A warp
        // adds only where one of its pixels has them, once, so the common case costs a vote.
        {
            unsigned int high = 0;
#pragma unroll
            for (int k = 0; k < PIXELS_PER_THREAD; ++k)
                high += k * T + tid < P && raw[k] > ADC_MASK;
            if (__any_sync(0xffffffffu, high)) {
                // Shuffles, not __reduce_add_sync, which would need sm_80.
                for (int d = 16; d > 0; d >>= 1)
                    high += __shfl_xor_sync(0xffffffffu, high, d);
                if (lane == 0)
                    atomicAdd(&n_gain_bits[f], (unsigned long long)high);
            }
        }
#endif
        if (G > 1) {
#if !EXCHANGE_IN_WORDS
            if (b > 0)
                await(&sync[(b - 1) * FLAG_STRIDE], f + 1);
            if (b < G - 1)
                await(&sync[(b + 1) * FLAG_STRIDE], f + 1);
#endif
            const int above = band - halo_lo, below = halo_hi - band_end;
            for (int k = tid; k < above + below; k += T) {
                const int idx = k < above ? halo_lo + k : band_end + (k - above);
#if EXCHANGE_IN_WORDS
                receive_value(&slot[idx], f + 1, tile[tile_index(idx, t_lo)]);
#else
                tile[tile_index(idx, t_lo)] = __ldcg(&slot[idx]);
#endif
            }
        }
#if EXCHANGE_IN_WORDS
        load_next();
#endif
        __syncthreads();

#if !COMMON_MODE
        thresholds();
#endif
        // Classify, push the quiet pixels, note the stores.
        stores = 0;
#pragma unroll
        for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
            const int p = k * T + tid;
            const int i = (band + p) / nx, j = (band + p) % nx;
            if (p < P) {
                // Every tap in raster order, as window_taps adds them, the same unrolled way
                // for every pixel: a warp with two ways would take both, and every band
                // would wait for its slowest warp (kernels/README.md, "Tiles with zeros").
                const STATE_T* corner = window_corner(tile, i, j, t_lo);
                const STATE_T vp = corner[RY * TILE_NX + RX];
                STATE_T tot = 0;
                STATE_T m = vp;
#pragma unroll
                for (int a = 0; a < CLUSTER_NY; ++a)
#pragma unroll
                    for (int c = 0; c < CLUSTER_NX; ++c) {
                        const STATE_T val = corner[a * TILE_NX + c];
                        tot += val;
                        m = val > m ? val : m;
                    }
#if GAIN_SWITCHING
                const STATE_T thr = kev_threshold(thr_r[k], cal_gain, band + p);
                const int code = gated(classify(vp, thr, m, tot, c3), status[k]);
                // arith.update_quiet_row with a status row: only G0 is pushed
                const bool push = code == QUIET_UPDATE && status[k] == ST_G0;
#else
                const STATE_T thr = thr_r[k];
                const int code = classify(vp, thr, m, tot, c3);
                const bool push = code == QUIET_UPDATE;
#endif
                if (code == TEST1_STORE || code == TEST3_STORE)
                    stores |= 1u << k;
                if (push) {
                    // arith.update_quiet_row
                    const STATE_T xv = (STATE_T)raw[k];
#if COMMON_MODE
                    const int label = __ldg(&cm_labels[band + p]);
                    const STATE_T corr = label >= 0 ? cm_centre[label] : (STATE_T)0;
                    ema(s_r[k], s2_r[k], (xv - off_r[k]) - corr, mean_r[k], mean2_r[k]);
#else
                    ema(s_r[k], s2_r[k], xv - off_r[k], mean_r[k], mean2_r[k]);
#endif
                }
                if (map >= 0)
                    maps[map * frame_px + band + p] = (u8)code;
            }
        }

        // Each warp's stores per round, for write_stores in the next frame.
#pragma unroll
        for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
            const unsigned int ballot = __ballot_sync(0xffffffffu, (stores >> k) & 1u);
            if (lane == 0 && k < rounds)
                warp_stores[k * 32 + warp] = __popc(ballot);
        }
#pragma unroll
        for (int k = 0; k < PIXELS_PER_THREAD; ++k)
            raw[k] = next[k];
    }
    __syncthreads();   // the last frame's warp_stores
    write_stores(n_frames - 1);   // the host launches at least one frame

#pragma unroll
    for (int k = 0; k < PIXELS_PER_THREAD; ++k) {
        const int p = k * T + tid;
        if (p < P) {
            s[band + p] = s_r[k];
            s2[band + p] = s2_r[k];
        }
    }

    // Per frame: clusters found, kept under the capacity, and where each band starts.
    // Data written by other blocks is read with __ldcg (from L2), never from a stale L1.
    grid_barrier(barrier, ++barriers);
    if (b == 0) {
        const int qf = (n_frames + T - 1) / T;
        const int f_lo = min(tid * qf, n_frames), f_hi = min(f_lo + qf, n_frames);
        int kept_sum = 0;
        for (int f = f_lo; f < f_hi; ++f) {
            int found = 0;
            for (int g = 0; g < G; ++g) {
                seg_start[f * G + g] = found;
                found += __ldcg(&counts[f * G + g]);
            }
            const int kept = cap < 0 ? found : min(found, cap);
            n_found[f] = found;
            n_kept[f] = kept;
            kept_sum += kept;
        }
        int total;
        int start = block_exclusive_scan(kept_sum, scan_sums, total);
        for (int f = f_lo; f < f_hi; ++f) {
            frame_start[f] = start;
            start += (int)n_kept[f];
        }
        if (tid == 0)
            *n_out = total;
    }
    grid_barrier(barrier, ++barriers);
    // A band ran out of room: the host enlarges the regions and repeats the chunk from
    // its starting state, so nothing here may reach the output or the spectra.
    if (*(volatile long long*)overflow)
        return;

    // Move this band's kept clusters to the compact output, in raster order per frame.
    int* band_first = (int*)tiles;               // [n_frames] rank of the frame's first cluster
    // The spectrum is counted per block where the tiles' memory holds it after band_first,
    // and added to the GPU's at the end: counted straight into global memory, the clusters
    // in a peak's few bins wait for each other's atomics across the whole GPU.
    unsigned int* band_hist = (unsigned int*)(band_first + n_frames);
    const bool hist_shared = n_bins > 0
        && (long long)(n_frames + n_bins) * 4
               <= 2LL * tile_size * (long long)sizeof(STATE_T);
    if (hist_shared)
        for (int i = tid; i < n_bins; i += T)
            band_hist[i] = 0;
    {
        const int qf = (n_frames + T - 1) / T;
        const int f_lo = min(tid * qf, n_frames), f_hi = min(f_lo + qf, n_frames);
        int sum = 0;
        for (int f = f_lo; f < f_hi; ++f)
            sum += __ldcg(&counts[f * G + b]);
        int total;
        int start = block_exclusive_scan(sum, scan_sums, total);
        for (int f = f_lo; f < f_hi; ++f) {
            band_first[f] = start;
            start += __ldcg(&counts[f * G + b]);
        }
    }
    __syncthreads();
    // A warp moves 32 consecutive clusters: each lane finds one cluster's row in the output,
    // then the warp copies their windows, which lie back to back in the region, as one run
    // of taps, lane i taking every 32nd, so that each access of the warp reads consecutive
    // values (a thread per window read 32 windows WINDOW_SIZE values apart: a third of 9x9's
    // stalls). Each tap's row comes from its cluster's lane by a shuffle.
    const int held = min(region_used, region_cap);
    for (int r0 = warp * 32; r0 < held; r0 += T) {
        const int r = r0 + lane;
        const long long k = (long long)b * region_cap + r;
        int dest = -1;
        if (r < held) {
            const int f = region_pos[3 * k + 2];
            const int local = __ldcg(&seg_start[f * G + b]) + (r - band_first[f]);
            if (local < __ldcg(&n_kept[f]))
                dest = __ldcg(&frame_start[f]) + local;
        }
        const int taps = min(32, held - r0) * WINDOW_SIZE;
        const WINDOW_T* w0 = region_win + ((long long)b * region_cap + r0) * WINDOW_SIZE;
        for (int t0 = 0; t0 < taps; t0 += 32) {
            const int t = t0 + lane;
            const int c = t / WINDOW_SIZE;
            const int d = __shfl_sync(0xffffffffu, dest, c & 31);
            if (t < taps && d >= 0)
                out_win[(long long)d * WINDOW_SIZE + (t - c * WINDOW_SIZE)] = w0[t];
        }
        if (dest < 0)
            continue;
        const int y = region_pos[3 * k], x = region_pos[3 * k + 1];
        out_y[dest] = y;
        out_x[dest] = x;
        if (n_bins > 0) {
            // Summed in raster order by the cluster's own thread, as the frozen finder sums
            // (the warp has just read these taps, so they come from the cache).
            const WINDOW_T* w = region_win + k * WINDOW_SIZE;
            double energy = 0.0;
            for (int t = 0; t < WINDOW_SIZE; ++t)
                energy += (double)w[t];
            const int bin = histogram_bin(energy, hist_edges, n_bins);
            if (bin >= 0) {
                if (hist_shared)
                    atomicAdd(&band_hist[bin], 1u);
                else
                    atomicAdd(&hist[bin], 1ull);
                if (pixel_spectra)
                    atomicAdd(&pixel_hist[((long long)y * nx + x) * n_bins + bin], 1u);
            }
        }
    }
    if (hist_shared) {
        __syncthreads();
        for (int i = tid; i < n_bins; i += T)
            if (band_hist[i])
                atomicAdd(&hist[i], (unsigned long long)band_hist[i]);
    }
}
