/* grammar-parse.h - the GBNF parser behind grammar.c: text -> rules of elements, checked. Only
 * grammar.c (the matcher) includes it. */
#ifndef G3_GRAMMAR_PARSE_H
#define G3_GRAMMAR_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Elements after expanding repetitions, all rules together. */
#define G3_GRAMMAR_MAX_ELEMS (1 << 20)

/* A rule is its alternatives back to back, each ended by G3_E_ALT, the last by G3_E_END. */
enum { G3_E_END, G3_E_ALT, G3_E_REF, G3_E_CHAR };

typedef struct {
    uint8_t type;
    int32_t arg; /* G3_E_REF: rule id; G3_E_CHAR: class id */
} g3_gelem;

typedef struct {
    uint32_t lo, hi; /* inclusive */
} g3_cp_range;

typedef struct {
    int negated;
    int start, n; /* ranges rng[start .. start + n) */
} g3_char_class;

typedef struct {
    char *name;
    g3_gelem *el;
    int n_el, cap_el;
    int defined;
    size_t def_off, ref_off; /* where it was defined / first referenced (source offsets) */
} g3_grule;

typedef struct {
    const char *src;
    size_t len, pos;
    g3_grule *rules; /* the user's rules and the helpers of groups and repetitions */
    int n_rules, cap_rules;
    g3_char_class *cls; /* interned: two classes of the same ranges are one */
    int n_cls, cap_cls;
    g3_cp_range *rng;
    int n_rng, cap_rng;
    int root;
    int defining; /* the user's rule being parsed (helpers are named after it) */
    long n_elems; /* for G3_GRAMMAR_MAX_ELEMS */
    int failed;   /* the first error's GEMMA3_ERR_* code, 0 while none */
    /* open-addressing indexes: the user's rule names (helpers are never looked up), classes */
    int32_t *name_hash, *cls_hash;
    uint32_t name_mask, cls_mask;
    int n_named;
    int32_t *groups; /* the explicit stack of open groups: (rule, element start) pairs */
    int cap_groups;
} g3_gparser;

/* Parses text into P and checks it: undefined rules, the root, productivity (alternatives that
 * can never complete are removed; a root that can never complete is refused) and left
 * recursion. Linear in the text (rule names are hashed) and iterative (nesting is bounded by
 * memory, not by the C stack). GEMMA3_OK, or GEMMA3_ERR_FORMAT ("grammar:LINE:COLUMN: ..." for
 * syntax), GEMMA3_ERR_UNSUPPORTED past G3_GRAMMAR_MAX_ELEMS, GEMMA3_ERR_NOMEM. Free P with
 * g3_gparser_free whatever the result. */
int g3_gparse(g3_gparser *P, const char *text, size_t len);
void g3_gparser_free(g3_gparser *P);

/* Rebuilds an open-addressing index of `size` slots (a power of two) over the ids first .. n-1
 * that keep selects (NULL: all), placed by hash: *table (the old one freed) and *mask. 0 or -1.
 * The parser's name and class indexes and the matcher's frame, set and state indexes. */
typedef uint32_t (*g3_index_hash)(const void *ctx, int32_t id);
typedef int (*g3_index_keep)(const void *ctx, int32_t id);
int g3_grammar_index(const void *ctx, int first, int n, g3_index_hash hash, g3_index_keep keep,
                     uint32_t size, int32_t **table, uint32_t *mask);

/* Grows *buf (elements of size sz, capacity *cap) to hold at least need: doubling; 0 or -1. */
int g3_grammar_grow(void **buf, int *cap, int need, size_t sz);

#endif
