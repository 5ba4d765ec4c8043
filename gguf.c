/* gguf.c - GGUF files: a validating reader over an image in memory and a streaming writer.
 *
 * The reader walks the header with a cursor that knows how many bytes are left: every length
 * and count is compared with what remains before it is used (a count is also bounded by the
 * smallest size one element could have, so an absurd count fails before any allocation). Then
 * every tensor's extent is checked against the data region and the extents are checked for
 * overlap, so the caller gets views that are all inside the file, or nothing. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static const char MAGIC[4] = {'G', 'G', 'U', 'F'};

/* ---- ggml types --------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int block_elems, block_bytes;
} ggml_types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 40},     [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},  [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},        [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},   [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},   [40] = {"NVFP4", 64, 36},
    [41] = {"Q1_0", 128, 18},    [42] = {"Q2_0", 64, 18},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

const char *g3_ggml_type_name(uint32_t type) { return type < N_GGML_TYPES ? ggml_types[type].name : NULL; }
int g3_ggml_block_elems(uint32_t type) { return type < N_GGML_TYPES ? ggml_types[type].block_elems : 0; }
int g3_ggml_block_bytes(uint32_t type) { return type < N_GGML_TYPES ? ggml_types[type].block_bytes : 0; }

/* Bytes of one value of a fixed-size key/value type; 0 for STRING and ARRAY (and unknown). */
static size_t vtype_size(uint32_t t) {
    static const size_t size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < sizeof size / sizeof size[0] ? size[t] : 0;
}

static const char *vtype_name(uint32_t t) {
    static const char *const names[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ---- the cursor --------------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *buf;
    size_t size, pos;
    const char *label;
} cursor;

static size_t left(const cursor *c) { return c->size - c->pos; }

static int take(cursor *c, void *out, size_t n, const char *what) {
    if (left(c) < n)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: truncated at byte %zu reading %s (%zu bytes needed, "
                        "%zu left)", c->label, c->pos, what, n, left(c));
    memcpy(out, c->buf + c->pos, n);
    c->pos += n;
    return GEMMA3_OK;
}

static int take_u32(cursor *c, uint32_t *v, const char *what) { return take(c, v, 4, what); }
static int take_u64(cursor *c, uint64_t *v, const char *what) { return take(c, v, 8, what); }

/* A string: u64 length, then that many bytes, all inside the image. */
static int take_str(cursor *c, const uint8_t **s, uint64_t *len, const char *what) {
    int rc = take_u64(c, len, what);
    if (rc == GEMMA3_OK && *len > left(c))
        rc = g3_error(GEMMA3_ERR_FORMAT, "%s: %s: string length %llu at byte %zu runs past the "
                      "end of the file (%zu bytes left)", c->label, what,
                      (unsigned long long)*len, c->pos - 8, left(c));
    if (rc == GEMMA3_OK) {
        *s = c->buf + c->pos;
        c->pos += (size_t)*len;
    }
    return rc;
}

/* ---- parsing ------------------------------------------------------------------------------ */

/* Key names and tensor names are copied into one arena, NUL-terminated; an embedded NUL would
 * make the copy name something else, so it is refused. */
static int keep_name(g3_gguf *g, size_t *used, const uint8_t *s, uint64_t len, const char **out,
                     const char *what) {
    if (len == 0) return g3_error(GEMMA3_ERR_FORMAT, "%s: %s with an empty name", g->label, what);
    if (memchr(s, 0, (size_t)len))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s name '%.40s' holds a NUL byte", g->label, what,
                        (const char *)s);
    memcpy(g->names + *used, s, (size_t)len);
    g->names[*used + len] = '\0';
    *out = g->names + *used;
    *used += (size_t)len + 1;
    return GEMMA3_OK;
}

/* The value of one key/value (its type already read) or one array element: skips it, checking
 * that it lies inside the image. */
static int skip_value(cursor *c, uint32_t type, const char *key) {
    size_t n = vtype_size(type);
    if (n) {
        if (left(c) < n)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: truncated %s value", c->label, key,
                            vtype_name(type));
        c->pos += n;
        return GEMMA3_OK;
    }
    if (type == G3_GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        return take_str(c, &s, &len, key);
    }
    return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: unknown value type %u", c->label, key, type);
}

static int parse_kv(cursor *c, g3_gguf *g, size_t *names_used, g3_gguf_kv *kv) {
    const uint8_t *key;
    uint64_t key_len;
    int rc = take_str(c, &key, &key_len, "a key");
    if (rc == GEMMA3_OK) rc = keep_name(g, names_used, key, key_len, &kv->key, "key");
    if (rc == GEMMA3_OK) rc = take_u32(c, &kv->type, kv->key);
    if (rc != GEMMA3_OK) return rc;
    if (kv->type == G3_GGUF_STRING) {
        uint64_t len;
        rc = take_str(c, &kv->value, &len, kv->key);
        kv->n = len;
        return rc;
    }
    if (kv->type != G3_GGUF_ARRAY) {
        kv->value = c->buf + c->pos;
        return skip_value(c, kv->type, kv->key);
    }
    if ((rc = take_u32(c, &kv->elem_type, kv->key)) || (rc = take_u64(c, &kv->n, kv->key))) return rc;
    if (kv->elem_type == G3_GGUF_ARRAY || (kv->elem_type != G3_GGUF_STRING && !vtype_size(kv->elem_type)))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: array of %s elements is not supported",
                        g->label, kv->key, kv->elem_type == G3_GGUF_ARRAY ? "array" : "unknown-type");
    const size_t min = kv->elem_type == G3_GGUF_STRING ? 8 : vtype_size(kv->elem_type);
    if (kv->n > left(c) / min)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: array of %llu %s elements does not fit in "
                        "the %zu bytes left", g->label, kv->key, (unsigned long long)kv->n,
                        vtype_name(kv->elem_type), left(c));
    kv->value = c->buf + c->pos;
    if (kv->elem_type != G3_GGUF_STRING) {
        c->pos += (size_t)kv->n * min;
        return GEMMA3_OK;
    }
    for (uint64_t i = 0; i < kv->n && rc == GEMMA3_OK; i++) rc = skip_value(c, G3_GGUF_STRING, kv->key);
    return rc;
}

/* One tensor info: name, dims, type, offset; its byte size from the type's blocks. */
static int parse_tensor(cursor *c, g3_gguf *g, size_t *names_used, g3_gguf_tensor *t) {
    const uint8_t *name;
    uint64_t name_len, offset;
    uint32_t n_dims;
    int rc = take_str(c, &name, &name_len, "a tensor name");
    if (rc == GEMMA3_OK) rc = keep_name(g, names_used, name, name_len, &t->name, "tensor");
    if (rc == GEMMA3_OK) rc = take_u32(c, &n_dims, t->name);
    if (rc != GEMMA3_OK) return rc;
    if (n_dims == 0 || n_dims > G3_GGUF_MAX_DIMS)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: %u dimensions (1 to %d)", g->label,
                        t->name, n_dims, G3_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    t->n_elements = 1;
    for (int d = 0; d < G3_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && (rc = take_u64(c, &ne, t->name))) return rc;
        if (t->n_elements && ne > (uint64_t)INT64_MAX / (uint64_t)t->n_elements)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: dimension %d is %llu: too many "
                            "elements", g->label, t->name, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        t->n_elements *= (int64_t)ne;
    }
    if ((rc = take_u32(c, &t->type, t->name)) || (rc = take_u64(c, &offset, t->name))) return rc;
    t->offset = offset;
    const int be = g3_ggml_block_elems(t->type), bb = g3_ggml_block_bytes(t->type);
    if (!be)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: unknown ggml type %u", g->label,
                        t->name, t->type);
    if (t->ne[0] % be)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: %lld columns are not a multiple of "
                        "the %s block (%d)", g->label, t->name, (long long)t->ne[0],
                        g3_ggml_type_name(t->type), be);
    if ((uint64_t)(t->n_elements / be) > SIZE_MAX / (uint64_t)bb)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: too large", g->label, t->name);
    t->n_bytes = (size_t)(t->n_elements / be) * (size_t)bb;
    return GEMMA3_OK;
}

/* general.alignment: a u32 power of two, if present. */
static int read_alignment(g3_gguf *g) {
    g->alignment = G3_GGUF_DEFAULT_ALIGNMENT;
    const g3_gguf_kv *a = g3_gguf_find(g, "general.alignment");
    if (!a) return GEMMA3_OK;
    if (a->type != G3_GGUF_U32)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key general.alignment: expected u32, got %s",
                        g->label, vtype_name(a->type));
    uint32_t v;
    memcpy(&v, a->value, 4);
    if (v == 0 || (v & (v - 1)) || v > (1u << 24))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key general.alignment: %u is not a power of two "
                        "up to 2^24", g->label, v);
    g->alignment = v;
    return GEMMA3_OK;
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const g3_gguf_tensor *x = *(const g3_gguf_tensor *const *)a, *y = *(const g3_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* Offsets aligned, extents inside the data region, no two overlapping. */
static int place_tensors(g3_gguf *g, const uint8_t *buf, size_t size) {
    const size_t region = size - g->data_offset;
    g3_gguf_tensor **order = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *order);
    if (!order) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", g->label);
    int rc = GEMMA3_OK;
    for (int64_t i = 0; i < g->n_tensors && rc == GEMMA3_OK; i++) {
        g3_gguf_tensor *t = &g->tensors[i];
        order[i] = t;
        if (t->offset % g->alignment)
            rc = g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: offset %llu is not a multiple of the "
                          "alignment %u", g->label, t->name, (unsigned long long)t->offset, g->alignment);
        else if (t->offset > region || t->n_bytes > region - t->offset)
            rc = g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: data [%llu, +%zu) runs past the end of "
                          "the file (data region of %zu bytes)", g->label, t->name,
                          (unsigned long long)t->offset, t->n_bytes, region);
        else
            t->data = buf + g->data_offset + t->offset;
    }
    if (rc == GEMMA3_OK) qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_tensor_offset);
    for (int64_t i = 1; i < g->n_tensors && rc == GEMMA3_OK; i++)
        if (order[i]->offset < order[i - 1]->offset + order[i - 1]->n_bytes)
            rc = g3_error(GEMMA3_ERR_FORMAT, "%s: tensor %s: data at offset %llu overlaps tensor %s "
                          "[%llu, +%zu)", g->label, order[i]->name, (unsigned long long)order[i]->offset,
                          order[i - 1]->name, (unsigned long long)order[i - 1]->offset,
                          order[i - 1]->n_bytes);
    free(order);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No key and no tensor name twice (a sorted copy, neighbours compared). */
static int check_unique(const g3_gguf *g) {
    const int64_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
    if (!names) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", g->label);
    int rc = GEMMA3_OK;
    for (int pass = 0; pass < 2 && rc == GEMMA3_OK; pass++) {
        const int64_t m = pass ? g->n_tensors : g->n_kv;
        for (int64_t i = 0; i < m; i++) names[i] = pass ? g->tensors[i].name : g->kv[i].key;
        qsort(names, (size_t)m, sizeof *names, cmp_str);
        for (int64_t i = 1; i < m && rc == GEMMA3_OK; i++)
            if (strcmp(names[i], names[i - 1]) == 0)
                rc = g3_error(GEMMA3_ERR_FORMAT, "%s: %s %s appears twice", g->label,
                              pass ? "tensor" : "key", names[i]);
    }
    free(names);
    return rc;
}

/* The fixed header: magic, version, the two counts (each bounded by what the rest could hold). */
static int parse_counts(cursor *c, g3_gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    char magic[4];
    int rc = take(c, magic, 4, "the magic");
    if (rc == GEMMA3_OK && memcmp(magic, MAGIC, 4) != 0)
        rc = g3_error(GEMMA3_ERR_FORMAT, "%s: not a GGUF file (magic %02x %02x %02x %02x, "
                      "expected 'GGUF')", g->label, (uint8_t)magic[0], (uint8_t)magic[1],
                      (uint8_t)magic[2], (uint8_t)magic[3]);
    if (rc == GEMMA3_OK) rc = take_u32(c, &g->version, "the version");
    if (rc == GEMMA3_OK && g->version != 2 && g->version != 3)
        rc = g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: GGUF version %u%s (2 or 3 are supported)",
                      g->label, g->version, g->version > 0xffffff ? ", a big-endian file?" : "");
    if (rc == GEMMA3_OK) rc = take_u64(c, n_tensors, "the tensor count");
    if (rc == GEMMA3_OK) rc = take_u64(c, n_kv, "the key/value count");
    if (rc != GEMMA3_OK) return rc;
    /* the smallest key/value is 8 + 1 + 4 + 1 bytes, the smallest tensor info 8 + 1 + 4 + 8 + 4 + 8 */
    if (*n_kv > left(c) / 14)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %llu key/values cannot fit in %zu bytes", g->label,
                        (unsigned long long)*n_kv, left(c));
    if (*n_tensors > left(c) / 33)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %llu tensors cannot fit in %zu bytes", g->label,
                        (unsigned long long)*n_tensors, left(c));
    return GEMMA3_OK;
}

int g3_gguf_is_image(const uint8_t *buf, size_t size) { return size >= 4 && memcmp(buf, MAGIC, 4) == 0; }

int g3_gguf_is_file(const char *path) {
    struct stat sb;
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t head[4];
    ssize_t n = read(fd, head, 4);
    close(fd);
    return n == 4 && g3_gguf_is_image(head, 4);
}

int g3_gguf_parse(const uint8_t *buf, size_t size, const char *label, g3_gguf **out) {
    *out = NULL;
    g3_gguf *g = calloc(1, sizeof *g);
    if (!g) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    g->label = label;
    cursor c = {buf, size, 0, label};
    uint64_t n_tensors = 0, n_kv = 0;
    int rc = parse_counts(&c, g, &n_tensors, &n_kv);
    if (rc == GEMMA3_OK) {
        /* names are copied with a NUL each: never more than the rest of the image */
        g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv);
        g->tensors = calloc((size_t)n_tensors + 1, sizeof *g->tensors);
        g->names = malloc(left(&c) + 1);
        if (!g->kv || !g->tensors || !g->names) rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    }
    size_t names_used = 0;
    for (uint64_t i = 0; i < n_kv && rc == GEMMA3_OK; i++, g->n_kv++)
        rc = parse_kv(&c, g, &names_used, &g->kv[i]);
    for (uint64_t i = 0; i < n_tensors && rc == GEMMA3_OK; i++, g->n_tensors++)
        rc = parse_tensor(&c, g, &names_used, &g->tensors[i]);
    if (rc == GEMMA3_OK) rc = check_unique(g);
    if (rc == GEMMA3_OK) rc = read_alignment(g);
    if (rc == GEMMA3_OK) {
        size_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
        if (pad > left(&c) && g->n_tensors)
            rc = g3_error(GEMMA3_ERR_FORMAT, "%s: truncated: the data region would start past the "
                          "end of the file", label);
        g->data_offset = pad > left(&c) ? size : c.pos + pad;
    }
    if (rc == GEMMA3_OK) rc = place_tensors(g, buf, size);
    if (rc != GEMMA3_OK) {
        g3_gguf_free(g);
        return rc;
    }
    *out = g;
    return GEMMA3_OK;
}

void g3_gguf_free(g3_gguf *g) {
    if (!g) return;
    free(g->kv);
    free(g->tensors);
    free(g->names);
    free(g);
}

const g3_gguf_kv *g3_gguf_find(const g3_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

const g3_gguf_tensor *g3_gguf_find_tensor(const g3_gguf *g, const char *name) {
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

/* ---- typed getters ------------------------------------------------------------------------ */

static int lookup(const g3_gguf *g, const char *key, int required, const g3_gguf_kv **kv) {
    *kv = g3_gguf_find(g, key);
    if (!*kv && required) return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: missing", g->label, key);
    return GEMMA3_OK;
}

static int wrong_type(const g3_gguf *g, const g3_gguf_kv *kv, const char *want) {
    return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: expected %s, got %s", g->label, kv->key, want,
                    vtype_name(kv->type));
}

/* An integer value of any integer type, as a signed 64-bit number (u64 above INT64_MAX: -1). */
static int int_value(const g3_gguf_kv *kv, int64_t *v) {
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64;
    switch (kv->type) {
    case G3_GGUF_U8: memcpy(&u8, kv->value, 1); *v = u8; return 1;
    case G3_GGUF_I8: memcpy(&i8, kv->value, 1); *v = i8; return 1;
    case G3_GGUF_U16: memcpy(&u16, kv->value, 2); *v = u16; return 1;
    case G3_GGUF_I16: memcpy(&i16, kv->value, 2); *v = i16; return 1;
    case G3_GGUF_U32: memcpy(&u32, kv->value, 4); *v = u32; return 1;
    case G3_GGUF_I32: memcpy(&i32, kv->value, 4); *v = i32; return 1;
    case G3_GGUF_U64: memcpy(&u64, kv->value, 8); *v = u64 > (uint64_t)INT64_MAX ? -1 : (int64_t)u64; return 1;
    case G3_GGUF_I64: memcpy(v, kv->value, 8); return 1;
    default: return 0;
    }
}

int g3_gguf_get_u32(const g3_gguf *g, const char *key, int required, uint32_t *out) {
    const g3_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv);
    if (rc != GEMMA3_OK || !kv) return rc;
    int64_t v;
    if (!int_value(kv, &v)) return wrong_type(g, kv, "an integer");
    if (v < 0 || v > UINT32_MAX)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: %lld is out of range [0, %u]", g->label,
                        key, (long long)v, UINT32_MAX);
    *out = (uint32_t)v;
    return GEMMA3_OK;
}

int g3_gguf_get_f32(const g3_gguf *g, const char *key, int required, float *out) {
    const g3_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv);
    if (rc != GEMMA3_OK || !kv) return rc;
    double d;
    float f;
    if (kv->type == G3_GGUF_F32) {
        memcpy(&f, kv->value, 4);
        d = f;
    } else if (kv->type == G3_GGUF_F64) {
        memcpy(&d, kv->value, 8);
    } else {
        return wrong_type(g, kv, "f32");
    }
    if (!isfinite(d) || fabs(d) > 3.4e38)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: %g is not a finite float", g->label, key, d);
    *out = (float)d;
    return GEMMA3_OK;
}

int g3_gguf_get_bool(const g3_gguf *g, const char *key, int required, int *out) {
    const g3_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv);
    if (rc != GEMMA3_OK || !kv) return rc;
    if (kv->type != G3_GGUF_BOOL) return wrong_type(g, kv, "bool");
    *out = kv->value[0] != 0;
    return GEMMA3_OK;
}

int g3_gguf_get_str(const g3_gguf *g, const char *key, int required, const char **s, size_t *len) {
    const g3_gguf_kv *kv;
    int rc = lookup(g, key, required, &kv);
    if (rc != GEMMA3_OK || !kv) return rc;
    if (kv->type != G3_GGUF_STRING) return wrong_type(g, kv, "string");
    *s = (const char *)kv->value;
    *len = (size_t)kv->n;
    return GEMMA3_OK;
}

int g3_gguf_get_array(const g3_gguf *g, const char *key, uint32_t elem_type, int required,
                      const g3_gguf_kv **out) {
    const g3_gguf_kv *kv;
    *out = NULL;
    int rc = lookup(g, key, required, &kv);
    if (rc != GEMMA3_OK || !kv) return rc;
    if (kv->type != G3_GGUF_ARRAY || kv->elem_type != elem_type)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: key %s: expected an array of %s, got %s%s%s",
                        g->label, key, vtype_name(elem_type), kv->type == G3_GGUF_ARRAY ? "an array of " : "",
                        vtype_name(kv->type == G3_GGUF_ARRAY ? kv->elem_type : kv->type),
                        kv->type == G3_GGUF_ARRAY ? "" : " value");
    *out = kv;
    return GEMMA3_OK;
}

const uint8_t *g3_gguf_next_str(const uint8_t *p, const char **s, size_t *len) {
    uint64_t n;
    memcpy(&n, p, 8);
    *s = (const char *)p + 8;
    *len = (size_t)n;
    return p + 8 + n;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[G3_GGUF_MAX_DIMS];
    size_t n_bytes;
} wtensor;

struct g3_gguf_writer {
    char *path;
    gemma3_outfile *out; /* written as every file is (outfile.c): a temporary renamed over a
                          * regular file or a new path, a device or FIFO directly */
    int rc;            /* the first error of a declaration */
    uint8_t *kv;       /* the encoded key/values */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    wtensor *tensors;
    int n_tensors, cap_tensors;
    int cur;           /* tensor being appended */
    size_t cur_done;   /* its bytes appended so far */
    uint64_t offset;   /* position in the file */
};

static void put_bytes(g3_gguf_writer *w, const void *p, size_t n) {
    if (w->rc != GEMMA3_OK) return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n) cap *= 2;
        uint8_t *kv = realloc(w->kv, cap);
        if (!kv) {
            w->rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", w->path);
            return;
        }
        w->kv = kv;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void put_string(g3_gguf_writer *w, const char *s, size_t len) {
    uint64_t n = len;
    put_bytes(w, &n, 8);
    put_bytes(w, s, len);
}

static void put_key(g3_gguf_writer *w, const char *key, uint32_t type) {
    put_string(w, key, strlen(key));
    put_bytes(w, &type, 4);
    w->n_kv++;
}

void g3_gguf_put_u32(g3_gguf_writer *w, const char *key, uint32_t v) { put_key(w, key, G3_GGUF_U32); put_bytes(w, &v, 4); }
void g3_gguf_put_i32(g3_gguf_writer *w, const char *key, int32_t v) { put_key(w, key, G3_GGUF_I32); put_bytes(w, &v, 4); }
void g3_gguf_put_f32(g3_gguf_writer *w, const char *key, float v) { put_key(w, key, G3_GGUF_F32); put_bytes(w, &v, 4); }

void g3_gguf_put_bool(g3_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    put_key(w, key, G3_GGUF_BOOL);
    put_bytes(w, &b, 1);
}

void g3_gguf_put_str(g3_gguf_writer *w, const char *key, const char *s, size_t len) {
    put_key(w, key, G3_GGUF_STRING);
    put_string(w, s, len);
}

void g3_gguf_put_array(g3_gguf_writer *w, const char *key, uint32_t elem_type, const void *data,
                       uint64_t n) {
    put_key(w, key, G3_GGUF_ARRAY);
    put_bytes(w, &elem_type, 4);
    put_bytes(w, &n, 8);
    put_bytes(w, data, (size_t)n * vtype_size(elem_type));
}

void g3_gguf_put_str_array(g3_gguf_writer *w, const char *key, const char *const *s,
                           const size_t *len, uint64_t n) {
    uint32_t t = G3_GGUF_STRING;
    put_key(w, key, G3_GGUF_ARRAY);
    put_bytes(w, &t, 4);
    put_bytes(w, &n, 8);
    for (uint64_t i = 0; i < n; i++) put_string(w, s[i], len[i]);
}

void g3_gguf_put_tensor(g3_gguf_writer *w, const char *name, uint32_t type, int n_dims,
                        const int64_t *ne) {
    if (w->rc != GEMMA3_OK) return;
    const int be = g3_ggml_block_elems(type);
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) n *= ne[d];
    if (!be || n_dims < 1 || n_dims > G3_GGUF_MAX_DIMS || ne[0] % be) {
        w->rc = g3_error(GEMMA3_ERR_ARG, "%s: tensor %s: cannot be written as type %u", w->path, name, type);
        return;
    }
    if (w->n_tensors == w->cap_tensors) {
        int cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        wtensor *t = realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) {
            w->rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", w->path);
            return;
        }
        w->tensors = t;
        w->cap_tensors = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) {
        w->rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", w->path);
        return;
    }
    w->n_tensors++;
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, ne, (size_t)n_dims * sizeof *ne);
    t->n_bytes = (size_t)(n / be) * (size_t)g3_ggml_block_bytes(type);
}

int g3_gguf_writer_new(const char *path, g3_gguf_writer **out) {
    *out = NULL;
    g3_gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->path = strdup(path);
    if (!w || !w->path) {
        free(w);
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = w;
    return GEMMA3_OK;
}

static int write_all(g3_gguf_writer *w, const void *p, size_t n) {
    if (n == 0) return GEMMA3_OK; /* p may be NULL then (no key-values yet), which fwrite may not take */
    if (fwrite(p, 1, n, gemma3_outfile_stream(w->out)) != n)
        return g3_error(GEMMA3_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->offset += (uint64_t)n;
    return GEMMA3_OK;
}

static int write_pad(g3_gguf_writer *w) {
    static const uint8_t zeros[G3_GGUF_DEFAULT_ALIGNMENT];
    size_t pad = (size_t)((G3_GGUF_DEFAULT_ALIGNMENT - w->offset % G3_GGUF_DEFAULT_ALIGNMENT) % G3_GGUF_DEFAULT_ALIGNMENT);
    return pad ? write_all(w, zeros, pad) : GEMMA3_OK;
}

int g3_gguf_writer_begin(g3_gguf_writer *w) {
    if (w->rc != GEMMA3_OK) return w->rc;
    int rc = gemma3_outfile_open(w->path, &w->out);
    if (rc != GEMMA3_OK) return w->rc = rc;
    uint32_t version = 3;
    uint64_t n_tensors = (uint64_t)w->n_tensors;
    rc = write_all(w, MAGIC, 4);
    if (rc == GEMMA3_OK) rc = write_all(w, &version, 4);
    if (rc == GEMMA3_OK) rc = write_all(w, &n_tensors, 8);
    if (rc == GEMMA3_OK) rc = write_all(w, &w->n_kv, 8);
    if (rc == GEMMA3_OK) rc = write_all(w, w->kv, w->kv_len);
    uint64_t offset = 0;
    for (int i = 0; i < w->n_tensors && rc == GEMMA3_OK; i++) {
        const wtensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint32_t n_dims = (uint32_t)t->n_dims;
        rc = write_all(w, &len, 8);
        if (rc == GEMMA3_OK) rc = write_all(w, t->name, (size_t)len);
        if (rc == GEMMA3_OK) rc = write_all(w, &n_dims, 4);
        if (rc == GEMMA3_OK) rc = write_all(w, t->ne, 8 * (size_t)t->n_dims);
        if (rc == GEMMA3_OK) rc = write_all(w, &t->type, 4);
        if (rc == GEMMA3_OK) rc = write_all(w, &offset, 8);
        offset += (t->n_bytes + G3_GGUF_DEFAULT_ALIGNMENT - 1) / G3_GGUF_DEFAULT_ALIGNMENT * G3_GGUF_DEFAULT_ALIGNMENT;
    }
    if (rc == GEMMA3_OK) rc = write_pad(w);
    return w->rc = rc;
}

int g3_gguf_writer_append(g3_gguf_writer *w, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n && w->rc == GEMMA3_OK) {
        if (w->cur >= w->n_tensors)
            return w->rc = g3_error(GEMMA3_ERR_ARG, "%s: more bytes than the tensors declared", w->path);
        size_t k = w->tensors[w->cur].n_bytes - w->cur_done;
        if (k > n) k = n;
        w->rc = write_all(w, p, k);
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->rc == GEMMA3_OK && w->cur_done == w->tensors[w->cur].n_bytes) {
            w->rc = write_pad(w);
            w->cur++;
            w->cur_done = 0;
        }
    }
    return w->rc;
}

static void writer_free(g3_gguf_writer *w) {
    for (int i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w->kv);
    free(w->path);
    free(w);
}

void g3_gguf_writer_abort(g3_gguf_writer *w) {
    if (!w) return;
    gemma3_outfile_discard(w->out);
    writer_free(w);
}

int g3_gguf_writer_finish(g3_gguf_writer *w) {
    int rc = w->rc;
    while (rc == GEMMA3_OK && w->cur < w->n_tensors && w->tensors[w->cur].n_bytes == 0) w->cur++;
    if (rc == GEMMA3_OK && w->cur < w->n_tensors)
        rc = g3_error(GEMMA3_ERR_ARG, "%s: tensor %s: only %zu of its %zu bytes were written",
                      w->path, w->tensors[w->cur].name, w->cur_done, w->tensors[w->cur].n_bytes);
    if (rc == GEMMA3_OK && !w->out) rc = g3_error(GEMMA3_ERR_ARG, "%s: finished before begin", w->path);
    if (rc == GEMMA3_OK) rc = gemma3_outfile_commit(w->out); /* flushed, synced, renamed */
    else gemma3_outfile_discard(w->out);
    w->out = NULL;
    writer_free(w);
    return rc;
}
