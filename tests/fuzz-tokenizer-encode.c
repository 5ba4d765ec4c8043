/* fuzz-tokenizer-encode.c - libFuzzer target: arbitrary bytes through encode/decode with the real
 * Gemma 3 vocabulary (models/tokenizer.model, loaded once; run from the repository root).
 * Invariants: ids in range; decode(encode(x)) == x for valid UTF-8 without U+2581 (control-token
 * text is not parsed by default, so it round-trips too); the streaming decoder gives the same
 * bytes as decode and only complete UTF-8; encode is deterministic. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"

static gemma3_tokenizer *tok;

static void check(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz-tokenizer-encode: invariant broken: %s\n", what);
        abort();
    }
}

static int valid_utf8(const uint8_t *u, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                                   : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (!len || i + len > n) return 0;
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (len > 1 && (u[i + 1] < lo || u[i + 1] > hi)) return 0;
        for (size_t k = 2; k < len; k++)
            if ((u[i + k] & 0xC0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (gemma3_tokenizer_load("models/tokenizer.model", &tok) != GEMMA3_OK) {
        fprintf(stderr, "fuzz-tokenizer-encode: %s\n", gemma3_last_error());
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    int n_vocab = gemma3_tokenizer_vocab_size(tok);
    int n = gemma3_tokenizer_encode(tok, text, size, 0, NULL, 0);
    check(n >= 0 && (size_t)n <= size, "count");
    int32_t *ids = malloc((size_t)n * sizeof *ids + 4), *again = malloc((size_t)n * sizeof *ids + 4);
    check(gemma3_tokenizer_encode(tok, text, size, 0, ids, n) == n, "second call same count");
    check(gemma3_tokenizer_encode(tok, text, size, 0, again, n) == n &&
              memcmp(ids, again, (size_t)n * sizeof *ids) == 0, "deterministic");
    for (int i = 0; i < n; i++) check(ids[i] >= 0 && ids[i] < n_vocab, "id in range");
    int special = gemma3_tokenizer_encode(tok, text, size, GEMMA3_TOK_PARSE_SPECIAL, NULL, 0);
    check(special >= 0, "parse-special count");

    int len = gemma3_tokenizer_decode(tok, ids, n, NULL, 0);
    check(len >= 0, "decode length");
    char *whole = malloc((size_t)len + 1), *stream = malloc((size_t)len + 1);
    check(gemma3_tokenizer_decode(tok, ids, n, whole, (size_t)len + 1) == len, "decode");
    if (valid_utf8(data, size) && !memmem(data, size, "\xE2\x96\x81", 3))
        check((size_t)len == size && memcmp(whole, data, size) == 0, "round trip");
    check(valid_utf8((const uint8_t *)whole, (size_t)len), "decode gives valid UTF-8");
    gemma3_decoder dec = {0};
    size_t sn = 0;
    char piece[512];
    for (int i = 0; i < n; i++) {
        int w = gemma3_decoder_push(tok, &dec, ids[i], piece, sizeof piece);
        check(w >= 0 && sn + (size_t)w <= (size_t)len, "push");
        check(valid_utf8((const uint8_t *)piece, (size_t)w), "push emits complete UTF-8");
        memcpy(stream + sn, piece, (size_t)w);
        sn += (size_t)w;
    }
    int w = gemma3_decoder_flush(&dec, piece, sizeof piece);
    check(w >= 0 && sn + (size_t)w == (size_t)len, "flush");
    memcpy(stream + sn, piece, (size_t)w);
    check(memcmp(stream, whole, (size_t)len) == 0, "streaming equals decode");
    free(ids);
    free(again);
    free(whole);
    free(stream);
    return 0;
}
