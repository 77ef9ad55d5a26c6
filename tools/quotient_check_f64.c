// Check, on the CPU, the kernel's branch-free float64 quotient against IEEE division where
// it is hardest: quotients within a few 2N-ths of an ulp of a rounding midpoint.
//
// The kernel forms r = RN(1/N) once and finishes every s / N as q = RN(s·r),
// q' = fma(fma(-q, N, s), r, q) (kernels/frozen.cu, corrected_quotient). For float32,
// tools/quotient_check.py compares that with division for every significand. float64 has
// 2^52 significands per binade, too many, so this program aims at the only places the
// correction can go wrong: s / N next to a midpoint m of two adjacent doubles. With s in
// [1, 2) = S·2^-52 and the quotient in [2^e, 2^(e+1)), 2^(1-e)·S - N·(2j + 1) = c is odd
// and s / N lies c / (2N) ulp from the j-th midpoint; for each small odd c the S with
// 2^(1-e)·S ≡ c (mod N) are an arithmetic progression, sampled at random. Exact quotients
// (s = N·q, c = 0) and uniform significands are checked too. Scaling s by a power of two
// scales every step exactly, so [1, 2) stands for every normal s the kernel corrects.
//
// Build and run (x86-64 with FMA; division and fma() are IEEE's, correctly rounded):
//   gcc -O2 -mfma -ffp-contract=off -o /tmp/qc64 tools/quotient_check_f64.c -lm
//   /tmp/qc64 [-u] [samples per N and c] [N ...]   (default: 20000, odd N 3..2001 and more)
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

static uint64_t state = 20261202;

static uint64_t next_random(void)   // splitmix64
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int uncorrected = 0;   // -u: q alone, to show that the check can fail

static double corrected(double s, double n, double r)
{
    const double q = s * r;
    return uncorrected ? q : fma(fma(-q, n, s), r, q);
}

static uint64_t bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static long long mismatches = 0, checked = 0;

static void check(uint64_t S, uint64_t n, double r)
{
    const double s = ldexp((double)S, -52), N = (double)n;
    const double want = s / N, got = corrected(s, N, r);
    ++checked;
    if (bits(want) != bits(got)) {
        if (mismatches < 20)
            printf("MISMATCH N = %llu s = %a: s / N = %a, corrected %a\n",
                   (unsigned long long)n, s, want, got);
        ++mismatches;
    }
}

static uint64_t pow2_mod(int k, uint64_t n)
{
    uint64_t x = 1 % n;
    for (int i = 0; i < k; ++i)
        x = (x * 2) % n;
    return x;
}

static uint64_t inverse_mod(uint64_t a, uint64_t n)   // n odd, gcd(a, n) = 1
{
    long long t = 0, new_t = 1, r = (long long)n, new_r = (long long)(a % n);
    while (new_r) {
        const long long q = r / new_r, tt = t - q * new_t, rr = r - q * new_r;
        t = new_t, new_t = tt, r = new_r, new_r = rr;
    }
    return (uint64_t)(t < 0 ? t + (long long)n : t);
}

static void check_n(uint64_t n, int samples)
{
    const double N = (double)n, r = 1.0 / N;
    const uint64_t lo = 1ull << 52, hi = 1ull << 53;
    // Near midpoints: for both binades s / N can fall in, each small odd c.
    int e_hi;
    frexp(1.0 / N, &e_hi);   // 1 / N in [2^(e_hi-1), 2^e_hi)
    for (int e = e_hi - 1; e <= e_hi; ++e) {
        const uint64_t inv = inverse_mod(pow2_mod(1 - e, n), n);
        for (long long c = -7; c <= 7; c += 2) {
            const uint64_t residue = (uint64_t)(((c % (long long)n) + (long long)n) % (long long)n);
            const uint64_t first_S = lo + ((residue * inv) % n + n - lo % n) % n;
            const uint64_t count = (hi - first_S + n - 1) / n;
            for (int i = 0; i < samples; ++i) {
                const uint64_t S = first_S + (next_random() % count) * n;
                int e_q;
                frexp(ldexp((double)S, -52) / N, &e_q);
                if (e_q - 1 == e)   // the binade this c was aimed at
                    check(S, n, r);
            }
        }
    }
    // Exact quotients (S = N·Q with 53 bits) and uniform significands.
    const uint64_t q_lo = (lo + n - 1) / n, q_hi = (hi - 1) / n;
    for (int i = 0; i < samples; ++i) {
        if (q_hi >= q_lo)
            check((q_lo + next_random() % (q_hi - q_lo + 1)) * n, n, r);
        check(lo + next_random() % lo, n, r);
    }
}

int main(int argc, char** argv)
{
    if (argc > 1 && !strcmp(argv[1], "-u")) {
        uncorrected = 1;
        --argc, ++argv;
    }
    const int samples = argc > 1 ? atoi(argv[1]) : 20000;
    long long n_values = 0;
    if (argc > 2) {
        for (int i = 2; i < argc; ++i, ++n_values)
            check_n(strtoull(argv[i], NULL, 10), samples);
    } else {
        for (uint64_t n = 3; n <= 2001; n += 2, ++n_values)
            check_n(n, samples);
        for (int i = 0; i < 200; ++i, ++n_values)   // odd N up to 2^17 and beyond 2^24
            check_n((next_random() % (1ull << (i < 100 ? 17 : 40))) | 1, samples);
    }
    printf("{\"odd_N\": %lld, \"quotients_checked\": %lld, \"mismatches\": %lld}\n", n_values,
           checked, mismatches);
    return mismatches ? 1 : 0;
}
