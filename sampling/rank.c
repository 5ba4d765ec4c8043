/* sampling/rank.c - the rank view of the whole vocabulary (sampling/rank.h): top-p's boundary,
 * typical's set and the CDF walk over what they keep, found in one bucket or one band of
 * distances instead of a sorted vocabulary. */
#include "sampling/rank.h"

#include <math.h>
#include <string.h>

#include "sampling/candidates.h"

/* The view of s->logits (the whole vocabulary, checked) below lmax, with the moments when
 * asked: built once per set of logits (every rewrite clears logits_state.view), the moments
 * added by a pass of their own when a view without them is asked for them. Returns 0,
 * building nothing, for a vocabulary over 2^20 tokens, whose sums of units (below n 2^32)
 * might not convert to double exactly: the callers' exact paths run. */
static int view_ensure(gemma3_sampler *s, float lmax, int moments) {
    if (s->n_vocab > (1 << 20)) return 0;
    if (s->logits_state.view && s->view_lmax == lmax) {
        if (moments && !s->view_has_moments)
            s->rank_view(s->logits, lmax, s->n_vocab, NULL, NULL, &s->view_moment);
        s->view_has_moments |= moments;
        return 1;
    }
    memset(s->view_sum, 0, sizeof s->view_sum);
    s->view_moment = NAN; /* until a pass sums it: a stale one would move the centre unseen */
    s->rank_view(s->logits, lmax, s->n_vocab, s->view_bucket, s->view_sum,
                 moments ? &s->view_moment : NULL);
    for (int b = 0; b < G3_VIEW_BUCKETS; b++) /* one rounding: the sum converts exactly */
        s->view_w[b] = s->view_scale[b] * (double)s->view_sum[b].unit;
    g3_logits_view_built(s);
    s->view_fine_valid = 0;
    s->view_has_moments = moments;
    s->view_lmax = lmax;
    s->edge_bucket = -1;
    return 1;
}

/* The tokens of bucket b in the total order, in s->pos_edge (kept for the next caller that asks
 * for the same bucket: top-p's boundary bucket is its window's last); returns how many, and
 * *below (not NULL) how many tokens lie in earlier buckets. */
static int bucket_sorted(gemma3_sampler *s, int b, int *below) {
    if (s->edge_bucket != b) {
        s->edge_n = s->band_scan(s->view_bucket, s->n_vocab, b, b, 0, b - 1, s->pos_edge,
                                   &s->edge_below);
        g3_sort_ids_total(s->logits, s->pos_edge, s->edge_n, s->pos_sub, s->sel_keys,
                          s->sel_keys2);
        s->edge_bucket = b;
    }
    if (below) *below = s->edge_below;
    return s->edge_n;
}

/* The view's weight of a token: its bucket's factor times its unit, what the pass summed. */
static double view_weight(const gemma3_sampler *s, float l) {
    float lmax = s->view_lmax;
    int b = g3_view_bucket(l, lmax);
    return s->view_scale[b] * (double)g3_view_unit(g3_view_expm1(g3_view_reduced(l, lmax, b)), b);
}

/* A bound on the relative error of a sum of view weights over at most n tokens of the regular
 * buckets. */
static double view_rel(int n) {
    return G3_VIEW_REL_ERR + (double)(n + 2 * G3_VIEW_BUCKETS + 8) * 0x1p-53;
}

/* The view's Z, with *rel a bound on its relative error against the exact sum of e^(l - lmax):
 * it leaves out the last bucket's weights, each below 2^-46 (z >= 1: the maximum's weight is 1). */
static double view_total(const gemma3_sampler *s, double *rel) {
    double z = 0;
    for (int b = 0; b < G3_VIEW_BUCKETS; b++) z += s->view_w[b];
    *rel = view_rel(s->n_vocab) + s->n_vocab * 0x1p-46 / z;
    return z;
}

/* A bound on |Q_S - 2^40 w|, for a set S of m tokens whose view weights sum to w and whose
 * fixed masses (g3_fixed_mass) sum to Q_S: each mass is within 1/2 of 2^40 times libm's exp
 * (itself within 2^-52 of e^d; below d = -29 the mass is 0 and 2^40 e^d < 1/4; in the view's
 * last bucket both are 0), each view weight within G3_VIEW_REL_ERR of e^d, and w, a sum of at
 * most n + G3_VIEW_BUCKETS terms in some order, within (n + G3_VIEW_BUCKETS) 2^-53 of the
 * exact sum of its terms. */
static double mass_bound(double w, int m, int n) {
    double rel = G3_VIEW_REL_ERR + 0x1p-51 + (double)(n + 2 * G3_VIEW_BUCKETS) * 0x1p-52;
    return 1.01 * (0.5 * m + 0x1p40 * w * rel) + 2;
}

/* The weights the rank view's walks sum: the view's (a bucket's sum, within
 * rel = G3_VIEW_REL_ERR of e^d each, and 0 in the last bucket, where e^d < 2^-46), or, where
 * its margin leaves a walk open, the fine tier's: g3_approx_weight (within
 * G3_APPROX_EXP_REL_ERR, and e^-708 for a ban), summed per bucket in one more pass over the
 * vocabulary. `slack` bounds a token's absolute error beyond rel. */
struct walk_weights {
    const double *bucket;
    int fine;
    double rel, slack;
};

static double token_weight(const gemma3_sampler *s, const struct walk_weights *ww, float l) {
    return ww->fine ? g3_approx_weight(l, s->view_lmax) : view_weight(s, l);
}

/* The fine tier's bucket sums, and the sum of its weights times max(l - lmax, -708) (typical's
 * centre: -708 as the weight clamps, so that a ban adds e^-708 times -708, not -inf), computed
 * once per view. */
static void view_fine_ensure(gemma3_sampler *s) {
    if (s->view_fine_valid) return;
    enum { BLOCK = 1024, LANES = 8 };
    double w[BLOCK], lanes[LANES] = {0};
    const float lmax = s->view_lmax;
    memset(s->view_fine, 0, sizeof s->view_fine);
    for (int i0 = 0; i0 < s->n_vocab; i0 += BLOCK) {
        int m = s->n_vocab - i0 < BLOCK ? s->n_vocab - i0 : BLOCK;
        const float *l = s->logits + i0;
        s->approx_exp_n(w, l, lmax, m);
        for (int k = 0; k < m; k++) s->view_fine[s->view_bucket[i0 + k]] += w[k];
        for (int k = 0; k < m; k++) {
            double d = (double)l[k] - lmax;
            lanes[k % LANES] += w[k] * (d > -708.0 ? d : -708.0);
        }
    }
    s->view_fine_moment = 0;
    for (int q = 0; q < LANES; q++) s->view_fine_moment += lanes[q];
    s->view_fine_valid = 1;
}

/* The fine tier's weights (g3_approx_weight, a pass of their own), for the walks the view's
 * leave open: *z gets their total (a ban's e^-708 in it is far below the margin). */
static struct walk_weights fine_weights(gemma3_sampler *s, double *z) {
    view_fine_ensure(s);
    *z = 0;
    for (int b = 0; b < G3_VIEW_BUCKETS; b++) *z += s->view_fine[b];
    double rel = G3_APPROX_EXP_REL_ERR + (double)(s->n_vocab + 2 * G3_VIEW_BUCKETS + 8) * 0x1p-53;
    return (struct walk_weights){s->view_fine, 1, rel, 1e-307};
}

int g3_rank_top_p(gemma3_sampler *s, float lmax, float p, int32_t *last, int *count) {
    if (!view_ensure(s, lmax, 0)) return 0;
    const double *ws = s->view_w;
    int n = s->n_vocab;
    double unused, total = view_total(s, &unused);
    /* target = floor(p Q), Q the total fixed mass, lies in [t_lo, t_hi]; slack covers the
     * roundings of these doubles (magnitudes up to 2^40 total: 2^-46 of it is 64 ulps) */
    double slack = 0x1p-6 * total + 4, q_err = mass_bound(total, n, n);
    double t_lo = (double)p * (0x1p40 * total - q_err) - slack - 1;
    double t_hi = (double)p * (0x1p40 * total + q_err) + slack + 1;
    if (!(t_lo >= 1)) return 0; /* the target may be 0: top_p's own rule */
    /* the bucket where the approximate mass reaches p of the total */
    double above = 0, goal = (double)p * total;
    int b = 0;
    for (; b < G3_VIEW_BUCKETS - 1 && above + ws[b] < goal; b++) above += ws[b];
    if (b == G3_VIEW_BUCKETS - 1) return 0; /* the last bucket holds no mass */
    int n_above, ne = bucket_sorted(s, b, &n_above);
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
    int ne = bucket_sorted(s, b, NULL), m = 0;
    for (int i = 0; i < ne; i++)
        if (g3_win_contains(s, s->logits[s->pos_edge[i]], s->pos_edge[i]))
            s->tie_ids[m++] = s->pos_edge[i];
    return m;
}

/* The weight of the window's part of bucket b. */
static double window_share(gemma3_sampler *s, const struct walk_weights *ww, int b) {
    int m = window_tokens(s, b);
    double w = 0;
    for (int i = 0; i < m; i++) w += token_weight(s, ww, s->logits[s->tie_ids[i]]);
    return w;
}

/* The walk over the window's buckets in order (bucket order is the total order's), its
 * approximate sums by bucket; only the bucket holding the target is sorted and walked token
 * by token. The sums and the target differ from the exact walk's by what draw_cdf_fast bounds
 * (the same weights, summed in another order of at most n terms), so the same margin applies:
 * outside it, the exact walk stops at the same token. */
static int32_t walk_window(gemma3_sampler *s, const struct walk_weights *ww, double u) {
    float lmax = s->win.vocab_max;
    int n = s->n_vocab;
    const double *bw = ww->bucket;
    int b_hi = s->win.has_hi ? g3_view_bucket(s->win.hi_l, lmax) : 0;
    int b_lo = s->win.has_lo ? g3_view_bucket(s->win.lo_l, lmax) : G3_VIEW_BUCKETS - 1;
    double share_hi = on_edge(s, b_hi, b_hi, b_lo) ? window_share(s, ww, b_hi) : bw[b_hi];
    double share_lo = b_lo == b_hi ? share_hi
                      : on_edge(s, b_lo, b_hi, b_lo) ? window_share(s, ww, b_lo)
                                                     : bw[b_lo];
    double total = 0;
    for (int b = b_hi; b <= b_lo; b++)
        total += b == b_hi ? share_hi : b == b_lo ? share_lo : bw[b];
    double target = u * total;
    double margin = 4 * (4 * (double)(n + 2 * G3_VIEW_BUCKETS) * 0x1p-53 + 2 * ww->rel) * total +
                    2 * n * ww->slack;
    double cum = 0;
    int b = b_hi;
    for (; b <= b_lo; b++) {
        double share = b == b_hi ? share_hi : b == b_lo ? share_lo : bw[b];
        if (cum + share > target) break;
        cum += share;
    }
    if (b > b_lo) return -1;
    int m = window_tokens(s, b);
    for (int i = 0; i < m; i++) {
        int32_t id = s->tie_ids[i];
        double before = cum;
        cum += token_weight(s, ww, s->logits[id]);
        if (cum > target) return before < target - margin && cum > target + margin ? id : -1;
    }
    return -1;
}

int32_t g3_rank_draw_cdf(gemma3_sampler *s, double u) {
    if (!view_ensure(s, s->win.vocab_max, 0)) return -1;
    struct walk_weights coarse = {s->view_w, 0, G3_VIEW_REL_ERR, 0x1p-46},
                        fine = {s->view_fine, 1, G3_APPROX_EXP_REL_ERR, 1e-307};
    int32_t tok = s->skip_float_draw ? -1 : walk_window(s, &coarse, u);
    if (tok >= 0) return tok;
    view_fine_ensure(s);
    return walk_window(s, &fine, u);
}

/* ================================ typical: the walk by distance ============================= */

/* Locally typical sampling scores a token |-ln p - H|, which is |c - l| for the centre
 * c = lmax + ln Z - H = lmax + sum w d / Z (the probability-weighted mean logit) up to
 * roundings: its order is the order of distance from c, and a bucket of the view is a range
 * of distances. */

/* The logits of bucket b (b = G3_VIEW_BUCKETS - 1: the top of the last) lie in [*lo, *hi]:
 * g3_view_bucket's float difference moves an edge by at most 2^-24 of 32 nats (1.9e-6), the
 * fuzz covers that and the roundings here. */
static inline void bucket_range(double lmax, int b, double *lo, double *hi) {
    double fuzz = 1e-5 + 0x1p-40 * fabs(lmax);
    *hi = lmax - (double)b / G3_VIEW_PER_NAT + fuzz;
    *lo = lmax - (double)(b + 1) / G3_VIEW_PER_NAT - fuzz;
}

/* The nearest (far = 0) or farthest (far = 1) distance from c that bucket b's logits can have. */
static inline double bucket_dist(double lmax, double c, int b, int far) {
    double lo, hi;
    bucket_range(lmax, b, &lo, &hi);
    if (far) return hi - c > c - lo ? hi - c : c - lo; /* c finite: no NaN to order */
    return c > hi ? c - hi : c < lo ? lo - c : 0;
}

/* The regular buckets (all but the last) in ascending order of bucket_dist(far): bc, the
 * bucket of c, merged with the two runs away from it (bc - 1, bc - 2, ... and bc + 1, ...),
 * along each of which both distances grow. Each run's next distance is kept, so that a step
 * computes one. */
struct bucket_order {
    double lmax, c;
    int far, bc, up, down;          /* up, down: each run's last bucket given */
    double k_centre, k_up, k_down; /* bc's distance (inf once given), each run's next one */
};

static double order_dist(const struct bucket_order *o, int b) {
    return bucket_dist(o->lmax, o->c, b, o->far);
}

static double order_up(const struct bucket_order *o) {
    return o->up > 0 ? order_dist(o, o->up - 1) : INFINITY;
}

static double order_down(const struct bucket_order *o) {
    return o->down + 1 < G3_VIEW_BUCKETS - 1 ? order_dist(o, o->down + 1) : INFINITY;
}

static void order_start(struct bucket_order *o, double lmax, double c, int bc, int far) {
    *o = (struct bucket_order){.lmax = lmax, .c = c, .far = far, .bc = bc, .up = bc, .down = bc};
    o->k_centre = order_dist(o, bc);
    o->k_up = order_up(o);
    o->k_down = order_down(o);
}

/* The next bucket in the order, *dist its distance; -1 after the last. */
static inline int order_next(struct bucket_order *o, double *dist) {
    if (o->k_centre == INFINITY && o->k_up == INFINITY && o->k_down == INFINITY) return -1;
    if (o->k_centre <= o->k_up && o->k_centre <= o->k_down) {
        *dist = o->k_centre;
        o->k_centre = INFINITY;
        return o->bc;
    }
    if (o->k_up <= o->k_down) {
        *dist = o->k_up;
        o->up--;
        o->k_up = order_up(o);
        return o->up;
    }
    *dist = o->k_down;
    o->down++;
    o->k_down = order_down(o);
    return o->down;
}

/* Extends [*lo_b, *hi_b] from bc while the next bucket's distance (far) stays below `below`:
 * by bisection, since along each run away from bc both distances only grow (bucket_order). */
static void grow_range(double lmax, double c, int far, double below, int *lo_b, int *hi_b) {
    int out = -1; /* every bucket from *lo_b up to the start passes; out does not (or is -1) */
    while (*lo_b - out > 1) {
        int mid = out + (*lo_b - out) / 2;
        if (bucket_dist(lmax, c, mid, far) < below)
            *lo_b = mid;
        else
            out = mid;
    }
    out = G3_VIEW_BUCKETS - 1; /* the last bucket is never taken */
    while (out - *hi_b > 1) {
        int mid = *hi_b + (out - *hi_b) / 2;
        if (bucket_dist(lmax, c, mid, far) < below)
            *hi_b = mid;
        else
            out = mid;
    }
}

struct dist_walk {
    int32_t tok;
    double dist, through; /* the token's distance, the weight up to and including it */
    int count;            /* tokens up to and including it */
};

static double dist_of(const gemma3_sampler *s, int32_t id, double c) {
    return fabs((double)s->logits[id] - c);
}

/* Ids ascending into the order of distance from c (ties, which are equal logits, by id): the
 * tokens below c in the total order already are; those above it in the reverse of the total
 * order, each run of equal logits turned back to ascending ids. */
static void sort_by_dist(gemma3_sampler *s, int32_t *ids, int n, int above) {
    g3_sort_ids_total(s->logits, ids, n, s->pos_sub, s->sel_keys, s->sel_keys2);
    if (!above) return;
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        int32_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && s->logits[ids[j]] == s->logits[ids[i]]) j++;
        for (int a = i, b = j - 1; a < b; a++, b--) {
            int32_t t = ids[a];
            ids[a] = ids[b];
            ids[b] = t;
        }
        i = j;
    }
}

/* Whether the exact scores could order a token at another logit than g[i]'s on the other side
 * of g[i] (the walk g[0..m) is sorted by distance). A token within 2 eps on the other side of
 * c could: the centre's error moves the two distances apart. On g[i]'s side, both farther than
 * 2 eps from c, the centre cancels from the difference of their scores (each is c less its
 * logit or its logit less c, up to its own roundings), so only one within 2 tok_eps could.
 * *by_logit gets whether a token of that side within 2 eps needed this argument. */
static int ambiguous(const gemma3_sampler *s, const int32_t *g, int m, int i, double c,
                     const struct g3_score_err *err, int *by_logit) {
    const float lt = s->logits[g[i]];
    const double d = dist_of(s, g[i], c), eps = err->eps;
    *by_logit = 0;
    for (int dir = -1; dir <= 1; dir += 2)
        for (int j = i + dir; j >= 0 && j < m && fabs(dist_of(s, g[j], c) - d) <= 2 * eps;
             j += dir) {
            float lj = s->logits[g[j]];
            if (lj == lt) continue;
            double dj = dist_of(s, g[j], c);
            int same_side = ((double)lj > c) == ((double)lt > c) && d > 2 * eps && dj > 2 * eps;
            if (!same_side || fabs(dj - d) <= 2 * err->tok_eps) return 1;
            *by_logit = 1;
        }
    return 0;
}

/* The distances that bracket the crossing of target, from the bucket sums ws: *s_lo,
 * nearer than which at most target - margin lies (the buckets in order of their nearest
 * distance), and *s_hi, within which at least target + margin lies (in order of their
 * farthest; typical's own distance, which holds its mass, when in_typ and the buckets reach
 * past it). Returns 0 when the regular buckets cannot bracket it. */
static int bracket(const gemma3_sampler *s, const double *ws, double c, int bc, double target,
                   double margin, int in_typ, double *s_lo, double *s_hi) {
    struct bucket_order o;
    double acc = 0, dist;
    int b;
    *s_lo = *s_hi = -1;
    order_start(&o, s->view_lmax, c, bc, 0);
    while ((b = order_next(&o, &dist)) >= 0) {
        if (acc + ws[b] > target - margin) {
            *s_lo = dist;
            break;
        }
        acc += ws[b];
    }
    order_start(&o, s->view_lmax, c, bc, 1);
    acc = 0;
    while (*s_lo >= 0 && (b = order_next(&o, &dist)) >= 0) {
        if (in_typ && dist >= s->typ.dist) { /* the buckets past it hold tokens not in the set */
            if (s->typ.mass >= target + margin) *s_hi = s->typ.dist;
            break;
        }
        acc += ws[b];
        if (acc >= target + margin) {
            *s_hi = dist;
            break;
        }
    }
    return *s_hi >= 0;
}

/* The tokens within distance reach of c whose bucket lies in [g1, g2] but not in [a1, a2]
 * (a1 > a2: none excluded), into s->ids_tmp in order of distance from c (ties by id): each
 * side of c sorted, then merged. Returns how many, and *n_inner gets how many tokens lie in
 * [a1, a2]. */
static int list_band(gemma3_sampler *s, double c, double reach, int g1, int g2, int a1, int a2,
                     int *n_inner) {
    int32_t *above = s->pos_above, *below = s->tie_ids, *g = s->ids_tmp;
    int n_above = 0, n_below = 0;
    int listed = s->band_scan(s->view_bucket, s->n_vocab, g1, g2, a1, a2, below, n_inner);
    for (int k = 0; k < listed; k++) { /* below fills behind k: in place */
        int32_t id = below[k];
        if (dist_of(s, id, c) > reach) continue;
        if ((double)s->logits[id] > c)
            above[n_above++] = id;
        else
            below[n_below++] = id;
    }
    sort_by_dist(s, above, n_above, 1);
    sort_by_dist(s, below, n_below, 0);
    int m = 0;
    for (int i = 0, j = 0; i < n_above || j < n_below;) {
        double da = i < n_above ? dist_of(s, above[i], c) : INFINITY;
        double db = j < n_below ? dist_of(s, below[j], c) : INFINITY;
        int take_above =
            j == n_below || (i < n_above && (da < db || (da == db && above[i] < below[j])));
        g[m++] = take_above ? above[i++] : below[j++];
    }
    return m;
}

/* A walk's bracket (s_lo, s_hi) and its buckets: [a1, a2] those wholly nearer than
 * s_lo - inner (maybe none), [g1, g2] every one within reach = s_hi + 2 eps. */
struct band {
    double s_lo, s_hi, reach;
    int a1, a2, g1, g2;
};

/* The band of a walk by distance from c to target (bracket's arguments); 0 when the regular
 * buckets cannot bracket it, c lies among the lowest logits (or is NaN) or the reach takes in
 * the last bucket. */
static int walk_band(const gemma3_sampler *s, const double *ws, double c, double eps,
                     double target, double margin, int in_typ, double inner, struct band *bd) {
    const double lmax = s->view_lmax;
    const int last = G3_VIEW_BUCKETS - 1;
    double xc = (lmax - c) * G3_VIEW_PER_NAT;
    if (!(xc < last)) return 0;
    int bc = xc > 0 ? (int)xc : 0;
    if (!bracket(s, ws, c, bc, target, margin, in_typ, &bd->s_lo, &bd->s_hi)) return 0;
    bd->reach = bd->s_hi + 2 * eps;
    if (bd->reach >= bucket_dist(lmax, c, last, 0)) return 0;
    double nearer = bd->s_lo - inner;
    bd->a1 = bd->g1 = bd->g2 = bc;
    bd->a2 = bc - 1;
    if (bucket_dist(lmax, c, bc, 1) < nearer) {
        bd->a2 = bc;
        grow_range(lmax, c, 1, nearer, &bd->a1, &bd->a2);
    }
    grow_range(lmax, c, 0, nextafter(bd->reach, INFINITY), &bd->g1, &bd->g2);
    return 1;
}

/* The largest view weight a token of buckets [b1, b2] can have: its bucket's sum, or the
 * bucket's factor times the largest unit. */
static double heaviest_token(const gemma3_sampler *s, int b1, int b2) {
    double h = 0;
    for (int b = b1; b <= b2; b++) {
        double one = s->view_scale[b] * 0x1p31 * (1 + 0x1p-16);
        h = fmax(h, s->view_w[b] < one ? s->view_w[b] : one);
    }
    return h;
}

/* The largest weight a token of the band can have beyond the buckets wholly nearer: a view
 * weight, or within 2^-20 a fine tier's (within 2^-26 of the view's, and of e^d, which is at
 * most e^(-b/64) (1 + 2^-18): x <= 2^-19). */
static double band_heaviest(const gemma3_sampler *s, const struct band *bd) {
    if (bd->a1 > bd->a2) return heaviest_token(s, bd->g1, bd->g2);
    return fmax(heaviest_token(s, bd->g1, bd->a1 - 1), heaviest_token(s, bd->a2 + 1, bd->g2));
}

/* walk_dist's answers: the crossing; none, for the bounds; none, because the sums lay within
 * the margin of the target there, or a token's score could lie on either side of the
 * crossing's */
enum { WALK_OPEN, WALK_FOUND, WALK_NEAR_SUM, WALK_CLOSE_SCORES };

/* Whether the fine tier's weights and centre could answer a walk the view's left open. */
static int finer_could_tell(int found) {
    return found == WALK_NEAR_SUM || found == WALK_CLOSE_SCORES;
}

/* The token at which the weight, summed over the whole vocabulary (in_typ: over typical's set)
 * in order of distance from c, first exceeds target: what the walk by exact typical scores finds
 * when each score lies within eps of its distance and the sums within margin of the exact ones,
 * and the answer holds under both (WALK_FOUND; the others when the bounds leave it open, the
 * sums there or the scores of two tokens: finer ones could tell). Between the
 * bracket's ends: the buckets around c wholly nearer than s_lo are summed as they are, every
 * other token within s_hi + 2 eps is listed and walked after them. */
static int walk_dist(gemma3_sampler *s, double c, const struct g3_score_err *err,
                     const struct walk_weights *ww, double target, double margin, int in_typ,
                     struct dist_walk *out) {
    const double eps = err->eps;
    struct band bd;
    if (!walk_band(s, ww->bucket, c, eps, target, margin, in_typ, 0, &bd)) return WALK_OPEN;
    /* the crossing's token must outweigh twice the margin: no token of the band does */
    if (!(band_heaviest(s, &bd) * (1 + 0x1p-20) > 2 * margin)) return WALK_NEAR_SUM;
    const int a1 = bd.a1, a2 = bd.a2;
    const double s_lo = bd.s_lo, s_hi = bd.s_hi;
    double cum = 0;
    for (int b = a1; b <= a2; b++) cum += ww->bucket[b];
    int n_a, m = list_band(s, c, bd.reach, bd.g1, bd.g2, a1, a2, &n_a);
    const int32_t *g = s->ids_tmp;
    for (int i = 0; i < m; i++) {
        double before = cum;
        cum += token_weight(s, ww, s->logits[g[i]]);
        if (!(cum > target)) continue;
        double d = dist_of(s, g[i], c);
        int by_logit;
        /* the buckets summed unlisted hold tokens nearer than s_lo (none when a2 < a1), which
         * could not be ordered after it unless it lies within 2 eps of s_lo */
        if ((a1 <= a2 && d < s_lo + 2 * eps) || d > s_hi) return WALK_OPEN;
        if (ambiguous(s, g, m, i, c, err, &by_logit)) return WALK_CLOSE_SCORES;
        if (!(before < target - margin && cum > target + margin)) return WALK_NEAR_SUM;
        G3_STAT(s, typ_by_logit, by_logit);
        out->tok = g[i];
        out->dist = d;
        out->through = cum;
        out->count = n_a + i + 1;
        return WALK_FOUND;
    }
    return WALK_OPEN;
}

double g3_rank_z(gemma3_sampler *s, float lmax, double *rel) {
    return view_ensure(s, lmax, 0) ? view_total(s, rel) : 0;
}

/* The margin of a walk by distance whose weights, each within rel of e^d, sum to z: the exact
 * walk sums p = e^d / Z' (Z' within (n + 2) 2^-53 of Z), each rounded, in order. */
static double dist_margin(double z, double rel, int n) {
    return 2.04 * z * (2 * rel + (2.0 * n + 8) * 0x1p-53) + 1e-290;
}

/* Typical's centre (into *c) and how far a token's distance from it may lie from its exact
 * score, from a tier's total z (within rel) and its sum s1 of weight times (l - lmax), whose
 * error beyond the weights' rel is s1_err z: our centre against the true one, the true one
 * against the one the exact sums imply (their n roundings, in H and Z), and a token's own
 * roundings (exp, division and log of its p, the subtraction; |ln p| <= 32 + |ln Z| for the
 * walked tokens), all doubled: docs/sampling.md §7. */
static struct g3_score_err typical_bounds(int n, float lmax, double z, double rel, double s1,
                                          double s1_err, double *c) {
    double mean = s1 / z, h = fabs(log(z) - mean), lz = fabs(log(z));
    *c = (double)lmax + mean;
    double tok = 0x1p-53 * (fabs(*c) + 160 + 3 * lz + h);
    double centre_err = fabs(mean) * (2 * rel + 0x1p-52) + s1_err, /* ours against the true */
        sums_err = 2.02 * (n + 10) * 0x1p-53 * (h + 1); /* the true against the exact sums' */
    return (struct g3_score_err){.eps = 2 * (centre_err + sums_err + tok) + 1e-290,
                                 .tok_eps = 2 * tok + 1e-290,
                                 .centre = centre_err + sums_err};
}

/* Typical's set in the fine tier, weights and centre (the view's left its walk open): the
 * crossing into *r, the centre and bounds it was found with into *c and *err. Each weight
 * times (l - lmax) rounds twice, the lanes' sums by n 2^-53 of theirs. */
static int typical_walk_fine(gemma3_sampler *s, float tp, double *c, struct g3_score_err *err,
                             struct dist_walk *r) {
    int n = s->n_vocab;
    double z;
    struct walk_weights fine = fine_weights(s, &z);
    double mean = s->view_fine_moment / z;
    *err = typical_bounds(n, s->view_lmax, z, fine.rel, s->view_fine_moment,
                          (n + 8) * 0x1p-53 * (fabs(mean) + 1), c);
    return walk_dist(s, *c, err, &fine, (double)tp * z, dist_margin(z, fine.rel, n), 0, r);
}

/* Keeps typical's set: the crossing r found from centre c within err, in the fine tier or
 * not. */
static void typical_keep(gemma3_sampler *s, double c, const struct g3_score_err *err,
                         const struct dist_walk *r, int fine) {
    s->typ.center = c;
    s->typ.err = *err;
    s->typ.fine = fine;
    s->typ.dist = r->dist;
    s->typ.mass = r->through;
    s->typ.l_b = s->logits[r->tok];
    s->typ.id_b = r->tok;
}

/* Leaves typical's set pending (s->typ.pending), from the bracket of its crossing alone: every
 * token nearer than s_lo - 2 eps to c lies before the crossing (the tokens nearer than s_lo
 * weigh at most target - margin, and a token's score lies within eps of its distance), so in
 * the set; the set's weight W, the sum through the crossing, exceeds the target by at most
 * the crossing's own weight, a token of a bucket within s_hi + 2 eps of c. Returns a lower bound
 * on the set's size, from the buckets wholly nearer than s_lo - 2 eps (a unit is at most
 * 2^31 (1 + 2^-17): x <= 2^-19), or 0 (nothing kept) when the bracket is open or the bound
 * falls below 2 or min_keep. */
static int typical_defer(gemma3_sampler *s, double c, const struct g3_score_err *err,
                         double target, double margin, int min_keep) {
    struct band bd;
    if (!walk_band(s, s->view_w, c, err->eps, target, margin, 0, 2 * err->eps, &bd)) return 0;
    uint64_t units = 0;
    for (int b = bd.a1; b <= bd.a2; b++) units += s->view_sum[b].unit;
    double count = floor((double)units * 0x1p-31 * (1 - 0x1p-16));
    if (count < 2 || count < min_keep) return 0;
    double heaviest = band_heaviest(s, &bd); /* the crossing lies beyond the sure buckets */
    s->typ.pending = 1;
    s->typ.center = c;
    s->typ.err = *err;
    s->typ.fine = 0;
    s->typ.dist = bd.s_lo - 2 * err->eps; /* the draw's bracket stops there (in_typ) */
    s->typ.mass = -INFINITY;              /* ... and never takes the set's own distance */
    s->typ.far = bd.reach;                /* past it the scores lie past the crossing's */
    s->typ.w_lo = target;
    s->typ.w_hi = target + heaviest;
    return (int)count;
}

/* Typical's centre (into *c) and its bounds, from the view whose total is z (within rel). The
 * centre needs sum w d = sum_b (-b/64) W_b + sum e^d x (d = x - b/64): the second sum is the
 * pass's moments when it has them; else it is taken at the middle of its range, each token's
 * exact x lying in (-2^-6 - 2^-19, 2^-19] (d's float rounding is at most 2^-19): -2^-7 z,
 * within (2^-7 + 2^-19) Z of the exact sum (the centre within 2^-7 nat). */
static struct g3_score_err typical_centre(const gemma3_sampler *s, double z, double rel,
                                          double *c) {
    int n = s->n_vocab;
    double below = 0;
    for (int b = 0; b < G3_VIEW_BUCKETS - 1; b++)
        below += (double)b / G3_VIEW_PER_NAT * s->view_w[b];
    double s1 = s->view_has_moments ? s->view_moment - below : -below - 0x1p-7 * z;
    /* each token's e^d x is within G3_VIEW_MOMENT_ERR e^d of the exact, their float sums
     * within G3_VIEW_MOMENT_SUM_ERR Z (or the middle's bound; z within rel of the exact
     * total), the last bucket's, left out, below 2^-41 each, and the two double sums round by
     * (n + G3_VIEW_BUCKETS) 2^-53 of theirs */
    double x_err = s->view_has_moments ? 1.01 * (G3_VIEW_MOMENT_ERR + G3_VIEW_MOMENT_SUM_ERR)
                                       : 0x1p-7 + 0x1p-18;
    double s1_err = x_err + (n + G3_VIEW_BUCKETS) * 0x1p-53 * (fabs(s1 / z) + 1) + n * 0x1p-41 / z;
    return typical_bounds(n, s->view_lmax, z, rel, s1, s1_err, c);
}

int g3_rank_typical(gemma3_sampler *s, float lmax, float tp, int min_keep, int defer) {
    s->typ.pending = 0;
    int open = s->view_open & G3_VIEW_OPEN_TYPICAL_SET;
    defer = open ? G3_TYPICAL_NOW : defer;
    /* the Gumbel draw's pending set takes its centre from the bucket sums: no moments */
    if (!view_ensure(s, lmax, defer != G3_TYPICAL_DEFER_GUMBEL)) return 0;
    int n = s->n_vocab;
    double rel, z = view_total(s, &rel), c;
    double target = (double)tp * z, margin = dist_margin(z, rel, n);
    struct g3_score_err err = typical_centre(s, z, rel, &c);
    if (defer != G3_TYPICAL_NOW) {
        int count = typical_defer(s, c, &err, target, margin, min_keep);
        if (count > 0) return count;
        if (!s->view_has_moments) { /* the crossing needs the centre the moments give */
            view_ensure(s, lmax, 1);
            err = typical_centre(s, z, rel, &c);
        }
    }
    struct walk_weights coarse = {s->view_w, 0, rel, 0};
    struct dist_walk r;
    int found = open ? WALK_NEAR_SUM : walk_dist(s, c, &err, &coarse, target, margin, 0, &r);
    int fine = finer_could_tell(found), close = found == WALK_CLOSE_SCORES;
    if (fine) found = typical_walk_fine(s, tp, &c, &err, &r);
    G3_STAT(s, typ_fine_close, close && found == WALK_FOUND);
    if (found != WALK_FOUND || r.count < min_keep) return 0;
    typical_keep(s, c, &err, &r, fine);
    return r.count;
}

int g3_rank_typical_resolve(gemma3_sampler *s) {
    G3_STAT(s, typ_resolved, 1);
    int count = g3_rank_typical(s, s->view_lmax, s->p.typical_p, s->p.min_keep, G3_TYPICAL_NOW);
    if (count < 2) return 0;
    s->n_cand = count;
    return count;
}

int32_t g3_rank_typical_first(gemma3_sampler *s) {
    /* every token of the set has l <= max(l_b, c + dist) (the next double up covers the
     * rounding of the sum), so its bucket is that of the float at or above, or a later one */
    double edge = fmax((double)s->typ.l_b, nextafter(s->typ.center + s->typ.dist, INFINITY));
    float lmax = s->view_lmax, top = (float)edge;
    if ((double)top < edge) top = nextafterf(top, INFINITY);
    for (int b = edge >= lmax ? 0 : g3_view_bucket(top, lmax); b < G3_VIEW_BUCKETS - 1; b++) {
        if (s->view_sum[b].unit == 0) continue; /* an empty bucket: every unit is positive */
        int ne = bucket_sorted(s, b, NULL);
        for (int i = 0; i < ne; i++) /* in the total order: the first of the set is its top */
            if (g3_typ_contains(s, s->logits[s->pos_edge[i]], s->pos_edge[i]))
                return s->pos_edge[i];
    }
    return -1;
}

/* The draw over a pending set: the walk to u W for every weight W the set may have, from the
 * middle of (w_lo, w_hi] with the margin widened by half its width and W's own roundings, over
 * tokens nearer than the distance the set surely holds. */
static int32_t draw_pending(gemma3_sampler *s, double u) {
    int n = s->n_vocab;
    struct walk_weights coarse = {s->view_w, 0, view_rel(n), 0};
    double w_lo = s->typ.w_lo, w_hi = s->typ.w_hi;
    double margin = dist_margin(w_hi, coarse.rel, n) +
                    u * (0.5 * (w_hi - w_lo) + (n + 8) * 0x1p-53 * w_hi);
    struct dist_walk r;
    if (walk_dist(s, s->typ.center, &s->typ.err, &coarse, u * (0.5 * (w_lo + w_hi)), margin, 1,
                  &r) != WALK_FOUND)
        return -1;
    G3_STAT(s, typ_pending_draws, 1);
    return r.tok;
}

/* The exact draw sums e^(l - its max) over the set, rounded, in order, and scales u by that
 * sum: the walk by distance to u times the set's mass, in the view's weights or, where the
 * view leaves the walk open, the fine tier's (the set taken again in them, which must end at
 * the same token). */
int32_t g3_rank_draw_typical(gemma3_sampler *s, double u) {
    if (!s->logits_state.view) return -1;
    int n = s->n_vocab;
    struct dist_walk r;
    if (s->typ.pending) { /* the draw's walk from the bracket, else the set's crossing first */
        int32_t tok = s->view_open & G3_VIEW_OPEN_TYPICAL_DRAW ? -1 : draw_pending(s, u);
        if (tok >= 0 || !g3_rank_typical_resolve(s)) return tok;
    }
    if (!s->typ.fine) {
        struct walk_weights coarse = {s->view_w, 0, view_rel(n), 0};
        double w = s->typ.mass, c;
        int found = s->view_open & G3_VIEW_OPEN_TYPICAL_DRAW ? WALK_NEAR_SUM
                                          : walk_dist(s, s->typ.center, &s->typ.err, &coarse,
                                                      u * w, dist_margin(w, coarse.rel, n), 1, &r);
        if (!finer_could_tell(found)) return found == WALK_FOUND ? r.tok : -1;
        struct g3_score_err err;
        if (typical_walk_fine(s, s->p.typical_p, &c, &err, &r) != WALK_FOUND ||
            r.tok != s->typ.id_b)
            return -1;
        typical_keep(s, c, &err, &r, 1);
    }
    double z;
    struct walk_weights fine = fine_weights(s, &z);
    double w = s->typ.mass;
    if (walk_dist(s, s->typ.center, &s->typ.err, &fine, u * w, dist_margin(w, fine.rel, n), 1,
                  &r) != WALK_FOUND)
        return -1;
    return r.tok;
}
