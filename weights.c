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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum bind_kind { BIND_MATRIX, BIND_NORM };

typedef struct binding {
    char name[160];
    int n_dims;
    int64_t shape[2];
    enum bind_kind kind;
    const void **dst;       /* where the bound pointer goes */
    const g3_tensor *t;     /* found in pass 1 */
    size_t arena_offset;    /* for converted / copied data, (size_t)-1 if used in place */
} binding;

static const char *const prefixes[] = {"model.", "language_model.model.", "model.language_model."};
static const char *const lm_head_names[] = {"lm_head.weight", "language_model.lm_head.weight"};

static void add(binding *b, int *n, const char *prefix, const char *name, int64_t d0, int64_t d1,
                enum bind_kind kind, const void **dst) {
    binding *x = &b[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s%s", prefix, name);
    x->n_dims = d1 ? 2 : 1;
    x->shape[0] = d0;
    x->shape[1] = d1;
    x->kind = kind;
    x->dst = dst;
}

/* Finds and checks one tensor; returns the arena bytes it needs (0 when used in place). */
static int check_binding(const char *dir, binding *b, const g3_st *st, size_t *arena_bytes) {
    char want[64], got[160];
    const g3_tensor *t = g3_st_find(st, b->name);
    if (!t)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: missing (expected shape %s)", dir,
                        b->name, g3_shape_str(want, sizeof want, b->shape, b->n_dims));
    int same = t->n_dims == b->n_dims;
    for (int d = 0; same && d < b->n_dims; d++) same = t->shape[d] == b->shape[d];
    if (!same)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: expected shape %s, got %s", dir,
                        b->name, g3_shape_str(want, sizeof want, b->shape, b->n_dims),
                        g3_shape_str(got, sizeof got, t->shape, t->n_dims));
    if (t->dtype != G3_DTYPE_BF16 && t->dtype != G3_DTYPE_F16 && t->dtype != G3_DTYPE_F32)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: tensor %s: dtype %s not supported (BF16, F16 or F32)", dir, b->name,
                        g3_dtype_name(t->dtype));
    b->t = t;
    size_t n = (size_t)t->n_elements, need = 0;
    if (b->kind == BIND_NORM) need = n * sizeof(float);
    else if (t->dtype != G3_DTYPE_BF16 || ((uintptr_t)t->data & 1u)) need = n * sizeof(uint16_t);
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

static void fill_binding(binding *b, uint8_t *arena) {
    const g3_tensor *t = b->t;
    if (b->arena_offset == (size_t)-1) {
        *b->dst = t->data;
        return;
    }
    size_t n = (size_t)t->n_elements;
    if (b->kind == BIND_NORM) {
        float *out = (float *)(arena + b->arena_offset);
        for (size_t i = 0; i < n; i++) out[i] = 1.0f + load_elem(t, i);
        *b->dst = out;
        return;
    }
    uint16_t *out = (uint16_t *)(arena + b->arena_offset);
    if (t->dtype == G3_DTYPE_BF16) memcpy(out, t->data, n * sizeof *out);
    else for (size_t i = 0; i < n; i++) out[i] = g3_f32_to_bf16(load_elem(t, i));
    *b->dst = out;
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

int g3_weights_load(const char *dir, const g3_config *cfg, g3_st_load load, g3_weights *w) {
    memset(w, 0, sizeof *w);
    g3_st *st;
    int rc = g3_st_open_dir_as(dir, load, &st);
    if (rc != GEMMA3_OK) return rc;
    w->st = st;
    const char *prefix = find_prefix(st);
    if (!prefix) {
        g3_weights_free(w);
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor model.embed_tokens.weight: missing (also looked for the "
                        "language_model.model. and model.language_model. prefixes)",
                        dir);
    }
    w->prefix = prefix;

    const int64_t V = cfg->vocab_size, H = cfg->hidden_size, I = cfg->intermediate_size;
    const int64_t q = (int64_t)cfg->n_heads * cfg->head_dim, kv = (int64_t)cfg->n_kv_heads * cfg->head_dim;
    const int64_t hd = cfg->head_dim;
    int max_bindings = 3 + 13 * cfg->n_layers;
    binding *b = calloc((size_t)max_bindings, sizeof *b);
    if (!b) {
        g3_weights_free(w);
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", dir);
    }
    int n = 0;
    add(b, &n, prefix, "embed_tokens.weight", V, H, BIND_MATRIX, (const void **)&w->embed);
    add(b, &n, prefix, "norm.weight", H, 0, BIND_NORM, (const void **)&w->final_norm);
    for (int l = 0; l < cfg->n_layers; l++) {
        g3_layer_weights *lw = &w->layers[l];
        char p[96];
        snprintf(p, sizeof p, "%slayers.%d.", prefix, l);
        add(b, &n, p, "input_layernorm.weight", H, 0, BIND_NORM, (const void **)&lw->attn_norm);
        add(b, &n, p, "self_attn.q_proj.weight", q, H, BIND_MATRIX, (const void **)&lw->wq);
        add(b, &n, p, "self_attn.k_proj.weight", kv, H, BIND_MATRIX, (const void **)&lw->wk);
        add(b, &n, p, "self_attn.v_proj.weight", kv, H, BIND_MATRIX, (const void **)&lw->wv);
        add(b, &n, p, "self_attn.q_norm.weight", hd, 0, BIND_NORM, (const void **)&lw->q_norm);
        add(b, &n, p, "self_attn.k_norm.weight", hd, 0, BIND_NORM, (const void **)&lw->k_norm);
        add(b, &n, p, "self_attn.o_proj.weight", H, q, BIND_MATRIX, (const void **)&lw->wo);
        add(b, &n, p, "post_attention_layernorm.weight", H, 0, BIND_NORM,
            (const void **)&lw->post_attn_norm);
        add(b, &n, p, "pre_feedforward_layernorm.weight", H, 0, BIND_NORM,
            (const void **)&lw->pre_ffn_norm);
        add(b, &n, p, "mlp.gate_proj.weight", I, H, BIND_MATRIX, (const void **)&lw->w_gate);
        add(b, &n, p, "mlp.up_proj.weight", I, H, BIND_MATRIX, (const void **)&lw->w_up);
        add(b, &n, p, "mlp.down_proj.weight", H, I, BIND_MATRIX, (const void **)&lw->w_down);
        add(b, &n, p, "post_feedforward_layernorm.weight", H, 0, BIND_NORM,
            (const void **)&lw->post_ffn_norm);
    }
    /* The LM head: usually absent (tied to the embedding); if the file has one, it is used. */
    const char *head = NULL;
    for (size_t i = 0; i < sizeof lm_head_names / sizeof lm_head_names[0] && !head; i++)
        if (g3_st_find(st, lm_head_names[i])) head = lm_head_names[i];
    if (head) add(b, &n, "", head, V, H, BIND_MATRIX, (const void **)&w->lm_head);
    else if (!cfg->tie_word_embeddings) /* required: pass 1 reports it missing */
        add(b, &n, "", strcmp(prefix, "language_model.model.") == 0 ? lm_head_names[1]
                                                                     : lm_head_names[0],
            V, H, BIND_MATRIX, (const void **)&w->lm_head);

    size_t arena_bytes = 0;
    for (int i = 0; i < n && rc == GEMMA3_OK; i++) rc = check_binding(dir, &b[i], st, &arena_bytes);
    if (rc == GEMMA3_OK && arena_bytes) {
        w->owned = g3_alloc_aligned(arena_bytes);
        if (!w->owned)
            rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory converting weights (%zu bytes)", dir,
                          arena_bytes);
    }
    if (rc == GEMMA3_OK) {
        for (int i = 0; i < n; i++) {
            fill_binding(&b[i], w->owned);
            w->n_params += b[i].t->n_elements;
            w->n_bytes += (int64_t)b[i].t->n_bytes;
        }
        if (!w->lm_head) w->lm_head = w->embed;
    }
    free(b);
    if (rc != GEMMA3_OK) g3_weights_free(w);
    return rc;
}

void g3_weights_free(g3_weights *w) {
    if (!w) return;
    g3_st_close(w->st);
    g3_free_aligned(w->owned);
    memset(w, 0, sizeof *w);
}
