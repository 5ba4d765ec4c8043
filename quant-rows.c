/* quant-rows.c - g3_quantize_row, eight lanes or sixteen blocks at a time (see quant-rows.h). */
#include "quant-rows.h"

#include <math.h>
#include <string.h>

#include "kernels.h"
#include "util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define G3_X86 1
#define AVX2 __attribute__((target("avx2")))

/* The largest |x| of a block's 32 values, as the bits of a float: the maximum of the magnitudes'
 * bits as integers, which orders finite magnitudes as floats do and puts an infinity or a NaN
 * (exponent all ones) above every finite one, so one comparison tells a block that cannot be
 * quantized. */
AVX2 static uint32_t amax_bits(const __m256 v[4]) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256i m = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) m = _mm256_max_epi32(m, _mm256_castps_si256(_mm256_andnot_ps(sign, v[i])));
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
    return (uint32_t)_mm_cvtsi128_si32(h);
}
#define NONFINITE_BITS 0x7f800000u /* |x| bits at or above: an infinity or a NaN */

/* 8 source values at src[at..at+8) as floats: fp32, or bf16 widened (exact). */
AVX2 static inline __m256 load8(const void *src, int64_t at, int bf16) {
    if (bf16) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)src + at));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    return _mm256_loadu_ps((const float *)src + at);
}

/* Q8_0: d = amax / 127, id = 1 / d, q = roundf(x * id) (half away from zero). roundf(p) is
 * trunc(p) plus sign(p) where |p - trunc(p)| >= 0.5; p - trunc(p) is exact. */
AVX2 static inline void q8_0_block(const __m256 v[4], float amax, g3_block_q8_0 *y) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = g3_f32_to_f16(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; i++) {
        __m256 p = _mm256_mul_ps(v[i], vid);
        __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(p, t)), half, _CMP_GE_OQ);
        __m256 step = _mm256_and_ps(away, _mm256_or_ps(one, _mm256_and_ps(p, sign)));
        /* the low byte of the int32, as the reference's (int8_t) cast keeps it: identical even
         * where id overflows (tiny subnormal blocks) and the conversion gives 0x80000000 */
        q[i] = _mm256_and_si256(_mm256_cvttps_epi32(_mm256_add_ps(t, step)), _mm256_set1_epi32(0xff));
    }
    __m256i a = _mm256_packus_epi32(q[0], q[1]), c = _mm256_packus_epi32(q[2], q[3]);
    __m256i e = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, c), order);
    _mm256_storeu_si256((__m256i *)(void *)y->qs, e);
}

/* Q4_0: the first element of largest magnitude (its sign kept) gives d = extreme / -8;
 * q = min(15, trunc(x * id + 8.5)). */
AVX2 static inline void q4_0_block(const __m256 v[4], float amax, g3_block_q4_0 *y) {
    const __m256 sign = _mm256_set1_ps(-0.0f), bias = _mm256_set1_ps(8.5f);
    const __m256i fifteen = _mm256_set1_epi32(15), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    float extreme = 0.0f; /* the reference's starting value, kept when every |x| is 0 */
    if (amax > 0.0f) {
        const __m256 va = _mm256_set1_ps(amax);
        uint32_t hits = 0;
        for (int i = 0; i < 4; i++)
            hits |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v[i]), va, _CMP_EQ_OQ)) << (8 * i);
        float lanes[8];
        int first = __builtin_ctz(hits);
        _mm256_storeu_ps(lanes, v[first / 8]);
        extreme = lanes[first % 8];
    }
    const float d = extreme / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = g3_f32_to_f16(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; i++)
        q[i] = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v[i], vid), bias)), fifteen);
    __m256i w0 = _mm256_or_si256(q[0], _mm256_slli_epi32(q[2], 4));
    __m256i w1 = _mm256_or_si256(q[1], _mm256_slli_epi32(q[3], 4));
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(w0, w1), _mm256_setzero_si256());
    p = _mm256_permutevar8x32_epi32(p, order);
    _mm_storeu_si128((__m128i *)(void *)y->qs, _mm256_castsi256_si128(p));
}

static int quantize_ref(g3_wtype t, const void *src, int src_bf16, void *row, int64_t n);

/* The types quantized here eight lanes or sixteen blocks at a time; the others take the
 * reference (quantize_ref). */
static int has_fast_path(g3_wtype t) { return t == GEMMA3_WEIGHTS_Q8_0 || t == GEMMA3_WEIGHTS_Q4_0; }

AVX2 static int quantize_avx2(g3_wtype t, const void *src, int src_bf16, void *row, int64_t n) {
    if (!has_fast_path(t)) return quantize_ref(t, src, src_bf16, row, n);
    for (int64_t b = 0; b < n / G3_QK; b++) {
        __m256 v[4];
        for (int i = 0; i < 4; i++) v[i] = load8(src, b * G3_QK + 8 * i, src_bf16);
        uint32_t bits = amax_bits(v);
        if (bits >= NONFINITE_BITS) return 0;
        float amax;
        memcpy(&amax, &bits, sizeof amax);
        if (t == GEMMA3_WEIGHTS_Q8_0) q8_0_block(v, amax, (g3_block_q8_0 *)row + b);
        else q4_0_block(v, amax, (g3_block_q4_0 *)row + b);
    }
    return 1;
}

/* ---- AVX-512: sixteen blocks at a time ----------------------------------------------------
 * The same IEEE operations as above, but each block's scalars (amax, d, 1/d, the fp16 scale)
 * are computed for sixteen blocks in the lanes of one vector: one division and one conversion
 * for sixteen blocks instead of a chain of scalar steps per block. */
#define AVX512 __attribute__((target("avx512f")))
#define GROUP 16 /* blocks per group */

/* Block k's 32 values as floats: elements 0..15 in *lo, 16..31 in *hi. */
AVX512 static inline void load_block(const void *src, int64_t at, int bf16, __m512 *lo, __m512 *hi) {
    if (bf16) {
        const uint16_t *s = (const uint16_t *)src + at;
        __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)s));
        __m512i b = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(s + 16)));
        *lo = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
        *hi = _mm512_castsi512_ps(_mm512_slli_epi32(b, 16));
    } else {
        *lo = _mm512_loadu_ps((const float *)src + at);
        *hi = _mm512_loadu_ps((const float *)src + at + 16);
    }
}

AVX512 static inline __m512i magnitude_bits(__m512 x) {
    return _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
}

/* m[k] = the largest of a[k]'s 16 lanes, for 16 vectors: a tree of halving steps, each putting
 * two vectors' halves side by side (four steps, 15 maxima), then lane k made block k's. */
AVX512 static inline __m512i lane_maxima(const __m512i a[GROUP]) {
    __m512i c[8], d[4], e[2];
    for (int i = 0; i < 8; i++) /* lanes 0-7: a[2i]'s, 8-15: a[2i + 1]'s */
        c[i] = _mm512_max_epi32(_mm512_shuffle_i32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_i32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 4; i++) /* 128-bit lane q: block 4i + q's four */
        d[i] = _mm512_max_epi32(_mm512_shuffle_i32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int i = 0; i < 2; i++) /* lane q: blocks 8i + q and 8i + 4 + q, two each */
        e[i] = _mm512_max_epi32(_mm512_unpacklo_epi64(d[2 * i], d[2 * i + 1]),
                                _mm512_unpackhi_epi64(d[2 * i], d[2 * i + 1]));
    __m512 e0 = _mm512_castsi512_ps(e[0]), e1 = _mm512_castsi512_ps(e[1]);
    __m512i f = _mm512_max_epi32(_mm512_castps_si512(_mm512_shuffle_ps(e0, e1, _MM_SHUFFLE(2, 0, 2, 0))),
                                 _mm512_castps_si512(_mm512_shuffle_ps(e0, e1, _MM_SHUFFLE(3, 1, 3, 1))));
    /* lane 4q + j holds block 4j + q */
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), f);
}

/* The sixteen blocks' fp16 scales, into their blocks (stride bytes apart). */
AVX512 static inline void store_scales(__m512 d, uint8_t *row, size_t stride) {
    uint16_t h[GROUP];
    _mm256_storeu_si256((__m256i *)(void *)h, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (int k = 0; k < GROUP; k++) memcpy(row + (size_t)k * stride, &h[k], sizeof h[k]);
}

/* 1 / d where d != 0, else 0 */
AVX512 static inline __m512 inverse_or_zero(__m512 d) {
    __mmask16 nz = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    return _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), d);
}

/* Q8_0 of 16 values (q8_0_block's steps): the int32 whose low byte is the stored one. */
AVX512 static inline __m512i q8_0_half(__m512 x, __m512 id) {
    __m512 p = _mm512_mul_ps(x, id);
    __m512 t = _mm512_roundscale_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 frac = _mm512_castsi512_ps(magnitude_bits(_mm512_sub_ps(p, t)));
    __mmask16 away = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512i sign = _mm512_and_si512(_mm512_castps_si512(p), _mm512_set1_epi32((int)0x80000000u));
    __m512 step = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3f800000))); /* +-1 */
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, away, t, step));
}

/* Q4_0 of 16 values (q4_0_block's steps): each nibble in an int32. */
AVX512 static inline __m512i q4_0_half(__m512 x, __m512 id) {
    __m512 p = _mm512_add_ps(_mm512_mul_ps(x, id), _mm512_set1_ps(8.5f));
    return _mm512_min_epi32(_mm512_cvttps_epi32(p), _mm512_set1_epi32(15));
}

/* Q4_0's extreme of each block: the first value of largest magnitude, with its sign (+0 when all
 * are zero, as the reference's starting value). */
AVX512 static inline __m512 q4_0_extremes(const void *src, int64_t at, int bf16, __m512i amax) {
    uint32_t bits[GROUP], out[GROUP];
    _mm512_storeu_si512(bits, amax);
    for (int k = 0; k < GROUP; k++) {
        __m512 lo, hi;
        load_block(src, at + (int64_t)k * G3_QK, bf16, &lo, &hi);
        __m512i a = _mm512_set1_epi32((int)bits[k]), zero = _mm512_setzero_si512();
        uint32_t hit = (uint32_t)_mm512_cmpeq_epi32_mask(magnitude_bits(lo), a) |
                       (uint32_t)_mm512_cmpeq_epi32_mask(magnitude_bits(hi), a) << 16;
        uint32_t neg = (uint32_t)_mm512_cmplt_epi32_mask(_mm512_castps_si512(lo), zero) |
                       (uint32_t)_mm512_cmplt_epi32_mask(_mm512_castps_si512(hi), zero) << 16;
        out[k] = bits[k] == 0 ? 0 : bits[k] | (neg >> __builtin_ctz(hit) & 1u) << 31;
    }
    return _mm512_castsi512_ps(_mm512_loadu_si512(out));
}

AVX512 static int quantize_avx512(g3_wtype t, const void *src, int src_bf16, void *row, int64_t n) {
    if (!has_fast_path(t)) return quantize_ref(t, src, src_bf16, row, n);
    const int64_t n_blocks = n / G3_QK, n_full = n_blocks / GROUP * GROUP;
    const size_t stride = t == GEMMA3_WEIGHTS_Q8_0 ? sizeof(g3_block_q8_0) : sizeof(g3_block_q4_0);
    for (int64_t b0 = 0; b0 < n_full; b0 += GROUP) {
        const int64_t at = b0 * G3_QK;
        uint8_t *y = (uint8_t *)row + (size_t)b0 * stride;
        __m512i a[GROUP];
        for (int k = 0; k < GROUP; k++) {
            __m512 lo, hi;
            load_block(src, at + (int64_t)k * G3_QK, src_bf16, &lo, &hi);
            a[k] = _mm512_max_epi32(magnitude_bits(lo), magnitude_bits(hi));
        }
        __m512i amax = lane_maxima(a);
        if (_mm512_cmpge_epi32_mask(amax, _mm512_set1_epi32((int)NONFINITE_BITS))) return 0;
        __m512 d = t == GEMMA3_WEIGHTS_Q8_0
                       ? _mm512_div_ps(_mm512_castsi512_ps(amax), _mm512_set1_ps(127.0f))
                       : _mm512_div_ps(q4_0_extremes(src, at, src_bf16, amax), _mm512_set1_ps(-8.0f));
        __m512 id = inverse_or_zero(d);
        store_scales(d, y, stride);
        for (int k = 0; k < GROUP; k++) {
            __m512 lo, hi;
            load_block(src, at + (int64_t)k * G3_QK, src_bf16, &lo, &hi);
            __m512 idk = _mm512_permutexvar_ps(_mm512_set1_epi32(k), id);
            uint8_t *qs = y + (size_t)k * stride + sizeof(uint16_t);
            if (t == GEMMA3_WEIGHTS_Q8_0) { /* the low byte of each, as the reference's (int8_t) cast */
                _mm_storeu_si128((__m128i *)(void *)qs, _mm512_cvtepi32_epi8(q8_0_half(lo, idk)));
                _mm_storeu_si128((__m128i *)(void *)(qs + 16), _mm512_cvtepi32_epi8(q8_0_half(hi, idk)));
            } else {
                __m512i q = _mm512_or_si512(q4_0_half(lo, idk), _mm512_slli_epi32(q4_0_half(hi, idk), 4));
                _mm_storeu_si128((__m128i *)(void *)qs, _mm512_cvtepi32_epi8(q));
            }
        }
    }
    if (n_full == n_blocks) return 1;
    const size_t done = (size_t)n_full * G3_QK * (src_bf16 ? sizeof(uint16_t) : sizeof(float));
    return quantize_avx2(t, (const uint8_t *)src + done, src_bf16, (uint8_t *)row + (size_t)n_full * stride,
                         n - n_full * G3_QK);
}

#endif /* x86 */

/* Without AVX2, and for the K-quants everywhere: the reference itself, a block at a time from a
 * widened copy. */
static int quantize_ref(g3_wtype t, const void *src, int src_bf16, void *row, int64_t n) {
    if (!src_bf16) {
        if (g3_first_nonfinite(src, (size_t)n) >= 0) return 0;
        g3_quantize_row(t, src, row, n);
        return 1;
    }
    const int qk = g3_wtype_get((int)t)->block; /* at most 256 */
    const size_t block = g3_wtype_row_bytes(t, qk);
    for (int64_t b = 0; b < n / qk; b++) {
        float x[256];
        for (int j = 0; j < qk; j++) {
            uint16_t h;
            memcpy(&h, (const uint16_t *)src + b * qk + j, sizeof h);
            x[j] = g3_bf16_to_f32(h);
        }
        if (g3_first_nonfinite(x, (size_t)qk) >= 0) return 0;
        g3_quantize_row(t, x, (char *)row + (size_t)b * block, qk);
    }
    return 1;
}

g3_quantize_row_fn g3_quantize_row_get(g3_isa isa) {
    if (isa == G3_ISA_SCALAR) return quantize_ref;
#ifdef G3_X86
    if (!g3_isa_supported(isa)) return NULL;
    return isa == G3_ISA_AVX512 ? quantize_avx512 : quantize_avx2;
#else
    return NULL;
#endif
}

g3_quantize_row_fn g3_quantize_row_best(void) {
    const int isa = g3_isa_choose(NULL);
    return g3_quantize_row_get(isa < 0 ? G3_ISA_SCALAR : (g3_isa)isa);
}
