/* sampling/draw.c - the final draw, exact: the CDF walk over the list (with its fast tiers) and
 * the Gumbel-max draw (screening every token with a bound on its noise). docs/sampling.md §5-6. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "rng.h"
#include "sampling/candidates.h"
#include "sampling/draw.h"
#include "sampling/rank.h"
#include "sampling/typical.h"

/* The fast CDF walk finds the token from approximate weights summed in blocks of DRAW_BLOCK
 * (not stored: the chosen block's weights are computed again) and answers only when the exact
 * walk surely stops at the same token (cdf_step_is_sure); otherwise it returns -1 and the next
 * tier runs (docs/sampling.md §5). Lists shorter than FAST_DRAW_MIN take the exact walk. */

/* Whether the exact walk surely stops at a token, from a fast walk's sums: `before` of the
 * tokens before it, `w` its own weight and `after` of the tokens after it, each a sum of
 * approximate non-negative weights within `rel` of its exact value (so its error is relative
 * to itself, not to the total) and all within `abs` together. The exact walk stops there when
 * the target u Z lies in the token's step, Z = before + w + after:
 *   u Z - before      = u (w + after) - (1 - u) before       >= 0, and
 *   before + w - u Z  = (1 - u) (before + w) - u after        >  0.
 * Each side's fast value errs by at most rel times the sum of its two terms (plus abs), and the
 * exact walk's own sums (libm's exp, n double additions, the target's product) move it by less
 * than 4 (n + 2) 2^-53 Z; the answer stands when both sides exceed twice the sum of the bounds.
 * Near the target the two terms of a side are both about u (1 - u) Z: the margin is about
 * u (1 - u) of one taken on the whole Z, and fewer draws are left to the next tier. */
static int cdf_step_is_sure(double before, double w, double after, double u, double rel,
                            double abs, int n) {
    double total = before + w + after;
    double lo_a = u * (w + after), lo_b = (1 - u) * before;
    double hi_a = (1 - u) * (before + w), hi_b = u * after;
    double exact = 4 * ((double)n + 2) * 0x1p-53 * total + abs;
    return lo_a - lo_b > 2 * (rel * (lo_a + lo_b) + exact) &&
           hi_a - hi_b > 2 * (rel * (hi_a + hi_b) + exact);
}

/* x[0] + ... + x[n-1] in 4 interleaved sums (a quarter of one chain's latency): for sums of
 * non-negative terms, whose error bound does not depend on the order. */
static double sum_in_4(const double *x, int n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

/* The first block b where the running sum of block[0..nb) exceeds target (nb if none), and
 * *before the sum of the blocks before it. */
static int crossing_block(const double *block, int nb, double target, double *before) {
    double sum = 0;
    int b = 0;
    for (; b < nb && !(sum + block[b] > target); b++) sum += block[b];
    *before = sum;
    return b;
}

/* A fast walk's token: the block where the running sum of block[] first exceeds `target`, then
 * the token within it, the block's weights computed again (weight(l, lmax), times 1 + tilt in
 * blocks before tilt_at and 1 - tilt from there on: the tests' errors at their bound); *before,
 * *w and *after get the sums before the token, its weight, and the sum after it, the last summed
 * on its own (not total - before - w) so that its error is relative to itself. Returns the
 * token's position, or -1 where the sums run out first. */
static int walk_blocks(const double *block, int n, const float *l, float lmax, double target,
                       double (*weight)(float, float), double tilt, int tilt_at, double *before,
                       double *w, double *after) {
    int nb = (n + DRAW_BLOCK - 1) / DRAW_BLOCK;
    double sum;
    int b = crossing_block(block, nb, target, &sum);
    if (b == nb) return -1;
    int end = (b + 1) * DRAW_BLOCK < n ? (b + 1) * DRAW_BLOCK : n;
    double scale = 1 + (b < tilt_at ? tilt : -tilt), wj = 0;
    int j = b * DRAW_BLOCK;
    for (; j < end; j++, sum += wj)
        if (sum + (wj = scale * weight(l[j], lmax)) > target) break;
    if (j == end) return -1;
    double rest = sum_in_4(block + b + 1, nb - b - 1);
    for (int i = j + 1; i < end; i++) rest += scale * weight(l[i], lmax);
    *before = sum;
    *w = wj;
    *after = rest;
    return j;
}

/* Tests (g3_sampler_perturb_float_draw): the block sums moved as far as the relative error
 * *tilt can move them the wrong way: the blocks before the one where the sums first exceed
 * `target` one way, the rest the other (up before and down after where that block is even, the
 * reverse where it is odd: *tilt gets the sign), so that the sums before and after the target
 * are both off by nearly all their bound allows and a margin too small on either end of a step
 * shows as a wrong token. walk_blocks tilts the weights it computes again the same way from
 * *tilt_at. Returns the new total. */
static double tilt_blocks(double *block, int n, double target, double *tilt, int *tilt_at) {
    int nb = (n + DRAW_BLOCK - 1) / DRAW_BLOCK;
    double before;
    int b = crossing_block(block, nb, target, &before);
    *tilt_at = b;
    if (b % 2) *tilt = -*tilt;
    double total = 0;
    for (int k = 0; k < nb; k++) total += block[k] *= 1 + (k < b ? *tilt : -*tilt);
    return total;
}

/* The float tier, tried first: weights w'_i = g3_approx_expf(l_i, lmax, fused), within
 * G3_APPROX_EXPF_REL_ERR of w_i (or 4.5e-38 absolute where clamped), summed per block of 64 in
 * float lanes of 4 terms (3 roundings: 3 2^-24 relative) and the lanes and blocks in double
 * (n 2^-53): every sum of them is within g3_expf_block_sums_rel(n) of its exact value, and
 * n 4.5e-38 absolute. Returns -1 when cdf_step_is_sure leaves the token open
 * (the double tier then answers). */
static int32_t draw_cdf_float(gemma3_sampler *s, const float *l, float lmax, double u) {
    int n = s->n_cand;
    double *block = s->blocks;
    double total = s->expf_block_sums(l, lmax, n, block);
    double tilt = 0;
    int tilt_at = 0;
    if (s->perturb_float_draw) { /* tests: total = tilt_blocks(...) */
        tilt = 0.9 * G3_APPROX_EXPF_REL_ERR;
        total = tilt_blocks(block, n, u * total, &tilt, &tilt_at);
    }
    double before, w, after;
    int j = walk_blocks(block, n, l, lmax, u * total, s->expf_weight, tilt, tilt_at, &before, &w,
                        &after);
    if (j < 0 || !cdf_step_is_sure(before, w, after, u, g3_expf_block_sums_rel(n), n * 4.6e-38, n))
        return -1;
    G3_STAT(s, float_tier_draws, 1);
    return (s->form == G3_LIST_VOCAB ? s->iota : s->cand)[j];
}

/* The double tier: weights g3_approx_weight (within G3_APPROX_EXP_REL_ERR, or 3.3e-308 absolute
 * where clamped) summed in double lanes per block (n 2^-53). */
static int32_t draw_cdf_fast(gemma3_sampler *s, const float *l, float lmax, double u) {
    int n = s->n_cand;
    double total = s->exp_block_sums(l, lmax, n, s->blocks); /* the weights are not stored */
    double before, w, after;
    int j = walk_blocks(s->blocks, n, l, lmax, u * total, g3_approx_weight, 0, 0, &before, &w,
                        &after);
    double rel = G3_APPROX_EXP_REL_ERR + 4 * (double)n * 0x1p-53;
    if (j < 0 || !cdf_step_is_sure(before, w, after, u, rel, n * 3.3e-308, n)) return -1;
    return (s->form == G3_LIST_VOCAB ? s->iota : s->cand)[j];
}

/* Inverse-CDF draw over the list: the first candidate whose running weight EXCEEDS u * Z (strict,
 * so a zero-weight token is never picked); the last positive-weight one if rounding leaves the
 * walk short. Returns -1 when no candidate has weight. Long lists try the fast walk first. */
int32_t g3_draw_cdf(gemma3_sampler *s, int64_t pos) {
    double u = g3_uniform(g3_rng_bits(g3_rng_key(s->seed, pos), G3_RNG_DRAW, 0));
    if (s->form == G3_LIST_TYPICAL) { /* walked in typical's order from the rank view */
        int32_t tok = s->exact_draw_only ? -1 : g3_rank_draw_typical(s, u);
        G3_STAT(s, typ_fast_draws, tok >= 0);
        if (tok >= 0) return tok;
        g3_typical_settle(s);
    }
    int n = s->n_cand;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return -1;
    if (s->form == G3_LIST_WINDOW) { /* a window walks from the rank view, else it is written out */
        int32_t tok = s->exact_draw_only ? -1 : g3_rank_draw_cdf(s, u);
        if (tok >= 0) return tok;
        g3_cand_materialise(s);
    }
    const int32_t *c = s->form == G3_LIST_VOCAB ? s->iota : s->cand;
    if (n >= FAST_DRAW_MIN && !s->exact_draw_only) {
        const float *l = s->logits; /* the list's logits in list order */
        if (!(s->id_order && n == s->n_vocab)) {
            float *g = s->gathered;
            for (int j = 0; j < n; j++) g[j] = l[c[j]];
            l = g;
        }
        int32_t tok = s->skip_float_draw ? -1 : draw_cdf_float(s, l, lmax, u);
        if (tok < 0) tok = draw_cdf_fast(s, l, lmax, u);
        if (tok >= 0) return tok;
    }
    double z = 0;
    for (int j = 0; j < n; j++) z += s->w[j] = exp((double)s->logits[c[j]] - lmax);
    double target = u * z;
    double cum = 0;
    int last = -1;
    for (int j = 0; j < n; j++) {
        if (s->w[j] <= 0) continue;
        cum += s->w[j];
        last = j;
        if (cum > target) return c[j];
    }
    return last >= 0 ? c[last] : -1;
}

/* 1 when pass[j..j+32) holds no token (tested as four 8-byte words): the screen rejects nearly
 * every token of a vocabulary, so the draw skips 32 at a time. */
static int none_passed_32(const uint8_t *pass) {
    uint64_t w[4];
    memcpy(w, pass, sizeof w);
    return (w[0] | w[1] | w[2] | w[3]) == 0;
}

enum { GUMBEL_CHUNK = 256 };

/* The screen's threshold for the current best value: fl32(best - 1/64). The screen computes
 * (l - lmax) + g3_gumbel_upper(b) in float; a token that can win or tie has
 * d + G >= best - 2^-52 |best| with |best| < 23 (best is the noise of a token plus d <= 0, and
 * the noise lies in [-3.1, 22.9]), hence |d| < 26 and g3_gumbel_upper <= 111, so the float
 * roundings of l - lmax, of the bound, of their sum and of this threshold move the comparison
 * by less than 2^-24 * 4 * 140 < 4e-5, far inside the 1/64 slack: such a token always passes. */
static float gumbel_screen_threshold(double best) { return (float)(best - 0.015625); }

/* Whether id is one of list[0..n). */
static int listed(const int32_t *list, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (list[i] == id) return 1;
    return 0;
}

/* A value below which the Gumbel-max over typical's pending set, relative to the vocabulary's
 * maximum, lies with probability e^(-e^4) < 2e-23: it is ln W + G with W > w_lo its weight and
 * G standard Gumbel. The draw's first threshold, so that it needs no token to start from (the
 * set's top, which would cost a scan of the bucket array); not below -23, where the screen's
 * bound on its roundings holds (gumbel_screen_threshold). */
static double pending_floor(const gemma3_sampler *s) { return fmax(log(s->typ.w_lo) - 4, -23); }

/* Whether the winner of typical's pending set (best, value best_v, relative to the vocabulary's
 * maximum) stands: rival is the best of the other values computed, those of the tokens the
 * bracket cannot tell among them (were one of those ahead, the set would have to be found).
 * It stands when it is a token (not the floor) and leads the rival by more than the other
 * reference's roundings can take, so that it is also the winner relative to the set's own
 * maximum, as the exact draw compares. Each value fl(fl(l - ref) + G)
 * errs by at most 2^-52 (|l - ref| + |v|) <= 2^-52 (2 |v| + 26) (G in [-3.2, 23]), relative
 * to the set's maximum (between l and the vocabulary's) by at most 2^-52 (3 |v| + 52): the four
 * roundings of two values lie within 2^-49 (|best_v| + |rival| + 32), and a value below the
 * rival leads by its distance to the rival more than its larger magnitude adds. The screen's
 * rejects lie 1/64 below. */
static int pending_winner_stands(int32_t best, double best_v, double rival) {
    if (best < 0) return 0;
    return rival == -INFINITY || best_v - rival > 0x1p-46 * (fabs(best_v) + fabs(rival) + 32);
}

/* Gumbel-max over the list: argmax(l_i + G_i), G_i from (seed, position, token id), ties to the
 * lowest id. A vectorised screen (g3_gumbel_screen_n: the random bits, and the bound
 * g3_gumbel_upper on the noise they can give, 16 tokens at a time) passes every token that
 * could still reach the best value so far; only those take the two logs. The n_skip ids of
 * skip are left out; start, when not -1, is a token of the rest to begin from (else the first
 * of the total order). *second (not NULL) gets the best value among the other tokens whose
 * values were computed (-inf if none); every other token's lies more than 1/64 - 4e-5 below
 * the winner's (gumbel_screen_threshold). Over typical's pending set: the winner of the tokens
 * surely in it, relative to the vocabulary's maximum and from a floor (pending_floor) instead of
 * the set's top, or -3 when the winner does not stand (pending_winner_stands: a token the
 * bracket cannot tell comes near it or ahead, or it leads too narrowly). */
int32_t g3_draw_gumbel_skipping(gemma3_sampler *s, int64_t pos, const int32_t *skip, int n_skip,
                                int32_t start, double *second) {
    const float *l = s->logits;
    int n = s->n_cand;
    if (n == 0) return -1;
    /* the list is 0..n-1, or a window of it or typical's set: logits read in place */
    int implicit = s->form == G3_LIST_WINDOW || s->form == G3_LIST_TYPICAL;
    int full = implicit || (s->id_order && n == s->n_vocab);
    int pending = s->form == G3_LIST_TYPICAL && s->typ.pending; /* its top unknown: from the
                                                                  * vocabulary's max */
    if (implicit) n = s->n_vocab;
    const int32_t *ids = full ? s->iota : s->cand;
    float lmax_f = pending ? s->view_lmax : g3_cand_max(s);
    if (lmax_f == -INFINITY) return -1;
    int32_t top = -1; /* the first token of the total order: the lowest id at the maximum */
    if (start >= 0) {
        top = start;
    } else if (implicit) { /* a pending set's first is -1: the draw starts from a floor */
        top = s->form == G3_LIST_WINDOW ? s->win.first : s->typ.first;
    } else if (full) {
        top = g3_first_max(s, l, n, lmax_f);
    } else {
        for (int j = 0; j < n; j++)
            if (l[ids[j]] == lmax_f && (top < 0 || ids[j] < top)) top = ids[j];
    }
    /* relative to the max, so that the noise is not lost in the rounding of a huge logit */
    uint64_t key = g3_rng_key(s->seed, pos);
    int32_t best = top;
    double best_v = pending ? pending_floor(s) : g3_gumbel_value(s, key, lmax_f, top),
           second_v = -INFINITY;
    double open_v = -INFINITY; /* the best of a pending set's tokens it cannot tell */
    uint8_t pass[GUMBEL_CHUNK];
    uint64_t hashes[GUMBEL_CHUNK];
    float *g = s->gathered;
    for (int c = 0; c < n; c += GUMBEL_CHUNK) {
        int m = n - c < GUMBEL_CHUNK ? n - c : GUMBEL_CHUNK;
        const float *lc = l + c;
        const uint64_t *hc = s->gumbel_hash + c;
        if (!full) { /* the chunk's logits and hashes in list order */
            for (int j = 0; j < m; j++) {
                g[j] = l[ids[c + j]];
                hashes[j] = s->gumbel_hash[ids[c + j]];
            }
            lc = g;
            hc = hashes;
        }
        /* the threshold of the chunk's start: best only grows, so it stays conservative */
        s->gumbel_screen_n(key, hc, lc, lmax_f, gumbel_screen_threshold(best_v), pass, m);
        for (int j = 0; j < m; j++) {
            if (j % 32 == 0 && j + 32 <= m && none_passed_32(pass + j)) {
                j += 31; /* 32 rejected tokens at once */
                continue;
            }
            if (!pass[j] || ids[c + j] == top) continue;
            int32_t id = ids[c + j];
            int in = implicit ? g3_implicit_side(s, lc[j], id) : 1;
            if (in == 0 || (n_skip > 0 && listed(skip, n_skip, id))) continue;
            if (in < 0) { /* what the winner must lead, or the set be found */
                open_v = fmax(open_v, g3_gumbel_value(s, key, lmax_f, id));
                continue;
            }
            double v = g3_gumbel_value(s, key, lmax_f, id);
            if (g3_gumbel_beats(v, id, best_v, best)) {
                second_v = best_v;
                best_v = v;
                best = id;
            } else if (v > second_v) {
                second_v = v;
            }
        }
    }
    if (pending && ((s->view_open & G3_VIEW_OPEN_TYPICAL_WINNER) ||
                    !pending_winner_stands(best, best_v, fmax(second_v, open_v))))
        return -3;
    G3_STAT(s, typ_fast_draws, implicit && start < 0 && s->form == G3_LIST_TYPICAL);
    G3_STAT(s, typ_pending_draws, pending);
    if (second) *second = second_v;
    return best;
}

/* The tokens the checking draw's screen passed, with their noise, and the best of them so far
 * (lead, an index into ids) with its value relative to the current reference. */
struct gumbel_kept {
    int32_t *ids;
    double *noise;
    int n, cap, lead;
    double lead_v;
};

/* Keeps token id with its noise and makes it the lead when its value relative to ref beats the
 * lead's; 0 when the cap is reached (a token is kept at most twice, as a new maximum and as
 * passing the screen, and the screen passes few). */
static int keep_gumbel(struct gumbel_kept *k, uint64_t key, const float *l, float ref,
                       int32_t id) {
    if (k->n == k->cap) return 0;
    k->ids[k->n] = id;
    k->noise[k->n] = g3_gumbel_noise(key, id);
    double v = g3_gumbel_sum(l[id], ref, k->noise[k->n]);
    if (v > k->lead_v) {
        k->lead_v = v;
        k->lead = k->n;
    }
    k->n++;
    return 1;
}

/* The Gumbel draw over the whole vocabulary of unchecked logits, in one pass instead of the
 * check's (or temperature's dividing copy's, when it left its division here: RAW_DIVIDING)
 * and then the screen's; the next block's logits are fetched while this one is screened, so
 * the read of a vector that is not in cache hides behind the hashing. Each block is checked
 * (or divided into s->own) and its maximum taken, then screened relative to the maximum so
 * far, ref: every screened token has l <= ref <= the final maximum, so the bounds of
 * gumbel_screen_threshold hold as they do relative to the maximum, and a token the screen
 * rejects lies more than 1/64 - 4e-5 below the best value so far: it cannot win or tie. The
 * tokens it passes keep their noise (s->ids_tmp, s->w); the winner is chosen among them at the
 * end, relative to the final maximum, as the exact draw compares. The maximum and its first
 * position are left known, as the check leaves them. Returns -2, the logits as they were, at a
 * NaN or an infinity (or should the passed tokens not fit). */
static int32_t draw_gumbel_checking(gemma3_sampler *s, int64_t pos) {
    const float *src = s->logits; /* the caller's; divided into s->own first when deferred */
    float t = s->logits_state.divide, *dst = t > 0.0f ? s->own : NULL;
    const float *l = dst ? dst : src;
    int n = s->n_vocab, block = s->check_block;
    struct gumbel_kept k = {s->ids_tmp, s->w, 0, n, -1, -INFINITY};
    uint64_t key = g3_rng_key(s->seed, pos);
    float ref = -INFINITY;
    int32_t top = -1;
    uint8_t pass[GUMBEL_CHUNK];
    for (int b0 = 0; b0 < n; b0 += block) {
        int nb = n - b0 < block ? n - b0 : block, bfirst;
        float bmax;
        int clean = dst ? s->copy_divide(dst + b0, src + b0, nb, t, &bmax, &bfirst)
                        : s->check_max(src + b0, nb, &bmax, &bfirst);
        if (!clean) return -2;
        if (bmax > ref) { /* a new maximum, valued first; the lead's value moves down */
            ref = bmax;
            top = b0 + bfirst;
            if (k.lead >= 0) k.lead_v = g3_gumbel_sum(l[k.ids[k.lead]], ref, k.noise[k.lead]);
            if (!keep_gumbel(&k, key, l, ref, top)) return -2;
        }
        for (int c = b0; c < b0 + nb; c += GUMBEL_CHUNK) {
            int m = b0 + nb - c < GUMBEL_CHUNK ? b0 + nb - c : GUMBEL_CHUNK;
            for (int j = 0; j < GUMBEL_CHUNK && c + block + j < n; j += 16)
                __builtin_prefetch(src + c + block + j); /* the next block's check */
            s->gumbel_screen_n(key, s->gumbel_hash + c, l + c, ref,
                               gumbel_screen_threshold(k.lead_v), pass, m);
            for (int j = 0; j < m; j++) {
                if (j % 32 == 0 && j + 32 <= m && none_passed_32(pass + j)) {
                    j += 31;
                    continue;
                }
                if (pass[j] && !keep_gumbel(&k, key, l, ref, c + j)) return -2;
            }
        }
    }
    int32_t best = -1;
    double best_v = -INFINITY;
    for (int j = 0; j < k.n; j++) {
        double v = g3_gumbel_sum(l[k.ids[j]], ref, k.noise[j]);
        if (best < 0 || g3_gumbel_beats(v, k.ids[j], best_v, best)) {
            best_v = v;
            best = k.ids[j];
        }
    }
    if (dst) s->logits = dst;
    g3_logits_max_found(s, ref, top);
    return best;
}

/* The Gumbel draw; the logits checked first (on the way, over a whole vocabulary). */
int32_t g3_draw_gumbel(gemma3_sampler *s, int64_t pos) {
    if (g3_whole_list(s) && g3_logits_unchecked(s)) {
        int32_t tok = draw_gumbel_checking(s, pos);
        if (tok != -2) return tok;
    }
    g3_check_finite(s); /* a NaN or an infinity: the rules, then the owed division */
    int32_t tok = g3_draw_gumbel_skipping(s, pos, NULL, 0, -1, NULL);
    if (tok != -3) return tok;
    /* typical's pending set: a token the bracket cannot tell could win, or the winner found
     * relative to the vocabulary's maximum might not be the one relative to the set's: the set
     * first, then the draw from its top */
    if (g3_rank_typical_resolve(s))
        g3_typical_gumbel_top(s);
    else
        g3_typical_settle(s);
    return g3_draw_gumbel_skipping(s, pos, NULL, 0, -1, NULL);
}

int32_t g3_draw(gemma3_sampler *s, int64_t pos) {
    return g3_gumbel_mode(s) ? g3_draw_gumbel(s, pos) : g3_draw_cdf(s, pos);
}
