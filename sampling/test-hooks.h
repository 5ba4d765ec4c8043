/* sampling/test-hooks.h - the tests' and the benchmark's hooks into the sampler: the kept set, its
 * working logits, switches that turn fast paths off, and counters of which path answered. The
 * passes and their arithmetic are in sampling/passes.h, the RNG in rng.h; the API in gemma3.h. */
#ifndef G3_SAMPLING_TEST_HOOKS_H
#define G3_SAMPLING_TEST_HOOKS_H

#include <stdint.h>

#include "gemma3.h"
#include "rng.h"
#include "sampling/passes.h"

/* Runs the chain on logits (without the final draw) and writes the surviving token ids,
 * ascending, to ids (capacity n_vocab). Returns how many, 0 when nothing finite survives (the
 * fallback case). With mode CDF the filters use sorting/partial selection; with GUMBEL radix
 * selection: tests compare the two. Greedy/mirostat params are not supported here (ERR_ARG). */
int g3_sampler_kept(gemma3_sampler *s, const float *logits, int64_t position, int32_t *ids);

/* Replaces the parameters of a live sampler without reallocating (tests run thousands of
 * configurations); the history windows must fit the buffers sized at init. */
int g3_sampler_set_params(gemma3_sampler *s, const gemma3_sampler_params *params);

/* Working logits after the chain ran in the last g3_sampler_kept / gemma3_sampler_sample call
 * (by token id, [n_vocab]): the tests compute the exact distribution over the kept set from it.
 * When no sampler rewrote a logit this is the caller's vector itself (valid while it is). */
const float *g3_sampler_work_logits(const gemma3_sampler *s);

/* Mirostat's current mu. */
float g3_sampler_mirostat_mu(const gemma3_sampler *s);

/* Tests: 1 turns the fast CDF walk off (every draw takes the exact walk), 0 back on. */
void g3_sampler_exact_draw_only(gemma3_sampler *s, int on);
/* Tests: how many typical sets, and draws over one kept implicit (the CDF walk's or the
 * Gumbel screen's), the rank view has answered since init (the rest took the exact
 * computation, or drew from the set written out). */
void g3_sampler_typical_fast(const gemma3_sampler *s, int *sets, int *draws);
/* Tests: how many of those walks (the set's or a draw's) had a token of another logit within
 * 2 eps of the crossing's distance on its side of the centre, ordered by logit
 * (sampling/rank.c's ambiguous), since init. */
int g3_sampler_typical_by_logit(const gemma3_sampler *s);
/* Tests: how many typical sets the fine tier found since init where the view's walk left two
 * tokens' scores too close to order. */
int g3_sampler_typical_fine_close(const gemma3_sampler *s);
/* Tests: since init, how many draws were answered over typical's set while it was pending (from
 * the bracket of its crossing alone), and how many pending sets had to be found first. */
void g3_sampler_typical_pending(const gemma3_sampler *s, int *draws, int *resolved);
/* Tests: 1 when the last call left typical's set pending, with its centre, the distances from
 * it nearer than which every token is in the set and beyond which none is, and the range
 * (w_lo, w_hi] of the set's weight (the view's weights: e^(l - lmax) within G3_VIEW_REL_ERR);
 * 0 otherwise. */
int g3_sampler_typical_pending_set(const gemma3_sampler *s, double *center, double *sure,
                                   double *far, double *w_lo, double *w_hi);
/* Tests: the bound the last typical set over the whole vocabulary (found or pending) claims on
 * the distance of its centre from the exact scores' centre. */
double g3_sampler_typical_centre_err(const gemma3_sampler *s);
/* Tests: the rank view's answers are skipped as if its sums had left them open: typical's set
 * and typical's draws over a set the view found (which then take the fine tier, the draws
 * taking the set again there first), top-p's boundary (which then takes the exact masses),
 * the winner of a Gumbel draw over typical's pending set (which then finds the set and draws
 * again, as when a rival's value lies within the roundings); 0 back to normal. */
enum {
    G3_VIEW_OPEN_TYPICAL_SET = 1,
    G3_VIEW_OPEN_TYPICAL_DRAW = 2,
    G3_VIEW_OPEN_TOP_P = 4,
    G3_VIEW_OPEN_TYPICAL_WINNER = 8
};
void g3_sampler_view_open(gemma3_sampler *s, int which);
/* Tests: how many top-p boundaries over the whole vocabulary the exact masses found since init
 * (the view's left open). */
int g3_sampler_top_p_mass_sets(const gemma3_sampler *s);
/* Tests: the weight of typical's implicit set as the last walk took it, and (*fine) whether in
 * the fine tier's weights; -1 when the last call's set was not kept implicit or stayed
 * pending. */
double g3_sampler_typical_mass(const gemma3_sampler *s, int *fine);
/* Tests: the first token (largest logit, lowest id) of typical's implicit set, which the last
 * Gumbel draw started from; -1 when the last call's list was not typical's set kept implicit
 * in Gumbel mode. */
int32_t g3_sampler_typical_first(const gemma3_sampler *s);
/* Tests: how many top-p calls in Gumbel mode the whole vocabulary's winner answered since init
 * (top_p's winner-first path in sampling.c; the rest built the nucleus), and how many XTC calls
 * the winner among the tokens XTC cannot drop answered without XTC's count (xtc_winner_first). */
int g3_sampler_top_p_winner_draws(const gemma3_sampler *s);
/* Tests: how many of those top-p answers the coarse sums (g3_exp_coarse) decided. */
int g3_sampler_top_p_coarse_draws(const gemma3_sampler *s);
int g3_sampler_xtc_winner_draws(const gemma3_sampler *s);
/* Tests: 1 turns the coarse and rough sums (g3_exp_coarse_sums, g3_exp_rough_sums) off: XTC's
 * count takes the float tier's Z, top-p in Gumbel mode builds the nucleus; 0 back on. */
void g3_sampler_skip_rough(gemma3_sampler *s, int on);

/* Tests: 1 makes the CDF walk skip its float tiers (g3_approx_expf, and the rank view's weights
 * in the walk over a window), so that the double tier (g3_approx_exp) answers the draws they
 * would have answered; 0 back on. */
void g3_sampler_skip_float_draw(gemma3_sampler *s, int on);
/* Tests: 1 makes the float tier's block sums (and the chosen block's weights) err by 0.9 times
 * G3_APPROX_EXPF_REL_ERR, those before the target one way and the rest the other: the worst its
 * bound allows, which its margin must still absorb (every draw the same as the exact walk's). */
void g3_sampler_perturb_float_draw(gemma3_sampler *s, int on);
/* Tests: how many CDF draws over a list the float tier answered since init. */
int g3_sampler_float_tier_draws(const gemma3_sampler *s);

/* Mirostat v1's prefilter (sampling/candidates.c): the positions of l[0..n) (NaN-free, n >= m >= 1)
 * that reach the smallest of m contiguous group maxima, ascending, into sub [n]; returns how
 * many (at least m, and every one of the first m of the total order among them). s gives the
 * kernels. */
int g3_positions_reaching(const gemma3_sampler *s, const float *l, int n, int m, int32_t *sub);

#endif
