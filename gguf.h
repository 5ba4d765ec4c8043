/* gguf.h - GGUF files (versions 2 and 3), read in place and written. Knows nothing of Gemma: it
 * validates the container and hands out its key/values and tensor views, as safetensors.c does.
 *
 * A file is: "GGUF", u32 version, u64 tensor count, u64 key/value count, the key/values (u64
 * length + bytes key, u32 value type, value), the tensor infos (name, u32 n_dims, u64 ne[n_dims]
 * fastest first, u32 ggml type, u64 offset), padding to general.alignment (default 32), then the
 * data region; each tensor's offset is relative to it and a multiple of the alignment.
 * Little-endian throughout. */
#ifndef G3_GGUF_H
#define G3_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Value types of key/values. */
enum g3_gguf_vtype {
    G3_GGUF_U8, G3_GGUF_I8, G3_GGUF_U16, G3_GGUF_I16, G3_GGUF_U32, G3_GGUF_I32, G3_GGUF_F32,
    G3_GGUF_BOOL, G3_GGUF_STRING, G3_GGUF_ARRAY, G3_GGUF_U64, G3_GGUF_I64, G3_GGUF_F64,
};

/* The ggml tensor types a GGUF may hold (ggml.h's numbering). */
enum g3_ggml_type {
    G3_GGML_F32 = 0, G3_GGML_F16 = 1, G3_GGML_Q4_0 = 2, G3_GGML_Q4_1 = 3, G3_GGML_Q5_0 = 6,
    G3_GGML_Q5_1 = 7, G3_GGML_Q8_0 = 8, G3_GGML_Q8_1 = 9, G3_GGML_Q6_K = 14, G3_GGML_BF16 = 30,
};

/* "Q4_0", ... for every type ggml defines; NULL for a number it does not. */
const char *g3_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block of a type; 0 for an unknown one. */
int g3_ggml_block_elems(uint32_t type);
int g3_ggml_block_bytes(uint32_t type);

#define G3_GGUF_MAX_DIMS 4
#define G3_GGUF_DEFAULT_ALIGNMENT 32

typedef struct g3_gguf_kv {
    const char *key;      /* NUL-terminated copy */
    uint32_t type;        /* enum g3_gguf_vtype */
    uint32_t elem_type;   /* arrays: the elements' type (never ARRAY) */
    uint64_t n;           /* arrays: element count; strings: byte length */
    const uint8_t *value; /* in the image: the scalar, the string's bytes, or the first element */
} g3_gguf_kv;

typedef struct g3_gguf_tensor {
    const char *name;     /* NUL-terminated copy */
    uint32_t type;        /* enum g3_ggml_type */
    int n_dims;
    int64_t ne[G3_GGUF_MAX_DIMS]; /* fastest-varying first (ggml order); 1 past n_dims */
    int64_t n_elements;
    uint64_t offset;      /* from the start of the data region */
    const uint8_t *data;  /* in the image */
    size_t n_bytes;
} g3_gguf_tensor;

typedef struct g3_gguf {
    const char *label;    /* names the file in messages (the caller's string) */
    uint32_t version;
    uint32_t alignment;
    size_t data_offset;   /* where the data region starts in the image */
    int64_t n_kv, n_tensors;
    g3_gguf_kv *kv;
    g3_gguf_tensor *tensors;
    char *names;          /* every key and tensor name, NUL-terminated, back to back */
} g3_gguf;

/* Is this the start of a GGUF image (its magic)? */
int g3_gguf_is_image(const uint8_t *buf, size_t size);
/* Does path name a regular file that starts with the GGUF magic? (Reads 4 bytes.) */
int g3_gguf_is_file(const char *path);

/* Validates the image buf[0..size) and indexes it: every count, length, type, dimension,
 * offset and extent is checked against the image before anything is kept; tensor types ggml
 * does not define, duplicate keys or tensor names and overlapping tensor data are refused. The
 * error names the label and the key or tensor. buf and label must outlive *out. */
int g3_gguf_parse(const uint8_t *buf, size_t size, const char *label, g3_gguf **out);
void g3_gguf_free(g3_gguf *g);

const g3_gguf_kv *g3_gguf_find(const g3_gguf *g, const char *key);
const g3_gguf_tensor *g3_gguf_find_tensor(const g3_gguf *g, const char *name);

/* Typed getters. A missing key is GEMMA3_OK leaving *out unchanged when `required` is 0, else
 * an error naming the label and the key; a key of another type is always an error. Integers of
 * any integer type are accepted when the value fits. */
int g3_gguf_get_u32(const g3_gguf *g, const char *key, int required, uint32_t *out);
int g3_gguf_get_f32(const g3_gguf *g, const char *key, int required, float *out);
int g3_gguf_get_bool(const g3_gguf *g, const char *key, int required, int *out);
/* The string's bytes in the image (not NUL-terminated) and their length. */
int g3_gguf_get_str(const g3_gguf *g, const char *key, int required, const char **s, size_t *len);
/* An array whose elements are of type elem_type; *kv stays NULL when absent and not required. */
int g3_gguf_get_array(const g3_gguf *g, const char *key, uint32_t elem_type, int required,
                      const g3_gguf_kv **kv);
/* Walks an array of strings: the string at p, and where the next one starts. The parse has
 * checked every element, so this cannot run past the image. */
const uint8_t *g3_gguf_next_str(const uint8_t *p, const char **s, size_t *len);

/* ---- writing ---- */

/* A GGUF writer: key/values and tensor infos are declared first, then the tensors' bytes are
 * appended in the declared order (each padded to the alignment). It writes a temporary file next
 * to path and renames it over path when finished, so path is whole or untouched. */
typedef struct g3_gguf_writer g3_gguf_writer;

int g3_gguf_writer_new(const char *path, g3_gguf_writer **out);
/* Declarations (errors, e.g. out of memory, are kept and returned by g3_gguf_writer_begin). */
void g3_gguf_put_u32(g3_gguf_writer *w, const char *key, uint32_t v);
void g3_gguf_put_i32(g3_gguf_writer *w, const char *key, int32_t v);
void g3_gguf_put_f32(g3_gguf_writer *w, const char *key, float v);
void g3_gguf_put_bool(g3_gguf_writer *w, const char *key, int v);
void g3_gguf_put_str(g3_gguf_writer *w, const char *key, const char *s, size_t len);
/* An array of n elements of elem_type (a fixed-size type) at data. */
void g3_gguf_put_array(g3_gguf_writer *w, const char *key, uint32_t elem_type, const void *data,
                       uint64_t n);
/* An array of n strings (s[i], len[i] bytes). */
void g3_gguf_put_str_array(g3_gguf_writer *w, const char *key, const char *const *s,
                           const size_t *len, uint64_t n);
/* ne fastest first, as in the file. */
void g3_gguf_put_tensor(g3_gguf_writer *w, const char *name, uint32_t type, int n_dims,
                        const int64_t *ne);
/* Writes the header; then the tensors' bytes follow through append. */
int g3_gguf_writer_begin(g3_gguf_writer *w);
int g3_gguf_writer_append(g3_gguf_writer *w, const void *data, size_t n);
/* Checks that every declared byte came, fsyncs, renames into place; frees w either way. */
int g3_gguf_writer_finish(g3_gguf_writer *w);
/* Removes the temporary file and frees w. Accepts NULL. */
void g3_gguf_writer_abort(g3_gguf_writer *w);

#endif
