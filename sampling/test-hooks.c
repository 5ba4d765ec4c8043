/* sampling/test-hooks.c - the tests' and the benchmark's hooks into the sampler
 * (sampling/test-hooks.h): switches that turn fast paths off, and the counters of which path
 * answered. */
#include "sampling/test-hooks.h"

#include "sampling/state.h"

const float *g3_sampler_work_logits(const gemma3_sampler *s) { return s->logits; }
float g3_sampler_mirostat_mu(const gemma3_sampler *s) { return s->mu; }
void g3_sampler_exact_draw_only(gemma3_sampler *s, int on) { s->exact_draw_only = on; }
void g3_sampler_typical_fast(const gemma3_sampler *s, int *sets, int *draws) {
    *sets = G3_STAT_READ(s, typ_fast_sets);
    *draws = G3_STAT_READ(s, typ_fast_draws);
}
int g3_sampler_typical_by_logit(const gemma3_sampler *s) { return G3_STAT_READ(s, typ_by_logit); }
int g3_sampler_typical_fine_close(const gemma3_sampler *s) {
    return G3_STAT_READ(s, typ_fine_close);
}
void g3_sampler_typical_pending(const gemma3_sampler *s, int *draws, int *resolved) {
    *draws = G3_STAT_READ(s, typ_pending_draws);
    *resolved = G3_STAT_READ(s, typ_resolved);
}
int g3_sampler_typical_pending_set(const gemma3_sampler *s, double *center, double *sure,
                                   double *far, double *w_lo, double *w_hi) {
    *center = s->typ.center;
    *sure = s->typ.dist;
    *far = s->typ.far;
    *w_lo = s->typ.w_lo;
    *w_hi = s->typ.w_hi;
    return s->form == G3_LIST_TYPICAL && s->typ.pending;
}
double g3_sampler_typical_centre_err(const gemma3_sampler *s) { return s->typ.err.centre; }
void g3_sampler_view_open(gemma3_sampler *s, int which) { s->view_open = which; }
int g3_sampler_top_p_mass_sets(const gemma3_sampler *s) { return G3_STAT_READ(s, top_p_mass_sets); }
double g3_sampler_typical_mass(const gemma3_sampler *s, int *fine) {
    *fine = s->typ.fine;
    return s->form == G3_LIST_TYPICAL && !s->typ.pending ? s->typ.mass : -1;
}
int32_t g3_sampler_typical_first(const gemma3_sampler *s) {
    return s->form == G3_LIST_TYPICAL ? s->typ.first : -1;
}
int g3_sampler_top_p_winner_draws(const gemma3_sampler *s) {
    return G3_STAT_READ(s, top_p_winner_draws);
}
int g3_sampler_top_p_coarse_draws(const gemma3_sampler *s) {
    return G3_STAT_READ(s, top_p_coarse_draws);
}
int g3_sampler_xtc_winner_draws(const gemma3_sampler *s) {
    return G3_STAT_READ(s, xtc_winner_draws);
}
void g3_sampler_skip_rough(gemma3_sampler *s, int on) { s->skip_rough = on; }
void g3_sampler_skip_float_draw(gemma3_sampler *s, int on) { s->skip_float_draw = on; }
void g3_sampler_perturb_float_draw(gemma3_sampler *s, int on) { s->perturb_float_draw = on; }
int g3_sampler_float_tier_draws(const gemma3_sampler *s) {
    return G3_STAT_READ(s, float_tier_draws);
}
