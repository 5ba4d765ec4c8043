/* util.c - error recording, conversions, allocation, clock, file helpers. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

void *g3_reserve(size_t n) {
    if (n == 0) return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void g3_release(void *p, size_t n) {
    if (p) madvise(p, n, MADV_DONTNEED);
}

void g3_unreserve(void *p, size_t n) {
    if (p) munmap(p, n);
}

/* The index of the first NaN or infinity (all exponent bits set: EXP in the bits of a BITS
 * value) among n values of type T at x, or -1. Blocks of G3_SCAN values are tested with a
 * constant trip count of integer tests, which the compiler vectorises even at -O2; only the
 * block that holds one, and the tail, are searched element by element. */
#define G3_SCAN 256
#define FIRST_NONFINITE(name, T, BITS, EXP)                                                    \
    static int name##_bits(const T *x, size_t i) {                                             \
        BITS u;                                                                                \
        memcpy(&u, &x[i], sizeof u);                                                           \
        return (u & (EXP)) == (EXP);                                                           \
    }                                                                                          \
    int64_t name(const T *x, size_t n) {                                                       \
        size_t at = 0;                                                                         \
        for (; at + G3_SCAN <= n; at += G3_SCAN) {                                             \
            uint32_t any = 0;                                                                  \
            for (int i = 0; i < G3_SCAN; i++) any |= (uint32_t)name##_bits(x + at, (size_t)i);  \
            if (any) break;                                                                    \
        }                                                                                      \
        for (; at < n; at++)                                                                   \
            if (name##_bits(x, at)) return (int64_t)at;                                        \
        return -1;                                                                             \
    }

FIRST_NONFINITE(g3_first_nonfinite, float, uint32_t, 0x7f800000u)
FIRST_NONFINITE(g3_first_nonfinite_bf16, uint16_t, uint16_t, 0x7f80u)

double g3_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Why path cannot be read as a file, or NULL: refused by its type, before reading a byte. */
static const char *refused_type(const struct stat *st, int fd) {
    if (S_ISDIR(st->st_mode)) return "is a directory, not a file";
    if (S_ISBLK(st->st_mode)) return "is a block device, not a file";
    if (S_ISCHR(st->st_mode) && !isatty(fd)) return "is a character device, not a file";
    return NULL;
}

int g3_read_file(const char *path, char **out, size_t *len) {
    return g3_read_file_ex(path, G3_READ_MAX, 0, out, len);
}

/* "larger than 1 GiB" / "larger than 1048576 bytes", the most the file may hold, into buf. */
static const char *too_large(size_t max, char *buf, size_t n) {
    if (max % ((size_t)1 << 30) == 0) snprintf(buf, n, "larger than %zu GiB", max >> 30);
    else snprintf(buf, n, "larger than %zu bytes", max);
    return buf;
}

int g3_read_file_ex(const char *path, size_t max, int regular_only, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (!path || !*path) return g3_error(GEMMA3_ERR_ARG, "an empty file name");
    int is_stdin = strcmp(path, "-") == 0 && !regular_only;
    const char *name = is_stdin ? "standard input" : path;
    char big[64];
    /* O_NONBLOCK: a FIFO that must be refused is not waited on in open() for a writer */
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC | (regular_only ? O_NONBLOCK : 0));
    if (fd < 0) {
        if (errno == ELOOP) return g3_error(GEMMA3_ERR_IO, "%s: cannot open: a loop of symbolic links", path);
        return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    const char *why = fstat(fd, &st) != 0 ? strerror(errno) : refused_type(&st, fd);
    if (!why && regular_only && !S_ISREG(st.st_mode)) why = "not a regular file";
    if (!why && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max)
        why = too_large(max, big, sizeof big);
    if (why) {
        if (!is_stdin) close(fd);
        return g3_error(GEMMA3_ERR_IO, "%s: %s", name, why);
    }
    /* The size is a hint: a regular file is read until read() says its end is reached, so a
     * file that reports 0 (/proc) or grows is read whole; a stream grows the buffer. */
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 65536;
    char *buf = malloc(cap);
    size_t got = 0;
    int err = buf ? 0 : ENOMEM;
    while (!err) {
        if (got + 1 == cap) { /* full: grow only if a byte follows (a file read by its size is not copied) */
            char probe;
            ssize_t n = read(fd, &probe, 1);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                err = n < 0 ? errno : 0;
                break;
            }
            size_t grown = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *nb = grown > cap ? realloc(buf, grown) : NULL;
            if (!nb) {
                err = grown > cap ? ENOMEM : EFBIG;
                break;
            }
            buf = nb;
            cap = grown;
            buf[got++] = probe;
            continue;
        }
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) err = errno;
        else if (n == 0) break;
        else got += (size_t)n;
    }
    if (!is_stdin) close(fd);
    if (err) {
        free(buf);
        if (err == EFBIG) return g3_error(GEMMA3_ERR_IO, "%s: %s", name, too_large(max, big, sizeof big));
        if (err == ENOMEM)
            return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory after reading %zu bytes", name, got);
        return g3_error(GEMMA3_ERR_IO, "%s: read failed after %zu bytes: %s", name, got, strerror(err));
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return GEMMA3_OK;
}

int g3_path_join(char *buf, size_t n, const char *dir, const char *name) {
    if (!*dir) return g3_error(GEMMA3_ERR_ARG, "an empty directory name (for %s)", name);
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

/* The dotted path of the first key that appears twice in one object of j ("a.b"), written to
 * buf; 0 when there is none. Hugging Face's loader keeps the last of two equal keys, cJSON the
 * first: a file that says both cannot be read one way. */
static int find_duplicate_key(const cJSON *j, char *buf, size_t n, size_t at) {
    for (const cJSON *x = j->child; x; x = x->next) {
        if (cJSON_IsObject(j) && x->string) {
            for (const cJSON *y = x->next; y; y = y->next)
                if (y->string && strcmp(x->string, y->string) == 0) {
                    snprintf(buf + at, n - at, "%s%s", at ? "." : "", x->string);
                    return 1;
                }
        }
        if (cJSON_IsObject(x) || cJSON_IsArray(x)) {
            size_t w = at;
            if (cJSON_IsObject(j) && x->string) {
                int k = snprintf(buf + at, n - at, "%s%s", at ? "." : "", x->string);
                w = k > 0 && (size_t)k < n - at ? at + (size_t)k : n - 1;
            }
            if (find_duplicate_key(x, buf, n, w)) return 1;
        }
    }
    return 0;
}

int g3_json_parse(const char *text, size_t len, const char *path, cJSON **out) {
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        return g3_error(GEMMA3_ERR_FORMAT, "%s: not valid JSON (near byte %zu)", path, at);
    }
    for (const char *p = end; p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return g3_error(GEMMA3_ERR_FORMAT, "%s: bytes after the end of the JSON value (at byte %zu)",
                            path, (size_t)(p - text));
        }
    char key[256] = "";
    if (find_duplicate_key(root, key, sizeof key, 0)) {
        cJSON_Delete(root);
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key '%s' appears twice", path, key);
    }
    *out = root;
    return GEMMA3_OK;
}

int g3_json_load(const char *path, cJSON **out) {
    *out = NULL;
    char *text;
    size_t len;
    int rc = g3_read_file(path, &text, &len);
    if (rc != GEMMA3_OK) return rc;
    rc = g3_json_parse(text, len, path, out);
    free(text);
    return rc;
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
