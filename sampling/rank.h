/* sampling/rank.h - top-p's boundary and typical's set over the whole vocabulary, and the CDF
 * walk over a window of its total order (sampling/candidates.h) or over typical's set, without
 * sorting the vocabulary: one pass buckets every token by its logit and sums approximate
 * weights per bucket (the rank view); only the bucket (top-p) or the band of distances
 * (typical) that holds the answer is sorted. Each answer comes with a bound on the error of the
 * approximate sums and is given only when that bound cannot change it; otherwise the caller
 * takes the exact path (docs/sampling.md §7). */
#ifndef G3_SAMPLING_RANK_H
#define G3_SAMPLING_RANK_H

#include <stdint.h>

#include "sampling/state.h"

/* Top-p over a list that is the whole vocabulary, whose maximum is lmax: finds the shortest
 * prefix of the total order whose fixed-point mass (g3_fixed_mass) reaches floor(p * the total),
 * as top_p defines it. Returns 1 with its last token in *last and its length in *count, or 0
 * when the bounds leave it open (or the target may be 0). */
int g3_rank_top_p(gemma3_sampler *s, float lmax, float p, int32_t *last, int *count);

/* The exact CDF walk's answer over a window (G3_LIST_WINDOW) for the uniform u: the token whose
 * step holds u * Z when the window is walked in the total order (g3_draw_cdf, sampling/draw.c),
 * or -1 when the bounds leave it open. */
int32_t g3_rank_draw_cdf(gemma3_sampler *s, double u);

/* Z, the sum of e^(l - lmax) over the whole vocabulary (lmax its maximum), from the view (the
 * CDF walk over a window then finds it built): returns it with *rel, a bound on its relative
 * error, or 0 for a vocabulary too large for the view. */
double g3_rank_z(gemma3_sampler *s, float lmax, double *rel);

/* Whether g3_rank_typical may leave the set pending for the draw that comes next: not (the
 * set is read), for the CDF draw (whose walk needs the set's weight close: the centre from the
 * view's moments), or for the Gumbel draw (which needs only which tokens are surely in and
 * out: the centre from the bucket sums, within 2^-7 nat, and the view's pass without the
 * moments, which a crossing found later adds by a pass of their own). */
enum { G3_TYPICAL_NOW, G3_TYPICAL_DEFER_CDF, G3_TYPICAL_DEFER_GUMBEL };

/* Locally typical over a list that is the whole vocabulary, whose maximum is lmax: the set the
 * exact typical (sampling.c) keeps, found from the view in order of distance from the centre
 * c = lmax + sum w d / Z. Returns its size, with the set in s->typ (G3_LIST_TYPICAL is the caller's
 * to set), or 0 when the bounds leave it open or it would hold fewer than min_keep tokens.
 * With defer (one of the above) the set may be left pending (s->typ.pending): only the
 * view's bracket of its crossing, the return a lower bound on its size (at least 2 and
 * min_keep); the draw then finds the crossing only when it needs it. */
int g3_rank_typical(gemma3_sampler *s, float lmax, float tp, int min_keep, int defer);

/* A pending set's crossing, found (the walk g3_rank_typical left): returns the set's size, at
 * least 2, or 0 when the bounds leave it open (the caller's exact path runs). */
int g3_rank_typical_resolve(gemma3_sampler *s);

/* The first token of typical's set (s->typ, found: not pending) in the total order, its
 * largest logit at the lowest id; -1 if the view cannot tell. */
int32_t g3_rank_typical_first(gemma3_sampler *s);

/* The exact CDF walk's answer over typical's set (s->typ) walked in its order for the uniform
 * u, or -1 when the bounds leave it open (a pending set is then found, or left open: the
 * caller's exact path runs either way). */
int32_t g3_rank_draw_typical(gemma3_sampler *s, double u);

#endif
