/* sampling-rank.c - the rank view of the whole vocabulary (sampling-rank.h): top-p's boundary
 * and the CDF walk over a window, found in one bucket instead of a sorted vocabulary. */
#include "sampling-rank.h"

#include <math.h>
#include <string.h>

#include "sampling-select.h"

/* The view of s->logits (the whole vocabulary, checked) below lmax: built once per set of
 * logits (writable_logits and the temperature's division clear view_valid). */
static void view_ensure(gemma3_sampler *s, float lmax) {
    if (s->view_valid && s->view_lmax == lmax) return;
    memset(s->view_cnt, 0, sizeof s->view_cnt);
    memset(s->view_w, 0, sizeof s->view_w);
    s->rank_view(s->logits, lmax, s->n_vocab, s->view_bucket, s->view_cnt, s->view_w);
    s->view_valid = 1;
    s->view_lmax = lmax;
    s->edge_bucket = -1;
}

/* The tokens of bucket b, ascending, into out; returns how many. Blocks of 32 without one are
 * skipped (one vectorised compare each): a bucket holds a small share of the vocabulary. */
static int bucket_tokens(const gemma3_sampler *s, int b, int32_t *out) {
    const uint16_t *bk = s->view_bucket, want = (uint16_t)b;
    int n = s->n_vocab, m = 0, j = 0;
    for (; j + 32 <= n; j += 32) {
        int hits = 0;
        for (int k = 0; k < 32; k++) hits += bk[j + k] == want;
        if (!hits) continue;
        for (int k = 0; k < 32; k++) { /* branch-free: which tokens are in is random */
            out[m] = j + k;
            m += bk[j + k] == want;
        }
    }
    for (; j < n; j++) {
        out[m] = j;
        m += bk[j] == want;
    }
    return m;
}

/* The tokens of bucket b in the total order, in s->pos_edge (kept for the next caller that asks
 * for the same bucket: top-p's boundary bucket is its window's last); returns how many. */
static int bucket_sorted(gemma3_sampler *s, int b) {
    if (s->edge_bucket != b) {
        s->edge_n = bucket_tokens(s, b, s->pos_edge);
        g3_sort_ids_total(s->logits, s->pos_edge, s->edge_n, s->pos_sub, s->sel_keys,
                          s->sel_keys2);
        s->edge_bucket = b;
    }
    return s->edge_n;
}

/* The view's weight of a token: what rank_view summed for it. */
static double view_weight(float l, float lmax) {
    double d = (double)l - lmax;
    return g3_approx_exp_fma(d > -708.0 ? d : -708.0);
}

/* A bound on |Q_S - 2^40 w|, for a set S of m tokens whose view weights sum to w and whose
 * fixed masses (g3_fixed_mass) sum to Q_S: each mass is within 1/2 of 2^40 times libm's exp
 * (itself within 2^-52 of e^d; below d = -29 the mass is 0 and 2^40 e^d < 1/4), each view
 * weight within G3_APPROX_EXP_REL_ERR of e^d (below -708 it is e^-708, far inside the 1/2),
 * and w, a sum of at most n + G3_VIEW_BUCKETS terms in some order, within
 * (n + G3_VIEW_BUCKETS) 2^-53 of the exact sum of its terms. */
static double mass_bound(double w, int m, int n) {
    double rel = G3_APPROX_EXP_REL_ERR + 0x1p-51 + (double)(n + 2 * G3_VIEW_BUCKETS) * 0x1p-52;
    return 1.01 * (0.5 * m + 0x1p40 * w * rel) + 2;
}

int g3_rank_top_p(gemma3_sampler *s, float lmax, float p, int32_t *last, int *count) {
    view_ensure(s, lmax);
    const double *ws = s->view_w;
    const uint32_t *cnt = s->view_cnt;
    int n = s->n_vocab;
    double total = 0;
    for (int b = 0; b < G3_VIEW_BUCKETS; b++) total += ws[b];
    /* target = floor(p Q), Q the total fixed mass, lies in [t_lo, t_hi]; slack covers the
     * roundings of these doubles (magnitudes up to 2^40 total: 2^-46 of it is 64 ulps) */
    double slack = 0x1p-6 * total + 4, q_err = mass_bound(total, n, n);
    double t_lo = (double)p * (0x1p40 * total - q_err) - slack - 1;
    double t_hi = (double)p * (0x1p40 * total + q_err) + slack + 1;
    if (!(t_lo >= 1)) return 0; /* the target may be 0: top_p's own rule */
    /* the bucket where the approximate mass reaches p of the total */
    double above = 0, goal = (double)p * total;
    int n_above = 0, b = 0;
    for (; b < G3_VIEW_BUCKETS - 1 && above + ws[b] < goal; b++) {
        above += ws[b];
        n_above += (int)cnt[b];
    }
    if (b == G3_VIEW_BUCKETS - 1) return 0; /* the last bucket holds no mass */
    int ne = bucket_sorted(s, b);
    const int32_t *e = s->pos_edge;
    /* the exact mass before the bucket lies in [lo, hi]; within it the masses are exact, so
     * token i holds the boundary if the prefix through it surely reaches the target and the
     * prefix before it surely does not */
    double a_err = mass_bound(above, n_above, n) + slack;
    double lo = 0x1p40 * above - a_err, hi = 0x1p40 * above + a_err;
    uint64_t through = 0;
    for (int i = 0; i < ne; i++) {
        uint64_t before = through;
        through += g3_fixed_mass(s->logits[e[i]], lmax);
        if (lo + (double)through >= t_hi) {
            if (!(hi + (double)before < t_lo)) return 0;
            *last = e[i];
            *count = n_above + i + 1;
            return 1;
        }
    }
    return 0;
}

/* Whether the window holds only part of bucket b (b_hi, b_lo: the buckets of its ends). */
static int on_edge(const gemma3_sampler *s, int b, int b_hi, int b_lo) {
    return (s->win.has_hi && b == b_hi) || (s->win.has_lo && b == b_lo);
}

/* The window's tokens of bucket b in the total order, into s->tie_ids; returns how many. */
static int window_tokens(gemma3_sampler *s, int b) {
    int ne = bucket_sorted(s, b), m = 0;
    for (int i = 0; i < ne; i++)
        if (g3_win_contains(s, s->logits[s->pos_edge[i]], s->pos_edge[i]))
            s->tie_ids[m++] = s->pos_edge[i];
    return m;
}

/* The weight of the window's part of bucket b. */
static double window_share(gemma3_sampler *s, int b, float lmax) {
    int m = window_tokens(s, b);
    double w = 0;
    for (int i = 0; i < m; i++) w += view_weight(s->logits[s->tie_ids[i]], lmax);
    return w;
}

/* The walk over the window's buckets in order (bucket order is the total order's), its
 * approximate sums from the view; only the bucket holding the target is sorted and walked token
 * by token. The sums and the target differ from the exact walk's by what draw_cdf_fast bounds
 * (the same weights, summed in another order of at most n terms), so the same margin applies:
 * outside it, the exact walk stops at the same token. */
int32_t g3_rank_draw_cdf(gemma3_sampler *s, double u) {
    float lmax = s->win.vocab_max;
    view_ensure(s, lmax);
    int n = s->n_vocab;
    int b_hi = s->win.has_hi ? g3_view_bucket(s->win.hi_l, lmax) : 0;
    int b_lo = s->win.has_lo ? g3_view_bucket(s->win.lo_l, lmax) : G3_VIEW_BUCKETS - 1;
    double share_hi = on_edge(s, b_hi, b_hi, b_lo) ? window_share(s, b_hi, lmax) : s->view_w[b_hi];
    double share_lo = b_lo == b_hi ? share_hi
                      : on_edge(s, b_lo, b_hi, b_lo) ? window_share(s, b_lo, lmax)
                                                     : s->view_w[b_lo];
    double total = 0;
    for (int b = b_hi; b <= b_lo; b++)
        total += b == b_hi ? share_hi : b == b_lo ? share_lo : s->view_w[b];
    double target = u * total;
    double margin =
        4 * (4 * (double)n * 0x1p-53 + 2 * G3_APPROX_EXP_REL_ERR) * total + n * 1e-307;
    double cum = 0;
    int b = b_hi;
    for (; b <= b_lo; b++) {
        double share = b == b_hi ? share_hi : b == b_lo ? share_lo : s->view_w[b];
        if (cum + share > target) break;
        cum += share;
    }
    if (b > b_lo) return -1;
    int m = window_tokens(s, b);
    for (int i = 0; i < m; i++) {
        int32_t id = s->tie_ids[i];
        double before = cum;
        cum += view_weight(s->logits[id], lmax);
        if (cum > target) return before < target - margin && cum > target + margin ? id : -1;
    }
    return -1;
}
