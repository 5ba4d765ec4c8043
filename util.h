/* util.h - small helpers shared by every module: error recording, bf16 conversion,
 * aligned allocation and a monotonic clock. Nothing here knows about Gemma. */
#ifndef G3_UTIL_H
#define G3_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gemma3.h"

/* Records a printf-style message as this thread's last error and returns `code`, so that a
 * failure site is one line: `return g3_error(GEMMA3_ERR_FORMAT, "%s: bad dtype", path);`.
 * The message is what gemma3_last_error() returns until the next error on this thread. */
int g3_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* BF16 is the top half of an IEEE float: widening is exact. */
static inline float g3_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round-to-nearest-even on the dropped 16 bits, as torch does; NaN stays a (quiet) NaN. */
static inline uint16_t g3_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* IEEE half to float (exact), for F16 checkpoints. */
float g3_f16_to_f32(uint16_t h);

/* 64-byte aligned allocation (cache line, one AVX-512 register). Zero-filled. NULL on failure
 * or when n == 0. Free with g3_free_aligned (accepts NULL). */
void *g3_alloc_aligned(size_t n);
void g3_free_aligned(void *p);

/* Seconds from a monotonic clock. */
double g3_now(void);

/* Reads a whole file into a malloc'd NUL-terminated buffer; *len gets the size without the NUL.
 * Returns GEMMA3_OK or an error naming the path. Caller frees *out. */
int g3_read_file(const char *path, char **out, size_t *len);

/* "a string", "a number", ... for messages about a JSON value of the wrong type. */
struct cJSON;
const char *g3_json_type_name(const struct cJSON *j);

/* Reads and parses a JSON file; on failure the error names the path. Caller frees with
 * cJSON_Delete. */
int g3_json_load(const char *path, struct cJSON **out);

/* Writes a tensor shape as "[4096, 64]" into buf of size n (truncated if it does not fit) and
 * returns buf, so it can be a printf argument. */
const char *g3_shape_str(char *buf, size_t n, const int64_t *shape, int n_dims);

/* Joins dir and name with one '/', into buf of size n. Returns GEMMA3_ERR_ARG if it does not fit. */
int g3_path_join(char *buf, size_t n, const char *dir, const char *name);

#endif
