/* threads.h - a persistent worker pool. Knows nothing of Gemma.
 *
 * g3_pool_run(pool, fn, ctx) calls fn(ctx, ith, nth) once for every ith in [0, nth) — the
 * calling thread runs ith = 0 — and returns when all have finished. Work is split statically by
 * the callers (g3_split), so which thread computes an output never changes its value. Built with
 * `make OPENMP=1` the same calls run on the OpenMP runtime's threads (threads.c). */
#ifndef G3_THREADS_H
#define G3_THREADS_H

#include <stddef.h>

typedef struct g3_pool g3_pool;
typedef void (*g3_task_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 counts the caller. */
int g3_pool_create(int n_threads, g3_pool **out);
void g3_pool_free(g3_pool *pool);
int g3_pool_size(const g3_pool *pool);
void g3_pool_run(g3_pool *pool, g3_task_fn fn, void *ctx);

/* Contiguous share [*lo, *hi) of n items for thread ith of nth, boundaries rounded to multiples
 * of `grain` (except the end), so SIMD tiles are not cut between threads. */
static inline void g3_split(int n, int ith, int nth, int grain, int *lo, int *hi) {
    int n_grains = (n + grain - 1) / grain;
    int a = (int)((long long)n_grains * ith / nth) * grain;
    int b = (int)((long long)n_grains * (ith + 1) / nth) * grain;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

/* The same for n bytes in whole grains of `grain` bytes (say 2 MiB: no huge page is faulted
 * by two threads). */
static inline void g3_split_bytes(size_t n, size_t grain, int ith, int nth, size_t *lo, size_t *hi) {
    size_t n_grains = (n + grain - 1) / grain;
    size_t a = n_grains * (size_t)ith / (size_t)nth * grain;
    size_t b = n_grains * (size_t)(ith + 1) / (size_t)nth * grain;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

/* Number of online CPUs (>= 1). */
int g3_n_cpus(void);

#endif
