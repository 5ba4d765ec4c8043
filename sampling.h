/* sampling.h - sampler internals shared with the tests and the benchmark: the counter-based
 * RNG, the order-preserving float keys and a view of the kept set. The API is in gemma3.h. */
#ifndef G3_SAMPLING_H
#define G3_SAMPLING_H

#include <stdint.h>
#include <string.h>

#include "gemma3.h"

/* What a random number is for: different purposes never share a stream. */
enum g3_rng_purpose {
    G3_RNG_DRAW = 1,   /* the CDF walk's uniform, index 0 */
    G3_RNG_GUMBEL = 2, /* Gumbel noise of token `index` */
    G3_RNG_XTC = 3,    /* XTC's coin, index 0 */
};

/* 64 random bits, a pure function of (seed, position, purpose, index): splitmix64 finalisers
 * chained over the four inputs (sampling-reference.md §4). */
static inline uint64_t g3_mix64(uint64_t z) {
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z;
}
/* The (seed, position) part, hoisted out of per-token loops. */
static inline uint64_t g3_rng_key(uint64_t seed, int64_t position) {
    return g3_mix64(g3_mix64(seed + 0x9e3779b97f4a7c15ull) ^
                    ((uint64_t)position * 0xd1b54a32d192ed03ull));
}
static inline uint64_t g3_rng_bits(uint64_t key, uint32_t purpose, uint32_t index) {
    return g3_mix64(key ^ g3_mix64((((uint64_t)purpose << 32) | index) + 0x632be59bd9b4e019ull));
}

/* Uniform in the OPEN interval (0, 1) from 52 bits: (b + 0.5) * 2^-52 is exact in double and
 * lies in [2^-53, 1 - 2^-53]. (53 bits would round the top value up to 1.0.) */
static inline double g3_uniform(uint64_t bits) { return ((double)(bits >> 12) + 0.5) * 0x1p-52; }
/* Uniform in (0, 1) from the top 32 bits, (b + 0.5) * 2^-32 in double, as the reference doc
 * prescribes for Gumbel noise. */
static inline double g3_uniform32(uint64_t bits) { return ((double)(bits >> 32) + 0.5) * 0x1p-32; }
/* Standard Gumbel noise -ln(-ln U), U from g3_uniform32: finite, in about [-3.1, 22.9]. The
 * truncated tail (max 22.87) only matters for tokens more than ~20 nats below the best one. */
double g3_gumbel(uint64_t bits);
/* The largest value g3_gumbel can return (at b = 2^32 - 1). */
double g3_gumbel_max(void);

/* Order-preserving map float -> uint32: a < b  <=>  key(a) < key(b) and a == b  <=>  key(a) ==
 * key(b), so radix selection on keys agrees with float comparisons: -inf is lowest and -0 maps
 * to the key of +0 (f + 0.0f is +0 for both zeros). NaN must be removed before. */
static inline uint32_t g3_float_key(float f) {
    float g = f + 0.0f;
    uint32_t u;
    memcpy(&u, &g, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Fixed-point mass of a logit for the top-p boundary: round(exp(l - lmax) * 2^40), computed in
 * double; 0 below lmax - 29 (where the rounding gives 0 anyway). */
uint64_t g3_fixed_mass(float l, float lmax);

/* Runs the chain on logits (without the final draw) and writes the surviving token ids,
 * ascending, to ids (capacity n_vocab). Returns how many, 0 when nothing finite survives (the
 * fallback case). With mode CDF the filters use sorting/partial selection; with GUMBEL radix
 * selection: tests compare the two. Greedy/mirostat params are not supported here (ERR_ARG). */
int g3_sampler_kept(gemma3_sampler *s, const float *logits, int64_t position, int32_t *ids);

/* Replaces the parameters of a live sampler without reallocating (tests run thousands of
 * configurations); the history windows must fit the buffers sized at init. */
int g3_sampler_set_params(gemma3_sampler *s, const gemma3_sampler_params *params);

/* Working logits after the chain ran in the last g3_sampler_kept / gemma3_sampler_sample call
 * (by token id, [n_vocab]): the tests compute the exact distribution over the kept set from it. */
const float *g3_sampler_work_logits(const gemma3_sampler *s);

/* Mirostat's current mu. */
float g3_sampler_mirostat_mu(const gemma3_sampler *s);

#endif
