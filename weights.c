/* weights.c - binds a checkpoint's tensors to the Gemma 3 text model.
 *
 * Binding runs in two passes over one table of expected tensors (name, shape, destination):
 * the first finds every tensor and checks its shape and dtype, and sizes the arena; the second
 * allocates that arena once and fills the destinations. So a bad checkpoint fails before any
 * memory beyond the mapping is committed, and there is exactly one allocation site.
 *
 * Storage decisions:
 *   - BF16 matrices are used in place: the pointer goes straight into the read-only mapping.
 *   - F32 and F16 matrices are converted ONCE, here, to BF16 (round-to-nearest-even, as torch
 *     does) into the arena; the forward pass only ever sees BF16 weights. For an F32 checkpoint
 *     this is the same rounding HF applies when it loads the model in bfloat16.
 *   - A BF16 matrix whose data is not 2-byte aligned in the file (legal in SafeTensors, never
 *     produced by the usual writers) is copied into the arena, since reading it in place would
 *     be a misaligned access.
 *   - Norm weights become FP32 with Gemma's "+1" baked in: 1.0f + w computed in fp32, exactly
 *     HF's (1 + w.float()); never in bf16 (docs/forward-pass.md §3). */
#include "weights.h"

#include "quant-mix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gguf-model.h"
#include "quant-rows.h"
#include "threads.h"
#include "util.h"

enum bind_kind { BIND_MATRIX, BIND_NORM };

/* How the checkpoint's matrices become the model's. */
enum source { SRC_PLAIN, SRC_QUANTIZE, SRC_QFILE };

typedef struct binding {
    char name[160];
    int n_dims;
    int64_t shape[2];
    enum bind_kind kind;
    g3_matrix *dst_m;       /* where a matrix goes */
    const float **dst_n;    /* where a norm goes */
    const g3_tensor *t;     /* found in pass 1 */
    size_t arena_offset;    /* for converted / copied data, (size_t)-1 if used in place */
    size_t used_bytes;      /* bytes as used (matrix: bf16 or blocks; norm: as stored) */
    g3_wtype qtype;         /* a matrix's type as bound: BF16, or its blocks' (per tensor: a mix) */
    g3_layout layout;       /* and its layout (x8 only for the types that have x8 kernels) */
} binding;

static const char *const prefixes[] = {"model.", "language_model.model.", "model.language_model."};
static const char *const lm_head_names[] = {"lm_head.weight", "language_model.lm_head.weight"};

static binding *add(binding *b, int *n, const char *prefix, const char *name, int64_t d0, int64_t d1) {
    binding *x = &b[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s%s", prefix, name);
    x->n_dims = d1 ? 2 : 1;
    x->shape[0] = d0;
    x->shape[1] = d1;
    return x;
}

static void add_matrix(binding *b, int *n, const char *prefix, const char *name, int64_t d0,
                       int64_t d1, g3_matrix *dst) {
    binding *x = add(b, n, prefix, name, d0, d1);
    x->kind = BIND_MATRIX;
    x->dst_m = dst;
}

static void add_norm(binding *b, int *n, const char *prefix, const char *name, int64_t d0,
                     const float **dst) {
    binding *x = add(b, n, prefix, name, d0, 0);
    x->kind = BIND_NORM;
    x->dst_n = dst;
}

/* Finds and checks one tensor; adds the arena bytes it needs (none when used in place). */
static int check_binding(const char *dir, binding *b, const g3_st *st, enum source src,
                         size_t *arena_bytes) {
    const g3_wtype qtype = b->qtype;
    const g3_layout layout = b->layout;
    char want[64], got[160];
    const g3_tensor *t = g3_st_find(st, b->name);
    if (!t)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: missing (expected shape %s)", dir,
                        b->name, g3_shape_str(want, sizeof want, b->shape, b->n_dims));
    if (t->dtype == G3_DTYPE_U8 && src != SRC_QFILE)
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor %s: dtype U8 but the file has no __metadata__ gemma3.quant "
                        "saying how it is quantized",
                        dir, b->name);
    const int quantized = b->kind == BIND_MATRIX && src != SRC_PLAIN;
    const int block = g3_wtype_get(qtype)->block;
    if (quantized && b->shape[1] % block)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: tensor %s: %lld columns are not a multiple of %d, cannot be %s", dir,
                        b->name, (long long)b->shape[1], block, g3_wtype_name(qtype));
    int64_t expect[2] = {b->shape[0], b->shape[1]};
    if (b->kind == BIND_MATRIX && src == SRC_QFILE) expect[1] = (int64_t)g3_wtype_row_bytes(qtype, b->shape[1]);
    int same = t->n_dims == b->n_dims;
    for (int d = 0; same && d < b->n_dims; d++) same = t->shape[d] == expect[d];
    if (!same && b->kind == BIND_MATRIX && src == SRC_QFILE)
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor %s: expected %s blocks of shape %s as U8 %s, got %s %s", dir,
                        b->name, g3_wtype_name(qtype), g3_shape_str(want, sizeof want, b->shape, 2),
                        g3_shape_str(want + 32, sizeof want - 32, expect, 2), g3_dtype_name(t->dtype),
                        g3_shape_str(got, sizeof got, t->shape, t->n_dims));
    if (!same)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: expected shape %s, got %s", dir,
                        b->name, g3_shape_str(want, sizeof want, b->shape, b->n_dims),
                        g3_shape_str(got, sizeof got, t->shape, t->n_dims));
    if (b->kind == BIND_MATRIX && src == SRC_QFILE) {
        if (t->dtype != G3_DTYPE_U8)
            return g3_error(GEMMA3_ERR_FORMAT,
                            "%s: tensor %s: dtype %s in a %s checkpoint (expected U8 blocks)", dir,
                            b->name, g3_dtype_name(t->dtype), g3_wtype_name(qtype));
    } else if (t->dtype != G3_DTYPE_BF16 && t->dtype != G3_DTYPE_F16 && t->dtype != G3_DTYPE_F32) {
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: tensor %s: dtype %s not supported (BF16, F16 or F32)", dir, b->name,
                        g3_dtype_name(t->dtype));
    }
    b->t = t;
    size_t n = (size_t)t->n_elements, need = 0;
    if (b->kind == BIND_NORM) {
        need = n * sizeof(float);
        b->used_bytes = t->n_bytes;
    } else if (src == SRC_QUANTIZE || (src == SRC_QFILE && layout == G3_LAYOUT_X8)) {
        need = layout == G3_LAYOUT_X8 ? g3_x8_bytes(qtype, b->shape[0], b->shape[1])
                                      : (size_t)b->shape[0] * g3_wtype_row_bytes(qtype, b->shape[1]);
        b->used_bytes = need;
    } else if (src == SRC_QFILE) {
        if ((uintptr_t)t->data & 1u) need = t->n_bytes;
        b->used_bytes = t->n_bytes;
    } else {
        if (t->dtype != G3_DTYPE_BF16 || ((uintptr_t)t->data & 1u)) need = n * sizeof(uint16_t);
        b->used_bytes = n * sizeof(uint16_t);
    }
    b->arena_offset = (size_t)-1;
    if (need) {
        b->arena_offset = *arena_bytes;
        *arena_bytes += (need + 63) & ~(size_t)63; /* keep every buffer cache-line aligned */
    }
    return GEMMA3_OK;
}

/* Element i of a BF16/F16/F32 tensor as float; memcpy keeps unaligned data legal. */
static float load_elem(const g3_tensor *t, size_t i) {
    const uint8_t *p = t->data;
    if (t->dtype == G3_DTYPE_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return t->dtype == G3_DTYPE_BF16 ? g3_bf16_to_f32(h) : g3_f16_to_f32(h);
}

/* Row r of a BF16/F16/F32 matrix with `cols` columns, widened to fp32. */
static void row_to_f32(const g3_tensor *t, int64_t r, int64_t cols, float *out) {
    const uint8_t *p = (const uint8_t *)t->data + (size_t)r * (size_t)cols * g3_dtype_size(t->dtype);
    if (t->dtype == G3_DTYPE_F32) {
        memcpy(out, p, (size_t)cols * sizeof(float));
    } else if (t->dtype == G3_DTYPE_BF16) {
        for (int64_t i = 0; i < cols; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = g3_bf16_to_f32(h);
        }
    } else {
        for (int64_t i = 0; i < cols; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = g3_f16_to_f32(h);
        }
    }
}

/* Quantizing rows [r0, r1) of one source matrix into dst (row r0 at dst), on the pool. Each
 * thread widens a row into its own fp32 row buffer (scratch.rowbuf + ith * cols); in the x8
 * layout (r0 a multiple of 8) it quantizes a group of rows into its own group buffer
 * (scratch.groupbuf + ith * 8 * scratch.row_max bytes) and packs that. */
typedef struct quant_scratch {
    float *rowbuf;
    uint8_t *groupbuf;
    size_t row_max;
} quant_scratch;

typedef struct quant_job {
    const g3_tensor *t;
    g3_wtype type;
    g3_layout layout;
    int64_t cols, r0, r1;
    uint8_t *dst;
    quant_scratch scratch;
    g3_quantize_row_fn quantize; /* g3_quantize_row or its byte-identical fast version */
    int64_t *first_bad; /* [nth]: the thread's first non-finite source element (r * cols + c), or -1 */
} quant_job;

/* Column of the first NaN or infinity in a source row of cols elements, or -1: where the row
 * quantizer found one. Quantizing would turn one into a finite block (the scale ignores it, the
 * cast of NaN is undefined): a silent change of the model, so a source that holds one is
 * refused instead. */
static int64_t first_bad_source(const g3_tensor *t, const uint8_t *src, const float *widened,
                                int64_t cols) {
    if (widened) return g3_first_nonfinite(widened, (size_t)cols);
    if (t->dtype == G3_DTYPE_F32) {
        for (int64_t i = 0; i < cols; i++) {
            uint32_t u;
            memcpy(&u, src + 4 * i, 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return i;
        }
        return -1;
    }
    return g3_first_nonfinite_bf16((const uint16_t *)(const void *)src, (size_t)cols);
}

static void task_quantize(void *ctx, int ith, int nth) {
    const quant_job *j = ctx;
    const int x8 = j->layout == G3_LAYOUT_X8;
    int lo, hi;
    g3_split((int)(j->r1 - j->r0), ith, nth, x8 ? G3_X8 : 1, &lo, &hi);
    const size_t rb = g3_wtype_row_bytes(j->type, j->cols);
    const size_t src_row = (size_t)j->cols * g3_dtype_size(j->t->dtype);
    float *buf = j->scratch.rowbuf + (size_t)ith * (size_t)j->cols;
    uint8_t *group = x8 ? j->scratch.groupbuf + (size_t)ith * G3_X8 * j->scratch.row_max : NULL;
    const int f16 = j->t->dtype == G3_DTYPE_F16; /* widened first (F16 checkpoints are rare) */
    j->first_bad[ith] = -1;
    for (int64_t r = lo; r < hi; r++) {
        uint8_t *dst = x8 ? group + (size_t)(r % G3_X8) * rb : j->dst + (size_t)r * rb;
        const uint8_t *src = (const uint8_t *)j->t->data + (size_t)(j->r0 + r) * src_row;
        if (f16) row_to_f32(j->t, j->r0 + r, j->cols, buf);
        int ok = f16 ? j->quantize(j->type, buf, 0, dst, j->cols)
                     : j->quantize(j->type, src, j->t->dtype == G3_DTYPE_BF16, dst, j->cols);
        if (!ok) {
            int64_t bad = first_bad_source(j->t, src, f16 ? buf : NULL, j->cols);
            j->first_bad[ith] = (j->r0 + r) * j->cols + (bad >= 0 ? bad : 0);
            return;
        }
        if (x8 && (r % G3_X8 == G3_X8 - 1 || r == hi - 1)) /* a group done (or the matrix's last) */
            g3_x8_pack(j->type, j->dst + (size_t)(r - r % G3_X8) * rb, group, r % G3_X8 + 1, j->cols);
    }
}

/* Copying rows [r0, r1) (r0 a multiple of 8) of a quantized source into the x8 layout. */
typedef struct repack_job {
    const uint8_t *src;
    uint8_t *dst;
    g3_wtype type;
    int64_t cols, rows;
} repack_job;

static void task_repack(void *ctx, int ith, int nth) {
    const repack_job *j = ctx;
    int lo, hi;
    g3_split((int)j->rows, ith, nth, G3_X8, &lo, &hi);
    const size_t rb = g3_wtype_row_bytes(j->type, j->cols);
    if (lo < hi) g3_x8_pack(j->type, j->dst + (size_t)lo * rb, j->src + (size_t)lo * rb, hi - lo, j->cols);
}

#define RELEASE_CHUNK_BYTES ((size_t)32 << 20) /* source bytes quantized between two releases */

/* The first non-finite source element the threads of a quant_job met, or -1. */
static int64_t job_first_bad(const quant_job *j, g3_pool *pool) {
    for (int t = 0; t < g3_pool_size(pool); t++) /* thread order is row order */
        if (j->first_bad[t] >= 0) return j->first_bad[t];
    return -1;
}

/* "tensor NAME: element [r, c] is not finite": why a source cannot be quantized. */
static int bad_source_error(const char *dir, const char *name, int64_t at, int64_t cols, g3_wtype type) {
    return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: element [%lld, %lld] is not finite (NaN or "
                    "infinity): cannot be quantized to %s", dir, name, (long long)(at / cols),
                    (long long)(at % cols), g3_wtype_name(type));
}

/* Rows of a source piece of about RELEASE_CHUNK_BYTES, in whole x8 groups. */
static int64_t piece_rows(size_t src_row_bytes) {
    const int64_t rows = (int64_t)(RELEASE_CHUNK_BYTES / src_row_bytes) / G3_X8 * G3_X8;
    return rows < G3_X8 ? G3_X8 : rows;
}

/* Drops the pages of source rows [r0, r1) of t, done with. */
static void release_rows(const g3_st *st, const g3_tensor *t, int64_t r0, int64_t r1,
                         size_t src_row_bytes) {
    g3_tensor piece = *t; /* the view of just these rows */
    piece.data = (const uint8_t *)t->data + (size_t)r0 * src_row_bytes;
    piece.n_bytes = (size_t)(r1 - r0) * src_row_bytes;
    g3_st_release(st, &piece);
}

/* Quantizes rows [0, rows) of t into dst on the pool, in pieces of about RELEASE_CHUNK_BYTES of
 * source, dropping each piece's pages once it is done: a mapped source never holds more than
 * one piece (the embedding of a 12B model is 2 GB of bf16). Returns the first non-finite source
 * element (r * cols + c; nothing after it is quantized), or -1. */
static int64_t quantize_tensor(g3_pool *pool, const g3_st *st, const g3_tensor *t, g3_wtype type,
                               g3_layout layout, int64_t rows, int64_t cols, uint8_t *dst,
                               quant_scratch scratch, int64_t *first_bad) {
    const size_t src_row = (size_t)cols * g3_dtype_size(t->dtype);
    const size_t rb = g3_wtype_row_bytes(type, cols);
    const int64_t step = piece_rows(src_row);
    for (int64_t r0 = 0; r0 < rows; r0 += step) {
        int64_t r1 = r0 + step < rows ? r0 + step : rows;
        quant_job j = {t, type, layout, cols, r0, r1, dst + (size_t)r0 * rb, scratch,
                       g3_quantize_row_best(), first_bad};
        g3_pool_run(pool, task_quantize, &j);
        release_rows(st, t, r0, r1, src_row);
        int64_t bad = job_first_bad(&j, pool);
        if (bad >= 0) return bad;
    }
    return -1;
}

/* A quantized source tensor copied into the x8 layout on the pool, in pieces of about
 * RELEASE_CHUNK_BYTES, each piece's source pages dropped once copied. */
static void repack_tensor(g3_pool *pool, const g3_st *st, const g3_tensor *t, g3_wtype type,
                          int64_t rows, int64_t cols, uint8_t *dst) {
    const size_t rb = g3_wtype_row_bytes(type, cols);
    const int64_t step = piece_rows(rb);
    for (int64_t r0 = 0; r0 < rows; r0 += step) {
        const int64_t r1 = r0 + step < rows ? r0 + step : rows;
        repack_job j = {(const uint8_t *)t->data + (size_t)r0 * rb, dst + (size_t)r0 * rb, type,
                        cols, r1 - r0};
        g3_pool_run(pool, task_repack, &j);
        release_rows(st, t, r0, r1, rb);
    }
}

/* Returns -1, or (quantizing) the first non-finite source element, which stops the load. */
static int64_t fill_binding(binding *b, uint8_t *arena, enum source src, g3_pool *pool,
                            quant_scratch scratch, int64_t *first_bad, const g3_st *st) {
    const g3_tensor *t = b->t;
    const g3_wtype qtype = b->qtype;
    const g3_layout layout = b->layout;
    if (b->kind == BIND_MATRIX) {
        b->dst_m->type = qtype; /* BF16 for a plain checkpoint */
        b->dst_m->layout = layout;
    }
    if (b->arena_offset == (size_t)-1) {
        b->dst_m->data = t->data;
        return -1;
    }
    size_t n = (size_t)t->n_elements;
    if (b->kind == BIND_NORM) {
        float *out = (float *)(arena + b->arena_offset);
        const float one = g3_st_metadata(st, "gemma3.norms") ? 0.0f : 1.0f; /* GGUF: 1 + w stored */
        for (size_t i = 0; i < n; i++) out[i] = one + load_elem(t, i);
        *b->dst_n = out;
        return -1;
    }
    uint8_t *out = arena + b->arena_offset;
    if (src == SRC_QUANTIZE) {
        int64_t bad = quantize_tensor(pool, st, t, qtype, layout, b->shape[0], b->shape[1], out,
                                      scratch, first_bad);
        if (bad >= 0) return bad;
    } else if (src == SRC_QFILE && layout == G3_LAYOUT_X8) {
        repack_tensor(pool, st, t, qtype, b->shape[0], b->shape[1], out);
    } else if (src == SRC_QFILE || t->dtype == G3_DTYPE_BF16) {
        memcpy(out, t->data, t->n_bytes);
    } else {
        uint16_t *o16 = (uint16_t *)(void *)out;
        for (size_t i = 0; i < n; i++) o16[i] = g3_f32_to_bf16(load_elem(t, i));
    }
    b->dst_m->data = out;
    return -1;
}

/* The arena: anonymous memory (zero-filled by the kernel, never cleared here), asked for in
 * transparent huge pages: the forward pass streams the matrices from it, and huge pages make
 * that faster, as for the READ load mode (README, "Loading"); 4 KiB pages fault faster on some
 * VMs but decoded up to a fifth slower (README, "Quantized weights"). */
static void *arena_alloc(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, n, MADV_HUGEPAGE);
    return p;
}

/* Faulting the arena in before quantizing into it, each thread an equal run of whole huge pages.
 * Quantizing faults them anyway, but unevenly: a 32 MB piece of source makes a few huge pages
 * of output, and a thread that meets one more than the other keeps the other waiting at the
 * piece's end. Where each fresh page costs milliseconds (VMs whose host backs memory only on
 * first touch) that waiting was a quarter of the load. A write per 4 KiB page (the first one of
 * a huge page faults it whole); MADV_POPULATE_WRITE, tried instead, ran the two threads' parts
 * one after the other (1B Q4_0: 1.3 s against 0.7). */
typedef struct fault_job {
    uint8_t *base;
    size_t n_bytes;
} fault_job;

static void task_fault_in(void *ctx, int ith, int nth) {
    const fault_job *j = ctx;
    size_t lo, hi;
    g3_split_bytes(j->n_bytes, G3_HUGE_PAGE, ith, nth, &lo, &hi);
    for (size_t i = lo; i < hi; i += 4096) ((volatile uint8_t *)j->base)[i] = 0;
}

/* The tensor-name prefix of this checkpoint: the first whose embedding exists. */
static const char *find_prefix(const g3_st *st) {
    char name[96];
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        snprintf(name, sizeof name, "%sembed_tokens.weight", prefixes[i]);
        if (g3_st_find(st, name)) return prefixes[i];
    }
    return NULL;
}

/* The table of every tensor the config calls for, pointing into w. *out is calloc'd. */
static int plan(const char *dir, const g3_st *st, const g3_config *cfg, g3_weights *w,
                binding **out, int *n_out) {
    *out = NULL;
    const char *prefix = find_prefix(st);
    if (!prefix)
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor model.embed_tokens.weight: missing (also looked for the "
                        "language_model.model. and model.language_model. prefixes)",
                        dir);
    w->prefix = prefix;
    const int64_t V = cfg->vocab_size, H = cfg->hidden_size, I = cfg->intermediate_size;
    const int64_t q = (int64_t)cfg->n_heads * cfg->head_dim, kv = (int64_t)cfg->n_kv_heads * cfg->head_dim;
    const int64_t hd = cfg->head_dim;
    int max_bindings = 3 + 13 * cfg->n_layers;
    binding *b = calloc((size_t)max_bindings, sizeof *b);
    if (!b) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", dir);
    int n = 0;
    add_matrix(b, &n, prefix, "embed_tokens.weight", V, H, &w->embed);
    add_norm(b, &n, prefix, "norm.weight", H, &w->final_norm);
    for (int l = 0; l < cfg->n_layers; l++) {
        g3_layer_weights *lw = &w->layers[l];
        char p[96];
        snprintf(p, sizeof p, "%slayers.%d.", prefix, l);
        add_norm(b, &n, p, "input_layernorm.weight", H, &lw->attn_norm);
        add_matrix(b, &n, p, "self_attn.q_proj.weight", q, H, &lw->wq);
        add_matrix(b, &n, p, "self_attn.k_proj.weight", kv, H, &lw->wk);
        add_matrix(b, &n, p, "self_attn.v_proj.weight", kv, H, &lw->wv);
        add_norm(b, &n, p, "self_attn.q_norm.weight", hd, &lw->q_norm);
        add_norm(b, &n, p, "self_attn.k_norm.weight", hd, &lw->k_norm);
        add_matrix(b, &n, p, "self_attn.o_proj.weight", H, q, &lw->wo);
        add_norm(b, &n, p, "post_attention_layernorm.weight", H, &lw->post_attn_norm);
        add_norm(b, &n, p, "pre_feedforward_layernorm.weight", H, &lw->pre_ffn_norm);
        add_matrix(b, &n, p, "mlp.gate_proj.weight", I, H, &lw->w_gate);
        add_matrix(b, &n, p, "mlp.up_proj.weight", I, H, &lw->w_up);
        add_matrix(b, &n, p, "mlp.down_proj.weight", H, I, &lw->w_down);
        add_norm(b, &n, p, "post_feedforward_layernorm.weight", H, &lw->post_ffn_norm);
    }
    /* The LM head: usually absent (tied to the embedding); if the file has one, it is used. */
    const char *head_name = NULL;
    for (size_t i = 0; i < sizeof lm_head_names / sizeof lm_head_names[0] && !head_name; i++)
        if (g3_st_find(st, lm_head_names[i])) head_name = lm_head_names[i];
    if (head_name) add_matrix(b, &n, "", head_name, V, H, &w->lm_head);
    else if (!cfg->tie_word_embeddings) /* required: pass 1 reports it missing */
        add_matrix(b, &n, "", strcmp(prefix, "language_model.model.") == 0 ? lm_head_names[1]
                                                                          : lm_head_names[0],
                   V, H, &w->lm_head);
    *out = b;
    *n_out = n;
    return GEMMA3_OK;
}

/* What the checkpoint is (plain or quantized) and what becomes of its matrices. */
static int resolve_source(const char *dir, const g3_st *st, int want, enum source *src,
                          g3_wtype *qtype) {
    const char *q = g3_st_metadata(st, "gemma3.quant");
    const int base = g3_mix_base(want); /* a recipe: its base type */
    if (!q) {
        *src = g3_wtype_is_block(base) ? SRC_QUANTIZE : SRC_PLAIN;
        *qtype = *src == SRC_QUANTIZE ? (g3_wtype)base : GEMMA3_WEIGHTS_BF16;
        return GEMMA3_OK;
    }
    int t = g3_wtype_parse(q);
    if (!g3_wtype_is_block(t))
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: __metadata__ gemma3.quant '%.40s' is not a known weight type (%s)",
                        dir, q, g3_wtype_list(1));
    const char *mix = g3_st_metadata(st, "gemma3.mix");
    if (want != GEMMA3_WEIGHTS_AS_STORED && want != t && !(mix && g3_mix_parse(mix) == want))
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: the checkpoint is quantized to %s; it cannot be loaded as %s (no "
                        "requantization: quantize the original checkpoint instead)",
                        dir, q, g3_wtype_name((g3_wtype)want));
    *src = SRC_QFILE;
    *qtype = (g3_wtype)t;
    return GEMMA3_OK;
}

/* What a matrix is in the model, for llama-quantize's recipes: its role and layer. */
static g3_role matrix_role(const char *name, int *layer) {
    const char *p = strstr(name, "layers.");
    *layer = p ? atoi(p + 7) : 0;
    if (strstr(name, "embed_tokens.")) return G3_ROLE_TOKEN_EMBD;
    if (strstr(name, "lm_head.")) return G3_ROLE_OUTPUT;
    if (strstr(name, ".v_proj.")) return G3_ROLE_ATTN_V;
    if (strstr(name, ".o_proj.")) return G3_ROLE_ATTN_OUTPUT;
    if (strstr(name, ".down_proj.")) return G3_ROLE_FFN_DOWN;
    return G3_ROLE_OTHER;
}

/* The quantizing choice: what a recipe asks (quant-mix.h), or the type asked for; both with
 * llama-quantize's fallback where the type's blocks do not divide the row. */
typedef struct mix_plan {
    int want;      /* a block type or a recipe */
    int n_layers;
    int tied;      /* no lm_head: the embedding is the head */
} mix_plan;

/* 1 if the plan has no LM head of its own (the embedding is the head). */
static int plan_tied(const binding *b, int n) {
    for (int i = 0; i < n; i++)
        if (b[i].kind == BIND_MATRIX && strstr(b[i].name, "lm_head.")) return 0;
    return 1;
}

/* A matrix's type and layout: BF16 rows for a plain checkpoint; quantizing, mix's choice; a
 * quantized file's own (the file's gemma3.quant, or gemma3.quant.NAME for a tensor of a mix).
 * Layout x8 only for a type with x8 kernels. */
static int bind_type(const char *dir, const g3_st *st, enum source src, g3_wtype qtype, g3_layout layout,
                     const mix_plan *mix, binding *b) {
    b->qtype = src == SRC_PLAIN ? GEMMA3_WEIGHTS_BF16 : qtype;
    if (b->kind != BIND_MATRIX || src == SRC_PLAIN) {
        b->layout = G3_LAYOUT_ROWS;
        return GEMMA3_OK;
    }
    if (src == SRC_QFILE) {
        char key[200];
        snprintf(key, sizeof key, "gemma3.quant.%s", b->name);
        const char *q = g3_st_metadata(st, key);
        const int t = q ? g3_wtype_parse(q) : (int)qtype;
        if (!g3_wtype_is_block(t))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: __metadata__ %s '%.40s' is not a known block type (%s)",
                            dir, key, q, g3_wtype_list(1));
        b->qtype = (g3_wtype)t;
    } else {
        int layer;
        const g3_role role = matrix_role(b->name, &layer);
        const int t = g3_mix_choose(mix->want, role, layer, mix->n_layers, b->shape[1], mix->tied);
        if (t < 0)
            return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: tensor %s: %lld columns are not a multiple of %d, "
                            "cannot be %s (and llama-quantize's fallback type is not built)", dir, b->name,
                            (long long)b->shape[1], g3_wtype_get((int)qtype)->block, g3_wtype_name(qtype));
        b->qtype = (g3_wtype)t;
    }
    b->layout = g3_wtype_has_x8(b->qtype) ? layout : G3_LAYOUT_ROWS;
    return GEMMA3_OK;
}

static int load_weights(const char *dir, const g3_config *cfg, g3_st_load load, int want,
                        g3_layout layout, int n_threads, int populate, g3_weights *w);

/* Binding only (gemma3 info, tests): mapped files are not faulted in. */
int g3_weights_load(const char *dir, const g3_config *cfg, g3_st_load load, g3_weights *w) {
    return load_weights(dir, cfg, load, GEMMA3_WEIGHTS_AS_STORED, G3_LAYOUT_ROWS, 0, 0, w);
}

int g3_weights_load_ex(const char *dir, const g3_config *cfg, g3_st_load load, int want,
                       g3_layout layout, int n_threads, g3_weights *w) {
    return load_weights(dir, cfg, load, want, layout, n_threads, 1, w);
}

/* 1 if a matrix of the quantized file st (main type qtype, a mix's tensors named by
 * gemma3.quant.NAME) has a type with x8 kernels: what x8 would repack. */
static int file_has_x8(const g3_st *st, g3_wtype qtype) {
    for (int i = 0; i < g3_st_count(st); i++) {
        const g3_tensor *t = g3_st_at(st, i);
        if (t->dtype != G3_DTYPE_U8) continue;
        char key[200];
        snprintf(key, sizeof key, "gemma3.quant.%s", t->name);
        const char *q = g3_st_metadata(st, key);
        const int type = q ? g3_wtype_parse(q) : (int)qtype;
        if (type > 0 && g3_wtype_has_x8((g3_wtype)type)) return 1;
    }
    return 0;
}

/* Opens dir's files into w->st and says what they hold (src) and become (qtype); *layout goes
 * back to rows for a quantized file of which nothing has an x8 layout (K-quants alone).
 * Quantizing or repacking reads each source tensor once: map it (no copy) and drop its pages
 * after. Used in place: read on n_threads threads, or mapped and faulted in on them. */
static int open_source(const char *dir, g3_st_load load, int want, g3_layout *layout, int n_threads,
                       int populate, g3_weights *w, enum source *src, g3_wtype *qtype) {
    const int may_quantize = g3_wtype_is_block(g3_mix_base(want));
    const int lazy = may_quantize || *layout == G3_LAYOUT_X8;
    g3_st *st;
    int rc = lazy ? g3_model_open_st(dir, G3_ST_LOAD_MMAP, 0, 0, &st)
                  : g3_model_open_st(dir, load, n_threads, populate, &st);
    if (rc != GEMMA3_OK) return rc;
    w->st = st;
    rc = resolve_source(dir, st, want, src, qtype);
    if (rc == GEMMA3_OK && *src == SRC_QFILE && !file_has_x8(st, *qtype)) *layout = G3_LAYOUT_ROWS;
    const int repack = *src == SRC_QFILE && *layout == G3_LAYOUT_X8;
    if (rc == GEMMA3_OK && lazy && *src != SRC_QUANTIZE && !repack &&
        (!may_quantize || load != G3_ST_LOAD_MMAP)) {
        /* used in place after all: bring it in the way the caller asked */
        g3_st_close(st);
        w->st = NULL;
        rc = g3_model_open_st(dir, load, n_threads, populate, &st);
        if (rc == GEMMA3_OK) w->st = st;
    }
    if (rc == GEMMA3_OK) g3_st_get_load_info(st, &w->load_info);
    return rc;
}

/* 1 if some matrix is bound in the x8 layout. */
static int any_x8(const binding *b, int n) {
    for (int i = 0; i < n; i++)
        if (b[i].kind == BIND_MATRIX && b[i].layout == G3_LAYOUT_X8) return 1;
    return 0;
}

/* What w says of its quantized matrices' layout: x8 or rows when they all have it, else mixed
 * (a mix's x8-able types repacked beside the others in rows). */
static void weights_layout(const binding *b, int n, g3_weights *w) {
    int n_x8 = 0, n_rows = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].kind != BIND_MATRIX || !g3_wtype_is_block(b[i].qtype)) continue;
        if (b[i].layout == G3_LAYOUT_X8) n_x8++;
        else n_rows++;
    }
    w->layout = n_x8 ? G3_LAYOUT_X8 : G3_LAYOUT_ROWS;
    w->layout_mixed = n_x8 && n_rows;
}

static int load_weights(const char *dir, const g3_config *cfg, g3_st_load load, int want,
                        g3_layout layout, int n_threads, int populate, g3_weights *w) {
    memset(w, 0, sizeof *w);
    if (want != GEMMA3_WEIGHTS_AS_STORED && !g3_wtype_get(want) && !g3_mix_is_recipe(want))
        return g3_error(GEMMA3_ERR_ARG, "%s: weight type %d is not one of %s", dir, want,
                        g3_wtype_list(0));
    enum source src = SRC_PLAIN;
    g3_wtype qtype = GEMMA3_WEIGHTS_BF16;
    int rc = open_source(dir, load, want, &layout, n_threads, populate, w, &src, &qtype);
    if (rc != GEMMA3_OK && !w->st) return rc;
    g3_st *st = w->st;
    binding *b = NULL;
    int n = 0;
    if (rc == GEMMA3_OK) rc = plan(dir, st, cfg, w, &b, &n);

    size_t arena_bytes = 0, max_cols = 0;
    size_t row_max = 0; /* the largest quantized row, for the x8 group buffers */
    const mix_plan mix = {src == SRC_QUANTIZE ? want : 0, cfg->n_layers, plan_tied(b, n)};
    for (int i = 0; i < n && rc == GEMMA3_OK; i++) {
        rc = bind_type(dir, st, src, qtype, layout, &mix, &b[i]);
        if (rc == GEMMA3_OK) rc = check_binding(dir, &b[i], st, src, &arena_bytes);
        if (b[i].kind != BIND_MATRIX) continue;
        if ((size_t)b[i].shape[1] > max_cols) max_cols = (size_t)b[i].shape[1];
        const size_t rb = g3_wtype_row_bytes(b[i].qtype, b[i].shape[1]);
        if (rb > row_max) row_max = rb;
    }
    /* a quantized file's matrices are repacked into x8 each where its type has x8 kernels, also
     * in a mix whose main type has none (K-quants, and the types without, stay in place) */
    const int repack = rc == GEMMA3_OK && src == SRC_QFILE && any_x8(b, n);
    g3_pool *pool = NULL;
    quant_scratch scratch = {NULL, NULL, row_max};
    size_t scratch_bytes = 0;
    int64_t *first_bad = NULL;
    if (rc == GEMMA3_OK && (src == SRC_QUANTIZE || repack)) {
        if (n_threads <= 0) n_threads = g3_n_cpus();
        rc = g3_pool_create(n_threads, &pool);
        if (rc == GEMMA3_OK && !(first_bad = malloc((size_t)n_threads * sizeof *first_bad)))
            rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", dir);
        if (rc == GEMMA3_OK && src == SRC_QUANTIZE) {
            /* per-thread fp32 rows (and x8 groups), in the arena's tail (still one allocation) */
            scratch_bytes = (size_t)n_threads * max_cols * sizeof(float);
            if (layout == G3_LAYOUT_X8) scratch_bytes += (size_t)n_threads * G3_X8 * scratch.row_max;
            scratch_bytes = (scratch_bytes + 63) & ~(size_t)63;
            arena_bytes += scratch_bytes;
        }
    }
    if (rc == GEMMA3_OK && arena_bytes) {
        w->owned = arena_alloc(arena_bytes);
        w->owned_bytes = arena_bytes;
        if (!w->owned) {
            rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory for the weights (%zu bytes)", dir,
                          arena_bytes);
        } else if (scratch_bytes) {
            scratch.rowbuf = (float *)(void *)((uint8_t *)w->owned + arena_bytes - scratch_bytes);
            scratch.groupbuf = (uint8_t *)(scratch.rowbuf + (size_t)n_threads * max_cols);
        }
    }
    double t0 = g3_now();
    if (rc == GEMMA3_OK && pool) {
        fault_job fj = {w->owned, arena_bytes};
        g3_pool_run(pool, task_fault_in, &fj);
    }
    if (rc == GEMMA3_OK) {
        for (int i = 0; i < n && rc == GEMMA3_OK; i++) {
            int64_t bad = fill_binding(&b[i], w->owned, src, pool, scratch, first_bad, st);
            if (bad >= 0) {
                rc = bad_source_error(dir, b[i].name, bad, b[i].shape[1], b[i].qtype);
                break;
            }
            w->n_params += b[i].t->n_elements;
            w->n_bytes += (int64_t)b[i].t->n_bytes;
            w->n_bytes_used += (int64_t)b[i].used_bytes;
        }
        if (src == SRC_QFILE) /* stored elements are bytes: count the weights instead */
            for (int i = 0; i < n; i++)
                if (b[i].kind == BIND_MATRIX)
                    w->n_params += b[i].shape[0] * b[i].shape[1] - b[i].t->n_elements;
        w->wtype = qtype;
        const char *file_mix = src == SRC_QFILE ? g3_st_metadata(st, "gemma3.mix") : NULL;
        w->mix = g3_mix_is_recipe(mix.want) ? mix.want : file_mix && g3_mix_parse(file_mix) > 0 ? g3_mix_parse(file_mix) : 0;
        weights_layout(b, n, w);
        if (!w->lm_head.data) w->lm_head = w->embed;
        if (src == SRC_QUANTIZE) w->quantize_seconds = g3_now() - t0;
        if (repack) w->repack_seconds = g3_now() - t0;
        int in_place = 0; /* a matrix of a mix left in the file's rows while others are repacked */
        for (int i = 0; i < n; i++) in_place |= b[i].kind == BIND_MATRIX && b[i].arena_offset == (size_t)-1;
        if ((src == SRC_QUANTIZE || repack) && !in_place) {
            /* nothing points into the files any more */
            g3_st_close(w->st);
            w->st = NULL;
        }
    }
    g3_pool_free(pool);
    free(first_bad);
    free(b);
    if (rc != GEMMA3_OK) g3_weights_free(w);
    return rc;
}

/* ---- non-finite values ------------------------------------------------------------------- */

/* One matrix scanned on the pool: each thread its rows, recording its first bad element. */
typedef struct scan_job {
    const uint8_t *data;
    g3_wtype type;
    g3_layout layout;
    int64_t rows, cols;
    int64_t *first_bad; /* [nth] row * cols + element (BF16) or row * blocks + block; -1 none */
} scan_job;

/* Is the element (a plain type) or a block scale (a block type's fp16 scales: the block at p,
 * or in the x8 layout its scale at p) a NaN or an infinity? mask: the type's nonfinite_mask. */
static int bad_at(const uint8_t *p, g3_wtype type, int plain, uint16_t mask) {
    if (!plain) return g3_wtype_block_nonfinite(type, p);
    uint16_t h;
    memcpy(&h, p, 2);
    return (h & mask) == mask;
}

static void task_scan(void *ctx, int ith, int nth) {
    scan_job *j = ctx;
    int lo, hi;
    g3_split((int)j->rows, ith, nth, 1, &lo, &hi);
    const size_t rb = g3_wtype_row_bytes(j->type, j->cols);
    const g3_wtype_traits *tr = g3_wtype_get(j->type);
    const int plain = !g3_wtype_is_block(j->type), x8 = j->layout == G3_LAYOUT_X8;
    const int64_t per_row = j->cols / tr->block;
    const uint16_t mask = tr->nonfinite_mask;
    /* a row's elements or block scales lie at equal steps from its first, in either layout */
    const size_t step = plain                  ? tr->block_bytes
                        : x8 && per_row > 1    ? g3_x8_scale_offset(j->type, j->cols, 0, 1)
                                               : rb / (size_t)per_row;
    j->first_bad[ith] = -1;
    for (int64_t r = lo; r < hi; r++) {
        const uint8_t *row =
            j->data + (x8 ? g3_x8_scale_offset(j->type, j->cols, r, 0) : (size_t)r * rb);
        int any = 0;
        for (int64_t e = 0; e < per_row; e++) any |= bad_at(row + e * step, j->type, plain, mask);
        if (!any) continue;
        for (int64_t e = 0; e < per_row; e++)
            if (bad_at(row + e * step, j->type, plain, mask)) {
                j->first_bad[ith] = r * per_row + e;
                return;
            }
    }
}

/* The first bad element of the matrix, or -1; in element units (BF16) or blocks. */
static int64_t scan_matrix(g3_pool *pool, int64_t *first_bad, g3_matrix m, int64_t rows, int64_t cols) {
    scan_job j = {m.data, m.type, m.layout, rows, cols, first_bad};
    g3_pool_run(pool, task_scan, &j);
    for (int t = 0; t < g3_pool_size(pool); t++) /* thread order is row order */
        if (first_bad[t] >= 0) return first_bad[t];
    return -1;
}

static int check_norm(const char *dir, const char *prefix, const char *name, const float *w, int n) {
    int64_t at = g3_first_nonfinite(w, (size_t)n);
    if (at < 0) return GEMMA3_OK;
    return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s%s: element %lld is %g (not finite)", dir,
                    prefix, name, (long long)at, (double)w[at] - 1.0);
}

static int check_matrix(const char *dir, g3_pool *pool, int64_t *first_bad, const char *prefix,
                        const char *name, g3_matrix m, int64_t rows, int64_t cols) {
    int64_t at = scan_matrix(pool, first_bad, m, rows, cols);
    if (at < 0) return GEMMA3_OK;
    if (!g3_wtype_is_block(m.type))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s%s: element [%lld, %lld] is not finite "
                        "(NaN or infinity)", dir, prefix, name, (long long)(at / cols),
                        (long long)(at % cols));
    int64_t blocks = cols / g3_wtype_get(m.type)->block;
    return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s%s: row %lld, block %lld: the %s scale is not "
                    "finite (NaN or infinity)", dir, prefix, name, (long long)(at / blocks),
                    (long long)(at % blocks), g3_wtype_name(m.type));
}

int g3_weights_check(const char *dir, const g3_config *cfg, const g3_weights *w, int matrices,
                     int n_threads) {
    const int64_t V = cfg->vocab_size, H = cfg->hidden_size, I = cfg->intermediate_size;
    const int64_t q = (int64_t)cfg->n_heads * cfg->head_dim, kv = (int64_t)cfg->n_kv_heads * cfg->head_dim;
    const char *pre = w->prefix ? w->prefix : "";
    char lp[96];
    int rc = check_norm(dir, pre, "norm.weight", w->final_norm, (int)H);
    for (int l = 0; l < cfg->n_layers && rc == GEMMA3_OK; l++) {
        const g3_layer_weights *lw = &w->layers[l];
        snprintf(lp, sizeof lp, "%slayers.%d.", pre, l);
        if ((rc = check_norm(dir, lp, "input_layernorm.weight", lw->attn_norm, (int)H)) ||
            (rc = check_norm(dir, lp, "self_attn.q_norm.weight", lw->q_norm, cfg->head_dim)) ||
            (rc = check_norm(dir, lp, "self_attn.k_norm.weight", lw->k_norm, cfg->head_dim)) ||
            (rc = check_norm(dir, lp, "post_attention_layernorm.weight", lw->post_attn_norm, (int)H)) ||
            (rc = check_norm(dir, lp, "pre_feedforward_layernorm.weight", lw->pre_ffn_norm, (int)H)) ||
            (rc = check_norm(dir, lp, "post_feedforward_layernorm.weight", lw->post_ffn_norm, (int)H)))
            break;
    }
    if (rc != GEMMA3_OK || !matrices) return rc;

    g3_pool *pool = NULL;
    rc = g3_pool_create(n_threads > 0 ? n_threads : g3_n_cpus(), &pool);
    int64_t *first_bad = rc == GEMMA3_OK ? malloc((size_t)g3_pool_size(pool) * sizeof *first_bad) : NULL;
    if (rc == GEMMA3_OK && !first_bad) rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", dir);
    if (rc == GEMMA3_OK) rc = check_matrix(dir, pool, first_bad, pre, "embed_tokens.weight", w->embed, V, H);
    if (rc == GEMMA3_OK && w->lm_head.data != w->embed.data)
        rc = check_matrix(dir, pool, first_bad, "", "lm_head.weight", w->lm_head, V, H);
    for (int l = 0; l < cfg->n_layers && rc == GEMMA3_OK; l++) {
        const g3_layer_weights *lw = &w->layers[l];
        snprintf(lp, sizeof lp, "%slayers.%d.", pre, l);
        if ((rc = check_matrix(dir, pool, first_bad, lp, "self_attn.q_proj.weight", lw->wq, q, H)) ||
            (rc = check_matrix(dir, pool, first_bad, lp, "self_attn.k_proj.weight", lw->wk, kv, H)) ||
            (rc = check_matrix(dir, pool, first_bad, lp, "self_attn.v_proj.weight", lw->wv, kv, H)) ||
            (rc = check_matrix(dir, pool, first_bad, lp, "self_attn.o_proj.weight", lw->wo, H, q)) ||
            (rc = check_matrix(dir, pool, first_bad, lp, "mlp.gate_proj.weight", lw->w_gate, I, H)) ||
            (rc = check_matrix(dir, pool, first_bad, lp, "mlp.up_proj.weight", lw->w_up, I, H)) ||
            (rc = check_matrix(dir, pool, first_bad, lp, "mlp.down_proj.weight", lw->w_down, H, I)))
            break;
    }
    free(first_bad);
    g3_pool_free(pool);
    return rc;
}

/* ---- writing a quantized checkpoint ------------------------------------------------------ */

#define WRITE_CHUNK_BYTES ((size_t)16 << 20) /* quantized bytes per write: bounds the buffer */

/* The written file's tensors: matrices as U8 rows of blocks, norms as stored (NULL: no memory). */
static g3_st_entry *quantized_entries(const binding *b, int n) {
    g3_st_entry *entries = calloc((size_t)(n > 0 ? n : 1), sizeof *entries);
    for (int i = 0; entries && i < n; i++) {
        const g3_tensor *t = b[i].t;
        g3_st_entry *e = &entries[i];
        e->name = t->name;
        if (b[i].kind == BIND_MATRIX) {
            e->dtype = G3_DTYPE_U8;
            e->n_dims = 2;
            e->shape[0] = b[i].shape[0];
            e->shape[1] = (int64_t)g3_wtype_row_bytes(b[i].qtype, b[i].shape[1]);
        } else {
            e->dtype = t->dtype;
            e->n_dims = t->n_dims;
            memcpy(e->shape, t->shape, sizeof e->shape);
        }
    }
    return entries;
}

int g3_weights_write_quantized(const char *src_dir, const g3_config *cfg, g3_wtype type,
                               int n_threads, const char *path) {
    if (!g3_wtype_is_block(type) && !g3_mix_is_recipe((int)type))
        return g3_error(GEMMA3_ERR_ARG, "%s: cannot quantize to %s (%s)", src_dir,
                        g3_wtype_name(type), g3_wtype_list(1));
    g3_weights *w = calloc(1, sizeof *w); /* only the destinations of the plan */
    g3_st *st = NULL;
    binding *b = NULL;
    g3_st_entry *entries = NULL;
    g3_pool *pool = NULL;
    g3_st_writer *wr = NULL;
    uint8_t *buf = NULL;
    int n = 0;
    int rc = w ? GEMMA3_OK : g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", src_dir);
    if (rc == GEMMA3_OK) rc = g3_model_open_st(src_dir, G3_ST_LOAD_MMAP, 0, 0, &st);
    const char *q = rc == GEMMA3_OK ? g3_st_metadata(st, "gemma3.quant") : NULL;
    if (q)
        rc = g3_error(GEMMA3_ERR_UNSUPPORTED,
                      "%s: the checkpoint is already quantized (%.40s); quantize the original "
                      "checkpoint instead",
                      src_dir, q);
    if (rc == GEMMA3_OK) rc = plan(src_dir, st, cfg, w, &b, &n);
    size_t arena_dummy = 0, max_cols = 0, max_row = 0;
    const mix_plan mix = {(int)type, cfg->n_layers, plan_tied(b, n)};
    for (int i = 0; i < n && rc == GEMMA3_OK; i++) {
        rc = bind_type(src_dir, st, SRC_QUANTIZE, (g3_wtype)g3_mix_base(type), G3_LAYOUT_ROWS, &mix, &b[i]);
        if (rc == GEMMA3_OK) rc = check_binding(src_dir, &b[i], st, SRC_QUANTIZE, &arena_dummy);
        if (b[i].kind == BIND_MATRIX) {
            if ((size_t)b[i].shape[1] > max_cols) max_cols = (size_t)b[i].shape[1];
            size_t rb = g3_wtype_row_bytes(b[i].qtype, b[i].shape[1]);
            if (rb > max_row) max_row = rb;
        }
    }
    if (rc == GEMMA3_OK && !(entries = quantized_entries(b, n)))
        rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", src_dir);
    if (n_threads <= 0) n_threads = g3_n_cpus();
    size_t chunk_rows = max_row ? WRITE_CHUNK_BYTES / max_row : 1;
    if (chunk_rows < 1) chunk_rows = 1;
    size_t rowbuf_bytes = ((size_t)n_threads * max_cols * sizeof(float) + 63) & ~(size_t)63;
    if (rc == GEMMA3_OK) rc = g3_pool_create(n_threads, &pool);
    int64_t *first_bad = rc == GEMMA3_OK ? malloc((size_t)n_threads * sizeof *first_bad) : NULL;
    if (rc == GEMMA3_OK && !first_bad) rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    if (rc == GEMMA3_OK && !(buf = g3_alloc_aligned(chunk_rows * max_row + rowbuf_bytes)))
        rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory for a %zu-byte write buffer", path,
                      chunk_rows * max_row + rowbuf_bytes);
    /* norms as stored: a GGUF source's hold 1 + w, and the file says so; a matrix whose type is
     * not the file's (a fallback, a mix) is named by gemma3.quant.NAME */
    const char **meta = rc == GEMMA3_OK ? calloc((size_t)(8 + 2 * n), sizeof *meta) : NULL;
    char *keys = meta ? calloc((size_t)n, sizeof b[0].name + 16) : NULL;
    if (rc == GEMMA3_OK && !keys) rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    int n_meta = 0;
    if (rc == GEMMA3_OK) {
        const char *base[8] = {"format", "pt", "gemma3.quant", g3_wtype_name((g3_wtype)g3_mix_base(type)),
                               "gemma3.norms", "plus_one", "gemma3.mix", g3_mix_name((int)type)};
        n_meta = g3_st_metadata(st, "gemma3.norms") ? 3 : 2;
        memcpy(meta, base, 6 * sizeof *meta);
        if (g3_mix_is_recipe((int)type)) meta[2 * n_meta] = base[6], meta[2 * n_meta++ + 1] = base[7];
        for (int i = 0; i < n; i++) {
            if (b[i].kind != BIND_MATRIX || b[i].qtype == type) continue;
            char *k = keys + (size_t)i * (sizeof b[0].name + 16);
            snprintf(k, sizeof b[0].name + 16, "gemma3.quant.%s", b[i].name);
            meta[2 * n_meta] = k;
            meta[2 * n_meta++ + 1] = g3_wtype_name(b[i].qtype);
        }
        rc = g3_st_writer_create(path, entries, n, meta, n_meta, &wr);
    }
    float *rowbuf = buf ? (float *)(void *)(buf + chunk_rows * max_row) : NULL;
    for (int i = 0; i < n && rc == GEMMA3_OK; i++) {
        const g3_tensor *t = b[i].t;
        if (b[i].kind == BIND_NORM) {
            rc = g3_st_writer_append(wr, t->data, t->n_bytes);
        } else {
            size_t rb = g3_wtype_row_bytes(b[i].qtype, b[i].shape[1]);
            for (int64_t r = 0; r < b[i].shape[0] && rc == GEMMA3_OK; r += (int64_t)chunk_rows) {
                int64_t r1 = r + (int64_t)chunk_rows < b[i].shape[0] ? r + (int64_t)chunk_rows : b[i].shape[0];
                quant_job j = {t, b[i].qtype, G3_LAYOUT_ROWS, b[i].shape[1], r, r1, buf, {rowbuf, NULL, 0},
                               g3_quantize_row_best(), first_bad};
                g3_pool_run(pool, task_quantize, &j);
                int64_t bad = job_first_bad(&j, pool);
                if (bad >= 0) rc = bad_source_error(src_dir, b[i].name, bad, b[i].shape[1], b[i].qtype);
                if (rc == GEMMA3_OK) rc = g3_st_writer_append(wr, buf, (size_t)(r1 - r) * rb);
                g3_tensor piece = *t; /* these rows' source pages are done with */
                piece.data = (const uint8_t *)t->data + (size_t)r * (t->n_bytes / (size_t)b[i].shape[0]);
                piece.n_bytes = (size_t)(r1 - r) * (t->n_bytes / (size_t)b[i].shape[0]);
                g3_st_release(st, &piece);
            }
        }
        g3_st_release(st, t);
    }
    if (rc == GEMMA3_OK) {
        rc = g3_st_writer_finish(wr); /* frees wr, removes the file on error */
        wr = NULL;
    }
    g3_st_writer_abort(wr);
    g3_free_aligned(buf);
    g3_pool_free(pool);
    free(first_bad);
    free(entries);
    free(meta);
    free(keys);
    free(b);
    g3_st_close(st);
    free(w);
    return rc;
}

void g3_weights_free(g3_weights *w) {
    if (!w) return;
    g3_st_close(w->st);
    if (w->owned) munmap(w->owned, w->owned_bytes);
    memset(w, 0, sizeof *w);
}
