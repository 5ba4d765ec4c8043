/* check-rng-exhaustive.c - the sampler's uniforms over all 2^32 token-index counters of one
 * (seed, position, purpose) key: none is 0 or 1, every Gumbel value is finite and at most
 * g3_gumbel_max(). Too slow for the test suite (about 20 s per core); run by hand:
 *   build/tools/check-rng-exhaustive [threads]   (exit 0 = pass) */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "sampling/test-hooks.h"
#include "util.h"

typedef struct {
    uint64_t first, last; /* index range [first, last) */
    uint64_t bad;
} job;

static void *run(void *arg) {
    job *j = arg;
    uint64_t key = g3_rng_key(42, 7);
    double gmax = g3_gumbel_max();
    for (uint64_t i = j->first; i < j->last; i++) {
        uint64_t b = g3_rng_bits(key, G3_RNG_GUMBEL, (uint32_t)i);
        double u = g3_uniform(b), u32 = g3_uniform32(b);
        if (!(u > 0 && u < 1 && u32 > 0 && u32 < 1)) j->bad++;
        if ((i & 15) == 0) { /* the logs are the slow part: every 16th */
            double g = g3_gumbel(b);
            if (!(isfinite(g) && g <= gmax)) j->bad++;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    if (n < 1 || n > 256) n = 2;
    pthread_t t[256];
    job jobs[256];
    uint64_t total = 1ull << 32, step = total / (uint64_t)n;
    double t0 = g3_now();
    for (int k = 0; k < n; k++) {
        jobs[k] = (job){step * (uint64_t)k, k == n - 1 ? total : step * (uint64_t)(k + 1), 0};
        pthread_create(&t[k], NULL, run, &jobs[k]);
    }
    uint64_t bad = 0;
    for (int k = 0; k < n; k++) {
        pthread_join(t[k], NULL);
        bad += jobs[k].bad;
    }
    printf("2^32 counters, %d threads, %.1f s: %llu outside (0, 1) or non-finite\n", n,
           g3_now() - t0, (unsigned long long)bad);
    return bad != 0;
}
