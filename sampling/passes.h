/* sampling/passes.h - the sampler's passes over the whole vocabulary and the per-token
 * arithmetic they share with their scalar readers: the approximate exps with their error
 * bounds, the rank view's buckets and units, the Gumbel screen's bound, the copies and checks.
 * Each pass has a getter that takes an instruction set and returns its build for it, or NULL
 * where this CPU (or this target) lacks it; every build gives the scalar reference's bits. The
 * sampler (sampling/test-hooks.h) takes them at init. Knows nothing of the sampler's state. */
#ifndef G3_SAMPLING_PASSES_H
#define G3_SAMPLING_PASSES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rng.h"

/* The instruction set the passes' getters take: kernels/cpu.h's g3_isa. The level chosen there
 * (--isa, GEMMA3_ISA, else the best this CPU runs), asked at the sampler's init. */
int g3_sampling_isa(void);

/* Order-preserving map float -> uint32: a < b  <=>  key(a) < key(b) and a == b  <=>  key(a) ==
 * key(b), so radix selection on keys agrees with float comparisons: -inf is lowest and -0 maps
 * to the key of +0 (f + 0.0f is +0 for both zeros). NaN must be removed before. */
static inline uint32_t g3_float_key(float f) {
    float g = f + 0.0f;
    uint32_t u;
    memcpy(&u, &g, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* 1 for NaN and +-inf (exponent all ones), branch-free so that the scans over the vocabulary
 * vectorise. */
static inline uint32_t g3_non_finite(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

/* exp(x) for -708 <= x <= 0 in double, branch-free so that loops over it vectorise:
 * Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2 (fdlibm's two-part ln2, k ln2_hi exact), the
 * degree-12 Taylor polynomial of e^r (remainder < 2.3e-16) by Horner, scaled by 2^k. Relative
 * error against exp(): below 1.7e-15 (the 13 Horner steps' rounding, ~13 * 2^-53, the
 * remainder and the reduction's rounding); the sampler's fast paths assume
 * G3_APPROX_EXP_REL_ERR = 2^-48 (3.6e-15), and test-sampling-chains checks the observed error on
 * a million inputs against a quarter of it (about 4.7e-16 is seen). */
#define G3_APPROX_EXP_REL_ERR 0x1p-48
/* mask (all ones or zero) ? a : b, on the bits: selects that compile to masks, not branches */
static inline float g3_f32_select(uint32_t mask, float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & mask) | (ub & ~mask);
    memcpy(&a, &ua, sizeof a);
    return a;
}

static inline double g3_f64_select(uint64_t mask, double a, double b) {
    uint64_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & mask) | (ub & ~mask);
    memcpy(&a, &ua, sizeof a);
    return a;
}

/* floor(v) for v in [0, 2^51): the nearest integer (v + 2^52 - 2^52, exact), less 1 where that
 * lies above v; by masks, so that AVX2 vectorises it (a call of floor() it does not). */
static inline double g3_floor_small(double v) {
    const double r = (v + 0x1p52) - 0x1p52;
    return r - g3_f64_select((uint64_t)-(int64_t)(r > v), 1.0, 0.0);
}

/* An integer-valued double in [0, 2^52) as that integer: its bits once 2^52 is added (exact). */
static inline uint64_t g3_u64_of_small_double(double v) {
    double shifted = v + 0x1p52;
    uint64_t bits, base;
    memcpy(&bits, &shifted, sizeof bits);
    const double two52 = 0x1p52;
    memcpy(&base, &two52, sizeof base);
    return bits - base;
}

static inline double g3_approx_exp(double x) {
    double t = x * 1.44269504088896338700 + 0x1.8p52; /* round(x / ln2) in the low bits */
    double k = t - 0x1.8p52;
    int64_t ki;
    memcpy(&ki, &t, sizeof ki);
    ki -= 0x4338000000000000; /* the bits of 0x1.8p52 */
    double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    double p = 1.0 / 479001600;
    p = p * r + 1.0 / 39916800;
    p = p * r + 1.0 / 3628800;
    p = p * r + 1.0 / 362880;
    p = p * r + 1.0 / 40320;
    p = p * r + 1.0 / 5040;
    p = p * r + 1.0 / 720;
    p = p * r + 1.0 / 120;
    p = p * r + 1.0 / 24;
    p = p * r + 1.0 / 6;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t bits = (ki + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* The double tier's weight of a logit l <= lmax: g3_approx_exp(l - lmax), the difference
 * floored at -708 (a ban's -inf included: its weight is e^-708, below 1e-307). The scalar form
 * of the vectorised loops' three steps, with the same bits. */
static inline double g3_approx_weight(float l, float lmax) {
    double d = (double)l - lmax;
    return g3_approx_exp(d > -708.0 ? d : -708.0);
}

/* a b + c in one rounding where `fused` (a constant after inlining): the AVX2 and AVX-512
 * bodies, whose instruction sets have the fused multiply-add (fewer operations, and fewer
 * roundings); otherwise in two, as -std=c11 leaves it (the scalar body: libm's fmaf on an x86
 * without the instruction would cost tens of times more). */
static inline float g3_madd(float a, float b, float c, int fused) {
    return fused ? fmaf(a, b, c) : a * b + c;
}

/* e^(l - lmax) for a logit l <= lmax, in float, branch-free (16 lanes per AVX-512 vector): the
 * difference's own rounding error is carried exactly (TwoSum) into the reduced argument, so that
 * it costs nothing; then the Cody-Waite reduction (ln 2 split as 0x1.62e4p-1, exact times any
 * |k| < 128, plus the rest; x - k ln2_hi is exact by Sterbenz's lemma), the degree-6 Taylor
 * polynomial of e^r, |r| <= 0.3466 (remainder < 1.7e-7), scaled by 2^k (k >= -125: normal).
 * Differences below -86 count as -86 (e^-86 < 4.5e-38: the weight of every token below, bans
 * included, is off by less). `fused` (g3_madd) takes the multiply-adds in one rounding each, as
 * the AVX2 and AVX-512 float tiers do; the bound holds for both forms. The fast CDF walk assumes
 * G3_APPROX_EXPF_REL_ERR = 2^-20 (9.5e-7); test-sampling-chains checks the observed error of
 * each form on a million inputs against half of it. */
#define G3_APPROX_EXPF_REL_ERR 0x1p-20
static inline float g3_approx_expf(float l, float lmax, int fused) {
    float x = l - lmax;
    float lb = x + lmax, mb = x - lb;                  /* TwoSum of l and -lmax */
    float err = (l - lb) - (lmax + mb);                /* (l - lmax) - x, exactly */
    /* x = in range ? x : -86 and err = in range ? err : 0 as bit masks, not selects: a select of
     * floats is control flow that GCC vectorises only with AVX-512's masks (the float ops of
     * the unselected side might trap), so AVX2 ran this scalar (4x slower) */
    const uint32_t keep = (uint32_t)-(int32_t)(x > -86.0f); /* false for -inf and NaN too */
    x = g3_f32_select(keep, x, -86.0f);
    err = g3_f32_select(keep, err, 0.0f);
    float t = g3_madd(x, 1.44269504f, 0x1.8p23f, fused); /* round(x / ln2) in the low bits */
    float k = t - 0x1.8p23f;
    int32_t ki;
    memcpy(&ki, &t, sizeof ki);
    ki -= 0x4b400000; /* the bits of 0x1.8p23f */
    float r = g3_madd(-k, 1.42860677e-6f, g3_madd(-k, 0x1.62e4p-1f, x, fused), fused) + err;
    float p = 1.0f / 720;
    p = g3_madd(p, r, 1.0f / 120, fused);
    p = g3_madd(p, r, 1.0f / 24, fused);
    p = g3_madd(p, r, 1.0f / 6, fused);
    p = g3_madd(p, r, 0.5f, fused);
    p = g3_madd(p, r, 1.0f, fused);
    p = g3_madd(p, r, 1.0f, fused);
    int32_t bits = (ki + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* A rough e^(l - lmax) for bounds that only have to decide the clear cases (XTC's count and
 * top-p's membership of a Gumbel winner, in Gumbel mode): 2^y, y = (l - lmax) log2 e, as 2^f
 * (f = y - round(y) in [-1/2, 1/2], the degree-3 Taylor polynomial of e^(f ln 2): remainder
 * below 8.3e-4 of it) with round(y) added to the exponent bits. The difference rounds by at
 * most 2^-19 above -64 and y by 6.6e-6; differences below -64 count as -64 (off there by
 * less than e^-64 (1 + 2^-9) < 2^-91 per token, either way: just below -64 the rough value of
 * -64 can lie under e^d). Within G3_EXP_ROUGH_REL_ERR = 2^-9 of
 * e^(l - lmax) above -64; test-sampling-chains checks half of it. 14 float operations against
 * g3_approx_expf's 30. */
#define G3_EXP_ROUGH_REL_ERR 0x1p-9
static inline float g3_exp_rough(float l, float lmax) {
    float x = l - lmax;
    x = g3_f32_select((uint32_t)-(int32_t)(x > -64.0f), x, -64.0f); /* -inf too */
    float y = x * 1.44269504f;
    float t = y + 0x1.8p23f;             /* 1.5 2^23 + round(y), exactly */
    float f = y - (t - 0x1.8p23f);       /* exact (Sterbenz) */
    float p = 0.0555041087f;             /* (ln 2)^3 / 6 */
    p = p * f + 0.240226507f;            /* (ln 2)^2 / 2 */
    p = p * f + 0.693147181f;
    p = p * f + 1.0f;
    uint32_t pb, tb;
    memcpy(&pb, &p, sizeof pb);
    memcpy(&tb, &t, sizeof tb);
    pb += tb << 23; /* + round(y) in the exponent: the bits of 1.5 2^23 shift out */
    memcpy(&p, &pb, sizeof p);
    return p;
}
/* A coarse e^(l - lmax), tried before g3_exp_rough where only the clearest cases are to be
 * decided (top-p's membership of a Gumbel winner): the float whose bits are
 * trunc(2^23 y) + 127 2^23 - C, y = (l - lmax) log2 e, which reads 2^floor(y') (1 + f) for
 * y' = y - C 2^-23 = floor(y') + f, against 2^y' between 1 and (1 + f0)/2^f0 = 1.061476
 * (f0 = 1/ln 2 - 1); C = 2^23 log2 sqrt(1.061476) centres that: within 0.0303 of e^(l - lmax)
 * with the roundings of the difference, of y and its truncation (below 2^-15.9 in y), clamped
 * at -64 as g3_exp_rough is. 6 operations against g3_exp_rough's 14. */
#define G3_EXP_COARSE_REL_ERR 0x1p-5
static inline float g3_exp_coarse(float l, float lmax) {
    float x = l - lmax;
    x = g3_f32_select((uint32_t)-(int32_t)(x > -64.0f), x, -64.0f); /* -inf too */
    int32_t y = (int32_t)(x * 12102203.0f); /* 2^23 log2 e */
    uint32_t bits = (uint32_t)(y + (127 << 23) - 361009);
    float w;
    memcpy(&w, &bits, sizeof w);
    return w;
}

/* The sums of g3_exp_rough(l[i], lmax) over i < n, all of them (returned) and those with
 * l[i] >= at (*at_least), each in 16 float lanes of 4 terms per block of 64, the lanes and
 * blocks added in double: within G3_EXP_ROUGH_REL_ERR + 4 2^-24 + n 2^-53 of the sums of the
 * g3_exp_rough values. Compiled per instruction set like g3_approx_exp_n_get (the same bits). */
typedef double (*g3_exp_rough_sums_fn)(const float *restrict l, float lmax, int n, float at,
                                       double *at_least);
g3_exp_rough_sums_fn g3_exp_rough_sums_get(int isa);
/* The same sums of g3_exp_coarse (the same type and lanes). */
g3_exp_rough_sums_fn g3_exp_coarse_sums_get(int isa);
/* The relative bound of such sums over n tokens of terms each within rel of e^(l - lmax), their
 * clamp below -64 included for a sum of at least 1 (every total: the maximum's term is within
 * rel of 1). */
static inline double g3_exp_lane_sums_rel(double rel, int n) {
    return rel + 4 * 0x1p-24 + (double)n * 0x1p-53 + (double)n * 0x1p-91;
}

/* blocks[b] = sum of g3_approx_expf(l[i], lmax, fused) over i in [64 b, 64 b + 64) (the
 * last block may be short), in 16 float lanes of 4 terms each, the lanes added in double as a
 * tree (k with k + 8, k + 4, k + 2, k + 1); returns the sum of the blocks. Compiled per
 * instruction set like g3_approx_exp_n_get: scalar unfused, AVX2 and AVX-512 fused (the same
 * bits as g3_expf_block_sums_fused, the tests' scalar reference for them: libm's fmaf). */
typedef double (*g3_expf_block_sums_fn)(const float *restrict l, float lmax, int n,
                                        double *restrict blocks);
g3_expf_block_sums_fn g3_expf_block_sums_get(int isa);
double g3_expf_block_sums_fused(const float *restrict l, float lmax, int n,
                                double *restrict blocks);
/* The weight of one token as g3_expf_block_sums_get(isa) sums it (the walk computes the chosen
 * block's weights again). */
typedef double (*g3_expf_weight_fn)(float l, float lmax);
g3_expf_weight_fn g3_expf_weight_get(int isa);
/* The relative bound of the float tier's total over n tokens: each term within
 * G3_APPROX_EXPF_REL_ERR, four float additions per lane, the n double additions. */
static inline double g3_expf_block_sums_rel(int n) {
    return G3_APPROX_EXPF_REL_ERR + 4 * 0x1p-24 + (double)n * 0x1p-53;
}
/* The same with g3_approx_exp in double: blocks[b] = the sum of g3_approx_exp(max((double)l[i]
 * - lmax, -708)) over block b, in 16 double lanes added as a tree (the fast CDF walk's double
 * tier). */
g3_expf_block_sums_fn g3_exp_block_sums_get(int isa);

/* w[i] = g3_approx_exp(max((double)l[i] - lmax, -708)) for l[i] <= lmax (below -708 the
 * result, e^-708 < 3.3e-308, is off by less than that), in blocks of 16 that the compiler
 * vectorises (the clamp in its own loop: GCC does not if-convert it inside the big one). The
 * same C compiled for SSE2 (the scalar reference), AVX2 and AVX-512 (x86 only; NULL elsewhere or
 * where the CPU lacks it): IEEE operations without contraction (-std=c11), so all three give
 * the same bits. isa: 0 scalar, 1 AVX2, 2 AVX-512 (the numbering of kernels.h's g3_isa). */
typedef void (*g3_approx_exp_n_fn)(double *restrict w, const float *restrict l, float lmax,
                                   int n);
g3_approx_exp_n_fn g3_approx_exp_n_get(int isa);

/* out[i] = the top 32 bits of g3_rng_bits(key, G3_RNG_GUMBEL, ids[i]) (all that g3_gumbel
 * reads), in blocks of 16 that the compiler vectorises; compiled per instruction set like
 * g3_approx_exp_n_get (integer arithmetic: every variant gives the same bits). */
typedef void (*g3_gumbel_bits_n_fn)(uint64_t key, const int32_t *restrict ids,
                                    uint32_t *restrict out, int n);
g3_gumbel_bits_n_fn g3_gumbel_bits_n_get(int isa);

/* An upper bound of the Gumbel noise g3_gumbel gives from top random bits b, cheap enough to
 * screen every token: with U = (b + 0.5) 2^-32, -ln U >= 1 - U, so
 * G = -ln(-ln U) <= -ln(1 - U) = 32 ln 2 - ln(Y + 0.5), Y = 2^32 - 1 - b = ~b, and
 * ln(Y + 0.5) >= e ln 2 for any e <= floor(log2 Y). e here is the exponent of the float of
 * y = Y >> 1, which is at most floor(log2 y) + 1 (rounding up to a power of two) =
 * floor(log2 Y); y = 0 gives e = -127, far below the true bound (22.87). The product rounds
 * the bound by at most 2^-24 relative (ln 2 is rounded up to the float 0x1.62e43p-1); the
 * caller's slack covers it (gumbel_screen_threshold in sampling.c). */
static inline float g3_gumbel_upper(uint32_t b) {
    /* (32 - e) ln 2, where e + 127 = the exponent bits yb >> 23 */
    float y = (float)(int32_t)(~b >> 1);
    uint32_t yb;
    memcpy(&yb, &y, sizeof yb);
    return (float)(159 - (int32_t)(yb >> 23)) * 0x1.62e43p-1f;
}

/* The Gumbel draw's screen: pass[i] = ((l[i] - lmax) + g3_gumbel_upper(top 32 bits of
 * g3_mix64_rest(g3_mix64_first(key) ^ hashes[i]))) >= thr), in float, hashes[i] =
 * g3_mix64_first(g3_rng_index_hash(G3_RNG_GUMBEL, id)) of the token (so the top bits are those
 * of g3_rng_bits(key, G3_RNG_GUMBEL, id); the first step is the table's, not every draw's). The
 * scalar reference, an AVX2 build of it and AVX-512 intrinsics: the same operations, the same
 * bits (test-sampling-chains compares them). */
typedef void (*g3_gumbel_screen_n_fn)(uint64_t key, const uint64_t *restrict hashes,
                                      const float *restrict l, float lmax, float thr,
                                      uint8_t *restrict pass, int n);
g3_gumbel_screen_n_fn g3_gumbel_screen_n_get(int isa);

/* Top-n-sigma's fast sums over l[0..n) (-inf skipped), in lanes: out = {max, max |l|, mean,
 * sum of (l - mean)^2, count of finite}; per instruction set like g3_approx_exp_n_get. */
typedef void (*g3_sigma_sums_n_fn)(const float *restrict l, int n, double *out);
g3_sigma_sums_n_fn g3_sigma_sums_n_get(int isa);

/* Top-k's heap scan: from j, blocks of 16 of l[0..n); *bad |= 1 if a value of a block it reads
 * is NaN or +-inf; returns the start of the first block with a value >= worst (in float), or
 * the first j with fewer than 16 values left. Scalar reference, AVX2 and AVX-512 intrinsics. */
typedef int (*g3_block_scan_fn)(const float *l, int j, int n, float worst, uint32_t *bad);
g3_block_scan_fn g3_block_scan_get(int isa);

/* Fixed-point mass of a logit for the top-p boundary: round(exp(l - lmax) * 2^40), computed in
 * double; 0 below lmax - 29 (where the rounding gives 0 anyway). */
uint64_t g3_fixed_mass(float l, float lmax);

/* How near a rounding tie the scaled mass x = g3_approx_exp(d) 2^40 must lie for its rounding to
 * be left to libm's exp (g3_fixed_mass): x and libm's 2^40 e^d differ by at most x (2^-48 +
 * 2^-52) (G3_APPROX_EXP_REL_ERR, libm's ulp), and the two additions of 0.5 round by at most
 * x 2^-52 each where x >= 1/2; the window is about three times that. Relative, not absolute:
 * a token 12 nats below the maximum is never flagged, where a window of 2^-7 flagged one in 64
 * (and its libm exp cost more than the rounding pass). */
static inline double g3_mass_tie_window(double x) { return x * 0x1p-46; }
/* q[i] = round(g3_approx_exp(max(l[i] - lmax, -708)) 2^40) and tie[i] = 1 where that value x
 * lies within g3_mass_tie_window(x) of a rounding tie (g3_mass_fix_ties takes libm's exp there),
 * *n_tie how many do; returns the sum of q. Per instruction set like g3_approx_exp_n_get (the
 * same bits). */
typedef uint64_t (*g3_mass_round_n_fn)(const float *restrict l, float lmax, uint64_t *restrict q,
                                       uint64_t *restrict tie, int n, int *n_tie);
g3_mass_round_n_fn g3_mass_round_n_get(int isa);
/* The second step: the n_tie masses flagged in tie[0..n) taken again by libm's exp
 * (g3_fixed_mass), q's sum total adjusted; returns it. Stops at the last flag. */
uint64_t g3_mass_fix_ties(const float *l, float lmax, uint64_t *q, const uint64_t *tie, int n,
                          int n_tie, uint64_t total);

/* The rank view (sampling/rank.c): every token bucketed by its distance below the maximum
 * lmax, G3_VIEW_BUCKETS - 1 buckets of 1/64 nat (31.98 nats) and a last one for everything
 * lower (-inf too), and per bucket the sum of its tokens' weights e^(l - lmax) in fixed point.
 * A token of bucket b has e^(l - lmax) = e^(-b/64) e^x, x = (l - lmax) + b/64 in (-1/64, 0]
 * (up to the float roundings below), so its weight within the bucket is e^x, near 1, which a
 * short float polynomial gives to 2^-28 absolute; the bucket's factor e^(-b/64) is one double
 * per bucket. The view weight of a token is e^(-b/64) 2^-31 u, u = g3_view_unit(...): within
 * G3_VIEW_REL_ERR of e^(l - lmax) (test-sampling-chains checks the observed error on a
 * million inputs against a quarter of it, about 2^-30 is seen); 0 in the last bucket, where
 * e^(l - lmax) < 2^-46. Every step is a float operation without contraction, the same in
 * every build and in the scalar readers of one token's weight. */
#define G3_VIEW_BUCKETS 2048
#define G3_VIEW_PER_NAT 64 /* a power of two: b / 64 is exact */
#define G3_VIEW_REL_ERR 0x1p-27
/* The bucket of logit l: floor(64 (lmax - l)) of the float difference, the last for the rest.
 * Monotone: a larger logit never gets a larger bucket, and equal logits share one. */
static inline int g3_view_bucket(float l, float lmax) {
    float y = (l - lmax) * (float)-G3_VIEW_PER_NAT; /* exact: a power of two */
    return y < (float)(G3_VIEW_BUCKETS - 1) ? (int)y : G3_VIEW_BUCKETS - 1;
}
/* x = (l - lmax) + b/64 for l's bucket b: the float difference d plus b/64 is exact (Sterbenz:
 * b/64 <= -d < (b + 1)/64 <= 2b/64), and d's own rounding error, computed exactly by TwoSum,
 * is added with one rounding (at most 2^-30, since |x| < 2^-6 + 2^-19). Meaningless in the
 * last bucket (the helpers below give 0 there). */
static inline float g3_view_reduced(float l, float lmax, int b) {
    float d = l - lmax;
    float lb = d + lmax, mb = d - lb;
    float err = (l - lb) - (lmax + mb); /* (l - lmax) - d, exactly */
    return (d + (float)b * (1.0f / G3_VIEW_PER_NAT)) + err;
}
/* e^x - 1 for |x| < 2^-6 + 2^-19: the degree-4 Taylor polynomial by Horner (remainder below
 * 2^-36), its float roundings below 2^-29 absolute. */
static inline float g3_view_expm1(float x) {
    float p = 1.0f / 24;
    p = p * x + 1.0f / 6;
    p = p * x + 0.5f;
    p = p * x + 1.0f;
    return p * x;
}
/* The token's weight within its bucket in units of 2^-31: 2^31 (1 + p) with p's fraction of a
 * unit cut off (|p| 2^31 < 2^25.1: an int32); 0 in the last bucket. */
static inline uint32_t g3_view_unit(float p, int b) {
    /* masks, not selects (see g3_approx_expf); the last bucket's p, maybe NaN, converts as 0 */
    const uint32_t in = (uint32_t)-(int32_t)(b < G3_VIEW_BUCKETS - 1);
    return ((uint32_t)(int32_t)(g3_f32_select(in, p, 0.0f) * 0x1p31f) + 0x80000000u) & in;
}
/* e^(-b/64) for typical's sum (g3_view_moment), b = 128 i + 8 j + k, as e^(-2i) e^(-j/8)
 * e^(-k/64): three tables that a vector permute reads (AVX-512: 16 entries a register, the
 * last twice over), each entry e^-y rounded to float. */
static const float g3_view_exp_two[16] = {
    0x1p+0f, 0x1.152aaap-3f, 0x1.2c155cp-6f, 0x1.44e52p-9f, 0x1.5fc21p-12f,
    0x1.7cd79cp-15f, 0x1.9c54c4p-18f, 0x1.be6c7p-21f, 0x1.e355bcp-24f, 0x1.05a628p-26f,
    0x1.1b4866p-29f, 0x1.32b48cp-32f, 0x1.4c1078p-35f, 0x1.67852ap-38f, 0x1.853f02p-41f,
    0x1.a56e0cp-44f,
};
static const float g3_view_exp_eighth[16] = {
    0x1p+0f, 0x1.c3d6a2p-1f, 0x1.8ebefap-1f, 0x1.5fe462p-1f, 0x1.368b3p-1f,
    0x1.120dcap-1f, 0x1.e3b40ep-2f, 0x1.aaddep-2f, 0x1.78b564p-2f, 0x1.4c71b2p-2f,
    0x1.256184p-2f, 0x1.02e862p-2f, 0x1.c8f878p-3f, 0x1.93466ep-3f, 0x1.63e398p-3f,
    0x1.3a122cp-3f,
};
static const float g3_view_exp_64th[16] = {
    0x1p+0f, 0x1.f80feap-1f, 0x1.f03f56p-1f, 0x1.e88dc6p-1f, 0x1.e0facp-1f,
    0x1.d985c8p-1f, 0x1.d22e6ap-1f, 0x1.caf42ep-1f, 0x1p+0f, 0x1.f80feap-1f,
    0x1.f03f56p-1f, 0x1.e88dc6p-1f, 0x1.e0facp-1f, 0x1.d985c8p-1f, 0x1.d22e6ap-1f,
    0x1.caf42ep-1f,
};
/* The token's e^(l - lmax) x, its share of typical's sum of e^(l - lmax) (l - lmax) with the
 * bucket's b/64 times the view weight (subtracted by the reader): e^(-b/64) from the tables
 * times e^x = 1 + p times x, in float, in that order; 0 in the last bucket. The tables'
 * product is within 2.6 2^-24 of e^(-b/64) (test-sampling-chains checks every bucket against
 * 3 2^-24), three more roundings of 2^-24 and p's 2^-29 act on |x| < 2^-6 + 2^-19, and x's
 * own rounding is 2^-30: within 2^-27.3 e^(l - lmax) of e^(l - lmax) times the exact x. */
#define G3_VIEW_MOMENT_ERR 0x1p-27
/* The pass sums the moments in float, 16 lanes of 64 tokens a block (then in double): a float
 * sum of 64 terms errs by at most 63 2^-24 / (1 - 63 2^-24) < 2^-18 of their sum of magnitudes,
 * each term at most (2^-6 + 2^-19)(1 + 2^-20) e^(l - lmax): in all within this of Z, the sum
 * of e^(l - lmax) (test-sampling-chains checks it against the exact sum). */
#define G3_VIEW_MOMENT_SUM_ERR 0x1.01p-24
static inline float g3_view_exp_bucket(int b) {
    return (g3_view_exp_two[(b >> 7) & 15] * g3_view_exp_eighth[(b >> 3) & 15]) *
           g3_view_exp_64th[b & 7];
}
static inline float g3_view_moment(float x, float p, int b) {
    const uint32_t in = (uint32_t)-(int32_t)(b < G3_VIEW_BUCKETS - 1);
    return g3_f32_select(in, (g3_view_exp_bucket(b) * (1.0f + p)) * x, 0.0f);
}
/* A bucket's sums of its tokens' units: the even and odd tokens of the pass apart (two tokens in
 * a row never add to one place), the odd ones added to `unit` at the end; `odd` is 0 after. */
struct g3_view_sum {
    uint64_t unit;
    uint64_t odd;
};
/* The view's pass: bucket[i] = g3_view_bucket(l[i], lmax) for every token, sums[b].unit += its
 * unit, and (moment not NULL) *moment = the sum of g3_view_moment over the tokens: 16 float
 * lanes per block of 1024 (token i in lane i % 16), each block's added to 16 double lanes,
 * then tree_sum16, then the last block's tail (in double); sums zeroed by the caller; with
 * bucket and sums NULL the moment alone. Integer sums: any order gives the same bits. One C
 * body per instruction set like g3_approx_exp_n_get (the same bits). */
typedef void (*g3_rank_view_fn)(const float *restrict l, float lmax, int n,
                                uint16_t *restrict bucket, struct g3_view_sum *restrict sums,
                                double *moment);
g3_rank_view_fn g3_rank_view_get(int isa);
/* The ids i whose bucket lies in [g1, g2] but not in [a1, a2] (a2 < a1: nothing left out),
 * ascending, into out; returns how many, and *inner gets how many tokens lie in [a1, a2]. One
 * bucket's tokens are [b, b] less [0, b - 1], *inner then counting the tokens of earlier
 * buckets; typical's band is the buckets within reach of its centre less those wholly nearer.
 * Scalar reference, AVX2 and AVX-512 intrinsics (the same results). */
typedef int (*g3_band_scan_fn)(const uint16_t *bk, int n, int g1, int g2, int a1, int a2,
                               int32_t *out, int *inner);
g3_band_scan_fn g3_band_scan_get(int isa);

/* The copies of the whole vocabulary, compiled per instruction set like g3_approx_exp_n_get
 * (copies, IEEE divisions and maxima: every variant gives the scalar reference's bits).
 * copy_check: dst = src; returns 1 if every value is finite. copy_divide: dst = min(src / t,
 * FLT_MAX), returns 1 if every src value is finite, *max = the largest dst value (-inf for
 * n = 0; meaningless where a src value is NaN) and *first the lowest i with dst[i] == *max (-1
 * for n = 0). max_n: the largest of l[0..n), NaN-free l. */
typedef int (*g3_copy_check_fn)(float *restrict dst, const float *restrict src, int n);
g3_copy_check_fn g3_copy_check_get(int isa);
typedef int (*g3_copy_divide_fn)(float *restrict dst, const float *restrict src, int n, float t,
                                 float *max, int *first);
g3_copy_divide_fn g3_copy_divide_get(int isa);
typedef float (*g3_max_n_fn)(const float *l, int n);
g3_max_n_fn g3_max_n_get(int isa);
/* check_max: returns 1 if every value of l[0..n) is finite, *max = what max_n gives and *first
 * the lowest i with l[i] == *max (meaningless when one is not): one read-only pass. */
typedef int (*g3_check_max_fn)(const float *l, int n, float *max, int *first);
g3_check_max_fn g3_check_max_get(int isa);

#endif
