/* test-tokenizer.c - the SentencePiece tokenizer against the reference ids of the real Gemma 3
 * vocabulary (tests/data/tokenizer/public-cases.jsonl, from HF tokenizers), decode and streaming
 * decode, special ids, the chat format, and malformed/tiny hand-built models. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "cli/jsonl.h"
#include "tokenizer.h"
#include "util.h"

#define MODEL_PATH "models/tokenizer.model"
#define CASES_PATH "tests/data/tokenizer/public-cases.jsonl"

typedef struct {
    char *text;
    size_t len;
    int32_t *ids;
    int n_ids;
} test_case;

static int load_cases(test_case **out) {
    char *data;
    size_t size;
    if (g3_read_file(CASES_PATH, &data, &size) != GEMMA3_OK) {
        fprintf(stderr, "%s\n", gemma3_last_error());
        return -1;
    }
    int cap = 2048, n = 0;
    test_case *cases = malloc(cap * sizeof *cases);
    for (char *line = data; line < data + size;) {
        char *nl = memchr(line, '\n', (size_t)(data + size - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(data + size - line);
        if (ll > 0) {
            test_case c = {0};
            int rc = jsonl_get_string(line, ll, "text", &c.text, &c.len);
            cJSON *j = cJSON_ParseWithLength(line, ll);
            cJSON *ids = j ? cJSON_GetObjectItem(j, "ids") : NULL;
            if (rc != 0 || !cJSON_IsArray(ids)) {
                fprintf(stderr, "bad case line %d\n", n + 1);
                free(c.text);
                cJSON_Delete(j);
                free(data);
                return -1;
            }
            c.n_ids = cJSON_GetArraySize(ids);
            c.ids = malloc((size_t)(c.n_ids + 1) * sizeof *c.ids);
            for (int i = 0; i < c.n_ids; i++)
                c.ids[i] = (int32_t)cJSON_GetArrayItem(ids, i)->valuedouble;
            cJSON_Delete(j);
            if (n == cap) cases = realloc(cases, (size_t)(cap *= 2) * sizeof *cases);
            cases[n++] = c;
        }
        line += ll + 1;
    }
    free(data);
    *out = cases;
    return n;
}

static int32_t *encode_alloc(const gemma3_tokenizer *tok, const char *text, size_t len, int flags,
                             int *n) {
    int need = gemma3_tokenizer_encode(tok, text, len, flags, NULL, 0);
    if (need < 0) {
        *n = need;
        return NULL;
    }
    int32_t *ids = malloc((size_t)(need + 1) * sizeof *ids);
    *n = gemma3_tokenizer_encode(tok, text, len, flags, ids, need);
    return ids;
}

static void print_text(const char *text, size_t len) {
    fputc('"', stderr);
    for (size_t i = 0; i < len && i < 200; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c == '"' || c == '\\') fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fprintf(stderr, "\"%s", len > 200 ? "..." : "");
}

static void print_ids(const char *what, const int32_t *ids, int n) {
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, "%s\n", n > 40 ? " ..." : "");
}

/* Is every byte sequence in s[0..n) complete, well-formed UTF-8? */
static int valid_utf8(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                                   : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if ((u[i + k] & 0xC0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

static void test_public_cases(const gemma3_tokenizer *tok) {
    test_case *cases;
    int n = load_cases(&cases);
    CHECK_MSG(n == 1333, "expected 1333 cases, got %d", n);
    if (n <= 0) return;
    int mismatches = 0, roundtrip_fail = 0, roundtrip_checked = 0, stream_fail = 0;
    for (int k = 0; k < n; k++) {
        test_case *c = &cases[k];
        int got_n;
        int32_t *got = encode_alloc(tok, c->text, c->len, GEMMA3_TOK_PARSE_SPECIAL, &got_n);
        if (got_n != c->n_ids || memcmp(got, c->ids, (size_t)got_n * sizeof *got) != 0) {
            if (++mismatches <= 5) {
                fprintf(stderr, "case %d mismatch: ", k + 1);
                print_text(c->text, c->len);
                fputc('\n', stderr);
                print_ids("want", c->ids, c->n_ids);
                print_ids("got ", got, got_n);
            }
        }
        free(got);

        /* round trip and streaming use user-text encoding (no control-token parsing), whose
         * decode is exact: control pieces decode to nothing */
        int32_t *ids = encode_alloc(tok, c->text, c->len, 0, &got_n);
        int need = gemma3_tokenizer_decode(tok, ids, got_n, NULL, 0);
        char *text = malloc((size_t)need + 1);
        gemma3_tokenizer_decode(tok, ids, got_n, text, (size_t)need + 1);
        if (!memmem(c->text, c->len, "\xE2\x96\x81", 3)) {
            roundtrip_checked++;
            if ((size_t)need != c->len || memcmp(text, c->text, c->len) != 0) {
                if (++roundtrip_fail <= 3) {
                    fprintf(stderr, "case %d round trip: ", k + 1);
                    print_text(text, (size_t)need);
                    fputc('\n', stderr);
                }
            }
        }
        gemma3_decoder dec = {0};
        char *stream = malloc((size_t)need + 64), piece[512];
        size_t sn = 0;
        int ok = 1;
        for (int i = 0; i < got_n && ok; i++) {
            int w = gemma3_decoder_push(tok, &dec, ids[i], piece, sizeof piece);
            ok = w >= 0 && sn + (size_t)w <= (size_t)need && valid_utf8(piece, (size_t)w);
            if (ok) memcpy(stream + sn, piece, (size_t)w), sn += (size_t)w;
        }
        int w = ok ? gemma3_decoder_flush(&dec, piece, sizeof piece) : -1;
        ok = ok && w >= 0 && sn + (size_t)w == (size_t)need;
        if (ok) memcpy(stream + sn, piece, (size_t)w), sn += (size_t)w;
        if (!ok || memcmp(stream, text, (size_t)need) != 0) {
            if (++stream_fail <= 3) fprintf(stderr, "case %d: streaming decode differs\n", k + 1);
        }
        free(stream);
        free(text);
        free(ids);
    }
    CHECK_MSG(mismatches == 0, "%d of %d cases differ from the reference ids", mismatches, n);

    /* all cases in one long text, separated by <start_of_turn> (a user-defined piece, so a
     * boundary): the long-text path (word cache, many words per call) must give the same ids */
    size_t total = 0;
    int total_ids = 0;
    for (int k = 0; k < n; k++) total += cases[k].len + 15, total_ids += cases[k].n_ids + 1;
    char *all = malloc(total);
    int32_t *want = malloc((size_t)total_ids * sizeof *want);
    size_t pos = 0;
    int n_want = 0;
    for (int k = 0; k < n; k++) {
        memcpy(all + pos, cases[k].text, cases[k].len);
        memcpy(all + pos + cases[k].len, "<start_of_turn>", 15);
        pos += cases[k].len + 15;
        memcpy(want + n_want, cases[k].ids, (size_t)cases[k].n_ids * sizeof *want);
        n_want += cases[k].n_ids;
        want[n_want++] = 105;
    }
    int n_all;
    int32_t *got_all = encode_alloc(tok, all, total, GEMMA3_TOK_PARSE_SPECIAL, &n_all);
    int first_diff = -1;
    for (int i = 0; i < n_all && i < n_want && first_diff < 0; i++)
        if (got_all[i] != want[i]) first_diff = i;
    CHECK_MSG(n_all == n_want && first_diff < 0, "joined cases: %d ids (want %d), first diff at %d",
              n_all, n_want, first_diff);
    free(got_all);
    free(want);
    free(all);
    CHECK_MSG(roundtrip_checked >= 1320, "only %d round-trip cases", roundtrip_checked);
    CHECK_MSG(roundtrip_fail == 0, "%d of %d cases do not round-trip", roundtrip_fail,
              roundtrip_checked);
    CHECK_MSG(stream_fail == 0, "%d cases: streaming decode differs from decode", stream_fail);
    for (int k = 0; k < n; k++) {
        free(cases[k].text);
        free(cases[k].ids);
    }
    free(cases);
}

static int encode_eq(const gemma3_tokenizer *tok, const char *text, int flags, const int32_t *want,
                     int n_want) {
    int32_t got[256];
    int n = gemma3_tokenizer_encode(tok, text, strlen(text), flags, got, 256);
    int same = n == n_want && memcmp(got, want, (size_t)n * sizeof *got) == 0;
    if (!same) {
        fprintf(stderr, "encode ");
        print_text(text, strlen(text));
        fprintf(stderr, " flags %d\n", flags);
        print_ids("want", want, n_want);
        print_ids("got ", got, n < 0 ? 0 : n);
    }
    return same;
}

static void test_specials_and_flags(const gemma3_tokenizer *tok) {
    CHECK_EQ_INT(gemma3_tokenizer_vocab_size(tok), 262144);
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_PAD), 0);
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_EOS), 1);
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_BOS), 2);
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_UNK), 3);
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_START_OF_TURN), 105);
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_END_OF_TURN), 106);
    CHECK(strcmp(gemma3_tokenizer_piece(tok, 105), "<start_of_turn>") == 0);
    CHECK(strcmp(gemma3_tokenizer_piece(tok, 238 + 0x41), "<0x41>") == 0);
    CHECK(strcmp(gemma3_tokenizer_piece(tok, 139), "\xE2\x96\x81\xE2\x96\x81\xE2\x96\x81") == 0);
    CHECK(gemma3_tokenizer_piece(tok, -1) == NULL);
    CHECK(gemma3_tokenizer_piece(tok, 262144) == NULL);
    CHECK_EQ_INT(g3_tokenizer_piece_type(tok, 2), G3_PIECE_CONTROL);
    CHECK_EQ_INT(g3_tokenizer_piece_type(tok, 105), G3_PIECE_USER_DEFINED);
    CHECK_EQ_INT(g3_tokenizer_piece_type(tok, 300), G3_PIECE_BYTE);

    /* BOS flag: the same ids with a 2 in front */
    int n1, n2;
    int32_t *a = encode_alloc(tok, "Hello world", 11, 0, &n1);
    int32_t *b = encode_alloc(tok, "Hello world", 11, GEMMA3_TOK_BOS, &n2);
    CHECK_EQ_INT(n2, n1 + 1);
    CHECK(n2 == n1 + 1 && b[0] == 2 && memcmp(a, b + 1, (size_t)n1 * sizeof *a) == 0);
    free(a);
    free(b);
    int32_t bos_only[] = {2};
    CHECK(encode_eq(tok, "", GEMMA3_TOK_BOS, bos_only, 1));
    CHECK_EQ_INT(gemma3_tokenizer_encode(tok, "", 0, 0, NULL, 0), 0);

    /* control-token text is parsed only on request; user-defined pieces always */
    int32_t eos[] = {1}, unk[] = {3}, sot[] = {105};
    CHECK(encode_eq(tok, "<eos>", GEMMA3_TOK_PARSE_SPECIAL, eos, 1));
    CHECK(encode_eq(tok, "<unk>", GEMMA3_TOK_PARSE_SPECIAL, unk, 1));
    CHECK(encode_eq(tok, "<start_of_turn>", 0, sot, 1));
    CHECK(encode_eq(tok, "<start_of_turn>", GEMMA3_TOK_PARSE_SPECIAL, sot, 1));
    const char *controls[] = {"<bos>", "<eos>", "<pad>", "<unk>", "a<eos>b"};
    for (int i = 0; i < 5; i++) {
        int n;
        int32_t *ids = encode_alloc(tok, controls[i], strlen(controls[i]), 0, &n);
        int has_special = 0;
        for (int k = 0; k < n; k++) has_special |= ids[k] <= 3;
        CHECK_MSG(n > 1 && !has_special, "'%s' without PARSE_SPECIAL gave a special id", controls[i]);
        char back[64];
        gemma3_tokenizer_decode(tok, ids, n, back, sizeof back);
        CHECK_MSG(strcmp(back, controls[i]) == 0, "'%s' decoded as '%s'", controls[i], back);
        free(ids);
    }

    /* count convention: a short buffer gets a prefix, the return value is the full count */
    int32_t full[64], part[3] = {-7, -7, -7};
    int nf = gemma3_tokenizer_encode(tok, "The quick brown fox jumps", 25, 0, full, 64);
    int np = gemma3_tokenizer_encode(tok, "The quick brown fox jumps", 25, 0, part, 2);
    CHECK_EQ_INT(np, nf);
    CHECK(part[0] == full[0] && part[1] == full[1] && part[2] == -7);
    CHECK_EQ_INT(gemma3_tokenizer_encode(tok, "x", 1, 8, full, 64), GEMMA3_ERR_ARG);
    CHECK_EQ_INT(gemma3_tokenizer_encode(tok, "x", 1, 0, NULL, 5), GEMMA3_ERR_ARG);

    /* invalid UTF-8 falls back to byte pieces, deterministically, and decodes to U+FFFD */
    const char bad[] = "a\xff\xc3(\xe2\x82 \xf0\x9f\x98";
    int32_t x[64], y[64];
    int nx = gemma3_tokenizer_encode(tok, bad, sizeof bad - 1, 0, x, 64);
    int ny = gemma3_tokenizer_encode(tok, bad, sizeof bad - 1, 0, y, 64);
    CHECK(nx > 0 && nx == ny && memcmp(x, y, (size_t)nx * sizeof *x) == 0);
    int n_bytes = 0;
    for (int i = 0; i < nx; i++) n_bytes += x[i] >= 238 && x[i] <= 493;
    CHECK_EQ_INT(n_bytes, 7);
    char text[128];
    int tl = gemma3_tokenizer_decode(tok, x, nx, text, sizeof text);
    CHECK(tl > 0 && valid_utf8(text, (size_t)tl));
    CHECK(strcmp(text, "a\xEF\xBF\xBD\xEF\xBF\xBD(\xEF\xBF\xBD \xEF\xBF\xBD") == 0);

    /* overlong forms, surrogates and code points past U+10FFFF are not UTF-8: each maximal
     * invalid subpart is one U+FFFD (as Python's and HF's decoders give), both in a whole decode
     * and streamed; a one-point bug in the lead-byte ranges lets them through */
    static const struct { unsigned char b[4]; int n; int n_fffd; } bad_seqs[] = {
        {{0xC0, 0x80}, 2, 2}, {{0xC1, 0xBF}, 2, 2}, {{0xE0, 0x80, 0x80}, 3, 3},
        {{0xE0, 0x9F, 0xBF}, 3, 3}, {{0xED, 0xA0, 0x80}, 3, 3}, {{0xF0, 0x8F, 0xBF, 0xBF}, 4, 4},
        {{0xF4, 0x90, 0x80, 0x80}, 4, 4}, {{0xF5, 0x80, 0x80, 0x80}, 4, 4},
    };
    for (size_t k = 0; k < sizeof bad_seqs / sizeof bad_seqs[0]; k++) {
        int32_t seq[4];
        char want[16] = "", got_stream[64] = "";
        for (int i = 0; i < bad_seqs[k].n; i++) seq[i] = 238 + bad_seqs[k].b[i];
        for (int i = 0; i < bad_seqs[k].n_fffd; i++) strcat(want, "\xEF\xBF\xBD");
        int len = gemma3_tokenizer_decode(tok, seq, bad_seqs[k].n, text, sizeof text);
        CHECK_MSG(len == (int)strlen(want) && strcmp(text, want) == 0, "bad sequence %zu (%02X %02X): "
                  "decoded to %d bytes", k, bad_seqs[k].b[0], bad_seqs[k].b[1], len);
        gemma3_decoder sd = {0};
        char piece[16];
        for (int i = 0; i < bad_seqs[k].n; i++) {
            int n = gemma3_decoder_push(tok, &sd, seq[i], piece, sizeof piece);
            if (n > 0) strncat(got_stream, piece, (size_t)n);
        }
        if (gemma3_decoder_flush(&sd, piece, sizeof piece) > 0) strcat(got_stream, piece);
        CHECK_MSG(strcmp(got_stream, want) == 0, "bad sequence %zu streamed: %zu bytes", k,
                  strlen(got_stream));
    }

    /* decode: snprintf convention, control pieces empty, byte pieces reassembled */
    int32_t ids[] = {2, 238 + 0xE6, 238 + 0x97, 238 + 0xA5, 1};
    char small[3];
    CHECK_EQ_INT(gemma3_tokenizer_decode(tok, ids, 5, small, sizeof small), 3);
    CHECK(strcmp(small, "\xE6\x97") == 0);
    CHECK_EQ_INT(gemma3_tokenizer_decode(tok, ids, 5, text, sizeof text), 3);
    CHECK(strcmp(text, "\xE6\x97\xA5") == 0);
    int32_t oob[] = {5, 262144};
    CHECK_EQ_INT(gemma3_tokenizer_decode(tok, oob, 2, text, sizeof text), GEMMA3_ERR_ARG);

    /* streaming: partial sequences are held, a broken one becomes U+FFFD */
    gemma3_decoder dec = {0};
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 238 + 0xE6, text, sizeof text), 0);
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 238 + 0x97, text, sizeof text), 0);
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 238 + 0xA5, text, sizeof text), 3);
    CHECK(strcmp(text, "\xE6\x97\xA5") == 0);
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 238 + 0xE6, text, sizeof text), 0);
    int32_t hello = gemma3_tokenizer_encode(tok, "A", 1, 0, ids, 1) == 1 ? ids[0] : -1;
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, hello, text, sizeof text), 4);
    CHECK(strcmp(text, "\xEF\xBF\xBD" "A") == 0);
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 238 + 0xF0, text, sizeof text), 0);
    CHECK_EQ_INT(gemma3_decoder_flush(&dec, text, sizeof text), 3);
    CHECK(strcmp(text, "\xEF\xBF\xBD") == 0);
    CHECK_EQ_INT(dec.n_pending, 0);
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 139, text, 3), GEMMA3_ERR_ARG); /* 3 spaces */
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 139, text, 4), 3);
    CHECK(strcmp(text, "   ") == 0);
    CHECK_EQ_INT(gemma3_decoder_push(tok, &dec, 2, text, 4), 0);
}

/* The chat format against chat_template.jinja rendered by hand: the rendered text, tokenized
 * with control-token parsing (as HF does with the template output), must equal chat_encode. */
static void check_chat(const gemma3_tokenizer *tok, const gemma3_chat_msg *msgs, int n, int add_bos,
                       int gen, const char *rendered) {
    int32_t got[512];
    int n_got = gemma3_chat_encode(tok, msgs, n, add_bos, gen, got, 512);
    int n_want;
    int32_t *want = encode_alloc(tok, rendered, strlen(rendered), GEMMA3_TOK_PARSE_SPECIAL, &n_want);
    int same = n_got == n_want && memcmp(got, want, (size_t)n_got * sizeof *got) == 0;
    CHECK_MSG(same, "chat encode differs from the template rendering");
    if (!same) {
        print_text(rendered, strlen(rendered));
        fputc('\n', stderr);
        print_ids("want", want, n_want);
        print_ids("got ", got, n_got < 0 ? 0 : n_got);
    }
    int bos = 0;
    for (int i = 0; i < n_got; i++) bos += got[i] == 2;
    CHECK_EQ_INT(bos, add_bos ? 1 : 0);
    free(want);
}

static void test_chat(const gemma3_tokenizer *tok) {
    gemma3_chat_msg one[] = {{"user", "Hello"}};
    /* ids written out once: <bos> <start_of_turn> "user" "\n" "Hello" <end_of_turn> "\n"
     * <start_of_turn> "model" "\n" */
    int32_t want[] = {2, 105, 2364, 107, 9259, 106, 107, 105, 4368, 107};
    int32_t got[64];
    CHECK_EQ_INT(gemma3_chat_encode(tok, one, 1, 1, 1, got, 64), 10);
    CHECK(memcmp(got, want, sizeof want) == 0);
    check_chat(tok, one, 1, 1, 1,
               "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
    check_chat(tok, one, 1, 0, 0, "<start_of_turn>user\nHello<end_of_turn>\n");

    /* the template trims message contents but not the system text */
    gemma3_chat_msg sys[] = {{"system", "You are a helpful assistant."},
                             {"user", "\t What is 2+2? \n\n"}};
    check_chat(tok, sys, 2, 1, 1,
               "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nWhat is 2+2?"
               "<end_of_turn>\n<start_of_turn>model\n");
    gemma3_chat_msg sys_ws[] = {{"system", "  Be terse.\n"}, {"user", "Hi "}};
    check_chat(tok, sys_ws, 2, 1, 0,
               "<bos><start_of_turn>user\n  Be terse.\n\n\nHi<end_of_turn>\n");
    gemma3_chat_msg sys_only[] = {{"system", "ignored"}};
    check_chat(tok, sys_only, 1, 1, 1, "<bos><start_of_turn>model\n");

    gemma3_chat_msg multi[] = {{"system", "Be brief."},
                               {"user", "Hi"},
                               {"assistant", " Hello! How can I help?  "},
                               {"user", "Write   code:\n```c\nint x;\n```"},
                               {"model", "Done."}};
    check_chat(tok, multi, 5, 1, 0,
               "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
               "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n"
               "<start_of_turn>user\nWrite   code:\n```c\nint x;\n```<end_of_turn>\n"
               "<start_of_turn>model\nDone.<end_of_turn>\n");
    check_chat(tok, multi + 1, 2, 0, 1,
               "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
               "Hello! How can I help?<end_of_turn>\n<start_of_turn>model\n");

    /* an empty system prompt still adds its blank line ("\n\n\n" is one piece); Python's
     * whitespace (U+3000, U+00A0) is trimmed from contents */
    gemma3_chat_msg empty_sys[] = {{"system", ""}, {"user", "\xC2\xA0Hi\u3000"}};
    check_chat(tok, empty_sys, 2, 1, 1,
               "<bos><start_of_turn>user\n\n\nHi<end_of_turn>\n<start_of_turn>model\n");
    check_chat(tok, NULL, 0, 1, 1, "<bos><start_of_turn>model\n");

    /* a user cannot type control tokens; user-defined markers are pieces of the vocabulary */
    gemma3_chat_msg sneaky[] = {{"user", "a<eos>b<bos>"}};
    int n = gemma3_chat_encode(tok, sneaky, 1, 1, 0, got, 64);
    int controls = 0;
    for (int i = 1; i < n; i++) controls += got[i] <= 2;
    CHECK(n > 0 && controls == 0);

    /* role order */
    gemma3_chat_msg uu[] = {{"user", "a"}, {"user", "b"}};
    gemma3_chat_msg m1[] = {{"model", "a"}};
    gemma3_chat_msg us[] = {{"user", "a"}, {"system", "b"}};
    gemma3_chat_msg odd[] = {{"tool", "a"}};
    gemma3_chat_msg null_content[] = {{"user", NULL}};
    CHECK_EQ_INT(gemma3_chat_encode(tok, uu, 2, 1, 1, got, 64), GEMMA3_ERR_ARG);
    CHECK(strstr(gemma3_last_error(), "alternate") != NULL);
    CHECK_EQ_INT(gemma3_chat_encode(tok, m1, 1, 1, 1, got, 64), GEMMA3_ERR_ARG);
    CHECK_EQ_INT(gemma3_chat_encode(tok, us, 2, 1, 1, got, 64), GEMMA3_ERR_ARG);
    CHECK_EQ_INT(gemma3_chat_encode(tok, odd, 1, 1, 1, got, 64), GEMMA3_ERR_ARG);
    CHECK_EQ_INT(gemma3_chat_encode(tok, null_content, 1, 1, 1, got, 64), GEMMA3_ERR_ARG);
    /* short buffer: the full count comes back */
    CHECK_EQ_INT(gemma3_chat_encode(tok, one, 1, 1, 1, got, 3), 10);
}

/* ---- tiny hand-built models ---------------------------------------------------------------- */

typedef struct {
    uint8_t b[8192];
    size_t n;
} pbuf;

static void put_varint(pbuf *p, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        p->b[p->n++] = c | (v ? 0x80 : 0);
    } while (v);
}
static void put_key(pbuf *p, int field, int wire) { put_varint(p, (uint64_t)(field << 3 | wire)); }
static void put_bytes(pbuf *p, int field, const void *d, size_t n) {
    put_key(p, field, 2);
    put_varint(p, n);
    memcpy(p->b + p->n, d, n);
    p->n += n;
}
static void put_piece(pbuf *p, const char *s, float score, int type) {
    pbuf m = {.n = 0};
    put_bytes(&m, 1, s, strlen(s));
    put_key(&m, 2, 5);
    memcpy(m.b + m.n, &score, 4);
    m.n += 4;
    if (type != 1) {
        put_key(&m, 3, 0);
        put_varint(&m, (uint64_t)type);
    }
    put_bytes(p, 1, m.b, m.n);
}

/* A small BPE model: <unk>, <s>, </s>, a few letters and merges; options vary per test. */
typedef struct {
    int model_type, byte_fallback, dummy_prefix, remove_ws, unused_ab, bad_type;
    const char *charsmap_name;
} tiny_opts;

static void tiny_model(pbuf *p, tiny_opts o) {
    p->n = 0;
    put_piece(p, "<unk>", 0, 2);
    put_piece(p, "<s>", 0, 3);
    put_piece(p, "</s>", 0, 3);
    put_piece(p, "<|x|>", 0, o.bad_type ? 9 : 4);
    const char *pieces[] = {"a", "b", "c", "\xE2\x96\x81", "ab", "bc", "aa", "abc", "\xE2\x96\x81\x61"};
    float scores[] = {-1, -2, -3, -4, -6, -5, -7, -8, -9};
    for (int i = 0; i < 9; i++)
        put_piece(p, pieces[i], scores[i], (o.unused_ab && i == 4) ? 5 : 1);
    if (o.byte_fallback)
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            put_piece(p, name, 0, 6);
        }
    pbuf t = {.n = 0};
    put_key(&t, 3, 0);
    put_varint(&t, (uint64_t)o.model_type);
    put_key(&t, 35, 0);
    put_varint(&t, (uint64_t)o.byte_fallback);
    put_key(&t, 40, 0);
    put_varint(&t, 0);
    put_key(&t, 41, 0);
    put_varint(&t, 1);
    put_key(&t, 42, 0);
    put_varint(&t, 2);
    put_key(&t, 43, 0);
    put_varint(&t, (uint64_t)-1); /* pad_id = -1: a 10-byte varint */
    put_bytes(p, 2, t.b, t.n);
    pbuf nm = {.n = 0};
    if (o.charsmap_name) {
        put_bytes(&nm, 1, o.charsmap_name, strlen(o.charsmap_name));
        put_bytes(&nm, 2, "\x01\x02\x03\x04", 4);
    }
    put_key(&nm, 3, 0);
    put_varint(&nm, (uint64_t)o.dummy_prefix);
    put_key(&nm, 4, 0);
    put_varint(&nm, (uint64_t)o.remove_ws);
    put_key(&nm, 5, 0);
    put_varint(&nm, 1);
    put_key(&nm, 99, 1); /* an unknown fixed64 field is skipped */
    for (int i = 0; i < 8; i++) nm.b[nm.n++] = 0;
    put_bytes(p, 3, nm.b, nm.n);
}

static int load_err(const uint8_t *b, size_t n, const char *want_msg) {
    gemma3_tokenizer *t = (gemma3_tokenizer *)1;
    int rc = g3_tokenizer_load_buffer(b, n, "tiny.model", &t);
    int ok = rc < 0 && t == NULL && strstr(gemma3_last_error(), want_msg) != NULL &&
             strstr(gemma3_last_error(), "tiny.model") != NULL;
    if (!ok) fprintf(stderr, "  load gave %d '%s', expected '%s'\n", rc, gemma3_last_error(), want_msg);
    return ok;
}

static void test_tiny_models(void) {
    pbuf p;
    gemma3_tokenizer *t;
    tiny_opts base = {.model_type = 2};
    tiny_model(&p, base);
    CHECK_EQ_INT(g3_tokenizer_load_buffer(p.b, p.n, "tiny.model", &t), GEMMA3_OK);
    if (t) {
        /* highest score wins: "aab" -> "a" + "ab" (ab=-6 beats aa=-7); "aaa" -> the leftmost
         * "aa" + "a"; unknown 'd' -> <unk> without byte fallback; "▁a▁▁a" is the words
         * "▁a" and "▁▁a" (no dummy prefix, no whitespace removal) */
        int32_t w1[] = {4, 8}, w2[] = {10, 4}, w3[] = {4, 0, 0, 5}, w4[] = {12, 7, 12};
        CHECK(encode_eq(t, "aab", 0, w1, 2));
        CHECK(encode_eq(t, "aaa", 0, w2, 2));
        CHECK(encode_eq(t, "addb", 0, w3, 4));
        CHECK(encode_eq(t, " a  a", 0, w4, 3));
        int32_t w5[] = {11};
        CHECK(encode_eq(t, "abc", 0, w5, 1));
        int32_t w6[] = {3};
        CHECK(encode_eq(t, "<|x|>", 0, w6, 1));
        int32_t w7[] = {0, 0, 0};
        CHECK(encode_eq(t, "<s>", 0, w7, 3)); /* '<', 's', '>' are unknown here */
        int32_t w8[] = {1};
        CHECK(encode_eq(t, "<s>", GEMMA3_TOK_PARSE_SPECIAL, w8, 1));
        CHECK_EQ_INT(gemma3_tokenizer_special(t, GEMMA3_SPECIAL_PAD), -1);
        CHECK_EQ_INT(gemma3_tokenizer_special(t, GEMMA3_SPECIAL_START_OF_TURN), -1);
        int32_t ids[] = {0, 4, 9};
        char text[32];
        CHECK_EQ_INT(gemma3_tokenizer_decode(t, ids, 3, text, sizeof text), 8);
        CHECK(strcmp(text, " \xE2\x81\x87 abc") == 0);
        gemma3_chat_msg m[] = {{"user", "a"}};
        int32_t out[8];
        CHECK_EQ_INT(gemma3_chat_encode(t, m, 1, 1, 1, out, 8), GEMMA3_ERR_UNSUPPORTED);
        gemma3_tokenizer_free(t);
    }

    /* dummy prefix + whitespace removal, and the decoder drops the prefix again */
    tiny_opts sp = base;
    sp.dummy_prefix = sp.remove_ws = 1;
    tiny_model(&p, sp);
    CHECK_EQ_INT(g3_tokenizer_load_buffer(p.b, p.n, "tiny.model", &t), GEMMA3_OK);
    if (t) {
        int32_t w[] = {12, 12};
        CHECK(encode_eq(t, "  a   a ", 0, w, 2));
        char text[32];
        CHECK_EQ_INT(gemma3_tokenizer_decode(t, w, 2, text, sizeof text), 3);
        CHECK(strcmp(text, "a a") == 0);
        gemma3_tokenizer_free(t);
    }

    /* an UNUSED piece is never output: a merge into "ab" is split again */
    tiny_opts un = base;
    un.unused_ab = 1;
    tiny_model(&p, un);
    CHECK_EQ_INT(g3_tokenizer_load_buffer(p.b, p.n, "tiny.model", &t), GEMMA3_OK);
    if (t) {
        int32_t w1[] = {4, 5}, w2[] = {4, 5, 10};
        CHECK(encode_eq(t, "ab", 0, w1, 2));
        CHECK(encode_eq(t, "abaa", 0, w2, 3));
        gemma3_tokenizer_free(t);
    }

    /* byte fallback */
    tiny_opts bf = base;
    bf.byte_fallback = 1;
    tiny_model(&p, bf);
    CHECK_EQ_INT(g3_tokenizer_load_buffer(p.b, p.n, "tiny.model", &t), GEMMA3_OK);
    if (t) {
        int32_t w[] = {4, 13 + 0xC3, 13 + 0xA9};
        CHECK(encode_eq(t, "a\xC3\xA9", 0, w, 3));
        char text[16];
        CHECK_EQ_INT(gemma3_tokenizer_decode(t, w, 3, text, sizeof text), 3);
        CHECK(strcmp(text, "a\xC3\xA9") == 0);
        gemma3_tokenizer_free(t);
    }

    /* malformed and unsupported files: each a clear error naming the file */
    tiny_model(&p, base);
    CHECK(load_err(p.b, 0, "empty"));
    for (size_t cut = 1; cut < p.n; cut++) { /* every truncation fails cleanly or still loads */
        t = NULL;
        int rc = g3_tokenizer_load_buffer(p.b, cut, "tiny.model", &t);
        CHECK_MSG(rc == GEMMA3_OK || (t == NULL && strstr(gemma3_last_error(), "tiny.model")),
                  "cut %zu: rc %d", cut, rc);
        gemma3_tokenizer_free(t);
    }
    CHECK(load_err(p.b, 2, "runs past the end"));
    uint8_t varint[] = {0x0a, 0x80};
    CHECK(load_err(varint, sizeof varint, "truncated varint"));
    uint8_t long_varint[] = {0x78, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    CHECK(load_err(long_varint, sizeof long_varint, "longer than 10 bytes"));
    uint8_t past[] = {0x0a, 0x7f, 0x0a, 0x01, 'a'};
    CHECK(load_err(past, sizeof past, "runs past the end"));
    uint8_t group[] = {0x0b, 0x0c};
    CHECK(load_err(group, sizeof group, "wire type"));

    pbuf q = {.n = 0};
    pbuf tr = {.n = 0};
    put_key(&tr, 3, 0);
    put_varint(&tr, 2);
    put_bytes(&q, 2, tr.b, tr.n);
    CHECK(load_err(q.b, q.n, "no pieces"));

    tiny_opts bt = base;
    bt.bad_type = 1;
    tiny_model(&p, bt);
    CHECK(load_err(p.b, p.n, "bad type 9"));
    tiny_opts ug = base;
    ug.model_type = 1;
    tiny_model(&p, ug);
    CHECK(load_err(p.b, p.n, "UNIGRAM"));
    CHECK_EQ_INT(g3_tokenizer_load_buffer(p.b, p.n, "tiny.model", &t), GEMMA3_ERR_UNSUPPORTED);
    tiny_opts cm = base;
    cm.charsmap_name = "nmt_nfkc";
    tiny_model(&p, cm);
    CHECK(load_err(p.b, p.n, "nmt_nfkc"));
    cm.charsmap_name = "identity";
    tiny_model(&p, cm);
    CHECK_EQ_INT(g3_tokenizer_load_buffer(p.b, p.n, "tiny.model", &t), GEMMA3_OK);
    gemma3_tokenizer_free(t);

    q.n = 0; /* duplicate piece */
    put_piece(&q, "<unk>", 0, 2);
    put_piece(&q, "a", 0, 1);
    put_piece(&q, "a", 0, 1);
    put_bytes(&q, 2, tr.b, tr.n);
    CHECK(load_err(q.b, q.n, "duplicates"));
    q.n = 0; /* byte fallback without byte pieces */
    put_piece(&q, "<unk>", 0, 2);
    put_piece(&q, "a", 0, 1);
    pbuf tr2 = tr;
    put_key(&tr2, 35, 0);
    put_varint(&tr2, 1);
    put_bytes(&q, 2, tr2.b, tr2.n);
    CHECK(load_err(q.b, q.n, "<0x00> is missing"));
    q.n = 0; /* no unknown piece */
    put_piece(&q, "a", 0, 1);
    put_bytes(&q, 2, tr.b, tr.n);
    CHECK(load_err(q.b, q.n, "no UNKNOWN piece"));

    /* random garbage never crashes; whatever loads must encode */
    uint64_t s = 0x243F6A8885A308D3ull;
    for (int i = 0; i < 2000; i++) {
        uint8_t g[64];
        size_t n = 1 + (size_t)(i % 64);
        for (size_t k = 0; k < n; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            g[k] = (uint8_t)(s >> 56);
        }
        t = NULL;
        int rc = g3_tokenizer_load_buffer(g, n, "garbage", &t);
        CHECK_MSG(rc < 0 && t == NULL && gemma3_last_error()[0], "garbage %d loaded", i);
        gemma3_tokenizer_free(t);
    }
    CHECK_EQ_INT(gemma3_tokenizer_load("tests/data/no-such.model", &t), GEMMA3_ERR_IO);
    CHECK(strstr(gemma3_last_error(), "no-such.model") != NULL);
}

int main(void) {
    test_tiny_models();
    gemma3_tokenizer *tok = NULL;
    double t0 = g3_now();
    int rc = gemma3_tokenizer_load(MODEL_PATH, &tok);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    if (rc != GEMMA3_OK) return check_report();
    printf("loaded %s in %.1f ms\n", MODEL_PATH, (g3_now() - t0) * 1e3);
    test_specials_and_flags(tok);
    test_chat(tok);
    test_public_cases(tok);
    gemma3_tokenizer_free(tok);
    return check_report();
}
