/* sampling/state.h - the sampler's state, shared by sampling.c (the samplers and the draw) and
 * sampling/candidates.c (the candidate-list machinery). Not part of any API. */
#ifndef G3_SAMPLING_STATE_H
#define G3_SAMPLING_STATE_H

#include <stdint.h>

#include "gemma3.h"
#include "sampling/test-hooks.h"

#define RADIX_BUCKETS 2048
#define TYPICAL_BUCKETS 65536

struct scored {
    double score;
    int32_t id;
    uint32_t bucket; /* typical-p's counting sort */
};

/* How far a token's distance from typical's centre may lie from its exact typical score:
 * eps in all (the centre's uncertainty and the token's own roundings), tok_eps for the token's
 * own roundings alone; centre, how far the centre may lie from the exact scores' centre
 * (sampling/rank.c). */
struct g3_score_err {
    double eps, tok_eps, centre;
};

/* Which path answered, counted for the tests (sampling/test-hooks.h) since init: a test that
 * checks a fast path also checks that it ran. Compiled for the tests only: the suites link a
 * library whose sampler is built with -DG3_SAMPLER_STATS (the Makefile's TEST_LIB); without it
 * the block and G3_STAT's additions are left out and the hooks read 0. */
struct g3_sampler_stats {
    int float_tier_draws;                /* CDF draws the float tier answered */
    int typ_fast_sets, typ_fast_draws;   /* typical's answers from the rank view */
    int typ_by_logit;   /* of those, walks whose neighbours on one side needed their logits */
    int typ_fine_close; /* sets the fine tier found where the view's scores lay too close */
    int typ_pending_draws, typ_resolved; /* draws from a pending set; sets it left to find */
    int top_p_mass_sets;    /* top-p boundaries the exact masses found over the vocabulary */
    int top_p_winner_draws; /* top-p's answers by the winner first */
    int top_p_coarse_draws; /* those the coarse sums decided */
    int xtc_winner_draws;   /* XTC's answers by the winner first, no Z */
};
#ifdef G3_SAMPLER_STATS
#define G3_STAT(s, field, n) ((s)->stats.field += (n))
#define G3_STAT_READ(s, field) ((s)->stats.field)
#else
#define G3_STAT(s, field, n) ((void)sizeof(n))
#define G3_STAT_READ(s, field) 0
#endif

/* What the candidate list is now (s->form); the transitions are in sampling/candidates.c. */
enum g3_list_form {
    G3_LIST_VOCAB,   /* every token, not written out: read as s->iota (0..n_vocab-1, id order);
                      * how each call starts, so a chain that keeps everything writes nothing */
    G3_LIST_IDS,     /* s->cand[0..n_cand) written out, in the order `sorted` / `id_order` say */
    G3_LIST_WINDOW,  /* a stretch of the whole vocabulary's total order, not written (s->win) */
    G3_LIST_TYPICAL, /* typical's set of the whole vocabulary, not written (s->typ) */
};

/* What the working logits are now (s->logits_state.stage). A call starts at G3_LOGITS_RAW
 * (prepare in sampling.c); only the transitions at the end of sampling/candidates.c assign it:
 *
 *   RAW -> RAW_DIVIDING   temperature, last before a Gumbel draw over the whole vocabulary,
 *                         leaves its division to the draw's pass (g3_logits_owe_division):
 *                         only then, so that no sampler but the draw meets this stage
 *   RAW -> CHECKED        a copy into s->own that applies the rules (g3_writable_logits,
 *                         prepare's logit bias), or top-k's heap, which checks as it scans
 *   RAW -> MAX_KNOWN      a pass that checks them all and finds the maximum on the way
 *                         (g3_check_finite, the dividing copy, the Gumbel draw's checking pass)
 *   RAW_DIVIDING -> MAX_KNOWN  the Gumbel draw's pass divided and checked them all
 *   RAW_DIVIDING -> RAW   the draw's pass met a NaN or an infinity: g3_check_finite takes
 *                         the division back (g3_logits_pay_division) and divides in a copy,
 *                         the rules first
 *   MAX_KNOWN -> CHECKED  a sampler rewrote them (g3_logits_rewritten)
 *
 * Only RAW and RAW_DIVIDING are the caller's vector unchecked: every reader of the logits but
 * top-k's heap and the Gumbel draw's checking pass (which check as they read) first calls
 * g3_check_finite. The rank view (sampling/rank.c) is built from checked logits and is valid
 * until they are rewritten (`view`). */
enum g3_logits_stage {
    G3_LOGITS_RAW,          /* the caller's vector, the NaN/+inf rules not applied yet */
    G3_LOGITS_RAW_DIVIDING, /* the same, temperature's division (`divide`) owed: the Gumbel
                             * draw's pass divides into s->own as it checks */
    G3_LOGITS_CHECKED,      /* the rules applied: the caller's vector found clean, or s->own */
    G3_LOGITS_MAX_KNOWN,    /* checked, and the largest of logits[0..n_vocab) known (`max`), with
                             * the lowest id at it (`max_first`): found by the pass that read
                             * them all, valid until a sampler rewrites them */
};
struct g3_logits_state {
    enum g3_logits_stage stage;
    float divide;  /* G3_LOGITS_RAW_DIVIDING: the temperature owed; else 0 */
    float max;     /* G3_LOGITS_MAX_KNOWN */
    int max_first; /* G3_LOGITS_MAX_KNOWN */
    int view;      /* the rank view (s->view_*) holds these logits: set when built, cleared by
                    * every rewrite */
};

struct gemma3_sampler {
    gemma3_sampler_params p;
    int n_vocab;
    uint32_t seed;
    float mu; /* mirostat state, starts at 2 tau */
    /* the tests' switches (sampling/test-hooks.h): fast paths off, or pushed to their bounds */
    int exact_draw_only;    /* the CDF walk without its fast paths */
    int skip_float_draw;    /* the CDF walk without its float tiers */
    int perturb_float_draw; /* the float tier's sums off by 0.9 of its error bound */
    int view_open;          /* g3_sampler_view_open */
    int skip_rough;         /* no rough sums (g3_sampler_skip_rough) */
#ifdef G3_SAMPLER_STATS
    struct g3_sampler_stats stats;
#endif
    g3_gumbel_screen_n_fn gumbel_screen_n; /* the best of g3_gumbel_screen_n_get */
    g3_block_scan_fn block_scan;           /* the best of g3_block_scan_get */
    g3_mass_round_n_fn mass_round_n;       /* the best of g3_mass_round_n_get */
    g3_sigma_sums_n_fn sigma_sums_n;       /* the best of g3_sigma_sums_n_get */
    g3_expf_block_sums_fn expf_block_sums; /* the best of g3_expf_block_sums_get */
    g3_expf_weight_fn expf_weight;         /* its weight of one token */
    g3_expf_block_sums_fn exp_block_sums;  /* the best of g3_exp_block_sums_get */
    g3_exp_rough_sums_fn exp_rough_sums;   /* the best of g3_exp_rough_sums_get */
    g3_exp_rough_sums_fn exp_coarse_sums;  /* the best of g3_exp_coarse_sums_get */
    g3_rank_view_fn rank_view;             /* the best of g3_rank_view_get */
    g3_approx_exp_n_fn approx_exp_n;       /* the best of g3_approx_exp_n_get */
    g3_copy_check_fn copy_check;           /* the best of g3_copy_check_get */
    g3_copy_divide_fn copy_divide;         /* the best of g3_copy_divide_get */
    g3_max_n_fn max_n;                     /* the best of g3_max_n_get */
    g3_check_max_fn check_max;             /* the best of g3_check_max_get */
    int check_block; /* tokens per block of the Gumbel draw that checks on its way (sampling.c) */
    g3_band_scan_fn band_scan;             /* the best of g3_band_scan_get */

    /* history ring for penalties and DRY */
    int32_t *hist;                     /* [hist_cap] */
    int hist_cap, hist_len, hist_head; /* head = next write slot */

    /* The state of one call: the working logits and the candidate list. A call starts on the
     * caller's logits, G3_LOGITS_RAW, and the list G3_LIST_VOCAB (prepare in sampling.c); each
     * sampler rewrites logits and/or shrinks the list, through the transitions in
     * sampling/candidates.c. The logits: `logits_state` (above). The list: `form`, and for a
     * written list its order (`sorted`, `id_order`). Every buffer is [n_vocab]. */
    const float *logits; /* by token id: the caller's until a sampler writes, then own */
    float *own;          /* the writable copy (g3_writable_logits) */
    struct g3_logits_state logits_state;
    int32_t *cand; /* candidate ids, n_cand of them */
    int n_cand;
    enum g3_list_form form;
    int sorted;   /* in the total order: logit descending, id ascending */
    int id_order; /* ids ascending (G3_LIST_VOCAB is) */
    int32_t *ids_tmp;  /* heap / sorted prefix / tie list */
    int32_t *ids_tmp2; /* ids in ascending order for sums */
    int32_t *iota;     /* 0, 1, ..., n_vocab - 1: the ascending ids of a full list */
    uint64_t *gumbel_hash; /* g3_mix64_first(g3_rng_index_hash(G3_RNG_GUMBEL, id)) by id */
    uint32_t *keys, *keys_tmp; /* radix keys; keys_tmp also top-p's uint16 buckets */
    uint64_t *mass, *mass_tmp; /* top-p's fixed masses (parallel to the list), scratch */
    double *w;        /* weights for the CDF walk, probabilities for typical/XTC */
    double *blocks;   /* [n_vocab / 64 + 1]: block sums of the fast CDF walk */
    float *gathered;  /* the list's logits in list order, for the fast CDF walk */
    int32_t *counts;  /* token counts (penalties), DRY match lengths, marks (XTC, top-p's
                       * boundary bucket); all-zero between uses */
    int32_t *touched; /* [hist_cap]: tokens whose count is non-zero */
    int32_t *dry_ctx; /* [hist_cap] */
    int32_t *dry_z;   /* [hist_cap] */
    int32_t *pos_above, *pos_edge, *tie_ids, *pos_sub; /* Gumbel-path selection scratch */
    uint32_t *sel_keys, *sel_keys2;
    uint64_t *sel_mass;
    struct scored *scored, *scored_tmp; /* typical-p: (score, id) pairs, and bucketed */
    uint32_t *typ_start, *typ_fill;     /* typical-p: [TYPICAL_BUCKETS + 2] bucket offsets */
    uint32_t hist_bins[RADIX_BUCKETS];
    uint64_t hist_mass[RADIX_BUCKETS];

    /* G3_LIST_WINDOW: the list as a window of the whole vocabulary's total order, not written out
     * (sampling/rank.h): the tokens after (hi_l, hi_id) when has_hi, up to and including
     * (lo_l, lo_id) when has_lo; first is its first token, vocab_max the whole vocabulary's
     * largest logit. n_cand counts it; cand is stale. */
    struct {
        int has_hi, has_lo;
        float hi_l, lo_l, vocab_max;
        int32_t hi_id, lo_id, first;
    } win;
    /* G3_LIST_TYPICAL: typical's kept set of the whole vocabulary, implicit when the draw is next
     * (sampling/rank.h): the tokens nearer than `dist` to `center` by logit, and those at
     * logit l_b up to id id_b; `mass` is their weight (the view's, or with `fine` the fine
     * tier's: the view's sums left the crossing open), err the bounds on how far a
     * token's distance may lie from its exact typical score; `first` the set's first token in
     * the total order (Gumbel mode; -1 in CDF mode, whose walk reads no maximum, and while
     * pending, when the Gumbel draw starts from a floor instead). n_cand counts it; cand is
     * stale. `pending` (the draw next): only the view's bracket of the crossing is
     * known, `dist` is the distance nearer than which every token is in the set and `far` the
     * one beyond which none is, n_cand a lower bound on its size and the set's weight lies in
     * (w_lo, w_hi]; the draw works from that or finds the crossing first. */
    struct {
        int fine, pending;
        double center, dist, far, mass, w_lo, w_hi;
        struct g3_score_err err;
        float l_b;
        int32_t id_b, first;
    } typ;
    /* The whole vocabulary bucketed by logit (sampling/rank.c), for the logits it was built
     * from while valid: bucket by token; per bucket the sum of units and the view weight; the
     * sum of the tokens' g3_view_moment (when has_moments). Valid while logits_state.view. */
    uint16_t *view_bucket; /* [n_vocab] */
    int view_has_moments;
    int edge_bucket, edge_n; /* the bucket whose tokens s->pos_edge holds, sorted; -1: none */
    int edge_below;          /* how many tokens lie in earlier buckets */
    float view_lmax;
    double view_moment;
    struct g3_view_sum view_sum[G3_VIEW_BUCKETS];
    double view_w[G3_VIEW_BUCKETS];
    double view_scale[G3_VIEW_BUCKETS]; /* e^(-b/64) 2^-31 (0 for the last): unit to weight */
    int view_fine_valid;                /* view_fine holds these logits' sums */
    double view_fine[G3_VIEW_BUCKETS];  /* per bucket the sum of g3_approx_exp weights */
    double view_fine_moment;            /* their sum times max(l - lmax, -708) */
};

static inline int g3_gumbel_mode(const gemma3_sampler *s) {
    return s->p.mode == GEMMA3_SAMPLER_MODE_GUMBEL;
}

/* The logits are still the caller's vector, the NaN/+inf rules not applied. */
static inline int g3_logits_unchecked(const gemma3_sampler *s) {
    return s->logits_state.stage <= G3_LOGITS_RAW_DIVIDING;
}

/* Their maximum over the whole vocabulary is known (logits_state.max). */
static inline int g3_logits_max_known(const gemma3_sampler *s) {
    return s->logits_state.stage == G3_LOGITS_MAX_KNOWN;
}

#endif
