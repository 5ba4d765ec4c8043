/* kernels.c - the numeric kernels' entry: which table runs (dispatch, from kernels/cpu.c's
 * probe), for the BF16 kernels (kernels.h) and the quantized ones (quant.h), and the pieces every
 * table shares (RoPE, the log-softmax merge in strips). The tables are one file per instruction
 * set in kernels/: scalar.c (the reference), avx2.c, avx512.c ("avx512", "avx512bf16", and
 * "amx-bf16" with amx-bf16.inc); quantized: quant.c's scalar reference, quant-avx2.c ("avx2",
 * "avx2vnni"), quant-avx512.c ("avx512", "avx512vnni", "amx"). See kernels.h and quant.h for the
 * contract every table keeps. Off x86 only the scalar tables build and dispatch always picks
 * them. */
#include "kernels.h"

#include <math.h>
#include <string.h>

#include "kernels/quant-impl.h"
#include "kernels/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#define KERNELS_X86 1
#else
#define KERNELS_X86 0
#endif

void g3_rope(float *x, int n_heads, int head_dim, const float *cos_t, const float *sin_t) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * cos_t[i] - b * sin_t[i];
            v[i + half] = b * cos_t[i] + a * sin_t[i];
        }
    }
}

#if KERNELS_X86
/* The amx-bf16 table's needs: AVX512-BF16 (its edges) and the BF16 tiles. */
static int amx_bf16(const g3_cpu *f) { return f->avx512_bf16 && (f->amx & G3_AMX_BF16); }
#endif

/* ==== log-softmax normaliser in strips (any table) ========================================== */

/* Running merge in strip order: max and sum of exp(lse - max), the sum rescaled when the max
 * grows. Both entry points go through it, so they agree bit for bit. */
typedef struct lse_merge {
    double max, sum;
    int nan;
} lse_merge;

static void lse_merge_add(lse_merge *m, double lse) {
    if (isnan(lse)) m->nan = 1;
    else if (lse > m->max) {
        m->sum = m->sum * exp(m->max - lse) + 1.0;
        m->max = lse;
    } else {
        m->sum += exp(lse - m->max);
    }
}

static double lse_merge_result(const lse_merge *m) { return m->nan ? NAN : m->max + log(m->sum); }

double g3_lse_merge(const double *strip_lse, int n_strips) {
    lse_merge m = {-INFINITY, 0.0, 0};
    for (int i = 0; i < n_strips; i++) lse_merge_add(&m, strip_lse[i]);
    return lse_merge_result(&m);
}

double g3_log_sum_exp_strips(const g3_kernels *k, const float *x, int n) {
    lse_merge m = {-INFINITY, 0.0, 0};
    for (int r0 = 0; r0 < n; r0 += G3_LSE_STRIP)
        lse_merge_add(&m, k->log_sum_exp(x + r0, n - r0 < G3_LSE_STRIP ? n - r0 : G3_LSE_STRIP));
    return lse_merge_result(&m);
}

/* ==== dispatch ============================================================================ */

/* On other CPUs only the scalar table exists: the x86 levels give NULL ("not supported"). */
const g3_kernels *g3_kernels_get(g3_isa isa) {
    if (isa == G3_ISA_SCALAR) return &g3_kernels_scalar;
#if KERNELS_X86
    const g3_cpu *f = g3_cpu_get();
    switch (isa) {
    case G3_ISA_AVX2: return f->avx2 ? &g3_kernels_avx2 : NULL;
    case G3_ISA_AVX512:
        if (!f->avx512) return NULL;
        return amx_bf16(f) ? &g3_kernels_amx_bf16 : f->avx512_bf16 ? &g3_kernels_avx512bf16 : &g3_kernels_avx512;
    default: return NULL;
    }
#else
    return NULL;
#endif
}

const g3_kernels *g3_kernels_chosen(void) {
    const int isa = g3_isa_choose(NULL);
    return g3_kernels_get(isa < 0 ? G3_ISA_SCALAR : (g3_isa)isa);
}

int g3_kernels_all(const g3_kernels **out, int max) {
    const g3_kernels *all[5];
    int n = 0;
    all[n++] = &g3_kernels_scalar;
#if KERNELS_X86
    const g3_cpu *f = g3_cpu_get();
    if (f->avx2) all[n++] = &g3_kernels_avx2;
    if (f->avx512) all[n++] = &g3_kernels_avx512;
    if (f->avx512_bf16) all[n++] = &g3_kernels_avx512bf16;
    if (amx_bf16(f)) all[n++] = &g3_kernels_amx_bf16;
#endif
    for (int i = 0; i < n && i < max; i++) out[i] = all[i];
    return n < max ? n : max;
}

/* ==== the quantized tables' dispatch ======================================================== */

#if KERNELS_X86
enum { Q_AVX2 = 1, Q_AVX2VNNI = 2, Q_AVX512 = 4, Q_AVX512VNNI = 8, Q_AMX = 16 };

/* Which quantized variants the CPU runs. */
static int quant_cpu(void) {
    const g3_cpu *c = g3_cpu_get();
    int f = 0;
    if (c->avx2) f |= Q_AVX2;
    if (c->avx_vnni) f |= Q_AVX2VNNI;
    if (c->avx512) f |= Q_AVX512;
    if (c->avx512_vnni) f |= Q_AVX512VNNI;
    if (c->avx512_vnni && g3_quant_amx_usable(c)) f |= Q_AMX;
    return f;
}
#endif

const g3_quant_kernels *g3_quant_kernels_get(g3_isa isa) {
    if (isa == G3_ISA_SCALAR) return &g3_quant_scalar;
#if KERNELS_X86
    const int f = quant_cpu();
    switch (isa) {
    case G3_ISA_AVX2:
        if (!(f & Q_AVX2)) return NULL;
        return f & Q_AVX2VNNI ? &g3_quant_avx2vnni : &g3_quant_avx2;
    case G3_ISA_AVX512:
        if (!(f & Q_AVX512)) return NULL;
        return f & Q_AMX ? &g3_quant_amx : f & Q_AVX512VNNI ? &g3_quant_avx512vnni : &g3_quant_avx512;
    default: return NULL;
    }
#else
    return NULL;
#endif
}

int g3_quant_kernels_all(const g3_quant_kernels **out, int max) {
    const g3_quant_kernels *all[6];
    int n = 0;
    all[n++] = &g3_quant_scalar;
#if KERNELS_X86
    const int f = quant_cpu();
    if (f & Q_AVX2) all[n++] = &g3_quant_avx2;
    if (f & Q_AVX2VNNI) all[n++] = &g3_quant_avx2vnni;
    if (f & Q_AVX512) all[n++] = &g3_quant_avx512;
    if (f & Q_AVX512VNNI) all[n++] = &g3_quant_avx512vnni;
    if (f & Q_AMX) all[n++] = &g3_quant_amx;
#endif
    for (int i = 0; i < n && i < max; i++) out[i] = all[i];
    return n < max ? n : max;
}
