/* kernels/simd.h - what the kernel files of kernels/ share (private to them): the row loops
 * behind dots_* / axpys_*, their row readers, and the tables each file defines for kernels.c's
 * dispatch. */
#ifndef G3_KERNELS_SIMD_H
#define G3_KERNELS_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "util.h"

#define INLINE static inline __attribute__((always_inline))

static inline void softmax_nothing_visible(float *x, int n) {
    float fill = 0.0f;
    for (int i = 0; i < n; i++)
        if (isnan(x[i])) fill = NAN;
    for (int i = 0; i < n; i++) x[i] = fill;
}

/* dots_* / axpys_* of a table that has no grouped kernel: its own dot / axpy, one row at a time
 * (the contract is that arithmetic exactly). */
#define ROW_LOOPS(ATTR, SUF, T)                                                                          \
    static ATTR void dots_##T##_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,        \
                                      size_t ldb, int n_rows, int n) {                                   \
        for (int h = 0; h < n_a; h++)                                                                    \
            for (int i = 0; i < n_rows; i++)                                                             \
                s[h * lds + i] = dot_##T##_##SUF(a + (size_t)h * n, (const ROW_##T *)b + i * ldb, n);    \
    }                                                                                                    \
    static ATTR void axpys_##T##_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,       \
                                       size_t ldb, int n_rows, int n) {                                  \
        for (int h = 0; h < n_y; h++)                                                                    \
            for (int i = 0; i < n_rows; i++)                                                             \
                axpy_##T##_##SUF(y + (size_t)h * n, c[h * ldc + i], (const ROW_##T *)b + i * ldb, n);    \
    }
#define ROW_f32 float
#define ROW_bf16 uint16_t

/* Row i of a table of f32 or bf16 rows (ldb elements apart), and element k of a row: what the
 * grouped kernels of every instruction set read through. */
static inline const void *row_at(const void *b, size_t ldb, int i, const int bf16) {
    return (const char *)b + (size_t)i * ldb * (bf16 ? sizeof(uint16_t) : sizeof(float));
}

static inline float row_elem(const void *row, int k, const int bf16) {
    return bf16 ? g3_bf16_to_f32(((const uint16_t *)row)[k]) : ((const float *)row)[k];
}

/* Row or token i of a SIMD tile that holds only n valid ones: past them a tile repeats the last
 * (every load stays in bounds; those outputs are never stored). */
static inline int clamp_to_last(int i, int n) { return i < n ? i : n - 1; }

/* dots_* / axpys_* of a table with grouped kernels (dots_SUF_group, axpys_SUF_group, each for
 * up to four vectors, na a compile-time constant once inlined): the vectors four at a time. */
#define GROUPED_LOOPS(ATTR, SUF)                                                                        \
    INLINE ATTR void dots_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,          \
                                size_t ldb, int n_rows, int n, const int bf16) {                       \
        for (int h = 0; h < n_a; h += 4) {                                                             \
            float *sh = s + h * lds;                                                                   \
            const float *ah = a + (size_t)h * n;                                                       \
            switch (n_a - h < 4 ? n_a - h : 4) {                                                       \
            case 1: dots_##SUF##_group(sh, lds, ah, 1, b, ldb, n_rows, n, bf16); break;                \
            case 2: dots_##SUF##_group(sh, lds, ah, 2, b, ldb, n_rows, n, bf16); break;                \
            case 3: dots_##SUF##_group(sh, lds, ah, 3, b, ldb, n_rows, n, bf16); break;                \
            default: dots_##SUF##_group(sh, lds, ah, 4, b, ldb, n_rows, n, bf16); break;               \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    INLINE ATTR void axpys_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,         \
                                 size_t ldb, int n_rows, int n, const int bf16) {                      \
        for (int h = 0; h < n_y; h += 4) {                                                             \
            float *yh = y + (size_t)h * n;                                                             \
            const float *ch = c + h * ldc;                                                             \
            switch (n_y - h < 4 ? n_y - h : 4) {                                                       \
            case 1: axpys_##SUF##_group(yh, 1, ch, ldc, b, ldb, n_rows, n, bf16); break;               \
            case 2: axpys_##SUF##_group(yh, 2, ch, ldc, b, ldb, n_rows, n, bf16); break;               \
            case 3: axpys_##SUF##_group(yh, 3, ch, ldc, b, ldb, n_rows, n, bf16); break;               \
            default: axpys_##SUF##_group(yh, 4, ch, ldc, b, ldb, n_rows, n, bf16); break;              \
            }                                                                                          \
        }                                                                                              \
    }                                                                                                  \
    static ATTR void dots_f32_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,      \
                                    size_t ldb, int n_rows, int n) {                                   \
        dots_##SUF(s, lds, a, n_a, b, ldb, n_rows, n, 0);                                              \
    }                                                                                                  \
    static ATTR void dots_bf16_##SUF(float *s, size_t lds, const float *a, int n_a, const void *b,     \
                                     size_t ldb, int n_rows, int n) {                                  \
        dots_##SUF(s, lds, a, n_a, b, ldb, n_rows, n, 1);                                              \
    }                                                                                                  \
    static ATTR void axpys_f32_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,     \
                                     size_t ldb, int n_rows, int n) {                                  \
        axpys_##SUF(y, n_y, c, ldc, b, ldb, n_rows, n, 0);                                             \
    }                                                                                                  \
    static ATTR void axpys_bf16_##SUF(float *y, int n_y, const float *c, size_t ldc, const void *b,    \
                                      size_t ldb, int n_rows, int n) {                                 \
        axpys_##SUF(y, n_y, c, ldc, b, ldb, n_rows, n, 1);                                             \
    }

/* The tables, one file each: kernels/scalar.c, and on x86 kernels/avx2.c and kernels/avx512.c
 * (whose "amx-bf16" table runs kernels/amx-bf16.inc). */
extern const g3_kernels g3_kernels_scalar;
extern const g3_kernels g3_kernels_avx2;
extern const g3_kernels g3_kernels_avx512, g3_kernels_avx512bf16, g3_kernels_amx_bf16;

#endif
