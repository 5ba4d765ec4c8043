/* bench-grammar.c - time per token of the grammar mask (gemma3_grammar_mask) with
 * grammars/json.gbnf over the real 262,144-piece Gemma 3 tokenizer (models/tokenizer.model),
 * along a realistic JSON document tokenized as the model would write it: mean, median, p99 and
 * worst per token, the first visit of every grammar state included (a fresh grammar, so states
 * are met cold). Rows: with the cache of masks (the default); every mask computed (no cache);
 * and every mask computed by the trie walk alone (no per-token scan of looping states).
 * Usage: bench-grammar [GRAMMAR.gbnf [DOCUMENT.json]]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"
#include "grammar.h"
#include "util.h"

static const char *default_doc =
    "{\n"
    "  \"id\": \"order-2024-118734\",\n"
    "  \"created\": \"2024-03-18T09:41:27Z\",\n"
    "  \"customer\": {\n"
    "    \"name\": \"Zoë Müller-Lefèvre\",\n"
    "    \"email\": \"zoe.muller@example.com\",\n"
    "    \"phone\": \"+49 30 1234567\",\n"
    "    \"address\": {\"street\": \"Friedrichstraße 43\", \"city\": \"Berlin\", "
    "\"postcode\": \"10117\", \"country\": \"DE\"},\n"
    "    \"loyalty\": {\"tier\": \"gold\", \"points\": 12850, \"since\": 2019}\n"
    "  },\n"
    "  \"items\": [\n"
    "    {\"sku\": \"KB-104\", \"title\": \"Mechanical keyboard (ISO layout)\", \"qty\": 1, "
    "\"price\": 129.90, \"tags\": [\"electronics\", \"peripherals\"]},\n"
    "    {\"sku\": \"MS-221\", \"title\": \"Wireless mouse \\u2013 black\", \"qty\": 2, "
    "\"price\": 34.5, \"tags\": []},\n"
    "    {\"sku\": \"CB-007\", \"title\": \"USB-C cable, 2 m\", \"qty\": 3, \"price\": 9.99, "
    "\"tags\": [\"cables\"], \"note\": \"gift wrap: \\\"Happy birthday!\\\"\"}\n"
    "  ],\n"
    "  \"shipping\": {\"method\": \"express\", \"cost\": 7.5, \"eta_days\": 2, "
    "\"tracking\": null},\n"
    "  \"payment\": {\"type\": \"card\", \"last4\": \"4242\", \"paid\": true, "
    "\"amount\": 243.37, \"currency\": \"EUR\"},\n"
    "  \"comment\": \"Bitte an der Rezeption abgeben. 配達は午前中にお願いします。\",\n"
    "  \"discount\": -1.25e1,\n"
    "  \"flags\": {\"fragile\": false, \"priority\": true, \"returns\": [1, 2, 3]}\n"
    "}";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what) {
    fprintf(stderr, "bench-grammar: %s: %s\n", what, gemma3_last_error());
    exit(1);
}

/* Masks along the document; prints one row. */
static void run(const char *label, const char *gtext, size_t glen, const gemma3_tokenizer *tok,
                const int32_t *ids, int n, int mode) {
    int32_t ends[2] = {gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_EOS),
                       gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_END_OF_TURN)};
    double t0 = g3_now();
    gemma3_grammar *g;
    if (gemma3_grammar_init_tokenizer(gtext, glen, tok, ends, 2, 0, &g) != GEMMA3_OK)
        die("grammar");
    double t_init = g3_now() - t0;
    g3_grammar_set_mode(g, mode);
    double *t = malloc((size_t)(n + 1) * sizeof *t);
    if (!t) die("out of memory");
    for (int i = 0; i <= n; i++) {
        int32_t want = i < n ? ids[i] : ends[1];
        double a = g3_now();
        const uint32_t *m = gemma3_grammar_mask(g);
        t[i] = g3_now() - a;
        if (!m) die("mask");
        if (!(m[want >> 5] >> (want & 31) & 1u)) {
            fprintf(stderr, "bench-grammar: token %d (#%d) of the document is masked\n", want, i);
            exit(1);
        }
        if (gemma3_grammar_accept(g, want) != GEMMA3_OK) die("accept");
    }
    double sum = 0;
    for (int i = 0; i <= n; i++) sum += t[i];
    g3_grammar_stats st;
    g3_grammar_get_stats(g, &st);
    qsort(t, (size_t)n + 1, sizeof *t, cmp_double);
    printf("| %-22s | %6d | %9.3f | %9.3f | %9.3f | %9.3f | %6lld | %6d | %8.1f |\n", label, n + 1,
           sum / (n + 1) * 1e3, t[n / 2] * 1e3, t[(int)((n + 1) * 0.99)] * 1e3, t[n] * 1e3,
           (long long)st.n_cache_hits, st.n_states, t_init * 1e3);
    free(t);
    gemma3_grammar_free(g);
}

int main(int argc, char **argv) {
    const char *gpath = argc > 1 ? argv[1] : "grammars/json.gbnf";
    gemma3_tokenizer *tok;
    if (gemma3_tokenizer_load("models/tokenizer.model", &tok) != GEMMA3_OK) die("tokenizer");
    char *gtext, *doc = (char *)default_doc;
    size_t glen, dlen = strlen(default_doc);
    if (g3_read_file(gpath, &gtext, &glen) != GEMMA3_OK) die("grammar file");
    if (argc > 2 && g3_read_file(argv[2], &doc, &dlen) != GEMMA3_OK) die("document");
    int n = gemma3_tokenizer_encode(tok, doc, dlen, 0, NULL, 0);
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (n <= 0 || !ids) die("encode");
    gemma3_tokenizer_encode(tok, doc, dlen, 0, ids, n);
    printf("grammar mask per token: %s, %d-piece vocabulary, a %zu-byte JSON document (%d tokens "
           "+ <end_of_turn>), single thread, fresh grammar (cold states counted)\n\n",
           gpath, gemma3_tokenizer_vocab_size(tok), dlen, n);
    printf("| %-22s | %6s | %9s | %9s | %9s | %9s | %6s | %6s | %8s |\n", "masks", "tokens",
           "mean ms", "median ms", "p99 ms", "worst ms", "hits", "states", "init ms");
    printf("|------------------------|--------|-----------|-----------|-----------|-----------|"
           "--------|--------|----------|\n");
    run("cached (default)", gtext, glen, tok, ids, n, 0);
    run("no cache", gtext, glen, tok, ids, n, G3_GRAMMAR_NO_CACHE);
    run("no cache, walk only", gtext, glen, tok, ids, n, G3_GRAMMAR_NO_CACHE | G3_GRAMMAR_NO_SCAN);
    free(ids);
    free(gtext);
    if (doc != default_doc) free(doc);
    gemma3_tokenizer_free(tok);
    return 0;
}
