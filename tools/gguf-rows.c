/* gguf-rows - the bytes of the first ROWS rows of one tensor of a GGUF file, as stored, into OUT
 * (tools/make-gguf-fixtures.sh keeps slices of llama-quantize's blocks this way: the whole files
 * would be megabytes each).
 * Usage: gguf-rows FILE.gguf TENSOR ROWS OUT */
#include <stdio.h>
#include <stdlib.h>

#include "gguf.h"
#include "gemma3.h"
#include "util.h"

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)size)) &&
            fread(buf, 1, (size_t)size, f) != (size_t)size) {
            free(buf);
            buf = NULL;
        }
        *n = size > 0 ? (size_t)size : 0;
    }
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: gguf-rows FILE.gguf TENSOR ROWS OUT\n");
        return 2;
    }
    size_t n = 0;
    uint8_t *img = read_all(argv[1], &n);
    g3_gguf *g = NULL;
    if (!img || g3_gguf_parse(img, n, argv[1], &g) != GEMMA3_OK) {
        fprintf(stderr, "gguf-rows: %s: %s\n", argv[1], img ? gemma3_last_error() : "cannot read");
        return 1;
    }
    const g3_gguf_tensor *t = g3_gguf_find_tensor(g, argv[2]);
    const long rows = strtol(argv[3], NULL, 10);
    if (!t || t->n_dims != 2 || rows < 1 || rows > t->ne[1]) {
        fprintf(stderr, "gguf-rows: %s: no 2-d tensor %s with %s rows\n", argv[1], argv[2], argv[3]);
        return 1;
    }
    const size_t bytes = t->n_bytes / (size_t)t->ne[1] * (size_t)rows;
    gemma3_outfile *o = NULL;
    int rc = gemma3_outfile_open(argv[4], &o);
    if (rc == GEMMA3_OK) {
        if (fwrite(t->data, 1, bytes, gemma3_outfile_stream(o)) == bytes) rc = gemma3_outfile_commit(o);
        else gemma3_outfile_discard(o), rc = GEMMA3_ERR_IO;
    }
    if (rc != GEMMA3_OK) fprintf(stderr, "gguf-rows: %s\n", gemma3_last_error());
    g3_gguf_free(g);
    free(img);
    return rc == GEMMA3_OK ? 0 : 1;
}
