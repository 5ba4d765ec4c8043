/* test-sampling-gof.c - goodness of fit of the draws. For fixed logits over 64 tokens, at
 * T in {0.3, 1, 2} with the filters off and on (top-k 40, min-p 0.01, top-p 0.9), and at T 1
 * with epsilon 0.02 and with eta 0.02, 10^6 draws
 * (positions 0..N-1) from each path must match the exact filtered softmax computed here in
 * float64: Pearson chi-square below the alpha = 1e-4 critical value (Wilson-Hilferty; cells with
 * expected count < 5 merged), total variation < 0.01, per-token |z| < 5, zero draws outside the
 * kept set; the CDF and Gumbel histograms must also agree with each other (two-sample chi-square).
 * Then independence of consecutive steps (4x4 contingency), and XTC with a probability strictly
 * between 0 and 1 against its mixture distribution. Sanitizer builds and emulated ones
 * (make cross-test: -DG3_TEST_QUICK) draw 10^5. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "sampling/test-hooks.h"

#define V 64
#if defined(__SANITIZE_ADDRESS__) || defined(G3_TEST_QUICK)
#define N_DRAWS 100000
#define TV_MAX 0.04
#else
#define N_DRAWS 1000000
#define TV_MAX 0.01
#endif

/* Upper alpha = 1e-4 critical value of chi-square with df degrees of freedom (Wilson-Hilferty). */
static double chi2_critical(int df) {
    const double z = 3.719016485; /* standard normal upper 1e-4 quantile */
    double h = 2.0 / (9.0 * df);
    return df * pow(1 - h + z * sqrt(h), 3);
}

static const float *g_l;
static int cmp_order(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (g_l[x] != g_l[y]) return g_l[x] > g_l[y] ? -1 : 1;
    return x - y;
}

/* Float64 reference of the default chain (temperature, top-k, min-p, top-p): fills prob[V]. */
static void reference(const float *l, float t, int k, float min_p, float top_p, double *prob) {
    float lt[V];
    int order[V], kept = V;
    for (int i = 0; i < V; i++) {
        lt[i] = l[i] / t; /* the sampler divides in float, so do we */
        order[i] = i;
    }
    g_l = lt;
    qsort(order, V, sizeof order[0], cmp_order);
    if (k > 0 && k < kept) kept = k;
    double lmax = lt[order[0]];
    if (min_p > 0) {
        int m = 0;
        while (m < kept && lt[order[m]] >= lmax + log((double)min_p)) m++;
        kept = m > 0 ? m : 1;
    }
    if (top_p < 1) {
        double z = 0, cum = 0;
        for (int j = 0; j < kept; j++) z += exp(lt[order[j]] - lmax);
        int m = 0;
        while (m < kept && cum < top_p * z) cum += exp(lt[order[m++]] - lmax);
        kept = m > 0 ? m : 1;
    }
    double z = 0;
    for (int i = 0; i < V; i++) prob[i] = 0;
    for (int j = 0; j < kept; j++) z += prob[order[j]] = exp(lt[order[j]] - lmax);
    for (int j = 0; j < kept; j++) prob[order[j]] /= z;
}

/* Pearson statistic of counts against probabilities, cells with expected < 5 pooled. */
static double pearson(const long *count, const double *prob, long n, int *df) {
    double stat = 0, pool_e = 0, pool_o = 0;
    int cells = 0;
    for (int i = 0; i < V; i++) {
        if (prob[i] == 0) continue;
        double e = prob[i] * n;
        if (e < 5) {
            pool_e += e;
            pool_o += count[i];
            continue;
        }
        stat += (count[i] - e) * (count[i] - e) / e;
        cells++;
    }
    if (pool_e >= 5) {
        stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        cells++;
    } else if (pool_e > 0) {
        stat += (pool_o - pool_e) * (pool_o - pool_e) / 5.0; /* tiny leftover: conservative */
    }
    *df = cells - 1;
    return stat;
}

/* Epsilon (cut = epsilon) or eta (cut = min(eta, sqrt(eta) e^-H)) on the reference's
 * probabilities: drop p < cut (the top token stays), renormalise. */
static void reference_cutoff(double *prob, double eps, int eta_rule) {
    double h = 0, z = 0, top = 0, cut = eps;
    for (int i = 0; i < V; i++) {
        if (prob[i] > 0) h -= prob[i] * log(prob[i]);
        top = fmax(top, prob[i]);
    }
    if (eta_rule) cut = fmin(eps, sqrt(eps) * exp(-h));
    for (int i = 0; i < V; i++) z += prob[i] = prob[i] >= cut || prob[i] == top ? prob[i] : 0;
    for (int i = 0; i < V; i++) prob[i] /= z;
}

/* filters: 0 off, 1 top-k 40, min-p 0.01, top-p 0.9; 2 epsilon 0.02; 3 eta 0.02. */
static void run_config(const float *l, float t, int filters) {
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.seed = 20260101;
    p.temperature = t;
    p.top_k = filters == 1 ? 40 : 0;
    p.min_p = filters == 1 ? 0.01f : 0.0f;
    p.top_p = filters == 1 ? 0.9f : 1.0f;
    p.epsilon_cutoff = filters == 2 ? 0.02f : 0.0f;
    p.eta_cutoff = filters == 3 ? 0.02f : 0.0f;
    double prob[V];
    reference(l, t, p.top_k, p.min_p, p.top_p, prob);
    if (filters >= 2) reference_cutoff(prob, 0.02f, filters == 3);
    int n_ref = 0;
    for (int i = 0; i < V; i++) n_ref += prob[i] > 0;
    static long counts[2][V];
    for (int mode = 0; mode < 2; mode++) {
        p.mode = mode;
        gemma3_sampler *s;
        if (gemma3_sampler_init(&p, V, &s) != GEMMA3_OK) {
            CHECK(0);
            return;
        }
        int32_t ids[V];
        int nk = g3_sampler_kept(s, l, 0, ids);
        int same = nk == n_ref;
        for (int j = 0; j < nk && same; j++) same = prob[ids[j]] > 0;
        CHECK_MSG(same, "T %.1f filters %d mode %d: kept %d, reference %d", t, filters, mode, nk,
                  n_ref);
        long *c = counts[mode];
        memset(c, 0, V * sizeof *c);
        long outside = 0;
        for (long pos = 0; pos < N_DRAWS; pos++) {
            int32_t tok = gemma3_sampler_sample(s, l, pos);
            if (tok < 0 || tok >= V) {
                outside++;
                continue;
            }
            c[tok]++;
            outside += prob[tok] == 0;
        }
        gemma3_sampler_free(s);
        int df;
        double stat = pearson(c, prob, N_DRAWS, &df), crit = chi2_critical(df);
        double tv = 0, zmax = 0;
        for (int i = 0; i < V; i++) {
            double e = prob[i] * N_DRAWS;
            tv += fabs((double)c[i] / N_DRAWS - prob[i]);
            if (e >= 5) zmax = fmax(zmax, fabs(c[i] - e) / sqrt(e * (1 - prob[i])));
        }
        tv /= 2;
        printf("T %.1f filters %-3s %-6s kept %3d  chi2 %7.1f (df %2d, crit %6.1f)  TV %.4f  "
               "max|z| %.2f\n",
               t, (const char *[]){"off", "on", "eps", "eta"}[filters], mode ? "gumbel" : "cdf", n_ref,
               stat, df, crit, tv, zmax);
        CHECK_EQ_INT(outside, 0);
        CHECK_MSG(stat < crit, "chi2 %.1f >= %.1f", stat, crit);
        CHECK_MSG(tv < TV_MAX, "TV %.4f", tv);
        CHECK_MSG(zmax < 5, "max |z| %.2f", zmax);
    }
    /* the two paths' histograms against each other */
    double stat = 0;
    int cells = 0;
    for (int i = 0; i < V; i++) {
        long a = counts[0][i], b = counts[1][i];
        if (prob[i] * N_DRAWS < 5) continue;
        stat += (double)(a - b) * (double)(a - b) / (double)(a + b);
        cells++;
    }
    CHECK_MSG(cells < 2 || stat < chi2_critical(cells - 1), "two-sample chi2 %.1f, df %d", stat,
              cells - 1);
}

/* XTC with a probability strictly between 0 and 1: each draw is, with probability q, from the
 * softmax without the tokens of p >= threshold but the least probable of them (when two or more
 * qualify), else from the plain softmax: the reference is that mixture, in float64. */
static void run_xtc(const float *l, float q, float threshold) {
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.seed = 20260102;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.xtc_probability = q;
    p.xtc_threshold = threshold;
    double plain[V], cut[V], prob[V], lmax = -INFINITY, z = 0, z_cut = 0;
    for (int i = 0; i < V; i++)
        if (l[i] > lmax) lmax = l[i];
    for (int i = 0; i < V; i++) z += exp(l[i] - lmax);
    int n_above = 0, least = -1; /* the least probable qualifying token (ties: the higher id) */
    for (int i = 0; i < V; i++) {
        plain[i] = exp(l[i] - lmax) / z;
        if (plain[i] < threshold) continue;
        n_above++;
        if (least < 0 || l[i] <= l[least]) least = i;
    }
    CHECK_MSG(n_above >= 2, "XTC case: %d tokens above the threshold (needs 2+)", n_above);
    for (int i = 0; i < V; i++) {
        cut[i] = plain[i] >= threshold && i != least ? 0 : plain[i];
        z_cut += cut[i];
    }
    for (int i = 0; i < V; i++) prob[i] = (1 - q) * plain[i] + q * cut[i] / z_cut;
    for (int mode = 0; mode < 2; mode++) {
        p.mode = mode;
        gemma3_sampler *s;
        if (gemma3_sampler_init(&p, V, &s) != GEMMA3_OK) {
            CHECK(0);
            return;
        }
        static long c[V];
        memset(c, 0, sizeof c);
        for (long pos = 0; pos < N_DRAWS; pos++) {
            int32_t tok = gemma3_sampler_sample(s, l, pos);
            if (tok >= 0 && tok < V) c[tok]++;
        }
        gemma3_sampler_free(s);
        int df;
        double stat = pearson(c, prob, N_DRAWS, &df), crit = chi2_critical(df), tv = 0;
        for (int i = 0; i < V; i++) tv += fabs((double)c[i] / N_DRAWS - prob[i]);
        tv /= 2;
        printf("XTC q %.2f threshold %.2f %-6s (%d above)  chi2 %7.1f (df %2d, crit %6.1f)  TV %.4f\n",
               (double)q, (double)threshold, mode ? "gumbel" : "cdf", n_above, stat, df, crit, tv);
        CHECK_MSG(stat < crit, "XTC chi2 %.1f >= %.1f", stat, crit);
        CHECK_MSG(tv < TV_MAX, "XTC TV %.4f", tv);
    }
}

/* Consecutive draws are independent: 4 tokens, pairs (x_t, x_t+1), chi-square on the 4x4 table. */
static void independence(int mode) {
    float l[4] = {0.0f, -0.3f, -0.7f, -1.2f};
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.seed = 77;
    p.mode = mode;
    gemma3_sampler *s;
    if (gemma3_sampler_init(&p, 4, &s) != GEMMA3_OK) {
        CHECK(0);
        return;
    }
    double table[4][4] = {{0}}, row[4] = {0}, col[4] = {0};
    long n = N_DRAWS / 4;
    int prev = gemma3_sampler_sample(s, l, 0);
    for (long pos = 1; pos <= n; pos++) {
        int cur = gemma3_sampler_sample(s, l, pos);
        table[prev][cur]++;
        prev = cur;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            row[i] += table[i][j];
            col[j] += table[i][j];
        }
    double stat = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double e = row[i] * col[j] / n;
            stat += (table[i][j] - e) * (table[i][j] - e) / e;
        }
    printf("independence (%s): chi2 %.1f (df 9, crit %.1f)\n", mode ? "gumbel" : "cdf", stat,
           chi2_critical(9));
    CHECK(stat < chi2_critical(9));
    gemma3_sampler_free(s);
}

int main(void) {
    /* the critical values against tabulated chi-square quantiles (docs/sampling.md §6) */
    CHECK_NEAR(chi2_critical(7), 30.4, 0.6);
    CHECK_NEAR(chi2_critical(63), 113.7, 0.6);
    CHECK_NEAR(chi2_critical(999), 1174, 2);
    float l[V];
    for (int i = 0; i < V; i++)
        l[i] = (float)(1.2 * sin(1.3 * i) + 0.5 * cos(0.7 * i * i) - 0.02 * i);
    static const float temps[3] = {0.3f, 1.0f, 2.0f};
    for (int ti = 0; ti < 3; ti++)
        for (int f = 0; f < 2; f++) run_config(l, temps[ti], f);
    for (int f = 2; f < 4; f++) run_config(l, 1.0f, f); /* epsilon, eta */
    independence(0);
    independence(1);
    run_xtc(l, 0.35f, 0.04f);
    return check_report();
}
