/* utf8.c - the byte-stream side of utf8.h: the sink and the repairing decoder state. */
#include "utf8.h"

#include <string.h>

void g3_sink_put(g3_sink *o, const char *s, size_t n) {
    if (o->n < o->cap) {
        size_t room = o->cap - 1 - o->n;
        memcpy(o->buf + o->n, s, n < room ? n : room);
    }
    o->n += n;
}

void g3_sink_terminate(g3_sink *o) {
    if (o->cap) o->buf[o->n < o->cap ? o->n : o->cap - 1] = '\0';
}

static const char REPLACEMENT[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */

/* Expected length of a sequence starting with lead byte c (0 if c cannot start one), and the
 * allowed range of the second byte. */
static int utf8_lead(unsigned c, unsigned *lo, unsigned *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

void g3_utf8_push_byte(gemma3_decoder *d, unsigned char c, g3_sink *o) {
    for (;;) {
        if (d->n_pending == 0) {
            unsigned lo, hi;
            int need = utf8_lead(c, &lo, &hi);
            if (need == 1) {
                g3_sink_put(o, (const char *)&c, 1);
            } else if (need == 0) {
                g3_sink_put(o, REPLACEMENT, 3);
            } else {
                d->pending[0] = c;
                d->n_pending = 1;
            }
            return;
        }
        unsigned lo, hi;
        int need = utf8_lead(d->pending[0], &lo, &hi);
        int ok = d->n_pending == 1 ? (c >= lo && c <= hi) : ((c & 0xC0) == 0x80);
        if (ok) {
            d->pending[d->n_pending++] = c;
            if (d->n_pending == need) {
                g3_sink_put(o, (const char *)d->pending, (size_t)need);
                d->n_pending = 0;
            }
            return;
        }
        g3_sink_put(o, REPLACEMENT, 3);
        d->n_pending = 0;
    }
}

void g3_utf8_flush(gemma3_decoder *d, g3_sink *o) {
    if (d->n_pending) g3_sink_put(o, REPLACEMENT, 3);
    memset(d, 0, sizeof *d);
}

void g3_utf8_line_col(const char *text, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}
