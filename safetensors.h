/* safetensors.h - read-only, mmap'd SafeTensors files (single file or sharded set).
 * Knows nothing of Gemma: it validates the container and hands out tensor views. */
#ifndef G3_SAFETENSORS_H
#define G3_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum g3_dtype {
    G3_DTYPE_F32, G3_DTYPE_F16, G3_DTYPE_BF16, G3_DTYPE_F64,
    G3_DTYPE_I64, G3_DTYPE_I32, G3_DTYPE_I16, G3_DTYPE_I8, G3_DTYPE_U8, G3_DTYPE_BOOL,
    G3_DTYPE_F8_E4M3, G3_DTYPE_F8_E5M2,
} g3_dtype;

const char *g3_dtype_name(g3_dtype dt); /* "BF16", ... */
size_t g3_dtype_size(g3_dtype dt);      /* bytes per element */

#define G3_MAX_DIMS 8

typedef struct g3_tensor {
    const char *name;            /* owned by the g3_st it came from */
    g3_dtype dtype;
    int n_dims;
    int64_t shape[G3_MAX_DIMS];  /* C order */
    int64_t n_elements;
    const void *data;            /* points into the read-only mapping; never written */
    size_t n_bytes;
    const char *file;            /* path of the file holding it, for messages */
} g3_tensor;

typedef struct g3_st g3_st; /* an open checkpoint: one file or every shard of an index */

/* Opens one .safetensors file. All validation happens here (header length, JSON shape, dtypes,
 * shapes, offsets ordered/non-overlapping/inside the data region, span == shape x dtype size,
 * duplicate names); on failure *out is NULL and the error names the file and the problem. */
int g3_st_open_file(const char *path, g3_st **out);

/* Opens a checkpoint directory: model.safetensors.index.json (each shard opened once) if present,
 * else model.safetensors. */
int g3_st_open_dir(const char *dir, g3_st **out);

/* How the files' bytes are brought in. MMAP maps them (no copy; the page cache is shared);
 * READ reads them into anonymous memory (huge pages where the kernel gives them); AUTO reads
 * while the files fit in 3/4 of g3_mem_available(), and maps the rest (with populate, a file
 * that fits is mapped and faulted in first, and kept mapped when the page cache holds it in
 * 2 MiB folios, mapped with 2 MiB entries: no copy, the same page-table reach). Tensor views are
 * read-only either way. g3_st_open_file/g3_st_open_dir map. */
typedef enum g3_st_load { G3_ST_LOAD_MMAP, G3_ST_LOAD_READ, G3_ST_LOAD_AUTO } g3_st_load;
int g3_st_open_file_as(const char *path, g3_st_load load, g3_st **out);
int g3_st_open_dir_as(const char *dir, g3_st_load load, g3_st **out);
/* The same, reading on n_threads threads (0 = all CPUs, the caller included); with populate,
 * mapped files that fit in the memory available are also faulted in at open, on those threads
 * (so that using them takes no page faults). The _as forms are n_threads 0, populate 0. */
int g3_st_open_file_ex(const char *path, g3_st_load load, int n_threads, int populate,
                       g3_st **out);
int g3_st_open_dir_ex(const char *dir, g3_st_load load, int n_threads, int populate,
                      g3_st **out);

/* Memory this process can still have, in bytes: MemAvailable (free pages plus the page cache
 * and other memory the kernel can reclaim), capped by what the memory cgroup's limit leaves.
 * The environment variable GEMMA3_MEM_AVAILABLE (bytes), when set, is used instead: it lets a
 * test or a user simulate a smaller machine. */
size_t g3_mem_available(void);

/* What opening did to bring the files in. */
typedef struct g3_st_load_info {
    size_t bytes_read;    /* read into anonymous memory */
    size_t bytes_mapped;  /* used in place from file mappings */
    size_t mem_available; /* g3_mem_available() when the checkpoint was opened */
    int not_populated;    /* populating was asked for but the mapped files do not fit in memory:
                             their pages come from the disk as they are used */
    size_t bytes_huge_mapped; /* of bytes_mapped, populated and mapped with 2 MiB entries */
    double seconds;       /* wall time spent reading, mapping and populating */
} g3_st_load_info;
void g3_st_get_load_info(const g3_st *st, g3_st_load_info *info);

void g3_st_close(g3_st *st);

/* Lookup by exact name, O(1) average. NULL if absent. */
const g3_tensor *g3_st_find(const g3_st *st, const char *name);
int g3_st_count(const g3_st *st);
const g3_tensor *g3_st_at(const g3_st *st, int i);

/* The string value of key in the file's __metadata__ (for a sharded set, the first shard that
 * has the key), or NULL. Valid while st is open. */
const char *g3_st_metadata(const g3_st *st, const char *key);

/* The caller is done with t's bytes: when its file is mapped, drop those pages from this process
 * (madvise MADV_DONTNEED over the pages the tensor touches), so reading a checkpoint tensor by
 * tensor never holds more than one tensor's pages. Reading t again later is still valid (the
 * pages refault from the file). Does nothing for files read into memory. */
void g3_st_release(const g3_st *st, const g3_tensor *t);

/* Validates a SafeTensors image held in memory (the whole file: 8-byte length, header, data).
 * The same checks as g3_st_open_file, without mapping anything; `label` names it in messages.
 * Used by the fuzz target. */
int g3_st_check_buffer(const uint8_t *buf, size_t size, const char *label);

/* The same, keeping the views: they point into buf, and buf and label must outlive the result. */
int g3_st_open_buffer(const uint8_t *buf, size_t size, const char *label, g3_st **out);

/* A file of another container (GGUF), brought in with the same load modes: parse gets the
 * whole file's bytes (mapped or read) and adds views into them with g3_st_add_view (the view's
 * name is copied; its file, data and size are the caller's, inside buf) and metadata with
 * g3_st_add_metadata; names are then indexed as for SafeTensors (duplicates refused). */
typedef int (*g3_st_image_fn)(g3_st *st, const uint8_t *buf, size_t size, const char *label,
                              void *ctx);
int g3_st_open_file_with(const char *path, g3_st_load load, int n_threads, int populate,
                         g3_st_image_fn parse, void *ctx, g3_st **out);
int g3_st_add_view(g3_st *st, const g3_tensor *view);
int g3_st_add_metadata(g3_st *st, const char *key, const char *value);

/* ---- writing ---- */

/* A streaming writer: the header (every tensor's name, dtype, shape and offsets, plus string
 * metadata) goes out first, then the caller appends the tensors' bytes in the declared order.
 * Tensors are contiguous (no gaps, as other readers expect) and the header is space-padded so
 * that the data region starts on a 64-byte boundary. It writes `path` itself: callers wanting an
 * atomic result pass a temporary name and rename it once finished. */
typedef struct g3_st_entry {
    const char *name;
    g3_dtype dtype;
    int n_dims;
    int64_t shape[G3_MAX_DIMS];
} g3_st_entry;
typedef struct g3_st_writer g3_st_writer;

/* metadata: n_meta key, value pairs (metadata[2i], metadata[2i + 1]). */
int g3_st_writer_create(const char *path, const g3_st_entry *tensors, int n_tensors,
                        const char *const *metadata, int n_meta, g3_st_writer **out);
/* Appends n bytes of data (any split: a tensor in pieces, or several at once). */
int g3_st_writer_append(g3_st_writer *w, const void *data, size_t n);
/* Checks that every declared byte was appended, fsyncs and closes; frees w either way (on error
 * the file is removed). */
int g3_st_writer_finish(g3_st_writer *w);
/* Closes and removes the file; frees w. Accepts NULL. */
void g3_st_writer_abort(g3_st_writer *w);

#endif
