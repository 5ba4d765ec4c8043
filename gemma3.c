/* gemma3.c - the model (config + weights, read only) and the session (KV cache, scratch, thread
 * pool), and the Gemma 3 forward pass.
 *
 * The forward pass follows Hugging Face transformers' Gemma3ForCausalLM (modeling_gemma3.py) step
 * by step; docs/forward-pass.md §2 numbers the steps as the comments below do, §6 lists the
 * pitfalls. All numeric work goes through the session's kernel table (kernels.h) and its thread
 * pool (threads.h): no SIMD and no #ifdef here.
 *
 * Determinism. Every output element is computed by exactly one thread, by a kernel whose result
 * does not depend on how the work was split, and attention visits keys in ascending position
 * whatever the chunking. So, within one ISA table and one precision mode, logits are
 * bit-identical for any thread count and for any split of a sequence into forward calls. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "gemma3.h"
#include "gguf-model.h"
#include "kernels.h"
#include "quant-mix.h"
#include "quant.h"
#include "safetensors.h"
#include "session-view.h"
#include "threads.h"
#include "tokenizer.h"
#include "util.h"
#include "weights.h"

/* ==== model =================================================================================== */

struct gemma3_model {
    g3_config cfg;
    g3_weights w;
    gemma3_tokenizer *tok; /* NULL when the directory has no tokenizer.model */
    int load_auto;         /* the load mode was AUTO's to choose */
};

static g3_st_load st_load_mode(const gemma3_model_params *params) {
    switch (params ? params->load_mode : GEMMA3_LOAD_AUTO) {
    case GEMMA3_LOAD_MMAP: return G3_ST_LOAD_MMAP;
    case GEMMA3_LOAD_READ: return G3_ST_LOAD_READ;
    default: return G3_ST_LOAD_AUTO;
    }
}

/* Loads DIR/tokenizer.model if the file exists: a checkpoint without one still runs on ids. */
static int load_tokenizer(const char *dir, gemma3_tokenizer **tok) {
    char path[4096];
    if (g3_model_is_gguf(dir)) return g3_gguf_model_tokenizer(dir, tok);
    int rc = g3_path_join(path, sizeof path, dir, "tokenizer.model");
    if (rc != GEMMA3_OK) return rc;
    if (access(path, F_OK) != 0 && errno == ENOENT) return GEMMA3_OK;
    return g3_tokenizer_load_checkpoint_file(path, tok);
}

/* Every special id of the tokenizer must be a row of the model: a config whose vocab_size is
 * below them cannot embed the chat markers (the reverse, more rows than pieces, is the real
 * Gemma 3's 262,208 rows for 262,144 pieces: the front end samples only ids with a piece). */
static int check_vocab(const char *dir, const g3_config *c, const gemma3_tokenizer *tok) {
    static const char *const names[] = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>",
                                        "<end_of_turn>"};
    for (int k = GEMMA3_SPECIAL_PAD; k <= GEMMA3_SPECIAL_END_OF_TURN; k++) {
        int32_t id = gemma3_tokenizer_special(tok, (enum gemma3_special)k);
        if (id >= c->vocab_size)
            return g3_error(GEMMA3_ERR_FORMAT,
                            "%s: config.json vocab_size %d is smaller than the tokenizer's "
                            "(%d pieces; %s is id %d)",
                            dir, c->vocab_size, gemma3_tokenizer_vocab_size(tok), names[k], (int)id);
    }
    return GEMMA3_OK;
}

int gemma3_model_load(const char *dir, gemma3_model **out) { return gemma3_model_load_ex(dir, NULL, out); }

/* The public enum is the type table's index (quant.h): no conversion. */
const char *gemma3_weight_type_name(enum gemma3_weight_type type) {
    if (g3_mix_is_recipe((int)type)) return g3_mix_name((int)type);
    return type == GEMMA3_WEIGHTS_AS_STORED ? "as-stored" : g3_wtype_name(type);
}

int gemma3_weight_type_parse(const char *name) {
    int t = g3_wtype_parse(name);
    if (t < 0) t = g3_mix_parse(name);
    if (t < 0)
        return g3_error(GEMMA3_ERR_ARG, "weight type '%s' is not one of %s", name ? name : "(null)",
                        gemma3_weight_type_list(0));
    return t;
}

int gemma3_weight_type_is_quantized(enum gemma3_weight_type type) {
    return g3_wtype_is_block((int)type) || g3_mix_is_recipe((int)type);
}

/* The type table's names, then the recipes'. Written once, before any thread could ask. */
static char weight_type_lists[2][512];

static void make_weight_type_lists(void) {
    for (int q = 0; q < 2; q++)
        snprintf(weight_type_lists[q], sizeof weight_type_lists[q], "%s%s", g3_wtype_list(q), g3_mix_list());
}

const char *gemma3_weight_type_list(int quantized_only) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_weight_type_lists);
    return weight_type_lists[quantized_only != 0];
}

/* The layout of quantized matrices: x8 where the sessions' quantized kernels prefer it. */
static g3_layout quant_layout(enum gemma3_repack repack, const char *isa) {
    if (repack != GEMMA3_REPACK_AUTO) return repack == GEMMA3_REPACK_X8 ? G3_LAYOUT_X8 : G3_LAYOUT_ROWS;
    const int level = g3_isa_choose(isa); /* refused again, with its message, by the session */
    const g3_quant_kernels *k = level >= 0 ? g3_quant_kernels_get((g3_isa)level) : NULL;
    return k && k->prefer_x8 ? G3_LAYOUT_X8 : G3_LAYOUT_ROWS;
}

int gemma3_model_load_ex(const char *dir, const gemma3_model_params *params, gemma3_model **out) {
    *out = NULL;
    if (!dir || !*dir) return g3_error(GEMMA3_ERR_ARG, "model: no directory given (an empty name)");
    gemma3_model *m = calloc(1, sizeof *m);
    if (!m) return g3_error(GEMMA3_ERR_NOMEM, "model: out of memory");
    const int want = params ? (int)params->weight_type : GEMMA3_WEIGHTS_AS_STORED;
    int n_threads = params ? params->n_threads : 0;
    if (n_threads > 0) n_threads = gemma3_threads_cap(n_threads);
    int rc = GEMMA3_OK;
    if (want != GEMMA3_WEIGHTS_AS_STORED && !g3_wtype_get(want) && !g3_mix_is_recipe(want))
        rc = g3_error(GEMMA3_ERR_ARG, "model: weight_type %d is not a gemma3_weight_type",
                      (int)params->weight_type);
    else if (n_threads < 0 || n_threads > 1024)
        rc = g3_error(GEMMA3_ERR_ARG, "model: n_threads %d is out of range [0, 1024]", n_threads);
    const enum gemma3_repack repack = params ? params->repack : GEMMA3_REPACK_AUTO;
    if (rc == GEMMA3_OK && (repack < GEMMA3_REPACK_AUTO || repack > GEMMA3_REPACK_X8))
        rc = g3_error(GEMMA3_ERR_ARG, "model: repack %d is not a gemma3_repack", (int)repack);
    if (rc == GEMMA3_OK) rc = g3_model_config_load(dir, &m->cfg); /* config.json or a GGUF's */
    if (rc == GEMMA3_OK)
        rc = g3_weights_load_ex(dir, &m->cfg, st_load_mode(params), want,
                                quant_layout(repack, params ? params->isa : NULL), n_threads, &m->w);
    if (rc == GEMMA3_OK)
        rc = g3_weights_check(dir, &m->cfg, &m->w, params && params->check_tensors, n_threads);
    if (rc == GEMMA3_OK) rc = load_tokenizer(dir, &m->tok);
    if (rc == GEMMA3_OK && m->tok) rc = check_vocab(dir, &m->cfg, m->tok);
    m->load_auto = st_load_mode(params) == G3_ST_LOAD_AUTO;
    if (rc != GEMMA3_OK) {
        gemma3_model_free(m);
        return rc;
    }
    *out = m;
    return GEMMA3_OK;
}

void gemma3_model_free(gemma3_model *model) {
    if (!model) return;
    g3_weights_free(&model->w);
    gemma3_tokenizer_free(model->tok);
    free(model);
}

/* The tokenizer is wired in by the tokenizer module; until then a model has none. */
const gemma3_tokenizer *gemma3_model_tokenizer(const gemma3_model *model) { return model->tok; }

/* The configuration fields of info. */
static void info_from_config(const g3_config *c, gemma3_model_info *info) {
    memset(info, 0, sizeof *info);
    info->architecture = c->architecture;
    info->vocab_size = c->vocab_size;
    info->hidden_size = c->hidden_size;
    info->intermediate_size = c->intermediate_size;
    info->n_layers = c->n_layers;
    info->n_heads = c->n_heads;
    info->n_kv_heads = c->n_kv_heads;
    info->head_dim = c->head_dim;
    info->sliding_window = c->sliding_window;
    info->max_position_embeddings = c->max_position_embeddings;
    info->bos_id = c->bos_id;
    _Static_assert(GEMMA3_MAX_EOS >= G3_MAX_EOS, "the model info holds every eos id of the config");
    info->n_eos = c->n_eos < GEMMA3_MAX_EOS ? c->n_eos : GEMMA3_MAX_EOS;
    for (int i = 0; i < info->n_eos; i++) info->eos_ids[i] = c->eos_ids[i];
    info->multimodal = c->multimodal;
    info->query_pre_attn_scalar = c->query_pre_attn_scalar;
    info->rms_norm_eps = c->rms_norm_eps;
    info->rope_theta_full = c->rope_theta_full;
    info->rope_factor_full = c->rope_factor_full;
    info->rope_theta_sliding = c->rope_theta_sliding;
    info->rope_factor_sliding = c->rope_factor_sliding;
    info->attn_softcap = c->attn_softcap;
    info->final_softcap = c->final_softcap;
    info->pad_id = c->pad_id;
    info->tied_lm_head = c->tie_word_embeddings;
    info->tensor_prefix = "";
    _Static_assert(GEMMA3_MAX_LAYERS >= G3_MAX_LAYERS, "the model info holds every layer's type");
    for (int l = 0; l < c->n_layers; l++) info->layer_types[l] = c->layer_types[l] == G3_LAYER_FULL ? 'F' : 'S';
}

void gemma3_model_get_info(const gemma3_model *model, gemma3_model_info *info) {
    info_from_config(&model->cfg, info);
    info->n_params = model->w.n_params;
    info->tensor_prefix = model->w.prefix;
    info->tied_lm_head = model->w.lm_head.data == model->w.embed.data;
    const g3_st_load_info *li = &model->w.load_info;
    info->load_mode = model->w.quantize_seconds > 0 ? "quantized from mmap"
                      : model->w.repack_seconds > 0 ? "repacked from mmap"
                      : li->bytes_read && li->bytes_mapped ? "read+mmap"
                      : li->bytes_read ? "read" : "mmap";
    info->load_auto = model->load_auto;
    info->load_from_disk = li->not_populated;
    info->mem_available = (int64_t)li->mem_available;
    info->load_bytes = (int64_t)(li->bytes_read + li->bytes_mapped);
    info->load_seconds = li->seconds;
    info->load_huge_bytes = (int64_t)li->bytes_huge_mapped;
    info->weight_layout = model->w.layout_mixed ? "mixed" : model->w.layout == G3_LAYOUT_X8 ? "x8" : "rows";
    info->repack_seconds = model->w.repack_seconds;
    info->weight_bytes = model->w.n_bytes_used;
    info->stored_bytes = model->w.n_bytes;
    info->weight_type = g3_wtype_name(model->w.wtype);
    info->weight_mix = model->w.mix ? g3_mix_name(model->w.mix) : NULL;
    info->weight_mix_label = model->w.mix ? g3_mix_ftype_name(model->w.mix) : NULL;
    info->quantize_seconds = model->w.quantize_seconds;
}

int gemma3_model_peek(const char *dir, gemma3_model_info *info) {
    static _Thread_local g3_config cfg; /* info->architecture points into it */
    int rc = g3_model_config_load(dir, &cfg); /* config.json, or a GGUF's metadata */
    if (rc != GEMMA3_OK) return rc;
    info_from_config(&cfg, info);
    info->mem_available = (int64_t)g3_mem_available();
    return GEMMA3_OK;
}

int gemma3_model_is_gguf(const char *path) { return g3_model_is_gguf(path); }

int gemma3_gguf_describe(const char *path, FILE *out) { return g3_gguf_model_describe(path, out); }

int gemma3_gguf_tokenizer(const char *path, gemma3_tokenizer **out) {
    return g3_gguf_model_tokenizer(path, out);
}

int64_t gemma3_kv_cache_bytes(const gemma3_model_info *info, int n_ctx, int kv_type) {
    g3_config c = {.n_layers = info->n_layers, .n_kv_heads = info->n_kv_heads,
                   .head_dim = info->head_dim, .sliding_window = info->sliding_window};
    for (int l = 0; l < c.n_layers && l < G3_MAX_LAYERS; l++)
        c.layer_types[l] = info->layer_types[l] == 'F' ? G3_LAYER_FULL : G3_LAYER_SLIDING;
    return (int64_t)g3_kv_bytes(&c, n_ctx, 0, kv_type == GEMMA3_KV_F32 ? 4 : 2);
}

/* ==== session ================================================================================= */

/* Matmul rows are handed to threads in multiples of ROW_GRAIN (whole SIMD tiles of a batch), a
 * single token's in multiples of DECODE_GRAIN: decode streams the weights, and at 16 threads a
 * hidden size of 1152 rows is 72 grains of 16 (the slowest thread gets 5, 11% over the mean)
 * but 144 of 8 (9 each). Which rows a thread gets never changes a value. */
#define ROW_GRAIN 16
#define DECODE_GRAIN 8

/* Per-layer KV cache. A sliding layer keeps a ring of min(W + n_swa_extra, n_ctx) slots
 * (position p lives in slot p % n_slots), a full layer one slot per position. A slot holds nKV*hd keys (or values)
 * in the cache dtype. */
typedef struct kv_layer {
    void *k, *v;     /* [n_slots][nKV*hd], f32 or bf16 */
    int n_slots;
} kv_layer;

struct gemma3_session {
    int (*abort_fn)(void *ctx); /* gemma3_session_set_abort */
    void *abort_ctx;
    const gemma3_model *model;
    const g3_config *cfg;
    const g3_kernels *kern;
    const g3_quant_kernels *qkern;
    g3_backend backend;            /* the two tables and the precision, for g3_matmul */
    g3_pool *pool;
    int n_ctx, n_batch, exact, kv_bf16;
    int n_swa_extra;               /* sliding rings keep W + this many positions */
    int quant;                     /* the model's matrices are Q8_0/Q4_0 blocks */
    int pos;                       /* tokens in the cache */
    int32_t *tokens;               /* [n_ctx] the ids of those tokens (saved state, prefix reuse) */
    int ring_first;                /* the sliding rings hold no position before this (a loaded
                                    * state may carry fewer than the ring's slots) */

    kv_layer kv[G3_MAX_LAYERS];
    void *kv_arena;                /* every layer's K and V (reserved address space) */
    size_t kv_bytes;

    /* Scratch for one chunk of T <= n_batch tokens (q width qd = nH*hd, kv width kvd = nKV*hd). */
    float *h;        /* [T][H]  residual stream */
    float *x;        /* [T][H]  normed input of a sub-layer */
    float *q;        /* [T][qd] queries (after QK-norm and RoPE) */
    float *k, *v;    /* [T][kvd] this chunk's keys and values */
    uint16_t *kb, *vb; /* [T][kvd] the same rounded to bf16, as a bf16 cache holds them */
    float *att;      /* [T][qd] attention output, head-major */
    float *proj;     /* [T][H]  o_proj / down_proj output */
    float *gate, *up;/* [T][I] */
    uint16_t *act_bf16; /* [T][max(H, qd)] x or attention output rounded to bf16 */
    uint16_t *ffn_bf16; /* [T][I] gelu(gate) * up rounded to bf16 (written while x is read) */
    void *act_q;     /* quantized weights, default mode: the same two inputs as Q8 activation */
    void *ffn_q;     /*   rows (g3_act_row_bytes of max(H, qd) and of I per token); else empty */
    void *act_qk, *ffn_qk; /* the same as Q8_K rows (per 256), for K-quant matrices */
    float *scores;   /* [n_threads][group][n_ctx] attention scores: a thread's query heads of one kv head */
    float *rope_cos, *rope_sin; /* [2 layer types][T][hd/2] for the chunk's positions */
    float *inv_freq; /* [2 layer types][hd/2] */
    float *logits;   /* [V] last token's logits */
    /* Scoring without the logits (gemma3_session_forward_logprob): */
    float *strip_logits; /* [n_threads][T][G3_LSE_STRIP] the LM head's strip in hand */
    double *strip_lse;   /* [T][n_strips] log-sum-exp of each token's strips */
    float *next_logit;   /* [T] the logit of the token each one is scored on */
    void *scratch_arena;
    size_t scratch_bytes;
};

int gemma3_threads_cap(int n_threads) {
    int n_cpus = g3_n_cpus(), most = GEMMA3_THREADS_PER_CPU * n_cpus;
    if (n_threads <= 0) return n_cpus;
    return n_threads < most ? n_threads : most;
}

gemma3_session_params gemma3_session_default_params(void) {
    gemma3_session_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 0;
    p.n_threads = 0;
    p.kv_type = GEMMA3_KV_BF16;
    p.exact = 0;
    p.isa = NULL;
    p.n_batch = 512;
    p.n_swa_extra = 0;
    return p;
}

/* Bump allocator over one arena: first pass measures (base NULL), second pass hands out. */
typedef struct bump {
    char *base;
    size_t used;
} bump;

static void *bump_take(bump *b, size_t n) {
    size_t at = b->used;
    b->used += (n + 63) & ~(size_t)63;
    return b->base ? b->base + at : NULL;
}

static int n_strips(const g3_config *c) { return (c->vocab_size + G3_LSE_STRIP - 1) / G3_LSE_STRIP; }

static void carve_scratch(gemma3_session *s, bump *b, int n_threads) {
    const g3_config *c = s->cfg;
    size_t T = (size_t)s->n_batch, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t half = (size_t)c->head_dim / 2;
    size_t widest = H > qd ? H : qd;
    s->h = bump_take(b, T * H * sizeof(float));
    s->x = bump_take(b, T * H * sizeof(float));
    s->q = bump_take(b, T * qd * sizeof(float));
    s->k = bump_take(b, T * kvd * sizeof(float));
    s->v = bump_take(b, T * kvd * sizeof(float));
    s->kb = bump_take(b, T * kvd * sizeof(uint16_t));
    s->vb = bump_take(b, T * kvd * sizeof(uint16_t));
    s->att = bump_take(b, T * qd * sizeof(float));
    s->proj = bump_take(b, T * H * sizeof(float));
    s->gate = bump_take(b, T * I * sizeof(float));
    s->up = bump_take(b, T * I * sizeof(float));
    s->act_bf16 = bump_take(b, T * widest * sizeof(uint16_t));
    s->ffn_bf16 = bump_take(b, T * I * sizeof(uint16_t));
    int qa = s->quant && !s->exact;
    s->act_q = bump_take(b, qa ? T * g3_act_row_bytes((int)widest) : 0);
    s->ffn_q = bump_take(b, qa ? T * g3_act_row_bytes((int)I) : 0);
    s->act_qk = bump_take(b, qa ? T * g3_act_k_row_bytes((int)widest) : 0);
    s->ffn_qk = bump_take(b, qa ? T * g3_act_k_row_bytes((int)I) : 0);
    const size_t group = (size_t)(c->n_heads / c->n_kv_heads);
    s->scores = bump_take(b, (size_t)n_threads * group * (size_t)s->n_ctx * sizeof(float));
    s->rope_cos = bump_take(b, 2 * T * half * sizeof(float));
    s->rope_sin = bump_take(b, 2 * T * half * sizeof(float));
    s->inv_freq = bump_take(b, 2 * half * sizeof(float));
    s->logits = bump_take(b, (size_t)c->vocab_size * sizeof(float));
    s->strip_logits = bump_take(b, (size_t)n_threads * T * G3_LSE_STRIP * sizeof(float));
    s->strip_lse = bump_take(b, T * (size_t)n_strips(c) * sizeof(double));
    s->next_logit = bump_take(b, T * sizeof(float));
    s->tokens = bump_take(b, (size_t)s->n_ctx * sizeof(int32_t));
}

static void carve_kv(gemma3_session *s, bump *b) {
    const g3_config *c = s->cfg;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t elt = s->kv_bf16 ? sizeof(uint16_t) : sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        int slots = g3_kv_slots(c, l, s->n_ctx, s->n_swa_extra);
        s->kv[l].n_slots = slots;
        s->kv[l].k = bump_take(b, (size_t)slots * kvd * elt);
        s->kv[l].v = bump_take(b, (size_t)slots * kvd * elt);
    }
}

/* RoPE frequencies of both layer types (type 0 = sliding, 1 = full), as the config defines and
 * validated them at load. */
static void init_inv_freq(gemma3_session *s) {
    int half = s->cfg->head_dim / 2;
    for (int type = 0; type < 2; type++)
        for (int i = 0; i < half; i++)
            s->inv_freq[type * half + i] = g3_rope_inv_freq(s->cfg, type == G3_LAYER_FULL, i);
}

/* Allocates everything a session will ever need: the KV cache (one arena) and the scratch for
 * chunks of up to n_batch tokens (another arena), plus the thread pool. forward() allocates
 * nothing. The session borrows the model, which must outlive it. */
int gemma3_session_init(const gemma3_model *model, const gemma3_session_params *params,
                        gemma3_session **out) {
    *out = NULL;
    if (!model) return g3_error(GEMMA3_ERR_ARG, "session: no model");
    gemma3_session_params p = params ? *params : gemma3_session_default_params();
    const g3_config *c = &model->cfg;

    if (p.n_ctx < 0) return g3_error(GEMMA3_ERR_ARG, "session: n_ctx %d is negative", p.n_ctx);
    if (p.n_threads < 0 || p.n_threads > 1024)
        return g3_error(GEMMA3_ERR_ARG, "session: n_threads %d is out of range [0, 1024]", p.n_threads);
    if (p.n_batch < 0 || p.n_batch > 65536)
        return g3_error(GEMMA3_ERR_ARG, "session: n_batch %d is out of range [0, 65536]", p.n_batch);
    if (p.n_swa_extra < 0 || p.n_swa_extra > (1 << 20))
        return g3_error(GEMMA3_ERR_ARG, "session: n_swa_extra %d is out of range [0, 1048576]",
                        p.n_swa_extra);
    if (p.kv_type != GEMMA3_KV_F32 && p.kv_type != GEMMA3_KV_BF16)
        return g3_error(GEMMA3_ERR_ARG, "session: kv_type %d is not GEMMA3_KV_F32 or GEMMA3_KV_BF16",
                        p.kv_type);
    if (c->head_dim <= 0 || c->head_dim % 2 || c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads ||
        c->n_layers <= 0 || c->n_layers > G3_MAX_LAYERS || c->sliding_window <= 0 ||
        c->max_position_embeddings <= 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "session: config not runnable (head_dim %d, heads %d/%d, layers %d, window %d)",
                        c->head_dim, c->n_heads, c->n_kv_heads, c->n_layers, c->sliding_window);

    int isa = g3_isa_choose(p.isa);
    if (isa < 0) return isa; /* its message names the isa */
    const g3_kernels *kern = g3_kernels_get((g3_isa)isa);

    gemma3_session *s = calloc(1, sizeof *s);
    if (!s) return g3_error(GEMMA3_ERR_NOMEM, "session: out of memory");
    s->model = model;
    s->cfg = c;
    s->kern = kern;
    s->qkern = g3_quant_kernels_get((g3_isa)isa);
    s->quant = g3_wtype_is_block(model->w.wtype);
    s->exact = p.exact != 0;
    s->backend = (g3_backend){kern, s->qkern, s->exact};
    s->kv_bf16 = !s->exact && p.kv_type == GEMMA3_KV_BF16;
    s->n_ctx = p.n_ctx ? p.n_ctx : 4096;
    if (s->n_ctx > c->max_position_embeddings) s->n_ctx = c->max_position_embeddings;
    s->n_batch = p.n_batch ? p.n_batch : 512;
    s->n_swa_extra = p.n_swa_extra;
    if (s->n_batch > s->n_ctx) s->n_batch = s->n_ctx;
    int n_threads = gemma3_threads_cap(p.n_threads);

    int rc = g3_pool_create(n_threads, &s->pool);
    if (rc != GEMMA3_OK) goto fail;

    /* The cache is address space sized for the whole context, not memory: a slot's pages fault
     * in when store_kv first writes it, and attention reads only slots written before (positions
     * < pos), so a short conversation in a long context costs only what it holds. */
    bump b = {0};
    carve_kv(s, &b);
    size_t kv_limit = g3_mem_available(); /* 0: could not be read, no limit known */
    if (kv_limit && b.used > kv_limit) {
        rc = g3_error(GEMMA3_ERR_NOMEM,
                      "session: the KV cache for a context of %d tokens needs %zu bytes, more than "
                      "the %zu bytes of memory available",
                      s->n_ctx, b.used, kv_limit);
        goto fail;
    }
    s->kv_arena = g3_reserve(b.used);
    s->kv_bytes = b.used;
    if (!s->kv_arena) {
        rc = g3_error(GEMMA3_ERR_NOMEM, "session: cannot reserve %zu bytes of KV cache", b.used);
        goto fail;
    }
    b = (bump){s->kv_arena, 0};
    carve_kv(s, &b);

    /* Scratch too is reserved rather than zero-filled: the attention scores are sized for the
     * whole context (rows per thread) but only a row's first pos entries are ever used. */
    b = (bump){0};
    carve_scratch(s, &b, n_threads);
    s->scratch_arena = g3_reserve(b.used);
    s->scratch_bytes = b.used;
    if (!s->scratch_arena) {
        rc = g3_error(GEMMA3_ERR_NOMEM, "session: cannot allocate %zu bytes of scratch", b.used);
        goto fail;
    }
    b = (bump){s->scratch_arena, 0};
    carve_scratch(s, &b, n_threads);
    init_inv_freq(s);
    *out = s;
    return GEMMA3_OK;
fail:
    gemma3_session_free(s);
    return rc;
}

void gemma3_session_free(gemma3_session *s) {
    if (!s) return;
    g3_pool_free(s->pool);
    g3_unreserve(s->kv_arena, s->kv_bytes);
    g3_unreserve(s->scratch_arena, s->scratch_bytes);
    free(s);
}

const float *gemma3_session_logits(const gemma3_session *s) { return s->logits; }
int gemma3_session_pos(const gemma3_session *s) { return s->pos; }
int gemma3_session_n_ctx(const gemma3_session *s) { return s->n_ctx; }
int gemma3_session_n_threads(const gemma3_session *s) { return g3_pool_size(s->pool); }
int gemma3_session_n_vocab(const gemma3_session *s) { return s->cfg->vocab_size; }
/* The cache's pages go back to the system: a session's memory follows the tokens it holds. */
void gemma3_session_reset(gemma3_session *s) {
    s->pos = s->ring_first = 0;
    g3_release(s->kv_arena, s->kv_bytes);
}
const int32_t *gemma3_session_tokens(const gemma3_session *s) { return s->tokens; }
/* The kernel set the matmuls run on: the quantized table's for quantized weights. */
const char *gemma3_session_isa(const gemma3_session *s) {
    return s->quant ? s->qkern->name : s->kern->name;
}

int gemma3_read_file(const char *path, char **data, size_t *len) { return g3_read_file(path, data, len); }
int gemma3_read_json(const char *path, struct cJSON **out) { return g3_json_load(path, out); }

void gemma3_session_parallel(gemma3_session *s, void (*fn)(void *ctx, int ith, int nth), void *ctx) {
    g3_pool_run(s->pool, fn, ctx);
}

double gemma3_log_sum_exp(const float *x, int n) {
    return g3_log_sum_exp_strips(g3_kernels_chosen(), x, n);
}

int gemma3_kernel_tables(const char **names, int max) {
    const g3_kernels *tables[16];
    int n = g3_kernels_all(tables, 16);
    for (int i = 0; i < n && i < max; i++) names[i] = tables[i]->name;
    return n;
}

/* ==== cutting back and saved state (state.c, through session-view.h) ========================== */

/* A full layer keeps every position. A sliding layer's ring holds the last n_slots positions
 * fed (from ring_first on), and the first query after the cut (position n) reads keys
 * n-W+1 .. n-1, so a cut is possible only while those are still in the ring: with
 * n_slots = W + extra, back to pos - extra - 1. */
int gemma3_session_truncate_min(const gemma3_session *s) {
    const g3_config *c = s->cfg;
    int least = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (c->layer_types[l] != G3_LAYER_SLIDING) continue;
        int oldest_kept = s->pos - s->kv[l].n_slots > s->ring_first ? s->pos - s->kv[l].n_slots : s->ring_first;
        if (oldest_kept > 0 && oldest_kept + c->sliding_window - 1 > least)
            least = oldest_kept + c->sliding_window - 1;
    }
    return least < s->pos ? least : s->pos;
}

int gemma3_session_truncate(gemma3_session *s, int n_tokens) {
    if (n_tokens < 0 || n_tokens > s->pos)
        return g3_error(GEMMA3_ERR_ARG, "truncate: %d tokens is not in [0, %d]", n_tokens, s->pos);
    int least = gemma3_session_truncate_min(s);
    if (n_tokens > 0 && n_tokens < least)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "truncate: cutting back to %d tokens needs positions %d.. in the sliding-window "
                        "rings, which hold %d.. only: the cache of %d tokens can be cut back to %d at the least",
                        n_tokens, n_tokens - s->cfg->sliding_window + 1,
                        least - s->cfg->sliding_window + 1, s->pos, least);
    s->pos = n_tokens;
    if (n_tokens == 0) s->ring_first = 0;
    return GEMMA3_OK;
}

int gemma3_session_rewind(gemma3_session *s, int n_tokens, const float *logits) {
    int rc = gemma3_session_truncate(s, n_tokens);
    if (rc == GEMMA3_OK && logits && logits != s->logits)
        memcpy(s->logits, logits, (size_t)s->cfg->vocab_size * sizeof *s->logits);
    return rc;
}

void g3_session_get_view(gemma3_session *s, g3_session_view *v) {
    const g3_config *c = s->cfg;
    v->cfg = c;
    v->w = &s->model->w;
    v->n_ctx = s->n_ctx;
    v->pos = s->pos;
    v->ring_first = s->ring_first;
    v->exact = s->exact;
    v->kv_bf16 = s->kv_bf16;
    v->row_bytes = (size_t)c->n_kv_heads * c->head_dim * (s->kv_bf16 ? sizeof(uint16_t) : sizeof(float));
    v->tokens = s->tokens;
    v->logits = s->logits;
    for (int l = 0; l < c->n_layers; l++)
        v->kv[l] = (g3_kv_view){s->kv[l].k, s->kv[l].v, s->kv[l].n_slots};
}

void g3_session_set_pos(gemma3_session *s, int pos, int ring_first) {
    s->pos = pos;
    s->ring_first = ring_first;
}

/* ==== forward-pass helpers ==================================================================== */

/* One chunk being processed: T tokens at positions p0 .. p0+T-1, in layer `layer`. */
typedef struct chunk {
    gemma3_session *s;
    const int32_t *tokens;   /* [T] the chunk's ids */
    int T, p0, layer;
    const float *res_w;      /* per-token steps (rows_*): the post-norm of a pending sub-layer */
    const float *norm_w;     /*   output in proj (NULL: none), and the pre-norm that follows */
    /* matmul job (see run_matmul): Y[t][r] = W[r] . input[t], rows [0, n_rows) */
    float *Y;
    size_t ldy;
    g3_matrix W;
    const float *in_f32;     /* the matmul input in exact mode */
    const uint16_t *in_bf16; /* the matmul input in the default mode, [T][n_in] (bf16 weights) */
    const void *in_q;        /* the same for quantized weights: T Q8 activation rows */
    const void *in_qk;       /* and T Q8_K rows (K-quant weights) */
    int formats;             /* which of those two the next matrices take (ACT_Q8 | ACT_Q8K) */
    size_t ld_in;
    int n_in, n_rows;
} chunk;

/* Which quantized activation rows matrix m takes: ACT_Q8 (blocks of 32) or ACT_Q8K (per 256,
 * the K-quants'). */
enum { ACT_Q8 = 1, ACT_Q8K = 2 };
static int act_format(g3_matrix m) { return g3_wtype_get((int)m.type)->act_k ? ACT_Q8K : ACT_Q8; }

/* The input of the next matmul(s): in exact mode the fp32 activations themselves; otherwise they
 * are rounded once, per element (bf16 weights: to bf16) or per block of 32 / 256 (quantized
 * weights: to the activation rows `formats` names, those the next matrices take) by
 * round_input_rows, so the rounding never depends on the split. */
static void use_input(chunk *ck, const float *in, size_t ld, int n_in, int formats) {
    ck->in_f32 = in;
    ck->in_bf16 = ck->s->act_bf16;
    ck->in_q = ck->s->act_q;
    ck->in_qk = ck->s->act_qk;
    ck->formats = formats;
    ck->ld_in = ld;
    ck->n_in = n_in;
}

static void round_input_rows(const chunk *ck, int t0, int t1) {
    const gemma3_session *s = ck->s;
    if (s->exact) return;
    const int n_in = ck->n_in;
    const size_t row = g3_act_row_bytes(n_in), row_k = g3_act_k_row_bytes(n_in);
    for (int t = t0; t < t1; t++) {
        const float *in = ck->in_f32 + (size_t)t * ck->ld_in;
        if (!s->quant) {
            s->kern->to_bf16(s->act_bf16 + (size_t)t * n_in, in, n_in);
            continue;
        }
        if (ck->formats & ACT_Q8) s->qkern->quantize_act((char *)s->act_q + (size_t)t * row, n_in, in, 0, n_in);
        if (ck->formats & ACT_Q8K) g3_quantize_act_k(s->qkern, (char *)s->act_qk + (size_t)t * row_k, in, 0, n_in);
    }
}

/* ---- work split between threads ---- */

/* fn(ck, u0, u1) over units [0, n_units) split between threads; a single token's units run on
 * the calling thread: a few microseconds of work, less than a fork/join. */
typedef void (*units_fn)(const chunk *ck, int u0, int u1);
typedef struct units_job {
    const chunk *ck;
    units_fn fn;
    int n_units;
} units_job;

static void task_units(void *ctx, int ith, int nth) {
    const units_job *j = ctx;
    int lo, hi;
    g3_split(j->n_units, ith, nth, 1, &lo, &hi);
    if (lo < hi) j->fn(j->ck, lo, hi);
}

static void run_units(const chunk *ck, units_fn fn, int n_units) {
    if (ck->T == 1) {
        fn(ck, 0, n_units);
        return;
    }
    units_job j = {ck, fn, n_units};
    g3_pool_run(ck->s->pool, task_units, &j);
}

/* Steps 2.1, 2.8-2.9, 2.11 and 3 for tokens [t0, t1): h += RMSNorm(proj, res_w) where a
 * sub-layer's output is pending, then x = RMSNorm(h, norm_w). */
static void rows_residual_norm(const chunk *ck, int t0, int t1) {
    const gemma3_session *s = ck->s;
    const int H = s->cfg->hidden_size;
    const float eps = s->cfg->rms_norm_eps;
    for (int t = t0; t < t1; t++) {
        float *ht = s->h + (size_t)t * H;
        if (ck->res_w) {
            float *yt = s->proj + (size_t)t * H;
            s->kern->rmsnorm(yt, yt, ck->res_w, H, eps);
            for (int i = 0; i < H; i++) ht[i] += yt[i];
        }
        s->kern->rmsnorm(s->x + (size_t)t * H, ht, ck->norm_w, H, eps);
    }
}

/* The same, then x rounded as the next matmul's input. */
static void rows_sublayer_input(const chunk *ck, int t0, int t1) {
    rows_residual_norm(ck, t0, t1);
    round_input_rows(ck, t0, t1);
}

/* Step 1: embedding rows, scaled by sqrt(H) in fp32 (as HF's fp32 reference; the HF bf16 run
 * would round the scale and the product to bf16). */
static void rows_embed(const chunk *ck, int t0, int t1) {
    const g3_matrix *E = &ck->s->model->w.embed;
    const int H = ck->s->cfg->hidden_size;
    const float embed_scale = sqrtf((float)H);
    for (int t = t0; t < t1; t++) {
        float *ht = ck->s->h + (size_t)t * H;
        g3_dequantize_matrix_row(E->type, E->layout, E->data, H, ck->tokens[t], ht);
        for (int i = 0; i < H; i++) ht[i] *= embed_scale;
    }
}

/* Y[t*ldy + r] = W[r] . input[t] for r in [r0, r1), all tokens of the chunk, by the kernel the
 * backend has for W. */
static void matmul_rows(const chunk *ck, float *Y, size_t ldy, g3_matrix W, int r0, int r1) {
    const g3_matmul_in x = {ck->in_f32, ck->ld_in, ck->in_bf16, ck->in_q, ck->T, ck->n_in, ck->in_qk};
    g3_matmul(&ck->s->backend, Y, ldy, W, &x, r0, r1);
}

static int row_grain(const chunk *ck) { return ck->T == 1 ? DECODE_GRAIN : ROW_GRAIN; }

/* A plain matmul split by rows between threads. */
static void task_matmul(void *ctx, int ith, int nth) {
    const chunk *ck = ctx;
    int lo, hi;
    g3_split(ck->n_rows, ith, nth, row_grain(ck), &lo, &hi);
    matmul_rows(ck, ck->Y, ck->ldy, ck->W, lo, hi);
}

static void run_matmul(chunk *ck, float *Y, size_t ldy, g3_matrix W, int n_rows) {
    ck->Y = Y;
    ck->ldy = ldy;
    ck->W = W;
    ck->n_rows = n_rows;
    g3_pool_run(ck->s->pool, task_matmul, ck);
}

/* Step 2.2: q = x Wq^T, k = x Wk^T, v = x Wv^T, the rows of q|k|v split between threads as one
 * matrix (in heads, 1B's 6 heads would keep 10 of 16 threads idle). */
static void task_qkv(void *ctx, int ith, int nth) {
    const chunk *ck = ctx;
    const gemma3_session *s = ck->s;
    const g3_layer_weights *lw = &s->model->w.layers[ck->layer];
    const int qd = s->cfg->n_heads * s->cfg->head_dim, kvd = s->cfg->n_kv_heads * s->cfg->head_dim;
    int lo, hi;
    g3_split(qd + 2 * kvd, ith, nth, row_grain(ck), &lo, &hi);
    int q1 = hi < qd ? hi : qd;
    matmul_rows(ck, s->q, (size_t)qd, lw->wq, lo, q1);
    int k0 = lo > qd ? lo - qd : 0, k1 = hi - qd < kvd ? hi - qd : kvd;
    matmul_rows(ck, s->k, (size_t)kvd, lw->wk, k0, k1);
    int v0 = lo > qd + kvd ? lo - qd - kvd : 0, v1 = hi - qd - kvd;
    matmul_rows(ck, s->v, (size_t)kvd, lw->wv, v0, v1);
}

/* Steps 2.3-2.4 for units [u0, u1) of (token, head), the nH query heads then the nKV kv heads of
 * each token: per-head RMSNorm (1 + q_norm / k_norm), split-half RoPE at position p0 + t (sliding:
 * theta 10k; full: rope_theta / factor), and a kv head's key and value in the cache dtype (V
 * gets no norm and no rotation). */
static void heads_qk_norm_rope(const chunk *ck, int u0, int u1) {
    const gemma3_session *s = ck->s;
    const g3_config *c = s->cfg;
    const g3_layer_weights *lw = &s->model->w.layers[ck->layer];
    const int hd = c->head_dim, nH = c->n_heads, nKV = c->n_kv_heads, half = hd / 2;
    const size_t qd = (size_t)nH * hd, kvd = (size_t)nKV * hd;
    const int type = c->layer_types[ck->layer] == G3_LAYER_FULL;
    for (int u = u0; u < u1; u++) {
        const int t = u / (nH + nKV), h = u % (nH + nKV);
        const float *ct = s->rope_cos + ((size_t)type * ck->T + t) * half;
        const float *st = s->rope_sin + ((size_t)type * ck->T + t) * half;
        if (h < nH) {
            float *qh = s->q + t * qd + (size_t)h * hd;
            s->kern->rmsnorm(qh, qh, lw->q_norm, hd, c->rms_norm_eps);
            g3_rope(qh, 1, hd, ct, st);
            continue;
        }
        const size_t at = t * kvd + (size_t)(h - nH) * hd;
        s->kern->rmsnorm(s->k + at, s->k + at, lw->k_norm, hd, c->rms_norm_eps);
        g3_rope(s->k + at, 1, hd, ct, st);
        if (s->kv_bf16) {
            s->kern->to_bf16(s->kb + at, s->k + at, hd);
            s->kern->to_bf16(s->vb + at, s->v + at, hd);
        }
    }
}

/* The keys (or values) of kv head j at positions [u0, u1), as runs of rows kvd elements apart:
 * the ring's slots for positions before the chunk (wrapping once at most), then this chunk's
 * own rows from its scratch (already in the cache dtype). Returns the number of runs. */
typedef struct kv_run {
    const void *rows;
    int n;
} kv_run;

static int kv_runs(const chunk *ck, int is_v, int u0, int u1, int j, kv_run run[3]) {
    const gemma3_session *s = ck->s;
    const kv_layer *kv = &s->kv[ck->layer];
    const size_t kvd = (size_t)s->cfg->n_kv_heads * s->cfg->head_dim, head = (size_t)j * s->cfg->head_dim;
    const size_t elt = s->kv_bf16 ? sizeof(uint16_t) : sizeof(float);
    const char *ring = is_v ? kv->v : kv->k;
    const char *own = s->kv_bf16 ? (const char *)(is_v ? s->vb : s->kb) : (const char *)(is_v ? s->v : s->k);
    int n_runs = 0, u = u0;
    for (const int ring_end = u1 < ck->p0 ? u1 : ck->p0; u < ring_end;) {
        const int slot = u % kv->n_slots, n = ring_end - u < kv->n_slots - slot ? ring_end - u : kv->n_slots - slot;
        run[n_runs++] = (kv_run){ring + ((size_t)slot * kvd + head) * elt, n};
        u += n;
    }
    if (u < u1) run[n_runs++] = (kv_run){own + ((size_t)(u - ck->p0) * kvd + head) * elt, u1 - u};
    return n_runs;
}

/* Scores of n_q query heads (q, hd apart) against the keys of one kv head, position u0 on,
 * into sc (a row of n_ctx per head), scaled and soft-capped. */
static void attention_scores(const chunk *ck, float *sc, const float *q, int n_q, int u0, int u1, int j) {
    const gemma3_session *s = ck->s;
    const g3_config *c = s->cfg;
    const int hd = c->head_dim;
    const size_t kvd = (size_t)c->n_kv_heads * hd, ld = (size_t)s->n_ctx;
    kv_run run[3];
    const int n_runs = kv_runs(ck, 0, u0, u1, j, run);
    for (int r = 0, i = 0; r < n_runs; i += run[r].n, r++)
        (s->kv_bf16 ? s->kern->dots_bf16 : s->kern->dots_f32)(sc + i, ld, q, n_q, run[r].rows, kvd, run[r].n, hd);
    const float scale = 1.0f / sqrtf(c->query_pre_attn_scalar), cap = c->attn_softcap;
    for (int h = 0; h < n_q; h++)
        for (int i = 0; i < u1 - u0; i++) {
            float d = sc[h * ld + i] * scale;         /* query_pre_attn_scalar^-0.5 */
            if (cap > 0.0f) d = cap * tanhf(d / cap); /* attn_logit_softcapping */
            sc[h * ld + i] = d;
        }
}

/* o (n_q heads, hd apart) = the values of kv head j from position u0 on, weighted by sc. */
static void attention_values(const chunk *ck, float *o, const float *sc, int n_q, int u0, int u1, int j) {
    const gemma3_session *s = ck->s;
    const int hd = s->cfg->head_dim;
    const size_t kvd = (size_t)s->cfg->n_kv_heads * hd, ld = (size_t)s->n_ctx;
    memset(o, 0, (size_t)n_q * hd * sizeof *o);
    kv_run run[3];
    const int n_runs = kv_runs(ck, 1, u0, u1, j, run);
    for (int r = 0, i = 0; r < n_runs; i += run[r].n, r++)
        (s->kv_bf16 ? s->kern->axpys_bf16 : s->kern->axpys_f32)(o, n_q, sc + i, ld, run[r].rows, kvd, run[r].n, hd);
}

/* Step 2.6: attention. Work unit = a token and the query heads of one kv head (or, when there
 * are too few such units to keep every thread busy, as in decode, a single head), computed
 * wholly by one thread: each key and value row is read once for all of its heads. Per head:
 * scores over the keys in ascending position, optional softcap, softmax, weighted sum of the
 * values in ascending position; the arithmetic of a head does not depend on the grouping. In
 * the default mode the output is rounded to bf16 here, as the input of o_proj. */
static void task_attention(void *ctx, int ith, int nth) {
    const chunk *ck = ctx;
    const gemma3_session *s = ck->s;
    const g3_config *c = s->cfg;
    const int hd = c->head_dim, qd = c->n_heads * hd, n_kv = c->n_kv_heads;
    const int group = c->n_heads / n_kv;                       /* GQA: consecutive q heads share kv head j */
    const int n_q = ck->T * n_kv >= 2 * nth ? group : 1, slices = group / n_q;
    const int sliding = c->layer_types[ck->layer] == G3_LAYER_SLIDING;
    float *sc = s->scores + (size_t)ith * group * s->n_ctx;
    int lo, hi;
    g3_split(ck->T * n_kv * slices, ith, nth, 1, &lo, &hi);
    for (int unit = lo; unit < hi; unit++) {
        const int t = unit / (n_kv * slices), j = unit / slices % n_kv, h0 = j * group + unit % slices * n_q;
        const int p = ck->p0 + t;
        const int u0 = sliding && p - c->sliding_window + 1 > 0 ? p - c->sliding_window + 1 : 0;
        const int n = p - u0 + 1;                              /* mask: u <= p and (sliding) p - u < W */
        const float *q = s->q + (size_t)t * qd + (size_t)h0 * hd;
        attention_scores(ck, sc, q, n_q, u0, p + 1, j);
        for (int h = 0; h < n_q; h++) s->kern->softmax(sc + (size_t)h * s->n_ctx, n);
        float *o = s->att + (size_t)t * qd + (size_t)h0 * hd;
        attention_values(ck, o, sc, n_q, u0, p + 1, j);
        /* (quantized weights: forward_chunk quantizes whole rows afterwards, since an
         * activation block of 32 may span heads) */
        if (!s->exact && !s->quant) s->kern->to_bf16(s->act_bf16 + (size_t)t * qd + (size_t)h0 * hd, o, n_q * hd);
    }
}

/* Step 2.10: gate and up projections for this thread's rows of I, then gelu_tanh(gate) * up on
 * the same rows (elementwise, so it needs nobody else's rows); the product is the input of
 * down_proj, rounded to bf16 here in the default mode, or quantized to Q8 activation blocks
 * with quantized weights (then rows are split in whole blocks of 32: I is a multiple of 32). */
static void task_gate_up(void *ctx, int ith, int nth) {
    const chunk *ck = ctx;
    const gemma3_session *s = ck->s;
    const g3_layer_weights *lw = &s->model->w.layers[ck->layer];
    const int I = s->cfg->intermediate_size;
    int lo, hi;
    /* down_proj's input is quantized here, by whole blocks: of 256 for a K-quant down_proj */
    const int down_k = s->quant && act_format(lw->w_down) == ACT_Q8K;
    g3_split(I, ith, nth, down_k ? g3_wtype_get((int)lw->w_down.type)->block : s->quant ? G3_QK : row_grain(ck), &lo, &hi);
    if (lo >= hi) return;
    matmul_rows(ck, s->gate, (size_t)I, lw->w_gate, lo, hi);
    matmul_rows(ck, s->up, (size_t)I, lw->w_up, lo, hi);
    const size_t qrow = g3_act_row_bytes(I), qrow_k = g3_act_k_row_bytes(I);
    for (int t = 0; t < ck->T; t++) {
        float *g = s->gate + (size_t)t * I + lo;
        s->kern->gelu_tanh_mul(g, g, s->up + (size_t)t * I + lo, hi - lo);
        if (s->exact) continue;
        if (down_k) g3_quantize_act_k(s->qkern, (char *)s->ffn_qk + (size_t)t * qrow_k, g, lo, hi);
        else if (s->quant) s->qkern->quantize_act((char *)s->ffn_q + (size_t)t * qrow, I, g, lo, hi);
        else s->kern->to_bf16(s->ffn_bf16 + (size_t)t * I + lo, g, hi - lo);
    }
}

/* cos/sin of angle = p * inv_freq[i] (fp32 product, as HF forms it) for each position of the
 * chunk and both layer types. Angles are formed per position, never accumulated. */
static void fill_rope_tables(gemma3_session *s, int p0, int T) {
    int half = s->cfg->head_dim / 2;
    for (int type = 0; type < 2; type++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < half; i++) {
                float angle = (float)(p0 + t) * s->inv_freq[type * half + i];
                size_t at = ((size_t)type * T + t) * half + i;
                s->rope_cos[at] = cosf(angle);
                s->rope_sin[at] = sinf(angle);
            }
}

/* Step 2.5: the chunk's keys and values go into the cache after every query of the chunk has
 * attended (a chunk longer than the free ring slots would otherwise overwrite keys that its
 * own earlier queries still need). Only the last n_slots tokens can survive in a ring. */
static void store_kv(gemma3_session *s, int layer, int p0, int T) {
    kv_layer *kv = &s->kv[layer];
    size_t kvd = (size_t)s->cfg->n_kv_heads * s->cfg->head_dim;
    size_t elt = s->kv_bf16 ? sizeof(uint16_t) : sizeof(float);
    const char *ks = s->kv_bf16 ? (const char *)s->kb : (const char *)s->k;
    const char *vs = s->kv_bf16 ? (const char *)s->vb : (const char *)s->v;
    int t0 = T > kv->n_slots ? T - kv->n_slots : 0;
    for (int t = t0; t < T; t++) {
        size_t slot = (size_t)((p0 + t) % kv->n_slots);
        memcpy((char *)kv->k + slot * kvd * elt, ks + (size_t)t * kvd * elt, kvd * elt);
        memcpy((char *)kv->v + slot * kvd * elt, vs + (size_t)t * kvd * elt, kvd * elt);
    }
}

static int should_abort(const gemma3_session *s) { return s->abort_fn && s->abort_fn(s->abort_ctx); }

void gemma3_session_set_abort(gemma3_session *s, int (*fn)(void *ctx), void *ctx) {
    s->abort_fn = fn;
    s->abort_ctx = ctx;
}

/* Runs the model over T <= n_batch tokens at positions p0.. and leaves the final-normed hidden
 * states in s->x. GEMMA3_ERR_ABORTED when the abort callback asked to stop between two layers
 * (some layers' caches then hold the chunk). */
static int forward_chunk(gemma3_session *s, const int32_t *tokens, int T, int p0) {
    const g3_config *c = s->cfg;
    const g3_weights *w = &s->model->w;
    const int H = c->hidden_size, qd = c->n_heads * c->head_dim;
    chunk ck = {.s = s, .tokens = tokens, .T = T, .p0 = p0};

    run_units(&ck, rows_embed, T);
    fill_rope_tables(s, p0, T);

    for (int l = 0; l < c->n_layers; l++) {
        const g3_layer_weights *lw = &w->layers[l];
        ck.layer = l;
        if (l > 0 && should_abort(s)) return GEMMA3_ERR_ABORTED;
        /* (2.11 of the layer before: h += RMSNorm(m, 1 + post_feedforward_layernorm))
         * 2.1 x = RMSNorm(h, 1 + input_layernorm) */
        ck.res_w = l > 0 ? w->layers[l - 1].post_ffn_norm : NULL, ck.norm_w = lw->attn_norm;
        use_input(&ck, s->x, (size_t)H, H, act_format(lw->wq) | act_format(lw->wk) | act_format(lw->wv));
        run_units(&ck, rows_sublayer_input, T);
        /* 2.2-2.4 q, k, v; QK-norm; RoPE (sliding: theta 10k; full: rope_theta / factor) */
        g3_pool_run(s->pool, task_qkv, &ck);
        run_units(&ck, heads_qk_norm_rope, T * (c->n_heads + c->n_kv_heads));
        /* 2.6 attention over the ring (earlier positions) and the chunk itself */
        g3_pool_run(s->pool, task_attention, &ck);
        /* 2.5 only now may the chunk's keys and values overwrite ring slots */
        store_kv(s, l, p0, T);
        /* 2.7 a = concat_h(o) Wo^T */
        if (s->quant) {
            use_input(&ck, s->att, (size_t)qd, qd, act_format(lw->wo));
            run_units(&ck, round_input_rows, T);
        } else {
            ck.in_f32 = s->att, ck.in_bf16 = s->act_bf16; /* bf16 copy made by attention */
            ck.ld_in = (size_t)qd, ck.n_in = qd;
        }
        run_matmul(&ck, s->proj, (size_t)H, lw->wo, H);
        /* 2.8 h = h + RMSNorm(a, 1 + post_attention_layernorm)
         * 2.9 x = RMSNorm(h, 1 + pre_feedforward_layernorm) */
        ck.res_w = lw->post_attn_norm, ck.norm_w = lw->pre_ffn_norm;
        use_input(&ck, s->x, (size_t)H, H, act_format(lw->w_gate) | act_format(lw->w_up));
        run_units(&ck, rows_sublayer_input, T);
        /* 2.10 m = (gelu_tanh(x Wgate^T) * (x Wup^T)) Wdown^T */
        g3_pool_run(s->pool, task_gate_up, &ck);
        ck.in_f32 = s->gate, ck.in_bf16 = s->ffn_bf16; /* bf16 / Q8 copy made by task_gate_up */
        ck.in_q = s->ffn_q;
        ck.in_qk = s->ffn_qk;
        ck.ld_in = (size_t)c->intermediate_size, ck.n_in = c->intermediate_size;
        run_matmul(&ck, s->proj, (size_t)H, lw->w_down, H);
    }
    /* 2.11 of the last layer, then 3. the final norm */
    ck.res_w = w->layers[c->n_layers - 1].post_ffn_norm, ck.norm_w = w->final_norm;
    run_units(&ck, rows_residual_norm, T);
    return GEMMA3_OK;
}

/* The final softcap (where the config has one) of n_tok rows of n logits. */
static void softcap_logits(const g3_config *c, float *y, size_t ld, int n_tok, int n) {
    if (c->final_softcap <= 0.0f) return;
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < n; r++)
            y[(size_t)t * ld + r] = c->final_softcap * tanhf(y[(size_t)t * ld + r] / c->final_softcap);
}

/* Step 4: logits = x E^T over all vocab_size rows (tied head, or lm_head when stored), for the
 * tokens [t0, t0 + n) of the chunk in s->x; optional final softcap. */
static void lm_head(gemma3_session *s, int t0, int n, float *dst, size_t ld) {
    const g3_config *c = s->cfg;
    const int H = c->hidden_size;
    chunk ck = {.s = s, .T = n};
    use_input(&ck, s->x + (size_t)t0 * H, (size_t)H, H, act_format(s->model->w.lm_head));
    run_units(&ck, round_input_rows, n);
    run_matmul(&ck, dst, ld, s->model->w.lm_head, c->vocab_size);
    softcap_logits(c, dst, ld, n, c->vocab_size);
}

/* Step 4 for scoring: the LM head in strips of G3_LSE_STRIP vocabulary rows, each strip's logits
 * reduced to their log-sum-exp (NaN if one is not finite) and, where the strip holds it, the
 * logit of the token scored, while they are in cache: the logits never go to memory (for a
 * 512-token chunk they would be 256 x 1 MB written and read back twice). Strips go to threads
 * round-robin, each strip computed whole by one thread, so the values do not depend on the
 * thread count. */
typedef struct score_job {
    chunk ck;                /* the LM head's input: the scored tokens' rows of s->x */
    const int32_t *next;     /* [ck.T] the token each is scored on */
} score_job;

static void task_score_strips(void *ctx, int ith, int nth) {
    const score_job *j = ctx;
    const gemma3_session *s = j->ck.s;
    const g3_config *c = s->cfg;
    const g3_matrix E = s->model->w.lm_head;
    const int T = j->ck.T, ns = n_strips(c);
    const size_t row_bytes = g3_wtype_row_bytes(E.type, c->hidden_size);
    float *y = s->strip_logits + (size_t)ith * s->n_batch * G3_LSE_STRIP;
    for (int st = ith; st < ns; st += nth) {
        const int r0 = st * G3_LSE_STRIP;
        const int n = c->vocab_size - r0 < G3_LSE_STRIP ? c->vocab_size - r0 : G3_LSE_STRIP;
        const g3_matrix strip = {(const char *)E.data + (size_t)r0 * row_bytes, E.type, E.layout}; /* r0 % 8 == 0 */
        matmul_rows(&j->ck, y, G3_LSE_STRIP, strip, 0, n);
        softcap_logits(c, y, G3_LSE_STRIP, T, n);
        for (int t = 0; t < T; t++) {
            const float *row = y + (size_t)t * G3_LSE_STRIP;
            s->strip_lse[(size_t)t * ns + st] = s->kern->log_sum_exp(row, n); /* NaN: not finite */
            const int k = j->next[t] - r0;
            if (k >= 0 && k < n) s->next_logit[t] = row[k];
        }
    }
}

/* Whatever slipped past the checks at load (a NaN weight with --check-tensors off, an overflow
 * in the activations) stops here, as a status, instead of becoming a token: the final norm's
 * output of token t (an infinity anywhere in the residual stream becomes NaN there, even where a
 * final softcap would map the logits back into range) and its logits (whose finiteness the
 * caller found: a scan of the row, or a strip's log-sum-exp). */
static int check_finite(const gemma3_session *s, int t, int logits_finite, int position) {
    const size_t H = (size_t)s->cfg->hidden_size;
    if (!logits_finite || g3_first_nonfinite(s->x + (size_t)t * H, H) >= 0)
        return g3_error(GEMMA3_ERR_NUMERIC, "logits are not finite at position %d", position);
    return GEMMA3_OK;
}

/* What a forward pass hands back for its last tokens: their logits ([n][V] rows), or, when
 * logits is NULL, the log-probability of the token that follows each (next[i] -> logprob[i]). */
typedef struct forward_out {
    float *logits;
    const int32_t *next;
    double *logprob;
} forward_out;

/* The logits of the chunk's tokens [t0, T) (the chunk starting at position p0) into rows. */
static int chunk_logits(gemma3_session *s, int t0, int T, int p0, float *rows) {
    const size_t V = (size_t)s->cfg->vocab_size;
    lm_head(s, t0, T - t0, rows, V);
    for (int t = t0; t < T; t++) {
        int rc = check_finite(s, t, g3_first_nonfinite(rows + (size_t)(t - t0) * V, V) < 0, p0 + t);
        if (rc != GEMMA3_OK) return rc;
    }
    return GEMMA3_OK;
}

/* The same tokens' log-probabilities of next[0 ..] into logprob[0 ..]: each token's strips
 * merged in order into its log-sum-exp. */
static int chunk_logprobs(gemma3_session *s, int t0, int T, int p0, const int32_t *next,
                          double *logprob) {
    const int H = s->cfg->hidden_size, ns = n_strips(s->cfg);
    score_job job = {.ck = {.s = s, .T = T - t0}, .next = next};
    use_input(&job.ck, s->x + (size_t)t0 * H, (size_t)H, H, act_format(s->model->w.lm_head));
    run_units(&job.ck, round_input_rows, T - t0);
    g3_pool_run(s->pool, task_score_strips, &job);
    for (int t = t0; t < T; t++) {
        const double lse = g3_lse_merge(s->strip_lse + (size_t)(t - t0) * ns, ns);
        int rc = check_finite(s, t, isfinite(lse), p0 + t); /* a strip's lse is NaN if one is not */
        if (rc != GEMMA3_OK) return rc;
        logprob[t - t0] = (double)s->next_logit[t - t0] - lse;
    }
    return GEMMA3_OK;
}

static int check_tokens(const gemma3_session *s, const int32_t *tokens, int n_tokens, int n_out) {
    const int V = s->cfg->vocab_size;
    if (n_tokens <= 0 || !tokens)
        return g3_error(GEMMA3_ERR_ARG, "forward: need at least one token (got %d)", n_tokens);
    if (n_out < 1 || n_out > n_tokens)
        return g3_error(GEMMA3_ERR_ARG, "forward: outputs wanted for %d of %d tokens", n_out,
                        n_tokens);
    if (n_tokens > s->n_ctx - s->pos)
        return g3_error(GEMMA3_ERR_CONTEXT,
                        "forward: context full: %d tokens at position %d exceed the context of %d",
                        n_tokens, s->pos, s->n_ctx);
    for (int i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return g3_error(GEMMA3_ERR_ARG, "forward: token %d at index %d is out of range [0, %d)",
                            tokens[i], i, V);
    return GEMMA3_OK;
}

/* Appends the tokens in chunks of at most n_batch, each run as matrix-matrix products. The LM
 * head runs only for the last n_out tokens, whichever chunks they fall in (it is a large share
 * of the work: a 262k-row matrix). On an error in the arguments the session is unchanged; after
 * GEMMA3_ERR_NUMERIC the tokens are in the cache (the caller resets). Stopped by the abort
 * callback before a chunk, the session holds the chunks done; inside one, a sliding-window
 * ring may already have given the chunk slots that older positions still needed, so the
 * session is reset (gemma3_session_set_abort). */
static int forward_tokens(gemma3_session *s, const int32_t *tokens, int n_tokens, int n_out,
                          const forward_out *out) {
    memcpy(s->tokens + s->pos, tokens, (size_t)n_tokens * sizeof *tokens);
    const int first_out = n_tokens - n_out; /* index of the first token with an output */
    for (int done = 0; done < n_tokens;) {
        int T = n_tokens - done < s->n_batch ? n_tokens - done : s->n_batch;
        int p0 = s->pos;
        if (should_abort(s))
            return g3_error(GEMMA3_ERR_ABORTED, "forward: stopped after %d of %d tokens", done, n_tokens);
        if (forward_chunk(s, tokens + done, T, p0) != GEMMA3_OK) {
            gemma3_session_reset(s);
            return g3_error(GEMMA3_ERR_ABORTED, "forward: stopped inside a chunk (the session is reset)");
        }
        s->pos += T;
        int t0 = first_out > done ? first_out - done : 0; /* first token of this chunk with one */
        if (t0 < T) {
            const size_t i = (size_t)(done + t0 - first_out); /* its index among the outputs */
            int rc = out->logits ? chunk_logits(s, t0, T, p0, out->logits + i * s->cfg->vocab_size)
                                 : chunk_logprobs(s, t0, T, p0, out->next + i, out->logprob + i);
            if (rc != GEMMA3_OK) return rc;
        }
        done += T;
    }
    return GEMMA3_OK;
}

int gemma3_session_forward_last(gemma3_session *s, const int32_t *tokens, int n_tokens,
                                int n_logits, float *logits) {
    int rc = check_tokens(s, tokens, n_tokens, n_logits);
    if (rc == GEMMA3_OK && !logits) rc = g3_error(GEMMA3_ERR_ARG, "forward: no logits buffer");
    if (rc != GEMMA3_OK) return rc;
    const forward_out out = {.logits = logits};
    if ((rc = forward_tokens(s, tokens, n_tokens, n_logits, &out)) != GEMMA3_OK) return rc;
    const size_t V = (size_t)s->cfg->vocab_size;
    if (logits != s->logits)
        memcpy(s->logits, logits + (size_t)(n_logits - 1) * V, V * sizeof(float));
    return GEMMA3_OK;
}

int gemma3_session_forward_logprob(gemma3_session *s, const int32_t *tokens, int n_tokens,
                                   int n_scored, const int32_t *next, double *logprob) {
    int rc = check_tokens(s, tokens, n_tokens, n_scored);
    if (rc == GEMMA3_OK && (!next || !logprob))
        rc = g3_error(GEMMA3_ERR_ARG, "forward: no next tokens or no logprob buffer");
    for (int i = 0; rc == GEMMA3_OK && i < n_scored; i++)
        if (next[i] < 0 || next[i] >= s->cfg->vocab_size)
            rc = g3_error(GEMMA3_ERR_ARG, "forward: next token %d at index %d is out of range [0, %d)",
                          next[i], i, s->cfg->vocab_size);
    if (rc != GEMMA3_OK) return rc;
    const forward_out out = {.next = next, .logprob = logprob};
    return forward_tokens(s, tokens, n_tokens, n_scored, &out);
}

int gemma3_session_forward(gemma3_session *s, const int32_t *tokens, int n_tokens, float *all_logits) {
    return all_logits ? gemma3_session_forward_last(s, tokens, n_tokens, n_tokens, all_logits)
                      : gemma3_session_forward_last(s, tokens, n_tokens, 1, s->logits);
}

int gemma3_set_isa(const char *isa) { return g3_isa_set_default(isa); }
