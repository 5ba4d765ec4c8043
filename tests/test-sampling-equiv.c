/* test-sampling-equiv.c - path equivalence at Gemma's vocabulary size: over 1,000 random logit
 * vectors of 262,144 entries (Gaussian-like, quantised to 0.125, a few distinct levels with
 * duplicated maxima, and vectors with bans), the CDF path (heap selection, sorting) and the
 * Gumbel path (radix selection) must keep bit-identical sets for top-k, top-p, min-p and
 * combined chains (with top-n-sigma on half of them), plus llama.cpp's order on every 4th
 * vector and epsilon or eta (alone or after top-k) on every 4th of another kind. Top-p sets of every 2nd vector are also checked against their definition.
 * Sanitizer builds run 100 vectors (G3_EQUIV_VECTORS and G3_EQUIV_START override). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "sampling/test-hooks.h"

#define V 262144

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_VECTORS 100
#else
#define DEFAULT_VECTORS 1000
#endif

static uint64_t rng_state;
static uint64_t next(void) { return g3_mix64(rng_state += 0x9e3779b97f4a7c15ull); }
static double unif(void) { return g3_uniform(next()); }

/* Four families of logit vectors; kind 1-3 are tie-heavy. */
static void make_logits(float *l, int kind) {
    double sd = 0.5 + 3.5 * unif();
    switch (kind) {
    case 0: /* bell-shaped bulk (Irwin-Hall of 3) plus a few strong tokens */
    case 3:
        for (int i = 0; i < V; i++) {
            uint64_t b = next();
            double u = ((b & 0xfffff) + ((b >> 20) & 0xfffff) + ((b >> 40) & 0xfffff)) /
                           (double)(1 << 20) -
                       1.5;
            l[i] = (float)(2 * sd * u);
        }
        for (int j = 0; j < 10; j++) l[next() % V] += (float)(15 * unif());
        if (kind == 3) { /* bans and an exactly duplicated maximum */
            for (int j = 0; j < 1000; j++) l[next() % V] = -INFINITY;
            float mx = -INFINITY;
            for (int i = 0; i < V; i++) mx = fmaxf(mx, l[i]);
            for (int j = 0; j < 3; j++) l[next() % V] = mx;
        }
        break;
    case 1: /* quantised to 0.125 */
        for (int i = 0; i < V; i++) {
            uint64_t b = next();
            double u = ((b & 0xfffff) + ((b >> 20) & 0xfffff) + ((b >> 40) & 0xfffff)) /
                           (double)(1 << 20) -
                       1.5;
            l[i] = (float)(round(16 * sd * u) / 8);
        }
        break;
    case 2: { /* a handful of levels; the top level appears several times */
        int levels = 2 + (int)(next() % 6);
        for (int i = 0; i < V; i++) {
            uint64_t b = next();
            int lev = (int)(b % (uint64_t)levels);
            if (lev == levels - 1 && (b >> 32) % 4096 != 0) lev = 0; /* the top level is rare */
            l[i] = (float)(lev * sd);
        }
        break;
    }
    }
}

static int kept_cdf[V], kept_gum[V];

/* Fixed-point definition of top-p over all finite tokens (T = 1, top-p alone): the kept set is a
 * prefix of the total order, and the crossing token is the first where the mass reaches floor(p*Q). */
static int check_top_p_definition(const float *l, float p, const int *ids, int n) {
    static unsigned char in[V];
    memset(in, 0, sizeof in);
    float lmax = -INFINITY;
    for (int i = 0; i < V; i++) lmax = fmaxf(lmax, l[i]);
    for (int j = 0; j < n; j++) in[ids[j]] = 1;
    unsigned __int128 q = 0;
    uint64_t kept = 0;
    int worst = -1, best_out = -1;
    for (int i = 0; i < V; i++) {
        if (l[i] == -INFINITY) continue;
        uint64_t m = g3_fixed_mass(l[i], lmax);
        q += m;
        if (in[i]) {
            kept += m;
            if (worst < 0 || l[i] < l[worst] || (l[i] == l[worst] && i > worst)) worst = i;
        } else if (best_out < 0 || l[i] > l[best_out]) {
            best_out = i;
        }
    }
    if (n == 0 || worst < 0) return 0;
    if (getenv("G3_EQUIV_DEBUG"))
        fprintf(stderr, "worst %d (%.9g) best_out %d (%.9g)\n", worst, l[worst], best_out,
                best_out >= 0 ? l[best_out] : 0.0);
    /* prefix: every dropped token comes after every kept one */
    if (best_out >= 0 && !(l[worst] > l[best_out] || (l[worst] == l[best_out] && worst < best_out)))
        return 0;
    /* floor(p * q) exactly: p = mant * 2^(e - 24) */
    int e;
    uint64_t mant = (uint64_t)ldexp(frexp((double)p, &e), 24);
    unsigned __int128 target = (q * mant) >> (24 - e);
    if (target == 0) return n == 1;
    if (getenv("G3_EQUIV_DEBUG"))
        fprintf(stderr, "q %llu target %llu kept %llu worst %d (%g) best_out %d (%g) qworst %llu\n",
                (unsigned long long)q, (unsigned long long)target, (unsigned long long)kept, worst,
                l[worst], best_out, best_out >= 0 ? l[best_out] : 0.0,
                (unsigned long long)g3_fixed_mass(l[worst], lmax));
    unsigned __int128 before = kept - g3_fixed_mass(l[worst], lmax);
    return before < target && kept >= target;
}

int main(void) {
    int vectors = DEFAULT_VECTORS;
    const char *env = getenv("G3_EQUIV_VECTORS");
    if (env) vectors = atoi(env);
    env = getenv("G3_EQUIV_START"); /* for replaying one failing vector */
    int start = env ? atoi(env) : 0;
    float *l = malloc(V * sizeof *l);
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.seed = 5;
    gemma3_sampler *a, *b;
    if (!l || gemma3_sampler_init(&p, V, &a) != GEMMA3_OK ||
        gemma3_sampler_init(&p, V, &b) != GEMMA3_OK) {
        CHECK(0);
        return check_report();
    }
    static const int ks[] = {1, 2, 40, 64, 1000, 50000, 262143, 300000};
    int mismatches = 0, definition_failures = 0, sizes_seen_large = 0;
    for (int v = start; v < start + vectors; v++) {
        rng_state = 0x1234567ull * (uint64_t)(v + 1);
        make_logits(l, v % 4);
        for (int cfg = 0; cfg < 6; cfg++) {
            if (cfg == 4 && v % 4 != 0) continue; /* the llama.cpp-order extra: every 4th vector */
            if (cfg == 5 && v % 4 != 1) continue; /* the cutoffs: every 4th vector, another kind */
            gemma3_sampler_params q = gemma3_sampler_default_params();
            q.seed = 5;
            q.top_k = 0;
            q.top_p = 1.0f;
            q.min_p = 0.0f;
            switch (cfg) {
            case 0: q.top_k = (v / 4) % 2 ? ks[(v / 8) % 8] : 1 + (int)(next() % 3000); break;
            case 1: q.top_p = (v / 4) % 5 == 0 ? 0.5f : (float)unif(); break;
            case 2: q.min_p = (float)pow(unif(), 3); break;
            case 3: /* the default chain with everything on, random temperature */
                q.top_k = 1 + (int)(next() % 500);
                q.top_p = (float)unif();
                q.min_p = (float)(0.2 * unif());
                q.temperature = (float)(0.2 + 2 * unif());
                if (v % 2) q.top_n_sigma = (float)(0.5 + 3 * unif());
                break;
            case 4: /* llama.cpp's order, top-k off: top-p and min-p on the whole vocabulary */
                gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_LLAMA, &q);
                q.top_p = (float)(0.5 + 0.5 * unif());
                q.min_p = (float)(0.01 * unif());
                q.temperature = (float)(0.2 + 2 * unif());
                break;
            case 5: /* epsilon or eta on the whole vocabulary, or after top-k */
                *(v % 8 == 1 ? &q.epsilon_cutoff : &q.eta_cutoff) = (float)(0.01 * unif());
                if (v % 16 >= 8) q.top_k = 1 + (int)(next() % 3000);
                q.min_keep = (int)(next() % 3);
                q.temperature = (float)(0.2 + 2 * unif());
                break;
            }
            q.mode = GEMMA3_SAMPLER_MODE_CDF;
            CHECK(g3_sampler_set_params(a, &q) == GEMMA3_OK);
            q.mode = GEMMA3_SAMPLER_MODE_GUMBEL;
            CHECK(g3_sampler_set_params(b, &q) == GEMMA3_OK);
            int na = g3_sampler_kept(a, l, v, kept_cdf);
            int nb = g3_sampler_kept(b, l, v, kept_gum);
            if (na != nb || memcmp(kept_cdf, kept_gum, (size_t)na * sizeof *kept_cdf) != 0) {
                if (mismatches++ < 5)
                    fprintf(stderr, "vector %d kind %d config %d: cdf kept %d, gumbel kept %d\n", v,
                            v % 4, cfg, na, nb);
            }
            if (na > 10000) sizes_seen_large++;
            if (cfg == 0) {
                int finite = 0;
                for (int i = 0; i < V; i++) finite += l[i] != -INFINITY;
                int want = q.top_k < finite ? q.top_k : finite;
                if (na != want) definition_failures++;
            }
            if (cfg == 1 && v % 2 == 0 && !check_top_p_definition(l, q.top_p, kept_cdf, na)) {
                if (definition_failures++ < 5)
                    fprintf(stderr, "vector %d kind %d: top-p %.9g kept %d breaks the definition\n",
                            v, v % 4, q.top_p, na);
            }
        }
    }
    printf("%d vectors x 4 configurations (+2 on every 4th): %d mismatches, %d definition "
           "failures, %d large kept sets\n",
           vectors, mismatches, definition_failures, sizes_seen_large);
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(definition_failures, 0);
    CHECK(sizes_seen_large >
          0); /* the selection paths were exercised on big sets, not only on 64 */
    gemma3_sampler_free(a);
    gemma3_sampler_free(b);
    free(l);
    return check_report();
}
