/* json-schema.c - a JSON schema turned into GBNF text (grammar.c then matches it), in the manner
 * of llama.cpp's json-schema-to-grammar: one rule per schema node, shared rules for the JSON
 * primitives, properties in the schema's order (required ones always, optional ones may be left
 * out), bounded repetitions for minItems/maxItems and minLength/maxLength, integer ranges digit
 * by digit, the date/time/date-time/uuid formats, $ref to #/$defs or #/definitions as a rule of
 * its own (so recursive schemas work). Keywords that would need more (pattern, other formats,
 * allOf, uniqueItems, number bounds, ...) are refused by name, never ignored: a silently wider
 * grammar would let the model print what the schema forbids. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json-schema.h"
#include "utf8.h"
#include "util.h"

#define MAX_REFS G3_JSON_SCHEMA_MAX_REFS

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_put(b, big, (size_t)n);
    free(big);
}

#define sb_lit(b, lit) sb_put(b, lit, sizeof lit - 1)

/* Bytes as the inside of a GBNF "literal". */
static void sb_literal(sbuf *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            sb_printf(b, "\\x%02X", c);
        else
            sb_put(b, s, 1);
    }
}

typedef struct {
    const cJSON *root;
    sbuf rules;
    int n_rules;
    int rc;
    struct {
        const char *ref;
        int rule;
    } refs[MAX_REFS];
    int n_refs;
    int have_name_chars; /* the rules of additional members' names are written */
} conv;

static int fail(conv *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(conv *c, int code, const char *fmt, ...) {
    if (c->rc) return -1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->rc = g3_error(code, "json-schema: %s", msg);
    return -1;
}

static const char *at(const char *path) { return path[0] ? path : "/"; }

/* The JSON primitives every converted grammar shares. */
static const char primitives[] =
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "string ::= \"\\\"\" char* \"\\\"\" ws\n"
    "integer ::= \"-\"? ([0-9] | [1-9] [0-9]{0,15}) ws\n"
    "number ::= \"-\"? ([0-9] | [1-9] [0-9]{0,15}) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "boolean ::= (\"true\" | \"false\") ws\n"
    "null ::= \"null\" ws\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\" ws\n"
    "array ::= \"[\" ws (value (\",\" ws value)*)? \"]\" ws\n";

static int visit(conv *c, const cJSON *s, const char *path);

/* A new rule number; its text is appended by the caller as "rN ::= ...\n". */
static int new_rule(conv *c) { return ++c->n_rules; }

/* "<literal JSON of v>" ws */
static int json_literal(conv *c, const cJSON *v, sbuf *out) {
    char *j = cJSON_PrintUnformatted(v);
    if (!j) return fail(c, GEMMA3_ERR_NOMEM, "out of memory");
    sb_lit(out, "\"");
    sb_literal(out, j);
    sb_lit(out, "\" ws");
    free(j);
    return 0;
}

/* A count (minItems, maxLength, ...): it becomes a repetition's bound, which the grammar caps. */
static int get_count(conv *c, const cJSON *s, const char *key, const char *path, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble > G3_GRAMMAR_MAX_REPEAT)
        return fail(c, GEMMA3_ERR_FORMAT, "%s at %s must be an integer in [0, %d]", key, at(path),
                    G3_GRAMMAR_MAX_REPEAT);
    *out = (long)v->valuedouble;
    return 1;
}

/* ITEM{min,max} as GBNF, max < 0 = unbounded. */
static void sb_repeat(sbuf *b, long min, long max) {
    if (max < 0)
        sb_printf(b, "{%ld,}", min);
    else
        sb_printf(b, "{%ld,%ld}", min, max);
}

static const char *const annotations[] = {
    "title",      "description", "$schema",   "$id",   "$comment",    "default", "examples",
    "deprecated", "readOnly",    "writeOnly", "$defs", "definitions", NULL};

/* Every keyword of s must be one this converter honours (or an annotation). */
static int check_keywords(conv *c, const cJSON *s, const char *path, const char *const *known) {
    for (const cJSON *k = s->child; k; k = k->next) {
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++) ok = strcmp(k->string, known[i]) == 0;
        for (int i = 0; annotations[i] && !ok; i++) ok = strcmp(k->string, annotations[i]) == 0;
        if (!ok)
            return fail(c, GEMMA3_ERR_UNSUPPORTED, "'%s' at %s is not supported", k->string,
                        at(path));
    }
    return 0;
}

/* String formats as grammars of their own (RFC 3339 dates and times, RFC 4122 UUIDs). */
static const struct {
    const char *name, *gbnf;
} formats[] = {
    {"date",
     "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])"},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" ([0-5] [0-9] | \"60\") (\".\" "
             "[0-9]{1,9})? "
             "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
    {"date-time", NULL}, /* date "T" time */
    {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
             "[0-9a-fA-F]{12}"},
};

static int string_rule(conv *c, const cJSON *s, const char *path, sbuf *out) {
    long min = 0, max = -1;
    int has_min = get_count(c, s, "minLength", path, &min);
    int has_max = get_count(c, s, "maxLength", path, &max);
    if (has_min < 0 || has_max < 0) return -1;
    if (has_max && max < min)
        return fail(c, GEMMA3_ERR_FORMAT, "maxLength %ld below minLength %ld at %s", max, min,
                    at(path));
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (fmt) {
        if (!cJSON_IsString(fmt))
            return fail(c, GEMMA3_ERR_FORMAT, "format at %s must be a string", at(path));
        if (has_min || has_max)
            return fail(c, GEMMA3_ERR_UNSUPPORTED,
                        "format with minLength/maxLength at %s is not "
                        "supported",
                        at(path));
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
            if (strcmp(fmt->valuestring, formats[i].name) != 0) continue;
            if (formats[i].gbnf)
                sb_printf(out, "\"\\\"\" %s \"\\\"\" ws", formats[i].gbnf);
            else
                sb_printf(out, "\"\\\"\" %s \"T\" %s \"\\\"\" ws", formats[0].gbnf,
                          formats[1].gbnf);
            return 0;
        }
        return fail(c, GEMMA3_ERR_UNSUPPORTED,
                    "format '%s' at %s is not supported (date, time, "
                    "date-time and uuid are)",
                    fmt->valuestring, at(path));
    }
    if (!has_min && !has_max) {
        sb_lit(out, "string");
        return 0;
    }
    sb_lit(out, "\"\\\"\" char");
    sb_repeat(out, min, has_max ? max : -1);
    sb_lit(out, " \"\\\"\" ws");
    return 0;
}

/* ---- integer ranges ---------------------------------------------------------------------------
 * The decimal strings of [lo, hi] as alternatives, digit by digit (no leading zeros), as
 * llama.cpp's converter does: a range of one length splits at its first digit into the part that
 * shares lo's first digit, whole middle digits, and the part that shares hi's. */

static int all_digits(const char *s, int n, char d) {
    for (int i = 0; i < n; i++)
        if (s[i] != d) return 0;
    return 1;
}

/* x..y, two digit strings of length n (leading zeros allowed), x <= y. */
static void digit_range(sbuf *out, const char *x, const char *y, int n) {
    if (n == 0) return;
    if (memcmp(x, y, (size_t)n) == 0) {
        sb_printf(out, "\"%.*s\"", n, x);
        return;
    }
    if (x[0] == y[0]) {
        sb_printf(out, "\"%c\" ", x[0]);
        digit_range(out, x + 1, y + 1, n - 1);
        return;
    }
    int xz = all_digits(x + 1, n - 1, '0'), y9 = all_digits(y + 1, n - 1, '9');
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    int lo_mid = xz ? x[0] : x[0] + 1, hi_mid = y9 ? y[0] : y[0] - 1, alts = 0;
    sb_lit(out, "(");
    if (!xz) {
        sb_printf(out, "\"%c\" ", x[0]);
        digit_range(out, x + 1, nines, n - 1);
        alts++;
    }
    if (lo_mid <= hi_mid) {
        sb_printf(out, "%s[%c-%c]", alts++ ? " | " : "", lo_mid, hi_mid);
        if (n > 1) sb_printf(out, " [0-9]{%d}", n - 1);
    }
    if (!y9) {
        sb_printf(out, "%s\"%c\" ", alts++ ? " | " : "", y[0]);
        digit_range(out, zeros, y + 1, n - 1);
    }
    sb_lit(out, ")");
}

static int n_digits(long long v) {
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Alternatives for lo..hi, 0 <= lo, hi < 0 meaning unbounded (up to 16 digits, as `integer`). */
static void nonneg_range(sbuf *out, long long lo, long long hi, int *n_alts) {
    int dlo = n_digits(lo), dhi = hi < 0 ? 16 : n_digits(hi);
    long long p10 = 1;
    for (int d = 1; d < dlo; d++) p10 *= 10;
    for (int d = dlo; d <= dhi; d++, p10 *= 10) {
        if (*n_alts) sb_lit(out, " | ");
        if (hi < 0 && d > dlo) { /* every longer number */
            sb_printf(out, "[1-9] [0-9]{%d,15}", d - 1);
            (*n_alts)++;
            return;
        }
        long long a = d == 1 ? 0 : p10, b = p10 * 10 - 1;
        if (a < lo) a = lo;
        if (hi >= 0 && b > hi) b = hi;
        char xs[48], ys[48]; /* d <= 16 */
        snprintf(xs, sizeof xs, "%0*lld", d & 31, a);
        snprintf(ys, sizeof ys, "%0*lld", d & 31, b);
        digit_range(out, xs, ys, d);
        (*n_alts)++;
    }
}

/* A bound of an integer: minimum/maximum, or exclusiveMinimum/exclusiveMaximum (numbers);
 * 1 if present, 0 if not, -1 on error. */
static int int_bound(conv *c, const cJSON *s, const char *path, int upper, long long *out) {
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(s, upper ? "maximum" : "minimum");
    const cJSON *exc =
        cJSON_GetObjectItemCaseSensitive(s, upper ? "exclusiveMaximum" : "exclusiveMinimum");
    int found = 0;
    for (int k = 0; k < 2; k++) {
        const cJSON *v = k ? exc : inc;
        if (!v) continue;
        if (!cJSON_IsNumber(v) || fabs(v->valuedouble) > 1e15)
            return fail(c, GEMMA3_ERR_UNSUPPORTED, "%s at %s must be a number within +-1e15",
                        v->string, at(path));
        double x = v->valuedouble;
        long long b = upper ? (long long)(k ? ceil(x) - 1 : floor(x))
                            : (long long)(k ? floor(x) + 1 : ceil(x));
        if (!found || (upper ? b < *out : b > *out)) *out = b;
        found = 1;
    }
    return found;
}

static int integer_rule(conv *c, const cJSON *s, const char *path, sbuf *out) {
    long long a = 0, z = 0;
    int has_a = int_bound(c, s, path, 0, &a), has_z = int_bound(c, s, path, 1, &z);
    if (has_a < 0 || has_z < 0) return -1;
    if (!has_a && !has_z) {
        sb_lit(out, "integer");
        return 0;
    }
    if (has_a && has_z && z < a)
        return fail(c, GEMMA3_ERR_UNSUPPORTED, "no integer lies within the bounds at %s", at(path));
    int n_alts = 0;
    sb_lit(out, "(");
    if (!has_a || a < 0) { /* the negative part: "-" then |v| in [max(1, -z), -a] */
        sb_lit(out, "\"-\" (");
        int n_neg = 0;
        nonneg_range(out, has_z && z < 0 ? -z : 1, has_a ? -a : -1, &n_neg);
        sb_lit(out, ")");
        n_alts++;
    }
    if (!has_z || z >= 0) nonneg_range(out, has_a && a > 0 ? a : 0, has_z ? z : -1, &n_alts);
    sb_lit(out, ") ws");
    return 0;
}

/* "\"key\"" ws ":" ws VALUE as the text of a sequence. */
static int key_value(conv *c, const char *key, int value_rule, sbuf *out) {
    cJSON *k = cJSON_CreateString(key);
    if (!k) return fail(c, GEMMA3_ERR_NOMEM, "out of memory");
    char *j = cJSON_PrintUnformatted(k);
    cJSON_Delete(k);
    if (!j) return fail(c, GEMMA3_ERR_NOMEM, "out of memory");
    sb_lit(out, "\"");
    sb_literal(out, j);
    sb_printf(out, "\" ws \":\" ws r%d", value_rule);
    free(j);
    return 0;
}

/* ---- additional members' names -------------------------------------------------------------
 * additionalProperties covers the names that properties does not declare: an additional member
 * named like a declared one would let a document through whose declared member has the wrong
 * type (or comes twice). JSON compares names after their escapes are decoded, and "a" can be
 * spelled "\u0061", so an additional member's name is written in one spelling only, cJSON's
 * (characters as themselves, \" \\ \b \f \n \r \t, \u00xx for the other control characters;
 * no DEL): then it decodes to a declared name exactly when it is spelled as one, and the rules
 * below, a trie of the declared spellings, leave those out. */
static const char name_chars[] =
    "kchar ::= [^\"\\\\\\x7F\\x00-\\x1F] | kesc\n"
    "kesc ::= \"\\\\\" ([\"\\\\bfnrt] | \"u00\" (\"0\" [0-7bef] | \"1\" [0-9a-f]))\n";

/* The one spelling of name (decoded UTF-8) an additional member may use, malloc'd; NULL for a
 * name no such spelling reaches (a DEL) and on OOM (*oom set). */
static char *name_spelling(const char *name, int *oom) {
    sbuf b = {0};
    sb_put(&b, "", 0);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        const char *esc = strchr("\"\\\b\f\n\r\t", *p);
        if (*p == 0x7F) {
            free(b.buf);
            return NULL;
        }
        if (esc) sb_printf(&b, "\\%c", "\"\\bfnrt"[esc - "\"\\\b\f\n\r\t"]);
        else if (*p < 0x20) sb_printf(&b, "\\u%04x", *p);
        else sb_put(&b, (const char *)p, 1);
    }
    if (b.oom) {
        free(b.buf);
        *oom = 1;
        return NULL;
    }
    return b.buf;
}

/* Bytes of the character (a spelling unit) at s: an escape, or one UTF-8 sequence. */
static size_t unit_len(const char *s) {
    if (s[0] == '\\') return s[1] == 'u' ? 6 : 2;
    return g3_utf8_len((const unsigned char *)s, strlen(s));
}

/* The code point of the UTF-8 sequence s of n bytes. */
static uint32_t unit_code_point(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 1) return u[0];
    uint32_t cp = u[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++) cp = cp << 6 | (u[i] & 0x3F);
    return cp;
}

/* A name character other than the next units of names[lo..hi) at byte d: "kchar" with those
 * characters taken out of its class, or its escapes listed without those. */
static void other_char(sbuf *out, char **names, int lo, int hi, size_t d) {
    static const char *const escapes[] = {
        "\\\"", "\\\\", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0000", "\\u0001", "\\u0002",
        "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007", "\\u000b", "\\u000e", "\\u000f",
        "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
        "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f"};
    int any_escape = 0;
    sb_lit(out, "([^\"\\\\\\x7F\\x00-\\x1F");
    for (int i = lo; i < hi; i++) {
        const char *u = names[i] + d;
        size_t n = unit_len(u);
        if (u[0] == '\\') any_escape = 1;
        else sb_printf(out, "\\U%08X", (unsigned)unit_code_point(u, n));
    }
    sb_lit(out, "]");
    if (!any_escape) {
        sb_lit(out, " | kesc)");
        return;
    }
    for (size_t e = 0; e < sizeof escapes / sizeof escapes[0]; e++) {
        int taken = 0;
        for (int i = lo; i < hi && !taken; i++)
            taken = strncmp(names[i] + d, escapes[e], strlen(escapes[e])) == 0;
        if (taken) continue;
        sb_lit(out, " | \"");
        sb_literal(out, escapes[e]);
        sb_lit(out, "\"");
    }
    sb_lit(out, ")");
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* One node of the trie: names[lo..hi) share their first d bytes; rule r is the rest of a name
 * that began so: the closing quote unless one of them ends here, a character none of them
 * continues with then any, or one that some continue with then their rest (a node of its own,
 * pushed on the stack: a long name is no deep recursion). */
typedef struct name_node {
    int lo, hi, rule;
    size_t d;
} name_node;

static int name_node_rule(conv *c, char **names, const name_node *nd, name_node *stack, int *top) {
    sbuf body = {0};
    int lo = nd->lo;
    if (names[lo][nd->d] == '\0') lo++; /* sorted: the name that ends here comes first */
    else sb_lit(&body, "\"\\\"\" | ");
    other_char(&body, names, lo, nd->hi, nd->d);
    sb_lit(&body, " kchar* \"\\\"\"");
    for (int i = lo; i < nd->hi;) {
        size_t n = unit_len(names[i] + nd->d);
        int j = i + 1;
        while (j < nd->hi && strncmp(names[j] + nd->d, names[i] + nd->d, n) == 0) j++;
        name_node child = {i, j, new_rule(c), nd->d + n};
        char unit[8];
        snprintf(unit, sizeof unit, "%.*s", (int)n, names[i] + nd->d);
        sb_lit(&body, " | \"");
        sb_literal(&body, unit);
        sb_printf(&body, "\" r%d", child.rule);
        stack[(*top)++] = child;
        i = j;
    }
    sb_printf(&c->rules, "r%d ::= %s\n", nd->rule, body.buf ? body.buf : "");
    int oom = body.oom;
    free(body.buf);
    return oom ? fail(c, GEMMA3_ERR_NOMEM, "out of memory") : 0;
}

/* The rule of an additional member's name ("\"" ... "\"" ws) for an object whose properties
 * are props: any name but theirs. Returns the rule number, or -1. */
static int extra_name_rule(conv *c, const cJSON *props) {
    int n = 0, k = 0, oom = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) n++;
    char **names = malloc((size_t)(n > 0 ? n : 1) * sizeof *names);
    name_node *stack = NULL;
    size_t total = 1;
    if (!names) return fail(c, GEMMA3_ERR_NOMEM, "out of memory");
    for (const cJSON *p = props ? props->child : NULL; p && !oom; p = p->next) {
        char *s = name_spelling(p->string, &oom);
        if (s) names[k++] = s, total += strlen(s) + 1;
    }
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    int m = 0; /* distinct */
    for (int i = 0; i < k; i++) {
        if (m && strcmp(names[m - 1], names[i]) == 0) free(names[i]);
        else names[m++] = names[i];
    }
    if (!c->have_name_chars) sb_lit(&c->rules, name_chars);
    c->have_name_chars = 1;
    int r = new_rule(c), root = new_rule(c), top = 0;
    sb_printf(&c->rules, "r%d ::= \"\\\"\" r%d ws\n", r, root);
    if (!oom) stack = malloc(total * sizeof *stack); /* at most one node per byte, and the root */
    if (oom || !stack) r = fail(c, GEMMA3_ERR_NOMEM, "out of memory");
    else stack[top++] = (name_node){0, m, root, 0};
    while (r >= 0 && top > 0) {
        name_node nd = stack[--top];
        if (m == 0) { /* nothing declared: any name */
            sb_printf(&c->rules, "r%d ::= kchar* \"\\\"\"\n", nd.rule);
            continue;
        }
        if (name_node_rule(c, names, &nd, stack, &top) < 0) r = -1;
    }
    for (int i = 0; i < m; i++) free(names[i]);
    free(names);
    free(stack);
    return r;
}

/* Properties in order; T(i, first): the members from i on, "first" = none written yet (no
 * comma before the next). Optional members may be skipped, required ones not; additional
 * members (additionalProperties) come after them, under names none of them has. */
static int object_rule(conv *c, const cJSON *s, const char *path, sbuf *out) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props))
        return fail(c, GEMMA3_ERR_FORMAT, "properties at %s must be an object", at(path));
    if (req && !cJSON_IsArray(req))
        return fail(c, GEMMA3_ERR_FORMAT, "required at %s must be an array", at(path));
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (!cJSON_IsString(r) || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return fail(c, GEMMA3_ERR_UNSUPPORTED,
                        "required at %s names '%s', which is not in properties", at(path),
                        cJSON_IsString(r) ? r->valuestring : "?");
    if (!props && !add) {
        sb_lit(out, "object");
        return 0;
    }
    int n = cJSON_GetArraySize(props);
    int extra = -1; /* rule of additional members' values, -1 none */
    if (add && !cJSON_IsFalse(add)) {
        char p[1024];
        snprintf(p, sizeof p, "%s/additionalProperties", path);
        extra = cJSON_IsTrue(add) ? 0 : visit(c, add, p);
        if (extra < 0) return -1;
    }
    int base = c->n_rules + 1;
    c->n_rules += 2 * (n + 1); /* T(i, first) = r(base + 2i + first) */
    sbuf *R = &c->rules;
    if (extra >= 0) {
        char v[32];
        if (extra == 0)
            snprintf(v, sizeof v, "value");
        else
            snprintf(v, sizeof v, "r%d", extra);
        char key[32] = "string"; /* any name, when none is declared */
        int kr = n > 0 ? extra_name_rule(c, props) : 0;
        if (kr < 0) return -1;
        if (kr > 0) snprintf(key, sizeof key, "r%d", kr);
        sb_printf(R, "r%d ::= (%s \":\" ws %s (\",\" ws %s \":\" ws %s)*)?\n",
                  base + 2 * n + 1, key, v, key, v);
        sb_printf(R, "r%d ::= (\",\" ws %s \":\" ws %s)*\n", base + 2 * n, key, v);
    } else {
        sb_printf(R, "r%d ::= \"\"\nr%d ::= \"\"\n", base + 2 * n + 1, base + 2 * n);
    }
    int i = n - 1;
    const cJSON **items = malloc((size_t)(n > 0 ? n : 1) * sizeof *items);
    if (!items) return fail(c, GEMMA3_ERR_NOMEM, "out of memory");
    int k = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) items[k++] = p;
    for (; i >= 0; i--) {
        const cJSON *p = items[i];
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/properties/%s", path, p->string);
        int vr = visit(c, p, sub);
        if (vr < 0) break;
        int required = 0;
        for (const cJSON *r = req ? req->child : NULL; r && !required; r = r->next)
            required = strcmp(r->valuestring, p->string) == 0;
        int next0 = base + 2 * (i + 1), next1 = next0 + 1;
        sbuf kv = {0};
        if (key_value(c, p->string, vr, &kv) < 0) {
            free(kv.buf);
            break;
        }
        /* T(i, first) */
        sb_printf(R, "r%d ::= %s r%d", base + 2 * i + 1, kv.buf ? kv.buf : "", next0);
        if (!required) sb_printf(R, " | r%d", next1);
        sb_printf(R, "\n");
        /* T(i, not first) */
        sb_printf(R, "r%d ::= \",\" ws %s r%d", base + 2 * i, kv.buf ? kv.buf : "", next0);
        if (!required) sb_printf(R, " | r%d", next0);
        sb_printf(R, "\n");
        free(kv.buf);
    }
    free(items);
    if (i >= 0) return -1;
    sb_printf(out, "\"{\" ws r%d \"}\" ws", base + 1);
    return 0;
}

static int array_rule(conv *c, const cJSON *s, const char *path, sbuf *out) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    long min = 0, max = -1;
    int has_min = get_count(c, s, "minItems", path, &min);
    int has_max = get_count(c, s, "maxItems", path, &max);
    if (has_min < 0 || has_max < 0) return -1;
    if (has_max && max < min)
        return fail(c, GEMMA3_ERR_FORMAT, "maxItems %ld below minItems %ld at %s", max, min,
                    at(path));
    char p[1024];
    if (prefix) {
        if (!cJSON_IsArray(prefix) || cJSON_GetArraySize(prefix) == 0)
            return fail(c, GEMMA3_ERR_FORMAT, "prefixItems at %s must be a non-empty array",
                        at(path));
        if (has_min || has_max || (items && !cJSON_IsFalse(items)))
            return fail(c, GEMMA3_ERR_UNSUPPORTED,
                        "prefixItems at %s is supported alone or with items: false", at(path));
        sb_lit(out, "\"[\" ws");
        int i = 0;
        for (const cJSON *e = prefix->child; e; e = e->next, i++) {
            snprintf(p, sizeof p, "%s/prefixItems/%d", path, i);
            int r = visit(c, e, p);
            if (r < 0) return -1;
            sb_printf(out, "%s r%d", i ? " \",\" ws" : "", r);
        }
        sb_lit(out, " \"]\" ws");
        return 0;
    }
    int item = 0;
    if (items && !cJSON_IsTrue(items)) {
        snprintf(p, sizeof p, "%s/items", path);
        if ((item = visit(c, items, p)) < 0) return -1;
    }
    if (!has_min && !has_max && item == 0) {
        sb_lit(out, "array");
        return 0;
    }
    char it[32];
    if (item)
        snprintf(it, sizeof it, "r%d", item);
    else
        snprintf(it, sizeof it, "value");
    if (max == 0) {
        sb_lit(out, "\"[\" ws \"]\" ws");
        return 0;
    }
    sb_printf(out, "\"[\" ws %s%s (\",\" ws %s)", min == 0 ? "(" : "", it, it);
    sb_repeat(out, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
    sb_printf(out, "%s \"]\" ws", min == 0 ? ")?" : "");
    return 0;
}

/* The rule of one type name with the schema's keywords for it. */
static int typed_rule(conv *c, const cJSON *s, const char *type, const char *path, sbuf *out) {
    if (strcmp(type, "string") == 0) return string_rule(c, s, path, out);
    if (strcmp(type, "integer") == 0) return integer_rule(c, s, path, out);
    if (strcmp(type, "number") == 0) {
        if (cJSON_GetObjectItemCaseSensitive(s, "minimum") ||
            cJSON_GetObjectItemCaseSensitive(s, "maximum") ||
            cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum") ||
            cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum"))
            return fail(c, GEMMA3_ERR_UNSUPPORTED,
                        "minimum/maximum of a number at %s is not "
                        "supported (only of an integer)",
                        at(path));
        sb_lit(out, "number");
        return 0;
    }
    if (strcmp(type, "boolean") == 0) {
        sb_lit(out, "boolean");
        return 0;
    }
    if (strcmp(type, "null") == 0) {
        sb_lit(out, "null");
        return 0;
    }
    if (strcmp(type, "object") == 0) return object_rule(c, s, path, out);
    if (strcmp(type, "array") == 0) return array_rule(c, s, path, out);
    return fail(c, GEMMA3_ERR_FORMAT, "unknown type '%s' at %s", type, at(path));
}

/* A $ref: its rule, made once (recursion refers to the number before the body is written). */
static int visit_ref(conv *c, const char *ref, const char *path) {
    for (int i = 0; i < c->n_refs; i++)
        if (strcmp(c->refs[i].ref, ref) == 0) return c->refs[i].rule;
    const char *name = NULL;
    const cJSON *defs = NULL;
    if (strncmp(ref, "#/$defs/", 8) == 0) {
        defs = cJSON_GetObjectItemCaseSensitive(c->root, "$defs");
        name = ref + 8;
    } else if (strncmp(ref, "#/definitions/", 14) == 0) {
        defs = cJSON_GetObjectItemCaseSensitive(c->root, "definitions");
        name = ref + 14;
    } else {
        return fail(c, GEMMA3_ERR_UNSUPPORTED,
                    "$ref '%s' at %s: only #/$defs/NAME and #/definitions/NAME are supported", ref,
                    at(path));
    }
    const cJSON *target = defs ? cJSON_GetObjectItemCaseSensitive(defs, name) : NULL;
    if (!target)
        return fail(c, GEMMA3_ERR_FORMAT, "$ref '%s' at %s names no definition", ref, at(path));
    if (c->n_refs == MAX_REFS)
        return fail(c, GEMMA3_ERR_UNSUPPORTED, "more than %d $refs", MAX_REFS);
    int r = new_rule(c);
    c->refs[c->n_refs].ref = ref;
    c->refs[c->n_refs++].rule = r;
    char p[1024];
    snprintf(p, sizeof p, "%s", ref + 1);
    int body = visit(c, target, p);
    if (body < 0) return -1;
    sb_printf(&c->rules, "r%d ::= r%d\n", r, body);
    return r;
}

/* A $ref: alone, or with annotations only. */
static int visit_ref_keyword(conv *c, const cJSON *s, const cJSON *ref, const char *path) {
    if (!cJSON_IsString(ref))
        return fail(c, GEMMA3_ERR_FORMAT, "$ref at %s must be a string", at(path));
    if (s->child->next || s->child != ref) { /* $ref alongside other keywords */
        for (const cJSON *k = s->child; k; k = k->next) {
            int ann = k == ref;
            for (int i = 0; annotations[i] && !ann; i++)
                ann = strcmp(k->string, annotations[i]) == 0;
            if (!ann)
                return fail(c, GEMMA3_ERR_UNSUPPORTED, "'%s' beside $ref at %s is not supported",
                            k->string, at(path));
        }
    }
    return visit_ref(c, ref->valuestring, path);
}

/* enum: its literals as alternatives. */
static int enum_body(conv *c, const cJSON *en, const char *path, sbuf *body) {
    if (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0)
        return fail(c, GEMMA3_ERR_FORMAT, "enum at %s must be a non-empty array", at(path));
    int rc = 0;
    for (const cJSON *e = en->child; e && !rc; e = e->next) {
        if (e != en->child) sb_lit(body, " | ");
        rc = json_literal(c, e, body);
    }
    return rc;
}

/* anyOf / oneOf (kw): a rule per branch, as alternatives. */
static int any_body(conv *c, const cJSON *any, const char *kw, const char *path, sbuf *body) {
    if (!cJSON_IsArray(any) || cJSON_GetArraySize(any) == 0)
        return fail(c, GEMMA3_ERR_FORMAT, "%s at %s must be a non-empty array", kw, at(path));
    int i = 0;
    char p[1024];
    for (const cJSON *e = any->child; e; e = e->next, i++) {
        snprintf(p, sizeof p, "%s/%s/%d", path, kw, i);
        int r = visit(c, e, p);
        if (r < 0) return -1;
        sb_printf(body, "%sr%d", i ? " | " : "", r);
    }
    return 0;
}

/* "type": [...]: each type's rule in parentheses, as alternatives. */
static int type_list_body(conv *c, const cJSON *s, const cJSON *type, const char *path,
                          sbuf *body) {
    int i = 0, rc = 0;
    for (const cJSON *t = type->child; t && !rc; t = t->next, i++) {
        if (!cJSON_IsString(t))
            return fail(c, GEMMA3_ERR_FORMAT, "type at %s must list strings", at(path));
        if (i) sb_lit(body, " | ");
        sb_lit(body, "(");
        rc = typed_rule(c, s, t->valuestring, path, body);
        sb_lit(body, ")");
    }
    if (i == 0 && !rc) rc = fail(c, GEMMA3_ERR_FORMAT, "type at %s is an empty list", at(path));
    return rc;
}

/* The body of schema s's rule, by the keyword that decides it (const, enum, anyOf/oneOf, type,
 * then what properties or items imply); 0 or -1. */
static int schema_body(conv *c, const cJSON *s, const char *path, sbuf *body) {
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const char *kw = any ? "anyOf" : "oneOf";
    if (!any) any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cst) return json_literal(c, cst, body);
    if (en) return enum_body(c, en, path, body);
    if (any) return any_body(c, any, kw, path, body);
    if (cJSON_IsArray(type)) return type_list_body(c, s, type, path, body);
    if (type) {
        if (!cJSON_IsString(type))
            return fail(c, GEMMA3_ERR_FORMAT, "type at %s must be a string or a list", at(path));
        return typed_rule(c, s, type->valuestring, path, body);
    }
    if (cJSON_GetObjectItemCaseSensitive(s, "properties") ||
        cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
        return object_rule(c, s, path, body);
    if (cJSON_GetObjectItemCaseSensitive(s, "items") ||
        cJSON_GetObjectItemCaseSensitive(s, "prefixItems"))
        return array_rule(c, s, path, body);
    sb_lit(body, "value");
    return 0;
}

/* The rule (its number) matching schema s; -1 on error (c->rc). */
static int visit(conv *c, const cJSON *s, const char *path) {
    if (c->rc) return -1;
    if (cJSON_IsTrue(s)) {
        int r = new_rule(c);
        sb_printf(&c->rules, "r%d ::= value\n", r);
        return r;
    }
    if (cJSON_IsFalse(s))
        return fail(c, GEMMA3_ERR_UNSUPPORTED, "the schema false at %s matches nothing", at(path));
    if (!cJSON_IsObject(s))
        return fail(c, GEMMA3_ERR_FORMAT, "a schema at %s must be an object or a boolean, not %s",
                    at(path), g3_json_type_name(s));
    static const char *const known[] = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "items",
        "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "format", "anyOf", "oneOf", "$ref", NULL};
    if (check_keywords(c, s, path, known)) return -1;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) return visit_ref_keyword(c, s, ref, path);
    sbuf body = {0};
    int rc = schema_body(c, s, path, &body);
    if (rc || c->rc) {
        free(body.buf);
        return -1;
    }
    if (body.oom) {
        free(body.buf);
        return fail(c, GEMMA3_ERR_NOMEM, "out of memory");
    }
    int r = new_rule(c);
    sb_printf(&c->rules, "r%d ::= %s\n", r, body.buf ? body.buf : "");
    free(body.buf);
    return r;
}

int gemma3_json_schema_to_grammar(const char *schema, size_t len, char **gbnf) {
    if (!gbnf) return g3_error(GEMMA3_ERR_ARG, "json-schema: NULL out pointer");
    *gbnf = NULL;
    if (!schema) return g3_error(GEMMA3_ERR_ARG, "json-schema: NULL schema");
    for (size_t i = 0; i < len;) { /* cJSON takes any bytes in strings; a grammar needs text */
        size_t n = g3_utf8_len((const unsigned char *)schema + i, len - i);
        if (n == 1 && (unsigned char)schema[i] >= 0x80) {
            int line, col;
            g3_utf8_line_col(schema, i, &line, &col);
            return g3_error(GEMMA3_ERR_FORMAT,
                            "json-schema:%d:%d: expected UTF-8 text (byte 0x%02X)", line, col,
                            (unsigned char)schema[i]);
        }
        i += n;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
    if (!root) {
        size_t off = end && end >= schema && end <= schema + len ? (size_t)(end - schema) : 0;
        int line, col;
        g3_utf8_line_col(schema, off, &line, &col);
        return g3_error(GEMMA3_ERR_FORMAT, "json-schema:%d:%d: expected valid JSON here", line,
                        col);
    }
    size_t used = end ? (size_t)(end - schema) : len;
    while (used < len && (schema[used] == ' ' || schema[used] == '\n' || schema[used] == '\t' ||
                          schema[used] == '\r'))
        used++;
    if (used < len) {
        int line, col;
        g3_utf8_line_col(schema, used, &line, &col);
        cJSON_Delete(root);
        return g3_error(GEMMA3_ERR_FORMAT, "json-schema:%d:%d: expected the end of the schema",
                        line, col);
    }
    conv c;
    memset(&c, 0, sizeof c);
    c.root = root;
    int r = visit(&c, root, "");
    if (r >= 0) sb_printf(&c.rules, "root ::= r%d\n%s", r, primitives);
    cJSON_Delete(root);
    if (r < 0 || c.rules.oom) {
        free(c.rules.buf);
        return c.rc ? c.rc : g3_error(GEMMA3_ERR_NOMEM, "json-schema: out of memory");
    }
    *gbnf = c.rules.buf;
    return GEMMA3_OK;
}
