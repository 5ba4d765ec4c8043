/* test-kernels - every ISA table this CPU runs against the scalar reference, the matmul
 * determinism contract, and the thread pool.
 *
 * Error bounds (relative to the data, not to the result, where cancellation is possible):
 *   matmul / dot:   |y - ref| <= 1e-5 * sum_k |w_k x_k| + 1e-30   (ref: scalar, fp32; the
 *                   SIMD sum order differs, each order's error is < n eps sum|w x|, n <= 1153
 *                   spread over 16 lanes -> well inside)
 *   matmul_bf16 with vdpbf16ps: same bound (products of two bf16 are exact in fp32)
 *   axpy:           |y - ref| <= 2^-23 * (|y0| + |a x|) * 2   (fused vs unfused multiply-add)
 *   rmsnorm:        |y - ref| <= 1e-5 * |ref| + 1e-30
 *   gelu_tanh_mul:  SIMD vs a double evaluation at the same fp32 argument u:
 *                   |y - ref| <= 1e-6 * |ref| + 1e-37 (exp within ~2 ulp, three roundings);
 *                   the scalar tanhf form vs the same: <= 1e-6 |ref| + 2^-23 |z up| (its
 *                   1 + tanh(u) cancels for negative u, so its error is absolute)
 *   softmax:        |y - ref| <= 1e-5 * ref + 1e-30 against double exp of the same fp32
 *                   difference x - max; -inf entries give exactly 0; all -inf gives all 0
 *   log_sum_exp:    |y - ref| <= 1e-6 against a double evaluation, whole and merged in strips;
 *                   NaN for a NaN or an infinity anywhere
 *   to_bf16:        bit-exact with g3_f32_to_bf16, NaN/inf/ties/subnormals included. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kernels.h"
#include "threads.h"
#include "util.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "test-rng.h"

static void fill_f32(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = rng_f() * scale;
}

static void fill_bf16(uint16_t *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = g3_f32_to_bf16(rng_f() * scale);
}

static const int n_ins[] = {1, 7, 16, 31, 33, 100, 257, 1153, 3001};
static const int n_rows[] = {1, 5, 17, 40, 70}; /* 70: several 16-row tiles, the last one shifted */
static const int n_toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 37};

#define N_ELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One table's matmul_f32 or matmul_bf16 against the scalar one, for every size above. The
 * outputs live at an ldy wider than the rows, with sentinels around, to catch stray stores. */
static void test_matmul(const g3_kernels *k, const g3_kernels *ref, int xbf16) {
    int bad = 0, checked = 0;
    for (int a = 0; a < N_ELEMS(n_ins); a++)
        for (int b = 0; b < N_ELEMS(n_rows); b++)
            for (int c = 0; c < N_ELEMS(n_toks); c++) {
                int n_in = n_ins[a], rows = n_rows[b], n_tok = n_toks[c];
                size_t ldx = (size_t)n_in + 3, ldy = (size_t)rows + 5;
                uint16_t *W = malloc((size_t)rows * n_in * sizeof *W);
                float *X = malloc((size_t)n_tok * ldx * sizeof *X);
                uint16_t *Xh = malloc((size_t)n_tok * ldx * sizeof *Xh);
                float *Y = malloc((size_t)n_tok * ldy * sizeof *Y);
                float *R = malloc((size_t)n_tok * ldy * sizeof *R);
                fill_bf16(W, (size_t)rows * n_in, 1.0f);
                fill_f32(X, (size_t)n_tok * ldx, 2.0f);
                for (size_t i = 0; i < (size_t)n_tok * ldx; i++) Xh[i] = g3_f32_to_bf16(X[i]);
                for (size_t i = 0; i < (size_t)n_tok * ldy; i++) Y[i] = R[i] = -777.0f;
                /* rows [1, rows) only when rows > 1, so r0 != 0 is covered */
                int r0 = rows > 1 ? 1 : 0;
                if (xbf16) {
                    k->matmul_bf16(Y, ldy, W, Xh, ldx, n_tok, n_in, r0, rows);
                    ref->matmul_bf16(R, ldy, W, Xh, ldx, n_tok, n_in, r0, rows);
                } else {
                    k->matmul_f32(Y, ldy, W, X, ldx, n_tok, n_in, r0, rows);
                    ref->matmul_f32(R, ldy, W, X, ldx, n_tok, n_in, r0, rows);
                }
                for (int t = 0; t < n_tok; t++)
                    for (size_t r = 0; r < ldy; r++) {
                        float y = Y[t * ldy + r], want = R[t * ldy + r];
                        checked++;
                        if ((int)r < r0 || (int)r >= rows) { /* untouched */
                            if (y != -777.0f) bad++;
                            continue;
                        }
                        double mag = 0;
                        for (int kk = 0; kk < n_in; kk++) {
                            float xv = xbf16 ? g3_bf16_to_f32(Xh[t * ldx + kk]) : X[t * ldx + kk];
                            mag += fabs((double)g3_bf16_to_f32(W[r * n_in + kk]) * xv);
                        }
                        if (!(fabs((double)y - want) <= 1e-5 * mag + 1e-30)) {
                            if (bad < 5)
                                fprintf(stderr, "%s matmul_%s n_in=%d rows=%d n_tok=%d t=%d r=%zu: %.9g vs %.9g\n",
                                        k->name, xbf16 ? "bf16" : "f32", n_in, rows, n_tok, t, r, y, want);
                            bad++;
                        }
                    }
                free(W), free(X), free(Xh), free(Y), free(R);
            }
    CHECK_MSG(bad == 0, "%s matmul_%s: %d of %d outputs out of bound", k->name,
              xbf16 ? "bf16" : "f32", bad, checked);
}

/* The determinism contract: one T=37 call over all rows == 37 single-token calls == calls on
 * split row ranges (odd splits, and the g3_split shares of 2 and 3 threads), bitwise. */
static void test_determinism(const g3_kernels *k, int xbf16) {
    const int n_tok = 37, rows = 53;
    /* 3001: k-blocked, tail in the last block; 20000: amx-bf16 cuts 37 tokens into two blocks */
    int ins[] = {31, 100, 1153, 3001, 20000};
    for (int a = 0; a < 5; a++) {
        int n_in = ins[a];
        uint16_t *W = malloc((size_t)rows * n_in * sizeof *W);
        float *X = malloc((size_t)n_tok * n_in * sizeof *X);
        uint16_t *Xh = malloc((size_t)n_tok * n_in * sizeof *Xh);
        float *Yall = malloc((size_t)n_tok * rows * sizeof(float));
        float *Y = malloc((size_t)n_tok * rows * sizeof(float));
        fill_bf16(W, (size_t)rows * n_in, 1.0f);
        fill_f32(X, (size_t)n_tok * n_in, 3.0f);
        k->to_bf16(Xh, X, n_tok * n_in);
#define MM(Yp, Xoff, nt, lo, hi)                                                               \
    (xbf16 ? k->matmul_bf16((Yp), rows, W, Xh + (Xoff), n_in, (nt), n_in, (lo), (hi))          \
           : k->matmul_f32((Yp), rows, W, X + (Xoff), n_in, (nt), n_in, (lo), (hi)))
        MM(Yall, 0, n_tok, 0, rows);
        /* token by token */
        memset(Y, 0, (size_t)n_tok * rows * sizeof(float));
        for (int t = 0; t < n_tok; t++) MM(Y + t * rows, (size_t)t * n_in, 1, 0, rows);
        CHECK_MSG(memcmp(Y, Yall, (size_t)n_tok * rows * sizeof(float)) == 0,
                  "%s matmul_%s n_in=%d: T=1 calls differ from one T=37 call", k->name,
                  xbf16 ? "bf16" : "f32", n_in);
        /* uneven token chunks (2, 3, 5, ...) and odd row ranges */
        memset(Y, 0, (size_t)n_tok * rows * sizeof(float));
        int cuts[] = {0, 3, 7, 16, 19, rows};
        for (int t = 0, step = 2; t < n_tok; t += step, step++) {
            int nt = t + step <= n_tok ? step : n_tok - t;
            for (int c = 0; c + 1 < 6; c++) MM(Y + t * rows, (size_t)t * n_in, nt, cuts[c], cuts[c + 1]);
        }
        CHECK_MSG(memcmp(Y, Yall, (size_t)n_tok * rows * sizeof(float)) == 0,
                  "%s matmul_%s n_in=%d: token chunks x row ranges differ", k->name,
                  xbf16 ? "bf16" : "f32", n_in);
        for (int nth = 2; nth <= 3; nth++) {
            memset(Y, 0, (size_t)n_tok * rows * sizeof(float));
            for (int ith = 0; ith < nth; ith++) {
                int lo, hi;
                g3_split(rows, ith, nth, 16, &lo, &hi);
                if (lo < hi) MM(Y, 0, n_tok, lo, hi);
            }
            CHECK_MSG(memcmp(Y, Yall, (size_t)n_tok * rows * sizeof(float)) == 0,
                      "%s matmul_%s n_in=%d: %d-thread row split differs", k->name,
                      xbf16 ? "bf16" : "f32", n_in, nth);
        }
#undef MM
        free(W), free(X), free(Xh), free(Yall), free(Y);
    }
}

static void test_dot_axpy(const g3_kernels *k) {
    int sizes[] = {1, 7, 15, 16, 17, 31, 33, 100, 257, 1153};
    for (int s = 0; s < N_ELEMS(sizes); s++) {
        int n = sizes[s];
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        float *y = malloc(n * sizeof *y), *yr = malloc(n * sizeof *yr);
        uint16_t *bh = malloc(n * sizeof *bh);
        fill_f32(a, n, 2.0f);
        fill_f32(b, n, 2.0f);
        fill_bf16(bh, n, 2.0f);
        double mag = 0, magh = 0;
        for (int i = 0; i < n; i++) {
            mag += fabs((double)a[i] * b[i]);
            magh += fabs((double)a[i] * g3_bf16_to_f32(bh[i]));
        }
        float want = 0, wanth = 0;
        double wd = 0, wdh = 0;
        for (int i = 0; i < n; i++) {
            wd += (double)a[i] * b[i];
            wdh += (double)a[i] * g3_bf16_to_f32(bh[i]);
        }
        want = (float)wd, wanth = (float)wdh;
        CHECK_NEAR(k->dot_f32(a, b, n), want, 1e-5 * mag + 1e-30);
        CHECK_NEAR(k->dot_bf16(a, bh, n), wanth, 1e-5 * magh + 1e-30);

        float alpha = 0.37f;
        int bad = 0;
        memcpy(y, b, n * sizeof *y);
        k->axpy_f32(y, alpha, a, n);
        for (int i = 0; i < n; i++) {
            double r = b[i] + (double)alpha * a[i];
            if (!(fabs(y[i] - r) <= 2.4e-7 * (fabs(b[i]) + fabs(alpha * a[i])))) bad++;
        }
        memcpy(y, b, n * sizeof *y);
        k->axpy_bf16(y, alpha, bh, n);
        for (int i = 0; i < n; i++) {
            double xv = g3_bf16_to_f32(bh[i]), r = b[i] + (double)alpha * xv;
            if (!(fabs(y[i] - r) <= 2.4e-7 * (fabs(b[i]) + fabs(alpha * xv)))) bad++;
        }
        CHECK_MSG(bad == 0, "%s axpy n=%d: %d elements out of bound", k->name, n, bad);
        free(a), free(b), free(y), free(yr), free(bh);
    }
}

/* dots_* / axpys_* against the same table's dot_* / axpy_* one call at a time: bit for bit
 * (attention groups query heads with them, and a head's logits must not depend on the
 * grouping), fp32 and bf16 rows, for 1..5 vectors (the grouped paths take 1-4 at a time), row
 * lengths on and off the vector paths' multiples, and a row stride wider than the row. */
static void test_dots_axpys(const g3_kernels *k) {
    const int lens[] = {256, 128, 64, 32, 96, 80, 7, 23, 45}; /* 23, 45: a tail after whole vectors */
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int li = 0; li < N_ELEMS(lens); li++)
            for (int na = 1; na <= 5; na++) {
                const int n = lens[li], rows = 37, ldb = 3 * n + 5, ld = 41;
                float *a = malloc((size_t)na * n * sizeof *a), *c = malloc((size_t)na * ld * sizeof *c);
                float *s = malloc((size_t)na * ld * sizeof *s);
                float *y = malloc((size_t)na * n * sizeof *y), *yr = malloc((size_t)na * n * sizeof *yr);
                float *bf = malloc((size_t)rows * ldb * sizeof *bf);
                uint16_t *bh = malloc((size_t)rows * ldb * sizeof *bh);
                fill_f32(a, (size_t)na * n, 2.0f);
                fill_f32(c, (size_t)na * ld, 1.0f);
                fill_f32(y, (size_t)na * n, 1.0f);
                memcpy(yr, y, (size_t)na * n * sizeof *y);
                fill_f32(bf, (size_t)rows * ldb, 2.0f);
                fill_bf16(bh, (size_t)rows * ldb, 2.0f);
                const void *b = bf16 ? (const void *)bh : (const void *)bf;
                (bf16 ? k->dots_bf16 : k->dots_f32)(s, ld, a, na, b, ldb, rows, n);
                (bf16 ? k->axpys_bf16 : k->axpys_f32)(y, na, c, ld, b, ldb, rows, n);
                int bad_dot = 0;
                for (int h = 0; h < na; h++)
                    for (int i = 0; i < rows; i++) {
                        const float *ah = a + (size_t)h * n;
                        float want = bf16 ? k->dot_bf16(ah, bh + (size_t)i * ldb, n) : k->dot_f32(ah, bf + (size_t)i * ldb, n);
                        bad_dot += memcmp(&want, &s[h * ld + i], sizeof want) != 0;
                        if (bf16) k->axpy_bf16(yr + (size_t)h * n, c[h * ld + i], bh + (size_t)i * ldb, n);
                        else k->axpy_f32(yr + (size_t)h * n, c[h * ld + i], bf + (size_t)i * ldb, n);
                    }
                const char *t = bf16 ? "bf16" : "f32";
                CHECK_MSG(bad_dot == 0, "%s dots_%s n=%d vectors=%d: %d dots differ from dot_%s", k->name, t, n, na,
                          bad_dot, t);
                CHECK_MSG(!memcmp(y, yr, (size_t)na * n * sizeof *y), "%s axpys_%s n=%d vectors=%d: differs from axpy_%s row by row",
                          k->name, t, n, na, t);
                free(a), free(c), free(s), free(y), free(yr), free(bf), free(bh);
            }
}

static void test_rmsnorm(const g3_kernels *k, const g3_kernels *ref) {
    int sizes[] = {1, 7, 16, 33, 257, 1152, 2560};
    for (int s = 0; s < N_ELEMS(sizes); s++) {
        int n = sizes[s];
        float *x = malloc(n * sizeof *x), *w = malloc(n * sizeof *w);
        float *y = malloc(n * sizeof *y), *yr = malloc(n * sizeof *yr);
        fill_f32(x, n, 30.0f);
        fill_f32(w, n, 1.5f);
        ref->rmsnorm(yr, x, w, n, 1e-6f);
        k->rmsnorm(y, x, w, n, 1e-6f);
        int bad = 0;
        for (int i = 0; i < n; i++)
            if (!(fabs(y[i] - yr[i]) <= 1e-5 * fabs(yr[i]) + 1e-30)) bad++;
        k->rmsnorm(x, x, w, n, 1e-6f); /* in place */
        if (memcmp(x, y, n * sizeof *x) != 0) bad++;
        CHECK_MSG(bad == 0, "%s rmsnorm n=%d: %d elements out of bound", k->name, n, bad);
        free(x), free(w), free(y), free(yr);
    }
}

/* gelu over [-40, 40] (past where 1 + tanh underflows both ways) plus a few huge |z|. */
static void test_gelu(const g3_kernels *k) {
    enum { N = 4001 };
    float *z = malloc(N * sizeof *z), *up = malloc(N * sizeof *up), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++) {
        z[i] = -40.0f + 80.0f * i / (N - 1) + 1e-3f * rng_f();
        up[i] = 1.0f + rng_f();
    }
    z[0] = -1e6f, z[1] = 1e6f, z[2] = 0.0f, z[3] = -0.0f, z[4] = 1e-30f, z[5] = -3e-6f;
    k->gelu_tanh_mul(y, z, up, N);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < N; i++) {
        float u = 0.7978845608028654f * (z[i] + 0.044715f * z[i] * z[i] * z[i]);
        double want = (double)z[i] * up[i] / (1.0 + exp(-2.0 * (double)u));
        double err = fabs(y[i] - want);
        double tol = 1e-6 * fabs(want) + 1e-37;
        if (k->isa == G3_ISA_SCALAR) tol += 1.2e-7 * fabs((double)z[i] * up[i]);
        if (!(err <= tol)) {
            if (bad < 3) fprintf(stderr, "%s gelu z=%.9g: %.9g vs %.9g\n", k->name, z[i], y[i], want);
            bad++;
        }
        if (fabs(want) > 1e-30 && err / fabs(want) > worst) worst = err / fabs(want); /* normal range */
    }
    CHECK_MSG(bad == 0, "%s gelu_tanh_mul: %d of %d out of bound (worst rel %.3g)", k->name, bad, N, worst);
    printf("%-10s gelu_tanh_mul worst relative error %.3g\n", k->name, worst);
    /* out aliasing gate */
    memcpy(y, z, N * sizeof *y);
    float *y2 = malloc(N * sizeof *y2);
    k->gelu_tanh_mul(y2, z, up, N);
    k->gelu_tanh_mul(y, y, up, N);
    CHECK(memcmp(y, y2, N * sizeof *y) == 0);
    free(z), free(up), free(y), free(y2);
}

static double softmax_worst;

static void test_softmax(const g3_kernels *k) {
    softmax_worst = 0;
    int sizes[] = {1, 5, 16, 17, 100, 1153};
    for (int s = 0; s < N_ELEMS(sizes); s++) {
        int n = sizes[s];
        float *x = malloc(n * sizeof *x), *x0 = malloc(n * sizeof *x0);
        fill_f32(x0, n, 20.0f);
        if (n > 3) x0[1] = x0[n - 2] = -INFINITY; /* masked entries */
        memcpy(x, x0, n * sizeof *x);
        k->softmax(x, n);
        float max = -INFINITY;
        for (int i = 0; i < n; i++) max = x0[i] > max ? x0[i] : max;
        double sum = 0;
        for (int i = 0; i < n; i++) sum += exp((double)(x0[i] - max));
        int bad = 0;
        for (int i = 0; i < n; i++) {
            double want = exp((double)(x0[i] - max)) / sum;
            if (x0[i] == -INFINITY ? x[i] != 0.0f : !(fabs(x[i] - want) <= 1e-5 * want + 1e-30)) bad++;
            if (want > 1e-30 && fabs(x[i] - want) / want > softmax_worst) softmax_worst = fabs(x[i] - want) / want;
        }
        CHECK_MSG(bad == 0, "%s softmax n=%d: %d out of bound", k->name, n, bad);
        for (int i = 0; i < n; i++) x[i] = -INFINITY;
        k->softmax(x, n);
        bad = 0;
        for (int i = 0; i < n; i++) bad += x[i] != 0.0f;
        CHECK_MSG(bad == 0, "%s softmax of all -inf, n=%d: %d nonzero", k->name, n, bad);
        free(x), free(x0);
    }
    /* a huge spread: tiny terms underflow to (sub)normals or 0, never to NaN */
    float x[20];
    for (int i = 0; i < 20; i++) x[i] = -10.0f * i;
    k->softmax(x, 20);
    int bad = 0;
    for (int i = 0; i < 20; i++) {
        double want = exp(-10.0 * i) / 1.0000453999297625;
        if (!(fabs(x[i] - want) <= 1e-5 * want + 1e-44)) bad++;
    }
    CHECK_MSG(bad == 0, "%s softmax wide range: %d out of bound", k->name, bad);
    printf("%-10s softmax worst relative error %.3g\n", k->name, softmax_worst);
}

/* log_sum_exp against the same sum in double with double exp: |lse - ref| <= 1e-6 (float exp
 * within ~2 ulp per term, summed in double; the log of a sum within 2.4e-7 relative moves by
 * that much absolutely). Sizes off the vector widths, a dominant entry, equal entries, a wide
 * range. */
static void test_log_sum_exp(const g3_kernels *k) {
    static const int ns[] = {1, 7, 17, 100, 1001, 4000, 262144};
    float *x = malloc(262144 * sizeof *x);
    int bad = 0;
    for (int a = 0; a < N_ELEMS(ns); a++)
        for (int kind = 0; kind < 4; kind++) {
            int n = ns[a];
            for (int i = 0; i < n; i++)
                x[i] = kind == 0 ? rng_f() * 10.0f : kind == 1 ? (i == n / 2 + 1 ? 50.0f : rng_f())
                     : kind == 2 ? 3.25f : rng_f() * 200.0f - 100.0f;
            double max = x[0], sum = 0;
            for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
            for (int i = 0; i < n; i++) sum += exp((double)x[i] - max);
            double ref = max + log(sum), got = k->log_sum_exp(x, n);
            /* and in strips of G3_LSE_STRIP merged (the scoring's normaliser), the dominant
             * entry in a middle strip */
            double strips = g3_log_sum_exp_strips(k, x, n);
            if (!(fabs(got - ref) <= 1e-6) || !(fabs(strips - ref) <= 1e-6)) {
                if (bad < 5) fprintf(stderr, "%s log_sum_exp n=%d kind %d: %.12g, strips %.12g vs %.12g\n", k->name, n, kind, got, strips, ref);
                bad++;
            }
        }
    /* a NaN or an infinity anywhere (the vector body, the tail, the first) gives NaN */
    static const float specials[] = {NAN, INFINITY, -INFINITY};
    static const int at[] = {0, 37, 999, 1000};
    int missed = 0;
    for (int i = 0; i < 1001; i++) x[i] = rng_f();
    for (int sp = 0; sp < N_ELEMS(specials); sp++)
        for (int a = 0; a < N_ELEMS(at); a++) {
            const float keep = x[at[a]];
            x[at[a]] = specials[sp];
            if (!isnan(k->log_sum_exp(x, 1001)) || !isnan(g3_log_sum_exp_strips(k, x, 1001))) {
                if (missed < 5) fprintf(stderr, "%s log_sum_exp: %g at %d not flagged\n", k->name, specials[sp], at[a]);
                missed++;
            }
            x[at[a]] = keep;
        }
    free(x);
    CHECK_MSG(bad == 0, "%s log_sum_exp: %d cases out of bound", k->name, bad);
    CHECK_MSG(missed == 0, "%s log_sum_exp: %d non-finite inputs not flagged", k->name, missed);
}

static void test_to_bf16(const g3_kernels *k) {
    enum { N = 70000 };
    float *x = malloc(N * sizeof *x);
    uint16_t *h = malloc(N * sizeof *h);
    uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                          0xff80ffffu, 0x7fffffffu, 0x00000001u, 0x80000001u, 0x007fffffu,
                          0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x7f7fffffu,
                          0x7f7f8000u, 0xff7f8000u, 0x00000000u, 0x80000000u, 0x0000ffffu};
    int n_special = N_ELEMS(special);
    for (int i = 0; i < N; i++) {
        uint32_t u = i < n_special ? special[i] : rng_u32();
        if (i >= n_special && i % 3 == 0) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
        memcpy(&x[i], &u, 4);
    }
    int sizes[] = {N, 1, 15, 17, 33};
    int bad = 0;
    for (int s = 0; s < N_ELEMS(sizes); s++) {
        memset(h, 0xAB, N * sizeof *h);
        k->to_bf16(h, x, sizes[s]);
        for (int i = 0; i < sizes[s]; i++) bad += h[i] != g3_f32_to_bf16(x[i]);
        if (sizes[s] < N) bad += h[sizes[s]] != 0xABAB; /* no store past n */
    }
    CHECK_MSG(bad == 0, "%s to_bf16: %d mismatches", k->name, bad);
    free(x), free(h);
}

/* ---- thread pool ---- */

typedef struct {
    atomic_int calls[8];
    atomic_int wrong_nth;
    int nth;
} pool_job;

static void count_task(void *ctx, int ith, int nth) {
    pool_job *j = ctx;
    atomic_fetch_add(&j->calls[ith], 1);
    if (nth != j->nth) atomic_fetch_add(&j->wrong_nth, 1);
}

static void test_pool(void) {
    for (int n = 1; n <= 4; n++) {
        g3_pool *pool = NULL;
        CHECK_EQ_INT(g3_pool_create(n, &pool), GEMMA3_OK);
        if (!pool) continue;
        CHECK_EQ_INT(g3_pool_size(pool), n);
        pool_job job = {.nth = n};
        for (int i = 0; i < 8; i++) atomic_init(&job.calls[i], 0);
        atomic_init(&job.wrong_nth, 0);
        int reps = 20000;
        for (int rep = 0; rep < reps; rep++) {
            g3_pool_run(pool, count_task, &job);
            if (rep % 5000 == 4999) { /* let the workers fall asleep, then wake them */
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        int bad = 0;
        for (int i = 0; i < n; i++) bad += atomic_load(&job.calls[i]) != reps;
        for (int i = n; i < 8; i++) bad += atomic_load(&job.calls[i]) != 0;
        CHECK_MSG(bad == 0 && atomic_load(&job.wrong_nth) == 0, "pool of %d: every ith once per run", n);
        g3_pool_free(pool);
    }
    g3_pool *pool = NULL;
    CHECK(g3_pool_create(0, &pool) == GEMMA3_ERR_ARG && pool == NULL);
}

static void test_split(void) {
    int bad = 0;
    for (int n = 0; n <= 200; n += 7)
        for (int nth = 1; nth <= 5; nth++)
            for (int grain = 1; grain <= 16; grain *= 4) {
                int next = 0;
                for (int ith = 0; ith < nth; ith++) {
                    int lo, hi;
                    g3_split(n, ith, nth, grain, &lo, &hi);
                    if (lo != next || hi < lo) bad++;                        /* contiguous, ordered */
                    if (lo % grain != 0 && lo != n) bad++;                   /* tile aligned */
                    next = hi;
                }
                if (next != n) bad++;                                        /* covers all */
            }
    CHECK_MSG(bad == 0, "g3_split: %d violations", bad);
}

int main(void) {
    const g3_kernels *tables[8];
    int n = g3_kernels_all(tables, 8);
    const g3_kernels *ref = g3_kernels_get(G3_ISA_SCALAR);
    CHECK(ref && tables[0] == ref);
    g3_isa best = g3_isa_detect();
    CHECK(g3_kernels_get(best) != NULL);
    CHECK_EQ_INT(g3_isa_parse("avx2"), G3_ISA_AVX2);
    CHECK_EQ_INT(g3_isa_parse("bogus"), -1);
    printf("tables:");
    for (int i = 0; i < n; i++) printf(" %s", tables[i]->name);
    printf(" (detected: %s)\n", g3_kernels_get(best)->name);
    static const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int ii = 1; ii < 3; ii++)
        if (!g3_kernels_get((g3_isa)ii)) CHECK_SKIP("isa %s (this CPU lacks it)", isas[ii]);
    for (int i = 0; i < n; i++) {
        const g3_kernels *k = tables[i];
        test_matmul(k, ref, 0);
        test_matmul(k, ref, 1);
        test_determinism(k, 0);
        test_determinism(k, 1);
        test_dot_axpy(k);
        test_dots_axpys(k);
        test_rmsnorm(k, ref);
        test_gelu(k);
        test_softmax(k);
        test_log_sum_exp(k);
        test_to_bf16(k);
    }
    test_pool();
    test_split();
    return check_report();
}
