/* sampling/candidates.c - the candidate-list machinery under the samplers (candidates.h):
 * maxima and normalisers in id order, heap selection and radix sort for the sort path, and
 * sorting-free radix selection for the Gumbel path. */
#include "sampling/candidates.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ================================ the sort path ============================================= */

/* An implicit list (a window, else typical's set) written out in id order: one branch-free
 * pass over the vocabulary. */
static void write_out_in_id_order(gemma3_sampler *s) {
    const float *l = s->logits;
    int m = 0;
    for (int32_t j = 0; j < s->n_vocab; j++) {
        s->cand[m] = j;
        m += g3_implicit_contains(s, l[j], j);
    }
    s->form = G3_LIST_IDS;
    s->n_cand = m;
    s->id_order = 1;
    s->sorted = m <= 1;
}

void g3_cand_materialise(gemma3_sampler *s) {
    if (s->form == G3_LIST_WINDOW) { /* a window is sorted, typical's set is not (candidates.h) */
        s->edge_bucket = -1; /* the window's bucket cache may be overwritten from here on */
        write_out_in_id_order(s);
        g3_cand_ensure_sorted(s);
        return;
    }
    if (s->form == G3_LIST_TYPICAL) {
        write_out_in_id_order(s);
        return;
    }
    if (s->form != G3_LIST_VOCAB) return;
    memcpy(s->cand, s->iota, (size_t)s->n_vocab * sizeof *s->cand);
    s->form = G3_LIST_IDS;
}

static void window_on(gemma3_sampler *s, int32_t first, int count) {
    s->form = G3_LIST_WINDOW;
    s->win.first = first;
    s->n_cand = count;
    s->sorted = 1;
    s->id_order = count <= 1;
}

void g3_cand_window_prefix(gemma3_sampler *s, int32_t first, int32_t last, int count) {
    s->win.has_hi = 0;
    s->win.has_lo = 1;
    s->win.lo_l = s->logits[last];
    s->win.lo_id = last;
    s->win.vocab_max = s->logits[first];
    window_on(s, first, count);
}

void g3_cand_window_after(gemma3_sampler *s, float lmax, int32_t dropped, int32_t first,
                          int count) {
    s->win.has_hi = dropped >= 0;
    s->win.vocab_max = lmax;
    s->win.has_lo = 0;
    s->win.hi_l = dropped >= 0 ? s->logits[dropped] : INFINITY;
    s->win.hi_id = dropped;
    window_on(s, first, count);
}

float g3_cand_max(const gemma3_sampler *s) {
    if (s->form == G3_LIST_WINDOW) return s->logits[s->win.first];
    if (s->form == G3_LIST_TYPICAL) return s->logits[s->typ.first]; /* Gumbel mode: known */
    if (s->sorted) return s->logits[s->cand[0]];
    const float *l = s->logits;
    float m = -INFINITY;
    int n = s->n_cand, j = 0;
    if (s->id_order && n == s->n_vocab) {
        /* the list is 0..n-1: the maximum the dividing copy or the check found on its way
         * when nothing has written since, else 16 lanes, vectorised (g3_max_n_get: the same
         * value) */
        if (g3_logits_max_known(s)) return s->logits_state.max;
        return s->max_n(l, n);
    }
    const int32_t *c = s->form == G3_LIST_VOCAB ? s->iota : s->cand;
    for (; j < n; j++) m = l[c[j]] > m ? l[c[j]] : m;
    return m;
}

/* LSD radix sort of non-negative ids, 11-bit digits, as many passes as the largest id needs. */
void g3_radix_sort_ids(int32_t *ids, int32_t *tmp, int n) {
    uint32_t cnt[2048], top = 0;
    for (int j = 0; j < n; j++) top |= (uint32_t)ids[j];
    for (int sh = 0; sh < 32 && (top >> sh) != 0; sh += 11) {
        memset(cnt, 0, sizeof cnt);
        for (int j = 0; j < n; j++) cnt[((uint32_t)ids[j] >> sh) & 2047]++;
        uint32_t sum = 0;
        for (int b = 0; b < 2048; b++) {
            uint32_t c = cnt[b];
            cnt[b] = sum;
            sum += c;
        }
        for (int j = 0; j < n; j++) tmp[cnt[((uint32_t)ids[j] >> sh) & 2047]++] = ids[j];
        memcpy(ids, tmp, (size_t)n * sizeof *ids);
    }
}

/* The candidate ids in ascending order, for order-independent sums (sampling/candidates.h). */
const int32_t *g3_cand_ids_ascending(gemma3_sampler *s) {
    if (s->form == G3_LIST_VOCAB || s->n_cand == s->n_vocab) return s->iota; /* every id once */
    if (s->id_order) return s->cand;
    memcpy(s->ids_tmp2, s->cand, (size_t)s->n_cand * sizeof *s->cand);
    if (s->n_cand < 64) { /* insertion sort beats the radix passes on a few ids */
        int32_t *a = s->ids_tmp2;
        for (int i = 1; i < s->n_cand; i++) {
            int32_t v = a[i];
            int j = i;
            for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
            a[j] = v;
        }
    } else {
        g3_radix_sort_ids(s->ids_tmp2, s->ids_tmp, s->n_cand);
    }
    return s->ids_tmp2;
}

/* Softmax normaliser over the candidates: Z = sum exp(l - lmax) in double, id order. */
double g3_cand_z(gemma3_sampler *s, float lmax) {
    const int32_t *ids = g3_cand_ids_ascending(s);
    double z = 0;
    for (int j = 0; j < s->n_cand; j++) z += exp((double)s->logits[ids[j]] - lmax);
    return z;
}

/* Heap selection: writes the top m candidates (m <= n_cand) in the total order to ids_tmp,
 * sorted, leaving the list untouched. O(n log m); a heap whose root is the worst kept id. */
static void sift_down(const float *l, int32_t *h, int n, int i) {
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && g3_cand_before(l, h[c], h[c + 1])) c++; /* the worse child */
        if (!g3_cand_before(l, h[i], h[c])) return;
        int32_t t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* A heap of m ids (root: the worst) into the total order: the worst repeatedly to the back. */
static void heap_sort_out(const float *l, int32_t *h, int m) {
    for (int end = m - 1; end > 0; end--) {
        int32_t t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(l, h, end, 0);
    }
}

int g3_cand_select_top(gemma3_sampler *s, int m) {
    const float *l = s->logits;
    int32_t *h = s->ids_tmp;
    const int32_t *c = s->form == G3_LIST_VOCAB ? s->iota : s->cand;
    int n = s->n_cand;
    int full = s->id_order && n == s->n_vocab;
    uint32_t bad = 0;
    for (int j = 0; j < m; j++) {
        h[j] = c[j];
        bad |= full && g3_non_finite(l[c[j]]);
    }
    for (int i = m / 2 - 1; i >= 0; i--) sift_down(l, h, m, i);
    float worst = l[h[0]];
    int j = m;
    if (full) { /* the list is 0..n-1: skip blocks with nothing >= worst (g3_block_scan) */
        for (;; j += 16) {
            j = s->block_scan(l, j, n, worst, &bad);
            if (j + 16 > n) break;
            for (int k = j; k < j + 16; k++) {
                if (l[k] < worst || !g3_cand_before(l, k, h[0])) continue;
                h[0] = k;
                sift_down(l, h, m, 0);
                worst = l[h[0]];
            }
        }
    }
    for (; j < n; j++) {
        bad |= full && g3_non_finite(l[c[j]]);
        if (l[c[j]] < worst) continue; /* fast reject: most of the vocabulary */
        if (!g3_cand_before(l, c[j], h[0])) continue;
        h[0] = c[j];
        sift_down(l, h, m, 0);
        worst = l[h[0]];
    }
    heap_sort_out(l, h, m);
    return bad != 0;
}

/* The positions of l[0..n) (NaN-free) that can hold one of the first m tokens of the total
 * order, ascending, into sub; returns how many (at least m). Bound: split [0, n) into m
 * contiguous groups; their maxima are the values of m distinct tokens, so at least m values
 * reach theta, the smallest group maximum: the m-th largest value is >= theta, and so is every
 * one of the first m tokens. One vectorised pass for the maxima, one block scan (skipping the
 * blocks of 16 with nothing >= theta) to collect. */
int g3_positions_reaching(const gemma3_sampler *s, const float *l, int n, int m, int32_t *sub) {
    float theta = INFINITY;
    for (int g = 0; g < m; g++) {
        int a = (int)((int64_t)n * g / m), b = (int)((int64_t)n * (g + 1) / m);
        float gm = s->max_n(l + a, b - a);
        theta = gm < theta ? gm : theta;
    }
    uint32_t bad = 0; /* not asked: checked logits */
    int nsub = 0, j = 0;
    for (;; j += 16) {
        j = s->block_scan(l, j, n, theta, &bad);
        if (j + 16 > n) break;
        for (int k = j; k < j + 16; k++)
            if (l[k] >= theta) sub[nsub++] = k;
    }
    for (; j < n; j++)
        if (l[j] >= theta) sub[nsub++] = j;
    return nsub;
}

/* g3_cand_select_top for checked logits (no NaN or +-inf, so no flag to return): the same
 * answer, the top m in the total order, sorted, in ids_tmp. Over a whole vocabulary and for m up
 * to n/64 the heap only sees the positions that g3_positions_reaching keeps (the first m among
 * them), so that it does not fill from the vocabulary's first m tokens and re-sift a few
 * thousand times on its way to the top. Mirostat v1's selections (its top 100, then its top
 * k). */
void g3_cand_select_top_checked(gemma3_sampler *s, int m) {
    int n = s->n_cand;
    if (!(s->id_order && n == s->n_vocab && m >= 1 && m <= n / 64)) {
        g3_cand_select_top(s, m);
        return;
    }
    int32_t *sub = s->pos_sub;
    int nsub = g3_positions_reaching(s, s->logits, n, m, sub); /* positions are ids: 0..n-1 */
    const float *l = s->logits;
    int32_t *h = s->ids_tmp;
    memcpy(h, sub, (size_t)m * sizeof *h);
    for (int i = m / 2 - 1; i >= 0; i--) sift_down(l, h, m, i);
    float worst = l[h[0]];
    for (int j = m; j < nsub; j++) {
        if (l[sub[j]] < worst || !g3_cand_before(l, sub[j], h[0])) continue;
        h[0] = sub[j];
        sift_down(l, h, m, 0);
        worst = l[h[0]];
    }
    heap_sort_out(l, h, m);
}

void g3_cand_keep_selected(gemma3_sampler *s, int m) {
    memcpy(s->cand, s->ids_tmp, (size_t)m * sizeof *s->cand);
    s->form = G3_LIST_IDS;
    s->n_cand = m;
    s->sorted = 1;
    s->id_order = (m <= 1);
}

/* Sorts the whole list into the total order: a stable LSD radix sort (3 passes of 11 bits) on
 * the inverted float keys of a list in ascending id order, so equal logits stay in id order. */
void g3_sort_ids_total(const float *l, int32_t *ids, int n, int32_t *ids_tmp, uint32_t *keys,
                       uint32_t *keys_tmp) {
    if (n <= 64) {
        for (int i = 1; i < n; i++) {
            int32_t v = ids[i];
            int j = i;
            for (; j > 0 && g3_cand_before(l, v, ids[j - 1]); j--) ids[j] = ids[j - 1];
            ids[j] = v;
        }
        return;
    }
    uint32_t *k = keys, *kt = keys_tmp;
    int32_t *c = ids, *ct = ids_tmp;
    for (int j = 0; j < n; j++) k[j] = ~g3_float_key(l[c[j]]);
    uint32_t cnt[2048];
    for (int sh = 0; sh < 32; sh += 11) {
        memset(cnt, 0, sizeof cnt);
        for (int j = 0; j < n; j++) cnt[(k[j] >> sh) & 2047]++;
        uint32_t sum = 0;
        for (int b = 0; b < 2048; b++) {
            uint32_t t = cnt[b];
            cnt[b] = sum;
            sum += t;
        }
        for (int j = 0; j < n; j++) {
            uint32_t d = cnt[(k[j] >> sh) & 2047]++;
            kt[d] = k[j];
            ct[d] = c[j];
        }
        uint32_t *tk = k;
        k = kt;
        kt = tk;
        int32_t *tc = c;
        c = ct;
        ct = tc;
    }
    if (c != ids) memcpy(ids, c, (size_t)n * sizeof *c); /* odd pass count */
}

void g3_cand_sort(gemma3_sampler *s) {
    int n = s->n_cand;
    if (!s->id_order) g3_radix_sort_ids(s->cand, s->ids_tmp, n);
    g3_sort_ids_total(s->logits, s->cand, n, s->ids_tmp, s->keys, s->keys_tmp);
    s->sorted = 1;
    s->id_order = n <= 1;
}

void g3_cand_ensure_sorted(gemma3_sampler *s) {
    if (s->sorted || s->n_cand == 0) return;
    if (s->n_cand > 512) {
        g3_cand_sort(s);
        return;
    }
    g3_cand_select_top(s, s->n_cand);
    g3_cand_keep_selected(s, s->n_cand);
}

/* ================================ radix selection (Gumbel path) ============================= */

/* The list to read: iota while it is implicit (g3_cand_materialise). */
static const int32_t *cand_src(const gemma3_sampler *s) {
    return s->form == G3_LIST_VOCAB ? s->iota : s->cand;
}

/* Digit layout of a radix pass sequence: 11/11/10 bits for large inputs, 8/8/8/8 bits for small
 * ones (where clearing and walking 2048 buckets would cost more than the keys). */
struct digits {
    int passes;
    int shift[4];
    uint32_t mask[4];
};
static const struct digits digits_large = {3, {21, 10, 0, 0}, {2047, 2047, 1023, 0}};
static const struct digits digits_small = {4, {24, 16, 8, 0}, {255, 255, 255, 255}};
static const struct digits *digits_for(int n) { return n > 4096 ? &digits_large : &digits_small; }

/* Among keys[0..n), finds the r-th largest key t (1 <= r <= n) by three histogram passes over
 * 11/11/10-bit digits, each on the survivors of the last; *n_above = how many keys exceed t.
 * tmp [n] is scratch. */
static uint32_t radix_select(gemma3_sampler *s, const uint32_t *keys, int n, int r, uint32_t *tmp,
                             int *n_above) {
    const struct digits *dg = digits_for(n);
    uint32_t *hist = s->hist_bins;
    uint32_t prefix = 0;
    int above = 0;
    const uint32_t *src = keys;
    for (int pass = 0; pass < dg->passes; pass++) {
        int sh = dg->shift[pass];
        uint32_t mk = dg->mask[pass];
        memset(hist, 0, (mk + 1) * sizeof *hist);
        for (int i = 0; i < n; i++) hist[(src[i] >> sh) & mk]++;
        uint32_t b = mk;
        int cum = 0;
        for (;; b--) {
            if (cum + (int)hist[b] >= r) break;
            cum += (int)hist[b];
        }
        above += cum;
        r -= cum;
        prefix |= b << sh;
        if (pass < dg->passes - 1) {
            int m = 0;
            for (int i = 0; i < n; i++)
                if (((src[i] >> sh) & mk) == b) tmp[m++] = src[i];
            src = tmp;
            n = m;
        }
    }
    *n_above = above;
    return prefix;
}

/* The same walk weighted by fixed-point mass: finds the key t of the token where the inclusive
 * mass, walking the total order, first reaches target (1 <= target <= total mass). Returns t and
 * the count and mass of keys above t. */
static uint32_t radix_select_mass(gemma3_sampler *s, const uint32_t *keys, const uint64_t *mass,
                                  int n, uint64_t target, uint32_t *tmp, uint64_t *tmp_mass,
                                  int *n_above, uint64_t *mass_above) {
    const struct digits *dg = digits_for(n);
    uint32_t *hist = s->hist_bins;
    uint64_t *hm = s->hist_mass;
    uint32_t prefix = 0;
    int above = 0;
    uint64_t above_m = 0;
    const uint32_t *src = keys;
    const uint64_t *srcm = mass;
    for (int pass = 0; pass < dg->passes; pass++) {
        int sh = dg->shift[pass];
        uint32_t mk = dg->mask[pass];
        memset(hist, 0, (mk + 1) * sizeof *hist);
        memset(hm, 0, (mk + 1) * sizeof *hm);
        for (int i = 0; i < n; i++) {
            uint32_t d = (src[i] >> sh) & mk;
            hist[d]++;
            hm[d] += srcm[i];
        }
        uint32_t b = mk;
        int cum = 0;
        uint64_t cum_m = 0;
        for (;; b--) {
            if (cum_m + hm[b] >= target) break;
            cum += (int)hist[b];
            cum_m += hm[b];
        }
        above += cum;
        above_m += cum_m;
        target -= cum_m;
        prefix |= b << sh;
        if (pass < dg->passes - 1) {
            int m = 0;
            for (int i = 0; i < n; i++)
                if (((src[i] >> sh) & mk) == b) {
                    tmp[m] = src[i];
                    tmp_mass[m] = srcm[i];
                    m++;
                }
            src = tmp;
            srcm = tmp_mass;
            n = m;
        }
    }
    *n_above = above;
    *mass_above = above_m;
    return prefix;
}

/* Positions of the list that can hold one of the first `count` tokens of the total order, into
 * sub in list order; returns how many. For a small count over the whole vocabulary, the list is
 * split into B = n/16 interleaved blocks of 16 (block b = {b, b + B, ..., b + 15B}): the count-th
 * largest block maximum theta is a lower bound of the count-th largest value (count distinct
 * values reach it), so only blocks whose maximum reaches theta can hold survivors. The block
 * maxima are one vectorisable pass; theta is one radix selection over B keys. Otherwise every
 * position can matter. */
static int candidate_positions(gemma3_sampler *s, int by_mass, int count, int32_t *sub) {
    int n = s->n_cand;
    int B = n / 16;
    if (by_mass || !s->id_order || n != s->n_vocab || count > B / 4) {
        for (int j = 0; j < n; j++) sub[j] = j;
        return n;
    }
    const float *l = s->logits;
    float *bm = (float *)s->sel_keys2; /* [B] */
    memcpy(bm, l, (size_t)B * sizeof *bm);
    for (int r = 1; r < 16; r++) {
        const float *row = l + (size_t)r * B;
        int b = 0;
        for (; b + 16 <= B; b += 16) /* fixed-size inner loop: vectorised at -O2 */
            for (int k = 0; k < 16; k++)
                bm[b + k] = row[b + k] > bm[b + k] ? row[b + k] : bm[b + k];
        for (; b < B; b++) bm[b] = row[b] > bm[b] ? row[b] : bm[b];
    }
    uint32_t *bk = s->sel_keys;
    for (int b = 0; b < B; b++) bk[b] = g3_float_key(bm[b]);
    int dummy;
    uint32_t theta_key = radix_select(s, bk, B, count, s->keys_tmp, &dummy);
    int nsub = 0;
    for (int b = 0; b < B; b++) {
        if (bk[b] < theta_key) continue;
        for (int r = 0; r < 16; r++) {
            int j = r * B + b;
            if (g3_float_key(l[j]) >= theta_key) sub[nsub++] = j;
        }
    }
    for (int j = 16 * B; j < n; j++) sub[nsub++] = j; /* the ragged tail, unfiltered */
    g3_radix_sort_ids(sub, s->tie_ids, nsub);         /* positions in list order */
    return nsub;
}

/* Computes the float key of every position in sub (into s->keys, by position) and its bucket
 * (into s->keys_tmp, by position): RADIX_BUCKETS buckets linear in the logit between the
 * smallest and largest finite one (a monotone map, -inf in bucket 0, equal logits in one
 * bucket), so that the logits, not their float exponents, spread over the buckets. Then walks
 * the buckets from the top to the boundary bucket: the one where the count reaches `count` (or
 * the mass reaches `target`). Returns it; *above and *above_m get the count and mass of the
 * buckets above it. */
static uint32_t boundary_bucket(gemma3_sampler *s, const int32_t *sub, int nsub, int by_mass,
                                int count, uint64_t target, int *above, uint64_t *above_m) {
    const uint32_t top_bucket = RADIX_BUCKETS - 1;
    uint32_t *keys = s->keys, *bucket = s->keys_tmp, *hist = s->hist_bins;
    uint64_t *hm = s->hist_mass;
    const float *l = s->logits;
    const int32_t *c = cand_src(s);
    float lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < nsub; r++) {
        int j = sub[r];
        float v = l[c[j]];
        keys[j] = g3_float_key(v);
        if (v != -INFINITY) {
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
    }
    double scale = hi > lo ? (double)top_bucket / ((double)hi - (double)lo) : 0;
    memset(hist, 0, RADIX_BUCKETS * sizeof *hist);
    if (by_mass) memset(hm, 0, RADIX_BUCKETS * sizeof *hm);
    for (int r = 0; r < nsub; r++) {
        int j = sub[r];
        double x = ((double)l[c[j]] - (double)lo) * scale; /* -inf for a ban */
        uint32_t b = !(x > 0) ? 0 : x < (double)top_bucket ? (uint32_t)x : top_bucket;
        bucket[j] = b;
        hist[b]++;
        if (by_mass) hm[b] += s->mass[j];
    }
    uint32_t b = top_bucket;
    *above = 0;
    *above_m = 0;
    for (;; b--) {
        if (by_mass ? *above_m + hm[b] >= target : *above + (int)hist[b] >= count) break;
        *above += (int)hist[b];
        if (by_mass) *above_m += hm[b];
    }
    return b;
}

/* Splits the positions of sub by their bucket: above the boundary bucket b into s->pos_above,
 * in it into s->pos_edge (both in list order; the rest cannot survive). The edge keys go to
 * s->sel_keys. */
static void split_at_bucket(gemma3_sampler *s, const int32_t *sub, int nsub, uint32_t b,
                            int *n_above, int *n_edge) {
    int na = 0, ne = 0;
    const uint32_t *bucket = s->keys_tmp;
    for (int r = 0; r < nsub; r++) { /* branch-free: which list a position joins is random */
        int j = sub[r];
        s->pos_above[na] = j;
        s->pos_edge[ne] = j;
        na += bucket[j] > b;
        ne += bucket[j] == b;
    }
    for (int r = 0; r < ne; r++) s->sel_keys[r] = s->keys[s->pos_edge[r]];
    *n_above = na;
    *n_edge = ne;
}

/* Top-p's boundary inside the edge bucket: the key t of the token where the mass, walking the
 * total order, reaches `target` (what is left of it after the buckets above). *above grows by
 * the edge keys above t; *ties gets how many tokens of key t the prefix takes (equal keys have
 * equal masses, so it is a division). */
static uint32_t mass_boundary(gemma3_sampler *s, int ne, uint64_t target, int *above, int *ties) {
    const uint32_t *ek = s->sel_keys;
    uint64_t *em = s->sel_mass;
    for (int r = 0; r < ne; r++) em[r] = s->mass[s->pos_edge[r]];
    int above2;
    uint64_t above2_m;
    uint32_t t = radix_select_mass(s, ek, em, ne, target, s->keys_tmp, s->mass_tmp, &above2,
                                   &above2_m);
    uint64_t rem = target - above2_m, qt = 0;
    for (int r = 0; r < ne && qt == 0; r++)
        if (ek[r] == t) qt = em[r]; /* equal keys, equal masses; > 0 at the crossing */
    *ties = (int)((rem + qt - 1) / qt);
    *above += above2;
    return t;
}

/* Of the edge tokens whose key is t, the `ties` smallest ids win: returns the largest id that
 * does (INT32_MAX when all of them do), by one more selection on ~id. */
static int32_t tie_id_limit(gemma3_sampler *s, int ne, uint32_t t, int ties) {
    int nt = 0;
    for (int r = 0; r < ne; r++)
        if (s->sel_keys[r] == t) s->tie_ids[nt++] = cand_src(s)[s->pos_edge[r]];
    if (ties >= nt) return INT32_MAX;
    for (int r = 0; r < nt; r++) s->sel_keys2[r] = ~(uint32_t)s->tie_ids[r];
    int dummy;
    return (int32_t)~radix_select(s, s->sel_keys2, nt, ties, s->keys_tmp, &dummy);
}

/* Keeps every position above the boundary bucket and the edge positions whose key beats t (or
 * equals it with an id <= id_limit): a merge of the two increasing position lists, in place
 * since positions >= outputs (or from iota when the list is implicit). The list keeps its
 * order. */
static void keep_selected(gemma3_sampler *s, int na, int ne, uint32_t t, int32_t id_limit) {
    const int32_t *c = cand_src(s);
    int32_t *out = s->cand;
    const uint32_t *keys = s->keys;
    int m = 0, ia = 0, ie = 0;
    while (ia < na || ie < ne) {
        if (ie == ne || (ia < na && s->pos_above[ia] < s->pos_edge[ie])) {
            out[m++] = c[s->pos_above[ia++]];
        } else {
            int j = s->pos_edge[ie++];
            if (keys[j] > t || (keys[j] == t && c[j] <= id_limit)) out[m++] = c[j];
        }
    }
    s->form = G3_LIST_IDS;
    s->n_cand = m;
    s->sorted = s->sorted || m <= 1;
}

int g3_cand_mass_prefix(gemma3_sampler *s, float lmax, uint64_t target, int32_t *last) {
    const float *l = s->logits;
    const uint64_t *q = s->mass;
    int n = s->n_vocab;
    const float scale = (float)(RADIX_BUCKETS - 1) / 29.5f;
    const uint16_t none = 0xffff; /* no mass: in no bucket the scan below lists or counts */
    uint16_t *bucket = (uint16_t *)s->keys_tmp; /* [n] */
    uint64_t *hm = s->hist_mass;
    memset(hm, 0, RADIX_BUCKETS * sizeof *hm);
    for (int j = 0; j < n; j++) {
        float x = (lmax - l[j]) * scale; /* monotone in l; < RADIX_BUCKETS - 1 where q > 0 */
        int b = x < (float)(RADIX_BUCKETS - 1) ? (int)x : RADIX_BUCKETS - 1;
        bucket[j] = q[j] ? (uint16_t)b : none;
        hm[b] += q[j];
    }
    int b = 0;
    uint64_t above_m = 0;
    for (; above_m + hm[b] < target; b++) above_m += hm[b]; /* target <= the total: it stops */
    /* the bucket's tokens, and how many of positive mass lie in the buckets before it */
    int32_t *e = s->tie_ids, above;
    int ne = s->band_scan(bucket, n, b, b, 0, b - 1, e, &above);
    for (int i = ne / 2 - 1; i >= 0; i--) sift_down(l, e, ne, i); /* heap sort: total order */
    heap_sort_out(l, e, ne);
    int take = 0; /* above_m < target: the bucket's first token at least */
    for (uint64_t cum = above_m; cum < target; take++) cum += q[e[take]];
    *last = e[take - 1];
    return above + take;
}

void g3_cand_select_first(gemma3_sampler *s, int by_mass, int count, uint64_t target,
                          int min_count) {
    int32_t *sub = s->pos_sub;
    int nsub = candidate_positions(s, by_mass, count, sub);
    int above, na, ne;
    uint64_t above_m;
    uint32_t b = boundary_bucket(s, sub, nsub, by_mass, count, target, &above, &above_m);
    split_at_bucket(s, sub, nsub, b, &na, &ne);
    uint32_t t;
    int ties;
    if (by_mass) {
        t = mass_boundary(s, ne, target - above_m, &above, &ties);
        if (above + ties < min_count) { /* the min_keep floor: a longer prefix, i.e. top-k */
            if (min_count < s->n_cand) g3_cand_select_first(s, 0, min_count, 0, 0);
            return;
        }
    } else {
        int above2;
        t = radix_select(s, s->sel_keys, ne, count - above, s->keys_tmp, &above2);
        above += above2;
        ties = count - above;
    }
    keep_selected(s, na, ne, t, tie_id_limit(s, ne, t, ties));
}

/* The first i with l[i] == lmax, the largest of the NaN-free l[0..n) (it must occur): the one
 * the pass that found the maximum saw, if it was this one over these logits, else the heap's
 * block scan (vectorised) skips the blocks of 16 with nothing >= lmax, that is without it. */
int g3_first_max(const gemma3_sampler *s, const float *l, int n, float lmax) {
    const struct g3_logits_state *ls = &s->logits_state;
    if (g3_logits_max_known(s) && l == s->logits && n == s->n_vocab && lmax == ls->max)
        return ls->max_first;
    uint32_t bad = 0; /* not asked: the draw's logits are checked */
    int j = s->block_scan(l, 0, n, lmax, &bad);
    while (l[j] != lmax) j++;
    return j;
}

double g3_cand_entropy(gemma3_sampler *s, float lmax, double z) {
    const int32_t *ids = g3_cand_ids_ascending(s);
    double h = 0;
    for (int j = 0; j < s->n_cand; j++) {
        double pj = exp((double)s->logits[ids[j]] - lmax) / z;
        if (pj > 0) h -= pj * log(pj);
    }
    return h;
}

enum { GUMBEL_HEAP_MAX_K = 1024 };

/* Top-k: the first k of the total order, exactly k (ties at the k-th value go to lower ids). */
void g3_cand_top_k(gemma3_sampler *s, int k) {
    if (k <= 0 || k >= s->n_cand) return;
    if (s->sorted) {
        s->n_cand = k;
        return;
    }
    if (g3_gumbel_mode(s) && k > GUMBEL_HEAP_MAX_K && s->n_cand > 4096) {
        /* a large k without sorting; a small one (the usual 40 or 64) takes the heap below,
         * whose vectorised block skip beats the radix passes: the same set either way, and the
         * Gumbel draw does not depend on the list's order */
        g3_check_finite(s);
        g3_cand_select_first(s, 0, k, 0, 0); /* reads an implicit list straight */
    } else if (k > s->n_cand / 4 && s->n_cand > 4096) {
        g3_check_finite(s);
        g3_cand_materialise(s);
        /* the heap costs O(n log k): for a large k one O(n) radix sort of the list is cheaper */
        g3_cand_sort(s);
        s->n_cand = k;
    } else {
        /* the heap's scan is the call's first pass over the caller's logits when they are
         * unchecked: it checks them on the way, and runs again on the fixed copy if needed */
        if (g3_cand_select_top(s, k) && g3_logits_unchecked(s)) {
            g3_writable_logits(s);
            g3_cand_select_top(s, k);
        }
        g3_logits_checked(s);
        g3_cand_keep_selected(s, k);
    }
}

/* ================================ the state's transitions ====================================
 * What the working logits and the list are (sampling/state.h), changed here and by the list's
 * operations above. */

/* The NaN and +inf rules on the own copy of the whole vocabulary: NaN becomes -inf; if any
 * logit is +inf, the +inf tokens share the mass uniformly (the limit of the softmax). */
void g3_fix_non_finite(gemma3_sampler *s) {
    float *l = s->own;
    int V = s->n_vocab, n_pinf = 0;
    for (int i = 0; i < V; i++) {
        if (isnan(l[i])) l[i] = -INFINITY;
        n_pinf += l[i] == INFINITY;
    }
    if (n_pinf > 0)
        for (int i = 0; i < V; i++) l[i] = l[i] == INFINITY ? 0.0f : -INFINITY;
}

/* A call's start: the caller's vector, unchecked, nothing derived from it known. */
void g3_logits_start(gemma3_sampler *s, const float *logits) {
    s->logits = logits;
    s->logits_state.stage = G3_LOGITS_RAW;
    s->logits_state.divide = 0;
    s->logits_state.view = 0;
}

/* The rules are applied (by a pass that did not find the maximum). */
void g3_logits_checked(gemma3_sampler *s) {
    if (s->logits_state.stage == G3_LOGITS_RAW) s->logits_state.stage = G3_LOGITS_CHECKED;
}

/* A pass read every logit, checked them and found their maximum mx, first at id `first`. */
void g3_logits_max_found(gemma3_sampler *s, float mx, int first) {
    s->logits_state.stage = G3_LOGITS_MAX_KNOWN;
    s->logits_state.divide = 0;
    s->logits_state.max = mx;
    s->logits_state.max_first = first;
}

/* Temperature's division left to the Gumbel draw's pass over the caller's logits. */
void g3_logits_owe_division(gemma3_sampler *s, float t) {
    s->logits_state.stage = G3_LOGITS_RAW_DIVIDING;
    s->logits_state.divide = t;
}

/* The owed division made now, the rules first (the draw's pass met a NaN or an infinity). */
void g3_logits_pay_division(gemma3_sampler *s) {
    if (s->logits_state.stage != G3_LOGITS_RAW_DIVIDING) return;
    float t = s->logits_state.divide;
    s->logits_state.stage = G3_LOGITS_RAW;
    s->logits_state.divide = 0;
    g3_divide_logits(s, t);
}

/* The rank view was built from the logits as they are. */
void g3_logits_view_built(gemma3_sampler *s) { s->logits_state.view = 1; }

/* What was derived from the working logits (the known maximum, the rank view) is stale once
 * a sampler rewrites them: every writer of the logits calls this first. */
void g3_logits_rewritten(gemma3_sampler *s) {
    if (s->logits_state.stage == G3_LOGITS_MAX_KNOWN) s->logits_state.stage = G3_LOGITS_CHECKED;
    s->logits_state.view = 0;
}

/* The working logits, writable. A call starts on the caller's vector, read-only and unchecked
 * (prepare); the first sampler that rewrites logits (penalties, DRY, temperature) copies it
 * here, once per call, checking it on the way. A short list (after a truncation, so checked)
 * copies only its candidates' logits: from then on nothing reads the logit of a token outside
 * the list (the list only shrinks), so the stale entries of the copy are never seen. */
float *g3_writable_logits(gemma3_sampler *s) {
    g3_logits_rewritten(s);
    if (s->logits == s->own) return s->own;
    int unchecked = g3_logits_unchecked(s);
    if (!unchecked && s->form != G3_LIST_VOCAB && s->n_cand <= s->n_vocab / 8) {
        for (int j = 0; j < s->n_cand; j++) s->own[s->cand[j]] = s->logits[s->cand[j]];
        s->logits = s->own;
        return s->own;
    }
    int clean = s->copy_check(s->own, s->logits, s->n_vocab);
    s->logits = s->own;
    if (unchecked && !clean) g3_fix_non_finite(s);
    g3_logits_checked(s);
    return s->own;
}

/* Applies the NaN/+inf rules if nobody has yet: one read-only pass over the caller's logits
 * (a copy only when one of them is not finite); an owed division is made first, in a copy
 * that applies them. Every reader of the logits but top-k's heap and the Gumbel draw's
 * checking pass (which check as they scan) calls this first. */
void g3_check_finite(gemma3_sampler *s) {
    g3_logits_pay_division(s);
    if (!g3_logits_unchecked(s)) return;
    float mx;
    int first;
    if (s->check_max(s->logits, s->n_vocab, &mx, &first)) /* the maximum comes with the look */
        g3_logits_max_found(s, mx, first);
    else
        g3_writable_logits(s);
}

/* The list becomes the whole vocabulary, implicit (0..n_vocab-1, in id order). */
void g3_cand_whole_vocabulary(gemma3_sampler *s) {
    s->n_cand = s->n_vocab;
    s->form = G3_LIST_VOCAB;
    s->id_order = 1;
    s->sorted = 0;
}

/* l /= t over the candidates (vectorised when the list is the whole vocabulary). */
void g3_divide_logits(gemma3_sampler *s, float t) {
    g3_logits_rewritten(s);
    float mx;
    int first;
    if (s->logits != s->own && s->id_order && s->n_cand == s->n_vocab &&
        (s->copy_divide(s->own, s->logits, s->n_cand, t, &mx, &first) ||
         !g3_logits_unchecked(s))) {
        /* checked logits have no NaN or +inf (-inf / t is -inf); unchecked ones that are not
         * all finite take the rules first, below */
        s->logits = s->own;
        g3_logits_max_found(s, mx, first);
        return;
    }
    float *l = g3_writable_logits(s);
    if (s->id_order && s->n_cand == s->n_vocab) { /* blocks of 16 and the clamp in its own
                                                     loop (a min): both vectorise at -O2 */
        int n = s->n_cand, i = 0;
        for (; i + 16 <= n; i += 16) {
            for (int k = 0; k < 16; k++) l[i + k] /= t;
            for (int k = 0; k < 16; k++) l[i + k] = l[i + k] > FLT_MAX ? FLT_MAX : l[i + k];
        }
        for (; i < n; i++) l[i] = g3_clamp_overflow(l[i] / t);
    } else {
        for (int j = 0; j < s->n_cand; j++) l[s->cand[j]] = g3_clamp_overflow(l[s->cand[j]] / t);
    }
}
