// The frozen timing model of ALGORITHM.md on an NVIDIA GPU, one launch per chunk of frames.
//
// Twin: aare_lab/_arith.py (values_row, thresholds_row, ema, update_quiet_row,
// round_half_away) and aare_lab/finders/_decision.py (classify, the window sum in raster
// order, store_window), driven like aare_lab/finders/_frozen.py. Each __device__ function
// below mirrors its namesake there operation for operation. The module is compiled with
// -fmad=false and without fast math (aare_lab/gpu/kernels.py), so every product and
// quotient rounds on its own, as on the CPU.
//
// Specialised by preprocessor defines, so that CuPy's on-disk cache serves each compiled
// variant to later processes:
//   STATE_T                  float (the centred float32 state) or double
//   WINDOW_T, ROUND_WINDOW   stored window values: int rounded half away from zero (1),
//                            or float / double kept as they are (0)
//   CLUSTER_NY, CLUSTER_NX   the cluster window, both odd
//
// Layout of one launch (cooperative, so every block is resident at once):
// - Block b owns the image rows [band_lo(b), band_lo(b + 1)), its "band", for the whole
//   launch; each pixel's pedestal state is read and written by one thread only.
// - Per frame the block computes the values v of its band from the frame-start state into
//   shared memory and publishes its first and last RY rows to a two-slot exchange buffer,
//   then waits for the bands above and below to publish theirs. So every read of a frame
//   sees the frame-start state, and no thread reads what another thread of the same frame
//   has updated. Bands are at least RY rows high, so a halo comes from the adjacent bands
//   alone; a band runs at most one frame ahead of its neighbours, which two slots allow.
// - Classification and the QUIET_UPDATE pushes of the band follow; stores are ranked in
//   raster order with a block scan and appended to the band's own region.
// - After the last frame, a grid barrier; block 0 turns the per-band counts into
//   raster-order offsets with the capacity applied; a second barrier; each block then
//   moves its clusters to their place in the compact output and bins their energies.

#ifndef STATE_T
#error "STATE_T, WINDOW_T, ROUND_WINDOW, CLUSTER_NY and CLUSTER_NX must be defined"
#endif

#define RY (CLUSTER_NY / 2)
#define RX (CLUSTER_NX / 2)
#define WINDOW_SIZE (CLUSTER_NY * CLUSTER_NX)
#define MAX_THREADS 512  // threads per block; aare_lab/gpu/engine.py launches at most this

typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

// Branch codes: aare_lab/branches.py.
#define NEG_SKIP 1
#define SHADOW 2
#define TEST1_STORE 3
#define TEST3_STORE 4
#define TEST3_SKIP 5
#define QUIET_UPDATE 6

// ---------------------------------------------------------------- the contract's arithmetic

__device__ __forceinline__ STATE_T pixel_value(u16 x, STATE_T off, STATE_T s, STATE_T N)
{
    // _arith.values_row
    STATE_T v = (STATE_T)x;
    return (v - off) - s / N;
}

__device__ __forceinline__ STATE_T pixel_threshold(STATE_T s, STATE_T s2, STATE_T rms_fixed,
                                                   int fixed, STATE_T N, STATE_T nsig)
{
    // _arith.thresholds_row
    if (fixed)
        return nsig * rms_fixed;
    const STATE_T zero = N - N;
    STATE_T resid = s / N;
    STATE_T var = s2 / N - resid * resid;
    return nsig * sqrt(var > zero ? var : zero);
}

__device__ __forceinline__ void ema(STATE_T& s, STATE_T& s2, STATE_T y, STATE_T N)
{
    // _arith.ema
    STATE_T new_s = s + (y - s / N);
    STATE_T new_s2 = s2 + (y * y - s2 / N);
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
    // _arith.round_half_away
    STATE_T a = fabs(value);
    STATE_T t = floor(a);
    if (a - t >= (STATE_T)0.5)
        t += 1;
    return value >= 0 ? t : -t;
}

__device__ __forceinline__ WINDOW_T stored_value(STATE_T v)
{
    // _decision.store_window
#if ROUND_WINDOW
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

__device__ __forceinline__ int band_lo(int b, int ny, int n_bands)
{
    return (int)(((long long)b * ny) / n_bands);
}

// ---------------------------------------------------------------- the chunk kernel

extern "C" __global__ void __launch_bounds__(MAX_THREADS, 1) frozen_chunk(
    const u16* __restrict__ frames, const int n_frames, const int ny, const int nx,
    const STATE_T* __restrict__ off, STATE_T* __restrict__ s, STATE_T* __restrict__ s2,
    const STATE_T* __restrict__ rms_fixed, const int fixed,
    const STATE_T N, const STATE_T nsig, const STATE_T c3, const int cap,
    STATE_T* exchange,            // [2][ny][nx] band edge rows, by frame parity
    unsigned int* sync,           // [gridDim.x] frames published per band, [1] barrier; zeroed
    int* counts,                  // [n_frames][gridDim.x] stores per frame and band
    const int region_cap,         // clusters each band can hold in its region
    WINDOW_T* region_win, int* region_pos,   // windows; (y, x, frame) per cluster
    int* seg_start,               // [n_frames][gridDim.x] first kept rank of a band in a frame
    int* frame_start,             // [n_frames] first output row of a frame
    long long* n_found, long long* n_kept,   // [n_frames]
    long long* n_out,             // clusters written to the output
    long long* overflow,          // set when a band found more than region_cap clusters
    WINDOW_T* out_win, int* out_pos,
    const long long* __restrict__ map_slot, u8* maps,
    const double* __restrict__ hist_edges, const int n_bins, unsigned long long* hist,
    const int pixel_spectra, unsigned int* pixel_hist)
{
    extern __shared__ __align__(16) unsigned char smem[];
    int* scan_sums = (int*)smem;                          // 64 ints
    STATE_T* tile = (STATE_T*)(smem + 256);

    const int G = gridDim.x, b = blockIdx.x, T = blockDim.x, tid = threadIdx.x;
    const int lo = band_lo(b, ny, G), hi = band_lo(b + 1, ny, G);
    const int t_lo = max(lo - RY, 0), t_hi = min(hi + RY, ny);   // tile rows
    const int P = (hi - lo) * nx;                                // band pixels
    const int band_max = (ny + G - 1) / G;
    STATE_T* thr = tile + (band_max + 2 * RY) * nx;
    u8* codes = (u8*)(thr + band_max * nx);
    const int q = (P + T - 1) / T;                // contiguous pixels per thread
    const int p_lo = min(tid * q, P), p_hi = min(p_lo + q, P);
    const long long frame_px = (long long)ny * nx;
    unsigned int* published = sync;
    unsigned int* barrier = sync + G;

    int region_used = 0;
    for (int f = 0; f < n_frames; ++f) {
        const u16* frame = frames + f * frame_px;
        STATE_T* slot = exchange + (f & 1) * frame_px;
        if (f + 1 < n_frames && p_lo < p_hi)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(frame + frame_px + lo * nx + p_lo));

        // Values and thresholds of the band, from the frame-start state.
        for (int p = p_lo; p < p_hi; ++p) {
            const int i = lo + p / nx;
            const long long idx = (long long)lo * nx + p;
            const STATE_T sp = s[idx];
            const STATE_T v = pixel_value(frame[idx], off[idx], sp, N);
            tile[(i - t_lo) * nx + p % nx] = v;
            thr[p] = pixel_threshold(sp, s2[idx], rms_fixed[idx], fixed, N, nsig);
            if (G > 1 && (i < lo + RY || i >= hi - RY))
                slot[idx] = v;
        }

        // Exchange the halo rows with the neighbouring bands.
        if (G > 1) {
            __syncthreads();
            if (tid == 0) {
                __threadfence();
                *(volatile unsigned int*)&published[b] = f + 1;
                if (b > 0)
                    while (*(volatile unsigned int*)&published[b - 1] < (unsigned int)(f + 1)) {
                    }
                if (b < G - 1)
                    while (*(volatile unsigned int*)&published[b + 1] < (unsigned int)(f + 1)) {
                    }
                __threadfence();
            }
            __syncthreads();
            const int above = (lo - t_lo) * nx, below = (t_hi - hi) * nx;
            for (int k = tid; k < above + below; k += T) {
                const int i = k < above ? t_lo + k / nx : hi + (k - above) / nx;
                const int j = k < above ? k % nx : (k - above) % nx;
                tile[(i - t_lo) * nx + j] = __ldcg(&slot[(long long)i * nx + j]);
            }
        }
        __syncthreads();

        // Classify, push the quiet pixels, count the stores.
        int stores = 0;
        for (int p = p_lo; p < p_hi; ++p) {
            const int i = lo + p / nx, j = p % nx;
            const STATE_T vp = tile[(i - t_lo) * nx + j];
            STATE_T tot = 0;
            STATE_T m = vp;
            for (int y = max(i - RY, 0); y <= min(i + RY, ny - 1); ++y) {
                const STATE_T* row = tile + (y - t_lo) * nx;
                for (int x = max(j - RX, 0); x <= min(j + RX, nx - 1); ++x) {
                    const STATE_T val = row[x];
                    tot += val;
                    m = val > m ? val : m;
                }
            }
            const int code = classify(vp, thr[p], m, tot, c3);
            codes[p] = (u8)code;
            stores += code == TEST1_STORE || code == TEST3_STORE;
            if (code == QUIET_UPDATE) {
                // _arith.update_quiet_row
                const long long idx = (long long)lo * nx + p;
                STATE_T sp = s[idx], s2p = s2[idx];
                const STATE_T xv = (STATE_T)frame[idx];
                ema(sp, s2p, xv - off[idx], N);
                s[idx] = sp;
                s2[idx] = s2p;
            }
        }
        const long long slot_f = map_slot[f];
        if (slot_f >= 0)
            for (int p = p_lo; p < p_hi; ++p)
                maps[slot_f * frame_px + (long long)lo * nx + p] = codes[p];

        // Rank the stores in raster order and append them to the band's region.
        int band_stores;
        int rank = region_used + block_exclusive_scan(stores, scan_sums, band_stores);
        for (int p = p_lo; p < p_hi && stores > 0; ++p) {
            if (codes[p] != TEST1_STORE && codes[p] != TEST3_STORE)
                continue;
            --stores;
            if (rank >= region_cap) {
                *overflow = 1;
                ++rank;
                continue;
            }
            const int i = lo + p / nx, j = p % nx;
            const long long k = (long long)b * region_cap + rank;
            WINDOW_T* w = region_win + k * WINDOW_SIZE;
            for (int a = 0; a < CLUSTER_NY; ++a) {
                const int yy = i - RY + a;
                for (int c = 0; c < CLUSTER_NX; ++c) {
                    const int xx = j - RX + c;
                    w[a * CLUSTER_NX + c] = (0 <= yy && yy < ny && 0 <= xx && xx < nx)
                        ? stored_value(tile[(yy - t_lo) * nx + xx]) : (WINDOW_T)0;
                }
            }
            region_pos[3 * k] = i;
            region_pos[3 * k + 1] = j;
            region_pos[3 * k + 2] = f;
            ++rank;
        }
        if (tid == 0)
            counts[f * G + b] = band_stores;
        region_used += band_stores;
        __syncthreads();
    }

    // Per frame: clusters found, kept under the capacity, and where each band starts.
    // Data written by other blocks is read with __ldcg (from L2), never from a stale L1.
    grid_barrier(barrier, 1);
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
    grid_barrier(barrier, 2);
    // A band ran out of room: the host enlarges the regions and repeats the chunk from
    // its starting state, so nothing here may reach the output or the spectra.
    if (*(volatile long long*)overflow)
        return;

    // Move this band's kept clusters to the compact output, in raster order per frame.
    int* band_first = (int*)(smem + 256);        // [n_frames] rank of the frame's first cluster
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
    const int held = min(region_used, region_cap);
    for (int r = tid; r < held; r += T) {
        const long long k = (long long)b * region_cap + r;
        const int f = region_pos[3 * k + 2];
        const int local = __ldcg(&seg_start[f * G + b]) + (r - band_first[f]);
        if (local >= __ldcg(&n_kept[f]))
            continue;
        const long long dest = __ldcg(&frame_start[f]) + local;
        const WINDOW_T* w = region_win + k * WINDOW_SIZE;
        WINDOW_T* o = out_win + dest * WINDOW_SIZE;
        double energy = 0.0;
        for (int t = 0; t < WINDOW_SIZE; ++t) {
            o[t] = w[t];
            energy += (double)w[t];
        }
        const int y = region_pos[3 * k], x = region_pos[3 * k + 1];
        out_pos[3 * dest] = y;
        out_pos[3 * dest + 1] = x;
        out_pos[3 * dest + 2] = f;
        if (n_bins > 0) {
            const int bin = histogram_bin(energy, hist_edges, n_bins);
            if (bin >= 0) {
                atomicAdd(&hist[bin], 1ull);
                if (pixel_spectra)
                    atomicAdd(&pixel_hist[((long long)y * nx + x) * n_bins + bin], 1u);
            }
        }
    }
}
