/* test-cli-sampling.c - the sampling flag parser: every flag, strict ranges with one-line errors
 * naming the flag and the range, generation_config.json defaults vs explicit flags, DRY breaker
 * resolution. The CLI objects are not in libgemma3.a, so their sources are included here. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/options.c"
#include "../cli/sampling-options.c"
#include "check.h"

static char err_text[4096];

/* Parses one flag (+ value) with stderr captured into err_text; returns the parser's status. */
static int parse(cli_sampling *cs, const char *flag, const char *value, int *matched) {
    char *argv[3] = {(char *)"gemma3", (char *)flag, (char *)value};
    int argc = value ? 3 : 2, i = 1;
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    if (!tmp || saved < 0) return -100;
    dup2(fileno(tmp), 2);
    int rc = cli_sampling_flag(argc, argv, &i, cs, matched);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(err_text, 1, sizeof err_text - 1, tmp);
    err_text[n] = '\0';
    fclose(tmp);
    if (rc == 0 && *matched) CHECK_MSG(i == argc - 1, "%s consumed %d args", flag, i);
    return rc;
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void expect_ok(cli_sampling *cs, const char *flag, const char *value) {
    int matched = 0;
    int rc = parse(cs, flag, value, &matched);
    CHECK_MSG(rc == 0 && matched, "%s %s: rc %d matched %d: %s", flag, value ? value : "", rc,
              matched, err_text);
}

static void expect_error(const char *flag, const char *value, const char *needle) {
    cli_sampling cs;
    cli_sampling_init(&cs);
    int matched = 0;
    int rc = parse(&cs, flag, value, &matched);
    CHECK_MSG(rc == CLI_EXIT_USAGE, "%s %s: rc %d", flag, value ? value : "", rc);
    CHECK_MSG(lines(err_text) == 1 && strncmp(err_text, "gemma3: ", 8) == 0, "not one line: %s",
              err_text);
    CHECK_MSG(strstr(err_text, flag) != NULL, "message lacks the flag: %s", err_text);
    CHECK_MSG(strstr(err_text, needle) != NULL, "message lacks '%s': %s", needle, err_text);
}

static void test_values(void) {
    cli_sampling cs;
    cli_sampling_init(&cs);
    CHECK_EQ_INT(cs.params.top_k, 64);
    CHECK_EQ_INT(cs.n_dry_breakers, -1);
    expect_ok(&cs, "--temp", "0.7");
    CHECK_NEAR(cs.params.temperature, 0.7f, 0);
    expect_ok(&cs, "--temperature", "0");
    CHECK_NEAR(cs.params.temperature, 0, 0);
    expect_ok(&cs, "--top-k", "40");
    CHECK_EQ_INT(cs.params.top_k, 40);
    expect_ok(&cs, "--top-p", "0.9");
    CHECK_NEAR(cs.params.top_p, 0.9f, 0);
    expect_ok(&cs, "--min-p", "0.05");
    CHECK_NEAR(cs.params.min_p, 0.05f, 0);
    expect_ok(&cs, "--typical", "0.8");
    expect_ok(&cs, "--typical-p", "0.7");
    CHECK_NEAR(cs.params.typical_p, 0.7f, 0);
    expect_ok(&cs, "--top-nsigma", "1.5");
    CHECK_NEAR(cs.params.top_n_sigma, 1.5f, 0);
    expect_ok(&cs, "--repeat-penalty", "1.1");
    CHECK_NEAR(cs.params.repeat_penalty, 1.1f, 0);
    expect_ok(&cs, "--repeat-last-n", "-1");
    CHECK_EQ_INT(cs.params.repeat_last_n, -1);
    expect_ok(&cs, "--frequency-penalty", "0.5");
    expect_ok(&cs, "--presence-penalty", "-0.5");
    CHECK_NEAR(cs.params.frequency_penalty, 0.5f, 0);
    CHECK_NEAR(cs.params.presence_penalty, -0.5f, 0);
    expect_ok(&cs, "--dry-multiplier", "0.8");
    expect_ok(&cs, "--dry-base", "1.5");
    expect_ok(&cs, "--dry-allowed-length", "3");
    expect_ok(&cs, "--dry-penalty-last-n", "256");
    CHECK_NEAR(cs.params.dry_multiplier, 0.8f, 0);
    CHECK_NEAR(cs.params.dry_base, 1.5f, 0);
    CHECK_EQ_INT(cs.params.dry_allowed_length, 3);
    CHECK_EQ_INT(cs.params.dry_penalty_last_n, 256);
    expect_ok(&cs, "--xtc-probability", "0.5");
    expect_ok(&cs, "--xtc-threshold", "0.2");
    CHECK_NEAR(cs.params.xtc_probability, 0.5f, 0);
    CHECK_NEAR(cs.params.xtc_threshold, 0.2f, 0);
    expect_ok(&cs, "--dynatemp-range", "0.3");
    expect_ok(&cs, "--dynatemp-exp", "2");
    CHECK_NEAR(cs.params.dynatemp_range, 0.3f, 0);
    CHECK_NEAR(cs.params.dynatemp_exponent, 2.0f, 0);
    expect_ok(&cs, "--mirostat", "2");
    expect_ok(&cs, "--mirostat-lr", "0.2");
    expect_ok(&cs, "--mirostat-ent", "4");
    CHECK_EQ_INT(cs.params.mirostat, 2);
    CHECK_NEAR(cs.params.mirostat_eta, 0.2f, 0);
    CHECK_NEAR(cs.params.mirostat_tau, 4.0f, 0);
    expect_ok(&cs, "-l", "15043+1");
    expect_ok(&cs, "--logit-bias", "7-inf");
    expect_ok(&cs, "--logit-bias", "9-0.5");
    CHECK_EQ_INT(cs.params.n_logit_bias, 3);
    CHECK_EQ_INT(cs.params.logit_bias[0].token, 15043);
    CHECK_NEAR(cs.params.logit_bias[0].bias, 1.0, 0);
    CHECK(cs.params.logit_bias[1].token == 7 && cs.params.logit_bias[1].bias == -INFINITY);
    CHECK_NEAR(cs.params.logit_bias[2].bias, -0.5, 0);
    expect_ok(&cs, "--ignore-eos", NULL);
    CHECK_EQ_INT(cs.params.ignore_eos, 1);
    expect_ok(&cs, "-s", "42");
    CHECK_EQ_INT(cs.params.seed, 42);
    expect_ok(&cs, "--seed", "4294967295");
    CHECK_EQ_INT(cs.params.seed, GEMMA3_SEED_RANDOM);
    expect_ok(&cs, "--seed", "-1");
    CHECK_EQ_INT(cs.params.seed, GEMMA3_SEED_RANDOM);
    expect_ok(&cs, "--sampler-mode", "gumbel");
    CHECK_EQ_INT(cs.params.mode, GEMMA3_SAMPLER_MODE_GUMBEL);
    expect_ok(&cs, "--sampling-seq", "kt");
    CHECK_EQ_INT(cs.params.n_samplers, 2);
    CHECK_EQ_INT(cs.params.samplers[1], GEMMA3_SAMPLER_TEMPERATURE);
    expect_ok(&cs, "--samplers", "llama.cpp");
    CHECK_EQ_INT(cs.params.n_samplers, 9);
    CHECK_EQ_INT(cs.params.samplers[8], GEMMA3_SAMPLER_TEMPERATURE);
    expect_ok(&cs, "--samplers", "top_k;min-p;temp");
    CHECK_EQ_INT(cs.params.n_samplers, 3);
    CHECK_EQ_INT(cs.params.samplers[1], GEMMA3_SAMPLER_MIN_P);
    expect_ok(&cs, "--dry-sequence-breaker", "\n");
    expect_ok(&cs, "--dry-sequence-breaker", "###");
    CHECK_EQ_INT(cs.n_dry_breakers, 2);
    expect_ok(&cs, "--dry-sequence-breaker", "none");
    CHECK_EQ_INT(cs.n_dry_breakers, 0);
    /* a parsed set of params passes the library's own validation */
    gemma3_sampler *s = NULL;
    cs.params.logit_bias[0].token = 3;
    CHECK(gemma3_sampler_init(&cs.params, 100, &s) == GEMMA3_OK);
    gemma3_sampler_free(s);
    /* a flag that is not ours is left alone */
    int matched = 1;
    CHECK_EQ_INT(parse(&cs, "--model", "x", &matched), 0);
    CHECK_EQ_INT(matched, 0);
}

static void test_errors(void) {
    expect_error("--temp", "-1", "[0, 100]");
    expect_error("--temp", "abc", "[0, 100]");
    expect_error("--temp", "nan", "[0, 100]");
    expect_error("--top-p", "2", "[0, 1]");
    expect_error("--top-p", "0.5x", "[0, 1]");
    expect_error("--min-p", "-0.1", "[0, inf)");
    expect_error("--top-k", "-5", "[0, 2147483647]");
    expect_error("--top-k", "1.5", "[0, 2147483647]");
    expect_error("--typical", "-1", "[0, inf)");
    expect_error("--repeat-penalty", "0", "[0.01, 100]");
    expect_error("--repeat-last-n", "-2", "[-1,");
    expect_error("--frequency-penalty", "3", "[-2, 2]");
    expect_error("--xtc-probability", "1.1", "[0, 1]");
    expect_error("--mirostat", "3", "[0, 2]");
    expect_error("--dry-allowed-length", "-1", "[0, 65536]");
    expect_error("--seed", "-2", "[-1, 4294967295]");
    expect_error("--seed", "4294967296", "[-1, 4294967295]");
    expect_error("--logit-bias", "15043", "TOKEN_ID(+|-)BIAS");
    expect_error("--logit-bias", "-3+1", "TOKEN_ID(+|-)BIAS");
    expect_error("--logit-bias", "5+x", "bias must be");
    expect_error("--logit-bias", "5+", "bias must be");
    expect_error("--sampler-mode", "fast", "cdf, gumbel");
    expect_error("--sampling-seq", "kq", "'q'");
    expect_error("--samplers", "top_k;bogus", "bogus");
    expect_error("--top-p", NULL, "missing value");
}

/* The CLI's ranges are the library's: every numeric flag accepts exactly what
 * gemma3_sampler_init accepts, at and just past each finite bound. */
static void test_ranges_are_the_library_s(void) {
    cli_sampling built;
    cli_sampling_init(&built); /* builds the group's rows */
    CHECK(cli_sampling_group.n_options > 0);
    for (size_t k = 0; k < cli_sampling_group.n_options; k++) {
        const cli_option *o = &cli_sampling_group.options[k];
        if (o->kind != CLI_SAMPLER) continue;
        const gemma3_param_range *r = gemma3_sampler_param_range(o->offset);
        CHECK_MSG(r != NULL, "%s has no library range", o->names);
        if (!r) continue;
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(o->names, ","), o->names);
        for (int side = 0; side < 2; side++) {
            double bound = side ? r->max : r->min;
            if (isinf(bound)) continue;
            double outside = r->is_int ? bound + (side ? 1 : -1) : bound + (side ? 1e-3 : -1e-3);
            for (int in = 0; in < 2; in++) {
                double v = in ? bound : outside;
                if (fabs(v) > 1e6) continue; /* a window of 2^31 tokens would be allocated */
                char val[64];
                if (r->is_int) snprintf(val, sizeof val, "%.0f", v);
                else snprintf(val, sizeof val, "%.9g", v);
                cli_sampling cs;
                cli_sampling_init(&cs);
                int matched = 0, rc = parse(&cs, flag, val, &matched);
                gemma3_sampler *s = NULL;
                int lib = gemma3_sampler_init(&cs.params, 100, &s);
                gemma3_sampler_free(s);
                if (in) {
                    CHECK_MSG(rc == 0 && lib == GEMMA3_OK, "%s %s: cli %d, library %d", flag, val, rc,
                              lib);
                } else {
                    gemma3_sampler_params p = gemma3_sampler_default_params();
                    if (r->is_int) *(int *)(void *)((char *)&p + r->offset) = (int)v;
                    else *(float *)(void *)((char *)&p + r->offset) = (float)v;
                    lib = gemma3_sampler_init(&p, 100, &s);
                    gemma3_sampler_free(s);
                    CHECK_MSG(rc == CLI_EXIT_USAGE && lib == GEMMA3_ERR_ARG,
                              "%s %s: cli %d, library %d", flag, val, rc, lib);
                }
            }
        }
    }
}

/* generation_config.json fills what no flag set (the library reads it:
 * gemma3_sampler_params_load_hf). */
static void test_gen_config(void) {
    char path[] = "/tmp/g3-cli-gencfg-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        CHECK_SKIP("generation_config: mkstemp failed");
        return;
    }
    const char *json = "{\"top_k\": 64, \"top_p\": 0.8, \"temperature\": 0.6,"
                       " \"epsilon_cutoff\": 0.005, \"eta_cutoff\": 0.002,"
                       " \"eos_token_id\": [1, 106]}";
    CHECK(write(fd, json, strlen(json)) == (ssize_t)strlen(json));
    close(fd);
    cli_sampling cs;
    cli_sampling_init(&cs);
    expect_ok(&cs, "--top-k", "10");
    expect_ok(&cs, "--epsilon", "0.001");
    CHECK_EQ_INT(cli_sampling_load_gen_config(&cs, path), 0);
    CHECK_EQ_INT(cs.params.top_k, 10); /* the flags win */
    CHECK_NEAR(cs.params.epsilon_cutoff, 0.001f, 0);
    CHECK_NEAR(cs.params.top_p, 0.8f, 0);
    CHECK_NEAR(cs.params.temperature, 0.6f, 0);
    CHECK_NEAR(cs.params.eta_cutoff, 0.002f, 0);
    CHECK_NEAR(cs.params.min_p, 0, 0); /* not in the file: the default */
    CHECK_EQ_INT(cs.params.n_eos, 2);
    CHECK_EQ_INT(cs.params.eos_ids[1], 106);
    unlink(path);
}

/* The value of a parameter's field, as a double. */
static double field_of(const gemma3_sampler_params *p, const gemma3_param_range *r) {
    const char *f = (const char *)p + r->offset;
    return r->is_int ? *(const int *)(const void *)f : *(const float *)(const void *)f;
}

/* Every sampler parameter with a flag in the library's descriptors is a row of the group (its
 * spellings and help line), and a flag of one with a generation_config.json key wins over the
 * file, which fills it when the flag is not given: the rows are the descriptors', so a sampler
 * added there needs no line in cli/. */
static void test_rows_from_descriptors(void) {
    cli_sampling cs;
    cli_sampling_init(&cs);
    int n_flags = 0;
    for (int t = 0; t < GEMMA3_SAMPLER_N_TYPES; t++) {
        const gemma3_sampler_info *in = gemma3_sampler_info_get(t);
        for (int k = 0; k < in->n_params; k++) {
            const gemma3_param_range *r = &in->params[k];
            if (!r->flags) continue;
            n_flags++;
            int rows = 0;
            for (size_t o = 0; o < cli_sampling_group.n_options; o++) {
                const cli_option *opt = &cli_sampling_group.options[o];
                rows += opt->kind == CLI_SAMPLER && opt->offset == r->offset &&
                        strcmp(opt->names, r->flags) == 0 && strcmp(opt->help, r->help) == 0;
            }
            CHECK_MSG(rows == 1, "%s: %d rows", r->flags, rows);
            if (!r->hf_key) continue;
            double lo = r->min, hi = isinf(r->max) ? r->min + 2 : r->max;
            double flag_v = r->is_int ? lo + 2 : lo + (hi - lo) / 2;
            double file_v = r->is_int ? lo + 1 : lo + (hi - lo) / 4;
            char path[] = "/tmp/g3-cli-flagwins-XXXXXX", json[128], val[64], flag[64];
            int fd = mkstemp(path);
            if (fd < 0) {
                CHECK_SKIP("generation_config: mkstemp failed");
                return;
            }
            int len = snprintf(json, sizeof json, "{\"%s\": %.9g}", r->hf_key, file_v);
            CHECK(write(fd, json, (size_t)len) == len);
            close(fd);
            snprintf(val, sizeof val, "%.9g", flag_v);
            snprintf(flag, sizeof flag, "%.*s", (int)strcspn(r->flags, ","), r->flags);
            for (int given = 0; given < 2; given++) {
                cli_sampling_init(&cs);
                if (given) expect_ok(&cs, flag, val);
                CHECK_EQ_INT(cli_sampling_load_gen_config(&cs, path), 0);
                double want = given ? flag_v : file_v, got = field_of(&cs.params, r);
                CHECK_MSG(fabs(got - want) <= 1e-6 * fabs(want), "%s %s, file %s: %g, not %g",
                          given ? flag : "(no flag)", given ? val : "", json, got, want);
            }
            unlink(path);
        }
    }
    CHECK(n_flags >= 20);
}

/* A toy tokenizer: one id per byte. */
static int byte_encode(void *ctx, const char *text, int32_t *ids, int max_ids) {
    (void)ctx;
    int n = (int)strlen(text);
    for (int i = 0; i < n && i < max_ids; i++) ids[i] = (unsigned char)text[i];
    return n;
}

static void test_breakers(void) {
    cli_sampling cs;
    cli_sampling_init(&cs);
    CHECK_EQ_INT(cli_sampling_resolve_breakers(&cs, byte_encode, NULL), 0);
    CHECK_EQ_INT(cs.params.n_dry_breakers, 4); /* llama.cpp's defaults */
    CHECK_EQ_INT(cs.params.dry_breakers[0][0], '\n');
    CHECK_EQ_INT(cs.params.dry_breakers[3][0], '*');
    expect_ok(&cs, "--dry-sequence-breaker", "ab");
    CHECK_EQ_INT(cli_sampling_resolve_breakers(&cs, byte_encode, NULL), 0);
    CHECK_EQ_INT(cs.params.n_dry_breakers, 1);
    CHECK_EQ_INT(cs.params.dry_breaker_len[0], 2);
    CHECK_EQ_INT(cs.params.dry_breakers[0][1], 'b');
    expect_ok(&cs, "--dry-sequence-breaker", "this breaker is far too long to fit");
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    if (!tmp) {
        CHECK(0);
        return;
    }
    dup2(fileno(tmp), 2);
    int rc = cli_sampling_resolve_breakers(&cs, byte_encode, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(tmp);
    CHECK_EQ_INT(rc, CLI_EXIT_USAGE);
}

int main(void) {
    test_values();
    test_errors();
    test_ranges_are_the_library_s();
    test_rows_from_descriptors();
    test_gen_config();
    test_breakers();
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        cli_sampling_help(devnull);
        fclose(devnull);
    }
    return check_report();
}
