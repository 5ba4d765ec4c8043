/* cli/sampling-options.c - llama.cpp's sampling flags for the generate/chat commands: strict parsing
 * into gemma3_sampler_params, help text, generation_config.json defaults, DRY breaker strings. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_sampling_init(cli_sampling *cs) {
    memset(cs, 0, sizeof *cs);
    cs->params = gemma3_sampler_default_params();
    cs->n_dry_breakers = -1;
}

/* One table row per float flag: name, alias, field, accepted range, what it sets. */
typedef struct {
    const char *name, *alias;
    size_t offset;
    double min, max;
    unsigned set;
} float_flag;

typedef struct {
    const char *name, *alias;
    size_t offset;
    long min, max;
} int_flag;

#define F(field) offsetof(gemma3_sampler_params, field)
static const float_flag float_flags[] = {
    {"--temp", "--temperature", F(temperature), 0, 100, CLI_SAMPLING_SET_TEMP},
    {"--top-p", NULL, F(top_p), 0, 1, CLI_SAMPLING_SET_TOP_P},
    {"--min-p", NULL, F(min_p), 0, 1, CLI_SAMPLING_SET_MIN_P},
    {"--typical", "--typical-p", F(typical_p), 0, 1, 0},
    {"--top-nsigma", "--top-n-sigma", F(top_n_sigma), -1, 100, 0},
    {"--repeat-penalty", NULL, F(repeat_penalty), 0.01, 100, CLI_SAMPLING_SET_REPEAT_PENALTY},
    {"--frequency-penalty", NULL, F(frequency_penalty), -2, 2, 0},
    {"--presence-penalty", NULL, F(presence_penalty), -2, 2, 0},
    {"--dry-multiplier", NULL, F(dry_multiplier), 0, 100, 0},
    {"--dry-base", NULL, F(dry_base), 0, 100, 0},
    {"--xtc-probability", NULL, F(xtc_probability), 0, 1, 0},
    {"--xtc-threshold", NULL, F(xtc_threshold), 0, 1, 0},
    {"--dynatemp-range", NULL, F(dynatemp_range), 0, 100, 0},
    {"--dynatemp-exp", NULL, F(dynatemp_exponent), 0, 100, 0},
    {"--mirostat-lr", NULL, F(mirostat_eta), 0, 1, 0},
    {"--mirostat-ent", NULL, F(mirostat_tau), 0, 100, 0},
};
static const int_flag int_flags[] = {
    {"--top-k", NULL, F(top_k), 0, 2147483647L},
    {"--repeat-last-n", NULL, F(repeat_last_n), -1, 2147483647L},
    {"--dry-allowed-length", NULL, F(dry_allowed_length), 0, 65536},
    {"--dry-penalty-last-n", NULL, F(dry_penalty_last_n), -1, 2147483647L},
    {"--mirostat", NULL, F(mirostat), 0, 2},
};
#undef F

static int is(const char *arg, const char *name, const char *alias) {
    return strcmp(arg, name) == 0 || (alias && strcmp(arg, alias) == 0);
}

/* "ID(+|-)BIAS", BIAS a number or inf: "15043+1", "15043-inf", "7-0.5". */
static int parse_logit_bias(const char *flag, const char *val, gemma3_sampler_params *p) {
    char *end;
    errno = 0;
    long id = strtol(val, &end, 10);
    if (errno || end == val || id < 0 || id > 2147483647L || (*end != '+' && *end != '-'))
        return cli_usage_error("%s: '%s' is not TOKEN_ID(+|-)BIAS, e.g. 15043+1 or 15043-inf", flag,
                               val);
    const char *num = end; /* keep the sign */
    double b;
    if (strcmp(num + 1, "inf") == 0 || strcmp(num + 1, "INF") == 0) {
        b = *num == '-' ? -INFINITY : INFINITY;
    } else {
        errno = 0;
        b = strtod(num, &end);
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
    if (errno || end == val || *end != '\0' || v < -1 || v > 4294967295LL)
        return cli_usage_error("%s: '%s' is not an integer in [-1, 4294967295] (-1: random)", flag,
                               val);
    *seed = v == -1 ? GEMMA3_SEED_RANDOM : (uint32_t)v;
    return 0;
}

int cli_sampling_flag(int argc, char **argv, int *i, cli_sampling *cs, int *matched) {
    const char *arg = argv[*i];
    gemma3_sampler_params *p = &cs->params;
    *matched = 1;
    for (size_t f = 0; f < sizeof float_flags / sizeof float_flags[0]; f++) {
        const float_flag *ff = &float_flags[f];
        if (!is(arg, ff->name, ff->alias)) continue;
        const char *val = cli_value(argc, argv, i);
        if (!val) return CLI_EXIT_USAGE;
        float *dst = (float *)(void *)((char *)p + ff->offset);
        if (cli_parse_float(arg, val, ff->min, ff->max, dst)) return CLI_EXIT_USAGE;
        cs->set |= ff->set;
        return 0;
    }
    for (size_t f = 0; f < sizeof int_flags / sizeof int_flags[0]; f++) {
        const int_flag *fi = &int_flags[f];
        if (!is(arg, fi->name, fi->alias)) continue;
        const char *val = cli_value(argc, argv, i);
        if (!val) return CLI_EXIT_USAGE;
        int *dst = (int *)(void *)((char *)p + fi->offset);
        if (cli_parse_int(arg, val, fi->min, fi->max, dst)) return CLI_EXIT_USAGE;
        if (fi->offset == offsetof(gemma3_sampler_params, top_k)) cs->set |= CLI_SAMPLING_SET_TOP_K;
        return 0;
    }
    if (is(arg, "--ignore-eos", NULL)) {
        p->ignore_eos = 1;
        return 0;
    }
    const char *val;
    if (is(arg, "-l", "--logit-bias")) {
        if (!(val = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        return parse_logit_bias(arg, val, p);
    }
    if (is(arg, "-s", "--seed")) {
        if (!(val = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        return parse_seed(arg, val, &p->seed);
    }
    if (is(arg, "--samplers", NULL) || is(arg, "--sampling-seq", "--sampler-seq")) {
        if (!(val = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        int rc = strcmp(arg, "--samplers") == 0 ? gemma3_sampler_chain_from_names(val, p)
                                                : gemma3_sampler_chain_from_seq(val, p);
        if (rc != GEMMA3_OK) return cli_usage_error("%s: %s", arg, gemma3_last_error());
        return 0;
    }
    if (is(arg, "--sampler-mode", NULL)) {
        if (!(val = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        if (strcmp(val, "cdf") == 0)
            p->mode = GEMMA3_SAMPLER_MODE_CDF;
        else if (strcmp(val, "gumbel") == 0)
            p->mode = GEMMA3_SAMPLER_MODE_GUMBEL;
        else
            return cli_usage_error("%s: '%s' is not one of cdf, gumbel", arg, val);
        return 0;
    }
    if (is(arg, "--dry-sequence-breaker", NULL)) {
        if (!(val = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        if (cs->n_dry_breakers < 0)
            cs->n_dry_breakers = 0; /* the first one replaces the defaults */
        if (strcmp(val, "none") == 0) {
            cs->n_dry_breakers = 0;
            return 0;
        }
        if (val[0] == '\0') return cli_usage_error("%s: empty breaker", arg);
        if (cs->n_dry_breakers == GEMMA3_SAMPLER_MAX_BREAKERS)
            return cli_usage_error("%s: more than %d breakers", arg, GEMMA3_SAMPLER_MAX_BREAKERS);
        cs->dry_breakers[cs->n_dry_breakers++] = val;
        return 0;
    }
    *matched = 0;
    return 0;
}

void cli_sampling_help(FILE *f) {
    static const char *const lines[] = {
        "sampling (llama.cpp's flags; defaults: generation_config.json, else Gemma's):",
        "  -s, --seed N               RNG seed, -1 = random (printed, to replay the run)",
        "  --temp N                   temperature, 0 = greedy (default 1.0)",
        "  --top-k N                  keep the k most likely tokens, 0 = off (default 64)",
        "  --top-p N                  smallest set with mass >= p, 1 = off (default 0.95)",
        "  --min-p N                  drop p < min_p * p_max, 0 = off (default 0)",
        "  --typical N                locally typical sampling, 1 = off",
        "  --top-nsigma N             drop logits below max - n*sigma, -1 = off",
        "  --repeat-penalty N         penalise repeated tokens, 1 = off (0.01..100)",
        "  --repeat-last-n N          tokens penalised, 0 = off, -1 = context (default 64)",
        "  --frequency-penalty N      subtract N * count, 0 = off (-2..2)",
        "  --presence-penalty N       subtract N once if present, 0 = off (-2..2)",
        "  --dry-multiplier N         DRY repetition penalty strength, 0 = off",
        "  --dry-base N               DRY exponential base (default 1.75; < 1 = off)",
        "  --dry-allowed-length N     repeats this long go unpenalised (default 2)",
        "  --dry-penalty-last-n N     DRY window, 0 = off, -1 = context (default -1)",
        "  --dry-sequence-breaker S   ends a DRY match (repeatable; 'none'; default \\n : \" *)",
        "  --xtc-probability N        chance of excluding the top choices, 0 = off",
        "  --xtc-threshold N          XTC probability threshold (default 0.1; > 0.5 = off)",
        "  --dynatemp-range N         dynamic temperature T +- N by entropy, 0 = off",
        "  --dynatemp-exp N           dynamic temperature exponent (default 1)",
        "  --mirostat N               0 off, 1 mirostat, 2 mirostat 2.0 (replaces the chain)",
        "  --mirostat-lr N            mirostat learning rate eta (default 0.1)",
        "  --mirostat-ent N           mirostat target entropy tau (default 5)",
        "  -l, --logit-bias ID(+|-)B  add B to a logit: 15043+1, 15043-inf (repeatable)",
        "  --ignore-eos               never end on an end-of-generation token",
        "  --samplers LIST            chain by name, ';'-separated, or 'llama.cpp':",
        "                             penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature",
        "  --sampling-seq LETTERS     chain by letter (default " GEMMA3_SAMPLER_SEQ_DEFAULT
        "; llama.cpp: " GEMMA3_SAMPLER_SEQ_LLAMA ")",
        "  --sampler-mode cdf|gumbel  final draw: inverse CDF or Gumbel-max (same distribution)",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) fprintf(f, "%s\n", lines[i]);
}

void cli_sampling_apply_gen_config(cli_sampling *cs, const g3_gen_config *gc) {
    gemma3_sampler_params *p = &cs->params;
    if (gc->has_temperature && !(cs->set & CLI_SAMPLING_SET_TEMP)) p->temperature = gc->temperature;
    if (gc->has_top_k && !(cs->set & CLI_SAMPLING_SET_TOP_K)) p->top_k = gc->top_k;
    if (gc->has_top_p && !(cs->set & CLI_SAMPLING_SET_TOP_P)) p->top_p = gc->top_p;
    if (gc->has_min_p && !(cs->set & CLI_SAMPLING_SET_MIN_P)) p->min_p = gc->min_p;
    if (gc->has_repetition_penalty && !(cs->set & CLI_SAMPLING_SET_REPEAT_PENALTY))
        p->repeat_penalty = gc->repetition_penalty;
    if (gc->n_eos > 0 && !(cs->set & CLI_SAMPLING_SET_EOS)) {
        int n = gc->n_eos < GEMMA3_SAMPLER_MAX_EOS ? gc->n_eos : GEMMA3_SAMPLER_MAX_EOS;
        for (int i = 0; i < n; i++) p->eos_ids[i] = gc->eos_ids[i];
        p->n_eos = n;
        cs->set |= CLI_SAMPLING_SET_EOS;
    }
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
