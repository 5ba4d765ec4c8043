/* cli/sampling-options.c - llama.cpp's sampling flags for the generate/chat commands as one option
 * table into gemma3_sampler_params; generation_config.json defaults; DRY breaker strings. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

_Static_assert(offsetof(cli_sampling, params) == 0, "the sampler range table uses params offsets");

/* "ID(+|-)BIAS", BIAS a number or inf: "15043+1", "15043-inf", "7-0.5". */
static int parse_logit_bias(const char *flag, const char *val, gemma3_sampler_params *p) {
    char *end;
    errno = 0;
    long id = strtol(val, &end, 10);
    if (errno || end == val || isspace((unsigned char)val[0]) || id < 0 || id > 2147483647L || (*end != '+' && *end != '-'))
        return cli_usage_error("%s: '%s' is not TOKEN_ID(+|-)BIAS, e.g. 15043+1 or 15043-inf", flag,
                               val);
    const char *num = end; /* keep the sign */
    double b;
    if (strcmp(num + 1, "inf") == 0 || strcmp(num + 1, "INF") == 0) {
        b = *num == '-' ? -INFINITY : INFINITY;
    } else {
        errno = 0;
        b = strtod(num, &end); /* num[1] must be a digit (checked below): no blank */
        if (errno || end == num + 1 || *end != '\0' || !isfinite(b) ||
            !(num[1] >= '0' && num[1] <= '9') || fabs(b) > 1e6)
            return cli_usage_error("%s: '%s': the bias must be a number in [-1e6, 1e6] or inf",
                                   flag, val);
    }
    if (p->n_logit_bias == GEMMA3_SAMPLER_MAX_BIAS)
        return cli_usage_error("%s: more than %d biases", flag, GEMMA3_SAMPLER_MAX_BIAS);
    p->logit_bias[p->n_logit_bias].token = (int32_t)id;
    p->logit_bias[p->n_logit_bias].bias = (float)b;
    p->n_logit_bias++;
    return 0;
}

static int parse_seed(const char *flag, const char *val, uint32_t *seed) {
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (errno || end == val || isspace((unsigned char)val[0]) || *end != '\0' || v < -1 || v > 4294967295LL)
        return cli_usage_error("%s: '%s' is not an integer in [-1, 4294967295] (-1: random)", flag,
                               val);
    *seed = v == -1 ? GEMMA3_SEED_RANDOM : (uint32_t)v;
    return 0;
}

static int parse_bias(const char *flag, const char *val, void *group) {
    return parse_logit_bias(flag, val, &((cli_sampling *)group)->params);
}

static int parse_seed_flag(const char *flag, const char *val, void *group) {
    return parse_seed(flag, val, &((cli_sampling *)group)->params.seed);
}

static int parse_chain(const char *flag, const char *val, void *group) {
    gemma3_sampler_params *p = &((cli_sampling *)group)->params;
    int rc = strcmp(flag, "--samplers") == 0 ? gemma3_sampler_chain_from_names(val, p)
                                             : gemma3_sampler_chain_from_seq(val, p);
    return rc == GEMMA3_OK ? 0 : cli_usage_error("%s: %s", flag, gemma3_last_error());
}

static int parse_breaker(const char *flag, const char *val, void *group) {
    cli_sampling *cs = group;
    if (cs->n_dry_breakers < 0) cs->n_dry_breakers = 0; /* the first one replaces the defaults */
    if (strcmp(val, "none") == 0) {
        cs->n_dry_breakers = 0;
        return 0;
    }
    if (val[0] == '\0') return cli_usage_error("%s: empty breaker", flag);
    if (cs->n_dry_breakers == GEMMA3_SAMPLER_MAX_BREAKERS)
        return cli_usage_error("%s: more than %d breakers", flag, GEMMA3_SAMPLER_MAX_BREAKERS);
    cs->dry_breakers[cs->n_dry_breakers++] = val;
    return 0;
}

/* The samplers' names (letters: 1) in the library's order, from their descriptors
 * (gemma3_sampler_info_get), for --help: "penalties, dry, ..." or "edsk...". */
static const char *sampler_list(char *buf, size_t size, int letters) {
    size_t len = 0;
    buf[0] = '\0';
    for (int t = 0; t < GEMMA3_SAMPLER_N_TYPES && len < size; t++) {
        const gemma3_sampler_info *in = gemma3_sampler_info_get(t);
        int k = letters ? snprintf(buf + len, size - len, "%c", in->letter)
                        : snprintf(buf + len, size - len, "%s%s", t ? ", " : "", in->name);
        len += k > 0 ? (size_t)k : 0;
    }
    return buf;
}

static const char *samplers_help(void) {
    static char help[512];
    char names[400];
    if (!help[0])
        snprintf(help, sizeof help, "chain by name, ';'-separated, or 'llama.cpp' or 'default': %s",
                 sampler_list(names, sizeof names, 0));
    return help;
}

static const char *sampling_seq_help(void) {
    static char help[160];
    char letters[GEMMA3_SAMPLER_N_TYPES + 1];
    if (!help[0])
        snprintf(help, sizeof help,
                 "chain by letter, one per name of --samplers: %s (llama.cpp: %s)",
                 sampler_list(letters, sizeof letters, 1), GEMMA3_SAMPLER_SEQ_LLAMA);
    return help;
}

/* The sampling group's rows: the seed, one row per sampler parameter that has a flag (its
 * spellings, help line, range and default are the library's: gemma3_sampler_info_get), the
 * samplers in the default chain's order and then the others, mirostat's (which replaces the
 * chain), then the rows that parse text. Built once, by cli_sampling_init: a sampler added to
 * the library shows here without a line of its own. A flag of a parameter with a
 * generation_config.json key gets a bit of `set`, so that the file does not override it. */
#define P(field) offsetof(cli_sampling, params.field)
static const cli_option first_options[] = {
    {"-s, --seed", "N", CLI_CUSTOM, .parse = parse_seed_flag,
     .help = "RNG seed, -1 = random (printed, to replay the run)", .default_text = "-1"},
};
#define F(field) offsetof(gemma3_sampler_params, field)
static const size_t mirostat_fields[] = {F(mirostat), F(mirostat_eta), F(mirostat_tau)};
#undef F
static const cli_option last_options[] = {
    {"--dry-sequence-breaker", "S", CLI_CUSTOM, .parse = parse_breaker,
     .help = "ends a DRY match (repeatable; 'none')", .default_text = "\\n : \" *"},
    {"-l, --logit-bias", "ID(+|-)B", CLI_CUSTOM, .parse = parse_bias,
     .help = "add B to a logit: 15043+1, 15043-inf (repeatable)"},
    {"--ignore-eos", NULL, CLI_SWITCH, P(ignore_eos), .value = 1,
     .help = "never end on an end-of-generation token"},
    {"--samplers", "LIST", CLI_CUSTOM, .parse = parse_chain, .help_fn = samplers_help},
    {"--sampling-seq, --sampler-seq", "LETTERS", CLI_CUSTOM, .parse = parse_chain,
     .help_fn = sampling_seq_help, .default_text = GEMMA3_SAMPLER_SEQ_DEFAULT},
    {"--sampler-mode", "MODE", CLI_CHOICE, P(mode), .choices = "cdf|gumbel",
     .help = "final draw: inverse CDF or Gumbel-max (same distribution)"},
};
#undef P
/* room for 64 parameters' rows (test-cli-sampling finds a row missing) */
enum { N_LAST = sizeof last_options / sizeof last_options[0],
       MAX_OPTIONS = sizeof first_options / sizeof first_options[0] + 64 + N_LAST };
static cli_option sampling_options[MAX_OPTIONS];

cli_group cli_sampling_group = {
    "sampling (llama.cpp's flags; defaults: generation_config.json, else Gemma's)",
    sampling_options, 0, offsetof(cli_sampling, set)};

/* The row of a library parameter with a flag, at *n (none without a flag). */
static void add_param_row(const gemma3_param_range *r, size_t *n, unsigned *next_bit) {
    if (!r->flags || *n >= MAX_OPTIONS - N_LAST) return;
    cli_option *o = &sampling_options[(*n)++];
    *o = (cli_option){r->flags, "N", CLI_SAMPLER, offsetof(cli_sampling, params) + r->offset,
                      .help = r->help};
    if (r->hf_key && *next_bit) {
        o->given_bit = *next_bit;
        *next_bit <<= 1; /* 0 past the last bit: a later key would be overridden (none is) */
    }
}

static void add_sampler_rows(int type, size_t *n, unsigned *next_bit) {
    const gemma3_sampler_info *in = gemma3_sampler_info_get(type);
    for (int k = 0; k < in->n_params; k++) add_param_row(&in->params[k], n, next_bit);
}

static void build_options(void) {
    size_t n = 0;
    unsigned next_bit = CLI_SAMPLING_SET_FIRST_PARAM;
    int listed[GEMMA3_SAMPLER_N_TYPES] = {0};
    for (size_t k = 0; k < sizeof first_options / sizeof first_options[0]; k++)
        sampling_options[n++] = first_options[k];
    gemma3_sampler_params chain;
    gemma3_sampler_chain_from_seq(GEMMA3_SAMPLER_SEQ_DEFAULT, &chain);
    for (int k = 0; k < chain.n_samplers; k++)
        if (!listed[chain.samplers[k]]++) add_sampler_rows(chain.samplers[k], &n, &next_bit);
    for (int t = 0; t < GEMMA3_SAMPLER_N_TYPES; t++)
        if (!listed[t]++) add_sampler_rows(t, &n, &next_bit);
    for (size_t k = 0; k < sizeof mirostat_fields / sizeof mirostat_fields[0]; k++)
        add_param_row(gemma3_sampler_param_range(mirostat_fields[k]), &n, &next_bit);
    for (size_t k = 0; k < N_LAST; k++) sampling_options[n++] = last_options[k];
    cli_sampling_group.n_options = n;
}

void cli_sampling_init(cli_sampling *cs) {
    if (cli_sampling_group.n_options == 0) build_options();
    memset(cs, 0, sizeof *cs);
    cs->params = gemma3_sampler_default_params();
    cs->n_dry_breakers = -1;
}

int cli_sampling_flag(int argc, char **argv, int *i, cli_sampling *cs, int *matched) {
    return cli_parse_option(&cli_sampling_group, argc, argv, i, cs, matched);
}

void cli_sampling_help(FILE *f) {
    cli_sampling defaults;
    cli_sampling_init(&defaults);
    fprintf(f, "%s:\n", cli_sampling_group.title);
    cli_print_group(&cli_sampling_group, &defaults, f);
}

/* A field generation_config.json must leave as it is: one a flag set (its option's given bit). */
static int given_on_command_line(size_t offset, void *ctx) {
    const cli_sampling *cs = ctx;
    if (offset == offsetof(gemma3_sampler_params, eos_ids))
        return (cs->set & CLI_SAMPLING_SET_EOS) != 0;
    for (size_t i = 0; i < cli_sampling_group.n_options; i++)
        if (sampling_options[i].offset == offsetof(cli_sampling, params) + offset)
            return (cs->set & sampling_options[i].given_bit) != 0;
    return 0;
}

int cli_sampling_load_gen_config(cli_sampling *cs, const char *path) {
    int n_eos = cs->params.n_eos;
    if (gemma3_sampler_params_load_hf(path, &cs->params, given_on_command_line, cs) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    if (cs->params.n_eos != n_eos) cs->set |= CLI_SAMPLING_SET_EOS;
    return 0;
}

int cli_sampling_resolve_breakers(cli_sampling *cs, cli_encode_fn encode, void *ctx) {
    static const char *const defaults[] = {"\n", ":", "\"", "*"};
    const char *const *list = cs->n_dry_breakers < 0 ? defaults : cs->dry_breakers;
    int n = cs->n_dry_breakers < 0 ? 4 : cs->n_dry_breakers;
    gemma3_sampler_params *p = &cs->params;
    p->n_dry_breakers = 0;
    for (int b = 0; b < n; b++) {
        int32_t ids[64];
        int len = encode(ctx, list[b], ids, 64);
        if (len < 0) return cli_fail("--dry-sequence-breaker: cannot tokenize '%s'", list[b]);
        if (len == 0) continue;
        if (len > GEMMA3_SAMPLER_MAX_BREAKER_LEN)
            return cli_usage_error("--dry-sequence-breaker: '%s' is %d tokens, more than %d",
                                   list[b], len, GEMMA3_SAMPLER_MAX_BREAKER_LEN);
        memcpy(p->dry_breakers[p->n_dry_breakers], ids, (size_t)len * sizeof *ids);
        p->dry_breaker_len[p->n_dry_breakers++] = len;
    }
    return 0;
}
