/* cli/generate.c - `gemma3 -m DIR -p PROMPT`: one-shot generation, streamed to stdout, with a
 * summary on stderr, or one JSON object for scripts (--output-format json). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "util.h"

static const char help[] =
    "usage: gemma3 [generate] -m DIR (-p PROMPT | -f FILE | --prompt-ids IDS) [options]\n"
    "Generates text from a prompt, streaming it to stdout; a summary goes to stderr.\n\n"
    "  -p, --prompt TEXT      the prompt\n"
    "  -f, --file FILE        read the prompt from FILE\n"
    "      --prompt-ids IDS   the prompt as comma-separated token ids, used as given\n"
    "                         (no chat template, no BOS added)\n"
    "      --raw              no chat template: <bos> + the prompt text (for base models)\n"
    "      --output-format F  text (default) or json (one object at the end: text, prompt_ids,\n"
    "                         generated_ids, seed, timings, stop_reason ...)\n";

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
    cJSON_AddNumberToObject(root, "n_threads", gemma3_session_n_threads(g->session));
    cJSON_AddNumberToObject(root, "n_ctx", gemma3_session_n_ctx(g->session));
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    cJSON_AddNumberToObject(t, "load_ms", g->load_seconds * 1e3);
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

int cmd_generate(int argc, char **argv) {
    gen_opts opts;
    int rc;
    gen_opts_init(&opts);
    const char *prompt = NULL, *prompt_file = NULL, *prompt_ids_arg = NULL;
    int raw = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("%s%s%s", help, gen_flags_help, cli_model_help);
            cli_sampling_help(stdout);
            return 0;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(prompt_file = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--prompt-ids")) {
            if (!(prompt_ids_arg = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--raw")) {
            raw = 1;
        } else if (!strcmp(a, "--output-format")) {
            if (!(v = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
            if (!strcmp(v, "json")) json = 1;
            else if (!strcmp(v, "text")) json = 0;
            else return cli_usage_error("%s: '%s' is not one of text, json", a, v);
        } else if ((rc = gen_flag(argc, argv, &i, &opts)) != CLI_NOT_MINE) {
            if (rc) return rc;
        } else {
            return cli_usage_error("unknown flag '%s' (see gemma3 --help)", a);
        }
    }
    if (!opts.mo.model_dir) return cli_usage_error("-m: a model directory is required");
    if (!!prompt + !!prompt_file + !!prompt_ids_arg != 1)
        return cli_usage_error("-p: give exactly one of -p, -f, --prompt-ids");

    char *file_text = NULL;
    size_t file_len = 0;
    if (prompt_file && g3_read_file(prompt_file, &file_text, &file_len) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());

    gen_state g;
    int32_t *prompt_ids = NULL, *gen_ids = NULL;
    int n_prompt = 0, n_gen = 0;
    gen_stop stop = GEN_STOP_LIMIT;
    int status = gen_open(&g, &opts);
    if (status) goto done;
    if (prompt_ids_arg) {
        if ((status = cli_parse_ids("--prompt-ids", prompt_ids_arg, g.info.vocab_size - 1, &prompt_ids,
                                    &n_prompt)))
            goto done;
    } else {
        const char *text = prompt ? prompt : file_text;
        size_t len = prompt ? strlen(prompt) : file_len;
        if ((status = build_prompt(&g, text, len, raw, opts.system_prompt, &prompt_ids, &n_prompt)))
            goto done;
    }
    int n_ctx = gemma3_session_n_ctx(g.session);
    if (n_prompt == 0) {
        status = cli_usage_error("-p: the prompt is empty (no tokens)");
        goto done;
    }
    if (n_prompt > n_ctx) {
        status = cli_fail("the prompt has %d tokens but the context holds %d (raise -c)", n_prompt, n_ctx);
        goto done;
    }
    int max_gen = opts.n_predict >= 0 ? opts.n_predict : n_ctx - n_prompt + 1;
    gen_ids = malloc((size_t)(max_gen > 0 ? max_gen : 1) * sizeof *gen_ids);
    if (!gen_ids) {
        status = cli_fail("out of memory");
        goto done;
    }
    if (gen_reply(&g, prompt_ids, n_prompt, opts.n_predict, json ? NULL : stdout, NULL, gen_ids,
                  max_gen, &n_gen, &stop) != GEMMA3_OK) {
        status = cli_fail("%s", gemma3_last_error());
        goto done;
    }
    if (json) {
        status = print_json(&g, prompt_ids, n_prompt, gen_ids, n_gen, stop);
    } else {
        fputc('\n', stdout);
        if (stop == GEN_STOP_CONTEXT) fprintf(stderr, "gemma3: stopped: the context (-c %d) is full\n", n_ctx);
        gen_print_summary(&g, stderr);
    }
done:
    free(gen_ids);
    free(prompt_ids);
    free(file_text);
    gen_close(&g);
    return status;
}
