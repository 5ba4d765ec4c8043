/* cli/reply.c - model/session/sampler setup and the reply loop shared by generate and chat. */
#include "reply.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gguf-model.h"
#include "util.h"

#define G(field) offsetof(gen_opts, field)
static const cli_option reply_options[] = {
    {"-n, --n-predict", "N", CLI_INT, G(n_predict), -1, 1 << 30,
     .help = "most tokens to generate per reply, -1 = until a stop token or the context is full"},
    {"-sys, --system-prompt", "TEXT", CLI_TEXT, G(system_prompt),
     .help = "system prompt (folded into the first user turn, as Gemma does)"},
    {"--markers-as-text", NULL, CLI_SWITCH, G(markers_as_text), .value = 1,
     .help = "<start_of_turn>/<end_of_turn> typed in the user's text stay text (default: they "
             "become turn markers, as in Hugging Face)"},
};
#undef G

const cli_group gen_group = CLI_GROUP("generation", reply_options);

void gen_opts_init(gen_opts *opts) {
    memset(opts, 0, sizeof *opts);
    cli_model_opts_init(&opts->mo);
    cli_sampling_init(&opts->cs);
    opts->n_predict = -1;
}

static void add_stop(gen_state *g, int32_t id) {
    if (id < 0 || g->n_stop == (int)(sizeof g->stop_ids / sizeof g->stop_ids[0])) return;
    for (int i = 0; i < g->n_stop; i++)
        if (g->stop_ids[i] == id) return;
    g->stop_ids[g->n_stop++] = id;
}

/* Text to ids without BOS, for the DRY sequence breakers. */
static int encode_plain(void *ctx, const char *text, int32_t *ids, int max_ids) {
    return gemma3_tokenizer_encode(ctx, text, strlen(text), 0, ids, max_ids);
}

int gen_open(gen_state *g, gen_opts *opts) {
    memset(g, 0, sizeof *g);
    if (!opts->mo.model_dir) return cli_usage_error("-m: a model directory is required");
    int rc = cli_grammar_resolve(&opts->gr);
    if (rc) return rc;
    double t0 = g3_now();
    rc = cli_model_load(&opts->mo, &g->model);
    if (rc) return rc;
    g->tok = gemma3_model_tokenizer(g->model);
    if (!g->tok) return cli_fail("%s: no tokenizer.model in the checkpoint", opts->mo.model_dir);
    gemma3_model_get_info(g->model, &g->info);
    rc = cli_check_ctx(&opts->mo, &g->info);
    if (rc) return rc;
    if (gemma3_session_init(g->model, &opts->mo.sp, &g->session) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    g->load_seconds = g3_now() - t0;
    g->chat_flags = opts->markers_as_text ? GEMMA3_TOK_MARKERS_AS_TEXT : 0;

    for (int i = 0; i < g->info.n_eos; i++) add_stop(g, g->info.eos_ids[i]);
    add_stop(g, gemma3_tokenizer_special(g->tok, GEMMA3_SPECIAL_EOS));
    add_stop(g, gemma3_tokenizer_special(g->tok, GEMMA3_SPECIAL_END_OF_TURN));

    char path[4096];
    g3_gen_config gc;
    memset(&gc, 0, sizeof gc); /* a GGUF has no generation_config.json: Gemma's defaults */
    if (!g3_model_is_gguf(opts->mo.model_dir) &&
        (g3_path_join(path, sizeof path, opts->mo.model_dir, "generation_config.json") != GEMMA3_OK ||
         g3_gen_config_load(path, &gc) != GEMMA3_OK))
        return cli_fail("%s", gemma3_last_error());
    cli_sampling_apply_gen_config(&opts->cs, &gc);
    rc = cli_sampling_resolve_breakers(&opts->cs, encode_plain, (void *)g->tok);
    if (rc) return rc;
    /* Only ids that have a piece are ever drawn: the real Gemma 3 has 262,208 embedding rows
     * for 262,144 pieces, and a row without a piece prints nothing. The sampler sees the prefix
     * [0, n_sample) of every logits vector, which holds exactly those ids. */
    int n_pieces = gemma3_tokenizer_vocab_size(g->tok);
    int n_sample = g->info.vocab_size < n_pieces ? g->info.vocab_size : n_pieces;
    gemma3_sampler_params sp = opts->cs.params;
    for (int i = 0; i < sp.n_logit_bias; i++)
        if (sp.logit_bias[i].token >= n_sample)
            return cli_usage_error("-l: token %d is out of range [0, %d) (the ids this model can "
                                   "generate)", (int)sp.logit_bias[i].token, n_sample);
    sp.n_eos = 0;
    for (int i = 0; i < g->n_stop && sp.n_eos < GEMMA3_SAMPLER_MAX_EOS; i++)
        if (g->stop_ids[i] < n_sample) sp.eos_ids[sp.n_eos++] = g->stop_ids[i];
    if (sp.n_ctx == 0) sp.n_ctx = gemma3_session_n_ctx(g->session);
    int src = gemma3_sampler_init(&sp, n_sample, &g->sampler);
    if (src == GEMMA3_ERR_ARG) return cli_usage_error("%s", gemma3_last_error()); /* a flag's value */
    if (src != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    if (opts->gr.text) {
        rc = gemma3_grammar_init_tokenizer(opts->gr.text, opts->gr.len, g->tok, sp.eos_ids,
                                           sp.n_eos, n_sample, &g->grammar);
        if (rc != GEMMA3_OK)
            return rc == GEMMA3_ERR_NOMEM ? cli_fail("%s", gemma3_last_error())
                                          : cli_usage_error("%s: %s", opts->gr.source,
                                                            gemma3_last_error());
    }
    return 0;
}

void gen_close(gen_state *g) {
    gemma3_grammar_free(g->grammar);
    gemma3_sampler_free(g->sampler);
    gemma3_session_free(g->session);
    gemma3_model_free(g->model);
    memset(g, 0, sizeof *g);
}

int gen_is_stop(const gen_state *g, int32_t token) {
    for (int i = 0; i < g->n_stop; i++)
        if (g->stop_ids[i] == token) return 1;
    return 0;
}

static int feed(gen_state *g, const int32_t *ids, int n) {
    if (n == 0) return GEMMA3_OK; /* a prompt restored whole from a saved state */
    int rc = gemma3_session_forward(g->session, ids, n, NULL);
    if (rc != GEMMA3_OK) return rc;
    for (int i = 0; i < n; i++) gemma3_sampler_accept(g->sampler, ids[i]);
    return GEMMA3_OK;
}

int gen_reply(gen_state *g, const int32_t *prompt, int n_prompt, int n_predict, FILE *out,
              volatile sig_atomic_t *interrupt, int32_t *gen_ids, int max_gen, int *n_gen,
              gen_stop *stop) {
    *n_gen = 0;
    int n_ctx = gemma3_session_n_ctx(g->session);
    if (gemma3_session_pos(g->session) + n_prompt > n_ctx)
        return g3_error(GEMMA3_ERR_CONTEXT, "context full: %d tokens in the cache + %d new > -c %d",
                        gemma3_session_pos(g->session), n_prompt, n_ctx);
    double t0 = g3_now();
    int rc = feed(g, prompt, n_prompt);
    if (rc != GEMMA3_OK) return rc;
    g->prompt_seconds += g3_now() - t0;
    g->n_prompt_tokens += n_prompt;

    gemma3_decoder dec = {0};
    char text[256];
    if (g->grammar) gemma3_grammar_reset(g->grammar);
    t0 = g3_now();
    *stop = GEN_STOP_LIMIT;
    for (int i = 0; n_predict < 0 || i < n_predict; i++) {
        if (interrupt && *interrupt) {
            *stop = GEN_STOP_INTERRUPTED;
            break;
        }
        int64_t pos = gemma3_session_pos(g->session);
        const float *logits = gemma3_session_logits(g->session);
        int32_t tok = g->grammar ? gemma3_grammar_sample(g->grammar, g->sampler, logits, pos)
                                 : gemma3_sampler_sample(g->sampler, logits, pos);
        if (tok < 0) return tok;
        if (g->grammar && (rc = gemma3_grammar_accept(g->grammar, tok)) != GEMMA3_OK) return rc;
        if (gen_is_stop(g, tok)) {
            *stop = GEN_STOP_EOS;
            break;
        }
        if (*n_gen < max_gen) gen_ids[(*n_gen)++] = tok;
        if (out) {
            gemma3_decoder_push(g->tok, &dec, tok, text, sizeof text);
            fputs(text, out);
            fflush(out);
        }
        g->n_gen_tokens++;
        if (pos >= n_ctx) { /* the token is kept, but there is no slot left to feed it */
            *stop = GEN_STOP_CONTEXT;
            break;
        }
        if ((rc = feed(g, &tok, 1)) != GEMMA3_OK) return rc;
    }
    if (out) {
        gemma3_decoder_flush(&dec, text, sizeof text);
        fputs(text, out);
        fflush(out);
    }
    g->gen_seconds += g3_now() - t0;
    return GEMMA3_OK;
}

int gen_encode_chat(const gen_state *g, const char *system_prompt, const char *user_text,
                    int add_bos, int32_t **ids, int *n_ids) {
    gemma3_chat_msg msgs[2];
    int n = 0;
    if (system_prompt) msgs[n++] = (gemma3_chat_msg){"system", system_prompt};
    msgs[n++] = (gemma3_chat_msg){"user", user_text};
    int need = gemma3_chat_encode_ex(g->tok, msgs, n, add_bos, 1, g->chat_flags, NULL, 0);
    if (need < 0) return need;
    *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof **ids);
    if (!*ids) return g3_error(GEMMA3_ERR_NOMEM, "out of memory encoding the prompt");
    *n_ids = gemma3_chat_encode_ex(g->tok, msgs, n, add_bos, 1, g->chat_flags, *ids, need);
    return *n_ids < 0 ? *n_ids : GEMMA3_OK;
}

long gen_find_nul(const char *text, size_t len) {
    const char *z = memchr(text, '\0', len);
    return z ? (long)(z - text) : -1;
}

static double per_second(int n, double seconds) { return seconds > 0 ? n / seconds : 0.0; }

void gen_print_summary(const gen_state *g, FILE *f) {
    fprintf(f, "\n");
    fprintf(f, "prompt:    %6d tokens  %9.2f tok/s  (%.3f s)\n", g->n_prompt_tokens,
            per_second(g->n_prompt_tokens, g->prompt_seconds), g->prompt_seconds);
    fprintf(f, "generated: %6d tokens  %9.2f tok/s  (%.3f s)\n", g->n_gen_tokens,
            per_second(g->n_gen_tokens, g->gen_seconds), g->gen_seconds);
    fprintf(f, "load: %.3f s", g->load_seconds);
    if (g->info.quantize_seconds > 0) fprintf(f, " (quantizing %.3f s)", g->info.quantize_seconds);
    if (g->info.repack_seconds > 0) fprintf(f, " (repacking %.3f s)", g->info.repack_seconds);
    fprintf(f, " | %s%s", g->info.load_mode, g->info.load_auto ? " (auto)" : "");
    if (g->info.load_from_disk) fprintf(f, " from the disk");
    fprintf(f, " | weights: %s%s | seed: %u | isa: %s | threads: %d\n", g->info.weight_type,
            strcmp(g->info.weight_layout, "x8") == 0 ? " (x8 layout)" : "",
            gemma3_sampler_seed(g->sampler), gemma3_session_isa(g->session),
            gemma3_session_n_threads(g->session));
}
