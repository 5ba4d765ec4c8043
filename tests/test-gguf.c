/* test-gguf.c - GGUF files: the reader on hand-built good and malformed images (every one a
 * one-line error naming the file and the key or tensor), the writer's round trip, the Gemma 3
 * binding's refusals, and on the fixtures llama.cpp's tools made (tests/data/gguf):
 *   - the tokenizer from a GGUF's metadata gives the ids of tokenizer.model on every public case;
 *   - a GGUF gives logits bit-identical to the safetensors directory of the same weights (BF16,
 *     quantized at load, and llama-quantize --pure Q8_0 / Q4_0 files), --exact and default,
 *     under every ISA table this CPU has. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gemma3.h"
#include "gguf-model.h"
#include "gguf.h"
#include "kernels.h"
#include "quant-rows.h"
#include "quant.h"
#include "tokenizer.h"
#include "util.h"

#define FIX "tests/data/gguf"
#define WORDNET "models/wordnet-gemma"

static char tmpdir[] = "/tmp/g3-test-gguf-XXXXXX";

static const char *tmp(const char *name) {
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static int one_line(const char *msg) { return *msg && !strchr(msg, '\n'); }

/* ---- a hand-built image ------------------------------------------------------------------- */

typedef struct image {
    uint8_t *b;
    size_t n, cap;
} image;

static void put(image *im, const void *p, size_t n) {
    if (im->n + n > im->cap) {
        im->cap = (im->n + n) * 2 + 256;
        im->b = realloc(im->b, im->cap);
    }
    memcpy(im->b + im->n, p, n);
    im->n += n;
}
static void put_u32(image *im, uint32_t v) { put(im, &v, 4); }
static void put_u64(image *im, uint64_t v) { put(im, &v, 8); }
static void put_str(image *im, const char *s, uint64_t len) {
    put_u64(im, len);
    put(im, s, strlen(s));
}

/* What to spoil in the good image. */
typedef struct spoil {
    const char *magic;
    uint32_t version;
    uint64_t n_kv, n_tensors;   /* 0: the right counts */
    uint64_t key_len;           /* 0: the real length of the first key */
    uint64_t arr_n;             /* 0: 2 */
    uint32_t t1_type, t1_dims;  /* 0: Q8_0, 2 */
    uint64_t t1_offset;         /* 0: 32 */
    int dup_key, dup_tensor;
    uint32_t alignment;         /* 0: 32 */
} spoil;

/* Keys general.architecture = "gemma3", general.alignment, tokens = ["a", "bc"]; tensors t0 F32
 * [8] at 0 and t1 Q8_0 [2][32] at 32; data 32 + 68 bytes (byte i of the region is i). */
static image build(const spoil *s) {
    image im = {0};
    put(&im, s->magic ? s->magic : "GGUF", 4);
    put_u32(&im, s->version ? s->version : 3);
    put_u64(&im, s->n_tensors ? s->n_tensors : 2);
    put_u64(&im, s->n_kv ? s->n_kv : 3 + (s->dup_key != 0));
    put_str(&im, "general.architecture", s->key_len ? s->key_len : 20);
    put_u32(&im, G3_GGUF_STRING);
    put_str(&im, "gemma3", 6);
    put_str(&im, "general.alignment", 17);
    put_u32(&im, G3_GGUF_U32);
    put_u32(&im, s->alignment ? s->alignment : 32);
    put_str(&im, "tokens", 6);
    put_u32(&im, G3_GGUF_ARRAY);
    put_u32(&im, G3_GGUF_STRING);
    put_u64(&im, s->arr_n ? s->arr_n : 2);
    put_str(&im, "a", 1);
    put_str(&im, "bc", 2);
    if (s->dup_key) {
        put_str(&im, "general.alignment", 17);
        put_u32(&im, G3_GGUF_U32);
        put_u32(&im, 32);
    }
    put_str(&im, "t0", 2);
    put_u32(&im, 1);
    put_u64(&im, 8);
    put_u32(&im, G3_GGML_F32);
    put_u64(&im, 0);
    put_str(&im, s->dup_tensor ? "t0" : "t1", 2);
    put_u32(&im, s->t1_dims ? s->t1_dims : 2);
    for (uint32_t d = 0; d < (s->t1_dims ? s->t1_dims : 2); d++) put_u64(&im, d == 0 ? 32 : 2);
    put_u32(&im, s->t1_type ? s->t1_type : G3_GGML_Q8_0);
    put_u64(&im, s->t1_offset ? s->t1_offset : 32);
    while (im.n % 32) put(&im, "", 1);
    for (int i = 0; i < 100; i++) {
        uint8_t v = (uint8_t)i;
        put(&im, &v, 1);
    }
    return im;
}

/* Parsing must fail with `code` and one line holding `want`. */
static void expect_fail(const spoil *s, int code, const char *want) {
    image im = build(s);
    g3_gguf *g = (g3_gguf *)1;
    int rc = g3_gguf_parse(im.b, im.n, "bad.gguf", &g);
    CHECK_MSG(rc == code, "want '%s': rc %d (%s)", want, rc, gemma3_last_error());
    CHECK(g == NULL);
    CHECK_MSG(strstr(gemma3_last_error(), want) && strstr(gemma3_last_error(), "bad.gguf") &&
              one_line(gemma3_last_error()), "message '%s' lacks '%s'", gemma3_last_error(), want);
    free(im.b);
}

static void test_good_image(void) {
    spoil s = {0};
    image im = build(&s);
    g3_gguf *g = NULL;
    CHECK_MSG(g3_gguf_parse(im.b, im.n, "good.gguf", &g) == GEMMA3_OK, "%s", gemma3_last_error());
    if (!g) return;
    const char *str;
    size_t len;
    CHECK(g3_gguf_get_str(g, "general.architecture", 1, &str, &len) == GEMMA3_OK && len == 6 &&
          memcmp(str, "gemma3", 6) == 0);
    const g3_gguf_kv *arr;
    CHECK(g3_gguf_get_array(g, "tokens", G3_GGUF_STRING, 1, &arr) == GEMMA3_OK && arr->n == 2);
    const uint8_t *p = g3_gguf_next_str(arr->value, &str, &len);
    CHECK(len == 1 && str[0] == 'a');
    g3_gguf_next_str(p, &str, &len);
    CHECK(len == 2 && memcmp(str, "bc", 2) == 0);
    const g3_gguf_tensor *t1 = g3_gguf_find_tensor(g, "t1");
    CHECK(t1 && t1->n_bytes == 68 && t1->ne[0] == 32 && t1->ne[1] == 2 && t1->n_elements == 64);
    CHECK(t1 && t1->data == im.b + g->data_offset + 32 && t1->data[0] == 32);
    CHECK(g->data_offset % 32 == 0 && g->alignment == 32);
    /* getters: a missing required key, a key of the wrong type */
    uint32_t u = 7;
    CHECK(g3_gguf_get_u32(g, "no.such.key", 0, &u) == GEMMA3_OK && u == 7);
    CHECK(g3_gguf_get_u32(g, "no.such.key", 1, &u) == GEMMA3_ERR_FORMAT &&
          strstr(gemma3_last_error(), "good.gguf: key no.such.key: missing"));
    CHECK(g3_gguf_get_u32(g, "general.architecture", 1, &u) == GEMMA3_ERR_FORMAT &&
          strstr(gemma3_last_error(), "key general.architecture: expected an integer, got string"));
    g3_gguf_free(g);
    /* every truncation fails cleanly (the last tensor ends at the file's end) */
    int all_fail = 1;
    for (size_t n = 0; n < im.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees a read past them */
        memcpy(copy, im.b, n);
        g = NULL;
        int rc = g3_gguf_parse(copy, n, "cut.gguf", &g);
        if (rc != GEMMA3_ERR_FORMAT || g || !one_line(gemma3_last_error())) {
            all_fail = 0;
            fprintf(stderr, "truncated to %zu: rc %d (%s)\n", n, rc, gemma3_last_error());
        }
        g3_gguf_free(g);
        free(copy);
    }
    CHECK(all_fail);
    free(im.b);
}

static void test_bad_images(void) {
    expect_fail(&(spoil){.magic = "GGML"}, GEMMA3_ERR_FORMAT, "not a GGUF file");
    expect_fail(&(spoil){.version = 1}, GEMMA3_ERR_UNSUPPORTED, "GGUF version 1");
    expect_fail(&(spoil){.version = 0x03000000}, GEMMA3_ERR_UNSUPPORTED, "big-endian");
    expect_fail(&(spoil){.n_kv = 1ull << 60}, GEMMA3_ERR_FORMAT, "key/values cannot fit");
    expect_fail(&(spoil){.n_tensors = 1ull << 60}, GEMMA3_ERR_FORMAT, "tensors cannot fit");
    expect_fail(&(spoil){.key_len = 1ull << 62}, GEMMA3_ERR_FORMAT, "string length 4611686018427387904");
    expect_fail(&(spoil){.arr_n = 1ull << 61}, GEMMA3_ERR_FORMAT, "key tokens: array of");
    expect_fail(&(spoil){.t1_type = 99}, GEMMA3_ERR_FORMAT, "tensor t1: unknown ggml type 99");
    expect_fail(&(spoil){.t1_type = 4}, GEMMA3_ERR_FORMAT, "tensor t1: unknown ggml type 4");
    expect_fail(&(spoil){.t1_dims = 5}, GEMMA3_ERR_FORMAT, "tensor t1: 5 dimensions");
    expect_fail(&(spoil){.t1_offset = 64}, GEMMA3_ERR_FORMAT, "tensor t1: data [64, +68) runs past the end");
    expect_fail(&(spoil){.t1_offset = 1ull << 62}, GEMMA3_ERR_FORMAT, "tensor t1: data");
    expect_fail(&(spoil){.t1_offset = 40}, GEMMA3_ERR_FORMAT, "tensor t1: offset 40 is not a multiple");
    expect_fail(&(spoil){.dup_key = 1}, GEMMA3_ERR_FORMAT, "key general.alignment appears twice");
    expect_fail(&(spoil){.dup_tensor = 1}, GEMMA3_ERR_FORMAT, "tensor t0 appears twice");
    expect_fail(&(spoil){.alignment = 48}, GEMMA3_ERR_FORMAT, "general.alignment: 48 is not a power of two");
    /* t1 at 16 with alignment 16: overlaps t0's 32 bytes */
    expect_fail(&(spoil){.alignment = 16, .t1_offset = 16}, GEMMA3_ERR_FORMAT, "tensor t1: data at offset 16 overlaps tensor t0");
}

/* ---- the writer --------------------------------------------------------------------------- */

static uint8_t *read_all(const char *path, size_t *n) {
    char *b = NULL;
    return g3_read_file(path, &b, n) == GEMMA3_OK ? (uint8_t *)b : NULL;
}

static void test_writer(void) {
    g3_gguf_writer *w;
    CHECK(g3_gguf_writer_new(tmp("w.gguf"), &w) == GEMMA3_OK);
    const char *toks[3] = {"x", "yz", "\xE2\x96\x81w"};
    size_t lens[3] = {1, 2, 4};
    float f[3] = {0.5f, -1.0f, 3.0f};
    int64_t ne_a[1] = {5}, ne_b[2] = {64, 3};
    g3_gguf_put_str(w, "general.architecture", "gemma3", 6);
    g3_gguf_put_u32(w, "n", 42);
    g3_gguf_put_f32(w, "f", 1.5f);
    g3_gguf_put_bool(w, "b", 1);
    g3_gguf_put_str_array(w, "toks", toks, lens, 3);
    g3_gguf_put_array(w, "fs", G3_GGUF_F32, f, 3);
    g3_gguf_put_tensor(w, "a", G3_GGML_F32, 1, ne_a);
    g3_gguf_put_tensor(w, "b", G3_GGML_Q4_0, 2, ne_b);
    CHECK(g3_gguf_writer_begin(w) == GEMMA3_OK);
    uint8_t data[20 + 108];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7);
    CHECK(g3_gguf_writer_append(w, data, 13) == GEMMA3_OK); /* split across the two tensors */
    CHECK(g3_gguf_writer_append(w, data + 13, sizeof data - 13) == GEMMA3_OK);
    CHECK_MSG(g3_gguf_writer_finish(w) == GEMMA3_OK, "%s", gemma3_last_error());
    size_t n;
    uint8_t *img = read_all(tmp("w.gguf"), &n);
    g3_gguf *g = NULL;
    CHECK_MSG(img && g3_gguf_parse(img, n, "w.gguf", &g) == GEMMA3_OK, "%s", gemma3_last_error());
    if (g) {
        uint32_t u = 0;
        float x = 0;
        int b = 0;
        const g3_gguf_kv *arr;
        CHECK(g3_gguf_get_u32(g, "n", 1, &u) == GEMMA3_OK && u == 42);
        CHECK(g3_gguf_get_f32(g, "f", 1, &x) == GEMMA3_OK && x == 1.5f);
        CHECK(g3_gguf_get_bool(g, "b", 1, &b) == GEMMA3_OK && b == 1);
        CHECK(g3_gguf_get_array(g, "fs", G3_GGUF_F32, 1, &arr) == GEMMA3_OK && arr->n == 3 &&
              memcmp(arr->value, f, sizeof f) == 0);
        CHECK(g3_gguf_get_array(g, "toks", G3_GGUF_STRING, 1, &arr) == GEMMA3_OK && arr->n == 3);
        const char *s;
        size_t len;
        const uint8_t *p = arr->value;
        for (int i = 0; i < 3 && arr; i++) {
            p = g3_gguf_next_str(p, &s, &len);
            CHECK(len == lens[i] && memcmp(s, toks[i], len) == 0);
        }
        const g3_gguf_tensor *ta = g3_gguf_find_tensor(g, "a"), *tb = g3_gguf_find_tensor(g, "b");
        CHECK(ta && ta->n_bytes == 20 && memcmp(ta->data, data, 20) == 0);
        CHECK(tb && tb->n_bytes == 108 && tb->ne[1] == 3 && memcmp(tb->data, data + 20, 108) == 0);
        CHECK(tb && tb->offset == 32);
    }
    g3_gguf_free(g);
    free(img);
    /* a short write leaves nothing behind */
    CHECK(g3_gguf_writer_new(tmp("short.gguf"), &w) == GEMMA3_OK);
    g3_gguf_put_tensor(w, "a", G3_GGML_F32, 1, ne_a);
    CHECK(g3_gguf_writer_begin(w) == GEMMA3_OK);
    CHECK(g3_gguf_writer_append(w, data, 8) == GEMMA3_OK);
    CHECK(g3_gguf_writer_finish(w) == GEMMA3_ERR_ARG && strstr(gemma3_last_error(), "tensor a: only 8 of its 20"));
    CHECK(access(tmp("short.gguf"), F_OK) != 0);
}

/* ---- the Gemma 3 binding ------------------------------------------------------------------ */

/* A one-layer gemma3 GGUF (H = head_dim = 32, I = 64, vocab 4), the arch, a key left out and the
 * types of token_embd and of the other matrices chosen by the caller. Data are zeros. */
static void write_tiny(const char *name, const char *arch, const char *omit, uint32_t embd_type,
                       uint32_t q_type) {
    g3_gguf_writer *w;
    g3_gguf_writer_new(tmp(name), &w);
    g3_gguf_put_str(w, "general.architecture", arch, strlen(arch));
    static const char *const keys[] = {"gemma3.embedding_length", "gemma3.feed_forward_length",
                                       "gemma3.block_count", "gemma3.context_length",
                                       "gemma3.attention.head_count"};
    const uint32_t vals[] = {32, 64, 1, 128, 1};
    for (int i = 0; i < 5; i++)
        if (!omit || strcmp(omit, keys[i]) != 0) g3_gguf_put_u32(w, keys[i], vals[i]);
    g3_gguf_put_f32(w, "gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
    static const struct { const char *name; int mat, rows; } t[] = {
        {"token_embd.weight", 1, 4}, {"output_norm.weight", 0, 0}, {"blk.0.attn_norm.weight", 0, 0},
        {"blk.0.attn_q.weight", 1, 32}, {"blk.0.attn_k.weight", 1, 32}, {"blk.0.attn_v.weight", 1, 32},
        {"blk.0.attn_output.weight", 1, 32}, {"blk.0.attn_q_norm.weight", 0, 0},
        {"blk.0.attn_k_norm.weight", 0, 0}, {"blk.0.post_attention_norm.weight", 0, 0},
        {"blk.0.ffn_norm.weight", 0, 0}, {"blk.0.ffn_gate.weight", 1, 64}, {"blk.0.ffn_up.weight", 1, 64},
        {"blk.0.ffn_down.weight", 2, 32}, {"blk.0.post_ffw_norm.weight", 0, 0}};
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int64_t ne[2] = {t[i].mat == 2 ? 64 : 32, t[i].rows};
        uint32_t type = i == 0 ? embd_type : t[i].mat ? q_type : G3_GGML_F32;
        g3_gguf_put_tensor(w, t[i].name, type, t[i].mat ? 2 : 1, ne);
        total += (size_t)(ne[0] * (t[i].mat ? ne[1] : 1)) / (size_t)g3_ggml_block_elems(type) *
                 (size_t)g3_ggml_block_bytes(type);
    }
    g3_gguf_writer_begin(w);
    uint8_t *zeros = calloc(1, total);
    g3_gguf_writer_append(w, zeros, total);
    free(zeros);
    CHECK_MSG(g3_gguf_writer_finish(w) == GEMMA3_OK, "%s", gemma3_last_error());
}

static void expect_model_fail(const char *name, int open_st, int code, const char *want) {
    g3_config cfg;
    g3_st *st = NULL;
    int rc = open_st ? g3_model_open_st(tmp(name), G3_ST_LOAD_MMAP, 1, 0, &st) : g3_model_config_load(tmp(name), &cfg);
    CHECK_MSG(rc == code && strstr(gemma3_last_error(), want) && strstr(gemma3_last_error(), name) &&
              one_line(gemma3_last_error()), "%s: rc %d '%s' lacks '%s'", name, rc, gemma3_last_error(), want);
    g3_st_close(st);
}

/* A config-only gemma3 GGUF: n_layers layers of hidden 32, 2 heads of 32 dims, the sliding window
 * and the RoPE scaling as given (0: absent). */
static void write_config(const char *name, uint32_t n_layers, uint32_t window, float rope_factor) {
    g3_gguf_writer *w;
    g3_gguf_writer_new(tmp(name), &w);
    g3_gguf_put_str(w, "general.architecture", "gemma3", 6);
    static const char *const keys[] = {"gemma3.embedding_length", "gemma3.feed_forward_length",
                                       "gemma3.context_length", "gemma3.attention.head_count",
                                       "gemma3.attention.head_count_kv", "gemma3.attention.key_length"};
    const uint32_t vals[] = {32, 64, 128, 2, 1, 32};
    for (int i = 0; i < 6; i++) g3_gguf_put_u32(w, keys[i], vals[i]);
    g3_gguf_put_u32(w, "gemma3.block_count", n_layers);
    if (window) g3_gguf_put_u32(w, "gemma3.attention.sliding_window", window);
    if (rope_factor != 0.0f) {
        g3_gguf_put_str(w, "gemma3.rope.scaling.type", "linear", 6);
        g3_gguf_put_f32(w, "gemma3.rope.scaling.factor", rope_factor);
    }
    int64_t ne[2] = {32, 4};
    g3_gguf_put_tensor(w, "token_embd.weight", G3_GGML_BF16, 2, ne);
    g3_gguf_writer_begin(w);
    static const uint8_t zeros[256];
    g3_gguf_writer_append(w, zeros, 256);
    CHECK_MSG(g3_gguf_writer_finish(w) == GEMMA3_OK, "%s", gemma3_last_error());
}

/* What GGUF does not store, derived as llama.cpp derives it. */
static void test_derived_config(void) {
    g3_config c;
    write_config("c26.gguf", 26, 512, 0.0f);
    CHECK_MSG(g3_model_config_load(tmp("c26.gguf"), &c) == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK(c.query_pre_attn_scalar == 32.0f); /* head_dim */
    CHECK(c.rope_theta_full == 10000.0f && c.rope_theta_sliding == 10000.0f && c.rope_factor_full == 1.0f);
    int full = 0;
    for (int l = 0; l < 26; l++) full += c.layer_types[l] == G3_LAYER_FULL;
    CHECK(full == 4 && c.layer_types[5] == G3_LAYER_FULL && c.layer_types[6] == G3_LAYER_SLIDING &&
          c.sliding_window == 512);
    CHECK(c.rms_norm_eps == 1e-6f && c.n_eos == 1 && c.eos_ids[0] == 1 && c.bos_id == 2);
    write_config("c62.gguf", 62, 512, 8.0f);
    CHECK(g3_model_config_load(tmp("c62.gguf"), &c) == GEMMA3_OK);
    CHECK(c.query_pre_attn_scalar == 16.0f); /* the 27B shape: hidden / heads */
    CHECK(c.rope_factor_full == 8.0f && c.rope_factor_sliding == 1.0f);
    write_config("nowindow.gguf", 3, 0, 0.0f);
    CHECK(g3_model_config_load(tmp("nowindow.gguf"), &c) == GEMMA3_OK);
    CHECK(c.layer_types[0] == G3_LAYER_FULL && c.layer_types[1] == G3_LAYER_FULL);
}

static void test_binding(void) {
    write_tiny("ok.gguf", "gemma3", NULL, G3_GGML_BF16, G3_GGML_BF16);
    g3_config cfg;
    CHECK_MSG(g3_model_config_load(tmp("ok.gguf"), &cfg) == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK(cfg.hidden_size == 32 && cfg.head_dim == 32 && cfg.n_kv_heads == 1 && cfg.vocab_size == 4);
    CHECK(cfg.query_pre_attn_scalar == 32.0f && cfg.tie_word_embeddings && cfg.layer_types[0] == G3_LAYER_FULL);
    g3_st *st = NULL;
    CHECK_MSG(g3_model_open_st(tmp("ok.gguf"), G3_ST_LOAD_READ, 1, 0, &st) == GEMMA3_OK, "%s", gemma3_last_error());
    const g3_tensor *t = st ? g3_st_find(st, "model.layers.0.mlp.down_proj.weight") : NULL;
    CHECK(t && t->dtype == G3_DTYPE_BF16 && t->shape[0] == 32 && t->shape[1] == 64);
    CHECK(st && g3_st_metadata(st, "gemma3.norms") && !g3_st_metadata(st, "gemma3.quant"));
    g3_st_close(st);
    write_tiny("q8.gguf", "gemma3", NULL, G3_GGML_Q8_0, G3_GGML_Q8_0);
    CHECK(g3_model_open_st(tmp("q8.gguf"), G3_ST_LOAD_MMAP, 1, 0, &st) == GEMMA3_OK);
    t = st ? g3_st_find(st, "model.embed_tokens.weight") : NULL;
    CHECK(t && t->dtype == G3_DTYPE_U8 && t->shape[0] == 4 && t->shape[1] == 34);
    CHECK(st && g3_st_metadata(st, "gemma3.quant") && strcmp(g3_st_metadata(st, "gemma3.quant"), "q8_0") == 0);
    g3_st_close(st);
    /* every legacy block type is bound as stored, named by its row (Q5_0: 22-byte blocks) */
    write_tiny("q50.gguf", "gemma3", NULL, G3_GGML_Q5_0, G3_GGML_Q5_0);
    CHECK(g3_model_open_st(tmp("q50.gguf"), G3_ST_LOAD_MMAP, 1, 0, &st) == GEMMA3_OK);
    t = st ? g3_st_find(st, "model.embed_tokens.weight") : NULL;
    CHECK(t && t->dtype == G3_DTYPE_U8 && t->shape[0] == 4 && t->shape[1] == 22);
    CHECK(st && g3_st_metadata(st, "gemma3.quant") && strcmp(g3_st_metadata(st, "gemma3.quant"), "q5_0") == 0);
    g3_st_close(st);

    write_tiny("llama.gguf", "llama", NULL, G3_GGML_BF16, G3_GGML_BF16);
    expect_model_fail("llama.gguf", 0, GEMMA3_ERR_UNSUPPORTED, "general.architecture is 'llama'");
    expect_model_fail("llama.gguf", 1, GEMMA3_ERR_UNSUPPORTED, "general.architecture is 'llama'");
    write_tiny("nokey.gguf", "gemma3", "gemma3.feed_forward_length", G3_GGML_BF16, G3_GGML_BF16);
    expect_model_fail("nokey.gguf", 0, GEMMA3_ERR_FORMAT, "key gemma3.feed_forward_length: missing");
    write_tiny("iq4.gguf", "gemma3", NULL, G3_GGML_BF16, 20 /* IQ4_NL */);
    write_tiny("q81.gguf", "gemma3", NULL, G3_GGML_Q8_1, G3_GGML_BF16);
    write_tiny("mixed.gguf", "gemma3", NULL, G3_GGML_Q8_0, G3_GGML_Q4_0);
    write_tiny("mixed2.gguf", "gemma3", NULL, G3_GGML_Q8_0, G3_GGML_BF16);
    /* wrong types reach the binding, not the config; the whole model load names them too */
    CHECK(g3_model_config_load(tmp("iq4.gguf"), &cfg) == GEMMA3_OK);
    expect_model_fail("iq4.gguf", 1, GEMMA3_ERR_UNSUPPORTED, "tensor blk.0.attn_q.weight: type IQ4_NL is not supported");
    expect_model_fail("q81.gguf", 1, GEMMA3_ERR_UNSUPPORTED, "tensor token_embd.weight: type Q8_1 is not supported");
    /* a mix of block types (what llama-quantize writes by default) binds: the file's type is the
     * most frequent, the others named per tensor */
    g3_st *mst = NULL;
    CHECK_MSG(g3_model_open_st(tmp("mixed.gguf"), G3_ST_LOAD_MMAP, 1, 0, &mst) == GEMMA3_OK, "%s", gemma3_last_error());
    const char *mq = mst ? g3_st_metadata(mst, "gemma3.quant") : NULL;
    const char *me = mst ? g3_st_metadata(mst, "gemma3.quant.model.embed_tokens.weight") : NULL;
    CHECK(mq && strcmp(mq, "q4_0") == 0 && me && strcmp(me, "q8_0") == 0);
    CHECK(mst && !g3_st_metadata(mst, "gemma3.quant.model.layers.0.self_attn.q_proj.weight"));
    g3_st_close(mst);

    expect_model_fail("mixed2.gguf", 1, GEMMA3_ERR_UNSUPPORTED, "is BF16 but token_embd.weight is Q8_0");
    gemma3_model *m = NULL;
    CHECK(gemma3_model_load(tmp("iq4.gguf"), &m) == GEMMA3_ERR_UNSUPPORTED && !m &&
          strstr(gemma3_last_error(), "IQ4_NL"));
    /* a text GGUF without a vocabulary loads (runs on ids), as a directory without tokenizer.model */
    CHECK_MSG(gemma3_model_load(tmp("ok.gguf"), &m) == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK(m && gemma3_model_tokenizer(m) == NULL);
    gemma3_model_free(m);
}

/* ---- the fixtures ------------------------------------------------------------------------- */

/* Every public case: the ids from the GGUF's vocabulary equal tokenizer.model's. */
/* tokenizer.ggml.add_bos_token = false (the fixture's byte flipped): the tokenizer says so (the
 * front end asks it before adding <bos>: generate, perplexity, chat). */
static void test_add_bos_false(const char *gguf) {
    static const char key[] = "tokenizer.ggml.add_bos_token";
    size_t n = 0;
    uint8_t *img = read_all(gguf, &n), *at = img ? memmem(img, n, key, sizeof key - 1) : NULL;
    uint32_t type = 0;
    if (at) memcpy(&type, at + sizeof key - 1, 4);
    CHECK(at && type == 7 /* bool */ && at[sizeof key - 1 + 4] == 1);
    if (at && type == 7) {
        at[sizeof key - 1 + 4] = 0;
        FILE *f = fopen(tmp("nobos.gguf"), "wb");
        CHECK(f && fwrite(img, 1, n, f) == n);
        if (f) fclose(f);
        gemma3_tokenizer *t = NULL;
        CHECK_MSG(g3_gguf_model_tokenizer(tmp("nobos.gguf"), &t) == GEMMA3_OK, "%s", gemma3_last_error());
        CHECK(t && gemma3_tokenizer_add_bos(t) == 0);
        gemma3_tokenizer_free(t);
    }
    free(img);
}

static void test_tokenizer_fixture(void) {
    const char *gguf = FIX "/vocab262k-q4_0.gguf";
    if (access(gguf, F_OK) != 0) {
        CHECK_SKIP("%s missing", gguf);
        return;
    }
    gemma3_tokenizer *a = NULL, *b = NULL;
    CHECK_MSG(gemma3_tokenizer_load("models/tokenizer.model", &a) == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK_MSG(g3_gguf_model_tokenizer(gguf, &b) == GEMMA3_OK, "%s", gemma3_last_error());
    char *text;
    size_t len;
    if (!a || !b || g3_read_file("tests/data/tokenizer/public-cases.jsonl", &text, &len) != GEMMA3_OK) {
        CHECK(0);
        return;
    }
    CHECK(gemma3_tokenizer_vocab_size(a) == gemma3_tokenizer_vocab_size(b));
    CHECK(gemma3_tokenizer_add_bos(a) == 1 && gemma3_tokenizer_add_bos(b) == 1);
    test_add_bos_false(gguf);
    int n_cases = 0, n_same = 0;
    static int32_t ia[1 << 17], ib[1 << 17];
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
        for (int flags = 0; flags <= GEMMA3_TOK_PARSE_SPECIAL && cJSON_IsString(t); flags += GEMMA3_TOK_PARSE_SPECIAL) {
            size_t n = strlen(t->valuestring);
            int na = gemma3_tokenizer_encode(a, t->valuestring, n, flags | GEMMA3_TOK_BOS, ia, 1 << 17);
            int nb = gemma3_tokenizer_encode(b, t->valuestring, n, flags | GEMMA3_TOK_BOS, ib, 1 << 17);
            n_cases++;
            n_same += na == nb && na >= 0 && memcmp(ia, ib, (size_t)na * sizeof *ia) == 0;
        }
        cJSON_Delete(j);
    }
    CHECK_MSG(n_cases > 2000 && n_same == n_cases, "%d of %d cases give the same ids", n_same, n_cases);
    for (int k = GEMMA3_SPECIAL_PAD; k <= GEMMA3_SPECIAL_END_OF_TURN; k++)
        CHECK_EQ_INT(gemma3_tokenizer_special(a, (enum gemma3_special)k), gemma3_tokenizer_special(b, (enum gemma3_special)k));
    free(text);
    gemma3_tokenizer_free(a);
    gemma3_tokenizer_free(b);
}

#define N_TOK 24

/* Logits of N_TOK tokens at every position. */
static enum gemma3_repack logits_repack = GEMMA3_REPACK_AUTO; /* what logits_of's loads ask for */

static float *logits_of(const char *model, enum gemma3_weight_type type, int exact, const char *isa, int *V) {
    gemma3_model_params mp = {0};
    mp.weight_type = type;
    mp.repack = logits_repack;
    mp.n_threads = 2;
    mp.isa = isa;
    gemma3_model *m = NULL;
    if (gemma3_model_load_ex(model, &mp, &m) != GEMMA3_OK) {
        CHECK_MSG(0, "%s: %s", model, gemma3_last_error());
        return NULL;
    }
    gemma3_model_info info;
    gemma3_model_get_info(m, &info);
    *V = info.vocab_size;
    gemma3_session_params sp = gemma3_session_default_params();
    sp.exact = exact;
    sp.isa = isa;
    sp.n_threads = 2;
    gemma3_session *s = NULL;
    float *out = NULL;
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = (int32_t)((i * 977 + 2) % *V);
    if (gemma3_session_init(m, &sp, &s) == GEMMA3_OK && (out = malloc((size_t)N_TOK * *V * sizeof *out)) &&
        gemma3_session_forward(s, tok, N_TOK, out) != GEMMA3_OK) {
        free(out);
        out = NULL;
    }
    CHECK_MSG(out, "%s: %s", model, gemma3_last_error());
    gemma3_session_free(s);
    gemma3_model_free(m);
    return out;
}

static void same_logits(const char *dir, enum gemma3_weight_type dir_type, const char *gguf,
                        enum gemma3_weight_type gguf_type) {
    if (access(gguf, F_OK) != 0) {
        CHECK_SKIP("%s missing", gguf);
        return;
    }
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        if (g3_isa_parse(isas[i]) > (int)g3_isa_detect()) {
            CHECK_SKIP("isa %s", isas[i]);
            continue;
        }
        for (int exact = 0; exact < 2; exact++) {
            int va = 0, vb = 0;
            float *a = logits_of(dir, dir_type, exact, isas[i], &va);
            float *b = logits_of(gguf, gguf_type, exact, isas[i], &vb);
            CHECK_MSG(a && b && va == vb && memcmp(a, b, (size_t)N_TOK * va * sizeof *a) == 0,
                      "%s (%s) vs %s (%s), exact %d, isa %s: logits differ", dir,
                      gemma3_weight_type_name(dir_type), gguf, gemma3_weight_type_name(gguf_type), exact, isas[i]);
            free(a);
            free(b);
        }
    }
}

/* Our GGUF of the bundled model holds llama.cpp's tensors byte for byte: the converter's (BF16,
 * norms 1 + w in F32) and llama-quantize --pure's blocks (Q8_0, Q4_0, Q5_0); with `typed`, those of
 * theirs that have our file's block type (llama-quantize's mixes: its Q4_K tensors in Q4_K_M). */
static void same_tensors_ex(const char *ours, const char *theirs, int typed) {
    size_t na = 0, nb = 0;
    uint8_t *a = read_all(ours, &na), *b = access(theirs, F_OK) == 0 ? read_all(theirs, &nb) : NULL;
    if (!b) {
        CHECK_SKIP("%s missing", theirs);
        free(a);
        return;
    }
    g3_gguf *ga = NULL, *gb = NULL;
    CHECK(a && g3_gguf_parse(a, na, ours, &ga) == GEMMA3_OK && g3_gguf_parse(b, nb, theirs, &gb) == GEMMA3_OK);
    int same = ga && gb && ga->n_tensors == gb->n_tensors, n_same = 0;
    for (int64_t i = 0; same && i < ga->n_tensors; i++) {
        const g3_gguf_tensor *x = &ga->tensors[i], *y = g3_gguf_find_tensor(gb, x->name);
        if (typed && (!y || y->type != x->type || x->n_dims < 2)) continue;
        same = y && x->type == y->type && x->n_dims == y->n_dims && memcmp(x->ne, y->ne, sizeof x->ne) == 0 &&
               x->n_bytes == y->n_bytes && memcmp(x->data, y->data, x->n_bytes) == 0;
        n_same += same;
        if (!same) fprintf(stderr, "%s: tensor %s differs from %s's\n", ours, x->name, theirs);
    }
    CHECK_MSG(same && n_same >= (typed ? 5 : 1), "%s vs %s: %d tensors compared", ours, theirs, n_same);
    g3_gguf_free(ga);
    g3_gguf_free(gb);
    free(a);
    free(b);
}


/* A copy of src with the 16 bits at byte `at` of tensor `name`'s data set to bits. */
static void corrupt_copy(const char *src, const char *dst, const char *name, size_t at, uint16_t bits) {
    size_t n = 0;
    uint8_t *img = read_all(src, &n);
    g3_gguf *g = NULL;
    const g3_gguf_tensor *t = img && g3_gguf_parse(img, n, src, &g) == GEMMA3_OK ? g3_gguf_find_tensor(g, name) : NULL;
    CHECK_MSG(t && at + 2 <= t->n_bytes, "%s: no tensor %s", src, name);
    if (t) {
        memcpy((uint8_t *)img + ((const uint8_t *)t->data - img) + at, &bits, 2);
        FILE *f = fopen(dst, "wb");
        CHECK(f && fwrite(img, 1, n, f) == n && fclose(f) == 0);
    }
    g3_gguf_free(g);
    free(img);
}

/* A K-quant GGUF with a NaN or infinite super-block scale (d, Q4_K's dmin, Q6_K's d at the
 * block's end) is refused by --check-tensors in one line naming the tensor, row and block. */
static void bad_kquant_scales(void) {
    static const struct { enum gemma3_weight_type type; size_t block, at; } cases[] = {
        {GEMMA3_WEIGHTS_Q4_K, 144, 0}, {GEMMA3_WEIGHTS_Q4_K, 144, 2}, {GEMMA3_WEIGHTS_Q5_K, 176, 2},
        {GEMMA3_WEIGHTS_Q6_K, 210, 208}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[32], dst[32];
        snprintf(src, sizeof src, "ours-%s.gguf", gemma3_weight_type_name(cases[i].type));
        snprintf(dst, sizeof dst, "bad-%zu.gguf", i);
        /* row 3, super-block 1 of blk.1.ffn_down (1024 columns: 4 super-blocks a row) */
        corrupt_copy(tmp(src), tmp(dst), "blk.1.ffn_down.weight", (3 * 4 + 1) * cases[i].block + cases[i].at,
                     i % 2 ? 0x7e00 : 0xfc00);
        gemma3_model_params mp = {0};
        mp.check_tensors = 1;
        mp.n_threads = 2;
        gemma3_model *m = NULL;
        const int rc = gemma3_model_load_ex(tmp(dst), &mp, &m);
        char want[160];
        snprintf(want, sizeof want, "model.layers.1.mlp.down_proj.weight: row 3, block 1: the %s scale is not finite",
                 gemma3_weight_type_name(cases[i].type));
        CHECK_MSG(rc == GEMMA3_ERR_FORMAT && !m && strstr(gemma3_last_error(), want) && one_line(gemma3_last_error()),
                  "%s: rc %d '%s'", dst, rc, gemma3_last_error());
        gemma3_model_free(m);
    }
}

/* llama-quantize --pure's Q4_1 / Q5_0 / Q5_1 blocks of the bundled model's real rows (slices kept
 * by tools/make-gguf-fixtures.sh) are what our reference quantizer and every fast row quantizer
 * write from the same BF16 rows, byte for byte. */
static void llama_blocks(void) {
    static const struct { const char *tensor; int rows; } slices[] = {{"blk.0.ffn_down.weight", 64},
                                                                     {"token_embd.weight", 256}};
    static const enum gemma3_weight_type types[] = {GEMMA3_WEIGHTS_Q4_1, GEMMA3_WEIGHTS_Q5_0, GEMMA3_WEIGHTS_Q5_1};
    size_t n = 0;
    uint8_t *img = read_all(FIX "/wordnet-bf16.gguf", &n);
    g3_gguf *g = NULL;
    CHECK(img && g3_gguf_parse(img, n, "wordnet-bf16.gguf", &g) == GEMMA3_OK);
    for (size_t s = 0; g && s < sizeof slices / sizeof slices[0]; s++) {
        const g3_gguf_tensor *t = g3_gguf_find_tensor(g, slices[s].tensor);
        CHECK(t && t->type == G3_GGML_BF16 && t->ne[1] >= slices[s].rows);
        if (!t) continue;
        const int64_t cols = t->ne[0], count = cols * slices[s].rows;
        float *x = malloc((size_t)count * sizeof *x);
        for (int64_t i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            x[i] = g3_bf16_to_f32(h);
        }
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            char path[128];
            snprintf(path, sizeof path, FIX "/rows-%s-%s.bin", gemma3_weight_type_name(types[k]),
                     strncmp(slices[s].tensor, "blk.0.", 6) == 0 ? "ffn_down" : "token_embd");
            size_t want_n = 0;
            uint8_t *want = read_all(path, &want_n);
            const size_t rb = g3_wtype_row_bytes(types[k], cols), bytes = rb * (size_t)slices[s].rows;
            CHECK_MSG(want && want_n == bytes, "%s: %zu bytes, expected %zu", path, want_n, bytes);
            uint8_t *got = calloc(1, bytes);
            for (int r = 0; want && want_n == bytes && r < slices[s].rows; r++)
                g3_quantize_row(types[k], x + (int64_t)r * cols, got + (size_t)r * rb, cols);
            CHECK_MSG(want && memcmp(got, want, bytes) == 0, "%s: our reference quantizer differs from llama.cpp's blocks", path);
            for (int isa = 0; isa < G3_ISA_COUNT; isa++) {
                g3_quantize_row_fn q = g3_quantize_row_get((g3_isa)isa);
                if (!q) continue;
                memset(got, 0, bytes);
                int ok = 1;
                for (int r = 0; r < slices[s].rows; r++)
                    ok &= q(types[k], t->data + 2 * (size_t)(r * cols), 1, got + (size_t)r * rb, cols);
                CHECK_MSG(ok && want && memcmp(got, want, bytes) == 0, "%s: the %s row quantizer differs", path,
                          g3_isa_name((g3_isa)isa));
            }
            free(got);
            free(want);
        }
        free(x);
    }
    g3_gguf_free(g);
    free(img);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_good_image();
    test_bad_images();
    test_writer();
    test_binding();
    test_derived_config();
    test_tokenizer_fixture();
    llama_blocks();
    same_logits(WORDNET, GEMMA3_WEIGHTS_AS_STORED, FIX "/wordnet-bf16.gguf", GEMMA3_WEIGHTS_AS_STORED);
    same_logits(WORDNET, GEMMA3_WEIGHTS_Q8_0, FIX "/wordnet-bf16.gguf", GEMMA3_WEIGHTS_Q8_0);
    same_logits(WORDNET, GEMMA3_WEIGHTS_Q4_0, FIX "/wordnet-bf16.gguf", GEMMA3_WEIGHTS_Q4_0);
    same_logits(WORDNET, GEMMA3_WEIGHTS_Q8_0, FIX "/wordnet-q8_0.gguf", GEMMA3_WEIGHTS_AS_STORED);
    same_logits(WORDNET, GEMMA3_WEIGHTS_Q4_0, FIX "/wordnet-q4_0.gguf", GEMMA3_WEIGHTS_AS_STORED);
    same_logits(WORDNET, GEMMA3_WEIGHTS_Q5_0, FIX "/wordnet-q5_0.gguf", GEMMA3_WEIGHTS_AS_STORED);
    /* Q5_0 repacked to x8 when it is asked for: the same logits as from the file (quantized at load) */
    logits_repack = GEMMA3_REPACK_X8;
    same_logits(WORDNET, GEMMA3_WEIGHTS_Q5_0, FIX "/wordnet-q5_0.gguf", GEMMA3_WEIGHTS_AS_STORED);
    logits_repack = GEMMA3_REPACK_AUTO;
    /* our own GGUFs: the same logits back, the same vocabulary; a failed write leaves nothing */
    static const enum gemma3_weight_type types[7] = {GEMMA3_WEIGHTS_BF16, GEMMA3_WEIGHTS_Q8_0, GEMMA3_WEIGHTS_Q4_0,
                                                     GEMMA3_WEIGHTS_Q5_0, GEMMA3_WEIGHTS_Q4_K, GEMMA3_WEIGHTS_Q5_K,
                                                     GEMMA3_WEIGHTS_Q6_K};
    /* llama-quantize's K-quant files are not committed (issue 54): our mixes of the bundled model
     * stand in for them. tests/test-gguf-llamacpp.sh holds these files' tensors to the SHA-256 of
     * llama-quantize's (tests/data/gguf/kquant-tensors.txt), every type and byte. */
    static const enum gemma3_weight_type recipes[3] = {GEMMA3_WEIGHTS_Q4_K_M, GEMMA3_WEIGHTS_Q5_K_M, GEMMA3_WEIGHTS_Q6_K};
    char k_files[3][64];
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "mix-%s.gguf", gemma3_weight_type_name(recipes[i]));
        snprintf(k_files[i], sizeof k_files[i], "%s", tmp(name));
        CHECK_MSG(gemma3_quantize_gguf(WORDNET, k_files[i], recipes[i], 2) == GEMMA3_OK, "%s", gemma3_last_error());
    }
    for (int i = 0; i < 7; i++) {
        char name[32];
        snprintf(name, sizeof name, "ours-%s.gguf", gemma3_weight_type_name(types[i]));
        CHECK_MSG(gemma3_quantize_gguf(WORDNET, tmp(name), types[i], 2) == GEMMA3_OK, "%s", gemma3_last_error());
        same_logits(WORDNET, types[i], tmp(name), GEMMA3_WEIGHTS_AS_STORED);
        char theirs[64];
        if (i < 4) snprintf(theirs, sizeof theirs, FIX "/wordnet-%s.gguf", gemma3_weight_type_name(types[i]));
        else snprintf(theirs, sizeof theirs, "%s", k_files[i - 4]); /* their K tensors in the mixes */
        same_tensors_ex(tmp(name), theirs, i >= 4);
    }    bad_kquant_scales();
    /* llama-quantize's mixes made by us from the bundled model (llama-quantize's tensors: above):
     * quantizing at load with the recipe gives the file's logits */
    for (int i = 0; i < 3; i++) same_logits(WORDNET, recipes[i], k_files[i], GEMMA3_WEIGHTS_AS_STORED);
    /* llama-quantize's Q4_0 mix (token_embd Q6_K) in the x8 layout (avx2): its Q4_0 matrices
     * repacked, the Q6_K one read in place from the file, which must stay mapped */
    if (access(FIX "/wordnet-mixed.gguf", F_OK) == 0 && g3_isa_parse("avx2") <= (int)g3_isa_detect()) {
        int v = 0;
        float *mx = logits_of(FIX "/wordnet-mixed.gguf", GEMMA3_WEIGHTS_AS_STORED, 0, "avx2", &v);
        CHECK(mx && g3_first_nonfinite(mx, (size_t)N_TOK * v) < 0);
        free(mx);
    }
    CHECK(gemma3_quantize_gguf(WORDNET, tmp("no/such/dir/x.gguf"), GEMMA3_WEIGHTS_Q8_0, 2) == GEMMA3_ERR_IO);
    CHECK(gemma3_quantize_gguf(tmp("llama.gguf"), tmp("y.gguf"), GEMMA3_WEIGHTS_Q8_0, 2) == GEMMA3_ERR_UNSUPPORTED &&
          access(tmp("y.gguf"), F_OK) != 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report();
}
