/* threads.c - the worker pool behind g3_pool_run: our own pthread pool with low-latency
 * fork/join (the default), or OpenMP when built with `make OPENMP=1` (-fopenmp defines _OPENMP).
 * Both give fn the same (ith, nth), and the callers split work by those alone, so the two builds
 * compute the same bits.
 *
 * The pthread pool. A decoded token has a few hundred fork/join points, each a few microseconds
 * of work, so a condvar round trip per job (tens of microseconds on a loaded box) would dominate.
 * The caller publishes a job by bumping an atomic generation counter; workers spin on it for a
 * short while (pause or yield instructions, then sched_yield) and only then sleep on a condition
 * variable. Completion works the same way in reverse with an atomic count of pending workers.
 *
 * Sleeping is race-free without a lock on the fast path: a worker about to sleep registers in
 * `sleepers` and re-checks the generation under the mutex; the caller bumps the generation and
 * then reads `sleepers` (both sequentially consistent), taking the mutex to broadcast only when
 * someone may be asleep. One of the two always sees the other's write. */
#define _POSIX_C_SOURCE 200809L
#include "threads.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

#ifndef _OPENMP

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* Spin budget before sleeping: up to SPIN_PAUSES pause instructions (~30 ns each on these
 * cores, so ~60 us: longer than the gap between two fork/join points of a decoded token),
 * with a sched_yield every YIELD_EVERY pauses so that a thread we wait for, if it shares our
 * core (a busy box, or more threads than cores), gets to run. With more threads than CPUs the
 * pool does not spin at all: spinning would only steal the time of the thread awaited. */
enum { SPIN_PAUSES = 2048, YIELD_EVERY = 128 };

/* The fields every worker polls (the job and its generation) share one cache line that only the
 * caller writes; the count that every worker decrements has a line of its own. On one line, at
 * 16 threads, each decrement took the line away from the 15 threads polling it. */
#define CACHE_LINE 64

struct g3_pool {
    _Alignas(CACHE_LINE) g3_task_fn fn; /* the current job; written before generation is bumped */
    void *ctx;
    atomic_uint generation;     /* bumped once per job */
    atomic_int quit;
    _Alignas(CACHE_LINE) atomic_int pending; /* workers still running the current job */
    _Alignas(CACHE_LINE) atomic_int sleepers; /* workers blocked (or about to block) on `wake` */
    atomic_int caller_sleeping; /* the caller blocked (or about to block) on `done` */
    int n_threads;
    int spin;                   /* pauses to spin before sleeping: SPIN_PAUSES or 0 */
    pthread_t *workers;         /* [n_threads - 1] */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t done;
};

static void backoff(int i) {
    if (i % YIELD_EVERY == YIELD_EVERY - 1) sched_yield();
    else cpu_relax();
}

typedef struct {
    g3_pool *pool;
    int ith;
} worker_arg;

/* Waits until the generation differs from `seen` or quit is set; returns the new generation. */
static unsigned wait_for_job(g3_pool *pool, unsigned seen) {
    for (int i = 0; i < pool->spin; i++) {
        unsigned g = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&pool->quit, memory_order_acquire)) return g;
        backoff(i);
    }
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add(&pool->sleepers, 1);
    while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->quit))
        pthread_cond_wait(&pool->wake, &pool->lock);
    atomic_fetch_sub(&pool->sleepers, 1);
    pthread_mutex_unlock(&pool->lock);
    return atomic_load(&pool->generation);
}

static void *worker_main(void *p) {
    worker_arg arg = *(worker_arg *)p;
    free(p);
    g3_pool *pool = arg.pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_job(pool, seen);
        if (atomic_load(&pool->quit)) return NULL;
        pool->fn(pool->ctx, arg.ith, pool->n_threads);
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && /* seq_cst: see caller */
            atomic_load(&pool->caller_sleeping)) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
}

int g3_pool_create(int n_threads, g3_pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return g3_error(GEMMA3_ERR_ARG, "threads: %d is out of range [1, 1024]", n_threads);
    g3_pool *pool = aligned_alloc(CACHE_LINE, sizeof *pool);
    if (!pool) return g3_error(GEMMA3_ERR_NOMEM, "threads: out of memory");
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    pool->spin = n_threads <= g3_n_cpus() ? SPIN_PAUSES : 0;
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->quit, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->caller_sleeping, 0);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->workers = calloc((size_t)n_threads, sizeof *pool->workers);
    if (!pool->workers) {
        g3_pool_free(pool);
        return g3_error(GEMMA3_ERR_NOMEM, "threads: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (arg) *arg = (worker_arg){pool, i};
        if (!arg || pthread_create(&pool->workers[i - 1], NULL, worker_main, arg) != 0) {
            free(arg);
            pool->n_threads = i; /* only the started ones get joined */
            g3_pool_free(pool);
            return g3_error(GEMMA3_ERR_NOMEM, "threads: cannot start thread %d", i);
        }
    }
    *out = pool;
    return GEMMA3_OK;
}

void g3_pool_free(g3_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->quit, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 1; i < pool->n_threads && pool->workers; i++) pthread_join(pool->workers[i - 1], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    free(pool->workers);
    free(pool);
}

int g3_pool_size(const g3_pool *pool) { return pool->n_threads; }

/* Not reentrant: one caller at a time, and fn must not call g3_pool_run on the same pool. */
void g3_pool_run(g3_pool *pool, g3_task_fn fn, void *ctx) {
    if (pool->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&pool->generation, 1); /* seq_cst: publishes fn, ctx and pending */
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
    }

    fn(ctx, 0, pool->n_threads);

    for (int i = 0; i < pool->spin; i++) {
        if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0) return;
        backoff(i);
    }
    pthread_mutex_lock(&pool->lock);
    /* an exchange, not a store: the flag must be visible before pending is read (a worker that
     * decrements pending to 0 reads the flag after it), and a read-modify-write is a full
     * barrier everywhere, where qemu's aarch64 emulation on an x86 host does not order a
     * sequentially consistent store before a later load, which lost this wakeup there */
    atomic_exchange(&pool->caller_sleeping, 1);
    while (atomic_load(&pool->pending) != 0) pthread_cond_wait(&pool->done, &pool->lock);
    atomic_store(&pool->caller_sleeping, 0);
    pthread_mutex_unlock(&pool->lock);
}

#else /* _OPENMP */

#include <omp.h>

/* OpenMP build: one parallel region per job. The runtime keeps its team of threads between
 * regions (spinning for a while, then sleeping: OMP_WAIT_POLICY, GOMP_SPINCOUNT, KMP_BLOCKTIME
 * tune it), so the pool is only the thread count. */
struct g3_pool {
    int n_threads;
};

int g3_pool_create(int n_threads, g3_pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return g3_error(GEMMA3_ERR_ARG, "threads: %d is out of range [1, 1024]", n_threads);
    g3_pool *pool = malloc(sizeof *pool);
    if (!pool) return g3_error(GEMMA3_ERR_NOMEM, "threads: out of memory");
    pool->n_threads = n_threads;
    /* start the team now, as the pthread pool starts its workers, not in the first job */
    if (n_threads > 1) {
#pragma omp parallel num_threads(n_threads)
        {
        }
    }
    *out = pool;
    return GEMMA3_OK;
}

void g3_pool_free(g3_pool *pool) { free(pool); }

int g3_pool_size(const g3_pool *pool) { return pool->n_threads; }

/* Not reentrant, as the pthread pool: one caller at a time per pool. */
void g3_pool_run(g3_pool *pool, g3_task_fn fn, void *ctx) {
    const int nth = pool->n_threads;
    if (nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
#pragma omp parallel num_threads(nth)
    {
        /* The runtime may field a smaller team than asked (OMP_THREAD_LIMIT, OMP_DYNAMIC, a
         * nested region): its threads then take the missing shares in turn, so fn still sees
         * every ith of nth and the work is split, and rounded, exactly as asked. The master
         * (the caller) is thread 0. */
        const int team = omp_get_num_threads();
        for (int ith = omp_get_thread_num(); ith < nth; ith += team) fn(ctx, ith, nth);
    }
}

#endif /* _OPENMP */

int g3_n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
