/* transpose16-512.h - a 16 x 16 fp32 transpose in AVX-512 registers, for the AMX kernels
 * (kernels-amx.inc, quant-amx.inc), whose C tiles hold outputs as rows x tokens while Y is
 * tokens x rows. Include only inside an x86 section, after <immintrin.h>. */
#ifndef G3_TRANSPOSE16_512_H
#define G3_TRANSPOSE16_512_H

/* v[m] lane n -> v[n] lane m. */
static inline __attribute__((always_inline, target("avx512f"))) void g3_transpose16_512(__m512 v[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        b[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[4 * i]), _mm512_castps_pd(a[4 * i + 2])));
        b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[4 * i]), _mm512_castps_pd(a[4 * i + 2])));
        b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[4 * i + 1]), _mm512_castps_pd(a[4 * i + 3])));
        b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[4 * i + 1]), _mm512_castps_pd(a[4 * i + 3])));
    }
    /* b[4i + q] holds column q (+4, +8, +12 per 128-bit lane) of rows 4i..4i+3 */
    for (int q = 0; q < 4; q++) {
        __m512 lo01 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0x44), hi01 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0xEE);
        __m512 lo23 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0x44), hi23 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0xEE);
        v[q] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
        v[q + 4] = _mm512_shuffle_f32x4(lo01, lo23, 0xDD);
        v[q + 8] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
        v[q + 12] = _mm512_shuffle_f32x4(hi01, hi23, 0xDD);
    }
}

#endif
