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
#include "quant-k.h"
#include "quant.h"
#include "util.h"

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

int main(void) {
    test_reference_blocks();
    test_dequantize();
    return check_report();
}
