/* fuzz-grammar.c - libFuzzer target for the grammar parser, the matcher and the JSON schema
 * converter. The first byte picks the mode: even, the rest is GBNF text (parsed, and if valid,
 * bound to a vocabulary of the 256 single bytes plus a few multi-byte pieces and walked for a few
 * tokens, each one drawn among the mask's ids and checked with gemma3_grammar_allows); odd, the
 * rest is a JSON schema (converted; a converted schema must always be a valid grammar, unless
 * its repetitions expand past the grammar's size limit, GEMMA3_ERR_UNSUPPORTED: forty strings of
 * maxLength 10000 do).
 * Errors are fine; crashes, hangs, sanitizer reports and broken invariants are findings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"

enum { NV = 256 + 4 + 1 };
static char bytes[256];
static const char *pieces[NV];
static int32_t lens[NV];

static void walk(const char *text, size_t len, const uint8_t *seed, size_t n_seed) {
    for (int i = 0; i < 256; i++) {
        bytes[i] = (char)i;
        pieces[i] = &bytes[i];
        lens[i] = 1;
    }
    static const char *const multi[4] = {"ab", "\xC3\xA9", "\xE2\x82", "\xAC x"};
    for (int i = 0; i < 4; i++) {
        pieces[256 + i] = multi[i];
        lens[256 + i] = (int32_t)strlen(multi[i]);
    }
    pieces[NV - 1] = NULL;
    lens[NV - 1] = 0;
    int32_t end = NV - 1;
    gemma3_grammar_vocab v = {NV, pieces, lens, 1, &end};
    gemma3_grammar *g;
    if (gemma3_grammar_init(text, len, &v, &g) != GEMMA3_OK) return;
    for (int step = 0; step < 24; step++) {
        const uint32_t *m = gemma3_grammar_mask(g);
        if (!m) break;
        int allowed[NV], n = 0;
        for (int t = 0; t < NV; t++)
            if (m[t >> 5] >> (t & 31) & 1u) allowed[n++] = t;
        if (n == 0) abort(); /* a state with nothing allowed: the grammar walked into a dead end */
        int t = allowed[(step < (int)n_seed ? seed[step] : step) % n];
        if (gemma3_grammar_allows(g, t) != 1) abort(); /* mask and one-token check disagree */
        if (gemma3_grammar_accept(g, t) != GEMMA3_OK) abort();
        if (t == end) break;
    }
    gemma3_grammar_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if ((data[0] & 1) == 0) {
        if (gemma3_grammar_check(text, len) == GEMMA3_OK) walk(text, len, data, size);
        return 0;
    }
    char *gbnf = NULL;
    if (gemma3_json_schema_to_grammar(text, len, &gbnf) == GEMMA3_OK) {
        int rc = gemma3_grammar_check(gbnf, strlen(gbnf));
        if (rc != GEMMA3_OK && rc != GEMMA3_ERR_UNSUPPORTED) abort();
        if (rc == GEMMA3_OK) walk(gbnf, strlen(gbnf), data, size);
    }
    free(gbnf);
    return 0;
}
