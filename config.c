/* config.c - config.json (generation_config.json is the sampler's: gemma3_sampler_params_load_hf).
 *
 * Two layouts exist on the hub:
 *   - text-only (model_type "gemma3_text", Gemma3ForCausalLM): every key at the top level;
 *   - multimodal (model_type "gemma3", Gemma3ForConditionalGeneration): the text settings live
 *     in "text_config", the top level may carry eos_token_id / bos_token_id / pad_token_id.
 * Absent keys take transformers' Gemma3TextConfig defaults (docs/forward-pass.md §6), except the
 * three that fix the model's size, which are REQUIRED: hidden_size, intermediate_size and
 * num_hidden_layers (the class defaults for them describe no released checkpoint, so a config
 * without them is far more likely truncated than intended). A JSON null counts as absent, except
 * for the softcaps and rope_scaling where null means "none".
 *
 * Anything the engine does not implement is refused with the key and its value in the message,
 * rather than silently computing a different model. */
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Where a key is looked up, for messages: "hidden_size" or "text_config.hidden_size". */
typedef struct scope {
    const cJSON *obj;
    const char *path;   /* file, for messages */
    const char *prefix; /* "" or "text_config." */
} scope;

/* The item for key, or NULL when absent or null. */
static const cJSON *item(const scope *s, const char *key) {
    const cJSON *j = s->obj ? cJSON_GetObjectItemCaseSensitive(s->obj, key) : NULL;
    return (j && !cJSON_IsNull(j)) ? j : NULL;
}

static int json_is_int(const cJSON *j) {
    return cJSON_IsNumber(j) && j->valuedouble == floor(j->valuedouble) &&
           j->valuedouble >= INT_MIN && j->valuedouble <= INT_MAX;
}

/* Integer key: *out keeps its default when absent; required keys must be present. */
static int get_int(const scope *s, const char *key, int required, int *out) {
    const cJSON *j = item(s, key);
    if (!j) {
        if (required)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: required key missing", s->path,
                            s->prefix, key);
        return GEMMA3_OK;
    }
    if (!json_is_int(j)) {
        if (cJSON_IsNumber(j))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: expected an integer, got %g", s->path,
                            s->prefix, key, j->valuedouble);
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: expected an integer, got %s", s->path,
                        s->prefix, key, g3_json_type_name(j));
    }
    *out = (int)j->valuedouble;
    return GEMMA3_OK;
}

/* Positive integer no larger than max. */
static int get_size(const scope *s, const char *key, int required, int max, int *out) {
    int rc = get_int(s, key, required, out);
    if (rc != GEMMA3_OK) return rc;
    if (*out <= 0 || *out > max)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: %d is not in [1, %d]", s->path, s->prefix,
                        key, *out, max);
    return GEMMA3_OK;
}

static int get_number(const scope *s, const char *key, float *out) {
    const cJSON *j = item(s, key);
    if (!j) return GEMMA3_OK;
    if (!cJSON_IsNumber(j))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: expected a number, got %s", s->path,
                        s->prefix, key, g3_json_type_name(j));
    *out = (float)j->valuedouble;
    return GEMMA3_OK;
}

static int get_positive(const scope *s, const char *key, float *out) {
    int rc = get_number(s, key, out);
    if (rc == GEMMA3_OK && !(*out > 0.0f && isfinite(*out))) /* the value as written: 1e-300 is 0 as a float */
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: %.10g is not a positive number (as a float)",
                        s->path, s->prefix, key, item(s, key)->valuedouble);
    return rc;
}

static int get_bool(const scope *s, const char *key, int *out) {
    const cJSON *j = item(s, key);
    if (!j) return GEMMA3_OK;
    if (!cJSON_IsBool(j))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: expected a boolean, got %s", s->path,
                        s->prefix, key, g3_json_type_name(j));
    *out = cJSON_IsTrue(j);
    return GEMMA3_OK;
}

/* A softcap: null/absent = none (0), else a positive number. */
static int get_softcap(const scope *s, const char *key, float *out) {
    *out = 0.0f;
    return item(s, key) ? get_positive(s, key, out) : GEMMA3_OK;
}

/* eos_token_id: an int or a list of ints. */
static int get_ids(const scope *s, const char *key, int *ids, int *n) {
    const cJSON *j = item(s, key);
    if (!j) return GEMMA3_OK;
    if (json_is_int(j)) {
        if (j->valuedouble < 0)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: %g is negative", s->path, s->prefix,
                            key, j->valuedouble);
        ids[0] = (int)j->valuedouble;
        *n = 1;
        return GEMMA3_OK;
    }
    if (!cJSON_IsArray(j))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: expected an integer or a list, got %s",
                        s->path, s->prefix, key, g3_json_type_name(j));
    int count = 0;
    for (const cJSON *x = j->child; x; x = x->next) {
        if (!json_is_int(x) || x->valuedouble < 0)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s[%d]: expected a non-negative integer",
                            s->path, s->prefix, key, count);
        if (count == G3_MAX_EOS)
            return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %s%s: more than %d ids", s->path,
                            s->prefix, key, G3_MAX_EOS);
        ids[count++] = (int)x->valuedouble;
    }
    if (count == 0)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: empty list", s->path, s->prefix, key);
    *n = count;
    return GEMMA3_OK;
}

/* A rope type string ("rope_type" or the older "type"): default -> factor 1, linear -> factor
 * from the object. Anything else (yarn, dynamic, llama3 ...) is refused. */
static int parse_rope_type(const scope *s, const char *what, float *factor) {
    const cJSON *type = item(s, "rope_type");
    const char *type_key = "rope_type";
    if (!type) {
        type = item(s, "type");
        type_key = "type";
    }
    const char *t = "default";
    if (type) {
        if (!cJSON_IsString(type))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s.%s: expected a string, got %s", s->path,
                            what, type_key, g3_json_type_name(type));
        t = type->valuestring;
    }
    if (strcmp(t, "default") == 0) {
        *factor = 1.0f;
        return GEMMA3_OK;
    }
    if (strcmp(t, "linear") != 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: %s.%s: '%s' is not supported (only default and linear)", s->path,
                        what, type_key, t);
    const cJSON *f = item(s, "factor");
    if (!f)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s.factor: required for linear rope scaling",
                        s->path, what);
    if (!cJSON_IsNumber(f) || !(f->valuedouble > 0) || !isfinite(f->valuedouble))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s.factor: expected a positive number", s->path,
                        what);
    *factor = (float)f->valuedouble;
    return GEMMA3_OK;
}

/* One entry of the new rope_parameters format: {rope_type, rope_theta, factor?}. */
static int parse_rope_entry(const scope *tc, const cJSON *e, const char *what, float *theta,
                            float *factor) {
    if (!cJSON_IsObject(e))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: expected an object, got %s", tc->path, what,
                        g3_json_type_name(e));
    scope s = {e, tc->path, ""};
    char key[96];
    snprintf(key, sizeof key, "%s.", what);
    s.prefix = key;
    int rc = get_positive(&s, "rope_theta", theta);
    if (rc == GEMMA3_OK) rc = parse_rope_type(&s, what, factor);
    return rc;
}

/* RoPE for both layer types, old or new format (docs/forward-pass.md §4 and §6). */
static int parse_rope(const scope *s, g3_config *c) {
    c->rope_theta_full = 1e6f;
    c->rope_theta_sliding = 1e4f;
    c->rope_factor_full = c->rope_factor_sliding = 1.0f;
    int rc;
    if ((rc = get_positive(s, "rope_theta", &c->rope_theta_full)) != GEMMA3_OK) return rc;
    if ((rc = get_positive(s, "rope_local_base_freq", &c->rope_theta_sliding)) != GEMMA3_OK)
        return rc;
    char what[64];
    const cJSON *params = item(s, "rope_parameters");
    if (params) {
        snprintf(what, sizeof what, "%srope_parameters", s->prefix);
        if (!cJSON_IsObject(params))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: expected an object, got %s", s->path, what,
                            g3_json_type_name(params));
        const cJSON *full = cJSON_GetObjectItemCaseSensitive(params, "full_attention");
        const cJSON *slid = cJSON_GetObjectItemCaseSensitive(params, "sliding_attention");
        if (!full && !slid) /* a single flat entry: it describes the global layers */
            return parse_rope_entry(s, params, what, &c->rope_theta_full, &c->rope_factor_full);
        if (full) {
            snprintf(what, sizeof what, "%srope_parameters.full_attention", s->prefix);
            rc = parse_rope_entry(s, full, what, &c->rope_theta_full, &c->rope_factor_full);
            if (rc != GEMMA3_OK) return rc;
        }
        if (slid) {
            snprintf(what, sizeof what, "%srope_parameters.sliding_attention", s->prefix);
            rc = parse_rope_entry(s, slid, what, &c->rope_theta_sliding, &c->rope_factor_sliding);
            if (rc != GEMMA3_OK) return rc;
        }
        return GEMMA3_OK;
    }
    const cJSON *scaling = item(s, "rope_scaling"); /* old format: global layers only */
    if (!scaling) return GEMMA3_OK;
    snprintf(what, sizeof what, "%srope_scaling", s->prefix);
    if (!cJSON_IsObject(scaling))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: expected an object or null, got %s", s->path,
                        what, g3_json_type_name(scaling));
    scope sc = {scaling, s->path, ""};
    return parse_rope_type(&sc, what, &c->rope_factor_full);
}

static int parse_layer_types(const scope *s, g3_config *c) {
    const cJSON *lt = item(s, "layer_types");
    if (lt) {
        if (!cJSON_IsArray(lt))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %slayer_types: expected a list, got %s",
                            s->path, s->prefix, g3_json_type_name(lt));
        int n = cJSON_GetArraySize(lt);
        if (n != c->n_layers)
            return g3_error(GEMMA3_ERR_FORMAT,
                            "%s: %slayer_types: %d entries but num_hidden_layers is %d", s->path,
                            s->prefix, n, c->n_layers);
        int i = 0;
        for (const cJSON *x = lt->child; x; x = x->next, i++) {
            if (cJSON_IsString(x) && strcmp(x->valuestring, "sliding_attention") == 0)
                c->layer_types[i] = G3_LAYER_SLIDING;
            else if (cJSON_IsString(x) && strcmp(x->valuestring, "full_attention") == 0)
                c->layer_types[i] = G3_LAYER_FULL;
            else
                return g3_error(GEMMA3_ERR_UNSUPPORTED,
                                "%s: %slayer_types[%d]: '%s' is not sliding_attention or "
                                "full_attention",
                                s->path, s->prefix, i,
                                cJSON_IsString(x) ? x->valuestring : g3_json_type_name(x));
        }
        return GEMMA3_OK;
    }
    int pattern = 6;
    const char *key = item(s, "sliding_window_pattern") ? "sliding_window_pattern"
                                                        : "_sliding_window_pattern";
    int rc = get_size(s, key, 0, INT_MAX, &pattern);
    if (rc != GEMMA3_OK) return rc;
    for (int i = 0; i < c->n_layers; i++)
        c->layer_types[i] = ((i + 1) % pattern == 0) ? G3_LAYER_FULL : G3_LAYER_SLIDING;
    return GEMMA3_OK;
}

/* Refuses a string-valued key whose value the engine does not implement. */
static int require_string(const scope *s, const char *key, const char *want) {
    const cJSON *j = item(s, key);
    if (!j) return GEMMA3_OK;
    if (!cJSON_IsString(j))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s%s: expected a string, got %s", s->path,
                        s->prefix, key, g3_json_type_name(j));
    if (strcmp(j->valuestring, want) != 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %s%s: '%s' is not supported (only %s)",
                        s->path, s->prefix, key, j->valuestring, want);
    return GEMMA3_OK;
}

static int refuse_true(const scope *s, const char *key) {
    int v = 0;
    int rc = get_bool(s, key, &v);
    if (rc == GEMMA3_OK && v)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %s%s: true is not supported", s->path,
                        s->prefix, key);
    return rc;
}

/* model_type / architectures decide the layout; both are optional, but when present must be
 * Gemma 3's. */
static int detect_layout(const cJSON *root, const char *path, g3_config *c, const cJSON **text) {
    scope top = {root, path, ""};
    const cJSON *mt = item(&top, "model_type");
    const cJSON *arch = item(&top, "architectures");
    const cJSON *tc = item(&top, "text_config");
    const char *arch0 = NULL;
    if (mt && !cJSON_IsString(mt))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: model_type: expected a string, got %s", path,
                        g3_json_type_name(mt));
    if (mt && strcmp(mt->valuestring, "gemma3") != 0 && strcmp(mt->valuestring, "gemma3_text") != 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: model_type: '%s' is not supported (gemma3 or gemma3_text)", path,
                        mt->valuestring);
    if (arch) {
        if (!cJSON_IsArray(arch) || !cJSON_IsString(arch->child))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: architectures: expected a list of strings",
                            path);
        arch0 = arch->child->valuestring;
        if (strcmp(arch0, "Gemma3ForCausalLM") != 0 &&
            strcmp(arch0, "Gemma3ForConditionalGeneration") != 0)
            return g3_error(GEMMA3_ERR_UNSUPPORTED,
                            "%s: architectures: '%s' is not supported (Gemma3ForCausalLM or "
                            "Gemma3ForConditionalGeneration)",
                            path, arch0);
    }
    c->multimodal = (mt && strcmp(mt->valuestring, "gemma3") == 0) ||
                    (arch0 && strcmp(arch0, "Gemma3ForConditionalGeneration") == 0) ||
                    (!mt && !arch0 && tc);
    if (c->multimodal) {
        if (!tc)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: text_config: required key missing", path);
        if (!cJSON_IsObject(tc))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: text_config: expected an object, got %s", path,
                            g3_json_type_name(tc));
        *text = tc;
    } else {
        *text = root;
    }
    snprintf(c->architecture, sizeof c->architecture, "%s",
             arch0 ? arch0 : c->multimodal ? "Gemma3ForConditionalGeneration" : "Gemma3ForCausalLM");
    return GEMMA3_OK;
}

float g3_rope_inv_freq(const g3_config *c, int full, int i) {
    float theta = full ? c->rope_theta_full : c->rope_theta_sliding;
    float factor = full ? c->rope_factor_full : c->rope_factor_sliding;
    float e = (float)(2 * i) / (float)c->head_dim;
    float base_pow = (float)pow((double)theta, (double)e);
    return (1.0f / base_pow) / factor;
}

int g3_kv_slots(const g3_config *c, int layer, int n_ctx, int n_swa_extra) {
    if (c->layer_types[layer] == G3_LAYER_SLIDING && c->sliding_window + n_swa_extra < n_ctx)
        return c->sliding_window + n_swa_extra;
    return n_ctx;
}

uint64_t g3_kv_bytes(const g3_config *c, int n_ctx, int n_swa_extra, size_t elem_bytes) {
    uint64_t row = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim * elem_bytes;
    uint64_t bytes = 0;
    for (int l = 0; l < c->n_layers; l++) /* K and V, each buffer cache-line aligned */
        bytes += 2 * (((uint64_t)g3_kv_slots(c, l, n_ctx, n_swa_extra) * row + 63) & ~(uint64_t)63);
    return bytes;
}

/* The constants the forward pass derives from the config must be finite numbers: a factor or
 * theta that is representable as a double but not as the float the model computes in (1e-300
 * becomes 0, 1e300 infinity) would otherwise give NaN logits with exit 0. Checked here, once,
 * in the precision the forward pass uses: every RoPE frequency and the largest angle it forms
 * (max_position_embeddings - 1 times the frequency), and the attention scale. */
static int check_derived(const scope *s, const g3_config *c) {
    static const char *const type_key[2] = {"rope_local_base_freq / sliding_attention",
                                            "rope_theta / rope_scaling / full_attention"};
    for (int full = 0; full < 2; full++) {
        float factor = full ? c->rope_factor_full : c->rope_factor_sliding;
        if (!(factor > 0.0f) || !isfinite(factor))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: the RoPE scaling factor %g is not a positive "
                            "finite float", s->path, type_key[full], (double)factor);
        for (int i = 0; i < c->head_dim / 2; i++) {
            float f = g3_rope_inv_freq(c, full, i);
            float angle = (float)(c->max_position_embeddings - 1) * f;
            if (!isfinite(f) || !isfinite(angle))
                return g3_error(GEMMA3_ERR_FORMAT,
                                "%s: %s: RoPE frequency %d is %g (angle %g at position %d): not "
                                "finite in float", s->path, type_key[full], i, (double)f,
                                (double)angle, c->max_position_embeddings - 1);
        }
    }
    float scale = 1.0f / sqrtf(c->query_pre_attn_scalar);
    if (!isfinite(scale) || !(scale > 0.0f))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %squery_pre_attn_scalar: %g gives the attention "
                        "scale %g, not a positive finite float", s->path, s->prefix,
                        (double)c->query_pre_attn_scalar, (double)scale);
    return GEMMA3_OK;
}

/* Token ids the config names must be rows of the embedding. */
static int check_ids(const scope *s, const g3_config *c) {
    const char *where = c->multimodal ? "" : s->prefix;
    if (c->bos_id < 0 || c->bos_id >= c->vocab_size)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %sbos_token_id: %d is not in [0, vocab_size %d)",
                        s->path, where, c->bos_id, c->vocab_size);
    if (c->pad_id < 0 || c->pad_id >= c->vocab_size)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %spad_token_id: %d is not in [0, vocab_size %d)",
                        s->path, where, c->pad_id, c->vocab_size);
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] >= c->vocab_size)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %seos_token_id: %d is not in [0, vocab_size %d)",
                            s->path, where, c->eos_ids[i], c->vocab_size);
    return GEMMA3_OK;
}

static int parse_root(const cJSON *root, const char *path, g3_config *c) {
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: expected a JSON object, got %s", path,
                        g3_json_type_name(root));
    const cJSON *text = NULL;
    int rc = detect_layout(root, path, c, &text);
    if (rc != GEMMA3_OK) return rc;
    scope s = {text, path, c->multimodal ? "text_config." : ""};
    scope top = {root, path, ""};

    /* Gemma3TextConfig defaults (docs/forward-pass.md §6). */
    c->vocab_size = 262208;
    c->n_heads = 8;
    c->n_kv_heads = 4;
    c->head_dim = 256;
    c->query_pre_attn_scalar = 256.0f;
    c->sliding_window = 4096;
    c->max_position_embeddings = 131072;
    c->rms_norm_eps = 1e-6f;
    c->tie_word_embeddings = 1;
    c->bos_id = 2;
    c->pad_id = 0;
    c->n_eos = 1;
    c->eos_ids[0] = 1;

    if ((rc = get_size(&s, "hidden_size", 1, 1 << 20, &c->hidden_size)) ||
        (rc = get_size(&s, "intermediate_size", 1, 1 << 22, &c->intermediate_size)) ||
        (rc = get_size(&s, "num_hidden_layers", 1, INT_MAX, &c->n_layers)) ||
        (rc = get_size(&s, "vocab_size", 0, 1 << 24, &c->vocab_size)) ||
        (rc = get_size(&s, "num_attention_heads", 0, 1024, &c->n_heads)) ||
        (rc = get_size(&s, "num_key_value_heads", 0, 1024, &c->n_kv_heads)) ||
        (rc = get_size(&s, "head_dim", 0, 1 << 16, &c->head_dim)) ||
        (rc = get_size(&s, "sliding_window", 0, INT_MAX, &c->sliding_window)) ||
        (rc = get_size(&s, "max_position_embeddings", 0, INT_MAX, &c->max_position_embeddings)) ||
        (rc = get_positive(&s, "query_pre_attn_scalar", &c->query_pre_attn_scalar)) ||
        (rc = get_positive(&s, "rms_norm_eps", &c->rms_norm_eps)) ||
        (rc = get_softcap(&s, "attn_logit_softcapping", &c->attn_softcap)) ||
        (rc = get_softcap(&s, "final_logit_softcapping", &c->final_softcap)))
        return rc;
    /* tie_word_embeddings: HF's composite config keeps it at the top level. */
    if ((rc = get_bool(&top, "tie_word_embeddings", &c->tie_word_embeddings)) ||
        (rc = get_bool(&s, "tie_word_embeddings", &c->tie_word_embeddings)))
        return rc;
    /* Token ids: text_config's, overridden by the multimodal top level where it has them (as
     * HF derives the generation config from the top-level config first). */
    if (c->multimodal &&
        ((rc = get_int(&s, "bos_token_id", 0, &c->bos_id)) ||
         (rc = get_int(&s, "pad_token_id", 0, &c->pad_id)) ||
         (rc = get_ids(&s, "eos_token_id", c->eos_ids, &c->n_eos))))
        return rc;
    if ((rc = get_int(&top, "bos_token_id", 0, &c->bos_id)) ||
        (rc = get_int(&top, "pad_token_id", 0, &c->pad_id)) ||
        (rc = get_ids(&top, "eos_token_id", c->eos_ids, &c->n_eos)))
        return rc;

    if (c->n_layers > G3_MAX_LAYERS)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %snum_hidden_layers: %d exceeds %d", path,
                        s.prefix, c->n_layers, G3_MAX_LAYERS);
    if (c->n_heads % c->n_kv_heads != 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: %snum_attention_heads: %d is not a multiple of num_key_value_heads %d",
                        path, s.prefix, c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2 != 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %shead_dim: %d is odd (RoPE needs pairs)",
                        path, s.prefix, c->head_dim);
    if ((rc = require_string(&s, "hidden_activation", "gelu_pytorch_tanh")) ||
        (rc = require_string(&s, "hidden_act", "gelu_pytorch_tanh")) ||
        (rc = refuse_true(&s, "attention_bias")) ||
        (rc = refuse_true(&s, "use_bidirectional_attention")) ||
        (rc = parse_rope(&s, c)) || (rc = parse_layer_types(&s, c)) ||
        (rc = check_ids(&s, c)) || (rc = check_derived(&s, c)))
        return rc;
    return GEMMA3_OK;
}

int g3_config_check(const g3_config *c, const char *path) {
    scope s = {NULL, path, ""};
    if (c->n_layers > G3_MAX_LAYERS)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %d layers exceed %d", path, c->n_layers, G3_MAX_LAYERS);
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0 || c->head_dim % 2 != 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %d heads, %d KV heads of %d dimensions: heads "
                        "must be a multiple of KV heads, the dimension even", path, c->n_heads,
                        c->n_kv_heads, c->head_dim);
    int rc = check_ids(&s, c);
    return rc == GEMMA3_OK ? check_derived(&s, c) : rc;
}

int g3_config_parse(const char *json, size_t len, const char *path, g3_config *cfg) {
    cJSON *root;
    int parsed = g3_json_parse(json, len, path, &root);
    if (parsed != GEMMA3_OK) {
        memset(cfg, 0, sizeof *cfg);
        return parsed;
    }
    int rc = parse_root(root, path, cfg);
    cJSON_Delete(root);
    return rc;
}

int g3_config_load(const char *path, g3_config *cfg) {
    char *text;
    size_t len;
    int rc = g3_read_file_ex(path, G3_JSON_SIDE_MAX, 1, &text, &len);
    if (rc != GEMMA3_OK) return rc;
    rc = g3_config_parse(text, len, path, cfg);
    free(text);
    return rc;
}
