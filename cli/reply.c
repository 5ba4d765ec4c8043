/* cli/reply.c - model/session/sampler setup and the reply loop shared by generate and chat. */
#include "reply.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>


static int parse_stop(const char *flag, const char *value, void *group) {
    gen_opts *o = group;
    if (!*value) return cli_usage_error("%s: the stop string is empty", flag);
    if (o->n_stops == GEN_MAX_STOPS) return cli_usage_error("%s: at most %d stop strings", flag, GEN_MAX_STOPS);
    o->stops[o->n_stops++] = value;
    return 0;
}

#define G(field) offsetof(gen_opts, field)
static const cli_option reply_options[] = {
    {"-n, --n-predict", "N", CLI_INT, G(n_predict), -1, 1 << 30,
     .help = "most tokens to generate per reply, -1 = until a stop token or the context is full"},
    {"-sys, --system-prompt", "TEXT", CLI_TEXT, G(system_prompt),
     .help = "system prompt (folded into the first user turn, as Gemma does)"},
    {"--markers-as-text", NULL, CLI_SWITCH, G(markers_as_text), .value = 1,
     .help = "<start_of_turn>/<end_of_turn> typed in the user's text stay text (default: they "
             "become turn markers, as in Hugging Face)"},
    {"-r, --reverse-prompt, --stop", "TEXT", CLI_CUSTOM, .parse = parse_stop,
     .help = "stop the reply where its text reaches TEXT (not printed; repeatable; in chat, your "
             "turn again)"},
    {"-e, --escape", NULL, CLI_SWITCH, G(escape), .value = 1,
     .help = "process \\n, \\r, \\t, \\', \\\", \\\\ and \\xHH in -p, -r/--stop, --in-prefix, "
             "--in-suffix (the default, as llama.cpp)"},
    {"--no-escape", NULL, CLI_SWITCH, G(escape), .value = 0,
     .help = "take those texts as typed"},
    {"--log-disable, --quiet", NULL, CLI_SWITCH, G(quiet), .value = 1,
     .help = "no summary (speeds, seed, load) or banner on stderr; errors and warnings still"},
};
#undef G

const cli_group gen_group = CLI_GROUP("generation", reply_options);

void gen_opts_init(gen_opts *opts) {
    memset(opts, 0, sizeof *opts);
    cli_model_opts_init(&opts->mo);
    cli_sampling_init(&opts->cs);
    cli_spec_init(&opts->spec);
    opts->n_predict = -1;
    opts->escape = 1;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t gen_unescape(char *s) {
    static const char from[] = "nrt'\"\\", to[] = "\n\r\t'\"\\";
    size_t w = 0;
    for (size_t r = 0; s[r]; r++) {
        const char *e = s[r] == '\\' && s[r + 1] ? strchr(from, s[r + 1]) : NULL;
        if (e) {
            s[w++] = to[e - from];
            r++;
        } else if (s[r] == '\\' && s[r + 1] == 'x' && hex_digit(s[r + 2]) >= 0 && hex_digit(s[r + 3]) >= 0) {
            s[w++] = (char)(hex_digit(s[r + 2]) * 16 + hex_digit(s[r + 3]));
            r += 3;
        } else {
            s[w++] = s[r];
        }
    }
    s[w] = '\0';
    return w;
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
    double t0 = cli_now();
    rc = cli_model_load(&opts->mo, &g->model);
    if (rc) return rc;
    g->tok = gemma3_model_tokenizer(g->model);
    if (!g->tok) return cli_fail("%s: no tokenizer.model in the checkpoint", opts->mo.model_dir);
    gemma3_model_get_info(g->model, &g->info);
    rc = cli_check_ctx(&opts->mo, &g->info);
    if (rc) return rc;
    cli_spec_prepare(&opts->spec, &opts->mo);
    if (gemma3_session_init(g->model, &opts->mo.sp, &g->session) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    if ((rc = cli_spec_open(&g->spec, &opts->spec, &opts->mo, g->model, g->session))) return rc;
    g->load_seconds = cli_now() - t0;
    g->chat_flags = opts->markers_as_text ? GEMMA3_TOK_MARKERS_AS_TEXT : 0;
    /* argv strings: unescaped in place, once */
    for (int i = 0; opts->escape && i < opts->n_stops; i++) gen_unescape((char *)opts->stops[i]);
    g->stop_strings = opts->stops;
    g->n_stop_strings = opts->n_stops;

    for (int i = 0; i < g->info.n_eos; i++) add_stop(g, g->info.eos_ids[i]);
    add_stop(g, gemma3_tokenizer_special(g->tok, GEMMA3_SPECIAL_EOS));
    add_stop(g, gemma3_tokenizer_special(g->tok, GEMMA3_SPECIAL_END_OF_TURN));

    char path[4096];
    /* a GGUF has no generation_config.json: Gemma's defaults */
    if (!gemma3_model_is_gguf(opts->mo.model_dir)) {
        if (snprintf(path, sizeof path, "%s/generation_config.json", opts->mo.model_dir) >=
            (int)sizeof path)
            return cli_fail("%s: path too long", opts->mo.model_dir);
        rc = cli_sampling_load_gen_config(&opts->cs, path);
        if (rc) return rc;
    }
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
    if (g->spec.spec && gemma3_spec_set_draft_sampling(g->spec.spec, &sp) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
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
    free(g->text);
    cli_spec_close(&g->spec);
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
    int rc = cli_lib(gemma3_session_forward(g->session, ids, n, NULL));
    if (rc != GEMMA3_OK) return rc;
    for (int i = 0; i < n; i++) gemma3_sampler_accept(g->sampler, ids[i]);
    return GEMMA3_OK;
}

/* Feeds a drawn token and points *logits at the logits after it: through the speculator when
 * there is one (the next logits may already be there), else one forward. */
static int feed_drawn(gen_state *g, int32_t tok, const float **logits) {
    if (!g->spec.spec) {
        int rc = feed(g, &tok, 1);
        *logits = gemma3_session_logits(g->session);
        return rc;
    }
    int rc = gemma3_spec_feed(g->spec.spec, tok, logits);
    if (rc == GEMMA3_OK) gemma3_sampler_accept(g->sampler, tok);
    return rc;
}

/* Appends n bytes (a NUL the tokens decode to included: the text is kept by length). */
static int append_text(gen_state *g, const char *piece, size_t n) {
    if (g->text_len + n + 1 > g->text_cap) {
        size_t cap = g->text_cap ? g->text_cap : 256;
        while (cap < g->text_len + n + 1) cap *= 2;
        char *grown = realloc(g->text, cap);
        if (!grown) return cli_error(GEMMA3_ERR_NOMEM, "out of memory");
        g->text = grown;
        g->text_cap = cap;
    }
    memcpy(g->text + g->text_len, piece, n);
    g->text_len += n;
    g->text[g->text_len] = '\0';
    return GEMMA3_OK;
}

/* Where the first stop string begins in text[from, len) (it may have begun before `from`), or -1;
 * *safe: how much of text can be printed, all but a tail that could begin a stop string. */
static long find_stop(const gen_state *g, size_t from, size_t *safe) {
    const char *t = g->text;
    size_t len = g->text_len;
    long found = -1;
    *safe = len;
    for (int k = 0; k < g->n_stop_strings; k++) {
        const char *s = g->stop_strings[k];
        size_t n = strlen(s), start = from >= n ? from - n + 1 : 0;
        const char *hit = len >= n ? memmem(t + start, len - start, s, n) : NULL;
        if (hit && (found < 0 || hit - t < found)) found = hit - t;
        for (size_t keep = n - 1 < len ? n - 1 : len; keep > 0; keep--)
            if (memcmp(t + len - keep, s, keep) == 0) {
                if (len - keep < *safe) *safe = len - keep;
                break;
            }
    }
    if (found >= 0) *safe = (size_t)found;
    return found;
}

/* Adds a token's text to the reply and prints what can no longer be part of a stop string.
 * Returns 1 when the text reached a stop string (cut there), 0 to go on, or an error < 0. */
static int emit(gen_state *g, const char *piece, int n, FILE *out, size_t *printed, int final) {
    size_t before = g->text_len, safe;
    int rc = append_text(g, piece, n > 0 ? (size_t)n : 0);
    if (rc != GEMMA3_OK) return rc;
    long stop = find_stop(g, before, &safe);
    if (final) safe = g->text_len;
    if (stop >= 0) {
        g->text_len = (size_t)stop;
        g->text[stop] = '\0';
        safe = (size_t)stop;
    }
    if (out && safe > *printed) {
        fwrite(g->text + *printed, 1, safe - *printed, out);
        fflush(out);
        *printed = safe;
    }
    return stop >= 0;
}

static int interrupt_set(void *flag) { return *(volatile sig_atomic_t *)flag != 0; }

int gen_reply(gen_state *g, const int32_t *prompt, int n_prompt, int n_predict, FILE *out,
              volatile sig_atomic_t *interrupt, int32_t *gen_ids, int max_gen, int *n_gen,
              gen_stop *stop) {
    *n_gen = 0;
    int n_ctx = gemma3_session_n_ctx(g->session);
    if (gemma3_session_pos(g->session) + n_prompt > n_ctx)
        return cli_error(GEMMA3_ERR_CONTEXT, "context full: %d tokens in the cache + %d new > -c %d",
                        gemma3_session_pos(g->session), n_prompt, n_ctx);
    double t0 = cli_now();
    int rc = g->spec.spec ? gemma3_spec_sync(g->spec.spec) : GEMMA3_OK; /* after an error */
    /* a long prefill stops at the interrupt between chunks or layers, not after the whole prompt */
    gemma3_session_set_abort(g->session, interrupt ? interrupt_set : NULL, (void *)interrupt);
    if (rc == GEMMA3_OK) rc = feed(g, prompt, n_prompt);
    gemma3_session_set_abort(g->session, NULL, NULL);
    if (rc != GEMMA3_OK) return rc;
    g->prompt_seconds += cli_now() - t0;
    g->n_prompt_tokens += n_prompt;

    gemma3_decoder dec = {0};
    char text[256];
    size_t printed = 0;
    g->text_len = 0;
    if ((rc = append_text(g, "", 0)) != GEMMA3_OK) return rc;
    if (g->grammar) gemma3_grammar_reset(g->grammar);
    t0 = cli_now();
    *stop = GEN_STOP_LIMIT;
    const float *logits = gemma3_session_logits(g->session);
    for (int i = 0; n_predict < 0 || i < n_predict; i++) {
        if (interrupt && *interrupt) {
            *stop = GEN_STOP_INTERRUPTED;
            break;
        }
        int64_t pos = g->spec.spec ? gemma3_spec_pos(g->spec.spec) : gemma3_session_pos(g->session);
        int32_t tok = g->grammar ? gemma3_grammar_sample(g->grammar, g->sampler, logits, pos)
                                 : gemma3_sampler_sample(g->sampler, logits, pos);
        if (tok < 0) return cli_lib(tok);
        if (g->grammar && (rc = gemma3_grammar_accept(g->grammar, tok)) != GEMMA3_OK) return cli_lib(rc);
        if (gen_is_stop(g, tok)) {
            *stop = GEN_STOP_EOS;
            break;
        }
        if (*n_gen < max_gen) gen_ids[(*n_gen)++] = tok;
        int n = gemma3_decoder_push(g->tok, &dec, tok, text, sizeof text);
        int hit = emit(g, text, n, out, &printed, 0);
        if (hit < 0) return hit;
        g->n_gen_tokens++;
        if (pos >= n_ctx) { /* the token is kept, but there is no slot left to feed it */
            *stop = hit ? GEN_STOP_STRING : GEN_STOP_CONTEXT;
            break;
        }
        if ((rc = feed_drawn(g, tok, &logits)) != GEMMA3_OK) return rc;
        if (hit) {
            *stop = GEN_STOP_STRING;
            break;
        }
    }
    if (*stop != GEN_STOP_STRING) {
        int n = gemma3_decoder_flush(&dec, text, sizeof text);
        if ((rc = emit(g, text, n, out, &printed, 1)) < 0) return rc;
        if (rc == 1) *stop = GEN_STOP_STRING;
    }
    /* the cache as if no draft had run: saved state, the next turn */
    if (g->spec.spec && (rc = gemma3_spec_sync(g->spec.spec)) != GEMMA3_OK) return rc;
    g->gen_seconds += cli_now() - t0;
    return GEMMA3_OK;
}

int gen_encode_chat(const gen_state *g, const char *system_prompt, const char *user_text,
                    int add_bos, int32_t **ids, int *n_ids) {
    gemma3_chat_msg msgs[2];
    int n = 0;
    if (system_prompt) msgs[n++] = (gemma3_chat_msg){"system", system_prompt};
    msgs[n++] = (gemma3_chat_msg){"user", user_text};
    add_bos = add_bos && gemma3_tokenizer_add_bos(g->tok); /* the model's file may say no */
    int need = gemma3_chat_encode_ex(g->tok, msgs, n, add_bos, 1, g->chat_flags, NULL, 0);
    if (need < 0) return cli_lib(need);
    *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof **ids);
    if (!*ids) return cli_error(GEMMA3_ERR_NOMEM, "out of memory encoding the prompt");
    *n_ids = gemma3_chat_encode_ex(g->tok, msgs, n, add_bos, 1, g->chat_flags, *ids, need);
    return *n_ids < 0 ? cli_lib(*n_ids) : GEMMA3_OK;
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
            strcmp(g->info.weight_layout, "x8") == 0      ? " (x8 layout)"
            : strcmp(g->info.weight_layout, "mixed") == 0 ? " (mixed layout)"
                                                          : "",
            gemma3_sampler_seed(g->sampler), gemma3_session_isa(g->session),
            gemma3_session_n_threads(g->session));
    cli_spec_print_stats(&g->spec, f);
}
