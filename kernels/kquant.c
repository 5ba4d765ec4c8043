/* kernels/kquant.c - Q4_K / Q5_K / Q6_K matmuls against Q8_K activation rows: the scalar
 * reference (the computation kernels/kquant.h fixes), its activation quantizer, and the exact
 * mode. */
#include "kernels/kquant.h"

#include <math.h>
#include <string.h>

#include "quant-k.h"
#include "util.h"

/* ---- Q8_K activations --------------------------------------------------------------------- */

void g3_kq_quantize_act_scalar(void *dst, const float *x, int k0, int k1) {
    g3_block_q8_K *y = (g3_block_q8_K *)dst + k0 / G3_QK_K;
    for (int b = 0; b < (k1 - k0) / G3_QK_K; b++, x += G3_QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < G3_QK_K; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        memset(y[b].bsums, 0, sizeof y[b].bsums);
        if (amax == 0.0f) {
            y[b].d = 0.0f;
            memset(y[b].qs, 0, sizeof y[b].qs);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < G3_QK_K; j++) {
            const float v = nearbyintf(iscale * x[j]); /* ties to even, as ggml's nearest_int */
            y[b].qs[j] = (int8_t)(v < 127.0f ? v : 127.0f);
            y[b].bsums[j / 16] = (int16_t)(y[b].bsums[j / 16] + y[b].qs[j]);
        }
        y[b].d = 1.0f / iscale;
    }
}

/* ---- scalar matmuls ----------------------------------------------------------------------- */

/* Q4_K / Q5_K: one super-block's integers (q, sc, m) against one Q8_K block. */
static void kx_sums(const uint8_t *q, const uint8_t *sc, const uint8_t *m, const g3_block_q8_K *a,
                    int32_t *isum, int32_t *msum) {
    *isum = *msum = 0;
    for (int j = 0; j < 8; j++) {
        int32_t s = 0;
        for (int l = 0; l < 32; l++) s += (int32_t)q[32 * j + l] * a->qs[32 * j + l];
        *isum += sc[j] * s;
        *msum += m[j] * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
}

static float dot_q4_K(const g3_block_q4_K *w, const g3_block_q8_K *a, int nsb) {
    float acc = 0.0f;
    uint8_t q[G3_QK_K], sc[8], m[8];
    for (int b = 0; b < nsb; b++) {
        int32_t isum, msum;
        g3_kq_unpack_q4_K(&w[b], q, sc, m);
        kx_sums(q, sc, m, &a[b], &isum, &msum);
        acc = g3_kq_step(acc, a[b].d, g3_f16_to_f32(w[b].d), g3_f16_to_f32(w[b].dmin), isum, msum);
    }
    return acc;
}

static float dot_q5_K(const g3_block_q5_K *w, const g3_block_q8_K *a, int nsb) {
    float acc = 0.0f;
    uint8_t q[G3_QK_K], sc[8], m[8];
    for (int b = 0; b < nsb; b++) {
        int32_t isum, msum;
        g3_kq_unpack_q5_K(&w[b], q, sc, m);
        kx_sums(q, sc, m, &a[b], &isum, &msum);
        acc = g3_kq_step(acc, a[b].d, g3_f16_to_f32(w[b].d), g3_f16_to_f32(w[b].dmin), isum, msum);
    }
    return acc;
}

static float dot_q6_K(const g3_block_q6_K *w, const g3_block_q8_K *a, int nsb) {
    float acc = 0.0f;
    int8_t q[G3_QK_K];
    for (int b = 0; b < nsb; b++) {
        g3_kq_unpack_q6_K(&w[b], q);
        int32_t isum = 0;
        for (int k = 0; k < 16; k++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++) s += (int32_t)q[16 * k + l] * a[b].qs[16 * k + l];
            isum += w[b].scales[k] * s;
        }
        acc = g3_kq_step6(acc, a[b].d, g3_f16_to_f32(w[b].d), isum);
    }
    return acc;
}

#define KQ_MATMUL_SCALAR(T, BLOCK)                                                                   \
    void g3_kq_matmul_##T##_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,   \
                                   int n_in, int r0, int r1) {                                       \
        const size_t row_bytes = (size_t)(n_in / G3_QK_K) * sizeof(BLOCK);                          \
        for (int t = 0; t < n_tok; t++) {                                                            \
            const g3_block_q8_K *a =                                                                 \
                (const g3_block_q8_K *)(const void *)((const char *)Xq + (size_t)t * g3_kq_act_row_bytes(n_in)); \
            for (int r = r0; r < r1; r++)                                                            \
                Y[(size_t)t * ldy + r] =                                                             \
                    dot_##T((const BLOCK *)(const void *)((const char *)W + (size_t)r * row_bytes), \
                            a, n_in / G3_QK_K);                                                      \
        }                                                                                            \
    }

KQ_MATMUL_SCALAR(q4_K, g3_block_q4_K)
KQ_MATMUL_SCALAR(q5_K, g3_block_q5_K)
KQ_MATMUL_SCALAR(q6_K, g3_block_q6_K)

void g3_kq_matmul_f32(g3_wtype wtype, float *Y, size_t ldy, const void *W, const float *X, size_t ldx,
                      int n_tok, int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(wtype, n_in), sb_bytes = g3_wtype_row_bytes(wtype, G3_QK_K);
    float w[G3_QK_K];
    for (int r = r0; r < r1; r++) {
        const char *row = (const char *)W + (size_t)r * row_bytes;
        for (int t = 0; t < n_tok; t++) Y[(size_t)t * ldy + r] = 0.0f;
        /* each super-block dequantized once for every token; each output's chain stays in order */
        for (int b = 0; b < n_in / G3_QK_K; b++) {
            g3_dequantize_row(wtype, row + (size_t)b * sb_bytes, w, G3_QK_K);
            for (int t = 0; t < n_tok; t++) {
                const float *x = X + (size_t)t * ldx + G3_QK_K * b;
                float acc = Y[(size_t)t * ldy + r];
                for (int i = 0; i < G3_QK_K; i++) acc += w[i] * x[i];
                Y[(size_t)t * ldy + r] = acc;
            }
        }
    }
}
