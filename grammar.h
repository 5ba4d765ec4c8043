/* grammar.h - internals of grammar.c beyond the public gemma3_grammar_* API (gemma3.h): the
 * vocabulary-free check the command line runs before loading a model, and counters the tests and
 * the benchmark read. */
#ifndef G3_GRAMMAR_H
#define G3_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "gemma3.h"

/* The largest m and n of a repetition {m,n}: each copy is expanded into the grammar. */
#define G3_GRAMMAR_MAX_REPEAT 10000

/* What the mask computation did so far (for the benchmark and the tests). */
typedef struct g3_grammar_stats {
    int64_t n_masks;      /* gemma3_grammar_mask calls */
    int64_t n_cache_hits; /* ... answered from the cache of masks */
    int64_t n_nodes;      /* trie nodes visited by the walks */
    int n_stack_nodes;    /* interned stack frames */
    int n_states;         /* interned stack sets */
    int n_trie_nodes;     /* nodes of the vocabulary trie */
    int n_intervals;      /* code point intervals the grammar distinguishes */
} g3_grammar_stats;
void g3_grammar_get_stats(const gemma3_grammar *g, g3_grammar_stats *out);

/* How masks are computed: G3_GRAMMAR_NO_CACHE walks every time, G3_GRAMMAR_NO_SCAN always walks
 * the trie (never the per-token scan of looping states). The benchmark measures them, the tests
 * compare them. Empties the cache. */
enum { G3_GRAMMAR_NO_CACHE = 1, G3_GRAMMAR_NO_SCAN = 2 };
void g3_grammar_set_mode(gemma3_grammar *g, int flags);

/* Whether the bytes s[0..n) (no end token) can be fed from the current state; nothing changes.
 * 1 yes, 0 no. */
int g3_grammar_allows_bytes(gemma3_grammar *g, const char *s, size_t n);

#endif
