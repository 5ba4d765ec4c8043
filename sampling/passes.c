/* sampling/passes.c - the sampler's passes over the whole vocabulary (sampling/passes.h): each
 * is one C body compiled as the scalar reference, for AVX2 and for AVX-512, or written in
 * intrinsics beside that body where the compiler's vectorisation is slower; every variant gives
 * the scalar reference's bits (test-sampling-chains compares them). The sampler (sampling.c,
 * sampling/rank.c, sampling/candidates.c) takes them through the getters at init. */
#include "sampling/passes.h"

#include "kernels/cpu.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* ---- the fast walk's exp: one body, three instruction sets ----------------------------------- */

__attribute__((always_inline)) static inline void approx_exp_n_body(double *restrict w,
                                                                    const float *restrict l,
                                                                    float lmax, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int k = 0; k < 16; k++) w[i + k] = (double)l[i + k] - lmax;
        for (int k = 0; k < 16; k++) w[i + k] = w[i + k] > -708.0 ? w[i + k] : -708.0;
        for (int k = 0; k < 16; k++) w[i + k] = g3_approx_exp(w[i + k]);
    }
    for (; i < n; i++) w[i] = g3_approx_weight(l[i], lmax);
}

__attribute__((always_inline)) static inline void gumbel_bits_n_body(uint64_t key,
                                                                     const int32_t *restrict ids,
                                                                     uint32_t *restrict out,
                                                                     int n) {
    for (int i = 0; i < n; i++)
        out[i] = (uint32_t)(g3_rng_bits(key, G3_RNG_GUMBEL, (uint32_t)ids[i]) >> 32);
}

/* Top-k's heap scan (g3_block_scan_get), the scalar reference: from j, blocks of 16 logits;
 * *bad gathers whether any value of a block it reads is NaN or +-inf; returns the start of the
 * first block with a value >= worst, or the first j with fewer than 16 values left. */
static int block_scan_scalar(const float *l, int j, int n, float worst, uint32_t *bad) {
    for (; j + 16 <= n; j += 16) {
        int hits = 0;
        uint32_t b = 0;
        for (int k = 0; k < 16; k++) {
            b |= g3_non_finite(l[j + k]);
            hits += l[j + k] >= worst;
        }
        *bad |= b;
        if (hits) return j;
    }
    return j;
}

/* The band scan (g3_band_scan_get): a range test is one unsigned comparison of x - lo against
 * hi - lo; an empty range becomes [0xFFFF, 0xFFFF], which no bucket reaches. */
static void band_ranges(int *a1, int *a2) {
    if (*a2 < *a1) *a1 = *a2 = 0xFFFF;
}

/* The scalar reference. */
static int band_scan_scalar(const uint16_t *bk, int n, int g1, int g2, int a1, int a2,
                            int32_t *out, int *inner) {
    band_ranges(&a1, &a2);
    const uint16_t lo_g = (uint16_t)g1, span_g = (uint16_t)(g2 - g1);
    const uint16_t lo_a = (uint16_t)a1, span_a = (uint16_t)(a2 - a1);
    int m = 0, in_a = 0;
    for (int i = 0; i < n; i++) {
        int a = (uint16_t)(bk[i] - lo_a) <= span_a;
        out[m] = i;
        m += ((uint16_t)(bk[i] - lo_g) <= span_g) & !a;
        in_a += a;
    }
    *inner = in_a;
    return m;
}

/* Top-p's fixed-point masses, the vectorisable step (g3_mass_round_n_get), the exponentials not
 * stored: q[i] = round(g3_approx_exp(max(l[i] - lmax, -708)) 2^40), tie[i] = 1 where the scaled
 * value x lies within g3_mass_tie_window(x) of a rounding tie (g3_mass_fix_ties takes libm's exp
 * there), and *n_tie how many did; returns the sum of q. Blocks of 16, each step its own loop;
 * signed conversions (the value is below 2^41), which AVX-512 has for packed doubles. */
__attribute__((always_inline)) static inline uint64_t mass_round_n_body(
    const float *restrict l, float lmax, uint64_t *restrict q, uint64_t *restrict tie, int n,
    int *n_tie) {
    uint64_t lane[16] = {0}, ties[16] = {0}, total = 0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        double x[16];
        for (int k = 0; k < 16; k++) x[k] = (double)l[i + k] - lmax;
        for (int k = 0; k < 16; k++) x[k] = x[k] > -708.0 ? x[k] : -708.0;
        for (int k = 0; k < 16; k++) x[k] = g3_approx_exp(x[k]) * 0x1p40;
        /* x in [0, 2^40]: the casts' values by floor and bits (AVX2 has no conversion of
         * doubles to 64-bit integers) */
        for (int k = 0; k < 16; k++) q[i + k] = g3_u64_of_small_double(g3_floor_small(x[k] + 0.5));
        for (int k = 0; k < 16; k++) {
            double frac = x[k] - g3_floor_small(x[k]) - 0.5, win = g3_mass_tie_window(x[k]);
            tie[i + k] = (frac <= win) & (frac >= -win); /* frac exact */
        }
        for (int k = 0; k < 16; k++) lane[k] += q[i + k];
        for (int k = 0; k < 16; k++) ties[k] += tie[i + k];
    }
    for (; i < n; i++) {
        double x = g3_approx_weight(l[i], lmax) * 0x1p40;
        q[i] = (uint64_t)(int64_t)(x + 0.5);
        double frac = x - (double)(int64_t)x - 0.5, win = g3_mass_tie_window(x);
        tie[i] = (frac <= win) & (frac >= -win);
        total += q[i];
        ties[0] += tie[i];
    }
    for (int k = 0; k < 16; k++) total += lane[k];
    uint64_t count = 0;
    for (int k = 0; k < 16; k++) count += ties[k];
    *n_tie = (int)count;
    return total;
}

uint64_t g3_fixed_mass(float l, float lmax) {
    double d = (double)l - (double)lmax;
    if (!(d >= -29.0)) return 0;
    return (uint64_t)(exp(d) * 0x1p40 + 0.5); /* round half up; the value is in [0, 2^40] */
}

uint64_t g3_mass_fix_ties(const float *l, float lmax, uint64_t *q, const uint64_t *tie, int n,
                          int n_tie, uint64_t total) {
    for (int j = 0; j < n && n_tie > 0; j++)
        if (tie[j]) {
            total -= q[j];
            total += q[j] = g3_fixed_mass(l[j], lmax);
            n_tie--;
        }
    return total;
}

static uint64_t mass_round_n_scalar(const float *restrict l, float lmax, uint64_t *restrict q,
                                    uint64_t *restrict tie, int n, int *n_tie) {
    return mass_round_n_body(l, lmax, q, tie, n, n_tie);
}

/* The Gumbel screen (g3_gumbel_screen_n_get), the scalar reference: blocks of 16, each step in
 * its own loop (the AVX2 build vectorises them). */
__attribute__((always_inline)) static inline void gumbel_screen_n_body(
    uint64_t key, const uint64_t *restrict hashes, const float *restrict l, float lmax,
    float thr, uint8_t *restrict pass, int n) {
    const uint64_t k1 = g3_mix64_first(key);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t b[16];
        for (int k = 0; k < 16; k++) b[k] = (uint32_t)(g3_mix64_rest(k1 ^ hashes[i + k]) >> 32);
        for (int k = 0; k < 16; k++)
            pass[i + k] = (l[i + k] - lmax) + g3_gumbel_upper(b[k]) >= thr;
    }
    for (; i < n; i++) {
        uint32_t b = (uint32_t)(g3_mix64_rest(k1 ^ hashes[i]) >> 32);
        pass[i] = (l[i] - lmax) + g3_gumbel_upper(b) >= thr;
    }
}

/* Top-n-sigma's sums over l[0..n), -inf skipped, in 16 interleaved lanes:
 * out = {max, max |l|, mean, sum of (l - mean)^2, count}; compiled per instruction set like
 * g3_approx_exp_n_get (the same operations in the same order: the same bits). */
__attribute__((always_inline)) static inline void sigma_sums_n_body(const float *restrict l,
                                                                    int n, double *out) {
    double sum[16] = {0}, var[16] = {0}, total = 0, z = 0;
    float mx[16], ab[16];
    int32_t cnt[16] = {0};
    for (int k = 0; k < 16; k++) mx[k] = -INFINITY, ab[k] = 0;
    int j = 0, nf = 0;
    for (; j + 16 <= n; j += 16) { /* one simple loop per operation: each vectorises */
        float x[16];
        for (int k = 0; k < 16; k++) x[k] = l[j + k] != -INFINITY ? l[j + k] : 0.0f;
        for (int k = 0; k < 16; k++) cnt[k] += l[j + k] != -INFINITY;
        for (int k = 0; k < 16; k++) mx[k] = l[j + k] > mx[k] ? l[j + k] : mx[k];
        for (int k = 0; k < 16; k++) ab[k] = fabsf(x[k]) > ab[k] ? fabsf(x[k]) : ab[k];
        for (int k = 0; k < 16; k++) sum[k] += (double)x[k];
    }
    double lmax = -INFINITY, amax = 0;
    for (int i = j; i < n; i++)
        if (l[i] != -INFINITY) {
            total += l[i];
            nf++;
            lmax = l[i] > lmax ? l[i] : lmax;
            amax = fabs((double)l[i]) > amax ? fabs((double)l[i]) : amax;
        }
    for (int k = 0; k < 16; k++) {
        total += sum[k];
        nf += cnt[k];
        lmax = mx[k] > lmax ? mx[k] : lmax;
        amax = ab[k] > amax ? ab[k] : amax;
    }
    double mean = nf > 0 ? total / nf : 0;
    for (j = 0; j + 16 <= n; j += 16) {
        double d[16];
        for (int k = 0; k < 16; k++) d[k] = (double)l[j + k] - mean;
        for (int k = 0; k < 16; k++) d[k] = l[j + k] != -INFINITY ? d[k] : 0.0;
        for (int k = 0; k < 16; k++) var[k] += d[k] * d[k];
    }
    for (int i = j; i < n; i++)
        if (l[i] != -INFINITY) z += ((double)l[i] - mean) * ((double)l[i] - mean);
    for (int k = 0; k < 16; k++) z += var[k];
    out[0] = lmax;
    out[1] = amax;
    out[2] = mean;
    out[3] = z;
    out[4] = nf;
}

/* The sum of 16 lanes as a tree, lane k with k + 8, then k + 4, k + 2, k + 1: four dependent
 * additions, not sixteen (a block's sum in a chain of sixteen held the float tier's pass back
 * by a fifth on Zen 3). */
static inline double tree_sum16(const double *lane) {
    double t[8];
    for (int k = 0; k < 8; k++) t[k] = lane[k] + lane[k + 8];
    for (int k = 0; k < 4; k++) t[k] += t[k + 4];
    for (int k = 0; k < 2; k++) t[k] += t[k + 2];
    return t[0] + t[1];
}

/* The double tier's block sums (g3_exp_block_sums_get): approx_exp_n_body's steps, summed per
 * block of 64 in 16 lanes instead of stored. */
__attribute__((always_inline)) static inline double exp_block_sums_body(const float *restrict l,
                                                                        float lmax, int n,
                                                                        double *restrict blocks) {
    int nb = n / 64;
    double total = 0;
    for (int b = 0; b < nb; b++) {
        double acc[16] = {0};
        for (int q = 0; q < 4; q++) {
            const float *x = l + (size_t)b * 64 + q * 16;
            double w[16];
            for (int k = 0; k < 16; k++) w[k] = (double)x[k] - lmax;
            for (int k = 0; k < 16; k++) w[k] = w[k] > -708.0 ? w[k] : -708.0;
            for (int k = 0; k < 16; k++) w[k] = g3_approx_exp(w[k]);
            for (int k = 0; k < 16; k++) acc[k] += w[k];
        }
        double sum = tree_sum16(acc);
        blocks[b] = sum;
        total += sum;
    }
    if (nb * 64 < n) {
        double sum = 0;
        for (int i = nb * 64; i < n; i++) sum += g3_approx_weight(l[i], lmax);
        blocks[nb] = sum;
        total += sum;
    }
    return total;
}

/* The rank view's moments of 16 tokens into their float lanes: lanes[k] += g3_view_moment(...). */
__attribute__((always_inline)) static inline void moment_lanes_plain(const int32_t *b,
                                                                     const float *x,
                                                                     const float *p,
                                                                     float *lanes) {
    float t[16];
    for (int k = 0; k < 16; k++) t[k] = g3_view_moment(x[k], p[k], b[k]);
    for (int k = 0; k < 16; k++) lanes[k] += t[k];
}

/* The units of tokens [k, end) of a block added to their buckets (scalar: a histogram), the odd
 * tokens' to a second sum per bucket so that two tokens in a row never add to one place. */
__attribute__((always_inline)) static inline void view_add_units(struct g3_view_sum *restrict sums,
                                                                 const uint16_t *bb,
                                                                 const uint32_t *unit, int k,
                                                                 int end) {
#pragma GCC unroll 8 /* the AVX-512 build otherwise keeps a loop of two tokens: 6% slower */
    for (; k + 2 <= end; k += 2) {
        sums[bb[k]].unit += unit[k];
        sums[bb[k + 1]].odd += unit[k + 1];
    }
    if (k < end) sums[bb[k]].unit += unit[k];
}

/* The rank view's pass (g3_rank_view_get), a block of tokens at a time: each step of the view's
 * helpers (g3_view_*) as its own loop over 16 lanes (vectorised), the units kept for the block
 * and added to their buckets VIEW_LAG tokens behind the steps, so that the scalar adds overlap
 * the vector steps (all of the block's after its steps took a sixth longer on Zen 4); typical's
 * moments summed in 16 float lanes a block, not per bucket, the block's added in double at its
 * end (a conversion per token cost the AVX2 pass an eighth). Both measured, not modelled: see
 * README. With bucket NULL the moment alone (the same steps and lanes: the same bits). */
enum { VIEW_LAG = 64 };
typedef void moment_lanes_fn(const int32_t *b, const float *x, const float *p, float *lanes);
__attribute__((always_inline)) static inline void rank_view_steps(
    const float *restrict l, float lmax, int n, uint16_t *restrict bucket,
    struct g3_view_sum *restrict sums, double *moment, moment_lanes_fn *moment_lanes) {
    enum { BLOCK = 1024 };
    uint32_t unit[BLOCK];
    double lanes[16] = {0}, tail = 0;
    for (int i0 = 0; i0 < n; i0 += BLOCK) {
        float block_lanes[16] = {0};
        const int m = n - i0 < BLOCK ? n - i0 : BLOCK;
        const float *lb = l + i0;
        uint16_t *bb = bucket ? bucket + i0 : NULL;
        int j = 0;
        for (; j + 16 <= m; j += 16) {
            int32_t b[16];
            float x[16], p[16];
            for (int k = 0; k < 16; k++) b[k] = g3_view_bucket(lb[j + k], lmax);
            for (int k = 0; k < 16; k++) x[k] = g3_view_reduced(lb[j + k], lmax, b[k]);
            for (int k = 0; k < 16; k++) p[k] = g3_view_expm1(x[k]);
            for (int k = 0; k < 16; k++) unit[j + k] = g3_view_unit(p[k], b[k]);
            if (moment) moment_lanes(b, x, p, block_lanes); /* only typical reads them */
            if (!bucket) continue;
            for (int k = 0; k < 16; k++) bb[j + k] = (uint16_t)b[k];
            if (j >= VIEW_LAG) view_add_units(sums, bb, unit, j - VIEW_LAG, j - VIEW_LAG + 16);
        }
        for (int k = 0; k < 16; k++) lanes[k] += (double)block_lanes[k];
        const int added = j >= VIEW_LAG ? j - VIEW_LAG : 0;
        for (; j < m; j++) {
            int b = g3_view_bucket(lb[j], lmax);
            float x = g3_view_reduced(lb[j], lmax, b), p = g3_view_expm1(x);
            unit[j] = g3_view_unit(p, b);
            if (moment) tail += (double)g3_view_moment(x, p, b);
            if (bucket) bb[j] = (uint16_t)b;
        }
        if (bucket) view_add_units(sums, bb, unit, added, m);
    }
    for (int b = 0; bucket && b < G3_VIEW_BUCKETS; b++) {
        sums[b].unit += sums[b].odd;
        sums[b].odd = 0;
    }
    if (moment) *moment = tree_sum16(lanes) + tail;
}
/* rank_view_steps twice, so that each copy knows whether it stores buckets (the test left in
 * the whole pass's loop cost it 2%) */
__attribute__((always_inline)) static inline void rank_view_body(
    const float *restrict l, float lmax, int n, uint16_t *restrict bucket,
    struct g3_view_sum *restrict sums, double *moment, moment_lanes_fn *moment_lanes) {
    if (bucket)
        rank_view_steps(l, lmax, n, bucket, sums, moment, moment_lanes);
    else
        rank_view_steps(l, lmax, n, NULL, NULL, moment, moment_lanes);
}

static void rank_view_scalar(const float *restrict l, float lmax, int n,
                             uint16_t *restrict bucket, struct g3_view_sum *restrict sums,
                             double *moment) {
    rank_view_body(l, lmax, n, bucket, sums, moment, moment_lanes_plain);
}

static double exp_block_sums_scalar(const float *restrict l, float lmax, int n,
                                    double *restrict blocks) {
    return exp_block_sums_body(l, lmax, n, blocks);
}

/* The float tier's block sums (g3_expf_block_sums_get): one simple loop per operation over 16
 * lanes, so that each vectorises; `fused` as g3_approx_expf takes it. */
__attribute__((always_inline)) static inline double expf_block_sums_body(const float *restrict l,
                                                                         float lmax, int n,
                                                                         double *restrict blocks,
                                                                         int fused) {
    int nb = n / 64;
    double total = 0;
    for (int b = 0; b < nb; b++) {
        float acc[16] = {0};
        for (int q = 0; q < 4; q++) {
            const float *x = l + (size_t)b * 64 + q * 16;
            float w[16];
            for (int k = 0; k < 16; k++) w[k] = g3_approx_expf(x[k], lmax, fused);
            for (int k = 0; k < 16; k++) acc[k] += w[k];
        }
        double lane[16];
        for (int k = 0; k < 16; k++) lane[k] = acc[k];
        double sum = tree_sum16(lane);
        blocks[b] = sum;
        total += sum;
    }
    if (nb * 64 < n) {
        double sum = 0;
        for (int i = nb * 64; i < n; i++) sum += g3_approx_expf(l[i], lmax, fused);
        blocks[nb] = sum;
        total += sum;
    }
    return total;
}

/* g3_exp_rough_sums (g3_exp_coarse_sums with coarse): blocks of 64 in 16 float lanes of 4
 * terms, each lane then added to its double lane (no sum per block, whose chain of 16 dependent
 * additions would bound the pass), a second set of lanes for l >= at. */
__attribute__((always_inline)) static inline float rough_term(float l, float lmax, int coarse) {
    return coarse ? g3_exp_coarse(l, lmax) : g3_exp_rough(l, lmax);
}
__attribute__((always_inline)) static inline double exp_rough_sums_body(const float *restrict l,
                                                                        float lmax, int n,
                                                                        float at,
                                                                        double *at_least,
                                                                        int coarse) {
    double lane[16] = {0}, lane_at[16] = {0};
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        float acc[16] = {0}, acc_at[16] = {0};
        for (int q = 0; q < 4; q++) {
            const float *x = l + i + q * 16;
            float w[16];
            for (int k = 0; k < 16; k++) w[k] = rough_term(x[k], lmax, coarse);
            for (int k = 0; k < 16; k++) acc[k] += w[k];
            for (int k = 0; k < 16; k++) acc_at[k] += g3_f32_select((uint32_t)-(int32_t)(x[k] >= at), w[k], 0.0f);
        }
        for (int k = 0; k < 16; k++) lane[k] += acc[k];
        for (int k = 0; k < 16; k++) lane_at[k] += acc_at[k];
    }
    double total = 0, above = 0;
    for (; i < n; i++) {
        double w = rough_term(l[i], lmax, coarse);
        total += w;
        above += l[i] >= at ? w : 0.0;
    }
    for (int k = 0; k < 16; k++) total += lane[k];
    for (int k = 0; k < 16; k++) above += lane_at[k];
    *at_least = above;
    return total;
}

static double exp_rough_sums_scalar(const float *restrict l, float lmax, int n, float at,
                                    double *at_least) {
    return exp_rough_sums_body(l, lmax, n, at, at_least, 0);
}
static double exp_coarse_sums_scalar(const float *restrict l, float lmax, int n, float at,
                                     double *at_least) {
    return exp_rough_sums_body(l, lmax, n, at, at_least, 1);
}

static double expf_block_sums_scalar(const float *restrict l, float lmax, int n,
                                     double *restrict blocks) {
    return expf_block_sums_body(l, lmax, n, blocks, 0);
}
double g3_expf_block_sums_fused(const float *restrict l, float lmax, int n,
                                double *restrict blocks) {
    return expf_block_sums_body(l, lmax, n, blocks, 1);
}
static double expf_weight_scalar(float l, float lmax) { return g3_approx_expf(l, lmax, 0); }

static void sigma_sums_n_scalar(const float *restrict l, int n, double *out) {
    sigma_sums_n_body(l, n, out);
}

static void gumbel_screen_n_scalar(uint64_t key, const uint64_t *restrict hashes,
                                   const float *restrict l, float lmax, float thr,
                                   uint8_t *restrict pass, int n) {
    gumbel_screen_n_body(key, hashes, l, lmax, thr, pass, n);
}

static void gumbel_bits_n_scalar(uint64_t key, const int32_t *restrict ids, uint32_t *restrict out,
                                 int n) {
    gumbel_bits_n_body(key, ids, out, n);
}

static void approx_exp_n_scalar(double *restrict w, const float *restrict l, float lmax, int n) {
    approx_exp_n_body(w, l, lmax, n);
}

/* ---- the copies of the whole vocabulary (g3_copy_check_get, g3_copy_divide_get, g3_max_n_get):
 * one body each, three instruction sets. At the baseline's 128 bits the copy that divides was a
 * quarter of a Gumbel draw at temperature 0.7; copies, divisions and maxima are exact, so every
 * build gives the same bits. */

/* dst = src; returns 1 if every value is finite. Fixed-size inner blocks so that the compiler
 * vectorises it at -O2. */
__attribute__((always_inline)) static inline int copy_check_body(float *restrict dst,
                                                                 const float *restrict src,
                                                                 int n) {
    uint32_t bad = 0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t b = 0;
        for (int k = 0; k < 16; k++) {
            dst[i + k] = src[i + k];
            b |= g3_non_finite(src[i + k]);
        }
        bad |= b;
    }
    for (; i < n; i++) {
        dst[i] = src[i];
        bad |= g3_non_finite(src[i]);
    }
    return bad == 0;
}

/* The largest of l[0..n) in 16 lanes by position mod 16, the lanes then in order and the tail
 * last: g3_cand_max's order, so that a -0 against a +0 comes out the same (NaN-free l). */
__attribute__((always_inline)) static inline float max_n_body(const float *l, int n) {
    float lane[16];
    for (int k = 0; k < 16; k++) lane[k] = -INFINITY;
    int j = 0;
    for (; j + 16 <= n; j += 16)
        for (int k = 0; k < 16; k++) lane[k] = l[j + k] > lane[k] ? l[j + k] : lane[k];
    float m = -INFINITY;
    for (int k = 0; k < 16; k++) m = lane[k] > m ? lane[k] : m;
    for (; j < n; j++) m = l[j] > m ? l[j] : m;
    return m;
}

/* The lowest i with l[i] == m, the maximum of l[0..n), from the lanes of a pass that kept, per
 * lane k, its largest value and where it first occurred (lane_at, updated only on a strictly
 * larger value), the tail from `tail` on read again: the first token at the maximum, which the
 * Gumbel draw starts from, without a second pass. -1 for n = 0. */
static inline int first_at_max(const float *l, int n, float m, const float *lane,
                               const int32_t *lane_at, int tail) {
    int first = n;
    for (int k = 0; k < 16; k++)
        if (lane[k] == m && lane_at[k] < first) first = lane_at[k];
    for (int i = tail; i < first && i < n; i++)
        if (l[i] == m) return i;
    return first < n ? first : -1;
}

/* The end of a pass that kept 16 lanes (lane, lane_at as first_at_max reads them) over l[0, tail):
 * *max = the lanes' maximum, lane 0 first, then l[tail..n) in order (max_n_body's order, so a
 * -0 against a +0 comes out the same), and *first the first position at it. */
static inline void lanes16_finish(const float *l, int n, int tail, const float *lane,
                                  const int32_t *lane_at, float *max, int *first) {
    float m = -INFINITY;
    for (int k = 0; k < 16; k++) m = lane[k] > m ? lane[k] : m;
    for (int j = tail; j < n; j++) m = l[j] > m ? l[j] : m;
    *max = m;
    *first = first_at_max(l, n, m, lane, lane_at, tail);
}

/* max_n_body and copy_check_body's test in one read-only pass: returns 1 if every value is
 * finite, and *max = max_n_body(l, n) (meaningless otherwise): the call's first look at the
 * caller's logits finds their maximum on the way. */
__attribute__((always_inline)) static inline int check_max_body(const float *l, int n,
                                                                float *max, int *first) {
    float lane[16];
    int32_t lane_at[16];
    for (int k = 0; k < 16; k++) lane[k] = -INFINITY, lane_at[k] = k;
    uint32_t bad = 0;
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        uint32_t b = 0;
        for (int k = 0; k < 16; k++) {
            int above = l[j + k] > lane[k];
            lane[k] = above ? l[j + k] : lane[k];
            lane_at[k] = above ? j + k : lane_at[k];
            b |= g3_non_finite(l[j + k]);
        }
        bad |= b;
    }
    for (int k = j; k < n; k++) bad |= g3_non_finite(l[k]);
    lanes16_finish(l, n, j, lane, lane_at, max, first);
    return bad == 0;
}

/* dst = min(src / t, FLT_MAX); returns 1 if every src value is finite (copy_check with the
 * division: temperature's copy of the caller's logits is then its only pass), and *max = the
 * largest dst value, found as max_n_body finds it (the same lanes, the same order), so that the
 * draw after a temperature need not read the vocabulary again for it. */
__attribute__((always_inline)) static inline int copy_divide_body(float *restrict dst,
                                                                  const float *restrict src,
                                                                  int n, float t, float *max,
                                                                  int *first) {
    uint32_t bad = 0;
    float lane[16];
    int32_t lane_at[16];
    for (int k = 0; k < 16; k++) lane[k] = -INFINITY, lane_at[k] = k;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t b = 0;
        for (int k = 0; k < 16; k++) {
            b |= g3_non_finite(src[i + k]);
        }
        for (int k = 0; k < 16; k++) dst[i + k] = src[i + k] / t;
        for (int k = 0; k < 16; k++) dst[i + k] = dst[i + k] > FLT_MAX ? FLT_MAX : dst[i + k];
        for (int k = 0; k < 16; k++) {
            int above = dst[i + k] > lane[k];
            lane[k] = above ? dst[i + k] : lane[k];
            lane_at[k] = above ? i + k : lane_at[k];
        }
        bad |= b;
    }
    for (int k = i; k < n; k++) {
        bad |= g3_non_finite(src[k]);
        float v = src[k] / t;
        dst[k] = v > FLT_MAX ? FLT_MAX : v;
    }
    lanes16_finish(dst, n, i, lane, lane_at, max, first);
    return bad == 0;
}

static int copy_check_scalar(float *restrict dst, const float *restrict src, int n) {
    return copy_check_body(dst, src, n);
}
static float max_n_scalar(const float *l, int n) { return max_n_body(l, n); }
static int check_max_scalar(const float *l, int n, float *max, int *first) {
    return check_max_body(l, n, max, first);
}
static int copy_divide_scalar(float *restrict dst, const float *restrict src, int n, float t,
                              float *max, int *first) {
    return copy_divide_body(dst, src, n, t, max, first);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SAMPLING_X86 1
/* AVX-512 functions whose loops GCC should vectorise 512 bits wide (its default tuning prefers
 * 256); clang does not know the option in a target attribute, and vectorises them anyway. */
#ifdef __clang__
#define AVX512_WIDE(features) __attribute__((target(features)))
#else
#define AVX512_WIDE(features) __attribute__((target(features ",prefer-vector-width=512")))
#endif
/* AVX2 functions whose bodies are loops over 16 lanes: GCC vectorises such a loop as two 8-lane
 * iterations that it does not unroll at -O2, and keeps the lanes in memory between the loops;
 * unrolled, they stay in registers (the float tier's block sums 1.1x, the double tier's 1.4-1.8x
 * on Zen 3). Unrolling reorders no arithmetic. `optimize` comes first: GCC 13 builds a function
 * whose `target` comes before its `optimize` for the command line's instruction set (SSE2, and
 * libm's fmaf for every fused multiply-add: the float tier's sums took 6.4 ms on 262,144 logits
 * instead of 0.1); tests/test-isa-builds.sh looks for that in the objects. */
#ifdef __clang__
#define AVX2_LOOPS(features) __attribute__((target(features)))
#else
#define AVX2_LOOPS(features) __attribute__((optimize("unroll-loops"), target(features)))
#endif
AVX2_LOOPS("avx2") static int copy_check_avx2(float *restrict dst,
                                                            const float *restrict src, int n) {
    return copy_check_body(dst, src, n);
}
AVX512_WIDE("avx512f") static int copy_check_avx512(float *restrict dst,
                                                    const float *restrict src, int n) {
    return copy_check_body(dst, src, n);
}
AVX2_LOOPS("avx2") static float max_n_avx2(const float *l, int n) {
    return max_n_body(l, n);
}
AVX512_WIDE("avx512f") static float max_n_avx512(const float *l, int n) {
    return max_n_body(l, n);
}
AVX2_LOOPS("avx2") static void gumbel_bits_n_avx2(uint64_t key,
                                                               const int32_t *restrict ids,
                                                               uint32_t *restrict out, int n) {
    gumbel_bits_n_body(key, ids, out, n);
}
__attribute__((target("avx512f,avx512dq"))) static void gumbel_bits_n_avx512(
    uint64_t key, const int32_t *restrict ids, uint32_t *restrict out, int n) {
    gumbel_bits_n_body(key, ids, out, n);
}
/* moment_lanes_plain by hand: GCC reads the tables a token at a time; here a table of 16 is two
 * permutes of 8 and a blend on the index's bit 3. The same operations in the same order as
 * g3_view_moment: the same bits. */
AVX2_LOOPS("avx2") __attribute__((always_inline)) static inline __m256 lookup16_avx2(
    const float *table, __m256i idx) {
    __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), idx);
    __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table + 8), idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}
AVX2_LOOPS("avx2") __attribute__((always_inline)) static inline void moment_lanes_avx2(
    const int32_t *b, const float *x, const float *p, float *lanes) {
    for (int h = 0; h < 16; h += 8) {
        const __m256i bi = _mm256_loadu_si256((const __m256i *)(b + h));
        __m256 e = _mm256_mul_ps(lookup16_avx2(g3_view_exp_two, _mm256_srli_epi32(bi, 7)),
                                 lookup16_avx2(g3_view_exp_eighth, _mm256_srli_epi32(bi, 3)));
        e = _mm256_mul_ps(e, _mm256_permutevar8x32_ps(_mm256_loadu_ps(g3_view_exp_64th), bi));
        e = _mm256_mul_ps(e, _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_loadu_ps(p + h)));
        __m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(G3_VIEW_BUCKETS - 1), bi);
        __m256 t = _mm256_mul_ps(e, _mm256_loadu_ps(x + h));
        t = _mm256_and_ps(_mm256_castsi256_ps(in), t);
        _mm256_storeu_ps(lanes + h, _mm256_add_ps(_mm256_loadu_ps(lanes + h), t));
    }
}
AVX2_LOOPS("avx2") static void rank_view_avx2(const float *restrict l, float lmax,
                                                            int n, uint16_t *restrict bucket,
                                                            struct g3_view_sum *restrict sums,
                                                            double *moment) {
    rank_view_body(l, lmax, n, bucket, sums, moment, moment_lanes_avx2);
}
/* moment_lanes_plain by hand, as moment_lanes_avx2: each table is one register here, read by a
 * permute. */
AVX512_WIDE("avx512f,avx512dq,avx512bw,avx512vl") __attribute__((always_inline)) static inline void
moment_lanes_avx512(const int32_t *b, const float *x, const float *p, float *lanes) {
    const __m512i bi = _mm512_loadu_si512(b);
    __m512 e = _mm512_mul_ps(
        _mm512_permutexvar_ps(_mm512_srli_epi32(bi, 7), _mm512_loadu_ps(g3_view_exp_two)),
        _mm512_permutexvar_ps(_mm512_srli_epi32(bi, 3), _mm512_loadu_ps(g3_view_exp_eighth)));
    e = _mm512_mul_ps(e, _mm512_permutexvar_ps(bi, _mm512_loadu_ps(g3_view_exp_64th)));
    e = _mm512_mul_ps(e, _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_loadu_ps(p)));
    __mmask16 in = _mm512_cmplt_epi32_mask(bi, _mm512_set1_epi32(G3_VIEW_BUCKETS - 1));
    __m512 t = _mm512_maskz_mul_ps(in, e, _mm512_loadu_ps(x));
    _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_loadu_ps(lanes), t));
}
AVX512_WIDE("avx512f,avx512dq,avx512bw,avx512vl") static void rank_view_avx512(
    const float *restrict l, float lmax, int n, uint16_t *restrict bucket,
    struct g3_view_sum *restrict sums, double *moment) {
    rank_view_body(l, lmax, n, bucket, sums, moment, moment_lanes_avx512);
}
AVX2_LOOPS("avx2") static double exp_block_sums_avx2(const float *restrict l,
                                                                 float lmax, int n,
                                                                 double *restrict blocks) {
    return exp_block_sums_body(l, lmax, n, blocks);
}
AVX512_WIDE("avx512f") static double exp_block_sums_avx512(
    const float *restrict l, float lmax, int n, double *restrict blocks) {
    return exp_block_sums_body(l, lmax, n, blocks);
}
AVX2_LOOPS("avx2,fma") static double expf_block_sums_avx2(const float *restrict l, float lmax,
                                                          int n, double *restrict blocks) {
    return expf_block_sums_body(l, lmax, n, blocks, 1);
}
AVX512_WIDE("avx512f") static double expf_block_sums_avx512(
    const float *restrict l, float lmax, int n, double *restrict blocks) {
    return expf_block_sums_body(l, lmax, n, blocks, 1);
}
__attribute__((target("fma"))) static double expf_weight_avx2(float l, float lmax) {
    return g3_approx_expf(l, lmax, 1);
}
#define expf_weight_avx512 expf_weight_avx2 /* one fused scalar weight: AVX-512 has FMA too */
AVX2_LOOPS("avx2") static double exp_rough_sums_avx2(const float *restrict l,
                                                                  float lmax, int n, float at,
                                                                  double *at_least) {
    return exp_rough_sums_body(l, lmax, n, at, at_least, 0);
}
AVX512_WIDE("avx512f") static double exp_rough_sums_avx512(
    const float *restrict l, float lmax, int n, float at, double *at_least) {
    return exp_rough_sums_body(l, lmax, n, at, at_least, 0);
}
AVX2_LOOPS("avx2") static double exp_coarse_sums_avx2(const float *restrict l, float lmax, int n,
                                                      float at, double *at_least) {
    return exp_rough_sums_body(l, lmax, n, at, at_least, 1);
}
AVX512_WIDE("avx512f") static double exp_coarse_sums_avx512(
    const float *restrict l, float lmax, int n, float at, double *at_least) {
    return exp_rough_sums_body(l, lmax, n, at, at_least, 1);
}
AVX2_LOOPS("avx2") static void sigma_sums_n_avx2(const float *restrict l, int n,
                                                              double *out) {
    sigma_sums_n_body(l, n, out);
}
AVX512_WIDE("avx512f,avx512dq") static void sigma_sums_n_avx512(
    const float *restrict l, int n, double *out) {
    sigma_sums_n_body(l, n, out);
}

/* ---- AVX2: the screen by hand (GCC's vectorisation of the body is a fifth slower). AVX2 has
 * no 64-bit multiply: z c mod 2^64 = lo(z) lo(c) + 2^32 (lo(z) hi(c) + hi(z) lo(c)), the cross
 * terms mod 2^32 from one 32-bit multiply of z by c with its halves swapped. Of the second
 * product the screen reads only the top half, so its three terms are added where the 32-bit
 * lanes are gathered. The finaliser's last step, h ^ (h >> 31), changes only the lowest bit of
 * the top half, which g3_gumbel_upper drops (~b >> 1), so it is left out. */
__attribute__((target("avx2"))) static inline __m256i cross_avx2(__m256i z, uint64_t c) {
    /* 32-bit lanes lo(z) hi(c), hi(z) lo(c) */
    return _mm256_mullo_epi32(z, _mm256_set1_epi64x((long long)(c << 32 | c >> 32)));
}
__attribute__((target("avx2"))) static inline __m256i mul_lo_avx2(__m256i z, uint64_t c) {
    return _mm256_mul_epu32(z, _mm256_set1_epi64x((long long)(c & 0xffffffffu)));
}
__attribute__((target("avx2"))) static inline __m256i mul64_avx2(__m256i z, uint64_t c) {
    __m256i cross = cross_avx2(z, c);
    __m256i high = _mm256_add_epi32(cross, _mm256_slli_epi64(cross, 32)); /* upper: the sum */
    high = _mm256_and_si256(high, _mm256_set1_epi64x((long long)0xffffffff00000000ull));
    return _mm256_add_epi64(mul_lo_avx2(z, c), high);
}
/* g3_mix64_rest up to its last multiply */
__attribute__((target("avx2"))) static inline __m256i mix64_to_last_avx2(__m256i z) {
    z = mul64_avx2(z, 0xbf58476d1ce4e5b9ull);
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 27));
}
/* The top halves of g3_mix64's results for a's and b's four lanes (mix64_to_last_avx2's), in
 * order, but for their lowest bit: the last multiply's top half, hi(lo(z) lo(c)) + hi(z) lo(c)
 * from the odd 32-bit lanes and lo(z) hi(c) from the even ones. */
__attribute__((target("avx2"))) static inline __m256i top_bits_avx2(__m256i a, __m256i b) {
    const uint64_t c = 0x94d049bb133111ebull;
    __m256i cross_a = cross_avx2(a, c), cross_b = cross_avx2(b, c);
    __m256 odd_a = _mm256_castsi256_ps(_mm256_add_epi32(cross_a, mul_lo_avx2(a, c)));
    __m256 odd_b = _mm256_castsi256_ps(_mm256_add_epi32(cross_b, mul_lo_avx2(b, c)));
    __m256 odd = _mm256_shuffle_ps(odd_a, odd_b, _MM_SHUFFLE(3, 1, 3, 1));
    __m256 even = _mm256_shuffle_ps(_mm256_castsi256_ps(cross_a), _mm256_castsi256_ps(cross_b),
                                    _MM_SHUFFLE(2, 0, 2, 0));
    __m256i h = _mm256_add_epi32(_mm256_castps_si256(odd), _mm256_castps_si256(even));
    return _mm256_permute4x64_epi64(h, _MM_SHUFFLE(3, 1, 2, 0)); /* a0 a1 a2 a3 b0 b1 b2 b3 */
}
/* (l - lmax) + g3_gumbel_upper(b) >= thr on 8 lanes, as all-ones masks */
__attribute__((target("avx2"))) static inline __m256i screen8_avx2(__m256i b, const float *l,
                                                                    __m256 lm, __m256 th) {
    __m256i y = _mm256_srli_epi32(_mm256_xor_si256(b, _mm256_set1_epi32(-1)), 1);
    __m256i e = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(y)), 23);
    __m256 ub = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_set1_epi32(159), e)),
                              _mm256_set1_ps(0x1.62e43p-1f));
    __m256 v = _mm256_add_ps(_mm256_sub_ps(_mm256_loadu_ps(l), lm), ub);
    return _mm256_castps_si256(_mm256_cmp_ps(v, th, _CMP_GE_OQ));
}
__attribute__((target("avx2"))) static void gumbel_screen_n_avx2(
    uint64_t key, const uint64_t *restrict hashes, const float *restrict l, float lmax,
    float thr, uint8_t *restrict pass, int n) {
    const __m256i kv = _mm256_set1_epi64x((long long)g3_mix64_first(key));
    const __m256 lm = _mm256_set1_ps(lmax), th = _mm256_set1_ps(thr);
    /* the bytes of two packed masks are in the order 0-3 8-11 4-7 12-15 */
    const __m128i order = _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i z[4];
#pragma GCC unroll 4 /* else GCC keeps a loop that stores z and loads it back */
        for (int q = 0; q < 4; q++) {
            __m256i h = _mm256_loadu_si256((const __m256i *)(hashes + i + 4 * q));
            z[q] = mix64_to_last_avx2(_mm256_xor_si256(kv, h));
        }
        __m256i m0 = screen8_avx2(top_bits_avx2(z[0], z[1]), l + i, lm, th);
        __m256i m1 = screen8_avx2(top_bits_avx2(z[2], z[3]), l + i + 8, lm, th);
        __m256i m16 = _mm256_packs_epi32(m0, m1);
        __m128i m8 = _mm_packs_epi16(_mm256_castsi256_si128(m16), _mm256_extracti128_si256(m16, 1));
        m8 = _mm_and_si128(_mm_shuffle_epi8(m8, order), _mm_set1_epi8(1));
        _mm_storeu_si128((__m128i *)(pass + i), m8);
    }
    _mm256_zeroupper(); /* as in the AVX-512 screen: the scalar tail, then SSE code */
    gumbel_screen_n_scalar(key, hashes + i, l + i, lmax, thr, pass + i, n - i);
}

/* ---- check_max_body and copy_divide_body in AVX2 intrinsics: their 16 lanes as two vectors
 * of 8, the same comparisons in the same lane order, so the same maximum, first position and
 * copy, bit for bit. GCC's builds of those bodies folded the finite test to one word every 16
 * values and kept the lanes in memory: on Zen 3 the check with the maximum took twice this
 * build's time, the dividing copy 1.3-1.9x. */

/* The scans' scalar end: the values from i on checked (and divided into dst when there is
 * one), then the lanes' maximum and its first position (lanes16_finish). Returns 1 if those
 * values are finite. */
static int scan_max_finish(float *restrict dst, const float *restrict src, int n, int i, float t,
                           const float *lane, const int32_t *lane_at, float *max, int *first) {
    int finite = 1;
    for (int k = i; k < n; k++) {
        finite &= !g3_non_finite(src[k]);
        if (dst) {
            float v = src[k] / t;
            dst[k] = v > FLT_MAX ? FLT_MAX : v;
        }
    }
    lanes16_finish(dst ? dst : src, n, i, lane, lane_at, max, first);
    return finite;
}

/* all-ones in the lanes of v that are NaN or +-inf (exponent bits all ones) */
__attribute__((target("avx2"))) static inline __m256i non_finite8_avx2(__m256 v) {
    const __m256i expo = _mm256_set1_epi32(0x7f800000);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), expo), expo);
}
/* One vector of the lanes: the running maximum and where it first occurred (a strictly larger
 * value moves it). */
__attribute__((target("avx2"))) static inline void lane8_update_avx2(__m256 *lane_max,
                                                                     __m256i *lane_at, __m256 v,
                                                                     __m256i pos) {
    __m256 above = _mm256_cmp_ps(v, *lane_max, _CMP_GT_OQ);
    *lane_max = _mm256_blendv_ps(*lane_max, v, above);
    *lane_at = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(*lane_at), _mm256_castsi256_ps(pos), above));
}
/* check_max_body (dst NULL: the maximum of src) or copy_divide_body (dst = min(src / t,
 * FLT_MAX), its maximum): returns 1 if every src value is finite. Inlined into both callers, so
 * that dst's test folds away. */
__attribute__((target("avx2"), always_inline)) static inline int scan_max_avx2(
    float *restrict dst, const float *restrict src, int n, float t, float *max, int *first) {
    const __m256 tv = _mm256_set1_ps(t), big = _mm256_set1_ps(FLT_MAX);
    __m256 max0 = _mm256_set1_ps(-INFINITY), max1 = max0;
    __m256i at0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i at1 = _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15), pos0 = at0, pos1 = at1;
    __m256i bad = _mm256_setzero_si256();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(src + i), v1 = _mm256_loadu_ps(src + i + 8);
        bad = _mm256_or_si256(bad, _mm256_or_si256(non_finite8_avx2(v0), non_finite8_avx2(v1)));
        if (dst) {
            v0 = _mm256_div_ps(v0, tv);
            v1 = _mm256_div_ps(v1, tv);
            /* min(v, FLT_MAX) as a compare and a blend: a NaN stays itself, as in the body */
            v0 = _mm256_blendv_ps(v0, big, _mm256_cmp_ps(v0, big, _CMP_GT_OQ));
            v1 = _mm256_blendv_ps(v1, big, _mm256_cmp_ps(v1, big, _CMP_GT_OQ));
            _mm256_storeu_ps(dst + i, v0);
            _mm256_storeu_ps(dst + i + 8, v1);
        }
        lane8_update_avx2(&max0, &at0, v0, pos0);
        lane8_update_avx2(&max1, &at1, v1, pos1);
        pos0 = _mm256_add_epi32(pos0, _mm256_set1_epi32(16));
        pos1 = _mm256_add_epi32(pos1, _mm256_set1_epi32(16));
    }
    float lane[16];
    int32_t lane_at[16];
    _mm256_storeu_ps(lane, max0);
    _mm256_storeu_ps(lane + 8, max1);
    _mm256_storeu_si256((__m256i *)lane_at, at0);
    _mm256_storeu_si256((__m256i *)(lane_at + 8), at1);
    int finite = _mm256_testz_si256(bad, bad);
    _mm256_zeroupper(); /* scalar code follows */
    return scan_max_finish(dst, src, n, i, t, lane, lane_at, max, first) && finite;
}
__attribute__((target("avx2"))) static int check_max_avx2(const float *l, int n, float *max,
                                                          int *first) {
    return scan_max_avx2(NULL, l, n, 1.0f, max, first);
}
__attribute__((target("avx2"))) static int copy_divide_avx2(float *restrict dst,
                                                            const float *restrict src, int n,
                                                            float t, float *max, int *first) {
    return scan_max_avx2(dst, src, n, t, max, first);
}

/* ---- The same in AVX-512: the 16 lanes are one vector. max(v, lane) is `v > lane ? v : lane`
 * and min(FLT_MAX, v) is `v > FLT_MAX ? FLT_MAX : v` as the instructions define them (a NaN v
 * leaves the lane; a NaN quotient stays), so the maximum's chain is one instruction per step and
 * the positions move beside it. GCC's 512-bit builds of the bodies took 2.7x (the check) and 1.9x
 * (the dividing copy) the AVX2 build's time on Zen 4. */
__attribute__((target("avx512f"), always_inline)) static inline int scan_max_avx512(
    float *restrict dst, const float *restrict src, int n, float t, float *max, int *first) {
    const __m512 tv = _mm512_set1_ps(t), big = _mm512_set1_ps(FLT_MAX);
    const __m512i expo = _mm512_set1_epi32(0x7f800000), step = _mm512_set1_epi32(16);
    __m512 lane_max = _mm512_set1_ps(-INFINITY);
    __m512i pos = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i lane_pos = pos;
    __mmask16 bad = 0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), expo), expo);
        if (dst) {
            v = _mm512_min_ps(big, _mm512_div_ps(v, tv));
            _mm512_storeu_ps(dst + i, v);
        }
        lane_pos = _mm512_mask_mov_epi32(lane_pos, _mm512_cmp_ps_mask(v, lane_max, _CMP_GT_OQ), pos);
        lane_max = _mm512_max_ps(v, lane_max);
        pos = _mm512_add_epi32(pos, step);
    }
    float lane[16];
    int32_t lane_at[16];
    _mm512_storeu_ps(lane, lane_max);
    _mm512_storeu_si512(lane_at, lane_pos);
    _mm256_zeroupper(); /* scalar code follows */
    return scan_max_finish(dst, src, n, i, t, lane, lane_at, max, first) && bad == 0;
}
__attribute__((target("avx512f"))) static int check_max_avx512(const float *l, int n, float *max,
                                                              int *first) {
    return scan_max_avx512(NULL, l, n, 1.0f, max, first);
}
__attribute__((target("avx512f"))) static int copy_divide_avx512(float *restrict dst,
                                                                const float *restrict src, int n,
                                                                float t, float *max, int *first) {
    return scan_max_avx512(dst, src, n, t, max, first);
}

AVX2_LOOPS("avx2") static uint64_t mass_round_n_avx2(const float *restrict l,
                                                                  float lmax,
                                                                  uint64_t *restrict q,
                                                                  uint64_t *restrict tie, int n, int *n_tie) {
    return mass_round_n_body(l, lmax, q, tie, n, n_tie);
}
AVX512_WIDE("avx512f,avx512dq,avx512bw,avx512vl")
static uint64_t mass_round_n_avx512(const float *restrict l, float lmax, uint64_t *restrict q,
                    uint64_t *restrict tie, int n, int *n_tie) {
    return mass_round_n_body(l, lmax, q, tie, n, n_tie);
}

/* The heap scan by hand (GCC does not vectorise a loop that exits early): a compare mask for
 * >= worst and one for an all-ones exponent per 16 logits. */
__attribute__((target("avx2"))) static int block_scan_avx2(const float *l, int j, int n,
                                                            float worst, uint32_t *bad) {
    const __m256 w = _mm256_set1_ps(worst);
    const __m256i expo = _mm256_set1_epi32(0x7f800000);
    __m256i acc = _mm256_setzero_si256();
    for (; j + 16 <= n; j += 16) {
        __m256 a = _mm256_loadu_ps(l + j), b = _mm256_loadu_ps(l + j + 8);
        __m256i ea = _mm256_and_si256(_mm256_castps_si256(a), expo);
        __m256i eb = _mm256_and_si256(_mm256_castps_si256(b), expo);
        acc = _mm256_or_si256(acc, _mm256_cmpeq_epi32(ea, expo));
        acc = _mm256_or_si256(acc, _mm256_cmpeq_epi32(eb, expo));
        __m256 ge = _mm256_or_ps(_mm256_cmp_ps(a, w, _CMP_GE_OQ), _mm256_cmp_ps(b, w, _CMP_GE_OQ));
        if (_mm256_movemask_ps(ge)) break;
    }
    *bad |= !_mm256_testz_si256(acc, acc);
    _mm256_zeroupper();
    return j;
}

__attribute__((target("avx512f"))) static int block_scan_avx512(const float *l, int j, int n,
                                                                float worst, uint32_t *bad) {
    const __m512 w = _mm512_set1_ps(worst);
    const __m512i expo = _mm512_set1_epi32(0x7f800000);
    __mmask16 nonfinite = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(l + j);
        nonfinite |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), expo), expo);
        if (_mm512_cmp_ps_mask(v, w, _CMP_GE_OQ)) break;
    }
    *bad |= nonfinite != 0;
    _mm256_zeroupper();
    return j;
}

/* The band scans' last tokens from position i on (fewer than a vector), by the scalar scan:
 * adds them to the m ids and in_a inner tokens found so far; returns how many ids in all. */
static int band_scan_tail(const uint16_t *bk, int n, int i, int g1, int g2, int a1, int a2,
                          int32_t *out, int m, int in_a, int *inner) {
    int rest_in, rest = band_scan_scalar(bk + i, n - i, g1, g2, a1, a2, out + m, &rest_in);
    for (int k = 0; k < rest; k++) out[m + k] += i;
    *inner = in_a + rest_in;
    return m + rest;
}

/* The band scan by hand: 16 (AVX2) or 32 (AVX-512) buckets per step, a mask each for the two
 * ranges (AVX2 tests x <= s as max(x, s) == s, two mask bits per bucket); the ids of a block
 * with a listed token are taken from its mask, lowest first. */
__attribute__((target("avx2,bmi"))) static int band_scan_avx2(const uint16_t *bk, int n, int g1,
                                                               int g2, int a1, int a2,
                                                               int32_t *out, int *inner) {
    band_ranges(&a1, &a2);
    const __m256i lo_g = _mm256_set1_epi16((short)g1), span_g = _mm256_set1_epi16((short)(g2 - g1));
    const __m256i lo_a = _mm256_set1_epi16((short)a1), span_a = _mm256_set1_epi16((short)(a2 - a1));
    int m = 0, in_a = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(bk + i));
        __m256i xg = _mm256_sub_epi16(v, lo_g), xa = _mm256_sub_epi16(v, lo_a);
        uint32_t g = (uint32_t)_mm256_movemask_epi8(
            _mm256_cmpeq_epi16(_mm256_max_epu16(xg, span_g), span_g));
        uint32_t a = (uint32_t)_mm256_movemask_epi8(
            _mm256_cmpeq_epi16(_mm256_max_epu16(xa, span_a), span_a));
        in_a += __builtin_popcount(a) / 2;
        for (uint32_t hit = g & ~a & 0x55555555u; hit; hit = _blsr_u32(hit))
            out[m++] = i + (int)(__builtin_ctz(hit) / 2);
    }
    _mm256_zeroupper();
    return band_scan_tail(bk, n, i, g1, g2, a1, a2, out, m, in_a, inner);
}

__attribute__((target("avx512f,avx512bw,bmi"))) static int band_scan_avx512(
    const uint16_t *bk, int n, int g1, int g2, int a1, int a2, int32_t *out, int *inner) {
    band_ranges(&a1, &a2);
    const __m512i lo_g = _mm512_set1_epi16((short)g1), span_g = _mm512_set1_epi16((short)(g2 - g1));
    const __m512i lo_a = _mm512_set1_epi16((short)a1), span_a = _mm512_set1_epi16((short)(a2 - a1));
    int m = 0, in_a = 0, i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i v = _mm512_loadu_si512(bk + i);
        __mmask32 a = _mm512_cmple_epu16_mask(_mm512_sub_epi16(v, lo_a), span_a);
        __mmask32 g = _mm512_cmple_epu16_mask(_mm512_sub_epi16(v, lo_g), span_g);
        in_a += __builtin_popcount(a);
        for (uint32_t hit = g & ~a; hit; hit = _blsr_u32(hit)) out[m++] = i + __builtin_ctz(hit);
    }
    _mm256_zeroupper();
    return band_scan_tail(bk, n, i, g1, g2, a1, a2, out, m, in_a, inner);
}

/* ---- AVX-512: the screen by hand (GCC's vectorisation of the mixed 64/32-bit body runs at
 * half this speed). Step for step the scalar body: g3_mix64_rest on 8 lanes twice,
 * the top halves gathered into 16 32-bit lanes, then g3_gumbel_upper and the comparison. The
 * finaliser's last step, h ^ (h >> 31), is left out: it changes only the lowest bit of the top
 * half, which g3_gumbel_upper drops (~b >> 1). */
#define SAMPLING_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
SAMPLING_AVX512 static inline __m512i mix64_unfinished_avx512(__m512i z) {
    z = _mm512_mullo_epi64(z, _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ull));
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 27));
    return _mm512_mullo_epi64(z, _mm512_set1_epi64((long long)0x94d049bb133111ebull));
}

SAMPLING_AVX512 static void gumbel_screen_n_avx512(uint64_t key, const uint64_t *restrict hashes,
                                                   const float *restrict l, float lmax,
                                                   float thr, uint8_t *restrict pass, int n) {
    const __m512i kv = _mm512_set1_epi64((long long)g3_mix64_first(key));
    const __m512i c159 = _mm512_set1_epi32(159);
    const __m512 lm = _mm512_set1_ps(lmax), th = _mm512_set1_ps(thr);
    const __m512 ln2 = _mm512_set1_ps(0x1.62e43p-1f);
    /* the odd 32-bit lanes of two vectors: their 64-bit lanes' top halves, in order */
    const __m512i top_halves = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25,
                                                 27, 29, 31);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i lo = _mm512_xor_si512(kv, _mm512_loadu_si512(hashes + i));
        __m512i hi = _mm512_xor_si512(kv, _mm512_loadu_si512(hashes + i + 8));
        lo = mix64_unfinished_avx512(lo);
        hi = mix64_unfinished_avx512(hi);
        __m512i b = _mm512_permutex2var_epi32(lo, top_halves, hi);
        /* g3_gumbel_upper: y = ~b >> 1, e + 127 = the float's exponent bits, (159 - them) ln 2 */
        __m512i y = _mm512_srli_epi32(_mm512_xor_si512(b, _mm512_set1_epi32(-1)), 1);
        __m512i e = _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(y)), 23);
        __m512 ub = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c159, e)), ln2);
        __m512 v = _mm512_add_ps(_mm512_sub_ps(_mm512_loadu_ps(l + i), lm), ub);
        __mmask16 m = _mm512_cmp_ps_mask(v, th, _CMP_GE_OQ);
        _mm_storeu_si128((__m128i *)(pass + i), _mm_maskz_set1_epi8(m, 1));
    }
    /* clean upper halves before SSE code runs: GCC leaves out its own vzeroupper here, and the
     * libm calls after a dirty state crawl (a typical-p row went from 7 ms to 120 ms) */
    _mm256_zeroupper();
    gumbel_screen_n_scalar(key, hashes + i, l + i, lmax, thr, pass + i, n - i);
}
AVX2_LOOPS("avx2") static void approx_exp_n_avx2(double *restrict w,
                                                              const float *restrict l,
                                                              float lmax, int n) {
    approx_exp_n_body(w, l, lmax, n);
}
__attribute__((target("avx512f"))) static void approx_exp_n_avx512(double *restrict w,
                                                                   const float *restrict l,
                                                                   float lmax, int n) {
    approx_exp_n_body(w, l, lmax, n);
}
#else
#define SAMPLING_X86 0
#endif

/* The backend's probe and level (--isa, GEMMA3_ISA); it links without the kernels. A level
 * refused there (the session reports it) leaves the passes scalar. */
enum { ISA_SCALAR = G3_ISA_SCALAR, ISA_AVX2 = G3_ISA_AVX2, ISA_AVX512 = G3_ISA_AVX512 };
int g3_sampling_isa(void) {
    int isa = g3_isa_choose(NULL);
    return isa < 0 ? ISA_SCALAR : isa;
}

/* A getter's body: fn's scalar reference, or its AVX2 / AVX-512 build where the CPU runs it;
 * NULL for an ISA it lacks. */
#if SAMPLING_X86
#define PICK_ISA(fn)                                                                           \
    do {                                                                                       \
        if (isa == ISA_SCALAR) return fn##_scalar;                                             \
        if (isa == ISA_AVX2 && g3_isa_supported(G3_ISA_AVX2)) return fn##_avx2;                \
        if (isa == ISA_AVX512 && g3_isa_supported(G3_ISA_AVX512)) return fn##_avx512;          \
        return NULL;                                                                           \
    } while (0)
#else
#define PICK_ISA(fn) return isa == ISA_SCALAR ? fn##_scalar : NULL
#endif

g3_gumbel_bits_n_fn g3_gumbel_bits_n_get(int isa) { PICK_ISA(gumbel_bits_n); }

g3_expf_block_sums_fn g3_exp_block_sums_get(int isa) { PICK_ISA(exp_block_sums); }

g3_expf_block_sums_fn g3_expf_block_sums_get(int isa) { PICK_ISA(expf_block_sums); }

g3_expf_weight_fn g3_expf_weight_get(int isa) { PICK_ISA(expf_weight); }

g3_exp_rough_sums_fn g3_exp_rough_sums_get(int isa) { PICK_ISA(exp_rough_sums); }
g3_exp_rough_sums_fn g3_exp_coarse_sums_get(int isa) { PICK_ISA(exp_coarse_sums); }

g3_sigma_sums_n_fn g3_sigma_sums_n_get(int isa) { PICK_ISA(sigma_sums_n); }

g3_mass_round_n_fn g3_mass_round_n_get(int isa) { PICK_ISA(mass_round_n); }

g3_block_scan_fn g3_block_scan_get(int isa) { PICK_ISA(block_scan); }

g3_gumbel_screen_n_fn g3_gumbel_screen_n_get(int isa) { PICK_ISA(gumbel_screen_n); }

g3_approx_exp_n_fn g3_approx_exp_n_get(int isa) { PICK_ISA(approx_exp_n); }

g3_rank_view_fn g3_rank_view_get(int isa) { PICK_ISA(rank_view); }

g3_copy_check_fn g3_copy_check_get(int isa) { PICK_ISA(copy_check); }

g3_copy_divide_fn g3_copy_divide_get(int isa) { PICK_ISA(copy_divide); }

g3_max_n_fn g3_max_n_get(int isa) { PICK_ISA(max_n); }

g3_check_max_fn g3_check_max_get(int isa) { PICK_ISA(check_max); }

g3_band_scan_fn g3_band_scan_get(int isa) { PICK_ISA(band_scan); }
