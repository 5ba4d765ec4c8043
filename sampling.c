/* sampling.c - the sampler's entry: logits in, token id out (gemma3.h states the contract:
 * the chain, greedy, the non-finite rules, randomness as a pure function of seed and position).
 * Here: a sampler's life (init, accept, reset), one call (bias and mask, the chain walked by
 * its descriptors, the draw or mirostat), and the truncation samplers and temperature, each
 * exact: every set is the one its definition gives, whatever order the list is in, so the CDF
 * and Gumbel draws stay exact draws from it. Its parts are in sampling/ (the descriptors, the
 * candidate list and its state, the rank view, the passes, the draws, typical, penalties and
 * DRY, the cutoffs); docs/sampling.md gives the choices made where llama.cpp and transformers
 * differ, and how each fast path is proven to give the exact answer. */
#define _POSIX_C_SOURCE 200809L
#include "sampling/test-hooks.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampling/state.h"
#include "sampling/rank.h"
#include "sampling/candidates.h"
#include "sampling/draw.h"
#include "sampling/samplers.h"
#include "util.h"

/* ================================ one sampler ================================================ */

/* The Gumbel draw that checks on its way (draw_gumbel_checking) screens a block while the next
 * one arrives: an eighth of L2 each (the block, the next, and the hash table's stream share
 * it), 16,384 tokens where L2's size is unknown. Blocks of 4,096 tokens were slower than the
 * check and the screen apart on an Intel Xeon (L2 2 MB), those of 65,536 no slower; on Zen 3
 * (L2 512 KB) blocks of 16,384 are the faster. */
static int check_block_size(void) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    int tokens = l2 > 0 ? (int)(l2 / 8 / (long)sizeof(float)) : 16384;
    return tokens < 4096 ? 4096 : tokens > 65536 ? 65536 : tokens;
}

int gemma3_sampler_init(const gemma3_sampler_params *params, int n_vocab, gemma3_sampler **out) {
    if (!out) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL out pointer");
    *out = NULL;
    if (!params) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL params");
    if (n_vocab < 1) return g3_error(GEMMA3_ERR_ARG, "sampler: n_vocab %d must be >= 1", n_vocab);
    int rc = g3_sampler_validate(params, n_vocab);
    if (rc != GEMMA3_OK) return rc;
    gemma3_sampler *s = calloc(1, sizeof *s);
    if (!s) return g3_error(GEMMA3_ERR_NOMEM, "sampler: out of memory");
    s->p = *params;
    s->n_vocab = n_vocab;
    s->seed = params->seed == GEMMA3_SEED_RANDOM ? g3_random_seed() : params->seed;
    s->mu = 2.0f * params->mirostat_tau;
    int rep = g3_resolve_last_n(params, params->repeat_last_n);
    int dry = g3_resolve_last_n(params, params->dry_penalty_last_n);
    s->hist_cap = rep > dry ? rep : dry;
    if (s->hist_cap < 1) s->hist_cap = 1;
    size_t V = (size_t)n_vocab, H = (size_t)s->hist_cap;
    s->hist = g3_alloc_aligned(H * sizeof *s->hist);
    s->touched = g3_alloc_aligned(H * sizeof *s->touched);
    s->dry_ctx = g3_alloc_aligned(H * sizeof *s->dry_ctx);
    s->dry_z = g3_alloc_aligned(H * sizeof *s->dry_z);
    s->own = g3_alloc_aligned(V * sizeof *s->own);
    s->cand = g3_alloc_aligned(V * sizeof *s->cand);
    s->ids_tmp = g3_alloc_aligned(V * sizeof *s->ids_tmp);
    s->ids_tmp2 = g3_alloc_aligned(V * sizeof *s->ids_tmp2);
    s->iota = g3_alloc_aligned(V * sizeof *s->iota);
    s->gumbel_hash = g3_alloc_aligned(V * sizeof *s->gumbel_hash);
    s->keys = g3_alloc_aligned(V * sizeof *s->keys);
    s->keys_tmp = g3_alloc_aligned(V * sizeof *s->keys_tmp);
    s->mass = g3_alloc_aligned(V * sizeof *s->mass);
    s->mass_tmp = g3_alloc_aligned(V * sizeof *s->mass_tmp);
    s->w = g3_alloc_aligned(V * sizeof *s->w);
    s->blocks = g3_alloc_aligned((V / 64 + 1) * sizeof *s->blocks);
    s->gathered = g3_alloc_aligned(V * sizeof *s->gathered);
    s->counts = g3_alloc_aligned(V * sizeof *s->counts);
    s->scored = g3_alloc_aligned(V * sizeof *s->scored);
    s->scored_tmp = g3_alloc_aligned(V * sizeof *s->scored_tmp);
    s->typ_start = g3_alloc_aligned((TYPICAL_BUCKETS + 2) * sizeof *s->typ_start);
    s->typ_fill = g3_alloc_aligned((TYPICAL_BUCKETS + 2) * sizeof *s->typ_fill);
    s->pos_above = g3_alloc_aligned(V * sizeof *s->pos_above);
    s->pos_edge = g3_alloc_aligned(V * sizeof *s->pos_edge);
    s->pos_sub = g3_alloc_aligned(V * sizeof *s->pos_sub);
    s->tie_ids = g3_alloc_aligned(V * sizeof *s->tie_ids);
    s->sel_keys = g3_alloc_aligned(V * sizeof *s->sel_keys);
    s->sel_keys2 = g3_alloc_aligned(V * sizeof *s->sel_keys2);
    s->sel_mass = g3_alloc_aligned(V * sizeof *s->sel_mass);
    s->view_bucket = g3_alloc_aligned(V * sizeof *s->view_bucket);
    if (!s->pos_above || !s->pos_edge || !s->pos_sub || !s->tie_ids || !s->sel_keys ||
        !s->sel_keys2 || !s->sel_mass || !s->view_bucket || !s->hist || !s->touched || !s->dry_ctx || !s->dry_z ||
        !s->own || !s->cand || !s->ids_tmp || !s->ids_tmp2 || !s->iota || !s->gumbel_hash ||
        !s->keys || !s->keys_tmp || !s->mass || !s->mass_tmp || !s->w || !s->blocks ||
        !s->gathered || !s->counts ||
        !s->scored || !s->scored_tmp || !s->typ_start || !s->typ_fill) {
        gemma3_sampler_free(s);
        return g3_error(GEMMA3_ERR_NOMEM, "sampler: out of memory for %d-token buffers", n_vocab);
    }
    for (int i = 0; i < n_vocab; i++) {
        s->iota[i] = i;
        s->gumbel_hash[i] = g3_mix64_first(g3_rng_index_hash(G3_RNG_GUMBEL, (uint32_t)i));
    }
    const int isa = g3_sampling_isa();
    s->gumbel_screen_n = g3_gumbel_screen_n_get(isa);
    s->block_scan = g3_block_scan_get(isa);
    s->mass_round_n = g3_mass_round_n_get(isa);
    s->sigma_sums_n = g3_sigma_sums_n_get(isa);
    s->expf_block_sums = g3_expf_block_sums_get(isa);
    s->expf_weight = g3_expf_weight_get(isa);
    s->exp_rough_sums = g3_exp_rough_sums_get(isa);
    s->exp_coarse_sums = g3_exp_coarse_sums_get(isa);
    s->exp_block_sums = g3_exp_block_sums_get(isa);
    s->rank_view = g3_rank_view_get(isa);
    s->approx_exp_n = g3_approx_exp_n_get(isa);
    for (int b = 0; b < G3_VIEW_BUCKETS - 1; b++) /* libm's exp: within 2^-52 */
        s->view_scale[b] = ldexp(exp(-(double)b / G3_VIEW_PER_NAT), -31);
    s->view_scale[G3_VIEW_BUCKETS - 1] = 0;
    s->copy_check = g3_copy_check_get(isa);
    s->copy_divide = g3_copy_divide_get(isa);
    s->max_n = g3_max_n_get(isa);
    s->check_max = g3_check_max_get(isa);
    s->band_scan = g3_band_scan_get(isa);
    s->check_block = check_block_size();
    *out = s;
    return GEMMA3_OK;
}

void gemma3_sampler_free(gemma3_sampler *s) {
    if (!s) return;
    g3_free_aligned(s->hist);
    g3_free_aligned(s->touched);
    g3_free_aligned(s->dry_ctx);
    g3_free_aligned(s->dry_z);
    g3_free_aligned(s->own);
    g3_free_aligned(s->cand);
    g3_free_aligned(s->ids_tmp);
    g3_free_aligned(s->ids_tmp2);
    g3_free_aligned(s->iota);
    g3_free_aligned(s->gumbel_hash);
    g3_free_aligned(s->keys);
    g3_free_aligned(s->keys_tmp);
    g3_free_aligned(s->mass);
    g3_free_aligned(s->mass_tmp);
    g3_free_aligned(s->w);
    g3_free_aligned(s->blocks);
    g3_free_aligned(s->gathered);
    g3_free_aligned(s->counts);
    g3_free_aligned(s->scored);
    g3_free_aligned(s->scored_tmp);
    g3_free_aligned(s->typ_start);
    g3_free_aligned(s->typ_fill);
    g3_free_aligned(s->pos_above);
    g3_free_aligned(s->pos_edge);
    g3_free_aligned(s->pos_sub);
    g3_free_aligned(s->tie_ids);
    g3_free_aligned(s->sel_keys);
    g3_free_aligned(s->sel_keys2);
    g3_free_aligned(s->sel_mass);
    g3_free_aligned(s->view_bucket);
    free(s);
}

int gemma3_sampler_accept(gemma3_sampler *s, int32_t token) {
    if (!s) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL sampler");
    if (token < 0 || token >= s->n_vocab)
        return g3_error(GEMMA3_ERR_ARG, "sampler: accepted token %d out of range [0, %d)",
                        (int)token, s->n_vocab);
    s->hist[s->hist_head] = token;
    s->hist_head = (s->hist_head + 1) % s->hist_cap;
    if (s->hist_len < s->hist_cap) s->hist_len++;
    return GEMMA3_OK;
}

void gemma3_sampler_reset(gemma3_sampler *s) {
    if (!s) return;
    s->hist_len = s->hist_head = 0;
    s->mu = 2.0f * s->p.mirostat_tau;
}

uint32_t gemma3_sampler_seed(const gemma3_sampler *s) { return s ? s->seed : 0; }
/* ================================ the samplers ============================================== */


/* The fixed-point masses of the list into s->mass (parallel to it), and their sum. */
static uint64_t fixed_masses(gemma3_sampler *s, float lmax) {
    int n = s->n_cand;
    const float *l = s->logits;
    if (!(s->id_order && n == s->n_vocab)) {
        float *g = s->gathered;
        for (int j = 0; j < n; j++) g[j] = l[s->cand[j]];
        l = g;
    }
    /* g3_fixed_mass in two steps: the vectorised rounding, then libm's exp near the ties */
    int n_tie;
    uint64_t *tie = s->mass_tmp, *q = s->mass,
             total = s->mass_round_n(l, lmax, q, tie, n, &n_tie);
    return g3_mass_fix_ties(l, lmax, q, tie, n, n_tie, total);
}

/* floor(p * q) exactly, p in [0, 1), q < 2^60: p = mant * 2^e with a 24-bit mantissa. */
static uint64_t scale_floor(float p, uint64_t q) {
    int e;
    double fr = frexp((double)p, &e);        /* p = fr * 2^e, fr in [0.5, 1) */
    uint64_t mant = (uint64_t)ldexp(fr, 24); /* exact: p is a float */
    int sh = 24 - e;
    unsigned __int128 prod = (unsigned __int128)q * mant;
    return sh >= 128 ? 0 : (uint64_t)(prod >> sh);
}


/* The coarse (g3_exp_coarse, coarse = 1) or rough (g3_exp_rough) sums of e^(l - lmax) over the
 * list, all of them (returned) and those with l >= at (*at_least), and *rel their bound. */
static double exp_lane_sums(const gemma3_sampler *s, int coarse, float lmax, float at,
                            double *at_least, double *rel) {
    int n = s->n_cand;
    *rel = g3_exp_lane_sums_rel(coarse ? G3_EXP_COARSE_REL_ERR : G3_EXP_ROUGH_REL_ERR, n);
    return (coarse ? s->exp_coarse_sums : s->exp_rough_sums)(s->logits, lmax, n, at, at_least);
}

/* Whether token w surely lies in top-p's nucleus of the whole vocabulary: the fixed mass Q_b of
 * the tokens before it in the total order below floor(p Q), Q the total. The coarse or rough
 * sums (within rel) bound Q_b by the tokens at or above w's logit (w and its ties too: more
 * than Q_b) and Q from below: each q_i is within 1/2 + 2^-52 of 2^40 e^d (g3_fixed_mass); the
 * 2^-50 and the constants cover the roundings of these few doubles. */
static int nucleus_holds_by(gemma3_sampler *s, int coarse, float lmax, float p, int32_t w) {
    int n = s->n_cand;
    double at_or_above, rel;
    double total = exp_lane_sums(s, coarse, lmax, s->logits[w], &at_or_above, &rel);
    double before_hi = 0x1p40 * at_or_above / (1 - rel) * (1 + 0x1p-50) + 0.5 * n + 1;
    double target_lo = (double)p * (0x1p40 * total / (1 + rel) * (1 - 0x1p-50) - 0.5 * n) - 2;
    return before_hi < target_lo;
}
/* The first token of the total order is in every nucleus: that winner needs no sums. Else the
 * coarse sums (half the rough sums' time), which decide unless w lies within about 6% of the
 * nucleus's edge, then the rough sums. */
static int nucleus_holds(gemma3_sampler *s, float lmax, float p, int32_t w) {
    if (s->logits[w] == lmax && g3_first_max(s, s->logits, s->n_cand, lmax) == w) return 1;
    if (nucleus_holds_by(s, 1, lmax, p, w)) {
        G3_STAT(s, top_p_coarse_draws, 1);
        return 1;
    }
    return nucleus_holds_by(s, 0, lmax, p, w);
}

/* Top-p: keep token i iff the mass strictly before it in the total order is < p * Z, i.e. the
 * shortest prefix whose mass reaches p * Z (the token crossing p is kept), at least one token
 * and at least min_keep. Masses are the fixed-point q_i. When the Gumbel draw comes next
 * (draw_next; never for g3_sampler_kept) over a whole vocabulary, its winner over all of it is
 * found first: if that token surely lies in the nucleus, it wins there too (the nucleus is a
 * subset, with the same maximum, noise and ties), and the list becomes that one token. */
static void top_p(gemma3_sampler *s, float p, int64_t pos, int draw_next) {
    int n = s->n_cand;
    if (p >= 1.0f || n <= 1) return;
    int whole = s->id_order && n == s->n_vocab && n > 4096;
    /* the draw checks the logits on its way */
    int winner_first = whole && draw_next && g3_gumbel_mode(s) && !s->skip_rough;
    int32_t w = winner_first ? g3_draw_gumbel(s, pos) : -1;
    g3_check_finite(s);
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return;
    int floor_keep = s->p.min_keep > 1 ? s->p.min_keep : 1;
    if (whole) {
        if (w >= 0 && nucleus_holds(s, lmax, p, w)) {
            G3_STAT(s, top_p_winner_draws, 1);
            s->ids_tmp[0] = w;
            g3_cand_keep_selected(s, 1);
            return;
        }
        /* the rank view, if it decides; else the exact masses: the same prefix, a window
         * either way (not the nucleus written out, which the CDF walk would sort) */
        int32_t last;
        int count;
        if ((s->view_open & G3_VIEW_OPEN_TOP_P) || !g3_rank_top_p(s, lmax, p, &last, &count)) {
            uint64_t target = scale_floor(p, fixed_masses(s, lmax)); /* by id: id order */
            count = target > 0 ? g3_cand_mass_prefix(s, lmax, target, &last) : 0;
            G3_STAT(s, top_p_mass_sets, count > 0);
        }
        if (count < floor_keep) /* the min_keep floor, or a target of 0: top-k */
            g3_cand_top_k(s, floor_keep);
        else
            g3_cand_window_prefix(s, g3_first_max(s, s->logits, n, lmax), last, count);
        return;
    }
    g3_cand_materialise(s);
    uint64_t total = fixed_masses(s, lmax);
    if (g3_gumbel_mode(s)) {
        uint64_t target = scale_floor(p, total);
        if (target == 0) {
            g3_cand_top_k(s, floor_keep);
            return;
        }
        g3_cand_select_first(s, 1, 0, target, floor_keep);
        return;
    }
    /* sort path: walk a heap-selected top 256 (enough for most language model distributions);
     * a larger nucleus is found by the Gumbel path's radix selection, which keeps the same set
     * (docs/sampling.md §3), and only it is sorted. Masses by token id for the walk. */
    uint64_t *q = s->mass_tmp;
    for (int j = 0; j < n; j++) q[s->cand[j]] = s->mass[j];
    uint64_t target = scale_floor(p, total);
    if (target == 0) {
        g3_cand_top_k(s, floor_keep);
        return;
    }
    if (!s->sorted && n > 256) {
        g3_cand_select_top(s, 256);
        uint64_t cum = 0;
        for (int j = 0; j < 256; j++) {
            cum += q[s->ids_tmp[j]];
            if (cum >= target) {
                if (j + 1 < floor_keep) break;
                g3_cand_keep_selected(s, j + 1);
                return;
            }
        }
    }
    if (!s->sorted) {
        g3_cand_select_first(s, 1, 0, target, floor_keep);
        g3_cand_ensure_sorted(s);
        return;
    }
    uint64_t cum = 0;
    int keep = n;
    for (int j = 0; j < n; j++) {
        cum += q[s->cand[j]];
        if (cum >= target) {
            keep = j + 1;
            break;
        }
    }
    if (keep < floor_keep) keep = floor_keep < n ? floor_keep : n;
    s->n_cand = keep;
}

/* The smallest float >= thr: for a float l, (double)l >= thr iff l >= it. */
static float float_at_least(double thr) {
    float t = (float)thr;
    return (double)t < thr ? nextafterf(t, INFINITY) : t;
}

/* How many candidates have l >= thr (compared in double), and keeping only those (in list
 * order). A list of the whole vocabulary in id order is read straight, 16 lanes at a time. */
static int count_at_least(const gemma3_sampler *s, double thr) {
    const float *l = s->logits;
    float t = float_at_least(thr);
    int n = s->n_cand, count = 0, j = 0;
    if (s->id_order && n == s->n_vocab)
        for (; j + 16 <= n; j += 16) {
            int c = 0;
            for (int k = 0; k < 16; k++) c += l[j + k] >= t;
            count += c;
        }
    const int32_t *c = s->form == G3_LIST_VOCAB ? s->iota : s->cand;
    for (; j < n; j++) count += (double)l[c[j]] >= thr;
    return count;
}

/* Aligned to 64 bytes: its count of 16 is a loop of four SSE compares, which ran a sixth slower
 * (min-p alone 0.051 -> 0.059 ms on Zen 4) when a change elsewhere in this file moved it across
 * a 64-byte line. */
__attribute__((aligned(64))) static void keep_at_least(gemma3_sampler *s, double thr) {
    const float *l = s->logits;
    int n = s->n_cand, m = 0;
    if (s->id_order && n == s->n_vocab) { /* skip the blocks of 16 with no survivor */
        float t = float_at_least(thr);
        int j = 0;
        for (; j + 16 <= n; j += 16) {
            int c = 0;
            for (int k = 0; k < 16; k++) c += l[j + k] >= t;
            if (c)
                for (int k = j; k < j + 16; k++)
                    if (l[k] >= t) s->cand[m++] = k;
        }
        for (; j < n; j++)
            if (l[j] >= t) s->cand[m++] = j;
    } else {
        for (int j = 0; j < n; j++)
            if ((double)l[s->cand[j]] >= thr) s->cand[m++] = s->cand[j];
    }
    s->form = G3_LIST_IDS;
    s->n_cand = m;
}

/* Min-p: keep p_i >= m * p_max, evaluated as l_i >= lmax + ln m in double (no softmax needed).
 * Shared by both paths; the floor (1 token or min_keep) goes through top_k. */
static void min_p(gemma3_sampler *s, float mp) {
    int n = s->n_cand;
    if (mp <= 0.0f || n <= 1) return;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return;
    double thr = (double)lmax + log((double)mp);
    int floor_keep = s->p.min_keep > 1 ? s->p.min_keep : 1;
    if (s->form == G3_LIST_VOCAB) { /* keep first: an implicit list is put back if too few stay */
        keep_at_least(s, thr);
        if (s->n_cand >= floor_keep) return;
        g3_cand_whole_vocabulary(s);
    } else if (count_at_least(s, thr) >= floor_keep) {
        keep_at_least(s, thr);
        return;
    }
    g3_cand_top_k(s, floor_keep);
}

/* Top-n-sigma's threshold lmax - n * sigma, mean and population sigma over the finite candidate
 * logits, in double, summed in id order. Returns 0 when no logit is finite. */
static int sigma_threshold(gemma3_sampler *s, float nsig, double *thr) {
    const int32_t *ids = g3_cand_ids_ascending(s);
    double sum = 0, lmax = -INFINITY;
    int nf = 0;
    for (int j = 0; j < s->n_cand; j++) {
        float l = s->logits[ids[j]];
        if (l == -INFINITY) continue;
        sum += l;
        nf++;
        if (l > lmax) lmax = l;
    }
    if (nf == 0) return 0;
    double mean = sum / nf, var = 0;
    for (int j = 0; j < s->n_cand; j++) {
        float l = s->logits[ids[j]];
        if (l != -INFINITY) var += ((double)l - mean) * ((double)l - mean);
    }
    *thr = lmax - (double)nsig * sqrt(var / nf);
    return 1;
}

/* sigma_threshold's threshold from sums in 8 interleaved lanes (vectorised) over a list that
 * is the whole vocabulary, and a bound on its distance from the id-order threshold: with N
 * finite logits, A the largest |l|, u = 2^-53, any summation order errs by at most N u N A on
 * the sum, so both means lie within delta = 2 (N + 1) u A of the exact mean M; the variance
 * sums V(m) = V(M) + N (m - M)^2 are each computed within (N + 3) u relative (three roundings
 * per term, N - 1 additions), so the two sigmas differ by at most delta + 2 (eps + 4 u) sigma,
 * eps = 1.01 (N + 3) u, and the threshold adds the rounding of nsig * sigma and of the
 * difference. *margin is twice all of that. Returns 0 when no logit is finite. */
static int sigma_threshold_lanes(const gemma3_sampler *s, float nsig, double *thr,
                                 double *margin) {
    double m[5];
    s->sigma_sums_n(s->logits, s->n_cand, m);
    double lmax = m[0], amax = m[1], z = m[3];
    int nf = (int)m[4];
    if (nf == 0) return 0;
    double sigma = sqrt(z / nf), u = 0x1p-53, N = nf;
    double delta = 2 * (N + 1) * u * amax, eps = 1.01 * (N + 3) * u;
    *thr = lmax - (double)nsig * sigma;
    *margin = 2 * ((double)nsig * (delta + 2 * (eps + 4 * u) * (sigma + delta)) +
                   4 * u * (fabs(lmax) + (double)nsig * (sigma + delta)));
    return 1;
}

/* Top-n-sigma: drop l_i < lmax - n * sigma (the threshold above). Over the whole vocabulary the
 * lane sums answer when every threshold within their error bound keeps the same set: the
 * smallest float >= the threshold (what keep_at_least compares with) is the same at both ends
 * of the interval, hence for every threshold inside it. Otherwise the sums in id order. */
static void top_n_sigma(gemma3_sampler *s, float nsig) {
    if (nsig <= 0.0f || s->n_cand <= 1) return;
    double thr, margin;
    if (s->id_order && s->n_cand == s->n_vocab && s->n_cand >= 1024 &&
        sigma_threshold_lanes(s, nsig, &thr, &margin) &&
        float_at_least(thr - margin) == float_at_least(thr + margin)) {
        keep_at_least(s, thr);
        return;
    }
    if (!sigma_threshold(s, nsig, &thr)) return;
    keep_at_least(s, thr);
}

/* Probabilities of the candidates into w[] (parallel to the list); returns lmax. */
static float cand_probs(gemma3_sampler *s) {
    float lmax = g3_cand_max(s);
    double z = g3_cand_z(s, lmax);
    for (int j = 0; j < s->n_cand; j++) s->w[j] = exp((double)s->logits[s->cand[j]] - lmax) / z;
    return lmax;
}

enum { XTC_TOP = 258 }; /* the most tokens XTC's count examines */

/* How many of the first tokens of the total order XTC's count examines: m = 1/thr + 2 (at most
 * XTC_TOP and n), xtc_count_with_z. */
static int xtc_top_count(float thr, int n) {
    double m_mass = floor(1.0 / (double)thr) + 2;
    int m = m_mass < XTC_TOP ? (int)m_mass : XTC_TOP;
    return m < n ? m : n;
}

/* How many candidates of a list that is the whole vocabulary have p = exp(l - lmax) / Z >= thr
 * (in doubles, Z in id order, as cand_probs computes them), from an approximate Z' within rel_z
 * of the exact sum. p >= thr iff l >= lmax + ln thr + ln Z up to the roundings of exp, the
 * division and the limit itself. The first m tokens of the total order are selected (sorted, in
 * ids_tmp), m = 1/thr + 2 (at most XTC_TOP): more than 1/thr tokens cannot all have p >= thr,
 * so the last two lie below the limit unless Z' is far off. When none of the m lies within
 * twice all of that of the limit and the last lies below it, the count is that of those above
 * it; -1 otherwise. When even the maximum lies below, the count is 0 without the selection
 * (*selected says whether it ran). */
static int xtc_count_with_z(gemma3_sampler *s, float lmax, float thr, double z, double rel_z,
                            int m, int *selected) {
    int n = s->n_cand, q = 0;
    double rel = 2 * (double)n * 0x1p-53 + 2 * rel_z;
    double lz = log(z), lt = log((double)thr), lim = (double)lmax + lt + lz;
    double margin = 2 * (1.01 * rel + 8 * 0x1p-52 +
                         0x1p-50 * (fabs((double)lmax) + fabs(lz) + fabs(lt) + 1));
    if ((double)lmax < lim - margin) return 0; /* not even the first reaches it */
    if (!*selected) g3_cand_select_top(s, m);
    *selected = 1;
    const int32_t *top = s->ids_tmp;
    while (q < m && (double)s->logits[top[q]] >= lim + margin) q++;
    if (q == m ? m < n : (double)s->logits[top[q]] >= lim - margin) return -1;
    return q;
}

/* XTC's count by tiers of Z (xtc_count_with_z): the rank view's when the CDF draw comes next
 * (view: it walks the same view), else the coarse sums' (g3_exp_coarse_sums, which decide
 * unless a token lies within about an eighth of a nat of the limit), the rough sums' (a third
 * of the float tier's time; within about 2^-7), then the float tier's (g3_expf_block_sums_rel,
 * as in surprise_limit). Returns -1 when
 * none decides (or thr is 0): the caller then computes every p. On a count, the first
 * max(count, 1) tokens of the total order are in ids_tmp (selected: they already are). */
static int xtc_count_fast(gemma3_sampler *s, float lmax, float thr, int view, int selected) {
    if (lmax == -INFINITY || !(thr > 0.0f)) return -1;
    int n = s->n_cand, m = xtc_top_count(thr, n);
    for (int tier = view ? 0 : s->skip_rough ? 3 : 1; tier <= 3; tier++) {
        double rel_z = 0, z = 0, unused;
        if (tier == 0) {
            z = g3_rank_z(s, lmax, &rel_z);
            if (z == 0) continue;
        } else if (tier < 3) {
            z = exp_lane_sums(s, tier == 1, lmax, INFINITY, &unused, &rel_z);
        } else {
            z = s->expf_block_sums(s->logits, lmax, n, s->blocks);
            rel_z = g3_expf_block_sums_rel(n);
        }
        int q = xtc_count_with_z(s, lmax, thr, z, rel_z, m, &selected);
        if (q == 0 && !selected) s->ids_tmp[0] = g3_first_max(s, s->logits, n, lmax);
        if (q >= 0 || tier == 0) return q; /* the view's Z is the most precise */
    }
    return -1;
}

/* XTC over a whole vocabulary when the Gumbel draw comes next: XTC may drop only tokens among
 * the first m of the total order (xtc_top_count), so the draw's winner among the rest (the
 * screen's draw over all but those m) and each of the m decide it: when the rest's winner beats
 * all m, it wins whatever XTC drops, and no Z is needed; else XTC's count says which of the m
 * stay. The draw over what XTC keeps takes values relative to the kept maximum, the logit of
 * the first token kept, not yet known here; another maximum shifts every value alike up to
 * roundings below 2^-52 of their magnitudes, so orders decided by more than `slack` hold for
 * any. The list becomes the winner (1), or stays as it was when a margin or the count leaves it
 * open or the m are the whole list (0). */
static int xtc_winner_first(gemma3_sampler *s, int64_t pos, float lmax, float thr) {
    if (!(thr > 0.0f)) return 0;
    int n = s->n_cand, m = xtc_top_count(thr, n);
    if (m >= n) return 0;
    g3_cand_select_top(s, m + 1);
    const int32_t *top = s->ids_tmp;
    uint64_t key = g3_rng_key(s->seed, pos);
    double second;
    int32_t rest = g3_draw_gumbel_skipping(s, pos, top, m, top[m], &second);
    double rest_v = g3_gumbel_value(s, key, lmax, rest);
    double spread = (double)lmax - (double)s->logits[top[m - 1]];
    double slack = 0x1p-46 * (fabs(rest_v) + spread + 64);
    if (!(rest_v - second > slack)) return 0;
    int sure = 1;
    for (int i = 0; i < m && sure; i++)
        sure = g3_gumbel_value(s, key, lmax, top[i]) < rest_v - slack;
    int32_t winner = rest;
    if (sure) {
        G3_STAT(s, xtc_winner_draws, 1);
    } else {
        int q = xtc_count_fast(s, lmax, thr, 0, 1), last = q - 1;
        if (q < 0) return 0;
        int drop = last >= 1 && n - last >= s->p.min_keep ? last : 0;
        float kept_max = s->logits[top[drop]];
        double best_v = g3_gumbel_value(s, key, kept_max, rest);
        for (int i = drop; i < m; i++) {
            double v = g3_gumbel_value(s, key, kept_max, top[i]);
            if (g3_gumbel_beats(v, top[i], best_v, winner)) {
                best_v = v;
                winner = top[i];
            }
        }
    }
    s->ids_tmp[0] = winner;
    g3_cand_keep_selected(s, 1);
    return 1;
}

/* XTC: with probability xtc_probability (its own coin), remove every token with p >= threshold
 * except the least probable of them, when at least two qualify and min_keep allows. The
 * qualifying tokens are the first of the total order (p falls along it). The CDF walk reads the
 * list in order, so there the list is sorted whatever XTC removes; the Gumbel draw does not,
 * so there a whole vocabulary only loses its first tokens (found by the count's selection).
 * draw_next: the draw comes next (never for the kept set); in Gumbel mode it may answer first
 * (xtc_winner_first). */
static void xtc(gemma3_sampler *s, int64_t pos, int draw_next) {
    float prob = s->p.xtc_probability, thr = s->p.xtc_threshold;
    if (prob <= 0.0f || thr > 0.5f || s->n_cand < 2) return;
    double coin = g3_uniform(g3_rng_bits(g3_rng_key(s->seed, pos), G3_RNG_XTC, 0));
    if (coin > prob) return;
    int full = s->id_order && s->n_cand == s->n_vocab && s->n_cand >= FAST_DRAW_MIN;
    float lmax = full ? g3_cand_max(s) : -INFINITY;
    if (full && draw_next && g3_gumbel_mode(s) && lmax != -INFINITY &&
        xtc_winner_first(s, pos, lmax, thr))
        return;
    int q = full ? xtc_count_fast(s, lmax, thr, draw_next && !g3_gumbel_mode(s), 0) : -1;
    int last = q - 1;
    if (q >= 0) { /* the whole vocabulary: a window after its first `last` */
        int drop = last >= 1 && s->n_cand - last >= s->p.min_keep ? last : 0;
        if (drop == 0 && g3_gumbel_mode(s)) return;
        /* in CDF mode the list is sorted even when nothing is dropped: the walk's order */
        g3_cand_window_after(s, lmax, drop ? s->ids_tmp[drop - 1] : -1, s->ids_tmp[drop],
                             s->n_cand - drop);
        return;
    }
    g3_cand_materialise(s);
    g3_cand_ensure_sorted(s); /* every p, on the sorted list */
    cand_probs(s);
    for (int j = 0; j < s->n_cand; j++)
        if (s->w[j] >= thr) last = j;
    if (last < 1 || s->n_cand - last < s->p.min_keep) return;
    memmove(s->cand, s->cand + last, (size_t)(s->n_cand - last) * sizeof *s->cand);
    s->n_cand -= last;
}

/* A finite logit that overflows (a huge logit over a small temperature or penalty) becomes
 * FLT_MAX rather than +inf, which would poison lmax: the tokens that overflowed then share the
 * mass, the limit of the softmax. */

/* Collapses the list to its first token in the total order (greedy). */
static void keep_argmax(gemma3_sampler *s) {
    if (s->n_cand <= 1) {
        g3_cand_materialise(s);
        return;
    }
    const float *l = s->logits;
    const int32_t *c = s->form == G3_LIST_VOCAB ? s->iota : s->cand; /* implicit: read as iota */
    s->form = G3_LIST_IDS;
    /* the first maximum the check (or the dividing copy) found */
    if (g3_logits_max_known(s) && s->id_order && s->n_cand == s->n_vocab) {
        s->cand[0] = s->logits_state.max_first;
        s->n_cand = 1;
        s->sorted = 1;
        return;
    }
    if (s->id_order) { /* the first maximum in id order is the lowest id */
        float m[16];
        int n = s->n_cand, j = 0;
        for (int k = 0; k < 16; k++) m[k] = -INFINITY;
        if (n == s->n_vocab)
            for (; j + 16 <= n; j += 16)
                for (int k = 0; k < 16; k++) m[k] = l[j + k] > m[k] ? l[j + k] : m[k];
        float mx = -INFINITY;
        for (int k = 0; k < 16; k++) mx = m[k] > mx ? m[k] : mx;
        for (; j < n; j++) mx = l[c[j]] > mx ? l[c[j]] : mx;
        j = 0;
        if (n == s->n_vocab) /* skip whole blocks without the maximum */
            for (; j + 16 <= n; j += 16) {
                int hits = 0;
                for (int k = 0; k < 16; k++) hits += l[j + k] == mx;
                if (hits) break;
            }
        for (; j < n && l[c[j]] != mx; j++) {}
        s->cand[0] = c[j < n ? j : 0];
        s->n_cand = 1;
        s->sorted = 1;
        return;
    }
    int32_t best = c[0];
    for (int j = 1; j < s->n_cand; j++)
        if (g3_cand_before(l, c[j], best)) best = c[j];
    s->cand[0] = best;
    s->n_cand = 1;
    s->sorted = s->id_order = 1;
}

/* Temperature, with llama.cpp's dynamic temperature when dynatemp_range > 0: the entropy of the
 * current candidates, normalised by ln N, picks T' in [max(0, T-d), T+d]. draw_next: the draw
 * comes next (never for the kept set); a Gumbel draw over the whole vocabulary then divides as
 * it checks, block by block, instead of in a copy of its own. */
static void temperature(gemma3_sampler *s, float t, int draw_next) {
    if (t == 1.0f && s->p.dynatemp_range <= 0.0f) return;
    if (draw_next && g3_gumbel_mode(s) && t > 0.0f && s->p.dynatemp_range <= 0.0f &&
        g3_logits_unchecked(s) && g3_whole_list(s) && s->n_cand > 1) {
        g3_logits_owe_division(s, t);
        return;
    }
    if (t <= 0.0f || s->p.dynatemp_range > 0.0f) g3_check_finite(s); /* else divide copies */
    if (s->p.dynatemp_range > 0.0f && s->n_cand > 1) {
        float lo = fmaxf(0.0f, t - s->p.dynatemp_range), hi = t + s->p.dynatemp_range;
        float lmax = g3_cand_max(s);
        if (lmax != -INFINITY) {
            double z = g3_cand_z(s, lmax);
            double h = g3_cand_entropy(s, lmax, z) / log((double)s->n_cand);
            t = lo + (hi - lo) * (float)pow(h, (double)s->p.dynatemp_exponent);
        }
    }
    if (t <= 0.0f) {
        keep_argmax(s);
        return;
    }
    if (t == 1.0f) return;
    g3_divide_logits(s, t);
    if (s->n_cand > 1) s->sorted = 0; /* division may merge values into ties */
}

/* The samplers' functions as the chain calls them (sampling/samplers.h). */
void g3_apply_top_n_sigma(gemma3_sampler *s, const struct g3_chain_step *at) {
    top_n_sigma(s, s->p.top_n_sigma);
}
void g3_apply_top_k(gemma3_sampler *s, const struct g3_chain_step *at) {
    g3_cand_top_k(s, s->p.top_k);
}
void g3_apply_top_p(gemma3_sampler *s, const struct g3_chain_step *at) {
    top_p(s, s->p.top_p, at->pos, at->draws && at->last);
}
void g3_apply_min_p(gemma3_sampler *s, const struct g3_chain_step *at) { min_p(s, s->p.min_p); }
void g3_apply_xtc(gemma3_sampler *s, const struct g3_chain_step *at) {
    xtc(s, at->pos, at->draws && at->last);
}
void g3_apply_temperature(gemma3_sampler *s, const struct g3_chain_step *at) {
    temperature(s, s->p.temperature, at->draws && at->last);
}

/* ================================ one call ================================================== */

/* The allowed-ids mask (a grammar's): every id without its bit gets -inf, 32 at a time. */
static void apply_mask(float *l, const uint32_t *allowed, int n) {
    for (int w = 0; w * 32 < n; w++) {
        uint32_t m = allowed[w];
        if (m == 0xFFFFFFFFu) continue;
        int end = n - w * 32 < 32 ? n - w * 32 : 32;
        for (int b = 0; b < end; b++)
            if (!(m >> b & 1u)) l[w * 32 + b] = -INFINITY;
    }
}

/* Takes the caller's logits as the working logits (read-only and unchecked: check_finite and
 * writable_logits), applies logit bias, --ignore-eos, the allowed-ids mask (if any) and the
 * NaN/+inf rules, and lists every token as a candidate (implicitly: g3_cand_materialise writes
 * the list out when needed). */
static void prepare(gemma3_sampler *s, const float *logits, const uint32_t *allowed) {
    const gemma3_sampler_params *p = &s->p;
    int V = s->n_vocab;
    g3_logits_start(s, logits);
    g3_cand_whole_vocabulary(s);
    if (p->n_logit_bias == 0 && !(p->ignore_eos && p->n_eos > 0) && !allowed) return;
    float *l = s->own;
    int clean = s->copy_check(l, logits, V);
    s->logits = l;
    g3_logits_checked(s);
    for (int i = 0; i < p->n_logit_bias; i++) {
        int32_t id = p->logit_bias[i].token;
        float b = p->logit_bias[i].bias;
        l[id] = b == -INFINITY ? -INFINITY : l[id] + b;
        clean &= !isnan(l[id]) && l[id] != INFINITY;
    }
    if (p->ignore_eos)
        for (int i = 0; i < p->n_eos; i++) l[p->eos_ids[i]] = -INFINITY;
    if (allowed) apply_mask(l, allowed, V);
    /* Every token stays in the list, bans (-inf) included, as in llama.cpp: no filter keeps one
     * over a finite logit and neither draw gives it weight. Only NaN and +inf need rewriting. */
    if (!clean) g3_fix_non_finite(s);
}

static int is_allowed(const uint32_t *allowed, int i) {
    return !allowed || (allowed[i >> 5] >> (i & 31) & 1u);
}

/* Whether id is banned outright: a logit bias of -inf, or an end id under --ignore-eos. */
static int is_banned(const gemma3_sampler_params *p, int32_t id) {
    for (int i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token == id && p->logit_bias[i].bias == -INFINITY) return 1;
    for (int i = 0; p->ignore_eos && i < p->n_eos; i++)
        if (p->eos_ids[i] == id) return 1;
    return 0;
}

/* When nothing finite survives: the argmax of the caller's raw logits over the allowed ids that
 * are not banned, NaN ignored, lowest id; the lowest such id if all are NaN. A ban is never
 * overridden: when the mask and the bans leave no id, an error. */
static int32_t fallback(const gemma3_sampler *s, const float *logits, const uint32_t *allowed) {
    int32_t best = -1;
    float bv = NAN;
    for (int i = 0; i < s->n_vocab; i++) {
        if (!is_allowed(allowed, i)) continue;
        int better = best < 0 || (!isnan(logits[i]) && (isnan(bv) || logits[i] > bv));
        if (!better || is_banned(&s->p, i)) continue; /* the bans are read for candidates only */
        best = i;
        bv = logits[i];
    }
    return best >= 0 ? best
                     : g3_error(GEMMA3_ERR_ARG, "sampler: no token is left: the mask and the "
                                                "bans (logit bias -inf, ignore-eos) exclude "
                                                "every id");
}

/* Whether a sampler after position i of the chain may change the list or the logits. */
static int acts_after(const gemma3_sampler_params *p, int i) {
    for (int j = i + 1; j < p->n_samplers; j++)
        if (g3_samplers[p->samplers[j]].active(p)) return 1;
    return 0;
}

/* Runs the chain, each sampler by its descriptor (sampling/samplers.h); greedy = 1 only applies
 * the samplers that rewrite logits; draws = 1 when the draw follows (not for the kept set, which
 * must be the list itself). A sampler whose parameters say "off" is skipped (its function would
 * return at once). An implicit list stays implicit: every sampler reads it as iota (a megabyte's
 * copy for nothing at 262k tokens) and writes its own list out when it keeps fewer; a window is
 * written out (only the draws read one). */
static void run_chain(gemma3_sampler *s, int64_t pos, int greedy, int draws) {
    const gemma3_sampler_params *p = &s->p;
    for (int i = 0; i < p->n_samplers && s->n_cand > 0; i++) {
        const struct g3_sampler_desc *d = &g3_samplers[p->samplers[i]];
        if ((greedy && !(d->needs & G3_RUNS_WHEN_GREEDY)) || !d->active(p)) continue;
        if (s->form == G3_LIST_WINDOW) g3_cand_materialise(s);
        if (d->needs & G3_NEEDS_CHECKED) g3_check_finite(s);
        struct g3_chain_step at = {pos, !acts_after(p, i), draws};
        d->apply(s, &at);
    }
}

/* Mirostat v2's limit lmax + ln Z - mu ln 2 (keep -log2 p <= mu), Z in id order, by tier: 0
 * from the float tier's Z' (within G3_APPROX_EXPF_REL_ERR + 4 2^-24 + n 2^-53 of the true sum,
 * draw_cdf_float), 1 from the double tier's (g3_approx_exp: 2 G3_APPROX_EXP_REL_ERR), 2 exact.
 * *margin gets twice the bound on the distance to the exact limit (the exact sum errs by
 * n 2^-53; ln, and the two additions, round by 2^-52 of their operands each), 0 at tier 2. */
static double surprise_limit(gemma3_sampler *s, float lmax, int tier, double *margin) {
    int n = s->n_cand;
    double mu_ln2 = (double)s->mu * log(2.0);
    if (tier == 2) {
        *margin = 0;
        return (double)lmax + log(g3_cand_z(s, lmax)) - mu_ln2;
    }
    double z = tier == 0 ? s->expf_block_sums(s->logits, lmax, n, s->blocks)
                         : s->exp_block_sums(s->logits, lmax, n, s->blocks);
    double rel = 2 * (tier == 0 ? g3_expf_block_sums_rel(n)
                                : G3_APPROX_EXP_REL_ERR + (double)n * 0x1p-53);
    *margin = 2 * (1.01 * rel + 0x1p-50 * (fabs((double)lmax) + fabs(log(z)) + fabs(mu_ln2) + 1));
    return (double)lmax + log(z) - mu_ln2;
}

/* Mirostat (after bias and plain temperature). v1 fits a Zipf exponent to the top 100
 * probabilities and keeps the top k that would give surprise mu; v2 keeps tokens whose surprise
 * -log2 p is at most mu. Both draw, then move mu towards tau by the observed surprise. */
static int32_t mirostat(gemma3_sampler *s, int64_t pos) {
    const gemma3_sampler_params *p = &s->p;
    float t = p->temperature;
    if (t != 1.0f) g3_divide_logits(s, t);
    s->sorted = 0;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return -1;
    if (p->mirostat == 1) {
        int m = s->n_cand < 100 ? s->n_cand : 100;
        g3_cand_select_top_checked(s, m); /* the logits were checked before mirostat */
        double sum_tb = 0, sum_tt = 0;
        for (int i = 0; i + 1 < m; i++) {
            double ti = log((double)(i + 2) / (double)(i + 1));
            double bi = (double)s->logits[s->ids_tmp[i]] -
                        (double)s->logits[s->ids_tmp[i + 1]]; /* ln(p_i/p_i+1) */
            if (!isfinite(bi)) break;                         /* banned tokens reached */
            sum_tb += ti * bi;
            sum_tt += ti * ti;
        }
        double s_hat = sum_tt > 0 ? sum_tb / sum_tt : 1.0;
        double eps = s_hat - 1;
        double k =
            pow(eps * pow(2.0, (double)s->mu) / (1 - pow((double)s->n_vocab, -eps)), 1 / s_hat);
        int ki = !(k >= 1) ? 1 : k >= (double)s->n_cand ? s->n_cand : (int)k;
        if (ki < s->n_cand && ki <= m) {
            g3_cand_keep_selected(s, ki); /* top_k's answer: the heap's first ki, in order */
        } else if (ki < s->n_cand && ki <= s->n_cand / 64) {
            /* top_k's set, in the total order as its heap leaves it (its unsorted Gumbel path
             * keeps the same set: neither the draw nor the sums below depend on the order) */
            g3_cand_select_top_checked(s, ki);
            g3_cand_keep_selected(s, ki);
        } else {
            g3_cand_top_k(s, ki);
        }
    } else {
        /* An approximate limit (a whole vocabulary only) keeps l >= lim - margin; when every
         * kept logit also reaches lim + margin, no logit lies between, and the exact limit
         * keeps the same tokens. Otherwise the list, all of 0..n-1, is put back (the kept ids
         * overwrote it) and the next tier runs. */
        int n0 = s->n_cand;
        enum g3_list_form form0 = s->form;
        int tier = s->n_cand >= FAST_DRAW_MIN && s->id_order && s->n_cand == s->n_vocab ? 0 : 2;
        for (;; tier++) {
            double margin, lim = surprise_limit(s, lmax, tier, &margin);
            keep_at_least(s, lim - margin);
            int settled = 1;
            for (int j = 0; j < s->n_cand && settled; j++)
                settled = (double)s->logits[s->cand[j]] >= lim + margin;
            if (settled || tier == 2) break;
            s->n_cand = n0;
            s->form = form0 = G3_LIST_VOCAB;
        }
        if (s->n_cand == 0) { /* nothing was written: the list is as it was */
            s->n_cand = n0;
            s->form = form0;
            keep_argmax(s);
        }
    }
    int32_t tok = g3_draw(s, pos);
    if (tok < 0) return tok;
    lmax = g3_cand_max(s);
    double pk = exp((double)s->logits[tok] - lmax) / g3_cand_z(s, lmax);
    s->mu -= p->mirostat_eta * (float)(-log2(pk) - p->mirostat_tau);
    return tok;
}

int32_t gemma3_sampler_sample(gemma3_sampler *s, const float *logits, int64_t position) {
    return gemma3_sampler_sample_masked(s, logits, position, NULL);
}

int gemma3_sampler_mask_commutes(const gemma3_sampler *s) { return s && s->p.temperature == 0.0f; }
int gemma3_sampler_n_vocab(const gemma3_sampler *s) { return s ? s->n_vocab : 0; }

int32_t gemma3_sampler_sample_masked(gemma3_sampler *s, const float *logits, int64_t position,
                                     const uint32_t *allowed) {
    if (!s || !logits) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL argument");
    prepare(s, logits, allowed);
    int32_t tok = -1;
    if (s->n_cand > 0) {
        if (s->p.temperature == 0.0f) {
            run_chain(s, position, 1, 0);
            g3_check_finite(s);
            keep_argmax(s); /* reads an implicit list straight */
            if (s->n_cand == 1 && s->logits[s->cand[0]] != -INFINITY) tok = s->cand[0];
        } else if (s->p.mirostat) {
            g3_check_finite(s);
            tok = mirostat(s, position); /* reads an implicit list straight */
        } else {
            run_chain(s, position, 0, 1);
            if (!(s->n_cand > 1 && g3_gumbel_mode(s))) /* else the draw checks */
                g3_check_finite(s);
            if (s->n_cand == 1) g3_cand_materialise(s); /* the draws read an implicit list */
            if (s->n_cand == 1 && s->logits[s->cand[0]] != -INFINITY)
                tok = s->cand[0]; /* no RNG */
            else if (s->n_cand > 1)
                tok = g3_draw(s, position);
        }
    }
    return tok >= 0 ? tok : fallback(s, logits, allowed);
}

int g3_sampler_set_params(gemma3_sampler *s, const gemma3_sampler_params *params) {
    int rc = g3_sampler_validate(params, s->n_vocab);
    if (rc != GEMMA3_OK) return rc;
    int rep = g3_resolve_last_n(params, params->repeat_last_n);
    int dry = g3_resolve_last_n(params, params->dry_penalty_last_n);
    if (rep > s->hist_cap || dry > s->hist_cap)
        return g3_error(GEMMA3_ERR_ARG, "sampler: a last_n window larger than at init (%d)",
                        s->hist_cap);
    uint32_t seed = params->seed == GEMMA3_SEED_RANDOM ? s->seed : params->seed;
    s->p = *params;
    s->seed = seed;
    s->mu = 2.0f * params->mirostat_tau;
    return GEMMA3_OK;
}

int g3_sampler_kept(gemma3_sampler *s, const float *logits, int64_t position, int32_t *ids) {
    if (!s || !logits || !ids) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL argument");
    if (s->p.temperature == 0.0f || s->p.mirostat)
        return g3_error(GEMMA3_ERR_ARG, "sampler: kept set not defined for greedy or mirostat");
    prepare(s, logits, NULL);
    run_chain(s, position, 0, 0);
    g3_check_finite(s);
    g3_cand_materialise(s);
    int n = 0;
    for (int j = 0; j < s->n_cand; j++)
        if (s->logits[s->cand[j]] != -INFINITY) ids[n++] = s->cand[j];
    g3_radix_sort_ids(ids, s->ids_tmp, n);
    return n;
}
