/* threads.c - persistent worker pool.
 *
 * Workers sleep on a condition variable between jobs; a job is published by bumping a
 * generation counter. The caller runs share 0 itself, then waits for the others. */
#define _POSIX_C_SOURCE 200809L
#include "threads.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

struct g3_pool {
    int n_threads;
    pthread_t *workers;   /* n_threads - 1 */
    pthread_mutex_t lock;
    pthread_cond_t wake;  /* workers wait for a new generation */
    pthread_cond_t done;  /* caller waits for pending == 0 */
    unsigned long generation;
    int pending;
    int quit;
    g3_task_fn fn;
    void *ctx;
};

typedef struct {
    g3_pool *pool;
    int ith;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg arg = *(worker_arg *)p;
    free(p);
    g3_pool *pool = arg.pool;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&pool->lock);
        while (pool->generation == seen && !pool->quit) pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->quit) {
            pthread_mutex_unlock(&pool->lock);
            return NULL;
        }
        seen = pool->generation;
        g3_task_fn fn = pool->fn;
        void *ctx = pool->ctx;
        pthread_mutex_unlock(&pool->lock);

        fn(ctx, arg.ith, pool->n_threads);

        pthread_mutex_lock(&pool->lock);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
        pthread_mutex_unlock(&pool->lock);
    }
}

int g3_pool_create(int n_threads, g3_pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return g3_error(GEMMA3_ERR_ARG, "threads: %d is out of range [1, 1024]", n_threads);
    g3_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return g3_error(GEMMA3_ERR_NOMEM, "threads: out of memory");
    pool->n_threads = n_threads;
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
    pool->quit = 1;
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

void g3_pool_run(g3_pool *pool, g3_task_fn fn, void *ctx) {
    if (pool->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->pending = pool->n_threads - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    fn(ctx, 0, pool->n_threads);

    pthread_mutex_lock(&pool->lock);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
}

int g3_n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
