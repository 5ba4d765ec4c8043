/* cli/bench.c - gemma3 bench: llama-bench's prompt-processing (ppN), text-generation (tgN) and
 * combined (ppN+tgM) throughput, optionally after N tokens already in the cache ("@ dN"), for
 * every combination of the listed models, weight types, KV types, batch sizes and thread
 * counts: one row each, as a markdown table, or JSON, JSON lines, CSV or SQL for scripts.
 *
 * Each test runs once as a warm-up, then -r times from a fresh cache (the depth's tokens are
 * prefilled untimed first); t/s is the mean and sample standard deviation over those runs.
 * Tokens are seeded pseudo-random ids (the model's speed does not depend on them). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "speculative.h"

#define MAX_LIST 16
#define MAX_REPS 1000

typedef struct {
    int values[MAX_LIST];
    int n;
} int_list;

typedef struct {
    const char *items[MAX_LIST];
    int n;
} str_list;

enum { OUT_MD, OUT_JSON, OUT_JSONL, OUT_CSV, OUT_SQL };

typedef struct {
    char test[48];
    int n_prompt, n_gen, n_depth, n_threads, n_batch;
    const char *kv_type;
    char time[32]; /* when the test began, UTC */
    double samples_ns[MAX_REPS];
    int n_samples;
    double avg_ts, stddev_ts, avg_ns, stddev_ns;
    int n_draft;                 /* --draft: draft_max of the row, 0 = plain (greedy decoding) */
    int64_t n_drafted, n_accepted; /* over the timed runs */
} bench_result;

typedef struct bench_args {
    str_list models, quants, kv_types;
    int_list prompts, gens, depths, threads, batches;
    int pg[MAX_LIST][2];
    int n_pg;
    int reps;
    int format;
    int_list drafts;             /* --draft: draft_max values; tg then decodes greedily */
    const char *draft_dir;       /* -md */
    int lookup;                  /* --lookup */
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

/* Appends the comma-separated items of val (an argv string, split in place) to out. */
static int parse_strings(const char *flag, const char *val, str_list *out) {
    char *s = (char *)val;
    for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) return cli_usage_error("%s: at most %d values", flag, MAX_LIST);
        out->items[out->n++] = tok;
    }
    return 0;
}

#define ARGS(a) ((bench_args *)(a))
static int parse_prompts(const char *f, const char *v, void *a) { return parse_list(f, v, 0, 1 << 20, &ARGS(a)->prompts); }
static int parse_gens(const char *f, const char *v, void *a) { return parse_list(f, v, 0, 1 << 20, &ARGS(a)->gens); }
static int parse_depths(const char *f, const char *v, void *a) { return parse_list(f, v, 0, 1 << 20, &ARGS(a)->depths); }
static int parse_threads(const char *f, const char *v, void *a) { return parse_list(f, v, 1, 1024, &ARGS(a)->threads); }
static int parse_batches(const char *f, const char *v, void *a) { return parse_list(f, v, 1, 1 << 16, &ARGS(a)->batches); }
static int parse_drafts(const char *f, const char *v, void *a) { return parse_list(f, v, 0, 256, &ARGS(a)->drafts); }
static int parse_models(const char *f, const char *v, void *a) { return parse_strings(f, v, &ARGS(a)->models); }

static int parse_quants(const char *flag, const char *val, void *a) {
    int rc = parse_strings(flag, val, &ARGS(a)->quants);
    for (int i = 0; !rc && i < ARGS(a)->quants.n; i++) {
        int type = gemma3_weight_type_parse(ARGS(a)->quants.items[i]);
        if (type < 0 || type == GEMMA3_WEIGHTS_AS_STORED)
            rc = cli_usage_error("%s: '%s' is not one of %s", flag, ARGS(a)->quants.items[i],
                                 gemma3_weight_type_list(0));
    }
    return rc;
}

static int parse_kv_types(const char *flag, const char *val, void *a) {
    int rc = parse_strings(flag, val, &ARGS(a)->kv_types);
    for (int i = 0; !rc && i < ARGS(a)->kv_types.n; i++)
        if (strcmp(ARGS(a)->kv_types.items[i], "f32") && strcmp(ARGS(a)->kv_types.items[i], "bf16"))
            rc = cli_usage_error("%s: '%s' is not one of f32, bf16", flag, ARGS(a)->kv_types.items[i]);
    return rc;
}

static int parse_pg(const char *flag, const char *val, void *a) {
    int_list pair;
    int rc = parse_list(flag, val, 0, 1 << 20, &pair);
    if (!rc && pair.n != 2) rc = cli_usage_error("%s: '%s' is not PP,TG", flag, val);
    if (!rc && ARGS(a)->n_pg == MAX_LIST) rc = cli_usage_error("%s: at most %d pairs", flag, MAX_LIST);
    if (!rc) {
        ARGS(a)->pg[ARGS(a)->n_pg][0] = pair.values[0];
        ARGS(a)->pg[ARGS(a)->n_pg++][1] = pair.values[1];
    }
    return rc;
}
#undef ARGS

static const cli_option bench_options[] = {
    {"-m, --model", "DIR", CLI_CUSTOM, .parse = parse_models,
     .help = "checkpoint directory; repeat -m (or list them, comma-separated) to compare models"},
    {"-p, --n-prompt", "LIST", CLI_CUSTOM, .parse = parse_prompts,
     .help = "prompt lengths to test, comma-separated, 0 = none", .default_text = "512"},
    {"-n, --n-gen", "LIST", CLI_CUSTOM, .parse = parse_gens,
     .help = "generated-token counts to test, 0 = none", .default_text = "128"},
    {"-pg", "PP,TG", CLI_CUSTOM, .parse = parse_pg,
     .help = "a prompt of PP tokens then TG generated, timed together (repeatable)"},
    {"-d, --n-depth", "LIST", CLI_CUSTOM, .parse = parse_depths,
     .help = "tokens already in the cache before each test (prefilled untimed)", .default_text = "0"},
    {"-r, --repetitions", "N", CLI_INT, offsetof(bench_args, reps), 1, MAX_REPS,
     .help = "runs per test after one warm-up run"},
    {"-t, --threads", "LIST", CLI_CUSTOM, .parse = parse_threads,
     .help = "thread counts to test", .default_text = "all CPUs"},
    {"-b, --batch-size", "LIST", CLI_CUSTOM, .parse = parse_batches,
     .help = "prompt tokens per forward chunk", .default_text = "512"},
    {"-ctk, --cache-type-k, --kv-type", "LIST", CLI_CUSTOM, .parse = parse_kv_types,
     .help = "KV cache types: f32, bf16", .default_text = "bf16; f32 with --exact"},
    {"-q, --quant", "LIST", CLI_CUSTOM, .parse = parse_quants,
     .help = "weight types: bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, or the mixes q4_k_m, q5_k_m, q4_k_s, q5_k_s (quantized at load)",
     .default_text = "as stored"},
    {"-o, --output", "FORMAT", CLI_CHOICE, offsetof(bench_args, format),
     .choices = "md|json|jsonl|csv|sql", .help = "md, json, jsonl, csv or sql"},
    {"--draft", "LIST", CLI_CUSTOM, .parse = parse_drafts,
     .help = "speculative decoding with these --draft-max values (0 = plain), with -md or "
             "--lookup: tg then decodes greedily from the model (rows gain drafted, accepted)"},
    {"-md, --model-draft", "DIR", CLI_TEXT, offsetof(bench_args, draft_dir),
     .help = "the draft model for --draft"},
    {"--lookup", NULL, CLI_SWITCH, offsetof(bench_args, lookup), .value = 1,
     .help = "n-gram lookup drafting for --draft"},
};

static const cli_group bench_group = CLI_GROUP("bench", bench_options);

static const cli_command bench_command = {
    "usage: gemma3 bench -m DIR [-m DIR ...] [options]\n"
    "Measures prompt processing (ppN), generation (tgN) and both (ppN+tgM) speed, like\n"
    "llama-bench: one row per combination of the listed values.\n",
    "bench: unknown flag '%s' (see gemma3 bench --help)",
    {&bench_group, &cli_model_group, &cli_compat_group, NULL},
};

/* SplitMix64: the benchmark's token ids, the same on every run and build. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* One timed run from an empty cache: n_depth tokens prefilled untimed, then a prompt of
 * n_prompt tokens in one forward call and n_gen single-token steps. Returns nanoseconds, or -1
 * with the error in gemma3_last_error(). */
/* Greedy decoding of n_gen tokens from `first`, through the speculator when there is one. */
static int decode_greedy(gemma3_session *s, gemma3_spec *spc, int vocab, int32_t first, int n_gen) {
    int32_t t = first;
    for (int i = 0; i < n_gen; i++) {
        const float *logits;
        int rc = spc ? gemma3_spec_feed(spc, t, &logits) : gemma3_session_forward(s, &t, 1, NULL);
        if (rc != GEMMA3_OK) return rc;
        if (!spc) logits = gemma3_session_logits(s);
        t = 0;
        for (int v = 1; v < vocab; v++)
            if (logits[v] > logits[t]) t = v;
    }
    return spc ? gemma3_spec_sync(spc) : GEMMA3_OK;
}

static double run_once(gemma3_session *s, gemma3_spec *spc, int greedy, int vocab, int32_t *tokens,
                       int n_depth, int n_prompt, int n_gen) {
    gemma3_session_reset(s);
    uint64_t rng = 42;
    int n = n_depth + n_prompt + n_gen;
    for (int i = 0; i < n; i++) tokens[i] = (int32_t)(splitmix64(&rng) % (uint64_t)vocab);
    if (n_depth > 0 && gemma3_session_forward(s, tokens, n_depth, NULL) != GEMMA3_OK) return -1;
    tokens += n_depth;
    double t0 = cli_now();
    if (n_prompt > 0 && gemma3_session_forward(s, tokens, n_prompt, NULL) != GEMMA3_OK) return -1;
    if (greedy) {
        if (n_gen > 0 && decode_greedy(s, spc, vocab, tokens[n_prompt], n_gen) != GEMMA3_OK) return -1;
        return (cli_now() - t0) * 1e9;
    }
    for (int i = 0; i < n_gen; i++)
        if (gemma3_session_forward(s, &tokens[n_prompt + i], 1, NULL) != GEMMA3_OK) return -1;
    return (cli_now() - t0) * 1e9;
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
 * 270M, 26: 1B, 34: 4B, 48: 12B, 62: 27B); other depths (test shapes) by their parameters. */
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
    snprintf(buf, n, "gemma3 %s %s", size, info->weight_mix_label ? info->weight_mix_label : type);
}

/* The CPU's name as /proc/cpuinfo gives it ("" where it does not). */
static void cpu_name(char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *v = strchr(line, ':') + 1;
            while (*v == ' ' || *v == '\t') v++;
            snprintf(buf, n, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    if (f) fclose(f);
}

/* What a row says about its model, the same for every test of it. */
typedef struct model_row {
    const char *dir;
    char label[64];
    gemma3_model_info info;
    const char *isa;
} model_row;

/* One result as llama-bench's fields (and ours: isa, load and layout), in one JSON object. */
static cJSON *row_json(const model_row *m, const bench_result *r) {
    const gemma3_model_info *info = &m->info;
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    cJSON *o = cJSON_CreateObject(), *samples_ns = cJSON_CreateArray(), *samples_ts = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "model_type", m->label);
    cJSON_AddNumberToObject(o, "model_size", (double)info->weight_bytes);
    cJSON_AddNumberToObject(o, "model_n_params", (double)info->n_params);
    cJSON_AddStringToObject(o, "backend", "CPU");
    cJSON_AddStringToObject(o, "isa", m->isa);
    cJSON_AddNumberToObject(o, "n_batch", r->n_batch);
    cJSON_AddNumberToObject(o, "n_ubatch", r->n_batch);
    cJSON_AddStringToObject(o, "type_k", r->kv_type);
    cJSON_AddStringToObject(o, "type_v", r->kv_type);
    cJSON_AddNumberToObject(o, "n_threads", r->n_threads);
    cJSON_AddStringToObject(o, "test", r->test);
    cJSON_AddNumberToObject(o, "n_prompt", r->n_prompt);
    cJSON_AddNumberToObject(o, "n_gen", r->n_gen);
    cJSON_AddNumberToObject(o, "n_depth", r->n_depth);
    cJSON_AddNumberToObject(o, "n_draft", r->n_draft);
    cJSON_AddNumberToObject(o, "n_drafted", (double)r->n_drafted);
    cJSON_AddNumberToObject(o, "n_accepted", (double)r->n_accepted);
    cJSON_AddNumberToObject(o, "acceptance", r->n_drafted ? (double)r->n_accepted / (double)r->n_drafted : 0.0);
    cJSON_AddNumberToObject(o, "avg_ns", round(r->avg_ns));
    cJSON_AddNumberToObject(o, "stddev_ns", round(r->stddev_ns));
    cJSON_AddNumberToObject(o, "avg_ts", r->avg_ts);
    cJSON_AddNumberToObject(o, "stddev_ts", r->stddev_ts);
    cJSON_AddStringToObject(o, "build_commit", cli_build_commit());
    cJSON_AddNumberToObject(o, "build_number", cli_build_number());
    cJSON_AddStringToObject(o, "cpu_info", cpu);
    cJSON_AddStringToObject(o, "gpu_info", "");
    cJSON_AddStringToObject(o, "backends", "CPU");
    cJSON_AddStringToObject(o, "model_filename", m->dir);
    cJSON_AddStringToObject(o, "test_time", r->time);
    cJSON_AddStringToObject(o, "weight_type", info->weight_type);
    cJSON_AddStringToObject(o, "weight_layout", info->weight_layout);
    cJSON_AddStringToObject(o, "load_mode", info->load_mode);
    cJSON_AddBoolToObject(o, "load_auto", info->load_auto);
    cJSON_AddNumberToObject(o, "load_bytes", (double)info->load_bytes);
    cJSON_AddNumberToObject(o, "load_s", info->load_seconds);
    cJSON_AddNumberToObject(o, "quantize_s", info->quantize_seconds);
    cJSON_AddNumberToObject(o, "repack_s", info->repack_seconds);
    for (int i = 0; i < r->n_samples; i++) {
        cJSON_AddItemToArray(samples_ns, cJSON_CreateNumber(round(r->samples_ns[i])));
        cJSON_AddItemToArray(samples_ts, cJSON_CreateNumber((r->n_prompt + r->n_gen) / (r->samples_ns[i] * 1e-9)));
    }
    cJSON_AddItemToObject(o, "samples_ns", samples_ns);
    cJSON_AddItemToObject(o, "samples_ts", samples_ts);
    return o;
}

/* One row as a JSON object on one line, `"key": value` as gemma3 bench always wrote it (scripts
 * grep it); every value is printed by cJSON. */
static void print_json_object(const cJSON *row, FILE *f) {
    const cJSON *it;
    int k = 0;
    fputc('{', f);
    cJSON_ArrayForEach(it, row) {
        char *value = cJSON_PrintUnformatted(it);
        fprintf(f, "%s\"%s\": %s", k++ ? ", " : "", it->string, value ? value : "null");
        free(value);
    }
    fputc('}', f);
}

/* A scalar field as CSV or SQL text: strings quoted with `quote`, which is doubled inside. */
static void put_field(const cJSON *item, char quote, FILE *f) {
    if (cJSON_IsString(item)) {
        fputc(quote, f);
        for (const char *p = item->valuestring; *p; p++) {
            if (*p == quote) fputc(quote, f);
            fputc(*p, f);
        }
        fputc(quote, f);
        return;
    }
    if (cJSON_IsBool(item)) {
        fputs(cJSON_IsTrue(item) ? "1" : "0", f);
        return;
    }
    char *text = cJSON_PrintUnformatted(item);
    if (text) fputs(text, f);
    free(text);
}

/* The CSV and SQL columns: every field but the sample arrays, in the JSON's order. */
static int is_column(const cJSON *item) { return !cJSON_IsArray(item); }

/* CSV: the columns gemma3 bench always wrote first, in their order, then the rest. */
static const char *const csv_first[] = {"model_type", "model_size", "model_n_params", "isa",
                                        "n_threads", "test", "n_prompt", "n_gen", "avg_ns",
                                        "stddev_ns", "avg_ts", "stddev_ts"};
enum { N_CSV_FIRST = sizeof csv_first / sizeof csv_first[0] };

static int csv_first_index(const char *key) {
    for (int i = 0; i < N_CSV_FIRST; i++)
        if (!strcmp(csv_first[i], key)) return i;
    return -1;
}

/* The header (names) or a row (values, quoted). */
static void print_csv_line(const cJSON *row, int names, FILE *f) {
    const cJSON *it;
    for (int i = 0; i < N_CSV_FIRST; i++) {
        if (i) fputc(',', f);
        if (names) fputs(csv_first[i], f);
        else put_field(cJSON_GetObjectItemCaseSensitive(row, csv_first[i]), '"', f);
    }
    cJSON_ArrayForEach(it, row) if (is_column(it) && csv_first_index(it->string) < 0) {
        fputc(',', f);
        if (names) fputs(it->string, f);
        else put_field(it, '"', f);
    }
    fputc('\n', f);
}

static void print_csv(const cJSON *row, int first, FILE *f) {
    if (first) print_csv_line(row, 1, f);
    print_csv_line(row, 0, f);
}

static void print_sql(const cJSON *row, int first, FILE *f) {
    const cJSON *it;
    int k = 0;
    if (first) {
        fprintf(f, "CREATE TABLE IF NOT EXISTS llama_bench (\n");
        cJSON_ArrayForEach(it, row) if (is_column(it)) {
            static const char reals[] = " avg_ts stddev_ts load_s quantize_s repack_s ";
            char key[64];
            snprintf(key, sizeof key, " %s ", it->string);
            const char *type = cJSON_IsString(it) ? "TEXT" : strstr(reals, key) ? "REAL" : "INTEGER";
            fprintf(f, "%s  %s %s", k++ ? ",\n" : "", it->string, type);
        }
        fprintf(f, "\n);\n\n");
    }
    fprintf(f, "INSERT INTO llama_bench (");
    k = 0;
    cJSON_ArrayForEach(it, row) if (is_column(it)) fprintf(f, "%s%s", k++ ? ", " : "", it->string);
    fprintf(f, ") VALUES (");
    k = 0;
    cJSON_ArrayForEach(it, row) if (is_column(it)) {
        if (k++) fputs(", ", f);
        put_field(it, '\'', f);
    }
    fprintf(f, ");\n");
}

/* The markdown table; n_batch and type_k get columns when they were listed. */
static void print_md(const model_row *m, const bench_result *r, const bench_args *args, int first) {
    int show_b = args->batches.n > 0, show_k = args->kv_types.n > 0, show_d = args->drafts.n > 0;
    if (first) {
        printf("| %-22s | %10s | %10s | %-10s | %7s |", "model", "size", "params", "isa", "threads");
        if (show_b) printf(" %7s |", "n_batch");
        if (show_k) printf(" %-6s |", "type_k");
        if (show_d) printf(" %5s | %17s |", "draft", "accepted");
        printf(" %14s | %20s |\n", "test", "t/s");
        printf("| %-22s | %10s | %10s | %-10s | %7s |", "----------------------", "---------:",
               "---------:", "----------", "------:");
        if (show_b) printf(" %7s |", "------:");
        if (show_k) printf(" %-6s |", "------");
        if (show_d) printf(" %5s | %17s |", "----:", "----------------:");
        printf(" %14s | %20s |\n", "-------------:", "-------------------:");
    }
    char size[32], params[32], ts[48];
    snprintf(size, sizeof size, "%.2f GiB", (double)m->info.weight_bytes / (1024.0 * 1024 * 1024));
    if (m->info.n_params >= 1000000000) snprintf(params, sizeof params, "%.2f B", m->info.n_params / 1e9);
    else snprintf(params, sizeof params, "%.2f M", m->info.n_params / 1e6);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
    printf("| %-22s | %10s | %10s | %-10s | %7d |", m->label, size, params, m->isa, r->n_threads);
    if (show_b) printf(" %7d |", r->n_batch);
    if (show_k) printf(" %-6s |", r->kv_type);
    if (show_d) {
        char acc[48] = "-";
        if (r->n_drafted)
            snprintf(acc, sizeof acc, "%lld/%lld %.0f%%", (long long)r->n_accepted,
                     (long long)r->n_drafted, 100.0 * (double)r->n_accepted / (double)r->n_drafted);
        printf(" %5d | %17s |", r->n_draft, acc);
    }
    printf(" %14s | %20s |\n", r->test, ts);
}

/* Prints one finished row in the chosen format; JSON rows are gathered into *all. */
static void print_row(const model_row *m, const bench_result *r, const bench_args *args,
                      int *n_printed, cJSON *all) {
    int first = (*n_printed)++ == 0;
    if (args->format == OUT_MD) {
        print_md(m, r, args, first);
    } else {
        cJSON *row = row_json(m, r);
        if (args->format == OUT_JSON) {
            cJSON_AddItemToArray(all, row);
            row = NULL;
        } else if (args->format == OUT_JSONL) {
            print_json_object(row, stdout);
            putchar('\n');
        } else if (args->format == OUT_CSV) {
            print_csv(row, first, stdout);
        } else {
            print_sql(row, first, stdout);
        }
        cJSON_Delete(row);
    }
    fflush(stdout);
}

/* The tests one session runs, in llama-bench's order: pp, tg, pp+tg, each at every depth. */
typedef struct test_spec {
    int n_prompt, n_gen, n_depth;
} test_spec;

static int list_tests(const bench_args *a, test_spec *out) {
    int n = 0;
    for (int d = 0; d < a->depths.n; d++) {
        for (int i = 0; i < a->prompts.n; i++)
            if (a->prompts.values[i] > 0) out[n++] = (test_spec){a->prompts.values[i], 0, a->depths.values[d]};
        for (int i = 0; i < a->gens.n; i++)
            if (a->gens.values[i] > 0) out[n++] = (test_spec){0, a->gens.values[i], a->depths.values[d]};
        for (int i = 0; i < a->n_pg; i++)
            if (a->pg[i][0] + a->pg[i][1] > 0) out[n++] = (test_spec){a->pg[i][0], a->pg[i][1], a->depths.values[d]};
    }
    return n;
}

static void test_name(const test_spec *t, char *buf, size_t n) {
    if (t->n_gen == 0) snprintf(buf, n, "pp%d", t->n_prompt);
    else if (t->n_prompt == 0) snprintf(buf, n, "tg%d", t->n_gen);
    else snprintf(buf, n, "pp%d+tg%d", t->n_prompt, t->n_gen);
    if (t->n_depth > 0) snprintf(buf + strlen(buf), n - strlen(buf), " @ d%d", t->n_depth);
}

/* A run that returned -1: stopped by Ctrl-C (its forward call aborted), or an error. */
static int run_failed(void) {
    return cli_interrupted() ? CLI_EXIT_INTERRUPTED : cli_fail("%s", gemma3_last_error());
}

/* Runs one test on a session: a warm-up run, then args->reps timed runs. */
static int run_test(gemma3_session *s, gemma3_spec *spc, int greedy, const model_row *m,
                    const test_spec *t, int reps, int32_t *tokens, bench_result *r) {
    test_name(t, r->test, sizeof r->test);
    r->n_prompt = t->n_prompt;
    r->n_gen = t->n_gen;
    r->n_depth = t->n_depth;
    r->n_threads = gemma3_session_n_threads(s);
    time_t now = time(NULL);
    strftime(r->time, sizeof r->time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    int vocab = m->info.vocab_size;
    if (run_once(s, spc, greedy, vocab, tokens, t->n_depth, t->n_prompt, t->n_gen ? 1 : 0) < 0)
        return run_failed();
    r->n_samples = 0;
    gemma3_spec_stats before = {0}, after = {0};
    if (spc) gemma3_spec_get_stats(spc, &before);
    for (int rep = 0; rep < reps; rep++) {
        double ns = cli_interrupted() ? -1 : run_once(s, spc, greedy, vocab, tokens, t->n_depth, t->n_prompt, t->n_gen);
        if (ns < 0) return run_failed();
        r->samples_ns[r->n_samples++] = ns;
    }
    if (spc) gemma3_spec_get_stats(spc, &after);
    r->n_drafted = after.n_drafted - before.n_drafted;
    r->n_accepted = after.n_accepted - before.n_accepted;
    summarize(r);
    return 0;
}

/* The most tokens a test puts in the cache. */
static int longest_test(const bench_args *a) {
    test_spec tests[MAX_LIST * MAX_LIST * 3];
    int n = list_tests(a, tests), longest = 1;
    for (int i = 0; i < n; i++) {
        int len = tests[i].n_depth + tests[i].n_prompt + tests[i].n_gen;
        longest = len > longest ? len : longest;
    }
    return longest;
}

/* The tests of one session, plain and with each --draft value (a speculator over the draft
 * model's session made beside it, or n-gram lookup). */
static int bench_session(gemma3_session *s, const gemma3_session_params *sp, const model_row *row,
                         const gemma3_model *draft_model, const bench_args *args, int32_t *tokens,
                         bench_result *r, int *n_printed, cJSON *all) {
    test_spec tests[MAX_LIST * MAX_LIST * 3];
    int n_tests = list_tests(args, tests), status = 0;
    const int n_d = args->drafts.n ? args->drafts.n : 1;
    gemma3_session *ds = NULL;
    if (draft_model && gemma3_session_init(draft_model, sp, &ds) != GEMMA3_OK)
        return cli_fail("-md: %s", gemma3_last_error());
    if (ds) cli_interrupt_watch(ds);
    for (int d = 0; d < n_d && !status; d++) {
        const int draft_max = args->drafts.n ? args->drafts.values[d] : 0;
        gemma3_spec *spc = NULL;
        if (draft_max > 0) {
            gemma3_spec_params qp = gemma3_spec_default_params();
            qp.type = ds ? GEMMA3_SPEC_DRAFT : GEMMA3_SPEC_NGRAM;
            qp.draft_max = draft_max;
            if (gemma3_spec_init(s, ds, &qp, &spc) != GEMMA3_OK) {
                status = cli_fail("%s", gemma3_last_error());
                break;
            }
        }
        for (int t = 0; t < n_tests && !status; t++) {
            memset(r, 0, sizeof *r);
            r->n_batch = sp->n_batch ? sp->n_batch : 512;
            r->kv_type = sp->kv_type == GEMMA3_KV_F32 ? "f32" : "bf16";
            r->n_draft = draft_max;
            status = run_test(s, spc, args->drafts.n > 0, row, &tests[t], args->reps, tokens, r);
            if (!status) print_row(row, r, args, n_printed, all);
        }
        gemma3_spec_free(spc);
    }
    gemma3_session_free(ds);
    return status;
}

/* Every kv type x batch x thread count x test on one loaded model. */
static int bench_model(gemma3_model *model, const gemma3_model *draft_model, const model_row *m,
                       const cli_model_opts *mo, const bench_args *args, int *n_printed, cJSON *all) {
    int status = 0;
    int32_t *tokens = malloc((size_t)longest_test(args) * sizeof *tokens);
    bench_result *r = malloc(sizeof *r);
    if (!tokens || !r) status = cli_fail("bench: out of memory");
    const int n_kv = args->kv_types.n ? args->kv_types.n : 1, n_b = args->batches.n ? args->batches.n : 1;
    for (int k = 0; k < n_kv && !status; k++)
        for (int b = 0; b < n_b && !status; b++)
            for (int ti = 0; ti < args->threads.n && !status; ti++) {
                gemma3_session_params sp = mo->sp; /* n_ctx: -c, or the longest test */
                if (args->kv_types.n)
                    sp.kv_type = strcmp(args->kv_types.items[k], "f32") ? GEMMA3_KV_BF16 : GEMMA3_KV_F32;
                if (args->batches.n) sp.n_batch = args->batches.values[b];
                sp.n_threads = args->threads.values[ti];
                for (int d = 0; d < args->drafts.n; d++)
                    if (sp.n_swa_extra < gemma3_spec_n_swa_extra(args->drafts.values[d]))
                        sp.n_swa_extra = gemma3_spec_n_swa_extra(args->drafts.values[d]);
                gemma3_session *s = NULL;
                if (gemma3_session_init(model, &sp, &s) != GEMMA3_OK) {
                    status = cli_fail("%s", gemma3_last_error());
                    break;
                }
                cli_interrupt_watch(s);
                model_row row = *m;
                row.isa = gemma3_session_isa(s);
                status = bench_session(s, &sp, &row, draft_model, args, tokens, r, n_printed, all);
                gemma3_session_free(s);
            }
    free(r);
    free(tokens);
    return status;
}

/* The md table's footnote on a model's load, into buf. */
static void load_line(const model_row *m, char *buf, size_t n) {
    const gemma3_model_info *info = &m->info;
    char rate[32], quant[48] = "", repack[48] = "";
    if (info->quantize_seconds > 0) snprintf(quant, sizeof quant, "; quantized in %.3f s", info->quantize_seconds);
    if (info->repack_seconds > 0) snprintf(repack, sizeof repack, "; repacked in %.3f s", info->repack_seconds);
    snprintf(buf, n, "load %s: %s%s, %.2f GB in %.3f s%s%s%s%s; weights %s, %s layout", m->dir,
             info->load_mode, info->load_auto ? " (auto)" : "", (double)info->load_bytes / 1e9,
             info->load_seconds, cli_load_rate(info, rate, sizeof rate),
             info->load_from_disk ? ", from the disk as used (does not fit in memory)" : "", quant,
             repack, info->weight_type, info->weight_layout);
}

enum { LOAD_LINE = 512 };

/* Each model x weight type, loaded in turn; the md table's load footnotes after it. */
static int run_bench(cli_model_opts *mo, const bench_args *args) {
    int n_printed = 0, status = 0, n_loads = 0;
    gemma3_model *draft_model = NULL;
    if (args->draft_dir) {
        cli_model_opts dmo = *mo;
        dmo.model_dir = args->draft_dir;
        if ((status = cli_model_load(&dmo, &draft_model))) return status;
    }
    const int n_q = args->quants.n ? args->quants.n : 1;
    cJSON *all = cJSON_CreateArray();
    char *loads = malloc((size_t)args->models.n * (size_t)n_q * LOAD_LINE);
    if (!all || !loads) status = cli_fail("bench: out of memory");
    for (int mi = 0; mi < args->models.n && !status; mi++)
        for (int q = 0; q < n_q && !status; q++) {
            if (cli_interrupted()) { /* during the last model's tests or this load */
                status = CLI_EXIT_INTERRUPTED;
                break;
            }
            mo->model_dir = args->models.items[mi];
            if (args->quants.n)
                mo->mp.weight_type = (enum gemma3_weight_type)gemma3_weight_type_parse(args->quants.items[q]);
            gemma3_model *model = NULL;
            if ((status = cli_model_load(mo, &model))) break;
            model_row m = {.dir = mo->model_dir};
            gemma3_model_get_info(model, &m.info);
            model_label(&m.info, m.label, sizeof m.label);
            load_line(&m, loads + (size_t)n_loads++ * LOAD_LINE, LOAD_LINE);
            cli_interrupt_catch(); /* from the first model loaded on: Ctrl-C reports the rows done */
            status = bench_model(model, draft_model, &m, mo, args, &n_printed, all);
            gemma3_model_free(model);
        }
    /* Ctrl-C: the rows measured so far stay (printed, or in the JSON array); the test it cut
     * short has no row */
    int report = !status || (status == CLI_EXIT_INTERRUPTED && n_printed > 0);
    if (status == CLI_EXIT_INTERRUPTED)
        fprintf(stderr, "gemma3: bench: interrupted: %d row%s measured, the test in progress dropped\n",
                n_printed, n_printed == 1 ? "" : "s");
    if (report && args->format == OUT_MD) {
        putchar('\n');
        for (int i = 0; i < n_loads; i++) puts(loads + (size_t)i * LOAD_LINE);
    }
    if (report && args->format == OUT_JSON) {
        const cJSON *row;
        int k = 0;
        printf("[\n");
        cJSON_ArrayForEach(row, all) {
            printf("%s  ", k++ ? ",\n" : "");
            print_json_object(row, stdout);
        }
        printf("\n]\n");
    }
    free(loads);
    cJSON_Delete(all);
    gemma3_model_free(draft_model);
    return status;
}

/* Refused before anything is loaded: a run that measures nothing, or a -c the tests do not fit
 * in (each runs from an empty cache; without -c the cache is the longest test). */
static int check_sizes(cli_model_opts *mo, const bench_args *args) {
    test_spec tests[MAX_LIST * MAX_LIST * 3];
    if (list_tests(args, tests) == 0) return cli_usage_error("bench: -p and -n are all 0: no test to run");
    int longest = longest_test(args);
    if (mo->sp.n_ctx && mo->sp.n_ctx < longest)
        return cli_usage_error("-c: %d is smaller than the longest test (%d tokens of -p/-n)",
                               mo->sp.n_ctx, longest);
    if (mo->sp.n_ctx) return 0;
    for (int i = 0; i < args->models.n; i++) {
        gemma3_model_info cfg;
        if (gemma3_model_peek(args->models.items[i], &cfg) == GEMMA3_OK && longest > cfg.max_position_embeddings)
            return cli_usage_error("-p/-n: the longest test (%d tokens) exceeds the model's "
                                   "max_position_embeddings %d", longest, cfg.max_position_embeddings);
    }
    mo->sp.n_ctx = longest; /* a config that cannot be read is reported by the load */
    return 0;
}

int cmd_bench(int argc, char **argv) {
    bench_args args = {.prompts = {{512}, 1}, .gens = {{128}, 1}, .depths = {{0}, 1}, .reps = 5,
                       .format = OUT_MD};
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    void *const dst[] = {&args, &mo, &mo};
    int status;
    if (cli_parse(&bench_command, argc, argv, dst, &status)) return status;
    if (args.models.n == 0) return cli_usage_error("bench: -m: a model directory is required");
    if (args.threads.n == 0) args.threads = (int_list){{mo.sp.n_threads}, 1};
    if (args.drafts.n && !args.draft_dir && !args.lookup)
        return cli_usage_error("--draft: needs a drafter: -md DIR or --lookup");
    if ((args.draft_dir || args.lookup) && !args.drafts.n) args.drafts = (int_list){{0, 16}, 2};
    if ((status = check_sizes(&mo, &args))) return status;
    for (int i = 0; i < args.threads.n; i++) cli_warn_threads("-t", args.threads.values[i]);
    return run_bench(&mo, &args);
}
