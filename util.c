/* util.c - error recording, conversions, allocation, clock, file helpers. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Thread_local char last_error[512];

int g3_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *gemma3_last_error(void) { return last_error; }

float g3_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal half: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void *g3_alloc_aligned(size_t n) {
    if (n == 0) return NULL;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (rounded < n) return NULL;
    void *p = aligned_alloc(64, rounded);
    if (p) memset(p, 0, rounded);
    return p;
}

void g3_free_aligned(void *p) { free(p); }

double g3_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int g3_read_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return g3_error(GEMMA3_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    }
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return g3_error(GEMMA3_ERR_IO, "%s: cannot read size (not a regular file?)", path);
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory reading %ld bytes", path, size);
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    int read_error = ferror(f);
    fclose(f);
    if (got != (size_t)size || read_error) {
        free(buf);
        return g3_error(GEMMA3_ERR_IO, "%s: short read (%zu of %ld bytes)", path, got, size);
    }
    buf[size] = '\0';
    *out = buf;
    *len = (size_t)size;
    return GEMMA3_OK;
}

int g3_path_join(char *buf, size_t n, const char *dir, const char *name) {
    size_t dl = strlen(dir);
    const char *sep = (dl > 0 && dir[dl - 1] == '/') ? "" : "/";
    int w = snprintf(buf, n, "%s%s%s", dir, sep, name);
    if (w < 0 || (size_t)w >= n) return g3_error(GEMMA3_ERR_ARG, "%s: path too long", dir);
    return GEMMA3_OK;
}

const char *g3_json_type_name(const cJSON *j) {
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "invalid JSON";
}

int g3_json_load(const char *path, cJSON **out) {
    *out = NULL;
    char *text;
    size_t len;
    int rc = g3_read_file(path, &text, &len);
    if (rc != GEMMA3_OK) return rc;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!*out) return g3_error(GEMMA3_ERR_FORMAT, "%s: not valid JSON", path);
    return GEMMA3_OK;
}

const char *g3_shape_str(char *buf, size_t n, const int64_t *shape, int n_dims) {
    size_t w = 0;
    buf[0] = '\0';
    w += (size_t)snprintf(buf + w, n - w, "[");
    for (int d = 0; d < n_dims && w < n; d++)
        w += (size_t)snprintf(buf + w, n - w, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (w < n) snprintf(buf + w, n - w, "]");
    return buf;
}
