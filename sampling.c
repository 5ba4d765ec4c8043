/* sampling.c - logits in, token id out: penalties, DRY, temperature, top-k/top-p/min-p,
 * typical, top-n-sigma, XTC, mirostat, and an exact final draw (CDF walk or Gumbel-max).
 *
 * The working state of one call is a copy of the logits (by token id) and a list of candidate
 * ids. Each sampler of the chain rewrites logits and/or shrinks the list. Two flags describe the
 * list: `sorted` (in the total order: logit descending, id ascending) and `id_order` (ascending
 * ids). Every sum that feeds a decision (entropy, mean, softmax normaliser) is taken in ascending
 * id order, and every sort uses a total order, so a sampler gives the same answer whatever order
 * the list is in: this is what lets the CDF path (sorting, heap selection) and the Gumbel path
 * (radix selection) keep bit-identical sets (docs/sampling.md §3).
 *
 * Top-p decisions use fixed-point masses q_i = round(exp(l_i - lmax) * 2^40): integer sums are
 * associative, so the heap walk and the radix walk agree on the boundary token exactly. The
 * draw itself uses the true double weights (the two differ by < 2^-40 relative).
 *
 * Choices where llama.cpp and HF transformers differ or leave room, and why we chose as we did
 * (docs/sampling.md §2):
 * - Every token stays in the candidate list, bans (-inf) included, as in llama.cpp; NaN becomes
 *   -inf silently (the library never prints; a caller that wants a warning checks the logits).
 * - min-p compares l_i >= lmax + ln(min_p) in double: one max, no softmax, same set in both paths.
 * - Sort path: top-k uses a size-k heap (O(n log k)), or one O(n) LSD radix sort when k > n/4 and
 *   n > 4096, where the heap would be slower; top-p walks a heap-selected top 256, and a larger
 *   nucleus is found by the Gumbel path's radix selection and only it is sorted. Never an
 *   O(n log n) comparison sort of the vocabulary.
 * - Speed without changing a result (docs/sampling.md §7): the caller's logits are read in place
 *   until a sampler rewrites one; long CDF walks, top-p's fixed-point masses, top-n-sigma's
 *   threshold, mirostat v2's limit and XTC's count start from approximations with proven error
 *   bounds (float, then double) and fall back to the exact computation wherever the bound cannot
 *   settle the answer; the Gumbel draw screens every token with a bound on the noise its random
 *   bits can give; over the whole vocabulary top-p, typical and the CDF walk over what they
 *   keep read one bucketed pass (sampling-rank.h) and sort one bucket or band.
 * - Gumbel path: the count-th largest of 16-way column maxima bounds the top-k threshold, so the
 *   histogram only sees the few tokens that can survive (exact: count values reach the bound).
 * - Greedy (T == 0) skips the truncation samplers and XTC: they cannot change the argmax except
 *   XTC, whose point is randomness.
 * - Mirostat's mu is updated by gemma3_sampler_sample (as llama.cpp does in apply), so re-running
 *   a position reproduces the draw only if mu is restored (reset).
 * - DRY breakers are exact token-id sequences; llama.cpp also matches breakers that overlap token
 *   texts, which needs the tokenizer (the CLI encodes the strings).
 * - Dynamic temperature normalises the entropy by ln N with N counting banned tokens too, as
 *   llama.cpp does (they are in its candidate array). */
#define _POSIX_C_SOURCE 200809L
#include "sampling.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampling-impl.h"
#include "sampling-rank.h"
#include "sampling-select.h"
#include "util.h"

/* ================================ parameters ================================================ */

static const char seq_letters[GEMMA3_SAMPLER_N_TYPES] = {'e', 'd', 's', 'k', 'y',
                                                         'p', 'm', 'x', 't'};
static const char *const type_names[GEMMA3_SAMPLER_N_TYPES] = {
    "penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"};

const char *gemma3_sampler_type_name(int type) {
    return type >= 0 && type < GEMMA3_SAMPLER_N_TYPES ? type_names[type] : "?";
}

int gemma3_sampler_chain_from_seq(const char *letters, gemma3_sampler_params *params) {
    if (!letters || !params) return g3_error(GEMMA3_ERR_ARG, "sampling-seq: NULL argument");
    if (strcmp(letters, "llama.cpp") == 0 || strcmp(letters, "llama") == 0)
        letters = GEMMA3_SAMPLER_SEQ_LLAMA;
    else if (strcmp(letters, "default") == 0)
        letters = GEMMA3_SAMPLER_SEQ_DEFAULT;
    int n = 0;
    enum gemma3_sampler_type types[GEMMA3_SAMPLER_MAX_CHAIN];
    for (const char *c = letters; *c; c++) {
        int t = 0;
        while (t < GEMMA3_SAMPLER_N_TYPES && seq_letters[t] != *c) t++;
        if (t == GEMMA3_SAMPLER_N_TYPES)
            return g3_error(GEMMA3_ERR_ARG,
                            "sampling-seq: unknown sampler letter '%c' (known: edskypmxt)", *c);
        if (n == GEMMA3_SAMPLER_MAX_CHAIN)
            return g3_error(GEMMA3_ERR_ARG, "sampling-seq: more than %d samplers",
                            GEMMA3_SAMPLER_MAX_CHAIN);
        types[n++] = t;
    }
    params->n_samplers = n;
    memcpy(params->samplers, types, (size_t)n * sizeof *types);
    return GEMMA3_OK;
}

/* llama.cpp's canonical names plus the aliases its --samplers accepts. */
static int type_from_name(const char *name, size_t len) {
    static const struct {
        const char *name;
        int type;
    } names[] = {
        {"penalties", GEMMA3_SAMPLER_PENALTIES},
        {"dry", GEMMA3_SAMPLER_DRY},
        {"top_n_sigma", GEMMA3_SAMPLER_TOP_N_SIGMA},
        {"top-n-sigma", GEMMA3_SAMPLER_TOP_N_SIGMA},
        {"top_k", GEMMA3_SAMPLER_TOP_K},
        {"top-k", GEMMA3_SAMPLER_TOP_K},
        {"typ_p", GEMMA3_SAMPLER_TYPICAL_P},
        {"typical_p", GEMMA3_SAMPLER_TYPICAL_P},
        {"typical-p", GEMMA3_SAMPLER_TYPICAL_P},
        {"typ-p", GEMMA3_SAMPLER_TYPICAL_P},
        {"typ", GEMMA3_SAMPLER_TYPICAL_P},
        {"typical", GEMMA3_SAMPLER_TYPICAL_P},
        {"top_p", GEMMA3_SAMPLER_TOP_P},
        {"top-p", GEMMA3_SAMPLER_TOP_P},
        {"nucleus", GEMMA3_SAMPLER_TOP_P},
        {"min_p", GEMMA3_SAMPLER_MIN_P},
        {"min-p", GEMMA3_SAMPLER_MIN_P},
        {"xtc", GEMMA3_SAMPLER_XTC},
        {"temperature", GEMMA3_SAMPLER_TEMPERATURE},
        {"temp", GEMMA3_SAMPLER_TEMPERATURE},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == len && memcmp(names[i].name, name, len) == 0)
            return names[i].type;
    return -1;
}

int gemma3_sampler_chain_from_names(const char *names, gemma3_sampler_params *params) {
    if (!names || !params) return g3_error(GEMMA3_ERR_ARG, "samplers: NULL argument");
    if (strcmp(names, "llama.cpp") == 0 || strcmp(names, "llama") == 0 ||
        strcmp(names, "default") == 0)
        return gemma3_sampler_chain_from_seq(names, params);
    int n = 0;
    enum gemma3_sampler_type types[GEMMA3_SAMPLER_MAX_CHAIN];
    const char *p = names;
    while (*p) {
        size_t len = strcspn(p, ";");
        if (len > 0) {
            int t = type_from_name(p, len);
            if (t < 0)
                return g3_error(GEMMA3_ERR_ARG,
                                "samplers: unknown sampler '%.*s' (known: penalties;dry;"
                                "top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)",
                                (int)len, p);
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

gemma3_sampler_params gemma3_sampler_default_params(void) {
    gemma3_sampler_params p;
    memset(&p, 0, sizeof p);
    p.seed = GEMMA3_SEED_RANDOM;
    p.mode = GEMMA3_SAMPLER_MODE_CDF;
    p.temperature = 1.0f; /* Gemma 3's generation_config.json: T 1, top-k 64, top-p 0.95 */
    p.top_k = 64;
    p.top_p = 0.95f;
    p.min_p = 0.0f;
    p.typical_p = 1.0f;
    p.top_n_sigma = -1.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 2;
    p.dry_penalty_last_n = -1;
    p.xtc_threshold = 0.10f;
    p.dynatemp_exponent = 1.0f;
    p.mirostat_tau = 5.0f;
    p.mirostat_eta = 0.1f;
    gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_DEFAULT, &p);
    return p;
}

#define CHECK_RANGE(cond, field, range)                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return g3_error(GEMMA3_ERR_ARG, "sampler: %s out of range (%s)", field, range);        \
    } while (0)

#define RANGE(field, is_int, min, max) \
    {#field, offsetof(gemma3_sampler_params, field), is_int, min, max}
/* Bounds that keep every value meaningful; "off" values sit inside them (top_k 0, typical_p 1,
 * top_n_sigma -1, repeat_penalty 1). */
static const gemma3_param_range param_ranges[] = {
    RANGE(temperature, 0, 0, 100),
    RANGE(top_k, 1, 0, INT_MAX),
    RANGE(top_p, 0, 0, 1),
    RANGE(min_p, 0, 0, INFINITY),
    RANGE(typical_p, 0, 0, INFINITY),
    RANGE(top_n_sigma, 0, -1, 100),
    RANGE(min_keep, 1, 0, INT_MAX),
    RANGE(repeat_penalty, 0, 0.01, 100),
    RANGE(repeat_last_n, 1, -1, INT_MAX),
    RANGE(frequency_penalty, 0, -2, 2),
    RANGE(presence_penalty, 0, -2, 2),
    RANGE(dry_multiplier, 0, 0, 100),
    RANGE(dry_base, 0, 0, 1000),
    RANGE(dry_allowed_length, 1, 0, 65536),
    RANGE(dry_penalty_last_n, 1, -1, INT_MAX),
    RANGE(xtc_probability, 0, 0, 1),
    RANGE(xtc_threshold, 0, 0, 1),
    RANGE(dynatemp_range, 0, 0, 100),
    RANGE(dynatemp_exponent, 0, 0, 100),
    RANGE(mirostat, 1, 0, 2),
    RANGE(mirostat_tau, 0, 0, 100),
    RANGE(mirostat_eta, 0, 0, 1),
    RANGE(n_ctx, 1, 0, INT_MAX),
};
#undef RANGE

const gemma3_param_range *gemma3_sampler_param_range(size_t offset) {
    for (size_t i = 0; i < sizeof param_ranges / sizeof param_ranges[0]; i++)
        if (param_ranges[i].offset == offset) return &param_ranges[i];
    return NULL;
}

/* A float field must be a finite number (an infinite bound only means "no upper limit"). */
static int check_ranges(const gemma3_sampler_params *p) {
    for (size_t i = 0; i < sizeof param_ranges / sizeof param_ranges[0]; i++) {
        const gemma3_param_range *r = &param_ranges[i];
        const char *field = (const char *)p + r->offset;
        double v, min = r->min, max = r->max;
        if (r->is_int) {
            int x;
            memcpy(&x, field, sizeof x);
            v = x;
        } else { /* bounds as the float a front end stores for them: 0.01 is 0.0099999998 */
            float x;
            memcpy(&x, field, sizeof x);
            v = x;
            min = (float)min;
            max = (float)max;
        }
        if (!isfinite(v) || v < min || v > max)
            return g3_error(GEMMA3_ERR_ARG, "sampler: %s out of range [%g, %g]", r->name, r->min,
                            r->max);
    }
    return GEMMA3_OK;
}

static int validate(const gemma3_sampler_params *p, int n_vocab) {
    int rc = check_ranges(p);
    if (rc != GEMMA3_OK) return rc;
    CHECK_RANGE(p->mode == GEMMA3_SAMPLER_MODE_CDF || p->mode == GEMMA3_SAMPLER_MODE_GUMBEL, "mode",
                "0 cdf, 1 gumbel");
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
    CHECK_RANGE(p->n_samplers >= 0 && p->n_samplers <= GEMMA3_SAMPLER_MAX_CHAIN, "n_samplers",
                "[0, 16]");
    for (int i = 0; i < p->n_samplers; i++)
        CHECK_RANGE(p->samplers[i] >= 0 && p->samplers[i] < GEMMA3_SAMPLER_N_TYPES, "samplers[]",
                    "a gemma3_sampler_type");
    return GEMMA3_OK;
}

/* A last_n of -1 means "the context size"; 0 means off. */
static int resolve_last_n(const gemma3_sampler_params *p, int last_n) {
    return last_n < 0 ? (p->n_ctx > 0 ? p->n_ctx : 4096) : last_n;
}

/* The Gumbel draw that checks on its way (draw_gumbel_checking) screens a block while the next
 * one arrives: an eighth of L2 each (the block, the next, and the hash table's stream share
 * it), 16,384 tokens where L2's size is unknown. Blocks of 4,096 tokens were slower than the
 * check and the screen apart on an Intel Xeon (L2 2 MB), those of 65,536 no slower; on Zen 3
 * (L2 512 KB) blocks of 16,384 are the faster. */
static int check_block_size(void) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    int tokens = l2 > 0 ? (int)(l2 / 8 / (long)sizeof(float)) : 16384;
    return tokens < 4096 ? 4096 : tokens > 65536 ? 65536 : tokens;
}

int gemma3_sampler_init(const gemma3_sampler_params *params, int n_vocab, gemma3_sampler **out) {
    if (!out) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL out pointer");
    *out = NULL;
    if (!params) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL params");
    if (n_vocab < 1) return g3_error(GEMMA3_ERR_ARG, "sampler: n_vocab %d must be >= 1", n_vocab);
    int rc = validate(params, n_vocab);
    if (rc != GEMMA3_OK) return rc;
    gemma3_sampler *s = calloc(1, sizeof *s);
    if (!s) return g3_error(GEMMA3_ERR_NOMEM, "sampler: out of memory");
    s->p = *params;
    s->n_vocab = n_vocab;
    s->seed = params->seed == GEMMA3_SEED_RANDOM ? g3_random_seed() : params->seed;
    s->mu = 2.0f * params->mirostat_tau;
    int rep = resolve_last_n(params, params->repeat_last_n);
    int dry = resolve_last_n(params, params->dry_penalty_last_n);
    s->hist_cap = rep > dry ? rep : dry;
    if (s->hist_cap < 1) s->hist_cap = 1;
    size_t V = (size_t)n_vocab, H = (size_t)s->hist_cap;
    s->hist = g3_alloc_aligned(H * sizeof *s->hist);
    s->touched = g3_alloc_aligned(H * sizeof *s->touched);
    s->dry_ctx = g3_alloc_aligned(H * sizeof *s->dry_ctx);
    s->dry_z = g3_alloc_aligned(H * sizeof *s->dry_z);
    s->own = g3_alloc_aligned(V * sizeof *s->own);
    s->cand = g3_alloc_aligned(V * sizeof *s->cand);
    s->ids_tmp = g3_alloc_aligned(V * sizeof *s->ids_tmp);
    s->ids_tmp2 = g3_alloc_aligned(V * sizeof *s->ids_tmp2);
    s->iota = g3_alloc_aligned(V * sizeof *s->iota);
    s->gumbel_hash = g3_alloc_aligned(V * sizeof *s->gumbel_hash);
    s->keys = g3_alloc_aligned(V * sizeof *s->keys);
    s->keys_tmp = g3_alloc_aligned(V * sizeof *s->keys_tmp);
    s->mass = g3_alloc_aligned(V * sizeof *s->mass);
    s->mass_tmp = g3_alloc_aligned(V * sizeof *s->mass_tmp);
    s->w = g3_alloc_aligned(V * sizeof *s->w);
    s->blocks = g3_alloc_aligned((V / 64 + 1) * sizeof *s->blocks);
    s->gathered = g3_alloc_aligned(V * sizeof *s->gathered);
    s->counts = g3_alloc_aligned(V * sizeof *s->counts);
    s->scored = g3_alloc_aligned(V * sizeof *s->scored);
    s->scored_tmp = g3_alloc_aligned(V * sizeof *s->scored_tmp);
    s->typ_start = g3_alloc_aligned((TYPICAL_BUCKETS + 2) * sizeof *s->typ_start);
    s->typ_fill = g3_alloc_aligned((TYPICAL_BUCKETS + 2) * sizeof *s->typ_fill);
    s->pos_above = g3_alloc_aligned(V * sizeof *s->pos_above);
    s->pos_edge = g3_alloc_aligned(V * sizeof *s->pos_edge);
    s->pos_sub = g3_alloc_aligned(V * sizeof *s->pos_sub);
    s->tie_ids = g3_alloc_aligned(V * sizeof *s->tie_ids);
    s->sel_keys = g3_alloc_aligned(V * sizeof *s->sel_keys);
    s->sel_keys2 = g3_alloc_aligned(V * sizeof *s->sel_keys2);
    s->sel_mass = g3_alloc_aligned(V * sizeof *s->sel_mass);
    s->view_bucket = g3_alloc_aligned(V * sizeof *s->view_bucket);
    if (!s->pos_above || !s->pos_edge || !s->pos_sub || !s->tie_ids || !s->sel_keys ||
        !s->sel_keys2 || !s->sel_mass || !s->view_bucket || !s->hist || !s->touched || !s->dry_ctx || !s->dry_z ||
        !s->own || !s->cand || !s->ids_tmp || !s->ids_tmp2 || !s->iota || !s->gumbel_hash ||
        !s->keys || !s->keys_tmp || !s->mass || !s->mass_tmp || !s->w || !s->blocks ||
        !s->gathered || !s->counts ||
        !s->scored || !s->scored_tmp || !s->typ_start || !s->typ_fill) {
        gemma3_sampler_free(s);
        return g3_error(GEMMA3_ERR_NOMEM, "sampler: out of memory for %d-token buffers", n_vocab);
    }
    for (int i = 0; i < n_vocab; i++) {
        s->iota[i] = i;
        s->gumbel_hash[i] = g3_mix64_first(g3_rng_index_hash(G3_RNG_GUMBEL, (uint32_t)i));
    }
    const int isa = g3_sampling_isa();
    s->gumbel_screen_n = g3_gumbel_screen_n_get(isa);
    s->block_scan = g3_block_scan_get(isa);
    s->mass_round_n = g3_mass_round_n_get(isa);
    s->sigma_sums_n = g3_sigma_sums_n_get(isa);
    s->expf_block_sums = g3_expf_block_sums_get(isa);
    s->expf_weight = g3_expf_weight_get(isa);
    s->exp_rough_sums = g3_exp_rough_sums_get(isa);
    s->exp_coarse_sums = g3_exp_coarse_sums_get(isa);
    s->exp_block_sums = g3_exp_block_sums_get(isa);
    s->rank_view = g3_rank_view_get(isa);
    s->approx_exp_n = g3_approx_exp_n_get(isa);
    for (int b = 0; b < G3_VIEW_BUCKETS - 1; b++) /* libm's exp: within 2^-52 */
        s->view_scale[b] = ldexp(exp(-(double)b / G3_VIEW_PER_NAT), -31);
    s->view_scale[G3_VIEW_BUCKETS - 1] = 0;
    s->copy_check = g3_copy_check_get(isa);
    s->copy_divide = g3_copy_divide_get(isa);
    s->max_n = g3_max_n_get(isa);
    s->check_max = g3_check_max_get(isa);
    s->band_scan = g3_band_scan_get(isa);
    s->check_block = check_block_size();
    *out = s;
    return GEMMA3_OK;
}

void gemma3_sampler_free(gemma3_sampler *s) {
    if (!s) return;
    g3_free_aligned(s->hist);
    g3_free_aligned(s->touched);
    g3_free_aligned(s->dry_ctx);
    g3_free_aligned(s->dry_z);
    g3_free_aligned(s->own);
    g3_free_aligned(s->cand);
    g3_free_aligned(s->ids_tmp);
    g3_free_aligned(s->ids_tmp2);
    g3_free_aligned(s->iota);
    g3_free_aligned(s->gumbel_hash);
    g3_free_aligned(s->keys);
    g3_free_aligned(s->keys_tmp);
    g3_free_aligned(s->mass);
    g3_free_aligned(s->mass_tmp);
    g3_free_aligned(s->w);
    g3_free_aligned(s->blocks);
    g3_free_aligned(s->gathered);
    g3_free_aligned(s->counts);
    g3_free_aligned(s->scored);
    g3_free_aligned(s->scored_tmp);
    g3_free_aligned(s->typ_start);
    g3_free_aligned(s->typ_fill);
    g3_free_aligned(s->pos_above);
    g3_free_aligned(s->pos_edge);
    g3_free_aligned(s->pos_sub);
    g3_free_aligned(s->tie_ids);
    g3_free_aligned(s->sel_keys);
    g3_free_aligned(s->sel_keys2);
    g3_free_aligned(s->sel_mass);
    g3_free_aligned(s->view_bucket);
    free(s);
}

int gemma3_sampler_accept(gemma3_sampler *s, int32_t token) {
    if (!s) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL sampler");
    if (token < 0 || token >= s->n_vocab)
        return g3_error(GEMMA3_ERR_ARG, "sampler: accepted token %d out of range [0, %d)",
                        (int)token, s->n_vocab);
    s->hist[s->hist_head] = token;
    s->hist_head = (s->hist_head + 1) % s->hist_cap;
    if (s->hist_len < s->hist_cap) s->hist_len++;
    return GEMMA3_OK;
}

void gemma3_sampler_reset(gemma3_sampler *s) {
    if (!s) return;
    s->hist_len = s->hist_head = 0;
    s->mu = 2.0f * s->p.mirostat_tau;
}

uint32_t gemma3_sampler_seed(const gemma3_sampler *s) { return s ? s->seed : 0; }
const float *g3_sampler_work_logits(const gemma3_sampler *s) { return s->logits; }
float g3_sampler_mirostat_mu(const gemma3_sampler *s) { return s->mu; }
void g3_sampler_exact_draw_only(gemma3_sampler *s, int on) { s->exact_draw_only = on; }
void g3_sampler_typical_fast(const gemma3_sampler *s, int *sets, int *draws) {
    *sets = s->typ_fast_sets;
    *draws = s->typ_fast_draws;
}
int g3_sampler_typical_by_logit(const gemma3_sampler *s) { return s->typ_by_logit; }
int g3_sampler_typical_fine_close(const gemma3_sampler *s) { return s->typ_fine_close; }
void g3_sampler_typical_pending(const gemma3_sampler *s, int *draws, int *resolved) {
    *draws = s->typ_pending_draws;
    *resolved = s->typ_resolved;
}
int g3_sampler_typical_pending_set(const gemma3_sampler *s, double *center, double *sure,
                                   double *far, double *w_lo, double *w_hi) {
    *center = s->typ.center;
    *sure = s->typ.dist;
    *far = s->typ.far;
    *w_lo = s->typ.w_lo;
    *w_hi = s->typ.w_hi;
    return s->typ.on && s->typ.pending;
}
double g3_sampler_typical_centre_err(const gemma3_sampler *s) { return s->typ.err.centre; }
void g3_sampler_view_open(gemma3_sampler *s, int which) { s->view_open = which; }
int g3_sampler_top_p_mass_sets(const gemma3_sampler *s) { return s->top_p_mass_sets; }
double g3_sampler_typical_mass(const gemma3_sampler *s, int *fine) {
    *fine = s->typ.fine;
    return s->typ.on && !s->typ.pending ? s->typ.mass : -1;
}
int32_t g3_sampler_typical_first(const gemma3_sampler *s) { return s->typ.on ? s->typ.first : -1; }
int g3_sampler_top_p_winner_draws(const gemma3_sampler *s) { return s->top_p_winner_draws; }
int g3_sampler_top_p_coarse_draws(const gemma3_sampler *s) { return s->top_p_coarse_draws; }
int g3_sampler_xtc_winner_draws(const gemma3_sampler *s) { return s->xtc_winner_draws; }
void g3_sampler_skip_rough(gemma3_sampler *s, int on) { s->skip_rough = on; }
void g3_sampler_skip_float_draw(gemma3_sampler *s, int on) { s->skip_float_draw = on; }
void g3_sampler_perturb_float_draw(gemma3_sampler *s, int on) { s->perturb_float_draw = on; }
int g3_sampler_float_tier_draws(const gemma3_sampler *s) { return s->float_tier_draws; }

/* The last n accepted tokens, oldest first, into dst. */
static int history_tail(const gemma3_sampler *s, int n, int32_t *dst) {
    if (n > s->hist_len) n = s->hist_len;
    int start = (s->hist_head - n + s->hist_cap) % s->hist_cap;
    for (int j = 0; j < n; j++) dst[j] = s->hist[(start + j) % s->hist_cap];
    return n;
}

/* ================================ the samplers ============================================== */

/* The NaN and +inf rules on the own copy of the whole vocabulary: NaN becomes -inf; if any
 * logit is +inf, the +inf tokens share the mass uniformly (the limit of the softmax). */
static void fix_non_finite(gemma3_sampler *s) {
    float *l = s->own;
    int V = s->n_vocab, n_pinf = 0;
    for (int i = 0; i < V; i++) {
        if (isnan(l[i])) l[i] = -INFINITY;
        n_pinf += l[i] == INFINITY;
    }
    if (n_pinf > 0)
        for (int i = 0; i < V; i++) l[i] = l[i] == INFINITY ? 0.0f : -INFINITY;
}

/* What was derived from the working logits (the known maximum, the rank view) is stale once
 * the caller rewrites them: every writer of the logits calls this first. */
static void logits_rewritten(gemma3_sampler *s) {
    s->max_known = 0;
    s->view_valid = 0;
}

/* The working logits, writable. A call starts on the caller's vector, read-only and unchecked
 * (prepare); the first sampler that rewrites logits (penalties, DRY, temperature) copies it
 * here, once per call, checking it on the way. A short list (after a truncation, so checked)
 * copies only its candidates' logits: from then on nothing reads the logit of a token outside
 * the list (the list only shrinks), so the stale entries of the copy are never seen. */
static float *writable_logits(gemma3_sampler *s) {
    logits_rewritten(s);
    if (s->logits == s->own) return s->own;
    if (!s->unchecked && !s->cand_lazy && s->n_cand <= s->n_vocab / 8) {
        for (int j = 0; j < s->n_cand; j++) s->own[s->cand[j]] = s->logits[s->cand[j]];
        s->logits = s->own;
        return s->own;
    }
    int clean = s->copy_check(s->own, s->logits, s->n_vocab);
    s->logits = s->own;
    if (s->unchecked && !clean) fix_non_finite(s);
    s->unchecked = 0;
    return s->own;
}

/* Applies the NaN/+inf rules if nobody has yet: one read-only pass over the caller's logits
 * (a copy only when one of them is not finite). Every reader of the logits but top-k's heap
 * (which checks as it scans) calls this first. */
static void check_finite(gemma3_sampler *s) {
    if (!s->unchecked) return;
    float mx;
    int first;
    if (s->check_max(s->logits, s->n_vocab, &mx, &first)) { /* the maximum comes with the look */
        s->unchecked = 0;
        s->max_known = 1;
        s->max_value = mx;
        s->max_first = first;
    } else {
        writable_logits(s);
    }
}

/* The list becomes the whole vocabulary, implicit (0..n_vocab-1, in id order). */
static void list_whole_vocabulary(gemma3_sampler *s) {
    s->n_cand = s->n_vocab;
    s->cand_lazy = 1;
    s->id_order = 1;
    s->sorted = 0;
    s->win.on = 0;
    s->typ.on = 0;
}

static int gumbel_mode(const gemma3_sampler *s) { return s->p.mode == GEMMA3_SAMPLER_MODE_GUMBEL; }

enum { GUMBEL_HEAP_MAX_K = 1024 };
/* The fast CDF walk sums DRAW_BLOCK weights per block; lists shorter than FAST_DRAW_MIN take the
 * exact walk (and the other approximate-then-check paths the exact computation). */
enum { DRAW_BLOCK = 64, FAST_DRAW_MIN = 1024 };

/* The first i with l[i] == lmax, the largest of the NaN-free l[0..n) (it must occur): the one
 * the pass that found the maximum saw, if it was this one over these logits, else the heap's
 * block scan (vectorised) skips the blocks of 16 with nothing >= lmax, that is without it. */
static int first_max(const gemma3_sampler *s, const float *l, int n, float lmax) {
    if (s->max_known && l == s->logits && n == s->n_vocab && lmax == s->max_value)
        return s->max_first;
    uint32_t bad = 0; /* not asked: the draw's logits are checked */
    int j = s->block_scan(l, 0, n, lmax, &bad);
    while (l[j] != lmax) j++;
    return j;
}

/* Top-k: the first k of the total order, exactly k (ties at the k-th value go to lower ids). */
static void top_k(gemma3_sampler *s, int k) {
    if (k <= 0 || k >= s->n_cand) return;
    if (s->sorted) {
        s->n_cand = k;
        return;
    }
    if (gumbel_mode(s) && k > GUMBEL_HEAP_MAX_K && s->n_cand > 4096) {
        /* a large k without sorting; a small one (the usual 40 or 64) takes the heap below,
         * whose vectorised block skip beats the radix passes: the same set either way, and the
         * Gumbel draw does not depend on the list's order */
        check_finite(s);
        g3_cand_select_first(s, 0, k, 0, 0); /* reads an implicit list straight */
    } else if (k > s->n_cand / 4 && s->n_cand > 4096) {
        check_finite(s);
        g3_cand_materialise(s);
        /* the heap costs O(n log k): for a large k one O(n) radix sort of the list is cheaper */
        g3_cand_sort(s);
        s->n_cand = k;
    } else {
        /* the heap's scan is the call's first pass over the caller's logits when they are
         * unchecked: it checks them on the way, and runs again on the fixed copy if needed */
        if (g3_cand_select_top(s, k) && s->unchecked) {
            writable_logits(s);
            g3_cand_select_top(s, k);
        }
        s->unchecked = 0;
        g3_cand_keep_selected(s, k);
    }
}

/* The fixed-point masses of the list into s->mass (parallel to it), and their sum. */
static uint64_t fixed_masses(gemma3_sampler *s, float lmax) {
    int n = s->n_cand;
    const float *l = s->logits;
    if (!(s->id_order && n == s->n_vocab)) {
        float *g = s->gathered;
        for (int j = 0; j < n; j++) g[j] = l[s->cand[j]];
        l = g;
    }
    /* g3_fixed_mass in two steps: the vectorised rounding, then libm's exp near the ties */
    int n_tie;
    uint64_t *tie = s->mass_tmp, *q = s->mass,
             total = s->mass_round_n(l, lmax, q, tie, n, &n_tie);
    return g3_mass_fix_ties(l, lmax, q, tie, n, n_tie, total);
}

/* floor(p * q) exactly, p in [0, 1), q < 2^60: p = mant * 2^e with a 24-bit mantissa. */
static uint64_t scale_floor(float p, uint64_t q) {
    int e;
    double fr = frexp((double)p, &e);        /* p = fr * 2^e, fr in [0.5, 1) */
    uint64_t mant = (uint64_t)ldexp(fr, 24); /* exact: p is a float */
    int sh = 24 - e;
    unsigned __int128 prod = (unsigned __int128)q * mant;
    return sh >= 128 ? 0 : (uint64_t)(prod >> sh);
}

static int32_t draw_gumbel(gemma3_sampler *s, int64_t pos);
static int32_t draw_gumbel_skipping(gemma3_sampler *s, int64_t pos, const int32_t *skip,
                                    int n_skip, int32_t start, double *second);
static double gumbel_value(const gemma3_sampler *s, uint64_t key, float lmax, int32_t id);
static int gumbel_beats(double v, int32_t id, double best_v, int32_t best);

/* The coarse (g3_exp_coarse, coarse = 1) or rough (g3_exp_rough) sums of e^(l - lmax) over the
 * list, all of them (returned) and those with l >= at (*at_least), and *rel their bound. */
static double exp_lane_sums(const gemma3_sampler *s, int coarse, float lmax, float at,
                            double *at_least, double *rel) {
    int n = s->n_cand;
    *rel = g3_exp_lane_sums_rel(coarse ? G3_EXP_COARSE_REL_ERR : G3_EXP_ROUGH_REL_ERR, n);
    return (coarse ? s->exp_coarse_sums : s->exp_rough_sums)(s->logits, lmax, n, at, at_least);
}

/* Whether token w surely lies in top-p's nucleus of the whole vocabulary: the fixed mass Q_b of
 * the tokens before it in the total order below floor(p Q), Q the total. The coarse or rough
 * sums (within rel) bound Q_b by the tokens at or above w's logit (w and its ties too: more
 * than Q_b) and Q from below: each q_i is within 1/2 + 2^-52 of 2^40 e^d (g3_fixed_mass); the
 * 2^-50 and the constants cover the roundings of these few doubles. */
static int nucleus_holds_by(gemma3_sampler *s, int coarse, float lmax, float p, int32_t w) {
    int n = s->n_cand;
    double at_or_above, rel;
    double total = exp_lane_sums(s, coarse, lmax, s->logits[w], &at_or_above, &rel);
    double before_hi = 0x1p40 * at_or_above / (1 - rel) * (1 + 0x1p-50) + 0.5 * n + 1;
    double target_lo = (double)p * (0x1p40 * total / (1 + rel) * (1 - 0x1p-50) - 0.5 * n) - 2;
    return before_hi < target_lo;
}
/* The first token of the total order is in every nucleus: that winner needs no sums. Else the
 * coarse sums (half the rough sums' time), which decide unless w lies within about 6% of the
 * nucleus's edge, then the rough sums. */
static int nucleus_holds(gemma3_sampler *s, float lmax, float p, int32_t w) {
    if (s->logits[w] == lmax && first_max(s, s->logits, s->n_cand, lmax) == w) return 1;
    if (nucleus_holds_by(s, 1, lmax, p, w)) {
        s->top_p_coarse_draws++;
        return 1;
    }
    return nucleus_holds_by(s, 0, lmax, p, w);
}

/* Top-p: keep token i iff the mass strictly before it in the total order is < p * Z, i.e. the
 * shortest prefix whose mass reaches p * Z (the token crossing p is kept), at least one token
 * and at least min_keep. Masses are the fixed-point q_i. When the Gumbel draw comes next
 * (draw_next; never for g3_sampler_kept) over a whole vocabulary, its winner over all of it is
 * found first: if that token surely lies in the nucleus, it wins there too (the nucleus is a
 * subset, with the same maximum, noise and ties), and the list becomes that one token. */
static void top_p(gemma3_sampler *s, float p, int64_t pos, int draw_next) {
    int n = s->n_cand;
    if (p >= 1.0f || n <= 1) return;
    int whole = s->id_order && n == s->n_vocab && n > 4096;
    /* the draw checks the logits on its way */
    int32_t w = whole && draw_next && gumbel_mode(s) && !s->skip_rough ? draw_gumbel(s, pos) : -1;
    check_finite(s);
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return;
    int floor_keep = s->p.min_keep > 1 ? s->p.min_keep : 1;
    if (whole) {
        if (w >= 0 && nucleus_holds(s, lmax, p, w)) {
            s->top_p_winner_draws++;
            s->ids_tmp[0] = w;
            g3_cand_keep_selected(s, 1);
            return;
        }
        /* the rank view, if it decides; else the exact masses: the same prefix, a window
         * either way (not the nucleus written out, which the CDF walk would sort) */
        int32_t last;
        int count;
        if ((s->view_open & G3_VIEW_OPEN_TOP_P) || !g3_rank_top_p(s, lmax, p, &last, &count)) {
            uint64_t target = scale_floor(p, fixed_masses(s, lmax)); /* by id: id order */
            count = target > 0 ? g3_cand_mass_prefix(s, lmax, target, &last) : 0;
            s->top_p_mass_sets += count > 0;
        }
        if (count < floor_keep) /* the min_keep floor, or a target of 0: top-k */
            top_k(s, floor_keep);
        else
            g3_cand_window_prefix(s, first_max(s, s->logits, n, lmax), last, count);
        return;
    }
    g3_cand_materialise(s);
    uint64_t total = fixed_masses(s, lmax);
    if (gumbel_mode(s)) {
        uint64_t target = scale_floor(p, total);
        if (target == 0) {
            top_k(s, floor_keep);
            return;
        }
        g3_cand_select_first(s, 1, 0, target, floor_keep);
        return;
    }
    /* sort path: walk a heap-selected top 256 (enough for most language model distributions);
     * a larger nucleus is found by the Gumbel path's radix selection, which keeps the same set
     * (docs/sampling.md §3), and only it is sorted. Masses by token id for the walk. */
    uint64_t *q = s->mass_tmp;
    for (int j = 0; j < n; j++) q[s->cand[j]] = s->mass[j];
    uint64_t target = scale_floor(p, total);
    if (target == 0) {
        top_k(s, floor_keep);
        return;
    }
    if (!s->sorted && n > 256) {
        g3_cand_select_top(s, 256);
        uint64_t cum = 0;
        for (int j = 0; j < 256; j++) {
            cum += q[s->ids_tmp[j]];
            if (cum >= target) {
                if (j + 1 < floor_keep) break;
                g3_cand_keep_selected(s, j + 1);
                return;
            }
        }
    }
    if (!s->sorted) {
        g3_cand_select_first(s, 1, 0, target, floor_keep);
        g3_cand_ensure_sorted(s);
        return;
    }
    uint64_t cum = 0;
    int keep = n;
    for (int j = 0; j < n; j++) {
        cum += q[s->cand[j]];
        if (cum >= target) {
            keep = j + 1;
            break;
        }
    }
    if (keep < floor_keep) keep = floor_keep < n ? floor_keep : n;
    s->n_cand = keep;
}

/* The smallest float >= thr: for a float l, (double)l >= thr iff l >= it. */
static float float_at_least(double thr) {
    float t = (float)thr;
    return (double)t < thr ? nextafterf(t, INFINITY) : t;
}

/* How many candidates have l >= thr (compared in double), and keeping only those (in list
 * order). A list of the whole vocabulary in id order is read straight, 16 lanes at a time. */
static int count_at_least(const gemma3_sampler *s, double thr) {
    const float *l = s->logits;
    float t = float_at_least(thr);
    int n = s->n_cand, count = 0, j = 0;
    if (s->id_order && n == s->n_vocab)
        for (; j + 16 <= n; j += 16) {
            int c = 0;
            for (int k = 0; k < 16; k++) c += l[j + k] >= t;
            count += c;
        }
    const int32_t *c = s->cand_lazy ? s->iota : s->cand;
    for (; j < n; j++) count += (double)l[c[j]] >= thr;
    return count;
}

/* Aligned to 64 bytes: its count of 16 is a loop of four SSE compares, which ran a sixth slower
 * (min-p alone 0.051 -> 0.059 ms on Zen 4) when a change elsewhere in this file moved it across
 * a 64-byte line. */
__attribute__((aligned(64))) static void keep_at_least(gemma3_sampler *s, double thr) {
    const float *l = s->logits;
    int n = s->n_cand, m = 0;
    if (s->id_order && n == s->n_vocab) { /* skip the blocks of 16 with no survivor */
        float t = float_at_least(thr);
        int j = 0;
        for (; j + 16 <= n; j += 16) {
            int c = 0;
            for (int k = 0; k < 16; k++) c += l[j + k] >= t;
            if (c)
                for (int k = j; k < j + 16; k++)
                    if (l[k] >= t) s->cand[m++] = k;
        }
        for (; j < n; j++)
            if (l[j] >= t) s->cand[m++] = j;
    } else {
        for (int j = 0; j < n; j++)
            if ((double)l[s->cand[j]] >= thr) s->cand[m++] = s->cand[j];
    }
    s->cand_lazy = 0;
    s->n_cand = m;
}

/* Min-p: keep p_i >= m * p_max, evaluated as l_i >= lmax + ln m in double (no softmax needed).
 * Shared by both paths; the floor (1 token or min_keep) goes through top_k. */
static void min_p(gemma3_sampler *s, float mp) {
    int n = s->n_cand;
    if (mp <= 0.0f || n <= 1) return;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return;
    double thr = (double)lmax + log((double)mp);
    int floor_keep = s->p.min_keep > 1 ? s->p.min_keep : 1;
    if (s->cand_lazy) { /* keep first: an implicit list is put back by a flag if too few stay */
        keep_at_least(s, thr);
        if (s->n_cand >= floor_keep) return;
        list_whole_vocabulary(s);
    } else if (count_at_least(s, thr) >= floor_keep) {
        keep_at_least(s, thr);
        return;
    }
    top_k(s, floor_keep);
}

/* Top-n-sigma's threshold lmax - n * sigma, mean and population sigma over the finite candidate
 * logits, in double, summed in id order. Returns 0 when no logit is finite. */
static int sigma_threshold(gemma3_sampler *s, float nsig, double *thr) {
    const int32_t *ids = g3_cand_ids_ascending(s);
    double sum = 0, lmax = -INFINITY;
    int nf = 0;
    for (int j = 0; j < s->n_cand; j++) {
        float l = s->logits[ids[j]];
        if (l == -INFINITY) continue;
        sum += l;
        nf++;
        if (l > lmax) lmax = l;
    }
    if (nf == 0) return 0;
    double mean = sum / nf, var = 0;
    for (int j = 0; j < s->n_cand; j++) {
        float l = s->logits[ids[j]];
        if (l != -INFINITY) var += ((double)l - mean) * ((double)l - mean);
    }
    *thr = lmax - (double)nsig * sqrt(var / nf);
    return 1;
}

/* sigma_threshold's threshold from sums in 8 interleaved lanes (vectorised) over a list that
 * is the whole vocabulary, and a bound on its distance from the id-order threshold: with N
 * finite logits, A the largest |l|, u = 2^-53, any summation order errs by at most N u N A on
 * the sum, so both means lie within delta = 2 (N + 1) u A of the exact mean M; the variance
 * sums V(m) = V(M) + N (m - M)^2 are each computed within (N + 3) u relative (three roundings
 * per term, N - 1 additions), so the two sigmas differ by at most delta + 2 (eps + 4 u) sigma,
 * eps = 1.01 (N + 3) u, and the threshold adds the rounding of nsig * sigma and of the
 * difference. *margin is twice all of that. Returns 0 when no logit is finite. */
static int sigma_threshold_lanes(const gemma3_sampler *s, float nsig, double *thr,
                                 double *margin) {
    double m[5];
    s->sigma_sums_n(s->logits, s->n_cand, m);
    double lmax = m[0], amax = m[1], z = m[3];
    int nf = (int)m[4];
    if (nf == 0) return 0;
    double sigma = sqrt(z / nf), u = 0x1p-53, N = nf;
    double delta = 2 * (N + 1) * u * amax, eps = 1.01 * (N + 3) * u;
    *thr = lmax - (double)nsig * sigma;
    *margin = 2 * ((double)nsig * (delta + 2 * (eps + 4 * u) * (sigma + delta)) +
                   4 * u * (fabs(lmax) + (double)nsig * (sigma + delta)));
    return 1;
}

/* Top-n-sigma: drop l_i < lmax - n * sigma (the threshold above). Over the whole vocabulary the
 * lane sums answer when every threshold within their error bound keeps the same set: the
 * smallest float >= the threshold (what keep_at_least compares with) is the same at both ends
 * of the interval, hence for every threshold inside it. Otherwise the sums in id order. */
static void top_n_sigma(gemma3_sampler *s, float nsig) {
    if (nsig <= 0.0f || s->n_cand <= 1) return;
    double thr, margin;
    if (s->id_order && s->n_cand == s->n_vocab && s->n_cand >= 1024 &&
        sigma_threshold_lanes(s, nsig, &thr, &margin) &&
        float_at_least(thr - margin) == float_at_least(thr + margin)) {
        keep_at_least(s, thr);
        return;
    }
    if (!sigma_threshold(s, nsig, &thr)) return;
    keep_at_least(s, thr);
}

/* Probabilities of the candidates into w[] (parallel to the list); returns lmax. */
static float cand_probs(gemma3_sampler *s) {
    float lmax = g3_cand_max(s);
    double z = g3_cand_z(s, lmax);
    for (int j = 0; j < s->n_cand; j++) s->w[j] = exp((double)s->logits[s->cand[j]] - lmax) / z;
    return lmax;
}

static double entropy_id_order(gemma3_sampler *s, float lmax, double z) {
    const int32_t *ids = g3_cand_ids_ascending(s);
    double h = 0;
    for (int j = 0; j < s->n_cand; j++) {
        double pj = exp((double)s->logits[ids[j]] - lmax) / z;
        if (pj > 0) h -= pj * log(pj);
    }
    return h;
}

static int cmp_scored(const void *a, const void *b) {
    const struct scored *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Sorts a bucket of (score, id) pairs: insertion sort for the usual handful, else qsort. */
static void sort_scored(struct scored *a, int n) {
    if (n > 32) {
        qsort(a, (size_t)n, sizeof *a, cmp_scored);
        return;
    }
    for (int i = 1; i < n; i++) {
        struct scored v = a[i];
        int j = i;
        for (; j > 0 && cmp_scored(&a[j - 1], &v) > 0; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* Locally typical: score |-ln p_i - H|, ascending (ties by id); keep the shortest prefix whose
 * mass exceeds p (strict, as llama.cpp), at least min_keep. One pass gives each token's p and
 * ln p (for H, then for its score); a counting sort spreads the scores over about n/4 buckets,
 * linear in the score (a monotone map, so bucket order is score order), and the walk sorts a
 * bucket only when it reaches it: the tail after the crossing is never sorted. The same sums in
 * the same order, the same list as sorting everything. */
static void typical_exact(gemma3_sampler *s, float tp, float lmax) {
    g3_cand_materialise(s);
    int n = s->n_cand;
    double z = g3_cand_z(s, lmax);
    const int32_t *ids = g3_cand_ids_ascending(s);
    struct scored *sc = s->scored;
    double h = 0;
    for (int j = 0; j < n; j++) { /* entropy in id order; ln p kept for the scores */
        double pj = exp((double)s->logits[ids[j]] - lmax) / z, lp = log(pj);
        if (pj > 0) h -= pj * lp;
        sc[j].score = lp;
        sc[j].id = ids[j];
    }
    double smin = INFINITY, smax = 0;
    for (int j = 0; j < n; j++) {
        double x = sc[j].score = fabs(-sc[j].score - h);
        if (x == INFINITY) continue;
        smin = x < smin ? x : smin;
        smax = x > smax ? x : smax;
    }
    int nb = n / 4 < 1 ? 1 : n / 4 > TYPICAL_BUCKETS ? TYPICAL_BUCKETS : n / 4; /* +inf: nb */
    double scale = smax > smin ? (double)(nb - 1) / (smax - smin) : 0;
    uint32_t *start = s->typ_start, *fill = s->typ_fill;
    memset(start, 0, (size_t)(nb + 2) * sizeof *start);
    for (int j = 0; j < n; j++) {
        double x = sc[j].score;
        uint32_t b = nb;
        if (x != INFINITY) {
            double f = (x - smin) * scale;
            b = f < (double)(nb - 1) ? (uint32_t)f : (uint32_t)(nb - 1);
        }
        sc[j].bucket = b;
        start[b + 1]++;
    }
    for (int b = 0; b <= nb; b++) start[b + 1] += start[b];
    memcpy(fill, start, (size_t)(nb + 1) * sizeof *fill);
    struct scored *by_bucket = s->scored_tmp;
    for (int j = 0; j < n; j++) by_bucket[fill[sc[j].bucket]++] = sc[j];
    double cum = 0;
    int keep = n;
    for (int b = 0, j = 0; b <= nb && keep == n; b++) {
        sort_scored(by_bucket + start[b], (int)(start[b + 1] - start[b]));
        for (; j < (int)start[b + 1]; j++) {
            cum += exp((double)s->logits[by_bucket[j].id] - lmax) / z;
            if (cum > tp && j >= s->p.min_keep - 1) {
                keep = j + 1;
                break;
            }
        }
    }
    for (int j = 0; j < keep; j++) s->cand[j] = by_bucket[j].id;
    s->n_cand = keep;
    s->sorted = keep <= 1;
    s->id_order = keep <= 1;
}

/* A found set of typical's for the Gumbel draw: its first token, which the draw starts from, or
 * the set written out where the view cannot tell it. */
static void typical_gumbel_top(gemma3_sampler *s) {
    if ((s->typ.first = g3_rank_typical_first(s)) < 0) g3_cand_materialise(s);
}

/* Typical: over the whole vocabulary the rank view finds the set (g3_rank_typical) and it stays
 * implicit when no sampler acts after it (draw_next): the Gumbel draw screens the vocabulary
 * against it (it reads no order, only the set's first token), the CDF draw walks it in
 * typical's order itself. When that draw comes (draws: not the kept set) the set may stay
 * pending, only its crossing's bracket known: the draw rarely needs the crossing itself (nor,
 * in Gumbel mode, the set's first token or the view's moments: G3_TYPICAL_DEFER_GUMBEL). In
 * Gumbel mode with samplers after it, it is written out in id order. Elsewhere the exact
 * computation runs, as it does wherever the view's bounds leave the set open. */
static void typical(gemma3_sampler *s, float tp, int draw_next, int draws) {
    int n = s->n_cand;
    if (tp >= 1.0f || n <= 1) return;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return;
    if (s->id_order && n == s->n_vocab && n > 4096 && !s->win.on &&
        (draw_next || gumbel_mode(s))) {
        int defer = !(draws && draw_next) ? G3_TYPICAL_NOW
                    : gumbel_mode(s)        ? G3_TYPICAL_DEFER_GUMBEL
                                            : G3_TYPICAL_DEFER_CDF;
        int count = g3_rank_typical(s, lmax, tp, s->p.min_keep, defer);
        if (count == 1) { /* one token: the list is it (as a dominant token's set often is) */
            s->typ_fast_sets++;
            s->cand_lazy = 0;
            s->cand[0] = s->typ.id_b;
            s->n_cand = 1;
            s->sorted = s->id_order = 1;
            return;
        }
        if (count > 1) {
            s->typ_fast_sets++;
            s->typ.on = 1;
            s->typ.first = -1;
            s->n_cand = count;
            if (!gumbel_mode(s) || s->typ.pending) return; /* a pending set's draw needs no top */
            if (draw_next)
                typical_gumbel_top(s);
            else
                g3_cand_materialise(s);
            return;
        }
    }
    typical_exact(s, tp, lmax);
}

/* The CDF draw's way back when typical's implicit set cannot be walked from the view: the
 * exact typical, from the whole vocabulary it was taken from. */
static void typical_settle(gemma3_sampler *s) {
    list_whole_vocabulary(s);
    typical_exact(s, s->p.typical_p, g3_cand_max(s));
}

enum { XTC_TOP = 258 }; /* the most tokens XTC's count examines */

/* How many of the first tokens of the total order XTC's count examines: m = 1/thr + 2 (at most
 * XTC_TOP and n), xtc_count_with_z. */
static int xtc_top_count(float thr, int n) {
    double m_mass = floor(1.0 / (double)thr) + 2;
    int m = m_mass < XTC_TOP ? (int)m_mass : XTC_TOP;
    return m < n ? m : n;
}

/* How many candidates of a list that is the whole vocabulary have p = exp(l - lmax) / Z >= thr
 * (in doubles, Z in id order, as cand_probs computes them), from an approximate Z' within rel_z
 * of the exact sum. p >= thr iff l >= lmax + ln thr + ln Z up to the roundings of exp, the
 * division and the limit itself. The first m tokens of the total order are selected (sorted, in
 * ids_tmp), m = 1/thr + 2 (at most XTC_TOP): more than 1/thr tokens cannot all have p >= thr,
 * so the last two lie below the limit unless Z' is far off. When none of the m lies within
 * twice all of that of the limit and the last lies below it, the count is that of those above
 * it; -1 otherwise. When even the maximum lies below, the count is 0 without the selection
 * (*selected says whether it ran). */
static int xtc_count_with_z(gemma3_sampler *s, float lmax, float thr, double z, double rel_z,
                            int m, int *selected) {
    int n = s->n_cand, q = 0;
    double rel = 2 * (double)n * 0x1p-53 + 2 * rel_z;
    double lz = log(z), lt = log((double)thr), lim = (double)lmax + lt + lz;
    double margin = 2 * (1.01 * rel + 8 * 0x1p-52 +
                         0x1p-50 * (fabs((double)lmax) + fabs(lz) + fabs(lt) + 1));
    if ((double)lmax < lim - margin) return 0; /* not even the first reaches it */
    if (!*selected) g3_cand_select_top(s, m);
    *selected = 1;
    const int32_t *top = s->ids_tmp;
    while (q < m && (double)s->logits[top[q]] >= lim + margin) q++;
    if (q == m ? m < n : (double)s->logits[top[q]] >= lim - margin) return -1;
    return q;
}

/* XTC's count by tiers of Z (xtc_count_with_z): the rank view's when the CDF draw comes next
 * (view: it walks the same view), else the coarse sums' (g3_exp_coarse_sums, which decide
 * unless a token lies within about an eighth of a nat of the limit), the rough sums' (a third
 * of the float tier's time; within about 2^-7), then the float tier's (g3_expf_block_sums_rel,
 * as in surprise_limit). Returns -1 when
 * none decides (or thr is 0): the caller then computes every p. On a count, the first
 * max(count, 1) tokens of the total order are in ids_tmp (selected: they already are). */
static int xtc_count_fast(gemma3_sampler *s, float lmax, float thr, int view, int selected) {
    if (lmax == -INFINITY || !(thr > 0.0f)) return -1;
    int n = s->n_cand, m = xtc_top_count(thr, n);
    for (int tier = view ? 0 : s->skip_rough ? 3 : 1; tier <= 3; tier++) {
        double rel_z = 0, z = 0, unused;
        if (tier == 0) {
            z = g3_rank_z(s, lmax, &rel_z);
            if (z == 0) continue;
        } else if (tier < 3) {
            z = exp_lane_sums(s, tier == 1, lmax, INFINITY, &unused, &rel_z);
        } else {
            z = s->expf_block_sums(s->logits, lmax, n, s->blocks);
            rel_z = g3_expf_block_sums_rel(n);
        }
        int q = xtc_count_with_z(s, lmax, thr, z, rel_z, m, &selected);
        if (q == 0 && !selected) s->ids_tmp[0] = first_max(s, s->logits, n, lmax);
        if (q >= 0 || tier == 0) return q; /* the view's Z is the most precise */
    }
    return -1;
}

/* XTC over a whole vocabulary when the Gumbel draw comes next: XTC may drop only tokens among
 * the first m of the total order (xtc_top_count), so the draw's winner among the rest (the
 * screen's draw over all but those m) and each of the m decide it: when the rest's winner beats
 * all m, it wins whatever XTC drops, and no Z is needed; else XTC's count says which of the m
 * stay. The draw over what XTC keeps takes values relative to the kept maximum, the logit of
 * the first token kept, not yet known here; another maximum shifts every value alike up to
 * roundings below 2^-52 of their magnitudes, so orders decided by more than `slack` hold for
 * any. The list becomes the winner (1), or stays as it was when a margin or the count leaves it
 * open or the m are the whole list (0). */
static int xtc_winner_first(gemma3_sampler *s, int64_t pos, float lmax, float thr) {
    if (!(thr > 0.0f)) return 0;
    int n = s->n_cand, m = xtc_top_count(thr, n);
    if (m >= n) return 0;
    g3_cand_select_top(s, m + 1);
    const int32_t *top = s->ids_tmp;
    uint64_t key = g3_rng_key(s->seed, pos);
    double second;
    int32_t rest = draw_gumbel_skipping(s, pos, top, m, top[m], &second);
    double rest_v = gumbel_value(s, key, lmax, rest);
    double spread = (double)lmax - (double)s->logits[top[m - 1]];
    double slack = 0x1p-46 * (fabs(rest_v) + spread + 64);
    if (!(rest_v - second > slack)) return 0;
    int sure = 1;
    for (int i = 0; i < m && sure; i++) sure = gumbel_value(s, key, lmax, top[i]) < rest_v - slack;
    int32_t winner = rest;
    if (sure) {
        s->xtc_winner_draws++;
    } else {
        int q = xtc_count_fast(s, lmax, thr, 0, 1), last = q - 1;
        if (q < 0) return 0;
        int drop = last >= 1 && n - last >= s->p.min_keep ? last : 0;
        float kept_max = s->logits[top[drop]];
        double best_v = gumbel_value(s, key, kept_max, rest);
        for (int i = drop; i < m; i++) {
            double v = gumbel_value(s, key, kept_max, top[i]);
            if (gumbel_beats(v, top[i], best_v, winner)) {
                best_v = v;
                winner = top[i];
            }
        }
    }
    s->ids_tmp[0] = winner;
    g3_cand_keep_selected(s, 1);
    return 1;
}

/* XTC: with probability xtc_probability (its own coin), remove every token with p >= threshold
 * except the least probable of them, when at least two qualify and min_keep allows. The
 * qualifying tokens are the first of the total order (p falls along it). The CDF walk reads the
 * list in order, so there the list is sorted whatever XTC removes; the Gumbel draw does not,
 * so there a whole vocabulary only loses its first tokens (found by the count's selection).
 * draw_next: the draw comes next (never for the kept set); in Gumbel mode it may answer first
 * (xtc_winner_first). */
static void xtc(gemma3_sampler *s, int64_t pos, int draw_next) {
    float prob = s->p.xtc_probability, thr = s->p.xtc_threshold;
    if (prob <= 0.0f || thr > 0.5f || s->n_cand < 2) return;
    double coin = g3_uniform(g3_rng_bits(g3_rng_key(s->seed, pos), G3_RNG_XTC, 0));
    if (coin > prob) return;
    int full = s->id_order && s->n_cand == s->n_vocab && s->n_cand >= FAST_DRAW_MIN;
    float lmax = full ? g3_cand_max(s) : -INFINITY;
    if (full && draw_next && gumbel_mode(s) && lmax != -INFINITY &&
        xtc_winner_first(s, pos, lmax, thr))
        return;
    int q = full ? xtc_count_fast(s, lmax, thr, draw_next && !gumbel_mode(s), 0) : -1;
    int last = q - 1;
    if (q >= 0) { /* the whole vocabulary: a window after its first `last` */
        int drop = last >= 1 && s->n_cand - last >= s->p.min_keep ? last : 0;
        if (drop == 0 && gumbel_mode(s)) return;
        /* in CDF mode the list is sorted even when nothing is dropped: the walk's order */
        g3_cand_window_after(s, lmax, drop ? s->ids_tmp[drop - 1] : -1, s->ids_tmp[drop],
                             s->n_cand - drop);
        return;
    }
    g3_cand_materialise(s);
    g3_cand_ensure_sorted(s); /* every p, on the sorted list */
    cand_probs(s);
    for (int j = 0; j < s->n_cand; j++)
        if (s->w[j] >= thr) last = j;
    if (last < 1 || s->n_cand - last < s->p.min_keep) return;
    memmove(s->cand, s->cand + last, (size_t)(s->n_cand - last) * sizeof *s->cand);
    s->n_cand -= last;
}

/* A finite logit that overflows (a huge logit over a small temperature or penalty) becomes
 * FLT_MAX rather than +inf, which would poison lmax: the tokens that overflowed then share the
 * mass, the limit of the softmax. */
static inline float clamp_overflow(float v) { return v > FLT_MAX ? FLT_MAX : v; }

/* l /= t over the candidates (vectorised when the list is the whole vocabulary). */
static void divide_logits(gemma3_sampler *s, float t) {
    logits_rewritten(s);
    float mx;
    int first;
    if (s->logits != s->own && s->id_order && s->n_cand == s->n_vocab &&
        (s->copy_divide(s->own, s->logits, s->n_cand, t, &mx, &first) || !s->unchecked)) {
        /* checked logits have no NaN or +inf (-inf / t is -inf); unchecked ones that are not
         * all finite take the rules first, below */
        s->logits = s->own;
        s->unchecked = 0;
        s->max_known = 1;
        s->max_value = mx;
        s->max_first = first;
        return;
    }
    float *l = writable_logits(s);
    if (s->id_order && s->n_cand == s->n_vocab) { /* blocks of 16 and the clamp in its own
                                                     loop (a min): both vectorise at -O2 */
        int n = s->n_cand, i = 0;
        for (; i + 16 <= n; i += 16) {
            for (int k = 0; k < 16; k++) l[i + k] /= t;
            for (int k = 0; k < 16; k++) l[i + k] = l[i + k] > FLT_MAX ? FLT_MAX : l[i + k];
        }
        for (; i < n; i++) l[i] = clamp_overflow(l[i] / t);
    } else {
        for (int j = 0; j < s->n_cand; j++) l[s->cand[j]] = clamp_overflow(l[s->cand[j]] / t);
    }
}

/* Collapses the list to its first token in the total order (greedy). */
static void keep_argmax(gemma3_sampler *s) {
    if (s->n_cand <= 1) {
        g3_cand_materialise(s);
        return;
    }
    const float *l = s->logits;
    const int32_t *c = s->cand_lazy ? s->iota : s->cand; /* an implicit list is read as iota */
    s->cand_lazy = 0;
    if (s->max_known && s->id_order && s->n_cand == s->n_vocab) { /* the check's first max */
        s->cand[0] = s->max_first;
        s->n_cand = 1;
        s->sorted = 1;
        return;
    }
    if (s->id_order) { /* the first maximum in id order is the lowest id */
        float m[16];
        int n = s->n_cand, j = 0;
        for (int k = 0; k < 16; k++) m[k] = -INFINITY;
        if (n == s->n_vocab)
            for (; j + 16 <= n; j += 16)
                for (int k = 0; k < 16; k++) m[k] = l[j + k] > m[k] ? l[j + k] : m[k];
        float mx = -INFINITY;
        for (int k = 0; k < 16; k++) mx = m[k] > mx ? m[k] : mx;
        for (; j < n; j++) mx = l[c[j]] > mx ? l[c[j]] : mx;
        j = 0;
        if (n == s->n_vocab) /* skip whole blocks without the maximum */
            for (; j + 16 <= n; j += 16) {
                int hits = 0;
                for (int k = 0; k < 16; k++) hits += l[j + k] == mx;
                if (hits) break;
            }
        for (; j < n && l[c[j]] != mx; j++) {}
        s->cand[0] = c[j < n ? j : 0];
        s->n_cand = 1;
        s->sorted = 1;
        return;
    }
    int32_t best = c[0];
    for (int j = 1; j < s->n_cand; j++)
        if (g3_cand_before(l, c[j], best)) best = c[j];
    s->cand[0] = best;
    s->n_cand = 1;
    s->sorted = s->id_order = 1;
}

/* Whether the list is the whole vocabulary, implicit: what the Gumbel draw can check on its
 * way (draw_gumbel_checking) while the logits are the caller's, unchecked. */
static int whole_list(const gemma3_sampler *s) {
    return s->cand_lazy && s->id_order && s->n_cand == s->n_vocab && !s->win.on && !s->typ.on;
}

/* Temperature, with llama.cpp's dynamic temperature when dynatemp_range > 0: the entropy of the
 * current candidates, normalised by ln N, picks T' in [max(0, T-d), T+d]. draw_next: the draw
 * comes next (never for the kept set); a Gumbel draw over the whole vocabulary then divides as
 * it checks, block by block, instead of in a copy of its own. */
static void temperature(gemma3_sampler *s, float t, int draw_next) {
    if (t == 1.0f && s->p.dynatemp_range <= 0.0f) return;
    if (draw_next && gumbel_mode(s) && t > 0.0f && s->p.dynatemp_range <= 0.0f &&
        s->unchecked && whole_list(s) && s->n_cand > 1) {
        s->defer_divide = t;
        return;
    }
    if (t <= 0.0f || s->p.dynatemp_range > 0.0f) check_finite(s); /* else divide copies */
    if (s->p.dynatemp_range > 0.0f && s->n_cand > 1) {
        float lo = fmaxf(0.0f, t - s->p.dynatemp_range), hi = t + s->p.dynatemp_range;
        float lmax = g3_cand_max(s);
        if (lmax != -INFINITY) {
            double z = g3_cand_z(s, lmax);
            double h = entropy_id_order(s, lmax, z) / log((double)s->n_cand);
            t = lo + (hi - lo) * (float)pow(h, (double)s->p.dynatemp_exponent);
        }
    }
    if (t <= 0.0f) {
        keep_argmax(s);
        return;
    }
    if (t == 1.0f) return;
    divide_logits(s, t);
    if (s->n_cand > 1) s->sorted = 0; /* division may merge values into ties */
}

/* Repetition (sign-split, once per token), frequency and presence penalties over the last
 * repeat_last_n accepted tokens. */
static void penalties(gemma3_sampler *s) {
    const gemma3_sampler_params *p = &s->p;
    int n = resolve_last_n(p, p->repeat_last_n);
    if (n == 0 ||
        (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f))
        return;
    n = history_tail(s, n, s->dry_ctx);
    int nt = 0;
    for (int j = 0; j < n; j++)
        if (s->counts[s->dry_ctx[j]]++ == 0) s->touched[nt++] = s->dry_ctx[j];
    float *own = nt > 0 ? writable_logits(s) : NULL;
    for (int j = 0; j < nt; j++) {
        int32_t id = s->touched[j];
        float l = own[id];
        l = l <= 0 ? l * p->repeat_penalty : l / p->repeat_penalty;
        l -= (float)s->counts[id] * p->frequency_penalty + p->presence_penalty;
        own[id] = clamp_overflow(l);
        s->counts[id] = 0;
    }
    if (nt > 0) s->sorted = 0;
}

static int is_single_breaker(const gemma3_sampler_params *p, int32_t id) {
    for (int b = 0; b < p->n_dry_breakers; b++)
        if (p->dry_breaker_len[b] == 1 && p->dry_breakers[b][0] == id) return 1;
    return 0;
}

/* DRY: for each token t, L = the longest suffix of the history that, followed by t, occurred
 * before (matches found at once for every position by the Z-algorithm on the reversed history,
 * and never extending back across a sequence breaker). If L >= allowed_length, the logit of t
 * loses multiplier * base^(L - allowed_length), capped at FLT_MAX. */
static void dry(gemma3_sampler *s) {
    const gemma3_sampler_params *p = &s->p;
    int n = resolve_last_n(p, p->dry_penalty_last_n);
    if (p->dry_multiplier == 0.0f || p->dry_base < 1.0f || n == 0) return;
    int32_t *c = s->dry_ctx;
    n = history_tail(s, n, c);
    if (n < 2) return;
    /* the match may not reach back past the newest breaker occurrence (its last token tried
     * first: most positions end no breaker, and a call per breaker and position was a twentieth
     * of a DRY draw over 262,144 logits) */
    int limit = n;
    for (int e = n - 1; e >= 0 && limit == n; e--)
        for (int b = 0; b < p->n_dry_breakers; b++) {
            int len = p->dry_breaker_len[b];
            if (len > e + 1 || c[e] != p->dry_breakers[b][len - 1]) continue;
            if (memcmp(c + e - len + 1, p->dry_breakers[b], (size_t)len * sizeof *c) == 0) {
                limit = n - 1 - e;
                break;
            }
        }
    /* z[k] = longest common prefix of r and r[k..], r = the history reversed */
    int32_t *z = s->dry_z;
#define R(k) c[n - 1 - (k)]
    z[0] = n;
    for (int k = 1, lo = 0, hi = 0; k < n; k++) {
        int v = 0;
        if (k < hi) v = z[k - lo] < hi - k ? z[k - lo] : hi - k;
        while (k + v < n && R(v) == R(k + v)) v++;
        z[k] = v;
        if (k + v > hi) {
            lo = k;
            hi = k + v;
        }
    }
#undef R
    int nt = 0;
    for (int i = 1; i < n; i++) {
        int m = z[n - i]; /* the suffix ending at c[i-1] matches the history's suffix */
        if (m > limit) m = limit;
        if (m < p->dry_allowed_length || m == 0) continue;
        int32_t t = c[i];
        if (is_single_breaker(p, t)) continue;
        if (s->counts[t] == 0) s->touched[nt++] = t;
        if (m > s->counts[t]) s->counts[t] = m;
    }
    float *own = nt > 0 ? writable_logits(s) : NULL;
    for (int j = 0; j < nt; j++) {
        int32_t t = s->touched[j];
        double pen = (double)p->dry_multiplier *
                     pow((double)p->dry_base, (double)(s->counts[t] - p->dry_allowed_length));
        if (pen > FLT_MAX) pen = FLT_MAX;
        own[t] -= (float)pen;
        s->counts[t] = 0;
    }
    if (nt > 0) s->sorted = 0;
}

/* ================================ the draw ================================================== */

/* The fast CDF walk finds the token from approximate weights summed in blocks of DRAW_BLOCK
 * (not stored: the chosen block's weights are computed again) and answers only when the exact
 * walk surely stops at the same token (cdf_step_is_sure); otherwise it returns -1 and the next
 * tier runs (docs/sampling.md §5). Lists shorter than FAST_DRAW_MIN take the exact walk. */

/* Whether the exact walk surely stops at a token, from a fast walk's sums: `before` of the
 * tokens before it, `w` its own weight and `after` of the tokens after it, each a sum of
 * approximate non-negative weights within `rel` of its exact value (so its error is relative
 * to itself, not to the total) and all within `abs` together. The exact walk stops there when
 * the target u Z lies in the token's step, Z = before + w + after:
 *   u Z - before      = u (w + after) - (1 - u) before       >= 0, and
 *   before + w - u Z  = (1 - u) (before + w) - u after        >  0.
 * Each side's fast value errs by at most rel times the sum of its two terms (plus abs), and the
 * exact walk's own sums (libm's exp, n double additions, the target's product) move it by less
 * than 4 (n + 2) 2^-53 Z; the answer stands when both sides exceed twice the sum of the bounds.
 * Near the target the two terms of a side are both about u (1 - u) Z: the margin is about
 * u (1 - u) of one taken on the whole Z, and fewer draws are left to the next tier. */
static int cdf_step_is_sure(double before, double w, double after, double u, double rel,
                            double abs, int n) {
    double total = before + w + after;
    double lo_a = u * (w + after), lo_b = (1 - u) * before;
    double hi_a = (1 - u) * (before + w), hi_b = u * after;
    double exact = 4 * ((double)n + 2) * 0x1p-53 * total + abs;
    return lo_a - lo_b > 2 * (rel * (lo_a + lo_b) + exact) &&
           hi_a - hi_b > 2 * (rel * (hi_a + hi_b) + exact);
}

/* x[0] + ... + x[n-1] in 4 interleaved sums (a quarter of one chain's latency): for sums of
 * non-negative terms, whose error bound does not depend on the order. */
static double sum_in_4(const double *x, int n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

/* The first block b where the running sum of block[0..nb) exceeds target (nb if none), and
 * *before the sum of the blocks before it. */
static int crossing_block(const double *block, int nb, double target, double *before) {
    double sum = 0;
    int b = 0;
    for (; b < nb && !(sum + block[b] > target); b++) sum += block[b];
    *before = sum;
    return b;
}

/* A fast walk's token: the block where the running sum of block[] first exceeds `target`, then
 * the token within it, the block's weights computed again (weight(l, lmax), times 1 + tilt in
 * blocks before tilt_at and 1 - tilt from there on: the tests' errors at their bound); *before,
 * *w and *after get the sums before the token, its weight, and the sum after it, the last summed
 * on its own (not total - before - w) so that its error is relative to itself. Returns the
 * token's position, or -1 where the sums run out first. */
static int walk_blocks(const double *block, int n, const float *l, float lmax, double target,
                       double (*weight)(float, float), double tilt, int tilt_at, double *before,
                       double *w, double *after) {
    int nb = (n + DRAW_BLOCK - 1) / DRAW_BLOCK;
    double sum;
    int b = crossing_block(block, nb, target, &sum);
    if (b == nb) return -1;
    int end = (b + 1) * DRAW_BLOCK < n ? (b + 1) * DRAW_BLOCK : n;
    double scale = 1 + (b < tilt_at ? tilt : -tilt), wj = 0;
    int j = b * DRAW_BLOCK;
    for (; j < end; j++, sum += wj)
        if (sum + (wj = scale * weight(l[j], lmax)) > target) break;
    if (j == end) return -1;
    double rest = sum_in_4(block + b + 1, nb - b - 1);
    for (int i = j + 1; i < end; i++) rest += scale * weight(l[i], lmax);
    *before = sum;
    *w = wj;
    *after = rest;
    return j;
}

/* Tests (g3_sampler_perturb_float_draw): the block sums moved as far as the relative error
 * *tilt can move them the wrong way: the blocks before the one where the sums first exceed
 * `target` one way, the rest the other (up before and down after where that block is even, the
 * reverse where it is odd: *tilt gets the sign), so that the sums before and after the target
 * are both off by nearly all their bound allows and a margin too small on either end of a step
 * shows as a wrong token. walk_blocks tilts the weights it computes again the same way from
 * *tilt_at. Returns the new total. */
static double tilt_blocks(double *block, int n, double target, double *tilt, int *tilt_at) {
    int nb = (n + DRAW_BLOCK - 1) / DRAW_BLOCK;
    double before;
    int b = crossing_block(block, nb, target, &before);
    *tilt_at = b;
    if (b % 2) *tilt = -*tilt;
    double total = 0;
    for (int k = 0; k < nb; k++) total += block[k] *= 1 + (k < b ? *tilt : -*tilt);
    return total;
}

/* The float tier, tried first: weights w'_i = g3_approx_expf(l_i, lmax, fused), within
 * G3_APPROX_EXPF_REL_ERR of w_i (or 4.5e-38 absolute where clamped), summed per block of 64 in
 * float lanes of 4 terms (3 roundings: 3 2^-24 relative) and the lanes and blocks in double
 * (n 2^-53): every sum of them is within g3_expf_block_sums_rel(n) of its exact value, and
 * n 4.5e-38 absolute. Returns -1 when cdf_step_is_sure leaves the token open
 * (the double tier then answers). */
static int32_t draw_cdf_float(gemma3_sampler *s, const float *l, float lmax, double u) {
    int n = s->n_cand;
    double *block = s->blocks;
    double total = s->expf_block_sums(l, lmax, n, block);
    double tilt = 0;
    int tilt_at = 0;
    if (s->perturb_float_draw) { /* tests: total = tilt_blocks(...) */
        tilt = 0.9 * G3_APPROX_EXPF_REL_ERR;
        total = tilt_blocks(block, n, u * total, &tilt, &tilt_at);
    }
    double before, w, after;
    int j = walk_blocks(block, n, l, lmax, u * total, s->expf_weight, tilt, tilt_at, &before, &w,
                        &after);
    if (j < 0 || !cdf_step_is_sure(before, w, after, u, g3_expf_block_sums_rel(n), n * 4.6e-38, n))
        return -1;
    s->float_tier_draws++;
    return (s->cand_lazy ? s->iota : s->cand)[j];
}

/* The double tier: weights g3_approx_weight (within G3_APPROX_EXP_REL_ERR, or 3.3e-308 absolute
 * where clamped) summed in double lanes per block (n 2^-53). */
static int32_t draw_cdf_fast(gemma3_sampler *s, const float *l, float lmax, double u) {
    int n = s->n_cand;
    double total = s->exp_block_sums(l, lmax, n, s->blocks); /* the weights are not stored */
    double before, w, after;
    int j = walk_blocks(s->blocks, n, l, lmax, u * total, g3_approx_weight, 0, 0, &before, &w,
                        &after);
    double rel = G3_APPROX_EXP_REL_ERR + 4 * (double)n * 0x1p-53;
    if (j < 0 || !cdf_step_is_sure(before, w, after, u, rel, n * 3.3e-308, n)) return -1;
    return (s->cand_lazy ? s->iota : s->cand)[j];
}

/* Inverse-CDF draw over the list: the first candidate whose running weight EXCEEDS u * Z (strict,
 * so a zero-weight token is never picked); the last positive-weight one if rounding leaves the
 * walk short. Returns -1 when no candidate has weight. Long lists try the fast walk first. */
static int32_t draw_cdf(gemma3_sampler *s, int64_t pos) {
    double u = g3_uniform(g3_rng_bits(g3_rng_key(s->seed, pos), G3_RNG_DRAW, 0));
    if (s->typ.on) { /* typical's set, walked in typical's order from the rank view */
        int32_t tok = s->exact_draw_only ? -1 : g3_rank_draw_typical(s, u);
        s->typ_fast_draws += tok >= 0;
        if (tok >= 0) return tok;
        typical_settle(s);
    }
    int n = s->n_cand;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return -1;
    if (s->win.on) { /* a window walks from the rank view, else it is written out */
        int32_t tok = s->exact_draw_only ? -1 : g3_rank_draw_cdf(s, u);
        if (tok >= 0) return tok;
        g3_cand_materialise(s);
    }
    const int32_t *c = s->cand_lazy ? s->iota : s->cand;
    if (n >= FAST_DRAW_MIN && !s->exact_draw_only) {
        const float *l = s->logits; /* the list's logits in list order */
        if (!(s->id_order && n == s->n_vocab)) {
            float *g = s->gathered;
            for (int j = 0; j < n; j++) g[j] = l[c[j]];
            l = g;
        }
        int32_t tok = s->skip_float_draw ? -1 : draw_cdf_float(s, l, lmax, u);
        if (tok < 0) tok = draw_cdf_fast(s, l, lmax, u);
        if (tok >= 0) return tok;
    }
    double z = 0;
    for (int j = 0; j < n; j++) z += s->w[j] = exp((double)s->logits[c[j]] - lmax);
    double target = u * z;
    double cum = 0;
    int last = -1;
    for (int j = 0; j < n; j++) {
        if (s->w[j] <= 0) continue;
        cum += s->w[j];
        last = j;
        if (cum > target) return c[j];
    }
    return last >= 0 ? c[last] : -1;
}


/* 1 when pass[j..j+32) holds no token (tested as four 8-byte words): the screen rejects nearly
 * every token of a vocabulary, so the draw skips 32 at a time. */
static int none_passed_32(const uint8_t *pass) {
    uint64_t w[4];
    memcpy(w, pass, sizeof w);
    return (w[0] | w[1] | w[2] | w[3]) == 0;
}

enum { GUMBEL_CHUNK = 256 };

/* The screen's threshold for the current best value: fl32(best - 1/64). The screen computes
 * (l - lmax) + g3_gumbel_upper(b) in float; a token that can win or tie has
 * d + G >= best - 2^-52 |best| with |best| < 23 (best is the noise of a token plus d <= 0, and
 * the noise lies in [-3.1, 22.9]), hence |d| < 26 and g3_gumbel_upper <= 111, so the float
 * roundings of l - lmax, of the bound, of their sum and of this threshold move the comparison
 * by less than 2^-24 * 4 * 140 < 4e-5, far inside the 1/64 slack: such a token always passes. */
static float gumbel_screen_threshold(double best) { return (float)(best - 0.015625); }

/* Whether id is one of list[0..n). */
static int listed(const int32_t *list, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (list[i] == id) return 1;
    return 0;
}

/* A token's Gumbel noise, and its value relative to the maximum lmax: what the draw compares
 * (gumbel_sum from the noise, gumbel_value from the key); the greater value wins, a tie goes to
 * the lower id (gumbel_beats). */
static double gumbel_noise(uint64_t key, int32_t id) {
    return g3_gumbel(g3_rng_bits(key, G3_RNG_GUMBEL, (uint32_t)id));
}
static double gumbel_sum(float l, float lmax, double noise) {
    return ((double)l - (double)lmax) + noise;
}
static double gumbel_value(const gemma3_sampler *s, uint64_t key, float lmax, int32_t id) {
    return gumbel_sum(s->logits[id], lmax, gumbel_noise(key, id));
}
static int gumbel_beats(double v, int32_t id, double best_v, int32_t best) {
    return v > best_v || (v == best_v && id < best);
}

/* A value below which the Gumbel-max over typical's pending set, relative to the vocabulary's
 * maximum, lies with probability e^(-e^4) < 2e-23: it is ln W + G with W > w_lo its weight and
 * G standard Gumbel. The draw's first threshold, so that it needs no token to start from (the
 * set's top, which would cost a scan of the bucket array); not below -23, where the screen's
 * bound on its roundings holds (gumbel_screen_threshold). */
static double pending_floor(const gemma3_sampler *s) { return fmax(log(s->typ.w_lo) - 4, -23); }

/* Whether the winner of typical's pending set (best, value best_v, relative to the vocabulary's
 * maximum) stands: rival is the best of the other values computed, those of the tokens the
 * bracket cannot tell among them (were one of those ahead, the set would have to be found).
 * It stands when it is a token (not the floor) and leads the rival by more than the other
 * reference's roundings can take, so that it is also the winner relative to the set's own
 * maximum, as the exact draw compares. Each value fl(fl(l - ref) + G)
 * errs by at most 2^-52 (|l - ref| + |v|) <= 2^-52 (2 |v| + 26) (G in [-3.2, 23]), relative
 * to the set's maximum (between l and the vocabulary's) by at most 2^-52 (3 |v| + 52): the four
 * roundings of two values lie within 2^-49 (|best_v| + |rival| + 32), and a value below the
 * rival leads by its distance to the rival more than its larger magnitude adds. The screen's
 * rejects lie 1/64 below. */
static int pending_winner_stands(int32_t best, double best_v, double rival) {
    if (best < 0) return 0;
    return rival == -INFINITY || best_v - rival > 0x1p-46 * (fabs(best_v) + fabs(rival) + 32);
}

/* Gumbel-max over the list: argmax(l_i + G_i), G_i from (seed, position, token id), ties to the
 * lowest id. A vectorised screen (g3_gumbel_screen_n: the random bits, and the bound
 * g3_gumbel_upper on the noise they can give, 16 tokens at a time) passes every token that
 * could still reach the best value so far; only those take the two logs. The n_skip ids of
 * skip are left out; start, when not -1, is a token of the rest to begin from (else the first
 * of the total order). *second (not NULL) gets the best value among the other tokens whose
 * values were computed (-inf if none); every other token's lies more than 1/64 - 4e-5 below
 * the winner's (gumbel_screen_threshold). Over typical's pending set: the winner of the tokens
 * surely in it, relative to the vocabulary's maximum and from a floor (pending_floor) instead of
 * the set's top, or -3 when the winner does not stand (pending_winner_stands: a token the
 * bracket cannot tell comes near it or ahead, or it leads too narrowly). */
static int32_t draw_gumbel_skipping(gemma3_sampler *s, int64_t pos, const int32_t *skip,
                                    int n_skip, int32_t start, double *second) {
    const float *l = s->logits;
    int n = s->n_cand;
    if (n == 0) return -1;
    /* the list is 0..n-1, or a window of it or typical's set: logits read in place */
    int implicit = s->win.on || s->typ.on, full = implicit || (s->id_order && n == s->n_vocab);
    int pending = s->typ.on && s->typ.pending; /* its top unknown: from the vocabulary's max */
    if (implicit) n = s->n_vocab;
    const int32_t *ids = full ? s->iota : s->cand;
    float lmax_f = pending ? s->view_lmax : g3_cand_max(s);
    if (lmax_f == -INFINITY) return -1;
    int32_t top = -1; /* the first token of the total order: the lowest id at the maximum */
    if (start >= 0) {
        top = start;
    } else if (implicit) { /* a pending set's first is -1: the draw starts from a floor */
        top = s->win.on ? s->win.first : s->typ.first;
    } else if (full) {
        top = first_max(s, l, n, lmax_f);
    } else {
        for (int j = 0; j < n; j++)
            if (l[ids[j]] == lmax_f && (top < 0 || ids[j] < top)) top = ids[j];
    }
    /* relative to the max, so that the noise is not lost in the rounding of a huge logit */
    uint64_t key = g3_rng_key(s->seed, pos);
    int32_t best = top;
    double best_v = pending ? pending_floor(s) : gumbel_value(s, key, lmax_f, top),
           second_v = -INFINITY;
    double open_v = -INFINITY; /* the best of a pending set's tokens it cannot tell */
    uint8_t pass[GUMBEL_CHUNK];
    uint64_t hashes[GUMBEL_CHUNK];
    float *g = s->gathered;
    for (int c = 0; c < n; c += GUMBEL_CHUNK) {
        int m = n - c < GUMBEL_CHUNK ? n - c : GUMBEL_CHUNK;
        const float *lc = l + c;
        const uint64_t *hc = s->gumbel_hash + c;
        if (!full) { /* the chunk's logits and hashes in list order */
            for (int j = 0; j < m; j++) {
                g[j] = l[ids[c + j]];
                hashes[j] = s->gumbel_hash[ids[c + j]];
            }
            lc = g;
            hc = hashes;
        }
        /* the threshold of the chunk's start: best only grows, so it stays conservative */
        s->gumbel_screen_n(key, hc, lc, lmax_f, gumbel_screen_threshold(best_v), pass, m);
        for (int j = 0; j < m; j++) {
            if (j % 32 == 0 && j + 32 <= m && none_passed_32(pass + j)) {
                j += 31; /* 32 rejected tokens at once */
                continue;
            }
            if (!pass[j] || ids[c + j] == top) continue;
            int32_t id = ids[c + j];
            int in = implicit ? g3_implicit_side(s, lc[j], id) : 1;
            if (in == 0 || (n_skip > 0 && listed(skip, n_skip, id))) continue;
            if (in < 0) { /* what the winner must lead, or the set be found */
                open_v = fmax(open_v, gumbel_value(s, key, lmax_f, id));
                continue;
            }
            double v = gumbel_value(s, key, lmax_f, id);
            if (gumbel_beats(v, id, best_v, best)) {
                second_v = best_v;
                best_v = v;
                best = id;
            } else if (v > second_v) {
                second_v = v;
            }
        }
    }
    if (pending && ((s->view_open & G3_VIEW_OPEN_TYPICAL_WINNER) ||
                    !pending_winner_stands(best, best_v, fmax(second_v, open_v))))
        return -3;
    s->typ_fast_draws += implicit && start < 0 && s->typ.on;
    s->typ_pending_draws += pending;
    if (second) *second = second_v;
    return best;
}

/* The tokens the checking draw's screen passed, with their noise, and the best of them so far
 * (lead, an index into ids) with its value relative to the current reference. */
struct gumbel_kept {
    int32_t *ids;
    double *noise;
    int n, cap, lead;
    double lead_v;
};

/* Keeps token id with its noise and makes it the lead when its value relative to ref beats the
 * lead's; 0 when the cap is reached (a token is kept at most twice, as a new maximum and as
 * passing the screen, and the screen passes few). */
static int keep_gumbel(struct gumbel_kept *k, uint64_t key, const float *l, float ref,
                       int32_t id) {
    if (k->n == k->cap) return 0;
    k->ids[k->n] = id;
    k->noise[k->n] = gumbel_noise(key, id);
    double v = gumbel_sum(l[id], ref, k->noise[k->n]);
    if (v > k->lead_v) {
        k->lead_v = v;
        k->lead = k->n;
    }
    k->n++;
    return 1;
}

/* The Gumbel draw over the whole vocabulary of unchecked logits, in one pass instead of the
 * check's (or temperature's dividing copy's, when it left its division here: defer_divide)
 * and then the screen's; the next block's logits are fetched while this one is screened, so
 * the read of a vector that is not in cache hides behind the hashing. Each block is checked
 * (or divided into s->own) and its maximum taken, then screened relative to the maximum so
 * far, ref: every screened token has l <= ref <= the final maximum, so the bounds of
 * gumbel_screen_threshold hold as they do relative to the maximum, and a token the screen
 * rejects lies more than 1/64 - 4e-5 below the best value so far: it cannot win or tie. The
 * tokens it passes keep their noise (s->ids_tmp, s->w); the winner is chosen among them at the
 * end, relative to the final maximum, as the exact draw compares. The maximum and its first
 * position are left known, as the check leaves them. Returns -2, the logits as they were, at a
 * NaN or an infinity (or should the passed tokens not fit). */
static int32_t draw_gumbel_checking(gemma3_sampler *s, int64_t pos) {
    const float *src = s->logits; /* the caller's; divided into s->own first when deferred */
    float t = s->defer_divide, *dst = t > 0.0f ? s->own : NULL;
    const float *l = dst ? dst : src;
    int n = s->n_vocab, block = s->check_block;
    struct gumbel_kept k = {s->ids_tmp, s->w, 0, n, -1, -INFINITY};
    uint64_t key = g3_rng_key(s->seed, pos);
    float ref = -INFINITY;
    int32_t top = -1;
    uint8_t pass[GUMBEL_CHUNK];
    for (int b0 = 0; b0 < n; b0 += block) {
        int nb = n - b0 < block ? n - b0 : block, bfirst;
        float bmax;
        int clean = dst ? s->copy_divide(dst + b0, src + b0, nb, t, &bmax, &bfirst)
                        : s->check_max(src + b0, nb, &bmax, &bfirst);
        if (!clean) return -2;
        if (bmax > ref) { /* a new maximum, valued first; the lead's value moves down */
            ref = bmax;
            top = b0 + bfirst;
            if (k.lead >= 0) k.lead_v = gumbel_sum(l[k.ids[k.lead]], ref, k.noise[k.lead]);
            if (!keep_gumbel(&k, key, l, ref, top)) return -2;
        }
        for (int c = b0; c < b0 + nb; c += GUMBEL_CHUNK) {
            int m = b0 + nb - c < GUMBEL_CHUNK ? b0 + nb - c : GUMBEL_CHUNK;
            for (int j = 0; j < GUMBEL_CHUNK && c + block + j < n; j += 16)
                __builtin_prefetch(src + c + block + j); /* the next block's check */
            s->gumbel_screen_n(key, s->gumbel_hash + c, l + c, ref,
                               gumbel_screen_threshold(k.lead_v), pass, m);
            for (int j = 0; j < m; j++) {
                if (j % 32 == 0 && j + 32 <= m && none_passed_32(pass + j)) {
                    j += 31;
                    continue;
                }
                if (pass[j] && !keep_gumbel(&k, key, l, ref, c + j)) return -2;
            }
        }
    }
    int32_t best = -1;
    double best_v = -INFINITY;
    for (int j = 0; j < k.n; j++) {
        double v = gumbel_sum(l[k.ids[j]], ref, k.noise[j]);
        if (best < 0 || gumbel_beats(v, k.ids[j], best_v, best)) {
            best_v = v;
            best = k.ids[j];
        }
    }
    if (dst) {
        s->logits = dst;
        s->defer_divide = 0;
    }
    s->unchecked = 0;
    s->max_known = 1;
    s->max_value = ref;
    s->max_first = top;
    return best;
}

/* The Gumbel draw; the logits checked first (on the way, over a whole vocabulary). */
static int32_t draw_gumbel(gemma3_sampler *s, int64_t pos) {
    if (whole_list(s) && s->unchecked) {
        int32_t tok = draw_gumbel_checking(s, pos);
        if (tok != -2) return tok;
    }
    if (s->defer_divide > 0.0f) { /* a NaN or an infinity: the rules, then the division */
        float t = s->defer_divide;
        s->defer_divide = 0;
        divide_logits(s, t);
    }
    check_finite(s);
    int32_t tok = draw_gumbel_skipping(s, pos, NULL, 0, -1, NULL);
    if (tok != -3) return tok;
    /* typical's pending set: a token the bracket cannot tell could win, or the winner found
     * relative to the vocabulary's maximum might not be the one relative to the set's: the set
     * first, then the draw from its top */
    if (g3_rank_typical_resolve(s))
        typical_gumbel_top(s);
    else
        typical_settle(s);
    return draw_gumbel_skipping(s, pos, NULL, 0, -1, NULL);
}

static int32_t draw(gemma3_sampler *s, int64_t pos) {
    return gumbel_mode(s) ? draw_gumbel(s, pos) : draw_cdf(s, pos);
}

/* ================================ one call ================================================== */

/* The allowed-ids mask (a grammar's): every id without its bit gets -inf, 32 at a time. */
static void apply_mask(float *l, const uint32_t *allowed, int n) {
    for (int w = 0; w * 32 < n; w++) {
        uint32_t m = allowed[w];
        if (m == 0xFFFFFFFFu) continue;
        int end = n - w * 32 < 32 ? n - w * 32 : 32;
        for (int b = 0; b < end; b++)
            if (!(m >> b & 1u)) l[w * 32 + b] = -INFINITY;
    }
}

/* Takes the caller's logits as the working logits (read-only and unchecked: check_finite and
 * writable_logits), applies logit bias, --ignore-eos, the allowed-ids mask (if any) and the
 * NaN/+inf rules, and lists every token as a candidate (implicitly: g3_cand_materialise writes
 * the list out when needed). */
static void prepare(gemma3_sampler *s, const float *logits, const uint32_t *allowed) {
    const gemma3_sampler_params *p = &s->p;
    int V = s->n_vocab;
    s->logits = logits;
    s->unchecked = 1;
    s->defer_divide = 0;
    logits_rewritten(s);
    list_whole_vocabulary(s);
    if (p->n_logit_bias == 0 && !(p->ignore_eos && p->n_eos > 0) && !allowed) return;
    float *l = s->own;
    int clean = s->copy_check(l, logits, V);
    s->logits = l;
    s->unchecked = 0;
    for (int i = 0; i < p->n_logit_bias; i++) {
        int32_t id = p->logit_bias[i].token;
        float b = p->logit_bias[i].bias;
        l[id] = b == -INFINITY ? -INFINITY : l[id] + b;
        clean &= !isnan(l[id]) && l[id] != INFINITY;
    }
    if (p->ignore_eos)
        for (int i = 0; i < p->n_eos; i++) l[p->eos_ids[i]] = -INFINITY;
    if (allowed) apply_mask(l, allowed, V);
    /* Every token stays in the list, bans (-inf) included, as in llama.cpp: no filter keeps one
     * over a finite logit and neither draw gives it weight. Only NaN and +inf need rewriting. */
    if (!clean) fix_non_finite(s);
}

static int is_allowed(const uint32_t *allowed, int i) {
    return !allowed || (allowed[i >> 5] >> (i & 31) & 1u);
}

/* Whether id is banned outright: a logit bias of -inf, or an end id under --ignore-eos. */
static int is_banned(const gemma3_sampler_params *p, int32_t id) {
    for (int i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token == id && p->logit_bias[i].bias == -INFINITY) return 1;
    for (int i = 0; p->ignore_eos && i < p->n_eos; i++)
        if (p->eos_ids[i] == id) return 1;
    return 0;
}

/* When nothing finite survives: the argmax of the caller's raw logits over the allowed ids that
 * are not banned, NaN ignored, lowest id; the lowest such id if all are NaN. A ban is never
 * overridden: when the mask and the bans leave no id, an error. */
static int32_t fallback(const gemma3_sampler *s, const float *logits, const uint32_t *allowed) {
    int32_t best = -1;
    float bv = NAN;
    for (int i = 0; i < s->n_vocab; i++) {
        if (!is_allowed(allowed, i)) continue;
        int better = best < 0 || (!isnan(logits[i]) && (isnan(bv) || logits[i] > bv));
        if (!better || is_banned(&s->p, i)) continue; /* the bans are read for candidates only */
        best = i;
        bv = logits[i];
    }
    return best >= 0 ? best
                     : g3_error(GEMMA3_ERR_ARG, "sampler: no token is left: the mask and the "
                                                "bans (logit bias -inf, ignore-eos) exclude "
                                                "every id");
}

/* Whether sampler t has work to do: the parameter tests each one starts with (a sampler that
 * is off returns before it reads the list). */
static int sampler_on(const gemma3_sampler_params *p, int t) {
    switch (t) {
    case GEMMA3_SAMPLER_PENALTIES:
        return p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
               p->presence_penalty != 0.0f;
    case GEMMA3_SAMPLER_DRY: return p->dry_multiplier != 0.0f;
    case GEMMA3_SAMPLER_TOP_K: return p->top_k > 0;
    case GEMMA3_SAMPLER_TEMPERATURE: return p->temperature != 1.0f || p->dynatemp_range > 0.0f;
    case GEMMA3_SAMPLER_TOP_N_SIGMA: return p->top_n_sigma > 0.0f;
    case GEMMA3_SAMPLER_TYPICAL_P: return p->typical_p < 1.0f;
    case GEMMA3_SAMPLER_TOP_P: return p->top_p < 1.0f;
    case GEMMA3_SAMPLER_MIN_P: return p->min_p > 0.0f;
    case GEMMA3_SAMPLER_XTC: return p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f;
    default: return 1;
    }
}

/* Whether a sampler after position i of the chain may change the list or the logits. */
static int acts_after(const gemma3_sampler_params *p, int i) {
    for (int j = i + 1; j < p->n_samplers; j++)
        if (sampler_on(p, p->samplers[j])) return 1;
    return 0;
}

/* Runs the chain; greedy = 1 only applies the samplers that rewrite logits; draws = 1 when the
 * draw follows (not for the kept set, which must be the list itself). */
static void run_chain(gemma3_sampler *s, int64_t pos, int greedy, int draws) {
    const gemma3_sampler_params *p = &s->p;
    for (int i = 0; i < p->n_samplers && s->n_cand > 0; i++) {
        int t = p->samplers[i];
        if (greedy && t != GEMMA3_SAMPLER_PENALTIES && t != GEMMA3_SAMPLER_DRY) continue;
        if (s->win.on && sampler_on(p, t)) g3_cand_materialise(s); /* only the draws read one */
        /* an implicit list stays implicit: every sampler reads it as iota (a megabyte's copy
         * for nothing at 262k tokens) and writes its own list out when it keeps fewer.
         * Penalties, DRY and temperature check as they copy; top-k's heap as it scans;
         * top-p's Gumbel draw as it screens */
        if (t != GEMMA3_SAMPLER_PENALTIES && t != GEMMA3_SAMPLER_DRY &&
            t != GEMMA3_SAMPLER_TOP_K && t != GEMMA3_SAMPLER_TEMPERATURE &&
            t != GEMMA3_SAMPLER_TOP_P && sampler_on(p, t))
            check_finite(s);
        switch (t) {
        case GEMMA3_SAMPLER_PENALTIES: penalties(s); break;
        case GEMMA3_SAMPLER_DRY: dry(s); break;
        case GEMMA3_SAMPLER_TOP_N_SIGMA: top_n_sigma(s, p->top_n_sigma); break;
        case GEMMA3_SAMPLER_TOP_K: top_k(s, p->top_k); break;
        case GEMMA3_SAMPLER_TYPICAL_P: typical(s, p->typical_p, !acts_after(p, i), draws); break;
        case GEMMA3_SAMPLER_TOP_P: top_p(s, p->top_p, pos, draws && !acts_after(p, i)); break;
        case GEMMA3_SAMPLER_MIN_P: min_p(s, p->min_p); break;
        case GEMMA3_SAMPLER_XTC: xtc(s, pos, draws && !acts_after(p, i)); break;
        case GEMMA3_SAMPLER_TEMPERATURE:
            temperature(s, p->temperature, draws && !acts_after(p, i));
            break;
        }
    }
}

/* Mirostat v2's limit lmax + ln Z - mu ln 2 (keep -log2 p <= mu), Z in id order, by tier: 0
 * from the float tier's Z' (within G3_APPROX_EXPF_REL_ERR + 4 2^-24 + n 2^-53 of the true sum,
 * draw_cdf_float), 1 from the double tier's (g3_approx_exp: 2 G3_APPROX_EXP_REL_ERR), 2 exact.
 * *margin gets twice the bound on the distance to the exact limit (the exact sum errs by
 * n 2^-53; ln, and the two additions, round by 2^-52 of their operands each), 0 at tier 2. */
static double surprise_limit(gemma3_sampler *s, float lmax, int tier, double *margin) {
    int n = s->n_cand;
    double mu_ln2 = (double)s->mu * log(2.0);
    if (tier == 2) {
        *margin = 0;
        return (double)lmax + log(g3_cand_z(s, lmax)) - mu_ln2;
    }
    double z = tier == 0 ? s->expf_block_sums(s->logits, lmax, n, s->blocks)
                         : s->exp_block_sums(s->logits, lmax, n, s->blocks);
    double rel = 2 * (tier == 0 ? g3_expf_block_sums_rel(n)
                                : G3_APPROX_EXP_REL_ERR + (double)n * 0x1p-53);
    *margin = 2 * (1.01 * rel + 0x1p-50 * (fabs((double)lmax) + fabs(log(z)) + fabs(mu_ln2) + 1));
    return (double)lmax + log(z) - mu_ln2;
}

/* Mirostat (after bias and plain temperature). v1 fits a Zipf exponent to the top 100
 * probabilities and keeps the top k that would give surprise mu; v2 keeps tokens whose surprise
 * -log2 p is at most mu. Both draw, then move mu towards tau by the observed surprise. */
static int32_t mirostat(gemma3_sampler *s, int64_t pos) {
    const gemma3_sampler_params *p = &s->p;
    float t = p->temperature;
    if (t != 1.0f) divide_logits(s, t);
    s->sorted = 0;
    float lmax = g3_cand_max(s);
    if (lmax == -INFINITY) return -1;
    if (p->mirostat == 1) {
        int m = s->n_cand < 100 ? s->n_cand : 100;
        g3_cand_select_top_checked(s, m); /* the logits were checked before mirostat */
        double sum_tb = 0, sum_tt = 0;
        for (int i = 0; i + 1 < m; i++) {
            double ti = log((double)(i + 2) / (double)(i + 1));
            double bi = (double)s->logits[s->ids_tmp[i]] -
                        (double)s->logits[s->ids_tmp[i + 1]]; /* ln(p_i/p_i+1) */
            if (!isfinite(bi)) break;                         /* banned tokens reached */
            sum_tb += ti * bi;
            sum_tt += ti * ti;
        }
        double s_hat = sum_tt > 0 ? sum_tb / sum_tt : 1.0;
        double eps = s_hat - 1;
        double k =
            pow(eps * pow(2.0, (double)s->mu) / (1 - pow((double)s->n_vocab, -eps)), 1 / s_hat);
        int ki = !(k >= 1) ? 1 : k >= (double)s->n_cand ? s->n_cand : (int)k;
        if (ki < s->n_cand && ki <= m) {
            g3_cand_keep_selected(s, ki); /* top_k's answer: the heap's first ki, in order */
        } else if (ki < s->n_cand && ki <= s->n_cand / 64) {
            /* top_k's set, in the total order as its heap leaves it (its unsorted Gumbel path
             * keeps the same set: neither the draw nor the sums below depend on the order) */
            g3_cand_select_top_checked(s, ki);
            g3_cand_keep_selected(s, ki);
        } else {
            top_k(s, ki);
        }
    } else {
        /* An approximate limit (a whole vocabulary only) keeps l >= lim - margin; when every
         * kept logit also reaches lim + margin, no logit lies between, and the exact limit
         * keeps the same tokens. Otherwise the list, all of 0..n-1, is put back (the kept ids
         * overwrote it) and the next tier runs. */
        int n0 = s->n_cand, lazy0 = s->cand_lazy;
        int tier = s->n_cand >= FAST_DRAW_MIN && s->id_order && s->n_cand == s->n_vocab ? 0 : 2;
        for (;; tier++) {
            double margin, lim = surprise_limit(s, lmax, tier, &margin);
            keep_at_least(s, lim - margin);
            int settled = 1;
            for (int j = 0; j < s->n_cand && settled; j++)
                settled = (double)s->logits[s->cand[j]] >= lim + margin;
            if (settled || tier == 2) break;
            s->n_cand = n0;
            s->cand_lazy = lazy0 = 1;
        }
        if (s->n_cand == 0) { /* nothing was written: the list is as it was */
            s->n_cand = n0;
            s->cand_lazy = lazy0;
            keep_argmax(s);
        }
    }
    int32_t tok = draw(s, pos);
    if (tok < 0) return tok;
    lmax = g3_cand_max(s);
    double pk = exp((double)s->logits[tok] - lmax) / g3_cand_z(s, lmax);
    s->mu -= p->mirostat_eta * (float)(-log2(pk) - p->mirostat_tau);
    return tok;
}

int32_t gemma3_sampler_sample(gemma3_sampler *s, const float *logits, int64_t position) {
    return gemma3_sampler_sample_masked(s, logits, position, NULL);
}

int gemma3_sampler_mask_commutes(const gemma3_sampler *s) { return s && s->p.temperature == 0.0f; }
int gemma3_sampler_n_vocab(const gemma3_sampler *s) { return s ? s->n_vocab : 0; }

int32_t gemma3_sampler_sample_masked(gemma3_sampler *s, const float *logits, int64_t position,
                                     const uint32_t *allowed) {
    if (!s || !logits) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL argument");
    prepare(s, logits, allowed);
    int32_t tok = -1;
    if (s->n_cand > 0) {
        if (s->p.temperature == 0.0f) {
            run_chain(s, position, 1, 0);
            check_finite(s);
            keep_argmax(s); /* reads an implicit list straight */
            if (s->n_cand == 1 && s->logits[s->cand[0]] != -INFINITY) tok = s->cand[0];
        } else if (s->p.mirostat) {
            check_finite(s);
            tok = mirostat(s, position); /* reads an implicit list straight */
        } else {
            run_chain(s, position, 0, 1);
            if (!(s->n_cand > 1 && gumbel_mode(s))) check_finite(s); /* else the draw checks */
            if (s->n_cand == 1) g3_cand_materialise(s); /* the draws read an implicit list */
            if (s->n_cand == 1 && s->logits[s->cand[0]] != -INFINITY)
                tok = s->cand[0]; /* no RNG */
            else if (s->n_cand > 1)
                tok = draw(s, position);
        }
    }
    return tok >= 0 ? tok : fallback(s, logits, allowed);
}

int g3_sampler_set_params(gemma3_sampler *s, const gemma3_sampler_params *params) {
    int rc = validate(params, s->n_vocab);
    if (rc != GEMMA3_OK) return rc;
    int rep = resolve_last_n(params, params->repeat_last_n);
    int dry = resolve_last_n(params, params->dry_penalty_last_n);
    if (rep > s->hist_cap || dry > s->hist_cap)
        return g3_error(GEMMA3_ERR_ARG, "sampler: a last_n window larger than at init (%d)",
                        s->hist_cap);
    uint32_t seed = params->seed == GEMMA3_SEED_RANDOM ? s->seed : params->seed;
    s->p = *params;
    s->seed = seed;
    s->mu = 2.0f * params->mirostat_tau;
    return GEMMA3_OK;
}

int g3_sampler_kept(gemma3_sampler *s, const float *logits, int64_t position, int32_t *ids) {
    if (!s || !logits || !ids) return g3_error(GEMMA3_ERR_ARG, "sampler: NULL argument");
    if (s->p.temperature == 0.0f || s->p.mirostat)
        return g3_error(GEMMA3_ERR_ARG, "sampler: kept set not defined for greedy or mirostat");
    prepare(s, logits, NULL);
    run_chain(s, position, 0, 0);
    check_finite(s);
    g3_cand_materialise(s);
    int n = 0;
    for (int j = 0; j < s->n_cand; j++)
        if (s->logits[s->cand[j]] != -INFINITY) ids[n++] = s->cand[j];
    g3_radix_sort_ids(ids, s->ids_tmp, n);
    return n;
}
