/* sampling/descriptors.c - the samplers as users name and set them: one descriptor each
 * (sampling/samplers.h), and what walks them: names and letters, defaults, the range table,
 * the checks of a params struct, generation_config.json. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampling/samplers.h"
#include "util.h"

/* ================================ the descriptors ============================================ */

#define PARAM(field, is_int, min, max, def, hf_key, flags, help) \
    {#field, offsetof(gemma3_sampler_params, field), is_int, min, max, def, hf_key, flags, help}
/* Bounds that keep every value meaningful; "off" values sit inside them (top_k 0, typical_p 1,
 * top_n_sigma -1, repeat_penalty 1). The flags are llama.cpp's. */
static const gemma3_param_range penalties_params[] = {
    PARAM(repeat_penalty, 0, 0.01, 100, 1, "repetition_penalty", "--repeat-penalty",
          "penalise repeated tokens, 1 = off"),
    PARAM(repeat_last_n, 1, -1, INT_MAX, 64, NULL, "--repeat-last-n",
          "tokens penalised, 0 = off, -1 = context"),
    PARAM(frequency_penalty, 0, -2, 2, 0, NULL, "--frequency-penalty",
          "subtract N * count, 0 = off"),
    PARAM(presence_penalty, 0, -2, 2, 0, NULL, "--presence-penalty",
          "subtract N once if present, 0 = off"),
};
static const gemma3_param_range dry_params[] = {
    PARAM(dry_multiplier, 0, 0, 100, 0, NULL, "--dry-multiplier",
          "DRY repetition penalty strength, 0 = off"),
    PARAM(dry_base, 0, 0, 1000, 1.75, NULL, "--dry-base", "DRY exponential base, < 1 = off"),
    PARAM(dry_allowed_length, 1, 0, 65536, 2, NULL, "--dry-allowed-length",
          "repeats this long go unpenalised"),
    PARAM(dry_penalty_last_n, 1, -1, INT_MAX, -1, NULL, "--dry-penalty-last-n",
          "DRY window, 0 = off, -1 = context"),
};
static const gemma3_param_range top_n_sigma_params[] = {
    PARAM(top_n_sigma, 0, -1, 100, -1, NULL, "--top-nsigma, --top-n-sigma",
          "drop logits below max - n*sigma, -1 = off"),
};
/* Gemma 3's generation_config.json: T 1, top-k 64, top-p 0.95 */
static const gemma3_param_range top_k_params[] = {
    PARAM(top_k, 1, 0, INT_MAX, 64, "top_k", "--top-k", "keep the k most likely tokens, 0 = off"),
};
static const gemma3_param_range typical_params[] = {
    PARAM(typical_p, 0, 0, INFINITY, 1, NULL, "--typical, --typical-p",
          "locally typical sampling, 1 = off"),
};
static const gemma3_param_range top_p_params[] = {
    PARAM(top_p, 0, 0, 1, 0.95, "top_p", "--top-p", "smallest set with mass >= p, 1 = off"),
};
static const gemma3_param_range min_p_params[] = {
    PARAM(min_p, 0, 0, INFINITY, 0, "min_p", "--min-p", "drop p < min_p * p_max, 0 = off"),
};
static const gemma3_param_range xtc_params[] = {
    PARAM(xtc_probability, 0, 0, 1, 0, NULL, "--xtc-probability",
          "chance of excluding the top choices, 0 = off"),
    PARAM(xtc_threshold, 0, 0, 1, 0.10, NULL, "--xtc-threshold",
          "XTC probability threshold, > 0.5 = off"),
};
static const gemma3_param_range temperature_params[] = {
    PARAM(temperature, 0, 0, 100, 1, "temperature", "--temp, --temperature",
          "temperature, 0 = greedy"),
    PARAM(dynatemp_range, 0, 0, 100, 0, NULL, "--dynatemp-range",
          "dynamic temperature T +- N by entropy, 0 = off"),
    PARAM(dynatemp_exponent, 0, 0, 100, 1, NULL, "--dynatemp-exp",
          "dynamic temperature exponent"),
};
static const gemma3_param_range epsilon_params[] = {
    PARAM(epsilon_cutoff, 0, 0, 1, 0, "epsilon_cutoff", "--epsilon, --epsilon-cutoff",
          "drop p < epsilon, 0 = off"),
};
static const gemma3_param_range eta_params[] = {
    PARAM(eta_cutoff, 0, 0, 1, 0, "eta_cutoff", "--eta, --eta-cutoff",
          "drop p < min(eta, sqrt(eta) e^-entropy), 0 = off"),
};
/* Not one sampler's: the floor several keep, mirostat (which replaces the chain), the window. */
static const gemma3_param_range shared_params[] = {
    PARAM(min_keep, 1, 0, INT_MAX, 0, NULL, NULL, NULL),
    PARAM(mirostat, 1, 0, 2, 0, NULL, "--mirostat",
          "0 off, 1 mirostat, 2 mirostat 2.0 (replaces the chain)"),
    PARAM(mirostat_tau, 0, 0, 100, 5, NULL, "--mirostat-ent", "mirostat target entropy tau"),
    PARAM(mirostat_eta, 0, 0, 1, 0.1, NULL, "--mirostat-lr", "mirostat learning rate eta"),
    PARAM(n_ctx, 1, 0, INT_MAX, 0, NULL, NULL, NULL),
};
#undef PARAM

static int penalties_active(const gemma3_sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
           p->presence_penalty != 0.0f;
}
static int dry_active(const gemma3_sampler_params *p) { return p->dry_multiplier != 0.0f; }
static int top_n_sigma_active(const gemma3_sampler_params *p) { return p->top_n_sigma > 0.0f; }
static int top_k_active(const gemma3_sampler_params *p) { return p->top_k > 0; }
static int typical_active(const gemma3_sampler_params *p) { return p->typical_p < 1.0f; }
static int top_p_active(const gemma3_sampler_params *p) { return p->top_p < 1.0f; }
static int min_p_active(const gemma3_sampler_params *p) { return p->min_p > 0.0f; }
static int xtc_active(const gemma3_sampler_params *p) {
    return p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f;
}
static int temperature_active(const gemma3_sampler_params *p) {
    return p->temperature != 1.0f || p->dynatemp_range > 0.0f;
}
static int epsilon_active(const gemma3_sampler_params *p) { return p->epsilon_cutoff > 0.0f; }
static int eta_active(const gemma3_sampler_params *p) { return p->eta_cutoff > 0.0f; }

#define ALIASES(...) (const char *const[]){__VA_ARGS__, NULL}
#define PARAMS(a) (int)(sizeof a / sizeof a[0]), a
/* llama.cpp's canonical names plus the aliases its --samplers accepts. */
const struct g3_sampler_desc g3_samplers[GEMMA3_SAMPLER_N_TYPES] = {
    [GEMMA3_SAMPLER_PENALTIES] = {{GEMMA3_SAMPLER_PENALTIES, 'e', "penalties", ALIASES(NULL),
                                   "repeat, frequency and presence penalties",
                                   PARAMS(penalties_params)},
                                  penalties_active, G3_RUNS_WHEN_GREEDY, g3_apply_penalties},
    [GEMMA3_SAMPLER_DRY] = {{GEMMA3_SAMPLER_DRY, 'd', "dry", ALIASES(NULL),
                             "DRY: penalise continuing a repeated sequence", PARAMS(dry_params)},
                            dry_active, G3_RUNS_WHEN_GREEDY, g3_apply_dry},
    [GEMMA3_SAMPLER_TOP_N_SIGMA] = {{GEMMA3_SAMPLER_TOP_N_SIGMA, 's', "top_n_sigma",
                                     ALIASES("top-n-sigma"), "drop logits below max - n sigma",
                                     PARAMS(top_n_sigma_params)},
                                    top_n_sigma_active, G3_NEEDS_CHECKED, g3_apply_top_n_sigma},
    [GEMMA3_SAMPLER_TOP_K] = {{GEMMA3_SAMPLER_TOP_K, 'k', "top_k", ALIASES("top-k"),
                               "keep the k most likely tokens", PARAMS(top_k_params)},
                              top_k_active, 0, g3_apply_top_k},
    [GEMMA3_SAMPLER_TYPICAL_P] = {{GEMMA3_SAMPLER_TYPICAL_P, 'y', "typ_p",
                                   ALIASES("typical_p", "typical-p", "typ-p", "typ", "typical"),
                                   "locally typical sampling", PARAMS(typical_params)},
                                  typical_active, G3_NEEDS_CHECKED, g3_apply_typical},
    [GEMMA3_SAMPLER_TOP_P] = {{GEMMA3_SAMPLER_TOP_P, 'p', "top_p", ALIASES("top-p", "nucleus"),
                               "smallest set with mass >= p", PARAMS(top_p_params)},
                              top_p_active, 0, g3_apply_top_p},
    [GEMMA3_SAMPLER_MIN_P] = {{GEMMA3_SAMPLER_MIN_P, 'm', "min_p", ALIASES("min-p"),
                               "drop p < min_p p_max", PARAMS(min_p_params)},
                              min_p_active, G3_NEEDS_CHECKED, g3_apply_min_p},
    [GEMMA3_SAMPLER_XTC] = {{GEMMA3_SAMPLER_XTC, 'x', "xtc", ALIASES(NULL),
                             "exclude the top choices, at random", PARAMS(xtc_params)},
                            xtc_active, G3_NEEDS_CHECKED, g3_apply_xtc},
    [GEMMA3_SAMPLER_TEMPERATURE] = {{GEMMA3_SAMPLER_TEMPERATURE, 't', "temperature",
                                     ALIASES("temp"), "temperature, with dynamic temperature",
                                     PARAMS(temperature_params)},
                                    temperature_active, 0, g3_apply_temperature},
    [GEMMA3_SAMPLER_EPSILON] = {{GEMMA3_SAMPLER_EPSILON, 'c', "epsilon_cutoff",
                                 ALIASES("epsilon", "epsilon-cutoff"), "drop p < epsilon",
                                 PARAMS(epsilon_params)},
                                epsilon_active, G3_NEEDS_CHECKED, g3_apply_epsilon},
    [GEMMA3_SAMPLER_ETA] = {{GEMMA3_SAMPLER_ETA, 'n', "eta_cutoff", ALIASES("eta", "eta-cutoff"),
                             "drop p < min(eta, sqrt(eta) e^-H)", PARAMS(eta_params)},
                            eta_active, G3_NEEDS_CHECKED, g3_apply_eta},
};
#undef PARAMS
#undef ALIASES

const gemma3_sampler_info *gemma3_sampler_info_get(int type) {
    return type >= 0 && type < GEMMA3_SAMPLER_N_TYPES ? &g3_samplers[type].info : NULL;
}

const char *gemma3_sampler_type_name(int type) {
    return type >= 0 && type < GEMMA3_SAMPLER_N_TYPES ? g3_samplers[type].info.name : "?";
}

/* ================================ names and letters ========================================== */

/* "e, d, ..." or "penalties;dry;..." into buf, for messages. */
static const char *known_list(char *buf, size_t size, int letters) {
    size_t len = 0;
    buf[0] = '\0';
    for (int t = 0; t < GEMMA3_SAMPLER_N_TYPES && len < size; t++) {
        const gemma3_sampler_info *in = &g3_samplers[t].info;
        int k = letters ? snprintf(buf + len, size - len, "%c", in->letter)
                        : snprintf(buf + len, size - len, "%s%s", t ? ";" : "", in->name);
        len += k > 0 ? (size_t)k : 0;
    }
    return buf;
}

static int type_from_letter(char c) {
    for (int t = 0; t < GEMMA3_SAMPLER_N_TYPES; t++)
        if (g3_samplers[t].info.letter == c) return t;
    return -1;
}

static int type_from_name(const char *name, size_t len) {
    for (int t = 0; t < GEMMA3_SAMPLER_N_TYPES; t++) {
        const gemma3_sampler_info *in = &g3_samplers[t].info;
        if (strlen(in->name) == len && memcmp(in->name, name, len) == 0) return t;
        for (const char *const *a = in->aliases; *a; a++)
            if (strlen(*a) == len && memcmp(*a, name, len) == 0) return t;
    }
    return -1;
}

int gemma3_sampler_chain_from_seq(const char *letters, gemma3_sampler_params *params) {
    if (!letters || !params) return g3_error(GEMMA3_ERR_ARG, "sampling-seq: NULL argument");
    if (strcmp(letters, "llama.cpp") == 0 || strcmp(letters, "llama") == 0)
        letters = GEMMA3_SAMPLER_SEQ_LLAMA;
    else if (strcmp(letters, "default") == 0)
        letters = GEMMA3_SAMPLER_SEQ_DEFAULT;
    int n = 0;
    enum gemma3_sampler_type types[GEMMA3_SAMPLER_MAX_CHAIN];
    char known[64];
    for (const char *c = letters; *c; c++) {
        int t = type_from_letter(*c);
        if (t < 0)
            return g3_error(GEMMA3_ERR_ARG, "sampling-seq: unknown sampler letter '%c' (known: %s)",
                            *c, known_list(known, sizeof known, 1));
        if (n == GEMMA3_SAMPLER_MAX_CHAIN)
            return g3_error(GEMMA3_ERR_ARG, "sampling-seq: more than %d samplers",
                            GEMMA3_SAMPLER_MAX_CHAIN);
        types[n++] = t;
    }
    params->n_samplers = n;
    memcpy(params->samplers, types, (size_t)n * sizeof *types);
    return GEMMA3_OK;
}

int gemma3_sampler_chain_from_names(const char *names, gemma3_sampler_params *params) {
    if (!names || !params) return g3_error(GEMMA3_ERR_ARG, "samplers: NULL argument");
    if (strcmp(names, "llama.cpp") == 0 || strcmp(names, "llama") == 0 ||
        strcmp(names, "default") == 0)
        return gemma3_sampler_chain_from_seq(names, params);
    int n = 0;
    enum gemma3_sampler_type types[GEMMA3_SAMPLER_MAX_CHAIN];
    char known[256];
    const char *p = names;
    while (*p) {
        size_t len = strcspn(p, ";");
        if (len > 0) {
            int t = type_from_name(p, len);
            if (t < 0)
                return g3_error(GEMMA3_ERR_ARG, "samplers: unknown sampler '%.*s' (known: %s)",
                                (int)len, p, known_list(known, sizeof known, 0));
            if (n == GEMMA3_SAMPLER_MAX_CHAIN)
                return g3_error(GEMMA3_ERR_ARG, "samplers: more than %d samplers",
                                GEMMA3_SAMPLER_MAX_CHAIN);
            types[n++] = t;
        }
        p += len;
        if (*p == ';') p++;
    }
    params->n_samplers = n;
    memcpy(params->samplers, types, (size_t)n * sizeof *types);
    return GEMMA3_OK;
}

/* ================================ parameters ================================================= */

/* Calls f on every parameter with a range: each sampler's, then the shared ones. */
#define FOR_EACH_PARAM(r)                                                                          \
    for (int t_ = 0; t_ <= GEMMA3_SAMPLER_N_TYPES; t_++)                                           \
        for (const gemma3_param_range *r = t_ < GEMMA3_SAMPLER_N_TYPES                             \
                                               ? g3_samplers[t_].info.params                       \
                                               : shared_params,                                    \
                                      *end_ = r + (t_ < GEMMA3_SAMPLER_N_TYPES                     \
                                                       ? g3_samplers[t_].info.n_params             \
                                                       : (int)(sizeof shared_params /              \
                                                               sizeof shared_params[0]));          \
             r < end_; r++)

static void set_field(gemma3_sampler_params *p, const gemma3_param_range *r, double v) {
    char *field = (char *)p + r->offset;
    if (r->is_int) {
        int x = (int)v;
        memcpy(field, &x, sizeof x);
    } else {
        float x = (float)v;
        memcpy(field, &x, sizeof x);
    }
}

gemma3_sampler_params gemma3_sampler_default_params(void) {
    gemma3_sampler_params p;
    memset(&p, 0, sizeof p);
    p.seed = GEMMA3_SEED_RANDOM;
    p.mode = GEMMA3_SAMPLER_MODE_CDF;
    FOR_EACH_PARAM(r) set_field(&p, r, r->def);
    gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_DEFAULT, &p);
    return p;
}

const gemma3_param_range *gemma3_sampler_param_range(size_t offset) {
    FOR_EACH_PARAM(r) if (r->offset == offset) return r;
    return NULL;
}

/* The field's value; a float field as a double, and its bounds as the float a front end stores
 * for them (0.01 is 0.0099999998). */
static double field_value(const gemma3_sampler_params *p, const gemma3_param_range *r,
                          double *min, double *max) {
    const char *field = (const char *)p + r->offset;
    *min = r->min;
    *max = r->max;
    if (r->is_int) {
        int x;
        memcpy(&x, field, sizeof x);
        return x;
    }
    float x;
    memcpy(&x, field, sizeof x);
    *min = (float)*min;
    *max = (float)*max;
    return x;
}

/* A float field must be a finite number (an infinite bound only means "no upper limit"). */
static int check_ranges(const gemma3_sampler_params *p) {
    FOR_EACH_PARAM(r) {
        double min, max, v = field_value(p, r, &min, &max);
        if (!isfinite(v) || v < min || v > max)
            return g3_error(GEMMA3_ERR_ARG, "sampler: %s out of range [%g, %g]", r->name, r->min,
                            r->max);
    }
    return GEMMA3_OK;
}

#define CHECK_RANGE(cond, field, range)                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return g3_error(GEMMA3_ERR_ARG, "sampler: %s out of range (%s)", field, range);        \
    } while (0)

static int check_lists(const gemma3_sampler_params *p, int n_vocab) {
    CHECK_RANGE(p->n_dry_breakers >= 0 && p->n_dry_breakers <= GEMMA3_SAMPLER_MAX_BREAKERS,
                "n_dry_breakers", "[0, 16]");
    for (int b = 0; b < p->n_dry_breakers; b++) {
        CHECK_RANGE(p->dry_breaker_len[b] >= 1 &&
                        p->dry_breaker_len[b] <= GEMMA3_SAMPLER_MAX_BREAKER_LEN,
                    "dry_breaker_len", "[1, 20]");
        for (int j = 0; j < p->dry_breaker_len[b]; j++)
            CHECK_RANGE(p->dry_breakers[b][j] >= 0 && p->dry_breakers[b][j] < n_vocab,
                        "dry_breakers token", "[0, n_vocab)");
    }
    CHECK_RANGE(p->n_logit_bias >= 0 && p->n_logit_bias <= GEMMA3_SAMPLER_MAX_BIAS, "n_logit_bias",
                "[0, 256]");
    for (int i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= n_vocab)
            return g3_error(GEMMA3_ERR_ARG, "sampler: logit bias token %d out of range [0, %d)",
                            (int)p->logit_bias[i].token, n_vocab);
        CHECK_RANGE(!isnan(p->logit_bias[i].bias), "logit bias", "not NaN");
    }
    CHECK_RANGE(p->n_eos >= 0 && p->n_eos <= GEMMA3_SAMPLER_MAX_EOS, "n_eos", "[0, 8]");
    for (int i = 0; i < p->n_eos; i++)
        if (p->eos_ids[i] < 0 || p->eos_ids[i] >= n_vocab)
            return g3_error(GEMMA3_ERR_ARG, "sampler: eos id %d out of range [0, %d)",
                            (int)p->eos_ids[i], n_vocab);
    return GEMMA3_OK;
}

int g3_sampler_validate(const gemma3_sampler_params *p, int n_vocab) {
    int rc = check_ranges(p);
    if (rc != GEMMA3_OK) return rc;
    CHECK_RANGE(p->mode == GEMMA3_SAMPLER_MODE_CDF || p->mode == GEMMA3_SAMPLER_MODE_GUMBEL, "mode",
                "0 cdf, 1 gumbel");
    rc = check_lists(p, n_vocab);
    if (rc != GEMMA3_OK) return rc;
    CHECK_RANGE(p->n_samplers >= 0 && p->n_samplers <= GEMMA3_SAMPLER_MAX_CHAIN, "n_samplers",
                "[0, 16]");
    for (int i = 0; i < p->n_samplers; i++)
        CHECK_RANGE(p->samplers[i] >= 0 && p->samplers[i] < GEMMA3_SAMPLER_N_TYPES, "samplers[]",
                    "a gemma3_sampler_type");
    return GEMMA3_OK;
}

int g3_resolve_last_n(const gemma3_sampler_params *p, int last_n) {
    return last_n < 0 ? (p->n_ctx > 0 ? p->n_ctx : 4096) : last_n;
}

/* ================================ generation_config.json ===================================== */

/* A parameter's value from the file: a number within the parameter's range (an integer for an
 * int field), into p. */
static int hf_value(const char *path, const cJSON *j, const gemma3_param_range *r,
                    gemma3_sampler_params *p) {
    const char *key = r->hf_key;
    if (!cJSON_IsNumber(j))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: expected %s, got %s", path, key,
                        r->is_int ? "an integer" : "a number", g3_json_type_name(j));
    double v = j->valuedouble;
    if (r->is_int && !(v == floor(v) && v >= INT_MIN && v <= INT_MAX))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: expected an integer, got %g", path, key, v);
    if (!r->is_int && !isfinite((float)v))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: %g is not a finite float", path, key, v);
    if (!r->is_int) v = (float)v;
    if (v < r->min || v > r->max)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: %.10g is out of range [%.10g, %.10g]", path,
                        key, v, r->min, r->max);
    set_field(p, r, v);
    return GEMMA3_OK;
}

/* eos_token_id: an id or a list of ids, as many as the sampler holds. */
static int hf_eos(const char *path, const cJSON *j, gemma3_sampler_params *p) {
    const char *key = "eos_token_id";
    int n = 0;
    int32_t ids[GEMMA3_SAMPLER_MAX_EOS];
    if (cJSON_IsNumber(j) || !cJSON_IsArray(j)) {
        if (!cJSON_IsNumber(j))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: expected an integer or a list, got %s",
                            path, key, g3_json_type_name(j));
        if (!(j->valuedouble == floor(j->valuedouble) && j->valuedouble >= 0 &&
              j->valuedouble <= INT_MAX))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: %g is not a token id", path, key,
                            j->valuedouble);
        ids[n++] = (int32_t)j->valuedouble;
    } else {
        for (const cJSON *x = j->child; x; x = x->next, n++) {
            if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
                x->valuedouble < 0 || x->valuedouble > INT_MAX)
                return g3_error(GEMMA3_ERR_FORMAT, "%s: %s[%d]: expected a non-negative integer",
                                path, key, n);
            if (n == GEMMA3_SAMPLER_MAX_EOS)
                return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %s: more than %d ids", path, key,
                                GEMMA3_SAMPLER_MAX_EOS);
            ids[n] = (int32_t)x->valuedouble;
        }
    }
    memcpy(p->eos_ids, ids, (size_t)n * sizeof *ids);
    p->n_eos = n;
    return GEMMA3_OK;
}

static int hf_read(const char *path, const cJSON *root, gemma3_sampler_params *p,
                   int (*keep)(size_t offset, void *ctx), void *ctx) {
    if (!cJSON_IsObject(root))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: expected a JSON object, got %s", path,
                        g3_json_type_name(root));
    FOR_EACH_PARAM(r) {
        const cJSON *j = r->hf_key ? cJSON_GetObjectItemCaseSensitive(root, r->hf_key) : NULL;
        if (!j || cJSON_IsNull(j) || (keep && keep(r->offset, ctx))) continue;
        int rc = hf_value(path, j, r, p);
        if (rc != GEMMA3_OK) return rc;
    }
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (!eos || cJSON_IsNull(eos) || (keep && keep(offsetof(gemma3_sampler_params, eos_ids), ctx)))
        return GEMMA3_OK;
    return hf_eos(path, eos, p);
}

int gemma3_sampler_params_load_hf(const char *path, gemma3_sampler_params *params,
                                  int (*keep)(size_t offset, void *ctx), void *ctx) {
    if (!path || !params) return g3_error(GEMMA3_ERR_ARG, "generation config: NULL argument");
    if (access(path, F_OK) != 0 && errno == ENOENT) return GEMMA3_OK; /* a loop is ELOOP */
    /* a file of the checkpoint: a FIFO or a device is refused at once, never waited on */
    char *text;
    size_t len;
    int rc = g3_read_file_ex(path, G3_JSON_SIDE_MAX, 1, &text, &len);
    if (rc != GEMMA3_OK) return rc;
    cJSON *root;
    rc = g3_json_parse(text, len, path, &root);
    free(text);
    if (rc != GEMMA3_OK) return rc;
    gemma3_sampler_params p = *params; /* untouched unless the whole file reads */
    rc = hf_read(path, root, &p, keep, ctx);
    cJSON_Delete(root);
    if (rc == GEMMA3_OK) *params = p;
    return rc;
}
