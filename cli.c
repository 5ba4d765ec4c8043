/* cli.c - flag parsing and error printing shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vprint_error(const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* keep the contract of one line even if a message embeds a newline */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "gemma3: %s\n", msg);
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

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_usage_error("%s: missing value", argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

int cli_parse_int(const char *flag, const char *val, long min, long max, int *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end != '\0' || v < min || v > max || v < INT_MIN || v > INT_MAX)
        return cli_usage_error("%s: '%s' is not an integer in [%ld, %ld]", flag, val, min, max);
    *out = (int)v;
    return 0;
}

int cli_parse_float(const char *flag, const char *val, double min, double max, float *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end != '\0' || isnan(v) || v < min || v > max)
        return cli_usage_error("%s: '%s' is not a number in [%g, %g]", flag, val, min, max);
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
        if (errno || end == p || v < 0 || v > max_id || (*end != ',' && *end != '\0')) {
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
