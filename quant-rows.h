/* quant-rows.h - fast quantizers for whole weight rows (quantizing a checkpoint), byte-identical
 * to quant.h's reference g3_quantize_row for finite input. Knows nothing of Gemma.
 *
 * quant.c's g3_quantize_row is the definition (llama.cpp's reference rounding, scalar); quantizing
 * a 1B model with it takes ~3.5 s of CPU per 1e9 weights (Q4_0; Q8_0 ~6 s: roundf is a call).
 * This does the same arithmetic eight lanes at a time where the CPU has AVX2, and sixteen blocks
 * at a time (their scalars in the lanes of one vector) where it has AVX-512: the same IEEE
 * operations in the same order (no FMA, no reassociation), so the blocks are the same bytes.
 * tests/test-quant-model.c checks each against g3_quantize_row on adversarial rows. */
#ifndef G3_QUANT_ROWS_H
#define G3_QUANT_ROWS_H

#include <stdint.h>

#include "kernels.h"
#include "quant.h"

/* Quantizes n values (a multiple of G3_QK) of src, fp32 or (src_bf16) bf16 of any alignment,
 * into row: g3_wtype_row_bytes(t, n) bytes, exactly g3_quantize_row of the values as floats.
 * Returns 1, or 0 if a value is NaN or infinite (no block can hold one; row is then left partly
 * written): the check rides on the blocks' maxima, so a source is read once. */
typedef int (*g3_quantize_row_fn)(g3_wtype t, const void *src, int src_bf16, void *row, int64_t n);

/* The implementation for an instruction set (G3_ISA_SCALAR: the portable one, g3_quantize_row
 * per block), or NULL where this CPU lacks it. */
g3_quantize_row_fn g3_quantize_row_get(g3_isa isa);
/* The one for the level tables are chosen for (kernels/cpu.h: --isa, GEMMA3_ISA; by default the
 * fastest this CPU runs; scalar where that level is refused). */
g3_quantize_row_fn g3_quantize_row_best(void);

#endif
