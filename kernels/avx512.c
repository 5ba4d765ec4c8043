/* kernels/avx512.c - the AVX-512 F/BW/VL/DQ tables: "avx512" (whose matmul_bf16 widens bf16
 * to fp32), "avx512bf16" (vdpbf16ps for matmul_bf16) and "amx-bf16" (AMX tiles for it,
 * kernels/amx-bf16.inc). Results differ from the scalar ones by rounding only and are
 * bit-reproducible within each table. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/simd.h"

#define AVX2 __attribute__((target("avx2,fma")))

/* ==== AVX-512 (F/BW/VL/DQ; BF16 dot products where present) =============================== */

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

INLINE AVX512 __m512 widen16_512(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE AVX512 __mmask16 mask16_512(int n) { return (__mmask16)((1u << n) - 1u); }

/* Horizontal sums of 16 vectors at once. Lane 4q+m of the result is the sum of v[4m+q], each
 * reduced by the same tree (lane i + lane i+8, then i+4, i+2, i+1), whichever vectors share
 * the call: the matmul determinism contract rests on this. */
INLINE AVX512 __m512 hsum16_512(const __m512 v[16]) {
    __m512 a[8], b[4], c[2];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
}

/* Reduces the R x C accumulators acc[i*C + c] (R*C <= 16) and stores rows r..r+nr-1 of tokens
 * t..t+nt-1. Unused slots are zero; they cost a few adds and are never stored. */
INLINE AVX512 void store_tile_512(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                  const __m512 *acc, int R, int C) {
    __m512 v[16];
    for (int i = 0; i < 16; i++) v[i] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < R; i++)
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            int lane = c * R + i; /* output lane: tokens major, rows contiguous */
            v[4 * (lane % 4) + lane / 4] = acc[i * C + c];
        }
    __m512 s = hsum16_512(v);
    for (int c = 0; c < nt; c++) {
        float *y = Y + (size_t)(t + c) * ldy + r;
        /* the masked store touches only y[0..nr) */
        __m512i idx = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                       _mm512_set1_epi32(c * R));
        __m512 sc = c == 0 ? s : _mm512_permutexvar_ps(idx, s); /* token c's lanes first */
        _mm512_mask_storeu_ps(y, mask16_512(nr), sc);
    }
}

/* Stores an R x C tile (R*C <= 32) in groups of 16/C rows, one 16-vector reduction each. */
INLINE AVX512 void store_rows_512(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                  const __m512 *acc, int R, int C) {
    int G = 16 / C;
#pragma GCC unroll 16
    for (int g = 0; g < R; g += G) {
        int rg = R - g < G ? R - g : G;
        if (nr - g <= 0) break;
        store_tile_512(Y, ldy, r + g, nr - g < rg ? nr - g : rg, t, nt, acc + g * C, rg, C);
    }
}

/* Ends a tile: either parks the accumulators for the next k-block or reduces and stores. */
INLINE AVX512 void finish_tile_512(float *Y, size_t ldy, int r, int nr, int t, int nt,
                                   __m512 *acc, int R, int C, int n_in, int k1, __m512 *save) {
    if (k1 < n_in) {
#pragma GCC unroll 32
        for (int i = 0; i < R * C; i++) save[i] = acc[i];
        return;
    }
    store_rows_512(Y, ldy, r, nr, t, nt, acc, R, C);
}

/* Row/token pointers of a tile; rows past nr and tokens past nt repeat the last valid one, so
 * every load stays in bounds (their results are computed and dropped). A tile covers k in
 * [k0, k1): with k0 > 0 its accumulators resume from save[], with k1 < n_in they go back there
 * (k-blocking, see TOKEN_BLOCKS_K_512); saving a register and loading it back is exact, so a
 * blocked dot product is bitwise the unblocked one. */
#define TILE_POINTERS(XT)                                                                      \
    const uint16_t *w[16];                                                                     \
    const XT *x[16];                                                                           \
    _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                       \
        w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;                                  \
    _Pragma("GCC unroll 16") for (int c = 0; c < C; c++)                                       \
        x[c] = X + (size_t)(t + clamp_to_last(c, nt)) * ldx;                                   \
    __m512 acc[32];                                                                            \
    _Pragma("GCC unroll 32") for (int i = 0; i < R * C; i++)                                   \
        acc[i] = k0 > 0 ? save[i] : _mm512_setzero_ps();

/* Decode streams R rows at once; the hardware prefetcher does not keep that many streams
 * ahead, so each k-step asks for the same 64-byte line of the next tile's rows (R rows on).
 * Past the last row this touches no memory (a prefetch never faults), hence the integer
 * arithmetic rather than an out-of-bounds pointer. */
INLINE AVX512 void prefetch_next_tile(const uint16_t *const *w, int R, int n_in, int k) {
    size_t ahead = (size_t)R * (size_t)n_in * sizeof(uint16_t);
#pragma GCC unroll 16
    for (int i = 0; i < R; i++)
        _mm_prefetch((const char *)((uintptr_t)(w[i] + k) + ahead), _MM_HINT_T0);
}

/* Splits 32 bf16 (16 adjacent k-pairs) into fp32 vectors of the even and of the odd k: one
 * shift and one mask, half the work of widening two halves with vpmovzxwd. */
INLINE AVX512 void split_bf16_512(__m512i v, __m512 *even, __m512 *odd) {
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}

/* The same even/odd split of 32 fp32 activations (two permutes, shared by the tile's rows). */
INLINE AVX512 void split_f32_512(__m512 lo, __m512 hi, __m512 *even, __m512 *odd) {
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    *even = _mm512_permutex2var_ps(lo, ie, hi);
    *odd = _mm512_permutex2var_ps(lo, io, hi);
}

/* One R x C tile of the widening matmuls, 32 k per step: lane j of an accumulator takes the
 * products of k = 32s + 2j and then of k = 32s + 2j + 1 (two FMAs). X is fp32 (matmul_f32)
 * or, when XBF16, bf16 split like W (matmul_bf16 on AVX-512 without the BF16 extension). */
INLINE AVX512 void tile_widen_512(float *Y, size_t ldy, const uint16_t *W, const void *Xv,
                                  size_t ldx, int xbf16, int n_in, int r, int nr, int t, int nt,
                                  int R, int C, int k0, int k1, __m512 *save) {
    const uint16_t *w[16];
    const float *xf[16];
    const uint16_t *xh[16];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) w[i] = W + (size_t)(r + clamp_to_last(i, nr)) * n_in;
#pragma GCC unroll 16
    for (int c = 0; c < C; c++) {
        size_t off = (size_t)(t + clamp_to_last(c, nt)) * ldx;
        xf[c] = (const float *)Xv + off;
        xh[c] = (const uint16_t *)Xv + off;
    }
    __m512 acc[32];
#pragma GCC unroll 32
    for (int i = 0; i < R * C; i++) acc[i] = k0 > 0 ? save[i] : _mm512_setzero_ps();
    int k = k0;
    for (; k + 32 <= k1; k += 32) {
        if (C == 1) prefetch_next_tile(w, R, n_in, k);
        __m512 xe[16], xo[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            if (xbf16) split_bf16_512(_mm512_loadu_si512(xh[c] + k), &xe[c], &xo[c]);
            else split_f32_512(_mm512_loadu_ps(xf[c] + k), _mm512_loadu_ps(xf[c] + k + 16), &xe[c], &xo[c]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512 we, wo;
            split_bf16_512(_mm512_loadu_si512(w[i] + k), &we, &wo);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++) {
                acc[i * C + c] = _mm512_fmadd_ps(we, xe[c], acc[i * C + c]);
                acc[i * C + c] = _mm512_fmadd_ps(wo, xo[c], acc[i * C + c]);
            }
        }
    }
    if (k < k1) { /* tail chunk (k1 == n_in), zero-padded by masked loads */
        __mmask32 m = (__mmask32)((1ull << (k1 - k)) - 1u);
        __m512 xe[16], xo[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) {
            if (xbf16) split_bf16_512(_mm512_maskz_loadu_epi16(m, xh[c] + k), &xe[c], &xo[c]);
            else split_f32_512(_mm512_maskz_loadu_ps((__mmask16)m, xf[c] + k),
                               _mm512_maskz_loadu_ps((__mmask16)(m >> 16), xf[c] + k + 16), &xe[c], &xo[c]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512 we, wo;
            split_bf16_512(_mm512_maskz_loadu_epi16(m, w[i] + k), &we, &wo);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++) {
                acc[i * C + c] = _mm512_fmadd_ps(we, xe[c], acc[i * C + c]);
                acc[i * C + c] = _mm512_fmadd_ps(wo, xo[c], acc[i * C + c]);
            }
        }
    }
    finish_tile_512(Y, ldy, r, nr, t, nt, acc, R, C, n_in, k1, save);
}

INLINE AVX512 void tile_f32_512(float *Y, size_t ldy, const uint16_t *W, const float *X,
                                size_t ldx, int n_in, int r, int nr, int t, int nt, int R, int C,
                                int k0, int k1, __m512 *save) {
    tile_widen_512(Y, ldy, W, X, ldx, 0, n_in, r, nr, t, nt, R, C, k0, k1, save);
}

INLINE AVX512 void tile_bf16w_512(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                  size_t ldx, int n_in, int r, int nr, int t, int nt, int R, int C,
                                  int k0, int k1, __m512 *save) {
    tile_widen_512(Y, ldy, W, X, ldx, 1, n_in, r, nr, t, nt, R, C, k0, k1, save);
}

/* One R x C tile of matmul_bf16 with vdpbf16ps: 32 k (16 adjacent pairs) per instruction,
 * straight from row-major W and X (no repacking). Each lane adds its pair's two products in
 * the instruction's fixed order, so this too is one accumulator per output. Unlike the widening
 * tiles it issues no software prefetch in decode: its loop is short enough that the demand
 * loads of 8 rows alone keep the memory system busy, and the prefetches only competed with
 * them for miss buffers (1B decode on a 2-core Zen 5 VM: 16 rows with prefetch 14.7 / 28.0 tok/s at
 * 1 / 2 threads, 8 rows without 15.1 / 28.9). The widening tiles, with twice the work per
 * line, measured the other way round and keep 16 rows and the prefetch. */
INLINE AVX512BF16 void tile_dpbf16_512(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                       size_t ldx, int n_in, int r, int nr, int t, int nt, int R,
                                       int C, int k0, int k1, __m512 *save) {
    TILE_POINTERS(uint16_t)
    int k = k0;
    for (; k + 32 <= k1; k += 32) {
        __m512i xv[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) xv[c] = _mm512_loadu_si512(x[c] + k);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512i wv = _mm512_loadu_si512(w[i] + k);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++)
                acc[i * C + c] = _mm512_dpbf16_ps(acc[i * C + c], (__m512bh)wv, (__m512bh)xv[c]);
        }
    }
    if (k < k1) {
        __mmask32 m = (__mmask32)((1ull << (n_in - k)) - 1u);
        __m512i xv[16];
#pragma GCC unroll 16
        for (int c = 0; c < C; c++) xv[c] = _mm512_maskz_loadu_epi16(m, x[c] + k);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            __m512i wv = _mm512_maskz_loadu_epi16(m, w[i] + k);
#pragma GCC unroll 16
            for (int c = 0; c < C; c++)
                acc[i * C + c] = _mm512_dpbf16_ps(acc[i * C + c], (__m512bh)wv, (__m512bh)xv[c]);
        }
    }
    finish_tile_512(Y, ldy, r, nr, t, nt, acc, R, C, n_in, k1, save);
}

/* The loop over tiles, shared by the three tile kinds. Decode (one token) runs DR rows at a
 * time: DR independent accumulator chains over DR weight streams (the widening tiles also
 * prefetch the next tile's rows). Batches run 8 x 2 tiles (one 16-vector reduction per tile, which matters when
 * n_in is small) over blocks of tokens sized so the block of X (384 KiB) stays in L2 while
 * every row tile of this thread's share passes over it: each W tile then comes from memory
 * once per block and from L1 across the block's token tiles. Large n_in switches to
 * TOKEN_BLOCKS_K_512. (Measured on Zen 5 with L1-resident data, the 8 x 2 vdpbf16ps tile runs
 * at ~87% of the instruction's peak at n_in = 1152; 8 x 3 and 6 x 4, fewer loads per
 * product on paper, ran slower: two reductions per tile and register pressure.) */
#define TOKEN_BLOCKS_512(TILE, XBYTES, TR, TC)                                                  \
    do {                                                                                        \
        int tb = (int)((384u << 10) / ((size_t)n_in * (XBYTES))) / (TC) * (TC);                \
        if (tb < (TC)) tb = (TC);                                                               \
        for (int t0 = 0; t0 < n_tok; t0 += tb) {                                                \
            int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;                                         \
            for (int r = r0; r < r1; r += (TR)) {                                               \
                int nr = r1 - r < (TR) ? r1 - r : (TR);                                         \
                for (int t = t0; t < t1; t += (TC))                                             \
                    TILE(Y, ldy, W, X, ldx, n_in, r, nr, t, t1 - t < (TC) ? t1 - t : (TC), (TR), (TC), 0, n_in, NULL); \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* Large n_in (the MLP down projection, 6912): a tile's 8 rows no longer fit in L1, so k is
 * cut into blocks of KBLOCK; for each row tile and k-block, the block's token tiles run
 * with their accumulators parked in `park` between k-blocks, so the 8 x KBLOCK slice of W is
 * read from L1 by every token tile of the block. */
enum { KBLOCK = 1024, KB_TOKENS = 48 };

#define TOKEN_BLOCKS_K_512(TILE, XBYTES, TR, TC)                                                \
    do {                                                                                        \
        __m512 park[KB_TOKENS / (TC)][(TR) * (TC)];                                             \
        int tb = (int)((384u << 10) / ((size_t)n_in * (XBYTES))) / (TC) * (TC);                 \
        if (tb < (TC)) tb = (TC);                                                               \
        if (tb > KB_TOKENS) tb = KB_TOKENS;                                                     \
        for (int t0 = 0; t0 < n_tok; t0 += tb) {                                                \
            int t1 = t0 + tb < n_tok ? t0 + tb : n_tok;                                         \
            for (int r = r0; r < r1; r += (TR)) {                                               \
                int nr = r1 - r < (TR) ? r1 - r : (TR);                                         \
                for (int k0 = 0; k0 < n_in; k0 += KBLOCK) {                                     \
                    int k1 = n_in - k0 <= KBLOCK ? n_in : k0 + KBLOCK;                          \
                    for (int t = t0, j = 0; t < t1; t += (TC), j++)                             \
                        TILE(Y, ldy, W, X, ldx, n_in, r, nr, t, t1 - t < (TC) ? t1 - t : (TC),  \
                             (TR), (TC), k0, k1, park[j]);                                      \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* DR: rows per decode tile (see tile_dpbf16_512 for why it differs between kernels). */
#define MATMUL_TILES_512(TILE, XBYTES, DR)                                                      \
    do {                                                                                        \
        if (n_tok == 1) {                                                                       \
            for (int r = r0; r < r1; r += (DR))                                                 \
                TILE(Y, ldy, W, X, ldx, n_in, r, r1 - r < (DR) ? r1 - r : (DR), 0, 1, (DR), 1, 0, n_in, NULL); \
        } else if (n_tok == 2 || n_in <= 2048) {                                                \
            TOKEN_BLOCKS_512(TILE, XBYTES, 8, 2);                                               \
        } else {                                                                                \
            TOKEN_BLOCKS_K_512(TILE, XBYTES, 8, 2);                                             \
        }                                                                                       \
    } while (0)

static AVX512 void matmul_f32_512(float *Y, size_t ldy, const uint16_t *W, const float *X,
                                  size_t ldx, int n_tok, int n_in, int r0, int r1) {
    MATMUL_TILES_512(tile_f32_512, 4, 16);
}

static AVX512 void matmul_bf16w_512(float *Y, size_t ldy, const uint16_t *W, const uint16_t *X,
                                    size_t ldx, int n_tok, int n_in, int r0, int r1) {
    MATMUL_TILES_512(tile_bf16w_512, 2, 16);
}

static AVX512BF16 void matmul_dpbf16_512(float *Y, size_t ldy, const uint16_t *W,
                                         const uint16_t *X, size_t ldx, int n_tok, int n_in,
                                         int r0, int r1) {
    MATMUL_TILES_512(tile_dpbf16_512, 2, 8);
}

#include "kernels/amx-bf16.inc"

/* exp(x) per lane within ~2 ulp: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial,
 * then vscalefps, which rounds subnormal results once and correctly. Inputs clamp to
 * [-120, 89], so -inf gives exactly 0 and large x gives +inf. */
INLINE AVX512 __m512 exp_512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-120.0f)), _mm512_set1_ps(89.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* The kernels whose body is the same at every width (kernels/vec.inc), at 16 lanes: partial
 * chunks by masked loads and stores. */
#define V_TARGET AVX512
#define V_SUF 512
#define V __m512
#define V_W 16
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_LOADN(p, n, pad) _mm512_mask_loadu_ps(_mm512_set1_ps(pad), mask16_512(n), p)
#define V_STOREN(p, v, n) _mm512_mask_storeu_ps(p, mask16_512(n), v)
#define V_LOAD_BF16(p) widen16_512(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define V_LOADN_BF16(p, n) widen16_512(_mm256_maskz_loadu_epi16(mask16_512(n), p))
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ZERO() _mm512_setzero_ps()
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_DIV(a, b) _mm512_div_ps(a, b)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define V_HMAX(v) _mm512_reduce_max_ps(v)
#define V_EXP(v) exp_512(v)
#define V_TAIL_ACC acc0
#define V_AXPY_COLS 4
#include "kernels/vec.inc"

/* The exps are summed in float over blocks of 256 values (each lane adds 8, the two halves then
 * one), and the block sums in double: a float sum's error stays ~1e-7 relative, at a quarter of
 * the conversions. */
static AVX512 double log_sum_exp_512(const float *x, int n) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 vmax = ninf;
    __mmask16 bad = 0;
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        const __m512 v = _mm512_mask_loadu_ps(ninf, m, x + i);
        vmax = _mm512_max_ps(vmax, v);
        bad |= _mm512_mask_fpclass_ps_mask(m, v, 0x99); /* NaN, +inf, -inf */
    }
    if (bad) return NAN;
    const float max = _mm512_reduce_max_ps(vmax);
    const __m512 vm = _mm512_set1_ps(max);
    __m512d sum = _mm512_setzero_pd();
    for (int b = 0; b < n; b += 256) {
        const int end = n - b < 256 ? n : b + 256;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        for (int i = b; i < end; i += 32) { /* masked lanes: exp(-inf) = 0 */
            const int r = end - i;
            s0 = _mm512_add_ps(s0, exp_512(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, mask16_512(r < 16 ? r : 16), x + i), vm)));
            if (r > 16)
                s1 = _mm512_add_ps(s1, exp_512(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, mask16_512(r - 16 < 16 ? r - 16 : 16), x + i + 16), vm)));
        }
        const __m512 s = _mm512_add_ps(s0, s1);
        sum = _mm512_add_pd(sum, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(s)),
                                               _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)))));
    }
    return max + log(_mm512_reduce_add_pd(sum));
}

static AVX512 void to_bf16_512(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i += 16) { /* integer RNE, as g3_f32_to_bf16 (see to_bf16_lanes_avx2) */
        __mmask16 m = mask16_512(n - i < 16 ? n - i : 16);
        __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, src + i));
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i rounded = _mm512_srli_epi32(
            _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
        __mmask16 is_nan = _mm512_cmpgt_epi32_mask(
            _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
        __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
        __m512i h = _mm512_mask_blend_epi32(is_nan, rounded, quiet);
        _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(h));
    }
}

#define KERNELS_512_COMMON                                                                     \
    .isa = G3_ISA_AVX512, .matmul_f32 = matmul_f32_512, .rmsnorm = rmsnorm_512,                 \
    .gelu_tanh_mul = gelu_tanh_mul_512, .softmax = softmax_512, .log_sum_exp = log_sum_exp_512, \
    .dot_f32 = dot_f32_512,                                                                     \
    .dot_bf16 = dot_bf16_512, .axpy_f32 = axpy_f32_512, .axpy_bf16 = axpy_bf16_512,             \
    .dots_f32 = dots_f32_512, .dots_bf16 = dots_bf16_512, .axpys_f32 = axpys_f32_512,              \
    .axpys_bf16 = axpys_bf16_512, .to_bf16 = to_bf16_512

const g3_kernels g3_kernels_avx512 = {
    .name = "avx512",
    .matmul_bf16 = matmul_bf16w_512,
    KERNELS_512_COMMON,
};

const g3_kernels g3_kernels_avx512bf16 = {
    .name = "avx512bf16",
    .matmul_bf16 = matmul_dpbf16_512,
    KERNELS_512_COMMON,
};

const g3_kernels g3_kernels_amx_bf16 = {
    .name = "amx-bf16",
    .matmul_bf16 = matmul_amx_bf16,
    KERNELS_512_COMMON,
};

#endif
