/* kernels/kquant.h - the K-quant (Q4_K, Q5_K, Q6_K) matmul kernels and their activation rows:
 * scalar reference and x86 variants, which quant.c's tables point to. Knows nothing of Gemma.
 *
 * Activations: Q8_K rows, as llama.cpp feeds its K-quants: per 256 values (one super-block) a
 * float scale d and 256 int8 q, x ~ d * q, and the sums of each 16 q (for the minimum terms).
 * Rounding (ggml's quantize_row_q8_K): m = the value of largest magnitude with its sign,
 * iscale = -127 / m, q = min(127, round-half-even(iscale * x)), d = 1 / iscale; an all-zero
 * block (also: only NaN) stores d = 0 and q = 0. The same bytes in every table.
 *
 * The computation per output, the same bits in every table (the determinism contract): one fp32
 * accumulator over the super-blocks in order; per super-block b, with exact int32 sums
 *   Q4_K, Q5_K:  isum = sum_j sc_j * dot(q_j, a_j),  msum = sum_j m_j * (sum of a_j)
 *                acc += (d_a * d) * (float)isum - (d_a * dmin) * (float)msum
 *   Q6_K:        isum = sum_k sc_k * dot(q_k - 32, a_k)   (k: 16 sub-blocks of 16)
 *                acc += (d_a * d) * (float)isum
 * (j: the 8 sub-blocks of 32; each product rounded on its own, no fused multiply-add). The
 * integer sums are exact in any order, so a SIMD table needs only the same few float steps. */
#ifndef G3_KERNELS_KQUANT_H
#define G3_KERNELS_KQUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

typedef struct g3_block_q8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16]; /* sum of qs[16i .. 16i + 16) */
} g3_block_q8_K;       /* 292 bytes: ggml's block_q8_K */

/* Bytes of one Q8_K activation row of n_in values (n_in a multiple of 256). */
static inline size_t g3_kq_act_row_bytes(int n_in) { return (size_t)(n_in / 256) * sizeof(g3_block_q8_K); }

/* A super-block's float step (above), shared by every variant so that they round alike. */
static inline float g3_kq_step(float acc, float da, float d, float dmin, int32_t isum, int32_t msum) {
    const float dd = da * d, dm = da * dmin;
    const float x = dd * (float)isum, y = dm * (float)msum;
    const float t = x - y;
    return acc + t;
}

static inline float g3_kq_step6(float acc, float da, float d, int32_t isum) {
    const float dd = da * d;
    const float t = dd * (float)isum;
    return acc + t;
}

/* A Q4_K / Q5_K scales[12] (quant-k.h) as the 8 six-bit scales (sc[j]) and the 8 mins (bytes
 * of *mins, m_j in byte j), from its three little-endian words: sc 0-3 and m 0-3 are the low 6
 * bits of bytes 0-3 and 4-7; sc 4-7 / m 4-7 take the low / high nibbles of bytes 8-11 and, as
 * bits 4-5, the top two bits of bytes 0-3 / 4-7. (The SIMD kernels' unpacking.) */
static inline void g3_kq_scales_mins(const uint8_t *scales, uint8_t sc[8], uint64_t *mins) {
    uint32_t w[3], s[2], m[2];
    memcpy(w, scales, sizeof w);
    s[0] = w[0] & 0x3f3f3f3fu;
    m[0] = w[1] & 0x3f3f3f3fu;
    s[1] = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    m[1] = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
    memcpy(sc, s, 8);
    *mins = (uint64_t)m[0] | (uint64_t)m[1] << 32;
}

/* Values [k0, k1) of a row (x[0 .. k1 - k0)) into its blocks k0 / 256 .. k1 / 256 at row dst. */
void g3_kq_quantize_act_scalar(void *dst, const float *x, int k0, int k1);

/* Y[t*ldy + r] = W[r] . X[t] for t < n_tok, r0 <= r < r1, X: n_tok Q8_K rows (g3_matmul_q_fn). */
void g3_kq_matmul_q4_K_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok, int n_in,
                              int r0, int r1);
void g3_kq_matmul_q5_K_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok, int n_in,
                              int r0, int r1);
void g3_kq_matmul_q6_K_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok, int n_in,
                              int r0, int r1);

/* The x86 variants (kernels/kquant-x86.c): avx2, avx2vnni (AVX-VNNI), avx512 and avx512vnni,
 * all on 256-bit vectors; NULL-free only where the CPU runs them (the tables that point to them
 * are chosen by cpuid). */
#define G3_KQ_DECLARE(sfx)                                                                          \
    void g3_kq_matmul_q4_K_##sfx(float *, size_t, const void *, const void *, int, int, int, int); \
    void g3_kq_matmul_q5_K_##sfx(float *, size_t, const void *, const void *, int, int, int, int); \
    void g3_kq_matmul_q6_K_##sfx(float *, size_t, const void *, const void *, int, int, int, int); \
    void g3_kq_quantize_act_##sfx(void *, const float *, int, int);
G3_KQ_DECLARE(avx2)
G3_KQ_DECLARE(avx2vnni)
G3_KQ_DECLARE(avx512)
G3_KQ_DECLARE(avx512vnni)
#undef G3_KQ_DECLARE

/* The exact mode (fp32 activations, X[t*ldx + k]), any K type, in every table: per output one
 * fp32 chain over the dequantized weights in order (a reference mode, not a fast one). */
void g3_kq_matmul_f32(g3_wtype wtype, float *Y, size_t ldy, const void *W, const float *X, size_t ldx,
                      int n_tok, int n_in, int r0, int r1);

#endif
