/* kernels/quant-avx2.c - the AVX2 quantized tables: "avx2" (AVX2+FMA+F16C) and "avx2vnni"
 * (+AVX-VNNI), one body (kernels/quant-avx2.inc) compiled once per variant under Q_FN /
 * Q_TARGET; and its x8 kernels for the other x86 tables. Off x86 this file is empty. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kquant.h"
#include "kernels/quant-impl.h"
#include "kernels/simd.h"

/* Every SIMD function carries its own target attribute (one portable build, no -march), and the
 * helpers are always_inline (INLINE, kernels/simd.h) so they take on their caller's. The .inc
 * is one set of kernels, included once per variant; its header comment states the summation
 * order it fixes. */
/* decode's software prefetch distance in rows (4..32 measured alike; see quant-avx512.inc) */
#define PF_ROWS 16
/* x8 decode's prefetch distance in bytes (32 Q4_0 / 17 Q8_0 group-blocks; see quant-avx2.inc).
 * 576 left decode waiting on memory: at 2 threads on Zen 4, 4b Q4_0 went 23.8 -> 31.2 tok/s and
 * 1b Q8_0 50 -> 64 with 4608; 1152 and 2304 were in between, 9216 and 18432 no better. */
#define X8_AHEAD 4608

#define Q_TARGET __attribute__((target("avx2,fma,f16c")))
#define Q_FN(name) name##_avx2
#define Q_NAME "avx2"
#define Q_VNNI 0
#include "kernels/quant-avx2.inc"
#undef Q_TARGET
#undef Q_FN
#undef Q_NAME
#undef Q_VNNI

#define Q_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define Q_FN(name) name##_avx2vnni
#define Q_NAME "avx2vnni"
#define Q_VNNI 1
#include "kernels/quant-avx2.inc"
#undef Q_TARGET
#undef Q_FN
#undef Q_NAME
#undef Q_VNNI

/* The x8 kernels of the "avx2" table, for kernels/quant-avx512.c: the AMX table's, and the
 * AVX-512 tables' for decode and for the groups their 16-row tiles leave (the x8 results are
 * the same bits in every table). */
#define AVX2_Q __attribute__((target("avx2,fma,f16c")))
AVX2_Q void g3_matmul_q8_0_x8_avx2(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                                   int n_in, int r0, int r1) {
    matmul_q8_0_x8_avx2(Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

AVX2_Q void g3_matmul_q4_0_x8_avx2(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                                   int n_in, int r0, int r1) {
    matmul_q4_0_x8_avx2(Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

AVX2_Q void g3_matmul_q5_0_x8_avx2(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                                   int n_in, int r0, int r1) {
    matmul_q5_0_x8_avx2(Y, ldy, W, Xq, n_tok, n_in, r0, r1);
}

AVX2_Q void g3_matmul_q_f32_x8_avx2(g3_wtype wtype, float *Y, size_t ldy, const void *W,
                                    const float *X, size_t ldx, int n_tok, int n_in, int r0, int r1) {
    matmul_q_f32_x8_avx2(wtype, Y, ldy, W, X, ldx, n_tok, n_in, r0, r1);
}

#endif
