/* kernels/scalar.c - the scalar reference table: the definition every other table is tested
 * against (tests/test-kernels.c), and the only one off x86. */
#include <math.h>
#include <string.h>

#include "kernels/simd.h"

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

ROW_LOOPS(, scalar, f32)
ROW_LOOPS(, scalar, bf16)

static void to_bf16_scalar(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = g3_f32_to_bf16(src[i]);
}

const g3_kernels g3_kernels_scalar = {
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
