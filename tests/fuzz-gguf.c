/* fuzz-gguf.c - libFuzzer target for the GGUF reader. g3_gguf_parse runs exactly the checks the
 * model loader runs on a mapping. When it accepts an input, every key/value is read through the
 * getters (string arrays walked to their end) and every tensor view's first and last byte are
 * read, so a value or view outside the image is caught by ASan even if the validation wrongly
 * accepted it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_kv(const g3_gguf *g, const g3_gguf_kv *kv) {
    uint32_t u;
    float f;
    int b;
    const char *s;
    size_t len;
    const g3_gguf_kv *arr;
    g3_gguf_get_u32(g, kv->key, 1, &u);
    g3_gguf_get_f32(g, kv->key, 1, &f);
    g3_gguf_get_bool(g, kv->key, 1, &b);
    if (g3_gguf_get_str(g, kv->key, 1, &s, &len) == 0 && len) (void)*(volatile const char *)(s + len - 1);
    if (g3_gguf_get_array(g, kv->key, G3_GGUF_STRING, 1, &arr) == 0) {
        const uint8_t *p = arr->value;
        for (uint64_t i = 0; i < arr->n; i++) {
            p = g3_gguf_next_str(p, &s, &len);
            if (len) (void)*(volatile const char *)(s + len - 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1); /* a private copy: ASan knows where the image ends */
    if (!buf) return 0;
    memcpy(buf, data, size);
    g3_gguf *g;
    if (g3_gguf_parse(buf, size, "fuzz", &g) == 0) {
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < g->n_kv; i++) {
            if (g3_gguf_find(g, g->kv[i].key) != &g->kv[i]) abort();
            read_kv(g, &g->kv[i]);
        }
        for (int64_t i = 0; i < g->n_tensors; i++) {
            const g3_gguf_tensor *t = &g->tensors[i];
            if (g3_gguf_find_tensor(g, t->name) != t) abort();
            if (t->data < buf || t->data + t->n_bytes > buf + size) abort();
            if (t->n_bytes) sink ^= t->data[0] ^ t->data[t->n_bytes - 1];
        }
        (void)sink;
        g3_gguf_free(g);
    }
    free(buf);
    return 0;
}
