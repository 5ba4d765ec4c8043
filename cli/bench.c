/* cli/bench.c - gemma3 bench: llama-bench-style prompt-processing (ppN) and text-generation
 * (tgN) throughput, as a markdown table or JSON/CSV for scripts.
 *
 * Each test runs once as a warm-up, then -r times on a fresh cache; t/s is reported as mean and
 * sample standard deviation over those runs. Tokens are seeded pseudo-random ids (the model's
 * speed does not depend on them), so runs are comparable across builds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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

static const char help[] =
    "usage: gemma3 bench -m DIR [options]\n"
    "Measures prompt processing (ppN) and generation (tgN) speed, like llama-bench.\n\n"
    "  -p, --n-prompt LIST    prompt lengths to test, comma-separated (default 512; 0 = none)\n"
    "  -n, --n-gen LIST       generated-token counts to test (default 128; 0 = none)\n"
    "  -r, --repetitions N    runs per test after one warm-up run (default 5)\n"
    "  -t, --threads LIST     thread counts to test (default: all CPUs)\n"
    "  -o, --output FORMAT    md (default), json or csv\n";

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

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One timed run from an empty cache: a prompt of n_prompt tokens in one forward call, or n_gen
 * single-token steps (as llama-bench, the tokens are seeded pseudo-random ids: speed does not
 * depend on them). Returns nanoseconds, or -1 with the error in gemma3_last_error(). */
static double run_once(gemma3_session *s, int vocab, int32_t *tokens, int n_prompt, int n_gen) {
    gemma3_session_reset(s);
    uint64_t rng = 42;
    int n = n_prompt > n_gen ? n_prompt : n_gen;
    for (int i = 0; i < n; i++) tokens[i] = (int32_t)(next_random(&rng) % (uint64_t)vocab);
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

static void model_label(const gemma3_model_info *info, char *buf, size_t n) {
    double p = (double)info->n_params; /* 999.9M is the "1B" model, 268M the "270M" */
    if (p >= 0.95e9) snprintf(buf, n, "gemma3 %.0fB BF16", p / 1e9);
    else snprintf(buf, n, "gemma3 %.0fM BF16", p / 1e6);
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
               "\"stddev_ts\": %.6f, \"samples_ns\": [",
               model, (long long)info->weight_bytes, (long long)info->n_params, isa, n_batch,
               kv_type, kv_type, r->n_threads, r->test, r->n_prompt, r->n_gen, r->avg_ns,
               r->stddev_ns, r->avg_ts, r->stddev_ts);
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

int cmd_bench(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    int_list prompts = {{512}, 1}, gens = {{128}, 1}, threads = {{0}, 0};
    int reps = 5;
    out_format fmt = OUT_MD;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int rc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s%s", help, cli_model_help);
            return 0;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
            if (!(v = cli_value(argc, argv, &i)) || (rc = parse_list(a, v, 0, 1 << 20, &prompts)))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            if (!(v = cli_value(argc, argv, &i)) || (rc = parse_list(a, v, 0, 1 << 20, &gens)))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = cli_value(argc, argv, &i)) || (rc = parse_list(a, v, 1, 1024, &threads)))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (!(v = cli_value(argc, argv, &i)) || (rc = cli_parse_int(a, v, 1, MAX_REPS, &reps)))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
            if (!strcmp(v, "md")) fmt = OUT_MD;
            else if (!strcmp(v, "json")) fmt = OUT_JSON;
            else if (!strcmp(v, "csv")) fmt = OUT_CSV;
            else return cli_usage_error("%s: '%s' is not one of md, json, csv", a, v);
        } else if ((rc = cli_model_flag(argc, argv, &i, &mo)) != CLI_NOT_MINE) {
            if (rc) return rc;
        } else {
            return cli_usage_error("bench: unknown flag '%s' (see gemma3 bench --help)", a);
        }
    }
    if (!mo.model_dir) return cli_usage_error("bench: -m: a model directory is required");
    if (threads.n == 0) threads = (int_list){{mo.sp.n_threads}, 1};

    int max_tokens = 1;
    for (int i = 0; i < prompts.n; i++) max_tokens = prompts.values[i] > max_tokens ? prompts.values[i] : max_tokens;
    for (int i = 0; i < gens.n; i++) max_tokens = gens.values[i] > max_tokens ? gens.values[i] : max_tokens;

    gemma3_model *model = NULL;
    if (gemma3_model_load_ex(mo.model_dir, &mo.mp, &model) != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    gemma3_model_info info;
    gemma3_model_get_info(model, &info);
    char label[64];
    model_label(&info, label, sizeof label);

    int status = 0;
    int n_results = 0;
    bench_result *results = calloc((size_t)threads.n * (prompts.n + gens.n), sizeof *results);
    int32_t *tokens = malloc((size_t)max_tokens * sizeof *tokens);
    const char *isa = "?";
    if (!results || !tokens) {
        status = cli_fail("bench: out of memory");
        goto done;
    }
    if (fmt == OUT_MD) print_md_header();
    for (int ti = 0; ti < threads.n && !status; ti++) {
        gemma3_session_params sp = mo.sp;
        sp.n_threads = threads.values[ti];
        sp.n_ctx = max_tokens;
        gemma3_session *s = NULL;
        if (gemma3_session_init(model, &sp, &s) != GEMMA3_OK) {
            status = cli_fail("%s", gemma3_last_error());
            break;
        }
        isa = gemma3_session_isa(s);
        for (int k = 0; k < prompts.n + gens.n && !status; k++) {
            int is_pp = k < prompts.n;
            int n = is_pp ? prompts.values[k] : gens.values[k - prompts.n];
            if (n == 0) continue;
            bench_result *r = &results[n_results];
            snprintf(r->test, sizeof r->test, "%s%d", is_pp ? "pp" : "tg", n);
            r->n_prompt = is_pp ? n : 0;
            r->n_gen = is_pp ? 0 : n;
            r->n_threads = gemma3_session_n_threads(s);
            if (run_once(s, info.vocab_size, tokens, r->n_prompt, is_pp ? 0 : 1) < 0) {
                status = cli_fail("%s", gemma3_last_error());
                break;
            }
            for (int rep = 0; rep < reps; rep++) {
                double ns = run_once(s, info.vocab_size, tokens, r->n_prompt, r->n_gen);
                if (ns < 0) {
                    status = cli_fail("%s", gemma3_last_error());
                    break;
                }
                r->samples_ns[r->n_samples++] = ns;
            }
            if (status) break;
            summarize(r);
            n_results++;
            if (fmt == OUT_MD) print_md_row(label, &info, isa, r);
        }
        gemma3_session_free(s);
    }
    if (!status && fmt == OUT_JSON)
        print_json(label, &info, isa, mo.sp.kv_type == GEMMA3_KV_F32 ? "f32" : "bf16",
                   mo.sp.n_batch ? mo.sp.n_batch : 512, results, n_results);
    if (!status && fmt == OUT_CSV) print_csv(label, &info, isa, results, n_results);
done:
    free(tokens);
    free(results);
    gemma3_model_free(model);
    return status;
}
