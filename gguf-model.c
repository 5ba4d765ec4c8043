/* gguf-model.c - Gemma 3 from a GGUF file: config, tensors under HF names, tokenizer.
 *
 * The facts follow llama.cpp (convert_hf_to_gguf.py's Gemma3Model and src/models/gemma3.cpp);
 * docs/gguf.md lists them. In short: the shape comes from gemma3.* keys; the sliding layers are
 * every layer but each sixth (gemma3.attention.sliding_window_pattern, default 6) with RoPE base
 * gemma3.rope.freq_base_swa (default 10,000) and no scaling; the global layers take
 * gemma3.rope.freq_base and the linear gemma3.rope.scaling.factor; the attention scale is
 * head_dim^-0.5, or (hidden / heads)^-0.5 for the 62-layer (27B) shape, which GGUF does not
 * store; the norms hold 1 + w already. */
#include "gguf-model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "quant-mix.h"
#include "tokenizer.h"
#include "util.h"
#include "weights.h"

#define ARCH "gemma3"

int g3_model_is_gguf(const char *model) { return g3_gguf_is_file(model); }

/* ---- the header, mapped ------------------------------------------------------------------- */

typedef struct mapped {
    uint8_t *buf;
    size_t size;
    g3_gguf *g;
} mapped;

static void unmap(mapped *m) {
    g3_gguf_free(m->g);
    if (m->buf) munmap(m->buf, m->size);
    memset(m, 0, sizeof *m);
}

/* Maps path read-only and parses it (only the pages of the header are ever touched). */
static int map_gguf(const char *path, mapped *m) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused below, not waited on */
    if (fd < 0) return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int rc = GEMMA3_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
        rc = g3_error(GEMMA3_ERR_IO, "%s: not a non-empty regular file", path);
    if (rc == GEMMA3_OK) {
        m->size = (size_t)sb.st_size;
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) rc = g3_error(GEMMA3_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        else m->buf = p;
    }
    close(fd);
    if (rc == GEMMA3_OK) rc = g3_gguf_parse(m->buf, m->size, path, &m->g);
    if (rc != GEMMA3_OK) unmap(m);
    return rc;
}

static int check_arch(const g3_gguf *g) {
    const char *arch;
    size_t len;
    int rc = g3_gguf_get_str(g, "general.architecture", 1, &arch, &len);
    if (rc == GEMMA3_OK && !(len == strlen(ARCH) && memcmp(arch, ARCH, len) == 0))
        rc = g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: general.architecture is '%.*s': not a Gemma 3 "
                      "text model (" ARCH ")", g->label, (int)(len > 40 ? 40 : len), arch);
    return rc;
}

/* ---- config ------------------------------------------------------------------------------- */

/* An integer key gemma3.NAME in [1, max]; `required` or left as it is. */
static int get_size(const g3_gguf *g, const char *name, int required, int max, int *out) {
    char key[96];
    snprintf(key, sizeof key, ARCH ".%s", name);
    uint32_t v = (uint32_t)*out;
    int rc = g3_gguf_get_u32(g, key, required, &v);
    if (rc == GEMMA3_OK && g3_gguf_find(g, key) && (v == 0 || v > (uint32_t)max))
        rc = g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: %u is not in [1, %d]", g->label, key, v, max);
    if (rc == GEMMA3_OK) *out = (int)v;
    return rc;
}

static int get_float(const g3_gguf *g, const char *name, float *out) {
    char key[96];
    snprintf(key, sizeof key, ARCH ".%s", name);
    return g3_gguf_get_f32(g, key, 0, out);
}

/* The id of the piece whose text is `text` in tokenizer.ggml.tokens, or -1. */
static int32_t token_id(const g3_gguf *g, const char *text) {
    const g3_gguf_kv *kv = NULL;
    if (g3_gguf_get_array(g, "tokenizer.ggml.tokens", G3_GGUF_STRING, 0, &kv) != GEMMA3_OK || !kv) return -1;
    const uint8_t *p = kv->value;
    const size_t n = strlen(text);
    for (uint64_t i = 0; i < kv->n && i < INT32_MAX; i++) {
        const char *s;
        size_t len;
        p = g3_gguf_next_str(p, &s, &len);
        if (len == n && memcmp(s, text, n) == 0) return (int32_t)i;
    }
    return -1;
}

static void add_eos(g3_config *c, int32_t id) {
    if (id < 0 || c->n_eos == G3_MAX_EOS) return;
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == id) return;
    c->eos_ids[c->n_eos++] = id;
}

/* Token ids: the tokenizer keys, and as stops both <eos> and <end_of_turn> when the vocabulary
 * has them (llama.cpp ends generation at either: its end-of-generation set). */
static int read_ids(const g3_gguf *g, g3_config *c) {
    uint32_t bos = 2, pad = 0, eos = 1, eot = UINT32_MAX;
    int rc;
    if ((rc = g3_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", 0, &bos)) ||
        (rc = g3_gguf_get_u32(g, "tokenizer.ggml.padding_token_id", 0, &pad)) ||
        (rc = g3_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", 0, &eos)) ||
        (rc = g3_gguf_get_u32(g, "tokenizer.ggml.eot_token_id", 0, &eot)))
        return rc;
    c->bos_id = bos > INT32_MAX ? -1 : (int)bos;
    c->pad_id = pad > INT32_MAX ? -1 : (int)pad;
    c->n_eos = 0;
    add_eos(c, eos > INT32_MAX ? -1 : (int32_t)eos);
    if (eot != UINT32_MAX) add_eos(c, eot > INT32_MAX ? -1 : (int32_t)eot);
    add_eos(c, token_id(g, "<eos>"));
    add_eos(c, token_id(g, "<end_of_turn>"));
    return GEMMA3_OK;
}

/* RoPE: global layers rope.freq_base with linear scaling (or none); sliding ones
 * rope.freq_base_swa unscaled (llama.cpp's rope_freq_scale_train_swa is 1). */
static int read_rope(const g3_gguf *g, g3_config *c) {
    c->rope_theta_full = 10000.0f;
    c->rope_theta_sliding = 10000.0f;
    c->rope_factor_full = c->rope_factor_sliding = 1.0f;
    const char *type = "linear";
    size_t type_len = 6;
    float factor = 0.0f;
    int rc;
    if ((rc = get_float(g, "rope.freq_base", &c->rope_theta_full)) ||
        (rc = get_float(g, "rope.freq_base_swa", &c->rope_theta_sliding)) ||
        (rc = g3_gguf_get_str(g, ARCH ".rope.scaling.type", 0, &type, &type_len)) ||
        (rc = get_float(g, "rope.scale_linear", &factor)) ||
        (rc = get_float(g, "rope.scaling.factor", &factor)))
        return rc;
    const int none = type_len == 4 && memcmp(type, "none", 4) == 0;
    if (!none && !(type_len == 6 && memcmp(type, "linear", 6) == 0))
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: key " ARCH ".rope.scaling.type: '%.*s' is not "
                        "supported (none or linear)", g->label, (int)(type_len > 40 ? 40 : type_len), type);
    if (!none && factor != 0.0f) c->rope_factor_full = factor;
    return GEMMA3_OK;
}

/* Sliding layers: i % pattern < pattern - 1 (llama.cpp's set_swa_pattern); none without a
 * sliding window. */
static int read_layer_types(const g3_gguf *g, g3_config *c) {
    int window = 0, pattern = 6, rc;
    if ((rc = get_size(g, "attention.sliding_window", 0, INT32_MAX, &window)) ||
        (rc = get_size(g, "attention.sliding_window_pattern", 0, G3_MAX_LAYERS + 1, &pattern)))
        return rc;
    c->sliding_window = window ? window : c->max_position_embeddings;
    for (int l = 0; l < c->n_layers && l < G3_MAX_LAYERS; l++)
        c->layer_types[l] = window && l % pattern < pattern - 1 ? G3_LAYER_SLIDING : G3_LAYER_FULL;
    return GEMMA3_OK;
}

static int config_from_gguf(const g3_gguf *g, g3_config *c) {
    memset(c, 0, sizeof *c);
    int rc = check_arch(g);
    if (rc != GEMMA3_OK) return rc;
    snprintf(c->architecture, sizeof c->architecture, "%s (GGUF)", ARCH);
    if ((rc = get_size(g, "embedding_length", 1, 1 << 20, &c->hidden_size)) ||
        (rc = get_size(g, "feed_forward_length", 1, 1 << 22, &c->intermediate_size)) ||
        (rc = get_size(g, "block_count", 1, G3_MAX_LAYERS, &c->n_layers)) ||
        (rc = get_size(g, "context_length", 1, INT32_MAX, &c->max_position_embeddings)) ||
        (rc = get_size(g, "attention.head_count", 1, 1024, &c->n_heads)))
        return rc;
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->hidden_size / c->n_heads;
    int value_dim = 0;
    c->rms_norm_eps = 1e-6f;
    if ((rc = get_size(g, "attention.head_count_kv", 0, 1024, &c->n_kv_heads)) ||
        (rc = get_size(g, "attention.key_length", 0, 1 << 16, &c->head_dim)) ||
        (rc = get_size(g, "attention.value_length", 0, 1 << 16, &value_dim)) ||
        (rc = get_float(g, "attention.layer_norm_rms_epsilon", &c->rms_norm_eps)) ||
        (rc = get_float(g, "final_logit_softcapping", &c->final_softcap)) ||
        (rc = read_rope(g, c)) || (rc = read_layer_types(g, c)) || (rc = read_ids(g, c)))
        return rc;
    if (value_dim && value_dim != c->head_dim)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: key " ARCH ".attention.value_length %d differs "
                        "from key_length %d", g->label, value_dim, c->head_dim);
    if (!(c->rms_norm_eps > 0.0f))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key " ARCH ".attention.layer_norm_rms_epsilon: %g is "
                        "not positive", g->label, (double)c->rms_norm_eps);
    /* not stored: llama.cpp takes hidden / heads for the 27B shape (62 layers), else head_dim */
    c->query_pre_attn_scalar = (float)(c->n_layers == 62 ? c->hidden_size / c->n_heads : c->head_dim);
    const g3_gguf_tensor *embed = g3_gguf_find_tensor(g, "token_embd.weight");
    if (!embed || embed->n_dims != 2 || embed->ne[1] > (1 << 24))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor token_embd.weight: %s", g->label,
                        embed ? "expected 2 dimensions, at most 2^24 rows" : "missing");
    c->vocab_size = (int)embed->ne[1];
    c->tie_word_embeddings = g3_gguf_find_tensor(g, "output.weight") == NULL;
    return g3_config_check(c, g->label);
}

int g3_model_config_load(const char *model, g3_config *cfg) {
    if (!g3_model_is_gguf(model)) {
        char path[4096];
        int rc = g3_path_join(path, sizeof path, model, "config.json");
        return rc == GEMMA3_OK ? g3_config_load(path, cfg) : rc;
    }
    mapped m;
    int rc = map_gguf(model, &m);
    if (rc == GEMMA3_OK) rc = config_from_gguf(m.g, cfg);
    unmap(&m);
    return rc;
}

/* ---- tensors ------------------------------------------------------------------------------ */

/* GGUF's tensor names (gguf-py's MODEL_TENSOR names for gemma3) and the HF names they bind to. */
static const char *const global_names[][2] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
static const char *const layer_names[][2] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};
#define COUNT(a) (sizeof a / sizeof a[0])

/* The HF name of a GGUF tensor into hf, or 0 for a tensor the text model does not use. */
static int hf_name(const char *name, char *hf, size_t n) {
    for (size_t i = 0; i < COUNT(global_names); i++)
        if (strcmp(name, global_names[i][0]) == 0) return snprintf(hf, n, "%s", global_names[i][1]) > 0;
    unsigned layer;
    int used = 0;
    if (sscanf(name, "blk.%u.%n", &layer, &used) != 1 || !used) return 0;
    for (size_t i = 0; i < COUNT(layer_names); i++)
        if (strcmp(name + used, layer_names[i][0]) == 0)
            return snprintf(hf, n, "model.layers.%u.%s", layer, layer_names[i][1]) > 0;
    return 0;
}

/* A ggml type the engine runs as blocks (its weight type's row says which ggml id it has). */
static int is_quantized(uint32_t type) { return g3_wtype_is_block(g3_wtype_from_ggml(type)); }

/* The ggml types a matrix may have, for messages: F32 and F16 (made BF16 at load), then every
 * weight type's. */
static const char *supported_types(void) {
    static _Thread_local char list[256];
    int n = snprintf(list, sizeof list, "F32, F16");
    for (int t = 1; t < GEMMA3_WEIGHTS_COUNT; t++)
        if (g3_wtype_get(t) && n > 0 && (size_t)n < sizeof list)
            n += snprintf(list + n, sizeof list - (size_t)n, ", %s", g3_wtype_name_upper((g3_wtype)t));
    return list;
}

/* The one quantized type of the file's matrices (0 = none), refusing types the engine does not
 * run and files that mix a quantized type with another type. */
static int matrix_type(const g3_gguf *g, uint32_t *qtype) {
    const g3_gguf_tensor *first = NULL, *first_q = NULL;
    int64_t count[64] = {0};
    char hf[160];
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const g3_gguf_tensor *t = &g->tensors[i];
        if (!hf_name(t->name, hf, sizeof hf)) continue;
        if (t->type != G3_GGML_F32 && t->type != G3_GGML_F16 && g3_wtype_from_ggml(t->type) < 0)
            return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: tensor %s: type %s is not supported (%s)",
                            g->label, t->name, g3_ggml_type_name(t->type), supported_types());
        if (t->n_dims < 2) continue;
        if (!first) first = t;
        if (is_quantized(t->type) && !first_q) first_q = t;
        if (is_quantized(t->type) != is_quantized(first->type))
            return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: tensor %s is %s but %s is %s: quantized matrices "
                            "beside float ones are not supported", g->label, t->name,
                            g3_ggml_type_name(t->type), first->name, g3_ggml_type_name(first->type));
        if (is_quantized(t->type) && t->type < 64) count[t->type]++;
    }
    /* a mix (llama-quantize's Q4_K_M ...): the file's type is its most frequent block type, the
     * others are named per tensor (add_gguf_tensors) */
    *qtype = first_q ? first_q->type : 0;
    for (uint32_t t = 0; t < 64; t++)
        if (count[t] > count[*qtype]) *qtype = t;
    return GEMMA3_OK;
}

/* One GGUF tensor as a checkpoint view under its HF name: C-order shape (GGUF's reversed);
 * quantized rows as U8 [rows, row bytes] as in a quantized safetensors checkpoint. */
static int add_view(g3_st *st, const g3_gguf_tensor *t, const char *hf, const char *label) {
    g3_tensor v;
    memset(&v, 0, sizeof v);
    v.name = hf;
    v.file = label;
    v.data = t->data;
    v.n_bytes = t->n_bytes;
    v.n_dims = t->n_dims;
    for (int d = 0; d < t->n_dims; d++) v.shape[d] = t->ne[t->n_dims - 1 - d];
    v.n_elements = t->n_elements;
    v.dtype = t->type == G3_GGML_F32 ? G3_DTYPE_F32 : t->type == G3_GGML_F16 ? G3_DTYPE_F16 : G3_DTYPE_BF16;
    if (is_quantized(t->type)) {
        if (t->n_dims != 2)
            return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: tensor %s: a %d-dimensional %s tensor",
                            label, t->name, t->n_dims, g3_ggml_type_name(t->type));
        v.dtype = G3_DTYPE_U8;
        v.shape[1] = (int64_t)(t->n_bytes / (size_t)t->ne[1]);
        v.n_elements = (int64_t)t->n_bytes;
    }
    return g3_st_add_view(st, &v);
}

static int add_gguf_tensors(g3_st *st, const uint8_t *buf, size_t size, const char *label, void *ctx) {
    (void)ctx;
    g3_gguf *g;
    int rc = g3_gguf_parse(buf, size, label, &g);
    if (rc != GEMMA3_OK) return rc;
    uint32_t qtype = 0;
    if ((rc = check_arch(g)) == GEMMA3_OK) rc = matrix_type(g, &qtype);
    char hf[160], key[200];
    for (int64_t i = 0; i < g->n_tensors && rc == GEMMA3_OK; i++) {
        const g3_gguf_tensor *t = &g->tensors[i];
        if (!hf_name(t->name, hf, sizeof hf)) continue;
        rc = add_view(st, t, hf, label);
        if (rc == GEMMA3_OK && qtype && t->n_dims == 2 && t->type != qtype) { /* a mix */
            snprintf(key, sizeof key, "gemma3.quant.%s", hf);
            rc = g3_st_add_metadata(st, key, g3_wtype_name((g3_wtype)g3_wtype_from_ggml(t->type)));
        }
    }
    if (rc == GEMMA3_OK) rc = g3_st_add_metadata(st, "gemma3.norms", "plus_one");
    uint32_t ftype = 0; /* llama-quantize's recipe, by the file's general.file_type */
    if (rc == GEMMA3_OK && qtype && g3_gguf_get_u32(g, "general.file_type", 0, &ftype) == GEMMA3_OK &&
        g3_mix_from_ftype(ftype) > 0)
        rc = g3_st_add_metadata(st, "gemma3.mix", g3_mix_name(g3_mix_from_ftype(ftype)));
    if (rc == GEMMA3_OK && qtype)
        rc = g3_st_add_metadata(st, "gemma3.quant", g3_wtype_name((g3_wtype)g3_wtype_from_ggml(qtype)));
    g3_gguf_free(g);
    return rc;
}

int g3_model_open_st(const char *model, g3_st_load load, int n_threads, int populate, g3_st **out) {
    if (!g3_model_is_gguf(model)) return g3_st_open_dir_ex(model, load, n_threads, populate, out);
    return g3_st_open_file_with(model, load, n_threads, populate, add_gguf_tensors, NULL, out);
}

/* ---- tokenizer ---------------------------------------------------------------------------- */

/* The vocabulary arrays, converted back to SentencePiece's conventions: the converter marks
 * HF's "special" added tokens CONTROL (Gemma's tokenizer.model has them USER_DEFINED) and <unk>
 * among them, scores added tokens -1000 (SentencePiece: 0) and writes user-defined pieces with
 * spaces where SentencePiece has U+2581. */
typedef struct vocab {
    const char **text;
    size_t *len;
    float *score;
    int32_t *type;
    char *owned; /* rewritten user-defined texts */
} vocab;

static void vocab_free(vocab *v) {
    free(v->text);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->owned);
}

static int is_piece(const vocab *v, int64_t id, const char *s) {
    return v->len[id] == strlen(s) && memcmp(v->text[id], s, v->len[id]) == 0;
}

/* Spaces in user-defined pieces back to U+2581 (3 bytes each), into v->owned. */
static int unescape_spaces(vocab *v, int64_t n, const char *label) {
    size_t need = 0;
    for (int64_t i = 0; i < n; i++)
        if (v->type[i] == G3_PIECE_USER_DEFINED && memchr(v->text[i], ' ', v->len[i])) need += 3 * v->len[i];
    if (!need) return GEMMA3_OK;
    if (!(v->owned = malloc(need))) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    char *o = v->owned;
    for (int64_t i = 0; i < n; i++) {
        if (v->type[i] != G3_PIECE_USER_DEFINED || !memchr(v->text[i], ' ', v->len[i])) continue;
        const char *s = v->text[i];
        size_t len = v->len[i];
        v->text[i] = o;
        for (size_t k = 0; k < len; k++)
            if (s[k] == ' ') memcpy(o, "\xE2\x96\x81", 3), o += 3;
            else *o++ = s[k];
        v->len[i] = (size_t)(o - v->text[i]);
    }
    return GEMMA3_OK;
}

static int read_vocab(const g3_gguf *g, vocab *v, int64_t *n_out) {
    const g3_gguf_kv *tokens, *scores, *types;
    int rc;
    if ((rc = g3_gguf_get_array(g, "tokenizer.ggml.tokens", G3_GGUF_STRING, 1, &tokens)) ||
        (rc = g3_gguf_get_array(g, "tokenizer.ggml.scores", G3_GGUF_F32, 0, &scores)) ||
        (rc = g3_gguf_get_array(g, "tokenizer.ggml.token_type", G3_GGUF_I32, 0, &types)))
        return rc;
    const int64_t n = (int64_t)tokens->n;
    if ((scores && scores->n != tokens->n) || (types && types->n != tokens->n))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key tokenizer.ggml.%s: %llu entries for %lld tokens",
                        g->label, scores && scores->n != tokens->n ? "scores" : "token_type",
                        (unsigned long long)(scores && scores->n != tokens->n ? scores->n : types->n),
                        (long long)n);
    v->text = malloc((size_t)(n ? n : 1) * sizeof *v->text);
    v->len = malloc((size_t)(n ? n : 1) * sizeof *v->len);
    v->score = calloc((size_t)(n ? n : 1), sizeof *v->score);
    v->type = malloc((size_t)(n ? n : 1) * sizeof *v->type);
    if (!v->text || !v->len || !v->score || !v->type) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", g->label);
    const uint8_t *p = tokens->value;
    for (int64_t i = 0; i < n; i++) {
        p = g3_gguf_next_str(p, &v->text[i], &v->len[i]);
        if (scores) memcpy(&v->score[i], scores->value + 4 * i, 4);
        v->type[i] = G3_PIECE_NORMAL;
        if (types) memcpy(&v->type[i], types->value + 4 * i, 4);
    }
    *n_out = n;
    return GEMMA3_OK;
}

static int32_t find_piece(const vocab *v, int64_t n, const char *s, uint32_t fallback) {
    for (int64_t i = 0; i < n; i++)
        if (is_piece(v, i, s)) return (int32_t)i;
    return fallback < (uint32_t)n ? (int32_t)fallback : -1;
}

static int tokenizer_from_gguf(const g3_gguf *g, gemma3_tokenizer **out) {
    const char *model = "";
    size_t model_len = 0;
    int rc = g3_gguf_get_str(g, "tokenizer.ggml.model", 1, &model, &model_len);
    if (rc == GEMMA3_OK && !(model_len == 5 && memcmp(model, "llama", 5) == 0))
        rc = g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: key tokenizer.ggml.model: '%.*s' is not supported "
                      "(llama: SentencePiece)", g->label, (int)(model_len > 40 ? 40 : model_len), model);
    vocab v = {0};
    int64_t n = 0;
    uint32_t ids[4] = {2, 1, 0, 3}; /* bos, eos, pad, unk */
    int add_space = 1, remove_ws = 0, add_bos = 1;
    if (rc == GEMMA3_OK) rc = read_vocab(g, &v, &n);
    static const char *const id_keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id"};
    for (int k = 0; k < 4 && rc == GEMMA3_OK; k++) rc = g3_gguf_get_u32(g, id_keys[k], 0, &ids[k]);
    if (rc == GEMMA3_OK) rc = g3_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", 0, &add_space);
    if (rc == GEMMA3_OK) rc = g3_gguf_get_bool(g, "tokenizer.ggml.remove_extra_whitespaces", 0, &remove_ws);
    if (rc == GEMMA3_OK) rc = g3_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", 0, &add_bos);
    g3_tokenizer_spec spec = {find_piece(&v, n, "<bos>", ids[0]), find_piece(&v, n, "<eos>", ids[1]),
                              find_piece(&v, n, "<pad>", ids[2]), 0, add_space, remove_ws, 1, add_bos};
    const int32_t unk = rc == GEMMA3_OK ? find_piece(&v, n, "<unk>", ids[3]) : -1;
    for (int64_t i = 0; i < n && rc == GEMMA3_OK; i++) {
        if (i == unk) v.type[i] = G3_PIECE_UNKNOWN;
        else if (v.type[i] == G3_PIECE_CONTROL && i != spec.bos_id && i != spec.eos_id && i != spec.pad_id)
            v.type[i] = G3_PIECE_USER_DEFINED;
        if (v.type[i] == G3_PIECE_USER_DEFINED || v.type[i] == G3_PIECE_CONTROL || v.type[i] == G3_PIECE_UNKNOWN)
            v.score[i] = 0.0f;
        spec.byte_fallback |= v.type[i] == G3_PIECE_BYTE;
    }
    if (rc == GEMMA3_OK) rc = unescape_spaces(&v, n, g->label);
    if (rc == GEMMA3_OK)
        rc = g3_tokenizer_from_pieces(v.text, v.len, v.score, v.type, (size_t)n, &spec, g->label, out);
    vocab_free(&v);
    return rc;
}

int g3_gguf_model_tokenizer(const char *path, gemma3_tokenizer **out) {
    *out = NULL;
    mapped m;
    int rc = map_gguf(path, &m);
    /* no vocabulary: the model runs on ids, as a directory without tokenizer.model */
    if (rc == GEMMA3_OK && g3_gguf_find(m.g, "tokenizer.ggml.tokens")) rc = tokenizer_from_gguf(m.g, out);
    unmap(&m);
    return rc;
}

/* What becomes of the file's tokenizer.chat_template: chat always applies the built-in Gemma turns
 * (a Jinja template is not run); a template without Gemma's turn markers is said to be unused. */
static const char *chat_template_kind(const g3_gguf *g) {
    const char *s = NULL;
    size_t len = 0;
    if (g3_gguf_get_str(g, "tokenizer.chat_template", 0, &s, &len) != GEMMA3_OK || !s)
        return "none in the file (chat applies Gemma's turns)";
    if (memmem(s, len, "<start_of_turn>", 15))
        return "Gemma's turns (chat applies the built-in Gemma template)";
    return "not Gemma's: not used (chat applies Gemma's turns; generate --raw sends a prompt as written)";
}

/* ---- describing --------------------------------------------------------------------------- */

int g3_gguf_model_describe(const char *path, FILE *out) {
    mapped m;
    int rc = map_gguf(path, &m);
    if (rc != GEMMA3_OK) return rc;
    const g3_gguf *g = m.g;
    const char *s = "?", *name = "";
    size_t len = 1, name_len = 0;
    uint32_t ctx = 0;
    g3_gguf_get_str(g, "general.architecture", 0, &s, &len);
    g3_gguf_get_str(g, "general.name", 0, &name, &name_len);
    g3_gguf_get_u32(g, ARCH ".context_length", 0, &ctx);
    fprintf(out, "gguf: version %u, architecture %.*s, name '%.*s', context length %u, %lld "
            "tensors, %zu bytes\n", g->version, (int)(len > 40 ? 40 : len), s,
            (int)(name_len > 80 ? 80 : name_len), name, ctx, (long long)g->n_tensors, m.size);
    int64_t count[64] = {0}, bytes[64] = {0};
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].type < 64) {
            count[g->tensors[i].type]++;
            bytes[g->tensors[i].type] += (int64_t)g->tensors[i].n_bytes;
        }
    for (uint32_t t = 0; t < 64; t++)
        if (count[t])
            fprintf(out, "gguf: %-6s %4lld tensors, %lld bytes\n", g3_ggml_type_name(t),
                    (long long)count[t], (long long)bytes[t]);
    fprintf(out, "gguf: chat template: %s\n", chat_template_kind(g));
    rc = check_arch(g);
    unmap(&m);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------------ */

/* The pattern P of llama.cpp's sliding layers (i % P < P - 1) that gives the config's layer
 * types; 0 when none does (then llama.cpp could not run the file as written). */
static int swa_pattern(const g3_config *c) {
    int any_sliding = 0;
    for (int l = 0; l < c->n_layers; l++) any_sliding |= c->layer_types[l] == G3_LAYER_SLIDING;
    if (!any_sliding) return 1;
    for (int p = 2; p <= c->n_layers + 1; p++) {
        int ok = 1;
        for (int l = 0; l < c->n_layers && ok; l++)
            ok = (c->layer_types[l] == G3_LAYER_SLIDING) == (l % p < p - 1);
        if (ok) return p;
    }
    return 0;
}

/* What llama.cpp cannot take from a GGUF as this config has it, or NULL. */
static const char *not_expressible(const g3_config *c) {
    const float qpas = (float)(c->n_layers == 62 ? c->hidden_size / c->n_heads : c->head_dim);
    if (c->query_pre_attn_scalar != qpas) return "query_pre_attn_scalar (llama.cpp derives it from the shape)";
    if (c->attn_softcap != 0.0f) return "attn_logit_softcapping (not in llama.cpp's gemma3)";
    if (c->rope_factor_sliding != 1.0f) return "RoPE scaling on the sliding layers";
    if (!swa_pattern(c)) return "layer_types (not every sixth layer global: no sliding_window_pattern fits)";
    return NULL;
}

static void put_config(g3_gguf_writer *w, const g3_config *c, uint32_t file_type) {
    g3_gguf_put_str(w, "general.architecture", ARCH, strlen(ARCH));
    g3_gguf_put_str(w, "general.name", "gemma3", 6);
    g3_gguf_put_u32(w, "general.quantization_version", 2);
    g3_gguf_put_u32(w, "general.file_type", file_type);
    g3_gguf_put_u32(w, ARCH ".context_length", (uint32_t)c->max_position_embeddings);
    g3_gguf_put_u32(w, ARCH ".embedding_length", (uint32_t)c->hidden_size);
    g3_gguf_put_u32(w, ARCH ".block_count", (uint32_t)c->n_layers);
    g3_gguf_put_u32(w, ARCH ".feed_forward_length", (uint32_t)c->intermediate_size);
    g3_gguf_put_u32(w, ARCH ".attention.head_count", (uint32_t)c->n_heads);
    g3_gguf_put_u32(w, ARCH ".attention.head_count_kv", (uint32_t)c->n_kv_heads);
    g3_gguf_put_u32(w, ARCH ".attention.key_length", (uint32_t)c->head_dim);
    g3_gguf_put_u32(w, ARCH ".attention.value_length", (uint32_t)c->head_dim);
    g3_gguf_put_f32(w, ARCH ".attention.layer_norm_rms_epsilon", c->rms_norm_eps);
    g3_gguf_put_f32(w, ARCH ".rope.freq_base", c->rope_theta_full);
    g3_gguf_put_f32(w, ARCH ".rope.freq_base_swa", c->rope_theta_sliding);
    if (c->rope_factor_full != 1.0f) {
        g3_gguf_put_str(w, ARCH ".rope.scaling.type", "linear", 6);
        g3_gguf_put_f32(w, ARCH ".rope.scaling.factor", c->rope_factor_full);
    }
    const int pattern = swa_pattern(c);
    if (pattern > 1) {
        g3_gguf_put_u32(w, ARCH ".attention.sliding_window", (uint32_t)c->sliding_window);
        g3_gguf_put_u32(w, ARCH ".attention.sliding_window_pattern", (uint32_t)pattern);
    }
    if (c->final_softcap != 0.0f) g3_gguf_put_f32(w, ARCH ".final_logit_softcapping", c->final_softcap);
}

/* The vocabulary as llama.cpp's converter writes it (the reverse of tokenizer_from_gguf):
 * user-defined pieces with spaces for U+2581, rows beyond the pieces as UNUSED [PADn]. */
static int put_vocab(g3_gguf_writer *w, const gemma3_tokenizer *tok, int n_rows, const char *label) {
    const int n_pieces = gemma3_tokenizer_vocab_size(tok), n = n_rows > n_pieces ? n_rows : n_pieces;
    const char **text = calloc((size_t)n, sizeof *text);
    size_t *len = calloc((size_t)n, sizeof *len), total = 0;
    float *score = calloc((size_t)n, sizeof *score);
    int32_t *type = calloc((size_t)n, sizeof *type);
    for (int i = 0; i < n_pieces; i++) total += strlen(gemma3_tokenizer_piece(tok, i)) + 1;
    char *arena = malloc(total + (size_t)(n - n_pieces) * 24 + 1), *o = arena;
    if (!text || !len || !score || !type || !arena) {
        free(text), free(len), free(score), free(type), free(arena);
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    }
    for (int i = 0; i < n; i++) {
        text[i] = o;
        if (i >= n_pieces) {
            o += sprintf(o, "[PAD%d]", i) + 1;
            type[i] = G3_PIECE_UNUSED;
            score[i] = -1000.0f;
            len[i] = strlen(text[i]);
            continue;
        }
        const char *p = gemma3_tokenizer_piece(tok, i);
        type[i] = g3_tokenizer_piece_type(tok, i);
        score[i] = g3_tokenizer_piece_score(tok, i);
        const int user = type[i] == G3_PIECE_USER_DEFINED;
        for (; *p; p++)
            if (user && memcmp(p, "\xE2\x96\x81", 3) == 0) *o++ = ' ', p += 2;
            else *o++ = *p;
        len[i] = (size_t)(o - text[i]);
        *o++ = '\0';
    }
    g3_gguf_put_str(w, "tokenizer.ggml.model", "llama", 5);
    g3_gguf_put_str(w, "tokenizer.ggml.pre", "default", 7);
    g3_gguf_put_str_array(w, "tokenizer.ggml.tokens", text, len, (uint64_t)n);
    g3_gguf_put_array(w, "tokenizer.ggml.scores", G3_GGUF_F32, score, (uint64_t)n);
    g3_gguf_put_array(w, "tokenizer.ggml.token_type", G3_GGUF_I32, type, (uint64_t)n);
    static const char *const keys[] = {"tokenizer.ggml.padding_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.ggml.bos_token_id", "tokenizer.ggml.unknown_token_id"};
    for (int k = GEMMA3_SPECIAL_PAD; k <= GEMMA3_SPECIAL_UNK; k++) {
        int32_t id = gemma3_tokenizer_special(tok, (enum gemma3_special)k);
        if (id >= 0) g3_gguf_put_u32(w, keys[k], (uint32_t)id);
    }
    g3_gguf_put_bool(w, "tokenizer.ggml.add_bos_token", 1);
    g3_gguf_put_bool(w, "tokenizer.ggml.add_eos_token", 0);
    g3_gguf_put_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    free(text), free(len), free(score), free(type), free(arena);
    return GEMMA3_OK;
}

/* The model's tensors in llama.cpp's order and names: matrices as bound (rows of blocks or of
 * bf16), norms as the fp32 1 + w the engine uses (what the converter stores). */
typedef struct out_tensor {
    char name[64];
    const void *data;
    uint32_t type;
    int64_t ne[2];
    int n_dims;
} out_tensor;

static int list_tensors(const g3_config *c, const g3_weights *w, uint32_t mtype, out_tensor *t) {
    int n = 0;
    (void)mtype; /* each matrix its own type (a mix: Q4_K with Q6_K, fallbacks) */
#define MAT(nm, m, cols, rows) t[n++] = (out_tensor){"", (m).data, g3_wtype_get((m).type)->ggml_type, {cols, rows}, 2}, snprintf(t[n - 1].name, 64, "%s", nm)
#define NORM(nm, p, len) t[n++] = (out_tensor){"", p, G3_GGML_F32, {len, 1}, 1}, snprintf(t[n - 1].name, 64, "%s", nm)
    const int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    MAT("token_embd.weight", w->embed, H, V);
    NORM("output_norm.weight", w->final_norm, H);
    if (w->lm_head.data != w->embed.data) MAT("output.weight", w->lm_head, H, V);
    for (int l = 0; l < c->n_layers; l++) {
        const g3_layer_weights *lw = &w->layers[l];
        char b[64];
#define LN(s) (snprintf(b, sizeof b, "blk.%d.%s", l, s), b)
        NORM(LN("attn_norm.weight"), lw->attn_norm, H);
        MAT(LN("attn_q.weight"), lw->wq, H, q);
        MAT(LN("attn_k.weight"), lw->wk, H, kv);
        MAT(LN("attn_v.weight"), lw->wv, H, kv);
        MAT(LN("attn_output.weight"), lw->wo, q, H);
        NORM(LN("attn_q_norm.weight"), lw->q_norm, c->head_dim);
        NORM(LN("attn_k_norm.weight"), lw->k_norm, c->head_dim);
        NORM(LN("post_attention_norm.weight"), lw->post_attn_norm, H);
        NORM(LN("ffn_norm.weight"), lw->pre_ffn_norm, H);
        MAT(LN("ffn_gate.weight"), lw->w_gate, H, I);
        MAT(LN("ffn_up.weight"), lw->w_up, H, I);
        MAT(LN("ffn_down.weight"), lw->w_down, I, H);
        NORM(LN("post_ffw_norm.weight"), lw->post_ffn_norm, H);
#undef LN
    }
#undef MAT
#undef NORM
    return n;
}

static int write_tensors(g3_gguf_writer *w, const out_tensor *t, int n) {
    for (int i = 0; i < n; i++) g3_gguf_put_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne);
    int rc = g3_gguf_writer_begin(w);
    for (int i = 0; i < n && rc == GEMMA3_OK; i++) {
        const int64_t elems = t[i].ne[0] * (t[i].n_dims == 2 ? t[i].ne[1] : 1);
        const size_t bytes = (size_t)(elems / g3_ggml_block_elems(t[i].type)) * (size_t)g3_ggml_block_bytes(t[i].type);
        rc = g3_gguf_writer_append(w, t[i].data, bytes);
    }
    return rc;
}

int g3_gguf_model_write(const char *src, g3_wtype type, int n_threads, const char *path) {
    g3_config *cfg = calloc(1, sizeof *cfg);
    g3_weights *wts = calloc(1, sizeof *wts);
    gemma3_tokenizer *tok = NULL;
    g3_gguf_writer *w = NULL;
    out_tensor *t = NULL;
    int rc = cfg && wts ? g3_model_config_load(src, cfg) : g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    const char *why = rc == GEMMA3_OK ? not_expressible(cfg) : NULL;
    if (why) rc = g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: cannot be written as a GGUF llama.cpp runs the "
                           "same: %s", src, why);
    if (rc == GEMMA3_OK) rc = g3_weights_load_ex(src, cfg, G3_ST_LOAD_MMAP, type, G3_LAYOUT_ROWS, n_threads, wts);
    if (rc == GEMMA3_OK) {
        if (g3_model_is_gguf(src)) rc = g3_gguf_model_tokenizer(src, &tok);
        else {
            char p[4096];
            rc = g3_path_join(p, sizeof p, src, "tokenizer.model");
            if (rc == GEMMA3_OK) rc = g3_tokenizer_load_checkpoint_file(p, &tok);
        }
        if (rc == GEMMA3_OK && !tok) rc = g3_error(GEMMA3_ERR_FORMAT, "%s: no tokenizer to write", src);
    }
    if (rc == GEMMA3_OK && !(t = calloc((size_t)(3 + 13 * cfg->n_layers), sizeof *t)))
        rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    if (rc == GEMMA3_OK) rc = g3_gguf_writer_new(path, &w);
    if (rc == GEMMA3_OK) {
        put_config(w, cfg, wts->mix ? g3_mix_ftype(wts->mix) : g3_wtype_get(wts->wtype)->gguf_file_type);
        rc = put_vocab(w, tok, cfg->vocab_size, path);
    }
    if (rc == GEMMA3_OK) rc = write_tensors(w, t, list_tensors(cfg, wts, g3_wtype_get(wts->wtype)->ggml_type, t));
    if (rc == GEMMA3_OK) {
        rc = g3_gguf_writer_finish(w);
        w = NULL;
    }
    g3_gguf_writer_abort(w);
    free(t);
    gemma3_tokenizer_free(tok);
    if (wts) g3_weights_free(wts);
    free(wts);
    free(cfg);
    return rc;
}

int gemma3_quantize_gguf(const char *src, const char *path, enum gemma3_weight_type type, int n_threads) {
    if (!src || !path) return g3_error(GEMMA3_ERR_ARG, "quantize: no model or output given");
    if (!g3_wtype_get((int)type) && !g3_mix_is_recipe((int)type))
        return g3_error(GEMMA3_ERR_ARG, "quantize: weight type %s is not one of %s",
                        gemma3_weight_type_name(type), gemma3_weight_type_list(0));
    if (n_threads < 0 || n_threads > 1024)
        return g3_error(GEMMA3_ERR_ARG, "quantize: n_threads %d is out of range [0, 1024]", n_threads);
    return g3_gguf_model_write(src, type, n_threads, path);
}
