/* kernels.c - numeric kernels: a scalar reference table, then ISA-specific tables.
 * See kernels.h for the contract every table keeps.
 *
 * Sections: scalar reference; AVX2 + FMA ("avx2"); AVX-512 F/BW/VL/DQ ("avx512", whose
 * matmul_bf16 widens bf16 to fp32), the same with vdpbf16ps for matmul_bf16 ("avx512bf16"), and
 * with AMX tiles for it ("amx-bf16", kernels-amx.inc); dispatch. Each SIMD table gives results that differ from the scalar ones by rounding only
 * (bounds in tests/test-kernels.c), and are bit-reproducible within the table.
 *
 * The x86 sections (intrinsics, target attributes, cpuid) compile only on x86 (KERNELS_X86);
 * elsewhere (ARM, ...) the file holds the scalar table alone and dispatch always picks it. */
#include "kernels.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define KERNELS_X86 1
#include <immintrin.h>
#else
#define KERNELS_X86 0
#endif

#include "util.h"

/* ==== scalar reference ===================================================================== */

static void matmul_f32_scalar(float *Y, size_t ldy, const uint16_t *W, const float *X, size_t ldx,
                              int n_tok, int n_in, int r0, int r1) {
    for (int t = 0; t < n_tok; t++) {
        const float *x = X + (size_t)t * ldx;
        for (int r = r0; r < r1; r++) {
            const uint16_t *w = W + (size_t)r * n_in;
            float sum = 0.0f;
            for (int k = 0; k < n_in; k++) sum += g3_bf16_to_f32(w[k]) * x[k];
            Y[(size_t)t * ldy + r] = sum;
        }
    }
}

static void matmul_bf16_scalar(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                               size_t ldx, int n_tok, int n_in, int r0, int r1) {
    for (int t = 0; t < n_tok; t++) {
        const uint16_t *x = X + (size_t)t * ldx;
        for (int r = r0; r < r1; r++) {
            const uint16_t *w = W + (size_t)r * n_in;
            float sum = 0.0f;
            for (int k = 0; k < n_in; k++) sum += g3_bf16_to_f32(w[k]) * g3_bf16_to_f32(x[k]);
            Y[(size_t)t * ldy + r] = sum;
        }
    }
}

static void rmsnorm_scalar(float *y, const float *x, const float *w1p, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * w1p[i];
}

static float gelu_tanh(float z) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * z * (1.0f + tanhf(k * (z + 0.044715f * z * z * z)));
}

static void gelu_tanh_mul_scalar(float *out, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) out[i] = gelu_tanh(gate[i]) * up[i];
}

/* No score above -inf. Masked positions alone: all zeros. But scores that are NaN (a NaN weight
 * upstream) also never exceed -inf, and zeros would hide them: they stay NaN, so the forward
 * pass's check of the logits sees them. Every table takes this (rare) path the same way. */
static void softmax_nothing_visible(float *x, int n) {
    float fill = 0.0f;
    for (int i = 0; i < n; i++)
        if (isnan(x[i])) fill = NAN;
    for (int i = 0; i < n; i++) x[i] = fill;
}

static void softmax_scalar(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    if (max == -INFINITY) { /* nothing visible: all zeros (NaN stays NaN) */
        softmax_nothing_visible(x, n);
        return;
    }
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static double log_sum_exp_scalar(const float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i])) return NAN;
        if (x[i] > max) max = x[i];
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += expf(x[i] - max);
    return max + log(sum);
}

static float dot_f32_scalar(const float *a, const float *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static float dot_bf16_scalar(const float *a, const uint16_t *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i] * g3_bf16_to_f32(b[i]);
    return sum;
}

static void axpy_f32_scalar(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static void axpy_bf16_scalar(float *y, float a, const uint16_t *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * g3_bf16_to_f32(x[i]);
}

/* dots_* / axpys_* of a table that has no grouped kernel: its own dot / axpy, one row at a time
 * (the contract is that arithmetic exactly). */
#define ROW_LOOPS(ATTR, SUF, T)                                                                          \
    static ATTR void dots_##T##_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,        \
                                      size_t ldb, int n_rows, int n) {                                   \
        for (int h = 0; h < n_a; h++)                                                                    \
            for (int i = 0; i < n_rows; i++)                                                             \
                s[h * lds + i] = dot_##T##_##SUF(a + (size_t)h * n, (const ROW_##T *)b + i * ldb, n);    \
    }                                                                                                    \
    static ATTR void axpys_##T##_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,       \
                                       size_t ldb, int n_rows, int n) {                                  \
        for (int h = 0; h < n_y; h++)                                                                    \
            for (int i = 0; i < n_rows; i++)                                                             \
                axpy_##T##_##SUF(y + (size_t)h * n, c[h * ldc + i], (const ROW_##T *)b + i * ldb, n);    \
    }
#define ROW_f32 float
#define ROW_bf16 uint16_t

/* Row i of a table of f32 or bf16 rows (ldb elements apart), and element k of a row: what the
 * grouped kernels of every instruction set read through. */
static inline const void *row_at(const void *b, size_t ldb, int i, const int bf16) {
    return (const char *)b + (size_t)i * ldb * (bf16 ? sizeof(uint16_t) : sizeof(float));
}

static inline float row_elem(const void *row, int k, const int bf16) {
    return bf16 ? g3_bf16_to_f32(((const uint16_t *)row)[k]) : ((const float *)row)[k];
}

/* Row or token i of a SIMD tile that holds only n valid ones: past them a tile repeats the last
 * (every load stays in bounds; those outputs are never stored). */
static inline int clamp_to_last(int i, int n) { return i < n ? i : n - 1; }

/* dots_* / axpys_* of a table with grouped kernels (dots_SUF_group, axpys_SUF_group, each for
 * up to four vectors, na a compile-time constant once inlined): the vectors four at a time. */
#define GROUPED_LOOPS(ATTR, SUF)                                                                        \
    INLINE ATTR void dots_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,          \
                                size_t ldb, int n_rows, int n, const int bf16) {                       \
        for (int h = 0; h < n_a; h += 4) {                                                             \
            float *sh = s + h * lds;                                                                   \
            const float *ah = a + (size_t)h * n;                                                       \
            switch (n_a - h < 4 ? n_a - h : 4) {                                                       \
            case 1: dots_##SUF##_group(sh, lds, ah, 1, b, ldb, n_rows, n, bf16); break;                \
            case 2: dots_##SUF##_group(sh, lds, ah, 2, b, ldb, n_rows, n, bf16); break;                \
            case 3: dots_##SUF##_group(sh, lds, ah, 3, b, ldb, n_rows, n, bf16); break;                \
            default: dots_##SUF##_group(sh, lds, ah, 4, b, ldb, n_rows, n, bf16); break;               \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    INLINE ATTR void axpys_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,         \
                                 size_t ldb, int n_rows, int n, const int bf16) {                      \
        for (int h = 0; h < n_y; h += 4) {                                                             \
            float *yh = y + (size_t)h * n;                                                             \
            const float *ch = c + h * ldc;                                                             \
            switch (n_y - h < 4 ? n_y - h : 4) {                                                       \
            case 1: axpys_##SUF##_group(yh, 1, ch, ldc, b, ldb, n_rows, n, bf16); break;               \
            case 2: axpys_##SUF##_group(yh, 2, ch, ldc, b, ldb, n_rows, n, bf16); break;               \
            case 3: axpys_##SUF##_group(yh, 3, ch, ldc, b, ldb, n_rows, n, bf16); break;               \
            default: axpys_##SUF##_group(yh, 4, ch, ldc, b, ldb, n_rows, n, bf16); break;              \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    static ATTR void dots_f32_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,      \
                                    size_t ldb, int n_rows, int n) {                                   \
        dots_##SUF(s, lds, a, n_a, b, ldb, n_rows, n, 0);                                              \
    }                                                                                                  \
    static ATTR void dots_bf16_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,     \
                                     size_t ldb, int n_rows, int n) {                                  \
        dots_##SUF(s, lds, a, n_a, b, ldb, n_rows, n, 1);                                              \
    }                                                                                                  \
    static ATTR void axpys_f32_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,     \
                                     size_t ldb, int n_rows, int n) {                                  \
        axpys_##SUF(y, n_y, c, ldc, b, ldb, n_rows, n, 0);                                             \
    }                                                                                                  \
    static ATTR void axpys_bf16_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,    \
                                      size_t ldb, int n_rows, int n) {                                 \
        axpys_##SUF(y, n_y, c, ldc, b, ldb, n_rows, n, 1);                                             \
    }

ROW_LOOPS(, scalar, f32)
ROW_LOOPS(, scalar, bf16)

static void to_bf16_scalar(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = g3_f32_to_bf16(src[i]);
}

static const g3_kernels kernels_scalar = {
    .name = "scalar",
    .isa = G3_ISA_SCALAR,
    .matmul_f32 = matmul_f32_scalar,
    .matmul_bf16 = matmul_bf16_scalar,
    .rmsnorm = rmsnorm_scalar,
    .gelu_tanh_mul = gelu_tanh_mul_scalar,
    .softmax = softmax_scalar,
    .log_sum_exp = log_sum_exp_scalar,
    .dot_f32 = dot_f32_scalar,
    .dot_bf16 = dot_bf16_scalar,
    .axpy_f32 = axpy_f32_scalar,
    .axpy_bf16 = axpy_bf16_scalar,
    .dots_f32 = dots_f32_scalar,
    .dots_bf16 = dots_bf16_scalar,
    .axpys_f32 = axpys_f32_scalar,
    .axpys_bf16 = axpys_bf16_scalar,
    .to_bf16 = to_bf16_scalar,
};

void g3_rope(float *x, int n_heads, int head_dim, const float *cos_t, const float *sin_t) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * cos_t[i] - b * sin_t[i];
            v[i + half] = b * cos_t[i] + a * sin_t[i];
        }
    }
}

#if KERNELS_X86 /* up to the dispatch section */

#include "amx-tiles.h"
_Thread_local _Alignas(64) unsigned char g3_matmul_scratch[G3_MATMUL_SCRATCH_BYTES];

/* ==== AVX2 + FMA ========================================================================== */

/* Every SIMD function carries its own target attribute, so one portable build (no -march)
 * holds every path and g3_kernels_get() picks one at run time. Helpers are always_inline so
 * they take on their caller's target. */
#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* The determinism contract of matmul, for every SIMD table: each output y[t][r] is one dot
 * product kept in ONE vector accumulator of its own, fed k-chunks in increasing order (the last
 * chunk zero-padded), then reduced horizontally by one fixed tree. A tile of R rows x C tokens
 * just runs R*C such dot products side by side and reduces them together with the same tree,
 * so the value never depends on the tile shape, n_tok, r0/r1 or the thread. (How a chunk feeds
 * the accumulator is the table's own: AVX2's bf16 x bf16 takes 16 elements at a time, below.) */

INLINE AVX2 __m256 widen8_avx2(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The 8 bf16 at p widened (the same values): a broadcast load and one byte shuffle that puts
 * each value in the high half of its lane, one operation where widen8_avx2 takes two. */
INLINE AVX2 __m256 widen8_load_avx2(const uint16_t *p) {
    const __m256i pick = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,
                                          -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(x, pick));
}

/* Horizontal sums of 8 vectors at once. Lane 4h+m of the result is the sum of v[2m+h], each
 * reduced by the same tree (lane i + lane i+4, then i+2, then i+1). */
INLINE AVX2 __m256 hsum8_avx2(const __m256 v[8]) {
    __m256 a[4], b[2];
    for (int i = 0; i < 4; i++)
        a[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
    for (int i = 0; i < 2; i++)
        b[i] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], 0x88), _mm256_shuffle_ps(b[0], b[1], 0xDD));
}

/* Reduces the R x C accumulators acc[i*C + c] (R*C <= 16) and stores rows r..r+nr-1 of tokens
 * t..t+nt-1, eight outputs per hsum8_avx2. Unused slots are zero; they cost a few adds and are
 * never stored. */
INLINE AVX2 void store_tile_avx2(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                 const __m256 *acc, int R, int C) {
    __m256 v[2][8];
    float out[16];
    for (int g = 0; g < (R * C > 8 ? 2 : 1); g++)
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) v[g][i] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < R; i++)
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            int lane = c * R + i; /* output lane: tokens major, rows contiguous */
            v[lane / 8][2 * (lane % 4) + lane % 8 / 4] = acc[i * C + c];
        }
    _mm256_storeu_ps(out, hsum8_avx2(v[0]));
    if (R * C > 8) _mm256_storeu_ps(out + 8, hsum8_avx2(v[1]));
    for (int c = 0; c < nt; c++) {
        float *y = Y + (size_t)(t + c) * ldy + r;
        if (nr == R) memcpy(y, out + c * R, (size_t)R * sizeof(float)); /* a constant size */
        else memcpy(y, out + c * R, (size_t)nr * sizeof(float));
    }
}

/* Decode's R rows (R <= 8) are R short streams a row apart; Zen 3's hardware prefetcher keeps
 * up with them only on long rows (a synthetic 270m-shaped LM head, rows of 640 bf16, was read at
 * ~56 % of the bandwidth). So each k-step also fetches the next tile, the R rows that follow in
 * memory, as one linear stream: as many BYTES as the step reads, from P, the same fraction of the
 * way into the next tile (270m decode ~20 % faster, 1b ~8 %, 4b alike). P is an integer so that
 * past the last row it is computed without forming a wild pointer (a prefetch never faults). */
INLINE AVX2 void prefetch_ahead_avx2(uintptr_t p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T0);
}

/* One R x C tile (R*C <= 8) of a bf16-weight matmul against fp32 X, in 8-wide chunks of k.
 * Rows past nr and tokens past nt repeat the last valid one (so every load stays in bounds) and
 * are not stored. */
INLINE AVX2 void tile_f32_avx2(float *Y, size_t ldy, const uint16_t *W, const float *X, size_t ldx,
                               int n_in, int r, int nr, int t, int nt, int R, int C) {
    const uint16_t *w[8];
    const float *x[8];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) x[c] = X + (size_t)(t + clamp_to_last(c, nt)) * ldx;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < R * C; i++) acc[i] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 8 <= n_in; k += 8) {
        if (C == 1) /* decode */
            prefetch_ahead_avx2((uintptr_t)w[0] + ((size_t)R * n_in + (size_t)k * R) * 2, 16 * (size_t)R);
        __m256 xv[8];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) xv[c] = _mm256_loadu_ps(x[c] + k);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            __m256 wv = widen8_load_avx2(w[i] + k);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) acc[i * C + c] = _mm256_fmadd_ps(wv, xv[c], acc[i * C + c]);
        }
    }
    if (k < n_in) { /* the tail chunk, zero-padded through small stack copies */
        int rem = n_in - k;
        __m256 xv[8];
        for (int c = 0; c < C; c++) {
            float tmp[8] = {0};
            memcpy(tmp, x[c] + k, (size_t)rem * sizeof *tmp);
            xv[c] = _mm256_loadu_ps(tmp);
        }
        for (int i = 0; i < R; i++) {
            uint16_t tmp[8] = {0};
            memcpy(tmp, w[i] + k, (size_t)rem * sizeof *tmp);
            __m256 wv = widen8_avx2(_mm_loadu_si128((const __m128i *)tmp));
            for (int c = 0; c < C; c++) acc[i * C + c] = _mm256_fmadd_ps(wv, xv[c], acc[i * C + c]);
        }
    }
    store_tile_avx2(Y, ldy, r, nr, t, nt, acc, R, C);
}

/* The 16 bf16 at p as fp32, the even elements (0, 2, .., 14) in *even and the odd ones in *odd:
 * one plain load and two bit operations, where widening 8 in order takes a shuffle each (and
 * Zen 3 runs shuffles and FMAs on shared ports: 4x2 prefill tiles ~20 % faster this way). */
INLINE AVX2 void widen16_split_avx2(const uint16_t *p, __m256 *even, __m256 *odd) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* Row i's accumulators, tokens 0..C-1, fed one 16-element chunk: its even elements, then its
 * odd ones (lane j: elements 2j, then 2j + 1). */
INLINE AVX2 void fma_split_avx2(__m256 *acc, __m256 we, __m256 wo, const __m256 *xe,
                                const __m256 *xo, int C) {
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) acc[c] = _mm256_fmadd_ps(we, xe[c], acc[c]);
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) acc[c] = _mm256_fmadd_ps(wo, xo[c], acc[c]);
}

/* One R x C tile (R*C <= 8) of a bf16 x bf16 matmul in 16-wide chunks of k (fma_split_avx2),
 * the last chunk zero-padded. Rows and tokens past nr, nt as in tile_f32_avx2. */
INLINE AVX2 void tile_bf16_avx2(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                size_t ldx, int n_in, int r, int nr, int t, int nt, int R, int C) {
    const uint16_t *w[8];
    const uint16_t *x[8];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) x[c] = X + (size_t)(t + clamp_to_last(c, nt)) * ldx;
    __m256 acc[8], xe[8], xo[8], we, wo;
#pragma GCC unroll 8
    for (int i = 0; i < R * C; i++) acc[i] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 16 <= n_in; k += 16) {
        if (C == 1) /* decode */
            prefetch_ahead_avx2((uintptr_t)w[0] + ((size_t)R * n_in + (size_t)k * R) * 2, 32 * (size_t)R);
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) widen16_split_avx2(x[c] + k, &xe[c], &xo[c]);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            widen16_split_avx2(w[i] + k, &we, &wo);
            fma_split_avx2(acc + i * C, we, wo, xe, xo, C);
        }
    }
    if (k < n_in) { /* the tail chunk through zero-padded copies */
        const size_t rem = (size_t)(n_in - k) * sizeof(uint16_t);
        uint16_t tmp[16] = {0};
        for (int c = 0; c < C; c++) {
            memcpy(tmp, x[c] + k, rem);
            widen16_split_avx2(tmp, &xe[c], &xo[c]);
        }
        for (int i = 0; i < R; i++) {
            memcpy(tmp, w[i] + k, rem);
            widen16_split_avx2(tmp, &we, &wo);
            fma_split_avx2(acc + i * C, we, wo, xe, xo, C);
        }
    }
    store_tile_avx2(Y, ldy, r, nr, t, nt, acc, R, C);
}

/* ---- AVX2 prefill from packed activations. The 4 x 2 tile above converts W and X inside its
 * loop and holds its 8 accumulators, X chunks and W chunk in 15 of the 16 registers: about 60 %
 * of the FMA peak on Zen 3, its 8 chains of two dependent FMAs per chunk (latency 4) just enough
 * for 2 FMAs a cycle, so any stall costs. So a batch converts its block of tokens once, into the
 * per-thread scratch, in the order tile_bf16_avx2 feeds X (per chunk of 16, the 8 even elements
 * then the 8 odd ones, as fp32; the last chunk zero-padded). A 3 x 4 tile then loads each token
 * vector once for 3 FMAs: 12 accumulators, 3 weight vectors and the token vector fill the 16
 * registers. Its 4 tokens' slice of k (at most PACK_KMAX) stays in L1 while the tiles of a block
 * of rows pass over it, reading W (bf16, half the bytes of fp32) from L2; each FMA then needs
 * 8 bytes from L2, where X read from L2 would need 11. Every accumulator takes the same products
 * in the same order as in tile_bf16_avx2, so the results are bitwise those of decode. */
enum { PACK_R = 3, PACK_C = 4, PACK_TOKENS = 96, PACK_ROWS = 48, PACK_KMAX = 1280, PACK_L2 = 384 << 10 };

/* Tokens [0, n) of X (bf16, row stride ldx) into P at stride ldp floats (n_in rounded up to 16). */
INLINE AVX2 void pack_split_avx2(float *P, size_t ldp, const uint16_t *X, size_t ldx, int n,
                                 int n_in) {
    for (int c = 0; c < n; c++) {
        const uint16_t *x = X + (size_t)c * ldx;
        float *p = P + (size_t)c * ldp;
        int k = 0;
        __m256 e, o;
        for (; k + 16 <= n_in; k += 16) {
            widen16_split_avx2(x + k, &e, &o);
            _mm256_storeu_ps(p + k, e);
            _mm256_storeu_ps(p + k + 8, o);
        }
        if (k < n_in) {
            uint16_t tmp[16] = {0};
            memcpy(tmp, x + k, (size_t)(n_in - k) * sizeof *tmp);
            widen16_split_avx2(tmp, &e, &o);
            _mm256_storeu_ps(p + k, e);
            _mm256_storeu_ps(p + k + 8, o);
        }
    }
}

/* 3 rows' even (odd) products of one chunk with the 4 tokens' packed halves at x[c] + k. */
INLINE AVX2 void fma_3x4_avx2(__m256 *acc, const __m256 *wv, const float *const *x, int k) {
#pragma GCC unroll 4
    for (int c = 0; c < PACK_C; c++) {
        __m256 xv = _mm256_loadu_ps(x[c] + k);
#pragma GCC unroll 3
        for (int i = 0; i < PACK_R; i++)
            acc[i * PACK_C + c] = _mm256_fmadd_ps(wv[i], xv, acc[i * PACK_C + c]);
    }
}

/* One 3 x 4 tile over k in [k0, k1) (k0 a multiple of 16) from the packed tokens Xp (stride ldp,
 * indexed by k): with k0 > 0 the accumulators resume from save[], with k1 < n_in they are parked
 * there (k-blocking; parking a register is exact), else reduced and stored. Rows past nr and
 * tokens past nt repeat the last valid one. The odd halves of W come from two shifts rather
 * than a mask, which would need a 17th register. */
INLINE AVX2 void tile_packed_avx2(float *Y, size_t ldy, const uint16_t *W, const float *Xp,
                                  size_t ldp, int n_in, int r, int nr, int t, int nt, int k0,
                                  int k1, __m256 *save) {
    const uint16_t *w[PACK_R];
    const float *x[PACK_C];
#pragma GCC unroll 3
    for (int i = 0; i < PACK_R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 4
    for (int c = 0; c < PACK_C; c++) x[c] = Xp + (size_t)clamp_to_last(c, nt) * ldp;
    __m256 acc[PACK_R * PACK_C], wv[PACK_R];
#pragma GCC unroll 12
    for (int i = 0; i < PACK_R * PACK_C; i++) acc[i] = k0 > 0 ? save[i] : _mm256_setzero_ps();
    int k = k0;
    for (; k + 16 <= k1; k += 16) {
#pragma GCC unroll 3
        for (int i = 0; i < PACK_R; i++)
            wv[i] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(w[i] + k)), 16));
        fma_3x4_avx2(acc, wv, x, k);
#pragma GCC unroll 3
        for (int i = 0; i < PACK_R; i++)
            wv[i] = _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(w[i] + k)), 16), 16));
        fma_3x4_avx2(acc, wv, x, k + 8);
    }
    if (k < k1) { /* the tail chunk (k1 == n_in): W through zero-padded copies */
        uint16_t tmp[PACK_R][16] = {{0}};
        __m256 wo[PACK_R];
        for (int i = 0; i < PACK_R; i++) {
            memcpy(tmp[i], w[i] + k, (size_t)(n_in - k) * sizeof(uint16_t));
            widen16_split_avx2(tmp[i], &wv[i], &wo[i]);
        }
        fma_3x4_avx2(acc, wv, x, k);
        fma_3x4_avx2(acc, wo, x, k + 8);
    }
    if (k1 < n_in) {
#pragma GCC unroll 12
        for (int i = 0; i < PACK_R * PACK_C; i++) save[i] = acc[i];
        return;
    }
    store_tile_avx2(Y, ldy, r, nr, t, nt, acc, PACK_R, PACK_C);
}

/* A batch of bf16 X: blocks of tokens packed into the scratch, then per block of PACK_ROWS rows
 * and slice of k, each token tile's slice (in L1) meets the block's row tiles in turn (their W
 * slice in L2), the accumulators parked in the scratch between slices. A block holds up to
 * PACK_TOKENS tokens, fewer where its slice of X and the rows' slice of W would not fit PACK_L2
 * (three quarters of Zen 3's L2; 96 tokens' slice of 1,280 alone would take 480 KB). W is read
 * from memory once per block of tokens. (Prefetching the next W slice in shares over the token
 * tiles gained nothing measurable and cost 3-5 % of 4B prefill in its own instructions.)
 * Returns 0 (nothing done) when not even PACK_C packed tokens fit the scratch. */
INLINE AVX2 int matmul_packed_avx2(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                   size_t ldx, int n_tok, int n_in, int r0, int r1) {
    enum { PARK = PACK_ROWS / PACK_R * (PACK_TOKENS / PACK_C) * PACK_R * PACK_C };
    __m256 *park = (__m256 *)(void *)g3_matmul_scratch;
    float *Xp = (float *)(park + PARK);
    size_t ldp = ((size_t)n_in + 15) / 16 * 16;
    size_t fit = (G3_MATMUL_SCRATCH_BYTES - PARK * sizeof(__m256)) / (ldp * sizeof(float));
    if (fit < PACK_C) return 0;
    int n_slices = (n_in + PACK_KMAX - 1) / PACK_KMAX;
    int slice = ((n_in + n_slices - 1) / n_slices + 15) / 16 * 16;
    size_t in_l2 = (PACK_L2 - (size_t)PACK_ROWS * slice * sizeof *W) / ((size_t)slice * sizeof(float));
    if (fit > in_l2) fit = in_l2 > PACK_C ? in_l2 : PACK_C;
    int tb = fit < PACK_TOKENS ? (int)fit / PACK_C * PACK_C : PACK_TOKENS;
    for (int t0 = 0; t0 < n_tok; t0 += tb) {
        int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
        pack_split_avx2(Xp, ldp, X + (size_t)t0 * ldx, ldx, t1 - t0, n_in);
        for (int rb = r0; rb < r1; rb += PACK_ROWS) {
            int rb1 = r1 - rb < PACK_ROWS ? r1 : rb + PACK_ROWS;
            for (int k0 = 0; k0 < n_in; k0 += slice) {
                int k1 = n_in - k0 <= slice ? n_in : k0 + slice;
                for (int t = t0; t < t1; t += PACK_C) {
                    int nt = t1 - t < PACK_C ? t1 - t : PACK_C;
                    __m256 *save = park + (t - t0) / PACK_C * (PACK_ROWS / PACK_R) * PACK_R * PACK_C;
                    for (int r = rb; r < rb1; r += PACK_R, save += PACK_R * PACK_C)
                        tile_packed_avx2(Y, ldy, W, Xp + (size_t)(t - t0) * ldp, ldp, n_in, r,
                                         rb1 - r < PACK_R ? rb1 - r : PACK_R, t, nt, k0, k1, save);
                }
            }
        }
    }
    return 1;
}

/* XBF16: X holds bf16 (tile_bf16_avx2), or fp32 (tile_f32_avx2, exact mode). */
INLINE AVX2 void tile_avx2(float *Y, size_t ldy, const uint16_t *W, const void *X, size_t ldx,
                           int xbf16, int n_in, int r, int nr, int t, int nt, int R, int C) {
    if (xbf16) tile_bf16_avx2(Y, ldy, W, X, ldx, n_in, r, nr, t, nt, R, C);
    else tile_f32_avx2(Y, ldy, W, X, ldx, n_in, r, nr, t, nt, R, C);
}

/* Tiles: 8 rows x 1 token for decode (8 independent FMA chains stream 8 rows); batches of bf16
 * X through matmul_packed_avx2 (token by token, as decode, the rare X too wide for the
 * scratch); 4 x 2 for batches of fp32 X (exact mode), tokens blocked so a block of X stays in
 * L2 while every row tile of the thread's share passes over it. */
INLINE AVX2 void matmul_avx2(float *Y, size_t ldy, const uint16_t *W, const void *X, size_t ldx,
                             int xbf16, int n_tok, int n_in, int r0, int r1) {
    if (n_tok > 1 && xbf16 && matmul_packed_avx2(Y, ldy, W, X, ldx, n_tok, n_in, r0, r1)) return;
    if (n_tok == 1 || xbf16) {
        for (int t = 0; t < n_tok; t++)
            for (int r = r0; r < r1; r += 8)
                tile_avx2(Y, ldy, W, X, ldx, xbf16, n_in, r, r1 - r < 8 ? r1 - r : 8, t, 1, 8, 1);
        return;
    }
    size_t x_row_bytes = (size_t)n_in * sizeof(float);
    int tb = (int)((256u << 10) / x_row_bytes) & ~1;
    if (tb < 2) tb = 2;
    for (int t0 = 0; t0 < n_tok; t0 += tb) {
        int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
        for (int r = r0; r < r1; r += 4) {
            int nr = r1 - r < 4 ? r1 - r : 4;
            for (int t = t0; t < t1; t += 2)
                tile_avx2(Y, ldy, W, X, ldx, xbf16, n_in, r, nr, t, t1 - t < 2 ? t1 - t : 2, 4, 2);
        }
    }
}

static AVX2 void matmul_f32_avx2(float *Y, size_t ldy, const uint16_t *W, const float *X,
                                 size_t ldx, int n_tok, int n_in, int r0, int r1) {
    matmul_avx2(Y, ldy, W, X, ldx, 0, n_tok, n_in, r0, r1);
}

static AVX2 void matmul_bf16_avx2(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                  size_t ldx, int n_tok, int n_in, int r0, int r1) {
    matmul_avx2(Y, ldy, W, X, ldx, 1, n_tok, n_in, r0, r1);
}

INLINE AVX2 float hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE AVX2 float hmax_avx2(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Loads the n < 8 values at p into a vector whose other lanes hold `pad`. */
INLINE AVX2 __m256 load_partial_avx2(const float *p, int n, float pad) {
    float tmp[8];
    for (int i = 0; i < 8; i++) tmp[i] = i < n ? p[i] : pad;
    return _mm256_loadu_ps(tmp);
}

INLINE AVX2 __m256 load_partial_bf16_avx2(const uint16_t *p, int n) {
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, (size_t)n * sizeof *tmp);
    return widen8_avx2(_mm_loadu_si128((const __m128i *)tmp));
}

INLINE AVX2 void store_partial_avx2(float *p, __m256 v, int n) {
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    memcpy(p, tmp, (size_t)n * sizeof *p);
}

/* exp(x) for every lane, within ~2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6
 * polynomial, then two exact power-of-two scalings (2^n split in halves so that results down
 * in the subnormal range round once, correctly, and -inf gives exactly 0). Inputs clamp to
 * [-120, 89]: below that the result is 0, above it +inf. */
INLINE AVX2 __m256 exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-120.0f)), _mm256_set1_ps(89.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static AVX2 float dot_f32_avx2(const float *a, const float *b, int n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    if (i < n)
        acc1 = _mm256_fmadd_ps(load_partial_avx2(a + i, n - i, 0.0f),
                               load_partial_avx2(b + i, n - i, 0.0f), acc1);
    return hsum_avx2(_mm256_add_ps(acc0, acc1));
}

static AVX2 float dot_bf16_avx2(const float *a, const uint16_t *b, int n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i),
                               widen8_load_avx2(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8),
                               widen8_load_avx2(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i),
                               widen8_load_avx2(b + i), acc0);
    if (i < n)
        acc1 = _mm256_fmadd_ps(load_partial_avx2(a + i, n - i, 0.0f),
                               load_partial_bf16_avx2(b + i, n - i), acc1);
    return hsum_avx2(_mm256_add_ps(acc0, acc1));
}

static AVX2 void axpy_f32_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

static AVX2 void axpy_bf16_avx2(float *y, float a, const uint16_t *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = widen8_load_avx2(x + i);
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, xv, _mm256_loadu_ps(y + i)));
    }
    for (; i < n; i++) y[i] = fmaf(a, g3_bf16_to_f32(x[i]), y[i]);
}

/* dots_* / axpys_*: up to four vectors (the query heads of one kv head) against each row, the
 * row read once for them; per vector exactly dot_*_avx2's / axpy_*_avx2's arithmetic. */
INLINE AVX2 __m256 row8_avx2(const void *row, int k, const int bf16) {
    return bf16 ? widen8_load_avx2((const uint16_t *)row + k)
                : _mm256_loadu_ps((const float *)row + k);
}

INLINE AVX2 __m256 row_partial_avx2(const void *row, int k, int n, const int bf16) {
    return bf16 ? load_partial_bf16_avx2((const uint16_t *)row + k, n - k)
                : load_partial_avx2((const float *)row + k, n - k, 0.0f);
}

INLINE AVX2 void dots_avx2_group(float *s, size_t lds, const float *a, const int na, const void *b,
                                 size_t ldb, int n_rows, int n, const int bf16) {
    for (int i = 0; i < n_rows; i++) {
        const void *row = row_at(b, ldb, i, bf16);
        __m256 acc0[4], acc1[4];
#pragma GCC unroll 4
        for (int h = 0; h < na; h++) acc0[h] = acc1[h] = _mm256_setzero_ps();
        int k = 0;
        for (; k + 16 <= n; k += 16) {
            const __m256 w0 = row8_avx2(row, k, bf16), w1 = row8_avx2(row, k + 8, bf16);
#pragma GCC unroll 4
            for (int h = 0; h < na; h++) {
                acc0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(a + (size_t)h * n + k), w0, acc0[h]);
                acc1[h] = _mm256_fmadd_ps(_mm256_loadu_ps(a + (size_t)h * n + k + 8), w1, acc1[h]);
            }
        }
        for (; k + 8 <= n; k += 8) {
            const __m256 w = row8_avx2(row, k, bf16);
#pragma GCC unroll 4
            for (int h = 0; h < na; h++) acc0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(a + (size_t)h * n + k), w, acc0[h]);
        }
        if (k < n) {
            const __m256 w = row_partial_avx2(row, k, n, bf16);
#pragma GCC unroll 4
            for (int h = 0; h < na; h++)
                acc1[h] = _mm256_fmadd_ps(load_partial_avx2(a + (size_t)h * n + k, n - k, 0.0f), w, acc1[h]);
        }
#pragma GCC unroll 4
        for (int h = 0; h < na; h++) s[h * lds + i] = hsum_avx2(_mm256_add_ps(acc0[h], acc1[h]));
    }
}

/* Columns [k, k + 16) of up to four outputs, held in registers across the rows (axpy_*_avx2
 * loads and stores them per row): one fma per element and row, in row order. */
INLINE AVX2 void axpys_avx2_cols(float *y, const int ny, const float *c, size_t ldc, const void *b,
                                 size_t ldb, int n_rows, int n, int k, const int bf16) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int h = 0; h < ny; h++)
        for (int j = 0; j < 2; j++) acc[h][j] = _mm256_loadu_ps(y + (size_t)h * n + k + 8 * j);
    for (int i = 0; i < n_rows; i++) {
        const void *row = row_at(b, ldb, i, bf16);
        const __m256 w0 = row8_avx2(row, k, bf16), w1 = row8_avx2(row, k + 8, bf16);
#pragma GCC unroll 4
        for (int h = 0; h < ny; h++) {
            const __m256 ch = _mm256_set1_ps(c[h * ldc + i]);
            acc[h][0] = _mm256_fmadd_ps(ch, w0, acc[h][0]);
            acc[h][1] = _mm256_fmadd_ps(ch, w1, acc[h][1]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < ny; h++)
        for (int j = 0; j < 2; j++) _mm256_storeu_ps(y + (size_t)h * n + k + 8 * j, acc[h][j]);
}

INLINE AVX2 void axpys_avx2_group(float *y, const int ny, const float *c, size_t ldc, const void *b,
                                  size_t ldb, int n_rows, int n, const int bf16) {
    int k = 0;
    for (; k + 16 <= n; k += 16) axpys_avx2_cols(y, ny, c, ldc, b, ldb, n_rows, n, k, bf16);
    for (int h = 0; h < ny; h++) /* the rest as axpy_*_avx2 takes it: 8 at a time, then one by one */
        for (int i = 0; i < n_rows; i++) {
            const void *row = row_at(b, ldb, i, bf16);
            float *yh = y + (size_t)h * n;
            const float ch = c[h * ldc + i];
            int kk = k;
            for (; kk + 8 <= n; kk += 8)
                _mm256_storeu_ps(yh + kk, _mm256_fmadd_ps(_mm256_set1_ps(ch), row8_avx2(row, kk, bf16), _mm256_loadu_ps(yh + kk)));
            for (; kk < n; kk++) yh[kk] = fmaf(ch, row_elem(row, kk, bf16), yh[kk]);
        }
}

GROUPED_LOOPS(AVX2, avx2)

static AVX2 void rmsnorm_avx2(float *y, const float *x, const float *w1p, int n, float eps) {
    float ss = dot_f32_avx2(x, x, n);
    __m256 inv = _mm256_set1_ps(1.0f / sqrtf(ss / (float)n + eps));
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv),
                                              _mm256_loadu_ps(w1p + i)));
    if (i < n)
        store_partial_avx2(y + i, _mm256_mul_ps(_mm256_mul_ps(load_partial_avx2(x + i, n - i, 0), inv),
                                                load_partial_avx2(w1p + i, n - i, 0)), n - i);
}

/* gelu_tanh(z) = z/2 (1 + tanh(u)) = z * sigmoid(2u) = z / (1 + exp(-2u)), u = sqrt(2/pi) (z +
 * 0.044715 z^3). The sigmoid form has no cancellation for negative u, where 1 + tanh(u) loses
 * every digit, and exp(-2u) = +inf gives the right limit (-0) for very negative z. */
INLINE AVX2 __m256 gelu_avx2(__m256 z) {
    __m256 z3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), z), z), z);
    __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_add_ps(z, z3));
    __m256 e = exp_avx2(_mm256_mul_ps(u, _mm256_set1_ps(-2.0f)));
    return _mm256_div_ps(z, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static AVX2 void gelu_tanh_mul_avx2(float *out, const float *gate, const float *up, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu_avx2(_mm256_loadu_ps(gate + i)),
                                                _mm256_loadu_ps(up + i)));
    if (i < n)
        store_partial_avx2(out + i, _mm256_mul_ps(gelu_avx2(load_partial_avx2(gate + i, n - i, 0)),
                                                  load_partial_avx2(up + i, n - i, 0)), n - i);
}

static AVX2 void softmax_avx2(float *x, int n) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    if (i < n) vmax = _mm256_max_ps(vmax, load_partial_avx2(x + i, n - i, -INFINITY));
    float max = hmax_avx2(vmax);
    if (max == -INFINITY) { /* nothing visible: as the reference */
        softmax_nothing_visible(x, n);
        return;
    }
    __m256 vm = _mm256_set1_ps(max), sum = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (i < n) {
        __m256 e = exp_avx2(_mm256_sub_ps(load_partial_avx2(x + i, n - i, -INFINITY), vm));
        store_partial_avx2(x + i, e, n - i);
        sum = _mm256_add_ps(sum, e);
    }
    __m256 inv = _mm256_set1_ps(1.0f / hsum_avx2(sum));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= _mm256_cvtss_f32(inv);
}

/* Round-to-nearest-even on the low 16 bits; NaN keeps its sign and top payload and gets the
 * quiet bit, exactly as g3_f32_to_bf16. */
INLINE AVX2 __m256i to_bf16_lanes_avx2(__m256 f) {
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                        _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

static AVX2 double log_sum_exp_avx2(const float *x, int n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 vmax = _mm256_set1_ps(-INFINITY), finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        vmax = _mm256_max_ps(vmax, v);
        finite = _mm256_and_ps(finite, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_LT_OQ));
    }
    if (_mm256_movemask_ps(finite) != 0xff) return NAN;
    float lanes[8], max = -INFINITY;
    _mm256_storeu_ps(lanes, vmax);
    for (int j = 0; j < 8; j++) max = lanes[j] > max ? lanes[j] : max;
    for (int j = i; j < n; j++) {
        if (!isfinite(x[j])) return NAN;
        max = x[j] > max ? x[j] : max;
    }
    const __m256 vm = _mm256_set1_ps(max);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) { /* exp in float, the sum in double lanes */
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double d[4], sum = 0;
    _mm256_storeu_pd(d, _mm256_add_pd(lo, hi));
    for (int j = 0; j < 4; j++) sum += d[j];
    for (; i < n; i++) sum += expf(x[i] - max);
    return max + log(sum);
}

static AVX2 void to_bf16_avx2(uint16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = to_bf16_lanes_avx2(_mm256_loadu_ps(src + i));
        __m256i b = to_bf16_lanes_avx2(_mm256_loadu_ps(src + i + 8));
        /* packus interleaves 128-bit halves; the permute puts them back in order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(dst + i), p);
    }
    for (; i < n; i++) dst[i] = g3_f32_to_bf16(src[i]);
}

static const g3_kernels kernels_avx2 = {
    .name = "avx2",
    .isa = G3_ISA_AVX2,
    .matmul_f32 = matmul_f32_avx2,
    .matmul_bf16 = matmul_bf16_avx2,
    .rmsnorm = rmsnorm_avx2,
    .gelu_tanh_mul = gelu_tanh_mul_avx2,
    .softmax = softmax_avx2,
    .log_sum_exp = log_sum_exp_avx2,
    .dot_f32 = dot_f32_avx2,
    .dot_bf16 = dot_bf16_avx2,
    .axpy_f32 = axpy_f32_avx2,
    .axpy_bf16 = axpy_bf16_avx2,
    .dots_f32 = dots_f32_avx2,
    .dots_bf16 = dots_bf16_avx2,
    .axpys_f32 = axpys_f32_avx2,
    .axpys_bf16 = axpys_bf16_avx2,
    .to_bf16 = to_bf16_avx2,
};

/* ==== AVX-512 (F/BW/VL/DQ; BF16 dot products where present) =============================== */

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

INLINE AVX512 __m512 widen16_512(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE AVX512 __mmask16 mask16_512(int n) { return (__mmask16)((1u << n) - 1u); }

/* Horizontal sums of 16 vectors at once. Lane 4q+m of the result is the sum of v[4m+q], each
 * reduced by the same tree (lane i + lane i+8, then i+4, i+2, i+1), whichever vectors share
 * the call: the matmul determinism contract rests on this. */
INLINE AVX512 __m512 hsum16_512(const __m512 v[16]) {
    __m512 a[8], b[4], c[2];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
}

/* Reduces the R x C accumulators acc[i*C + c] (R*C <= 16) and stores rows r..r+nr-1 of tokens
 * t..t+nt-1. Unused slots are zero; they cost a few adds and are never stored. */
INLINE AVX512 void store_tile_512(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                  const __m512 *acc, int R, int C) {
    __m512 v[16];
    for (int i = 0; i < 16; i++) v[i] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < R; i++)
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            int lane = c * R + i; /* output lane: tokens major, rows contiguous */
            v[4 * (lane % 4) + lane / 4] = acc[i * C + c];
        }
    __m512 s = hsum16_512(v);
    for (int c = 0; c < nt; c++) {
        float *y = Y + (size_t)(t + c) * ldy + r;
        /* the masked store touches only y[0..nr) */
        __m512i idx = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                       _mm512_set1_epi32(c * R));
        __m512 sc = c == 0 ? s : _mm512_permutexvar_ps(idx, s); /* token c's lanes first */
        _mm512_mask_storeu_ps(y, mask16_512(nr), sc);
    }
}

/* Stores an R x C tile (R*C <= 32) in groups of 16/C rows, one 16-vector reduction each. */
INLINE AVX512 void store_rows_512(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                  const __m512 *acc, int R, int C) {
    int G = 16 / C;
#pragma GCC unroll 16
    for (int g = 0; g < R; g += G) {
        int rg = R - g < G ? R - g : G;
        if (nr - g <= 0) break;
        store_tile_512(Y, ldy, r + g, nr - g < rg ? nr - g : rg, t, nt, acc + g * C, rg, C);
    }
}

/* Ends a tile: either parks the accumulators for the next k-block or reduces and stores. */
INLINE AVX512 void finish_tile_512(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                   __m512 *acc, int R, int C, int n_in, int k1, __m512 *save) {
    if (k1 < n_in) {
#pragma GCC unroll 32
        for (int i = 0; i < R * C; i++) save[i] = acc[i];
        return;
    }
    store_rows_512(Y, ldy, r, nr, t, nt, acc, R, C);
}

/* Row/token pointers of a tile; rows past nr and tokens past nt repeat the last valid one, so
 * every load stays in bounds (their results are computed and dropped). A tile covers k in
 * [k0, k1): with k0 > 0 its accumulators resume from save[], with k1 < n_in they go back there
 * (k-blocking, see TOKEN_BLOCKS_K_512); saving a register and loading it back is exact, so a
 * blocked dot product is bitwise the unblocked one. */
#define TILE_POINTERS(XT)                                                                      \
    const uint16_t *w[16];                                                                     \
    const XT *x[16];                                                                           \
    _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                       \
        w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;                                  \
    _Pragma("GCC unroll 16") for (int c = 0; c < C; c++)                                       \
        x[c] = X + (size_t)(t + clamp_to_last(c, nt)) * ldx;                                   \
    __m512 acc[32];                                                                            \
    _Pragma("GCC unroll 32") for (int i = 0; i < R * C; i++)                                   \
        acc[i] = k0 > 0 ? save[i] : _mm512_setzero_ps();

/* Decode streams R rows at once; the hardware prefetcher does not keep that many streams
 * ahead, so each k-step asks for the same 64-byte line of the next tile's rows (R rows on).
 * Past the last row this touches no memory (a prefetch never faults), hence the integer
 * arithmetic rather than an out-of-bounds pointer. */
INLINE AVX512 void prefetch_next_tile(const uint16_t *const *w, int R, int n_in, int k) {
    size_t ahead = (size_t)R * (size_t)n_in * sizeof(uint16_t);
#pragma GCC unroll 16
    for (int i = 0; i < R; i++)
        _mm_prefetch((const char *)((uintptr_t)(w[i] + k) + ahead), _MM_HINT_T0);
}

/* Splits 32 bf16 (16 adjacent k-pairs) into fp32 vectors of the even and of the odd k: one
 * shift and one mask, half the work of widening two halves with vpmovzxwd. */
INLINE AVX512 void split_bf16_512(__m512i v, __m512 *even, __m512 *odd) {
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}

/* The same even/odd split of 32 fp32 activations (two permutes, shared by the tile's rows). */
INLINE AVX512 void split_f32_512(__m512 lo, __m512 hi, __m512 *even, __m512 *odd) {
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    *even = _mm512_permutex2var_ps(lo, ie, hi);
    *odd = _mm512_permutex2var_ps(lo, io, hi);
}

/* One R x C tile of the widening matmuls, 32 k per step: lane j of an accumulator takes the
 * products of k = 32s + 2j and then of k = 32s + 2j + 1 (two FMAs). X is fp32 (matmul_f32)
 * or, when XBF16, bf16 split like W (matmul_bf16 on AVX-512 without the BF16 extension). */
INLINE AVX512 void tile_widen_512(float *Y, size_t ldy, const uint16_t *W, const void *Xv,
                                  size_t ldx, int xbf16, int n_in, int r, int nr, int t, int nt,
                                  int R, int C, int k0, int k1, __m512 *save) {
    const uint16_t *w[16];
    const float *xf[16];
    const uint16_t *xh[16];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 16
    for (int c = 0; c < C; c++) {
        size_t off = (size_t)(t + clamp_to_last(c, nt)) * ldx;
        xf[c] = (const float *)Xv + off;
        xh[c] = (const uint16_t *)Xv + off;
    }
    __m512 acc[32];
#pragma GCC unroll 32
    for (int i = 0; i < R * C; i++) acc[i] = k0 > 0 ? save[i] : _mm512_setzero_ps();
    int k = k0;
    for (; k + 32 <= k1; k += 32) {
        if (C == 1) prefetch_next_tile(w, R, n_in, k);
        __m512 xe[16], xo[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            if (xbf16) split_bf16_512(_mm512_loadu_si512(xh[c] + k), &xe[c], &xo[c]);
            else split_f32_512(_mm512_loadu_ps(xf[c] + k), _mm512_loadu_ps(xf[c] + k + 16), &xe[c], &xo[c]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512 we, wo;
            split_bf16_512(_mm512_loadu_si512(w[i] + k), &we, &wo);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++) {
                acc[i * C + c] = _mm512_fmadd_ps(we, xe[c], acc[i * C + c]);
                acc[i * C + c] = _mm512_fmadd_ps(wo, xo[c], acc[i * C + c]);
            }
        }
    }
    if (k < k1) { /* tail chunk (k1 == n_in), zero-padded by masked loads */
        __mmask32 m = (__mmask32)((1ull << (k1 - k)) - 1u);
        __m512 xe[16], xo[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            if (xbf16) split_bf16_512(_mm512_maskz_loadu_epi16(m, xh[c] + k), &xe[c], &xo[c]);
            else split_f32_512(_mm512_maskz_loadu_ps((__mmask16)m, xf[c] + k),
                               _mm512_maskz_loadu_ps((__mmask16)(m >> 16), xf[c] + k + 16), &xe[c], &xo[c]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512 we, wo;
            split_bf16_512(_mm512_maskz_loadu_epi16(m, w[i] + k), &we, &wo);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++) {
                acc[i * C + c] = _mm512_fmadd_ps(we, xe[c], acc[i * C + c]);
                acc[i * C + c] = _mm512_fmadd_ps(wo, xo[c], acc[i * C + c]);
            }
        }
    }
    finish_tile_512(Y, ldy, r, nr, t, nt, acc, R, C, n_in, k1, save);
}

INLINE AVX512 void tile_f32_512(float *Y, size_t ldy, const uint16_t *W, const float *X,
                                size_t ldx, int n_in, int r, int nr, int t, int nt, int R, int C,
                                int k0, int k1, __m512 *save) {
    tile_widen_512(Y, ldy, W, X, ldx, 0, n_in, r, nr, t, nt, R, C, k0, k1, save);
}

INLINE AVX512 void tile_bf16w_512(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                  size_t ldx, int n_in, int r, int nr, int t, int nt, int R, int C,
                                  int k0, int k1, __m512 *save) {
    tile_widen_512(Y, ldy, W, X, ldx, 1, n_in, r, nr, t, nt, R, C, k0, k1, save);
}

/* One R x C tile of matmul_bf16 with vdpbf16ps: 32 k (16 adjacent pairs) per instruction,
 * straight from row-major W and X (no repacking). Each lane adds its pair's two products in
 * the instruction's fixed order, so this too is one accumulator per output. Unlike the widening
 * tiles it issues no software prefetch in decode: its loop is short enough that the demand
 * loads of 8 rows alone keep the memory system busy, and the prefetches only competed with
 * them for miss buffers (1B decode on a 2-core Zen 5 VM: 16 rows with prefetch 14.7 / 28.0 tok/s at
 * 1 / 2 threads, 8 rows without 15.1 / 28.9). The widening tiles, with twice the work per
 * line, measured the other way round and keep 16 rows and the prefetch. */
INLINE AVX512BF16 void tile_dpbf16_512(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                       size_t ldx, int n_in, int r, int nr, int t, int nt, int R,
                                       int C, int k0, int k1, __m512 *save) {
    TILE_POINTERS(uint16_t)
    int k = k0;
    for (; k + 32 <= k1; k += 32) {
        __m512i xv[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) xv[c] = _mm512_loadu_si512(x[c] + k);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512i wv = _mm512_loadu_si512(w[i] + k);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++)
                acc[i * C + c] = _mm512_dpbf16_ps(acc[i * C + c], (__m512bh)wv, (__m512bh)xv[c]);
        }
    }
    if (k < k1) {
        __mmask32 m = (__mmask32)((1ull << (n_in - k)) - 1u);
        __m512i xv[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) xv[c] = _mm512_maskz_loadu_epi16(m, x[c] + k);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512i wv = _mm512_maskz_loadu_epi16(m, w[i] + k);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++)
                acc[i * C + c] = _mm512_dpbf16_ps(acc[i * C + c], (__m512bh)wv, (__m512bh)xv[c]);
        }
    }
    finish_tile_512(Y, ldy, r, nr, t, nt, acc, R, C, n_in, k1, save);
}

/* The loop over tiles, shared by the three tile kinds. Decode (one token) runs DR rows at a
 * time: DR independent accumulator chains over DR weight streams (the widening tiles also
 * prefetch the next tile's rows). Batches run 8 x 2 tiles (one 16-vector reduction per tile, which matters when
 * n_in is small) over blocks of tokens sized so the block of X (384 KiB) stays in L2 while
 * every row tile of this thread's share passes over it: each W tile then comes from memory
 * once per block and from L1 across the block's token tiles. Large n_in switches to
 * TOKEN_BLOCKS_K_512. (Measured on Zen 5 with L1-resident data, the 8 x 2 vdpbf16ps tile runs
 * at ~87% of the instruction's peak at n_in = 1152; 8 x 3 and 6 x 4, fewer loads per
 * product on paper, ran slower: two reductions per tile and register pressure.) */
#define TOKEN_BLOCKS_512(TILE, XBYTES, TR, TC)                                                  \
    do {                                                                                        \
        int tb = (int)((384u << 10) / ((size_t)n_in * (XBYTES))) / (TC) * (TC);                \
        if (tb < (TC)) tb = (TC);                                                               \
        for (int t0 = 0; t0 < n_tok; t0 += tb) {                                                \
            int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;                                         \
            for (int r = r0; r < r1; r += (TR)) {                                               \
                int nr = r1 - r < (TR) ? r1 - r : (TR);                                         \
                for (int t = t0; t < t1; t += (TC))                                             \
                    TILE(Y, ldy, W, X, ldx, n_in, r, nr, t, t1 - t < (TC) ? t1 - t : (TC), (TR), (TC), 0, n_in, NULL); \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* Large n_in (the MLP down projection, 6912): a tile's 8 rows no longer fit in L1, so k is
 * cut into blocks of KBLOCK; for each row tile and k-block, the block's token tiles run
 * with their accumulators parked in `park` between k-blocks, so the 8 x KBLOCK slice of W is
 * read from L1 by every token tile of the block. */
enum { KBLOCK = 1024, KB_TOKENS = 48 };

#define TOKEN_BLOCKS_K_512(TILE, XBYTES, TR, TC)                                                \
    do {                                                                                        \
        __m512 park[KB_TOKENS / (TC)][(TR) * (TC)];                                             \
        int tb = (int)((384u << 10) / ((size_t)n_in * (XBYTES))) / (TC) * (TC);                 \
        if (tb < (TC)) tb = (TC);                                                               \
        if (tb > KB_TOKENS) tb = KB_TOKENS;                                                     \
        for (int t0 = 0; t0 < n_tok; t0 += tb) {                                                \
            int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;                                         \
            for (int r = r0; r < r1; r += (TR)) {                                               \
                int nr = r1 - r < (TR) ? r1 - r : (TR);                                         \
                for (int k0 = 0; k0 < n_in; k0 += KBLOCK) {                                     \
                    int k1 = n_in - k0 <= KBLOCK ? n_in : k0 + KBLOCK;                          \
                    for (int t = t0, j = 0; t < t1; t += (TC), j++)                             \
                        TILE(Y, ldy, W, X, ldx, n_in, r, nr, t, t1 - t < (TC) ? t1 - t : (TC),  \
                             (TR), (TC), k0, k1, park[j]);                                      \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* DR: rows per decode tile (see tile_dpbf16_512 for why it differs between kernels). */
#define MATMUL_TILES_512(TILE, XBYTES, DR)                                                      \
    do {                                                                                        \
        if (n_tok == 1) {                                                                       \
            for (int r = r0; r < r1; r += (DR))                                                 \
                TILE(Y, ldy, W, X, ldx, n_in, r, r1 - r < (DR) ? r1 - r : (DR), 0, 1, (DR), 1, 0, n_in, NULL); \
        } else if (n_tok == 2 || n_in <= 2048) {                                                \
            TOKEN_BLOCKS_512(TILE, XBYTES, 8, 2);                                               \
        } else {                                                                                \
            TOKEN_BLOCKS_K_512(TILE, XBYTES, 8, 2);                                             \
        }                                                                                       \
    } while (0)

static AVX512 void matmul_f32_512(float *Y, size_t ldy, const uint16_t *W, const float *X,
                                  size_t ldx, int n_tok, int n_in, int r0, int r1) {
    MATMUL_TILES_512(tile_f32_512, 4, 16);
}

static AVX512 void matmul_bf16w_512(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                    size_t ldx, int n_tok, int n_in, int r0, int r1) {
    MATMUL_TILES_512(tile_bf16w_512, 2, 16);
}

static AVX512BF16 void matmul_dpbf16_512(float *Y, size_t ldy, const uint16_t *W,
                                         const uint16_t *X, size_t ldx, int n_tok, int n_in,
                                         int r0, int r1) {
    MATMUL_TILES_512(tile_dpbf16_512, 2, 8);
}

#include "kernels-amx.inc"

/* exp(x) per lane within ~2 ulp: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial,
 * then vscalefps, which rounds subnormal results once and correctly. Inputs clamp to
 * [-120, 89], so -inf gives exactly 0 and large x gives +inf. */
INLINE AVX512 __m512 exp_512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-120.0f)), _mm512_set1_ps(89.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

INLINE AVX512 __m512 gelu_512(__m512 z) { /* see gelu_avx2 for the sigmoid form */
    __m512 z3 = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), z), z), z);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_add_ps(z, z3));
    __m512 e = exp_512(_mm512_mul_ps(u, _mm512_set1_ps(-2.0f)));
    return _mm512_div_ps(z, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static AVX512 float dot_f32_512(const float *a, const float *b, int n) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

static AVX512 float dot_bf16_512(const float *a, const uint16_t *b, int n) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i),
                               widen16_512(_mm256_loadu_si256((const __m256i *)(b + i))), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16),
                               widen16_512(_mm256_loadu_si256((const __m256i *)(b + i + 16))), acc1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i),
                               widen16_512(_mm256_maskz_loadu_epi16(m, b + i)), acc0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

static AVX512 void axpy_f32_512(float *y, float a, const float *x, int n) {
    __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i),
                                                        _mm512_maskz_loadu_ps(m, y + i)));
    }
}

static AVX512 void axpy_bf16_512(float *y, float a, const uint16_t *x, int n) {
    __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        __m512 xv = widen16_512(_mm256_maskz_loadu_epi16(m, x + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, xv, _mm512_maskz_loadu_ps(m, y + i)));
    }
}

/* The values of a row at lanes m from element k on, as fp32 (bf16 widened); 0 elsewhere. A
 * constant whole mask takes plain loads (masked ones slowed the weighted sum of values 5-8 %). */
INLINE AVX512 __m512 row16_512(const void *row, int k, __mmask16 m, const int bf16) {
    if (m == 0xFFFF)
        return bf16 ? widen16_512(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + k)))
                    : _mm512_loadu_ps((const float *)row + k);
    return bf16 ? widen16_512(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + k))
                : _mm512_maskz_loadu_ps(m, (const float *)row + k);
}

/* Lanes of the 16 columns from k on that lie below n. */
INLINE AVX512 __mmask16 cols16_512(int k, int n) { return mask16_512(n - k >= 16 ? 16 : n - k > 0 ? n - k : 0); }

/* dots_* for up to four vectors (na, a compile-time constant once inlined): per vector
 * dot_*_512's two accumulators, masked tail and final reduction, each row loaded once. */
INLINE AVX512 void dots_512_group(float *s, size_t lds, const float *a, const int na, const void *b,
                                  size_t ldb, int n_rows, int n, const int bf16) {
    for (int i = 0; i < n_rows; i++) {
        const void *row = row_at(b, ldb, i, bf16);
        __m512 acc0[4], acc1[4];
#pragma GCC unroll 4
        for (int h = 0; h < na; h++) acc0[h] = acc1[h] = _mm512_setzero_ps();
        int k = 0;
        for (; k + 32 <= n; k += 32) {
            const __m512 w0 = row16_512(row, k, 0xFFFF, bf16), w1 = row16_512(row, k + 16, 0xFFFF, bf16);
#pragma GCC unroll 4
            for (int h = 0; h < na; h++) {
                acc0[h] = _mm512_fmadd_ps(_mm512_loadu_ps(a + (size_t)h * n + k), w0, acc0[h]);
                acc1[h] = _mm512_fmadd_ps(_mm512_loadu_ps(a + (size_t)h * n + k + 16), w1, acc1[h]);
            }
        }
        for (; k < n; k += 16) {
            const __mmask16 m = cols16_512(k, n);
            const __m512 w = row16_512(row, k, m, bf16);
#pragma GCC unroll 4
            for (int h = 0; h < na; h++) acc0[h] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + (size_t)h * n + k), w, acc0[h]);
        }
#pragma GCC unroll 4
        for (int h = 0; h < na; h++) s[h * lds + i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[h], acc1[h]));
    }
}

/* Columns [k, k + 64) of axpys_* for up to four outputs (masked past n when tail), held in
 * registers across the rows (axpy_*_512 loads and stores them per row): one fma per element and
 * row in row order, as axpy_*_512. */
INLINE AVX512 void axpys_512_cols(float *y, const int ny, const float *c, size_t ldc, const void *b, size_t ldb,
                                  int n_rows, int n, int k, const int tail, const int bf16) {
    __mmask16 m[4];
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) m[j] = tail ? cols16_512(k + 16 * j, n) : 0xFFFF;
#pragma GCC unroll 4
    for (int h = 0; h < ny; h++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[h][j] = _mm512_maskz_loadu_ps(m[j], y + (size_t)h * n + k + 16 * j);
    for (int i = 0; i < n_rows; i++) {
        const void *row = row_at(b, ldb, i, bf16);
        __m512 w[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) w[j] = row16_512(row, k + 16 * j, m[j], bf16);
#pragma GCC unroll 4
        for (int h = 0; h < ny; h++) {
            const __m512 ch = _mm512_set1_ps(c[h * ldc + i]);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[h][j] = _mm512_fmadd_ps(ch, w[j], acc[h][j]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < ny; h++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) _mm512_mask_storeu_ps(y + (size_t)h * n + k + 16 * j, m[j], acc[h][j]);
}

INLINE AVX512 void axpys_512_group(float *y, const int ny, const float *c, size_t ldc, const void *b,
                                   size_t ldb, int n_rows, int n, const int bf16) {
    int k = 0;
    for (; k + 64 <= n; k += 64) axpys_512_cols(y, ny, c, ldc, b, ldb, n_rows, n, k, 0, bf16);
    if (k < n) axpys_512_cols(y, ny, c, ldc, b, ldb, n_rows, n, k, 1, bf16);
}

GROUPED_LOOPS(AVX512, 512)

static AVX512 void rmsnorm_512(float *y, const float *x, const float *w1p, int n, float eps) {
    float ss = dot_f32_512(x, x, n);
    __m512 inv = _mm512_set1_ps(1.0f / sqrtf(ss / (float)n + eps));
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv),
                                 _mm512_maskz_loadu_ps(m, w1p + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

static AVX512 void gelu_tanh_mul_512(float *out, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        __m512 v = _mm512_mul_ps(gelu_512(_mm512_maskz_loadu_ps(m, gate + i)),
                                 _mm512_maskz_loadu_ps(m, up + i));
        _mm512_mask_storeu_ps(out + i, m, v);
    }
}

static AVX512 void softmax_512(float *x, int n) {
    __m512 ninf = _mm512_set1_ps(-INFINITY), vmax = ninf;
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(ninf, m, x + i));
    }
    float max = _mm512_reduce_max_ps(vmax);
    if (max == -INFINITY) { /* nothing visible: as the reference */
        softmax_nothing_visible(x, n);
        return;
    }
    __m512 vm = _mm512_set1_ps(max), sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        __m512 e = exp_512(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, m, x + i), vm));
        _mm512_mask_storeu_ps(x + i, m, e);
        sum = _mm512_add_ps(sum, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
}

/* The exps are summed in float over blocks of 256 values (each lane adds 8, the two halves then
 * one), and the block sums in double: a float sum's error stays ~1e-7 relative, at a quarter of
 * the conversions. */
static AVX512 double log_sum_exp_512(const float *x, int n) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 vmax = ninf;
    __mmask16 bad = 0;
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        const __m512 v = _mm512_mask_loadu_ps(ninf, m, x + i);
        vmax = _mm512_max_ps(vmax, v);
        bad |= _mm512_mask_fpclass_ps_mask(m, v, 0x99); /* NaN, +inf, -inf */
    }
    if (bad) return NAN;
    const float max = _mm512_reduce_max_ps(vmax);
    const __m512 vm = _mm512_set1_ps(max);
    __m512d sum = _mm512_setzero_pd();
    for (int b = 0; b < n; b += 256) {
        const int end = n - b < 256 ? n : b + 256;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        for (int i = b; i < end; i += 32) { /* masked lanes: exp(-inf) = 0 */
            const int r = end - i;
            s0 = _mm512_add_ps(s0, exp_512(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, mask16_512(r < 16 ? r : 16), x + i), vm)));
            if (r > 16)
                s1 = _mm512_add_ps(s1, exp_512(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, mask16_512(r - 16 < 16 ? r - 16 : 16), x + i + 16), vm)));
        }
        const __m512 s = _mm512_add_ps(s0, s1);
        sum = _mm512_add_pd(sum, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(s)),
                                               _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)))));
    }
    return max + log(_mm512_reduce_add_pd(sum));
}

static AVX512 void to_bf16_512(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i += 16) { /* integer RNE, as g3_f32_to_bf16 (see to_bf16_lanes_avx2) */
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, src + i));
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i rounded = _mm512_srli_epi32(
            _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
        __mmask16 is_nan = _mm512_cmpgt_epi32_mask(
            _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
        __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
        __m512i h = _mm512_mask_blend_epi32(is_nan, rounded, quiet);
        _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(h));
    }
}

#define KERNELS_512_COMMON                                                                     \
    .isa = G3_ISA_AVX512, .matmul_f32 = matmul_f32_512, .rmsnorm = rmsnorm_512,                 \
    .gelu_tanh_mul = gelu_tanh_mul_512, .softmax = softmax_512, .log_sum_exp = log_sum_exp_512, \
    .dot_f32 = dot_f32_512,                                                                     \
    .dot_bf16 = dot_bf16_512, .axpy_f32 = axpy_f32_512, .axpy_bf16 = axpy_bf16_512,             \
    .dots_f32 = dots_f32_512, .dots_bf16 = dots_bf16_512, .axpys_f32 = axpys_f32_512,              \
    .axpys_bf16 = axpys_bf16_512, .to_bf16 = to_bf16_512

static const g3_kernels kernels_avx512 = {
    .name = "avx512",
    .matmul_bf16 = matmul_bf16w_512,
    KERNELS_512_COMMON,
};

static const g3_kernels kernels_avx512bf16 = {
    .name = "avx512bf16",
    .matmul_bf16 = matmul_dpbf16_512,
    KERNELS_512_COMMON,
};

static const g3_kernels kernels_amx_bf16 = {
    .name = "amx-bf16",
    .matmul_bf16 = matmul_amx_bf16,
    KERNELS_512_COMMON,
};

/* The amx-bf16 table's needs: AVX512-BF16 (its edges) and the BF16 tiles. */
static int amx_bf16(const g3_cpu *f) { return f->avx512_bf16 && (f->amx & G3_AMX_BF16); }

#endif /* KERNELS_X86 */

/* ==== log-softmax normaliser in strips (any table) ========================================== */

/* Running merge in strip order: max and sum of exp(lse - max), the sum rescaled when the max
 * grows. Both entry points go through it, so they agree bit for bit. */
typedef struct lse_merge {
    double max, sum;
    int nan;
} lse_merge;

static void lse_merge_add(lse_merge *m, double lse) {
    if (isnan(lse)) m->nan = 1;
    else if (lse > m->max) {
        m->sum = m->sum * exp(m->max - lse) + 1.0;
        m->max = lse;
    } else {
        m->sum += exp(lse - m->max);
    }
}

static double lse_merge_result(const lse_merge *m) { return m->nan ? NAN : m->max + log(m->sum); }

double g3_lse_merge(const double *strip_lse, int n_strips) {
    lse_merge m = {-INFINITY, 0.0, 0};
    for (int i = 0; i < n_strips; i++) lse_merge_add(&m, strip_lse[i]);
    return lse_merge_result(&m);
}

double g3_log_sum_exp_strips(const g3_kernels *k, const float *x, int n) {
    lse_merge m = {-INFINITY, 0.0, 0};
    for (int r0 = 0; r0 < n; r0 += G3_LSE_STRIP)
        lse_merge_add(&m, k->log_sum_exp(x + r0, n - r0 < G3_LSE_STRIP ? n - r0 : G3_LSE_STRIP));
    return lse_merge_result(&m);
}

/* ==== dispatch ============================================================================ */

/* On other CPUs only the scalar table exists: the x86 levels give NULL ("not supported"). */
const g3_kernels *g3_kernels_get(g3_isa isa) {
    if (isa == G3_ISA_SCALAR) return &kernels_scalar;
#if KERNELS_X86
    const g3_cpu *f = g3_cpu_get();
    switch (isa) {
    case G3_ISA_AVX2: return f->avx2 ? &kernels_avx2 : NULL;
    case G3_ISA_AVX512:
        if (!f->avx512) return NULL;
        return amx_bf16(f) ? &kernels_amx_bf16 : f->avx512_bf16 ? &kernels_avx512bf16 : &kernels_avx512;
    default: return NULL;
    }
#else
    return NULL;
#endif
}

int g3_kernels_all(const g3_kernels **out, int max) {
    const g3_kernels *all[5];
    int n = 0;
    all[n++] = &kernels_scalar;
#if KERNELS_X86
    const g3_cpu *f = g3_cpu_get();
    if (f->avx2) all[n++] = &kernels_avx2;
    if (f->avx512) all[n++] = &kernels_avx512;
    if (f->avx512_bf16) all[n++] = &kernels_avx512bf16;
    if (amx_bf16(f)) all[n++] = &kernels_amx_bf16;
#endif
    for (int i = 0; i < n && i < max; i++) out[i] = all[i];
    return n < max ? n : max;
}
