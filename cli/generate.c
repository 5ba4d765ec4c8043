/* cli/generate.c - `gemma3 -m DIR -p PROMPT`: one-shot generation, streamed to stdout, with a
 * summary on stderr, or one JSON object for scripts (--output-format json). */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "util.h"

typedef struct generate_args {
    const char *prompt, *prompt_file, *prompt_ids;
    int raw;
    int json; /* --output-format: 0 text, 1 json */
} generate_args;

#define A(field) offsetof(generate_args, field)
static const cli_option generate_options[] = {
    {"-p, --prompt", "TEXT", CLI_TEXT, A(prompt), .help = "the prompt"},
    {"-f, --file", "FILE", CLI_TEXT, A(prompt_file), .help = "read the prompt from FILE"},
    {"--prompt-ids", "IDS", CLI_TEXT, A(prompt_ids),
     .help = "the prompt as comma-separated token ids, used as given (no template, no BOS added)"},
    {"--raw", NULL, CLI_SWITCH, A(raw), .value = 1,
     .help = "no chat template: <bos> + the prompt text (for base models)"},
    {"--output-format", "F", CLI_CHOICE, A(json), .choices = "text|json",
     .help = "json: one object at the end (text, prompt_ids, generated_ids, seed, timings, "
             "stop_reason ...)"},
};
#undef A

static const cli_group generate_group = CLI_GROUP("prompt", generate_options);

static const cli_command generate_command = {
    "usage: gemma3 [generate] -m DIR (-p PROMPT | -f FILE | --prompt-ids IDS) [options]\n"
    "Generates text from a prompt, streaming it to stdout; a summary goes to stderr.\n",
    "unknown flag '%s' (see gemma3 --help)",
    {&generate_group, &gen_group, &cli_model_group, &cli_sampling_group, &cli_grammar_group,
     NULL},
};

static const char *stop_name(gen_stop s) {
    switch (s) {
    case GEN_STOP_EOS: return "eos";
    case GEN_STOP_LIMIT: return "limit";
    case GEN_STOP_CONTEXT: return "context_full";
    case GEN_STOP_INTERRUPTED: return "interrupted";
    }
    return "?";
}

static cJSON *ids_array(const int32_t *ids, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

static int print_json(const gen_state *g, const int32_t *prompt, int n_prompt,
                      const int32_t *gen, int n_gen, gen_stop stop) {
    int need = gemma3_tokenizer_decode(g->tok, gen, n_gen, NULL, 0);
    char *text = malloc((size_t)(need > 0 ? need : 0) + 1);
    if (!text || need < 0) {
        free(text);
        return cli_fail("json output: %s", need < 0 ? gemma3_last_error() : "out of memory");
    }
    gemma3_tokenizer_decode(g->tok, gen, n_gen, text, (size_t)need + 1);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "text", text);
    cJSON_AddItemToObject(root, "prompt_ids", ids_array(prompt, n_prompt));
    cJSON_AddItemToObject(root, "generated_ids", ids_array(gen, n_gen));
    cJSON_AddNumberToObject(root, "seed", gemma3_sampler_seed(g->sampler));
    cJSON_AddStringToObject(root, "stop_reason", stop_name(stop));
    cJSON_AddStringToObject(root, "isa", gemma3_session_isa(g->session));
    cJSON_AddStringToObject(root, "weight_type", g->info.weight_type);
    cJSON_AddNumberToObject(root, "n_threads", gemma3_session_n_threads(g->session));
    cJSON_AddNumberToObject(root, "n_ctx", gemma3_session_n_ctx(g->session));
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    cJSON_AddNumberToObject(t, "load_ms", g->load_seconds * 1e3);
    cJSON_AddNumberToObject(t, "quantize_ms", g->info.quantize_seconds * 1e3);
    cJSON_AddNumberToObject(t, "prompt_n", g->n_prompt_tokens);
    cJSON_AddNumberToObject(t, "prompt_ms", g->prompt_seconds * 1e3);
    cJSON_AddNumberToObject(t, "prompt_per_second",
                            g->prompt_seconds > 0 ? g->n_prompt_tokens / g->prompt_seconds : 0);
    cJSON_AddNumberToObject(t, "predicted_n", g->n_gen_tokens);
    cJSON_AddNumberToObject(t, "predicted_ms", g->gen_seconds * 1e3);
    cJSON_AddNumberToObject(t, "predicted_per_second",
                            g->gen_seconds > 0 ? g->n_gen_tokens / g->gen_seconds : 0);
    char *s = cJSON_PrintUnformatted(root);
    if (s) puts(s);
    free(s);
    cJSON_Delete(root);
    free(text);
    return 0;
}

/* Builds the prompt ids from -p/-f/--prompt-ids as the flags say. */
static int build_prompt(const gen_state *g, const char *text, size_t text_len, int raw,
                        const char *system_prompt, int32_t **ids, int *n_ids) {
    if (!raw) {
        char *z = malloc(text_len + 1);
        if (!z) return cli_fail("out of memory");
        memcpy(z, text, text_len);
        z[text_len] = '\0';
        int rc = gen_encode_chat(g, system_prompt, z, 1, ids, n_ids);
        free(z);
        return rc == GEMMA3_OK ? 0 : cli_fail("%s", gemma3_last_error());
    }
    int flags = GEMMA3_TOK_BOS | GEMMA3_TOK_PARSE_SPECIAL;
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

/* Generates the reply to prompt and prints it (streamed text + summary, or one JSON object). */
static int generate(gen_state *g, const gen_opts *opts, const generate_args *args,
                    const int32_t *prompt, int n_prompt) {
    int n_ctx = gemma3_session_n_ctx(g->session);
    if (n_prompt == 0) return cli_usage_error("-p: the prompt is empty (no tokens)");
    if (n_prompt > n_ctx)
        return cli_fail("the prompt has %d tokens but the context holds %d (raise -c)", n_prompt,
                        n_ctx);
    int max_gen = opts->n_predict >= 0 ? opts->n_predict : n_ctx - n_prompt + 1;
    int32_t *gen_ids = malloc((size_t)(max_gen > 0 ? max_gen : 1) * sizeof *gen_ids);
    if (!gen_ids) return cli_fail("out of memory");
    int n_gen = 0, status = 0;
    gen_stop stop = GEN_STOP_LIMIT;
    if (gen_reply(g, prompt, n_prompt, opts->n_predict, args->json ? NULL : stdout, NULL, gen_ids,
                  max_gen, &n_gen, &stop) != GEMMA3_OK) {
        status = cli_fail("%s", gemma3_last_error());
    } else if (args->json) {
        status = print_json(g, prompt, n_prompt, gen_ids, n_gen, stop);
    } else {
        fputc('\n', stdout);
        if (stop == GEN_STOP_CONTEXT)
            fprintf(stderr, "gemma3: stopped: the context (-c %d) is full\n", n_ctx);
        gen_print_summary(g, stderr);
    }
    free(gen_ids);
    return status;
}

int cmd_generate(int argc, char **argv) {
    generate_args args = {0};
    gen_opts opts;
    gen_opts_init(&opts);
    void *const dst[] = {&args, &opts, &opts.mo, &opts.cs, &opts.gr};
    int status;
    if (cli_parse(&generate_command, argc, argv, dst, &status)) return status;
    if (!opts.mo.model_dir) return cli_usage_error("-m: a model directory is required");
    if (!!args.prompt + !!args.prompt_file + !!args.prompt_ids != 1)
        return cli_usage_error("-p: give exactly one of -p, -f, --prompt-ids");

    char *text = (char *)args.prompt;
    size_t len = text ? strlen(text) : 0;
    if (args.prompt_file && g3_read_file(args.prompt_file, &text, &len) != GEMMA3_OK)
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
