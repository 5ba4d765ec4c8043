# tools/device/profile-patch.py FILE: device-only instrumentation of gemma3.c (not built by make): per-phase times of the forward pass (G3_PROFILE=1) and a
# dynamic row split for plain matmuls (G3_DYN=pieces per thread)
import sys
p=sys.argv[1] if len(sys.argv)>1 else 'gemma3.c'; s=open(p).read()
hdr='''
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#define PH_MAX 16
static const char *ph_name[PH_MAX]; static int ph_n;
static double ph_wall[2][PH_MAX], ph_max[2][PH_MAX], ph_mean[2][PH_MAX], ph_total[2];
static long ph_count[2][PH_MAX], ph_tokens[2];
static int prof_on = -1, prof_T = 1, dyn_pieces = -1;
typedef struct { g3_task_fn fn; void *ctx; double t[1024]; } prof_ctx;
static void prof_task(void *c, int ith, int nth) { prof_ctx *p = c; double t0 = g3_now(); p->fn(p->ctx, ith, nth); p->t[ith] = g3_now() - t0; }
static void prof_report(void) {
    for (int m = 0; m < 2; m++) {
        if (!ph_tokens[m]) continue;
        double k = 1e6 / ph_tokens[m], sum = 0;
        fprintf(stderr, "PROFILE %s tokens=%ld  us/token: wall slowest mean runs/token\\n", m ? "prefill" : "decode", ph_tokens[m]);
        for (int i = 0; i < ph_n; i++) { sum += ph_wall[m][i];
            fprintf(stderr, "PROFILE %-12s %9.1f %9.1f %9.1f %6.1f\\n", ph_name[i], ph_wall[m][i]*k, ph_max[m][i]*k, ph_mean[m][i]*k, (double)ph_count[m][i]/ph_tokens[m]); }
        fprintf(stderr, "PROFILE %-12s %9.1f\\nPROFILE %-12s %9.1f\\n", "serial", (ph_total[m]-sum)*k, "forward", ph_total[m]*k);
    }
}
static void prof_init(void) { if (prof_on < 0) { prof_on = getenv("G3_PROFILE") != NULL; if (prof_on) atexit(prof_report); const char *d = getenv("G3_DYN"); dyn_pieces = d ? atoi(d) : 0; } }
static void prof_pool_run(g3_pool *pool, g3_task_fn fn, void *ctx, const char *name) {
    prof_init();
    if (!prof_on) { g3_pool_run(pool, fn, ctx); return; }
    int i = 0; while (i < ph_n && ph_name[i] != name) i++;
    if (i == ph_n) ph_name[ph_n++] = name;
    static prof_ctx pc; pc.fn = fn; pc.ctx = ctx;
    int n = g3_pool_size(pool), m = prof_T > 1;
    double t0 = g3_now(); g3_pool_run(pool, prof_task, &pc); double w = g3_now() - t0;
    double mx = 0, sum = 0; for (int j = 0; j < n; j++) { if (pc.t[j] > mx) mx = pc.t[j]; sum += pc.t[j]; }
    ph_wall[m][i] += w; ph_max[m][i] += mx; ph_mean[m][i] += sum / n; ph_count[m][i]++;
}
#define g3_pool_run(p, f, c) prof_pool_run(p, f, c, #f)
'''
a='/* ==== forward-pass helpers ==================================================================== */'
assert s.count(a)==1; s=s.replace(a, hdr+a)
# name matmuls apart
a='''    ck->n_rows = n_rows;
    g3_pool_run(ck->s->pool, task_matmul, ck);'''
assert s.count(a)==1
s=s.replace(a,'''    ck->n_rows = n_rows;
    atomic_store(&ck->next_piece, 0);
    if (n_rows == ck->s->cfg->vocab_size) prof_pool_run(ck->s->pool, task_matmul, ck, "lm_head");
    else if (ck->n_in == ck->s->cfg->intermediate_size) prof_pool_run(ck->s->pool, task_matmul, ck, "down");
    else prof_pool_run(ck->s->pool, task_matmul, ck, "o_proj");''')
a='''    int n_in, n_rows;
} chunk;'''
assert s.count(a)==1; s=s.replace(a,'''    int n_in, n_rows;
    atomic_int next_piece;
} chunk;''')
a='''static void task_matmul(void *ctx, int ith, int nth) {
    const chunk *ck = ctx;
    int lo, hi;'''
assert s.count(a)==1; s=s.replace(a,'''static void task_matmul(void *ctx, int ith, int nth) {
    chunk *ck = ctx;
    int lo, hi;
    if (dyn_pieces > 0) {
        int grain = row_grain(ck), n_grains = (ck->n_rows + grain - 1) / grain, n_pieces = nth * dyn_pieces;
        if (n_pieces > n_grains) n_pieces = n_grains;
        for (int p = ith; p < n_pieces; p = nth + atomic_fetch_add_explicit(&ck->next_piece, 1, memory_order_relaxed)) {
            g3_split(ck->n_rows, p, n_pieces, grain, &lo, &hi);
            matmul_rows(ck, ck->Y, ck->ldy, ck->W, lo, hi);
        }
        return;
    }''')
a='''    chunk ck = {.s = s, .tokens = tokens, .T = T, .p0 = p0};
'''
assert s.count(a)==1; s=s.replace(a,'''    chunk ck = {.s = s, .tokens = tokens, .T = T, .p0 = p0};
    prof_init(); prof_T = T; ph_tokens[T > 1] += T; double prof_t0 = g3_now();
    int rc = forward_chunk_body(s, &ck);
    ph_total[T > 1] += g3_now() - prof_t0;
    return rc;
}
static int forward_chunk_body(gemma3_session *s, chunk *ckp) {
    const g3_config *c = s->cfg;
    const g3_weights *w = &s->model->w;
    const int H = c->hidden_size, qd = c->n_heads * c->head_dim;
    chunk ck = *ckp; const int T = ck.T, p0 = ck.p0; const int32_t *tokens = ck.tokens; (void)tokens;
''')
a='static int forward_chunk(gemma3_session *s, const int32_t *tokens, int T, int p0) {'
s=s.replace(a,'static int forward_chunk_body(gemma3_session *s, chunk *ckp);\n'+a)
open(p,'w').write(s)
