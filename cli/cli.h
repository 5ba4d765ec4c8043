/* cli/cli.h - shared pieces of the gemma3 command: subcommand entry points and flag parsing.
 * Conventions: an invalid flag or value prints ONE line "gemma3: <flag>: <what> ..." to stderr
 * and exits 2 (CLI_EXIT_USAGE); a runtime failure (bad file, ...) prints one line and exits 1. */
#ifndef G3_CLI_H
#define G3_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "gemma3.h"

#define CLI_EXIT_USAGE 2
#define CLI_EXIT_FAIL 1

/* Subcommands: each gets argv after the subcommand name (argv[0] = subcommand) and returns the
 * process exit status. */
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Prints "gemma3: <message>" as one line to stderr and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "gemma3: <message>" as one line to stderr and returns CLI_EXIT_FAIL. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The value after flag argv[*i] (advancing *i), or NULL after printing "<flag>: missing value". */
const char *cli_value(int argc, char **argv, int *i);

/* Strict parsers: the whole string must be a number in [min, max]. On error they print
 * "gemma3: <flag>: '<val>' is not ... in [min, max]" and return CLI_EXIT_USAGE; else 0. */
int cli_parse_int(const char *flag, const char *val, long min, long max, int *out);
int cli_parse_float(const char *flag, const char *val, double min, double max, float *out);
/* Comma-separated token ids in [0, max_id]; *ids is malloc'd (caller frees). */
int cli_parse_ids(const char *flag, const char *val, int max_id, int32_t **ids, int *n_ids);

/* Flags shared by every command that runs the model: -m DIR, -t N, -c N, -b N, --exact,
 * --kv-type f32|bf16, --isa NAME, -v. */
typedef struct cli_model_opts {
    const char *model_dir;
    gemma3_model_params mp;
    int kv_set;         /* --kv-type given */
    gemma3_session_params sp;
    int verbose;
} cli_model_opts;
void cli_model_opts_init(cli_model_opts *o);
#define CLI_NOT_MINE (-1)
/* If argv[*i] is one of the shared flags, consumes it (and its value) and returns 0, or
 * CLI_EXIT_USAGE after printing the error; returns CLI_NOT_MINE if it is not one of them. */
int cli_model_flag(int argc, char **argv, int *i, cli_model_opts *o);
/* -c larger than the model's max_position_embeddings: prints the error, returns CLI_EXIT_USAGE. */
int cli_check_ctx(const cli_model_opts *o, const gemma3_model_info *info);
/* Help lines for the shared flags. */
extern const char cli_model_help[];

/* ---- sampling flags (cli-sampling.c) ------------------------------------------------------ */

/* The sampler parameters a command line builds, plus what the sampler cannot resolve itself:
 * which values were given explicitly (so generation_config.json does not override them) and the
 * DRY sequence breakers as strings (the sampler takes token ids; see
 * cli_sampling_resolve_breakers). */
typedef struct cli_sampling {
    gemma3_sampler_params params;
    unsigned set;                 /* CLI_SAMPLING_SET_* bits */
    int n_dry_breakers;           /* -1: llama.cpp's defaults "\n" ":" "\"" "*"; 0: none */
    const char *dry_breakers[GEMMA3_SAMPLER_MAX_BREAKERS]; /* argv strings, not owned */
} cli_sampling;
enum {
    CLI_SAMPLING_SET_TEMP = 1,
    CLI_SAMPLING_SET_TOP_K = 2,
    CLI_SAMPLING_SET_TOP_P = 4,
    CLI_SAMPLING_SET_MIN_P = 8,
    CLI_SAMPLING_SET_REPEAT_PENALTY = 16,
    CLI_SAMPLING_SET_EOS = 32,
};

/* Gemma defaults (gemma3_sampler_default_params), default breakers, nothing set. */
void cli_sampling_init(cli_sampling *cs);
/* If argv[*i] is a sampling flag (llama.cpp's names: --temp, --top-k, --top-p, --min-p,
 * --typical, --top-nsigma, --repeat-penalty, --repeat-last-n, --frequency-penalty,
 * --presence-penalty, --dry-*, --xtc-*, --dynatemp-*, --mirostat*, -l/--logit-bias, --ignore-eos,
 * --samplers, --sampling-seq, -s/--seed, --sampler-mode), parses it and its value (advancing *i)
 * and sets *matched = 1; else *matched = 0 and nothing is consumed. Returns 0, or
 * CLI_EXIT_USAGE after printing one line naming the flag and the accepted range. */
int cli_sampling_flag(int argc, char **argv, int *i, cli_sampling *cs, int *matched);
/* The help text of the sampling flags. */
void cli_sampling_help(FILE *f);
/* Applies generation_config.json values (gc->has_*) that the command line did not set, and its
 * EOS ids (for --ignore-eos) unless set already. */
void cli_sampling_apply_gen_config(cli_sampling *cs, const g3_gen_config *gc);
/* Tokenizes the DRY breaker strings into params.dry_breakers with encode (text -> ids without
 * BOS; returns the id count or < 0). A breaker of more than 20 tokens is a usage error. */
typedef int (*cli_encode_fn)(void *ctx, const char *text, int32_t *ids, int max_ids);
int cli_sampling_resolve_breakers(cli_sampling *cs, cli_encode_fn encode, void *ctx);

#endif
