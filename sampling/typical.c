/* sampling/typical.c - locally typical sampling (docs/sampling.md §2, §7): the exact set from a
 * counting sort of the scores, or over the whole vocabulary the rank view's set (sampling/rank.c),
 * kept implicit for the draw when no sampler follows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/candidates.h"
#include "sampling/rank.h"
#include "sampling/samplers.h"
#include "sampling/typical.h"

static int cmp_scored(const void *a, const void *b) {
    const struct scored *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Sorts a bucket of (score, id) pairs: insertion sort for the usual handful, else qsort. */
static void sort_scored(struct scored *a, int n) {
    if (n > 32) {
        qsort(a, (size_t)n, sizeof *a, cmp_scored);
        return;
    }
    for (int i = 1; i < n; i++) {
        struct scored v = a[i];
        int j = i;
        for (; j > 0 && cmp_scored(&a[j - 1], &v) > 0; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* Locally typical: score |-ln p_i - H|, ascending (ties by id); keep the shortest prefix whose
 * mass exceeds p (strict, as llama.cpp), at least min_keep. One pass gives each token's p and
 * ln p (for H, then for its score); a counting sort spreads the scores over about n/4 buckets,
 * linear in the score (a monotone map, so bucket order is score order), and the walk sorts a
 * bucket only when it reaches it: the tail after the crossing is never sorted. The same sums in
 * the same order, the same list as sorting everything. */
static void typical_exact(gemma3_sampler *s, float tp, float lmax) {
    g3_cand_materialise(s);
    int n = s->n_cand;
    double z = g3_cand_z(s, lmax);
    const int32_t *ids = g3_cand_ids_ascending(s);
    struct scored *sc = s->scored;
    double h = 0;
    for (int j = 0; j < n; j++) { /* entropy in id order; ln p kept for the scores */
        double pj = exp((double)s->logits[ids[j]] - lmax) / z, lp = log(pj);
        if (pj > 0) h -= pj * lp;
        sc[j].score = lp;
        sc[j].id = ids[j];
    }
    double smin = INFINITY, smax = 0;
    for (int j = 0; j < n; j++) {
        double x = sc[j].score = fabs(-sc[j].score - h);
        if (x == INFINITY) continue;
        smin = x < smin ? x : smin;
        smax = x > smax ? x : smax;
    }
    int nb = n / 4 < 1 ? 1 : n / 4 > TYPICAL_BUCKETS ? TYPICAL_BUCKETS : n / 4; /* +inf: nb */
    double scale = smax > smin ? (double)(nb - 1) / (smax - smin) : 0;
    uint32_t *start = s->typ_start, *fill = s->typ_fill;
    memset(start, 0, (size_t)(nb + 2) * sizeof *start);
    for (int j = 0; j < n; j++) {
        double x = sc[j].score;
        uint32_t b = nb;
        if (x != INFINITY) {
            double f = (x - smin) * scale;
            b = f < (double)(nb - 1) ? (uint32_t)f : (uint32_t)(nb - 1);
        }
        sc[j].bucket = b;
        start[b + 1]++;
    }
    for (int b = 0; b <= nb; b++) start[b + 1] += start[b];
    memcpy(fill, start, (size_t)(nb + 1) * sizeof *fill);
    struct scored *by_bucket = s->scored_tmp;
    for (int j = 0; j < n; j++) by_bucket[fill[sc[j].bucket]++] = sc[j];
    double cum = 0;
    int keep = n;
    for (int b = 0, j = 0; b <= nb && keep == n; b++) {
        sort_scored(by_bucket + start[b], (int)(start[b + 1] - start[b]));
        for (; j < (int)start[b + 1]; j++) {
            cum += exp((double)s->logits[by_bucket[j].id] - lmax) / z;
            if (cum > tp && j >= s->p.min_keep - 1) {
                keep = j + 1;
                break;
            }
        }
    }
    for (int j = 0; j < keep; j++) s->cand[j] = by_bucket[j].id;
    s->n_cand = keep;
    s->sorted = keep <= 1;
    s->id_order = keep <= 1;
}

/* A found set of typical's for the Gumbel draw: its first token, which the draw starts from, or
 * the set written out where the view cannot tell it. */
void g3_typical_gumbel_top(gemma3_sampler *s) {
    if ((s->typ.first = g3_rank_typical_first(s)) < 0) g3_cand_materialise(s);
}

/* Typical: over the whole vocabulary the rank view finds the set (g3_rank_typical) and it stays
 * implicit when no sampler acts after it (draw_next): the Gumbel draw screens the vocabulary
 * against it (it reads no order, only the set's first token), the CDF draw walks it in
 * typical's order itself. When that draw comes (draws: not the kept set) the set may stay
 * pending, only its crossing's bracket known: the draw rarely needs the crossing itself (nor,
 * in Gumbel mode, the set's first token or the view's moments: G3_TYPICAL_DEFER_GUMBEL). In
 * Gumbel mode with samplers after it, it is written out in id order. Elsewhere the exact
 * computation runs, as it does wherever the view's bounds leave the set open. */
static void typical(gemma3_sampler *s, float tp, int draw_next, int draws) {
    int n = s->n_cand;
    if (tp >= 1.0f || n <= 1) return;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return;
    if (s->id_order && n == s->n_vocab && n > 4096 && s->form != G3_LIST_WINDOW &&
        (draw_next || g3_gumbel_mode(s))) {
        int defer = !(draws && draw_next) ? G3_TYPICAL_NOW
                    : g3_gumbel_mode(s)        ? G3_TYPICAL_DEFER_GUMBEL
                                            : G3_TYPICAL_DEFER_CDF;
        int count = g3_rank_typical(s, lmax, tp, s->p.min_keep, defer);
        if (count == 1) { /* one token: the list is it (as a dominant token's set often is) */
            G3_STAT(s, typ_fast_sets, 1);
            s->form = G3_LIST_IDS;
            s->cand[0] = s->typ.id_b;
            s->n_cand = 1;
            s->sorted = s->id_order = 1;
            return;
        }
        if (count > 1) {
            G3_STAT(s, typ_fast_sets, 1);
            s->form = G3_LIST_TYPICAL;
            s->typ.first = -1;
            s->n_cand = count;
            if (!g3_gumbel_mode(s) || s->typ.pending) return; /* a pending set's draw: no top */
            if (draw_next)
                g3_typical_gumbel_top(s);
            else
                g3_cand_materialise(s);
            return;
        }
    }
    typical_exact(s, tp, lmax);
}

/* The CDF draw's way back when typical's implicit set cannot be walked from the view: the
 * exact typical, from the whole vocabulary it was taken from. */
void g3_typical_settle(gemma3_sampler *s) {
    g3_cand_whole_vocabulary(s);
    typical_exact(s, s->p.typical_p, g3_cand_max(s));
}

void g3_apply_typical(gemma3_sampler *s, const struct g3_chain_step *at) {
    typical(s, s->p.typical_p, at->last, at->draws);
}
