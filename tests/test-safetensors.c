/* test-safetensors.c - the SafeTensors container: good files give the right views, and every
 * malformed case of the bad-input table gets its error code and a message naming the problem. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "safetensors.h"
#include "util.h"

static char tmpdir[] = "/tmp/g3-test-st-XXXXXX";

static const char *path_of(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_bytes(const char *name, const void *p, size_t n) {
    FILE *f = fopen(path_of(name), "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path_of(name));
        exit(1);
    }
}

/* A file: u64 length of the header (padded with `pad` spaces), the header, then n_data bytes
 * valued 0, 1, 2, ... Returns the full image in *image (caller frees) for check_buffer. */
static size_t build(const char *header, size_t pad, size_t n_data, uint8_t **image) {
    size_t hl = strlen(header) + pad, size = 8 + hl + n_data;
    uint8_t *b = malloc(size);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, strlen(header));
    memset(b + 8 + strlen(header), ' ', pad);
    for (size_t i = 0; i < n_data; i++) b[8 + hl + i] = (uint8_t)i;
    *image = b;
    return size;
}

static void write_st(const char *name, const char *header, size_t pad, size_t n_data) {
    uint8_t *img;
    size_t n = build(header, pad, n_data, &img);
    write_bytes(name, img, n);
    free(img);
}

/* Opening `name` must fail with `code` and a message containing `want`; the in-memory check of
 * the same bytes must agree (same code, same message), so the fuzz target tests the loader. */
static void expect_fail_file(const char *name, int code, const char *want) {
    g3_st *st = (g3_st *)1;
    int rc = g3_st_open_file(path_of(name), &st);
    CHECK_MSG(rc == code, "%s: rc %d, want %d (%s)", name, rc, code, gemma3_last_error());
    CHECK_MSG(st == NULL, "%s: out pointer not cleared", name);
    CHECK_MSG(strstr(gemma3_last_error(), want) != NULL, "%s: message '%s' lacks '%s'", name,
              gemma3_last_error(), want);
    CHECK_MSG(strstr(gemma3_last_error(), path_of(name)) != NULL, "%s: message '%s' lacks the path",
              name, gemma3_last_error());
}

static void expect_fail(const char *name, const char *header, size_t n_data, const char *want) {
    write_st(name, header, 0, n_data);
    expect_fail_file(name, GEMMA3_ERR_FORMAT, want);
    uint8_t *img;
    size_t n = build(header, 0, n_data, &img);
    int rc = g3_st_check_buffer(img, n, "buf");
    CHECK_MSG(rc == GEMMA3_ERR_FORMAT, "%s (buffer): rc %d", name, rc);
    CHECK_MSG(strstr(gemma3_last_error(), want) != NULL, "%s (buffer): '%s' lacks '%s'", name,
              gemma3_last_error(), want);
    free(img);
}

static void test_good_single(void) {
    /* two BF16 tensors, a scalar F32, an empty tensor, metadata, a space-padded header */
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]},"
                    "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                    "\"e\":{\"dtype\":\"I8\",\"shape\":[0,5],\"data_offsets\":[16,16]},"
                    "\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[16,20]}}";
    write_st("good.safetensors", h, 5, 20);
    g3_st *st = NULL;
    int rc = g3_st_open_file(path_of("good.safetensors"), &st);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    if (rc != GEMMA3_OK) return;
    CHECK_EQ_INT(g3_st_count(st), 4);
    const g3_tensor *a = g3_st_find(st, "a");
    CHECK(a != NULL);
    if (a) {
        CHECK_EQ_INT(a->dtype, G3_DTYPE_BF16);
        CHECK_EQ_INT(a->n_dims, 2);
        CHECK_EQ_INT(a->shape[0], 2);
        CHECK_EQ_INT(a->shape[1], 3);
        CHECK_EQ_INT(a->n_elements, 6);
        CHECK_EQ_INT(a->n_bytes, 12);
        CHECK_EQ_INT(((const uint8_t *)a->data)[0], 0);
        CHECK_EQ_INT(((const uint8_t *)a->data)[11], 11);
        CHECK(strcmp(a->file, path_of("good.safetensors")) == 0);
    }
    const g3_tensor *b = g3_st_find(st, "b");
    CHECK(b && b->n_dims == 0 && b->n_elements == 1 && b->n_bytes == 4);
    if (b) CHECK_EQ_INT(((const uint8_t *)b->data)[0], 12);
    const g3_tensor *c = g3_st_find(st, "c");
    CHECK(c && c->dtype == G3_DTYPE_U8 && ((const uint8_t *)c->data)[3] == 19);
    const g3_tensor *e = g3_st_find(st, "e");
    CHECK(e && e->n_elements == 0 && e->n_bytes == 0);
    CHECK(g3_st_find(st, "__metadata__") == NULL);
    CHECK(g3_st_find(st, "zz") == NULL);
    CHECK(g3_st_at(st, 4) == NULL && g3_st_at(st, -1) == NULL && g3_st_at(st, 0) != NULL);
    g3_st_close(st);
}

static void test_dtypes(void) {
    static const char *names[] = {"BF16", "F16", "F32", "F64", "I64", "I32", "I16", "I8", "U8",
                                  "BOOL", "F8_E4M3", "F8_E5M2"};
    static const size_t sizes[] = {2, 2, 4, 8, 8, 4, 2, 1, 1, 1, 1, 1};
    for (int i = 0; i < 12; i++) {
        char h[256];
        snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%zu]}}",
                 names[i], 3 * sizes[i]);
        uint8_t *img;
        size_t n = build(h, 0, 3 * sizes[i], &img);
        CHECK_MSG(g3_st_check_buffer(img, n, "x") == GEMMA3_OK, "%s: %s", names[i],
                  gemma3_last_error());
        free(img);
        write_st("dt.safetensors", h, 0, 3 * sizes[i]);
        g3_st *st;
        if (g3_st_open_file(path_of("dt.safetensors"), &st) == GEMMA3_OK) {
            const g3_tensor *t = g3_st_find(st, "t");
            CHECK(t && strcmp(g3_dtype_name(t->dtype), names[i]) == 0 &&
                  g3_dtype_size(t->dtype) == sizes[i]);
            g3_st_close(st);
        } else {
            CHECK_MSG(0, "%s", gemma3_last_error());
        }
    }
}

static void test_bad_files(void) {
    g3_st *st = (g3_st *)1;
    CHECK_EQ_INT(g3_st_open_file(path_of("does-not-exist.safetensors"), &st), GEMMA3_ERR_IO);
    CHECK(st == NULL);
    CHECK(strstr(gemma3_last_error(), "does-not-exist.safetensors: cannot open") != NULL);

    write_bytes("short.safetensors", "\x10\0\0", 3);
    expect_fail_file("short.safetensors", GEMMA3_ERR_FORMAT, "3 bytes, too short");
    write_bytes("empty.safetensors", "", 0);
    expect_fail_file("empty.safetensors", GEMMA3_ERR_FORMAT, "0 bytes, too short");

    /* header length beyond the file */
    uint8_t img[16] = {0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, '{', '}'};
    write_bytes("long.safetensors", img, 10);
    expect_fail_file("long.safetensors", GEMMA3_ERR_FORMAT, "header length 255 is beyond the end");
    uint8_t huge[9] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{'};
    write_bytes("huge.safetensors", huge, 9);
    expect_fail_file("huge.safetensors", GEMMA3_ERR_FORMAT, "is beyond the end");
    CHECK_EQ_INT(g3_st_check_buffer(huge, 9, "x"), GEMMA3_ERR_FORMAT);

    expect_fail("notjson.safetensors", "{\"a\": [1, 2", 0, "header is not valid JSON");
    expect_fail("garbage.safetensors", "hello", 0, "header is not valid JSON");
    expect_fail("array.safetensors", "[1, 2]", 0, "header is an array, not a JSON object");
    expect_fail("trailing.safetensors", "{} x", 0, "trailing bytes after the JSON");
    expect_fail("entry.safetensors", "{\"a\": 3}", 0, "tensor 'a': expected an object, got a number");
    expect_fail("dtype.safetensors",
                "{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                "tensor 'a': unknown dtype 'Q4_K'");
    expect_fail("nodtype.safetensors", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                "tensor 'a': dtype missing");
    expect_fail("neg.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,2]}}", 2,
                "shape[0] = -1 is not a non-negative integer");
    expect_fail("float.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[2, 1.5],\"data_offsets\":[0,3]}}", 3,
                "shape[1] = 1.5 is not a non-negative integer");
    expect_fail("strshape.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[\"2\"],\"data_offsets\":[0,2]}}", 2,
                "shape[0] is a string, not a non-negative integer");
    expect_fail("bigshape.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[1e300],\"data_offsets\":[0,2]}}", 2,
                "is not a non-negative integer");
    expect_fail("overflow.safetensors",
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                "\"data_offsets\":[0,2]}}",
                2, "overflows");
    expect_fail("dims.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
                1, "9 dimensions");
    expect_fail("noshape.safetensors", "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,2]}}", 2,
                "shape missing or not an array");
    expect_fail("reversed.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,2]}}", 8,
                "tensor 'a': data_offsets [4, 2] reversed");
    expect_fail("pastend.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", 8,
                "tensor 'a': data_offsets [4, 12] past the end of the data region (8 bytes)");
    /* the boundary itself: ending exactly at the data's end loads, one byte past fails */
    expect_fail("pastend1.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[4,9]}}", 8,
                "tensor 'a': data_offsets [4, 9] past the end of the data region (8 bytes)");
    expect_fail("pastend1b.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[4,9]}}", 8,
                "tensor 'b': data_offsets [4, 9] past the end of the data region (8 bytes)");
    expect_fail("overlap.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
                12, "tensor 'b' data_offsets [4, 12] overlap tensor 'a' [0, 8]");
    /* by a single byte */
    expect_fail("overlap1.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[7,9]}}",
                9, "tensor 'b' data_offsets [7, 9] overlap tensor 'a' [0, 8]");
    /* overlap found even when the header lists the later tensor first */
    expect_fail("overlap2.safetensors",
                "{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",
                8, "overlap");
    expect_fail("span.safetensors",
                "{\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[64],"
                "\"data_offsets\":[0,10]}}",
                10,
                "tensor 'model.norm.weight': data_offsets [0, 10] span 10 bytes but shape [64] x "
                "BF16 needs 128");
    expect_fail("offsets.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0]}}",
                2, "data_offsets missing or not a [begin, end] pair");
    expect_fail("offsetsneg.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[-2,0]}}", 2,
                "data_offsets are not non-negative integers");
    expect_fail("dup.safetensors",
                "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}",
                4, "duplicate tensor 'a'");
    expect_fail("meta.safetensors", "{\"__metadata__\":{\"format\":3}}", 0,
                "__metadata__.format: expected a string, got a number");
    expect_fail("meta2.safetensors", "{\"__metadata__\":[]}", 0,
                "__metadata__: expected an object");
    expect_fail("emptyname.safetensors",
                "{\"\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "empty name");

    /* a directory is not a file */
    CHECK_EQ_INT(g3_st_open_file(tmpdir, &st), GEMMA3_ERR_IO);
    CHECK(strstr(gemma3_last_error(), "not a regular file") != NULL);
}

static void write_index(const char *dir, const char *json) {
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(p, "w");
    fputs(json, f);
    fclose(f);
}

static void test_sharded(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sharded", tmpdir);
    mkdir(dir, 0755);
    write_st("sharded/s1.safetensors",
             "{\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
             "\"y\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[2,5]}}",
             3, 5);
    write_st("sharded/s2.safetensors", "{\"z\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}",
             0, 8);
    write_index(dir, "{\"metadata\":{\"total_size\":13},\"weight_map\":{\"x\":\"s1.safetensors\","
                     "\"z\":\"s2.safetensors\",\"y\":\"s1.safetensors\"}}");
    g3_st *st = NULL;
    int rc = g3_st_open_dir(dir, &st);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    if (st) {
        CHECK_EQ_INT(g3_st_count(st), 3);
        const g3_tensor *y = g3_st_find(st, "y"), *z = g3_st_find(st, "z");
        CHECK(y && y->n_elements == 3 && ((const uint8_t *)y->data)[0] == 2);
        CHECK(y && strstr(y->file, "s1.safetensors"));
        CHECK(z && z->n_dims == 2 && ((const uint8_t *)z->data)[7] == 7);
        CHECK(z && strstr(z->file, "s2.safetensors"));
        g3_st_close(st);
    }

    /* index naming a missing shard */
    write_index(dir, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"w\":\"s9.safetensors\"}}");
    rc = g3_st_open_dir(dir, &st);
    CHECK_EQ_INT(rc, GEMMA3_ERR_IO);
    CHECK(st == NULL);
    CHECK_MSG(strstr(gemma3_last_error(), "model.safetensors.index.json: shard 's9.safetensors' "
                                          "(for tensor 'w') does not exist"),
              "%s", gemma3_last_error());
    /* tensor not in the shard the index names */
    write_index(dir, "{\"weight_map\":{\"x\":\"s2.safetensors\",\"z\":\"s2.safetensors\"}}");
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_FORMAT);
    CHECK_MSG(strstr(gemma3_last_error(), "tensor 'x' is not in shard 's2.safetensors'"), "%s",
              gemma3_last_error());
    write_index(dir, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"z\":\"s1.safetensors\",\"y\":\"s2.safetensors\"}}");
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_FORMAT);
    CHECK_MSG(strstr(gemma3_last_error(), "tensor 'z' is in ") &&
                  strstr(gemma3_last_error(), "not in shard 's1.safetensors'"),
              "%s", gemma3_last_error());
    /* the same tensor in two shards */
    write_st("sharded/s3.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
             0, 2);
    write_index(dir, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"q\":\"s3.safetensors\"}}");
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_FORMAT);
    CHECK_MSG(strstr(gemma3_last_error(), "s3.safetensors: tensor 'x' is also in"), "%s",
              gemma3_last_error());
    /* malformed indexes */
    write_index(dir, "{\"weight_map\": 3}");
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_FORMAT);
    CHECK(strstr(gemma3_last_error(), "weight_map missing, empty or not an object"));
    write_index(dir, "{\"weight_map\":{\"x\":\"../s1.safetensors\"}}");
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_FORMAT);
    CHECK(strstr(gemma3_last_error(), "expected a shard file name in this directory"));
    write_index(dir, "{\"weight_map\":");
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_FORMAT);
    CHECK(strstr(gemma3_last_error(), "model.safetensors.index.json: not valid JSON"));
    /* a bad shard's message names the shard */
    write_st("sharded/s1.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,3]}}",
             0, 3);
    write_index(dir, "{\"weight_map\":{\"x\":\"s1.safetensors\"}}");
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_FORMAT);
    CHECK(strstr(gemma3_last_error(), "s1.safetensors: tensor 'x': data_offsets [0, 3] span 3"));

    /* directories: missing, empty */
    CHECK_EQ_INT(g3_st_open_dir(path_of("nope"), &st), GEMMA3_ERR_IO);
    CHECK(strstr(gemma3_last_error(), "nope: cannot open"));
    snprintf(dir, sizeof dir, "%s/emptydir", tmpdir);
    mkdir(dir, 0755);
    CHECK_EQ_INT(g3_st_open_dir(dir, &st), GEMMA3_ERR_IO);
    CHECK(strstr(gemma3_last_error(), "no model.safetensors or model.safetensors.index.json"));
}

/* Many tensors: the hash table grows and every name is still found. */
static void test_many(void) {
    enum { N = 1000 };
    size_t cap = N * 96 + 16, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(h + len, cap - len,
                                "%s\"layers.%d.w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                                i ? "," : "", i, N - 1 - i, N - i);
    snprintf(h + len, cap - len, "}");
    write_st("many.safetensors", h, 0, N);
    free(h);
    g3_st *st;
    CHECK_EQ_INT(g3_st_open_file(path_of("many.safetensors"), &st), GEMMA3_OK);
    int found = 0;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "layers.%d.w", i);
        const g3_tensor *t = g3_st_find(st, name);
        found += t && ((const uint8_t *)t->data)[0] == (uint8_t)(N - 1 - i);
    }
    CHECK_EQ_INT(found, N);
    g3_st_close(st);
}

/* The streaming writer: what it writes opens with the exact names, dtypes, shapes, metadata and
 * bytes; the header is padded so data starts on 64 bytes; offsets are contiguous; appending in
 * any split works; too few or too many bytes are errors and leave no file. g3_st_release keeps
 * the views valid. */
static void test_writer(void) {
    g3_st_entry ent[3] = {
        {"b.weight", G3_DTYPE_U8, 2, {3, 5}},
        {"a \"odd\" name", G3_DTYPE_BF16, 1, {4}},
        {"empty", G3_DTYPE_F32, 2, {0, 7}},
    };
    const char *meta[4] = {"format", "pt", "gemma3.quant", "q4_0"};
    uint8_t data[15 + 8];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(3 * i + 1);
    g3_st_writer *w = NULL;
    int rc = g3_st_writer_create(path_of("w.safetensors"), ent, 3, meta, 2, &w);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    if (rc != GEMMA3_OK) return;
    CHECK_EQ_INT(g3_st_writer_append(w, data, 4), GEMMA3_OK); /* pieces across tensors */
    CHECK_EQ_INT(g3_st_writer_append(w, data + 4, 13), GEMMA3_OK);
    CHECK_EQ_INT(g3_st_writer_append(w, data + 17, 6), GEMMA3_OK);
    CHECK_EQ_INT(g3_st_writer_append(w, data, 1), GEMMA3_ERR_ARG); /* past the declared bytes */
    CHECK_EQ_INT(g3_st_writer_finish(w), GEMMA3_OK);
    g3_st *st = NULL;
    rc = g3_st_open_file(path_of("w.safetensors"), &st);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    if (rc != GEMMA3_OK) return;
    CHECK_EQ_INT(g3_st_count(st), 3);
    CHECK(strcmp(g3_st_metadata(st, "gemma3.quant"), "q4_0") == 0);
    CHECK(strcmp(g3_st_metadata(st, "format"), "pt") == 0);
    CHECK(g3_st_metadata(st, "other") == NULL);
    const g3_tensor *b = g3_st_find(st, "b.weight"), *a = g3_st_find(st, "a \"odd\" name");
    const g3_tensor *e = g3_st_find(st, "empty");
    CHECK(b && a && e);
    if (b && a && e) {
        CHECK(b->dtype == G3_DTYPE_U8 && b->n_dims == 2 && b->shape[0] == 3 && b->shape[1] == 5);
        CHECK(a->dtype == G3_DTYPE_BF16 && a->n_dims == 1 && a->shape[0] == 4);
        CHECK(e->n_elements == 0 && e->n_dims == 2 && e->shape[1] == 7);
        CHECK(memcmp(b->data, data, 15) == 0 && memcmp(a->data, data + 15, 8) == 0);
        CHECK((const uint8_t *)a->data == (const uint8_t *)b->data + 15); /* in order, no gap */
        g3_st_release(st, b); /* pages dropped; the view still reads the same bytes */
        CHECK(memcmp(b->data, data, 15) == 0);
    }
    g3_st_close(st);
    uint8_t *img;
    size_t size;
    char *text;
    if (g3_read_file(path_of("w.safetensors"), &text, &size) == GEMMA3_OK) {
        img = (uint8_t *)text;
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--) hl = hl << 8 | img[i];
        CHECK_EQ_INT((8 + hl) % 64, 0);
        CHECK_EQ_INT(size, 8 + hl + 23);
        const char *head = "{\"__metadata__\":{\"format\":\"pt\",\"gemma3.quant\":\"q4_0\"}";
        CHECK_MSG(strncmp(text + 8, head, strlen(head)) == 0, "%.80s", text + 8);
        free(text);
    }
    /* too few bytes: an error, and the file is gone */
    rc = g3_st_writer_create(path_of("short.safetensors"), ent, 2, NULL, 0, &w);
    CHECK_EQ_INT(rc, GEMMA3_OK);
    if (rc == GEMMA3_OK) {
        CHECK_EQ_INT(g3_st_writer_append(w, data, 10), GEMMA3_OK);
        CHECK_EQ_INT(g3_st_writer_finish(w), GEMMA3_ERR_ARG);
        CHECK(strstr(gemma3_last_error(), "10 of 23 data bytes") != NULL);
    }
    CHECK(access(path_of("short.safetensors"), F_OK) != 0);
    rc = g3_st_writer_create(path_of("aborted.safetensors"), ent, 2, NULL, 0, &w);
    g3_st_writer_abort(w);
    CHECK(access(path_of("aborted.safetensors"), F_OK) != 0);
    CHECK_EQ_INT(g3_st_writer_create(path_of("no-such-dir/x.safetensors"), ent, 2, NULL, 0, &w), GEMMA3_ERR_IO);
    CHECK(w == NULL);
}

static long resident_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* g3_st_release really gives a mapped tensor's pages back (quantizing a model tensor by tensor
 * relies on it), and the view stays readable. */
static void test_release(void) {
    enum { MB = 1 << 20, N = 24 * MB };
    g3_st_entry ent = {"big", G3_DTYPE_U8, 1, {N}};
    g3_st_writer *w = NULL;
    if (g3_st_writer_create(path_of("big.safetensors"), &ent, 1, NULL, 0, &w) != GEMMA3_OK) {
        CHECK_MSG(0, "%s", gemma3_last_error());
        return;
    }
    static uint8_t block[MB];
    for (int i = 0; i < MB; i++) block[i] = (uint8_t)(i * 7);
    for (int i = 0; i < N / MB; i++) CHECK_EQ_INT(g3_st_writer_append(w, block, MB), GEMMA3_OK);
    CHECK_EQ_INT(g3_st_writer_finish(w), GEMMA3_OK);
    g3_st *st = NULL;
    if (g3_st_open_file(path_of("big.safetensors"), &st) != GEMMA3_OK) return;
    const g3_tensor *t = g3_st_find(st, "big");
    unsigned sum = 0;
    for (size_t i = 0; i < t->n_bytes; i += 4096) sum += ((const uint8_t *)t->data)[i];
    long before = resident_kb();
    g3_st_release(st, t);
    long after = resident_kb();
    CHECK_MSG(before - after >= 20 * 1024, "release gave back %ld KB of %d", before - after, N / 1024);
    unsigned again = 0;
    for (size_t i = 0; i < t->n_bytes; i += 4096) again += ((const uint8_t *)t->data)[i];
    CHECK_EQ_INT(again, sum);
    g3_st_close(st);
    /* read into memory: release must not lose the bytes */
    if (g3_st_open_file_as(path_of("big.safetensors"), G3_ST_LOAD_READ, &st) != GEMMA3_OK) return;
    t = g3_st_find(st, "big");
    g3_st_release(st, t);
    again = 0;
    for (size_t i = 0; i < t->n_bytes; i += 4096) again += ((const uint8_t *)t->data)[i];
    CHECK_EQ_INT(again, sum);
    g3_st_close(st);
}

int main(void) {
    if (!mkdtemp(tmpdir)) { /* no scratch space: the suite cannot run here (77 = skipped) */
        printf("SKIP mkdtemp %s failed\n", tmpdir);
        return 77;
    }
    test_good_single();
    test_dtypes();
    test_bad_files();
    test_sharded();
    test_many();
    test_writer();
    test_release();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return check_report();
}
