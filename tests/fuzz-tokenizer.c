/* fuzz-tokenizer.c - libFuzzer target for the tokenizer.model (protobuf) reader. Any input must
 * either load or fail with a message; a model that loads must then encode, decode, stream-decode
 * and chat-encode a few fixed texts without crashing, and keep the decode invariants.
 * Seeds: tests/fuzz-seeds/fuzz-tokenizer/ (tiny hand-built models). Build and run: make fuzz. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"
#include "tokenizer.h"

static void check(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz-tokenizer: invariant broken: %s\n", what);
        abort();
    }
}

static const char *const texts[] = {
    "", "abc aab", " a  a\n\n\t<s></s><|x|>", "\xE2\x96\x81" "a>\xE2\x96\x81<", "caf\xC3\xA9 \xF0\x9F\x99\x82",
    "a\xff\xc3(\xe2\x82 \xf0\x9f\x98", "<unk><0x41>",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gemma3_tokenizer *tok = NULL;
    int rc = g3_tokenizer_load_buffer(data, size, "fuzz.model", &tok);
    if (rc != GEMMA3_OK) {
        check(tok == NULL && gemma3_last_error()[0] != '\0', "failed load leaves a message");
        return 0;
    }
    int n_vocab = gemma3_tokenizer_vocab_size(tok);
    check(n_vocab > 0, "vocab size");
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        for (int flags = 0; flags < 4; flags++) {
            int32_t ids[256];
            int n = gemma3_tokenizer_encode(tok, texts[i], strlen(texts[i]), flags, ids, 256);
            if (n < 0) continue; /* e.g. BOS requested but the model has none */
            check(n <= 256, "short texts give few ids");
            for (int k = 0; k < n; k++) check(ids[k] >= 0 && ids[k] < n_vocab, "id in range");
            char whole[4096], piece[4096], stream[8192];
            int len = gemma3_tokenizer_decode(tok, ids, n, whole, sizeof whole);
            check(len >= 0, "decode");
            gemma3_decoder dec = {0};
            size_t sn = 0;
            for (int k = 0; k < n; k++) {
                int w = gemma3_decoder_push(tok, &dec, ids[k], piece, sizeof piece);
                if (w < 0) break; /* a piece longer than the buffer */
                if (sn + (size_t)w < sizeof stream) memcpy(stream + sn, piece, (size_t)w);
                sn += (size_t)w;
            }
            int w = gemma3_decoder_flush(&dec, piece, sizeof piece);
            check(w >= 0, "flush");
            if (sn + (size_t)w < sizeof stream) memcpy(stream + sn, piece, (size_t)w);
            sn += (size_t)w;
            if ((size_t)len < sizeof whole && sn == (size_t)len)
                check(memcmp(stream, whole, sn) == 0, "streaming decode equals decode");
        }
    }
    gemma3_chat_msg msgs[] = {{"system", " s "}, {"user", "abc"}, {"assistant", "a b"}};
    int32_t ids[256];
    gemma3_chat_encode(tok, msgs, 3, 1, 1, ids, 256);
    for (int32_t id = -1; id <= n_vocab && id < 300; id++) gemma3_tokenizer_piece(tok, id);
    for (int s = 0; s < 6; s++) gemma3_tokenizer_special(tok, (enum gemma3_special)s);
    gemma3_tokenizer_free(tok);
    return 0;
}
