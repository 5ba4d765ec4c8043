/* cli/reply.h - what `gemma3` (generate) and `gemma3 chat` share: loading the model, session and
 * sampler from the common flags, and producing one reply token by token. */
#ifndef G3_CLI_REPLY_H
#define G3_CLI_REPLY_H

#include <signal.h>
#include <stdio.h>

#include "cli.h"
#include "gemma3.h"
#include "speculate.h"

#define GEN_MAX_STOPS 16

typedef struct gen_opts {
    cli_model_opts mo;
    cli_sampling cs;            /* sampling flags; generation_config.json fills what they leave */
    cli_grammar gr;             /* --grammar / --json-schema flags */
    cli_spec spec;              /* -md, --lookup, --draft-max ... */
    int n_predict;              /* -n: most tokens per reply; -1 = until a stop token or full */
    const char *system_prompt;  /* -sys */
    int markers_as_text;        /* --markers-as-text: GEMMA3_TOK_MARKERS_AS_TEXT for user text */
    int quiet;                  /* --log-disable / --quiet: no summary or banner on stderr */
    int escape;                 /* -e / --no-escape: \n, \t, \xNN ... in -p, -r, --in-prefix ... */
    const char *stops[GEN_MAX_STOPS]; /* -r / --stop strings, argv (escapes processed) */
    int n_stops;
} gen_opts;

typedef enum {
    GEN_STOP_EOS,         /* the model produced a stop token (not emitted) */
    GEN_STOP_LIMIT,       /* n_predict reached */
    GEN_STOP_CONTEXT,     /* the context window is full */
    GEN_STOP_INTERRUPTED, /* *interrupt became non-zero (Ctrl-C) */
    GEN_STOP_STRING,      /* the text came to a -r / --stop string (not printed, not in text) */
} gen_stop;

typedef struct gen_state {
    gemma3_model *model;
    const gemma3_tokenizer *tok;
    gemma3_session *session;
    gemma3_sampler *sampler;
    gemma3_grammar *grammar;    /* NULL without a grammar flag; reset at the start of each reply */
    cli_spec_state spec;        /* the draft and speculator; spec.spec NULL: plain decoding */
    gemma3_model_info info;
    int chat_flags;             /* tokenizer flags of user text in the chat template */
    int32_t stop_ids[16];       /* eos ids of the config plus <end_of_turn> */
    int n_stop;
    const char *const *stop_strings; /* gen_opts.stops */
    int n_stop_strings;
    char *text;                 /* the last reply's text, up to a stop string; NUL-terminated */
    size_t text_len, text_cap;
    double load_seconds;
    /* totals over the run, for the summary */
    int n_prompt_tokens, n_gen_tokens;
    double prompt_seconds, gen_seconds;
} gen_state;

/* Defaults: session defaults and Gemma's sampling defaults, nothing set by a flag yet. */
void gen_opts_init(gen_opts *opts);

/* -n and -sys, into a gen_opts. */
extern const cli_group gen_group;

/* Checks the grammar flags (before anything loads), loads the model (with its tokenizer:
 * required), creates the session, sampler and grammar, with the checkpoint's
 * generation_config.json filling the sampling values no flag set. Prints the error and returns
 * the CLI exit status on failure; gen_close frees a partly opened state. */
int gen_open(gen_state *g, gen_opts *opts);
void gen_close(gen_state *g);

/* Feeds prompt[0..n_prompt) to the model (prefill; n_prompt may be 0 when the session already
 * holds the prompt, its logits included), then samples up to n_predict tokens, feeding
 * each back, until a stop token, the limit, a full context or *interrupt. With a grammar, every
 * token is drawn under its mask (stop tokens only once the text is a complete match). Every token fed to the
 * model is also accepted by the sampler (penalty history). Text is streamed to `out` (if not
 * NULL) in complete UTF-8 sequences as it is produced. Generated ids (stop token excluded) are
 * appended to gen_ids (capacity max_gen) and counted in *n_gen. The stop token, if any, is NOT
 * fed to the model: the caller decides (chat feeds <end_of_turn> with the next turn).
 * The reply's text is g->text; a stop string ends it (the token that completed it is fed, so the
 * ids stay what the model saw) and neither it nor the text after it is printed or kept; text
 * that may begin a stop string is held back until it cannot.
 * Returns GEMMA3_OK or an error (message in gemma3_last_error); GEMMA3_ERR_ABORTED when
 * *interrupt stopped the prefill (gemma3_session_set_abort says what the session then holds). */
int gen_reply(gen_state *g, const int32_t *prompt, int n_prompt, int n_predict, FILE *out,
              volatile sig_atomic_t *interrupt, int32_t *gen_ids, int max_gen, int *n_gen,
              gen_stop *stop);

/* Encodes the user's text as a chat turn (or raw text), into a malloc'd id array. */
int gen_encode_chat(const gen_state *g, const char *system_prompt, const char *user_text,
                    int add_bos, int32_t **ids, int *n_ids);

int gen_is_stop(const gen_state *g, int32_t token);

/* The chat template takes text without NUL bytes (C strings): text of len bytes holding one is
 * refused, not cut. Returns the offset of the first NUL, or -1 when there is none. */
long gen_find_nul(const char *text, size_t len);

/* Processes the escapes of llama.cpp's -e in place: \n \r \t \' \" \\ and \xHH; any other
 * backslash stays. Returns the new length (a \x00 makes a NUL byte). */
size_t gen_unescape(char *s);

/* The stderr summary: prompt and generated tokens with tok/s, load time, seed, ISA, threads. */
void gen_print_summary(const gen_state *g, FILE *f);

#endif
