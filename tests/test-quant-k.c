/* test-quant-k - Q4_K / Q5_K / Q6_K: the reference quantizers against blocks written by llama.cpp
 * itself, and the dequantizers against the layout's definition.
 *
 * Reference data: tests/data/quant/k-*.bin, written by tools/make-kquant-fixtures.sh
 * (ggml_quantize_chunk of llama.cpp 3f545becc, no importance matrix: what llama-quantize runs)
 * from k-input.bf16, 64 rows of 2048 bf16 values: checkpoint-like rows, other distributions and
 * edge cases (zero, tiny, constant, one-sided, outlier super-blocks). The blocks must match byte
 * for byte. 512 super-blocks, because some rules bite rarely: rounding the candidates' error sums
 * once more or less (an FMA) changes about 1 in 120 Q4_K super-blocks, 1 in 400 Q5_K ones. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/kquant.h"
#include "quant-k.h"
#include "quant.h"
#include "util.h"

#define TEST_RNG_SEED 0x6a09e667f3bcc909ull
#include "test-rng.h"

#define DATA_DIR "tests/data/quant/"
#define ROWS 64
#define COLS 2048
#define NB (ROWS * COLS / G3_QK_K)

static int read_file(const char *path, void *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(buf, 1, n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    return got == n && !extra;
}

static float x[ROWS * COLS];

/* Quantizes the input row by row (the rows' blocks in order) and counts blocks that differ. */
static int compare_type(const char *name, size_t bs, void (*quantize)(const float *, void *, int64_t)) {
    static uint8_t want[NB * 256], got[NB * 256];
    char path[256];
    snprintf(path, sizeof path, DATA_DIR "k-%s.bin", name);
    if (!read_file(path, want, NB * bs)) {
        CHECK_MSG(0, "cannot read %s (run from the repository root)", path);
        return -1;
    }
    for (int r = 0; r < ROWS; r++) quantize(x + (size_t)r * COLS, got + (size_t)r * (COLS / G3_QK_K) * bs, COLS);
    int bad = 0;
    for (int b = 0; b < NB; b++)
        if (memcmp(got + b * bs, want + b * bs, bs) && bad++ < 4)
            fprintf(stderr, "%s: super-block %d (row %d, block %d) differs from llama.cpp's\n", name, b,
                    b / (COLS / G3_QK_K), b % (COLS / G3_QK_K));
    CHECK_MSG(bad == 0, "%s: %d of %d super-blocks differ", name, bad, NB);
    return bad;
}

static void q4k(const float *a, void *y, int64_t n) { g3_quantize_row_q4_K(a, y, n); }
static void q5k(const float *a, void *y, int64_t n) { g3_quantize_row_q5_K(a, y, n); }
static void q6k(const float *a, void *y, int64_t n) { g3_quantize_row_q6_K(a, y, n); }

static void test_reference_blocks(void) {
    CHECK_EQ_INT(sizeof(g3_block_q4_K), 144);
    CHECK_EQ_INT(sizeof(g3_block_q5_K), 176);
    CHECK_EQ_INT(sizeof(g3_block_q6_K), 210);
    static uint16_t h[ROWS * COLS];
    if (!read_file(DATA_DIR "k-input.bf16", h, sizeof h)) {
        CHECK_MSG(0, "cannot read " DATA_DIR "k-input.bf16 (run from the repository root)");
        return;
    }
    for (int i = 0; i < ROWS * COLS; i++) x[i] = g3_bf16_to_f32(h[i]);
    compare_type("q4_k", sizeof(g3_block_q4_K), q4k);
    compare_type("q5_k", sizeof(g3_block_q5_K), q5k);
    compare_type("q6_k", sizeof(g3_block_q6_K), q6k);
}

/* The activation rows: llama.cpp's Q8_K blocks (quantize_row_q8_K_ref) of the fixture's last 16
 * rows, byte for byte, from every table. */
static void test_act_blocks(void) {
    enum { N = 16 * COLS / G3_QK_K };
    static g3_block_q8_K want[N], got[N];
    if (!read_file(DATA_DIR "k-q8_k.bin", want, sizeof want)) {
        CHECK_MSG(0, "cannot read " DATA_DIR "k-q8_k.bin");
        return;
    }
    const g3_quant_kernels *all[8];
    const int n_all = g3_quant_kernels_all(all, 8);
    for (int ti = 0; ti < n_all; ti++) {
        memset(got, 0x5a, sizeof got);
        for (int r = 0; r < 16; r++) /* in two parts, as the threads that produce a row write it */
            for (int part = 0; part < 2; part++)
                g3_quantize_act_k(all[ti], got + r * (COLS / G3_QK_K), x + (size_t)(ROWS - 16 + r) * COLS + part * 768,
                                  part * 768, part ? COLS : 768);
        int bad = 0;
        for (int b = 0; b < N; b++) bad += memcmp(&got[b], &want[b], sizeof got[b]) != 0;
        CHECK_MSG(bad == 0, "%s: %d of %d Q8_K blocks differ from llama.cpp's", all[ti]->name, bad, N);
    }
}

/* The activation rows' edge cases, every table against the scalar one byte for byte: the
 * largest magnitude twice with both signs (the first decides), ties at k + 0.5 after scaling,
 * NaN and infinities among the values, all-zero and all-NaN blocks, subnormal values. */
static void test_act_edges(void) {
    enum { NB_E = 8, N_E = NB_E * G3_QK_K };
    static float xe[N_E];
    static g3_block_q8_K want[NB_E], got[NB_E];
    for (int i = 0; i < N_E; i++) xe[i] = rng_f() * 3.0f;
    xe[17] = -5.0f, xe[200] = 5.0f;                                         /* block 0: -5 first */
    xe[256 + 3] = 4.0f, xe[256 + 99] = -4.0f;                               /* block 1: +4 first */
    for (int i = 0; i < G3_QK_K; i++) xe[512 + i] = (float)(i % 255 - 127) + 0.5f; /* ties */
    xe[512 + 7] = 127.0f;
    xe[768 + 5] = NAN, xe[768 + 77] = -INFINITY;                            /* block 3 */
    xe[1024 + 9] = NAN, xe[1024 + 250] = 1e30f;                             /* block 4 */
    for (int i = 0; i < G3_QK_K; i++) xe[1280 + i] = 0.0f;                  /* block 5: zero */
    xe[1280 + 40] = -0.0f;
    for (int i = 0; i < G3_QK_K; i++) xe[1536 + i] = NAN;                   /* block 6: all NaN */
    for (int i = 0; i < G3_QK_K; i++) xe[1792 + i] = (float)(i - 128) * 1e-41f; /* subnormals, */
    xe[1792 + 60] = -1e-30f; /* and a largest value whose -127 / max is finite (below 127 / FLT_MAX the
                              * scalar's int8 conversion of an infinity is undefined, as ggml's) */
    g3_quant_kernels_get(G3_ISA_SCALAR)->quantize_act_k(want, xe, 0, N_E);
    const g3_quant_kernels *all[8];
    const int n_all = g3_quant_kernels_all(all, 8);
    for (int ti = 0; ti < n_all; ti++) {
        memset(got, 0x5a, sizeof got);
        g3_quantize_act_k(all[ti], got, xe, 0, N_E);
        for (int b = 0; b < NB_E; b++)
            CHECK_MSG(memcmp(&got[b], &want[b], sizeof got[b]) == 0, "%s: Q8_K edge block %d differs from scalar",
                      all[ti]->name, b);
    }
}

/* Dequantizing: every weight is d * sc * q - dmin * m (Q6_K: d * sc * (q - 32)) from the bits as
 * the layout defines them, read here bit by bit from the block's bytes, independently of the
 * unpacking code; and the reconstruction is close to the input (a sanity bound, not a target). */
static void test_dequantize(void) {
    static g3_block_q4_K b4[COLS / G3_QK_K];
    static g3_block_q5_K b5[COLS / G3_QK_K];
    static g3_block_q6_K b6[COLS / G3_QK_K];
    static float y4[COLS], y5[COLS], y6[COLS];
    int bad = 0;
    for (int r = 0; r < 6; r++) { /* the checkpoint-like rows */
        const float *xr = x + (size_t)r * COLS;
        g3_quantize_row_q4_K(xr, b4, COLS);
        g3_quantize_row_q5_K(xr, b5, COLS);
        g3_quantize_row_q6_K(xr, b6, COLS);
        g3_dequantize_row_q4_K(b4, y4, COLS);
        g3_dequantize_row_q5_K(b5, y5, COLS);
        g3_dequantize_row_q6_K(b6, y6, COLS);
        double e4 = 0, e5 = 0, e6 = 0, s = 0;
        for (int i = 0; i < COLS; i++) {
            const int b = i / G3_QK_K, k = i % G3_QK_K, j = k / 32, c = k / 64, l = k % 32, hi = (k / 32) & 1;
            uint8_t sc, m;
            g3_kq_scale_min(b4[b].scales, j, &sc, &m);
            const int q4 = (b4[b].qs[32 * c + l] >> (4 * hi)) & 15;
            const float w4 = g3_f16_to_f32(b4[b].d) * sc * q4 - g3_f16_to_f32(b4[b].dmin) * m;
            g3_kq_scale_min(b5[b].scales, j, &sc, &m);
            const int q5 = ((b5[b].qs[32 * c + l] >> (4 * hi)) & 15) | (((b5[b].qh[l] >> j) & 1) << 4);
            const float w5 = g3_f16_to_f32(b5[b].d) * sc * q5 - g3_f16_to_f32(b5[b].dmin) * m;
            /* Q6_K: 128-weight halves; quarter qq of a half is ql low/high nibble of l or l + 32 */
            const int h = k / 128, qq = (k % 128) / 32;
            const int lo = (b6[b].ql[64 * h + l + 32 * (qq & 1)] >> (4 * (qq >> 1))) & 15;
            const int q6 = (lo | (((b6[b].qh[32 * h + l] >> (2 * qq)) & 3) << 4)) - 32;
            const float w6 = g3_f16_to_f32(b6[b].d) * b6[b].scales[k / 16] * q6;
            if ((w4 != y4[i] || w5 != y5[i] || w6 != y6[i]) && bad++ < 4)
                fprintf(stderr, "row %d weight %d: %g %g %g vs %g %g %g\n", r, i, w4, w5, w6, y4[i], y5[i], y6[i]);
            e4 += (y4[i] - xr[i]) * (double)(y4[i] - xr[i]);
            e5 += (y5[i] - xr[i]) * (double)(y5[i] - xr[i]);
            e6 += (y6[i] - xr[i]) * (double)(y6[i] - xr[i]);
            s += xr[i] * (double)xr[i];
        }
        /* relative rms error of 4, 5, 6 bits on gaussian rows: about 0.09, 0.045, 0.02 */
        CHECK_MSG(sqrt(e4 / s) < 0.12 && sqrt(e5 / s) < 0.06 && sqrt(e6 / s) < 0.03 && sqrt(e6 / s) < sqrt(e5 / s) &&
                      sqrt(e5 / s) < sqrt(e4 / s),
                  "row %d: relative rms error q4_k %.4f q5_k %.4f q6_k %.4f", r, sqrt(e4 / s), sqrt(e5 / s),
                  sqrt(e6 / s));
    }
    CHECK_MSG(bad == 0, "%d dequantized weights differ from the layout's definition", bad);
}

/* ---- matmuls ---------------------------------------------------------------------------- */

static const g3_wtype ktypes[3] = {GEMMA3_WEIGHTS_Q4_K, GEMMA3_WEIGHTS_Q5_K, GEMMA3_WEIGHTS_Q6_K};

static float frand(void) { return rng_f(); }

/* Y = W X through g3_matmul with table k (rows [r0, r1), tokens [t0, t0 + nt)). */
static void mm(const g3_quant_kernels *k, int exact, g3_wtype t, const void *W, const float *X,
               const void *Xq, int n_in, int rows, int t0, int nt, int r0, int r1, float *Y) {
    const g3_backend be = {g3_kernels_get(G3_ISA_SCALAR), k, exact};
    const size_t ab = g3_kq_act_row_bytes(n_in);
    const g3_matmul_in in = {.f32 = X + (size_t)t0 * n_in, .ld_f32 = (size_t)n_in,
                             .qk = (const char *)Xq + (size_t)t0 * ab, .n_tok = nt, .n_in = n_in};
    g3_matmul(&be, Y + (size_t)t0 * rows, (size_t)rows, (g3_matrix){W, t, G3_LAYOUT_ROWS}, &in, r0, r1);
}

/* One type and shape: the scalar kernel against the exact value of what it computes (double,
 * from the dequantized weights and activations); every table bit for bit the scalar one; and
 * per table the determinism contract: all tokens at once == one at a time, all rows == split at
 * an odd row (one token at a time, and all tokens at once: a batch kernel's tiles then start at
 * an odd row). The exact mode against the double dot product of the dequantized weights. */
static void test_matmul_shape(g3_wtype t, int rows, int n_in, int n_tok, int *bad) {
    const size_t rb = g3_wtype_row_bytes(t, n_in), ab = g3_kq_act_row_bytes(n_in), ny = (size_t)rows * n_tok;
    float *w = malloc((size_t)rows * n_in * sizeof *w), *deq = malloc((size_t)rows * n_in * sizeof *deq);
    float *X = malloc((size_t)n_tok * n_in * sizeof *X), *Xd = malloc((size_t)n_tok * n_in * sizeof *Xd);
    uint8_t *W = malloc((size_t)rows * rb);
    char *Xq = malloc((size_t)n_tok * ab);
    float *Yref = malloc(ny * sizeof(float)), *Y = malloc(ny * sizeof(float)), *Y1 = malloc(ny * sizeof(float));
    float *Y2 = malloc(ny * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float scale = r % 3 == 0 ? 0.02f : r % 3 == 1 ? 1.0f : 1e-3f;
        for (int i = 0; i < n_in; i++) w[(size_t)r * n_in + i] = frand() * scale + (r % 5 == 0 ? 0.01f : 0.0f);
        g3_quantize_row(t, w + (size_t)r * n_in, W + (size_t)r * rb, n_in);
        g3_dequantize_row(t, W + (size_t)r * rb, deq + (size_t)r * n_in, n_in);
    }
    const g3_quant_kernels *scalar = g3_quant_kernels_get(G3_ISA_SCALAR);
    for (int k = 0; k < n_tok; k++) {
        for (int i = 0; i < n_in; i++) X[(size_t)k * n_in + i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f);
        scalar->quantize_act_k(Xq + (size_t)k * ab, X + (size_t)k * n_in, 0, n_in);
        const g3_block_q8_K *a = (const g3_block_q8_K *)(const void *)(Xq + (size_t)k * ab);
        for (int i = 0; i < n_in; i++) Xd[(size_t)k * n_in + i] = a[i / 256].d * a[i / 256].qs[i % 256];
    }
    for (int exact = 0; exact <= 1; exact++) {
        const float *A = exact ? X : Xd;
        mm(scalar, exact, t, W, X, Xq, n_in, rows, 0, n_tok, 0, rows, Yref);
        for (int k = 0; k < n_tok; k++)
            for (int r = 0; r < rows; r++) {
                double ref = 0, mag = 0;
                for (int i = 0; i < n_in; i++) {
                    ref += (double)deq[(size_t)r * n_in + i] * A[(size_t)k * n_in + i];
                    mag += fabs((double)w[(size_t)r * n_in + i]) * 2 * fabs((double)A[(size_t)k * n_in + i]);
                }
                /* rounding of the dequantized weights, of the per-32 terms, and of the sums */
                const double tol = (exact ? n_in : n_in / 32 + 32) * 0x1p-22 * mag + 1e-30;
                const float y = Yref[(size_t)k * rows + r];
                if (!(fabs(y - ref) <= tol) && bad[0]++ < 4)
                    fprintf(stderr, "%s%s %dx%d tok %d row %d: %.9g vs exact %.9g (tol %.3g)\n", g3_wtype_name(t),
                            exact ? " f32" : "", rows, n_in, k, r, y, ref, tol);
            }
        const g3_quant_kernels *all[8];
        const int n_all = g3_quant_kernels_all(all, 8);
        for (int ti = 0; ti < n_all; ti++) {
            const int mid = rows / 2 | 1;
            for (size_t i = 0; i < ny; i++) Y[i] = Y1[i] = Y2[i] = -7.0f;
            mm(all[ti], exact, t, W, X, Xq, n_in, rows, 0, n_tok, 0, rows, Y);
            for (int k = 0; k < n_tok; k++) {
                mm(all[ti], exact, t, W, X, Xq, n_in, rows, k, 1, 0, mid, Y1);
                mm(all[ti], exact, t, W, X, Xq, n_in, rows, k, 1, mid, rows, Y1);
            }
            mm(all[ti], exact, t, W, X, Xq, n_in, rows, 0, n_tok, 0, mid, Y2);
            mm(all[ti], exact, t, W, X, Xq, n_in, rows, 0, n_tok, mid, rows, Y2);
            for (size_t i = 0; i < ny; i++) {
                if (memcmp(&Y[i], &Yref[i], sizeof(float)) && bad[1]++ < 4)
                    fprintf(stderr, "%s %s%s %dx%d: y[%zu] %.9g, scalar %.9g\n", all[ti]->name, g3_wtype_name(t),
                            exact ? " f32" : "", rows, n_in, i, Y[i], Yref[i]);
                if (memcmp(&Y[i], &Y1[i], sizeof(float)) && bad[2]++ < 4)
                    fprintf(stderr, "%s %s%s %dx%d: y[%zu] batch %.9g, one token / split %.9g\n", all[ti]->name,
                            g3_wtype_name(t), exact ? " f32" : "", rows, n_in, i, Y[i], Y1[i]);
                if (memcmp(&Y[i], &Y2[i], sizeof(float)) && bad[2]++ < 4)
                    fprintf(stderr, "%s %s%s %dx%d: y[%zu] batch %.9g, batch split at row %d %.9g\n", all[ti]->name,
                            g3_wtype_name(t), exact ? " f32" : "", rows, n_in, i, Y[i], mid, Y2[i]);
            }
        }
    }
    free(w), free(deq), free(X), free(Xd), free(W), free(Xq), free(Yref), free(Y), free(Y1), free(Y2);
}

static void test_matmul(void) {
    /* rows, n_in, tokens: the SIMD tiles of 8, 4 and 1 tokens and their tails (8 + 1, 8 + 4,
     * 8 + 4 + 3, 2 x 8), and more tokens than one block of activations in L2 (6912: 32 tokens
     * a block, then 4 + 1); decode's (fewer than 4 tokens, and every token alone in the split
     * run) tiles of 8 and 4 rows and their tails, from rows 0 and from an odd row (29: 8 x 3 +
     * 4 + 1, split 8 + 4 + 3 | 8 + 4 + 2 at row 15; 45: 8 x 5 + 4 + 1, split at 23; 12 and 7;
     * rows of 18 and of 130 super-blocks: the latter longer than one pass of decode's rows);
     * the amx table's tiles (4 tokens or more: 4 itself), rows not a multiple of 16 and split
     * at an odd row: one group of 16 tokens (16; 4B's widths 2560, 10240), two groups one of
     * them partial (17), a pair and a lone group (33), two pairs (64), 130 super-blocks in
     * spans of 44, 44, 42 (the sums waiting in Y between them), and 100 tokens in two token
     * blocks of 64 and 36 */
    static const int shapes[][3] = {{1, 256, 1},  {7, 512, 3},  {33, 1024, 5},  {16, 2560, 2}, {5, 6912, 9},
                                    {3, 512, 8},  {2, 768, 12}, {4, 256, 15},   {3, 1024, 16}, {2, 6912, 37},
                                    {29, 512, 1}, {45, 1024, 2}, {12, 2304, 1}, {17, 4608, 1}, {9, 33280, 1},
                                    {33, 2560, 16}, {19, 10240, 17}, {21, 2560, 33}, {18, 10240, 64}, {3, 33280, 20},
                                    {3, 10240, 100}, {5, 512, 4}};
    for (int k = 0; k < 3; k++) {
        int bad[3] = {0, 0, 0};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            test_matmul_shape(ktypes[k], shapes[s][0], shapes[s][1], shapes[s][2], bad);
        CHECK_MSG(bad[0] == 0, "%s: %d outputs outside the rounding bound of the exact value", g3_wtype_name(ktypes[k]), bad[0]);
        CHECK_MSG(bad[1] == 0, "%s: %d outputs differ from the scalar table's bits", g3_wtype_name(ktypes[k]), bad[1]);
        CHECK_MSG(bad[2] == 0, "%s: %d outputs depend on the batch or the row split", g3_wtype_name(ktypes[k]), bad[2]);
    }
}

/* The load check's view of a block: which bytes are its fp16 scales. */
static void test_nonfinite(void) {
    for (int k = 0; k < 3; k++) {
        const g3_wtype t = ktypes[k];
        uint8_t blk[256] = {0};
        const g3_wtype_traits *tr = g3_wtype_get(t);
        CHECK(!g3_wtype_block_nonfinite(t, blk));
        const size_t at[3] = {0, 2, tr->block_bytes - 2};
        for (int a = 0; a < 3; a++) {
            memset(blk, 0, sizeof blk);
            blk[at[a]] = 0x00, blk[at[a] + 1] = 0x7c; /* +infinity */
            const int is_scale = t == GEMMA3_WEIGHTS_Q6_K ? a == 2 : a < 2;
            CHECK_MSG(g3_wtype_block_nonfinite(t, blk) == is_scale, "%s: an infinity at byte %zu", tr->name, at[a]);
            blk[at[a]] = 0x01; /* NaN */
            CHECK_MSG(g3_wtype_block_nonfinite(t, blk) == is_scale, "%s: a NaN at byte %zu", tr->name, at[a]);
        }
    }
}

int main(void) {
    test_reference_blocks();
    test_act_blocks();
    test_act_edges();
    test_dequantize();
    test_matmul();
    test_nonfinite();
    return check_report();
}
