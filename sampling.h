/* sampling.h - sampler internals shared with the tests and the benchmark: the order-preserving
 * float keys and a view of the kept set (the counter-based RNG is in rng.h). The API is in
 * gemma3.h. */
#ifndef G3_SAMPLING_H
#define G3_SAMPLING_H

#include <stdint.h>
#include <string.h>

#include "gemma3.h"
#include "rng.h"

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
