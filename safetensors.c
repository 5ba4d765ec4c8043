/* safetensors.c - read-only SafeTensors checkpoints: one file, or every shard of an index.
 *
 * A file is: u64 little-endian N, N bytes of JSON (possibly space-padded), then the data region.
 * The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} with offsets
 * relative to the start of the data region, plus an optional "__metadata__" object of strings.
 *
 * Everything is validated against the real size of the mapping before a single tensor view
 * exists: the caller of g3_st_open_* either gets views that are all inside the file with spans
 * that match their shapes, or no g3_st at all. The same code checks an in-memory image
 * (g3_st_check_buffer) so the fuzz target exercises exactly what the loader runs. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "threads.h"
#include "util.h"

/* The safetensors format caps the header at 100 MB; a real Gemma header is ~100 KB. */
#define MAX_HEADER_BYTES (100u * 1000u * 1000u)
/* Shapes and offsets are JSON numbers (doubles): beyond 2^53 they are no longer exact. */
#define MAX_EXACT_INT 9007199254740992.0

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {
    [G3_DTYPE_F32] = {"F32", 4},    [G3_DTYPE_F16] = {"F16", 2},
    [G3_DTYPE_BF16] = {"BF16", 2},  [G3_DTYPE_F64] = {"F64", 8},
    [G3_DTYPE_I64] = {"I64", 8},    [G3_DTYPE_I32] = {"I32", 4},
    [G3_DTYPE_I16] = {"I16", 2},    [G3_DTYPE_I8] = {"I8", 1},
    [G3_DTYPE_U8] = {"U8", 1},      [G3_DTYPE_BOOL] = {"BOOL", 1},
    [G3_DTYPE_F8_E4M3] = {"F8_E4M3", 1}, [G3_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
};
#define N_DTYPES ((int)(sizeof dtype_info / sizeof dtype_info[0]))

const char *g3_dtype_name(g3_dtype dt) {
    return ((int)dt >= 0 && (int)dt < N_DTYPES) ? dtype_info[dt].name : "?";
}

size_t g3_dtype_size(g3_dtype dt) {
    return ((int)dt >= 0 && (int)dt < N_DTYPES) ? dtype_info[dt].size : 0;
}

static int dtype_from_name(const char *s, g3_dtype *out) {
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (g3_dtype)i;
            return 1;
        }
    return 0;
}

/* ---- the checkpoint object ---------------------------------------------------------------- */

typedef struct st_file {
    char *path;
    uint8_t *map; /* PROT_READ view of the whole file: a file mapping, or anonymous memory */
    size_t size;
    int mapped;   /* map is a file mapping (its pages can be dropped and refault from the file) */
    size_t lead;  /* bytes of the mapping before map (read_whole's alignment padding) */
} st_file;

struct g3_st {
    g3_st_load load;    /* how files are brought in (G3_ST_LOAD_AUTO resolved per file) */
    int n_threads;      /* threads reading or populating the files (g3_st_open_dir_ex) */
    int populate;       /* fault mapped files in at open (g3_st_open_dir_ex) */
    size_t read_budget; /* AUTO: bytes that may still be read into memory */
    g3_st_load_info info;
    st_file *files;
    int n_files;
    g3_tensor *tensors; /* names malloc'd; file points at files[k].path (or the caller's label) */
    int n_tensors, cap_tensors;
    int32_t *slots;     /* open-addressing hash: tensor index or -1; n_slots is a power of two */
    uint32_t n_slots;
    char **meta;        /* __metadata__ as key, value pairs (strdup'd); the first file's wins */
    int n_meta;
    g3_st_image_fn parse; /* another container's parser (g3_st_open_file_with), or NULL */
    void *parse_ctx;
};

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Index of `name` in the table, or -1. */
static int lookup(const g3_st *st, const char *name) {
    if (!st->n_slots) return -1;
    uint32_t mask = st->n_slots - 1;
    for (uint32_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        int32_t t = st->slots[i];
        if (t < 0) return -1;
        if (strcmp(st->tensors[t].name, name) == 0) return t;
    }
}

/* (Re)builds the hash table over every tensor so far, refusing duplicate names. The message
 * names the file holding the second occurrence (and the first one when they differ). */
static int build_index(g3_st *st) {
    uint32_t n = 16;
    while (n < 2u * (uint32_t)st->n_tensors) n *= 2;
    int32_t *slots = malloc(n * sizeof *slots);
    if (!slots) return g3_error(GEMMA3_ERR_NOMEM, "out of memory indexing tensors");
    for (uint32_t i = 0; i < n; i++) slots[i] = -1;
    free(st->slots);
    st->slots = slots;
    st->n_slots = n;
    for (int t = 0; t < st->n_tensors; t++) {
        const g3_tensor *tt = &st->tensors[t];
        uint32_t i = hash_name(tt->name) & (n - 1);
        for (; slots[i] >= 0; i = (i + 1) & (n - 1)) {
            const g3_tensor *other = &st->tensors[slots[i]];
            if (strcmp(other->name, tt->name) != 0) continue;
            if (strcmp(other->file, tt->file) == 0)
                return g3_error(GEMMA3_ERR_FORMAT, "%s: duplicate tensor '%s'", tt->file, tt->name);
            return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s' is also in %s", tt->file, tt->name,
                            other->file);
        }
        slots[i] = t;
    }
    return GEMMA3_OK;
}

static g3_tensor *push_tensor(g3_st *st) {
    if (st->n_tensors == st->cap_tensors) {
        int cap = st->cap_tensors ? 2 * st->cap_tensors : 64;
        g3_tensor *t = realloc(st->tensors, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        st->tensors = t;
        st->cap_tensors = cap;
    }
    g3_tensor *t = &st->tensors[st->n_tensors++];
    memset(t, 0, sizeof *t);
    return t;
}

void g3_st_close(g3_st *st) {
    if (!st) return;
    for (int i = 0; i < st->n_tensors; i++) free((char *)st->tensors[i].name);
    for (int i = 0; i < st->n_files; i++) {
        if (st->files[i].map) munmap(st->files[i].map - st->files[i].lead, st->files[i].size + st->files[i].lead);
        free(st->files[i].path);
    }
    for (int i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
    free(st->meta);
    free(st->files);
    free(st->tensors);
    free(st->slots);
    free(st);
}

const char *g3_st_metadata(const g3_st *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
    return NULL;
}

/* Keeps the string pairs of a validated __metadata__ object; a key already kept (from an earlier
 * shard) keeps its first value. */
static int keep_metadata(g3_st *st, const cJSON *m, const char *label) {
    for (const cJSON *x = m->child; x; x = x->next) {
        int rc = g3_st_add_metadata(st, x->string, x->valuestring);
        if (rc != GEMMA3_OK) return g3_error(rc, "%s: out of memory", label);
    }
    return GEMMA3_OK;
}

void g3_st_release(const g3_st *st, const g3_tensor *t) {
    if (!t || !t->n_bytes) return;
    const uint8_t *p = t->data;
    for (int i = 0; i < st->n_files; i++) {
        const st_file *f = &st->files[i];
        if (p < f->map || p + t->n_bytes > f->map + f->size) continue;
        if (!f->mapped) return; /* read into anonymous memory: dropping would lose the bytes */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(page - 1);
        uintptr_t hi = ((uintptr_t)p + t->n_bytes + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t map_hi = ((uintptr_t)f->map + f->size + page - 1) & ~(uintptr_t)(page - 1);
        if (hi > map_hi) hi = map_hi;
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
}

void g3_st_get_load_info(const g3_st *st, g3_st_load_info *info) { *info = st->info; }

const g3_tensor *g3_st_find(const g3_st *st, const char *name) {
    int t = lookup(st, name);
    return t < 0 ? NULL : &st->tensors[t];
}

int g3_st_count(const g3_st *st) { return st->n_tensors; }

const g3_tensor *g3_st_at(const g3_st *st, int i) {
    return (i >= 0 && i < st->n_tensors) ? &st->tensors[i] : NULL;
}

/* ---- header parsing ----------------------------------------------------------------------- */

/* A JSON number that is an exact non-negative integer no larger than 2^53. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0.0) || d > MAX_EXACT_INT || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

typedef struct span {
    uint64_t begin, end;
    const char *name;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* One tensor entry: fills *t (name not set) and its [begin, end) in the data region. */
static int parse_entry(const cJSON *e, const char *label, uint64_t data_size, g3_tensor *t,
                       uint64_t *begin, uint64_t *end) {
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s': expected an object, got %s", label,
                        name, g3_json_type_name(e));
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s': dtype missing or not a string", label,
                        name);
    if (!dtype_from_name(dt->valuestring, &t->dtype))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", label, name,
                        dt->valuestring);
    if (!cJSON_IsArray(sh))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s': shape missing or not an array", label,
                        name);
    int n_dims = cJSON_GetArraySize(sh);
    if (n_dims > G3_MAX_DIMS)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s': %d dimensions (at most %d)", label,
                        name, n_dims, G3_MAX_DIMS);
    /* n_elements * dtype size must fit the data region, which bounds every partial product
     * too (unless a dimension is 0, handled by the saturating flag). */
    uint64_t n_el = 1;
    int overflow = 0;
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
        uint64_t v;
        if (!json_uint(x, &v)) {
            if (cJSON_IsNumber(x))
                return g3_error(GEMMA3_ERR_FORMAT,
                                "%s: tensor '%s': shape[%d] = %g is not a non-negative integer",
                                label, name, d, x->valuedouble);
            return g3_error(GEMMA3_ERR_FORMAT,
                            "%s: tensor '%s': shape[%d] is %s, not a non-negative integer", label,
                            name, d, g3_json_type_name(x));
        }
        t->shape[d] = (int64_t)v;
        if (v && n_el > UINT64_MAX / v) overflow = 1;
        else n_el *= v;
        if (n_el > (uint64_t)INT64_MAX) overflow = 1;
    }
    t->n_dims = n_dims;
    if (n_el == 0) overflow = 0; /* a zero dimension makes the product 0 whatever came before */
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets missing or not a [begin, end] pair", label,
                        name);
    if (!json_uint(off->child, begin) || !json_uint(off->child->next, end))
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets are not non-negative integers", label,
                        name);
    if (*begin > *end)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] reversed",
                        label, name, (unsigned long long)*begin, (unsigned long long)*end);
    if (*end > data_size)
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] past the end of the data "
                        "region (%llu bytes)",
                        label, name, (unsigned long long)*begin, (unsigned long long)*end,
                        (unsigned long long)data_size);
    size_t esize = g3_dtype_size(t->dtype);
    uint64_t span_bytes = *end - *begin;
    char sbuf[160];
    if (overflow || n_el > UINT64_MAX / esize || n_el * esize != span_bytes) {
        if (overflow)
            return g3_error(GEMMA3_ERR_FORMAT,
                            "%s: tensor '%s': shape %s x %s overflows (data_offsets span %llu "
                            "bytes)",
                            label, name, g3_shape_str(sbuf, sizeof sbuf, t->shape, n_dims),
                            dtype_info[t->dtype].name, (unsigned long long)span_bytes);
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu] span %llu bytes but shape %s "
                        "x %s needs %llu",
                        label, name, (unsigned long long)*begin, (unsigned long long)*end,
                        (unsigned long long)span_bytes,
                        g3_shape_str(sbuf, sizeof sbuf, t->shape, n_dims),
                        dtype_info[t->dtype].name,
                        (unsigned long long)(n_el * esize));
    }
    t->n_elements = (int64_t)n_el;
    t->n_bytes = (size_t)span_bytes;
    return GEMMA3_OK;
}

static int check_metadata(const cJSON *m, const char *label) {
    if (!cJSON_IsObject(m))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: __metadata__: expected an object, got %s", label,
                        g3_json_type_name(m));
    for (const cJSON *x = m->child; x; x = x->next)
        if (!cJSON_IsString(x))
            return g3_error(GEMMA3_ERR_FORMAT, "%s: __metadata__.%s: expected a string, got %s",
                            label, x->string, g3_json_type_name(x));
    return GEMMA3_OK;
}

/* Reads the 8-byte little-endian header length and parses the JSON header behind it into *root
 * (the caller deletes it). Refuses a length past the file or over MAX_HEADER_BYTES, text that is
 * not one JSON object, and anything but whitespace padding after it. *header_len gets the
 * length, so the data region starts at buf + 8 + *header_len. */
static int parse_header(const uint8_t *buf, size_t size, const char *label, cJSON **root,
                        uint64_t *header_len) {
    *root = NULL;
    if (size < 8)
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: file is %zu bytes, too short for the 8-byte header length", label,
                        size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n > size - 8)
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: header length %llu is beyond the end of the file (%zu bytes)", label,
                        (unsigned long long)n, size);
    if (n > MAX_HEADER_BYTES)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: header length %llu exceeds the 100 MB limit",
                        label, (unsigned long long)n);
    if (n < 2)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: header length %llu is too small for JSON", label,
                        (unsigned long long)n);
    const char *hdr = (const char *)buf + 8;
    const char *parse_end = NULL;
    cJSON *json = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &parse_end, 0);
    if (!json) {
        size_t at = (parse_end && parse_end >= hdr) ? (size_t)(parse_end - hdr) : 0;
        return g3_error(GEMMA3_ERR_FORMAT, "%s: header is not valid JSON (near byte %zu)", label,
                        at);
    }
    int rc = GEMMA3_OK;
    /* Whatever follows the JSON value must be padding (spaces, as writers pad to 8 bytes). */
    for (const char *p = parse_end; p < hdr + n && rc == GEMMA3_OK; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            rc = g3_error(GEMMA3_ERR_FORMAT, "%s: header has trailing bytes after the JSON", label);
    if (rc == GEMMA3_OK && !cJSON_IsObject(json))
        rc = g3_error(GEMMA3_ERR_FORMAT, "%s: header is %s, not a JSON object", label,
                      g3_json_type_name(json));
    if (rc != GEMMA3_OK) {
        cJSON_Delete(json);
        return rc;
    }
    *root = json;
    *header_len = n;
    return GEMMA3_OK;
}

/* Validates one tensor entry of the header and appends it to st as a view into data. */
static int add_tensor(g3_st *st, const cJSON *e, const char *label, const uint8_t *data,
                      uint64_t data_size) {
    g3_tensor t;
    memset(&t, 0, sizeof t);
    uint64_t begin = 0, end = 0;
    int rc = parse_entry(e, label, data_size, &t, &begin, &end);
    if (rc != GEMMA3_OK) return rc;
    g3_tensor *slot = push_tensor(st);
    char *name = slot ? strdup(e->string) : NULL;
    if (!name) {
        if (slot) st->n_tensors--;
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    }
    *slot = t;
    slot->name = name;
    slot->file = label;
    slot->data = data + begin;
    return GEMMA3_OK;
}

/* Every entry of the header object: at most one __metadata__, the rest tensors. */
static int add_entries(g3_st *st, const cJSON *root, const char *label, const uint8_t *data,
                       uint64_t data_size) {
    int seen_metadata = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        int rc = GEMMA3_OK;
        if (!e->string || !*e->string)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: tensor with an empty name", label);
        if (strcmp(e->string, "__metadata__") == 0) {
            if (seen_metadata++)
                return g3_error(GEMMA3_ERR_FORMAT, "%s: duplicate __metadata__", label);
            rc = check_metadata(e, label);
            if (rc == GEMMA3_OK) rc = keep_metadata(st, e, label);
        } else {
            rc = add_tensor(st, e, label, data, data_size);
        }
        if (rc != GEMMA3_OK) return rc;
    }
    return GEMMA3_OK;
}

/* The data of tensors st->tensors[first..] (one image, data region at `data`) must not overlap:
 * sorts their spans by begin and compares neighbours. */
static int check_offsets(const g3_st *st, int first, const uint8_t *data, const char *label) {
    int count = st->n_tensors - first;
    if (count <= 1) return GEMMA3_OK;
    span *spans = malloc((size_t)count * sizeof *spans);
    if (!spans) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    for (int i = 0; i < count; i++) {
        const g3_tensor *t = &st->tensors[first + i];
        spans[i].begin = (uint64_t)((const uint8_t *)t->data - data);
        spans[i].end = spans[i].begin + t->n_bytes;
        spans[i].name = t->name;
    }
    qsort(spans, (size_t)count, sizeof *spans, cmp_span);
    int rc = GEMMA3_OK;
    for (int i = 1; i < count; i++)
        if (spans[i].begin < spans[i - 1].end) {
            rc = g3_error(GEMMA3_ERR_FORMAT,
                          "%s: tensor '%s' data_offsets [%llu, %llu] overlap tensor '%s' "
                          "[%llu, %llu]",
                          label, spans[i].name, (unsigned long long)spans[i].begin,
                          (unsigned long long)spans[i].end, spans[i - 1].name,
                          (unsigned long long)spans[i - 1].begin,
                          (unsigned long long)spans[i - 1].end);
            break;
        }
    free(spans);
    return rc;
}

/* Validates the image buf[0..size) and appends its tensors to st (views pointing into buf,
 * `file` = label, which must outlive st). On error st may hold some of this image's tensors;
 * the caller then closes st. */
static int parse_image(g3_st *st, const uint8_t *buf, size_t size, const char *label) {
    cJSON *root;
    uint64_t n = 0; /* set by parse_header; -O1 cannot see that */
    int rc = parse_header(buf, size, label, &root, &n);
    if (rc != GEMMA3_OK) return rc;
    const uint8_t *data = buf + 8 + n;
    int first = st->n_tensors;
    rc = add_entries(st, root, label, data, size - 8 - n);
    if (rc == GEMMA3_OK) rc = check_offsets(st, first, data, label);
    if (rc == GEMMA3_OK) rc = build_index(st);
    cJSON_Delete(root);
    return rc;
}

int g3_st_open_buffer(const uint8_t *buf, size_t size, const char *label, g3_st **out) {
    *out = NULL;
    g3_st *st = calloc(1, sizeof *st);
    if (!st) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    int rc = parse_image(st, buf, size, label);
    if (rc != GEMMA3_OK) {
        g3_st_close(st);
        return rc;
    }
    *out = st;
    return GEMMA3_OK;
}

int g3_st_check_buffer(const uint8_t *buf, size_t size, const char *label) {
    g3_st *st;
    int rc = g3_st_open_buffer(buf, size, label, &st);
    g3_st_close(st);
    return rc;
}

/* ---- files -------------------------------------------------------------------------------- */

/* ---- bringing the bytes in ----------------------------------------------------------------- */

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels answer EINVAL and pages are touched */
#endif

/* Runs fn over [0, n_bytes) cut into one contiguous part per thread, each part starting on a
 * 2 MiB boundary so that no huge page is faulted by two threads. */
typedef struct span_job {
    uint8_t *base;     /* destination (read) or mapping (populate) */
    size_t n_bytes;
    int fd;            /* read: the file */
    size_t file_off;   /* read: the file offset that lands at base */
    int err;           /* read: first errno seen (or -1 for an early end of file), 0 if none */
    size_t err_at;
} span_job;

/* One thread's part of read_whole: pread straight into the (not yet faulted) destination, so the
 * huge pages are faulted and filled on every thread at once, not one by one on the caller. */
static void read_part(void *ctx, int ith, int nth) {
    span_job *j = ctx;
    size_t lo, hi;
    g3_split_bytes(j->n_bytes, G3_HUGE_PAGE, ith, nth, &lo, &hi);
    while (lo < hi) {
        size_t want = hi - lo > (1u << 30) ? (1u << 30) : hi - lo;
        ssize_t n = pread(j->fd, j->base + lo, want, (off_t)(j->file_off + lo));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* several threads may fail; any one of the failures is reported */
            __atomic_store_n(&j->err_at, j->file_off + lo, __ATOMIC_RELAXED);
            __atomic_store_n(&j->err, n < 0 ? errno : -1, __ATOMIC_RELAXED);
            return;
        }
        lo += (size_t)n;
    }
}

/* One thread's part of populating a mapping: the kernel maps every page of it (reading from the
 * disk what the page cache lacks), so the forward pass takes no page faults. */
static void populate_part(void *ctx, int ith, int nth) {
    span_job *j = ctx;
    size_t lo, hi;
    g3_split_bytes(j->n_bytes, G3_HUGE_PAGE, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    if (madvise(j->base + lo, hi - lo, MADV_POPULATE_READ) == 0) return;
    volatile const uint8_t *p = j->base; /* old kernel: touch each page */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = lo; i < hi; i += page) (void)p[i];
}

/* Runs job on n_threads threads (the caller included); on no pool, on the caller alone. */
static void run_parts(g3_task_fn fn, span_job *job, int n_threads) {
    g3_pool *pool = NULL;
    if (n_threads > 1 && g3_pool_create(n_threads, &pool) == GEMMA3_OK) {
        g3_pool_run(pool, fn, job);
        g3_pool_free(pool);
    } else {
        fn(job, 0, 1);
    }
}

/* The file's pages as the page cache holds them: no copy, and shared by every process that maps
 * the same checkpoint. Asked for in transparent huge pages (honoured where the filesystem keeps
 * large folios: fewer page-table entries to walk when the weights stream through). */
static int map_whole(int fd, const char *path, size_t size, uint8_t **out) {
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return g3_error(GEMMA3_ERR_IO, "%s: cannot mmap: %s", path, strerror(errno));
    madvise(map, size, MADV_HUGEPAGE);
    *out = map;
    return GEMMA3_OK;
}

/* Bytes to put before the file image so that its data section (8 + header length on) starts on
 * a 64-byte line. The header length is 8-byte padded at best, so in the file the tensors are
 * usually misaligned, and every 64-byte vector load of a weight row would then straddle two
 * cache lines (measured: the fp32 decode kernel ran ~25% slower on such rows). Tensor offsets
 * inside the data section are multiples of their row sizes in practice, so rows start aligned
 * too. A header length that cannot be read or is out of range gets no padding; the parser
 * reports it. */
static size_t align_lead(int fd, size_t size) {
    uint8_t b[8];
    if (pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b) return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    if (n > size - 8) return 0;
    return (64 - (size_t)((8 + n) % 64)) % 64;
}

/* The file read into anonymous memory, asked for in transparent huge pages, then made
 * read-only. It costs a copy at load time; in exchange the weights stream at the machine's full
 * bandwidth on the VMs this engine is measured on, where reading a file mapping runs several
 * times slower than reading anonymous memory (see README, "Loading"). The copy runs on
 * n_threads threads, each preading its own part: on one thread it ran at 0.6 GB/s, bound by
 * faulting (zeroing) the huge pages, not by the page cache. The image starts *lead bytes into
 * the mapping (align_lead). */
static int read_whole(int fd, const char *path, size_t size, int n_threads, uint8_t **out,
                      size_t *lead) {
    size_t pad = align_lead(fd, size);
    void *mem = mmap(NULL, size + pad, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return g3_error(GEMMA3_ERR_NOMEM, "%s: cannot allocate %zu bytes to read it: %s", path, size,
                        strerror(errno));
    madvise(mem, size + pad, MADV_HUGEPAGE);
    uint8_t *img = (uint8_t *)mem + pad;
    /* the head, up to mem's first huge-page boundary, on the caller; then every thread's part
     * starts on a huge page of its own */
    size_t head = G3_HUGE_PAGE - pad < size ? G3_HUGE_PAGE - pad : size;
    span_job job = {.base = img, .n_bytes = head, .fd = fd};
    read_part(&job, 0, 1);
    if (!job.err && size > head) {
        job = (span_job){.base = img + head, .n_bytes = size - head, .fd = fd, .file_off = head};
        run_parts(read_part, &job, n_threads);
    }
    if (job.err) {
        munmap(mem, size + pad);
        return g3_error(GEMMA3_ERR_IO, "%s: read failed at byte %zu of %zu: %s", path, job.err_at,
                        size, job.err > 0 ? strerror(job.err) : "unexpected end of file");
    }
    mprotect(mem, size + pad, PROT_READ);
    *out = img;
    *lead = pad;
    return GEMMA3_OK;
}
/* The first number after `key` at the start of a line of a small text file (/proc, cgroup
 * files), or 0 when absent. */
static unsigned long long file_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    unsigned long long v = 0;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) {
            v = strtoull(line + klen, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* What this process's memory cgroup still lets it have: its limit less what it holds other than
 * page cache (cache is reclaimed before the limit bites), or SIZE_MAX without a limit. v2
 * (memory.max) and v1 (memory.limit_in_bytes) are looked for at the cgroup's path and at the
 * mount's root, which is where a container sees its own cgroup. */
static size_t cgroup_room(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], v2[300] = "", v1[300] = "";
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        if (c2 == c1 + 1 && strncmp(line, "0:", 2) == 0) snprintf(v2, sizeof v2, "%s", c2 + 1);
        else if (strstr(c1, "memory")) snprintf(v1, sizeof v1, "%s", c2 + 1);
    }
    if (f) fclose(f);
    static const struct { const char *root, *limit, *usage, *cache; } kinds[] = {
        {"/sys/fs/cgroup", "memory.max", "memory.current", "file "},
        {"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_cache "},
    };
    for (int k = 0; k < 2; k++) {
        const char *cg = k == 0 ? v2 : v1;
        for (int at_root = 0; at_root < 2; at_root++) {
            char dir[400], path[460];
            snprintf(dir, sizeof dir, "%s%s", kinds[k].root, at_root ? "" : cg);
            snprintf(path, sizeof path, "%s/%s", dir, kinds[k].limit);
            FILE *lf = fopen(path, "r");
            if (!lf) continue;
            unsigned long long limit = 0;
            int got = fscanf(lf, "%llu", &limit); /* "max" (v2, no limit) reads nothing */
            fclose(lf);
            if (got != 1 || limit >= (1ull << 60)) return SIZE_MAX;
            snprintf(path, sizeof path, "%s/%s", dir, kinds[k].usage);
            unsigned long long used = file_number(path, "");
            snprintf(path, sizeof path, "%s/memory.stat", dir);
            unsigned long long cache = file_number(path, kinds[k].cache);
            used = cache < used ? used - cache : 0;
            return used < limit ? (size_t)(limit - used) : 0;
        }
    }
    return SIZE_MAX;
}

size_t g3_mem_available(void) {
    const char *e = getenv("GEMMA3_MEM_AVAILABLE");
    if (e && *e) return (size_t)strtoull(e, NULL, 10);
    /* MemAvailable counts the page cache that can be reclaimed: right after a checkpoint was
     * written or downloaded the cache holds all of it, and the free pages alone
     * (_SC_AVPHYS_PAGES, which AUTO used to read) then say it does not fit. */
    size_t avail = (size_t)file_number("/proc/meminfo", "MemAvailable:") * 1024;
    if (!avail) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        avail = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    }
    size_t room = cgroup_room();
    return room < avail ? room : avail;
}

/* Bytes of the mapping that starts at p which the kernel maps with 2 MiB page-table entries
 * (its FilePmdMapped in /proc/self/smaps), or 0 when that cannot be read. */
static size_t pmd_mapped_bytes(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in = lo == (unsigned long)(uintptr_t)p;
            continue;
        }
        if (in && sscanf(line, "FilePmdMapped: %zu kB", &kb) == 1) break;
    }
    if (f) fclose(f);
    return kb * 1024;
}

/* Maps and faults in the file on all threads; keeps the mapping (1) if the page cache then
 * holds the file (nearly) all in 2 MiB folios, mapped with 2 MiB entries, else unmaps it (0). */
static int map_populated_if_huge(int fd, const char *path, size_t size, int n_threads,
                                 uint8_t **out, size_t *huge) {
    uint8_t *map;
    if (map_whole(fd, path, size, &map) != GEMMA3_OK) return 0;
    span_job job = {.base = map, .n_bytes = size};
    run_parts(populate_part, &job, n_threads);
    *huge = pmd_mapped_bytes(map);
    /* the partial huge pages at either end can never be PMD-mapped */
    if (*huge + 2 * G3_HUGE_PAGE + size / 50 >= size) {
        *out = map;
        return 1;
    }
    munmap(map, size);
    *huge = 0;
    return 0;
}

/* AUTO's first choice: the file mapped from a page cache that holds it in 2 MiB folios. Such a
 * mapping streams like anonymous huge pages, with no copy and no fresh memory to fault (which
 * on the VMs measured runs at 0.2-1 GB/s, the host backing each new page). A file just written
 * (or copied) is cached partly in small folios; then its clean pages are dropped and it is
 * faulted in again, which reads it from the disk through readahead in 2 MiB folios (ext4 and
 * XFS on Linux 6.16+): the disk's rate once (1.7 GB/s here, against 0.4 GB/s for a copy into
 * fresh memory), and every later run finds it ready. 0 if the file still is not huge-mapped. */
static int map_if_huge(int fd, const char *path, size_t size, int n_threads, uint8_t **out,
                       size_t *huge) {
    if (size < 4 * G3_HUGE_PAGE) return 0;
    if (map_populated_if_huge(fd, path, size, n_threads, out, huge)) return 1;
    if (fdatasync(fd) != 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) return 0;
    return map_populated_if_huge(fd, path, size, n_threads, out, huge);
}

static g3_st *new_st(g3_st_load load, int n_threads, int populate) {
    g3_st *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->load = load;
    st->n_threads = n_threads > 0 ? n_threads : g3_n_cpus();
    st->populate = populate;
    st->info.mem_available = g3_mem_available();
    /* AUTO reads while the files fit in 3/4 of the memory that can be had, leaving the rest to the
     * KV cache, the scratch and everybody else; a model that does not fit still runs, mapped. */
    if (load == G3_ST_LOAD_AUTO) st->read_budget = st->info.mem_available / 4 * 3;
    return st;
}

static int add_file(g3_st *st, const char *path) {
    st_file *files = realloc(st->files, (size_t)(st->n_files + 1) * sizeof *files);
    if (!files) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    st->files = files;
    st_file *f = &files[st->n_files];
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    st->n_files++;
    /* O_NONBLOCK: a FIFO is refused below, not waited on in open() (regular files ignore it) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return g3_error(GEMMA3_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return g3_error(GEMMA3_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return g3_error(GEMMA3_ERR_FORMAT,
                        "%s: file is %zu bytes, too short for the 8-byte header length", path,
                        size);
    }
    int read_in = st->load == G3_ST_LOAD_READ ||
                  (st->load == G3_ST_LOAD_AUTO && size <= st->read_budget);
    if (read_in && st->load == G3_ST_LOAD_AUTO) st->read_budget -= size;
    double t0 = g3_now();
    size_t huge = 0;
    int kept = read_in && st->load == G3_ST_LOAD_AUTO && st->populate &&
               map_if_huge(fd, path, size, st->n_threads, &f->map, &huge);
    if (kept) read_in = 0;
    int rc = kept      ? GEMMA3_OK
             : read_in ? read_whole(fd, path, size, st->n_threads, &f->map, &f->lead)
                       : map_whole(fd, path, size, &f->map);
    close(fd);
    if (rc != GEMMA3_OK) return rc;
    f->size = size;
    f->mapped = !read_in;
    st->info.bytes_huge_mapped += huge;
    if (read_in) {
        st->info.bytes_read += size;
    } else if (!kept) {
        st->info.bytes_mapped += size;
        /* Populating a file that does not fit would only evict its own first pages again. */
        if (st->populate && st->info.bytes_mapped <= st->info.mem_available) {
            span_job job = {.base = f->map, .n_bytes = size};
            run_parts(populate_part, &job, st->n_threads);
        } else if (st->populate) {
            st->info.not_populated = 1;
        }
        if (st->populate) st->info.bytes_huge_mapped += pmd_mapped_bytes(f->map);
    } else {
        st->info.bytes_mapped += size;
    }
    st->info.seconds += g3_now() - t0;
    if (!st->parse) return parse_image(st, f->map, f->size, f->path);
    rc = st->parse(st, f->map, f->size, f->path, st->parse_ctx);
    return rc == GEMMA3_OK ? build_index(st) : rc;
}

int g3_st_open_file(const char *path, g3_st **out) { return g3_st_open_file_as(path, G3_ST_LOAD_MMAP, out); }

int g3_st_open_file_as(const char *path, g3_st_load load, g3_st **out) {
    return g3_st_open_file_ex(path, load, 0, 0, out);
}

int g3_st_open_file_ex(const char *path, g3_st_load load, int n_threads, int populate,
                       g3_st **out) {
    *out = NULL;
    g3_st *st = new_st(load, n_threads, populate);
    if (!st) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    int rc = add_file(st, path);
    if (rc != GEMMA3_OK) {
        g3_st_close(st);
        return rc;
    }
    *out = st;
    return GEMMA3_OK;
}

int g3_st_open_file_with(const char *path, g3_st_load load, int n_threads, int populate,
                         g3_st_image_fn parse, void *ctx, g3_st **out) {
    *out = NULL;
    g3_st *st = new_st(load, n_threads, populate);
    if (!st) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    st->parse = parse;
    st->parse_ctx = ctx;
    int rc = add_file(st, path);
    if (rc != GEMMA3_OK) {
        g3_st_close(st);
        return rc;
    }
    *out = st;
    return GEMMA3_OK;
}

int g3_st_add_view(g3_st *st, const g3_tensor *view) {
    g3_tensor *slot = push_tensor(st);
    char *name = slot ? strdup(view->name) : NULL;
    if (!name) {
        if (slot) st->n_tensors--;
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", view->file);
    }
    *slot = *view;
    slot->name = name;
    return GEMMA3_OK;
}

int g3_st_add_metadata(g3_st *st, const char *key, const char *value) {
    if (g3_st_metadata(st, key)) return GEMMA3_OK;
    char **meta = realloc(st->meta, (size_t)(st->n_meta + 1) * 2 * sizeof *meta);
    if (!meta) return g3_error(GEMMA3_ERR_NOMEM, "out of memory");
    st->meta = meta;
    meta[2 * st->n_meta] = strdup(key);
    meta[2 * st->n_meta + 1] = strdup(value);
    st->n_meta++;
    if (!meta[2 * st->n_meta - 2] || !meta[2 * st->n_meta - 1]) return g3_error(GEMMA3_ERR_NOMEM, "out of memory");
    return GEMMA3_OK;
}

/* A shard named by an index must be a plain file name inside the checkpoint directory. */
static int valid_shard_name(const char *s) {
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}.
 * Every distinct shard is opened once; each tensor must then be in the shard the map names. */
static int open_index(g3_st *st, const char *dir, const char *index_path) {
    cJSON *root;
    int rc = g3_json_load(index_path, &root);
    if (rc != GEMMA3_OK) return rc;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    char path[4096];
    if (!cJSON_IsObject(root)) {
        rc = g3_error(GEMMA3_ERR_FORMAT, "%s: not a JSON object", index_path);
        goto done;
    }
    if (!cJSON_IsObject(map) || !map->child) {
        rc = g3_error(GEMMA3_ERR_FORMAT, "%s: weight_map missing, empty or not an object",
                      index_path);
        goto done;
    }
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !valid_shard_name(e->valuestring)) {
            rc = g3_error(GEMMA3_ERR_FORMAT,
                          "%s: weight_map['%s']: expected a shard file name in this directory",
                          index_path, e->string);
            goto done;
        }
        int seen = 0; /* first occurrence of this shard name? (quadratic, but few shards) */
        for (const cJSON *p = map->child; p != e && !seen; p = p->next)
            seen = strcmp(p->valuestring, e->valuestring) == 0;
        if (seen) continue;
        if ((rc = g3_path_join(path, sizeof path, dir, e->valuestring)) != GEMMA3_OK) goto done;
        if (access(path, F_OK) != 0) {
            rc = g3_error(GEMMA3_ERR_IO, "%s: shard '%s' (for tensor '%s') does not exist",
                          index_path, e->valuestring, e->string);
            goto done;
        }
        if ((rc = add_file(st, path)) != GEMMA3_OK) goto done;
    }
    for (const cJSON *e = map->child; e; e = e->next) {
        const g3_tensor *t = g3_st_find(st, e->string);
        if ((rc = g3_path_join(path, sizeof path, dir, e->valuestring)) != GEMMA3_OK) goto done;
        if (!t) {
            rc = g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s' is not in shard '%s'", index_path,
                          e->string, e->valuestring);
            goto done;
        }
        if (strcmp(t->file, path) != 0) {
            rc = g3_error(GEMMA3_ERR_FORMAT, "%s: tensor '%s' is in %s, not in shard '%s'",
                          index_path, e->string, t->file, e->valuestring);
            goto done;
        }
    }
done:
    cJSON_Delete(root);
    return rc;
}

int g3_st_open_dir(const char *dir, g3_st **out) { return g3_st_open_dir_as(dir, G3_ST_LOAD_MMAP, out); }

int g3_st_open_dir_as(const char *dir, g3_st_load load, g3_st **out) {
    return g3_st_open_dir_ex(dir, load, 0, 0, out);
}

int g3_st_open_dir_ex(const char *dir, g3_st_load load, int n_threads, int populate,
                      g3_st **out) {
    *out = NULL;
    char path[4096];
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return g3_error(GEMMA3_ERR_IO, "%s: not a directory", dir);
    int rc = g3_path_join(path, sizeof path, dir, "model.safetensors.index.json");
    if (rc != GEMMA3_OK) return rc;
    if (access(path, F_OK) != 0) {
        if ((rc = g3_path_join(path, sizeof path, dir, "model.safetensors")) != GEMMA3_OK)
            return rc;
        if (access(path, F_OK) != 0)
            return g3_error(GEMMA3_ERR_IO,
                            "%s: no model.safetensors or model.safetensors.index.json", dir);
        return g3_st_open_file_ex(path, load, n_threads, populate, out);
    }
    g3_st *st = new_st(load, n_threads, populate);
    if (!st) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", dir);
    rc = open_index(st, dir, path);
    if (rc != GEMMA3_OK) {
        g3_st_close(st);
        return rc;
    }
    *out = st;
    return GEMMA3_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

struct g3_st_writer {
    char *path;
    int fd;
    uint64_t *ends;  /* end offset of each tensor in the data region */
    int n_tensors;
    int at;          /* the tensor being appended */
    uint64_t written; /* data bytes so far */
};

static int write_all(int fd, const void *data, size_t n, const char *path) {
    const uint8_t *p = data;
    while (n) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return g3_error(GEMMA3_ERR_IO, "%s: write failed: %s", path,
                                    w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return GEMMA3_OK;
}

void g3_st_writer_abort(g3_st_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->path) unlink(w->path);
    free(w->path);
    free(w->ends);
    free(w);
}

int g3_st_writer_create(const char *path, const g3_st_entry *tensors, int n_tensors,
                        const char *const *metadata, int n_meta, g3_st_writer **out) {
    *out = NULL;
    g3_st_writer *w = calloc(1, sizeof *w);
    cJSON *root = cJSON_CreateObject();
    char *json = NULL;
    int rc = GEMMA3_OK;
    if (!w || !root || !(w->path = strdup(path)) ||
        !(w->ends = malloc((size_t)(n_tensors ? n_tensors : 1) * sizeof *w->ends))) {
        rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    w->fd = -1;
    w->n_tensors = n_tensors;
    if (n_meta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < n_meta; i++)
            if (!cJSON_AddStringToObject(m, metadata[2 * i], metadata[2 * i + 1])) m = NULL;
        if (!m) {
            rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
    }
    uint64_t off = 0;
    for (int i = 0; i < n_tensors; i++) {
        const g3_st_entry *e = &tensors[i];
        uint64_t n_el = 1;
        for (int d = 0; d < e->n_dims; d++) n_el *= (uint64_t)e->shape[d];
        uint64_t end = off + n_el * g3_dtype_size(e->dtype);
        cJSON *t = cJSON_AddObjectToObject(root, e->name);
        cJSON *shape = t ? cJSON_AddArrayToObject(t, "shape") : NULL;
        cJSON *offs = t ? cJSON_AddArrayToObject(t, "data_offsets") : NULL;
        int ok = t && shape && offs && cJSON_AddStringToObject(t, "dtype", g3_dtype_name(e->dtype));
        for (int d = 0; ok && d < e->n_dims; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->shape[d]));
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)end));
        if (!ok) {
            rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        w->ends[i] = end;
        off = end;
    }
    json = cJSON_PrintUnformatted(root);
    if (!json) {
        rc = g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    /* Space-pad the header so that the data region starts on a 64-byte boundary. */
    size_t len = strlen(json), padded = len + (64 - (8 + len) % 64) % 64;
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        rc = g3_error(GEMMA3_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        goto done;
    }
    uint8_t head[8 + 64];
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    rc = write_all(w->fd, head, 8, path);
    if (rc == GEMMA3_OK) rc = write_all(w->fd, json, len, path);
    memset(head, ' ', sizeof head);
    if (rc == GEMMA3_OK) rc = write_all(w->fd, head, padded - len, path);
done:
    cJSON_Delete(root);
    free(json);
    if (rc != GEMMA3_OK) {
        g3_st_writer_abort(w);
        return rc;
    }
    *out = w;
    return GEMMA3_OK;
}

int g3_st_writer_append(g3_st_writer *w, const void *data, size_t n) {
    uint64_t total = w->n_tensors ? w->ends[w->n_tensors - 1] : 0;
    if (n > total - w->written)
        return g3_error(GEMMA3_ERR_ARG, "%s: %zu bytes appended past the declared tensors", w->path, n);
    int rc = write_all(w->fd, data, n, w->path);
    if (rc != GEMMA3_OK) return rc;
    w->written += n;
    while (w->at < w->n_tensors && w->written >= w->ends[w->at]) w->at++;
    return GEMMA3_OK;
}

int g3_st_writer_finish(g3_st_writer *w) {
    uint64_t total = w->n_tensors ? w->ends[w->n_tensors - 1] : 0;
    int rc = GEMMA3_OK;
    if (w->written != total)
        rc = g3_error(GEMMA3_ERR_ARG, "%s: %llu of %llu data bytes written", w->path,
                      (unsigned long long)w->written, (unsigned long long)total);
    if (rc == GEMMA3_OK && fsync(w->fd) != 0)
        rc = g3_error(GEMMA3_ERR_IO, "%s: fsync failed: %s", w->path, strerror(errno));
    if (rc == GEMMA3_OK && close(w->fd) != 0)
        rc = g3_error(GEMMA3_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
    if (rc == GEMMA3_OK) w->fd = -1;
    if (rc != GEMMA3_OK) {
        g3_st_writer_abort(w);
        return rc;
    }
    free(w->path);
    free(w->ends);
    free(w);
    return GEMMA3_OK;
}
