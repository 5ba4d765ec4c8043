/* quant.h - block-quantized weights: llama.cpp's Q8_0 and Q4_0 formats, their reference
 * quantizers, and the matmul kernels over them. Knows nothing of Gemma.
 *
 * Formats (byte-identical to ggml's, so files and numbers compare with llama.cpp):
 *   Q8_0: 32 weights per block = fp16 scale d, then 32 int8 q;      w = d * q       (34 bytes)
 *   Q4_0: 32 weights per block = fp16 scale d, then 16 bytes of 4-bit q, byte j holding element
 *         j in its low nibble and element j + 16 in its high nibble; w = d * (q - 8) (18 bytes)
 * A row of n weights (n a multiple of 32) is its n/32 blocks in order, with no padding.
 *
 * Quantized matmuls take their activations quantized too (the fast path: int8 dot products,
 * VNNI where present), in an internal "Q8 activation" row format (g3_act_row_bytes bytes: the int8
 * values, then a float scale and an integer correction per block of 32). Activation quantization
 * rounds the same way in every table (bit-identical), so tables differ only in the order floats
 * are summed. Every table keeps kernels.h's determinism contract: an output's bits depend only
 * on its inputs, never on n_tok, r0/r1 or the thread (decode and prefill agree bitwise). */
#ifndef G3_QUANT_H
#define G3_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "gemma3.h"
#include "kernels.h"

#define G3_QK 32 /* weights per block, both types */

/* The weight types are the public enum's (gemma3.h: GEMMA3_WEIGHTS_BF16, _Q8_0, ...), so a type
 * is declared once; its value indexes the type table (g3_wtype_get) and every kernel table's
 * matmul_q / matmul_q_x8. 0 (GEMMA3_WEIGHTS_AS_STORED) is no type: "whatever the file holds". */
typedef enum gemma3_weight_type g3_wtype;

typedef struct g3_block_q8_0 {
    uint16_t d;       /* fp16 scale */
    int8_t qs[G3_QK];
} g3_block_q8_0;

typedef struct g3_block_q4_0 {
    uint16_t d;       /* fp16 scale */
    uint8_t qs[G3_QK / 2];
} g3_block_q4_0;

/* The other legacy llama.cpp blocks: qs as Q4_0's (byte j: element j low, j + 16 high); qh bit j
 * the fifth bit of element j; m an fp16 minimum. Q4_1: w = d*q + m; Q5_0: w = d*(q - 16);
 * Q5_1: w = d*q + m. */
typedef struct g3_block_q4_1 {
    uint16_t d, m;
    uint8_t qs[G3_QK / 2];
} g3_block_q4_1;

typedef struct g3_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[G3_QK / 2];
} g3_block_q5_0;

typedef struct g3_block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[G3_QK / 2];
} g3_block_q5_1;

/* Everything type-specific, one row per type (quant.c's wtypes[]): after it, a new type is its
 * value in gemma3.h's enum, its row, and its kernels (entries in the kernel tables,
 * g3_quant_kernels below). */
typedef struct g3_wtype_traits {
    const char *name;       /* as users type it: "q8_0" */
    const char *name_upper; /* llama-bench's spelling: "Q8_0" */
    int block;              /* weights per block: G3_QK, or 1 for a plain type (BF16) */
    size_t block_bytes;     /* bytes per block (a plain type: per weight) */
    /* The reference row quantizer (llama.cpp's rounding), n a multiple of block; NULL for a
     * plain type, which nothing quantizes to. */
    void (*quantize_row)(const float *x, void *row, int64_t n);
    /* Back to float (exact: a block's scale times its integers; BF16 widened). */
    void (*dequantize_row)(const void *row, float *y, int64_t n);
    /* The check on load (--check-tensors): the 16 bits at each step of a row (a plain type's
     * elements; a block type's fp16 scales, every block's first two bytes) are NaN or infinite
     * when (bits & nonfinite_mask) == nonfinite_mask. */
    uint16_t nonfinite_mask;
    /* 1: the x8 layout exists for it (Q8_0, Q4_0, Q5_0: the AVX2 and AVX-512 tables' layout); a
     * matrix of a type without stays in the row layout whatever the repack asked for (each
     * matrix of a mix has its own). */
    int x8;
    /* In a GGUF: ggml's type id of its tensors (GGML_TYPE_*, gguf.h's G3_GGML_*), and llama.cpp's
     * general.file_type for a file whose matrices all have it (LLAMA_FTYPE_*). */
    uint32_t ggml_type, gguf_file_type;
    /* Where a block keeps its fp16 scales, for the load check: n_f16 of them at byte offsets
     * f16_at[] (0: one, the block's first two bytes). Q4_K / Q5_K: d and dmin; Q6_K: d, last. */
    int n_f16;
    uint16_t f16_at[2];
    /* 1: its kernels take Q8_K activation rows (g3_matmul_in.qk: per 256 values, as llama.cpp
     * feeds its K-quants), 0: the Q8 rows of blocks of 32 (g3_matmul_in.q) */
    int act_k;
} g3_wtype_traits;

/* The row of type t; NULL if t is no type. */
const g3_wtype_traits *g3_wtype_get(int t);
/* 1 for a block type (quantized: what g3_quantize_row writes), 0 otherwise (or no type). */
int g3_wtype_is_block(int t);
/* The type whose tensors have ggml type id ggml_type; -1 if none. */
int g3_wtype_from_ggml(uint32_t ggml_type);

/* "bf16", "q8_0", "q4_0"; llama-bench's spelling ("BF16", "Q8_0", "Q4_0") with _upper. */
const char *g3_wtype_name(g3_wtype t);
const char *g3_wtype_name_upper(g3_wtype t);
/* Parses a lower-case name; -1 if unknown. */
int g3_wtype_parse(const char *name);
/* The names of every type, or of the block types alone, in order, joined by ", ". */
const char *g3_wtype_list(int blocks_only);
/* Bytes of one row of n_in weights (n_in a multiple of the type's block for the block types). */
size_t g3_wtype_row_bytes(g3_wtype t, int64_t n_in);
/* 1 if block type t has x8-layout kernels (Q8_0, Q4_0, Q5_0); the others stay in rows. */
int g3_wtype_has_x8(g3_wtype t);
/* 1 if one of block type t's fp16 scales in the block at p is NaN or infinite. */
int g3_wtype_block_nonfinite(g3_wtype t, const void *block);

/* llama.cpp's reference quantizers (quantize_row_q8_0_ref / quantize_row_q4_0_ref rounding),
 * n a multiple of G3_QK. Byte-identical blocks for the same float input. */
void g3_quantize_row_q8_0(const float *x, g3_block_q8_0 *y, int64_t n);
void g3_quantize_row_q4_0(const float *x, g3_block_q4_0 *y, int64_t n);
/* Quantizes one row of n values into row (g3_wtype_row_bytes(t, n) bytes); t is a block type
 * (its row's quantize_row). */
void g3_quantize_row(g3_wtype t, const float *x, void *row, int64_t n);
/* Back to float: y[i] = d * q (Q8_0), d * (q - 8) (Q4_0), d * q + m (Q4_1, Q5_1), d * (q - 16)
 * (Q5_0). */
void g3_dequantize_row(g3_wtype t, const void *row, float *y, int64_t n);

/* The x8 layout: a matrix's rows taken 8 at a time (the last group padded with zero rows), each
 * group stored block by block. A group's block b holds the 8 rows' blocks b side by side: their
 * 8 fp16 scales (16 bytes), then their quant bytes interleaved 4 at a time, in 32-byte runs:
 *   byte 4k + i of run s = quant byte 4s + i of row k   (Q4_0: runs 0..3; Q8_0: runs 0..7;
 *                                                        Q5_0: run 0 its qh, runs 1..4 its qs)
 * So one 32-byte load holds 4 consecutive quant bytes of each of 8 rows, one row per 32-bit lane:
 * a row's integer dot product stays in its lane, and its scale in the same lane of one fp16 load.
 * The group of row r (r a multiple of 8) starts at r * g3_wtype_row_bytes(t, n_in), as the row
 * would in the row layout, so a view from such a row is a matrix again. The AVX2 and AVX-512
 * kernels read it (llama.cpp repacks Q4_0 likewise for AVX2); files keep the row layout. */
typedef enum g3_layout { G3_LAYOUT_ROWS = 0, G3_LAYOUT_X8 = 1 } g3_layout;

enum { G3_X8 = 8 }; /* rows per group */

/* Bytes of a [rows][n_in] matrix of block type t in the x8 layout (rows rounded up to 8). */
size_t g3_x8_bytes(g3_wtype t, int64_t rows, int64_t n_in);
/* Writes rows [0, rows) of the row-layout matrix src as x8 groups at dst (g3_x8_bytes; the
 * padding rows of a last partial group are zero). */
void g3_x8_pack(g3_wtype t, void *dst, const void *src, int64_t rows, int64_t n_in);
/* Bytes [offset, offset + n) of the matrix as the row layout would hold them, read from its x8
 * layout (so that what identifies a model does not depend on its layout). */
void g3_x8_read(g3_wtype t, const void *x8, int64_t n_in, size_t offset, size_t n, void *out);
/* Row r of a quantized [rows][n_in] matrix m in either layout, dequantized (g3_dequantize_row
 * of that row in the row layout). */
void g3_dequantize_matrix_row(g3_wtype t, g3_layout layout, const void *m, int64_t n_in,
                              int64_t r, float *y);
/* Offset in an x8 matrix of the fp16 scale of block b of row r. */
size_t g3_x8_scale_offset(g3_wtype t, int64_t n_in, int64_t r, int64_t b);

/* IEEE half <-> float, round-to-nearest-even (as F16C and ggml's software path). */
uint16_t g3_f32_to_f16(float f);

/* Bytes of one quantized activation row of n_in values (n_in a multiple of G3_QK). Inline: the
 * kernels find a token's row with it inside their block loops (out of line it halved decode). */
static inline size_t g3_act_row_bytes(int n_in) { return (size_t)(n_in / G3_QK) * (G3_QK + 8); }
/* Bytes of one Q8_K activation row (the K-quants' input, kernels/kquant.h) of n_in values
 * (n_in / 256 blocks of 292 bytes). */
size_t g3_act_k_row_bytes(int n_in);

typedef void (*g3_matmul_q_fn)(float *Y, size_t ldy, const void *W, const void *Xq, int n_tok,
                               int n_in, int r0, int r1);
typedef void (*g3_matmul_q_f32_fn)(g3_wtype wtype, float *Y, size_t ldy, const void *W,
                                   const float *X, size_t ldx, int n_tok, int n_in, int r0, int r1);

/* One instruction set's quantized kernels. The matmuls are indexed by weight type (g3_wtype):
 * a kernel file fills [GEMMA3_WEIGHTS_Q8_0] = ..., and a type is added to a table by its entries
 * alone. An entry left NULL (a block type this table has no kernel of yet) runs the scalar
 * table's (g3_matmul); the scalar table has every block type. BF16's entries are NULL: its
 * matmuls are g3_kernels'. */
typedef struct g3_quant_kernels {
    /* "scalar", "avx2" (AVX2+FMA+F16C), "avx2vnni" (+AVX-VNNI), "avx512" (F/BW/VL/DQ),
     * "avx512vnni" (+AVX512_VNNI and AVX512_VBMI), "amx" (+AMX-INT8 and the kernel's
     * permission for tile data: prefill on tiles, decode on VNNI in the same order) */
    const char *name;
    /* Elements [k0, k1) of the activation row dst of n_row values (g3_act_row_bytes(n_row)
     * bytes) = x[0 .. k1 - k0) quantized; k0 and k1 multiples of G3_QK. A row may be quantized in
     * parts (by the threads that produce them) with the same bytes as in one call. */
    void (*quantize_act)(void *dst, int n_row, const float *x, int k0, int k1);
    /* The same into a Q8_K activation row (kernels/kquant.h: g3_block_q8_K per 256 values; k0, k1
     * multiples of 256), for the K-quants; NULL: the scalar table's (g3_quantize_act_k). */
    void (*quantize_act_k)(void *dst, const float *x, int k0, int k1);
    /* matmul_q[t]: Y[t*ldy + r] = sum_k W[r][k] * X[t][k] for t < n_tok, r0 <= r < r1, where W is
     * rows of type t (row r at W + r * g3_wtype_row_bytes(t, n_in)) and X holds n_tok quantized
     * activation rows of g3_act_row_bytes(n_in) bytes each. */
    g3_matmul_q_fn matmul_q[GEMMA3_WEIGHTS_COUNT];
    /* The same with fp32 activations (the --exact mode): X[t*ldx + k]; wtype is the index (so
     * one function may serve several types). */
    g3_matmul_q_f32_fn matmul_q_f32[GEMMA3_WEIGHTS_COUNT];
    /* The same two on a matrix in the x8 layout (any r0 <= r1 within its rows). Per output one
     * fp32 chain over the blocks in order, acc = fma(isum, d_w * d_x, acc), isum the block's
     * exact integer dot product (with Q4_0's and Q5_0's corrections): the same bits in every
     * table (the AMX one runs the AVX2 kernels). _f32: per output the row layout's computation
     * of the avx2 table (the scalar table: of its own). */
    g3_matmul_q_fn matmul_q_x8[GEMMA3_WEIGHTS_COUNT];
    g3_matmul_q_f32_fn matmul_q_f32_x8[GEMMA3_WEIGHTS_COUNT];
    /* 1: the x8 kernels are this table's fastest (AUTO repacks models for it) */
    int prefer_x8;
} g3_quant_kernels;

/* ---- the matrix entry point ------------------------------------------------------------------ */

/* A weight matrix [rows][n_in]: row r at data + r * g3_wtype_row_bytes(type, n_in), or for
 * quantized blocks in the x8 layout its group there. */
typedef struct g3_matrix {
    const void *data;
    g3_wtype type;
    g3_layout layout;
} g3_matrix;

/* The kernels one session runs, chosen once: a level's tables and the precision. */
typedef struct g3_backend {
    const g3_kernels *k;       /* BF16 matmuls and the vector kernels */
    const g3_quant_kernels *q; /* the block types' matmuls */
    int exact;                 /* fp32 activations (the reference mode) */
} g3_backend;

/* A matmul's n_tok input rows of n_in values, in each form a weight type takes: fp32 (f32,
 * ld_f32 apart: the exact mode), bf16 (n_in apart: BF16 weights) and quantized activation rows
 * (g3_act_row_bytes(n_in) apart: block weights). Only the form the call needs is read. */
typedef struct g3_matmul_in {
    const float *f32;
    size_t ld_f32;
    const uint16_t *bf16;
    const void *q;
    int n_tok, n_in;
    const void *qk; /* Q8_K activation rows (g3_kq_act_row_bytes(n_in) apart): K-quant weights */
} g3_matmul_in;

/* Y[t*ldy + r] = W[r] . x[t] for t < n_tok, r0 <= r < r1, by the kernel for W's type and layout
 * and the backend's precision (the caller need not know which ran). */
void g3_matmul(const g3_backend *be, float *Y, size_t ldy, g3_matrix W, const g3_matmul_in *x,
               int r0, int r1);

/* Elements [k0, k1) of a Q8_K activation row quantized by table k (or the scalar table's). */
void g3_quantize_act_k(const g3_quant_kernels *k, void *dst, const float *x, int k0, int k1);

/* The table for an ISA level (the same levels as g3_kernels_get): the best variant the CPU has
 * at that level (AMX, else VNNI, where present); NULL if the CPU cannot run the level. */
const g3_quant_kernels *g3_quant_kernels_get(g3_isa isa);
/* Every variant this CPU can run, scalar first, into out[0..max); returns how many. For tests
 * and benchmarks. */
int g3_quant_kernels_all(const g3_quant_kernels **out, int max);

#endif
