/* kernels.h - the numeric kernels, one table per instruction set. Knows nothing of Gemma.
 *
 * g3_kernels_get() returns the table for an ISA level; the forward pass calls only through a
 * table, chosen once at start-up, so no #ifdef ever appears outside kernels.c. The scalar table
 * is the reference every other table is tested against (tests/test-kernels.c).
 *
 * Determinism contract (every table): an output element's value depends only on its inputs,
 * never on how many rows/tokens one call covers, on r0/r1 or on the thread that computes it.
 * So logits are bit-identical for any thread count and for any split of a sequence into
 * forward calls (prefill vs token-by-token), within one ISA table and one precision mode. */
#ifndef G3_KERNELS_H
#define G3_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"

typedef struct g3_kernels {
    const char *name;  /* "scalar", "avx2", "avx512", "avx512bf16", "amx-bf16" */
    g3_isa isa;

    /* Y[t*ldy + r] = sum_k W[r*n_in + k] * X[t*ldx + k]   for t < n_tok, r0 <= r < r1.
     * W: bf16 [rows][n_in] row-major (a Linear weight [out][in]); X: fp32 activations. */
    void (*matmul_f32)(float *Y, size_t ldy, const uint16_t *W, const float *X, size_t ldx,
                       int n_tok, int n_in, int r0, int r1);
    /* Same with activations already rounded to bf16 (the fast path: vdpbf16ps where present). */
    void (*matmul_bf16)(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X, size_t ldx,
                        int n_tok, int n_in, int r0, int r1);

    /* y = x * (1/sqrt(mean(x^2) + eps)) * w1p, where w1p already holds (1 + w). y may alias x. */
    void (*rmsnorm)(float *y, const float *x, const float *w1p, int n, float eps);
    /* out[i] = gelu_tanh(gate[i]) * up[i]; out may alias gate or up. */
    void (*gelu_tanh_mul)(float *out, const float *gate, const float *up, int n);
    /* In-place softmax over n values (max-subtracted, fp32). -inf entries get 0. */
    void (*softmax)(float *x, int n);
    /* log(sum_i exp(x[i])) over n >= 1 values, as max + log(sum exp(x - max)), the sum (of
     * float partial sums at most) in double: the normaliser of a log-softmax. NaN if a value
     * is NaN or infinite (the check costs nothing beside the pass for the max). */
    double (*log_sum_exp)(const float *x, int n);

    float (*dot_f32)(const float *a, const float *b, int n);
    float (*dot_bf16)(const float *a, const uint16_t *b, int n);   /* b is bf16 */
    void (*axpy_f32)(float *y, float a, const float *x, int n);    /* y += a*x */
    void (*axpy_bf16)(float *y, float a, const uint16_t *x, int n);/* y += a*x, x bf16 */
    /* Many dot / axpy over one set of rows b_i = b + i*ldb elements (i < n_rows; fp32, or bf16
     * for the _bf16 forms), each with exactly the arithmetic of dot_* / axpy_*, so a result does
     * not depend on how calls are grouped:
     *   dots:  s[h*lds + i] = dot(a + h*n, b_i, n)                  for h < n_a
     *   axpys: y + h*n += c[h*ldc + i] * b_i, i ascending           for h < n_y
     * (attention's scores and weighted values for the query heads that share a key/value head:
     * each row is read, and widened, once for all of them). */
    void (*dots_f32)(float *s, size_t lds, const float *a, int n_a, const void *b, size_t ldb,
                     int n_rows, int n);
    void (*dots_bf16)(float *s, size_t lds, const float *a, int n_a, const void *b, size_t ldb,
                      int n_rows, int n);
    void (*axpys_f32)(float *y, int n_y, const float *c, size_t ldc, const void *b, size_t ldb,
                      int n_rows, int n);
    void (*axpys_bf16)(float *y, int n_y, const float *c, size_t ldc, const void *b, size_t ldb,
                       int n_rows, int n);
    /* Round-to-nearest-even fp32 -> bf16, n values. */
    void (*to_bf16)(uint16_t *dst, const float *src, int n);
} g3_kernels;

/* A log-softmax normaliser over a vocabulary taken in strips of G3_LSE_STRIP values:
 * log_sum_exp of each strip, then the strips merged in order (max + log sum exp(lse - max), in
 * double). A caller that never holds a whole row (the LM head scoring strip by strip) and one
 * that does get the same bits, whatever the thread count. A NaN strip gives NaN. */
enum { G3_LSE_STRIP = 1024 };
double g3_lse_merge(const double *strip_lse, int n_strips);
double g3_log_sum_exp_strips(const g3_kernels *k, const float *x, int n);

/* The table for an ISA level; NULL if the CPU cannot run it. */
const g3_kernels *g3_kernels_get(g3_isa isa);
/* The table for the level chosen for the process (g3_isa_choose(NULL): --isa, GEMMA3_ISA, else
 * the best), the scalar one where that level is refused: what a caller without a session uses. */
const g3_kernels *g3_kernels_chosen(void);
/* Every table this CPU can run, scalar first, into out[0..max); returns how many. Besides
 * g3_kernels_get's choices this lists "avx512" (widening matmul_bf16) and "avx512bf16" next to
 * "amx-bf16", so tests and benchmarks cover each. */
int g3_kernels_all(const g3_kernels **out, int max);

/* Split-half ("rotate_half", NeoX) RoPE on n_heads vectors of head_dim, in place, with per-pair
 * cos/sin tables of head_dim/2 entries for this position. Scalar: cheap next to the matmuls. */
void g3_rope(float *x, int n_heads, int head_dim, const float *cos_t, const float *sin_t);

#endif
