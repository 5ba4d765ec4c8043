/* test-threads.c - the worker pool (threads.c) under load: thousands of tiny jobs back to back
 * at several pool sizes (more threads than CPUs included, where the pool never spins), jobs
 * alternating between two contexts, pauses long enough for the workers to fall asleep, slow
 * workers that make the caller sleep, and pools created and freed in a loop. Every job checks
 * that each ith ran exactly once with the right nth and that the workers' plain writes are all
 * visible to the caller when g3_pool_run returns. `make tsan` runs it under ThreadSanitizer. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gemma3.h"
#include "threads.h"

enum { MAX_THREADS = 16, N_ITEMS = 1000 };

typedef struct {
    int job;                /* read by every thread, written by the caller between jobs */
    int sleep_us;           /* workers (ith > 0) sleep this long: the caller waits on `done` */
    int calls[MAX_THREADS]; /* calls[ith]: written by thread ith only, plain writes */
    int nth_seen[MAX_THREADS];
    long long out[N_ITEMS]; /* each item written by the thread whose g3_split share holds it */
} job_ctx;

static void sleep_us(int us) {
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

static void job_fn(void *p, int ith, int nth) {
    job_ctx *c = p;
    c->calls[ith]++;
    c->nth_seen[ith] = nth;
    if (ith > 0 && c->sleep_us) sleep_us(c->sleep_us);
    int lo, hi;
    g3_split(N_ITEMS, ith, nth, 8, &lo, &hi);
    for (int i = lo; i < hi; i++) c->out[i] = (long long)c->job * N_ITEMS + i;
}

/* Whether job number `job` left ctx complete: returns the number of wrong entries. */
static int check_job(const job_ctx *c, int nth, int runs) {
    int bad = 0;
    for (int i = 0; i < nth; i++) bad += c->calls[i] != runs || c->nth_seen[i] != nth;
    for (int i = nth; i < MAX_THREADS; i++) bad += c->calls[i] != 0;
    for (int i = 0; i < N_ITEMS; i++) bad += c->out[i] != (long long)c->job * N_ITEMS + i;
    return bad;
}

/* n_jobs jobs on one pool of nth threads, alternating between two contexts; every
 * `pause_every` jobs the caller sleeps (workers go to sleep), every `slow_every` jobs the
 * workers sleep (the caller goes to sleep). */
static void hammer(int nth, int n_jobs, int pause_every, int slow_every) {
    static job_ctx ctx[2];
    memset(ctx, 0, sizeof ctx);
    g3_pool *pool = NULL;
    CHECK_EQ_INT(g3_pool_create(nth, &pool), GEMMA3_OK);
    if (!pool) return;
    CHECK_EQ_INT(g3_pool_size(pool), nth);
    int bad = 0, first_bad = -1;
    for (int j = 0; j < n_jobs; j++) {
        job_ctx *c = &ctx[j & 1];
        c->job = j;
        c->sleep_us = slow_every && j % slow_every == slow_every - 1 ? 2000 : 0;
        g3_pool_run(pool, job_fn, c);
        int b = check_job(c, nth, j / 2 + 1);
        if (b && first_bad < 0) first_bad = j;
        bad += b;
        if (pause_every && j % pause_every == pause_every - 1) sleep_us(3000);
    }
    CHECK_MSG(bad == 0, "%d threads: %d wrong entries, first in job %d", nth, bad, first_bad);
    g3_pool_free(pool);
}

static void test_create_free(void) {
    g3_pool *pool = (g3_pool *)&pool;
    CHECK(g3_pool_create(0, &pool) != GEMMA3_OK && pool == NULL);
    CHECK(g3_pool_create(1025, &pool) != GEMMA3_OK && pool == NULL);
    g3_pool_free(NULL);
    int bad = 0;
    for (int i = 0; i < 40; i++) { /* freed right after one job, or with no job at all */
        static job_ctx c;
        memset(&c, 0, sizeof c);
        int nth = 1 + i % 4;
        if (g3_pool_create(nth, &pool) != GEMMA3_OK) {
            bad++;
            continue;
        }
        if (i % 3) {
            c.job = i;
            g3_pool_run(pool, job_fn, &c);
            bad += check_job(&c, nth, 1);
        }
        g3_pool_free(pool);
    }
    CHECK_MSG(bad == 0, "%d wrong entries", bad);
}

int main(void) {
    int cpus = g3_n_cpus();
    int sizes[] = {1, 2, 3, 4, cpus + 1 < MAX_THREADS ? cpus + 1 : MAX_THREADS, MAX_THREADS};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        hammer(sizes[i], 3000, 0, 0);   /* back to back: the spinning fast path */
        hammer(sizes[i], 60, 7, 5);     /* with sleeps on both sides */
    }
    test_create_free();
    printf("threads: pool sizes up to %d on %d CPUs\n", MAX_THREADS, cpus);
    return check_report();
}
