/* grammar-parse.c - GBNF text (llama.cpp's syntax and semantics) -> rules of elements (chars,
 * rule references, alternatives), with repetitions (* + ? {m,n}) and groups expanded into helper
 * rules as llama.cpp does. Errors name line:column and what was expected. Then the checks:
 * undefined rules, a missing root, productivity (alternatives that can never complete are
 * removed, and a root that can never complete is refused: after that every prefix the matcher
 * accepts can be completed) and left recursion (the matcher would loop on it).
 *
 * Everything is linear in the grammar and nothing recurses: rule names and character classes
 * are interned through hash indexes, groups are parsed with an explicit stack, the fixpoints run
 * on worklists and cycles are found as strongly connected components. */
#include "grammar-parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"
#include "grammar.h"
#include "utf8.h"
#include "util.h"

/* Records the first error, code (a GEMMA3_ERR_*), as "grammar:LINE:COLUMN: message" for the
 * source offset off; returns -1. */
static int perr_code(g3_gparser *P, int code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int perr_code(g3_gparser *P, int code, size_t off, const char *fmt, ...) {
    if (P->failed) return -1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    g3_utf8_line_col(P->src, off > P->len ? P->len : off, &line, &col);
    P->failed = g3_error(code, "grammar:%d:%d: %s", line, col, msg);
    return -1;
}
#define perr_at(P, off, ...) perr_code(P, GEMMA3_ERR_FORMAT, off, __VA_ARGS__)
#define perr(P, ...) perr_at(P, (P)->pos, __VA_ARGS__)

static int nomem(g3_gparser *P) {
    if (!P->failed) P->failed = g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    return -1;
}

/* Grows *buf (elements of size sz) to hold at least need; 0 or -1. */
int g3_grammar_grow(void **buf, int *cap, int need, size_t sz) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = realloc(*buf, (size_t)c * sz);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

static int peek(const g3_gparser *P, size_t k) {
    return P->pos + k < P->len ? (unsigned char)P->src[P->pos + k] : -1;
}

/* Spaces, tabs, comments; newlines too when newline_ok (inside parentheses, after | or ::=). */
static void skip_space(g3_gparser *P, int newline_ok) {
    for (;;) {
        int c = peek(P, 0);
        if (c == ' ' || c == '\t')
            P->pos++;
        else if (c == '#')
            while (peek(P, 0) >= 0 && peek(P, 0) != '\n' && peek(P, 0) != '\r') P->pos++;
        else if (newline_ok && (c == '\n' || c == '\r'))
            P->pos++;
        else
            return;
    }
}

static int is_word_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* ---- rules and classes, interned through open-addressing indexes --------------------------- */

static uint32_t hash_bytes(const void *p, size_t n, uint32_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h;
}

static uint32_t name_hash(const char *name, size_t n) { return hash_bytes(name, n, 2166136261u); }

static uint32_t class_hash(const void *ctx, int32_t k) {
    const g3_gparser *P = ctx;
    const g3_char_class *c = &P->cls[k];
    uint32_t h = hash_bytes(&c->negated, sizeof c->negated, 2166136261u);
    return c->n ? hash_bytes(P->rng + c->start, (size_t)c->n * sizeof *P->rng, h) : h;
}

int g3_grammar_index(const void *ctx, int first, int n, g3_index_hash hash, g3_index_keep keep,
                     uint32_t size, int32_t **table, uint32_t *mask) {
    int32_t *t = malloc((size_t)size * sizeof *t);
    if (!t) return -1;
    for (uint32_t i = 0; i < size; i++) t[i] = -1;
    for (int id = first; id < n; id++) {
        if (keep && !keep(ctx, id)) continue;
        uint32_t j = hash(ctx, id) & (size - 1);
        while (t[j] >= 0) j = (j + 1) & (size - 1);
        t[j] = id;
    }
    free(*table);
    *table = t;
    *mask = size - 1;
    return 0;
}

static uint32_t rule_name_hash(const void *ctx, int32_t r) {
    const g3_gparser *P = ctx;
    return name_hash(P->rules[r].name, strlen(P->rules[r].name));
}

static int is_named(const void *ctx, int32_t r) {
    return ((const g3_gparser *)ctx)->rules[r].ref_off != (size_t)-1;
}

/* The slot of the user's rule name[0..n) in the name index: the rule's or the empty one. */
static uint32_t name_slot(const g3_gparser *P, const char *name, size_t n) {
    uint32_t j = name_hash(name, n) & P->name_mask;
    for (int32_t r; (r = P->name_hash[j]) >= 0; j = (j + 1) & P->name_mask)
        if (strncmp(P->rules[r].name, name, n) == 0 && P->rules[r].name[n] == '\0') break;
    return j;
}

static int find_rule(const g3_gparser *P, const char *name, size_t n) {
    return P->name_hash ? P->name_hash[name_slot(P, name, n)] : -1;
}

static int add_rule(g3_gparser *P, const char *name, size_t n) {
    if (g3_grammar_grow((void **)&P->rules, &P->cap_rules, P->n_rules + 1, sizeof *P->rules))
        return nomem(P);
    g3_grule *r = &P->rules[P->n_rules];
    memset(r, 0, sizeof *r);
    r->ref_off = (size_t)-1; /* a helper until rule_id names it */
    r->name = malloc(n + 1);
    if (!r->name) return nomem(P);
    memcpy(r->name, name, n);
    r->name[n] = '\0';
    return P->n_rules++;
}

/* The user's rule named name[0..n), created (undefined) on first mention at off. */
static int rule_id(g3_gparser *P, const char *name, size_t n, size_t off) {
    if (((uint32_t)P->n_named + 1) * 2 > P->name_mask + 1 &&
        g3_grammar_index(P, 0, P->n_rules, rule_name_hash, is_named,
                         P->name_hash ? (P->name_mask + 1) * 2 : 64, &P->name_hash, &P->name_mask))
        return nomem(P);
    uint32_t j = name_slot(P, name, n);
    if (P->name_hash[j] >= 0) return P->name_hash[j];
    int r = add_rule(P, name, n);
    if (r < 0) return -1;
    P->rules[r].ref_off = off;
    P->name_hash[j] = r;
    P->n_named++;
    return r;
}

/* A helper rule for a group or repetition: "<the rule being defined>-<n>" (for messages only:
 * helpers are not in the name index, so a user's rule of the same name is another rule). */
static int new_helper(g3_gparser *P) {
    char name[256];
    int len = snprintf(name, sizeof name, "%.200s-%d", P->rules[P->defining].name, P->n_rules);
    int r = add_rule(P, name, (size_t)len);
    if (r >= 0) P->rules[r].defined = 1;
    return r;
}

static int push_el(g3_gparser *P, int rule, int type, int32_t arg) {
    if (++P->n_elems > G3_GRAMMAR_MAX_ELEMS) /* well-formed, but more than the engine expands */
        return perr_code(P, GEMMA3_ERR_UNSUPPORTED, P->pos,
                         "the grammar expands to more than %d elements (too many rules, or "
                         "repetition counts too large)",
                         G3_GRAMMAR_MAX_ELEMS);
    g3_grule *r = &P->rules[rule];
    if (g3_grammar_grow((void **)&r->el, &r->cap_el, r->n_el + 1, sizeof *r->el)) return nomem(P);
    r->el[r->n_el++] = (g3_gelem){(uint8_t)type, arg};
    return 0;
}

/* A new class; its ranges follow with add_range, then finish_class interns it. */
static int add_class(g3_gparser *P, int negated) {
    if (g3_grammar_grow((void **)&P->cls, &P->cap_cls, P->n_cls + 1, sizeof *P->cls))
        return nomem(P);
    P->cls[P->n_cls] = (g3_char_class){negated, P->n_rng, 0};
    return P->n_cls++;
}

static int add_range(g3_gparser *P, int cls, uint32_t lo, uint32_t hi) {
    if (g3_grammar_grow((void **)&P->rng, &P->cap_rng, P->n_rng + 1, sizeof *P->rng))
        return nomem(P);
    P->rng[P->n_rng++] = (g3_cp_range){lo, hi};
    P->cls[cls].n++;
    return 0;
}

static int same_class(const g3_gparser *P, int a, int b) {
    const g3_char_class *x = &P->cls[a], *y = &P->cls[b];
    return x->negated == y->negated && x->n == y->n &&
           (x->n == 0 || memcmp(P->rng + x->start, P->rng + y->start,
                                (size_t)x->n * sizeof *P->rng) == 0);
}

/* The class k (the last added), or an equal earlier one (k is then dropped): its id. */
static int finish_class(g3_gparser *P, int k) {
    if ((uint32_t)P->n_cls * 2 > P->cls_mask + 1 &&
        g3_grammar_index(P, 0, k, class_hash, NULL, P->cls_hash ? (P->cls_mask + 1) * 2 : 64,
                         &P->cls_hash, &P->cls_mask))
        return nomem(P);
    uint32_t j = class_hash(P, k) & P->cls_mask;
    for (int32_t c; (c = P->cls_hash[j]) >= 0; j = (j + 1) & P->cls_mask)
        if (same_class(P, c, k)) {
            P->n_rng = P->cls[k].start;
            P->n_cls--;
            return c;
        }
    P->cls_hash[j] = k;
    return k;
}

static int hex_value(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 character of the source. */
static int source_char(g3_gparser *P, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)P->src + P->pos;
    size_t n = P->len - P->pos;
    unsigned c = s[0];
    int len = c < 0x80                 ? 1
              : c >= 0xC2 && c <= 0xDF ? 2
              : c >= 0xE0 && c <= 0xEF ? 3
              : c >= 0xF0 && c <= 0xF4 ? 4
                                       : 0;
    if (len == 0 || (size_t)len > n) return perr(P, "invalid UTF-8 byte 0x%02X", c);
    uint32_t v = len == 1 ? c : c & (0x7Fu >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return perr(P, "invalid UTF-8 byte 0x%02X", c);
        v = v << 6 | (s[i] & 63u);
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return perr(P, "invalid UTF-8 sequence");
    P->pos += (size_t)len;
    *cp = v;
    return 0;
}

/* A character of a literal or class: an escape or one UTF-8 character. */
static int parse_char(g3_gparser *P, uint32_t *cp) {
    if (peek(P, 0) != '\\') return source_char(P, cp);
    size_t at = P->pos;
    int c = peek(P, 1);
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = hex_value(peek(P, 2 + (size_t)i));
            if (h < 0) {
                P->pos += 2 + (size_t)i;
                return perr(P, "expected %d hex digits after \\%c", digits, c);
            }
            v = v << 4 | (uint32_t)h;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return perr_at(P, at, "\\%c escape U+%X is not a Unicode scalar value", c, v);
        P->pos += 2 + (size_t)digits;
        *cp = v;
        return 0;
    }
    switch (c) {
    case 't': *cp = '\t'; break;
    case 'n': *cp = '\n'; break;
    case 'r': *cp = '\r'; break;
    case '\\':
    case '"':
    case '[':
    case ']':
    case '-':
    case '^':
    case '/': *cp = (uint32_t)c; break;
    default:
        return c < 0 ? perr(P, "expected an escape character after \\")
                     : perr(P, "unknown escape \\%c (expected one of x u U t n r \\ \" [ ] -)", c);
    }
    P->pos += 2;
    return 0;
}

/* Expands the repetition of el[start..] of rule `rule` (the last symbol) by m..n copies (n < 0:
 * unbounded), as llama.cpp: S* -> R ::= S R | e; S+ -> S S*; S? -> R ::= S | e; S{m,n} -> m
 * copies, then nested optionals. */
static int repeat_last(g3_gparser *P, int rule, int start, int m, int n) {
    int len = P->rules[rule].n_el - start;
    if (len == 0) return 0; /* "" repeated: still nothing to match */
    g3_gelem *sym = malloc((size_t)len * sizeof *sym);
    if (!sym) return nomem(P);
    memcpy(sym, P->rules[rule].el + start, (size_t)len * sizeof *sym);
    P->rules[rule].n_el = start;
    int rc = 0;
    for (int k = 0; k < m && !rc; k++)
        for (int j = 0; j < len && !rc; j++) rc = push_el(P, rule, sym[j].type, sym[j].arg);
    if (!rc && n < 0) { /* R ::= S R | e */
        int R = new_helper(P);
        rc = R < 0;
        for (int j = 0; j < len && !rc; j++) rc = push_el(P, R, sym[j].type, sym[j].arg);
        if (!rc) rc = push_el(P, R, G3_E_REF, R) || push_el(P, R, G3_E_ALT, 0) || push_el(P, R, G3_E_END, 0);
        if (!rc) rc = push_el(P, rule, G3_E_REF, R);
    } else if (!rc && n > m) { /* O_1 ::= S | e; O_k ::= S O_k-1 | e */
        int prev = -1;
        for (int k = 0; k < n - m && !rc; k++) {
            int O = new_helper(P);
            rc = O < 0;
            for (int j = 0; j < len && !rc; j++) rc = push_el(P, O, sym[j].type, sym[j].arg);
            if (!rc && prev >= 0) rc = push_el(P, O, G3_E_REF, prev);
            if (!rc) rc = push_el(P, O, G3_E_ALT, 0) || push_el(P, O, G3_E_END, 0);
            prev = O;
        }
        if (!rc) rc = push_el(P, rule, G3_E_REF, prev);
    }
    free(sym);
    return rc ? -1 : 0;
}

static int parse_int(g3_gparser *P, int *v) {
    if (!(peek(P, 0) >= '0' && peek(P, 0) <= '9')) return 0;
    long x = 0;
    while (peek(P, 0) >= '0' && peek(P, 0) <= '9') {
        x = x * 10 + (peek(P, 0) - '0');
        if (x > G3_GRAMMAR_MAX_REPEAT)
            return perr(P, "repetition count larger than %d", G3_GRAMMAR_MAX_REPEAT);
        P->pos++;
    }
    *v = (int)x;
    return 1;
}

/* {m}, {m,}, {m,n}, {,n} after a symbol. */
static int parse_braces(g3_gparser *P, int rule, int start) {
    size_t at = P->pos;
    P->pos++;
    skip_space(P, 1);
    int m = 0, n = -1, got;
    if ((got = parse_int(P, &m)) < 0) return -1;
    skip_space(P, 1);
    if (peek(P, 0) == ',') {
        P->pos++;
        skip_space(P, 1);
        if (parse_int(P, &n) < 0) return -1;
        skip_space(P, 1);
    } else {
        if (!got) return perr(P, "expected a number or ',' after '{'");
        n = m;
    }
    if (peek(P, 0) != '}') return perr(P, "expected '}' to close the repetition");
    P->pos++;
    if (n >= 0 && n < m)
        return perr_at(P, at, "repetition {%d,%d}: the maximum is below the minimum", m, n);
    return repeat_last(P, rule, start, m, n);
}


/* A "literal": a class per character. */
static int parse_literal(g3_gparser *P, int rule) {
    size_t at = P->pos++;
    while (peek(P, 0) != '"') {
        if (peek(P, 0) < 0 || peek(P, 0) == '\n')
            return perr_at(P, at, "unterminated string literal (expected a closing \")");
        uint32_t cp;
        if (parse_char(P, &cp)) return -1;
        int k = add_class(P, 0);
        if (k < 0 || add_range(P, k, cp, cp) || (k = finish_class(P, k)) < 0 ||
            push_el(P, rule, G3_E_CHAR, k))
            return -1;
    }
    P->pos++;
    return 0;
}

/* A [class] of characters and ranges, ^ negated. */
static int parse_class(g3_gparser *P, int rule) {
    size_t at = P->pos++;
    int neg = peek(P, 0) == '^';
    if (neg) P->pos++;
    int k = add_class(P, neg);
    if (k < 0) return -1;
    while (peek(P, 0) != ']') {
        if (peek(P, 0) < 0)
            return perr_at(P, at, "unterminated character class (expected a closing ])");
        uint32_t lo, hi;
        if (parse_char(P, &lo)) return -1;
        hi = lo;
        if (peek(P, 0) == '-' && peek(P, 1) != ']' && peek(P, 1) >= 0) {
            size_t range_at = P->pos;
            P->pos++;
            if (parse_char(P, &hi)) return -1;
            if (hi < lo)
                return perr_at(P, range_at, "range end U+%04X is below its start U+%04X", hi, lo);
        }
        if (add_range(P, k, lo, hi)) return -1;
    }
    P->pos++;
    return (k = finish_class(P, k)) < 0 ? -1 : push_el(P, rule, G3_E_CHAR, k);
}

/* One item that is not a group: a literal, a class, '.', or a rule name. 1 if the next
 * character starts none (the sequence ends there), 0 parsed, -1 error. */
static int parse_item(g3_gparser *P, int rule) {
    int c = peek(P, 0);
    if (c == '"') return parse_literal(P, rule);
    if (c == '[') return parse_class(P, rule);
    if (c == '.') {
        P->pos++;
        int k = add_class(P, 1);
        return k < 0 || (k = finish_class(P, k)) < 0 ? -1 : push_el(P, rule, G3_E_CHAR, k);
    }
    if (!is_word_char(c)) return 1;
    size_t s = P->pos;
    while (is_word_char(peek(P, 0))) P->pos++;
    int r = rule_id(P, P->src + s, P->pos - s, s);
    return r < 0 ? -1 : push_el(P, rule, G3_E_REF, r);
}

/* A postfix * + ? or {..} on the last symbol, which starts at element `last` (-1: none). */
static int parse_postfix(g3_gparser *P, int rule, int last) {
    int c = peek(P, 0);
    if (last < 0) return perr(P, "expected an item before '%c'", c);
    if (c == '{') return parse_braces(P, rule, last);
    P->pos++;
    return repeat_last(P, rule, last, c == '+', c == '?' ? 1 : -1);
}

/* The alternatives of `rule` up to the end of its definition. A group "(" opens a helper rule
 * and is pushed on P->groups (the rule it is in, where it starts there), ")" pops it: nesting
 * costs heap, not C stack. An alternative ends at '|', at ')' or, outside parentheses, at a
 * newline. */
static int parse_body(g3_gparser *P, int rule) {
    int depth = 0, last = -1; /* last: where the last symbol starts, for a postfix operator */
    for (;;) {
        int c = peek(P, 0), start = P->rules[rule].n_el, rc;
        if (c == '(') {
            if (g3_grammar_grow((void **)&P->groups, &P->cap_groups, 2 * depth + 2,
                                sizeof *P->groups))
                return nomem(P);
            int sub = new_helper(P);
            if (sub < 0) return -1;
            P->groups[2 * depth] = rule;
            P->groups[2 * depth++ + 1] = start;
            rule = sub;
            last = -1;
            P->pos++;
            skip_space(P, 1);
            continue;
        } else if (c == '|') {
            if (push_el(P, rule, G3_E_ALT, 0)) return -1;
            last = -1;
            P->pos++;
            skip_space(P, 1);
            continue;
        } else if (c == ')' && depth > 0) {
            int sub = rule;
            rule = P->groups[2 * --depth];
            last = P->groups[2 * depth + 1];
            P->pos++;
            if (push_el(P, sub, G3_E_END, 0) || push_el(P, rule, G3_E_REF, sub)) return -1;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (parse_postfix(P, rule, last)) return -1;
            last = -1; /* a repetition of a repetition needs parentheses, as in llama.cpp */
        } else if ((rc = parse_item(P, rule)) < 0) {
            return -1;
        } else if (rc == 0) {
            last = start;
        } else if (depth > 0) {
            return perr(P, "expected ')' to close the group");
        } else {
            return push_el(P, rule, G3_E_END, 0);
        }
        skip_space(P, depth > 0);
    }
}

static int parse_rule(g3_gparser *P) {
    size_t s = P->pos;
    if (!is_word_char(peek(P, 0))) return perr(P, "expected a rule name");
    while (is_word_char(peek(P, 0))) P->pos++;
    size_t n = P->pos - s;
    int r = rule_id(P, P->src + s, n, s);
    if (r < 0) return -1;
    if (P->rules[r].defined) {
        int line, col;
        g3_utf8_line_col(P->src, P->rules[r].def_off, &line, &col);
        return perr_at(P, s, "rule '%s' is already defined at %d:%d", P->rules[r].name, line, col);
    }
    P->rules[r].defined = 1;
    P->rules[r].def_off = s;
    P->defining = r;
    skip_space(P, 0);
    if (!(peek(P, 0) == ':' && peek(P, 1) == ':' && peek(P, 2) == '='))
        return perr(P, "expected '::=' after the rule name '%s'", P->rules[r].name);
    P->pos += 3;
    skip_space(P, 1);
    if (parse_body(P, r)) return -1;
    int c = peek(P, 0);
    if (c == '\r')
        P->pos += peek(P, 1) == '\n' ? 2 : 1;
    else if (c == '\n')
        P->pos++;
    else if (c >= 0)
        return perr(P, "expected an item, '|' or the end of the line, found '%c'", c);
    skip_space(P, 1);
    return 0;
}

/* ---- checks on the parsed rules ----------------------------------------------------------- */

/* Whether class k matches some code point: a negated class whose ranges leave a gap in
 * [0, 0x10FFFF]. scratch holds the class's ranges. */
static int cmp_range(const void *a, const void *b) {
    uint32_t x = ((const g3_cp_range *)a)->lo, y = ((const g3_cp_range *)b)->lo;
    return (x > y) - (x < y);
}

static int class_nonempty(const g3_gparser *P, int k, g3_cp_range *scratch) {
    const g3_char_class *c = &P->cls[k];
    if (!c->negated) return c->n > 0;
    if (c->n == 0) return 1; /* . */
    memcpy(scratch, P->rng + c->start, (size_t)c->n * sizeof *scratch);
    qsort(scratch, (size_t)c->n, sizeof *scratch, cmp_range);
    uint32_t next = 0; /* the first code point not covered so far */
    for (int i = 0; i < c->n && scratch[i].lo <= next; i++)
        if (scratch[i].hi + 1 > next) next = scratch[i].hi + 1;
    return next <= 0x10FFFF;
}

/* The least set of rules (in[r] = 1) with an alternative whose every element is a reference to
 * a rule of the set or a class k with char_ok[k] (char_ok NULL: no class). A worklist over the
 * references: linear in the grammar. */
static int derives(const g3_gparser *P, const uint8_t *char_ok, char *in) {
    int n = P->n_rules, n_alt = 0, n_ref = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < P->rules[r].n_el; i++) {
            int t = P->rules[r].el[i].type;
            n_alt += t == G3_E_ALT || t == G3_E_END;
            n_ref += t == G3_E_REF;
        }
    int32_t *owner = malloc(((size_t)n_alt + 1) * sizeof *owner);
    int32_t *need = malloc(((size_t)n_alt + 1) * sizeof *need);
    int32_t *first = calloc((size_t)n + 1, sizeof *first); /* references to r: uses[first[r]..] */
    int32_t *uses = malloc(((size_t)n_ref + 1) * sizeof *uses);
    int32_t *queue = malloc(((size_t)n + 1) * sizeof *queue);
    if (!owner || !need || !first || !uses || !queue) {
        free(owner), free(need), free(first), free(uses), free(queue);
        return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    }
    memset(in, 0, (size_t)n);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < P->rules[r].n_el; i++)
            if (P->rules[r].el[i].type == G3_E_REF) first[P->rules[r].el[i].arg + 1]++;
    for (int r = 0; r < n; r++) first[r + 1] += first[r];
    int a = 0, nq = 0;
    for (int r = 0; r < n; r++) {
        const g3_grule *R = &P->rules[r];
        for (int i = 0, cnt = 0, blocked = 0; i < R->n_el; i++) {
            const g3_gelem *e = &R->el[i];
            if (e->type == G3_E_REF) {
                cnt++;
                uses[first[e->arg]++] = a;
            } else if (e->type == G3_E_CHAR) {
                blocked |= !char_ok || !char_ok[e->arg];
            } else { /* the alternative a ends */
                owner[a] = r;
                need[a] = blocked ? -1 : cnt;
                if (need[a] == 0 && !in[r]) in[queue[nq++] = r] = 1;
                a++, cnt = 0, blocked = 0;
            }
        }
    }
    for (int r = n; r > 0; r--) first[r] = first[r - 1]; /* the fill moved each start to the end */
    first[0] = 0;
    for (int q = 0; q < nq; q++) {
        int y = queue[q];
        for (int32_t u = first[y]; u < first[y + 1]; u++) {
            int32_t b = uses[u];
            if (need[b] > 0 && --need[b] == 0 && !in[owner[b]]) in[queue[nq++] = owner[b]] = 1;
        }
    }
    free(owner), free(need), free(first), free(uses), free(queue);
    return GEMMA3_OK;
}

/* Productive rules (some alternative of all-productive elements derives a finite text);
 * alternatives that are not are removed. Fails if root is not productive. */
static int prune_unproductive(g3_gparser *P) {
    int n = P->n_rules;
    char *prod = malloc((size_t)n + 1);
    uint8_t *char_ok = malloc((size_t)P->n_cls + 1);
    g3_cp_range *scratch = malloc(((size_t)P->n_rng + 1) * sizeof *scratch);
    int rc = prod && char_ok && scratch ? GEMMA3_OK
                                        : g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    for (int k = 0; rc == GEMMA3_OK && k < P->n_cls; k++)
        char_ok[k] = (uint8_t)class_nonempty(P, k, scratch);
    if (rc == GEMMA3_OK) rc = derives(P, char_ok, prod);
    if (rc == GEMMA3_OK && !prod[P->root])
        rc = g3_error(GEMMA3_ERR_FORMAT,
                      "grammar: the grammar can never finish: rule 'root' matches no complete "
                      "text (every alternative needs a rule or character class that matches "
                      "nothing, or recurses forever)");
    for (int r = 0; rc == GEMMA3_OK && r < n; r++) { /* keep productive alternatives only */
        g3_grule *R = &P->rules[r];
        int w = 0, kept = 0;
        for (int s = 0; s < R->n_el;) {
            int e = s, ok = 1;
            for (; R->el[e].type != G3_E_ALT && R->el[e].type != G3_E_END; e++)
                ok &= R->el[e].type == G3_E_REF ? prod[R->el[e].arg] : char_ok[R->el[e].arg];
            if (ok) {
                if (kept++ > 0) R->el[w++] = (g3_gelem){G3_E_ALT, 0};
                memmove(R->el + w, R->el + s, (size_t)(e - s) * sizeof *R->el);
                w += e - s;
            }
            s = e + 1;
        }
        if (prod[r]) R->el[w++] = (g3_gelem){G3_E_END, 0};
        R->n_el = w; /* an unproductive rule is left empty: nothing refers to it any more */
    }
    free(prod);
    free(char_ok);
    free(scratch);
    return rc;
}

/* Strongly connected components (iterative Tarjan) of the graph whose edges from v are
 * adj[off[v] .. off[v+1]): comp[v]. */
static int components(int n, const int32_t *off, const int32_t *adj, int32_t *comp) {
    int32_t *index = malloc((size_t)n * sizeof *index), *low = malloc((size_t)n * sizeof *low);
    int32_t *stack = malloc((size_t)n * sizeof *stack), *path = malloc((size_t)n * sizeof *path);
    int32_t *edge = malloc((size_t)n * sizeof *edge);
    char *on = calloc((size_t)n, 1);
    int rc = index && low && stack && path && edge && on ? 0 : -1;
    for (int v = 0; !rc && v < n; v++) index[v] = -1;
    int next = 0, sp = 0, n_comp = 0;
    for (int root = 0; !rc && root < n; root++) {
        if (index[root] >= 0) continue;
        int depth = 0;
        path[0] = root;
        edge[0] = off[root];
        index[root] = low[root] = next++;
        stack[sp++] = root, on[root] = 1;
        while (depth >= 0) {
            int v = path[depth];
            if (edge[depth] < off[v + 1]) {
                int w = adj[edge[depth]++];
                if (index[w] < 0) { /* descend */
                    index[w] = low[w] = next++;
                    stack[sp++] = w, on[w] = 1;
                    path[++depth] = w;
                    edge[depth] = off[w];
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            if (low[v] == index[v]) { /* v roots a component: pop it */
                int w;
                do {
                    w = stack[--sp];
                    on[w] = 0;
                    comp[w] = n_comp;
                } while (w != v);
                n_comp++;
            }
            if (--depth >= 0 && low[v] < low[path[depth]]) low[path[depth]] = low[v];
        }
    }
    free(index), free(low), free(stack), free(path), free(edge), free(on);
    return rc;
}

/* The left edges x -> y: y is referenced where x can reach it before any character (every
 * reference before it in its alternative is nullable); tail[e]: nothing follows y there, so no
 * frame is pushed. CSR over rules: edges of x at off[x] .. off[x+1). */
static int32_t left_edges(const g3_gparser *P, const char *nullable, int32_t *off, int32_t *adj,
                          uint8_t *tail) {
    int32_t m = 0;
    for (int x = 0; x < P->n_rules; x++) {
        const g3_grule *X = &P->rules[x];
        off[x] = m;
        for (int t = 0; t < X->n_el;) {
            int u = t;
            for (; X->el[u].type == G3_E_REF; u++) {
                if (adj) {
                    adj[m] = X->el[u].arg;
                    tail[m] = X->el[u + 1].type == G3_E_ALT || X->el[u + 1].type == G3_E_END;
                }
                m++;
                if (!nullable[X->el[u].arg]) break;
            }
            while (X->el[u].type != G3_E_ALT && X->el[u].type != G3_E_END) u++;
            t = u + 1;
        }
    }
    off[P->n_rules] = m;
    return m;
}

/* Left recursion: a rule reaching itself before any character through a reference that is not
 * the last of its alternative (a last one is a tail call: no frame is pushed, so it cannot grow
 * the stack): a left edge that pushes a frame inside a cycle of left edges, i.e. inside one
 * strongly connected component. Such a rule would make the matcher expand forever. */
static int check_left_recursion(const g3_gparser *P) {
    int n = P->n_rules;
    char *nullable = malloc((size_t)n + 1);
    int32_t *off = malloc(((size_t)n + 1) * sizeof *off);
    int32_t *comp = malloc(((size_t)n + 1) * sizeof *comp);
    int rc = nullable && off && comp ? derives(P, NULL, nullable)
                                     : g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    int32_t m = rc == GEMMA3_OK ? left_edges(P, nullable, off, NULL, NULL) : 0;
    int32_t *adj = malloc(((size_t)m + 1) * sizeof *adj);
    uint8_t *tail = malloc((size_t)m + 1);
    if (rc == GEMMA3_OK && (!adj || !tail))
        rc = g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    if (rc == GEMMA3_OK) left_edges(P, nullable, off, adj, tail);
    if (rc == GEMMA3_OK && components(n, off, adj, comp))
        rc = g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    for (int a = 0; rc == GEMMA3_OK && a < n; a++)
        for (int32_t e = off[a]; e < off[a + 1]; e++)
            if (!tail[e] && comp[adj[e]] == comp[a]) {
                rc = g3_error(GEMMA3_ERR_FORMAT,
                              "rule '%s' is left-recursive (it can reach itself before matching "
                              "any character)",
                              P->rules[a].name);
                break;
            }
    free(nullable), free(off), free(comp), free(adj), free(tail);
    return rc;
}

/* ---- the whole parse ---------------------------------------------------------------------- */

int g3_gparse(g3_gparser *P, const char *text, size_t len) {
    memset(P, 0, sizeof *P);
    P->src = text;
    P->len = len;
    P->root = -1;
    skip_space(P, 1);
    while (P->pos < P->len && !P->failed) parse_rule(P);
    if (P->failed) return P->failed;
    for (int r = 0; r < P->n_rules; r++)
        if (!P->rules[r].defined) {
            perr_at(P, P->rules[r].ref_off, "undefined rule '%s'", P->rules[r].name);
            return P->failed;
        }
    P->root = find_rule(P, "root", 4);
    if (P->root < 0) {
        perr_at(P, P->len, "expected a rule named 'root' (the start rule)");
        return P->failed;
    }
    int rc = prune_unproductive(P);
    return rc == GEMMA3_OK ? check_left_recursion(P) : rc;
}

void g3_gparser_free(g3_gparser *P) {
    for (int r = 0; r < P->n_rules; r++) {
        free(P->rules[r].name);
        free(P->rules[r].el);
    }
    free(P->rules);
    free(P->cls);
    free(P->rng);
    free(P->name_hash);
    free(P->cls_hash);
    free(P->groups);
}
