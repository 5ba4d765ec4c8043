#!/bin/sh
# make-kquant-fixtures.sh - the K-quant reference blocks of tests/data/quant/ (k-*.bin), written by
# llama.cpp's own quantizer: ggml_quantize_chunk without an importance matrix, the call
# llama-quantize makes (it runs quantize_row_q4_K_ref / q5_K_ref / q6_K_ref).
#
#   sh tools/make-kquant-fixtures.sh [LLAMA_DIR] [OUTDIR]
#     LLAMA_DIR  a llama.cpp checkout built in LLAMA_DIR/build (default /tmp/llama.cpp)
#     OUTDIR     default tests/data/quant
#
# Writes k-input.bf16 (ROWS x COLS little-endian bf16, the rows described in the generator
# below: bf16 like a checkpoint's weights, and half the bytes of float32); k-q4_k.bin,
# k-q5_k.bin, k-q6_k.bin (ROWS x COLS/256 blocks of 144, 176, 210 bytes); k-q8_k.bin, the
# activation blocks (Q8_K, quantize_row_q8_K_ref: 292 bytes per 256) of the last 16 rows.
# The small C program below is a fixture generator only (it links llama.cpp's libggml-base);
# tests/test-quant-k.c holds quant-k.c to its output byte for byte.
set -eu
LLAMA=${1:-/tmp/llama.cpp}
OUT=${2:-tests/data/quant}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/gen.c" <<'CEOF'
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"

/* ggml-base's (ggml-quants.h, an internal header): the K-quants' activation blocks */
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);

#define ROWS 64
#define COLS 2048 /* a real row length (1B's q_proj input is 1152, 4B's hidden 2560; 2048 = 8 super-blocks) */

static uint64_t s = 0x9e3779b97f4a7c15ull;
static double uni(void) { /* xorshift64*, [0, 1) */
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return (double)((s * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}
static double gauss(void) { double u = uni() + 1e-300, v = uni(); return sqrt(-2 * log(u)) * cos(6.283185307179586 * v); }
static float bf16(float f) { uint32_t u; memcpy(&u, &f, 4); u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u; memcpy(&f, &u, 4); return f; }

int main(int argc, char **argv) {
    static float x[ROWS * COLS];
    for (int r = 0; r < ROWS; r++) {
        float *row = x + r * COLS;
        for (int i = 0; i < COLS; i++) {
            double g = gauss(), v;
            const int kind = r < 8 ? 0 : r % 6;
            if (kind == 0) v = 0.02 * g;                                  /* a checkpoint's init scale */
            else if (kind == 1) v = uni() < 0.05 ? g * 50 : g * 5e-4;        /* sparse outliers */
            else if (kind == 2) v = r % 4 ? uni() : -uni() * 3.0;           /* one-sided: min clamps to 0 */
            else if (kind == 3) v = ldexp(g, (int)(uni() * 60) - 30);        /* magnitudes over 2^60 */
            else if (kind == 4) v = 0.02 * g * exp(3.0 * gauss() * (i / 32 % 3 == 0)); /* sub-blocks of mixed size */
            else v = r % 12 == 5 ? floor((uni() - 0.5) * 16) / 8             /* few distinct levels */
                                 : uni() < 0.1 ? g * 5 : g * 1e-2;           /* sparse, milder */
            row[i] = bf16((float)v);
        }
    }
    /* the last row: one case per super-block */
    float *e = x + (ROWS - 1) * COLS;
    for (int i = 0; i < 256; i++) {
        e[256 * 0 + i] = 0.0f;                                  /* all zero */
        e[256 * 1 + i] = (float)(1e-20 * gauss());              /* below GROUP_MAX_EPS-sized scales */
        e[256 * 2 + i] = 0.5f;                                  /* constant */
        e[256 * 3 + i] = i / 32 == 2 ? 0.0f : bf16((float)(0.1 * gauss())); /* one sub-block zero */
        e[256 * 4 + i] = i == 77 ? 1e4f : bf16((float)(0.01 * gauss()));    /* one outlier */
        e[256 * 5 + i] = i % 32 < 16 ? bf16((float)(1e-6 * gauss())) : bf16((float)gauss()); /* tiny beside large */
        e[256 * 6 + i] = i == 200 ? -3.0f : 0.0f;               /* one nonzero */
        e[256 * 7 + i] = (i & 1) ? 1.0f : -1.0f;                /* exact levels */
    }
    static uint16_t h[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) { /* every value is a bf16 already: the file holds it exactly */
        uint32_t u; memcpy(&u, &x[i], 4); h[i] = (uint16_t)(u >> 16);
        u = (uint32_t)h[i] << 16; memcpy(&x[i], &u, 4);
    }
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/k-input.bf16", argv[1]);
    if (!(f = fopen(path, "wb")) || fwrite(h, sizeof h, 1, f) != 1 || fclose(f)) return 1;
    const struct { enum ggml_type t; const char *name; } types[] = {
        {GGML_TYPE_Q4_K, "q4_k"}, {GGML_TYPE_Q5_K, "q5_k"}, {GGML_TYPE_Q6_K, "q6_k"}};
    for (int k = 0; k < 3; k++) {
        size_t n = ggml_row_size(types[k].t, COLS) * ROWS;
        void *q = malloc(n);
        if (ggml_quantize_chunk(types[k].t, x, q, 0, ROWS, COLS, NULL) != n) return 1;
        snprintf(path, sizeof path, "%s/k-%s.bin", argv[1], types[k].name);
        if (!(f = fopen(path, "wb")) || fwrite(q, n, 1, f) != 1 || fclose(f)) return 1;
        free(q);
    }
    /* the activation blocks (Q8_K, 292 bytes each) of the last 16 rows: every kind, the edge row */
    static unsigned char q8k[16 * COLS / 256 * 292];
    quantize_row_q8_K_ref(x + (ROWS - 16) * COLS, q8k, 16 * COLS);
    snprintf(path, sizeof path, "%s/k-q8_k.bin", argv[1]);
    if (!(f = fopen(path, "wb")) || fwrite(q8k, sizeof q8k, 1, f) != 1 || fclose(f)) return 1;
    return 0;
}
CEOF
cc -O2 -std=gnu11 -I"$LLAMA/ggml/include" "$TMP/gen.c" -o "$TMP/gen" -L"$LLAMA/build/bin" -lggml-base -lm \
    -Wl,-rpath,"$LLAMA/build/bin"
"$TMP/gen" "$OUT"
echo "wrote $OUT/k-input.bf16 k-q4_k.bin k-q5_k.bin k-q6_k.bin k-q8_k.bin (llama.cpp $(git -C "$LLAMA" rev-parse --short=9 HEAD 2>/dev/null || echo '?'))"
