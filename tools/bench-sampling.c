/* bench-sampling.c - time per call of the sampler on 262,144 random logits, single thread: one
 * row per sampler alone (every other sampler off, so the draw is over what that sampler keeps),
 * per chain users run, and the draw with every sampler off (what a row that keeps most of the
 * vocabulary pays for the draw alone), each in CDF and Gumbel mode. Median of up to 301 calls
 * (fewer when a row is slow: at least 21, about 2 s per row) and the fastest call, printed as a
 * markdown table. Each call is timed in the thread's CPU time, so that a busy shared machine
 * (time spent descheduled) does not count; caches shared with other work still do.
 *
 *   build/tools/bench-sampling            every row
 *   build/tools/bench-sampling top-p      the rows whose name contains "top-p"
 *   build/tools/bench-sampling top-p cdf  ... in one mode only (cdf or gumbel)
 *
 * Two more tables (not printed when a mode is named): the rows whose fast paths can leave a
 * call to a slower path, over 200 distinct vectors each drawn once (mean and worst: what the
 * cycling rows may never meet), and each pass over the whole vocabulary that the chains are
 * made of, alone, in each instruction set this CPU has: where a row's time goes, and what an
 * instruction set's build of a pass costs against another's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemma3.h"
#include "rng.h"
#include "sampling/test-hooks.h"
#include "util.h"

#define V 262144
#define MAX_CALLS 301
#define MIN_CALLS 21
#define ROW_SECONDS 2.0
#define HISTORY 4000

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* A text-like history of HISTORY tokens: mostly ids from a few thousand common ones, with
 * stretches copied from earlier in the history (what DRY and the penalties look for). */
static void make_history(int32_t *h) {
    uint64_t r = 7;
    for (int i = 0; i < HISTORY;) {
        r = g3_mix64(r);
        if (i > 64 && r % 4 == 0) { /* repeat an earlier stretch of 4..35 tokens */
            int len = 4 + (int)((r >> 8) % 32), from = (int)((r >> 16) % (uint64_t)(i - 40));
            for (int j = 0; j < len && i < HISTORY; j++) h[i++] = h[from + j];
        } else {
            h[i++] = (int32_t)((r >> 20) % 3000);
        }
    }
}

/* Median seconds per gemma3_sampler_sample call over the logit vectors, cycling; *fastest gets
 * the minimum (the least disturbed by other work on a shared machine) and *mean the mean (what
 * a generation's speed sees: the rare draws a fast path leaves to a slower one move it, not the
 * median). */
static gemma3_sampler *sampler_or_exit(const gemma3_sampler_params *p) {
    gemma3_sampler *s;
    if (gemma3_sampler_init(p, V, &s) != GEMMA3_OK) {
        fprintf(stderr, "bench-sampling: %s\n", gemma3_last_error());
        exit(1);
    }
    return s;
}

static double time_row(const gemma3_sampler_params *p, float *const *logits, int n_logits,
                       const int32_t *history, int *calls, double *fastest, double *mean) {
    gemma3_sampler *s = sampler_or_exit(p);
    for (int i = 0; i < HISTORY; i++) gemma3_sampler_accept(s, history[i]);
    static double t[MAX_CALLS];
    long sink = 0;
    double start = g3_now();
    int n = 0;
    while (n < MAX_CALLS && (n < MIN_CALLS || g3_now() - start < ROW_SECONDS)) {
        double t0 = cpu_now();
        sink += gemma3_sampler_sample(s, logits[n % n_logits], n);
        t[n++] = cpu_now() - t0;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += t[i];
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    gemma3_sampler_free(s);
    *calls = n;
    *fastest = t[0];
    *mean = sum / n;
    return sink < 0 ? -1 : t[n / 2];
}

/* Every sampler off: the "alone" rows switch one on. */
static gemma3_sampler_params all_off(void) {
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.seed = 42;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.n_ctx = HISTORY;
    return p;
}

static gemma3_sampler_params llama_defaults(void) {
    gemma3_sampler_params p = all_off();
    gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_LLAMA, &p);
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.temperature = 0.8f;
    return p;
}

enum { N_ROWS = 18 };

static gemma3_sampler_params row_params(int row, const char **name) {
    gemma3_sampler_params p = all_off();
    switch (row) {
    case 0:
        *name = "default (top-k 64, top-p 0.95)";
        p = gemma3_sampler_default_params();
        p.seed = 42;
        break;
    case 1: *name = "greedy (T 0)"; p.temperature = 0.0f; break;
    case 2: *name = "llama.cpp chain + defaults"; p = llama_defaults(); break;
    case 3: *name = "top-k 40 alone"; p.top_k = 40; break;
    case 4: *name = "top-p 0.95 alone"; p.top_p = 0.95f; break;
    case 5: *name = "min-p 0.05 alone"; p.min_p = 0.05f; break;
    case 6: *name = "typical 0.9 alone"; p.typical_p = 0.9f; break;
    case 7: *name = "top-n-sigma 1 alone"; p.top_n_sigma = 1.0f; break;
    case 8:
        *name = "XTC 0.1 (p 1) alone";
        p.xtc_threshold = 0.1f;
        p.xtc_probability = 1.0f;
        break;
    case 9: *name = "temperature 0.7 alone"; p.temperature = 0.7f; break;
    case 10:
        *name = "DRY 0.8, 4000-token history";
        p.dry_multiplier = 0.8f;
        p.dry_penalty_last_n = HISTORY;
        p.n_dry_breakers = 1;
        p.dry_breaker_len[0] = 1;
        p.dry_breakers[0][0] = 108; /* a newline-like id */
        break;
    case 11:
        *name = "penalties 1.1/0.1/0.1, 4000 tokens";
        p.repeat_penalty = 1.1f;
        p.frequency_penalty = 0.1f;
        p.presence_penalty = 0.1f;
        p.repeat_last_n = HISTORY;
        break;
    case 12:
        *name = "logit bias (256 ids)";
        p.n_logit_bias = GEMMA3_SAMPLER_MAX_BIAS;
        for (int i = 0; i < p.n_logit_bias; i++) {
            p.logit_bias[i].token = (int32_t)(g3_mix64((uint64_t)i + 99) % V);
            p.logit_bias[i].bias = i % 4 == 0 ? -INFINITY : (float)(i % 7) - 3.0f;
        }
        break;
    case 13: *name = "mirostat v1 (tau 5, eta 0.1)"; p.mirostat = 1; break;
    case 14: *name = "mirostat v2 (tau 5, eta 0.1)"; p.mirostat = 2; break;
    case 15: {
        *name = "llama.cpp chain + DRY + penalties";
        p = llama_defaults();
        p.dry_multiplier = 0.8f;
        p.dry_penalty_last_n = HISTORY;
        p.repeat_penalty = 1.1f;
        p.repeat_last_n = HISTORY;
        break;
    }
    case 16:
        *name = "default + XTC 0.1 (p 1)";
        p = gemma3_sampler_default_params();
        p.seed = 42;
        p.xtc_threshold = 0.1f;
        p.xtc_probability = 1.0f;
        break;
    case 17: *name = "the draw alone (every sampler off)"; break;
    }
    return p;
}

/* ---- the passes over the whole vocabulary, each alone ---- */

enum { PASS_CALLS = 101 };
#define PASS_SECONDS 0.3

/* Scratch for the passes: the outputs each one writes, sized for the vocabulary. */
struct pass_bufs {
    float *dst;
    uint16_t *bucket;
    struct g3_view_sum *sums;
    uint64_t *hashes, *q, *tie;
    uint8_t *pass;
    int32_t *ids;
    double *blocks;
};

/* One call of pass `which` in instruction set isa on l; 0 when that build does not exist here. */
static int run_pass(int which, int isa, const float *l, float lmax, struct pass_bufs *b) {
    float mx;
    int first, inner;
    double at_least, out[5];
    switch (which) {
    case 0: {
        g3_check_max_fn f = g3_check_max_get(isa);
        return f ? (f(l, V, &mx, &first), 1) : 0;
    }
    case 1: {
        g3_copy_divide_fn f = g3_copy_divide_get(isa);
        return f ? (f(b->dst, l, V, 0.7f, &mx, &first), 1) : 0;
    }
    case 2: {
        g3_copy_check_fn f = g3_copy_check_get(isa);
        return f ? (f(b->dst, l, V), 1) : 0;
    }
    case 3: {
        g3_exp_rough_sums_fn f = g3_exp_rough_sums_get(isa);
        return f ? (f(l, lmax, V, lmax - 3.0f, &at_least), 1) : 0;
    }
    case 4: {
        g3_expf_block_sums_fn f = g3_expf_block_sums_get(isa);
        return f ? (f(l, lmax, V, b->blocks), 1) : 0;
    }
    case 5: {
        g3_expf_block_sums_fn f = g3_exp_block_sums_get(isa);
        return f ? (f(l, lmax, V, b->blocks), 1) : 0;
    }
    case 6:
    case 7: {
        g3_rank_view_fn f = g3_rank_view_get(isa);
        if (!f) return 0;
        double moment;
        memset(b->sums, 0, G3_VIEW_BUCKETS * sizeof *b->sums);
        f(l, lmax, V, b->bucket, b->sums, which == 7 ? &moment : NULL);
        return 1;
    }
    case 8: { /* over the view's bucket array, which print_passes builds first */
        g3_band_scan_fn f = g3_band_scan_get(isa);
        return f ? (f(b->bucket, V, 700, 700, 0, 699, b->ids, &inner), 1) : 0;
    }
    case 9: { /* a threshold a draw has after its first token: nearly every token fails */
        g3_gumbel_screen_n_fn f = g3_gumbel_screen_n_get(isa);
        if (!f) return 0;
        for (int c = 0; c < V; c += 256) f(42, b->hashes + c, l + c, lmax, 0.5f, b->pass, 256);
        return 1;
    }
    case 10: {
        g3_mass_round_n_fn f = g3_mass_round_n_get(isa);
        int n_tie;
        return f ? (f(l, lmax, b->q, b->tie, V, &n_tie), 1) : 0;
    }
    case 11: {
        g3_sigma_sums_n_fn f = g3_sigma_sums_n_get(isa);
        return f ? (f(l, V, out), 1) : 0;
    }
    case 12: {
        g3_exp_rough_sums_fn f = g3_exp_coarse_sums_get(isa);
        return f ? (f(l, lmax, V, lmax - 3.0f, &at_least), 1) : 0;
    }
    }
    return 0;
}

static const char *const pass_names[] = {
    "check (NaN/inf) + maximum", "dividing copy (temperature)", "checking copy (penalties)",
    "rough sums",                "float tier block sums",       "double tier block sums",
    "rank view",                 "rank view with moments",      "band scan (one bucket)",
    "Gumbel screen",             "fixed masses (top-p exact)",  "top-n-sigma sums",
    "coarse sums",
};
enum { N_PASSES = (int)(sizeof pass_names / sizeof pass_names[0]) };

static int any_pass_matches(const char *filter) {
    for (int i = 0; i < N_PASSES; i++)
        if (!filter || strstr(pass_names[i], filter)) return 1;
    return 0;
}

static void print_passes(const float *l, const char *filter) {
    struct pass_bufs b = {
        .dst = malloc(V * sizeof(float)),
        .bucket = malloc(V * sizeof(uint16_t)),
        .sums = malloc(G3_VIEW_BUCKETS * sizeof(struct g3_view_sum)),
        .hashes = malloc(V * sizeof(uint64_t)),
        .q = malloc(V * sizeof(uint64_t)),
        .tie = malloc(V * sizeof(uint64_t)),
        .pass = malloc(256),
        .ids = malloc(V * sizeof(int32_t)),
        .blocks = malloc((V / 64 + 1) * sizeof(double)),
    };
    if (!b.dst || !b.bucket || !b.sums || !b.hashes || !b.q || !b.tie || !b.pass || !b.ids ||
        !b.blocks) {
        fprintf(stderr, "bench-sampling: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < V; i++)
        b.hashes[i] = g3_mix64_first(g3_rng_index_hash(G3_RNG_GUMBEL, (uint32_t)i));
    float lmax = -INFINITY;
    for (int i = 0; i < V; i++) lmax = l[i] > lmax ? l[i] : lmax;
    run_pass(6, 0, l, lmax, &b); /* the bucket array the band scan reads */
    printf("\n# each pass over the %d logits alone, CPU ms: median (min)\n", V);
    printf("| pass | scalar | avx2 | avx512 |\n|---|---|---|---|\n");
    static double t[PASS_CALLS];
    for (int which = 0; which < N_PASSES; which++) {
        if (filter && !strstr(pass_names[which], filter)) continue;
        printf("| %-28s |", pass_names[which]);
        for (int isa = 0; isa <= 2; isa++) {
            int n = 0;
            double start = g3_now();
            while (n < PASS_CALLS && (n < 5 || g3_now() - start < PASS_SECONDS)) {
                double t0 = cpu_now();
                if (!run_pass(which, isa, l, lmax, &b)) break;
                t[n++] = cpu_now() - t0;
            }
            if (n == 0) {
                printf(" - |");
                continue;
            }
            qsort(t, (size_t)n, sizeof t[0], cmp_double);
            printf(" %.4f (%.4f) |", t[n / 2] * 1e3, t[0] * 1e3);
            fflush(stdout);
        }
        printf("\n");
    }
    free(b.dst);
    free(b.bucket);
    free(b.sums);
    free(b.hashes);
    free(b.q);
    free(b.tie);
    free(b.pass);
    free(b.ids);
    free(b.blocks);
}

/* Mean and worst ms per call over DISTINCT logit vectors of the benchmark's shape, each drawn
 * once (seeds 1000...): what a generation sees of the rare calls a fast path leaves to a slower
 * one, which the cycling rows above, eight vectors over and over, may never meet. */
#define DISTINCT 200
static void time_distinct(const gemma3_sampler_params *p, float *l, double *mean, double *worst) {
    gemma3_sampler *s = sampler_or_exit(p);
    double sum = 0;
    *worst = 0;
    for (int n = 0; n < DISTINCT; n++) {
        make_logits(l, 1000 + (uint64_t)n);
        double t0 = cpu_now();
        gemma3_sampler_sample(s, l, n);
        double t = cpu_now() - t0;
        sum += t;
        *worst = t > *worst ? t : *worst;
    }
    gemma3_sampler_free(s);
    *mean = sum / DISTINCT;
}

/* The rows whose fast paths can leave a call open (the rank view's), over distinct vectors
 * (drawn into a buffer of their own: the cycling rows' vectors stay for the passes table). */
static void print_distinct(const char *filter) {
    float *l = NULL;
    for (int row = 0; row < N_ROWS; row++) {
        const char *name = "";
        gemma3_sampler_params p = row_params(row, &name);
        if ((filter && !strstr(name, filter)) ||
            (strcmp(name, "typical 0.9 alone") != 0 && strcmp(name, "top-p 0.95 alone") != 0))
            continue;
        if (!l) {
            l = malloc(V * sizeof *l);
            if (!l) exit(1);
            printf("\n# %d distinct logit vectors, each once, CPU ms/token: mean (worst)\n"
                   "| chain | cdf | gumbel |\n|---|---|---|\n",
                   DISTINCT);
        }
        printf("| %-36s |", name);
        for (int mode = 0; mode < 2; mode++) {
            p.mode = mode ? GEMMA3_SAMPLER_MODE_GUMBEL : GEMMA3_SAMPLER_MODE_CDF;
            double mean, worst;
            time_distinct(&p, l, &mean, &worst);
            printf(" %7.3f (%.2f) |", mean * 1e3, worst * 1e3);
            fflush(stdout);
        }
        printf("\n");
    }
    free(l);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL, *only = argc > 2 ? argv[2] : NULL;
    enum { NL = 8 };
    float *logits[NL];
    static int32_t history[HISTORY];
    for (int i = 0; i < NL; i++) {
        logits[i] = malloc(V * sizeof(float));
        if (!logits[i]) return 1;
        make_logits(logits[i], (uint64_t)i + 1);
    }
    make_history(history);
    printf("# sampler, vocab %d, single thread, CPU ms/token: median (min, mean, calls); history %d "
           "tokens\n",
           V, HISTORY);
    printf("| chain | cdf | gumbel |\n|---|---|---|\n");
    for (int row = 0; row < N_ROWS; row++) {
        const char *name = "";
        gemma3_sampler_params p = row_params(row, &name);
        if (filter && !strstr(name, filter)) continue;
        printf("| %-36s |", name);
        for (int mode = 0; mode < 2; mode++) {
            p.mode = mode ? GEMMA3_SAMPLER_MODE_GUMBEL : GEMMA3_SAMPLER_MODE_CDF;
            if (only && strcmp(only, mode ? "gumbel" : "cdf") != 0) {
                printf(" - |");
                continue;
            }
            int calls;
            double fastest, mean, t = time_row(&p, logits, NL, history, &calls, &fastest, &mean);
            printf(" %7.3f (%.3f, %.3f, %d) |", t * 1e3, fastest * 1e3, mean * 1e3, calls);
            fflush(stdout);
        }
        printf("\n");
    }
    if (!only) print_distinct(filter);
    if (!only && any_pass_matches(filter)) print_passes(logits[0], filter);
    for (int i = 0; i < NL; i++) free(logits[i]);
    return 0;
}
