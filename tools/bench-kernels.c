/* bench-kernels - throughput of the matmul kernels and the thread pool, per ISA table.
 *
 *   build/tools/bench-kernels [--quick]
 *   build/tools/bench-kernels --bandwidth N | --pool N   (one figure at N threads)
 *
 * Prints: a plain memory-read bandwidth reference (vectorised sum over 1 GiB, 1 and 2 threads);
 * matvec (T=1) over a 1B-shaped set of weights (~1 GB, far beyond cache) as GB/s of weights
 * streamed and the fraction of the read bandwidth; matmul_f32 / matmul_bf16 at T=512 over
 * [6912][1152] as GFLOP/s next to a measured vdpbf16ps / FMA peak; g3_pool_run fork/join
 * latency. Each figure is the best of a few repetitions. The "(cpu)" columns divide by the
 * busiest thread's CPU time instead of the wall clock: on a shared machine they show what the
 * kernels do when they run (see cpu_busy). On other CPUs than x86 the bandwidth reference is a
 * plain C loop and the instruction peaks are not measured. */
#if defined(__x86_64__) || defined(__i386__)
#define BENCH_X86 1
#include <immintrin.h>
#else
#define BENCH_X86 0
#endif
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "threads.h"
#include "util.h"

static int quick;

/* CPU time of the calling thread: the peak loops are pure compute, so on a shared machine this
 * measures the core, not the scheduler. */
static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time each pool thread spent in the measured tasks (slot ith). On a shared machine the
 * wall clock also counts time our threads waited for a core; max over threads of the CPU time
 * is the time the work took when it ran, which the "cpu" columns use. For memory-bound rows it
 * is optimistic if the two threads did not actually run at the same time. */
static double cpu_busy[64];

static void cpu_reset(void) { memset(cpu_busy, 0, sizeof cpu_busy); }

static double cpu_max(int nth) {
    double m = 0;
    for (int i = 0; i < nth; i++) m = cpu_busy[i] > m ? cpu_busy[i] : m;
    return m;
}

/* ---- memory-read reference ---- */

typedef struct {
    const float *buf;
    size_t n;
    float partial[64];
} sum_job;

/* Eight independent accumulators and a software prefetch PF_AHEAD bytes ahead: enough loads in
 * flight to saturate the memory system from one core. */
enum { PF_AHEAD = 4096 };

#if BENCH_X86
__attribute__((target("avx512f"))) static float sum_512(const float *p, size_t n) {
    __m512 a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm512_setzero_ps();
    for (size_t i = 0; i + 128 <= n; i += 128) {
        for (int j = 0; j < 8; j++)
            _mm_prefetch((const char *)((uintptr_t)(p + i + 16 * j) + PF_AHEAD), _MM_HINT_T0);
        for (int j = 0; j < 8; j++) a[j] = _mm512_add_ps(a[j], _mm512_load_ps(p + i + 16 * j));
    }
    for (int j = 1; j < 8; j++) a[0] = _mm512_add_ps(a[0], a[j]);
    return _mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx2"))) static float sum_avx2(const float *p, size_t n) {
    __m256 a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
    for (size_t i = 0; i + 64 <= n; i += 64) {
        for (int j = 0; j < 8; j += 2)
            _mm_prefetch((const char *)((uintptr_t)(p + i + 8 * j) + PF_AHEAD), _MM_HINT_T0);
        for (int j = 0; j < 8; j++) a[j] = _mm256_add_ps(a[j], _mm256_load_ps(p + i + 8 * j));
    }
    for (int j = 1; j < 8; j++) a[0] = _mm256_add_ps(a[0], a[j]);
    float t[8];
    _mm256_storeu_ps(t, a[0]);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

/* Other CPUs (and x86 without AVX2): eight accumulators in plain C; n is a multiple of 8. */
static float sum_plain(const float *p, size_t n) {
    float a[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (int j = 0; j < 8; j++) a[j] += p[i + j];
    for (int j = 1; j < 8; j++) a[0] += a[j];
    return a[0];
}

static float sum_best(const float *p, size_t n) {
#if BENCH_X86
    if (__builtin_cpu_supports("avx512f")) return sum_512(p, n);
    if (__builtin_cpu_supports("avx2")) return sum_avx2(p, n);
#endif
    return sum_plain(p, n);
}

static void sum_task(void *ctx, int ith, int nth) {
    double c0 = thread_cpu_now();
    sum_job *job = ctx;
    int lo, hi, n_blocks = (int)(job->n / 4096);
    g3_split(n_blocks, ith, nth, 1, &lo, &hi);
    const float *p = job->buf + (size_t)lo * 4096;
    size_t n = (size_t)(hi - lo) * 4096;
    job->partial[ith] = sum_best(p, n);
    cpu_busy[ith] += thread_cpu_now() - c0;
}

/* Best wall and CPU-time bandwidth (GB/s) of a pass over buf. */
static void read_bandwidth(g3_pool *pool, const float *buf, size_t n, double *wall, double *cpu) {
    sum_job job = {.buf = buf, .n = n};
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < (quick ? 2 : 5); rep++) {
        cpu_reset();
        double t0 = g3_now();
        g3_pool_run(pool, sum_task, &job);
        double dt = g3_now() - t0, dc = cpu_max(g3_pool_size(pool));
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    *wall = (double)n * sizeof(float) / best / 1e9;
    *cpu = (double)n * sizeof(float) / best_cpu / 1e9;
}

/* ---- matmul jobs split over the pool by rows ---- */

typedef struct {
    const g3_kernels *k;
    float *Y;
    const uint16_t *W;
    const void *X;
    int n_tok, n_in, n_out, xbf16;
} mm_job;

static void mm_task(void *ctx, int ith, int nth) {
    double c0 = thread_cpu_now();
    mm_job *j = ctx;
    int r0, r1;
    g3_split(j->n_out, ith, nth, 16, &r0, &r1);
    if (r0 >= r1) return;
    if (j->xbf16)
        j->k->matmul_bf16(j->Y, (size_t)j->n_out, j->W, j->X, (size_t)j->n_in, j->n_tok, j->n_in, r0, r1);
    else
        j->k->matmul_f32(j->Y, (size_t)j->n_out, j->W, j->X, (size_t)j->n_in, j->n_tok, j->n_in, r0, r1);
    cpu_busy[ith] += thread_cpu_now() - c0;
}

/* A 1B-shaped weight set: n_layers x (gate, up [6912][1152], down [1152][6912]) + the tied LM
 * head [262144][1152]. */
enum { HID = 1152, FFN = 6912, VOCAB = 262144 };

typedef struct {
    uint16_t *w;
    size_t n_elems;
    int n_layers;
} weight_set;

static double matvec_pass(g3_pool *pool, const g3_kernels *k, const weight_set *ws, float *y,
                          const void *x, int xbf16) {
    double t0 = g3_now();
    const uint16_t *w = ws->w;
    for (int l = 0; l < ws->n_layers; l++) {
        mm_job gate = {k, y, w, x, 1, HID, FFN, xbf16};
        g3_pool_run(pool, mm_task, &gate);
        w += (size_t)FFN * HID;
        mm_job up = {k, y, w, x, 1, HID, FFN, xbf16};
        g3_pool_run(pool, mm_task, &up);
        w += (size_t)FFN * HID;
        mm_job down = {k, y, w, x, 1, FFN, HID, xbf16};
        g3_pool_run(pool, mm_task, &down);
        w += (size_t)HID * FFN;
    }
    mm_job head = {k, y, w, x, 1, HID, VOCAB, xbf16};
    g3_pool_run(pool, mm_task, &head);
    return g3_now() - t0;
}

static double gemm_time(g3_pool *pool, mm_job *job, int reps, double *cpu) {
    double best = 1e30;
    *cpu = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        cpu_reset();
        double t0 = g3_now();
        g3_pool_run(pool, mm_task, job);
        double dt = g3_now() - t0, dc = cpu_max(g3_pool_size(pool));
        if (dt < best) best = dt;
        if (dc < *cpu) *cpu = dc;
    }
    return best;
}

/* ---- instruction peaks: independent chains of one instruction, 2 per cycle on a core with
 * two 512-bit FMA pipes ---- */

#if BENCH_X86
__attribute__((target("avx512f,avx512bf16"))) static double peak_dpbf16(void) {
    __m512 a[24];
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i);
    __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x0001);
    long iters = 10000000;
    double t0 = thread_cpu_now();
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_dpbf16_ps(a[i], b, c);
    }
    double dt = thread_cpu_now() - t0;
    float sink[16];
    _mm512_storeu_ps(sink, a[0]);
    for (int i = 1; i < 24; i++) _mm512_storeu_ps(sink, _mm512_add_ps(_mm512_loadu_ps(sink), a[i]));
    if (sink[0] == 12345.0f) printf(" ");
    return (double)iters * 24 * 32 * 2 / dt / 1e9; /* 32 MACs per instruction */
}

/* 12 independent chains: two FMA ports of latency 4 need 8, and 16 ymm registers hold 12. */
__attribute__((target("avx2,fma"))) static double peak_fma256(void) {
    __m256 a[12];
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    __m256 b = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(1e-9f);
    long iters = 20000000;
    double t0 = thread_cpu_now();
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
    }
    double dt = thread_cpu_now() - t0;
    float sink[8];
    _mm256_storeu_ps(sink, a[0]);
    for (int i = 1; i < 12; i++) _mm256_storeu_ps(sink, _mm256_add_ps(_mm256_loadu_ps(sink), a[i]));
    if (sink[0] == 12345.0f) printf(" ");
    return (double)iters * 12 * 8 * 2 / dt / 1e9;
}

__attribute__((target("avx512f"))) static double peak_fma512(void) {
    __m512 a[24];
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i);
    __m512 b = _mm512_set1_ps(1.0f), c = _mm512_set1_ps(1e-9f);
    long iters = 10000000;
    double t0 = thread_cpu_now();
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
    }
    double dt = thread_cpu_now() - t0;
    float sink[16];
    _mm512_storeu_ps(sink, a[0]);
    for (int i = 1; i < 24; i++) _mm512_storeu_ps(sink, _mm512_add_ps(_mm512_loadu_ps(sink), a[i]));
    if (sink[0] == 12345.0f) printf(" ");
    return (double)iters * 24 * 16 * 2 / dt / 1e9;
}
#endif

static double cpu_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1 || sscanf(line, "cpu MHz\t: %lf", &mhz) == 1) break;
    fclose(f);
    return mhz;
}

static void noop_task(void *ctx, int ith, int nth) {
    (void)ctx, (void)ith, (void)nth;
}

static void fill_bf16(uint16_t *w, size_t n, unsigned seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = g3_f32_to_bf16(((float)(s >> 8) / 16777216.0f - 0.5f) * 0.1f);
    }
}

/* --bandwidth N: only the memory-read reference at N threads, printed as one number (GB/s), for
 * tools/bench-model.sh to set its decode limits from this machine, now. */
static int print_bandwidth(int n_threads) {
    g3_pool *pool = NULL;
    size_t n_ref = (size_t)1 << 28; /* 1 GiB of floats */
    float *ref = g3_alloc_aligned(n_ref * sizeof(float));
    if (!ref || g3_pool_create(n_threads, &pool) != GEMMA3_OK) return 1;
    for (size_t i = 0; i < n_ref; i++) ref[i] = 1.0f;
    double wall, cpu;
    read_bandwidth(pool, ref, n_ref, &wall, &cpu);
    printf("%.1f\n", wall);
    g3_pool_free(pool);
    g3_free_aligned(ref);
    return 0;
}

/* --pool N: only g3_pool_run's fork/join latency at N threads (microseconds per empty job). */
static int print_pool_latency(int n_threads) {
    g3_pool *pool = NULL;
    if (g3_pool_create(n_threads, &pool) != GEMMA3_OK) return 1;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        const int n = 100000;
        double t0 = g3_now();
        for (int i = 0; i < n; i++) g3_pool_run(pool, noop_task, NULL);
        double dt = (g3_now() - t0) / n * 1e6;
        if (dt < best) best = dt;
    }
    printf("%.3f\n", best);
    g3_pool_free(pool);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--bandwidth") == 0) return print_bandwidth(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "--pool") == 0) return print_pool_latency(atoi(argv[2]));
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    g3_pool *pool1 = NULL, *pool2 = NULL;
    if (g3_pool_create(1, &pool1) != GEMMA3_OK || g3_pool_create(2, &pool2) != GEMMA3_OK) return 1;
    g3_pool *pools[2] = {pool1, pool2};

    double mhz = cpu_mhz();
    printf("# bench-kernels (cpus: %d, cpu MHz from /proc/cpuinfo: %.0f)\n\n", g3_n_cpus(), mhz);

    /* pool fork/join latency */
    printf("| test | threads | us per g3_pool_run |\n|---|---|---|\n");
    for (int p = 0; p < 2; p++) {
        int n = quick ? 20000 : 200000;
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = g3_now();
            for (int i = 0; i < n; i++) g3_pool_run(pools[p], noop_task, NULL);
            double dt = (g3_now() - t0) / n * 1e6;
            if (dt < best) best = dt;
        }
        printf("| fork/join (empty job) | %d | %.3f |\n", p + 1, best);
    }

    /* memory-read reference */
    size_t n_ref = (size_t)1 << 28; /* 1 GiB of floats */
    float *ref = g3_alloc_aligned(n_ref * sizeof(float));
    if (!ref) return 1;
    for (size_t i = 0; i < n_ref; i++) ref[i] = 1.0f;
    double bw[2], bw_cpu[2];
    printf("\n| test | threads | GB/s (wall) | GB/s (cpu) |\n|---|---|---|---|\n");
    for (int p = 0; p < 2; p++) {
        read_bandwidth(pools[p], ref, n_ref, &bw[p], &bw_cpu[p]);
        printf("| memory read (sum over 1 GiB) | %d | %.1f | %.1f |\n", p + 1, bw[p], bw_cpu[p]);
    }
    g3_free_aligned(ref);

    weight_set ws = {.n_layers = quick ? 2 : 8};
    ws.n_elems = (size_t)ws.n_layers * 3 * FFN * HID + (size_t)VOCAB * HID;
    ws.w = g3_alloc_aligned(ws.n_elems * sizeof(uint16_t));
    int T = 512;
    float *x = g3_alloc_aligned((size_t)T * FFN * sizeof(float));
    uint16_t *xh = g3_alloc_aligned((size_t)T * FFN * sizeof(uint16_t));
    float *y = g3_alloc_aligned((size_t)(VOCAB > T * FFN ? VOCAB : T * FFN) * sizeof(float));
    if (!ws.w || !x || !xh || !y) return 1;
    fill_bf16(ws.w, ws.n_elems, 1);
    for (size_t i = 0; i < (size_t)T * FFN; i++) x[i] = g3_bf16_to_f32(xh[i] = (uint16_t)(0x3c00 + (i * 7919) % 0x400));

    const g3_kernels *tables[8];
    int n_tables = g3_kernels_all(tables, 8);

    printf("\n| isa | test | threads | ms | GB/s | of read bw | GB/s (cpu) | of read bw (cpu) |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int ti = 0; ti < n_tables; ti++) {
        const g3_kernels *k = tables[ti];
        for (int xb = 0; xb < 2; xb++)
            for (int p = 0; p < 2; p++) {
                int reps = k->isa == G3_ISA_SCALAR ? 1 : (quick ? 2 : 4);
                double best = 1e30, best_cpu = 1e30;
                for (int rep = 0; rep < reps; rep++) {
                    cpu_reset();
                    double dt = matvec_pass(pools[p], k, &ws, y, xb ? (const void *)xh : (const void *)x, xb);
                    double dc = cpu_max(p + 1);
                    if (dt < best) best = dt;
                    if (dc < best_cpu) best_cpu = dc;
                }
                double gbs = (double)ws.n_elems * 2 / best / 1e9;
                double gbs_cpu = (double)ws.n_elems * 2 / best_cpu / 1e9;
                printf("| %s | matvec_%s T=1, %.2f GB | %d | %.1f | %.1f | %.0f%% | %.1f | %.0f%% |\n",
                       k->name, xb ? "bf16" : "f32", ws.n_elems * 2 / 1e9, p + 1, best * 1e3, gbs,
                       100 * gbs / bw[p], gbs_cpu, 100 * gbs_cpu / bw_cpu[p]);
            }
    }

    double peak_dp = 0, peak_fma = 0, peak_fma_ymm = 0;
#if BENCH_X86
    if (__builtin_cpu_supports("avx512f")) peak_fma = peak_fma512();
    if (__builtin_cpu_supports("avx512bf16")) peak_dp = peak_dpbf16();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) peak_fma_ymm = peak_fma256();
#endif
    printf("\nmeasured single-core peaks (thread CPU time): vdpbf16ps %.1f GFLOP/s, vfmadd (zmm) %.1f GFLOP/s, "
           "vfmadd (ymm) %.1f GFLOP/s (at %.0f MHz: %.1f / %.1f / %.1f flops per cycle)\n", peak_dp,
           peak_fma, peak_fma_ymm, mhz, mhz > 0 ? peak_dp * 1e3 / mhz : 0,
           mhz > 0 ? peak_fma * 1e3 / mhz : 0, mhz > 0 ? peak_fma_ymm * 1e3 / mhz : 0);

    printf("\n| isa | test | threads | ms | GFLOP/s | of 1-core peak x threads | GFLOP/s (cpu) | of peak (cpu) |\n"
           "|---|---|---|---|---|---|---|---|\n");
    struct { int n_out, n_in; const char *what; } shapes[] = {{FFN, HID, "[6912][1152]"}, {HID, FFN, "[1152][6912]"}};
    for (int ti = 0; ti < n_tables; ti++) {
        const g3_kernels *k = tables[ti];
        if (k->isa == G3_ISA_SCALAR) continue; /* minutes per call; the matvec row shows its speed */
        for (int s = 0; s < 2; s++)
            for (int xb = 0; xb < 2; xb++)
                for (int p = 0; p < 2; p++) {
                    mm_job job = {k, y, ws.w, xb ? (const void *)xh : (const void *)x, T,
                                  shapes[s].n_in, shapes[s].n_out, xb};
                    double dc, dt = gemm_time(pools[p], &job, quick ? 1 : 3, &dc);
                    double flops = 2.0 * shapes[s].n_out * shapes[s].n_in * T;
                    double gf = flops / dt / 1e9, gf_cpu = flops / dc / 1e9;
                    double peak = (xb && strcmp(k->name, "avx512bf16") == 0) ? peak_dp : peak_fma;
                    if (k->isa == G3_ISA_AVX2) peak = peak_fma_ymm;
                    printf("| %s | matmul_%s T=%d %s | %d | %.1f | %.1f | %.0f%% | %.1f | %.0f%% |\n",
                           k->name, xb ? "bf16" : "f32", T, shapes[s].what, p + 1, dt * 1e3, gf,
                           peak > 0 ? 100 * gf / (peak * (p + 1)) : 0, gf_cpu,
                           peak > 0 ? 100 * gf_cpu / (peak * (p + 1)) : 0);
                }
    }

    g3_free_aligned(ws.w);
    g3_free_aligned(x);
    g3_free_aligned(xh);
    g3_free_aligned(y);
    g3_pool_free(pool1);
    g3_pool_free(pool2);
    return 0;
}
