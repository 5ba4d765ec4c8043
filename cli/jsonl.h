/* cli/jsonl.h - reads one string member of a JSON object line with its exact bytes, for the
 * tokenizer's JSON-lines inputs (test cases, `gemma3 tokenize --jsonl`, the benchmark).
 * cJSON cannot be used for the text itself: its strings are NUL-terminated, and test texts
 * contain "\u0000". Header-only (static functions); used by the CLI, tests and tools. */
#ifndef G3_JSONL_H
#define G3_JSONL_H

#include <stdlib.h>
#include <string.h>

static const char *jsonl_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p;
}

static int jsonl_hex4(const char *p, const char *end, unsigned *v) {
    if (end - p < 4) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = (c >= '0' && c <= '9') ? (unsigned)(c - '0')
                     : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10)
                     : (c >= 'A' && c <= 'F') ? (unsigned)(c - 'A' + 10) : 16u;
        if (d > 15) return -1;
        *v = *v * 16 + d;
    }
    return 0;
}

static size_t jsonl_put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Decodes the JSON string starting at *pp (on its opening quote). If out is not NULL it receives
 * the bytes (room for (end - *pp) bytes is enough). A lone surrogate becomes U+FFFD, as a
 * JavaScript or Python UTF-8 encoder would write it. Returns 0 and advances *pp past the closing
 * quote, or -1 on malformed input. */
static int jsonl_string(const char **pp, const char *end, char *out, size_t *len) {
    const char *p = *pp;
    size_t n = 0;
    if (p >= end || *p != '"') return -1;
    p++;
    for (;;) {
        if (p >= end) return -1;
        unsigned char c = (unsigned char)*p++;
        if (c == '"') break;
        if (c < 0x20) return -1;
        if (c != '\\') {
            if (out) out[n] = (char)c;
            n++;
            continue;
        }
        if (p >= end) return -1;
        char e = *p++;
        unsigned cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (jsonl_hex4(p, end, &cp)) return -1;
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p >= 6 && p[0] == '\\' && p[1] == 'u' && !jsonl_hex4(p + 2, end, &lo) &&
                    lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                } else {
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            break;
        default: return -1;
        }
        char tmp[4];
        size_t k = jsonl_put_utf8(tmp, cp);
        if (out) memcpy(out + n, tmp, k);
        n += k;
    }
    *pp = p;
    *len = n;
    return 0;
}

/* Skips one JSON value of any kind (strings with escapes, nested arrays/objects). */
static int jsonl_skip_value(const char **pp, const char *end) {
    const char *p = jsonl_ws(*pp, end);
    int depth = 0;
    do {
        if (p >= end) return -1;
        size_t n;
        if (*p == '"') {
            if (jsonl_string(&p, end, NULL, &n)) return -1;
        } else if (*p == '[' || *p == '{') {
            depth++;
            p++;
        } else if (*p == ']' || *p == '}') {
            if (--depth < 0) return -1;
            p++;
        } else {
            while (p < end && !strchr(",]}\"[{", *p)) p++;
        }
        p = jsonl_ws(p, end);
        if (depth > 0 && p < end && (*p == ',' || *p == ':')) p++;
    } while (depth > 0);
    *pp = p;
    return 0;
}

/* Finds the member `key` of the JSON object in line[0..n) whose value is a string, and returns
 * its bytes in a malloc'd buffer (NUL-terminated; *len excludes the NUL). Returns 0, 1 if the
 * member is absent or not a string, -1 if the line is not a JSON object (or out of memory). */
static int jsonl_get_string(const char *line, size_t n, const char *key, char **text, size_t *len) {
    const char *p = line, *end = line + n;
    *text = NULL;
    *len = 0;
    p = jsonl_ws(p, end);
    if (p >= end || *p++ != '{') return -1;
    p = jsonl_ws(p, end);
    if (p < end && *p == '}') return 1;
    for (;;) {
        const char *k = jsonl_ws(p, end);
        char kbuf[64];
        size_t klen;
        if (k >= end || *k != '"') return -1;
        const char *probe = k;
        if (jsonl_string(&probe, end, NULL, &klen)) return -1;
        int match = 0;
        if (klen < sizeof kbuf) {
            const char *again = k;
            jsonl_string(&again, end, kbuf, &klen);
            match = klen == strlen(key) && memcmp(kbuf, key, klen) == 0;
        }
        p = jsonl_ws(probe, end);
        if (p >= end || *p++ != ':') return -1;
        p = jsonl_ws(p, end);
        if (match) {
            if (p >= end || *p != '"') return 1;
            const char *q = p;
            size_t vlen;
            if (jsonl_string(&q, end, NULL, &vlen)) return -1;
            char *buf = malloc(vlen + 1);
            if (!buf) return -1;
            jsonl_string(&p, end, buf, &vlen);
            buf[vlen] = '\0';
            *text = buf;
            *len = vlen;
            return 0;
        }
        if (jsonl_skip_value(&p, end)) return -1;
        p = jsonl_ws(p, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}') return 1;
        return -1;
    }
}

#endif
