/* sampling/draw.h - the final draw (sampling/draw.c): a CDF walk or the Gumbel-max draw, both
 * exact draws from the softmax of the list's logits; and the Gumbel arithmetic the samplers
 * that draw themselves (top-p's and XTC's winner first) share with it. */
#ifndef G3_SAMPLING_DRAW_H
#define G3_SAMPLING_DRAW_H

#include <stdint.h>

#include "rng.h"
#include "sampling/state.h"

/* The fast CDF walk sums DRAW_BLOCK weights per block; lists shorter than FAST_DRAW_MIN take the
 * exact walk (and the other approximate-then-check paths the exact computation). */
enum { DRAW_BLOCK = 64, FAST_DRAW_MIN = 1024 };

/* A token's Gumbel noise, and its value relative to the maximum lmax: what the draw compares
 * (gumbel_sum from the noise, gumbel_value from the key); the greater value wins, a tie goes to
 * the lower id (gumbel_beats). */
static inline double g3_gumbel_noise(uint64_t key, int32_t id) {
    return g3_gumbel(g3_rng_bits(key, G3_RNG_GUMBEL, (uint32_t)id));
}
static inline double g3_gumbel_sum(float l, float lmax, double noise) {
    return ((double)l - (double)lmax) + noise;
}
static inline double g3_gumbel_value(const gemma3_sampler *s, uint64_t key, float lmax,
                                     int32_t id) {
    return g3_gumbel_sum(s->logits[id], lmax, g3_gumbel_noise(key, id));
}
static inline int g3_gumbel_beats(double v, int32_t id, double best_v, int32_t best) {
    return v > best_v || (v == best_v && id < best);
}

/* The draw by the mode: g3_draw_cdf or g3_draw_gumbel. -1 when nothing finite is left. */
int32_t g3_draw(gemma3_sampler *s, int64_t pos);
int32_t g3_draw_cdf(gemma3_sampler *s, int64_t pos);
int32_t g3_draw_gumbel(gemma3_sampler *s, int64_t pos);
/* The Gumbel draw over the list without the n_skip tokens of skip, starting from token start
 * (-1: none); *second (if not NULL) gets the runner-up's value. */
int32_t g3_draw_gumbel_skipping(gemma3_sampler *s, int64_t pos, const int32_t *skip, int n_skip,
                                int32_t start, double *second);

#endif
