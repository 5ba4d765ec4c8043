/* bench-quant - throughput of the quantized matmul kernels, per variant, next to BF16.
 *
 *   build/tools/bench-quant [--quick | --cache] [--type NAME ...]   (--type q4_k: that type only)
 *
 * Decode: one matvec (T=1) over every matrix of a Gemma 3 1B-shaped model (26 layers of q, k,
 * v, o, gate, up, down and the tied [262144][1152] head: ~1.0 G weights) as GB/s of weights
 * streamed and ms per pass (the matmul time of one decoded token), 1 and 2 threads. The
 * K-quants (rows of a multiple of 256 weights: in a 1B file only o and down, its other matrices
 * take a fallback type) over the 26 layers' o [1152][1024] and down [1152][6912].
 * Prefill: T=512 over [6912][1152] and [1152][6912] as GFLOP/s (2 * rows * n_in * T / s),
 * activation quantization excluded (it is O(n_in T), next to O(rows n_in T)); the K-quants over
 * 4B's [10240][2560] and [2560][10240] at T = 2, 3, 4, 8, 16, 64 and 512.
 * Each figure is the best of a few repetitions; "cpu" columns divide by the busiest thread's
 * CPU time instead of the wall clock (what the kernel does when it runs, on a shared machine). */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "quant.h"
#include "threads.h"
#include "util.h"

enum { HID = 1152, FFN = 6912, QDIM = 1024, KVDIM = 256, VOCAB = 262144, LAYERS = 26 };
enum { HID_4B = 2560, FFN_4B = 10240 }; /* the K-quants' prefill: 4B's widths (1B's 1152 is none) */

static double cpu_busy[64];

static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_max(int nth) {
    double m = 0;
    for (int i = 0; i < nth; i++) m = cpu_busy[i] > m ? cpu_busy[i] : m;
    return m;
}

/* One matmul split over the pool by rows in grains of 16, as the forward pass does. */
typedef struct {
    const g3_quant_kernels *qk; /* NULL: BF16 through bk */
    const g3_kernels *bk;
    g3_wtype wt;
    int x8; /* the x8 layout's kernels (the random blocks read as groups: the same work) */
    float *Y;
    const void *W, *X;
    int n_tok, n_in, n_out;
} mm_job;

typedef void (*qmatmul_fn)(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                           int n_in, int r0, int r1);

/* The table's integer matmul for a weight type, in the row or the x8 layout. */
static qmatmul_fn quant_matmul(const g3_quant_kernels *k, g3_wtype wt, int x8) {
    return (x8 ? k->matmul_q_x8 : k->matmul_q)[wt];
}

static void mm_task(void *ctx, int ith, int nth) {
    const double c0 = thread_cpu_now();
    const mm_job *j = ctx;
    int r0, r1;
    g3_split(j->n_out, ith, nth, 16, &r0, &r1);
    if (r0 < r1) {
        if (!j->qk)
            j->bk->matmul_bf16(j->Y, (size_t)j->n_out, j->W, j->X, (size_t)j->n_in, j->n_tok, j->n_in, r0, r1);
        else
            quant_matmul(j->qk, j->wt, j->x8)(j->Y, (size_t)j->n_out, j->W, j->X, j->n_tok, j->n_in, r0, r1);
    }
    cpu_busy[ith] += thread_cpu_now() - c0;
}

/* The matrices of the model in forward order: rows, n_in. */
typedef struct {
    int rows, n_in;
} mat;

static int model_mats(mat *m, int n_layers) {
    int n = 0;
    for (int l = 0; l < n_layers; l++) {
        m[n++] = (mat){QDIM, HID};
        m[n++] = (mat){KVDIM, HID};
        m[n++] = (mat){KVDIM, HID};
        m[n++] = (mat){HID, QDIM};
        m[n++] = (mat){FFN, HID};
        m[n++] = (mat){FFN, HID};
        m[n++] = (mat){HID, FFN};
    }
    m[n++] = (mat){VOCAB, HID};
    return n;
}

/* The matrices a 1B K-quant file holds in a K type (n_in a multiple of 256): o and down. */
static int model_mats_k(mat *m, int n_layers) {
    int n = 0;
    for (int l = 0; l < n_layers; l++) {
        m[n++] = (mat){HID, QDIM};
        m[n++] = (mat){HID, FFN};
    }
    return n;
}

static size_t mat_bytes(g3_wtype wt, mat m) { return g3_wtype_row_bytes(wt, m.n_in) * (size_t)m.rows; }

/* Random weights: block bytes straight from a generator (any q and d are valid blocks; the
 * d are kept finite and moderate so no lane overflows). */
static void fill_blocks(g3_wtype wt, void *w, size_t bytes) {
    uint8_t *p = w;
    uint32_t s = 12345;
    for (size_t i = 0; i < bytes; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (uint8_t)(s >> 24);
    }
    const g3_wtype_traits *tr = g3_wtype_get(wt);
    const size_t bs = tr->block_bytes;
    const int has_min = wt == GEMMA3_WEIGHTS_Q4_1 || wt == GEMMA3_WEIGHTS_Q5_1;
    for (size_t o = 0; o + bs <= bytes; o += bs) {
        uint16_t d = 0x2000 | (uint16_t)(p[o] & 0x3ff); /* ~ 2^-7 */
        memcpy(p + o, &d, 2);
        if (has_min) memcpy(p + o + 2, &d, 2); /* the minimum: finite too */
        for (int i = 0; i < tr->n_f16; i++) memcpy(p + o + tr->f16_at[i], &d, 2); /* K: d, dmin */
    }
}

static void usage_quit(void) {
    fprintf(stderr, "usage: bench-quant [--quick | --cache] [--type NAME ...]\n");
    exit(2);
}

/* The types asked for (--type, repeatable; none: all). */
static int only[GEMMA3_WEIGHTS_COUNT], n_only;

static int wanted(int wt) { return n_only == 0 || only[wt]; }

/* Decode matvec over a [256][1152] matrix that stays in L2 (166 KB of Q4_0, 313 KB of Q8_0:
 * within Zen 3's 512 KB; the K-quants [256][1024], up to 215 KB of Q6_K), one thread, best of many calls by thread CPU time: the kernel's
 * compute ceiling, free of DRAM and of most of the noise of a shared machine (the figure the
 * full-model rows approach when memory keeps up). */
static void bench_cache(const g3_quant_kernels *const *tables, int n_tables, const float *x) {
    enum { ROWS = 256, REPS = 400, CALLS = 32 };
    static float y[ROWS];
    void *xq = malloc(g3_act_row_bytes(HID) + g3_act_k_row_bytes(QDIM));
    printf("| variant | type | test | GB/s (cpu) | blocks/us |\n|---|---|---|---|---|\n");
    for (int wt = GEMMA3_WEIGHTS_Q8_0; wt < GEMMA3_WEIGHTS_COUNT; wt++) {
        if (!g3_wtype_is_block(wt) || !wanted(wt)) continue;
        const int kq = g3_wtype_get(wt)->act_k, n_in = kq ? QDIM : HID;
        const size_t bytes = g3_wtype_row_bytes((g3_wtype)wt, n_in) * ROWS;
        void *w = g3_alloc_aligned(bytes);
        fill_blocks((g3_wtype)wt, w, bytes);
        for (int ti = 1; ti < n_tables; ti++)
            for (int x8 = 0; x8 <= g3_wtype_get(wt)->x8; x8++) {
                const g3_quant_kernels *k = tables[ti];
                if (kq) g3_quantize_act_k(k, xq, x, 0, n_in);
                else k->quantize_act(xq, HID, x, 0, HID);
                double best = 1e30;
                for (int rep = 0; rep < REPS; rep++) {
                    const double c0 = thread_cpu_now();
                    for (int i = 0; i < CALLS; i++) quant_matmul(k, (g3_wtype)wt, x8)(y, ROWS, w, xq, 1, n_in, 0, ROWS);
                    const double dc = (thread_cpu_now() - c0) / CALLS;
                    best = dc < best ? dc : best;
                }
                printf("| %s%s | %s | matvec T=1 [%d][%d] in L2 | %.1f | %.0f |\n", k->name, x8 ? " x8" : "",
                       g3_wtype_name_upper((g3_wtype)wt), ROWS, n_in, bytes / best / 1e9,
                       ROWS * (n_in / g3_wtype_get(wt)->block) / best / 1e6);
            }
        g3_free_aligned(w);
    }
    free(xq);
}

int main(int argc, char **argv) {
    int quick = 0, cache_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--cache") == 0) cache_only = 1;
        else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc && g3_wtype_parse(argv[i + 1]) > 0)
            only[g3_wtype_parse(argv[++i])] = 1, n_only++;
        else usage_quit();
    }
    g3_pool *pools[2] = {NULL, NULL};
    if (g3_pool_create(1, &pools[0]) != GEMMA3_OK || g3_pool_create(2, &pools[1]) != GEMMA3_OK) return 1;
    const int n_layers = quick ? 4 : LAYERS, reps = quick ? 2 : 4;
    mat mats_q[8 * LAYERS + 1], mats_k[2 * LAYERS];
    const int n_mats_q = model_mats(mats_q, n_layers), n_mats_k = model_mats_k(mats_k, n_layers);

    const g3_quant_kernels *tables[8];
    const int n_tables = g3_quant_kernels_all(tables, 8);
    const g3_kernels *bk = g3_kernels_get(g3_isa_detect());
    const int T = 512;
    float *x = malloc((size_t)T * FFN * sizeof *x);
    uint16_t *xh = malloc((size_t)T * FFN * sizeof *xh);
    void *xq = malloc(g3_act_row_bytes(FFN) * (size_t)T);
    void *xq_k = malloc(g3_act_k_row_bytes(QDIM) + g3_act_k_row_bytes(FFN));
    float *y = malloc((size_t)(VOCAB > T * FFN ? VOCAB : T * FFN) * sizeof *y);
    if (!x || !xh || !xq || !xq_k || !y) return 1;
    for (size_t i = 0; i < (size_t)T * FFN; i++) {
        x[i] = (float)((int)(i * 7919 % 2001) - 1000) * 1e-3f;
        xh[i] = g3_f32_to_bf16(x[i]);
    }

    bench_cache(tables, n_tables, x);
    if (cache_only) return 0;
    printf("\n# bench-quant: %d layers of a Gemma 3 1B shape, best of %d\n\n", n_layers, reps);
    printf("| variant | type | test | threads | ms | GB/s | GB/s (cpu) |\n|---|---|---|---|---|---|---|\n");
    for (int wt = GEMMA3_WEIGHTS_BF16; wt < GEMMA3_WEIGHTS_COUNT; wt++) {
        if (!wanted(wt)) continue;
        const int kq = g3_wtype_get(wt)->act_k;
        const mat *mats = kq ? mats_k : mats_q;
        const int n_mats = kq ? n_mats_k : n_mats_q;
        size_t total = 0;
        for (int i = 0; i < n_mats; i++) total += mat_bytes((g3_wtype)wt, mats[i]);
        char *w = g3_alloc_aligned(total);
        if (!w) return 1;
        if (wt == GEMMA3_WEIGHTS_BF16) {
            uint16_t *h = (uint16_t *)(void *)w;
            for (size_t i = 0; i < total / 2; i++) h[i] = g3_f32_to_bf16((float)((int)(i % 255) - 127) * 1e-3f);
        } else {
            fill_blocks((g3_wtype)wt, w, total);
        }
        for (int ti = 0; ti < (wt == GEMMA3_WEIGHTS_BF16 ? 1 : n_tables); ti++) {
            const g3_quant_kernels *qk = wt == GEMMA3_WEIGHTS_BF16 ? NULL : tables[ti];
            if (qk && strcmp(qk->name, "scalar") == 0) continue; /* seconds per pass */
            /* the decode activation of each width, at its own offset in xq (Q8_K rows in xq_k) */
            char *xq_w[3] = {xq, (char *)xq + g3_act_row_bytes(FFN), (char *)xq + 2 * g3_act_row_bytes(FFN)};
            const int widths[3] = {HID, QDIM, FFN};
            if (kq) {
                xq_w[1] = xq_k, xq_w[2] = (char *)xq_k + g3_act_k_row_bytes(QDIM);
                for (int i = 1; i < 3; i++) g3_quantize_act_k(qk, xq_w[i], x, 0, widths[i]);
            } else if (qk) {
                for (int i = 0; i < 3; i++) qk->quantize_act(xq_w[i], widths[i], x, 0, widths[i]);
            }
            for (int x8 = 0; x8 <= (qk != NULL && g3_wtype_get(wt)->x8); x8++)
            for (int p = 0; p < 2; p++) {
                double best = 1e30, best_cpu = 1e30;
                for (int rep = 0; rep < (total < (size_t)500e6 ? 4 * reps : reps); rep++) { /* K: ms a pass */
                    memset(cpu_busy, 0, sizeof cpu_busy);
                    const char *wp = w;
                    const double t0 = g3_now();
                    for (int i = 0; i < n_mats; i++) {
                        const int wi = mats[i].n_in == HID ? 0 : mats[i].n_in == QDIM ? 1 : 2;
                        mm_job job = {qk, bk, (g3_wtype)wt, x8, y, wp, qk ? (const void *)xq_w[wi] : (const void *)xh,
                                      1, mats[i].n_in, mats[i].rows};
                        g3_pool_run(pools[p], mm_task, &job);
                        wp += mat_bytes((g3_wtype)wt, mats[i]);
                    }
                    const double dt = g3_now() - t0, dc = cpu_max(p + 1);
                    best = dt < best ? dt : best;
                    best_cpu = dc < best_cpu ? dc : best_cpu;
                }
                printf("| %s%s | %s | matvec T=1, %.2f GB | %d | %.1f | %.1f | %.1f |\n",
                       qk ? qk->name : bk->name, x8 ? " x8" : "", g3_wtype_name_upper((g3_wtype)wt), total / 1e9, p + 1,
                       best * 1e3, total / best / 1e9, total / best_cpu / 1e9);
                fflush(stdout);
            }
        }
        g3_free_aligned(w);
    }

    printf("\n| variant | type | test | threads | ms | GFLOP/s | GFLOP/s (cpu) |\n|---|---|---|---|---|---|---|\n");
    const mat shapes[2] = {{FFN, HID}, {HID, FFN}};
    for (int s = 0; s < 2; s++)
        for (int wt = GEMMA3_WEIGHTS_BF16; wt < GEMMA3_WEIGHTS_COUNT; wt++) {
            if (g3_wtype_get(wt)->block > G3_QK || !wanted(wt)) continue;
            const size_t bytes = mat_bytes((g3_wtype)wt, shapes[s]);
            char *w = g3_alloc_aligned(bytes);
            if (!w) return 1;
            if (wt == GEMMA3_WEIGHTS_BF16) memset(w, 0x3c, bytes);
            else fill_blocks((g3_wtype)wt, w, bytes);
            for (int ti = 0; ti < (wt == GEMMA3_WEIGHTS_BF16 ? 1 : n_tables); ti++) {
                const g3_quant_kernels *qk = wt == GEMMA3_WEIGHTS_BF16 ? NULL : tables[ti];
                if (qk && strcmp(qk->name, "scalar") == 0) continue;
                if (qk)
                    for (int t = 0; t < T; t++)
                        qk->quantize_act((char *)xq + (size_t)t * g3_act_row_bytes(shapes[s].n_in),
                                         shapes[s].n_in, x + (size_t)t * shapes[s].n_in, 0,
                                         shapes[s].n_in);
                for (int x8 = 0; x8 <= (qk != NULL && g3_wtype_get(wt)->x8); x8++)
                for (int p = 0; p < 2; p++) {
                    double best = 1e30, best_cpu = 1e30;
                    for (int rep = 0; rep < (quick ? 1 : 3); rep++) {
                        memset(cpu_busy, 0, sizeof cpu_busy);
                        mm_job job = {qk, bk, (g3_wtype)wt, x8, y, w, qk ? xq : (const void *)xh, T,
                                      shapes[s].n_in, shapes[s].rows};
                        const double t0 = g3_now();
                        g3_pool_run(pools[p], mm_task, &job);
                        const double dt = g3_now() - t0, dc = cpu_max(p + 1);
                        best = dt < best ? dt : best;
                        best_cpu = dc < best_cpu ? dc : best_cpu;
                    }
                    const double flops = 2.0 * shapes[s].rows * shapes[s].n_in * T;
                    printf("| %s%s | %s | matmul T=%d [%d][%d] | %d | %.1f | %.1f | %.1f |\n",
                           qk ? qk->name : bk->name, x8 ? " x8" : "", g3_wtype_name_upper((g3_wtype)wt), T,
                           shapes[s].rows, shapes[s].n_in, p + 1, best * 1e3, flops / best / 1e9,
                           flops / best_cpu / 1e9);
                    fflush(stdout);
                }
            }
            g3_free_aligned(w);
        }

    /* The K-quants' prefill: no 1B matrix above is one (1152 columns), so 4B's gate / up and
     * down, from T tokens down to the few where the amx table hands batches to its VNNI
     * kernels (AMX_KQ_MIN_TOK in kernels/quant-amx.inc); Q8_K activations. */
    const mat shapes_k[2] = {{FFN_4B, HID_4B}, {HID_4B, FFN_4B}};
    const int toks_k[] = {2, 3, 4, 8, 16, 64, T};
    float *xk = malloc((size_t)T * FFN_4B * sizeof *xk), *yk = malloc((size_t)T * FFN_4B * sizeof *yk);
    void *xqk = malloc(g3_act_k_row_bytes(FFN_4B) * (size_t)T);
    if (!xk || !yk || !xqk) return 1;
    for (size_t i = 0; i < (size_t)T * FFN_4B; i++) xk[i] = (float)((int)(i * 7919 % 2001) - 1000) * 1e-3f;
    for (int s = 0; s < 2; s++)
        for (int wt = GEMMA3_WEIGHTS_BF16; wt < GEMMA3_WEIGHTS_COUNT; wt++) {
            if (!g3_wtype_is_block(wt) || !g3_wtype_get(wt)->act_k || !wanted(wt)) continue;
            const size_t bytes = mat_bytes((g3_wtype)wt, shapes_k[s]);
            char *w = g3_alloc_aligned(bytes);
            if (!w) return 1;
            fill_blocks((g3_wtype)wt, w, bytes);
            for (int ti = 0; ti < n_tables; ti++) {
                const g3_quant_kernels *qk = tables[ti];
                if (strcmp(qk->name, "scalar") == 0) continue;
                const int n_in = shapes_k[s].n_in;
                for (int t = 0; t < T; t++)
                    g3_quantize_act_k(qk, (char *)xqk + (size_t)t * g3_act_k_row_bytes(n_in), xk + (size_t)t * n_in, 0,
                                      n_in);
                for (size_t nt = 0; nt < sizeof toks_k / sizeof toks_k[0]; nt++)
                    for (int p = 0; p < 2; p++) {
                        double best = 1e30, best_cpu = 1e30;
                        for (int rep = 0; rep < (quick ? 1 : 3); rep++) {
                            memset(cpu_busy, 0, sizeof cpu_busy);
                            mm_job job = {qk, bk, (g3_wtype)wt, 0, yk, w, xqk, toks_k[nt], n_in, shapes_k[s].rows};
                            const double t0 = g3_now();
                            g3_pool_run(pools[p], mm_task, &job);
                            const double dt = g3_now() - t0, dc = cpu_max(p + 1);
                            best = dt < best ? dt : best;
                            best_cpu = dc < best_cpu ? dc : best_cpu;
                        }
                        const double flops = 2.0 * shapes_k[s].rows * n_in * toks_k[nt];
                        printf("| %s | %s | matmul T=%d [%d][%d] | %d | %.2f | %.1f | %.1f |\n", qk->name,
                               g3_wtype_name_upper((g3_wtype)wt), toks_k[nt], shapes_k[s].rows, n_in, p + 1, best * 1e3,
                               flops / best / 1e9, flops / best_cpu / 1e9);
                        fflush(stdout);
                    }
            }
            g3_free_aligned(w);
        }
    free(xk), free(yk), free(xqk);
    free(x), free(xh), free(xq), free(xq_k), free(y);
    g3_pool_free(pools[0]);
    g3_pool_free(pools[1]);
    return 0;
}
