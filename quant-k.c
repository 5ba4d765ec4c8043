/* quant-k.c - Q4_K / Q5_K / Q6_K reference quantizers and dequantizers (the layouts: quant-k.h).
 *
 * The quantizers follow the rules of ggml's quantize_row_q*_K_ref, which llama-quantize runs
 * when no importance matrix is given, so that the blocks are the same bytes. Those rules search
 * for each sub-block's scale (and minimum) by trying a few candidate scales and keeping the one
 * with the least weighted squared error, so every float operation matters: each product and sum
 * below is its own statement in ggml's order (a fused multiply-add, or a sum regrouped, would
 * round differently and can flip a comparison). The build is ISO C (-std=c11), where GCC does
 * not contract; a compiler that contracts within one expression finds none here to contract.
 * ggml's own copy lives in its base library, built for the plain x86-64 baseline (no FMA), which
 * is why llama-quantize gives the same bytes on every x86 machine. */
#include "quant-k.h"

#include <math.h>
#include <string.h>

#include "quant.h"
#include "util.h"

/* ggml's nearest_int: x + 1.5 * 2^23 rounds x to an integer in the low mantissa bits (ties to
 * even). Defined for |x| < 2^22; outside it gives the same bits as ggml's (whose assert is off in
 * a release build). */
static inline int nearest_int(float x) {
    const float v = x + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* x * y then + z, rounded twice (never fused). */
static inline float mul_add(float x, float y, float z) {
    const float p = x * y;
    return p + z;
}

/* ---- Q4_K / Q5_K: a scale and a minimum per 32 ------------------------------------------- */

/* The sums a candidate scale is judged by (ggml's make_qkx2_quants inner loop). */
typedef struct lsums {
    float l, l2, xl;
} lsums;

static lsums quantize_with(const float *x, const float *w, int n, int nmax, float iscale, float min,
                           uint8_t *L) {
    lsums s = {0.0f, 0.0f, 0.0f};
    for (int i = 0; i < n; i++) {
        const float t = x[i] - min;
        const int l = clampi(nearest_int(iscale * t), 0, nmax);
        L[i] = (uint8_t)l;
        const float wl = w[i] * (float)l;
        s.l += wl;
        s.l2 = mul_add(wl, (float)l, s.l2);
        s.xl = mul_add(wl, x[i], s.xl);
    }
    return s;
}

/* Weighted squared error of x against scale * L + min. */
static float qkx_error(const float *x, const float *w, const uint8_t *L, int n, float scale, float min) {
    float err = 0.0f;
    for (int i = 0; i < n; i++) {
        const float sl = scale * (float)L[i];
        const float y = sl + min;
        const float diff = y - x[i];
        const float d2 = diff * diff;
        err = mul_add(w[i], d2, err);
    }
    return err;
}

/* ggml's make_qkx2_quants (no mean-absolute-deviation variant): x ~ scale * L - the_min, L in
 * [0, nmax]. Tries iscale = (rmin + rdelta * is + nmax) / (max - min) for is = 0..nstep, each
 * refitted by least squares, and keeps the best by weighted squared error. min is the best fit's
 * so far (ggml updates it), so later candidates start from it. */
static float make_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                       float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x = mul_add(w[i], x[i], sum_x);
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1.0f / iscale;
    quantize_with(x, w, n, nmax, iscale, min, L);
    float best_error = qkx_error(x, w, L, n, scale, min);
    uint8_t Laux[32];
    for (int is = 0; is <= nstep; is++) {
        const float step = rdelta * (float)is;
        const float num = (rmin + step) + (float)nmax;
        iscale = num / (max - min); /* min: the best fit's so far, as in ggml */
        const lsums s = quantize_with(x, w, n, nmax, iscale, min, Laux);
        /* each product rounded, then the difference (no fused multiply-subtract) */
        const float wl2 = sum_w * s.l2, ll = s.l * s.l;
        const float D = wl2 - ll;
        if (!(D > 0)) continue;
        const float wxl = sum_w * s.xl, xl = sum_x * s.l, l2x = s.l2 * sum_x, lxl = s.l * s.xl;
        float this_scale = (wxl - xl) / D;
        float this_min = (l2x - lxl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = s.xl / s.l2;
        }
        const float cur_error = qkx_error(x, w, Laux, n, this_scale, this_min);
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* The part Q4_K and Q5_K share: the 8 sub-blocks' scales and mins fitted, quantized to 6 bits
 * against the super-block's d / dmin (written to *d, *dmin, scales[12]), and the final integers
 * L[256] in [0, nmax] for those stored scales. */
static void quantize_kx_superblock(const float *x, int nmax, float rmin, int nstep, uint16_t *dh,
                                   uint16_t *dminh, uint8_t scales[12], uint8_t L[G3_QK_K]) {
    float sc[8], mn[8], w[32], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 = mul_add(xs[l], xs[l], sum_x2);
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        sc[j] = make_qkx2(32, nmax, xs, w, L + 32 * j, &mn[j], rmin, 0.1f, nstep);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        /* ggml stores the int in a uint8_t first (a negative scale wraps, then clamps to 63) */
        uint8_t ls = (uint8_t)nearest_int(inv_scale * sc[j]), lm = (uint8_t)nearest_int(inv_min * mn[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 15) | ((lm & 15) << 4));
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *dh = g3_f32_to_f16(max_scale / 63.0f);
    *dminh = g3_f32_to_f16(max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        g3_kq_scale_min(scales, j, &s, &m);
        const float d = g3_f16_to_f32(*dh) * (float)s;
        if (d == 0.0f) continue; /* keeps make_qkx2's integers, as ggml does */
        const float dm = g3_f16_to_f32(*dminh) * (float)m;
        for (int i = 0; i < 32; i++) {
            const float t = x[32 * j + i] + dm;
            L[32 * j + i] = (uint8_t)clampi(nearest_int(t / d), 0, nmax);
        }
    }
}

void g3_quantize_row_q4_K(const float *x, g3_block_q4_K *y, int64_t n) {
    uint8_t L[G3_QK_K];
    for (int64_t b = 0; b < n / G3_QK_K; b++, x += G3_QK_K) {
        quantize_kx_superblock(x, 15, -1.0f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y[b].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void g3_quantize_row_q5_K(const float *x, g3_block_q5_K *y, int64_t n) {
    uint8_t L[G3_QK_K];
    for (int64_t b = 0; b < n / G3_QK_K; b++, x += G3_QK_K) {
        quantize_kx_superblock(x, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y[b].qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
                y[b].qs[32 * c + l] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
            }
    }
}

/* ---- Q6_K: a signed scale per 16 --------------------------------------------------------- */

#define GROUP_MAX_EPS 1e-15f /* ggml's: a group below this is all zeros */

/* The candidate's sums for make_qx (weights x^2): L = clamp(round(iscale * x), -nmax, nmax - 1). */
static void qx_sums(const float *x, int n, int nmax, float iscale, float *sumlx, float *suml2) {
    *sumlx = *suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        const float wx = w * x[i], wl = w * (float)l;
        *sumlx = mul_add(wx, (float)l, *sumlx);
        *suml2 = mul_add(wl, (float)l, *suml2);
    }
}

static void qx_levels(const float *x, int n, int nmax, float iscale, int8_t *L) {
    for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
}

/* ggml's make_qx_quants with rmse_type 1 and no importance: x ~ scale * (L - nmax), L in
 * [0, 2 nmax), trying iscale = -(nmax + 0.1 is) / max for is = -9..9 (max: the value of
 * largest magnitude, with its sign). */
static float make_qx(int n, int nmax, const float *x, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max, sumlx, suml2;
    qx_sums(x, n, nmax, iscale, &sumlx, &suml2);
    qx_levels(x, n, nmax, iscale, L);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float step = 0.1f * (float)is;
        iscale = -((float)nmax + step) / max;
        qx_sums(x, n, nmax, iscale, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            qx_levels(x, n, nmax, iscale, L);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void g3_quantize_row_q6_K(const float *x, g3_block_q6_K *y, int64_t n) {
    int8_t L[G3_QK_K];
    float scales[16];
    for (int64_t b = 0; b < n / G3_QK_K; b++, x += G3_QK_K) {
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int ib = 0; ib < 16; ib++) {
            scales[ib] = make_qx(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        g3_block_q6_K *o = &y[b];
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(o, 0, sizeof *o);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        o->d = g3_f32_to_f16(1.0f / iscale);
        for (int ib = 0; ib < 16; ib++) {
            const int s = nearest_int(iscale * scales[ib]);
            const int c = s < 127 ? s : 127;
            o->scales[ib] = (int8_t)(uint8_t)(unsigned)c; /* ggml's int8_t store keeps the low byte */
        }
        for (int j = 0; j < 16; j++) {
            const float d = g3_f16_to_f32(o->d) * (float)o->scales[j];
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(clampi(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = o->ql + 64 * h, *qh = o->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                const int q1 = Lh[l] & 63, q2 = Lh[l + 32] & 63, q3 = Lh[l + 64] & 63, q4 = Lh[l + 96] & 63;
                ql[l] = (uint8_t)((q1 & 15) | ((q3 & 15) << 4));
                ql[l + 32] = (uint8_t)((q2 & 15) | ((q4 & 15) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}

/* ---- unpacking and dequantizing --------------------------------------------------------- */

void g3_kq_unpack_q4_K(const g3_block_q4_K *b, uint8_t q[G3_QK_K], uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 8; j++) g3_kq_scale_min(b->scales, j, &sc[j], &m[j]);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = b->qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = b->qs[32 * c + l] >> 4;
        }
}

void g3_kq_unpack_q5_K(const g3_block_q5_K *b, uint8_t q[G3_QK_K], uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 8; j++) g3_kq_scale_min(b->scales, j, &sc[j], &m[j]);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (uint8_t)((b->qs[32 * c + l] & 15) | (((b->qh[l] >> (2 * c)) & 1) << 4));
            q[64 * c + 32 + l] = (uint8_t)((b->qs[32 * c + l] >> 4) | (((b->qh[l] >> (2 * c + 1)) & 1) << 4));
        }
}

void g3_kq_unpack_q6_K(const g3_block_q6_K *b, int8_t q[G3_QK_K]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

/* Q4_K / Q5_K: w = (d * sc) * q - dmin * m, as ggml's dequantizers round it. */
static void dequantize_kx(uint16_t dh, uint16_t dminh, const uint8_t *q, const uint8_t *sc,
                          const uint8_t *m, float *y) {
    const float d = g3_f16_to_f32(dh), min = g3_f16_to_f32(dminh);
    for (int j = 0; j < 8; j++) {
        const float d1 = d * (float)sc[j], m1 = min * (float)m[j];
        for (int l = 0; l < 32; l++) {
            const float p = d1 * (float)q[32 * j + l];
            y[32 * j + l] = p - m1;
        }
    }
}

void g3_dequantize_row_q4_K(const g3_block_q4_K *x, float *y, int64_t n) {
    uint8_t q[G3_QK_K], sc[8], m[8];
    for (int64_t b = 0; b < n / G3_QK_K; b++, y += G3_QK_K) {
        g3_kq_unpack_q4_K(&x[b], q, sc, m);
        dequantize_kx(x[b].d, x[b].dmin, q, sc, m, y);
    }
}

void g3_dequantize_row_q5_K(const g3_block_q5_K *x, float *y, int64_t n) {
    uint8_t q[G3_QK_K], sc[8], m[8];
    for (int64_t b = 0; b < n / G3_QK_K; b++, y += G3_QK_K) {
        g3_kq_unpack_q5_K(&x[b], q, sc, m);
        dequantize_kx(x[b].d, x[b].dmin, q, sc, m, y);
    }
}

/* Q6_K: w = (d * scale) * (q - 32). */
void g3_dequantize_row_q6_K(const g3_block_q6_K *x, float *y, int64_t n) {
    int8_t q[G3_QK_K];
    for (int64_t b = 0; b < n / G3_QK_K; b++, y += G3_QK_K) {
        g3_kq_unpack_q6_K(&x[b], q);
        const float d = g3_f16_to_f32(x[b].d);
        for (int i = 0; i < G3_QK_K; i++) {
            const float ds = d * (float)x[b].scales[i / 16];
            y[i] = ds * (float)q[i];
        }
    }
}
