/* quant.c - Q8_0 / Q4_0 blocks: reference quantizers, dequantizers, and the quantized matmul
 * kernels (scalar reference; SIMD tables beside it, tested against it). Knows nothing of Gemma. */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "util.h"

/* ---- names and sizes ------------------------------------------------------------------------ */

const char *g3_wtype_name(g3_wtype t) {
    switch (t) {
    case G3_WTYPE_BF16: return "bf16";
    case G3_WTYPE_Q8_0: return "q8_0";
    case G3_WTYPE_Q4_0: return "q4_0";
    }
    return "?";
}

const char *g3_wtype_name_upper(g3_wtype t) {
    switch (t) {
    case G3_WTYPE_BF16: return "BF16";
    case G3_WTYPE_Q8_0: return "Q8_0";
    case G3_WTYPE_Q4_0: return "Q4_0";
    }
    return "?";
}

int g3_wtype_parse(const char *name) {
    for (int t = G3_WTYPE_BF16; t <= G3_WTYPE_Q4_0; t++)
        if (strcmp(name, g3_wtype_name((g3_wtype)t)) == 0) return t;
    return -1;
}

size_t g3_wtype_row_bytes(g3_wtype t, int64_t n_in) {
    switch (t) {
    case G3_WTYPE_BF16: return (size_t)n_in * sizeof(uint16_t);
    case G3_WTYPE_Q8_0: return (size_t)(n_in / G3_QK) * sizeof(g3_block_q8_0);
    case G3_WTYPE_Q4_0: return (size_t)(n_in / G3_QK) * sizeof(g3_block_q4_0);
    }
    return 0;
}

/* ---- fp16 ----------------------------------------------------------------------------------- */

uint16_t g3_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return sign | 0x7e00u;  /* NaN stays a quiet NaN */
    if (mag >= 0x477ff000u) return sign | 0x7c00u; /* rounds to 65520 or more: infinity */
    if (mag >= 0x38800000u) {                      /* a normal half: rebias, round 13 bits off */
        uint32_t h = (mag - 0x38000000u) >> 13, rest = mag & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (mag <= 0x33000000u) return sign; /* at most half of the smallest subnormal: zero */
    /* a subnormal half counts units of 2^-24 */
    uint32_t exp = mag >> 23, man = (mag & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)exp;
    uint32_t k = man >> shift, rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (k & 1u))) k++;
    return (uint16_t)(sign | k);
}

/* ---- reference quantizers (llama.cpp's rounding rules) -------------------------------------- */

/* Q8_0: d = amax / 127, q = round-half-away(x / d). */
void g3_quantize_row_q8_0(const float *x, g3_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / G3_QK; b++, x += G3_QK) {
        float amax = 0.0f;
        for (int j = 0; j < G3_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = g3_f32_to_f16(d);
        for (int j = 0; j < G3_QK; j++) y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* Q4_0: d = (the value of largest magnitude, with its sign) / -8, so that value maps to q = 0;
 * q = min(15, trunc(x / d + 8.5)). */
void g3_quantize_row_q4_0(const float *x, g3_block_q4_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / G3_QK; b++, x += G3_QK) {
        float amax = 0.0f, extreme = 0.0f;
        for (int j = 0; j < G3_QK; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                extreme = x[j];
            }
        const float d = extreme / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = g3_f32_to_f16(d);
        for (int j = 0; j < G3_QK / 2; j++) {
            int lo = (int8_t)(x[j] * id + 8.5f), hi = (int8_t)(x[j + G3_QK / 2] * id + 8.5f);
            if (lo > 15) lo = 15;
            if (hi > 15) hi = 15;
            y[b].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

void g3_quantize_row(g3_wtype t, const float *x, void *row, int64_t n) {
    if (t == G3_WTYPE_Q8_0) g3_quantize_row_q8_0(x, row, n);
    else if (t == G3_WTYPE_Q4_0) g3_quantize_row_q4_0(x, row, n);
}

void g3_dequantize_row(g3_wtype t, const void *row, float *y, int64_t n) {
    if (t == G3_WTYPE_Q8_0) {
        const g3_block_q8_0 *blk = row;
        for (int64_t b = 0; b < n / G3_QK; b++) {
            const float d = g3_f16_to_f32(blk[b].d);
            for (int j = 0; j < G3_QK; j++) y[b * G3_QK + j] = d * (float)blk[b].qs[j];
        }
    } else if (t == G3_WTYPE_Q4_0) {
        const g3_block_q4_0 *blk = row;
        for (int64_t b = 0; b < n / G3_QK; b++) {
            const float d = g3_f16_to_f32(blk[b].d);
            for (int j = 0; j < G3_QK / 2; j++) {
                y[b * G3_QK + j] = d * (float)((blk[b].qs[j] & 15) - 8);
                y[b * G3_QK + j + G3_QK / 2] = d * (float)((blk[b].qs[j] >> 4) - 8);
            }
        }
    } else if (t == G3_WTYPE_BF16) {
        const uint16_t *h = row;
        for (int64_t i = 0; i < n; i++) y[i] = g3_bf16_to_f32(h[i]);
    }
}

/* ---- Q8 activations ------------------------------------------------------------------------- */

/* One block of 32 activations: x ~ d * qs, with sum = sum(qs) for Q4_0's "- 8" correction. */
typedef struct act_block {
    float d;
    int32_t sum;
    int8_t qs[G3_QK];
} act_block;

size_t g3_act_row_bytes(int n_in) { return (size_t)(n_in / G3_QK) * sizeof(act_block); }

/* d = amax / 127 and q = nearbyint(x / d) (round half to even, as SIMD conversions do, so every
 * table quantizes activations bit-identically). */
static void quantize_act_scalar(void *dst, const float *x, int n) {
    act_block *a = dst;
    for (int b = 0; b < n / G3_QK; b++, x += G3_QK) {
        float amax = 0.0f;
        for (int j = 0; j < G3_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < G3_QK; j++) {
            a[b].qs[j] = (int8_t)nearbyintf(x[j] * id);
            sum += a[b].qs[j];
        }
        a[b].d = d;
        a[b].sum = sum;
    }
}

/* ---- scalar matmuls ------------------------------------------------------------------------- */

static float dot_q8_0_scalar(const g3_block_q8_0 *w, const act_block *a, int n_blocks) {
    float acc = 0.0f;
    for (int b = 0; b < n_blocks; b++) {
        int32_t isum = 0;
        for (int j = 0; j < G3_QK; j++) isum += (int32_t)w[b].qs[j] * a[b].qs[j];
        acc += g3_f16_to_f32(w[b].d) * a[b].d * (float)isum;
    }
    return acc;
}

static float dot_q4_0_scalar(const g3_block_q4_0 *w, const act_block *a, int n_blocks) {
    float acc = 0.0f;
    for (int b = 0; b < n_blocks; b++) {
        int32_t isum = 0;
        for (int j = 0; j < G3_QK / 2; j++)
            isum += (w[b].qs[j] & 15) * a[b].qs[j] + (w[b].qs[j] >> 4) * a[b].qs[j + G3_QK / 2];
        isum -= 8 * a[b].sum;
        acc += g3_f16_to_f32(w[b].d) * a[b].d * (float)isum;
    }
    return acc;
}

static void matmul_q8_0_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(G3_WTYPE_Q8_0, n_in);
    const size_t act_bytes = g3_act_row_bytes(n_in);
    for (int t = 0; t < n_tok; t++) {
        const act_block *a = (const act_block *)((const char *)Xq + (size_t)t * act_bytes);
        for (int r = r0; r < r1; r++) {
            const g3_block_q8_0 *w = (const void *)((const char *)W + (size_t)r * row_bytes);
            Y[(size_t)t * ldy + r] = dot_q8_0_scalar(w, a, n_in / G3_QK);
        }
    }
}

static void matmul_q4_0_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(G3_WTYPE_Q4_0, n_in);
    const size_t act_bytes = g3_act_row_bytes(n_in);
    for (int t = 0; t < n_tok; t++) {
        const act_block *a = (const act_block *)((const char *)Xq + (size_t)t * act_bytes);
        for (int r = r0; r < r1; r++) {
            const g3_block_q4_0 *w = (const void *)((const char *)W + (size_t)r * row_bytes);
            Y[(size_t)t * ldy + r] = dot_q4_0_scalar(w, a, n_in / G3_QK);
        }
    }
}

/* fp32 activations against dequantized blocks: per block sum(q * x), then times d. */
static void matmul_q_f32_scalar(g3_wtype wtype, float *Y, size_t ldy, const void *W,
                                const float *X, size_t ldx, int n_tok, int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(wtype, n_in);
    for (int t = 0; t < n_tok; t++) {
        const float *x = X + (size_t)t * ldx;
        for (int r = r0; r < r1; r++) {
            const char *row = (const char *)W + (size_t)r * row_bytes;
            float acc = 0.0f;
            for (int b = 0; b < n_in / G3_QK; b++) {
                float q[G3_QK], s = 0.0f;
                float d;
                if (wtype == G3_WTYPE_Q8_0) {
                    const g3_block_q8_0 *blk = (const g3_block_q8_0 *)(const void *)row + b;
                    d = g3_f16_to_f32(blk->d);
                    for (int j = 0; j < G3_QK; j++) q[j] = (float)blk->qs[j];
                } else {
                    const g3_block_q4_0 *blk = (const g3_block_q4_0 *)(const void *)row + b;
                    d = g3_f16_to_f32(blk->d);
                    for (int j = 0; j < G3_QK / 2; j++) {
                        q[j] = (float)((blk->qs[j] & 15) - 8);
                        q[j + G3_QK / 2] = (float)((blk->qs[j] >> 4) - 8);
                    }
                }
                for (int j = 0; j < G3_QK; j++) s += q[j] * x[b * G3_QK + j];
                acc += d * s;
            }
            Y[(size_t)t * ldy + r] = acc;
        }
    }
}

static const g3_quant_kernels quant_scalar = {
    .name = "scalar",
    .quantize_act = quantize_act_scalar,
    .matmul_q8_0 = matmul_q8_0_scalar,
    .matmul_q4_0 = matmul_q4_0_scalar,
    .matmul_q_f32 = matmul_q_f32_scalar,
};

const g3_quant_kernels *g3_quant_kernels_get(g3_isa isa) {
    if (!g3_kernels_get(isa)) return NULL;
    return &quant_scalar;
}
