/* cli.h - shared pieces of the gemma3 command: subcommand entry points and flag parsing.
 * Conventions: an invalid flag or value prints ONE line "gemma3: <flag>: <what> ..." to stderr
 * and exits 2 (CLI_EXIT_USAGE); a runtime failure (bad file, ...) prints one line and exits 1. */
#ifndef G3_CLI_H
#define G3_CLI_H

#include <stdint.h>

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
#include "gemma3.h"
typedef struct cli_model_opts {
    const char *model_dir;
    gemma3_session_params sp;
    int verbose;
} cli_model_opts;
void cli_model_opts_init(cli_model_opts *o);
#define CLI_NOT_MINE (-1)
/* If argv[*i] is one of the shared flags, consumes it (and its value) and returns 0, or
 * CLI_EXIT_USAGE after printing the error; returns CLI_NOT_MINE if it is not one of them. */
int cli_model_flag(int argc, char **argv, int *i, cli_model_opts *o);
/* Help lines for the shared flags. */
extern const char cli_model_help[];

#endif
