/* test-load-modes.c - every way of bringing the weights in gives the same logits, bit for bit:
 * --mmap, --no-mmap, and AUTO under a simulated small and large machine (GEMMA3_MEM_AVAILABLE),
 * each saying in gemma3_model_info which mode it ran. Also the loader's parallel read (parts
 * split on huge-page boundaries over several threads) against the mapping, byte for byte, on a
 * file large enough to be split, and g3_mem_available's override. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gemma3.h"
#include "safetensors.h"

#define MODEL "tests/data/golden/tiny-causal"
static const int32_t tokens[] = {2, 17, 305, 1000, 42, 7, 4000, 99, 3, 250, 11, 12};
#define N_TOK ((int)(sizeof tokens / sizeof tokens[0]))

/* Loads MODEL with mode (env: GEMMA3_MEM_AVAILABLE, NULL = unset), runs the tokens, returns the
 * logits of every position (malloc'd) and the mode reported. */
static float *run(enum gemma3_load_mode mode, const char *env, int exact, int n_threads,
                  const char **mode_out, int *auto_out) {
    if (env) setenv("GEMMA3_MEM_AVAILABLE", env, 1);
    else unsetenv("GEMMA3_MEM_AVAILABLE");
    gemma3_model_params mp = {.load_mode = mode, .n_threads = n_threads};
    gemma3_model *m = NULL;
    int rc = gemma3_model_load_ex(MODEL, &mp, &m);
    unsetenv("GEMMA3_MEM_AVAILABLE");
    CHECK_MSG(rc == GEMMA3_OK, "load mode %d: %s", (int)mode, gemma3_last_error());
    if (rc != GEMMA3_OK) return NULL;
    gemma3_model_info info;
    gemma3_model_get_info(m, &info);
    *mode_out = info.load_mode;
    *auto_out = info.load_auto;
    CHECK(info.load_bytes > 0);
    gemma3_session_params sp = gemma3_session_default_params();
    sp.exact = exact;
    sp.n_threads = 2;
    sp.n_ctx = 64;
    gemma3_session *s = NULL;
    float *logits = malloc((size_t)N_TOK * (size_t)info.vocab_size * sizeof *logits);
    rc = gemma3_session_init(m, &sp, &s);
    CHECK_MSG(rc == GEMMA3_OK, "session: %s", gemma3_last_error());
    if (rc == GEMMA3_OK) CHECK_EQ_INT(gemma3_session_forward(s, tokens, N_TOK, logits), GEMMA3_OK);
    gemma3_session_free(s);
    gemma3_model_free(m);
    return logits;
}

static void test_modes(int exact) {
    const struct {
        enum gemma3_load_mode mode;
        const char *env, *expect;
        int is_auto, n_threads;
    } cases[] = {
        {GEMMA3_LOAD_MMAP, NULL, "mmap", 0, 2},
        {GEMMA3_LOAD_READ, NULL, "read", 0, 3},
        {GEMMA3_LOAD_AUTO, "1000", "mmap", 1, 2},          /* a machine with 1000 bytes free */
        {GEMMA3_LOAD_AUTO, "1000000000000", "read", 1, 1}, /* one with 1 TB */
        {GEMMA3_LOAD_MMAP, "1000", "mmap", 0, 2},          /* mapped, does not fit: not populated */
    };
    float *ref = NULL;
    size_t n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = "?";
        int is_auto = -1;
        float *l = run(cases[i].mode, cases[i].env, exact, cases[i].n_threads, &got, &is_auto);
        if (!l) continue;
        CHECK_MSG(strcmp(got, cases[i].expect) == 0, "case %zu: mode %s, expected %s", i, got,
                  cases[i].expect);
        CHECK_EQ_INT(is_auto, cases[i].is_auto);
        if (!ref) {
            ref = l;
            n = (size_t)N_TOK * 4096; /* tiny-causal's vocabulary */
            continue;
        }
        CHECK_MSG(memcmp(ref, l, n * sizeof *l) == 0, "case %zu (exact %d): logits differ from --mmap",
                  i, exact);
        free(l);
    }
    free(ref);
}

/* A 13 MB file of one U8 tensor with a position-dependent pattern: READ on 1, 2 and 3 threads must
 * give the bytes the mapping gives. */
static void test_parallel_read(void) {
    char path[] = "/tmp/g3-test-load-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    const int64_t n = 13 * 1000 * 1000 + 17;
    g3_st_entry e = {.name = "x", .dtype = G3_DTYPE_U8, .n_dims = 1, .shape = {n}};
    g3_st_writer *w = NULL;
    uint8_t *buf = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
    int rc = g3_st_writer_create(path, &e, 1, NULL, 0, &w);
    if (rc == GEMMA3_OK) rc = g3_st_writer_append(w, buf, (size_t)n);
    if (rc == GEMMA3_OK) rc = g3_st_writer_finish(w);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    for (int threads = 1; rc == GEMMA3_OK && threads <= 3; threads++) {
        for (int populate = 0; populate < 2; populate++) {
            g3_st *st = NULL;
            g3_st_load load = populate ? G3_ST_LOAD_MMAP : G3_ST_LOAD_READ;
            CHECK_EQ_INT(g3_st_open_file_ex(path, load, threads, populate, &st), GEMMA3_OK);
            if (!st) continue;
            const g3_tensor *t = g3_st_find(st, "x");
            CHECK(t && t->n_bytes == (size_t)n);
            if (t) CHECK_MSG(memcmp(t->data, buf, (size_t)n) == 0, "%d threads, %s: bytes differ",
                             threads, populate ? "mapped" : "read");
            g3_st_load_info li;
            g3_st_get_load_info(st, &li);
            CHECK(populate ? li.bytes_mapped > (size_t)n && !li.bytes_read
                           : li.bytes_read > (size_t)n && !li.bytes_mapped);
            if (!populate) CHECK_EQ_INT(((uintptr_t)t->data - 0) % 64, 0); /* data section aligned */
            g3_st_close(st);
        }
    }
    /* AUTO with populate: read, or kept mapped when the page cache holds the file in 2 MiB folios
     * (then the 2 MiB-mapped bytes say so); the bytes are the file's either way. */
    g3_st *st = NULL;
    setenv("GEMMA3_MEM_AVAILABLE", "1000000000000", 1);
    CHECK_EQ_INT(g3_st_open_file_ex(path, G3_ST_LOAD_AUTO, 2, 1, &st), GEMMA3_OK);
    unsetenv("GEMMA3_MEM_AVAILABLE");
    if (st) {
        const g3_tensor *t = g3_st_find(st, "x");
        CHECK(t && memcmp(t->data, buf, (size_t)n) == 0);
        g3_st_load_info li;
        g3_st_get_load_info(st, &li);
        CHECK(li.bytes_read ? !li.bytes_mapped && !li.bytes_huge_mapped
                            : li.bytes_mapped && li.bytes_huge_mapped + (5u << 20) >= li.bytes_mapped);
        printf("AUTO on a %lld-byte file just written: %s (%zu bytes 2 MiB-mapped)\n", (long long)n,
               li.bytes_read ? "read" : "kept mapped", li.bytes_huge_mapped);
        g3_st_close(st);
    }
    free(buf);
    unlink(path);
}

static void test_mem_available(void) {
    unsetenv("GEMMA3_MEM_AVAILABLE");
    size_t real = g3_mem_available();
    CHECK(real > (size_t)16 << 20); /* whatever machine runs this has more than 16 MB to give */
    setenv("GEMMA3_MEM_AVAILABLE", "12345", 1);
    CHECK_EQ_INT(g3_mem_available(), 12345);
    unsetenv("GEMMA3_MEM_AVAILABLE");
}

int main(void) {
    test_mem_available();
    test_parallel_read();
    test_modes(1);
    test_modes(0);
    return check_report();
}
