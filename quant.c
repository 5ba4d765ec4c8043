/* quant.c - the weight types: their rows (quant.h's g3_wtype_traits), reference quantizers and
 * dequantizers, the x8 layout, the quantized activation rows, and the scalar reference kernels
 * (g3_quant_scalar) every SIMD table in kernels/ is tested against; g3_matmul, the matrix entry
 * point. Knows nothing of Gemma. */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kquant.h"
#include "kernels/quant-impl.h"
#include "quant-k.h"
#include "util.h"

/* ---- names and sizes ------------------------------------------------------------------------ */

static const g3_wtype_traits wtypes[GEMMA3_WEIGHTS_COUNT]; /* the rows, below the functions they name */

const g3_wtype_traits *g3_wtype_get(int t) {
    return t > 0 && t < GEMMA3_WEIGHTS_COUNT && wtypes[t].name ? &wtypes[t] : NULL;
}

int g3_wtype_is_block(int t) {
    const g3_wtype_traits *tr = g3_wtype_get(t);
    return tr && tr->quantize_row != NULL;
}

const char *g3_wtype_name(g3_wtype t) {
    const g3_wtype_traits *tr = g3_wtype_get((int)t);
    return tr ? tr->name : "?";
}

const char *g3_wtype_name_upper(g3_wtype t) {
    const g3_wtype_traits *tr = g3_wtype_get((int)t);
    return tr ? tr->name_upper : "?";
}

int g3_wtype_from_ggml(uint32_t ggml_type) {
    for (int t = 1; t < GEMMA3_WEIGHTS_COUNT; t++)
        if (g3_wtype_get(t) && wtypes[t].ggml_type == ggml_type) return t;
    return -1;
}

int g3_wtype_parse(const char *name) {
    for (int t = 1; name && t < GEMMA3_WEIGHTS_COUNT; t++)
        if (g3_wtype_get(t) && strcmp(name, wtypes[t].name) == 0) return t;
    return -1;
}

/* Written once, before any thread could ask: the table is constant. */
static char type_lists[2][GEMMA3_WEIGHTS_COUNT * 16];

static void make_type_lists(void) {
    for (int blocks = 0; blocks < 2; blocks++) {
        char *p = type_lists[blocks];
        for (int t = 1; t < GEMMA3_WEIGHTS_COUNT; t++)
            if (g3_wtype_get(t) && (!blocks || g3_wtype_is_block(t)))
                p += sprintf(p, "%s%s", p == type_lists[blocks] ? "" : ", ", wtypes[t].name);
    }
}

const char *g3_wtype_list(int blocks_only) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_type_lists);
    return type_lists[blocks_only != 0];
}

size_t g3_wtype_row_bytes(g3_wtype t, int64_t n_in) {
    const g3_wtype_traits *tr = g3_wtype_get((int)t);
    return tr ? (size_t)(n_in / tr->block) * tr->block_bytes : 0;
}

int g3_wtype_has_x8(g3_wtype t) { return g3_wtype_is_block((int)t) && wtypes[t].x8; }

int g3_wtype_block_nonfinite(g3_wtype t, const void *block) {
    const g3_wtype_traits *tr = g3_wtype_get((int)t);
    const int n = tr->n_f16 ? tr->n_f16 : 1;
    for (int i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, (const uint8_t *)block + tr->f16_at[i], 2);
        if ((h & tr->nonfinite_mask) == tr->nonfinite_mask) return 1;
    }
    return 0;
}

/* ---- the matrix entry point ---------------------------------------------------------------- */

void g3_matmul(const g3_backend *be, float *Y, size_t ldy, g3_matrix W, const g3_matmul_in *x,
               int r0, int r1) {
    if (r0 >= r1) return;
    const int t = (int)W.type, x8 = W.layout == G3_LAYOUT_X8;
    if (!g3_wtype_is_block(t)) { /* BF16 */
        if (be->exact)
            be->k->matmul_f32(Y, ldy, W.data, x->f32, x->ld_f32, x->n_tok, x->n_in, r0, r1);
        else
            be->k->matmul_bf16(Y, ldy, W.data, x->bf16, (size_t)x->n_in, x->n_tok, x->n_in, r0, r1);
    } else if (be->exact) {
        g3_matmul_q_f32_fn f = (x8 ? be->q->matmul_q_f32_x8 : be->q->matmul_q_f32)[t];
        if (!f) f = (x8 ? g3_quant_scalar.matmul_q_f32_x8 : g3_quant_scalar.matmul_q_f32)[t];
        f(W.type, Y, ldy, W.data, x->f32, x->ld_f32, x->n_tok, x->n_in, r0, r1);
    } else {
        g3_matmul_q_fn f = (x8 ? be->q->matmul_q_x8 : be->q->matmul_q)[t];
        if (!f) f = (x8 ? g3_quant_scalar.matmul_q_x8 : g3_quant_scalar.matmul_q)[t];
        f(Y, ldy, W.data, wtypes[t].act_k ? x->qk : x->q, x->n_tok, x->n_in, r0, r1);
    }
}

size_t g3_act_k_row_bytes(int n_in) { return g3_kq_act_row_bytes(n_in); }

void g3_quantize_act_k(const g3_quant_kernels *k, void *dst, const float *x, int k0, int k1) {
    (k->quantize_act_k ? k->quantize_act_k : g3_quant_scalar.quantize_act_k)(dst, x, k0, k1);
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

/* The int8 a quantizer stores for a float p that is a whole number (or whose fraction the cast
 * drops): p's truncation to int32, read as its low byte, and for p outside the int32 range or
 * NaN the low byte of INT32_MIN, 0. C leaves (int8_t)p undefined there, which happens only where
 * 1 / d overflows (a block whose values all lie below ~3.7e-37: its fp16 scale is 0 anyway).
 * These are the bytes x86's truncating conversion gives, so llama.cpp's quantizers built by GCC
 * on x86, and our SIMD quantizers; clang's build of a plain cast stored 0x80 there, an ARM
 * build would store 0xff for +inf. */
static inline int8_t quant_int8(float p) {
    int32_t i = p >= -0x1p31f && p < 0x1p31f ? (int32_t)p : INT32_MIN;
    int low = (int)((uint32_t)i & 0xffu);
    return (int8_t)(low > 127 ? low - 256 : low);
}

/* Q8_0: d = amax / 127, q = round-half-away(x / d). */
void g3_quantize_row_q8_0(const float *x, g3_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / G3_QK; b++, x += G3_QK) {
        float amax = 0.0f;
        for (int j = 0; j < G3_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = g3_f32_to_f16(d);
        for (int j = 0; j < G3_QK; j++) y[b].qs[j] = quant_int8(roundf(x[j] * id));
    }
}

/* The value of largest magnitude of a block (Q4_0, Q5_0), with its sign: the first such in
 * element order. */
static float block_extreme(const float *x) {
    float amax = 0.0f, extreme = 0.0f;
    for (int j = 0; j < G3_QK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            extreme = x[j];
        }
    return extreme;
}

/* Q4_0: d = (the value of largest magnitude, with its sign) / -8, so that value maps to q = 0;
 * q = min(15, trunc(x / d + 8.5)). */
void g3_quantize_row_q4_0(const float *x, g3_block_q4_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / G3_QK; b++, x += G3_QK) {
        const float extreme = block_extreme(x);
        const float d = extreme / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = g3_f32_to_f16(d);
        for (int j = 0; j < G3_QK / 2; j++) {
            int lo = quant_int8(x[j] * id + 8.5f), hi = quant_int8(x[j + G3_QK / 2] * id + 8.5f);
            if (lo > 15) lo = 15;
            if (hi > 15) hi = 15;
            y[b].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* The smallest and the largest value of a block (Q4_1, Q5_1), by comparisons in element order. */
static void block_min_max(const float *x, float *min, float *max) {
    *min = FLT_MAX, *max = -FLT_MAX;
    for (int j = 0; j < G3_QK; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

/* Element j's 5-bit value v into a Q5 block's nibble byte and fifth-bit word. */
static void put5(uint8_t *qs, uint32_t *qh, int j, int v) {
    const int half = G3_QK / 2, k = j % half;
    qs[k] = (uint8_t)(j < half ? (qs[k] & 0xf0) | (v & 15) : (qs[k] & 0x0f) | (v & 15) << 4);
    *qh |= (uint32_t)((v >> 4) & 1) << j;
}

/* Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)). */
static void quantize_q4_1(const float *x, void *row, int64_t n) {
    g3_block_q4_1 *y = row;
    for (int64_t b = 0; b < n / G3_QK; b++, x += G3_QK) {
        float min, max;
        block_min_max(x, &min, &max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = g3_f32_to_f16(d);
        y[b].m = g3_f32_to_f16(min);
        for (int j = 0; j < G3_QK / 2; j++) {
            int lo = quant_int8((x[j] - min) * id + 0.5f), hi = quant_int8((x[j + G3_QK / 2] - min) * id + 0.5f);
            if (lo > 15) lo = 15;
            if (hi > 15) hi = 15;
            y[b].qs[j] = (uint8_t)((uint8_t)lo | (uint8_t)hi << 4);
        }
    }
}

/* Q5_0: as Q4_0 with 32 levels: d = extreme / -16, q = min(31, trunc(x / d + 16.5)). */
static void quantize_q5_0(const float *x, void *row, int64_t n) {
    g3_block_q5_0 *y = row;
    for (int64_t b = 0; b < n / G3_QK; b++, x += G3_QK) {
        const float extreme = block_extreme(x);
        const float d = extreme / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        y[b].d = g3_f32_to_f16(d);
        for (int j = 0; j < G3_QK; j++) {
            int v = quant_int8(x[j] * id + 16.5f);
            put5(y[b].qs, &qh, j, (uint8_t)(v > 31 ? 31 : v));
        }
        memcpy(y[b].qh, &qh, sizeof qh);
    }
}

/* Q5_1: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5) (no clamp: at most 31). */
static void quantize_q5_1(const float *x, void *row, int64_t n) {
    g3_block_q5_1 *y = row;
    for (int64_t b = 0; b < n / G3_QK; b++, x += G3_QK) {
        float min, max;
        block_min_max(x, &min, &max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        y[b].d = g3_f32_to_f16(d);
        y[b].m = g3_f32_to_f16(min);
        for (int j = 0; j < G3_QK; j++) put5(y[b].qs, &qh, j, (uint8_t)quant_int8((x[j] - min) * id + 0.5f));
        memcpy(y[b].qh, &qh, sizeof qh);
    }
}

static void quantize_q8_0(const float *x, void *row, int64_t n) { g3_quantize_row_q8_0(x, row, n); }
static void quantize_q4_0(const float *x, void *row, int64_t n) { g3_quantize_row_q4_0(x, row, n); }

static void dequantize_q8_0(const void *row, float *y, int64_t n) {
    const g3_block_q8_0 *blk = row;
    for (int64_t b = 0; b < n / G3_QK; b++) {
        const float d = g3_f16_to_f32(blk[b].d);
        for (int j = 0; j < G3_QK; j++) y[b * G3_QK + j] = d * (float)blk[b].qs[j];
    }
}

static void dequantize_q4_0(const void *row, float *y, int64_t n) {
    const g3_block_q4_0 *blk = row;
    for (int64_t b = 0; b < n / G3_QK; b++) {
        const float d = g3_f16_to_f32(blk[b].d);
        for (int j = 0; j < G3_QK / 2; j++) {
            y[b * G3_QK + j] = d * (float)((blk[b].qs[j] & 15) - 8);
            y[b * G3_QK + j + G3_QK / 2] = d * (float)((blk[b].qs[j] >> 4) - 8);
        }
    }
}

/* ---- the 4- and 5-bit blocks' integers --------------------------------------------------------
 * Q4_0, Q4_1, Q5_0 and Q5_1 share one shape: an fp16 scale, maybe an fp16 minimum, maybe the
 * fifth bits, then the 16 nibble bytes. */
typedef struct lowbit {
    uint8_t min_at, qh_at, qs_at; /* byte offsets in the block (0: no minimum / no fifth bits) */
    int8_t offset;                /* w = d * (u - offset) (+ m): 8 (Q4_0), 16 (Q5_0), else 0 */
} lowbit;

static lowbit lowbit_of(g3_wtype t) {
    switch (t) {
    case GEMMA3_WEIGHTS_Q4_1: return (lowbit){2, 0, 4, 0};
    case GEMMA3_WEIGHTS_Q5_0: return (lowbit){0, 2, 6, 16};
    case GEMMA3_WEIGHTS_Q5_1: return (lowbit){2, 4, 8, 0};
    default: return (lowbit){0, 0, 2, 8}; /* Q4_0 */
    }
}

/* The block's unsigned quants u (0..15 or 0..31) in element order, its scale and minimum (0). */
static void lowbit_unpack(g3_wtype t, const uint8_t *blk, uint8_t u[G3_QK], float *d, float *m) {
    const lowbit lb = lowbit_of(t);
    uint16_t h;
    uint32_t qh = 0;
    memcpy(&h, blk, 2);
    *d = g3_f16_to_f32(h);
    *m = 0.0f;
    if (lb.min_at) memcpy(&h, blk + lb.min_at, 2), *m = g3_f16_to_f32(h);
    if (lb.qh_at) memcpy(&qh, blk + lb.qh_at, 4);
    for (int j = 0; j < G3_QK / 2; j++) {
        u[j] = (uint8_t)((blk[lb.qs_at + j] & 15) | ((qh >> j) & 1) << 4);
        u[j + G3_QK / 2] = (uint8_t)((blk[lb.qs_at + j] >> 4) | ((qh >> (j + G3_QK / 2)) & 1) << 4);
    }
}

static void dequantize_lowbit(g3_wtype t, const void *row, float *y, int64_t n) {
    const size_t bs = g3_wtype_row_bytes(t, G3_QK);
    const int offset = lowbit_of(t).offset;
    for (int64_t b = 0; b < n / G3_QK; b++, y += G3_QK) {
        uint8_t u[G3_QK];
        float d, m;
        lowbit_unpack(t, (const uint8_t *)row + (size_t)b * bs, u, &d, &m);
        for (int j = 0; j < G3_QK; j++) y[j] = d * (float)(u[j] - offset) + m;
    }
}

static void dequantize_q4_1(const void *row, float *y, int64_t n) { dequantize_lowbit(GEMMA3_WEIGHTS_Q4_1, row, y, n); }
static void dequantize_q5_0(const void *row, float *y, int64_t n) { dequantize_lowbit(GEMMA3_WEIGHTS_Q5_0, row, y, n); }
static void dequantize_q5_1(const void *row, float *y, int64_t n) { dequantize_lowbit(GEMMA3_WEIGHTS_Q5_1, row, y, n); }
static void quantize_q4_K(const float *x, void *row, int64_t n) { g3_quantize_row_q4_K(x, row, n); }
static void quantize_q5_K(const float *x, void *row, int64_t n) { g3_quantize_row_q5_K(x, row, n); }
static void quantize_q6_K(const float *x, void *row, int64_t n) { g3_quantize_row_q6_K(x, row, n); }
static void dequantize_q4_K(const void *row, float *y, int64_t n) { g3_dequantize_row_q4_K(row, y, n); }
static void dequantize_q5_K(const void *row, float *y, int64_t n) { g3_dequantize_row_q5_K(row, y, n); }
static void dequantize_q6_K(const void *row, float *y, int64_t n) { g3_dequantize_row_q6_K(row, y, n); }

static void dequantize_bf16(const void *row, float *y, int64_t n) {
    const uint16_t *h = row;
    for (int64_t i = 0; i < n; i++) y[i] = g3_bf16_to_f32(h[i]);
}

/* ---- the weight types --------------------------------------------------------------------- */

/* The exponent bits that make a bf16 or an fp16 value NaN or infinite. */
#define BF16_NONFINITE 0x7f80u
#define F16_NONFINITE 0x7c00u

static const g3_wtype_traits wtypes[GEMMA3_WEIGHTS_COUNT] = {
    [GEMMA3_WEIGHTS_BF16] = {.name = "bf16", .name_upper = "BF16", .block = 1, .block_bytes = sizeof(uint16_t),
                       .dequantize_row = dequantize_bf16, .nonfinite_mask = BF16_NONFINITE,
                       .ggml_type = 30, .gguf_file_type = 32},
    [GEMMA3_WEIGHTS_Q8_0] = {.name = "q8_0", .name_upper = "Q8_0", .block = G3_QK,
                       .block_bytes = sizeof(g3_block_q8_0), .quantize_row = quantize_q8_0,
                       .dequantize_row = dequantize_q8_0, .nonfinite_mask = F16_NONFINITE, .x8 = 1,
                       .ggml_type = 8, .gguf_file_type = 7},
    [GEMMA3_WEIGHTS_Q4_0] = {.name = "q4_0", .name_upper = "Q4_0", .block = G3_QK,
                       .block_bytes = sizeof(g3_block_q4_0), .quantize_row = quantize_q4_0,
                       .dequantize_row = dequantize_q4_0, .nonfinite_mask = F16_NONFINITE, .x8 = 1,
                       .ggml_type = 2, .gguf_file_type = 2},
    [GEMMA3_WEIGHTS_Q4_1] = {.name = "q4_1", .name_upper = "Q4_1", .block = G3_QK,
                       .block_bytes = sizeof(g3_block_q4_1), .quantize_row = quantize_q4_1,
                       .dequantize_row = dequantize_q4_1, .nonfinite_mask = F16_NONFINITE,
                       .ggml_type = 3, .gguf_file_type = 3},
    [GEMMA3_WEIGHTS_Q5_0] = {.name = "q5_0", .name_upper = "Q5_0", .block = G3_QK,
                       .block_bytes = sizeof(g3_block_q5_0), .quantize_row = quantize_q5_0,
                       .dequantize_row = dequantize_q5_0, .nonfinite_mask = F16_NONFINITE, .x8 = 1,
                       .ggml_type = 6, .gguf_file_type = 8},
    [GEMMA3_WEIGHTS_Q5_1] = {.name = "q5_1", .name_upper = "Q5_1", .block = G3_QK,
                       .block_bytes = sizeof(g3_block_q5_1), .quantize_row = quantize_q5_1,
                       .dequantize_row = dequantize_q5_1, .nonfinite_mask = F16_NONFINITE,
                       .ggml_type = 7, .gguf_file_type = 9},
    /* K-quants (quant-k.h); file types: llama.cpp's Q4_K_S, Q5_K_S, Q6_K */
    [GEMMA3_WEIGHTS_Q4_K] = {.name = "q4_k", .name_upper = "Q4_K", .block = G3_QK_K,
                       .block_bytes = sizeof(g3_block_q4_K), .quantize_row = quantize_q4_K,
                       .dequantize_row = dequantize_q4_K, .nonfinite_mask = F16_NONFINITE,
                       .ggml_type = 12, .gguf_file_type = 14, .n_f16 = 2, .f16_at = {0, 2}, .act_k = 1},
    [GEMMA3_WEIGHTS_Q5_K] = {.name = "q5_k", .name_upper = "Q5_K", .block = G3_QK_K,
                       .block_bytes = sizeof(g3_block_q5_K), .quantize_row = quantize_q5_K,
                       .dequantize_row = dequantize_q5_K, .nonfinite_mask = F16_NONFINITE,
                       .ggml_type = 13, .gguf_file_type = 16, .n_f16 = 2, .f16_at = {0, 2}, .act_k = 1},
    [GEMMA3_WEIGHTS_Q6_K] = {.name = "q6_k", .name_upper = "Q6_K", .block = G3_QK_K,
                       .block_bytes = sizeof(g3_block_q6_K), .quantize_row = quantize_q6_K,
                       .dequantize_row = dequantize_q6_K, .nonfinite_mask = F16_NONFINITE,
                       .ggml_type = 14, .gguf_file_type = 18, .n_f16 = 1,
                       .f16_at = {offsetof(g3_block_q6_K, d)}, .act_k = 1},
};

void g3_quantize_row(g3_wtype t, const float *x, void *row, int64_t n) {
    if (g3_wtype_is_block((int)t)) wtypes[t].quantize_row(x, row, n);
}

void g3_dequantize_row(g3_wtype t, const void *row, float *y, int64_t n) {
    const g3_wtype_traits *tr = g3_wtype_get((int)t);
    if (tr) tr->dequantize_row(row, y, n);
}

/* ---- the x8 layout ------------------------------------------------------------------------ */

static size_t block_bytes(g3_wtype t) { return wtypes[t].block_bytes; }

size_t g3_x8_bytes(g3_wtype t, int64_t rows, int64_t n_in) {
    return (size_t)((rows + G3_X8 - 1) / G3_X8 * G3_X8) * g3_wtype_row_bytes(t, n_in);
}

/* In a group-block: where row k's scale and the first of its quant bytes 4s..4s+3 lie. */
static size_t x8_scale_at(size_t k) { return 2 * k; }
static size_t x8_run_at(size_t k, size_t s) { return 2 * G3_X8 + 32 * s + 4 * k; }

/* Where byte j of block b of row r lies in an x8 matrix (j < 2: the scale, else quant j - 2). */
static size_t x8_offset(size_t bs, int64_t n_blocks, int64_t r, int64_t b, size_t j) {
    const size_t group_block = ((size_t)(r / G3_X8) * (size_t)n_blocks + (size_t)b) * G3_X8 * bs;
    const size_t k = (size_t)(r % G3_X8);
    if (j < 2) return group_block + x8_scale_at(k) + j;
    return group_block + x8_run_at(k, (j - 2) / 4) + (j - 2) % 4;
}

void g3_x8_block(g3_wtype t, const uint8_t *x8, int64_t nb, int64_t r, int64_t b, uint8_t *out) {
    const size_t bs = block_bytes(t);
    const size_t scale = x8_offset(bs, nb, r, b, 0);
    memcpy(out, x8 + scale, 2);
    for (size_t s = 0; s < (bs - 2) / 4; s++) memcpy(out + 2 + 4 * s, x8 + x8_offset(bs, nb, r, b, 2 + 4 * s), 4);
}

size_t g3_x8_scale_offset(g3_wtype t, int64_t n_in, int64_t r, int64_t b) {
    return x8_offset(block_bytes(t), n_in / G3_QK, r, b, 0);
}

/* One group: rows [0, n) of src (n <= 8; the others zero) into the group at dst. */
static void x8_pack_group(size_t bs, uint8_t *dst, const uint8_t *src, size_t rb, int n, int64_t nb) {
    const size_t n_runs = (bs - 2) / 4; /* 4 quant bytes of each row per run */
    for (int64_t b = 0; b < nb; b++, dst += G3_X8 * bs) {
        if (n < G3_X8) memset(dst, 0, G3_X8 * bs);
        for (int k = 0; k < n; k++) {
            const uint8_t *blk = src + (size_t)k * rb + (size_t)b * bs;
            memcpy(dst + x8_scale_at((size_t)k), blk, 2);
            for (size_t s = 0; s < n_runs; s++) memcpy(dst + x8_run_at((size_t)k, s), blk + 2 + 4 * s, 4);
        }
    }
}

void g3_x8_pack(g3_wtype t, void *dst, const void *src, int64_t rows, int64_t n_in) {
    const size_t bs = block_bytes(t), rb = g3_wtype_row_bytes(t, n_in);
    for (int64_t r = 0; r < rows; r += G3_X8)
        x8_pack_group(bs, (uint8_t *)dst + (size_t)r * rb, (const uint8_t *)src + (size_t)r * rb, rb,
                      rows - r < G3_X8 ? (int)(rows - r) : G3_X8, n_in / G3_QK);
}

void g3_x8_read(g3_wtype t, const void *x8, int64_t n_in, size_t offset, size_t n, void *out) {
    const size_t bs = block_bytes(t), rb = g3_wtype_row_bytes(t, n_in);
    for (size_t i = 0; i < n; i++) {
        const size_t o = offset + i, in_row = o % rb;
        ((uint8_t *)out)[i] = ((const uint8_t *)x8)[x8_offset(bs, n_in / G3_QK, (int64_t)(o / rb),
                                                               (int64_t)(in_row / bs), in_row % bs)];
    }
}

void g3_dequantize_matrix_row(g3_wtype t, g3_layout layout, const void *m, int64_t n_in,
                               int64_t r, float *y) {
    if (layout == G3_LAYOUT_ROWS) {
        g3_dequantize_row(t, (const char *)m + (size_t)r * g3_wtype_row_bytes(t, n_in), y, n_in);
        return;
    }
    const uint8_t *x8 = m;
    for (int64_t b = 0; b < n_in / G3_QK; b++) {
        union g3_x8_block blk;
        g3_x8_block(t, x8, n_in / G3_QK, r, b, blk.bytes);
        g3_dequantize_row(t, blk.bytes, y + b * G3_QK, G3_QK);
    }
}

/* ---- Q8 activations ------------------------------------------------------------------------- */


/* d = amax / 127 and q = nearbyint(x * (127 / amax)) (round half to even, as SIMD conversions
 * do, so every table quantizes activations bit-identically: a max, one division, one multiply
 * and one rounding per value, each exact-or-IEEE whatever the vector width). */
static void quantize_act_scalar(void *dst, int n_row, const float *x, int k0, int k1) {
    int8_t *q;
    float *d;
    int32_t *c4;
    act_row_out(dst, n_row, &q, &d, &c4);
    q += k0, d += k0 / G3_QK, c4 += k0 / G3_QK;
    const int n = k1 - k0;
    for (int b = 0; b < n / G3_QK; b++, x += G3_QK, q += G3_QK) {
        float amax = 0.0f;
        for (int j = 0; j < G3_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax >= ACT_TINY ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < G3_QK; j++) {
            q[j] = (int8_t)nearbyintf(x[j] * id);
            sum += q[j];
        }
        d[b] = amax / 127.0f;
        c4[b] = -8 * sum;
    }
}

/* ---- scalar matmuls ------------------------------------------------------------------------- */

/* A block's exact integer dot product with its activation block (Q4_0: with the correction c4
 * for the nibbles' offset of 8). */
static int32_t isum_q8_0(const g3_block_q8_0 *w, const int8_t *aq) {
    int32_t isum = 0;
    for (int j = 0; j < G3_QK; j++) isum += (int32_t)w->qs[j] * aq[j];
    return isum;
}

static int32_t isum_q4_0(const g3_block_q4_0 *w, const int8_t *aq, int32_t c4) {
    int32_t isum = c4;
    for (int j = 0; j < G3_QK / 2; j++)
        isum += (w->qs[j] & 15) * aq[j] + (w->qs[j] >> 4) * aq[j + G3_QK / 2];
    return isum;
}

static float dot_q8_0_scalar(const g3_block_q8_0 *w, act_row a, int n_blocks) {
    float acc = 0.0f;
    for (int b = 0; b < n_blocks; b++)
        acc += g3_f16_to_f32(w[b].d) * a.d[b] * (float)isum_q8_0(&w[b], a.q + b * G3_QK);
    return acc;
}

static float dot_q4_0_scalar(const g3_block_q4_0 *w, act_row a, int n_blocks) {
    float acc = 0.0f;
    for (int b = 0; b < n_blocks; b++)
        acc += g3_f16_to_f32(w[b].d) * a.d[b] *
               (float)isum_q4_0(&w[b], a.q + b * G3_QK, a.c4[b]);
    return acc;
}

static void matmul_q8_0_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(GEMMA3_WEIGHTS_Q8_0, n_in);
    for (int t = 0; t < n_tok; t++) {
        const act_row a = act_row_at(Xq, n_in, t);
        for (int r = r0; r < r1; r++) {
            const g3_block_q8_0 *w = (const void *)((const char *)W + (size_t)r * row_bytes);
            Y[(size_t)t * ldy + r] = dot_q8_0_scalar(w, a, n_in / G3_QK);
        }
    }
}

static void matmul_q4_0_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(GEMMA3_WEIGHTS_Q4_0, n_in);
    for (int t = 0; t < n_tok; t++) {
        const act_row a = act_row_at(Xq, n_in, t);
        for (int r = r0; r < r1; r++) {
            const g3_block_q4_0 *w = (const void *)((const char *)W + (size_t)r * row_bytes);
            Y[(size_t)t * ldy + r] = dot_q4_0_scalar(w, a, n_in / G3_QK);
        }
    }
}

/* A Q4_1 / Q5_0 / Q5_1 block's exact integer sum(u * a) with its activation block aq, Q5_0's
 * offset of 16 folded in as Q4_0's (-16 * sum(a) = 2 * c4); its scale and minimum in d, m. */
static int32_t isum_lowbit(g3_wtype t, const uint8_t *blk, const int8_t *aq, int32_t c4, float *d, float *m) {
    uint8_t u[G3_QK];
    lowbit_unpack(t, blk, u, d, m);
    int32_t isum = lowbit_of(t).offset / 8 * c4;
    for (int j = 0; j < G3_QK; j++) isum += u[j] * aq[j];
    return isum;
}

/* Q4_1, Q5_0, Q5_1: per block acc += d_w * d_x * isum (isum_lowbit); with a minimum, also
 * acc += m * d_x * sum(a) (sum(a) = -c4 / 8, exact). */
static float dot_lowbit_scalar(g3_wtype t, const uint8_t *row, act_row a, int n_blocks) {
    const size_t bs = block_bytes(t);
    const lowbit lb = lowbit_of(t);
    float acc = 0.0f;
    for (int b = 0; b < n_blocks; b++) {
        float d, m;
        const int32_t isum = isum_lowbit(t, row + (size_t)b * bs, a.q + b * G3_QK, a.c4[b], &d, &m);
        acc += d * a.d[b] * (float)isum;
        if (lb.min_at) acc += m * a.d[b] * (float)(-a.c4[b] / 8);
    }
    return acc;
}

static void matmul_lowbit_scalar(g3_wtype wt, float *Y, size_t ldy, const void *W, const void *Xq,
                                 int n_tok, int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(wt, n_in);
    for (int t = 0; t < n_tok; t++) {
        const act_row a = act_row_at(Xq, n_in, t);
        for (int r = r0; r < r1; r++)
            Y[(size_t)t * ldy + r] = dot_lowbit_scalar(wt, (const uint8_t *)W + (size_t)r * row_bytes, a, n_in / G3_QK);
    }
}

static void matmul_q4_1_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1) {
    matmul_lowbit_scalar(GEMMA3_WEIGHTS_Q4_1, Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

static void matmul_q5_0_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1) {
    matmul_lowbit_scalar(GEMMA3_WEIGHTS_Q5_0, Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

static void matmul_q5_1_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1) {
    matmul_lowbit_scalar(GEMMA3_WEIGHTS_Q5_1, Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

/* fp32 activations against a dequantized block: sum(q * x), then times d (with a minimum m:
 * plus m * sum(x)). */
static float block_dot_f32_scalar(g3_wtype wtype, const uint8_t *blk, const float *x) {
    float q[G3_QK], s = 0.0f;
    float d;
    if (wtype == GEMMA3_WEIGHTS_Q8_0) {
        const g3_block_q8_0 *b8 = (const void *)blk;
        d = g3_f16_to_f32(b8->d);
        for (int j = 0; j < G3_QK; j++) q[j] = (float)b8->qs[j];
    } else if (wtype != GEMMA3_WEIGHTS_Q4_0) { /* Q4_1, Q5_0, Q5_1 */
        uint8_t u[G3_QK];
        float m, sx = 0.0f;
        const int offset = lowbit_of(wtype).offset;
        lowbit_unpack(wtype, blk, u, &d, &m);
        for (int j = 0; j < G3_QK; j++) s += (float)(u[j] - offset) * x[j];
        if (!lowbit_of(wtype).min_at) return d * s;
        for (int j = 0; j < G3_QK; j++) sx += x[j];
        return d * s + m * sx;
    } else {
        const g3_block_q4_0 *b4 = (const void *)blk;
        d = g3_f16_to_f32(b4->d);
        for (int j = 0; j < G3_QK / 2; j++) {
            q[j] = (float)((b4->qs[j] & 15) - 8);
            q[j + G3_QK / 2] = (float)((b4->qs[j] >> 4) - 8);
        }
    }
    for (int j = 0; j < G3_QK; j++) s += q[j] * x[j];
    return d * s;
}

static void matmul_q_f32_scalar(g3_wtype wtype, float *Y, size_t ldy, const void *W,
                                const float *X, size_t ldx, int n_tok, int n_in, int r0, int r1) {
    const size_t row_bytes = g3_wtype_row_bytes(wtype, n_in), bs = block_bytes(wtype);
    for (int t = 0; t < n_tok; t++) {
        const float *x = X + (size_t)t * ldx;
        for (int r = r0; r < r1; r++) {
            const uint8_t *row = (const uint8_t *)W + (size_t)r * row_bytes;
            float acc = 0.0f;
            for (int b = 0; b < n_in / G3_QK; b++) acc += block_dot_f32_scalar(wtype, row + (size_t)b * bs, x + b * G3_QK);
            Y[(size_t)t * ldy + r] = acc;
        }
    }
}

/* A block of an x8 type's exact integer dot product with its activation block (with Q4_0's and
 * Q5_0's offsets folded in through c4). */
static int32_t x8_isum(g3_wtype t, const union g3_x8_block *blk, const int8_t *aq, int32_t c4) {
    float d, m;
    if (t == GEMMA3_WEIGHTS_Q8_0) return isum_q8_0(&blk->q8_0, aq);
    if (t == GEMMA3_WEIGHTS_Q4_0) return isum_q4_0(&blk->q4_0, aq, c4);
    return isum_lowbit(t, blk->bytes, aq, c4, &d, &m); /* Q5_0 */
}

/* The x8 layout's reference: each block fetched from its group, its exact integer sum, then one
 * fma per block (every x8 type's scale is its block's first two bytes). */
static void matmul_x8_scalar(g3_wtype t, float *Y, size_t ldy, const void *W, const void *Xq,
                             int n_tok, int n_in, int r0, int r1) {
    const int nb = n_in / G3_QK;
    const uint8_t *x8 = W;
    for (int tk = 0; tk < n_tok; tk++) {
        const act_row a = act_row_at(Xq, n_in, tk);
        for (int r = r0; r < r1; r++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                union g3_x8_block blk;
                g3_x8_block(t, x8, nb, r, b, blk.bytes);
                acc = fmaf((float)x8_isum(t, &blk, a.q + b * G3_QK, a.c4[b]), g3_f16_to_f32(blk.q8_0.d) * a.d[b], acc);
            }
            Y[(size_t)tk * ldy + r] = acc;
        }
    }
}

static void matmul_q8_0_x8_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                                  int n_in, int r0, int r1) {
    matmul_x8_scalar(GEMMA3_WEIGHTS_Q8_0, Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

static void matmul_q4_0_x8_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                                  int n_in, int r0, int r1) {
    matmul_x8_scalar(GEMMA3_WEIGHTS_Q4_0, Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

static void matmul_q5_0_x8_scalar(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                                  int n_in, int r0, int r1) {
    matmul_x8_scalar(GEMMA3_WEIGHTS_Q5_0, Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

/* fp32 activations: the row layout's computation, each block fetched from its group. */
static void matmul_q_f32_x8_scalar(g3_wtype wtype, float *Y, size_t ldy, const void *W,
                                   const float *X, size_t ldx, int n_tok, int n_in, int r0, int r1) {
    const int nb = n_in / G3_QK;
    for (int t = 0; t < n_tok; t++) {
        const float *x = X + (size_t)t * ldx;
        for (int r = r0; r < r1; r++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                union g3_x8_block blk;
                g3_x8_block(wtype, W, nb, r, b, blk.bytes);
                acc += block_dot_f32_scalar(wtype, blk.bytes, x + b * G3_QK);
            }
            Y[(size_t)t * ldy + r] = acc;
        }
    }
}

const g3_quant_kernels g3_quant_scalar = {
    .name = "scalar",
    .quantize_act = quantize_act_scalar,
    .quantize_act_k = g3_kq_quantize_act_scalar,
    .matmul_q = {[GEMMA3_WEIGHTS_Q8_0] = matmul_q8_0_scalar, [GEMMA3_WEIGHTS_Q4_0] = matmul_q4_0_scalar,
                 [GEMMA3_WEIGHTS_Q4_1] = matmul_q4_1_scalar, [GEMMA3_WEIGHTS_Q5_0] = matmul_q5_0_scalar,
                 [GEMMA3_WEIGHTS_Q5_1] = matmul_q5_1_scalar,
                 [GEMMA3_WEIGHTS_Q4_K] = g3_kq_matmul_q4_K_scalar, [GEMMA3_WEIGHTS_Q5_K] = g3_kq_matmul_q5_K_scalar,
                 [GEMMA3_WEIGHTS_Q6_K] = g3_kq_matmul_q6_K_scalar},
    .matmul_q_f32 = {[GEMMA3_WEIGHTS_Q8_0] = matmul_q_f32_scalar, [GEMMA3_WEIGHTS_Q4_0] = matmul_q_f32_scalar,
                     [GEMMA3_WEIGHTS_Q4_1] = matmul_q_f32_scalar, [GEMMA3_WEIGHTS_Q5_0] = matmul_q_f32_scalar,
                     [GEMMA3_WEIGHTS_Q5_1] = matmul_q_f32_scalar,
                     [GEMMA3_WEIGHTS_Q4_K] = g3_kq_matmul_f32, [GEMMA3_WEIGHTS_Q5_K] = g3_kq_matmul_f32,
                     [GEMMA3_WEIGHTS_Q6_K] = g3_kq_matmul_f32},
    .matmul_q_x8 = {[GEMMA3_WEIGHTS_Q8_0] = matmul_q8_0_x8_scalar, [GEMMA3_WEIGHTS_Q4_0] = matmul_q4_0_x8_scalar,
                    [GEMMA3_WEIGHTS_Q5_0] = matmul_q5_0_x8_scalar},
    .matmul_q_f32_x8 = {[GEMMA3_WEIGHTS_Q8_0] = matmul_q_f32_x8_scalar,
                        [GEMMA3_WEIGHTS_Q4_0] = matmul_q_f32_x8_scalar, [GEMMA3_WEIGHTS_Q5_0] = matmul_q_f32_x8_scalar},
};
