/* cli/bench.c - gemma3 bench: llama-bench-style prompt-processing (ppN) and text-generation
 * (tgN) throughput, as a markdown table or JSON/CSV for scripts.
 *
 * Each test runs once as a warm-up, then -r times on a fresh cache; t/s is reported as mean and
 * sample standard deviation over those runs. Tokens are seeded pseudo-random ids (the model's
 * speed does not depend on them), so runs are comparable across builds. */
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf-model.h"
#include "rng.h"
#include "util.h"

#define MAX_LIST 16
#define MAX_REPS 1000

typedef struct {
    int values[MAX_LIST];
    int n;
} int_list;

typedef enum { OUT_MD, OUT_JSON, OUT_CSV } out_format;

typedef struct {
    char test[32];
    int n_prompt, n_gen, n_threads;
    double samples_ns[MAX_REPS];
    int n_samples;
    double avg_ts, stddev_ts, avg_ns, stddev_ns;
} bench_result;

typedef struct bench_args {
    int_list prompts, gens, threads;
    int reps;
    int format; /* out_format */
} bench_args;

static int parse_list(const char *flag, const char *val, int min, int max, int_list *out) {
    out->n = 0;
    char buf[256];
    if (strlen(val) >= sizeof buf) return cli_usage_error("%s: list too long", flag);
    strcpy(buf, val);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) return cli_usage_error("%s: at most %d values", flag, MAX_LIST);
        int rc = cli_parse_int(flag, tok, min, max, &out->values[out->n]);
        if (rc) return rc;
        out->n++;
    }
    if (out->n == 0) return cli_usage_error("%s: '%s' is not a comma-separated list", flag, val);
    return 0;
}

static int parse_prompts(const char *flag, const char *val, void *args) {
    return parse_list(flag, val, 0, 1 << 20, &((bench_args *)args)->prompts);
}
static int parse_gens(const char *flag, const char *val, void *args) {
    return parse_list(flag, val, 0, 1 << 20, &((bench_args *)args)->gens);
}
static int parse_threads(const char *flag, const char *val, void *args) {
    return parse_list(flag, val, 1, 1024, &((bench_args *)args)->threads);
}

static const cli_option bench_options[] = {
    {"-p, --n-prompt", "LIST", CLI_CUSTOM, .parse = parse_prompts,
     .help = "prompt lengths to test, comma-separated, 0 = none", .default_text = "512"},
    {"-n, --n-gen", "LIST", CLI_CUSTOM, .parse = parse_gens,
     .help = "generated-token counts to test, 0 = none", .default_text = "128"},
    {"-r, --repetitions", "N", CLI_INT, offsetof(bench_args, reps), 1, MAX_REPS,
     .help = "runs per test after one warm-up run"},
    {"-t, --threads", "LIST", CLI_CUSTOM, .parse = parse_threads,
     .help = "thread counts to test", .default_text = "all CPUs"},
    {"-o, --output", "FORMAT", CLI_CHOICE, offsetof(bench_args, format), .choices = "md|json|csv",
     .help = "output format"},
};

static const cli_group bench_group = CLI_GROUP("bench", bench_options);

static const cli_command bench_command = {
    "usage: gemma3 bench -m DIR [options]\n"
    "Measures prompt processing (ppN) and generation (tgN) speed, like llama-bench.\n",
    "bench: unknown flag '%s' (see gemma3 bench --help)",
    {&bench_group, &cli_model_group, NULL},
};

/* One timed run from an empty cache: a prompt of n_prompt tokens in one forward call, or n_gen
 * single-token steps (as llama-bench, the tokens are seeded pseudo-random ids: speed does not
 * depend on them). Returns nanoseconds, or -1 with the error in gemma3_last_error(). */
static double run_once(gemma3_session *s, int vocab, int32_t *tokens, int n_prompt, int n_gen) {
    gemma3_session_reset(s);
    uint64_t rng = 42;
    int n = n_prompt > n_gen ? n_prompt : n_gen;
    for (int i = 0; i < n; i++) tokens[i] = (int32_t)(g3_splitmix64_next(&rng) % (uint64_t)vocab);
    double t0 = g3_now();
    if (n_prompt > 0 && gemma3_session_forward(s, tokens, n_prompt, NULL) != GEMMA3_OK) return -1;
    for (int i = 0; i < n_gen; i++)
        if (gemma3_session_forward(s, &tokens[i], 1, NULL) != GEMMA3_OK) return -1;
    return (g3_now() - t0) * 1e9;
}

static void summarize(bench_result *r) {
    int tokens = r->n_prompt + r->n_gen;
    double sum_ts = 0, sum_ns = 0;
    for (int i = 0; i < r->n_samples; i++) {
        sum_ns += r->samples_ns[i];
        sum_ts += tokens / (r->samples_ns[i] * 1e-9);
    }
    r->avg_ns = sum_ns / r->n_samples;
    r->avg_ts = sum_ts / r->n_samples;
    double var_ts = 0, var_ns = 0;
    for (int i = 0; i < r->n_samples; i++) {
        double ts = tokens / (r->samples_ns[i] * 1e-9);
        var_ts += (ts - r->avg_ts) * (ts - r->avg_ts);
        var_ns += (r->samples_ns[i] - r->avg_ns) * (r->samples_ns[i] - r->avg_ns);
    }
    r->stddev_ts = r->n_samples > 1 ? sqrt(var_ts / (r->n_samples - 1)) : 0;
    r->stddev_ns = r->n_samples > 1 ? sqrt(var_ns / (r->n_samples - 1)) : 0;
}

/* llama-bench's model_type: "gemma3 1B Q4_0". llama.cpp names a Gemma 3 by its layer count (18:
 * 270M, though it has 268M parameters; 26: 1B, 34: 4B, 48: 12B, 62: 27B); other depths (test
 * shapes) by their parameters, rounded. */
static void model_label(const gemma3_model_info *info, char *buf, size_t n) {
    static const struct { int n_layers; const char *size; } named[] = {
        {18, "270M"}, {26, "1B"}, {34, "4B"}, {48, "12B"}, {62, "27B"}};
    double p = (double)info->n_params;
    char type[8], size[16];
    size_t k = 0;
    for (; info->weight_type[k] && k + 1 < sizeof type; k++)
        type[k] = (char)toupper((unsigned char)info->weight_type[k]);
    type[k] = '\0';
    if (p >= 0.95e9) snprintf(size, sizeof size, "%.0fB", p / 1e9);
    else snprintf(size, sizeof size, "%.0fM", p / 1e6);
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (info->n_layers == named[i].n_layers) snprintf(size, sizeof size, "%s", named[i].size);
    snprintf(buf, n, "gemma3 %s %s", size, type);
}

static void print_md_header(void) {
    printf("| %-22s | %10s | %10s | %-10s | %7s | %8s | %20s |\n", "model", "size", "params", "isa",
           "threads", "test", "t/s");
    printf("| %-22s | %10s | %10s | %-10s | %7s | %8s | %20s |\n", "----------------------",
           "---------:", "---------:", "----------", "------:", "-------:", "-------------------:");
}

static void print_md_row(const char *model, const gemma3_model_info *info, const char *isa,
                         const bench_result *r) {
    char size[32], params[32], ts[48];
    snprintf(size, sizeof size, "%.2f GiB", (double)info->weight_bytes / (1024.0 * 1024 * 1024));
    if (info->n_params >= 1000000000) snprintf(params, sizeof params, "%.2f B", info->n_params / 1e9);
    else snprintf(params, sizeof params, "%.2f M", info->n_params / 1e6);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
    printf("| %-22s | %10s | %10s | %-10s | %7d | %8s | %20s |\n", model, size, params, isa,
           r->n_threads, r->test, ts);
    fflush(stdout);
}

static void print_json(const char *model, const gemma3_model_info *info, const char *isa,
                       const char *kv_type, int n_batch, const bench_result *rs, int n) {
    printf("[\n");
    for (int k = 0; k < n; k++) {
        const bench_result *r = &rs[k];
        printf("  {\"model_type\": \"%s\", \"model_size\": %lld, \"model_n_params\": %lld, "
               "\"backend\": \"CPU\", \"isa\": \"%s\", \"n_batch\": %d, \"type_k\": \"%s\", "
               "\"type_v\": \"%s\", \"n_threads\": %d, \"test\": \"%s\", \"n_prompt\": %d, "
               "\"n_gen\": %d, \"avg_ns\": %.0f, \"stddev_ns\": %.0f, \"avg_ts\": %.6f, "
               "\"stddev_ts\": %.6f, \"load_mode\": \"%s\", \"load_auto\": %s, "
               "\"load_bytes\": %lld, \"load_s\": %.6f, \"weight_layout\": \"%s\", "
               "\"quantize_s\": %.6f, \"repack_s\": %.6f, \"samples_ns\": [",
               model, (long long)info->weight_bytes, (long long)info->n_params, isa, n_batch,
               kv_type, kv_type, r->n_threads, r->test, r->n_prompt, r->n_gen, r->avg_ns,
               r->stddev_ns, r->avg_ts, r->stddev_ts, info->load_mode,
               info->load_auto ? "true" : "false", (long long)info->load_bytes, info->load_seconds,
               info->weight_layout, info->quantize_seconds, info->repack_seconds);
        for (int i = 0; i < r->n_samples; i++) printf("%s%.0f", i ? ", " : "", r->samples_ns[i]);
        printf("]}%s\n", k + 1 < n ? "," : "");
    }
    printf("]\n");
}

static void print_csv(const char *model, const gemma3_model_info *info, const char *isa,
                      const bench_result *rs, int n) {
    printf("model_type,model_size,model_n_params,isa,n_threads,test,n_prompt,n_gen,avg_ns,"
           "stddev_ns,avg_ts,stddev_ts\n");
    for (int k = 0; k < n; k++) {
        const bench_result *r = &rs[k];
        printf("\"%s\",%lld,%lld,%s,%d,%s,%d,%d,%.0f,%.0f,%.6f,%.6f\n", model,
               (long long)info->weight_bytes, (long long)info->n_params, isa, r->n_threads, r->test,
               r->n_prompt, r->n_gen, r->avg_ns, r->stddev_ns, r->avg_ts, r->stddev_ts);
    }
}

/* Runs every test of args on one session: a warm-up run, then args->reps timed runs each. The
 * results go to out[*n_out ...]; md rows are printed as they finish. */
static int run_tests(gemma3_session *s, const bench_args *args, const gemma3_model_info *info,
                     const char *label, int32_t *tokens, bench_result *out, int *n_out) {
    const char *isa = gemma3_session_isa(s);
    for (int k = 0; k < args->prompts.n + args->gens.n; k++) {
        int is_pp = k < args->prompts.n;
        int n = is_pp ? args->prompts.values[k] : args->gens.values[k - args->prompts.n];
        if (n == 0) continue;
        bench_result *r = &out[*n_out];
        memset(r, 0, sizeof *r);
        snprintf(r->test, sizeof r->test, "%s%d", is_pp ? "pp" : "tg", n);
        r->n_prompt = is_pp ? n : 0;
        r->n_gen = is_pp ? 0 : n;
        r->n_threads = gemma3_session_n_threads(s);
        if (run_once(s, info->vocab_size, tokens, r->n_prompt, is_pp ? 0 : 1) < 0)
            return cli_fail("%s", gemma3_last_error());
        for (int rep = 0; rep < args->reps; rep++) {
            double ns = run_once(s, info->vocab_size, tokens, r->n_prompt, r->n_gen);
            if (ns < 0) return cli_fail("%s", gemma3_last_error());
            r->samples_ns[r->n_samples++] = ns;
        }
        summarize(r);
        (*n_out)++;
        if (args->format == OUT_MD) print_md_row(label, info, isa, r);
    }
    return 0;
}

static int max_tokens(const bench_args *args) {
    int n = 1;
    for (int i = 0; i < args->prompts.n; i++) n = args->prompts.values[i] > n ? args->prompts.values[i] : n;
    for (int i = 0; i < args->gens.n; i++) n = args->gens.values[i] > n ? args->gens.values[i] : n;
    return n;
}

/* One session per thread count; every test on each. */
static int run_bench(gemma3_model *model, const cli_model_opts *mo, const bench_args *args) {
    gemma3_model_info info;
    gemma3_model_get_info(model, &info);
    char label[64];
    model_label(&info, label, sizeof label);
    int n_results = 0, status = 0;
    bench_result *results =
        calloc((size_t)args->threads.n * (size_t)(args->prompts.n + args->gens.n), sizeof *results);
    int32_t *tokens = malloc((size_t)max_tokens(args) * sizeof *tokens);
    const char *isa = "?";
    if (!results || !tokens) status = cli_fail("bench: out of memory");
    if (!status && args->format == OUT_MD) print_md_header();
    for (int ti = 0; ti < args->threads.n && !status; ti++) {
        gemma3_session_params sp = mo->sp; /* n_ctx: -c, or the longest test (cmd_bench) */
        sp.n_threads = args->threads.values[ti];
        gemma3_session *s = NULL;
        if (gemma3_session_init(model, &sp, &s) != GEMMA3_OK) {
            status = cli_fail("%s", gemma3_last_error());
            break;
        }
        isa = gemma3_session_isa(s);
        status = run_tests(s, args, &info, label, tokens, results, &n_results);
        gemma3_session_free(s);
    }
    if (!status && args->format == OUT_JSON)
        print_json(label, &info, isa, mo->sp.kv_type == GEMMA3_KV_F32 ? "f32" : "bf16",
                   mo->sp.n_batch ? mo->sp.n_batch : 512, results, n_results);
    if (!status && args->format == OUT_CSV) print_csv(label, &info, isa, results, n_results);
    char rate[32];
    if (!status && args->format == OUT_MD) {
        printf("\nload: %s%s, %.2f GB in %.3f s%s%s", info.load_mode,
               info.load_auto ? " (auto)" : "", (double)info.load_bytes / 1e9, info.load_seconds,
               cli_load_rate(&info, rate, sizeof rate), info.load_from_disk ? ", from the disk as used (does not fit in memory)" : "");
        if (info.quantize_seconds > 0) printf("; quantized in %.3f s", info.quantize_seconds);
        if (info.repack_seconds > 0) printf("; repacked in %.3f s", info.repack_seconds);
        printf("; weights %s, %s layout\n", info.weight_type, info.weight_layout);
    }
    free(tokens);
    free(results);
    return status;
}

int cmd_bench(int argc, char **argv) {
    bench_args args = {.prompts = {{512}, 1}, .gens = {{128}, 1}, .reps = 5, .format = OUT_MD};
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    void *const dst[] = {&args, &mo};
    int status;
    if (cli_parse(&bench_command, argc, argv, dst, &status)) return status;
    if (!mo.model_dir) return cli_usage_error("bench: -m: a model directory is required");
    if (args.threads.n == 0) args.threads = (int_list){{mo.sp.n_threads}, 1};
    /* Refused before anything is loaded: a run that would measure nothing, and a -c the tests
     * do not fit in (each runs from an empty cache; without -c the cache is the longest test). */
    int any = 0;
    for (int i = 0; i < args.prompts.n; i++) any |= args.prompts.values[i] > 0;
    for (int i = 0; i < args.gens.n; i++) any |= args.gens.values[i] > 0;
    if (!any) return cli_usage_error("bench: -p and -n are all 0: no test to run");
    int longest = max_tokens(&args);
    if (mo.sp.n_ctx && mo.sp.n_ctx < longest)
        return cli_usage_error("-c: %d is smaller than the longest test (%d tokens of -p/-n)",
                               mo.sp.n_ctx, longest);
    if (!mo.sp.n_ctx) {
        g3_config cfg;
        if (g3_model_config_load(mo.model_dir, &cfg) == GEMMA3_OK && longest > cfg.max_position_embeddings)
            return cli_usage_error("-p/-n: the longest test (%d tokens) exceeds the model's "
                                   "max_position_embeddings %d", longest,
                                   cfg.max_position_embeddings);
        mo.sp.n_ctx = longest; /* a config that cannot be read is reported by the load */
    }
    for (int i = 0; i < args.threads.n; i++) cli_warn_threads("-t", args.threads.values[i]);
    gemma3_model *model = NULL;
    if ((status = cli_model_load(&mo, &model))) return status;
    status = run_bench(model, &mo, &args);
    gemma3_model_free(model);
    return status;
}
