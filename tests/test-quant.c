/* test-quant - Q8_0 / Q4_0 quantizers against an independent model of llama.cpp's rules, the
 * fp16 conversion against the hardware's, and every quantized-matmul table against the scalar
 * reference, with the determinism contract checked bitwise.
 *
 * Reference data: tests/data/quant/ is written by tools/quant-ref.py (pure Python, its own
 * implementation of ggml's quantize_row_q8_0_ref / q4_0_ref rounding); the blocks must match
 * byte for byte.
 *
 * Error bound of a SIMD table against the scalar one (same quantized inputs, so the integer
 * block sums are identical and exact): only the float combination of the per-block terms
 * d_w * d_x * isum differs in order and in where products are rounded. Each order's error is
 * below (n_blocks + 3) * eps * sum_b |d_w d_x isum_b| <= (n_blocks + 3) * eps * sum_k |w_k x_k|
 * (x here the dequantized activation), so the two differ by at most twice that; we allow
 * 2 * (n_blocks + 8) * 2^-24 * S with S = sum_k |w_k| |x_k| computed in double, +1e-30.
 * For matmul_q_f32 the per-block sums are float too: the bound uses n_in instead of n_blocks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "check.h"
#include "quant.h"
#include "util.h"

#define DATA_DIR "tests/data/quant/"
#define REF_ROWS 200
#define REF_COLS 128

#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#include "test-rng.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* Reads exactly n bytes of a data file; 0 if missing or short. */
static int read_file(const char *path, void *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(buf, 1, n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    return got == n && !extra;
}

/* ---- quantizers against tools/quant-ref.py ------------------------------------------------- */

static void test_reference_blocks(void) {
    const size_t n = (size_t)REF_ROWS * REF_COLS, nb = n / G3_QK;
    float *x = xmalloc(n * sizeof *x);
    g3_block_q8_0 *want8 = xmalloc(nb * sizeof *want8), *got8 = xmalloc(nb * sizeof *got8);
    g3_block_q4_0 *want4 = xmalloc(nb * sizeof *want4), *got4 = xmalloc(nb * sizeof *got4);
    CHECK_EQ_INT(sizeof(g3_block_q8_0), 34);
    CHECK_EQ_INT(sizeof(g3_block_q4_0), 18);
    int ok = read_file(DATA_DIR "input.f32", x, n * sizeof *x) &&
             read_file(DATA_DIR "q8_0.bin", want8, nb * sizeof *want8) &&
             read_file(DATA_DIR "q4_0.bin", want4, nb * sizeof *want4);
    CHECK_MSG(ok, "cannot read " DATA_DIR " (run from the repository root)");
    if (ok) {
        int bad8 = 0, bad4 = 0;
        for (int r = 0; r < REF_ROWS; r++) {
            const size_t o = (size_t)r * REF_COLS, ob = o / G3_QK;
            g3_quantize_row_q8_0(x + o, got8 + ob, REF_COLS);
            g3_quantize_row(GEMMA3_WEIGHTS_Q4_0, x + o, got4 + ob, REF_COLS);
        }
        for (size_t b = 0; b < nb; b++) {
            if (memcmp(&got8[b], &want8[b], sizeof got8[b]) && bad8++ < 5)
                fprintf(stderr, "q8_0 block %zu: d %04x vs %04x\n", b, got8[b].d, want8[b].d);
            if (memcmp(&got4[b], &want4[b], sizeof got4[b]) && bad4++ < 5)
                fprintf(stderr, "q4_0 block %zu: d %04x vs %04x\n", b, got4[b].d, want4[b].d);
        }
        CHECK_MSG(bad8 == 0, "%d of %zu Q8_0 blocks differ from llama.cpp's rounding", bad8, nb);
        CHECK_MSG(bad4 == 0, "%d of %zu Q4_0 blocks differ from llama.cpp's rounding", bad4, nb);
    }
    free(x), free(want8), free(got8), free(want4), free(got4);
}

/* Blocks whose values all lie so low that 1 / d overflows to infinity (below ~3.7e-37): every
 * product x * id is +-inf or NaN (0 * inf), whose conversion C leaves undefined; the reference
 * stores x86's bytes, 0 for each (quant_int8 in quant.c), whatever the compiler, and a zero
 * scale. A plain cast gave 0x80 from clang. */
static void test_tiny_blocks(void) {
    float x[2 * G3_QK];
    for (int j = 0; j < 2 * G3_QK; j++) /* subnormals of both signs, a zero */
        x[j] = j == 7 ? 0.0f : (float)((j % 5) - 2 + (j % 5 >= 2)) * (float)(j + 1) * 1e-41f;
    g3_block_q8_0 y8[2];
    g3_block_q4_0 y4[2];
    g3_quantize_row_q8_0(x, y8, 2 * G3_QK);
    g3_quantize_row_q4_0(x, y4, 2 * G3_QK);
    int bad = 0;
    for (int b = 0; b < 2; b++) {
        bad += (y8[b].d & 0x7fff) != 0 || (y4[b].d & 0x7fff) != 0;
        for (int j = 0; j < G3_QK; j++) bad += y8[b].qs[j] != 0;
        for (int j = 0; j < G3_QK / 2; j++) bad += y4[b].qs[j] != 0;
    }
    CHECK_MSG(bad == 0, "blocks whose 1/d overflows: %d bytes other than zero", bad);
}

/* Dequantizing and quantizing again reproduces the blocks (each q maps back to itself: the
 * values d*q are exact grid points), and the dequantized values are within d/2 of the input
 * (Q4_0: within d, as q = 16, the opposite extreme, is clamped to 15). */
static void test_roundtrip(void) {
    enum { N = 4096 };
    static float x[N], y[N], z[N];
    static g3_block_q8_0 b8[N / G3_QK], c8[N / G3_QK];
    static g3_block_q4_0 b4[N / G3_QK], c4[N / G3_QK];
    for (int i = 0; i < N; i++) x[i] = rng_f() * (float)(1 + i % 7) * 0.1f;
    int bad_err = 0;
    g3_quantize_row(GEMMA3_WEIGHTS_Q8_0, x, b8, N);
    g3_dequantize_row(GEMMA3_WEIGHTS_Q8_0, b8, y, N);
    g3_quantize_row(GEMMA3_WEIGHTS_Q8_0, y, c8, N);
    g3_quantize_row(GEMMA3_WEIGHTS_Q4_0, x, b4, N);
    g3_dequantize_row(GEMMA3_WEIGHTS_Q4_0, b4, z, N);
    g3_quantize_row(GEMMA3_WEIGHTS_Q4_0, z, c4, N);
    for (int i = 0; i < N; i++) {
        const float d8 = g3_f16_to_f32(b8[i / G3_QK].d), d4 = fabsf(g3_f16_to_f32(b4[i / G3_QK].d));
        /* 0.57 d: the fp16 rounding of d moves the grid by up to 127 * 2^-11 d */
        if (fabsf(y[i] - x[i]) > d8 * 0.57f || fabsf(z[i] - x[i]) > d4 * 1.07f) bad_err++;
    }
    CHECK_MSG(bad_err == 0, "%d values farther than d/2 from their quantized value", bad_err);
    CHECK(memcmp(b8, c8, sizeof b8) == 0);
    CHECK(memcmp(b4, c4, sizeof b4) == 0);
    /* exact values: Q4_0 q - 8 and Q8_0 q times d */
    g3_block_q4_0 one = {.d = 0x3c00}; /* d = 1 */
    for (int j = 0; j < 16; j++) one.qs[j] = (uint8_t)(j | (15 - j) << 4);
    g3_dequantize_row(GEMMA3_WEIGHTS_Q4_0, &one, y, G3_QK);
    int bad_exact = 0;
    for (int j = 0; j < 16; j++) bad_exact += y[j] != (float)(j - 8) || y[j + 16] != (float)(7 - j);
    CHECK_EQ_INT(bad_exact, 0);
    /* the 5-bit and minimum blocks: fifth bits from qh (element j: bit j), d * q + m, Q5_0's
     * offset of 16 */
    g3_block_q4_1 b41 = {.d = 0x4000, .m = 0xbc00}; /* d = 2, m = -1 */
    g3_block_q5_0 b50 = {.d = 0x3c00};
    g3_block_q5_1 b51 = {.d = 0x3800, .m = 0x4200}; /* d = 0.5, m = 3 */
    uint32_t qh = 0x80000001u | 0x00010000u; /* elements 0, 16 and 31 */
    for (int j = 0; j < 16; j++) b41.qs[j] = b50.qs[j] = b51.qs[j] = (uint8_t)(j | (15 - j) << 4);
    memcpy(b50.qh, &qh, 4), memcpy(b51.qh, &qh, 4);
    float y41[G3_QK], y50[G3_QK], y51[G3_QK];
    g3_dequantize_row(GEMMA3_WEIGHTS_Q4_1, &b41, y41, G3_QK);
    g3_dequantize_row(GEMMA3_WEIGHTS_Q5_0, &b50, y50, G3_QK);
    g3_dequantize_row(GEMMA3_WEIGHTS_Q5_1, &b51, y51, G3_QK);
    for (int j = 0; j < G3_QK; j++) {
        const int nib = j < 16 ? j : 31 - j, u = nib | (int)((qh >> j) & 1) << 4;
        bad_exact += y41[j] != 2.0f * (float)nib - 1.0f;
        bad_exact += y50[j] != (float)(u - 16);
        bad_exact += y51[j] != 0.5f * (float)u + 3.0f;
    }
    CHECK_MSG(bad_exact == 0, "Q4_1 / Q5_0 / Q5_1 dequantized to %d wrong values", bad_exact);
    /* every value within half a step of its quantized value (Q5_0: a step) */
    static const struct { g3_wtype t; float step; } lb[] = {
        {GEMMA3_WEIGHTS_Q4_1, 15.0f}, {GEMMA3_WEIGHTS_Q5_0, 16.0f}, {GEMMA3_WEIGHTS_Q5_1, 31.0f}};
    for (size_t k = 0; k < sizeof lb / sizeof lb[0]; k++) {
        static uint8_t blocks[N / G3_QK * 24];
        g3_quantize_row(lb[k].t, x, blocks, N);
        g3_dequantize_row(lb[k].t, blocks, y, N);
        int bad = 0;
        for (int b = 0; b < N / G3_QK; b++) {
            float amax = 0.0f, lo = INFINITY, hi = -INFINITY;
            for (int j = 0; j < G3_QK; j++) {
                const float v = x[b * G3_QK + j];
                amax = fmaxf(amax, fabsf(v)), lo = fminf(lo, v), hi = fmaxf(hi, v);
            }
            const float range = lb[k].t == GEMMA3_WEIGHTS_Q5_0 ? amax : hi - lo;
            /* half a step, plus the fp16 scale's rounding; Q5_0 a whole step (as Q4_0: the
             * opposite extreme's q = 32 is clamped to 31) */
            const float steps = lb[k].t == GEMMA3_WEIGHTS_Q5_0 ? 1.03f : 0.53f;
            for (int j = 0; j < G3_QK; j++)
                bad += !(fabsf(y[b * G3_QK + j] - x[b * G3_QK + j]) <= range / lb[k].step * steps + range * 2e-3f);
        }
        CHECK_MSG(bad == 0, "%s: %d values farther than half a step", g3_wtype_name(lb[k].t), bad);
    }
}

/* ---- fp16 ------------------------------------------------------------------------------------ */

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("f16c"))) static uint16_t f16_hw(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

static int f16_mismatch(uint32_t u, int *bad) {
    float f;
    memcpy(&f, &u, sizeof f);
    uint16_t a = g3_f32_to_f16(f), b = f16_hw(f);
    /* NaN payloads may differ; both must be NaN with the sign kept */
    int nan = (u & 0x7fffffffu) > 0x7f800000u;
    int diff = nan ? !((a & 0x7c00u) == 0x7c00u && (a & 0x3ffu) && (a & 0x8000u) == (b & 0x8000u))
                   : a != b;
    if (diff && (*bad)++ < 5) fprintf(stderr, "f16(%08x): %04x vs hw %04x\n", u, a, b);
    return diff;
}

/* Against F16C: every float whose low 13 bits sit at or next to a rounding boundary of the
 * normal range (all 2^19 upper patterns), every float in and around the subnormal-half range
 * (one sign, where the boundary moves with the exponent), and a strided sweep of all 2^32. */
static void test_f16_hw(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) { /* F16C comes with every AVX2 CPU */
        printf("skip: no F16C\n");
        return;
    }
    static const uint32_t lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x0800, 0x1800};
    int bad = 0;
    long n = 0;
    for (uint32_t hi = 0; hi < (1u << 19); hi++)
        for (size_t j = 0; j < sizeof lows / sizeof lows[0]; j++, n++)
            f16_mismatch(hi << 13 | lows[j], &bad);
    for (uint32_t u = 0x32000000u; u < 0x39000000u; u++, n++) f16_mismatch(u, &bad);
    for (uint64_t u = 0; u < (1ull << 32); u += 65521, n++) f16_mismatch((uint32_t)u, &bad);
    CHECK_MSG(bad == 0, "%d of %ld floats convert differently from F16C", bad, n);
}
#else
static void test_f16_hw(void) { printf("skip: not x86\n"); }
#endif

/* Without hardware: the fixed points a port must get right too. */
static void test_f16_fixed(void) {
    static const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000},        {-0.0f, 0x8000},      {1.0f, 0x3c00},      {-2.0f, 0xc000},
        {65504.0f, 0x7bff},    {65519.99f, 0x7bff},  {65520.0f, 0x7c00},  {1e30f, 0x7c00},
        {5.9604645e-8f, 0x0001}, {2.9802322e-8f, 0x0000}, {2.9802326e-8f, 0x0001},
        {1.0009766f, 0x3c01},  {1.00048828125f, 0x3c00}, {1.00146484375f, 0x3c02},
        {6.1035156e-5f, 0x0400}, {-INFINITY, 0xfc00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(g3_f32_to_f16(cases[i].f) == cases[i].h, "f16(%.9g) = %04x, want %04x",
                  (double)cases[i].f, g3_f32_to_f16(cases[i].f), cases[i].h);
    /* every half survives half -> float -> half */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue; /* NaN */
        bad += g3_f32_to_f16(g3_f16_to_f32((uint16_t)h)) != h;
    }
    CHECK_EQ_INT(bad, 0);
}

/* ---- kernel tables against the scalar one ---------------------------------------------------- */

static const g3_quant_kernels *tables[8];
static int n_tables;

/* n values of activation: random at a per-block scale, with all-zero blocks, blocks whose
 * scaled values tie at k + 0.5 (amax 127 -> id = 1), and huge / tiny / below-ACT_TINY scales. */
static void fill_act(float *x, int n, int extreme) {
    for (int b = 0; b < n / G3_QK; b++) {
        float *v = x + b * G3_QK;
        const int kind = (int)(rng_u32() % (extreme ? 8 : 5));
        const float scale = kind == 5 ? 1e20f : kind == 6 ? 1e-20f : kind == 7 ? 1e-37f
                                                                    : 1.0f + (float)(rng_u32() % 100);
        for (int j = 0; j < G3_QK; j++) {
            if (kind == 0) v[j] = 0.0f;
            else if (kind == 1) v[j] = (float)((int)(rng_u32() % 253) - 126) + 0.5f;
            else v[j] = rng_f() * scale;
        }
        if (kind == 1) v[rng_u32() % G3_QK] = (rng_u32() & 1) ? 127.0f : -127.0f;
    }
}

static void test_quantize_act(void) {
    const g3_quant_kernels *ref = tables[0];
    /* round half to even, in every table: amax 127 gives id = 1, so x is q before rounding
     * (the row's int8 values come first in the activation layout, see quant.c) */
    float ties[G3_QK] = {127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f, 126.5f, -126.5f, 1e-3f};
    static const int8_t want[11] = {127, 2, 4, -2, -4, 0, 0, 2, 126, -126, 0};
    for (int ti = 0; ti < n_tables; ti++) {
        int8_t row[G3_QK + 8];
        tables[ti]->quantize_act(row, G3_QK, ties, 0, G3_QK);
        CHECK_MSG(memcmp(row, want, sizeof want) == 0, "%s: ties not rounded half to even",
                  tables[ti]->name);
    }
    for (int ti = 1; ti < n_tables; ti++) {
        int bad = 0;
        for (int rep = 0; rep < 50; rep++) {
            const int n = G3_QK * (1 + (int)(rng_u32() % 70));
            const size_t bytes = g3_act_row_bytes(n);
            float *x = xmalloc((size_t)n * sizeof *x);
            char *a = xmalloc(bytes + 64), *b = xmalloc(bytes + 64);
            fill_act(x, n, 1);
            memset(a, 0x5a, bytes + 64);
            memset(b, 0x5a, bytes + 64);
            ref->quantize_act(a, n, x, 0, n);
            /* in two parts, as the threads that produce a row's halves quantize them */
            const int cut = G3_QK * (int)(rng_u32() % (unsigned)(n / G3_QK + 1));
            tables[ti]->quantize_act(b, n, x, 0, cut);
            tables[ti]->quantize_act(b, n, x + cut, cut, n);
            bad += memcmp(a, b, bytes + 64) != 0; /* + the sentinel tail: no stray stores */
            free(x), free(a), free(b);
        }
        CHECK_MSG(bad == 0, "%s: quantize_act differs from scalar in %d of 50 rows", tables[ti]->name, bad);
    }
}

/* A rows x n_in weight matrix of type wt from random floats; Q8_0 also gets some q = -128 (a
 * valid block that llama.cpp's quantizer never writes: checks the unsigned-bias and |w| paths
 * for int16 saturation). Also its dequantized values. */
static void *make_weights(g3_wtype wt, int rows, int n_in, float *deq) {
    const size_t rb = g3_wtype_row_bytes(wt, n_in);
    char *w = xmalloc(rb * (size_t)rows);
    float *tmp = xmalloc((size_t)n_in * sizeof *tmp);
    for (int r = 0; r < rows; r++) {
        fill_act(tmp, n_in, 0); /* weights: within fp16's range */
        g3_quantize_row(wt, tmp, w + (size_t)r * rb, n_in);
        if (wt == GEMMA3_WEIGHTS_Q8_0)
            for (int b = 0; b < n_in / G3_QK; b++)
                if (rng_u32() % 4 == 0) {
                    g3_block_q8_0 *blk = (g3_block_q8_0 *)(void *)(w + (size_t)r * rb) + b;
                    blk->qs[rng_u32() % G3_QK] = -128;
                }
        g3_dequantize_row(wt, w + (size_t)r * rb, deq + (size_t)r * n_in, n_in);
    }
    free(tmp);
    return w;
}

/* The fp16 minimum of block b of row r (Q4_1, Q5_1: the two bytes after the scale), else 0. */
static double block_min(g3_wtype wt, const void *W, int n_in, int r, int b) {
    if (wt != GEMMA3_WEIGHTS_Q4_1 && wt != GEMMA3_WEIGHTS_Q5_1) return 0.0;
    const size_t rb = g3_wtype_row_bytes(wt, n_in), bs = rb / (size_t)(n_in / G3_QK);
    uint16_t h;
    memcpy(&h, (const char *)W + (size_t)r * rb + (size_t)b * bs + 2, 2);
    return g3_f16_to_f32(h);
}

/* A copy of n bytes that ends where an inaccessible page begins, so that a kernel reading past
 * the matrix's last row faults instead of reading whatever follows it (bytes that its shuffles
 * might then ignore, so results alone would not show the read). */
typedef struct guarded {
    char *map;
    size_t map_bytes;
    void *data;
} guarded;

static guarded guarded_copy(const void *src, size_t n) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + page - 1) / page * page;
    guarded g = {.map_bytes = body + page};
    g.map = mmap(NULL, g.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.map == MAP_FAILED || mprotect(g.map + body, page, PROT_NONE) != 0) {
        fprintf(stderr, "guarded_copy: mmap failed\n");
        exit(2);
    }
    g.data = g.map + body - n;
    memcpy(g.data, src, n);
    return g;
}

typedef struct shape {
    int rows, n_in, n_tok;
} shape;

/* Runs matmul (wtype, quantized activations unless exact, W in the row or the x8 layout) of
 * table k for rows [r0, r1) and all tokens into Y (ldy = rows + 3). */
static void run_mm(const g3_quant_kernels *k, g3_wtype wt, int exact, int x8, float *Y, size_t ldy,
                   const void *W, const void *Xq, const float *X, shape s, int t0, int nt, int r0,
                   int r1) {
    const size_t ab = g3_act_row_bytes(s.n_in);
    float *Yt = Y + (size_t)t0 * ldy;
    const float *Xt = X + (size_t)t0 * s.n_in;
    const void *Xqt = (const char *)Xq + (size_t)t0 * ab;
    /* a NULL entry runs the scalar table's, as g3_matmul does */
    const int has = exact ? (x8 ? k->matmul_q_f32_x8 : k->matmul_q_f32)[wt] != NULL
                          : (x8 ? k->matmul_q_x8 : k->matmul_q)[wt] != NULL;
    if (!has) k = tables[0];
    if (exact)
        (x8 ? k->matmul_q_f32_x8 : k->matmul_q_f32)[wt](wt, Yt, ldy, W, Xt, (size_t)s.n_in, nt, s.n_in, r0, r1);
    else
        (x8 ? k->matmul_q_x8 : k->matmul_q)[wt](Yt, ldy, W, Xqt, nt, s.n_in, r0, r1);
}

typedef struct mm_counts {
    int tol, det, store, x8_bits;
} mm_counts;

/* One shape, one weight type, one mode: every table against scalar within the bound of the
 * header comment; and per table the determinism contract, bitwise: all tokens in one call ==
 * one call per token, and rows [r0, r1) in one call == two calls split at an odd row. The
 * same in the x8 layout for the tables that read it, whose results must also be bit for bit
 * the scalar x8 kernel's (default mode) or the table's own row-layout results (exact mode). The
 * matrices end at an inaccessible page (guarded_copy): no kernel may read past its last row. */
static void test_matmul_shape(g3_wtype wt, int exact, shape s, mm_counts *bad) {
    const int nb = s.n_in / G3_QK;
    const size_t ldy = (size_t)s.rows + 3, ny = ldy * (size_t)s.n_tok;
    float *deq = xmalloc((size_t)s.rows * s.n_in * sizeof *deq);
    float *X = xmalloc((size_t)s.n_tok * s.n_in * sizeof *X);
    void *W_heap = make_weights(wt, s.rows, s.n_in, deq);
    const int has_x8 = g3_wtype_get(wt)->x8;
    const size_t x8_bytes = g3_x8_bytes(wt, s.rows, s.n_in);
    void *W_x8_heap = xmalloc(x8_bytes);
    if (has_x8) g3_x8_pack(wt, W_x8_heap, W_heap, s.rows, s.n_in);
    else memset(W_x8_heap, 0, x8_bytes);
    const guarded Wg = guarded_copy(W_heap, g3_wtype_row_bytes(wt, s.n_in) * (size_t)s.rows);
    const guarded Wg8 = guarded_copy(W_x8_heap, x8_bytes);
    char *Xq = xmalloc(g3_act_row_bytes(s.n_in) * (size_t)s.n_tok);
    float *Yref = xmalloc(ny * sizeof(float)), *Y = xmalloc(ny * sizeof(float));
    float *Y1 = xmalloc(ny * sizeof(float)), *Yx8 = xmalloc(ny * sizeof(float));
    double *S = xmalloc((size_t)s.rows * s.n_tok * sizeof *S);
    fill_act(X, s.n_tok * s.n_in, 1);
    for (int t = 0; t < s.n_tok; t++)
        tables[0]->quantize_act(Xq + (size_t)t * g3_act_row_bytes(s.n_in), s.n_in, X + (size_t)t * s.n_in, 0, s.n_in);
    /* S = sum |w| |x~|, |x~| <= |x| + amax_b / 127 bounding the dequantized activation */
    for (int t = 0; t < s.n_tok; t++)
        for (int r = 0; r < s.rows; r++) {
            double acc = 0;
            for (int b = 0; b < nb; b++) {
                const float *x = X + (size_t)t * s.n_in + b * G3_QK;
                const double m = block_min(wt, W_heap, s.n_in, r, b);
                double amax = 0;
                for (int j = 0; j < G3_QK; j++) /* a branch, not fmax: aarch64 gcc 12 -O2 ICEs */
                    if (fabs(x[j]) > amax) amax = fabs(x[j]);
                for (int j = 0; j < G3_QK; j++) /* |d q| + |m|: the two terms summed apart */
                    acc += (fabs(deq[(size_t)r * s.n_in + b * G3_QK + j] - m) + fabs(m)) *
                           (fabs(x[j]) + (exact ? 0 : amax / 127));
            }
            S[(size_t)t * s.rows + r] = acc;
        }
    const int r0 = (int)(rng_u32() % (unsigned)(s.rows / 2 + 1)), r1 = s.rows - (int)(rng_u32() % 2);
    const double n_terms = exact ? s.n_in : nb;
    for (size_t i = 0; i < ny; i++) Yref[i] = Yx8[i] = NAN;
    run_mm(tables[0], wt, exact, 0, Yref, ldy, Wg.data, Xq, X, s, 0, s.n_tok, r0, r1);
    /* what the x8 kernels must give: the scalar x8 kernel's bits; exact: the rows' bits of the
     * scalar table (for itself) or of the avx2 table (for every SIMD table) */
    const g3_quant_kernels *avx2 = g3_quant_kernels_get(G3_ISA_AVX2);
    float *Yx8_simd = xmalloc(ny * sizeof(float));
    for (size_t i = 0; i < ny; i++) Yx8_simd[i] = NAN;
    if (!exact && has_x8) run_mm(tables[0], wt, 0, 1, Yx8, ldy, Wg8.data, Xq, X, s, 0, s.n_tok, r0, r1);
    if (exact) memcpy(Yx8, Yref, ny * sizeof(float));
    if (exact && avx2) run_mm(avx2, wt, 1, 0, Yx8_simd, ldy, Wg.data, Xq, X, s, 0, s.n_tok, r0, r1);
    for (int ti = 0; ti < n_tables; ti++)
        for (int x8 = 0; x8 <= has_x8; x8++) {
            const g3_quant_kernels *k = tables[ti];
            const void *W = x8 ? Wg8.data : Wg.data;
            for (size_t i = 0; i < ny; i++) Y[i] = Y1[i] = -7.0f;
            run_mm(k, wt, exact, x8, Y, ldy, W, Xq, X, s, 0, s.n_tok, r0, r1);
            for (int t = 0; t < s.n_tok; t++) { /* one token at a time, rows split at mid */
                const int mid = r0 + (r1 - r0) / 2 + ((r1 - r0) > 2);
                run_mm(k, wt, exact, x8, Y1, ldy, W, Xq, X, s, t, 1, r0, mid);
                run_mm(k, wt, exact, x8, Y1, ldy, W, Xq, X, s, t, 1, mid, r1);
            }
            const float *want_x8 = exact && ti > 0 ? Yx8_simd : Yx8;
            for (int t = 0; t < s.n_tok; t++)
                for (size_t r = 0; r < ldy; r++) {
                    const size_t i = (size_t)t * ldy + r;
                    if ((int)r < r0 || (int)r >= r1) {
                        bad->store += Y[i] != -7.0f || Y1[i] != -7.0f;
                        continue;
                    }
                    const char *what = x8 ? " x8" : "";
                    const double tol = 2 * (n_terms + 8) * 0x1p-24 * S[(size_t)t * s.rows + r] + 1e-30;
                    if (!(fabs((double)Y[i] - Yref[i]) <= tol) && bad->tol++ < 5)
                        fprintf(stderr, "%s %s%s%s rows %d n_in %d tok %d: y[%d][%zu] %.9g vs %.9g (tol %.3g)\n",
                                k->name, g3_wtype_name(wt), exact ? " f32" : "", what, s.rows, s.n_in,
                                s.n_tok, t, r, Y[i], Yref[i], tol);
                    if (memcmp(&Y[i], &Y1[i], sizeof(float)) && bad->det++ < 5)
                        fprintf(stderr, "%s %s%s%s rows %d n_in %d tok %d: y[%d][%zu] batch %.9g vs single %.9g\n",
                                k->name, g3_wtype_name(wt), exact ? " f32" : "", what, s.rows, s.n_in,
                                s.n_tok, t, r, Y[i], Y1[i]);
                    if (x8 && memcmp(&Y[i], &want_x8[i], sizeof(float)) && bad->x8_bits++ < 5)
                        fprintf(stderr, "%s %s%s x8 rows %d n_in %d tok %d: y[%d][%zu] %.9g, expected %.9g\n",
                                k->name, g3_wtype_name(wt), exact ? " f32" : "", s.rows, s.n_in,
                                s.n_tok, t, r, Y[i], want_x8[i]);
                }
        }
    free(deq), free(X), free(W_heap), free(W_x8_heap), free(Xq), free(Yref), free(Y), free(Y1);
    free(Yx8), free(Yx8_simd), free(S);
    munmap(Wg.map, Wg.map_bytes);
    munmap(Wg8.map, Wg8.map_bytes);
}

/* The x8 layout: the documented byte positions, the zero padding of a last partial group, and
 * the readers (row-layout bytes, a dequantized row, a scale's offset) back to the rows. */
static void test_x8_layout(void) {
    int bad = 0;
    for (int wt = GEMMA3_WEIGHTS_Q8_0; wt <= GEMMA3_WEIGHTS_Q4_0; wt++)
        for (int rows = 1; rows <= 19; rows += 3) {
            const int n_in = 3 * G3_QK, nb = 3;
            const size_t rb = g3_wtype_row_bytes((g3_wtype)wt, n_in), bs = rb / nb;
            const size_t x8_bytes = g3_x8_bytes((g3_wtype)wt, rows, n_in);
            CHECK_EQ_INT(x8_bytes, (size_t)((rows + 7) / 8 * 8) * rb);
            float *deq = xmalloc((size_t)rows * n_in * sizeof *deq), y[3 * G3_QK];
            uint8_t *w = make_weights((g3_wtype)wt, rows, n_in, deq), *x8 = xmalloc(x8_bytes);
            uint8_t *back = xmalloc((size_t)rows * rb);
            memset(x8, 0x5a, x8_bytes);
            g3_x8_pack((g3_wtype)wt, x8, w, rows, n_in);
            for (int r = 0; r < (rows + 7) / 8 * 8; r++) /* quant.h's rule, written out */
                for (int b = 0; b < nb; b++) {
                    const uint8_t *grp = x8 + ((size_t)(r / 8) * nb + b) * 8 * bs;
                    const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bs;
                    const int k = r % 8;
                    for (size_t j = 0; j < bs; j++) {
                        const uint8_t got = j < 2 ? grp[2 * k + j] : grp[16 + 32 * ((j - 2) / 4) + 4 * k + (j - 2) % 4];
                        bad += got != (r < rows ? blk[j] : 0);
                    }
                    bad += g3_x8_scale_offset((g3_wtype)wt, n_in, r, b) != (size_t)(grp + 2 * k - x8);
                }
            g3_x8_read((g3_wtype)wt, x8, n_in, 0, (size_t)rows * rb, back);
            bad += memcmp(back, w, (size_t)rows * rb) != 0;
            g3_x8_read((g3_wtype)wt, x8, n_in, rb + 5, 7, back); /* a piece from mid-row */
            bad += memcmp(back, w + rb + 5, rows > 1 ? 7 : 0) != 0;
            for (int r = 0; r < rows; r++) {
                g3_dequantize_matrix_row((g3_wtype)wt, G3_LAYOUT_X8, x8, n_in, r, y);
                bad += memcmp(y, deq + (size_t)r * n_in, sizeof y) != 0;
                g3_dequantize_matrix_row((g3_wtype)wt, G3_LAYOUT_ROWS, w, n_in, r, y);
                bad += memcmp(y, deq + (size_t)r * n_in, sizeof y) != 0;
            }
            free(deq), free(w), free(x8), free(back);
        }
    CHECK_MSG(bad == 0, "x8 layout: %d bytes, offsets or rows wrong", bad);
}

/* Gemma's widths scaled down (640, 1152, 2048, ... become 32 x 1..40 blocks, odd counts too),
 * row counts around the thread grain of 16, and 1..37 tokens. */
static void test_matmul(void) {
    static const int blocks[] = {1, 2, 3, 5, 20, 36, 41};
    static const int rows[] = {1, 3, 16, 17, 37};
    static const int toks[] = {1, 2, 3, 4, 5, 7, 8, 9, 37};
    mm_counts bad = {0};
    int n = 0;
    /* the types of blocks of 32 (the K-quants, rows of 256 and Q8_K activations: test-quant-k) */
    for (int wt = 1; wt < GEMMA3_WEIGHTS_COUNT; wt++)
        for (int exact = 0; exact < 2 && g3_wtype_is_block(wt) && g3_wtype_get(wt)->block == G3_QK; exact++)
            for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
                for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
                    /* every token count with a few shapes, a few token counts with the rest */
                    const size_t nt = (bi % 3 == 0 || ri == 3) ? sizeof toks / sizeof toks[0] : 3;
                    for (size_t ti = 0; ti < nt; ti++, n++) {
                        shape s = {rows[ri], blocks[bi] * G3_QK, toks[nt == 3 ? ti * 4 : ti]};
                        test_matmul_shape((g3_wtype)wt, exact, s, &bad);
                    }
                }
    /* wide rows and many tokens: the AMX table cuts k into spans of blocks, each span's sums
     * resumed from Y by the next (n_in 32000 and 57600: a row tile's blocks past half its cell
     * target; 8192 x 300 tokens: the cells of all the groups past two token blocks), or the
     * tokens into two blocks (4096 x 300); whole groups of 16 blocks (512, 1536), which the
     * AMX table's Q4_0 decode reads unmasked except at the end of the call's rows; and rows too
     * wide for that decode's scratch (540672: 16896 blocks), left to the side-by-side matvec.
     * The x8 layout reaches the tiles only past 96 tokens (AMX_X8_VNNI_MAX_TOKENS): hence the
     * spans again with 100 and 97 tokens */
    static const shape wide[] = {{17, 32000, 37}, {5, 57600, 3}, {17, 32000, 100}, {5, 57600, 97},
                                 {19, 8192, 300}, {5, 4096, 300},
                                 {33, 512, 2}, {18, 1536, 3}, {2, 540672, 1}};
    const int n_wide = (int)(sizeof wide / sizeof wide[0]);
    for (int wt = 1; wt < GEMMA3_WEIGHTS_COUNT; wt++)
        for (int i = 0; i < n_wide && g3_wtype_is_block(wt) && g3_wtype_get(wt)->block == G3_QK; i++, n++)
            test_matmul_shape((g3_wtype)wt, 0, wide[i], &bad);
    CHECK_MSG(bad.tol == 0, "%d outputs outside the summation-order bound (%d shapes)", bad.tol, n);
    CHECK_MSG(bad.det == 0, "%d outputs differ between batched and per-token/split calls", bad.det);
    CHECK_MSG(bad.store == 0, "%d stores outside rows [r0, r1)", bad.store);
    CHECK_MSG(bad.x8_bits == 0, "%d x8 outputs differ from the scalar x8 kernel (exact: the scalar or avx2 rows')", bad.x8_bits);
    printf("matmul: %d shapes x %d tables\n", n, n_tables);
}

/* The x8 kernels' tiles against the scalar x8 kernel, bit for bit. The AVX-512 tables put two
 * groups (16 rows) in a vector and unpack them once for up to 8 tokens, leaving a partial group
 * at either end of [r0, r1) and a last odd whole group to the AVX2 kernel: every token count
 * 1..17 (a tile of 8 then each remainder 1..7, two tiles and one), row ranges that begin and end
 * inside a group, on a group boundary, with an odd or even number of whole groups or fewer than
 * two, odd and even block counts; and the int16 sums' worst case in some blocks (Q4_0 nibbles
 * all 15, Q5_0 values all 31, Q8_0 quants all -128, activations all +127 or -127). Q5_0's decode
 * has its own AVX-512 kernel (one group at a time): 1 token with every range. */
static void test_x8_tiles(void) {
    static const int ranges[][3] = {{48, 0, 48}, {48, 0, 40}, {48, 3, 48}, {48, 8, 45}, {40, 5, 37},
                                    {64, 16, 64}, {56, 0, 56}, {24, 0, 24}, {17, 1, 17}, {16, 0, 16}};
    static const int blocks[] = {1, 2, 3, 8};
    static const g3_wtype types[] = {GEMMA3_WEIGHTS_Q8_0, GEMMA3_WEIGHTS_Q4_0, GEMMA3_WEIGHTS_Q5_0};
    enum { T = 17 };
    int bad = 0, stray = 0, n = 0;
    for (int wi = 0; wi < 3; wi++)
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
            for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
                const g3_wtype wt = types[wi];
                const int rows = ranges[ri][0], r0 = ranges[ri][1], r1 = ranges[ri][2];
                const int n_in = blocks[bi] * G3_QK, nb = blocks[bi];
                const size_t rb = g3_wtype_row_bytes(wt, n_in), bs = rb / (size_t)nb;
                const size_t ldy = (size_t)rows + 3, ab = g3_act_row_bytes(n_in);
                float *deq = xmalloc((size_t)rows * n_in * sizeof *deq);
                float *X = xmalloc((size_t)T * n_in * sizeof *X);
                char *w = make_weights(wt, rows, n_in, deq);
                for (int r = 0; r < rows; r++)
                    for (int b = 0; b < nb; b++)
                        if (rng_u32() % 5 == 0) /* keep the scale, the largest quants */
                            memset(w + (size_t)r * rb + (size_t)b * bs + 2, wt == GEMMA3_WEIGHTS_Q8_0 ? 0x80 : 0xff, bs - 2);
                fill_act(X, T * n_in, 1);
                for (int b = 0; b < T * nb; b++)
                    if (rng_u32() % 5 == 0)
                        for (int j = 0; j < G3_QK; j++) X[b * G3_QK + j] = b % 2 ? 127.0f : -127.0f;
                const size_t x8_bytes = g3_x8_bytes(wt, rows, n_in);
                void *x8 = xmalloc(x8_bytes);
                g3_x8_pack(wt, x8, w, rows, n_in);
                const guarded Wg = guarded_copy(x8, x8_bytes);
                char *Xq = xmalloc(ab * T);
                for (int t = 0; t < T; t++) tables[0]->quantize_act(Xq + (size_t)t * ab, n_in, X + (size_t)t * n_in, 0, n_in);
                float *want = xmalloc(ldy * T * sizeof *want), *Y = xmalloc(ldy * T * sizeof *Y);
                tables[0]->matmul_q_x8[wt](want, ldy, Wg.data, Xq, T, n_in, r0, r1);
                for (int ti = 1; ti < n_tables; ti++) {
                    if (!tables[ti]->matmul_q_x8[wt]) continue;
                    for (int nt = 1; nt <= T; nt++, n++) {
                        for (size_t i = 0; i < ldy * T; i++) Y[i] = -7.0f;
                        tables[ti]->matmul_q_x8[wt](Y, ldy, Wg.data, Xq, nt, n_in, r0, r1);
                        for (int t = 0; t < T; t++)
                            for (int r = 0; r < (int)ldy; r++) {
                                const size_t i = (size_t)t * ldy + r;
                                if (t >= nt || r < r0 || r >= r1) {
                                    stray += Y[i] != -7.0f;
                                } else if (memcmp(&Y[i], &want[i], sizeof(float)) && bad++ < 5) {
                                    fprintf(stderr, "%s %s x8 rows [%d, %d) of %d, n_in %d, %d tokens: y[%d][%d] %.9g, expected %.9g\n",
                                            tables[ti]->name, g3_wtype_name(wt), r0, r1, rows, n_in, nt, t, r, Y[i], want[i]);
                                }
                            }
                    }
                }
                free(deq), free(X), free(w), free(x8), free(Xq), free(want), free(Y);
                munmap(Wg.map, Wg.map_bytes);
            }
    CHECK_MSG(bad == 0, "x8 tiles: %d outputs differ from the scalar x8 kernel", bad);
    CHECK_MSG(stray == 0, "x8 tiles: %d stores outside the rows and tokens asked for", stray);
    printf("x8 tiles: %d calls\n", n);
}

/* Q4_0 integer lane sums are the same in every SIMD variant of one width (nibbles times int8,
 * plus the correction in lane 0; the VNNI variants' unshifted high nibbles and 1/16 scale are
 * exact), so avx2 == avx2vnni and avx512 == avx512vnni bitwise. */
static void test_q4_variants_agree(void) {
    static const char *pairs[2][2] = {{"avx2", "avx2vnni"}, {"avx512", "avx512vnni"}};
    for (int p = 0; p < 2; p++) {
        const g3_quant_kernels *a = NULL, *b = NULL;
        for (int i = 0; i < n_tables; i++) {
            if (strcmp(tables[i]->name, pairs[p][0]) == 0) a = tables[i];
            if (strcmp(tables[i]->name, pairs[p][1]) == 0) b = tables[i];
        }
        if (!a || !b) continue;
        enum { ROWS = 37, N_IN = 41 * G3_QK, T = 9 };
        float *deq = xmalloc((size_t)ROWS * N_IN * sizeof *deq), *x = xmalloc((size_t)T * N_IN * sizeof *x);
        void *w = make_weights(GEMMA3_WEIGHTS_Q4_0, ROWS, N_IN, deq);
        char *xq = xmalloc(g3_act_row_bytes(N_IN) * T);
        float ya[T * ROWS], yb[T * ROWS];
        fill_act(x, T * N_IN, 1);
        for (int t = 0; t < T; t++)
            a->quantize_act(xq + (size_t)t * g3_act_row_bytes(N_IN), N_IN, x + (size_t)t * N_IN, 0, N_IN);
        a->matmul_q[GEMMA3_WEIGHTS_Q4_0](ya, ROWS, w, xq, T, N_IN, 0, ROWS);
        b->matmul_q[GEMMA3_WEIGHTS_Q4_0](yb, ROWS, w, xq, T, N_IN, 0, ROWS);
        CHECK_MSG(memcmp(ya, yb, sizeof ya) == 0, "%s and %s Q4_0 differ", a->name, b->name);
        free(deq), free(x), free(w), free(xq);
    }
}

/* The level getters: scalar always, VNNI variants preferred, all listed variants distinct. */
static void test_tables(void) {
    n_tables = g3_quant_kernels_all(tables, 8);
    CHECK(n_tables >= 1);
    CHECK(strcmp(tables[0]->name, "scalar") == 0);
    CHECK(g3_quant_kernels_get(G3_ISA_SCALAR) == tables[0]);
    for (int isa = G3_ISA_SCALAR; isa <= G3_ISA_AVX512; isa++) {
        const g3_quant_kernels *k = g3_quant_kernels_get((g3_isa)isa);
        int listed = 0;
        for (int i = 0; i < n_tables; i++) listed += k == tables[i];
        CHECK_MSG(!k || listed == 1, "isa %d: table not listed once", isa);
        CHECK_MSG(!k == !g3_kernels_get((g3_isa)isa), "isa %d: quant and bf16 kernels disagree", isa);
    }
    for (int i = 0; i < n_tables; i++) printf("table %s\n", tables[i]->name);
}

int main(void) {
    test_reference_blocks();
    test_tiny_blocks();
    test_roundtrip();
    test_f16_fixed();
    test_f16_hw();
    test_tables();
    test_quantize_act();
    test_x8_layout();
    test_matmul();
    test_x8_tiles();
    test_q4_variants_agree();
    return check_report();
}
