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

/* A transparent huge page (x86-64, and arm64 with 4 KiB pages). */
#define G3_HUGE_PAGE ((size_t)2 << 20)

/* Address space for n bytes that becomes memory only where it is written: an anonymous mapping
 * with MAP_NORESERVE (nothing committed, nothing zero-filled up front; a page faults in, zeroed
 * by the kernel, the first time it is touched). For buffers sized for the worst case but filled
 * as work arrives (the KV cache of a long context). 64-byte aligned (page aligned). NULL on
 * failure or n == 0. Free with g3_unreserve(p, n). */
void *g3_reserve(size_t n);
void g3_unreserve(void *p, size_t n);
/* Gives the pages of a reservation back (they read as zeros and fault in again when written). */
void g3_release(void *p, size_t n);

/* Index of the first NaN or infinity in x[0..n), or -1 when every element is finite. One pass
 * of integer tests on the exponent bits, which the compiler vectorises (~30 us for 262,144
 * logits). */
int64_t g3_first_nonfinite(const float *x, size_t n);
/* The same over n bf16 values (x may be unaligned: a mapped tensor). */
int64_t g3_first_nonfinite_bf16(const uint16_t *x, size_t n);

/* Seconds from a monotonic clock. */
double g3_now(void);

/* The one routine every input file goes through (prompts, config.json, generation_config.json,
 * tokenizer.model, ...). Reads the whole of path into a malloc'd buffer with a NUL after the
 * last byte (the data itself may hold NUL bytes: *len counts them all). A regular file is read
 * by its size and then to its end (so /proc files, whose size reads 0, come whole); a pipe, a
 * FIFO, a socket or a terminal is read to EOF; "-" is standard input. A directory, a block
 * device and a character device other than a terminal (/dev/zero, /dev/urandom never end) are
 * refused by name, and so is anything longer than G3_READ_MAX bytes. A symbolic-link loop is
 * reported as one, not as a missing file. Returns GEMMA3_OK or an error naming the path.
 * Caller frees *out. */
#define G3_READ_MAX ((size_t)1 << 30)
int g3_read_file(const char *path, char **out, size_t *len);
/* The same with a size limit of max bytes, and with regular_only, a file of a checkpoint
 * directory: anything but a regular file is refused, a FIFO without waiting for a writer. */
int g3_read_file_ex(const char *path, size_t max, int regular_only, char **out, size_t *len);
/* A checkpoint's JSON files (config.json, generation_config.json) are a few kB (the real Gemma 3
 * config.json, vision part included, is under 2 kB): 1 MiB is far beyond any, and a larger file
 * is refused before it is read. */
#define G3_JSON_SIDE_MAX ((size_t)1 << 20)

/* "a string", "a number", ... for messages about a JSON value of the wrong type. */
struct cJSON;
const char *g3_json_type_name(const struct cJSON *j);

/* Parses len bytes of JSON text strictly: nothing but whitespace may follow the value, and no
 * object may hold a key twice (the error names it: "key 'a.b' appears twice"). path names the
 * text in messages. Caller frees *out with cJSON_Delete. */
int g3_json_parse(const char *text, size_t len, const char *path, struct cJSON **out);

/* Reads (g3_read_file) and parses (g3_json_parse) a JSON file; on failure the error names the
 * path. Caller frees with cJSON_Delete. */
int g3_json_load(const char *path, struct cJSON **out);

/* Writes a tensor shape as "[4096, 64]" into buf of size n (truncated if it does not fit) and
 * returns buf, so it can be a printf argument. */
const char *g3_shape_str(char *buf, size_t n, const int64_t *shape, int n_dims);

/* Joins dir and name with one '/', into buf of size n. Returns GEMMA3_ERR_ARG if it does not fit
 * or dir is empty (which would otherwise name a file at the root). */
int g3_path_join(char *buf, size_t n, const char *dir, const char *name);

#endif
