/* quant-rows.c - g3_quantize_row, eight lanes at a time (see quant-rows.h). */
#include "quant-rows.h"

#include <math.h>
#include <string.h>

#include "kernels.h"
#include "util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define G3_X86 1
#define AVX2 __attribute__((target("avx2")))

/* max over the 8 lanes */
AVX2 static float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

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
AVX2 static inline void q8_0_block(const __m256 v[4], g3_block_q8_0 *y) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    const float amax = hmax(m);
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
AVX2 static inline void q4_0_block(const __m256 v[4], g3_block_q4_0 *y) {
    const __m256 sign = _mm256_set1_ps(-0.0f), bias = _mm256_set1_ps(8.5f);
    const __m256i fifteen = _mm256_set1_epi32(15), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
    const float amax = hmax(m);
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

AVX2 static void quantize_avx2(g3_wtype t, const void *src, int src_bf16, void *row, int64_t n) {
    for (int64_t b = 0; b < n / G3_QK; b++) {
        __m256 v[4];
        for (int i = 0; i < 4; i++) v[i] = load8(src, b * G3_QK + 8 * i, src_bf16);
        if (t == G3_WTYPE_Q8_0) q8_0_block(v, (g3_block_q8_0 *)row + b);
        else q4_0_block(v, (g3_block_q4_0 *)row + b);
    }
}

#endif /* x86 */

/* Without AVX2: the reference itself, a block at a time from a widened copy. */
static void quantize_ref(g3_wtype t, const void *src, int src_bf16, void *row, int64_t n) {
    if (!src_bf16) {
        g3_quantize_row(t, src, row, n);
        return;
    }
    const size_t block = g3_wtype_row_bytes(t, G3_QK);
    for (int64_t b = 0; b < n / G3_QK; b++) {
        float x[G3_QK];
        for (int j = 0; j < G3_QK; j++) {
            uint16_t h;
            memcpy(&h, (const uint16_t *)src + b * G3_QK + j, sizeof h);
            x[j] = g3_bf16_to_f32(h);
        }
        g3_quantize_row(t, x, (char *)row + (size_t)b * block, G3_QK);
    }
}

g3_quantize_row_fn g3_quantize_row_best(void) {
#ifdef G3_X86
    if (g3_kernels_get(G3_ISA_AVX2)) return quantize_avx2;
#endif
    return quantize_ref;
}

g3_quantize_row_fn g3_quantize_row_reference(void) { return quantize_ref; }
