/* cli/cli.h - what the subcommands of the gemma3 command share: error lines, strict number
 * parsing, and the option tables that drive parsing and --help.
 *
 * Conventions: an invalid flag or value prints ONE line "gemma3: <flag>: <what> ..." to stderr
 * and exits 2 (CLI_EXIT_USAGE); a runtime failure (bad file, ...) prints one line and exits 1. */
#ifndef G3_CLI_H
#define G3_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>


#include "gemma3.h"

/* Seconds from a monotonic clock, for the timings the commands print. */
double cli_now(void);

#define CLI_EXIT_USAGE 2
#define CLI_EXIT_FAIL 1
/* A command stopped by Ctrl-C (cli_interrupt_*): main ends the process by SIGINT. */
#define CLI_EXIT_INTERRUPTED 130

/* Ctrl-C in the commands that run long passes and then report (perplexity, bench; interrupt.c).
 * cli_interrupt_catch: from now on SIGINT only sets a flag (no SA_RESTART). cli_interrupt_watch:
 * the session's forward calls ask it before each chunk and between layers, and stop with
 * GEMMA3_ERR_ABORTED once it is set. The command then prints what it measured, removes what it
 * had begun to write and returns CLI_EXIT_INTERRUPTED; main flushes stdout and ends the process
 * by SIGINT with its default action, as Ctrl-C ends generate (a shell's $? is 130, and a
 * script's loop sees a process killed by SIGINT). */
void cli_interrupt_catch(void);
int cli_interrupted(void);
void cli_interrupt_watch(gemma3_session *s);
/* The end of every command (main): status, or death by SIGINT for CLI_EXIT_INTERRUPTED. */
int cli_interrupt_finish(int status);

/* Subcommands: each gets argv after the subcommand name (argv[0] = subcommand) and returns the
 * process exit status. */
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);

/* The build (version.c): the commit and build number it was made from ("unknown", 0 outside a
 * git checkout), the compiler; --version prints them and the kernel tables this CPU runs. */
const char *cli_build_commit(void);
int cli_build_number(void);
const char *cli_compiler(void);
void cli_print_version(FILE *f);

/* Errors of the command's own code recorded as the library records its own: cli_error keeps the
 * message (printf format) and returns code (a GEMMA3_ERR_*); cli_lib(rc) keeps
 * gemma3_last_error() when rc < 0 and returns rc. cli_last_error() is the latest message kept. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_lib(int rc);
const char *cli_last_error(void);

/* Prints "gemma3: <message>" as one line to stderr and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "gemma3: <message>" as one line to stderr and returns CLI_EXIT_FAIL. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* s[0..len) for an error line: control bytes (and DEL) as \n, \t, \r or \xNN, and a
 * backslash doubled, so hostile input cannot rewrite the terminal or forge lines; cut with
 * "..." to fit buf (n >= 8). Returns buf. */
const char *cli_escape(const char *s, size_t len, char *buf, size_t n);

/* Strict parsers: the whole string must be a number in [min, max] (a bound of +-INFINITY is
 * printed "inf"). On error they print "gemma3: <flag>: '<val>' is not ... in [min, max]" and
 * return CLI_EXIT_USAGE; else 0. */
int cli_parse_int(const char *flag, const char *val, double min, double max, int *out);
int cli_parse_float(const char *flag, const char *val, double min, double max, float *out);
/* Comma-separated token ids in [0, max_id]; *ids is malloc'd (caller frees). */
int cli_parse_ids(const char *flag, const char *val, int max_id, int32_t **ids, int *n_ids);

/* ---- option tables ------------------------------------------------------------------------ */

/* Each option is declared once, in a table row: its spellings, what kind of value it takes and
 * where the value goes, its range, and its help line. Parsing, the --help text and the README
 * check (tests/test-cli-options.sh) all come from the rows. Defaults are whatever the
 * destination holds before parsing (the library's own defaults); --help prints them from there
 * unless a row says otherwise. */
typedef enum cli_kind {
    CLI_SWITCH,   /* no value: stores `value` into an int */
    CLI_INT,      /* an integer in [min, max] */
    CLI_FLOAT,    /* a number in [min, max] */
    CLI_TEXT,     /* the argument itself (a const char * into argv) */
    CLI_CHOICE,   /* one of `choices` ("text|json"): stores its index into an int */
    CLI_SAMPLER,  /* a gemma3_sampler_params field, int or float, with the library's own range */
    CLI_CUSTOM,   /* `parse` does it */
} cli_kind;

#define CLI_NOWHERE ((size_t)-1) /* an accepted switch that stores nothing */

typedef struct cli_option {
    const char *names;      /* every spelling, ", "-separated: "-c, --ctx-size, --ctx" */
    const char *value_name; /* "N", "DIR", ...; NULL for a switch */
    cli_kind kind;
    size_t offset;          /* where the value goes in the group's struct */
    double min, max;        /* CLI_INT, CLI_FLOAT */
    int value;              /* CLI_SWITCH */
    const char *choices;    /* CLI_CHOICE */
    /* CLI_CUSTOM: parses value (NULL for a switch-like option) into the group's struct; returns 0
     * or an exit status after printing the error line. */
    int (*parse)(const char *flag, const char *value, void *group);
    unsigned given_bit;     /* OR'd into the group's `given` word when the option is given */
    const char *help;       /* one line */
    const char *(*help_fn)(void); /* else the line built at run time (from the library's lists) */
    const char *default_text; /* printed as "(default ...)"; NULL: the initial value, if any */
    int optional_value;     /* the next argument is the value only when it does not begin '-' */
} cli_option;

typedef struct cli_group {
    const char *title;      /* --help heading */
    const cli_option *options;
    size_t n_options;
    size_t given_offset;    /* an unsigned in the group's struct, or CLI_NOWHERE */
} cli_group;

/* A group of the options in the array `options`. */
#define CLI_GROUP(title, options) {title, options, sizeof options / sizeof options[0], CLI_NOWHERE}

#define CLI_MAX_GROUPS 8
typedef struct cli_command {
    const char *usage;        /* the usage line(s) and what the command does */
    const char *unknown;      /* printf format of the unknown-flag error, one %s */
    const cli_group *groups[CLI_MAX_GROUPS]; /* NULL-terminated */
} cli_command;

/* Parses argv[1..argc) against the command's groups, values going into dst[g] for groups[g].
 * Returns 1 when the command must stop now with *status (help printed: 0; an error line printed:
 * CLI_EXIT_USAGE), else 0. */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *const *dst, int *status);
/* --help: the usage text, then each group's options with their defaults read from dst. */
void cli_print_help(const cli_command *cmd, void *const *dst, FILE *f);
/* If argv[*i] is one of g's options, parses it and its value (advancing *i) and sets *matched;
 * returns 0 or CLI_EXIT_USAGE after the error line. Else *matched = 0 and nothing is consumed. */
int cli_parse_option(const cli_group *g, int argc, char **argv, int *i, void *dst, int *matched);
/* One group's option lines (no heading). */
void cli_print_group(const cli_group *g, const void *dst, FILE *f);

/* ---- model, session and load flags (model-options.c) --------------------------------------- */

/* -m DIR, -t N, -c N, -b N, --exact, --kv-type, --isa, --mmap/--no-mmap, -q, -v. */
typedef struct cli_model_opts {
    const char *model_dir;
    gemma3_model_params mp;
    int kv_set;         /* --kv-type given */
    gemma3_session_params sp;
    int verbose;
    int mlock;          /* --mlock: lock the process's memory once the model is loaded */
} cli_model_opts;
extern const cli_group cli_model_group;
/* llama.cpp's flags for GPUs and NUMA, accepted with a one-line note so that its scripts run;
 * --mlock. Values go into a cli_model_opts (compat-options.c). */
extern const cli_group cli_compat_group;
void cli_model_opts_init(cli_model_opts *o);
/* -c larger than the model's max_position_embeddings: prints the error, returns CLI_EXIT_USAGE. */
int cli_check_ctx(const cli_model_opts *o, const gemma3_model_info *info);
/* A warning line (not an error) when n_threads is more than the online CPUs; a line saying what
 * is used when it is more than the library's cap (gemma3_threads_cap). */
void cli_warn_threads(const char *flag, int n_threads);
/* A KV cache for n_ctx tokens (f32 or bf16) larger than the memory available (info's):
 * prints the error naming -c and both sizes, returns CLI_EXIT_USAGE; else 0. */
int cli_check_kv(const gemma3_model_info *info, int n_ctx, int kv_f32);
/* " (N GB/s)" of the load, or "" when it took no measurable time (a mapping), into buf. */
const char *cli_load_rate(const gemma3_model_info *info, char *buf, size_t n);
/* Loads the model as the flags say; on failure prints the error and returns CLI_EXIT_FAIL. First,
 * from config.json alone, refuses (CLI_EXIT_USAGE) a -c beyond max_position_embeddings or whose
 * KV cache cannot fit in the memory available (cli_check_kv), before any weight is read. */
int cli_model_load(const cli_model_opts *o, gemma3_model **model);

/* ---- sampling flags (sampling-options.c) ---------------------------------------------------- */

/* The sampler parameters a command line builds, plus what the sampler cannot resolve itself:
 * which values were given explicitly (so generation_config.json does not override them) and the
 * DRY sequence breakers as strings (the sampler takes token ids; see
 * cli_sampling_resolve_breakers). */
typedef struct cli_sampling {
    gemma3_sampler_params params; /* first: the table's offsets are the params' own */
    unsigned set;                 /* CLI_SAMPLING_SET_* bits */
    int n_dry_breakers;           /* -1: llama.cpp's defaults "\n" ":" "\"" "*"; 0: none */
    const char *dry_breakers[GEMMA3_SAMPLER_MAX_BREAKERS]; /* argv strings, not owned */
} cli_sampling;
enum {
    CLI_SAMPLING_SET_EOS = 1,
    CLI_SAMPLING_SET_FIRST_PARAM = 2, /* and up: the flags of the parameters that have a
                                       * generation_config.json key, one bit each */
};
/* Its rows are built by cli_sampling_init (from the library's sampler descriptors). */
extern cli_group cli_sampling_group;

/* Gemma defaults (gemma3_sampler_default_params), default breakers, nothing set. */
void cli_sampling_init(cli_sampling *cs);
/* cli_parse_option over the sampling group. */
int cli_sampling_flag(int argc, char **argv, int *i, cli_sampling *cs, int *matched);
/* The help text of the sampling flags. */
void cli_sampling_help(FILE *f);
/* Reads generation_config.json at path (the library's gemma3_sampler_params_load_hf) into the
 * values the command line did not set, and its EOS ids (for --ignore-eos) unless set already.
 * Prints the error and returns non-zero when the file is malformed. */
int cli_sampling_load_gen_config(cli_sampling *cs, const char *path);
/* Tokenizes the DRY breaker strings into params.dry_breakers with encode (text -> ids without
 * BOS; returns the id count or < 0). A breaker of more than 20 tokens is a usage error. */
typedef int (*cli_encode_fn)(void *ctx, const char *text, int32_t *ids, int max_ids);
int cli_sampling_resolve_breakers(cli_sampling *cs, cli_encode_fn encode, void *ctx);

/* ---- constrained output flags (grammar-options.c) ------------------------------------------ */

/* --grammar TEXT, --grammar-file FILE, -j/--json-schema SCHEMA, --json-schema-file FILE. */
typedef struct cli_grammar {
    const char *grammar, *grammar_file, *json_schema, *json_schema_file; /* argv, not owned */
    char *text;         /* the resolved GBNF (malloc'd), NULL when no flag was given */
    size_t len;
    const char *source; /* the flag or file it came from, for messages */
} cli_grammar;
extern const cli_group cli_grammar_group;
/* Reads the file, converts a JSON schema, checks the grammar (no model needed). Prints the error
 * and returns CLI_EXIT_USAGE for a malformed grammar or schema ("SOURCE:LINE:COLUMN: expected
 * ..."), CLI_EXIT_FAIL for an unreadable file; 0 otherwise (also when no flag was given). */
int cli_grammar_resolve(cli_grammar *cg);
void cli_grammar_free(cli_grammar *cg);

#endif
