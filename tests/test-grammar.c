/* test-grammar.c - constrained output (grammar.c, json-schema.c, the sampler's mask).
 *
 * - Malformed grammars: one message with line:column and what was expected; refusals of an
 *   undefined rule, no root, left recursion, a grammar that can never finish, one no token can
 *   start.
 * - The shipped grammars/ files parse, accept documents they should (fed byte by byte) and
 *   reject ones they should not, at the right byte.
 * - Pieces that split UTF-8 characters.
 * - JSON schemas: documents accepted and rejected through the converted grammar; integer bounds
 *   against every integer of a window; formats; unsupported keywords refused by name; malformed
 *   JSON with line:column.
 * - The draw: chi-square over positions for `root ::= "a" | "b" | "cd"` at the first step against
 *   the exact renormalised distribution (CDF and Gumbel, chain off and on), greedy = argmax over
 *   the allowed ids (also when the shortcut applies), end ids only when the text matches.
 * - Property: random small grammars (built here as trees, printed as GBNF), a random-weight
 *   bigram model over a small vocabulary with split characters; every step's mask must equal the
 *   independent recursive-descent matcher's verdict on every token, and every output must be a
 *   viable prefix (or, once ended, a complete match) for it.
 * - The 262,144-piece tokenizer with grammars/json.gbnf along a document: the mask of the trie
 *   walk, of the per-token scan and of one-token checks agree, cached or not. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "grammar.h"
#include "util.h"
#define TEST_RNG_SEED 0x1234567887654321ull
#include "test-rng.h"

/* ================================ helpers =================================================== */

/* A vocabulary of the 256 single bytes (id = byte) and one end id (256). */
static char byte_chars[256];
static const char *byte_pieces[257];
static int32_t byte_lens[257];
static const int32_t byte_end = 256;
static gemma3_grammar_vocab byte_vocab(void) {
    for (int i = 0; i < 256; i++) {
        byte_chars[i] = (char)i;
        byte_pieces[i] = &byte_chars[i];
        byte_lens[i] = 1;
    }
    byte_pieces[256] = NULL;
    byte_lens[256] = 0;
    return (gemma3_grammar_vocab){257, byte_pieces, byte_lens, 1, &byte_end};
}

static gemma3_grammar *byte_grammar(const char *text) {
    gemma3_grammar_vocab v = byte_vocab();
    gemma3_grammar *g = NULL;
    if (gemma3_grammar_init(text, strlen(text), &v, &g) != GEMMA3_OK)
        fprintf(stderr, "grammar init: %s\n", gemma3_last_error());
    return g;
}

/* Feeds s byte by byte: the index of the first byte refused, -1 if all were taken. */
static int feed(gemma3_grammar *g, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = (unsigned char)s[i];
        if (gemma3_grammar_allows(g, id) != 1) return (int)i;
        if (gemma3_grammar_accept(g, id) != GEMMA3_OK) return (int)i;
    }
    return -1;
}

/* 1 if the whole text is a complete match (fed from the start). */
static int matches(gemma3_grammar *g, const char *s) {
    gemma3_grammar_reset(g);
    return feed(g, s, strlen(s)) < 0 && gemma3_grammar_can_end(g);
}

static char *read_text(const char *path) {
    char *t;
    size_t n;
    return g3_read_file(path, &t, &n) == GEMMA3_OK ? t : NULL;
}

static int bit(const uint32_t *m, int32_t id) { return (int)(m[id >> 5] >> (id & 31) & 1u); }

/* ================================ malformed grammars ======================================== */

static void test_errors(void) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"root ::= \"a", "grammar:1:10: unterminated string literal"},
        {"root \"a\"", "grammar:1:6: expected '::='"},
        {"root ::= (\"a\"", "grammar:1:14: expected ')'"},
        {"root ::= x", "grammar:1:10: undefined rule 'x'"},
        {"foo ::= \"a\"", "expected a rule named 'root'"},
        {"root ::= \"\\q\"", "grammar:1:11: unknown escape \\q"},
        {"root ::= \"a\"{3,1}", "grammar:1:13: repetition {3,1}: the maximum is below the minimum"},
        {"root ::= \"a\"{1,0}", "grammar:1:13: repetition {1,0}: the maximum is below the minimum"},
        {"root ::= \"a\"{}", "grammar:1:14: expected a number or ',' after '{'"},
        {"root ::= \"a\"{10001}", "grammar:1:18: repetition count larger than 10000"},
        {"root ::= \"a\"{2,10001}", "grammar:1:20: repetition count larger than 10000"},
        {"root ::= *", "grammar:1:10: expected an item before '*'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "grammar:2:1: rule 'root' is already defined at 1:1"},
        {"root ::= [z-a]", "grammar:1:12: range end U+0061 is below its start U+007A"},
        {"root ::= \"\\x4g\"", "grammar:1:14: expected 2 hex digits after \\x"},
        {"root ::= x\nx ::= \"a\" )",
         "grammar:2:11: expected an item, '|' or the end of the line, found ')'"},
        {"root ::= [ab", "grammar:1:10: unterminated character class"},
        {"root ::= \"a\"{2", "grammar:1:15: expected '}'"},
        {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
        {"root ::= x \"a\"\nx ::= y?\ny ::= root", "is left-recursive"},
        {"root ::= \"a\" root", "the grammar can never finish"},
        {"root ::= [^\\x00-\\U0010FFFF]", "the grammar can never finish"},
        {"root ::= \"\\uD800\"", "grammar:1:11: \\u escape U+D800 is not a Unicode scalar value"},
        {"  # only a comment\n", "expected a rule named 'root'"},
        {"root ::= <a>", "grammar:1:10: expected an item, '|' or the end of the line, found '<'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = gemma3_grammar_check(cases[i].text, strlen(cases[i].text));
        CHECK_MSG(rc == GEMMA3_ERR_FORMAT, "case %zu: rc %d", i, rc);
        CHECK_MSG(strstr(gemma3_last_error(), cases[i].want) != NULL, "case %zu: '%s' lacks '%s'",
                  i, gemma3_last_error(), cases[i].want);
        CHECK_MSG(strchr(gemma3_last_error(), '\n') == NULL, "case %zu: more than one line", i);
    }
    /* valid odd corners: nullable star, tail cycles, empty alternatives, escapes, comments */
    static const char *const ok[] = {
        "root ::= (\"a\"?)*",
        "root ::= x\nx ::= y | \"z\"\ny ::= x",
        "root ::= | \"a\"",
        "root ::= \"\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\\"\\[\\]\" # comment",
        "root ::= (\n  \"a\" # inside\n  | \"b\"\n)\n",
        "root ::= [^\\]] [\\[-\\]] [a-] [-a] .{2,} \"x\"{,2} \"y\"{1} \"z\"{1,}",
        "root ::= \"\"",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int rc = gemma3_grammar_check(ok[i], strlen(ok[i]));
        CHECK_MSG(rc == GEMMA3_OK, "ok %zu: %s", i, gemma3_last_error());
    }
    /* well-formed, but past the elements the engine expands: UNSUPPORTED, not FORMAT (a JSON
     * schema's converted grammar may be refused this way and no other) */
    char huge[2048] = "root ::=";
    for (int i = 0; i < 110; i++) strcat(huge, " \"a\"{10000}"); /* 1.1M elements */
    CHECK(gemma3_grammar_check(huge, strlen(huge)) == GEMMA3_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(gemma3_last_error(), "grammar:1:") != NULL &&
                  strstr(gemma3_last_error(), "expands to more than") != NULL,
              "'%s'", gemma3_last_error());
    /* no token of the vocabulary can start it */
    const char *pieces[2] = {"a", "b"};
    int32_t lens[2] = {1, 1}, end = 1;
    gemma3_grammar_vocab v = {2, pieces, lens, 1, &end};
    gemma3_grammar *g = NULL;
    CHECK(gemma3_grammar_init("root ::= \"z\"", 12, &v, &g) == GEMMA3_ERR_FORMAT);
    CHECK(strstr(gemma3_last_error(), "no token of the vocabulary can start") != NULL);
    CHECK(g == NULL);
}

/* ================================ semantics on bytes ======================================== */

static void test_semantics(void) {
    static const struct {
        const char *grammar, *text;
        int want;
    } cases[] = {
        {"root ::= \"ab\" | \"cd\"", "ab", 1},
        {"root ::= \"ab\" | \"cd\"", "ad", 0},
        {"root ::= \"ab\" | \"cd\"", "a", 0},
        {"root ::= \"a\"* \"b\"", "aaab", 1},
        {"root ::= \"a\"* \"b\"", "b", 1},
        {"root ::= \"a\"+ \"b\"", "b", 0},
        {"root ::= \"ab\"+", "ababab", 1},
        {"root ::= \"ab\"+", "aba", 0},
        {"root ::= \"a\"? \"b\"", "ab", 1},
        {"root ::= \"a\"{2,3}", "a", 0},
        {"root ::= \"a\"{2,3}", "aa", 1},
        {"root ::= \"a\"{2,3}", "aaa", 1},
        {"root ::= \"a\"{2,3}", "aaaa", 0},
        {"root ::= \"a\"{2}", "aa", 1},
        {"root ::= \"a\"{2,}", "aaaaaa", 1},
        {"root ::= \"a\"{,2}", "", 1},
        /* repetition bounds at their edges: zero, equal, open, a multi-element symbol */
        {"root ::= \"a\"{2}", "aaa", 0},
        {"root ::= \"a\"{2}", "a", 0},
        {"root ::= \"a\"{0} \"b\"", "b", 1},
        {"root ::= \"a\"{0} \"b\"", "ab", 0},
        {"root ::= \"a\"{0,0} \"b\"", "ab", 0},
        {"root ::= \"a\"{,0} \"b\"", "b", 1},
        {"root ::= \"a\"{,0} \"b\"", "ab", 0},
        {"root ::= \"a\"{0,1}", "", 1},
        {"root ::= \"a\"{0,1}", "a", 1},
        {"root ::= \"a\"{0,1}", "aa", 0},
        {"root ::= \"a\"{1,1}", "a", 1},
        {"root ::= \"a\"{1,1}", "", 0},
        {"root ::= \"a\"{1,1}", "aa", 0},
        {"root ::= \"a\"{2,2}", "aa", 1},
        {"root ::= \"a\"{2,2}", "a", 0},
        {"root ::= \"a\"{2,2}", "aaa", 0},
        {"root ::= \"a\"{0,}", "", 1},
        {"root ::= \"a\"{0,}", "aaaa", 1},
        {"root ::= \"a\"{3,}", "aa", 0},
        {"root ::= \"a\"{3,}", "aaa", 1},
        {"root ::= \"a\"{3,}", "aaaaa", 1},
        {"root ::= \"a\"{1,3}", "", 0},
        {"root ::= \"a\"{1,3}", "aaa", 1},
        {"root ::= \"a\"{1,3}", "aaaa", 0},
        {"root ::= \"ab\"{2,3}", "abab", 1},
        {"root ::= \"ab\"{2,3}", "ababab", 1},
        {"root ::= \"ab\"{2,3}", "ab", 0},
        {"root ::= \"ab\"{2,3}", "abababab", 0},
        {"root ::= \"ab\"{2,3}", "ababa", 0},
        {"root ::= (\"a\" | \"b\"){1,2} \"c\"", "bac", 1},
        {"root ::= (\"a\" | \"b\"){1,2} \"c\"", "c", 0},
        {"root ::= (\"a\" | \"b\"){1,2} \"c\"", "abbc", 0},
        {"root ::= \"a\"{10000}", "a", 0},
        {"root ::= [a-c]+", "abcabc", 1},
        {"root ::= [a-c]+", "abd", 0},
        {"root ::= [^a-c]+", "xyz", 1},
        {"root ::= [^a-c]+", "xbz", 0},
        {"root ::= .+", "anything é 😀", 1},
        {"root ::= \"é\" [α-ω]", "éβ", 1},
        {"root ::= \"é\" [α-ω]", "éb", 0},
        {"root ::= x x\nx ::= \"(\" x \")\" | \"\"", "(())()", 1},
        {"root ::= x x\nx ::= \"(\" x \")\" | \"\"", "(()", 0},
        {"root ::= (\"a\" | \"ab\") \"c\"", "abc", 1},
        {"root ::= (\"a\" | \"ab\") \"c\"", "ac", 1},
        {"root ::= (\"a\"?)* \"b\"", "aab", 1},
        {"root ::= x\nx ::= y | \"z\"\ny ::= x", "z", 1},
        {"root ::= [\\x00-\\x1f]", "\t", 1},
        /* a class and its negation are two classes (classes are interned by their ranges) */
        {"root ::= [a] [^a] \"a\"", "aba", 1},
        {"root ::= [a] [^a] \"a\"", "aaa", 0},
        {"root ::= \"\\U0001F600\"", "😀", 1},
        /* a repeated empty string is the empty string, whatever the count */
        {"root ::= \"\"* \"a\" \"\"{2,5} \"\"+ \"\"? \"\"{3}", "a", 1},
        {"root ::= \"\"* \"a\" \"\"{2,5} \"\"+ \"\"? \"\"{3}", "", 0},
        {"root ::= \"\"*", "", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gemma3_grammar *g = byte_grammar(cases[i].grammar);
        CHECK_MSG(g != NULL, "case %zu", i);
        if (!g) continue;
        CHECK_MSG(matches(g, cases[i].text) == cases[i].want, "case %zu: %s on '%s'", i,
                  cases[i].grammar, cases[i].text);
        gemma3_grammar_free(g);
    }
    /* an alternative that can never finish is never started */
    gemma3_grammar *u = byte_grammar("root ::= \"a\" x | \"b\"\nx ::= \"c\" x");
    CHECK(u && !bit(gemma3_grammar_mask(u), 'a') && bit(gemma3_grammar_mask(u), 'b'));
    gemma3_grammar_free(u);
    /* end of generation: allowed exactly when the text matches; nothing after it */
    gemma3_grammar *g = byte_grammar("root ::= \"ab\" \"c\"?");
    CHECK(gemma3_grammar_allows(g, byte_end) == 0);
    CHECK(gemma3_grammar_accept(g, byte_end) == GEMMA3_ERR_ARG);
    feed(g, "a", 1);
    CHECK(!bit(gemma3_grammar_mask(g), byte_end));
    feed(g, "b", 1);
    const uint32_t *m = gemma3_grammar_mask(g);
    CHECK(bit(m, byte_end) && bit(m, 'c') && !bit(m, 'b'));
    CHECK(gemma3_grammar_accept(g, byte_end) == GEMMA3_OK);
    CHECK(gemma3_grammar_finished(g));
    CHECK(gemma3_grammar_allows(g, 'c') == 0);
    gemma3_grammar_reset(g);
    CHECK(!gemma3_grammar_finished(g) && gemma3_grammar_allows(g, 'a') == 1);
    gemma3_grammar_free(g);
}

/* Pieces that end or begin inside a character. */
static void test_split_utf8(void) {
    /* é = C3 A9, β = CE B2, 😀 = F0 9F 98 80 */
    const char *pieces[] = {"\xC3",     "\xA9",     "\xA9x",    "\xCE", "\xB2",     "x",
                            "\xF0\x9F", "\x98\x80", "\xC3\xA9", "\x80", "\xE0\x80", "\xED\xA0\x80"};
    enum { NP = sizeof pieces / sizeof pieces[0] };
    int32_t lens[NP + 1], end = NP;
    const char *pp[NP + 1];
    for (int i = 0; i < NP; i++) {
        pp[i] = pieces[i];
        lens[i] = (int32_t)strlen(pieces[i]);
    }
    pp[NP] = NULL;
    lens[NP] = 0;
    gemma3_grammar_vocab v = {NP + 1, pp, lens, 1, &end};
    gemma3_grammar *g;
    const char *text = "root ::= \"é\" [a-z] | [α-ω]+ | \"😀\"";
    CHECK(gemma3_grammar_init(text, strlen(text), &v, &g) == GEMMA3_OK);
    const uint32_t *m = gemma3_grammar_mask(g);
    /* first: the lead bytes of é, β, 😀 and whole é; not a stray continuation, an overlong
     * (E0 80) or a surrogate (ED A0 80) */
    CHECK(bit(m, 0) && bit(m, 3) && bit(m, 6) && bit(m, 8));
    CHECK(!bit(m, 1) && !bit(m, 2) && !bit(m, 5) && !bit(m, 9) && !bit(m, 10) && !bit(m, 11));
    CHECK(gemma3_grammar_accept(g, 0) == GEMMA3_OK); /* C3 */
    m = gemma3_grammar_mask(g);
    CHECK(bit(m, 1) && bit(m, 2) && !bit(m, 4) && !bit(m, 5) && !bit(m, NP));
    CHECK(gemma3_grammar_accept(g, 2) == GEMMA3_OK); /* A9 x: completes é, then x */
    CHECK(gemma3_grammar_can_end(g));
    gemma3_grammar_reset(g);
    CHECK(gemma3_grammar_accept(g, 3) == GEMMA3_OK && gemma3_grammar_accept(g, 4) == GEMMA3_OK);
    CHECK(gemma3_grammar_can_end(g) && gemma3_grammar_allows(g, 3) == 1);
    gemma3_grammar_reset(g);
    CHECK(gemma3_grammar_accept(g, 6) == GEMMA3_OK && gemma3_grammar_accept(g, 7) == GEMMA3_OK);
    CHECK(gemma3_grammar_can_end(g));
    gemma3_grammar_free(g);
    /* any character, but never an overlong form (E0 80 ..), a surrogate (ED A0 ..) or beyond
     * U+10FFFF (F4 90 ..), whole or begun */
    const char *bad[] = {"\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xC0\xAF", "\xE0\x80",
                         "\xF4\x90",     "\xF5"};
    const char *good[] = {"\xE0\xA0\x80", "\xED\x9F\xBF", "\xF4\x8F\xBF\xBF", "\xE0\xA0", "a"};
    const char *pp2[13];
    int32_t lens2[13], end2 = 12;
    for (int i = 0; i < 7; i++) pp2[i] = bad[i];
    for (int i = 0; i < 5; i++) pp2[7 + i] = good[i];
    for (int i = 0; i < 12; i++) lens2[i] = (int32_t)strlen(pp2[i]);
    pp2[12] = NULL;
    lens2[12] = 0;
    gemma3_grammar_vocab v2 = {13, pp2, lens2, 1, &end2};
    CHECK(gemma3_grammar_init("root ::= .+", 11, &v2, &g) == GEMMA3_OK);
    m = g ? gemma3_grammar_mask(g) : NULL;
    CHECK(m && (m[0] & 0x7F) == 0 && (m[0] >> 7 & 0x1F) == 0x1F);
    gemma3_grammar_free(g);
}

/* ================================ shipped grammars ========================================== */

static void test_shipped(void) {
    static const struct {
        const char *file;
        const char *good[4], *bad[3];
    } files[] = {
        {"grammars/json.gbnf",
         {"{\"a\": [1, -2.5e3, true, null, {\"b\": \"x\\n\\u00e9 é\"}]}", "{}",
          "{\n  \"k\": \"v\",\n  \"n\": 0\n}\n"},
         {"[1]", "{\"a\": 01}", "{\"a\" 1}"}},
        {"grammars/json_arr.gbnf", {"[\n{\"a\": 1},\n\"x\"]", "[\n]"}, {"{}", "[1,\n2]"}},
        {"grammars/list.gbnf", {"- one\n- two\n", "- x\n"}, {"- \n", "one\n", "- a"}},
        {"grammars/arithmetic.gbnf",
         {"(2 + 3) * 4 = 20\n", "x1 = y\na/b=c\n"},
         {"2 + = 3\n", "= 1\n"}},
        {"grammars/chess.gbnf",
         {"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 Nf6\n12. O-O O-O-O+\n"},
         {"1. e4 e5\n", "2. e4 e5\n1. d4 d5\n", "1. e9 e5\n2. a3 a6\n"}},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char *text = read_text(files[f].file);
        CHECK_MSG(text != NULL, "%s", files[f].file);
        if (!text) continue;
        gemma3_grammar *g = byte_grammar(text);
        CHECK_MSG(g != NULL, "%s: %s", files[f].file, gemma3_last_error());
        for (int i = 0; g && i < 4 && files[f].good[i]; i++)
            CHECK_MSG(matches(g, files[f].good[i]), "%s should match '%s'", files[f].file,
                      files[f].good[i]);
        for (int i = 0; g && i < 3 && files[f].bad[i]; i++)
            CHECK_MSG(!matches(g, files[f].bad[i]), "%s should not match '%s'", files[f].file,
                      files[f].bad[i]);
        gemma3_grammar_free(g);
        free(text);
    }
    /* the refusal is at the byte where the text stops being a prefix */
    char *text = read_text("grammars/json.gbnf");
    gemma3_grammar *g = text ? byte_grammar(text) : NULL;
    if (g) {
        const char *doc = "{\"a\": tru3}";
        CHECK_EQ_INT(feed(g, doc, strlen(doc)), 9);
    }
    gemma3_grammar_free(g);
    free(text);
}

/* ================================ JSON schema =============================================== */

static gemma3_grammar *schema_grammar(const char *schema) {
    char *gbnf = NULL;
    if (gemma3_json_schema_to_grammar(schema, strlen(schema), &gbnf) != GEMMA3_OK) {
        fprintf(stderr, "schema: %s\n", gemma3_last_error());
        return NULL;
    }
    gemma3_grammar *g = byte_grammar(gbnf);
    free(gbnf);
    return g;
}

static void test_json_schema(void) {
    static const struct {
        const char *schema;
        const char *good[8], *bad[8];
    } cases[] = {
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": "
         "{\"type\": "
         "\"string\"}, \"c\": {\"type\": \"boolean\"}}, \"required\": [\"b\"]}",
         {"{\"b\": \"x\"}", "{\"a\": 1, \"b\": \"\"}", "{\"a\": -3, \"b\": \"y\", \"c\": false}",
          "{ \"b\" : \"z\" , \"c\" : true }"},
         {"{}", "{\"a\": 1}", "{\"b\": \"x\", \"a\": 1}", "{\"b\": 1}"}},
        {"{\"type\": \"array\", \"items\": {\"enum\": [\"x\", 2, null]}, \"minItems\": 1, "
         "\"maxItems\": 3}",
         {"[\"x\"]", "[2, null, \"x\"]"},
         {"[]", "[2, 2, 2, 2]", "[\"y\"]"}},
        {"{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
         {"\"ab\"", "\"abc\"", "\"é\\n\""},
         {"\"a\"", "\"abcd\""}},
        {"{\"const\": {\"k\": [1, \"two\"]}}", {"{\"k\":[1,\"two\"]}"}, {"{\"k\": [1]}"}},
        {"{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"next\": {\"anyOf\": "
         "[{\"$ref\": \"#/$defs/node\"}, {\"type\": \"null\"}]}}, \"required\": [\"next\"]}}, "
         "\"$ref\": \"#/$defs/node\"}",
         {"{\"next\": null}", "{\"next\": {\"next\": {\"next\": null}}}"},
         {"{\"next\": 1}", "{}"}},
        {"{\"type\": \"integer\", \"minimum\": -2, \"maximum\": 12}",
         {"-2", "0", "12", "7"},
         {"13", "-3", "1.5"}},
        {"{\"type\": [\"number\", \"null\"]}", {"1.25", "null", "-0.5e-3"}, {"\"x\"", "true"}},
        {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}",
         {"{}", "{\"any\": 1, \"other\": 2}"},
         {"{\"a\": \"x\"}"}},
        {"{\"prefixItems\": [{\"type\": \"string\"}, {\"type\": \"integer\"}], \"items\": false}",
         {"[\"a\", 1]"},
         {"[\"a\"]", "[1, \"a\"]", "[\"a\", 1, 2]"}},
        {"{\"type\": \"object\", \"properties\": {\"q\\\"k\": {\"type\": \"null\"}}, "
         "\"required\": [\"q\\\"k\"], \"title\": \"T\", \"description\": \"D\"}",
         {"{\"q\\\"k\": null}"},
         {"{\"qk\": null}"}},
        {"true", {"{\"x\": [1, {}]}", "\"s\"", "3"}, {"{"}},
        /* several optional members in a row: any subset, in order, one comma between two */
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}, "
         "\"c\": {\"type\": \"integer\"}, \"d\": {\"type\": \"integer\"}}}",
         {"{}", "{\"b\": 1}", "{\"d\": 1}", "{\"a\": 1, \"c\": 2}", "{\"b\": 1, \"d\": 2}",
          "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4}", "{\"a\": 1, \"d\": 4}"},
         {"{\"d\": 1, \"a\": 2}", "{\"a\": 1 \"b\": 2}", "{\"a\": 1,, \"c\": 2}", "{, \"b\": 1}",
          "{\"a\": 1,}", "{\"e\": 1}", "{\"a\": 1, \"a\": 1}", "{\"b\": \"x\"}"}},
        /* optional, required, optional, optional */
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}, "
         "\"c\": {\"type\": \"integer\"}, \"d\": {\"type\": \"integer\"}}, \"required\": [\"b\"]}",
         {"{\"b\": 1}", "{\"a\": 1, \"b\": 2}", "{\"b\": 1, \"d\": 2}", "{\"b\": 1, \"c\": 2, \"d\": 3}"},
         {"{}", "{\"a\": 1}", "{\"a\": 1, \"c\": 2}", "{\"b\": 1 \"d\": 2}", "{\"b\": 1,, \"d\": 2}",
          "{\"b\": 1, \"d\": 2, \"c\": 3}"}},
        /* optional members, then additional ones (booleans) */
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}, "
         "\"c\": {\"type\": \"integer\"}}, \"additionalProperties\": {\"type\": \"boolean\"}}",
         {"{}", "{\"x\": true}", "{\"b\": 1}", "{\"a\": 1, \"x\": false}",
          "{\"b\": 1, \"c\": 2, \"y\": true, \"z\": false}", "{\"c\": 1, \"y\": true}",
          "{\"x\": true, \"y\": false}"},
         {"{\"x\": 1}", "{, \"x\": true}", "{\"a\": 1,, \"x\": true}", "{\"a\": 1 \"x\": true}",
          "{\"x\": true,}", "{\"x\": true \"y\": true}", "{\"b\": 1, \"a\": 2}"}},
        /* the same with additionalProperties false and true */
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}}, "
         "\"additionalProperties\": false}",
         {"{}", "{\"a\": 1}", "{\"b\": 1}", "{\"a\": 1, \"b\": 2}"},
         {"{\"x\": true}", "{\"a\": 1, \"x\": true}", "{, \"b\": 1}", "{\"a\": 1 \"b\": 2}"}},
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}}, "
         "\"additionalProperties\": true}",
         {"{}", "{\"b\": 1, \"x\": [null]}", "{\"x\": \"s\", \"y\": {}}", "{\"a\": 1, \"b\": 2}"},
         {"{, \"x\": 1}", "{\"b\": 1,, \"x\": 1}", "{\"b\": 1 \"x\": 1}", "{\"x\": 1,}"}},
        /* an additional member never has a declared name (in any spelling): a declared member
         * of the wrong type, or twice, does not slip through as an additional one */
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}, \"ab\": {\"type\": \"integer\"}, "
         "\"q\\\"k\": {\"type\": \"integer\"}, \"t\\u0001\": {\"type\": \"integer\"}}, "
         "\"additionalProperties\": true}",
         {"{\"b\": \"x\"}", "{\"a\": 1, \"abc\": \"x\"}", "{\"aa\": \"s\", \"\": 1}",
          "{\"q\": 1, \"q\\\"kk\": true, \"\\\"\": 2}", "{\"t\": 1, \"t\\u0002\": 2, \"t\\u0001x\": 3}",
          "{\"ab\": 1, \"b\": [], \"a\\n\": 2}", "{\"\xc3\xa9" "a\": 1}"},
         {"{\"a\": \"x\"}", "{\"ab\": \"x\"}", "{\"a\": 1, \"a\": 2}", "{\"b\": 1, \"a\": 1}",
          "{\"q\\\"k\": \"s\"}", "{\"\\u0061\": \"x\"}", "{\"t\\u0001\": \"x\"}", "{\"a\\/\": 1}"}},
        {"{\"properties\": {\"a\": {\"type\": \"integer\"}}, \"additionalProperties\": "
         "{\"type\": \"integer\"}}",
         {"{\"a\": 1}", "{\"b\": 1, \"c\": 2}", "{\"a\": 1, \"aa\": 2}"},
         {"{\"a\": 1, \"a\": 2}", "{\"b\": 1, \"a\": 2}", "{\"a\": 1, \"b\": 2, \"a\": 3}"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gemma3_grammar *g = schema_grammar(cases[i].schema);
        CHECK_MSG(g != NULL, "schema %zu", i);
        for (int k = 0; g && k < 8 && cases[i].good[k]; k++)
            CHECK_MSG(matches(g, cases[i].good[k]), "schema %zu should match '%s'", i,
                      cases[i].good[k]);
        for (int k = 0; g && k < 8 && cases[i].bad[k]; k++)
            CHECK_MSG(!matches(g, cases[i].bad[k]), "schema %zu should not match '%s'", i,
                      cases[i].bad[k]);
        gemma3_grammar_free(g);
    }
    static const struct {
        const char *schema, *want;
        int rc;
    } refused[] = {
        {"{\"type\": \"string\", \"pattern\": \"^a\"}", "'pattern' at / is not supported",
         GEMMA3_ERR_UNSUPPORTED},
        {"{\"properties\": {\"d\": {\"type\": \"string\", \"format\": \"hostname\"}}}",
         "format 'hostname' at /properties/d is not supported", GEMMA3_ERR_UNSUPPORTED},
        {"{\"allOf\": [{}]}", "'allOf' at / is not supported", GEMMA3_ERR_UNSUPPORTED},
        {"{\"type\": \"number\", \"minimum\": 0}", "minimum/maximum of a number",
         GEMMA3_ERR_UNSUPPORTED},
        {"{\"type\": \"integer\", \"exclusiveMinimum\": true}",
         "exclusiveMinimum at / must be a number", GEMMA3_ERR_UNSUPPORTED},
        {"{\"type\": \"integer\", \"minimum\": 3, \"maximum\": 2.5}", "no integer lies within",
         GEMMA3_ERR_UNSUPPORTED},
        {"{\"type\": \"string\", \"format\": \"email\"}", "format 'email' at / is not supported",
         GEMMA3_ERR_UNSUPPORTED},
        {"{\"$ref\": \"#/$defs/missing\"}", "names no definition", GEMMA3_ERR_FORMAT},
        {"{\"$ref\": \"http://x\"}", "only #/$defs/NAME", GEMMA3_ERR_UNSUPPORTED},
        {"{\"type\": \"strin\"}", "unknown type 'strin'", GEMMA3_ERR_FORMAT},
        {"{\"type\": \"object\", \"properties\": {}, \"required\": [\"x\"]}", "names 'x'",
         GEMMA3_ERR_UNSUPPORTED},
        {"{\"type\": \"array\", \"minItems\": -1}", "minItems at / must be an integer",
         GEMMA3_ERR_FORMAT},
        /* counts past the grammar's largest repetition (the fuzzer's schema once converted to a
         * grammar the parser refused) */
        {"{\"anyOf\": [{\"type\": \"string\", \"minLength\": 1, \"maxLength\": 40963}]}",
         "maxLength at /anyOf/0 must be an integer in [0, 10000]", GEMMA3_ERR_FORMAT},
        {"{\"type\": \"array\", \"maxItems\": 10001}",
         "maxItems at / must be an integer in [0, 10000]", GEMMA3_ERR_FORMAT},
        {"{\"type\": \"object\",\n \"properties\": {\"a\" 1}}",
         "json-schema:2:21: expected valid JSON", GEMMA3_ERR_FORMAT},
        {"{} x", "json-schema:1:4: expected the end of the schema", GEMMA3_ERR_FORMAT},
        {"false", "matches nothing", GEMMA3_ERR_UNSUPPORTED},
        {"{\"uniqueItems\": true}", "'uniqueItems' at /", GEMMA3_ERR_UNSUPPORTED},
        {"{\"enum\": [\"\xff\"]}", "json-schema:1:12: expected UTF-8 text (byte 0xFF)",
         GEMMA3_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char *gbnf = (char *)"unset";
        int rc = gemma3_json_schema_to_grammar(refused[i].schema, strlen(refused[i].schema), &gbnf);
        CHECK_MSG(rc == refused[i].rc, "refused %zu: rc %d (%s)", i, rc, gemma3_last_error());
        CHECK_MSG(strstr(gemma3_last_error(), refused[i].want) != NULL,
                  "refused %zu: '%s' lacks '%s'", i, gemma3_last_error(), refused[i].want);
        CHECK(gbnf == NULL);
    }
    /* the largest counts convert to grammars the parser takes */
    static const char *const largest[] = {
        "{\"type\": \"string\", \"minLength\": 10000, \"maxLength\": 10000}",
        "{\"type\": \"array\", \"minItems\": 10000, \"maxItems\": 10000}",
    };
    for (size_t i = 0; i < sizeof largest / sizeof largest[0]; i++) {
        char *gbnf = NULL;
        int rc = gemma3_json_schema_to_grammar(largest[i], strlen(largest[i]), &gbnf);
        CHECK_MSG(rc == GEMMA3_OK, "largest %zu: %s", i, gemma3_last_error());
        if (rc == GEMMA3_OK)
            CHECK_MSG(gemma3_grammar_check(gbnf, strlen(gbnf)) == GEMMA3_OK, "largest %zu: %s", i,
                      gemma3_last_error());
        free(gbnf);
    }
}

/* Integer bounds, checked against every integer in a window: the grammar matches v exactly when
 * lo <= v <= hi. And the string formats. */
/* A generated document under the schema of test_schema_generation: declared members (a, ab)
 * integers, each at most once; additional members strings of at most 3 characters. 1 if so. */
static int valid_extra_doc(const char *doc, char *why, size_t n) {
    cJSON *root = cJSON_Parse(doc);
    int ok = cJSON_IsObject(root), seen[2] = {0};
    if (!ok) snprintf(why, n, "not a JSON object");
    for (const cJSON *m = root ? root->child : NULL; ok && m; m = m->next) {
        int d = strcmp(m->string, "a") == 0 ? 0 : strcmp(m->string, "ab") == 0 ? 1 : -1;
        if (d >= 0) {
            ok = cJSON_IsNumber(m) && m->valuedouble == floor(m->valuedouble) && !seen[d]++;
        } else {
            size_t chars = 0;
            for (const char *p = cJSON_IsString(m) ? m->valuestring : ""; *p; p++)
                chars += ((unsigned char)*p & 0xC0) != 0x80;
            ok = cJSON_IsString(m) && chars <= 3;
        }
        if (!ok) snprintf(why, n, "member '%s'", m->string);
    }
    cJSON_Delete(root);
    return ok;
}

/* Generation under a schema with additionalProperties, the logits pushing towards documents it
 * forbids (a declared name as an additional member with a string value, a declared member twice):
 * every document drawn, greedy or at temperature 1, is one the schema allows. */
static void test_schema_generation(void) {
    gemma3_grammar *g = schema_grammar(
        "{\"properties\": {\"a\": {\"type\": \"integer\"}, \"ab\": {\"type\": \"integer\"}}, "
        "\"additionalProperties\": {\"type\": \"string\", \"maxLength\": 3}}");
    CHECK(g != NULL);
    if (!g) return;
    static const char *const pushed[] = {"{\"a\": \"x\"}", "{\"ab\": \"xy\"}", "{\"b\": \"x\", \"a\": \"y\"}",
                                         "{\"a\": 1, \"a\": \"z\"}", "{\"a\": 1, \"ab\": 2, \"ab\": 3}"};
    int drawn = 0, finished = 0, bad = 0;
    for (size_t t = 0; t < sizeof pushed / sizeof pushed[0]; t++)
        for (int run = 0; run < 21; run++) {
            gemma3_sampler_params sp = gemma3_sampler_default_params();
            sp.seed = (uint32_t)run;
            sp.temperature = run == 0 ? 0.0f : 1.0f;
            sp.top_k = 0;
            sp.top_p = 1.0f;
            gemma3_sampler *s;
            if (gemma3_sampler_init(&sp, 257, &s) != GEMMA3_OK) continue;
            gemma3_grammar_reset(g);
            char doc[320];
            size_t len = 0, want = strlen(pushed[t]);
            for (int step = 0; step < 300 && !gemma3_grammar_finished(g); step++) {
                float logits[257];
                for (int i = 0; i < 257; i++) logits[i] = rng_f();
                logits['"'] += 3, logits['}'] += 3, logits['1'] += 2, logits[byte_end] += 6;
                if (len < want) logits[(unsigned char)pushed[t][len]] += 8;
                int32_t id = gemma3_grammar_sample(g, s, logits, step);
                if (id < 0 || gemma3_grammar_accept(g, id) != GEMMA3_OK) break;
                if (id != byte_end && len + 1 < sizeof doc) doc[len++] = (char)id;
            }
            doc[len] = '\0';
            gemma3_sampler_free(s);
            drawn++;
            if (!gemma3_grammar_finished(g)) continue;
            finished++;
            char why[128];
            if (!valid_extra_doc(doc, why, sizeof why) && bad++ < 5)
                fprintf(stderr, "pushed towards %s, drew %s: %s\n", pushed[t], doc, why);
        }
    printf("schema generation: %d of %d draws ended, %d of them break the schema\n", finished, drawn, bad);
    CHECK_MSG(bad == 0, "%d of %d drawn documents break the schema", bad, finished);
    CHECK_MSG(finished * 10 >= drawn * 9, "only %d of %d draws ended", finished, drawn);
    gemma3_grammar_free(g);
}

static void test_json_integers(void) {
    static const struct {
        const char *bounds;
        long lo, hi; /* LONG_MIN / LONG_MAX: unbounded */
    } cases[] = {
        {"\"minimum\": -15, \"maximum\": 107", -15, 107},
        {"\"minimum\": 5", 5, 1L << 60},
        {"\"maximum\": -3", -(1L << 60), -3},
        {"\"exclusiveMinimum\": 0, \"exclusiveMaximum\": 10", 1, 9},
        {"\"minimum\": 123, \"maximum\": 4567", 123, 4567},
        {"\"minimum\": -1000, \"maximum\": -999", -1000, -999},
        {"\"minimum\": 0.5, \"maximum\": 99.5", 1, 99},
        {"\"minimum\": -4321, \"exclusiveMaximum\": 0", -4321, -1},
        {"\"minimum\": 0, \"maximum\": 0", 0, 0},
    };
    int wrong = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char schema[256];
        snprintf(schema, sizeof schema, "{\"type\": \"integer\", %s}", cases[i].bounds);
        gemma3_grammar *g = schema_grammar(schema);
        CHECK_MSG(g != NULL, "%s", schema);
        for (long v = -5100; g && v <= 5100; v++) {
            char num[32];
            snprintf(num, sizeof num, "%ld", v);
            int want = v >= cases[i].lo && v <= cases[i].hi;
            if (matches(g, num) != want && wrong++ < 5)
                fprintf(stderr, "%s: %ld matched %d\n", schema, v, !want);
        }
        static const char *const big[] = {"123456789012345", "-123456789012345", "007", "-0",
                                          "1e3"};
        for (int k = 0; g && k < 5; k++) {
            long v = atol(big[k]);
            int want = k < 2 && v >= cases[i].lo && v <= cases[i].hi;
            if (matches(g, big[k]) != want && wrong++ < 5)
                fprintf(stderr, "%s: '%s' matched %d\n", schema, big[k], !want);
        }
        gemma3_grammar_free(g);
    }
    CHECK_EQ_INT(wrong, 0);
    static const struct {
        const char *format, *good[2], *bad[3];
    } fmts[] = {
        {"date",
         {"\"2024-02-29\"", "\"1999-12-31\""},
         {"\"2024-13-01\"", "\"2024-1-01\"", "\"2024-00-10\""}},
        {"time",
         {"\"23:59:60Z\"" /* a leap second is RFC 3339 */, "\"08:00:00.125+05:30\""},
         {"\"24:00:00Z\"", "\"08:00:00\"", "\"8:00:00Z\""}},
        {"date-time",
         {"\"2024-03-18T09:41:27Z\"", "\"2024-03-18T09:41:27.5-01:00\""},
         {"\"2024-03-18 09:41:27Z\"", "\"2024-03-18\""}},
        {"uuid",
         {"\"123e4567-e89b-12d3-a456-426614174000\"", "\"ABCDEFAB-CDEF-ABCD-EFAB-CDEFABCDEFAB\""},
         {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""}},
    };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        char schema[128];
        snprintf(schema, sizeof schema, "{\"type\": \"string\", \"format\": \"%s\"}",
                 fmts[i].format);
        gemma3_grammar *g = schema_grammar(schema);
        CHECK_MSG(g != NULL, "%s", schema);
        for (int k = 0; g && k < 2; k++)
            CHECK_MSG(matches(g, fmts[i].good[k]), "%s should match %s", fmts[i].format,
                      fmts[i].good[k]);
        for (int k = 0; g && k < 3 && fmts[i].bad[k]; k++)
            CHECK_MSG(!matches(g, fmts[i].bad[k]), "%s should not match %s", fmts[i].format,
                      fmts[i].bad[k]);
        gemma3_grammar_free(g);
    }
}

/* ================================ the draw ================================================== */

static double chi2_critical(int df) { /* alpha = 1e-4, Wilson-Hilferty */
    const double z = 3.719016485;
    double h = 2.0 / (9.0 * df);
    return df * pow(1 - h + z * sqrt(h), 3);
}

#if defined(__SANITIZE_ADDRESS__) || defined(G3_TEST_QUICK)
#define N_DRAWS 20000
#else
#define N_DRAWS 200000
#endif

/* `root ::= "a" | "b" | "cd"` over pieces a b c cd d x ab <end>: the first step may draw a, b, c
 * or cd, with the chain's probabilities renormalised over them. */
static void test_distribution(void) {
    const char *pieces[] = {"a", "b", "c", "cd", "d", "x", "ab", NULL};
    enum { NV = 8 };
    int32_t lens[NV] = {1, 1, 1, 2, 1, 1, 2, 0}, end = 7;
    gemma3_grammar_vocab v = {NV, pieces, lens, 1, &end};
    gemma3_grammar *g;
    const char *text = "root ::= \"a\" | \"b\" | \"cd\"";
    if (gemma3_grammar_init(text, strlen(text), &v, &g) != GEMMA3_OK) {
        CHECK_MSG(0, "%s", gemma3_last_error());
        return;
    }
    const float logits[NV] = {0.3f, -0.4f, 1.1f, 0.2f, 3.0f, 2.5f, 4.0f, 1.0f};
    const int allowed[NV] = {1, 1, 1, 1, 0, 0, 0, 0};
    static const struct {
        float t;
        int top_k;
        int mode;
    } configs[] = {{1.0f, 0, GEMMA3_SAMPLER_MODE_CDF},
                   {1.0f, 0, GEMMA3_SAMPLER_MODE_GUMBEL},
                   {0.7f, 3, GEMMA3_SAMPLER_MODE_CDF},
                   {0.7f, 3, GEMMA3_SAMPLER_MODE_GUMBEL}};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        gemma3_sampler_params sp = gemma3_sampler_default_params();
        sp.seed = 42;
        sp.temperature = configs[c].t;
        sp.top_k = configs[c].top_k;
        sp.top_p = 1.0f;
        sp.mode = configs[c].mode;
        gemma3_sampler *s;
        if (gemma3_sampler_init(&sp, NV, &s) != GEMMA3_OK) continue;
        /* exact: softmax(l / t) over the allowed ids, top-k among them */
        double p[NV] = {0}, z = 0;
        int order[NV], n_allowed = 0;
        for (int i = 0; i < NV; i++)
            if (allowed[i]) order[n_allowed++] = i;
        for (int i = 0; i < n_allowed; i++) /* by logit, descending */
            for (int j = i + 1; j < n_allowed; j++)
                if (logits[order[j]] > logits[order[i]]) {
                    int t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
        int kept =
            configs[c].top_k > 0 && configs[c].top_k < n_allowed ? configs[c].top_k : n_allowed;
        for (int i = 0; i < kept; i++)
            z += p[order[i]] = exp((double)(logits[order[i]] / configs[c].t));
        for (int i = 0; i < NV; i++) p[i] /= z;
        long count[NV] = {0};
        int outside = 0;
        for (int64_t pos = 0; pos < N_DRAWS; pos++) {
            int32_t t = gemma3_grammar_sample(g, s, logits, pos);
            if (t < 0 || t >= NV || p[t] == 0)
                outside++;
            else
                count[t]++;
        }
        CHECK_EQ_INT(outside, 0);
        double chi2 = 0;
        int df = -1;
        for (int i = 0; i < NV; i++) {
            if (p[i] == 0) continue;
            double e = p[i] * N_DRAWS;
            chi2 += (count[i] - e) * (count[i] - e) / e;
            df++;
        }
        CHECK_MSG(chi2 < chi2_critical(df), "config %zu: chi2 %.2f >= %.2f (df %d)", c, chi2,
                  chi2_critical(df), df);
        gemma3_sampler_free(s);
    }
    /* greedy: the argmax over the allowed ids (c), whether or not the overall argmax (ab) is
     * allowed; with the overall argmax allowed the shortcut gives the same token */
    gemma3_sampler_params sp = gemma3_sampler_default_params();
    sp.temperature = 0;
    gemma3_sampler *s;
    if (gemma3_sampler_init(&sp, NV, &s) == GEMMA3_OK) {
        CHECK(gemma3_sampler_mask_commutes(s));
        CHECK_EQ_INT(gemma3_grammar_sample(g, s, logits, 0), 2);
        float l2[NV];
        memcpy(l2, logits, sizeof l2);
        l2[1] = 9.0f; /* b, allowed, now the overall argmax */
        CHECK_EQ_INT(gemma3_grammar_sample(g, s, l2, 0), 1);
        CHECK_EQ_INT(gemma3_sampler_sample_masked(s, l2, 0, gemma3_grammar_mask(g)), 1);
        /* every allowed logit -inf: the fallback is the raw argmax over the allowed ids */
        float l3[NV] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 5, 6, 7, 8};
        CHECK_EQ_INT(gemma3_grammar_sample(g, s, l3, 0), 0);
        uint32_t none = 0;
        CHECK(gemma3_sampler_sample_masked(s, logits, 0, &none) == GEMMA3_ERR_ARG);
        gemma3_sampler_free(s);
    }
    /* after "c" only "d" continues; after "cd" only the end id */
    CHECK(gemma3_grammar_accept(g, 2) == GEMMA3_OK);
    const uint32_t *m = gemma3_grammar_mask(g);
    CHECK(m[0] == 1u << 4);
    CHECK(gemma3_grammar_accept(g, 4) == GEMMA3_OK);
    m = gemma3_grammar_mask(g);
    CHECK(m[0] == 1u << 7);
    gemma3_grammar_free(g);
}

/* A logit bias of -inf is never overridden by the grammar: when the mask and the bans leave no
 * id, the draw fails (the caller stops with one line) for every kind of draw; when they leave
 * some, only those are drawn, also through the fallback of all-(-inf) logits. */
static void test_bans(void) {
    const char *pieces[] = {"a", "b", "aa", "c", NULL};
    enum { NV = 5 };
    int32_t lens[NV] = {1, 1, 2, 1, 0}, end = 4;
    gemma3_grammar_vocab v = {NV, pieces, lens, 1, &end};
    const float logits[NV] = {3.0f, 1.0f, 2.0f, 0.5f, 0.0f};
    const float none_finite[NV] = {-INFINITY, NAN, -INFINITY, -INFINITY, -INFINITY};
    static const struct {
        float t;
        int mode, mirostat;
    } draws[] = {{0.0f, GEMMA3_SAMPLER_MODE_CDF, 0},
                 {1.0f, GEMMA3_SAMPLER_MODE_CDF, 0},
                 {1.0f, GEMMA3_SAMPLER_MODE_GUMBEL, 0},
                 {1.0f, GEMMA3_SAMPLER_MODE_CDF, 2}};
    for (size_t d = 0; d < sizeof draws / sizeof draws[0]; d++) {
        gemma3_sampler_params sp = gemma3_sampler_default_params();
        sp.temperature = draws[d].t;
        sp.mode = draws[d].mode;
        sp.mirostat = draws[d].mirostat;
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.n_logit_bias = 1;
        sp.logit_bias[0] = (gemma3_logit_bias){0, -INFINITY}; /* "a", the only way to spell a */
        gemma3_sampler *s;
        gemma3_grammar *only_a, *a_or_b;
        if (gemma3_sampler_init(&sp, NV, &s) != GEMMA3_OK) {
            CHECK_MSG(0, "draw %zu: %s", d, gemma3_last_error());
            continue;
        }
        if (gemma3_grammar_init("root ::= \"a\"", 12, &v, &only_a) != GEMMA3_OK ||
            gemma3_grammar_init("root ::= \"a\" | \"b\"", 18, &v, &a_or_b) != GEMMA3_OK) {
            CHECK_MSG(0, "%s", gemma3_last_error());
            gemma3_sampler_free(s);
            continue;
        }
        for (int64_t pos = 0; pos < 50; pos++) {
            int32_t t = gemma3_grammar_sample(only_a, s, logits, pos);
            CHECK_MSG(t == GEMMA3_ERR_ARG, "draw %zu pos %lld: %d", d, (long long)pos, (int)t);
            CHECK_MSG(strstr(gemma3_last_error(), "no token is left") != NULL, "'%s'",
                      gemma3_last_error());
            CHECK_EQ_INT(gemma3_grammar_sample(a_or_b, s, logits, pos), 1);
            CHECK_EQ_INT(gemma3_grammar_sample(a_or_b, s, none_finite, pos), 1);
            CHECK(gemma3_grammar_sample(only_a, s, none_finite, pos) == GEMMA3_ERR_ARG);
        }
        gemma3_grammar_free(only_a);
        gemma3_grammar_free(a_or_b);
        gemma3_sampler_free(s);
    }
}

/* ================================ grammars at scale ========================================= */

/* Appends printf output to a growing buffer (the scale test's grammars are megabytes). */
typedef struct {
    char *p;
    size_t n, cap;
} text_buf;

static void tb_printf(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(text_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)k + 1 > b->cap) {
        b->cap = (b->n + (size_t)k + 1) * 2;
        char *p = realloc(b->p, b->cap);
        if (!p) abort();
        b->p = p;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* root ::= r0; rI ::= "x" rI+1 (tail) or rI+1 "x" (a frame per rule); the last one closes to
 * `last`. */
static char *chain(int n, int tail, const char *last) {
    text_buf b = {0};
    tb_printf(&b, "root ::= r0\n");
    for (int i = 0; i + 1 < n; i++)
        tb_printf(&b, tail ? "r%d ::= \"x\" r%d\n" : "r%d ::= r%d \"x\"\n", i, i + 1);
    tb_printf(&b, "r%d ::= %s\n", n - 1, last);
    return b.p;
}

/* 100k nested groups and 100k-rule chains: no stack overflow (the parser recursed per group),
 * no quadratic time (rule lookup was a linear scan: a 100k chain did not parse in 10 minutes;
 * the suite's time limit catches a slip back), and the same answers as small grammars. */
static void test_scale(void) {
    enum { N = 100000 };
    text_buf b = {0};
    tb_printf(&b, "root ::= ");
    for (int i = 0; i < N; i++) tb_printf(&b, "(");
    tb_printf(&b, "\"a\"");
    for (int i = 0; i < N; i++) tb_printf(&b, ")");
    tb_printf(&b, " \"b\"\n");
    gemma3_grammar *g = byte_grammar(b.p);
    CHECK_MSG(g != NULL, "100k nested groups: %s", gemma3_last_error());
    if (g) CHECK(matches(g, "ab") && !matches(g, "a") && !matches(g, "aab"));
    gemma3_grammar_free(g);
    b.n = 0; /* one group not closed, deep inside: the error names where the text ends */
    tb_printf(&b, "root ::= ");
    for (int i = 0; i < N; i++) tb_printf(&b, "(");
    tb_printf(&b, "\"a\"");
    for (int i = 0; i + 1 < N; i++) tb_printf(&b, ")");
    CHECK(gemma3_grammar_check(b.p, b.n) == GEMMA3_ERR_FORMAT);
    CHECK_MSG(strstr(gemma3_last_error(), "grammar:1:200012: expected ')'") != NULL, "'%s'",
              gemma3_last_error());
    free(b.p);
    for (int tail = 0; tail < 2; tail++) { /* x^99999 y, or y x^99999 */
        char *text = chain(N, tail, "\"y\"");
        g = byte_grammar(text);
        CHECK_MSG(g != NULL, "chain (tail %d): %s", tail, gemma3_last_error());
        const char *first = tail ? "x" : "y", *then = tail ? "xxxx" : "yxxx";
        if (g) {
            const uint32_t *m = gemma3_grammar_mask(g);
            CHECK(m && bit(m, first[0]) && !bit(m, 'x' + 'y' - first[0]) && !bit(m, byte_end));
            CHECK(feed(g, then, 4) < 0 && gemma3_grammar_allows(g, 'y') == 0 &&
                  !gemma3_grammar_can_end(g));
        }
        gemma3_grammar_free(g);
        free(text);
    }
    /* a left recursion through the whole chain: r0 reaches itself before any character */
    char *text = chain(N, 0, "root \"z\" | \"w\"");
    CHECK(gemma3_grammar_check(text, strlen(text)) == GEMMA3_ERR_FORMAT);
    CHECK_MSG(strstr(gemma3_last_error(), "rule 'r0' is left-recursive") != NULL, "'%s'",
              gemma3_last_error());
    free(text);
    /* a chain that can never finish: productivity reaches root from the far end or not at all */
    text = chain(N, 1, "\"x\" r0");
    CHECK(gemma3_grammar_check(text, strlen(text)) == GEMMA3_ERR_FORMAT);
    CHECK(strstr(gemma3_last_error(), "can never finish") != NULL);
    free(text);
    /* a helper rule's name is not a rule name: the user's root-1 is the user's own rule */
    g = byte_grammar("root ::= (\"a\") root-1\nroot-1 ::= \"b\"");
    CHECK_MSG(g != NULL, "%s", gemma3_last_error());
    if (g) CHECK(matches(g, "ab") && !matches(g, "aa"));
    gemma3_grammar_free(g);
}

/* ================================ property test ============================================= */

/* Random grammars as trees, matched here by recursive descent (not the engine's code). */
enum { N_RULES = 4, MAX_NODES = 256, MAX_TEXT = 96 };
static const uint32_t alphabet[] = {'a', 'b', 'c', 0xE9 /* é */, 0x3B2 /* β */, 0x1F600};
#define N_ALPHA 6

typedef enum { N_LIT, N_CLASS, N_REF, N_SEQ, N_ALT, N_REP } node_kind;
typedef struct {
    node_kind kind;
    uint32_t cp;         /* N_LIT */
    uint32_t set;        /* N_CLASS: bitmask over the alphabet; bit 31: the rest of Unicode */
    int rule;            /* N_REF */
    int kids[4], n_kids; /* N_SEQ, N_ALT, N_REP (one kid) */
    int min, max;        /* N_REP, max -1 = unbounded */
} node;

static node nodes[MAX_NODES];
static int n_nodes, rule_root[N_RULES];

static int add_node(node n) {
    if (n_nodes == MAX_NODES) return -1;
    nodes[n_nodes] = n;
    return n_nodes++;
}

/* An item of rule r at depth d; rec: a reference to rule <= r is allowed (it follows a
 * literal in the sequence, so it is never left-recursive). */
static int gen_item(int r, int d, int rec) {
    uint32_t k = rng_u32() % 10;
    node n;
    memset(&n, 0, sizeof n);
    if (k < 3 || d > 2) {
        n.kind = N_LIT;
        n.cp = alphabet[rng_u32() % N_ALPHA];
    } else if (k < 5) {
        n.kind = N_CLASS;
        n.set = rng_u32() & 0x8000003Fu;
        if ((n.set & 0x3F) == 0) n.set |= 1;
    } else if (k < 7 && (r + 1 < N_RULES || rec)) {
        int lower = rec ? r + 1 : 0, higher = N_RULES - r - 1;
        int x = (int)(rng_u32() % (unsigned)(lower + higher));
        n.kind = N_REF;
        n.rule = x < lower ? x : r + 1 + (x - lower);
    } else if (k < 9) {
        n.kind = N_REP;
        int kid = gen_item(r, d + 1, 0);
        if (kid < 0) return -1;
        n.kids[0] = kid;
        n.n_kids = 1;
        int form = (int)(rng_u32() % 5);
        n.min = form == 0 ? 0 : form == 1 ? 1 : form == 2 ? 0 : (int)(rng_u32() % 3);
        n.max = form == 0 || form == 1 ? -1 : form == 2 ? 1 : n.min + (int)(rng_u32() % 3);
    } else {
        n.kind = N_ALT;
        n.n_kids = 2 + (int)(rng_u32() % 2);
        for (int i = 0; i < n.n_kids; i++) {
            node s;
            memset(&s, 0, sizeof s);
            s.kind = N_SEQ;
            s.n_kids = (int)(rng_u32() % 3);
            for (int j = 0; j < s.n_kids; j++)
                if ((s.kids[j] = gen_item(r, d + 1, 0)) < 0) return -1;
            if ((n.kids[i] = add_node(s)) < 0) return -1;
        }
    }
    /* a reference to a rule <= r is only safe right after a literal: make it "lit ref" */
    if (n.kind == N_REF && n.rule <= r) {
        node s;
        memset(&s, 0, sizeof s);
        s.kind = N_SEQ;
        node lit;
        memset(&lit, 0, sizeof lit);
        lit.kind = N_LIT;
        lit.cp = alphabet[rng_u32() % N_ALPHA];
        s.kids[0] = add_node(lit);
        s.kids[1] = add_node(n);
        s.n_kids = 2;
        if (s.kids[0] < 0 || s.kids[1] < 0) return -1;
        return add_node(s);
    }
    return add_node(n);
}

/* Rule r: alternatives; the first never refers to rules <= r (so every rule can finish). */
static int gen_rule(int r) {
    node a;
    memset(&a, 0, sizeof a);
    a.kind = N_ALT;
    a.n_kids = 1 + (int)(rng_u32() % 3);
    for (int i = 0; i < a.n_kids; i++) {
        node s;
        memset(&s, 0, sizeof s);
        s.kind = N_SEQ;
        s.n_kids = 1 + (int)(rng_u32() % 3);
        for (int j = 0; j < s.n_kids; j++)
            if ((s.kids[j] = gen_item(r, 0, i > 0)) < 0) return -1;
        if ((a.kids[i] = add_node(s)) < 0) return -1;
    }
    return add_node(a);
}

static void put_cp(char *out, size_t *n, uint32_t cp) {
    if (cp < 0x80)
        out[(*n)++] = (char)cp;
    else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | cp >> 6);
        out[(*n)++] = (char)(0x80 | (cp & 63));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | cp >> 12);
        out[(*n)++] = (char)(0x80 | (cp >> 6 & 63));
        out[(*n)++] = (char)(0x80 | (cp & 63));
    } else {
        out[(*n)++] = (char)(0xF0 | cp >> 18);
        out[(*n)++] = (char)(0x80 | (cp >> 12 & 63));
        out[(*n)++] = (char)(0x80 | (cp >> 6 & 63));
        out[(*n)++] = (char)(0x80 | (cp & 63));
    }
}

static void print_node(int i, char *out, size_t *n) {
    const node *x = &nodes[i];
    switch (x->kind) {
    case N_LIT:
        out[(*n)++] = '"';
        put_cp(out, n, x->cp);
        out[(*n)++] = '"';
        break;
    case N_CLASS: /* [chars with their bit], or with bit 31 [^chars without their bit] */
        if (x->set == 0x8000003Fu) {
            out[(*n)++] = '.';
            break;
        }
        out[(*n)++] = '[';
        if (x->set >> 31) out[(*n)++] = '^';
        for (int k = 0; k < N_ALPHA; k++)
            if (((x->set >> k) & 1) != (x->set >> 31)) put_cp(out, n, alphabet[k]);
        out[(*n)++] = ']';
        break;
    case N_REF:
        if (x->rule == 0)
            *n += (size_t)sprintf(out + *n, "root");
        else
            *n += (size_t)sprintf(out + *n, "r%d", x->rule);
        break;
    case N_SEQ:
    case N_ALT:
        out[(*n)++] = '(';
        for (int k = 0; k < x->n_kids; k++) {
            if (k) *n += (size_t)sprintf(out + *n, x->kind == N_ALT ? " | " : " ");
            print_node(x->kids[k], out, n);
        }
        if (x->kind == N_SEQ && x->n_kids == 0) *n += (size_t)sprintf(out + *n, "\"\"");
        out[(*n)++] = ')';
        break;
    case N_REP:
        out[(*n)++] = '(';
        print_node(x->kids[0], out, n);
        out[(*n)++] = ')';
        if (x->min == 0 && x->max < 0)
            out[(*n)++] = '*';
        else if (x->min == 1 && x->max < 0)
            out[(*n)++] = '+';
        else if (x->min == 0 && x->max == 1)
            out[(*n)++] = '?';
        else
            *n += (size_t)sprintf(out + *n, "{%d,%d}", x->min, x->max);
        break;
    }
}

/* Does class node x match code point cp? Bit k: alphabet[k]; bit 31: every code point outside
 * the alphabet. */
static int class_match(const node *x, uint32_t cp) {
    for (int k = 0; k < N_ALPHA; k++)
        if (alphabet[k] == cp) return (int)((x->set >> k) & 1);
    return (int)(x->set >> 31);
}

/* ends(node, i): the set of j such that the node matches text[i..j); j == len + 1 means "the
 * text ran out inside the node" (a viable prefix, as every node can finish). */
static uint32_t text_cp[MAX_TEXT + 8];
static int text_len;
typedef struct {
    uint8_t v[MAX_TEXT + 10];
} posset;

static void ends(int i, int at, posset *out);
/* rules memoised per text (a rule at a position never depends on itself there: recursion
 * always follows a literal) */
static posset memo[N_RULES][MAX_TEXT + 10];
static uint8_t memo_ok[N_RULES][MAX_TEXT + 10];
static void ends_rule(int r, int at, posset *out) {
    if (!memo_ok[r][at]) {
        ends(rule_root[r], at, &memo[r][at]);
        memo_ok[r][at] = 1;
    }
    *out = memo[r][at];
}

static void ends(int ni, int at, posset *out) {
    memset(out, 0, sizeof *out);
    int over = text_len + 1;
    if (at == over) { /* the text is used up: whatever follows may come */
        out->v[over] = 1;
        return;
    }
    const node *x = &nodes[ni];
    switch (x->kind) {
    case N_LIT:
    case N_CLASS:
        if (at == text_len)
            out->v[over] = 1;
        else if (x->kind == N_LIT ? text_cp[at] == x->cp : class_match(x, text_cp[at]))
            out->v[at + 1] = 1;
        break;
    case N_REF: ends_rule(x->rule, at, out); break;
    case N_ALT:
        for (int k = 0; k < x->n_kids; k++) {
            posset p;
            ends(x->kids[k], at, &p);
            for (int j = 0; j <= over; j++) out->v[j] |= p.v[j];
        }
        break;
    case N_SEQ: {
        posset cur;
        memset(&cur, 0, sizeof cur);
        cur.v[at] = 1;
        for (int k = 0; k < x->n_kids; k++) {
            posset next;
            memset(&next, 0, sizeof next);
            for (int j = 0; j <= over; j++) {
                if (!cur.v[j]) continue;
                posset p;
                ends(x->kids[k], j, &p);
                for (int m = 0; m <= over; m++) next.v[m] |= p.v[m];
            }
            cur = next;
        }
        *out = cur;
        break;
    }
    case N_REP: {
        posset cur;
        memset(&cur, 0, sizeof cur);
        cur.v[at] = 1;
        if (x->min == 0) *out = cur;
        for (int rep = 1; x->max < 0 || rep <= x->max; rep++) {
            posset next;
            memset(&next, 0, sizeof next);
            for (int j = 0; j <= over; j++) {
                if (!cur.v[j]) continue;
                posset p;
                ends(x->kids[0], j, &p);
                for (int m = 0; m <= over; m++) next.v[m] |= p.v[m];
            }
            int grew = 0;
            for (int m = 0; m <= over; m++) {
                if (rep >= x->min && next.v[m] && !out->v[m]) {
                    out->v[m] = 1;
                    grew = 1;
                }
            }
            if (memcmp(&next, &cur, sizeof cur) == 0 && rep > x->min) break;
            cur = next;
            if (x->max < 0 && rep > x->min + over + 1 && !grew) break;
        }
        break;
    }
    }
}

/* Decodes bytes into text_cp; a trailing partial character is returned in *partial (its bytes)
 * and not decoded. Returns 0 on malformed UTF-8. */
static int decode(const unsigned char *s, int n, int *partial) {
    text_len = 0;
    *partial = 0;
    for (int i = 0; i < n;) {
        int len = s[i] < 0x80 ? 1 : s[i] >= 0xF0 ? 4 : s[i] >= 0xE0 ? 3 : s[i] >= 0xC0 ? 2 : 0;
        if (len == 0) return 0;
        if (i + len > n) {
            *partial = n - i;
            return 1;
        }
        uint32_t cp = len == 1 ? s[i] : s[i] & (0x7Fu >> len);
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 63u);
        }
        static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_of[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
        text_cp[text_len++] = cp;
        i += len;
    }
    return 1;
}

/* Independent verdicts on bytes: 2 complete match, 1 viable prefix, 0 neither. */
static int verdict(const unsigned char *s, int n) {
    int partial;
    memset(memo_ok, 0, sizeof memo_ok);
    if (n > MAX_TEXT || !decode(s, n, &partial)) return 0;
    posset p;
    if (!partial) {
        ends_rule(0, 0, &p);
        return p.v[text_len] ? 2 : p.v[text_len + 1] ? 1 : 0;
    }
    /* a partial last character: viable if some completion is (the alphabet's characters with
     * those first bytes, or one code point outside the alphabet with them) */
    const unsigned char *tail = s + n - partial;
    uint32_t cands[N_ALPHA + 1];
    int nc = 0;
    for (int k = 0; k < N_ALPHA; k++) {
        char b[4];
        size_t bl = 0;
        put_cp(b, &bl, alphabet[k]);
        if ((int)bl > partial && memcmp(b, tail, (size_t)partial) == 0) cands[nc++] = alphabet[k];
    }
    /* the smallest valid code point with these first bytes that is not in the alphabet */
    int len = tail[0] >= 0xF0 ? 4 : tail[0] >= 0xE0 ? 3 : 2;
    uint32_t lo = tail[0] & (0x7Fu >> len), hi = lo;
    for (int k = 1; k < len; k++) {
        if (k < partial && (tail[k] & 0xC0) != 0x80) return 0;
        lo = lo << 6 | (k < partial ? (tail[k] & 63u) : 0);
        hi = hi << 6 | (k < partial ? (tail[k] & 63u) : 63);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (lo < min_of[len]) lo = min_of[len];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    for (uint32_t cp = lo; cp <= hi; cp++) {
        int in = cp >= 0xD800 && cp < 0xE000;
        for (int k = 0; k < N_ALPHA; k++) in |= alphabet[k] == cp;
        if (!in) {
            cands[nc++] = cp;
            break;
        }
    }
    int saved = text_len;
    for (int c = 0; c < nc; c++) {
        text_len = saved;
        text_cp[text_len++] = cands[c];
        memset(memo_ok, 0, sizeof memo_ok);
        ends_rule(0, 0, &p);
        if (p.v[text_len] || p.v[text_len + 1]) return 1;
    }
    return 0;
}

/* The vocabulary: every alphabet character whole, each multi-byte one also cut into single
 * bytes, random 2-3 character strings, some cut after a lead byte; then the end id. */
enum { PV_MAX = 96 };
static char pv_bytes[PV_MAX][16];
static const char *pv_piece[PV_MAX];
static int32_t pv_len[PV_MAX];

static int build_property_vocab(void) {
    int n = 0;
    for (int k = 0; k < N_ALPHA; k++) {
        size_t l = 0;
        put_cp(pv_bytes[n], &l, alphabet[k]);
        pv_len[n++] = (int32_t)l;
        if (l > 1)
            for (size_t b = 0; b < l; b++) {
                pv_bytes[n][0] = pv_bytes[n - 1 - (int)b][b];
                pv_len[n++] = 1;
            }
    }
    while (n < PV_MAX - 1) {
        size_t l = 0;
        int chars = 2 + (int)(rng_u32() % 2);
        for (int c = 0; c < chars; c++) put_cp(pv_bytes[n], &l, alphabet[rng_u32() % N_ALPHA]);
        if (rng_u32() % 4 == 0 && (unsigned char)pv_bytes[n][l - 1] >= 0x80) {
            while ((unsigned char)pv_bytes[n][l - 1] >= 0x80 &&
                   (unsigned char)pv_bytes[n][l - 1] < 0xC0)
                l--;
        }
        pv_len[n++] = (int32_t)l;
    }
    for (int i = 0; i < n; i++) pv_piece[i] = pv_bytes[i];
    pv_piece[n] = NULL;
    pv_len[n] = 0;
    return n + 1;
}

static void test_property(void) {
    int nv = build_property_vocab();
    int32_t end = nv - 1;
    gemma3_grammar_vocab v = {nv, pv_piece, pv_len, 1, &end};
    /* the random-weight model: a bigram table of logits, the end id a little favoured */
    static float W[PV_MAX + 1][PV_MAX];
    for (int a = 0; a <= nv; a++)
        for (int b = 0; b < nv; b++)
            W[a][b] = (float)(rng_u32() % 4000) / 1000.0f + (b == end) * 1.5f;
    int n_grammars = 0, n_outputs = 0, n_ended = 0, mask_bad = 0, out_bad = 0;
    for (int trial = 0; trial < 60; trial++) {
        n_nodes = 0;
        int ok = 1;
        for (int r = N_RULES - 1; r >= 0 && ok; r--) ok = (rule_root[r] = gen_rule(r)) >= 0;
        if (!ok) continue;
        static char text[16384];
        size_t tn = 0;
        for (int r = 0; r < N_RULES; r++) {
            tn += (size_t)sprintf(text + tn, "%s ::= ", r == 0 ? "root" : "");
            if (r > 0) {
                tn -= 5;
                tn += (size_t)sprintf(text + tn, "r%d ::= ", r);
            }
            print_node(rule_root[r], text, &tn);
            text[tn++] = '\n';
        }
        text[tn] = '\0';
        gemma3_grammar *g;
        if (gemma3_grammar_init(text, tn, &v, &g) != GEMMA3_OK) {
            /* the only refusal allowed: no token can start it (never, with this vocabulary) */
            CHECK_MSG(0, "trial %d: %s\n%s", trial, gemma3_last_error(), text);
            continue;
        }
        n_grammars++;
        for (int run = 0; run < 4; run++) {
            gemma3_sampler_params sp = gemma3_sampler_default_params();
            sp.seed = (uint32_t)(trial * 7 + run);
            sp.top_k = 0;
            sp.top_p = 1.0f;
            sp.temperature = run == 3 ? 0.0f : 1.0f;
            sp.mode = run == 1 ? GEMMA3_SAMPLER_MODE_GUMBEL : GEMMA3_SAMPLER_MODE_CDF;
            if (run == 2) { /* the default chain with its filters */
                sp.top_k = 8;
                sp.top_p = 0.9f;
            }
            gemma3_sampler *s;
            if (gemma3_sampler_init(&sp, nv, &s) != GEMMA3_OK) break;
            gemma3_grammar_reset(g);
            unsigned char out[MAX_TEXT + 16];
            int n = 0, prev = nv, ended = 0;
            for (int step = 0; step < 40; step++) {
                const uint32_t *m = gemma3_grammar_mask(g);
                /* the mask against the independent matcher, token by token */
                for (int t = 0; t < nv && m; t++) {
                    int want;
                    if (t == end) {
                        want = verdict(out, n) == 2;
                    } else {
                        if (n + pv_len[t] > MAX_TEXT) continue;
                        memcpy(out + n, pv_bytes[t], (size_t)pv_len[t]);
                        want = verdict(out, n + pv_len[t]) >= 1;
                    }
                    if (bit(m, t) != want && mask_bad++ < 5)
                        fprintf(stderr,
                                "mask: token %d (%.*s) engine %d matcher %d after '%.*s'\n%s\n", t,
                                pv_len[t], pv_bytes[t], bit(m, t), want, n, out, text);
                }
                int32_t tok = gemma3_grammar_sample(g, s, W[prev], step);
                if (tok < 0 || gemma3_grammar_accept(g, tok) != GEMMA3_OK) {
                    CHECK_MSG(0, "sample/accept failed: %s", gemma3_last_error());
                    break;
                }
                if (tok == end) {
                    ended = 1;
                    break;
                }
                if (n + pv_len[tok] > MAX_TEXT) break;
                memcpy(out + n, pv_bytes[tok], (size_t)pv_len[tok]);
                n += pv_len[tok];
                prev = tok;
            }
            int vd = verdict(out, n);
            n_outputs++;
            n_ended += ended;
            if ((ended ? vd != 2 : vd < 1) && out_bad++ < 5)
                fprintf(stderr, "output '%.*s' (ended %d) verdict %d\n%s\n", n, out, ended, vd,
                        text);
            gemma3_sampler_free(s);
        }
        gemma3_grammar_free(g);
    }
    CHECK_EQ_INT(mask_bad, 0);
    CHECK_EQ_INT(out_bad, 0);
    CHECK_MSG(n_grammars >= 50 && n_ended >= n_outputs / 4, "%d grammars, %d/%d outputs ended",
              n_grammars, n_ended, n_outputs);
}

/* ================================ the real vocabulary ======================================= */

static void test_real_vocab(void) {
    gemma3_tokenizer *tok;
    if (gemma3_tokenizer_load("models/tokenizer.model", &tok) != GEMMA3_OK) {
        CHECK_SKIP("models/tokenizer.model: %s", gemma3_last_error());
        return;
    }
    char *text = read_text("grammars/json.gbnf");
    const char *doc = "{\n  \"name\": \"Zoë Müller\", \"tags\": [\"a\\\"b\", 配達],\n"
                      "  \"n\": -1.5e3, \"ok\": true, \"nested\": {\"x\": null, \"y\": [[]]}}";
    /* (配達 unquoted makes the document invalid there: the walk must refuse it) */
    int32_t ids[256];
    int n = gemma3_tokenizer_encode(tok, doc, strlen(doc), 0, ids, 256);
    int32_t ends[2] = {gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_EOS),
                       gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_END_OF_TURN)};
    gemma3_grammar *a = NULL, *b = NULL, *c = NULL;
    int ok = text && n > 0 && n <= 256 &&
             gemma3_grammar_init_tokenizer(text, strlen(text), tok, ends, 2, 0, &a) == GEMMA3_OK &&
             gemma3_grammar_init_tokenizer(text, strlen(text), tok, ends, 2, 0, &b) == GEMMA3_OK &&
             gemma3_grammar_init_tokenizer(text, strlen(text), tok, ends, 2, 0, &c) == GEMMA3_OK;
    CHECK_MSG(ok, "%s", gemma3_last_error());
    if (ok) {
        g3_grammar_set_mode(b, G3_GRAMMAR_NO_SCAN);
        g3_grammar_set_mode(c, G3_GRAMMAR_NO_CACHE);
        int V = gemma3_tokenizer_vocab_size(tok), words = (V + 31) / 32, refused_at = -1;
        int diff_walk = 0, diff_cache = 0, diff_one = 0;
        for (int i = 0; i < n && refused_at < 0; i++) {
            const uint32_t *ma = gemma3_grammar_mask(a), *mb = gemma3_grammar_mask(b),
                           *mc = gemma3_grammar_mask(c);
            diff_walk += memcmp(ma, mb, (size_t)words * 4) != 0;
            diff_cache += memcmp(ma, mc, (size_t)words * 4) != 0;
            for (int t = (i * 7919) % 97; t < V; t += 97) /* a sample of one-token checks */
                diff_one += gemma3_grammar_allows(a, t) != bit(ma, t);
            if (!bit(ma, ids[i])) {
                refused_at = i;
                break;
            }
            gemma3_grammar_accept(a, ids[i]);
            gemma3_grammar_accept(b, ids[i]);
            gemma3_grammar_accept(c, ids[i]);
        }
        CHECK_EQ_INT(diff_walk, 0);
        CHECK_EQ_INT(diff_cache, 0);
        CHECK_EQ_INT(diff_one, 0);
        /* refused exactly at the token that starts 配達 */
        CHECK_MSG(refused_at >= 0 &&
                      strstr(gemma3_tokenizer_piece(tok, ids[refused_at]), "配") != NULL,
                  "refused at %d", refused_at);
        g3_grammar_stats st;
        g3_grammar_get_stats(a, &st);
        CHECK(st.n_cache_hits > 0);
        /* a sampler over fewer ids than the pieces (a config smaller than the tokenizer) or
         * more (Gemma 3 4B: 262,208 logits): the grammar covers exactly the sampler's ids, the
         * ids past the tokenizer never allowed; the sampler must be of the same size */
        gemma3_grammar *d = NULL;
        CHECK(gemma3_grammar_init_tokenizer(text, strlen(text), tok, ends, 2, V - 1, &d) ==
              GEMMA3_OK);
        gemma3_grammar_free(d);
        d = NULL;
        CHECK(gemma3_grammar_init_tokenizer(text, strlen(text), tok, ends, 2, V + 64, &d) ==
              GEMMA3_OK);
        gemma3_sampler_params sp = gemma3_sampler_default_params();
        sp.seed = 5;
        gemma3_sampler *small = NULL, *big = NULL;
        float *l = calloc((size_t)V + 64, sizeof *l);
        if (d && l && gemma3_sampler_init(&sp, V, &small) == GEMMA3_OK &&
            gemma3_sampler_init(&sp, V + 64, &big) == GEMMA3_OK) {
            for (int i = V; i < V + 64; i++) l[i] = 100.0f; /* the model likes the extra ids */
            const uint32_t *m = gemma3_grammar_mask(d);
            int extra = 0;
            for (int i = V; i < V + 64; i++) extra += bit(m, i);
            CHECK_EQ_INT(extra, 0);
            CHECK(gemma3_grammar_sample(d, small, l, 0) == GEMMA3_ERR_ARG);
            int32_t t = gemma3_grammar_sample(d, big, l, 0);
            CHECK_MSG(t >= 0 && t < V && bit(m, t), "token %d", (int)t);
        }
        free(l);
        gemma3_sampler_free(small);
        gemma3_sampler_free(big);
        gemma3_grammar_free(d);
    }
    gemma3_grammar_free(a);
    gemma3_grammar_free(b);
    gemma3_grammar_free(c);
    free(text);
    gemma3_tokenizer_free(tok);
}

static void timed(const char *name, void (*f)(void)) {
    double t0 = g3_now();
    f();
    if (getenv("G3_TEST_VERBOSE")) fprintf(stderr, "%s: %.2f s\n", name, g3_now() - t0);
}

int main(void) {
    (void)rng_f; /* test-rng.h's float stream: not used here */
    timed("errors", test_errors);
    timed("semantics", test_semantics);
    timed("split_utf8", test_split_utf8);
    timed("shipped", test_shipped);
    timed("json_schema", test_json_schema);
    timed("json_integers", test_json_integers);
    timed("schema_generation", test_schema_generation);
    timed("distribution", test_distribution);
    timed("bans", test_bans);
    timed("scale", test_scale);
    timed("property", test_property);
    timed("real_vocab", test_real_vocab);
    return check_report();
}
