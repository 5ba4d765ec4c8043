/* bench-sampling.c - time per call of the sampler on 262,144 random logits, single thread:
 * the default chain (CDF walk), the same chain in Gumbel mode, and greedy. Median of many calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemma3.h"
#include "sampling.h"
#include "util.h"

#define V 262144
#define CALLS 301

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Logits shaped like a language model's: Gaussian bulk (sd 2.5) plus a few strong candidates. */
static void make_logits(float *l, uint64_t seed) {
    for (int i = 0; i < V; i++) {
        uint64_t b = g3_mix64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i);
        double u1 = g3_uniform(b), u2 = g3_uniform(g3_mix64(b));
        l[i] = (float)(2.5 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    for (int j = 0; j < 8; j++) l[g3_mix64(seed + (uint64_t)j) % V] += 12.0f - (float)j;
}

static double bench(const char *name, gemma3_sampler_params p, float *const *logits, int n_logits) {
    gemma3_sampler *s;
    if (gemma3_sampler_init(&p, V, &s) != GEMMA3_OK) {
        fprintf(stderr, "bench-sampling: %s\n", gemma3_last_error());
        exit(1);
    }
    for (int i = 0; i < 64; i++)
        gemma3_sampler_accept(s, (int32_t)(g3_mix64((uint64_t)i) % V)); /* a history */
    static double t[CALLS];
    long sink = 0;
    for (int i = 0; i < CALLS; i++) {
        double t0 = g3_now();
        sink += gemma3_sampler_sample(s, logits[i % n_logits], i);
        t[i] = g3_now() - t0;
    }
    qsort(t, CALLS, sizeof t[0], cmp_double);
    printf("sampling %-32s %.3f ms/token  (median of %d; min %.3f)%s\n", name, t[CALLS / 2] * 1e3,
           CALLS, t[0] * 1e3, sink < 0 ? "!" : "");
    gemma3_sampler_free(s);
    return t[CALLS / 2];
}

int main(void) {
    enum { NL = 8 };
    float *logits[NL];
    for (int i = 0; i < NL; i++) {
        logits[i] = malloc(V * sizeof(float));
        make_logits(logits[i], (uint64_t)i + 1);
    }
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.seed = 42;
    printf("# sampler, vocab %d, single thread (T 1, top-k 64, top-p 0.95)\n", V);
    bench("default chain:", p, logits, NL);
    p.mode = GEMMA3_SAMPLER_MODE_GUMBEL;
    bench("gumbel:", p, logits, NL);
    p.mode = GEMMA3_SAMPLER_MODE_CDF;
    p.temperature = 0;
    bench("greedy:", p, logits, NL);
    p = gemma3_sampler_default_params();
    p.seed = 42;
    p.top_k = 0;
    bench("top-p 0.95 only (cdf):", p, logits, NL);
    p.mode = GEMMA3_SAMPLER_MODE_GUMBEL;
    bench("top-p 0.95 only (gumbel):", p, logits, NL);
    p = gemma3_sampler_default_params();
    p.seed = 42;
    p.repeat_penalty = 1.1f;
    p.ignore_eos = 1;
    p.n_eos = 2;
    p.eos_ids[0] = 1;
    p.eos_ids[1] = 106;
    bench("default + repeat 1.1 + no-eos:", p, logits, NL);
    p = gemma3_sampler_default_params();
    p.seed = 42;
    gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_LLAMA, &p);
    p.top_k = 40;
    p.min_p = 0.05f;
    p.temperature = 0.8f;
    bench("llama.cpp chain+defaults:", p, logits, NL);
    for (int i = 0; i < NL; i++) free(logits[i]);
    return 0;
}
