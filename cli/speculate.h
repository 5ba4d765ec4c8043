/* cli/speculate.h - speculative decoding flags (-md, --lookup, --draft-max ...) and the draft
 * model, session and speculator they open (speculative.h). */
#ifndef G3_CLI_SPECULATE_H
#define G3_CLI_SPECULATE_H

#include <stdio.h>

#include "cli.h"
#include "gemma3.h"
#include "speculative.h"

typedef struct cli_spec {
    const char *draft_dir;   /* -md */
    int lookup;              /* --lookup, --spec-type ngram-simple */
    gemma3_spec_params p;    /* --draft-max, --draft-min, --draft-p-min */
    int draft_type;          /* -qd: enum gemma3_weight_type, -1 = the model's -q */
    int draft_threads;       /* -td: 0 = -t */
} cli_spec;

/* The flags, into a cli_spec. */
extern const cli_group cli_spec_group;

typedef struct cli_spec_state {
    gemma3_model *draft_model;
    gemma3_session *draft_session;
    gemma3_spec *spec;       /* NULL: plain decoding */
} cli_spec_state;

void cli_spec_init(cli_spec *o);
int cli_spec_wanted(const cli_spec *o);
/* Before the model's session is made: rings that can drop a rejected batch. */
void cli_spec_prepare(const cli_spec *o, cli_model_opts *mo);
/* Loads the draft (checked against the model: vocabulary, size) and makes the speculator.
 * Prints the error and returns the exit status on failure (cli_spec_close frees a partial one). */
int cli_spec_open(cli_spec_state *st, const cli_spec *o, const cli_model_opts *mo,
                  const gemma3_model *model, gemma3_session *target);
void cli_spec_close(cli_spec_state *st);
/* "speculative: ... drafted N, accepted M (x%) in S steps" (nothing without a speculator). */
void cli_spec_print_stats(const cli_spec_state *st, FILE *f);

#endif
