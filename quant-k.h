/* quant-k.h - llama.cpp's K-quant blocks Q4_K, Q5_K and Q6_K: layouts, reference quantizers
 * (byte-identical to ggml's quantize_row_q*_K_ref, the path llama-quantize takes without an
 * importance matrix) and dequantizers. Knows nothing of Gemma or of the kernels.
 *
 * A super-block holds 256 weights (G3_QK_K), split into sub-blocks that each carry a small
 * integer scale (and for Q4_K / Q5_K a minimum) relative to the super-block's fp16 scale(s):
 *   Q4_K (144 bytes): fp16 d, fp16 dmin, 12 bytes of 6-bit scales/mins for 8 sub-blocks of 32,
 *         128 bytes of 4-bit q.  w = d * sc[j] * q - dmin * m[j]
 *   Q5_K (176 bytes): as Q4_K, plus 32 bytes qh holding each weight's fifth bit.
 *   Q6_K (210 bytes): 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales for
 *         sub-blocks of 16, fp16 d last.  w = d * scales[j] * (q - 32)
 * Element order inside a super-block: see g3_kq_unpack_* below (each gives the plain integer q
 * of the 256 weights in order, with the sub-block scales). A row of n weights (n a multiple of
 * 256) is its n / 256 super-blocks, no padding. */
#ifndef G3_QUANT_K_H
#define G3_QUANT_K_H

#include <stdint.h>

#define G3_QK_K 256 /* weights per super-block */

typedef struct g3_block_q4_K {
    uint16_t d, dmin;   /* fp16: the scale of the sub-block scales, and of the mins */
    uint8_t scales[12]; /* 8 x 6-bit scale, 8 x 6-bit min, packed (g3_kq_scale_min) */
    uint8_t qs[128];    /* 64 weights per 32 bytes: low nibbles first 32, high nibbles next 32 */
} g3_block_q4_K;

typedef struct g3_block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];  /* bit 2i / 2i+1 of qh[l]: fifth bit of weight 64i + l / 64i + 32 + l */
    uint8_t qs[128]; /* the low 4 bits, as Q4_K's */
} g3_block_q5_K;

typedef struct g3_block_q6_K {
    uint8_t ql[128];   /* low 4 bits */
    uint8_t qh[64];    /* high 2 bits */
    int8_t scales[16]; /* one per 16 weights */
    uint16_t d;        /* fp16 */
} g3_block_q6_K;

/* The 6-bit scale and min of sub-block j (0..7) from a Q4_K / Q5_K scales[12]. */
static inline void g3_kq_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* A super-block's integers in weight order: q[0..256) (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63 before
 * its offset of 32 is taken off: q6 is returned as q - 32), and its sub-block scales (Q4_K/Q5_K:
 * sc[8], m[8]; Q6_K: sc[16]). */
void g3_kq_unpack_q4_K(const g3_block_q4_K *b, uint8_t q[G3_QK_K], uint8_t sc[8], uint8_t m[8]);
void g3_kq_unpack_q5_K(const g3_block_q5_K *b, uint8_t q[G3_QK_K], uint8_t sc[8], uint8_t m[8]);
void g3_kq_unpack_q6_K(const g3_block_q6_K *b, int8_t q[G3_QK_K]);

/* llama.cpp's reference quantizers (the same bytes for the same floats), n a multiple of 256. */
void g3_quantize_row_q4_K(const float *x, g3_block_q4_K *y, int64_t n);
void g3_quantize_row_q5_K(const float *x, g3_block_q5_K *y, int64_t n);
void g3_quantize_row_q6_K(const float *x, g3_block_q6_K *y, int64_t n);

/* Back to float, as ggml's dequantize_row_q*_K (the same float operations). */
void g3_dequantize_row_q4_K(const g3_block_q4_K *x, float *y, int64_t n);
void g3_dequantize_row_q5_K(const g3_block_q5_K *x, float *y, int64_t n);
void g3_dequantize_row_q6_K(const g3_block_q6_K *x, float *y, int64_t n);

#endif
