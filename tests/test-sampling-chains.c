/* test-sampling-chains.c - every sampler alone and the chains users run, through the engine and
 * through a plain sort-everything reference kept here, on many logit vectors (ties, bans, a flat
 * distribution, one dominant token, huge and tiny temperatures, several vocabulary sizes up to
 * Gemma's 262,144): the same seed and position must give the same token, in both draw modes,
 * every time.
 *
 * The reference is the specification of docs/sampling.md written the slow way: a list of ids
 * that every truncating sampler qsorts into the total order (logit descending, id ascending),
 * sums in ascending id order, top-p on the fixed-point masses, DRY by direct suffix comparison,
 * and the CDF walk over the list in its order (which is part of the result: the same uniform
 * picks a different token from a differently ordered list). The engine's selection tricks
 * (heaps, radix selection, histograms, prefilters) must be invisible against it.
 * G3_CHAINS_VECTORS overrides the number of vectors per vocabulary size. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "sampling/test-hooks.h"

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_VECTORS 10 /* every kind of vector once per vocabulary size */
#else
#define DEFAULT_VECTORS 12
#endif
#define HIST_CAP 4096

static uint64_t rng_state;
static uint64_t next(void) { return g3_mix64(rng_state += 0x9e3779b97f4a7c15ull); }
static double unif(void) { return g3_uniform(next()); }

/* ================================ the reference ============================================= */

struct ref {
    const gemma3_sampler_params *p;
    int V;
    uint32_t seed;
    float mu;
    float *l;     /* working logits by id */
    int32_t *c;   /* the list */
    int n;        /* its length */
    int32_t *tmp; /* [V] */
    double *w;    /* [V] */
    int32_t *cnt; /* [V], all zero between uses */
    const int32_t *hist;
    int hist_len;
};

static const float *cmp_logits;
static int cmp_total(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float lx = cmp_logits[x], ly = cmp_logits[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return (x > y) - (x < y);
}
static int cmp_id(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void ref_sort(struct ref *r) {
    cmp_logits = r->l;
    qsort(r->c, (size_t)r->n, sizeof *r->c, cmp_total);
}

/* The list's ids ascending, in r->tmp. */
static const int32_t *ref_ids(struct ref *r) {
    memcpy(r->tmp, r->c, (size_t)r->n * sizeof *r->c);
    qsort(r->tmp, (size_t)r->n, sizeof *r->tmp, cmp_id);
    return r->tmp;
}

static float ref_max(const struct ref *r) {
    float m = -INFINITY;
    for (int j = 0; j < r->n; j++) m = fmaxf(m, r->l[r->c[j]]);
    return m;
}

static double ref_z(struct ref *r, float lmax) {
    const int32_t *ids = ref_ids(r);
    double z = 0;
    for (int j = 0; j < r->n; j++) z += exp((double)r->l[ids[j]] - lmax);
    return z;
}

static double ref_entropy(struct ref *r, float lmax, double z) {
    const int32_t *ids = ref_ids(r);
    double h = 0;
    for (int j = 0; j < r->n; j++) {
        double pj = exp((double)r->l[ids[j]] - lmax) / z;
        if (pj > 0) h -= pj * log(pj);
    }
    return h;
}

static void ref_top_k(struct ref *r, int k) {
    if (k <= 0 || k >= r->n) return;
    ref_sort(r);
    r->n = k;
}

static void ref_argmax(struct ref *r) {
    if (r->n <= 1) return;
    ref_sort(r);
    r->n = 1;
}

static int ref_floor(const struct ref *r) { return r->p->min_keep > 1 ? r->p->min_keep : 1; }

static uint64_t ref_mass(float l, float lmax) {
    double d = (double)l - (double)lmax;
    if (!(d >= -29.0)) return 0;
    return (uint64_t)(exp(d) * 0x1p40 + 0.5);
}

static void ref_top_p(struct ref *r, float p) {
    if (p >= 1.0f || r->n <= 1) return;
    float lmax = ref_max(r);
    if (lmax == -INFINITY) return;
    unsigned __int128 total = 0;
    for (int j = 0; j < r->n; j++) total += ref_mass(r->l[r->c[j]], lmax);
    int e;
    uint64_t mant = (uint64_t)ldexp(frexp((double)p, &e), 24);
    uint64_t target = (uint64_t)((total * mant) >> (24 - e));
    if (target == 0) {
        ref_top_k(r, ref_floor(r));
        return;
    }
    ref_sort(r);
    uint64_t cum = 0;
    int keep = r->n;
    for (int j = 0; j < r->n; j++) {
        cum += ref_mass(r->l[r->c[j]], lmax);
        if (cum >= target) {
            keep = j + 1;
            break;
        }
    }
    if (keep < ref_floor(r)) keep = ref_floor(r) < r->n ? ref_floor(r) : r->n;
    r->n = keep;
}

static void ref_filter_at_least(struct ref *r, double thr) {
    int m = 0;
    for (int j = 0; j < r->n; j++)
        if ((double)r->l[r->c[j]] >= thr) r->c[m++] = r->c[j];
    r->n = m;
}

static void ref_min_p(struct ref *r, float mp) {
    if (mp <= 0.0f || r->n <= 1) return;
    float lmax = ref_max(r);
    if (lmax == -INFINITY) return;
    double thr = (double)lmax + log((double)mp);
    int kept = 0;
    for (int j = 0; j < r->n; j++) kept += (double)r->l[r->c[j]] >= thr;
    if (kept < ref_floor(r)) {
        ref_top_k(r, ref_floor(r));
        return;
    }
    ref_filter_at_least(r, thr);
}

/* Epsilon (eta_rule 0) and eta (1), transformers' warpers: keep p >= epsilon, or p >= min(eta,
 * sqrt(eta) e^-H), H the entropy in id order; at least the floor (as min-p). */
static void ref_cutoff(struct ref *r, int eta_rule) {
    float eps = eta_rule ? r->p->eta_cutoff : r->p->epsilon_cutoff;
    if (eps <= 0.0f || r->n <= 1) return;
    float lmax = ref_max(r);
    if (lmax == -INFINITY) return;
    double z = ref_z(r, lmax), cut = eps;
    if (eta_rule) cut = fmin(eps, sqrt(eps) * exp(-ref_entropy(r, lmax, z)));
    int kept = 0, m = 0;
    for (int j = 0; j < r->n; j++) kept += exp((double)r->l[r->c[j]] - lmax) / z >= cut;
    if (kept < ref_floor(r)) {
        ref_top_k(r, ref_floor(r));
        return;
    }
    for (int j = 0; j < r->n; j++)
        if (exp((double)r->l[r->c[j]] - lmax) / z >= cut) r->c[m++] = r->c[j];
    r->n = m;
}

static void ref_top_n_sigma(struct ref *r, float nsig) {
    if (nsig <= 0.0f || r->n <= 1) return;
    const int32_t *ids = ref_ids(r);
    double sum = 0, lmax = -INFINITY, var = 0;
    int nf = 0;
    for (int j = 0; j < r->n; j++) {
        float l = r->l[ids[j]];
        if (l == -INFINITY) continue;
        sum += l;
        nf++;
        lmax = l > lmax ? l : lmax;
    }
    if (nf == 0) return;
    double mean = sum / nf;
    for (int j = 0; j < r->n; j++) {
        float l = r->l[ids[j]];
        if (l != -INFINITY) var += ((double)l - mean) * ((double)l - mean);
    }
    ref_filter_at_least(r, lmax - (double)nsig * sqrt(var / nf));
}

static const double *cmp_scores;
static int cmp_score(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (cmp_scores[x] != cmp_scores[y]) return cmp_scores[x] < cmp_scores[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static void ref_typical(struct ref *r, float tp) {
    if (tp >= 1.0f || r->n <= 1) return;
    float lmax = ref_max(r);
    if (lmax == -INFINITY) return;
    double z = ref_z(r, lmax), h = ref_entropy(r, lmax, z);
    for (int j = 0; j < r->n; j++) {
        int32_t id = r->c[j];
        r->w[id] = fabs(-log(exp((double)r->l[id] - lmax) / z) - h); /* score by id */
    }
    cmp_scores = r->w;
    qsort(r->c, (size_t)r->n, sizeof *r->c, cmp_score);
    double cum = 0;
    for (int j = 0; j < r->n; j++) {
        cum += exp((double)r->l[r->c[j]] - lmax) / z;
        if (cum > tp && j >= r->p->min_keep - 1) {
            r->n = j + 1;
            return;
        }
    }
}

static void ref_xtc(struct ref *r, int64_t pos) {
    float prob = r->p->xtc_probability, thr = r->p->xtc_threshold;
    if (prob <= 0.0f || thr > 0.5f || r->n < 2) return;
    if (g3_uniform(g3_rng_bits(g3_rng_key(r->seed, pos), G3_RNG_XTC, 0)) > prob) return;
    ref_sort(r);
    float lmax = r->l[r->c[0]];
    double z = ref_z(r, lmax);
    int last = -1;
    for (int j = 0; j < r->n; j++)
        if (exp((double)r->l[r->c[j]] - lmax) / z >= thr) last = j;
    if (last < 1 || r->n - last < r->p->min_keep) return;
    memmove(r->c, r->c + last, (size_t)(r->n - last) * sizeof *r->c);
    r->n -= last;
}

static float ref_clamp(float v) { return v > FLT_MAX ? FLT_MAX : v; }

static void ref_divide(struct ref *r, float t) {
    for (int j = 0; j < r->n; j++) r->l[r->c[j]] = ref_clamp(r->l[r->c[j]] / t);
}

static void ref_temperature(struct ref *r, float t) {
    const gemma3_sampler_params *p = r->p;
    if (p->dynatemp_range > 0.0f && r->n > 1) {
        float lo = fmaxf(0.0f, t - p->dynatemp_range), hi = t + p->dynatemp_range;
        float lmax = ref_max(r);
        if (lmax != -INFINITY) {
            double z = ref_z(r, lmax);
            double h = ref_entropy(r, lmax, z) / log((double)r->n);
            t = lo + (hi - lo) * (float)pow(h, (double)p->dynatemp_exponent);
        }
    }
    if (t <= 0.0f) {
        ref_argmax(r);
        return;
    }
    if (t != 1.0f) ref_divide(r, t);
}

static int ref_last_n(const gemma3_sampler_params *p, int last_n) {
    int n = last_n < 0 ? (p->n_ctx > 0 ? p->n_ctx : 4096) : last_n;
    return n;
}

/* The last n accepted tokens, oldest first. */
static const int32_t *ref_tail(const struct ref *r, int *n) {
    if (*n > r->hist_len) *n = r->hist_len;
    return r->hist + r->hist_len - *n;
}

static void ref_penalties(struct ref *r) {
    const gemma3_sampler_params *p = r->p;
    int n = ref_last_n(p, p->repeat_last_n);
    if (n == 0 ||
        (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f))
        return;
    const int32_t *h = ref_tail(r, &n);
    for (int j = 0; j < n; j++) r->cnt[h[j]]++;
    for (int j = 0; j < n; j++) {
        int32_t id = h[j];
        if (r->cnt[id] == 0) continue; /* done */
        float l = r->l[id];
        l = l <= 0 ? l * p->repeat_penalty : l / p->repeat_penalty;
        l -= (float)r->cnt[id] * p->frequency_penalty + p->presence_penalty;
        r->l[id] = ref_clamp(l);
        r->cnt[id] = 0;
    }
}

/* DRY by direct comparison: the suffix ending just before position i matched against the
 * history's suffix, never reaching back past the newest breaker. */
static void ref_dry(struct ref *r) {
    const gemma3_sampler_params *p = r->p;
    int n = ref_last_n(p, p->dry_penalty_last_n);
    if (p->dry_multiplier == 0.0f || p->dry_base < 1.0f || n == 0) return;
    const int32_t *c = ref_tail(r, &n);
    if (n < 2) return;
    int limit = n;
    for (int e = n - 1; e >= 0 && limit == n; e--)
        for (int b = 0; b < p->n_dry_breakers && limit == n; b++) {
            int len = p->dry_breaker_len[b];
            if (len <= e + 1 && memcmp(c + e - len + 1, p->dry_breakers[b], len * sizeof *c) == 0)
                limit = n - 1 - e;
        }
    for (int i = 1; i < n; i++) {
        int m = 0;
        while (m < i && c[i - 1 - m] == c[n - 1 - m]) m++;
        if (m > limit) m = limit;
        if (m < p->dry_allowed_length || m == 0) continue;
        int single_breaker = 0;
        for (int b = 0; b < p->n_dry_breakers; b++)
            single_breaker |= p->dry_breaker_len[b] == 1 && p->dry_breakers[b][0] == c[i];
        if (!single_breaker && m > r->cnt[c[i]]) r->cnt[c[i]] = m;
    }
    for (int i = 1; i < n; i++) {
        int32_t t = c[i];
        if (r->cnt[t] == 0) continue;
        double pen = (double)p->dry_multiplier *
                     pow((double)p->dry_base, (double)(r->cnt[t] - p->dry_allowed_length));
        r->l[t] -= (float)(pen > FLT_MAX ? FLT_MAX : pen);
        r->cnt[t] = 0;
    }
}

static int32_t ref_draw(struct ref *r, int64_t pos) {
    float lmax = ref_max(r);
    if (r->n == 0 || lmax == -INFINITY) return -1;
    uint64_t key = g3_rng_key(r->seed, pos);
    if (r->p->mode == GEMMA3_SAMPLER_MODE_GUMBEL) { /* argmax over every kept token */
        int32_t best = -1;
        double best_v = -INFINITY;
        for (int j = 0; j < r->n; j++) {
            int32_t id = r->c[j];
            if (r->l[id] == -INFINITY) continue;
            double v = ((double)r->l[id] - lmax) + g3_gumbel(g3_rng_bits(key, G3_RNG_GUMBEL, id));
            if (best < 0 || v > best_v || (v == best_v && id < best)) {
                best = id;
                best_v = v;
            }
        }
        return best;
    }
    double z = 0;
    for (int j = 0; j < r->n; j++) z += r->w[j] = exp((double)r->l[r->c[j]] - lmax);
    double target = g3_uniform(g3_rng_bits(key, G3_RNG_DRAW, 0)) * z, cum = 0;
    int last = -1;
    for (int j = 0; j < r->n; j++) {
        if (r->w[j] <= 0) continue;
        cum += r->w[j];
        last = j;
        if (cum > target) return r->c[j];
    }
    return last >= 0 ? r->c[last] : -1;
}

static int32_t ref_mirostat(struct ref *r, int64_t pos) {
    const gemma3_sampler_params *p = r->p;
    if (p->temperature != 1.0f) ref_divide(r, p->temperature);
    float lmax = ref_max(r);
    if (lmax == -INFINITY) return -1;
    double z = ref_z(r, lmax);
    if (p->mirostat == 1) {
        int32_t *top = r->tmp; /* the list sorted, for the fit; the list keeps its order */
        memcpy(top, r->c, (size_t)r->n * sizeof *top);
        cmp_logits = r->l;
        qsort(top, (size_t)r->n, sizeof *top, cmp_total);
        int m = r->n < 100 ? r->n : 100;
        double sum_tb = 0, sum_tt = 0;
        for (int i = 0; i + 1 < m; i++) {
            double ti = log((double)(i + 2) / (double)(i + 1));
            double bi = (double)r->l[top[i]] - (double)r->l[top[i + 1]];
            if (!isfinite(bi)) break;
            sum_tb += ti * bi;
            sum_tt += ti * ti;
        }
        double s_hat = sum_tt > 0 ? sum_tb / sum_tt : 1.0, eps = s_hat - 1;
        double k = pow(eps * pow(2.0, (double)r->mu) / (1 - pow((double)r->V, -eps)), 1 / s_hat);
        ref_top_k(r, !(k >= 1) ? 1 : k >= (double)r->n ? r->n : (int)k);
    } else {
        double lim = (double)lmax + log(z) - (double)r->mu * log(2.0);
        int n0 = r->n;
        ref_filter_at_least(r, lim);
        if (r->n == 0) {
            r->n = n0; /* the filter only drops: the first n0 slots still hold the list */
            ref_argmax(r);
        }
    }
    int32_t tok = ref_draw(r, pos);
    if (tok < 0) return tok;
    lmax = ref_max(r);
    double pk = exp((double)r->l[tok] - lmax) / ref_z(r, lmax);
    r->mu -= p->mirostat_eta * (float)(-log2(pk) - p->mirostat_tau);
    return tok;
}

static int32_t ref_sample(struct ref *r, const float *logits, int64_t pos) {
    const gemma3_sampler_params *p = r->p;
    memcpy(r->l, logits, (size_t)r->V * sizeof *r->l);
    for (int i = 0; i < p->n_logit_bias; i++) {
        int32_t id = p->logit_bias[i].token;
        float b = p->logit_bias[i].bias;
        r->l[id] = b == -INFINITY ? -INFINITY : r->l[id] + b;
    }
    if (p->ignore_eos)
        for (int i = 0; i < p->n_eos; i++) r->l[p->eos_ids[i]] = -INFINITY;
    int n_pinf = 0;
    for (int i = 0; i < r->V; i++) {
        if (isnan(r->l[i])) r->l[i] = -INFINITY;
        n_pinf += r->l[i] == INFINITY;
    }
    if (n_pinf > 0)
        for (int i = 0; i < r->V; i++) r->l[i] = r->l[i] == INFINITY ? 0.0f : -INFINITY;
    for (int i = 0; i < r->V; i++) r->c[i] = i;
    r->n = r->V;
    int32_t tok = -1;
    int greedy = p->temperature == 0.0f;
    if (p->mirostat && !greedy) {
        tok = ref_mirostat(r, pos);
    } else {
        for (int i = 0; i < p->n_samplers && r->n > 0; i++) {
            int t = p->samplers[i];
            if (greedy && t != GEMMA3_SAMPLER_PENALTIES && t != GEMMA3_SAMPLER_DRY) continue;
            switch (t) {
            case GEMMA3_SAMPLER_PENALTIES: ref_penalties(r); break;
            case GEMMA3_SAMPLER_DRY: ref_dry(r); break;
            case GEMMA3_SAMPLER_TOP_N_SIGMA: ref_top_n_sigma(r, p->top_n_sigma); break;
            case GEMMA3_SAMPLER_TOP_K: ref_top_k(r, p->top_k); break;
            case GEMMA3_SAMPLER_TYPICAL_P: ref_typical(r, p->typical_p); break;
            case GEMMA3_SAMPLER_TOP_P: ref_top_p(r, p->top_p); break;
            case GEMMA3_SAMPLER_MIN_P: ref_min_p(r, p->min_p); break;
            case GEMMA3_SAMPLER_XTC: ref_xtc(r, pos); break;
            case GEMMA3_SAMPLER_TEMPERATURE: ref_temperature(r, p->temperature); break;
            case GEMMA3_SAMPLER_EPSILON: ref_cutoff(r, 0); break;
            case GEMMA3_SAMPLER_ETA: ref_cutoff(r, 1); break;
            default: CHECK_MSG(0, "no reference for sampler %s", gemma3_sampler_type_name(t));
            }
        }
        if (greedy) ref_argmax(r);
        if (r->n == 1)
            tok = r->l[r->c[0]] != -INFINITY ? r->c[0] : -1;
        else if (r->n > 1 && !greedy)
            tok = ref_draw(r, pos);
    }
    if (tok >= 0) return tok;
    /* nothing finite survived: the raw argmax over the ids no ban (a -inf bias, ignore_eos)
     * excludes, NaN ignored (the first such id if all are NaN); none left: an error */
    char *banned = calloc((size_t)r->V, 1);
    if (!banned) return GEMMA3_ERR_NOMEM;
    for (int i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].bias == -INFINITY) banned[p->logit_bias[i].token] = 1;
    for (int i = 0; p->ignore_eos && i < p->n_eos; i++) banned[p->eos_ids[i]] = 1;
    int32_t best = -1;
    float bv = NAN;
    for (int i = 0; i < r->V; i++) {
        if (banned[i]) continue;
        if (best < 0 || (!isnan(logits[i]) && (isnan(bv) || logits[i] > bv))) {
            bv = logits[i];
            best = i;
        }
    }
    free(banned);
    return best >= 0 ? best : GEMMA3_ERR_ARG;
}

/* ================================ the fast walk's exp ======================================= */

/* g3_approx_exp against libm over [-708, 0] (the fast CDF walk's error bound must hold with room
 * to spare), and every compiled instruction set against the scalar reference, bit for bit. */
static void check_approx_exp(void) {
    enum { N = 1 << 20 };
    float *l = malloc(N * sizeof *l);
    double *ref = malloc(N * sizeof *ref), *got = malloc(N * sizeof *got);
    if (!l || !ref || !got) {
        CHECK(0);
        return;
    }
    const float lmax = 3.5f;
    for (int i = 0; i < N; i++) {
        double u = unif();
        switch (i % 4) {
        case 0: l[i] = lmax - (float)(711 * u); break;  /* the whole range and past -708 */
        case 1: l[i] = lmax - (float)(0.8 * u); break;  /* around the reduction's edges */
        case 2: l[i] = lmax - (float)(40 * u); break;   /* where the weights that matter are */
        case 3: l[i] = i % 8 == 3 ? lmax : -INFINITY; break;
        }
    }
    g3_approx_exp_n_get(0)(ref, l, lmax, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double d = (double)l[i] - lmax;
        if (d < -708) continue;
        double e = exp(d);
        worst = fmax(worst, fabs(ref[i] - e) / e);
    }
    printf("approx exp: worst relative error %.3g (bound used %.3g)\n", worst,
           G3_APPROX_EXP_REL_ERR);
    CHECK_MSG(worst < G3_APPROX_EXP_REL_ERR / 4, "worst %.3g", worst);
    CHECK(ref[3] == 1.0); /* l = lmax */
    for (int isa = 1; isa <= 2; isa++) {
        g3_approx_exp_n_fn fn = g3_approx_exp_n_get(isa);
        if (!fn) {
            CHECK_SKIP("isa %s (approx exp)", isa == 1 ? "avx2" : "avx512");
            continue;
        }
        for (int n = N - 5; n <= N; n += 5) { /* a ragged tail and a whole number of blocks */
            fn(got, l, lmax, n);
            CHECK_MSG(memcmp(got, ref, (size_t)n * sizeof *got) == 0, "isa %d n %d", isa, n);
        }
    }
    /* the Gumbel path's random bits, every variant against g3_rng_bits */
    int32_t *ids = malloc(N * sizeof *ids);
    uint32_t *bits = malloc(N * sizeof *bits);
    if (ids && bits) {
        uint64_t key = g3_rng_key(12345, 678);
        for (int i = 0; i < N; i++) ids[i] = (int32_t)(next() % 262144);
        for (int isa = 0; isa <= 2; isa++) {
            g3_gumbel_bits_n_fn fn = g3_gumbel_bits_n_get(isa);
            if (!fn) continue; /* skipped once above */
            fn(key, ids, bits, N - 3);
            int wrong = 0;
            for (int i = 0; i < N - 3; i++)
                wrong += bits[i] != (uint32_t)(g3_rng_bits(key, G3_RNG_GUMBEL, ids[i]) >> 32);
            CHECK_MSG(wrong == 0, "isa %d: %d wrong", isa, wrong);
        }
    }
    free(ids);
    free(bits);
    /* the sampler's two steps for the fixed-point masses, every instruction set: the rounding
     * pass (g3_mass_round_n_get) flags every value whose exact scaled mass lies within half of
     * g3_mass_tie_window of a rounding tie (the bound the window relies on, with a factor 2 to
     * spare), counts its flags, flags some, and agrees with the scalar one bit for bit; then
     * the fix-up (g3_mass_fix_ties, libm where flagged), on the pass's masses and again with
     * every flagged mass made wrong first (one it skipped would stay wrong), makes every mass
     * and their sum g3_fixed_mass's */
    uint64_t *q = malloc(N * sizeof *q), *q2 = malloc(N * sizeof *q2),
             *tie = malloc(N * sizeof *tie);
    uint64_t *q0 = malloc(N * sizeof *q0), *tie0 = malloc(N * sizeof *tie0);
    if (q && q2 && tie && q0 && tie0) {
        for (int isa = 0; isa <= 2; isa++) {
            g3_mass_round_n_fn fn = g3_mass_round_n_get(isa);
            if (!fn) continue; /* skipped once above */
            int n_tie = -1, flagged = 0;
            uint64_t total = fn(l, lmax, isa ? q2 : q0, isa ? tie : tie0, N - 3, &n_tie), sum = 0;
            const uint64_t *qq = isa ? q2 : q0, *tt = isa ? tie : tie0;
            int missed = 0;
            for (int i = 0; i < N - 3; i++) {
                double d = (double)l[i] - lmax, x = d >= -708 ? exp(d) * 0x1p40 : 0;
                missed += fabs(x - floor(x) - 0.5) < g3_mass_tie_window(x) / 2 && !tt[i];
                flagged += tt[i] != 0;
                sum += qq[i];
            }
            CHECK_MSG(missed == 0 && total == sum && n_tie == flagged && flagged > 0,
                      "mass rounding isa %d: %d near-ties unflagged, %d of %d counted", isa,
                      missed, n_tie, flagged);
            for (int bent = 0; bent < 2; bent++) {
                uint64_t fixed = total, want_sum = 0;
                memcpy(q, qq, (N - 3) * sizeof *q);
                for (int i = 0; bent && i < N - 3; i++)
                    if (tt[i]) q[i] += 7, fixed += 7;
                fixed = g3_mass_fix_ties(l, lmax, q, tt, N - 3, n_tie, fixed);
                int wrong = 0;
                for (int i = 0; i < N - 3; i++) {
                    uint64_t want = g3_fixed_mass(l[i], lmax);
                    wrong += q[i] != want;
                    want_sum += want;
                }
                CHECK_MSG(wrong == 0 && fixed == want_sum, "mass fix-up isa %d%s: %d wrong", isa,
                          bent ? " (bent)" : "", wrong);
            }
            if (isa)
                CHECK_MSG(memcmp(q2, q0, (N - 3) * sizeof *q0) == 0 &&
                              memcmp(tie, tie0, (N - 3) * sizeof *tie0) == 0,
                          "mass rounding isa %d differs from the scalar one", isa);
        }
    }
    free(q2);
    free(tie);
    free(q0);
    free(tie0);
    free(q);
    free(l);
    free(ref);
    free(got);
}

/* Inputs for the float exps' checks: differences from lmax over [-span, 0] (the whole range and
 * past its clamp), around the reduction's edges, where the weights that matter are, lmax and
 * -inf, and tiny logits (big ulps of l - lmax). */
static void float_exp_inputs(float *l, int n, float lmax, double span) {
    for (int i = 0; i < n; i++) {
        double u = unif();
        switch (i % 5) {
        case 0: l[i] = lmax - (float)(span * u); break;
        case 1: l[i] = lmax - (float)(0.8 * u); break;
        case 2: l[i] = lmax - (float)(40 * u); break;
        case 3: l[i] = i % 10 == 3 ? lmax : -INFINITY; break;
        case 4: l[i] = (float)(1e-3 * u) - 5e-4f; break;
        }
    }
}

/* The bit helpers that keep the passes free of selects (AVX2 vectorises them): floor and the
 * integer of a double in [0, 2^51) against libm's floor and the casts, at integers, halves and
 * their neighbours; the float and double selects. */
static void check_bit_helpers(void) {
    static const double v[] = {0, 0x1p-1074, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 1e6 + 0.5,
                               0x1p40, 0x1p40 + 0.5, 0x1p51 - 1, 0x1p51 - 0.5};
    int wrong = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (int k = -1; k <= 1; k++) {
            const double x = k < 0 ? nextafter(v[i], 0) : k > 0 ? nextafter(v[i], 1e300) : v[i];
            if (x >= 0x1p51) continue;
            wrong += g3_floor_small(x) != floor(x);
            wrong += g3_u64_of_small_double(floor(x)) != (uint64_t)(int64_t)x;
        }
    CHECK_MSG(wrong == 0, "floor / integer of small doubles: %d wrong", wrong);
    CHECK(g3_f32_select(~0u, 1.5f, -2.0f) == 1.5f && g3_f32_select(0, 1.5f, -2.0f) == -2.0f);
    CHECK(g3_f32_select(0, NAN, 0.0f) == 0.0f);
    CHECK(g3_f64_select(~0ull, 1.5, -2.0) == 1.5 && g3_f64_select(0, 1.5, -2.0) == -2.0);
    /* the view's last bucket weighs nothing, whatever its (meaningless, maybe NaN) p and x */
    const float last[] = {0.0f, 0.5f, -3.0f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof last / sizeof last[0]; i++) {
        CHECK(g3_view_unit(last[i], G3_VIEW_BUCKETS - 1) == 0);
        CHECK(g3_view_moment(last[i], last[i], G3_VIEW_BUCKETS - 1) == 0);
    }
    CHECK(g3_view_unit(0.0f, 0) == 0x80000000u && g3_view_unit(-0x1p-7f, 5) == 0x80000000u - 0x1000000u);
}

/* The worst relative error of g3_approx_expf(l[i], lmax, fused) against libm's exp of the
 * exact difference, over the inputs above -86 and over a maximum of 80 to 85 above tiny logits
 * (where fl32(l - lmax) near -80 is off by up to 2^-18 and the TwoSum must carry it). */
static double approx_expf_worst(const float *l, int n, float lmax, int fused) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)l[i] - lmax;
        if (d < -86) continue;
        double e = exp(d);
        worst = fmax(worst, fabs((double)g3_approx_expf(l[i], lmax, fused) - e) / e);
    }
    for (int i = 0; i < n; i += 4) {
        float li = (float)(1e-3 * unif() - 5e-4), big = 80.0f + (float)(5 * unif());
        double d = (double)li - big;
        if (d < -86) continue;
        double e = exp(d);
        worst = fmax(worst, fabs((double)g3_approx_expf(li, big, fused) - e) / e);
    }
    return worst;
}

/* g3_approx_expf(l, lmax, fused), both forms, against libm's exp of the exact difference
 * (within half of G3_APPROX_EXPF_REL_ERR: the difference's own rounding is carried, not lost);
 * the block sums (the scalar ones unfused, g3_expf_block_sums_fused's fused) against libm within
 * the bound; every compiled instruction set's sums, and its weight of one token, against the
 * fused scalar reference bit for bit. */
static void check_approx_expf(void) {
    enum { N = 1 << 20 };
    float *l = malloc(N * sizeof *l);
    double *blocks = malloc((N / 64 + 1) * sizeof *blocks);
    double *got = malloc((N / 64 + 1) * sizeof *got);
    if (!l || !blocks || !got) {
        CHECK(0);
        return;
    }
    const float lmax = 7.25f;
    float_exp_inputs(l, N, lmax, 90); /* past -86 */
    for (int fused = 0; fused < 2; fused++) {
        double worst = approx_expf_worst(l, N, lmax, fused);
        printf("approx expf%s: worst relative error %.3g (bound used %.3g)\n",
               fused ? ", fused" : "", worst, G3_APPROX_EXPF_REL_ERR);
        CHECK_MSG(worst < G3_APPROX_EXPF_REL_ERR / 2, "fused %d: worst %.3g", fused, worst);
        CHECK(g3_approx_expf(lmax, lmax, fused) == 1.0f);
        CHECK(g3_approx_expf(-INFINITY, lmax, fused) < 4.5e-38f);
    }
    int n0 = N - 37; /* a short last block */
    double exact = 0;
    for (int i = 0; i < n0; i++) exact += exp((double)l[i] - lmax);
    double total = g3_expf_block_sums_fused(l, lmax, n0, blocks);
    for (int fused = 0; fused < 2; fused++) {
        double sum = fused ? total : g3_expf_block_sums_get(0)(l, lmax, n0, got);
        CHECK_MSG(fabs(sum - exact) <= (G3_APPROX_EXPF_REL_ERR + 4 * 0x1p-24) * exact,
                  "fused %d: block sums %.17g vs %.17g", fused, sum, exact);
    }
    for (int i = 0; i < N; i += 97)
        CHECK_MSG((float)g3_expf_weight_get(0)(l[i], lmax) == g3_approx_expf(l[i], lmax, 0), "l %g",
                  l[i]);
    for (int isa = 1; isa <= 2; isa++) {
        g3_expf_block_sums_fn fn = g3_expf_block_sums_get(isa);
        if (!fn) {
            CHECK_SKIP("isa %s (approx expf)", isa == 1 ? "avx2" : "avx512");
            continue;
        }
        CHECK(fn(l, lmax, n0, got) == total);
        CHECK_MSG(memcmp(got, blocks, (size_t)((n0 + 63) / 64) * sizeof *got) == 0, "isa %d", isa);
        int differ = 0;
        for (int i = 0; i < N; i += 97)
            differ += (float)g3_expf_weight_get(isa)(l[i], lmax) !=
                      g3_approx_expf(l[i], lmax, 1);
        CHECK_MSG(differ == 0, "isa %d: %d weights differ from the fused reference", isa, differ);
    }
    free(l);
    free(blocks);
    free(got);
}

/* g3_exp_rough and g3_exp_coarse against libm's exp of the exact difference (within half of
 * G3_EXP_ROUGH_REL_ERR, and within the 0.0303 g3_exp_coarse derives, above -64; within 2^-91 of
 * e^d under it), and their sums: every compiled instruction set gives the scalar one's bits,
 * and the scalar sums lie within g3_exp_lane_sums_rel of libm's. */
static void check_exp_rough(void) {
    enum { N = 1 << 20 };
    float *l = malloc(N * sizeof *l);
    if (!l) {
        CHECK(0);
        return;
    }
    const float lmax = 7.25f;
    float_exp_inputs(l, N, lmax, 70); /* past -64 */
    for (int coarse = 0; coarse < 2; coarse++) {
        float (*term)(float, float) = coarse ? g3_exp_coarse : g3_exp_rough;
        const char *name = coarse ? "coarse" : "rough";
        double worst = 0, rel = coarse ? G3_EXP_COARSE_REL_ERR : G3_EXP_ROUGH_REL_ERR;
        int off = 0;
        for (int i = 0; i < N; i++) {
            double d = (double)l[i] - lmax, e = exp(d), got = term(l[i], lmax);
            if (d < -64) {
                off += !(fabs(got - e) < 0x1p-91);
                continue;
            }
            worst = fmax(worst, fabs(got - e) / e);
        }
        for (int i = 0; i < N; i += 4) { /* a maximum of 60 over tiny logits */
            float li = (float)(1e-3 * unif() - 5e-4), big = 60.0f + (float)(4 * unif());
            double e = exp((double)li - big);
            worst = fmax(worst, fabs((double)term(li, big) - e) / e);
        }
        printf("exp %s: worst relative error %.4g (bound used %.4g)\n", name, worst, rel);
        CHECK_MSG(worst < (coarse ? 0.0304 : rel / 2), "%s: worst %.4g", name, worst);
        CHECK_MSG(off == 0, "%s: %d values off e^d by 2^-91 or more under -64", name, off);
        CHECK(fabs(term(lmax, lmax) - 1.0) <= (coarse ? rel : 0));
        int n0 = N - 37; /* a short last block */
        const float at[] = {lmax - 3.0f, lmax, INFINITY, -INFINITY};
        for (int a = 0; a < 4; a++) {
            g3_exp_rough_sums_fn (*get)(int) =
                coarse ? g3_exp_coarse_sums_get : g3_exp_rough_sums_get;
            double above, total = get(0)(l, lmax, n0, at[a], &above);
            double exact = 0, exact_above = 0;
            for (int i = 0; i < n0; i++) {
                double e = exp((double)l[i] - lmax);
                exact += e;
                exact_above += l[i] >= at[a] ? e : 0;
            }
            double lane_rel = g3_exp_lane_sums_rel(rel, n0);
            CHECK_MSG(fabs(total - exact) <= lane_rel * exact, "%s sums %.17g vs %.17g", name,
                      total, exact);
            CHECK_MSG(fabs(above - exact_above) <= lane_rel * exact_above + n0 * 0x1p-91,
                      "%s sums at %g: %.17g vs %.17g", name, at[a], above, exact_above);
            for (int isa = 1; isa <= 2; isa++) {
                g3_exp_rough_sums_fn fn = get(isa);
                if (!fn) {
                    CHECK_SKIP("isa %s (exp %s)", isa == 1 ? "avx2" : "avx512", name);
                    continue;
                }
                double above_isa, total_isa = fn(l, lmax, n0, at[a], &above_isa);
                CHECK_MSG(total_isa == total && above_isa == above, "%s isa %d at %g", name, isa,
                          at[a]);
            }
        }
    }
    free(l);
}

/* The Gumbel screen: g3_gumbel_upper bounds the noise of every top-bits value (all 2^20 at each
 * end, where the bound is tightest and where its float tricks meet y = 0, and a million random
 * ones); every compiled screen gives the scalar one's answers; and no token the screen rejects
 * could reach the threshold it was given for (the slack of 1/64 sampling.c adds). */
static void check_gumbel_screen(void) {
    int bad = 0;
    for (uint32_t y = 0; y < (1u << 20); y++) {
        uint32_t hi = ~y, lo = y;
        bad += g3_gumbel_upper(hi) < g3_gumbel((uint64_t)hi << 32);
        bad += g3_gumbel_upper(lo) < g3_gumbel((uint64_t)lo << 32);
    }
    for (int i = 0; i < (1 << 20); i++) {
        uint32_t b = (uint32_t)next();
        bad += g3_gumbel_upper(b) < g3_gumbel((uint64_t)b << 32);
    }
    CHECK_MSG(bad == 0, "%d bits values above the bound", bad);
    enum { N = 1 << 18 };
    int32_t *ids = malloc(N * sizeof *ids);
    uint64_t *hashes = malloc(N * sizeof *hashes);
    float *l = malloc(N * sizeof *l);
    uint8_t *pass = malloc(N), *pass2 = malloc(N);
    if (!ids || !hashes || !l || !pass || !pass2) {
        CHECK(0);
        return;
    }
    for (int round = 0; round < 4; round++) {
        uint64_t key = g3_rng_key(1000 + round, 77 * round);
        float lmax = round == 3 ? 1e30f : 4.0f;
        for (int i = 0; i < N; i++) {
            ids[i] = (int32_t)(next() % 262144);
            hashes[i] = g3_mix64_first(g3_rng_index_hash(G3_RNG_GUMBEL, (uint32_t)ids[i]));
            double u = unif();
            l[i] = round == 3 ? lmax * (float)(1 - 1e-6 * u) : lmax - (float)(30 * u);
            if (i % 97 == 0) l[i] = -INFINITY;
        }
        double best = -3.0 + 6.0 * round; /* the best value so far: from -3 to 15 */
        float thr = (float)(best - 0.015625);
        g3_gumbel_screen_n_get(0)(key, hashes, l, lmax, thr, pass, N - 5);
        int missed = 0, passed = 0;
        for (int i = 0; i < N - 5; i++) {
            double v = ((double)l[i] - lmax) +
                       g3_gumbel(g3_rng_bits(key, G3_RNG_GUMBEL, (uint32_t)ids[i]));
            missed += v >= best && !pass[i];
            passed += pass[i];
        }
        CHECK_MSG(missed == 0, "round %d: %d tokens that reach best were screened out", round,
                  missed);
        CHECK_MSG(passed < N / 2, "round %d: the screen passed %d of %d", round, passed, N);
        for (int isa = 1; isa <= 2; isa++) {
            g3_gumbel_screen_n_fn fn = g3_gumbel_screen_n_get(isa);
            if (!fn) continue; /* skipped once in check_approx_expf */
            fn(key, hashes, l, lmax, thr, pass2, N - 5);
            CHECK_MSG(memcmp(pass, pass2, N - 5) == 0, "isa %d round %d", isa, round);
        }
    }
    free(ids);
    free(hashes);
    free(l);
    free(pass);
    free(pass2);
}

/* Top-k's heap scan and the double tier's block sums, every compiled instruction set against
 * the scalar reference: the same stops and NaN/inf flags on logits with rare hits, a NaN, an
 * inf, and from every start offset mod 16; the same sums bit for bit. */
static void check_block_scan(void) {
    enum { N = 4099 };
    float l[N];
    for (int i = 0; i < N; i++) l[i] = (float)(unif() * 10);
    for (int isa = 1; isa <= 2; isa++) {
        g3_block_scan_fn fn = g3_block_scan_get(isa), ref = g3_block_scan_get(0);
        if (!fn) continue;
        int wrong = 0;
        for (int round = 0; round < 64; round++) {
            float worst = round % 4 == 3 ? 9.99f : 9.0f;
            float saved = l[(round * 97) % N];
            if (round % 8 == 5) l[(round * 97) % N] = NAN;
            if (round % 8 == 6) l[(round * 97) % N] = -INFINITY;
            for (int j = round % 16; j < N;) {
                uint32_t b1 = 0, b2 = 0;
                int a = ref(l, j, N, worst, &b1), b = fn(l, j, N, worst, &b2);
                wrong += a != b || b1 != b2;
                j = a + 16;
            }
            l[(round * 97) % N] = saved;
        }
        CHECK_MSG(wrong == 0, "block scan isa %d: %d differences", isa, wrong);
    }
    double ref[N / 64 + 1], got[N / 64 + 1];
    double total = g3_exp_block_sums_get(0)(l, 9.5f, N, ref), exact = 0;
    for (int i = 0; i < N; i++) exact += exp((double)l[i] - 9.5f);
    CHECK_MSG(fabs(total - exact) <= (2 * N * 0x1p-53 + G3_APPROX_EXP_REL_ERR) * exact,
              "%.17g %.17g", total, exact);
    for (int isa = 1; isa <= 2; isa++) {
        g3_expf_block_sums_fn fn = g3_exp_block_sums_get(isa);
        if (!fn) continue;
        CHECK(fn(l, 9.5f, N, got) == total);
        CHECK_MSG(memcmp(got, ref, sizeof ref) == 0, "exp block sums isa %d", isa);
    }
}

/* A token's view weight e^(-b/64) 2^-31 u (sampling/passes.h), and its share of the sum of weight
 * times (l - lmax), its e^d x less b/64 times its weight, as sampling/rank.c reads them. */
static double view_weight_of(float l, float lmax, double *moment) {
    int b = g3_view_bucket(l, lmax);
    float x = g3_view_reduced(l, lmax, b), p = g3_view_expm1(x);
    double e = b < G3_VIEW_BUCKETS - 1 ? exp(-(double)b / G3_VIEW_PER_NAT) : 0;
    double w = e * (g3_view_unit(p, b) * 0x1p-31);
    *moment = (double)g3_view_moment(x, p, b) - (double)b / G3_VIEW_PER_NAT * w;
    return w;
}

/* The rank view's sum of moments in its order (sampling/passes.h): token i in lane i % 16 of its
 * block of 1024 where a whole 16 lies, the lanes summed as a tree (k with k + 8, + 4, + 2,
 * + 1), then the last block's tail in order. */
static double view_moment_total(const float *l, float lmax, int n) {
    double lane[16] = {0}, tail = 0;
    for (int i0 = 0; i0 < n; i0 += 1024) {
        int m = n - i0 < 1024 ? n - i0 : 1024;
        float block[16] = {0};
        for (int j = 0; j < m; j++) {
            float v = l[i0 + j];
            int b = g3_view_bucket(v, lmax);
            float x = g3_view_reduced(v, lmax, b), t = g3_view_moment(x, g3_view_expm1(x), b);
            if (j < m / 16 * 16)
                block[j % 16] += t;
            else
                tail += t;
        }
        for (int k = 0; k < 16; k++) lane[k] += block[k];
    }
    for (int w = 8; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) lane[k] += lane[k + w];
    return lane[0] + tail;
}

/* The rank view (sampling/rank.c): each token's weight against libm's e^(l - lmax) and its
 * moment against e^d d, on a million inputs over every bucket and lmax of several magnitudes
 * (within a quarter of the bounds the sampler assumes; 0 in the last bucket, where e^d is
 * below 2^-46); the scalar pass against a direct computation (each token's bucket, the sums
 * of units, the sum of moments in the pass's order); every compiled instruction set against
 * it, bit for bit. */
static void check_rank_view(void) {
    enum { N = 262144 + 13 };
    float *l = malloc(N * sizeof *l);
    uint16_t *bk = malloc(N * sizeof *bk);
    static struct g3_view_sum sums[G3_VIEW_BUCKETS], want[G3_VIEW_BUCKETS];
    if (!l || !bk) {
        CHECK(0);
        return;
    }
    double worst = 0, worst_moment = 0;
    int last_wrong = 0;
    for (int i = 0; i < (1 << 20); i++) {
        float lmax = (float)((unif() - 0.5) * (i % 3 == 0 ? 2e4 : i % 3 == 1 ? 60 : 1));
        float x = lmax - (float)((i % 4 == 0 ? 0.05 : 34) * unif());
        double d = (double)x - lmax, e = exp(d), m, w = view_weight_of(x, lmax, &m);
        if (g3_view_bucket(x, lmax) == G3_VIEW_BUCKETS - 1) {
            last_wrong += w != 0 || m != 0 || !(e < 0x1p-46);
            continue;
        }
        worst = fmax(worst, fabs(w - e) / e);
        double moment_bound = e * (fabs(d) * G3_VIEW_REL_ERR + G3_VIEW_MOMENT_ERR);
        worst_moment = fmax(worst_moment, fabs(m - e * d) / moment_bound);
    }
    printf("rank view: worst relative weight error %.3g (bound used %.3g), moment %.3g of its bound\n",
           worst, G3_VIEW_REL_ERR, worst_moment);
    CHECK_MSG(worst < G3_VIEW_REL_ERR / 4, "worst %.3g", worst);
    CHECK_MSG(worst_moment < 0.25, "moment %.3g", worst_moment);
    double worst_table = 0; /* the tables' e^(-b/64), every bucket (the moment's bound uses it) */
    for (int b = 0; b < G3_VIEW_BUCKETS - 1; b++)
        worst_table = fmax(worst_table, fabs(g3_view_exp_bucket(b) / exp(-b / 64.0) - 1));
    CHECK_MSG(worst_table < 3 * 0x1p-24, "table %.3g", worst_table / 0x1p-24);
    CHECK_MSG(last_wrong == 0, "%d in the last bucket", last_wrong);
    const float lmax = 6.25f;
    for (int i = 0; i < N; i++) {
        switch (i % 5) {
        case 0: l[i] = lmax - (float)(40 * unif()); break; /* past the last bucket */
        case 1: l[i] = lmax - (float)(0.05 * unif()); break;
        case 2: l[i] = (float)((int)(lmax - 20 * unif()) * 0.125); break; /* ties */
        case 3: l[i] = i % 15 == 3 ? -INFINITY : lmax - (float)(800 * unif()); break;
        case 4: l[i] = i % 7 == 4 ? lmax : lmax - (float)(31.9 * unif()); break;
        }
    }
    memset(want, 0, sizeof want);
    int monotone = 1;
    for (int i = 0; i < N; i++) {
        int b = g3_view_bucket(l[i], lmax);
        float x = g3_view_reduced(l[i], lmax, b), p = g3_view_expm1(x);
        want[b].unit += g3_view_unit(p, b);
        if (i > 0) /* a larger logit never in a later bucket */
            monotone &= (l[i] > l[i - 1]) ? b <= g3_view_bucket(l[i - 1], lmax)
                                          : b >= g3_view_bucket(l[i - 1], lmax);
    }
    CHECK(monotone);
    const double want_moment = view_moment_total(l, lmax, N);
    double exact_moment = 0, z = 0; /* the per-token and float-lane bounds, summed, hold */
    for (int i = 0; i < N; i++) {
        int b = g3_view_bucket(l[i], lmax);
        if (b == G3_VIEW_BUCKETS - 1) continue;
        double d = (double)l[i] - lmax, e = exp(d);
        z += e;
        exact_moment += e * (d + (double)b / G3_VIEW_PER_NAT);
    }
    double sum_err = fabs(want_moment - exact_moment) / z;
    printf("rank view: the moments' sum within %.3g Z of the exact (bound %.3g)\n", sum_err,
           G3_VIEW_MOMENT_ERR + G3_VIEW_MOMENT_SUM_ERR);
    CHECK_MSG(sum_err < G3_VIEW_MOMENT_ERR + G3_VIEW_MOMENT_SUM_ERR, "%.3g", sum_err);
    CHECK(g3_view_bucket(lmax, lmax) == 0 && g3_view_bucket(-INFINITY, lmax) == G3_VIEW_BUCKETS - 1);
    for (int isa = 0; isa <= 2; isa++) {
        g3_rank_view_fn fn = g3_rank_view_get(isa);
        if (!fn) {
            CHECK_SKIP("isa %s (rank view)", isa == 1 ? "avx2" : "avx512");
            continue;
        }
        for (int moments = 0; moments < 2; moments++) {
            double moment = -1;
            memset(sums, 0, sizeof sums);
            fn(l, lmax, N, bk, sums, moments ? &moment : NULL);
            int wrong = 0;
            for (int i = 0; i < N; i++) wrong += bk[i] != g3_view_bucket(l[i], lmax);
            for (int b = 0; b < G3_VIEW_BUCKETS; b++)
                wrong += sums[b].unit != want[b].unit || sums[b].odd != 0;
            CHECK_MSG(wrong == 0, "isa %d moments %d: %d buckets or sums", isa, moments, wrong);
            CHECK_MSG(moment == (moments ? want_moment : -1), "isa %d moment %.17g against %.17g",
                      isa, moment, want_moment);
        }
        double alone = -1; /* the moment alone (no buckets, no sums): the same bits */
        fn(l, lmax, N, NULL, NULL, &alone);
        CHECK_MSG(alone == want_moment, "isa %d moment alone %.17g against %.17g", isa, alone,
                  want_moment);
    }
    /* the band scan over those buckets, every ISA against a direct count (ragged lengths):
     * single buckets with the tokens below them counted, and bands less an inner range */
    int32_t *ids = malloc(N * sizeof *ids);
    if (!ids) CHECK(0);
    for (int isa = 0; ids && isa <= 2; isa++) {
        g3_band_scan_fn scan = g3_band_scan_get(isa);
        if (!scan) continue;
        int wrong = 0;
        for (int b = 0; b < G3_VIEW_BUCKETS; b += b < 8 ? 1 : 97) {
            int half = b % 5, inner_kind = b % 3; /* inner: empty, the band's middle, its edge */
            int g1 = b - half < 0 ? 0 : b - half, g2 = b + half;
            int a1 = g1 + 1, a2 = inner_kind == 0 ? g1 : inner_kind == 1 ? g2 - 1 : g2;
            if (b % 2) a1 = 0, a2 = b - 1, g1 = g2 = b; /* one bucket */
            int n = N - b % 31, inner = -1, want_inner = 0, k = 0;
            int m = scan(bk, n, g1, g2, a1, a2, ids, &inner);
            for (int i = 0; i < n; i++) {
                int in_a = bk[i] >= a1 && bk[i] <= a2;
                want_inner += in_a;
                if (bk[i] >= g1 && bk[i] <= g2 && !in_a) wrong += k >= m || ids[k++] != i;
            }
            wrong += k != m || inner != want_inner;
        }
        CHECK_MSG(wrong == 0, "band scan isa %d: %d differences", isa, wrong);
    }
    free(ids);
    free(l);
    free(bk);
}

/* Top-n-sigma's lane sums of every compiled instruction set against the scalar ones. */
static void check_sigma_sums(void) {
    enum { N = 262144 + 13 };
    float *l = malloc(N * sizeof *l);
    if (!l) {
        CHECK(0);
        return;
    }
    for (int i = 0; i < N; i++) l[i] = i % 31 == 0 ? -INFINITY : (float)(10 * unif() - 3);
    double ref[5], got[5];
    g3_sigma_sums_n_get(0)(l, N, ref);
    CHECK(ref[4] == N - (N + 30) / 31);
    for (int isa = 1; isa <= 2; isa++) {
        g3_sigma_sums_n_fn fn = g3_sigma_sums_n_get(isa);
        if (!fn) continue;
        fn(l, N, got);
        CHECK_MSG(memcmp(got, ref, sizeof ref) == 0, "isa %d", isa);
    }
    free(l);
}

/* ================================ test vectors ============================================== */

enum { N_KINDS = 12 };
static const char *const kind_names[N_KINDS] = {
    "gaussian", "quantised ties", "few levels", "bans + tied max", "flat",
    "one dominant", "mostly banned", "all banned", "huge magnitudes", "tiny spread",
    "NaN sprinkled", "+inf present"};

static void make_logits(float *l, int V, int kind) {
    double sd = 0.5 + 3.5 * unif();
    for (int i = 0; i < V; i++) {
        uint64_t b = next();
        double u = ((b & 0xfffff) + ((b >> 20) & 0xfffff) + ((b >> 40) & 0xfffff)) /
                       (double)(1 << 20) -
                   1.5;
        l[i] = (float)(2 * sd * u);
    }
    switch (kind) {
    case 0:
        for (int j = 0; j < 10; j++) l[next() % V] += (float)(15 * unif());
        break;
    case 1:
        for (int i = 0; i < V; i++) l[i] = roundf(l[i] * 8) / 8;
        break;
    case 2: {
        int levels = 2 + (int)(next() % 6);
        for (int i = 0; i < V; i++) {
            int lev = (int)(next() % (uint64_t)levels);
            if (lev == levels - 1 && next() % 64 != 0) lev = 0;
            l[i] = (float)(lev * sd);
        }
        break;
    }
    case 3: {
        for (int j = 0; j < V / 8; j++) l[next() % V] = -INFINITY;
        float mx = -INFINITY;
        for (int i = 0; i < V; i++) mx = fmaxf(mx, l[i]);
        for (int j = 0; j < 3; j++) l[next() % V] = mx;
        break;
    }
    case 4:
        for (int i = 0; i < V; i++) l[i] = 1.5f;
        break;
    case 5:
        l[next() % V] = 40.0f;
        break;
    case 6: {
        int keep = 1 + (int)(next() % 5);
        for (int i = 0; i < V; i++)
            if (next() % (uint64_t)V >= (uint64_t)keep) l[i] = -INFINITY;
        break;
    }
    case 7:
        for (int i = 0; i < V; i++) l[i] = -INFINITY;
        break;
    case 8:
        for (int i = 0; i < V; i++) l[i] *= 1e30f;
        break;
    case 9:
        for (int i = 0; i < V; i++) l[i] = 1.0f + l[i] * 1e-6f;
        break;
    case 10: /* NaN (becomes -inf) among finite logits: the first pass must catch it */
        for (int j = 0; j < V / 64 + 1; j++) l[next() % V] = NAN;
        break;
    case 11: { /* one to three +inf (they share the mass), and a NaN */
        int k = 1 + (int)(next() % 3);
        for (int j = 0; j < k; j++) l[next() % V] = INFINITY;
        l[next() % V] = NAN;
        break;
    }
    }
}

/* A history with repeated stretches, over the low ids (which every vocabulary size has). */
static void make_history(int32_t *h, int n, int V) {
    int alphabet = V < 50 ? V : 50;
    for (int i = 0; i < n;) {
        uint64_t b = next();
        if (i > 16 && b % 3 == 0) {
            int len = 2 + (int)((b >> 8) % 12), from = (int)((b >> 16) % (uint64_t)(i - 8));
            for (int j = 0; j < len && i < n; j++) h[i++] = h[from + j];
        } else {
            h[i++] = (int32_t)((b >> 24) % (uint64_t)alphabet);
        }
    }
}

/* ================================ the chains ================================================ */

enum { N_CHAINS = 29 };

static gemma3_sampler_params all_off(void) {
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.top_k = 0;
    p.top_p = 1.0f;
    p.repeat_last_n = 64;
    p.n_ctx = HIST_CAP;
    return p;
}

static gemma3_sampler_params llama_chain(void) {
    gemma3_sampler_params p = all_off();
    gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_LLAMA, &p);
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.temperature = 0.8f;
    return p;
}

/* Chain number c, with random parameters where a range is natural. */
static gemma3_sampler_params chain(int c, int V, const char **name) {
    gemma3_sampler_params p = all_off();
    static const float temps[] = {1.0f, 0.7f, 1.5f, 1e-3f, 1e-6f, 100.0f};
    switch (c) {
    case 0: *name = "default"; p = gemma3_sampler_default_params(); break;
    case 1: *name = "llama.cpp defaults"; p = llama_chain(); break;
    case 2: *name = "temperature alone"; p.temperature = temps[next() % 6]; break;
    case 3:
        *name = "top-k alone";
        p.top_k = 1 + (int)(next() % (uint64_t)(V < 3000 ? V : 3000));
        break;
    case 4: *name = "top-k large"; p.top_k = V / 2 + (int)(next() % (uint64_t)(V / 2 + 1)); break;
    case 5: *name = "top-p alone"; p.top_p = (float)unif(); break;
    case 6: *name = "top-p 0.95 alone"; p.top_p = 0.95f; break;
    case 7: *name = "min-p alone"; p.min_p = (float)pow(unif(), 3); break;
    case 8: *name = "typical alone"; p.typical_p = (float)unif(); break;
    case 9: *name = "top-n-sigma alone"; p.top_n_sigma = (float)(0.2 + 3 * unif()); break;
    case 10:
        *name = "XTC alone";
        p.xtc_probability = next() % 2 ? 1.0f : 0.5f;
        p.xtc_threshold = (float)(0.5 * unif());
        break;
    case 11:
        *name = "DRY alone";
        p.dry_multiplier = 0.8f;
        p.dry_allowed_length = 1 + (int)(next() % 3);
        p.dry_penalty_last_n = next() % 2 ? -1 : 500;
        p.n_dry_breakers = 2;
        p.dry_breaker_len[0] = 1;
        p.dry_breakers[0][0] = 3 % V;
        p.dry_breaker_len[1] = 2;
        p.dry_breakers[1][0] = 5 % V;
        p.dry_breakers[1][1] = 6 % V;
        break;
    case 12:
        *name = "penalties alone";
        p.repeat_penalty = 1.0f + (float)unif();
        p.frequency_penalty = (float)unif();
        p.presence_penalty = (float)unif();
        p.repeat_last_n = next() % 2 ? -1 : 64;
        break;
    case 13:
        *name = "logit bias alone";
        p.n_logit_bias = 1 + (int)(next() % GEMMA3_SAMPLER_MAX_BIAS);
        for (int i = 0; i < p.n_logit_bias; i++) {
            p.logit_bias[i].token = (int32_t)(next() % (uint64_t)V);
            p.logit_bias[i].bias = i % 5 == 0 ? -INFINITY : (float)(20 * unif() - 10);
        }
        p.ignore_eos = 1;
        p.n_eos = 1;
        p.eos_ids[0] = 1 % V;
        break;
    case 14: *name = "mirostat v1"; p.mirostat = 1; p.temperature = temps[next() % 3]; break;
    case 15: *name = "mirostat v2"; p.mirostat = 2; p.temperature = temps[next() % 3]; break;
    case 16: *name = "greedy + penalties"; p.temperature = 0; p.repeat_penalty = 1.3f; break;
    case 17:
        *name = "dynamic temperature";
        p.temperature = (float)(0.2 + unif());
        p.dynatemp_range = (float)(1.5 * unif());
        p.dynatemp_exponent = (float)(0.5 + unif());
        break;
    case 18:
        *name = "llama.cpp + DRY + penalties";
        p = llama_chain();
        p.dry_multiplier = 0.8f;
        p.repeat_penalty = 1.1f;
        p.repeat_last_n = -1;
        break;
    case 19:
        *name = "default + XTC";
        p = gemma3_sampler_default_params();
        p.xtc_probability = 1.0f;
        p.xtc_threshold = 0.1f;
        break;
    case 20:
        *name = "llama.cpp, top-k off";
        p = llama_chain();
        p.top_k = 0;
        p.min_p = (float)(0.05 * unif());
        p.top_p = (float)(0.5 + 0.5 * unif());
        break;
    case 21:
        *name = "llama.cpp + typical + sigma";
        p = llama_chain();
        p.top_k = 0;
        p.typical_p = (float)(0.5 + 0.5 * unif());
        p.top_n_sigma = (float)(0.5 + 2 * unif());
        break;
    case 22:
        *name = "min_keep floors";
        p.min_keep = 1 + (int)(next() % 100);
        p.top_p = (float)(0.3 * unif());
        p.min_p = (float)unif();
        p.typical_p = (float)(0.3 * unif());
        break;
    case 23:
        *name = "everything, default order";
        p = gemma3_sampler_default_params();
        p.top_k = next() % 2 ? 0 : 1 + (int)(next() % 500);
        p.top_p = (float)unif();
        p.min_p = (float)(0.1 * unif());
        p.typical_p = (float)(0.5 + 0.5 * unif());
        p.top_n_sigma = (float)(0.5 + 3 * unif());
        p.xtc_probability = (float)unif();
        p.xtc_threshold = (float)(0.3 * unif());
        p.repeat_penalty = 1.2f;
        p.dry_multiplier = 0.5f;
        p.temperature = temps[next() % 6];
        break;
    case 24:
        *name = "everything, llama.cpp order";
        p = llama_chain();
        p.top_k = next() % 2 ? 0 : 1 + (int)(next() % 500);
        p.typical_p = (float)(0.5 + 0.5 * unif());
        p.top_n_sigma = (float)(0.5 + 3 * unif());
        p.xtc_probability = (float)unif();
        p.xtc_threshold = (float)(0.3 * unif());
        p.frequency_penalty = 0.3f;
        p.presence_penalty = 0.2f;
        p.dry_multiplier = 0.5f;
        p.temperature = temps[next() % 6];
        break;
    case 25: *name = "greedy"; p = gemma3_sampler_default_params(); p.temperature = 0; break;
    case 26: /* a sampler after XTC: its count from the float tier's Z, also in CDF mode */
        *name = "XTC, then temperature";
        p.xtc_probability = 1.0f;
        p.xtc_threshold = (float)(0.5 * unif());
        p.temperature = temps[next() % 6];
        break;
    case 27:
        *name = "epsilon, then temperature";
        p.epsilon_cutoff = (float)(0.02 * pow(unif(), 2));
        p.min_keep = (int)(next() % 3);
        p.temperature = temps[next() % 6];
        break;
    case 28:
        *name = "eta after top-k";
        p.eta_cutoff = (float)(0.03 * unif());
        p.top_k = next() % 2 ? 0 : 1 + (int)(next() % 500);
        p.min_keep = (int)(next() % 3);
        break;
    }
    p.n_ctx = HIST_CAP;
    return p;
}

/* The fast CDF walk's tiers where a margin too small would show: a flat list of 1,024 and 4,096
 * tokens (the shortest that takes the fast walk; every step small), 20,000 positions each, with
 * the float tier (the double tier behind it), the float tier pushed to the worst error its bound
 * allows (g3_sampler_perturb_float_draw: the sums before the target and after it moved apart,
 * each way; without the margin on either end of a step a few dozen of these draws go wrong) and
 * the double tier alone, against the reference walk. The float tier must still answer most
 * draws, or the test would only be testing the double tier. */
static void check_draw_tiers(struct ref *r) {
    static const int sizes[] = {1024, 4096};
    for (int si = 0; si < 2; si++) {
        int V = sizes[si];
        gemma3_sampler_params p = all_off();
        p.seed = 4242 + (uint32_t)si;
        gemma3_sampler *s;
        float *l = malloc((size_t)V * sizeof *l);
        if (!l || gemma3_sampler_init(&p, V, &s) != GEMMA3_OK) {
            CHECK(0);
            free(l);
            return;
        }
        for (int i = 0; i < V; i++) l[i] = (float)(0.3 * unif());
        r->p = &p;
        r->seed = p.seed;
        r->V = V;
        r->hist_len = 0;
        static const char *const tiers[3] = {"float tier", "float tier at its error bound",
                                              "double tier"};
        for (int tier = 0; tier < 3; tier++) {
            g3_sampler_perturb_float_draw(s, tier == 1);
            g3_sampler_skip_float_draw(s, tier == 2);
            int wrong = 0, float0 = g3_sampler_float_tier_draws(s);
            for (int64_t pos = 0; pos < 20000; pos++)
                wrong += gemma3_sampler_sample(s, l, pos) != ref_sample(r, l, pos);
            int by_float = g3_sampler_float_tier_draws(s) - float0;
            printf("CDF walk, V %d, %s: %d of 20000 draws by the float tier, %d wrong\n", V,
                   tiers[tier], by_float, wrong);
            CHECK_MSG(wrong == 0, "V %d %s: %d draws differ", V, tiers[tier], wrong);
            CHECK_MSG(tier == 2 ? by_float == 0 : by_float > 19000, "V %d %s: %d by the float tier",
                      V, tiers[tier], by_float);
        }
        gemma3_sampler_free(s);
        free(l);
    }
}

/* The copies of the whole vocabulary (g3_copy_check_get, g3_copy_divide_get, g3_max_n_get) and
 * the check (g3_check_max_get): the scalar reference against their definition (dst bit for bit,
 * the finite flag, the largest value and the first position at it, from every tail length mod
 * 16), then every compiled instruction set against the scalar
 * one bit for bit, -0 against +0 in the maximum included. Rounds put the maximum in the ragged
 * tail, a NaN or an inf in the source, values that overflow the division (clamped to FLT_MAX)
 * and a row of zeros of both signs. */
static void check_copy_kernels(void) {
    enum { N = 4096 + 15 };
    static float src[N], ref[N], got[N];
    static const float temps[] = {0.7f, 1.5f, 1e-6f, 100.0f};
    int wrong = 0, wrong_isa = 0;
    for (int round = 0; round < 64; round++) {
        int n = N - round % 16 - 16 * (round % 3);
        for (int i = 0; i < N; i++) src[i] = (float)(20 * unif() - 15);
        if (round % 4 == 1) src[n - 1 - round % 7] = 30.0f; /* the maximum in the tail */
        if (round % 8 == 2) src[(round * 131) % n] = NAN;
        if (round % 8 == 3) src[(round * 131) % n] = -INFINITY;
        if (round % 8 == 4) src[(round * 131) % n] = INFINITY;
        if (round % 8 == 5) src[(round * 131) % n] = 3e38f;
        if (round % 8 == 6)
            for (int i = 0; i < n; i++) /* both signs of zero in every lane, in both orders */
                src[i] = (i * 7 + round) % 5 ? -1.0f : unif() < 0.5 ? 0.0f : -0.0f;
        float t = temps[round % 4];
        int finite = 1, nan = 0; /* the maximum counts where no value is NaN: -inf is a ban */
        float want_max = -INFINITY;
        for (int i = 0; i < n; i++) {
            finite &= isfinite(src[i]);
            nan |= isnan(src[i]);
            float v = src[i] / t;
            want_max = v > FLT_MAX ? FLT_MAX : v > want_max ? v : want_max;
        }
        float mx, cmx;
        int first, cfirst;
        int ok = g3_copy_check_get(0)(ref, src, n);
        wrong += ok != finite || memcmp(ref, src, (size_t)n * sizeof *src) != 0;
        ok = g3_copy_divide_get(0)(ref, src, n, t, &mx, &first);
        wrong += ok != finite;
        for (int i = 0; i < n; i++) {
            float v = src[i] / t;
            v = v > FLT_MAX ? FLT_MAX : v;
            wrong += memcmp(&v, &ref[i], sizeof v) != 0 && !isnan(v);
        }
        if (!nan) wrong += mx != want_max; /* == : the sign of a zero maximum may differ */
        float mn = g3_max_n_get(0)(ref, n);
        if (!nan) wrong += mn != want_max || memcmp(&mn, &mx, sizeof mx) != 0;
        /* the first position at the maximum, from the dividing copy and from the check */
        int want_first = 0;
        while (want_first < n && ref[want_first] != mx) want_first++;
        if (!nan) wrong += first != want_first;
        int ref_finite = 1;
        for (int i = 0; i < n; i++) ref_finite &= isfinite(ref[i]);
        wrong += g3_check_max_get(0)(ref, n, &cmx, &cfirst) != ref_finite;
        if (!nan) wrong += memcmp(&cmx, &mx, sizeof mx) != 0 || cfirst != want_first;
        for (int isa = 1; isa <= 2; isa++) {
            g3_copy_check_fn cc = g3_copy_check_get(isa);
            g3_copy_divide_fn cd = g3_copy_divide_get(isa);
            g3_max_n_fn mf = g3_max_n_get(isa);
            g3_check_max_fn cm = g3_check_max_get(isa);
            if (!cc || !cd || !mf || !cm) continue;
            float mx2;
            int first2;
            wrong_isa += cc(got, src, n) != g3_copy_check_get(0)(ref, src, n);
            wrong_isa += memcmp(got, ref, (size_t)n * sizeof *got) != 0;
            wrong_isa += cd(got, src, n, t, &mx2, &first2) !=
                         g3_copy_divide_get(0)(ref, src, n, t, &mx, &first);
            wrong_isa += memcmp(got, ref, (size_t)n * sizeof *got) != 0;
            if (!nan) {
                wrong_isa += memcmp(&mx2, &mx, sizeof mx) != 0 || first2 != first;
                float a = mf(ref, n), b = g3_max_n_get(0)(ref, n);
                wrong_isa += memcmp(&a, &b, sizeof a) != 0;
                wrong_isa += cm(ref, n, &mx2, &first2) != ref_finite ||
                             memcmp(&mx2, &cmx, sizeof mx) != 0 || first2 != cfirst;
            }
        }
    }
    CHECK_MSG(wrong == 0, "copy kernels: %d differences from their definition", wrong);
    CHECK_MSG(wrong_isa == 0, "copy kernels: %d differences between instruction sets", wrong_isa);
}

/* The sampler s and the reference r set for params p in draw mode `mode` (0 CDF, 1 Gumbel),
 * the history emptied; 0 (a failed check) when the parameters are refused. */
static int restart_in_mode(gemma3_sampler *s, gemma3_sampler_params *p, int mode, struct ref *r,
                           int V) {
    p->mode = mode ? GEMMA3_SAMPLER_MODE_GUMBEL : GEMMA3_SAMPLER_MODE_CDF;
    if (g3_sampler_set_params(s, p) != GEMMA3_OK) {
        CHECK(0);
        return 0;
    }
    gemma3_sampler_reset(s);
    r->p = p;
    r->seed = p->seed;
    r->V = V;
    return 1;
}

/* Temperature before the samplers that rewrite logits ("ted": no chain of chain() has that
 * order): the dividing copy finds the maximum on its way and the draw reuses it, so penalties
 * and DRY, which then lower logits, the top token's among them (the history holds it), must
 * make it forget it. Both modes against the reference, at Gemma's vocabulary size. */
static void check_temperature_first(struct ref *r, float *l, int32_t *hist) {
    enum { V = 262144 };
    gemma3_sampler_params p = all_off();
    gemma3_sampler_chain_from_seq("ted", &p);
    p.repeat_penalty = 1.5f;
    p.frequency_penalty = 2.0f;
    p.presence_penalty = 1.0f;
    p.repeat_last_n = 256;
    p.dry_multiplier = 0.8f;
    p.dry_penalty_last_n = 256;
    gemma3_sampler *s;
    if (gemma3_sampler_init(&p, V, &s) != GEMMA3_OK) {
        CHECK(0);
        return;
    }
    int wrong = 0;
    for (int v = 0; v < 12; v++) {
        rng_state = 0x7e3f + (uint64_t)v;
        make_logits(l, V, v % 3 == 2 ? 8 : v % 3); /* gaussian, ties, huge magnitudes */
        int n = 200;
        make_history(hist, n, V);
        int32_t top = 0;
        for (int i = 1; i < V; i++) top = l[i] > l[top] ? i : top;
        for (int i = 0; i < 8; i++) hist[n - 1 - 3 * i] = top; /* penalised, and repeated */
        p.temperature = v % 2 ? 0.7f : 1.5f;
        p.seed = (uint32_t)next();
        for (int mode = 0; mode < 2; mode++) {
            if (!restart_in_mode(s, &p, mode, r, V)) continue;
            for (int i = 0; i < n; i++) gemma3_sampler_accept(s, hist[i]);
            r->hist = hist;
            r->hist_len = n;
            for (int64_t pos = 0; pos < 4; pos++)
                wrong += gemma3_sampler_sample(s, l, pos) != ref_sample(r, l, pos);
        }
    }
    CHECK_MSG(wrong == 0, "temperature first: %d draws differ from the reference", wrong);
    gemma3_sampler_free(s);
}

/* Mirostat v1 over Gemma's vocabulary, many steps: its top 100 and its top k come from a heap
 * over the positions that reach the smallest of m group maxima (sampling/candidates.c,
 * positions_reaching); a bound too high drops one of the first m and the draw, or mu, moves
 * off the reference's. Vectors with ties, few levels and bans, a new one each step; mu (and so
 * k) wanders. */
static void check_mirostat_v1_selection(struct ref *r, float *l) {
    enum { V = 262144 };
    static const int kinds[] = {0, 1, 2, 3, 5};
    gemma3_sampler_params p = all_off();
    p.mirostat = 1;
    gemma3_sampler *s;
    if (gemma3_sampler_init(&p, V, &s) != GEMMA3_OK) {
        CHECK(0);
        return;
    }
    int wrong = 0;
    for (int v = 0; v < 5; v++) {
        rng_state = 0x3170 + (uint64_t)v;
        p.mirostat_tau = v % 2 ? 3.0f : 8.0f; /* small and large k */
        p.temperature = v % 3 ? 1.0f : 0.7f;
        p.seed = (uint32_t)next();
        for (int mode = 0; mode < 2; mode++) {
            if (!restart_in_mode(s, &p, mode, r, V)) continue;
            r->hist_len = 0;
            r->mu = 2.0f * p.mirostat_tau;
            for (int64_t pos = 0; pos < 12; pos++) { /* a new vector per step: scratch left by
                                                       * the last call must not answer */
                make_logits(l, V, kinds[v]);
                wrong += gemma3_sampler_sample(s, l, pos) != ref_sample(r, l, pos);
            }
        }
    }
    CHECK_MSG(wrong == 0, "mirostat v1 selection: %d draws differ from the reference", wrong);
    gemma3_sampler_free(s);
}

/* g3_positions_reaching, the bound of mirostat v1's selections, against its claim: at least m
 * positions, ascending, every one of the first m of the total order (qsorted here) among them;
 * on a fresh buffer, so that nothing left over can stand in for a dropped token. Several kinds
 * of vector, the sizes and the m mirostat uses (100, its k up to n/64), odd n. */
static void check_positions_reaching(struct ref *r, float *l) {
    static const int sizes[] = {262144, 32768, 6400 + 9};
    static const int ms[] = {1, 7, 100, 129, 1369, 4096};
    gemma3_sampler_params p = all_off();
    gemma3_sampler *s;
    if (gemma3_sampler_init(&p, sizes[0], &s) != GEMMA3_OK) {
        CHECK(0);
        return;
    }
    int wrong = 0;
    for (int si = 0; si < 3; si++)
        for (int kind = 0; kind < 8; kind++) {
            int V = sizes[si];
            rng_state = 0x9051 + (uint64_t)(si * 16 + kind);
            make_logits(l, V, kind);
            if (kind == 7) l[V - 1] = 1.0f; /* all banned but one */
            for (int i = 0; i < V; i++) r->c[i] = i;
            cmp_logits = l;
            qsort(r->c, (size_t)V, sizeof *r->c, cmp_total);
            for (int mi = 0; mi < 6 && ms[mi] <= V / 64; mi++) {
                int m = ms[mi];
                for (int i = 0; i < V; i++) r->tmp[i] = -1;
                int nsub = g3_positions_reaching(s, l, V, m, r->tmp);
                wrong += nsub < m || nsub > V;
                for (int i = 1; i < nsub && i < V; i++) wrong += r->tmp[i] <= r->tmp[i - 1];
                for (int i = 0; i < nsub && i < V; i++) r->cnt[r->tmp[i]] = 1;
                for (int i = 0; i < m; i++) wrong += r->cnt[r->c[i]] != 1;
                for (int i = 0; i < nsub && i < V; i++) r->cnt[r->tmp[i]] = 0;
            }
        }
    CHECK_MSG(wrong == 0, "positions reaching the group bound: %d errors", wrong);
    gemma3_sampler_free(s);
}

/* A sampler for V tokens with every sampler off, or NULL (a failed check). */
static gemma3_sampler *sampler_all_off(int V) {
    gemma3_sampler_params p = all_off();
    gemma3_sampler *s;
    if (gemma3_sampler_init(&p, V, &s) != GEMMA3_OK) {
        CHECK(0);
        return NULL;
    }
    return s;
}

/* The reference's list: the whole vocabulary of l, in id order. */
static void ref_load(struct ref *r, const float *l, int V) {
    memcpy(r->l, l, (size_t)V * sizeof *l);
    for (int i = 0; i < V; i++) r->c[i] = i;
    r->n = V;
}

/* The reference's set after its samplers (r->c, r->n: in its order, for its draws) and the same
 * ids ascending without the banned ones (the form of g3_sampler_kept's answer), with room for
 * the engine's kept set. */
struct ref_set {
    int32_t *ids, *sorted, *kept;
    int n, n_finite;
};

static void ref_set_free(struct ref_set *rs) {
    free(rs->ids);
    free(rs->sorted);
    free(rs->kept);
}

/* Buffers for vocabularies up to V; 0 (a failed check) when memory runs out. */
static int ref_set_alloc(struct ref_set *rs, int V) {
    rs->ids = malloc((size_t)V * sizeof *rs->ids);
    rs->sorted = malloc((size_t)V * sizeof *rs->sorted);
    rs->kept = malloc((size_t)V * sizeof *rs->kept);
    if (rs->ids && rs->sorted && rs->kept) return 1;
    ref_set_free(rs);
    CHECK(0);
    return 0;
}

static void ref_set_take(struct ref_set *rs, const struct ref *r, const float *l) {
    rs->n = r->n;
    memcpy(rs->ids, r->c, (size_t)rs->n * sizeof *rs->ids);
    memcpy(rs->sorted, rs->ids, (size_t)rs->n * sizeof *rs->sorted);
    qsort(rs->sorted, (size_t)rs->n, sizeof *rs->sorted, cmp_id);
    rs->n_finite = 0;
    for (int i = 0; i < rs->n; i++)
        if (l[rs->sorted[i]] != -INFINITY) rs->sorted[rs->n_finite++] = rs->sorted[i];
}

/* The engine, just restarted, against the reference set: its kept set, then its draws at
 * positions 0..positions-1 (where nothing finite is left, the sampler's fallback: the argmax).
 * Returns how many differ, printing them while *printed < 5 under label. */
static int compare_set_and_draws(struct ref *r, gemma3_sampler *s, const float *l, int V,
                                 const struct ref_set *rs, int positions, const char *label,
                                 int *printed) {
    memcpy(r->c, rs->ids, (size_t)rs->n * sizeof *r->c);
    r->n = rs->n;
    int n_kept = g3_sampler_kept(s, l, 0, rs->kept), wrong = 0;
    if (n_kept != rs->n_finite ||
        memcmp(rs->kept, rs->sorted, (size_t)rs->n_finite * sizeof *rs->kept) != 0) {
        if ((*printed)++ < 5) printf("%s: kept %d, want %d\n", label, n_kept, rs->n_finite);
        wrong++;
    }
    for (int pos = 0; pos < positions; pos++) {
        int32_t want = rs->n == 1 ? rs->ids[0] : ref_draw(r, pos);
        if (want < 0)
            for (int i = want = 0; i < V; i++) want = l[i] > l[want] ? i : want;
        int32_t got = gemma3_sampler_sample(s, l, pos);
        if (got != want) {
            if ((*printed)++ < 5) printf("%s pos %d: %d, want %d\n", label, pos, got, want);
            wrong++;
        }
    }
    return wrong;
}

/* XTC over a whole vocabulary: a low bulk and a few leaders whose probabilities straddle the
 * threshold. Its count takes Z from the rank view when XTC is last in CDF mode, else from the
 * rough sums or, with them off on a third of the vectors, the float tier (Gumbel mode, or a
 * temperature after it); the kept set and the draws of both modes against the reference's,
 * which computes every p. In Gumbel mode with XTC last, the winner among the tokens XTC cannot
 * drop answers some draws without the count (xtc_winner_first in sampling.c) and the leaders
 * win the others, or the comparison would not test both ways. */
static void check_xtc_whole_vocab(struct ref *r, float *l) {
    static const int sizes[] = {262144, 32768};
    enum { POSITIONS = 12 };
    struct ref_set rs;
    if (!ref_set_alloc(&rs, 262144)) return;
    int wrong = 0, dropped = 0, cases = 0, printed = 0, winner = 0, last_gumbel = 0;
    for (int si = 0; si < 2; si++) {
        int V = sizes[si];
        gemma3_sampler_params p = all_off();
        gemma3_sampler *s = sampler_all_off(V);
        if (!s) continue;
        for (int v = 0; v < 24; v++) {
            for (int i = 0; i < V; i++) l[i] = (float)(-12 + 2 * unif());
            int leaders = 2 + (int)(next() % 7);
            for (int j = 0; j < leaders; j++) l[next() % V] = (float)(2.5 * unif());
            p = all_off();
            p.xtc_probability = 1.0f;
            p.xtc_threshold = (float)(0.02 + 0.45 * unif());
            /* a temperature before XTC (the default order) or after it (llama.cpp's) */
            p.temperature = v % 4 == 0 ? 1.0f : 0.8f;
            gemma3_sampler_chain_from_seq(v % 2 ? GEMMA3_SAMPLER_SEQ_LLAMA
                                                : GEMMA3_SAMPLER_SEQ_DEFAULT,
                                          &p);
            p.seed = (uint32_t)next();
            r->p = &p;
            r->seed = p.seed;
            r->V = V;
            ref_load(r, l, V);
            for (int i = 0; i < p.n_samplers; i++) {
                if (p.samplers[i] == GEMMA3_SAMPLER_XTC) ref_xtc(r, 0);
                if (p.samplers[i] == GEMMA3_SAMPLER_TEMPERATURE) ref_temperature(r, p.temperature);
            }
            ref_set_take(&rs, r, l);
            dropped += rs.n < V;
            for (int mode = 0; mode < 2; mode++) {
                if (!restart_in_mode(s, &p, mode, r, V)) continue;
                g3_sampler_skip_rough(s, v % 3 == 1); /* the float tier's Z, not the rough one */
                char label[96];
                snprintf(label, sizeof label, "xtc V %d vector %d thr %.3f T %.1f mode %d", V, v,
                         p.xtc_threshold, p.temperature, mode);
                int winner0 = g3_sampler_xtc_winner_draws(s);
                wrong += compare_set_and_draws(r, s, l, V, &rs, POSITIONS, label, &printed);
                winner += g3_sampler_xtc_winner_draws(s) - winner0;
                last_gumbel += mode == 1 && (v % 2 == 0 || p.temperature == 1.0f) ? POSITIONS : 0;
                cases++;
            }
        }
        gemma3_sampler_free(s);
    }
    printf("XTC over the whole vocabulary: %d cases (%d vectors drop tokens), %d wrong; the "
           "winner without the count answered %d of %d Gumbel draws with XTC last\n",
           cases, dropped, wrong, winner, last_gumbel);
    CHECK(wrong == 0);
    CHECK(dropped >= 8); /* the leaders make XTC act */
    CHECK_MSG(winner > 0 && winner < last_gumbel, "XTC's winner first answered %d of %d", winner,
              last_gumbel);
    ref_set_free(&rs);
}

/* The step k (of 5e-5 nats down from lmax + from, over a nat) where g3_exp_coarse reads lowest
 * (low) or highest against e^d. */
static int coarse_extreme_d(float lmax, double from, int low) {
    int best = 0;
    double best_ratio = low ? INFINITY : 0;
    for (int k = 0; k < 20000; k++) {
        float l = (float)(lmax + from - k * 5e-5);
        double ratio = g3_exp_coarse(l, lmax) / exp((double)l - lmax);
        if (low ? ratio < best_ratio : ratio > best_ratio) best_ratio = ratio, best = k;
    }
    return best;
}

/* XTC's count on the coarse sums near its limit (xtc_count_fast in sampling.c): two leaders,
 * the maximum at 0 and the second with p 0.5% past the threshold (or short of it), over a
 * bulk of ties that holds most of Z, placed where g3_exp_coarse reads 3% high (or low),
 * so that Z from the coarse sums taken with too small a bound would move the second leader to
 * the other side of the limit: XTC would then keep the maximum (or drop it). Kept sets and
 * draws in both modes against the reference's. */
static void check_xtc_coarse_edge(struct ref *r, float *l) {
    enum { V = 32768, POSITIONS = 12 };
    const float thr = 0.04f;
    struct ref_set rs;
    gemma3_sampler *s = sampler_all_off(V);
    if (!s || !ref_set_alloc(&rs, V)) {
        CHECK(0);
        gemma3_sampler_free(s);
        return;
    }
    int wrong = 0, printed = 0, dropped = 0;
    for (int high = 0; high < 2; high++) {
        double bulk_d = -7.4 - coarse_extreme_d(0.0f, -7.4, !high) * 5e-5;
        float bulk = (float)bulk_d;
        double m = (V - 2) * exp((double)bulk), want = thr * (high ? 1.005 : 0.995);
        l[0] = 0.0f; /* e^d1 = want Z, Z = 1 + e^d1 + m */
        l[1] = (float)log(want * (1 + m) / (1 - want));
        for (int i = 2; i < V; i++) l[i] = bulk;
        double z = 1 + exp((double)l[1]) + m, p1 = exp((double)l[1]) / z;
        CHECK_MSG(fabs(p1 / want - 1) < 1e-5 && 1 / z > 1.1 * thr && m > 0.75 * z,
                  "vector %d: p1 %g, p0 %g, bulk %g of z", high, p1, 1 / z, m / z);
        gemma3_sampler_params p = all_off();
        p.xtc_probability = 1.0f;
        p.xtc_threshold = thr;
        p.temperature = 1.0f;
        gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_DEFAULT, &p);
        p.seed = 5;
        r->p = &p;
        r->seed = p.seed;
        r->V = V;
        ref_load(r, l, V);
        ref_xtc(r, 0);
        ref_set_take(&rs, r, l);
        dropped += rs.n < V;
        for (int mode = 0; mode < 2; mode++) {
            if (!restart_in_mode(s, &p, mode, r, V)) continue;
            char label[64];
            snprintf(label, sizeof label, "xtc coarse edge, bulk reads %s, mode %d",
                     high ? "high" : "low", mode);
            wrong += compare_set_and_draws(r, s, l, V, &rs, POSITIONS, label, &printed);
        }
    }
    printf("XTC's count at the coarse sums' edge: %d of 2 vectors drop the maximum, %d wrong\n",
           dropped, wrong);
    CHECK(dropped == 1); /* the second leader past the threshold: the maximum goes */
    CHECK(wrong == 0);
    ref_set_free(&rs);
    gemma3_sampler_free(s);
}

/* A vector whose maximum (10) lies in its second, third or last quarter, at the offset within
 * the quarter of a token of the first 4,096 just below it (9), over a bulk far below: at
 * 262,144 tokens, past the first block of the Gumbel draw that checks as it goes (blocks of
 * 4,096 to 65,536 tokens: draw_gumbel_checking in sampling.c). Top-p 0.9 keeps both:
 * the maximum's Gumbel win over the whole vocabulary answers at once (its mass, 1/1.37 of the
 * whole, is below 0.9), the runner-up's sends top-p to the view. Top-p 0.5 keeps the maximum
 * alone, and every draw goes to the view. The draw meets the maximum only after a first
 * block with a maximum of its own, and values the tokens it kept before relative to the final
 * one. */
static void max_past_first_block(float *l, int V) {
    for (int i = 0; i < V; i++) l[i] = l[i] * 0.1f - 30.0f;
    int o = (int)(next() % 4096), k = 1 + (int)(next() % 3);
    l[o] = 9.0f;
    l[k * (V / 4) + o] = 10.0f;
}

/* The coarse sums near the nucleus's edge (top_p's winner first, nucleus_holds in
 * sampling.c): the tokens down to the winner lie where g3_exp_coarse reads 3% low and the rest,
 * most of the mass, where it reads 3% high, so that a bound taken too small would put the winner
 * inside a nucleus that ends just before it. In id order (the total order here): the maximum,
 * then 1,000 tokens between 2 and 3 nats below it, then the rest between 5 and 6 below. At each
 * position the winner over the whole vocabulary is found (top-p off); with p 1.5% short of the
 * mass before it the draw must come from the nucleus (the exact mass before it below p Z), with
 * p 10% past it the winner must stand, on the coarse sums. */
static void check_top_p_coarse_edge(float *l) {
    enum { V = 32768, G = 1000, POSITIONS = 96 };
    const float lmax = 10.0f;
    int ka = coarse_extreme_d(lmax, -2.0, 1), kb = coarse_extreme_d(lmax, -5.0, 0);
    l[0] = lmax;
    for (int i = 1; i < V; i++) /* decreasing: the total order is the id order */
        l[i] = i <= G ? (float)(lmax - 2.0 - ka * 5e-5) - 4e-6f * (float)i
                      : (float)(lmax - 5.0 - kb * 5e-5) - 4e-6f * (float)(i - G);
    double *before = malloc((V + 1) * sizeof *before);
    gemma3_sampler *s0 = sampler_all_off(V), *s1 = sampler_all_off(V);
    if (!before || !s0 || !s1) {
        CHECK(0);
        free(before);
        gemma3_sampler_free(s0);
        gemma3_sampler_free(s1);
        return;
    }
    before[0] = 0;
    for (int i = 0; i < V; i++) before[i + 1] = before[i] + exp((double)l[i] - lmax);
    const double z = before[V];
    gemma3_sampler_params p = all_off();
    p.mode = GEMMA3_SAMPLER_MODE_GUMBEL;
    p.seed = 77;
    CHECK(g3_sampler_set_params(s0, &p) == GEMMA3_OK);
    int edges = 0, wrong = 0, inside = 0, coarse = 0;
    for (int pos = 0; pos < POSITIONS; pos++) {
        gemma3_sampler_reset(s0);
        int32_t w = gemma3_sampler_sample(s0, l, pos);
        if (w < 2 || w > G || before[w] < 0.1 * z) continue; /* the 1,000, with mass before */
        for (int past = 0; past < 2; past++) {
            p.top_p = (float)(before[w] / z * (past ? 1.1 : 0.985));
            if (p.top_p >= 1.0f || g3_sampler_set_params(s1, &p) != GEMMA3_OK) continue;
            gemma3_sampler_reset(s1);
            int won = g3_sampler_top_p_winner_draws(s1);
            int was_coarse = g3_sampler_top_p_coarse_draws(s1);
            int32_t t = gemma3_sampler_sample(s1, l, pos);
            won = g3_sampler_top_p_winner_draws(s1) - won;
            was_coarse = g3_sampler_top_p_coarse_draws(s1) - was_coarse;
            if (past) {
                inside++;
                coarse += was_coarse;
                wrong += t != w || !won;
            } else {
                edges++;
                wrong += t < 0 || t == w || won || !(before[t] < (double)p.top_p * z);
            }
        }
    }
    printf("top-p's coarse sums at the nucleus's edge: %d winners just past it, %d inside "
           "(%d decided by the coarse sums), %d wrong\n",
           edges, inside, coarse, wrong);
    CHECK_MSG(wrong == 0, "%d wrong", wrong);
    CHECK_MSG(edges >= 20 && coarse == inside, "%d edges, %d of %d coarse", edges, coarse, inside);
    free(before);
    gemma3_sampler_free(s0);
    gemma3_sampler_free(s1);
}

/* Top-p over a whole vocabulary against the reference in both modes, at many positions: in
 * Gumbel mode, when the draw comes next, the winner over the whole vocabulary answers when it
 * surely lies in the nucleus (top_p in sampling.c), else the nucleus is built; the kept set,
 * which never takes that path, too. On the Gaussian vectors the winner must answer many draws
 * and leave some, or the comparison would not test both paths; on the last four vectors of each
 * size (max_past_first_block) it must answer some draws and leave some too. Every other vector
 * finds the boundary from the exact masses, as where the view leaves it open
 * (g3_sampler_view_open), a window either way: they must answer some. */
static void check_top_p_whole_vocab(struct ref *r, float *l) {
    static const int sizes[] = {262144, 32768};
    static const float ps[] = {0.95f, 0.5f, 0.999f, 0.1f, 0.9f, 0.7f};
    static const int kinds[] = {0, 1, 0, 2, 3, 4, 5, 9};
    enum { POSITIONS = 24 };
    struct ref_set rs;
    if (!ref_set_alloc(&rs, 262144)) return;
    int wrong = 0, printed = 0, calls = 0, winner = 0, gauss_gumbel = 0, gauss_winner = 0;
    int past_gumbel = 0, past_winner = 0, mass_sets = 0;
    for (int si = 0; si < 2; si++) {
        int V = sizes[si], nv = si == 0 ? 12 : 20; /* the last 4: max_past_first_block */
        gemma3_sampler_params p = all_off();
        gemma3_sampler *s = sampler_all_off(V);
        if (!s) continue;
        for (int v = 0; v < nv; v++) {
            int kind = kinds[v % 8];
            make_logits(l, V, kind);
            p = all_off();
            p.top_p = ps[v % 6];
            p.min_keep = v % 4 == 3 ? 1 + (int)(next() % 300) : 0;
            if (v >= nv - 4) {
                max_past_first_block(l, V);
                p.top_p = v % 2 ? 0.9f : 0.5f;
                p.min_keep = 0;
            }
            p.seed = (uint32_t)next();
            r->p = &p;
            ref_load(r, l, V);
            ref_top_p(r, p.top_p);
            ref_set_take(&rs, r, l);
            if (v % 4 == 1 && rs.n_finite > 2) {
                /* min_keep one below the nucleus, on the exact masses' path: a count short by
                 * two or more would take top-k's shorter prefix (the same set otherwise) */
                p.min_keep = rs.n_finite - 1;
                ref_load(r, l, V);
                ref_top_p(r, p.top_p);
                ref_set_take(&rs, r, l);
            }
            for (int mode = 0; mode < 2; mode++) {
                if (!restart_in_mode(s, &p, mode, r, V)) continue;
                g3_sampler_view_open(s, v % 2 ? G3_VIEW_OPEN_TOP_P : 0);
                char label[96];
                snprintf(label, sizeof label, "top-p V %d kind %d p %.3f min_keep %d mode %d", V,
                         kind, p.top_p, p.min_keep, mode);
                int winner0 = g3_sampler_top_p_winner_draws(s);
                wrong += compare_set_and_draws(r, s, l, V, &rs, POSITIONS, label, &printed);
                calls += POSITIONS;
                int won = g3_sampler_top_p_winner_draws(s) - winner0;
                winner += won;
                if (mode == 1 && v >= nv - 4) {
                    past_gumbel += POSITIONS;
                    past_winner += won;
                } else if (mode == 1 && kind == 0) {
                    gauss_gumbel += POSITIONS;
                    gauss_winner += won;
                }
            }
        }
        mass_sets += g3_sampler_top_p_mass_sets(s);
        gemma3_sampler_free(s);
    }
    printf("top-p over the whole vocabulary: %d draws, %d wrong; the Gumbel winner answered %d "
           "(Gaussian vectors: %d of %d, maximum past the first block: %d of %d); the exact "
           "masses found %d boundaries\n",
           calls, wrong, winner, gauss_winner, gauss_gumbel, past_winner, past_gumbel, mass_sets);
    CHECK_MSG(mass_sets > 0, "the exact masses found no top-p boundary: untested");
    CHECK_MSG(wrong == 0, "top-p: %d differences from the reference", wrong);
    CHECK_MSG(gauss_winner * 2 >= gauss_gumbel && gauss_winner < gauss_gumbel,
              "the Gumbel winner answered %d of %d draws: too few or all", gauss_winner,
              gauss_gumbel);
    CHECK_MSG(past_winner > 0 && past_winner < past_gumbel,
              "maximum past the first block: the winner answered %d of %d draws", past_winner,
              past_gumbel);
    ref_set_free(&rs);
}

/* The first token of typical's implicit set as the last Gumbel draw took it (its maximum, whose
 * rounding the draw's values carry) against the reference set's: 1 if it differs. */
static int check_typical_first(const gemma3_sampler *s, const float *l, const struct ref_set *rs,
                               const char *label, int *printed) {
    int32_t got = g3_sampler_typical_first(s), want = -1;
    if (got < 0) return 0;
    for (int i = 0; i < rs->n_finite; i++) /* ids ascending: the first at the maximum */
        if (want < 0 || l[rs->sorted[i]] > l[want]) want = rs->sorted[i];
    if (got == want) return 0;
    if ((*printed)++ < 5) printf("%s: typical's first token %d, want %d\n", label, got, want);
    return 1;
}

/* Where the last draw left typical's set implicit with its weight in the fine tier's weights:
 * that weight against the set's own, summed here (the walks compare it with sums of those
 * weights, so a weight of another tier would shift the draw's target). Returns 1 when checked;
 * a difference counts in *wrong. */
static int check_typical_mass(const gemma3_sampler *s, const float *l, int V,
                              const struct ref_set *rs, const char *label, int *printed,
                              int *wrong) {
    int fine;
    double mass = g3_sampler_typical_mass(s, &fine), want = 0;
    if (mass < 0 || !fine) return 0;
    float lmax = -INFINITY;
    for (int i = 0; i < V; i++) lmax = fmaxf(lmax, l[i]);
    for (int i = 0; i < rs->n_finite; i++) want += g3_approx_weight(l[rs->sorted[i]], lmax);
    if (fabs(mass - want) > 1e-12 * want) {
        if ((*printed)++ < 5)
            printf("%s: the set's fine mass %.17g, want %.17g\n", label, mass, want);
        ++*wrong;
    }
    return 1;
}

/* Typical over a whole vocabulary (the rank view's walk by distance, sampling/rank.c) against
 * the reference: vectors of every kind at three sizes, several typical_p and min_keep, some
 * with a temperature after typical, each vector's reference set computed once and drawn from at
 * many positions in both modes, and the kept set compared too. The fast path must answer most
 * of the Gaussian vectors' sets and of their draws with the set kept implicit (both modes, when
 * the draw comes next), or the comparison would not test it. */
static void check_typical_whole_vocab(struct ref *r, float *l) {
    static const int sizes[] = {262144, 32768, 6000};
    static const float tps[] = {0.9f, 0.5f, 0.99f, 0.2f, 0.999f, 0.02f};
    enum { POSITIONS = 24 };
    struct ref_set rs;
    if (!ref_set_alloc(&rs, 262144)) return;
    int wrong = 0, printed = 0, calls = 0, sets = 0, draws = 0;
    int gauss_calls = 0, gauss_sets = 0, gauss_next = 0, gauss_draws = 0, dom_calls = 0,
        dom_sets = 0, fine_masses = 0, pending_draws = 0, resolved = 0;
    for (int si = 0; si < 3; si++) {
        int V = sizes[si], nv = si == 0 ? 9 : 18;
        gemma3_sampler_params p = all_off();
        gemma3_sampler *s = sampler_all_off(V);
        if (!s) continue;
        for (int v = 0; v < nv; v++) {
            int kind = v % 9;
            make_logits(l, V, kind);
            p.typical_p = v < 6 ? tps[v] : (float)unif();
            p.min_keep = v % 4 == 3 ? 1 + (int)(next() % 300) : 0;
            p.seed = (uint32_t)next();
            r->p = &p;
            ref_load(r, l, V);
            ref_typical(r, p.typical_p);
            /* then a temperature on some (llama.cpp's order: temperature last): the CDF draw
             * walks typical's order with the new weights */
            p.temperature = v % 3 == 2 ? 0.7f : 1.0f;
            gemma3_sampler_chain_from_seq(v % 3 == 2 ? GEMMA3_SAMPLER_SEQ_LLAMA
                                                     : GEMMA3_SAMPLER_SEQ_DEFAULT,
                                          &p);
            ref_temperature(r, p.temperature);
            ref_set_take(&rs, r, l);
            int n_ref = rs.n;
            for (int mode = 0; mode < 2; mode++) {
                int sets0, draws0, pend0, res0;
                g3_sampler_typical_fast(s, &sets0, &draws0);
                g3_sampler_typical_pending(s, &pend0, &res0);
                if (!restart_in_mode(s, &p, mode, r, V)) continue;
                /* the fine tier's walks on Gaussian bulks without a temperature after: the
                 * sets (kind 0 first, kind 3 later), the draws over a set the view found */
                int skip = kind == 0 ? 1 + (v >= 9) : kind == 3 ? 2 - (v >= 9) : 0;
                g3_sampler_view_open(s, skip);
                char label[96];
                snprintf(label, sizeof label, "typical V %d kind %d tp %.3f min_keep %d mode %d",
                         V, kind, p.typical_p, p.min_keep, mode);
                wrong += compare_set_and_draws(r, s, l, V, &rs, POSITIONS, label, &printed);
                calls += POSITIONS;
                wrong += check_typical_first(s, l, &rs, label, &printed);
                fine_masses += check_typical_mass(s, l, V, &rs, label, &printed, &wrong);
                int sets1, draws1, pend1, res1;
                g3_sampler_typical_fast(s, &sets1, &draws1);
                g3_sampler_typical_pending(s, &pend1, &res1);
                pending_draws += pend1 - pend0;
                resolved += res1 - res0;
                sets += sets1 - sets0;
                draws += draws1 - draws0;
                /* Gaussian bulks: the rank view's case (in CDF mode only when the draw is next);
                 * the set stays implicit when the draw is next */
                if (kind == 5 && (mode == 1 || p.temperature == 1.0f)) { /* a set of one */
                    dom_calls += POSITIONS + 1;
                    dom_sets += sets1 - sets0;
                }
                if (kind <= 3 && n_ref > 1 && (mode == 1 || p.temperature == 1.0f)) {
                    gauss_calls += POSITIONS + 1;
                    gauss_sets += sets1 - sets0;
                    gauss_next += p.temperature == 1.0f ? POSITIONS : 0;
                    gauss_draws += draws1 - draws0;
                }
            }
        }
        gemma3_sampler_free(s);
    }
    printf("typical over the whole vocabulary: %d draws, %d wrong; the rank view answered %d sets "
           "and %d draws (Gaussian bulks: %d of %d sets, %d of %d draws next; one dominant "
           "token: %d of %d sets); %d draws walked a pending set, %d found its crossing first\n",
           calls, wrong, sets, draws, gauss_sets, gauss_calls, gauss_draws, gauss_next, dom_sets,
           dom_calls, pending_draws, resolved);
    CHECK_MSG(wrong == 0, "typical: %d differences from the reference", wrong);
    CHECK_MSG(pending_draws > 0 && resolved > 0,
              "pending sets: %d draws from the bracket, %d found first: a path untested",
              pending_draws, resolved);
    CHECK_MSG(gauss_sets * 10 >= gauss_calls * 9 && gauss_draws * 10 >= gauss_next * 9,
              "the rank view answered too few typical calls to be tested");
    CHECK_MSG(dom_sets == dom_calls, "the rank view answered %d of %d sets of one dominant token",
              dom_sets, dom_calls);
    CHECK_MSG(fine_masses > 0, "no set's mass was checked in the fine tier");
    ref_set_free(&rs);
}

/* Logits of a Gaussian bulk of standard deviation sd (Box-Muller from two doubles: every
 * float in the range can occur, so that distinct logits lie as close as floats do). */
static void bulk_logits(float *l, int V, double sd) {
    for (int i = 0; i < V; i++) {
        double u1 = unif(), u2 = unif();
        l[i] = (float)(sd * sqrt(-2 * log(u1 > 0 ? u1 : 0x1p-60)) * cos(6.283185307179586 * u2));
    }
}

/* Typical's pending sets (the draw next: sampling/rank.c's typical_defer) against the reference
 * set, after each draw that left one, in both modes: every token nearer to the centre than the
 * distance the set claims is in it, none beyond the other, and its weight lies in the claimed
 * range. Gaussian bulks with strong leaders (bench-sampling's shape), some on eighths of a nat
 * (ties), some on 64ths with every token at the top of its view bucket or (the maximum raised
 * by 0.999/64) at the bottom, where a centre from the bucket sums alone errs the most; on half
 * the vectors min_keep runs past the crossing, which a pending set must not claim. The draws
 * against the reference too; on one vector in eight the Gumbel winner is sent to the found set
 * (G3_VIEW_OPEN_TYPICAL_WINNER), whose draw must come from the view's set. */
static void check_typical_pending(struct ref *r, float *l) {
    enum { V = 262144, VECTORS = 16, POSITIONS = 8 };
    struct ref_set rs;
    if (!ref_set_alloc(&rs, V)) return;
    gemma3_sampler_params p = all_off();
    gemma3_sampler *s = sampler_all_off(V);
    uint8_t *in = malloc(V);
    int wrong = 0, printed = 0, checked = 0, gumbel_checked = 0, min_keep_vectors = 0;
    int forced = 0, forced_fast = 0; /* Gumbel winners the hook sent to the found set */
    for (int v = 0; s && in && v < VECTORS; v++) {
        bulk_logits(l, V, v % 3 == 0 ? 1.0 : 2.5);
        for (int j = 0; j < 8; j++) l[next() % V] += 12.0f - (float)j;
        if (v % 4 == 1)
            for (int i = 0; i < V; i++) l[i] = roundf(l[i] * 8) / 8;
        if (v % 8 == 3 || v % 8 == 6) {
            int top = 0;
            for (int i = 0; i < V; i++) {
                l[i] = roundf(l[i] * 64) / 64;
                top = l[i] > l[top] ? i : top;
            }
            if (v % 8 == 6) l[top] += 0.999f / 64;
        }
        p.typical_p = (float)(0.8 + 0.15 * unif());
        p.min_keep = 0;
        p.seed = (uint32_t)next();
        r->p = &p;
        ref_load(r, l, V);
        ref_typical(r, p.typical_p);
        if (v % 2 == 1) { /* the set then runs past its crossing */
            p.min_keep = r->n + 1 + (int)(next() % 64);
            ref_load(r, l, V);
            ref_typical(r, p.typical_p);
            min_keep_vectors++;
        }
        ref_set_take(&rs, r, l);
        float lmax = -INFINITY;
        for (int i = 0; i < V; i++) lmax = fmaxf(lmax, l[i]);
        memset(in, 0, V);
        double w = 0;
        for (int i = 0; i < rs.n; i++) {
            in[rs.ids[i]] = 1;
            w += exp((double)l[rs.ids[i]] - lmax);
        }
        for (int pos = 0; pos < 2 * POSITIONS; pos++) { /* CDF, then Gumbel */
            if (pos % POSITIONS == 0 && !restart_in_mode(s, &p, pos / POSITIONS, r, V)) break;
            memcpy(r->c, rs.ids, (size_t)rs.n * sizeof *r->c);
            r->n = rs.n;
            int force = pos >= POSITIONS && v % 8 == 2, draws, resolved, after, sets, fast, fast2;
            g3_sampler_view_open(s, force ? G3_VIEW_OPEN_TYPICAL_WINNER : 0);
            g3_sampler_typical_pending(s, &draws, &resolved);
            g3_sampler_typical_fast(s, &sets, &fast);
            int32_t want = ref_draw(r, pos), got = gemma3_sampler_sample(s, l, pos);
            g3_sampler_typical_pending(s, &draws, &after);
            g3_sampler_typical_fast(s, &sets, &fast2);
            forced += force && after > resolved;
            forced_fast += force && after > resolved && fast2 > fast;
            double c, sure, far, w_lo, w_hi;
            int bad = got != want;
            if (g3_sampler_typical_pending_set(s, &c, &sure, &far, &w_lo, &w_hi)) {
                checked++;
                gumbel_checked += pos >= POSITIONS;
                for (int i = 0; i < V; i++) {
                    double d = fabs((double)l[i] - c);
                    bad += in[i] ? d > far : d < sure;
                }
                bad += !(w > w_lo * (1 - 0x1p-24) && w <= w_hi * (1 + 0x1p-24));
            }
            if (bad && printed++ < 5)
                printf("typical pending, vector %d pos %d: token %d (want %d), %d wrong claims\n",
                       v, pos, got, want, bad - (got != want));
            wrong += bad > 0;
        }
    }
    printf("typical's pending sets: %d draws left one (%d in Gumbel mode), checked against the "
           "reference (%d vectors with min_keep past the crossing), %d Gumbel winners sent to "
           "the found set (%d drawn from the view's), %d wrong\n",
           checked, gumbel_checked, min_keep_vectors, forced, forced_fast, wrong);
    CHECK_MSG(s && in, "typical pending: out of memory");
    CHECK_MSG(wrong == 0, "typical pending: %d draws wrong or with wrong claims", wrong);
    CHECK_MSG(forced >= POSITIONS && forced_fast == forced,
              "typical pending: %d Gumbel winners sent to the set, %d drawn from the view's",
              forced, forced_fast);
    CHECK_MSG(checked - gumbel_checked >= VECTORS * POSITIONS / 4 &&
                  gumbel_checked >= VECTORS * POSITIONS / 4,
              "typical pending: only %d draws left one (%d in Gumbel mode)", checked,
              gumbel_checked);
    free(in);
    gemma3_sampler_free(s);
    ref_set_free(&rs);
}

/* The centre of the reference's typical scores, lmax + ln z - h (each score is the distance
 * from it up to the token's own roundings), for the whole vocabulary. */
static double ref_typical_centre(struct ref *r, const float *l, int V) {
    ref_load(r, l, V);
    float lmax = ref_max(r);
    double z = ref_z(r, lmax);
    return lmax + log(z) - ref_entropy(r, lmax, z);
}

/* The Gumbel draw's pending set takes typical's centre from the view's bucket sums alone, each
 * token's place within its bucket taken at the middle (sampling/rank.c's typical_centre): the
 * centre against the reference's, within the bound it claims, and the set's claims against the
 * reference set, on bulks where that centre errs the most: every token within 1/20 of its view
 * bucket's top or bottom (64ths of a nat less a random part of one, the maximum on the grid),
 * so that it lies nearly 1/128 nat off; no strong leader, so that the maximum's own weight,
 * whose place is known, is a small part of the total. One Gumbel draw per vector. */
static void check_typical_coarse_centre(struct ref *r, float *l) {
    enum { V = 32768, VECTORS = 96 };
    struct ref_set rs;
    if (!ref_set_alloc(&rs, V)) return;
    gemma3_sampler_params p = all_off();
    gemma3_sampler *s = sampler_all_off(V);
    uint8_t *in = malloc(V);
    int wrong = 0, checked = 0, printed = 0;
    double worst = 0; /* the centre's distance from the reference's over the bound it claims */
    for (int v = 0; s && in && v < VECTORS; v++) {
        bulk_logits(l, V, 1.5 + unif());
        int top = 0;
        for (int i = 0; i < V; i++) {
            l[i] = roundf(l[i] * 64) / 64;
            top = l[i] > l[top] ? i : top;
        }
        for (int i = 0; i < V; i++) /* below the maximum, off the grid by a random part */
            if (l[i] < l[top]) l[i] -= (float)(((v % 2 ? 0.95 : 0) + 0.05 * unif()) / 64);
        p.typical_p = (float)(0.5 + 0.45 * unif());
        p.min_keep = 0;
        p.seed = (uint32_t)next();
        r->p = &p;
        double centre = ref_typical_centre(r, l, V);
        ref_load(r, l, V);
        ref_typical(r, p.typical_p);
        ref_set_take(&rs, r, l);
        memset(in, 0, V);
        for (int i = 0; i < rs.n; i++) in[rs.ids[i]] = 1;
        if (!restart_in_mode(s, &p, 1, r, V)) break;
        memcpy(r->c, rs.ids, (size_t)rs.n * sizeof *r->c);
        r->n = rs.n;
        int32_t want = ref_draw(r, 0), got = gemma3_sampler_sample(s, l, 0);
        double c, sure, far, w_lo, w_hi;
        int bad = got != want;
        if (g3_sampler_typical_pending_set(s, &c, &sure, &far, &w_lo, &w_hi)) {
            checked++;
            for (int i = 0; i < V; i++) {
                double d = fabs((double)l[i] - c);
                bad += in[i] ? d > far : d < sure;
            }
            double off = fabs(c - centre) / (g3_sampler_typical_centre_err(s) + 1e-12);
            worst = fmax(worst, off);
            bad += !(off <= 1);
        }
        if (bad && printed++ < 5)
            printf("typical coarse centre, vector %d: token %d (want %d), %d wrong claims\n", v,
                   got, want, bad - (got != want));
        wrong += bad > 0;
    }
    printf("typical's centre from the bucket sums: %d of %d Gumbel draws left a pending set, "
           "the centre at most %.3f of its bound off, %d wrong\n",
           checked, VECTORS, worst, wrong);
    CHECK_MSG(s && in, "typical coarse centre: out of memory");
    CHECK_MSG(wrong == 0, "typical coarse centre: %d draws wrong or with wrong claims", wrong);
    CHECK_MSG(checked >= VECTORS / 2, "typical coarse centre: only %d pending sets", checked);
    free(in);
    gemma3_sampler_free(s);
    ref_set_free(&rs);
}

/* How far each token's logit moves the centre per nat, about: w (1 + d - mean) / Z, d its
 * logit less the maximum, into slope[]. */
static void centre_slopes(const float *l, int V, double *slope) {
    double lmax = -INFINITY, z = 0, s1 = 0;
    for (int i = 0; i < V; i++) lmax = fmax(lmax, l[i]);
    for (int i = 0; i < V; i++) {
        double w = exp(l[i] - lmax);
        z += w;
        s1 += w * (l[i] - lmax);
    }
    for (int i = 0; i < V; i++)
        slope[i] = exp(l[i] - lmax) / z * (1 + (l[i] - lmax) - s1 / z);
}

/* Typical's rank view where the exact scores nearly tie at the crossing, against the reference
 * (the set and draws of both modes). (a) Dense bulks: tokens of other logits within eps of the
 * crossing's distance on its side of the centre, ordered by their logits (the count must be
 * positive, or that argument went untested). (b) A token on the other side of the centre moved
 * to the crossing token's mirror image, and the centre then moved (by a third token's logit)
 * to within about 1e-11 of their midpoint: their order is the centre's to decide, finer than
 * the view knows it, so the exact computation must run. */
static void check_typical_close_scores(struct ref *r, float *l) {
    enum { POSITIONS = 12, DENSE = 12, MIRRORED = 16, VM = 32768 };
    struct ref_set rs;
    if (!ref_set_alloc(&rs, 262144)) return;
    int wrong = 0, printed = 0, tied = 0;
    for (int part = 0; part < 2; part++) {
        int V = part == 0 ? 262144 : VM, vectors = part == 0 ? DENSE : MIRRORED;
        gemma3_sampler_params p = all_off();
        gemma3_sampler *s = sampler_all_off(V);
        if (!s) continue;
        for (int v = 0; v < vectors; v++) {
            p.typical_p = (float)(part == 0 ? 0.3 + 0.67 * unif() : 0.5 + 0.45 * unif());
            p.seed = (uint32_t)next();
            bulk_logits(l, V, part == 0 ? 0.7 + 0.15 * (v % 3) : 2.0);
            for (int j = 0; j < 8; j++) l[next() % V] += 11.0f - (float)j; /* strong leaders */
            if (part == 1) {
                int32_t t = -1, j = -1, k = -1;
                double c = 0;
                for (int it = 0; it < 8; it++) {
                    c = ref_typical_centre(r, l, V);
                    r->p = &p;
                    ref_typical(r, p.typical_p);
                    int32_t crossing = r->c[r->n - 1];
                    if (crossing != t) { /* the nearest token on the other side: the mirror */
                        t = crossing;
                        double dt = fabs(l[t] - c), best = INFINITY;
                        for (int i = 0; i < V; i++)
                            if ((l[i] > c) != (l[t] > c) && fabs(fabs(l[i] - c) - dt) < best) {
                                best = fabs(fabs(l[i] - c) - dt);
                                j = i;
                            }
                        best = INFINITY; /* a light token moves the centre finely */
                        centre_slopes(l, V, r->w);
                        for (int i = 0; i < V; i++)
                            if (i != t && i != j && fabs(log(fabs(r->w[i]) / 4e-5)) < best) {
                                best = fabs(log(fabs(r->w[i]) / 4e-5));
                                k = i;
                            }
                    }
                    l[j] = (float)(2 * c - l[t]);
                    c = ref_typical_centre(r, l, V);
                    centre_slopes(l, V, r->w);
                    double move = (0.5 * ((double)l[t] + l[j]) - c) / r->w[k];
                    l[k] += (float)fmax(-1, fmin(1, move)); /* a nat at most: no runaway */
                }
                c = ref_typical_centre(r, l, V);
                tied += fabs(fabs(l[j] - c) - fabs(l[t] - c)) < 1e-10;
            }
            r->p = &p;
            ref_load(r, l, V);
            ref_typical(r, p.typical_p);
            ref_set_take(&rs, r, l);
            for (int mode = 0; mode < 2; mode++) {
                if (!restart_in_mode(s, &p, mode, r, V)) continue;
                char label[96];
                snprintf(label, sizeof label, "typical close scores part %d vector %d mode %d",
                         part, v, mode);
                wrong += compare_set_and_draws(r, s, l, V, &rs, POSITIONS, label, &printed);
            }
        }
        int sets, draws;
        g3_sampler_typical_fast(s, &sets, &draws);
        int by_logit = g3_sampler_typical_by_logit(s), fine_close = g3_sampler_typical_fine_close(s);
        int pending, resolved;
        g3_sampler_typical_pending(s, &pending, &resolved);
        printf("typical, close scores, %s: the rank view answered %d sets and %d draws (%d from "
               "a pending set, %d finding its crossing first), %d of its walks ordered "
               "neighbours by logit, the fine tier %d sets of scores too close for the view\n",
               part == 0 ? "dense bulks" : "mirrored crossings", sets, draws, pending, resolved,
               by_logit, fine_close);
        if (part == 0)
            CHECK_MSG(by_logit > 0, "no walk ordered a neighbour by its logit: untested");
        else /* the mirrored scores lie within the view's eps, not the fine tier's */
            CHECK_MSG(fine_close > 0, "the fine tier found no set of close scores: untested");
        gemma3_sampler_free(s);
    }
    printf("typical, close scores: %d of %d crossings mirrored within 1e-10 of the centre, %d "
           "wrong\n",
           tied, MIRRORED, wrong);
    CHECK_MSG(wrong == 0, "typical close scores: %d differences from the reference", wrong);
    CHECK_MSG(tied * 2 >= MIRRORED, "only %d of %d crossings mirrored", tied, MIRRORED);
    ref_set_free(&rs);
}

int main(void) {
    int vectors = DEFAULT_VECTORS;
    const char *env = getenv("G3_CHAINS_VECTORS");
    if (env) vectors = atoi(env);
    static const int sizes[] = {262144, 32768, 5000, 300, 7, 2, 1};
    const int n_sizes = sizeof sizes / sizeof sizes[0];
    int Vmax = sizes[0];
    float *l = malloc((size_t)Vmax * sizeof *l);
    int32_t *hist = malloc(HIST_CAP * sizeof *hist);
    struct ref r = {0};
    r.l = malloc((size_t)Vmax * sizeof *r.l);
    r.c = malloc((size_t)Vmax * sizeof *r.c);
    r.tmp = malloc((size_t)Vmax * sizeof *r.tmp);
    r.w = malloc((size_t)Vmax * sizeof *r.w);
    r.cnt = calloc((size_t)Vmax, sizeof *r.cnt);
    if (!l || !hist || !r.l || !r.c || !r.tmp || !r.w || !r.cnt) {
        CHECK(0);
        return check_report();
    }
    check_bit_helpers();
    check_approx_exp();
    check_approx_expf();
    check_exp_rough();
    check_draw_tiers(&r);
    check_gumbel_screen();
    check_sigma_sums();
    check_rank_view();
    check_block_scan();
    check_copy_kernels();
    check_temperature_first(&r, l, hist);
    check_mirostat_v1_selection(&r, l);
    check_positions_reaching(&r, l);
    check_typical_whole_vocab(&r, l);
    check_typical_close_scores(&r, l);
    check_xtc_whole_vocab(&r, l);
    check_top_p_whole_vocab(&r, l);
    check_top_p_coarse_edge(l);
    check_xtc_coarse_edge(&r, l);
    check_typical_pending(&r, l); /* last: the draws above keep their random streams */
    check_typical_coarse_centre(&r, l);
    int calls = 0, mismatches = 0, single = 0, fallbacks = 0;
    int per_chain_fail[N_CHAINS] = {0};
    for (int si = 0; si < n_sizes; si++) {
        int V = sizes[si];
        gemma3_sampler_params init = all_off();
        init.repeat_last_n = -1; /* history buffers for the largest window */
        gemma3_sampler *s;
        if (gemma3_sampler_init(&init, V, &s) != GEMMA3_OK) {
            CHECK_MSG(0, "init: %s", gemma3_last_error());
            continue;
        }
        /* the big vocabulary is slow through the reference: fewer vectors there */
        int nv = V >= 262144 ? (vectors + 3) / 4 : vectors;
        for (int v = 0; v < nv; v++) {
            rng_state = 0xc0ffee + 1000003ull * (uint64_t)(si * 1000 + v);
            int kind = v % N_KINDS;
            if (V >= 262144) kind = (v * 3) % N_KINDS;
            make_logits(l, V, kind);
            int hist_len = (int)(next() % HIST_CAP);
            make_history(hist, hist_len, V);
            gemma3_sampler_reset(s);
            for (int i = 0; i < hist_len; i++) gemma3_sampler_accept(s, hist[i]);
            r.hist = hist;
            r.hist_len = hist_len;
            r.V = V;
            for (int c = 0; c < N_CHAINS; c++) {
                const char *name = "";
                gemma3_sampler_params p = chain(c, V, &name);
                p.seed = (uint32_t)next();
                for (int mode = 0; mode < 2; mode++) {
                    p.mode = mode ? GEMMA3_SAMPLER_MODE_GUMBEL : GEMMA3_SAMPLER_MODE_CDF;
                    if (g3_sampler_set_params(s, &p) != GEMMA3_OK) {
                        CHECK_MSG(0, "%s: %s", name, gemma3_last_error());
                        continue;
                    }
                    r.p = &p;
                    r.seed = p.seed;
                    r.mu = 2.0f * p.mirostat_tau;
                    for (int step = 0; step < 3; step++) { /* mirostat carries mu across */
                        int64_t pos = (int64_t)(next() % 100000);
                        /* the 32768 vocabulary also runs without the fast CDF walk */
                        g3_sampler_exact_draw_only(s, V == 32768 && (v & 1));
                        /* ... and others without the float tier of the fast walk */
                        g3_sampler_skip_float_draw(s, (V == 262144 || V == 5000) && (v & 2));
                        int32_t got = gemma3_sampler_sample(s, l, pos);
                        int32_t want = ref_sample(&r, l, pos);
                        calls++;
                        single += r.n == 1;
                        fallbacks += kind == 7;
                        if (got != want) {
                            if (mismatches++ < 10)
                                fprintf(stderr,
                                        "V %d vector %d (%s) chain %d (%s) %s step %d: engine %d, "
                                        "reference %d\n",
                                        V, v, kind_names[kind], c, name, mode ? "gumbel" : "cdf",
                                        step, (int)got, (int)want);
                            per_chain_fail[c]++;
                        }
                        if (!p.mirostat) break;
                    }
                }
            }
        }
        gemma3_sampler_free(s);
    }
    printf("%d calls over %d chains x 2 modes, %d vocabulary sizes: %d mismatches (%d kept one "
           "token, %d on all-banned vectors)\n",
           calls, N_CHAINS, n_sizes, mismatches, single, fallbacks);
    for (int c = 0; c < N_CHAINS; c++) {
        const char *name = "";
        rng_state = 0;
        chain(c, 300, &name);
        CHECK_MSG(per_chain_fail[c] == 0, "chain %d (%s): %d mismatches", c, name,
                  per_chain_fail[c]);
    }
    CHECK(calls >= 2 * N_CHAINS * vectors); /* every chain ran, in both modes */
    free(l);
    free(hist);
    free(r.l);
    free(r.c);
    free(r.tmp);
    free(r.w);
    free(r.cnt);
    return check_report();
}
