/* cli/generate.c - `gemma3 -m DIR -p PROMPT`: one-shot generation, streamed to stdout, with a
 * summary on stderr, or one JSON object for scripts (--output-format json). */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reply.h"

typedef struct generate_args {
    const char *prompt, *prompt_file, *prompt_ids;
    int raw;
    int json; /* --output-format: 0 text, 1 json */
    const char *prompt_cache;
    int prompt_cache_all, prompt_cache_ro;
} generate_args;

#define A(field) offsetof(generate_args, field)
static const cli_option generate_options[] = {
    {"-p, --prompt", "TEXT", CLI_TEXT, A(prompt), .help = "the prompt (escapes processed: see -e)"},
    {"-f, --file", "FILE", CLI_TEXT, A(prompt_file),
     .help = "read the prompt from FILE (- = standard input)"},
    {"--prompt-ids", "IDS", CLI_TEXT, A(prompt_ids),
     .help = "the prompt as comma-separated token ids, used as given (no template, no BOS added)"},
    {"--raw", NULL, CLI_SWITCH, A(raw), .value = 1,
     .help = "no chat template: <bos> + the prompt text (for base models)"},
    {"--output-format", "F", CLI_CHOICE, A(json), .choices = "text|json",
     .help = "json: one object at the end (text, prompt_ids, generated_ids, seed, timings, "
             "stop_reason ...)"},
    {"--prompt-cache", "FILE", CLI_TEXT, A(prompt_cache),
     .help = "reuse the saved state in FILE when its tokens begin the prompt (prefill only the "
             "rest), then save the state after the prompt to FILE"},
    {"--prompt-cache-all", NULL, CLI_SWITCH, A(prompt_cache_all), .value = 1,
     .help = "with --prompt-cache: save again after the generation (its tokens included)"},
    {"--prompt-cache-ro", NULL, CLI_SWITCH, A(prompt_cache_ro), .value = 1,
     .help = "with --prompt-cache: use FILE but never write it"},
};
#undef A

static const cli_group generate_group = CLI_GROUP("prompt", generate_options);

static const cli_command generate_command = {
    "usage: gemma3 [generate] -m DIR (-p PROMPT | -f FILE | --prompt-ids IDS) [options]\n"
    "Generates text from a prompt, streaming it to stdout; a summary goes to stderr.\n",
    "unknown flag '%s' (see gemma3 --help)",
    {&generate_group, &gen_group, &cli_model_group, &cli_sampling_group, &cli_grammar_group,
     &cli_compat_group, &cli_spec_group, NULL},
};

static const char *stop_name(gen_stop s) {
    switch (s) {
    case GEN_STOP_EOS: return "eos";
    case GEN_STOP_LIMIT: return "limit";
    case GEN_STOP_CONTEXT: return "context_full";
    case GEN_STOP_INTERRUPTED: return "interrupted";
    case GEN_STOP_STRING: return "stop_string";
    }
    return "?";
}

static cJSON *ids_array(const int32_t *ids, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

/* What --prompt-cache did, for the summary line and the JSON. */
typedef struct cache_report {
    int used;             /* --prompt-cache given */
    int reused;           /* prompt tokens restored from the file, not prefilled */
    char note[256];       /* why not more, or "" */
    double load_seconds, save_seconds;
} cache_report;

/* text[0..n) as a JSON string literal, quotes included, every byte kept: a NUL the tokens decode
 * to is \u0000 (a cJSON string would end there). malloc'd; NULL when out of memory. */
static char *json_literal(const char *text, size_t n) {
    char *lit = malloc(6 * n + 3), *w = lit;
    if (!lit) return NULL;
    *w++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : NULL;
        if (esc) w += sprintf(w, "%s", esc);
        else if (c < 0x20) w += sprintf(w, "\\u%04x", c);
        else *w++ = (char)c;
    }
    *w++ = '"';
    *w = '\0';
    return lit;
}

static int print_json(const gen_state *g, const int32_t *prompt, int n_prompt,
                      const int32_t *gen, int n_gen, gen_stop stop, const cache_report *cache) {
    /* by length: a NUL byte the tokens decode to is kept (\u0000) */
    char *literal = json_literal(g->text ? g->text : "", g->text ? g->text_len : 0);
    if (!literal) return cli_fail("json output: out of memory");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddRawToObject(root, "text", literal);
    free(literal);
    cJSON_AddItemToObject(root, "prompt_ids", ids_array(prompt, n_prompt));
    cJSON_AddItemToObject(root, "generated_ids", ids_array(gen, n_gen));
    cJSON_AddNumberToObject(root, "seed", gemma3_sampler_seed(g->sampler));
    cJSON_AddStringToObject(root, "stop_reason", stop_name(stop));
    cJSON_AddStringToObject(root, "isa", gemma3_session_isa(g->session));
    cJSON_AddStringToObject(root, "weight_type", g->info.weight_type);
    cJSON_AddStringToObject(root, "weight_layout", g->info.weight_layout);
    cJSON_AddNumberToObject(root, "n_threads", gemma3_session_n_threads(g->session));
    cJSON_AddNumberToObject(root, "n_ctx", gemma3_session_n_ctx(g->session));
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    cJSON_AddNumberToObject(t, "load_ms", g->load_seconds * 1e3);
    cJSON_AddNumberToObject(t, "quantize_ms", g->info.quantize_seconds * 1e3);
    cJSON_AddNumberToObject(t, "repack_ms", g->info.repack_seconds * 1e3);
    cJSON_AddNumberToObject(t, "prompt_n", g->n_prompt_tokens);
    cJSON_AddNumberToObject(t, "prompt_ms", g->prompt_seconds * 1e3);
    cJSON_AddNumberToObject(t, "prompt_per_second",
                            g->prompt_seconds > 0 ? g->n_prompt_tokens / g->prompt_seconds : 0);
    cJSON_AddNumberToObject(t, "predicted_n", g->n_gen_tokens);
    cJSON_AddNumberToObject(t, "predicted_ms", g->gen_seconds * 1e3);
    cJSON_AddNumberToObject(t, "predicted_per_second",
                            g->gen_seconds > 0 ? g->n_gen_tokens / g->gen_seconds : 0);
    if (cache->used) {
        cJSON_AddNumberToObject(root, "prompt_cache_reused", cache->reused);
        cJSON_AddNumberToObject(t, "prompt_cache_load_ms", cache->load_seconds * 1e3);
        cJSON_AddNumberToObject(t, "prompt_cache_save_ms", cache->save_seconds * 1e3);
    }
    char *s = cJSON_PrintUnformatted(root);
    if (s) puts(s);
    free(s);
    cJSON_Delete(root);
    return 0;
}

/* Builds the prompt ids from -p/-f/--prompt-ids as the flags say. */
static int build_prompt(const gen_state *g, const char *text, size_t text_len, int raw,
                        const char *system_prompt, int32_t **ids, int *n_ids) {
    if (!raw) {
        long nul = gen_find_nul(text, text_len);
        if (nul >= 0)
            return cli_fail("the prompt has a NUL byte at byte %ld: the chat template takes text "
                            "(--raw keeps every byte)", nul);
        char *z = malloc(text_len + 1);
        if (!z) return cli_fail("out of memory");
        memcpy(z, text, text_len);
        z[text_len] = '\0';
        int rc = gen_encode_chat(g, system_prompt, z, 1, ids, n_ids);
        free(z);
        return rc == GEMMA3_OK ? 0 : cli_fail("%s", cli_last_error());
    }
    int flags = (gemma3_tokenizer_add_bos(g->tok) ? GEMMA3_TOK_BOS : 0) | GEMMA3_TOK_PARSE_SPECIAL;
    int need = gemma3_tokenizer_encode(g->tok, text, text_len, flags, NULL, 0);
    if (need < 0) return cli_fail("%s", gemma3_last_error());
    *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof **ids);
    if (!*ids) return cli_fail("out of memory");
    *n_ids = gemma3_tokenizer_encode(g->tok, text, text_len, flags, *ids, need);
    return 0;
}

/* The prompt ids from --prompt-ids, or from the text of -p or -f (caller frees *ids). */
static int prompt_from_args(const gen_state *g, const generate_args *args, const char *text,
                            size_t len, const char *system_prompt, int32_t **ids, int *n_ids) {
    if (args->prompt_ids)
        return cli_parse_ids("--prompt-ids", args->prompt_ids, g->info.vocab_size - 1, ids, n_ids);
    return build_prompt(g, text, len, args->raw, system_prompt, ids, n_ids);
}

/* With --prompt-cache the sliding-window layers keep this many positions beyond their window,
 * so a cache can be cut back that far to where a new prompt departs from it (a new question
 * after the same document, the chat template's closing tokens): 512 rows more per sliding layer
 * (their cost: docs/cli.md, "Prompt cache"). */
#define PROMPT_CACHE_SWA_EXTRA 512

/* 1900 -> "1,900" */
static const char *with_commas(int n, char *buf, size_t cap) {
    char digits[16];
    int len = snprintf(digits, sizeof digits, "%d", n < 0 ? 0 : n), at = 0;
    for (int i = 0; i < len && at + 2 < (int)cap; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[at++] = ',';
        buf[at++] = digits[i];
    }
    buf[at] = '\0';
    return buf;
}

/* --prompt-cache, as llama.cpp: when FILE exists, load it and keep as much of it as begins the
 * prompt. Whole, when its tokens are a prefix of the prompt; otherwise cut back to the common
 * prefix (the common case: the same long document, another question), which the sliding-window
 * layers' rings allow only while they still hold the window before that position (up to
 * PROMPT_CACHE_SWA_EXTRA + 1 tokens back), else nothing is reused. The reused tokens go into the sampler's history
 * as if they had been fed. A file of another model or settings is an error, as in llama.cpp. */
static int restore_prompt_cache(gen_state *g, const char *path, const int32_t *prompt, int n_prompt,
                                cache_report *cache) {
    cache->used = 1;
    if (access(path, F_OK) != 0) {
        snprintf(cache->note, sizeof cache->note, "%s does not exist yet", path);
        return 0;
    }
    double t0 = cli_now();
    if (gemma3_session_load(g->session, path) != GEMMA3_OK)
        return cli_fail("--prompt-cache: %s", gemma3_last_error());
    const int n_cached = gemma3_session_pos(g->session);
    const int32_t *cached = gemma3_session_tokens(g->session);
    int common = 0;
    while (common < n_cached && common < n_prompt && cached[common] == prompt[common]) common++;
    if (common == n_cached) {
        cache->reused = n_cached; /* all of it; when it is the whole prompt, its logits too */
    } else {
        /* the whole prompt is cached but the file runs on: recompute the last prompt token */
        int keep = common == n_prompt ? n_prompt - 1 : common;
        char a[16], b[16], c[16];
        if (gemma3_session_truncate(g->session, keep) == GEMMA3_OK) {
            cache->reused = keep;
        } else {
            snprintf(cache->note, sizeof cache->note,
                     "the cache's %s tokens match only the prompt's first %s, and its sliding-window "
                     "layers let it be cut back to %s tokens at the least",
                     with_commas(n_cached, a, sizeof a), with_commas(common, b, sizeof b),
                     with_commas(gemma3_session_truncate_min(g->session), c, sizeof c));
            gemma3_session_reset(g->session);
        }
    }
    for (int i = 0; i < cache->reused; i++) gemma3_sampler_accept(g->sampler, prompt[i]);
    cache->load_seconds = cli_now() - t0;
    return 0;
}

static int save_prompt_cache(gen_state *g, const char *path, cache_report *cache) {
    double t0 = cli_now();
    if (gemma3_session_save(g->session, path) != GEMMA3_OK)
        return cli_fail("--prompt-cache: %s", gemma3_last_error());
    cache->save_seconds += cli_now() - t0;
    return 0;
}

static void print_cache_summary(const cache_report *cache, int n_prompt, FILE *f) {
    char a[16], b[16];
    fprintf(f, "prompt cache: %s of %s tokens reused", with_commas(cache->reused, a, sizeof a),
            with_commas(n_prompt, b, sizeof b));
    if (cache->note[0]) fprintf(f, " (%s)", cache->note);
    fprintf(f, " | load %.3f s | save %.3f s\n", cache->load_seconds, cache->save_seconds);
}

/* Generates the reply to prompt and prints it (streamed text + summary, or one JSON object).
 * With --prompt-cache the prompt is prefilled first (what the cache did not hold), the state
 * saved, then the reply generated. */
static int generate(gen_state *g, const gen_opts *opts, const generate_args *args,
                    const int32_t *prompt, int n_prompt) {
    int n_ctx = gemma3_session_n_ctx(g->session);
    if (n_prompt == 0) return cli_usage_error("-p: the prompt is empty (no tokens)");
    if (n_prompt > n_ctx)
        return cli_fail("the prompt has %d tokens but the context holds %d (raise -c)", n_prompt,
                        n_ctx);
    cache_report cache = {0};
    const char *cache_path = args->prompt_cache;
    int status = cache_path ? restore_prompt_cache(g, cache_path, prompt, n_prompt, &cache) : 0;
    if (status) return status;
    int max_gen = opts->n_predict >= 0 ? opts->n_predict : n_ctx - n_prompt + 1;
    int32_t *gen_ids = malloc((size_t)(max_gen > 0 ? max_gen : 1) * sizeof *gen_ids);
    if (!gen_ids) return cli_fail("out of memory");
    int n_gen = 0;
    gen_stop stop = GEN_STOP_LIMIT;
    FILE *out = args->json ? NULL : stdout;
    int rc = GEMMA3_OK;
    if (cache_path) {
        rc = gen_reply(g, prompt + cache.reused, n_prompt - cache.reused, 0, NULL, NULL, gen_ids,
                       max_gen, &n_gen, &stop);
        if (rc == GEMMA3_OK && !args->prompt_cache_ro && cache.reused < n_prompt)
            status = save_prompt_cache(g, cache_path, &cache);
        if (rc == GEMMA3_OK && !status)
            rc = gen_reply(g, NULL, 0, opts->n_predict, out, NULL, gen_ids, max_gen, &n_gen, &stop);
        if (rc == GEMMA3_OK && !status && !args->prompt_cache_ro && args->prompt_cache_all)
            status = save_prompt_cache(g, cache_path, &cache);
    } else {
        rc = gen_reply(g, prompt, n_prompt, opts->n_predict, out, NULL, gen_ids, max_gen, &n_gen, &stop);
    }
    if (status) {
        /* the error line is printed */
    } else if (rc != GEMMA3_OK) {
        status = cli_fail("%s", cli_last_error());
    } else if (args->json) {
        status = print_json(g, prompt, n_prompt, gen_ids, n_gen, stop, &cache);
    } else {
        fputc('\n', stdout);
        if (stop == GEN_STOP_CONTEXT)
            fprintf(stderr, "gemma3: stopped: the context (-c %d) is full\n", n_ctx);
        if (!opts->quiet) gen_print_summary(g, stderr);
        if (cache.used && !opts->quiet) print_cache_summary(&cache, n_prompt, stderr);
    }
    free(gen_ids);
    return status;
}

int cmd_generate(int argc, char **argv) {
    generate_args args = {0};
    gen_opts opts;
    gen_opts_init(&opts);
    void *const dst[] = {&args, &opts, &opts.mo, &opts.cs, &opts.gr, &opts.mo, &opts.spec};
    int status;
    if (cli_parse(&generate_command, argc, argv, dst, &status)) return status;
    if (!opts.mo.model_dir) return cli_usage_error("-m: a model directory is required");
    if (!!args.prompt + !!args.prompt_file + !!args.prompt_ids != 1)
        return cli_usage_error("-p: give exactly one of -p, -f, --prompt-ids");
    if ((args.prompt_cache_all || args.prompt_cache_ro) && !args.prompt_cache)
        return cli_usage_error("%s: needs --prompt-cache FILE",
                               args.prompt_cache_all ? "--prompt-cache-all" : "--prompt-cache-ro");
    if (args.prompt_cache) opts.mo.sp.n_swa_extra = PROMPT_CACHE_SWA_EXTRA;

    char *text = (char *)args.prompt; /* argv: unescaped in place */
    size_t len = !text ? 0 : opts.escape ? gen_unescape(text) : strlen(text);
    if (args.prompt_file && gemma3_read_file(args.prompt_file, &text, &len) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    gen_state g;
    int32_t *prompt = NULL;
    int n_prompt = 0;
    status = gen_open(&g, &opts);
    if (!status)
        status = prompt_from_args(&g, &args, text, len, opts.system_prompt, &prompt, &n_prompt);
    if (!status) status = generate(&g, &opts, &args, prompt, n_prompt);
    free(prompt);
    if (args.prompt_file) free(text);
    gen_close(&g);
    cli_grammar_free(&opts.gr);
    return status;
}
