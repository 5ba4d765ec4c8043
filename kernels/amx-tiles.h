/* kernels/amx-tiles.h - what the two AMX kernel files (amx-bf16.inc, quant-amx.inc) share: loading a
 * tile configuration, the per-thread scratch their batched paths (and AVX2's) pack into, and a 16 x 16 fp32
 * transpose (their C tiles hold outputs as rows x tokens, Y is tokens x rows). Include only
 * inside an x86 section, after <immintrin.h>. */
#ifndef G3_AMX_TILES_H
#define G3_AMX_TILES_H

/* Tiles 0..7 of palette 1, each rows[i] x colsb[i] bytes. */
static inline __attribute__((always_inline, target("amx-tile"))) void
g3_amx_configure(const uint8_t rows[8], const uint16_t colsb[8]) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.rows[i] = rows[i], cfg.colsb[i] = colsb[i];
    __asm__ volatile("" ::: "memory"); /* the intrinsic names only 8 bytes of cfg as input */
    _tile_loadconfig(&cfg);
}

/* One per thread (defined in kernels/avx2.c): a matmul call packs its activations (and, quantized,
 * unpacks its weight rows) here; calls never nest, so every kernel file shares it. */
enum { G3_MATMUL_SCRATCH_BYTES = 2 << 20 };
extern _Thread_local _Alignas(64) unsigned char g3_matmul_scratch[G3_MATMUL_SCRATCH_BYTES];

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
