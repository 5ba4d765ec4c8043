/* utf8.h - UTF-8 for the tokenizer: measuring a well-formed sequence (encode, chat) and turning
 * a byte stream into valid UTF-8 (decode), where a broken sequence becomes U+FFFD as in Python's
 * bytes.decode(errors="replace"). */
#ifndef G3_UTF8_H
#define G3_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "gemma3.h"

/* Length of the UTF-8 sequence at s (n > 0 bytes available): 1..4 for a well-formed sequence,
 * 1 for a stray byte (which then becomes a symbol of its own and falls back to its byte piece).
 * Inline: encode calls it once per character. */
static inline size_t g3_utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 1;
    if (n < len || s[1] < lo || s[1] > hi) return 1;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return len;
}

/* Output with snprintf semantics: writes what fits in buf[cap] (keeping room for the NUL) and
 * counts it all in n. A sink with cap 0 (buf may be NULL) only counts. */
typedef struct g3_sink {
    char *buf;
    size_t cap, n;
} g3_sink;

void g3_sink_put(g3_sink *o, const char *s, size_t n);
/* NUL-terminates what was written (nothing when cap is 0). */
void g3_sink_terminate(g3_sink *o);

/* Feeds one byte through the decoder's UTF-8 state: complete sequences go out, an incomplete one
 * waits in d->pending, and a sequence broken by an unexpected byte becomes one U+FFFD (then the
 * byte is looked at again as a possible start). */
void g3_utf8_push_byte(gemma3_decoder *d, unsigned char c, g3_sink *o);

/* Ends the stream: a pending incomplete sequence becomes U+FFFD; the decoder is reset. */
void g3_utf8_flush(gemma3_decoder *d, g3_sink *o);

/* Line and column (both from 1; a column counts characters, not bytes) of byte off in text:
 * where a parser's error message points. */
void g3_utf8_line_col(const char *text, size_t off, int *line, int *col);

#endif
