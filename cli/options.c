/* cli/options.c - error lines, strict number parsing, and the table-driven option parser and
 * --help printer the subcommands share. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char last_error[1024];

int cli_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

int cli_lib(int rc) {
    if (rc < 0) snprintf(last_error, sizeof last_error, "%s", gemma3_last_error());
    return rc;
}

const char *cli_last_error(void) { return last_error; }

/* ---- error lines ---------------------------------------------------------------------------- */

static void vprint_error(const char *fmt, va_list ap) {
    char msg[1024], shown[1100];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* one line whatever the message echoes (a flag's value, a file name, a chat line): control
     * bytes are escaped, never passed to the terminal */
    fprintf(stderr, "gemma3: %s\n", cli_escape(msg, strlen(msg), shown, sizeof shown));
}

int cli_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint_error(fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint_error(fmt, ap);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

const char *cli_escape(const char *s, size_t len, char *buf, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        char one[8];
        if (ch == '\n') snprintf(one, sizeof one, "\\n");
        else if (ch == '\t') snprintf(one, sizeof one, "\\t");
        else if (ch == '\r') snprintf(one, sizeof one, "\\r");
        else if (ch == '\\') snprintf(one, sizeof one, "\\\\");
        else if (ch < 0x20 || ch == 0x7f) snprintf(one, sizeof one, "\\x%02x", ch);
        else one[0] = (char)ch, one[1] = '\0';
        size_t k = strlen(one);
        if (w + k + 4 > n) { /* room for "..." and the NUL */
            memcpy(buf + w, "...", 4);
            return buf;
        }
        memcpy(buf + w, one, k);
        w += k;
    }
    buf[w] = '\0';
    return buf;
}

/* ---- numbers -------------------------------------------------------------------------------- */

/* "[0, 100]", "[0, 2147483647]", "[0, inf)". */
static const char *range_text(char *buf, size_t n, double min, double max) {
    char lo[32], hi[32];
    if (isinf(min)) snprintf(lo, sizeof lo, "(-inf");
    else snprintf(lo, sizeof lo, "[%.10g", min);
    if (isinf(max)) snprintf(hi, sizeof hi, "inf)");
    else snprintf(hi, sizeof hi, "%.10g]", max);
    snprintf(buf, n, "%s, %s", lo, hi);
    return buf;
}

/* strtol and strtod skip leading white space; a value must be the number and nothing else. */
static int starts_blank(const char *val) { return isspace((unsigned char)val[0]) != 0; }

int cli_parse_int(const char *flag, const char *val, double min, double max, int *out) {
    char *end, range[80];
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || starts_blank(val) || *end != '\0' || v < min || v > max || v < INT_MIN || v > INT_MAX)
        return cli_usage_error("%s: '%s' is not an integer in %s", flag, val,
                               range_text(range, sizeof range, min, max));
    *out = (int)v;
    return 0;
}

int cli_parse_float(const char *flag, const char *val, double min, double max, float *out) {
    char *end, range[80];
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || starts_blank(val) || *end != '\0' || !isfinite(v) || v < min || v > max)
        return cli_usage_error("%s: '%s' is not a number in %s", flag, val,
                               range_text(range, sizeof range, min, max));
    *out = (float)v;
    return 0;
}

int cli_parse_ids(const char *flag, const char *val, int max_id, int32_t **ids, int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    size_t cap = 1;
    for (const char *p = val; *p; p++) cap += (*p == ',');
    int32_t *out = malloc(cap * sizeof *out);
    if (!out) return cli_fail("%s: out of memory", flag);
    int n = 0;
    const char *p = val;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || starts_blank(p) || v < 0 || v > max_id || (*end != ',' && *end != '\0')) {
            free(out);
            return cli_usage_error("%s: '%s' is not a comma-separated list of ids in [0, %d]", flag,
                                   val, max_id);
        }
        out[n++] = (int32_t)v;
        if (*end == '\0') break;
        p = end + 1;
    }
    *ids = out;
    *n_ids = n;
    return 0;
}

/* ---- option tables -------------------------------------------------------------------------- */

/* Is arg one of the ", "-separated spellings in names? */
static int spelled(const char *names, const char *arg) {
    size_t len = strlen(arg);
    for (const char *p = names; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, arg, n) == 0) return 1;
        if (!end) break;
        p = end + 1;
        while (*p == ' ') p++;
    }
    return 0;
}

static void *field(void *group, size_t offset) { return (char *)group + offset; }

/* "a|b|c" -> "a, b, c", for messages. */
static const char *listed(const char *choices, char *buf, size_t n) {
    size_t w = 0;
    for (const char *p = choices; *p && w + 3 < n; p++) {
        if (*p == '|') {
            buf[w++] = ',';
            buf[w++] = ' ';
        } else {
            buf[w++] = *p;
        }
    }
    buf[w] = '\0';
    return buf;
}

static int parse_choice(const char *flag, const char *val, const char *choices, int *out) {
    size_t len = strlen(val);
    int index = 0;
    for (const char *p = choices;; index++) {
        size_t n = strcspn(p, "|");
        if (n == len && strncmp(p, val, n) == 0) {
            *out = index;
            return 0;
        }
        if (p[n] == '\0') break;
        p += n + 1;
    }
    char buf[256];
    return cli_usage_error("%s: '%s' is not one of %s", flag, val, listed(choices, buf, sizeof buf));
}

static int parse_sampler_field(const char *flag, const char *val, void *group, size_t offset) {
    const gemma3_param_range *r = gemma3_sampler_param_range(offset);
    if (!r) return cli_usage_error("%s: no such sampler parameter", flag);
    if (r->is_int) return cli_parse_int(flag, val, r->min, r->max, field(group, offset));
    return cli_parse_float(flag, val, r->min, r->max, field(group, offset));
}

/* Stores the value of option o (val: its argument, NULL for a switch) into group. */
static int apply_option(const cli_option *o, const char *flag, const char *val, void *group) {
    switch (o->kind) {
    case CLI_SWITCH:
        if (o->offset != CLI_NOWHERE) *(int *)field(group, o->offset) = o->value;
        return 0;
    case CLI_INT: return cli_parse_int(flag, val, o->min, o->max, field(group, o->offset));
    case CLI_FLOAT: return cli_parse_float(flag, val, o->min, o->max, field(group, o->offset));
    case CLI_TEXT: *(const char **)field(group, o->offset) = val; return 0;
    case CLI_CHOICE: return parse_choice(flag, val, o->choices, field(group, o->offset));
    case CLI_SAMPLER: return parse_sampler_field(flag, val, group, o->offset);
    case CLI_CUSTOM: return o->parse(flag, val, group);
    }
    return cli_usage_error("%s: unhandled option kind", flag);
}

int cli_parse_option(const cli_group *g, int argc, char **argv, int *i, void *dst, int *matched) {
    const char *arg = argv[*i];
    *matched = 0;
    for (size_t k = 0; k < g->n_options; k++) {
        const cli_option *o = &g->options[k];
        if (!spelled(o->names, arg)) continue;
        *matched = 1;
        const char *val = NULL;
        int absent = *i + 1 >= argc || (o->optional_value && argv[*i + 1][0] == '-');
        if (o->value_name && absent && !o->optional_value) return cli_usage_error("%s: missing value", arg);
        if (o->value_name && !absent) val = argv[++*i];
        int rc = apply_option(o, arg, val, dst);
        if (rc == 0 && o->given_bit && g->given_offset != CLI_NOWHERE)
            *(unsigned *)field(dst, g->given_offset) |= o->given_bit;
        return rc;
    }
    return 0;
}

/* Edits (insert, delete, replace, swap two neighbours) from a to b, for "did you mean". */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

static int shadowed(const cli_command *cmd, int group, const cli_option *o);

/* The spelling of the command's options nearest to arg, into buf, or "" when none is within two
 * edits (and closer than half its length). */
static const char *nearest_spelling(const cli_command *cmd, const char *arg, char *buf, size_t n) {
    size_t best = 3;
    buf[0] = '\0';
    for (int g = 0; cmd->groups[g]; g++)
        for (size_t k = 0; k < cmd->groups[g]->n_options; k++) {
            const cli_option *o = &cmd->groups[g]->options[k];
            if (shadowed(cmd, g, o)) continue;
            for (const char *p = o->names; *p;) {
                char one[64];
                size_t len = strcspn(p, ",");
                snprintf(one, sizeof one, "%.*s", (int)len, p);
                size_t d = edit_distance(arg, one);
                if (d < best && 2 * d < strlen(one)) {
                    best = d;
                    snprintf(buf, n, "%s", one);
                }
                p += len;
                while (*p == ',' || *p == ' ') p++;
            }
        }
    return buf;
}

static int unknown_flag(const cli_command *cmd, const char *arg) {
    char msg[512], near[64];
    snprintf(msg, sizeof msg, cmd->unknown, arg);
    if (*nearest_spelling(cmd, arg, near, sizeof near))
        return cli_usage_error("%s; did you mean %s?", msg, near);
    return cli_usage_error("%s", msg);
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *const *dst, int *status) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            cli_print_help(cmd, dst, stdout);
            *status = 0;
            return 1;
        }
        int matched = 0;
        for (int g = 0; cmd->groups[g] && !matched; g++) {
            int rc = cli_parse_option(cmd->groups[g], argc, argv, &i, dst[g], &matched);
            if (rc) {
                *status = rc;
                return 1;
            }
        }
        if (!matched) {
            *status = unknown_flag(cmd, argv[i]);
            return 1;
        }
    }
    return 0;
}

/* ---- --help --------------------------------------------------------------------------------- */

/* The default an option shows in --help, read from the destination before parsing. */
static void default_text(const cli_option *o, const void *group, char *buf, size_t n) {
    buf[0] = '\0';
    if (o->default_text) {
        snprintf(buf, n, "%s", o->default_text);
        return;
    }
    if (o->offset == CLI_NOWHERE) return; /* group + it would point outside the group */
    const void *p = (const char *)group + o->offset;
    const gemma3_param_range *r;
    switch (o->kind) {
    case CLI_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case CLI_FLOAT: snprintf(buf, n, "%g", (double)*(const float *)p); break;
    case CLI_SAMPLER:
        r = gemma3_sampler_param_range(o->offset);
        if (r && r->is_int) snprintf(buf, n, "%d", *(const int *)p);
        else if (r) snprintf(buf, n, "%g", (double)*(const float *)p);
        break;
    case CLI_CHOICE: {
        const char *c = o->choices;
        for (int index = *(const int *)p; index > 0 && c; index--)
            if ((c = strchr(c, '|'))) c++;
        if (c) snprintf(buf, n, "%.*s", (int)strcspn(c, "|"), c);
        break;
    }
    default: break;
    }
}

/* The first spelling of names ("-t" of "-t, --threads"), into buf. */
static const char *first_spelling(const char *names, char *buf, size_t n) {
    snprintf(buf, n, "%.*s", (int)strcspn(names, ","), names);
    return buf;
}

/* An option of a later group that an earlier group's option takes first (bench's -t LIST over
 * the model group's -t N) is neither parsed nor shown. */
static int shadowed(const cli_command *cmd, int group, const cli_option *o) {
    char first[64];
    first_spelling(o->names, first, sizeof first);
    for (int g = 0; g < group; g++)
        for (size_t k = 0; k < cmd->groups[g]->n_options; k++)
            if (spelled(cmd->groups[g]->options[k].names, first)) return 1;
    return 0;
}

static void print_option(const cli_option *o, const void *dst, FILE *f) {
    char left[96], def[64];
    /* a short first spelling ("-m") lines up with the long ones of other rows */
    int indent = o->names[0] == '-' && o->names[1] != '-' ? 2 : 6;
    snprintf(left, sizeof left, "%*s%s%s%s", indent, "", o->names, o->value_name ? " " : "",
             o->value_name ? o->value_name : "");
    default_text(o, dst, def, sizeof def);
    if (strlen(left) > 30) fprintf(f, "%s\n%30s", left, "");
    else fprintf(f, "%-30s", left);
    fprintf(f, " %s", o->help_fn ? o->help_fn() : o->help);
    if (def[0]) fprintf(f, " (default %s)", def);
    fputc('\n', f);
}

void cli_print_group(const cli_group *g, const void *dst, FILE *f) {
    for (size_t k = 0; k < g->n_options; k++) print_option(&g->options[k], dst, f);
}

void cli_print_help(const cli_command *cmd, void *const *dst, FILE *f) {
    fputs(cmd->usage, f);
    for (int g = 0; cmd->groups[g]; g++) {
        fprintf(f, "\n%s:\n", cmd->groups[g]->title);
        for (size_t k = 0; k < cmd->groups[g]->n_options; k++)
            if (!shadowed(cmd, g, &cmd->groups[g]->options[k]))
                print_option(&cmd->groups[g]->options[k], dst[g], f);
    }
}
