/* sampling/samplers.h - one descriptor per sampler of the chain: what users type (names, letter,
 * parameters with their ranges, defaults and generation_config.json keys: the public part,
 * gemma3_sampler_info), when it has work to do, what it needs of the candidate set, and its
 * function. The chain (sampling.c), the names and letters, the range table, the defaults and
 * generation_config.json walk these. Adding a sampler: its enum value in gemma3.h, its
 * parameters in gemma3_sampler_params, a row in g3_samplers (sampling/descriptors.c), its apply
 * function, and its test (docs/sampling.md, "Adding a sampler"). */
#ifndef G3_SAMPLING_SAMPLERS_H
#define G3_SAMPLING_SAMPLERS_H

#include <stdint.h>

#include "gemma3.h"

/* Where a sampler runs in the chain: pos, the RNG counter; last, no sampler after it has work
 * (the draw, if any, comes next: a sampler may leave its set implicit for it); draws, a draw
 * follows the chain (0 for g3_sampler_kept, which reads the list itself). */
struct g3_chain_step {
    int64_t pos;
    int last, draws;
};

/* What a sampler needs of the candidate set before its function runs (the chain provides it;
 * the set's forms are in sampling/state.h). Every sampler gets a list, never a window. */
enum {
    G3_NEEDS_CHECKED = 1,   /* the logits checked for NaN and +inf (else it checks as it reads) */
    G3_RUNS_WHEN_GREEDY = 2 /* runs under temperature 0 too: it rewrites logits, which can move
                             * the argmax (the truncations and XTC cannot, or only at random) */
};

struct g3_sampler_desc {
    gemma3_sampler_info info;
    /* Whether it has work to do with these parameters: its function returns at once when not. */
    int (*active)(const gemma3_sampler_params *p);
    unsigned needs; /* G3_NEEDS_* */
    void (*apply)(gemma3_sampler *s, const struct g3_chain_step *at);
};

/* Indexed by enum gemma3_sampler_type. */
extern const struct g3_sampler_desc g3_samplers[GEMMA3_SAMPLER_N_TYPES];

/* The samplers' functions (sampling.c, sampling/typical.c, sampling/penalties.c,
 * sampling/cutoffs.c). */
void g3_apply_penalties(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_dry(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_top_n_sigma(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_top_k(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_typical(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_top_p(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_min_p(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_xtc(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_temperature(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_epsilon(gemma3_sampler *s, const struct g3_chain_step *at);
void g3_apply_eta(gemma3_sampler *s, const struct g3_chain_step *at);

/* The checks gemma3_sampler_init makes of params (GEMMA3_ERR_ARG naming the field). */
int g3_sampler_validate(const gemma3_sampler_params *p, int n_vocab);

/* A last_n of -1 means "the context size"; 0 means off. */
int g3_resolve_last_n(const gemma3_sampler_params *p, int last_n);

#endif
