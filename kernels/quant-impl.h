/* kernels/quant-impl.h - what quant.c and the quantized kernel files of kernels/ share (private
 * to them): the quantized activation row's parts, one x8 block back in the row layout, and the
 * tables each file defines for the dispatch in kernels.c. */
#ifndef G3_KERNELS_QUANT_IMPL_H
#define G3_KERNELS_QUANT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"
#include "quant.h"

/* A quantized activation row of nb = n_in / 32 blocks, struct-of-arrays so that SIMD loads the
 * int8 values of consecutive blocks in one go:
 *   int8_t  q[n_in]     block b is q[32b .. 32b+32), x ~ d[b] * q
 *   float   d[nb]       the block scales
 *   int32_t c4[nb]      -8 * sum of the block's q: Q4_0's "q - 8" offset folded into an integer
 *                       (sum(w4 * a) - 8 * sum(a) is exact), also 1/16 of the -128 * sum that
 *                       the VNNI Q8_0 path needs when it biases signed weights to unsigned.
 * 40 bytes per block; offsets are multiples of 4, rows are not aligned (loads are unaligned). */
typedef struct act_row {
    const int8_t *q;
    const float *d;
    const int32_t *c4;
} act_row;

/* always_inline: called per block step inside the target-attributed kernels */
static inline __attribute__((always_inline)) act_row act_row_at(const void *Xq, int n_in, int t) {
    const char *p = (const char *)Xq + (size_t)t * g3_act_row_bytes(n_in);
    const int nb = n_in / G3_QK;
    return (act_row){.q = (const int8_t *)p,
                     .d = (const float *)(const void *)(p + n_in),
                     .c4 = (const int32_t *)(const void *)(p + n_in + 4 * nb)};
}

/* The parts of row dst (g3_act_row_bytes(n) bytes at dst) to write. */
static inline void act_row_out(void *dst, int n, int8_t **q, float **d, int32_t **c4) {
    char *p = dst;
    *q = (int8_t *)p;
    *d = (float *)(void *)(p + n);
    *c4 = (int32_t *)(void *)(p + n + 4 * (n / G3_QK));
}

/* Blocks whose largest magnitude is below this quantize to zeros: 127 / amax would overflow
 * near 2^-126, and such values vanish next to any real activation anyway. Also false for NaN. */
#define ACT_TINY 0x1p-100f

/* One block in the row layout's bytes, aligned for either block type. */
union g3_x8_block {
    g3_block_q8_0 q8_0; /* the larger */
    g3_block_q4_0 q4_0;
    g3_block_q5_0 q5_0;
    uint8_t bytes[sizeof(g3_block_q8_0)];
};

/* Bytes of one block of x8 type t (Q8_0, Q4_0, Q5_0), a constant where t is one: the kernels'
 * group-block steps stay immediates (g3_wtype_row_bytes is a call). */
static inline __attribute__((always_inline)) size_t g3_x8_type_block_bytes(g3_wtype t) {
    return t == GEMMA3_WEIGHTS_Q8_0 ? sizeof(g3_block_q8_0)
           : t == GEMMA3_WEIGHTS_Q5_0 ? sizeof(g3_block_q5_0)
                                      : sizeof(g3_block_q4_0);
}

/* Block b of row r of an x8 matrix of nb blocks per row, back in its row-layout bytes (out:
 * the type's block_bytes). */
void g3_x8_block(g3_wtype t, const uint8_t *x8, int64_t nb, int64_t r, int64_t b, uint8_t *out);

/* The 4- and 5-bit types with their own SIMD kernels (kernels/quant-avx2.inc): the kinds those
 * kernels are compiled for. */
enum { Q_LB_Q4_1 = 0, Q_LB_Q5_0 = 1, Q_LB_Q5_1 = 2 };

/* The tables: quant.c's scalar reference, and on x86 kernels/quant-avx2.c ("avx2", "avx2vnni")
 * and kernels/quant-avx512.c ("avx512", "avx512vnni", "amx"). */
extern const g3_quant_kernels g3_quant_scalar;
extern const g3_quant_kernels g3_quant_avx2, g3_quant_avx2vnni;
extern const g3_quant_kernels g3_quant_avx512, g3_quant_avx512vnni, g3_quant_amx;
/* 1 if the CPU runs the "amx" table (AMX-INT8 with the tile permission, and GFNI). */
int g3_quant_amx_usable(const g3_cpu *c);

/* The AVX2 x8 kernels (their bits are the scalar x8 reference's), from kernels/quant-avx2.c:
 * the AMX table's, and those the AVX-512 tables' x8 kernels hand decode and odd groups to. */
void g3_matmul_q8_0_x8_avx2(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok, int n_in,
                            int r0, int r1);
void g3_matmul_q4_0_x8_avx2(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok, int n_in,
                            int r0, int r1);
void g3_matmul_q5_0_x8_avx2(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok, int n_in,
                            int r0, int r1);
void g3_matmul_q_f32_x8_avx2(g3_wtype wtype, float *Y, size_t ldy, const void *W, const float *X,
                             size_t ldx, int n_tok, int n_in, int r0, int r1);

#endif
