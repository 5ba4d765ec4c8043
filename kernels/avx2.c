/* kernels/avx2.c - the AVX2 + FMA table ("avx2"). Its results differ from the scalar ones by
 * rounding only (bounds in tests/test-kernels.c) and are bit-reproducible within the table. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/simd.h"
#include "kernels/amx-tiles.h"

_Thread_local _Alignas(64) unsigned char g3_matmul_scratch[G3_MATMUL_SCRATCH_BYTES];

/* ==== AVX2 + FMA ========================================================================== */

/* Every SIMD function carries its own target attribute, so one portable build (no -march)
 * holds every path and g3_kernels_get() picks one at run time. Helpers are always_inline so
 * they take on their caller's target. */
#define AVX2 __attribute__((target("avx2,fma")))

/* The determinism contract of matmul, for every SIMD table: each output y[t][r] is one dot
 * product kept in ONE vector accumulator of its own, fed k-chunks in increasing order (the last
 * chunk zero-padded), then reduced horizontally by one fixed tree. A tile of R rows x C tokens
 * just runs R*C such dot products side by side and reduces them together with the same tree,
 * so the value never depends on the tile shape, n_tok, r0/r1 or the thread. (How a chunk feeds
 * the accumulator is the table's own: AVX2's bf16 x bf16 takes 16 elements at a time, below.) */

INLINE AVX2 __m256 widen8_avx2(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The 8 bf16 at p widened (the same values): a broadcast load and one byte shuffle that puts
 * each value in the high half of its lane, one operation where widen8_avx2 takes two. */
INLINE AVX2 __m256 widen8_load_avx2(const uint16_t *p) {
    const __m256i pick = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,
                                          -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(x, pick));
}

/* Horizontal sums of 8 vectors at once. Lane 4h+m of the result is the sum of v[2m+h], each
 * reduced by the same tree (lane i + lane i+4, then i+2, then i+1). */
INLINE AVX2 __m256 hsum8_avx2(const __m256 v[8]) {
    __m256 a[4], b[2];
    for (int i = 0; i < 4; i++)
        a[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
    for (int i = 0; i < 2; i++)
        b[i] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], 0x88), _mm256_shuffle_ps(b[0], b[1], 0xDD));
}

/* Reduces the R x C accumulators acc[i*C + c] (R*C <= 16) and stores rows r..r+nr-1 of tokens
 * t..t+nt-1, eight outputs per hsum8_avx2. Unused slots are zero; they cost a few adds and are
 * never stored. */
INLINE AVX2 void store_tile_avx2(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                 const __m256 *acc, int R, int C) {
    __m256 v[2][8];
    float out[16];
    for (int g = 0; g < (R * C > 8 ? 2 : 1); g++)
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) v[g][i] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < R; i++)
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            int lane = c * R + i; /* output lane: tokens major, rows contiguous */
            v[lane / 8][2 * (lane % 4) + lane % 8 / 4] = acc[i * C + c];
        }
    _mm256_storeu_ps(out, hsum8_avx2(v[0]));
    if (R * C > 8) _mm256_storeu_ps(out + 8, hsum8_avx2(v[1]));
    for (int c = 0; c < nt; c++) {
        float *y = Y + (size_t)(t + c) * ldy + r;
        if (nr == R) memcpy(y, out + c * R, (size_t)R * sizeof(float)); /* a constant size */
        else memcpy(y, out + c * R, (size_t)nr * sizeof(float));
    }
}

/* Decode's R rows (R <= 8) are R short streams a row apart; Zen 3's hardware prefetcher keeps
 * up with them only on long rows (a synthetic 270m-shaped LM head, rows of 640 bf16, was read at
 * ~56 % of the bandwidth). So each k-step also fetches the next tile, the R rows that follow in
 * memory, as one linear stream: as many BYTES as the step reads, from P, the same fraction of the
 * way into the next tile (270m decode ~20 % faster, 1b ~8 %, 4b alike). P is an integer so that
 * past the last row it is computed without forming a wild pointer (a prefetch never faults). */
INLINE AVX2 void prefetch_ahead_avx2(uintptr_t p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T0);
}

/* One R x C tile (R*C <= 8) of a bf16-weight matmul against fp32 X, in 8-wide chunks of k.
 * Rows past nr and tokens past nt repeat the last valid one (so every load stays in bounds) and
 * are not stored. */
INLINE AVX2 void tile_f32_avx2(float *Y, size_t ldy, const uint16_t *W, const float *X, size_t ldx,
                               int n_in, int r, int nr, int t, int nt, int R, int C) {
    const uint16_t *w[8];
    const float *x[8];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) x[c] = X + (size_t)(t + clamp_to_last(c, nt)) * ldx;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < R * C; i++) acc[i] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 8 <= n_in; k += 8) {
        if (C == 1) /* decode */
            prefetch_ahead_avx2((uintptr_t)w[0] + ((size_t)R * n_in + (size_t)k * R) * 2, 16 * (size_t)R);
        __m256 xv[8];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) xv[c] = _mm256_loadu_ps(x[c] + k);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            __m256 wv = widen8_load_avx2(w[i] + k);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) acc[i * C + c] = _mm256_fmadd_ps(wv, xv[c], acc[i * C + c]);
        }
    }
    if (k < n_in) { /* the tail chunk, zero-padded through small stack copies */
        int rem = n_in - k;
        __m256 xv[8];
        for (int c = 0; c < C; c++) {
            float tmp[8] = {0};
            memcpy(tmp, x[c] + k, (size_t)rem * sizeof *tmp);
            xv[c] = _mm256_loadu_ps(tmp);
        }
        for (int i = 0; i < R; i++) {
            uint16_t tmp[8] = {0};
            memcpy(tmp, w[i] + k, (size_t)rem * sizeof *tmp);
            __m256 wv = widen8_avx2(_mm_loadu_si128((const __m128i *)tmp));
            for (int c = 0; c < C; c++) acc[i * C + c] = _mm256_fmadd_ps(wv, xv[c], acc[i * C + c]);
        }
    }
    store_tile_avx2(Y, ldy, r, nr, t, nt, acc, R, C);
}

/* The 16 bf16 at p as fp32, the even elements (0, 2, .., 14) in *even and the odd ones in *odd:
 * one plain load and two bit operations, where widening 8 in order takes a shuffle each (and
 * Zen 3 runs shuffles and FMAs on shared ports: 4x2 prefill tiles ~20 % faster this way). */
INLINE AVX2 void widen16_split_avx2(const uint16_t *p, __m256 *even, __m256 *odd) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* Row i's accumulators, tokens 0..C-1, fed one 16-element chunk: its even elements, then its
 * odd ones (lane j: elements 2j, then 2j + 1). */
INLINE AVX2 void fma_split_avx2(__m256 *acc, __m256 we, __m256 wo, const __m256 *xe,
                                const __m256 *xo, int C) {
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) acc[c] = _mm256_fmadd_ps(we, xe[c], acc[c]);
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) acc[c] = _mm256_fmadd_ps(wo, xo[c], acc[c]);
}

/* One R x C tile (R*C <= 8) of a bf16 x bf16 matmul in 16-wide chunks of k (fma_split_avx2),
 * the last chunk zero-padded. Rows and tokens past nr, nt as in tile_f32_avx2. */
INLINE AVX2 void tile_bf16_avx2(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                size_t ldx, int n_in, int r, int nr, int t, int nt, int R, int C) {
    const uint16_t *w[8];
    const uint16_t *x[8];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) x[c] = X + (size_t)(t + clamp_to_last(c, nt)) * ldx;
    __m256 acc[8], xe[8], xo[8], we, wo;
#pragma GCC unroll 8
    for (int i = 0; i < R * C; i++) acc[i] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 16 <= n_in; k += 16) {
        if (C == 1) /* decode */
            prefetch_ahead_avx2((uintptr_t)w[0] + ((size_t)R * n_in + (size_t)k * R) * 2, 32 * (size_t)R);
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) widen16_split_avx2(x[c] + k, &xe[c], &xo[c]);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            widen16_split_avx2(w[i] + k, &we, &wo);
            fma_split_avx2(acc + i * C, we, wo, xe, xo, C);
        }
    }
    if (k < n_in) { /* the tail chunk through zero-padded copies */
        const size_t rem = (size_t)(n_in - k) * sizeof(uint16_t);
        uint16_t tmp[16] = {0};
        for (int c = 0; c < C; c++) {
            memcpy(tmp, x[c] + k, rem);
            widen16_split_avx2(tmp, &xe[c], &xo[c]);
        }
        for (int i = 0; i < R; i++) {
            memcpy(tmp, w[i] + k, rem);
            widen16_split_avx2(tmp, &we, &wo);
            fma_split_avx2(acc + i * C, we, wo, xe, xo, C);
        }
    }
    store_tile_avx2(Y, ldy, r, nr, t, nt, acc, R, C);
}

/* ---- AVX2 prefill from packed activations. The 4 x 2 tile above converts W and X inside its
 * loop and holds its 8 accumulators, X chunks and W chunk in 15 of the 16 registers: about 60 %
 * of the FMA peak on Zen 3, its 8 chains of two dependent FMAs per chunk (latency 4) just enough
 * for 2 FMAs a cycle, so any stall costs. So a batch converts its block of tokens once, into the
 * per-thread scratch, in the order tile_bf16_avx2 feeds X (per chunk of 16, the 8 even elements
 * then the 8 odd ones, as fp32; the last chunk zero-padded). A 3 x 4 tile then loads each token
 * vector once for 3 FMAs: 12 accumulators, 3 weight vectors and the token vector fill the 16
 * registers. Its 4 tokens' slice of k (at most PACK_KMAX) stays in L1 while the tiles of a block
 * of rows pass over it, reading W (bf16, half the bytes of fp32) from L2; each FMA then needs
 * 8 bytes from L2, where X read from L2 would need 11. Every accumulator takes the same products
 * in the same order as in tile_bf16_avx2, so the results are bitwise those of decode. */
enum { PACK_R = 3, PACK_C = 4, PACK_TOKENS = 96, PACK_ROWS = 48, PACK_KMAX = 1280, PACK_L2 = 384 << 10 };

/* Tokens [0, n) of X (bf16, row stride ldx) into P at stride ldp floats (n_in rounded up to 16). */
INLINE AVX2 void pack_split_avx2(float *P, size_t ldp, const uint16_t *X, size_t ldx, int n,
                                 int n_in) {
    for (int c = 0; c < n; c++) {
        const uint16_t *x = X + (size_t)c * ldx;
        float *p = P + (size_t)c * ldp;
        int k = 0;
        __m256 e, o;
        for (; k + 16 <= n_in; k += 16) {
            widen16_split_avx2(x + k, &e, &o);
            _mm256_storeu_ps(p + k, e);
            _mm256_storeu_ps(p + k + 8, o);
        }
        if (k < n_in) {
            uint16_t tmp[16] = {0};
            memcpy(tmp, x + k, (size_t)(n_in - k) * sizeof *tmp);
            widen16_split_avx2(tmp, &e, &o);
            _mm256_storeu_ps(p + k, e);
            _mm256_storeu_ps(p + k + 8, o);
        }
    }
}

/* 3 rows' even (odd) products of one chunk with the 4 tokens' packed halves at x[c] + k. */
INLINE AVX2 void fma_3x4_avx2(__m256 *acc, const __m256 *wv, const float *const *x, int k) {
#pragma GCC unroll 4
    for (int c = 0; c < PACK_C; c++) {
        __m256 xv = _mm256_loadu_ps(x[c] + k);
#pragma GCC unroll 3
        for (int i = 0; i < PACK_R; i++)
            acc[i * PACK_C + c] = _mm256_fmadd_ps(wv[i], xv, acc[i * PACK_C + c]);
    }
}

/* One 3 x 4 tile over k in [k0, k1) (k0 a multiple of 16) from the packed tokens Xp (stride ldp,
 * indexed by k): with k0 > 0 the accumulators resume from save[], with k1 < n_in they are parked
 * there (k-blocking; parking a register is exact), else reduced and stored. Rows past nr and
 * tokens past nt repeat the last valid one. The odd halves of W come from two shifts rather
 * than a mask, which would need a 17th register. */
INLINE AVX2 void tile_packed_avx2(float *Y, size_t ldy, const uint16_t *W, const float *Xp,
                                  size_t ldp, int n_in, int r, int nr, int t, int nt, int k0,
                                  int k1, __m256 *save) {
    const uint16_t *w[PACK_R];
    const float *x[PACK_C];
#pragma GCC unroll 3
    for (int i = 0; i < PACK_R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 4
    for (int c = 0; c < PACK_C; c++) x[c] = Xp + (size_t)clamp_to_last(c, nt) * ldp;
    __m256 acc[PACK_R * PACK_C], wv[PACK_R];
#pragma GCC unroll 12
    for (int i = 0; i < PACK_R * PACK_C; i++) acc[i] = k0 > 0 ? save[i] : _mm256_setzero_ps();
    int k = k0;
    for (; k + 16 <= k1; k += 16) {
#pragma GCC unroll 3
        for (int i = 0; i < PACK_R; i++)
            wv[i] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(w[i] + k)), 16));
        fma_3x4_avx2(acc, wv, x, k);
#pragma GCC unroll 3
        for (int i = 0; i < PACK_R; i++)
            wv[i] = _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(w[i] + k)), 16), 16));
        fma_3x4_avx2(acc, wv, x, k + 8);
    }
    if (k < k1) { /* the tail chunk (k1 == n_in): W through zero-padded copies */
        uint16_t tmp[PACK_R][16] = {{0}};
        __m256 wo[PACK_R];
        for (int i = 0; i < PACK_R; i++) {
            memcpy(tmp[i], w[i] + k, (size_t)(n_in - k) * sizeof(uint16_t));
            widen16_split_avx2(tmp[i], &wv[i], &wo[i]);
        }
        fma_3x4_avx2(acc, wv, x, k);
        fma_3x4_avx2(acc, wo, x, k + 8);
    }
    if (k1 < n_in) {
#pragma GCC unroll 12
        for (int i = 0; i < PACK_R * PACK_C; i++) save[i] = acc[i];
        return;
    }
    store_tile_avx2(Y, ldy, r, nr, t, nt, acc, PACK_R, PACK_C);
}

/* A batch of bf16 X: blocks of tokens packed into the scratch, then per block of PACK_ROWS rows
 * and slice of k, each token tile's slice (in L1) meets the block's row tiles in turn (their W
 * slice in L2), the accumulators parked in the scratch between slices. A block holds up to
 * PACK_TOKENS tokens, fewer where its slice of X and the rows' slice of W would not fit PACK_L2
 * (three quarters of Zen 3's L2; 96 tokens' slice of 1,280 alone would take 480 KB). W is read
 * from memory once per block of tokens. (Prefetching the next W slice in shares over the token
 * tiles gained nothing measurable and cost 3-5 % of 4B prefill in its own instructions.)
 * Returns 0 (nothing done) when not even PACK_C packed tokens fit the scratch. */
INLINE AVX2 int matmul_packed_avx2(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                   size_t ldx, int n_tok, int n_in, int r0, int r1) {
    enum { PARK = PACK_ROWS / PACK_R * (PACK_TOKENS / PACK_C) * PACK_R * PACK_C };
    __m256 *park = (__m256 *)(void *)g3_matmul_scratch;
    float *Xp = (float *)(park + PARK);
    size_t ldp = ((size_t)n_in + 15) / 16 * 16;
    size_t fit = (G3_MATMUL_SCRATCH_BYTES - PARK * sizeof(__m256)) / (ldp * sizeof(float));
    if (fit < PACK_C) return 0;
    int n_slices = (n_in + PACK_KMAX - 1) / PACK_KMAX;
    int slice = ((n_in + n_slices - 1) / n_slices + 15) / 16 * 16;
    size_t in_l2 = (PACK_L2 - (size_t)PACK_ROWS * slice * sizeof *W) / ((size_t)slice * sizeof(float));
    if (fit > in_l2) fit = in_l2 > PACK_C ? in_l2 : PACK_C;
    int tb = fit < PACK_TOKENS ? (int)fit / PACK_C * PACK_C : PACK_TOKENS;
    for (int t0 = 0; t0 < n_tok; t0 += tb) {
        int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
        pack_split_avx2(Xp, ldp, X + (size_t)t0 * ldx, ldx, t1 - t0, n_in);
        for (int rb = r0; rb < r1; rb += PACK_ROWS) {
            int rb1 = r1 - rb < PACK_ROWS ? r1 : rb + PACK_ROWS;
            for (int k0 = 0; k0 < n_in; k0 += slice) {
                int k1 = n_in - k0 <= slice ? n_in : k0 + slice;
                for (int t = t0; t < t1; t += PACK_C) {
                    int nt = t1 - t < PACK_C ? t1 - t : PACK_C;
                    __m256 *save = park + (t - t0) / PACK_C * (PACK_ROWS / PACK_R) * PACK_R * PACK_C;
                    for (int r = rb; r < rb1; r += PACK_R, save += PACK_R * PACK_C)
                        tile_packed_avx2(Y, ldy, W, Xp + (size_t)(t - t0) * ldp, ldp, n_in, r,
                                         rb1 - r < PACK_R ? rb1 - r : PACK_R, t, nt, k0, k1, save);
                }
            }
        }
    }
    return 1;
}

/* XBF16: X holds bf16 (tile_bf16_avx2), or fp32 (tile_f32_avx2, exact mode). */
INLINE AVX2 void tile_avx2(float *Y, size_t ldy, const uint16_t *W, const void *X, size_t ldx,
                           int xbf16, int n_in, int r, int nr, int t, int nt, int R, int C) {
    if (xbf16) tile_bf16_avx2(Y, ldy, W, X, ldx, n_in, r, nr, t, nt, R, C);
    else tile_f32_avx2(Y, ldy, W, X, ldx, n_in, r, nr, t, nt, R, C);
}

/* Tiles: 8 rows x 1 token for decode (8 independent FMA chains stream 8 rows); batches of bf16
 * X through matmul_packed_avx2 (token by token, as decode, the rare X too wide for the
 * scratch); 4 x 2 for batches of fp32 X (exact mode), tokens blocked so a block of X stays in
 * L2 while every row tile of the thread's share passes over it. */
INLINE AVX2 void matmul_avx2(float *Y, size_t ldy, const uint16_t *W, const void *X, size_t ldx,
                             int xbf16, int n_tok, int n_in, int r0, int r1) {
    if (n_tok > 1 && xbf16 && matmul_packed_avx2(Y, ldy, W, X, ldx, n_tok, n_in, r0, r1)) return;
    if (n_tok == 1 || xbf16) {
        for (int t = 0; t < n_tok; t++)
            for (int r = r0; r < r1; r += 8)
                tile_avx2(Y, ldy, W, X, ldx, xbf16, n_in, r, r1 - r < 8 ? r1 - r : 8, t, 1, 8, 1);
        return;
    }
    size_t x_row_bytes = (size_t)n_in * sizeof(float);
    int tb = (int)((256u << 10) / x_row_bytes) & ~1;
    if (tb < 2) tb = 2;
    for (int t0 = 0; t0 < n_tok; t0 += tb) {
        int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;
        for (int r = r0; r < r1; r += 4) {
            int nr = r1 - r < 4 ? r1 - r : 4;
            for (int t = t0; t < t1; t += 2)
                tile_avx2(Y, ldy, W, X, ldx, xbf16, n_in, r, nr, t, t1 - t < 2 ? t1 - t : 2, 4, 2);
        }
    }
}

static AVX2 void matmul_f32_avx2(float *Y, size_t ldy, const uint16_t *W, const float *X,
                                 size_t ldx, int n_tok, int n_in, int r0, int r1) {
    matmul_avx2(Y, ldy, W, X, ldx, 0, n_tok, n_in, r0, r1);
}

static AVX2 void matmul_bf16_avx2(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                  size_t ldx, int n_tok, int n_in, int r0, int r1) {
    matmul_avx2(Y, ldy, W, X, ldx, 1, n_tok, n_in, r0, r1);
}

INLINE AVX2 float hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE AVX2 float hmax_avx2(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Loads the n < 8 values at p into a vector whose other lanes hold `pad`. */
INLINE AVX2 __m256 load_partial_avx2(const float *p, int n, float pad) {
    float tmp[8];
    for (int i = 0; i < 8; i++) tmp[i] = i < n ? p[i] : pad;
    return _mm256_loadu_ps(tmp);
}

INLINE AVX2 __m256 load_partial_bf16_avx2(const uint16_t *p, int n) {
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, (size_t)n * sizeof *tmp);
    return widen8_avx2(_mm_loadu_si128((const __m128i *)tmp));
}

INLINE AVX2 void store_partial_avx2(float *p, __m256 v, int n) {
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    memcpy(p, tmp, (size_t)n * sizeof *p);
}

/* exp(x) for every lane, within ~2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6
 * polynomial, then two exact power-of-two scalings (2^n split in halves so that results down
 * in the subnormal range round once, correctly, and -inf gives exactly 0). Inputs clamp to
 * [-120, 89]: below that the result is 0, above it +inf. */
INLINE AVX2 __m256 exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-120.0f)), _mm256_set1_ps(89.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* The kernels whose body is the same at every width (kernels/vec.inc), at 8 lanes: partial
 * chunks through small stack copies. */
#define V_TARGET AVX2
#define V_SUF avx2
#define V __m256
#define V_W 8
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_LOADN(p, n, pad) load_partial_avx2(p, n, pad)
#define V_STOREN(p, v, n) store_partial_avx2(p, v, n)
#define V_LOAD_BF16(p) widen8_load_avx2(p)
#define V_LOADN_BF16(p, n) load_partial_bf16_avx2(p, n)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_ZERO() _mm256_setzero_ps()
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_DIV(a, b) _mm256_div_ps(a, b)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_HSUM(v) hsum_avx2(v)
#define V_HMAX(v) hmax_avx2(v)
#define V_EXP(v) exp_avx2(v)
#define V_TAIL_ACC acc1
#define V_AXPY_COLS 2
#include "kernels/vec.inc"

/* Round-to-nearest-even on the low 16 bits; NaN keeps its sign and top payload and gets the
 * quiet bit, exactly as g3_f32_to_bf16. */
INLINE AVX2 __m256i to_bf16_lanes_avx2(__m256 f) {
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                        _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

static AVX2 double log_sum_exp_avx2(const float *x, int n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 vmax = _mm256_set1_ps(-INFINITY), finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        vmax = _mm256_max_ps(vmax, v);
        finite = _mm256_and_ps(finite, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_LT_OQ));
    }
    if (_mm256_movemask_ps(finite) != 0xff) return NAN;
    float lanes[8], max = -INFINITY;
    _mm256_storeu_ps(lanes, vmax);
    for (int j = 0; j < 8; j++) max = lanes[j] > max ? lanes[j] : max;
    for (int j = i; j < n; j++) {
        if (!isfinite(x[j])) return NAN;
        max = x[j] > max ? x[j] : max;
    }
    const __m256 vm = _mm256_set1_ps(max);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) { /* exp in float, the sum in double lanes */
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double d[4], sum = 0;
    _mm256_storeu_pd(d, _mm256_add_pd(lo, hi));
    for (int j = 0; j < 4; j++) sum += d[j];
    for (; i < n; i++) sum += expf(x[i] - max);
    return max + log(sum);
}

static AVX2 void to_bf16_avx2(uint16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = to_bf16_lanes_avx2(_mm256_loadu_ps(src + i));
        __m256i b = to_bf16_lanes_avx2(_mm256_loadu_ps(src + i + 8));
        /* packus interleaves 128-bit halves; the permute puts them back in order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
        _mm256_storeu_si256((__m256i *)(dst + i), p);
    }
    for (; i < n; i++) dst[i] = g3_f32_to_bf16(src[i]);
}

const g3_kernels g3_kernels_avx2 = {
    .name = "avx2",
    .isa = G3_ISA_AVX2,
    .matmul_f32 = matmul_f32_avx2,
    .matmul_bf16 = matmul_bf16_avx2,
    .rmsnorm = rmsnorm_avx2,
    .gelu_tanh_mul = gelu_tanh_mul_avx2,
    .softmax = softmax_avx2,
    .log_sum_exp = log_sum_exp_avx2,
    .dot_f32 = dot_f32_avx2,
    .dot_bf16 = dot_bf16_avx2,
    .axpy_f32 = axpy_f32_avx2,
    .axpy_bf16 = axpy_bf16_avx2,
    .dots_f32 = dots_f32_avx2,
    .dots_bf16 = dots_bf16_avx2,
    .axpys_f32 = axpys_f32_avx2,
    .axpys_bf16 = axpys_bf16_avx2,
    .to_bf16 = to_bf16_avx2,
};

#endif
