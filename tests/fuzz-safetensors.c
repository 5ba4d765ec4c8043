/* fuzz-safetensors.c - libFuzzer target for the SafeTensors header parser and validator.
 * g3_st_open_buffer runs exactly the checks g3_st_open_file runs on a mapping. When it accepts an
 * input, every view is checked (span == elements x dtype size, name found by lookup) and its
 * first and last byte are read, so a view outside the image is caught by ASan even if the
 * validation wrongly accepted it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1); /* a private copy: ASan knows where the image ends */
    if (!buf) return 0;
    memcpy(buf, data, size);
    g3_st *st;
    if (g3_st_open_buffer(buf, size, "fuzz", &st) == 0) {
        volatile uint8_t sink = 0;
        for (int i = 0; i < g3_st_count(st); i++) {
            const g3_tensor *t = g3_st_at(st, i);
            if (t->n_bytes != (size_t)t->n_elements * g3_dtype_size(t->dtype)) abort();
            if (g3_st_find(st, t->name) != t) abort();
            const uint8_t *p = t->data;
            if (p < buf || p + t->n_bytes > buf + size) abort();
            if (t->n_bytes) sink ^= p[0] ^ p[t->n_bytes - 1];
        }
        (void)sink;
        g3_st_close(st);
    }
    free(buf);
    return 0;
}
