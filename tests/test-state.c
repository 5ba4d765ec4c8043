/* test-state.c - saved session state (state.c): a session loaded from a saved state continues
 * bit-identically (greedy ids and every logit) to an uninterrupted run, for sliding and full
 * layers with prompts longer than the sliding window, in every precision mode, into sessions
 * with other n_ctx, thread counts and batch sizes; gemma3_session_truncate cuts only where the
 * rings still hold what the next query needs; every kind of mismatch and corruption is refused
 * with its one line and the session left byte for byte as it was.
 *
 * Models: tests/data/golden/tiny-knobs (window 6, layers S S F S) and tiny-causal (window 8,
 * layers S S S S S F S); two tiny checkpoints of one shape that differ only in their seed, made
 * with build/tools/gen-checkpoint, for "same config, other weights". */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "gemma3.h"
#include "state.h"
#include "util.h"

#define GOLDEN "tests/data/golden"
#define MAX_STEPS 64

static char tmpdir[256];

typedef struct mode {
    const char *name;
    int exact, kv_type;
} mode;

static const mode modes[] = {
    {"exact", 1, GEMMA3_KV_F32},
    {"default", 0, GEMMA3_KV_BF16},
    {"default/kv-f32", 0, GEMMA3_KV_F32},
};

static gemma3_model *load_model(const char *dir, enum gemma3_weight_type wt) {
    gemma3_model_params mp = {.weight_type = wt, .n_threads = 1};
    gemma3_model *m = NULL;
    int rc = gemma3_model_load_ex(dir, &mp, &m);
    CHECK_MSG(rc == GEMMA3_OK, "load %s: %s", dir, gemma3_last_error());
    return m;
}

static gemma3_session *new_session(const gemma3_model *m, const mode *md, int n_ctx, int n_threads,
                                   int n_batch) {
    gemma3_session_params sp = gemma3_session_default_params();
    sp.exact = md->exact;
    sp.kv_type = md->kv_type;
    sp.n_ctx = n_ctx;
    sp.n_threads = n_threads;
    sp.n_batch = n_batch;
    gemma3_session *s = NULL;
    int rc = gemma3_session_init(m, &sp, &s);
    CHECK_MSG(rc == GEMMA3_OK, "session_init: %s", gemma3_last_error());
    return s;
}

static int vocab_of(const gemma3_model *m) {
    gemma3_model_info info;
    gemma3_model_get_info(m, &info);
    return info.vocab_size;
}

/* Deterministic pseudo-random ids (a prompt with no structure the model could shortcut). */
static void make_tokens(int32_t *ids, int n, int vocab, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        ids[i] = (int32_t)(x % (uint32_t)vocab);
    }
}

static int32_t argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* n greedy steps from the session's current logits: ids[i] is the argmax of the logits before
 * step i; logits[i] are the logits after feeding it. */
static void greedy(gemma3_session *s, int V, int n, int32_t *ids, float *logits) {
    for (int i = 0; i < n; i++) {
        ids[i] = argmax(gemma3_session_logits(s), V);
        int rc = gemma3_session_forward(s, &ids[i], 1, NULL);
        CHECK_MSG(rc == GEMMA3_OK, "forward: %s", gemma3_last_error());
        memcpy(logits + (size_t)i * V, gemma3_session_logits(s), (size_t)V * sizeof(float));
    }
}

static unsigned char *snapshot(gemma3_session *s, size_t *n) {
    *n = gemma3_session_state_size(s);
    unsigned char *buf = malloc(*n);
    if (!buf || gemma3_session_save_buffer(s, buf, *n) != GEMMA3_OK) {
        CHECK_MSG(0, "snapshot: %s", gemma3_last_error());
        free(buf);
        return NULL;
    }
    return buf;
}

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tmpdir, name); }

/* ---- continuation --------------------------------------------------------------------------- */

/* Prefill n_prompt tokens, save; a fresh session (other n_ctx / threads / batch, after running
 * something else first) loads and runs `steps` greedy steps; ids and logits must equal those of
 * an uninterrupted run, bit for bit. Through the file and through the buffer. */
static void check_continuation(const gemma3_model *m, const mode *md, const char *label, int n_prompt,
                               int steps, int ctx_save, int ctx_load, int batch_save) {
    const int V = vocab_of(m);
    int32_t prompt[256], ref_ids[MAX_STEPS], ids[MAX_STEPS];
    float *ref = malloc((size_t)steps * V * sizeof(float)), *got = malloc((size_t)steps * V * sizeof(float));
    float *after_prompt = malloc((size_t)V * sizeof(float));
    make_tokens(prompt, n_prompt, V, (uint32_t)n_prompt);

    gemma3_session *a = new_session(m, md, n_prompt + steps, 1, 512);
    CHECK(gemma3_session_forward(a, prompt, n_prompt, NULL) == GEMMA3_OK);
    memcpy(after_prompt, gemma3_session_logits(a), (size_t)V * sizeof(float));
    greedy(a, V, steps, ref_ids, ref);

    gemma3_session *b = new_session(m, md, ctx_save, 2, batch_save);
    CHECK(gemma3_session_forward(b, prompt, n_prompt, NULL) == GEMMA3_OK);
    char path[512];
    path_in(path, sizeof path, "cont.state");
    CHECK_MSG(gemma3_session_save(b, path) == GEMMA3_OK, "save: %s", gemma3_last_error());
    size_t n_buf;
    unsigned char *buf = snapshot(b, &n_buf);

    for (int via_buffer = 0; via_buffer < 2; via_buffer++) {
        gemma3_session *c = new_session(m, md, ctx_load, 3, 5);
        int32_t other[16];
        make_tokens(other, 16 < ctx_load ? 16 : ctx_load, V, 99); /* stale contents to overwrite */
        CHECK(gemma3_session_forward(c, other, 16 < ctx_load ? 16 : ctx_load, NULL) == GEMMA3_OK);
        int rc = via_buffer ? gemma3_session_load_buffer(c, buf, n_buf) : gemma3_session_load(c, path);
        CHECK_MSG(rc == GEMMA3_OK, "%s %s: load: %s", label, md->name, gemma3_last_error());
        CHECK_EQ_INT(gemma3_session_pos(c), n_prompt);
        CHECK(memcmp(gemma3_session_tokens(c), prompt, (size_t)n_prompt * sizeof(int32_t)) == 0);
        CHECK_MSG(memcmp(gemma3_session_logits(c), after_prompt, (size_t)V * sizeof(float)) == 0,
                  "%s %s: logits after load", label, md->name);
        greedy(c, V, steps, ids, got);
        CHECK_MSG(memcmp(ids, ref_ids, (size_t)steps * sizeof(int32_t)) == 0, "%s %s via %s: greedy ids",
                  label, md->name, via_buffer ? "buffer" : "file");
        CHECK_MSG(memcmp(got, ref, (size_t)steps * V * sizeof(float)) == 0, "%s %s via %s: logits",
                  label, md->name, via_buffer ? "buffer" : "file");
        gemma3_session_free(c);
    }
    free(buf);
    free(ref);
    free(got);
    free(after_prompt);
    gemma3_session_free(a);
    gemma3_session_free(b);
}

static void test_continuation(const char *name, int window) {
    char dir[256];
    snprintf(dir, sizeof dir, GOLDEN "/%s", name);
    gemma3_model *m = load_model(dir, GEMMA3_WEIGHTS_AS_STORED);
    if (!m) return;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        const mode *md = &modes[i];
        /* prompt 4W (the rings wrapped several times, in chunks of 7 across the ring's seam),
         * 20 steps; saved with n_ctx 64, loaded into n_ctx 4W + 20 */
        check_continuation(m, md, "4W prompt", 4 * window, 20, 64, 4 * window + 20, 7);
        /* the same, loaded into exactly the context it needs */
        check_continuation(m, md, "W+3 prompt, tight n_ctx", window + 3, 9, 200, window + 12, 512);
        /* saved before the ring filled, from n_ctx W-1 (ring of W-1 slots), continued into
         * n_ctx 64 (ring of W) well past the window */
        check_continuation(m, md, "ring W-1 -> W", window - 2, 3 * window, window - 1, 64, 3);
    }
    /* ring remap the other way: saved from n_ctx 64 (ring W) at W-2 tokens, loaded into n_ctx
     * W-1 (ring W-1) and continued to its end */
    check_continuation(m, &modes[1], "ring W -> W-1", window - 2, 1, 64, window - 1, 512);
    gemma3_model_free(m);
}

/* ---- truncate ------------------------------------------------------------------------------- */

static void test_truncate(void) {
    gemma3_model *m = load_model(GOLDEN "/tiny-knobs", GEMMA3_WEIGHTS_AS_STORED); /* W = 6 */
    if (!m) return;
    const int V = vocab_of(m), W = 6;
    int32_t toks[40];
    make_tokens(toks, 40, V, 7);
    float *ref = malloc((size_t)40 * V * sizeof(float));
    gemma3_session *a = new_session(m, &modes[1], 64, 1, 512);
    CHECK(gemma3_session_forward(a, toks, 40, ref) == GEMMA3_OK);

    /* cut one token back after the rings wrapped, refeed it: the same logits */
    CHECK(gemma3_session_truncate(a, 39) == GEMMA3_OK);
    CHECK_EQ_INT(gemma3_session_pos(a), 39);
    CHECK(gemma3_session_forward(a, toks + 39, 1, NULL) == GEMMA3_OK);
    CHECK(memcmp(gemma3_session_logits(a), ref + (size_t)39 * V, (size_t)V * sizeof(float)) == 0);

    /* two back: the ring no longer holds position 40 - 2 - W + 1 */
    size_t n0, n1;
    unsigned char *before = snapshot(a, &n0);
    CHECK_EQ_INT(gemma3_session_truncate(a, 38), GEMMA3_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(gemma3_last_error(), "sliding-window") != NULL, "%s", gemma3_last_error());
    unsigned char *after = snapshot(a, &n1);
    CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
    CHECK_EQ_INT(gemma3_session_truncate(a, 41), GEMMA3_ERR_ARG);
    CHECK(gemma3_session_truncate(a, 0) == GEMMA3_OK); /* always possible */

    /* before the rings fill, any cut works: 5 tokens, back to 2, continue */
    CHECK(gemma3_session_forward(a, toks, W - 1, NULL) == GEMMA3_OK);
    CHECK(gemma3_session_truncate(a, 2) == GEMMA3_OK);
    CHECK(gemma3_session_forward(a, toks + 2, 10, NULL) == GEMMA3_OK);
    CHECK(memcmp(gemma3_session_logits(a), ref + (size_t)11 * V, (size_t)V * sizeof(float)) == 0);
    CHECK(memcmp(gemma3_session_tokens(a), toks, 12 * sizeof(int32_t)) == 0);
    free(ref);
    gemma3_session_free(a);
    gemma3_model_free(m);
}

/* n_swa_extra: rings of W + extra slots let the cache be cut back extra + 1 tokens; a state
 * carries what its rings held, and a session that loads it can cut back no further than that,
 * whatever its own ring size. */
static gemma3_session *extra_session(const gemma3_model *m, int extra) {
    gemma3_session_params sp = gemma3_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 1;
    sp.n_swa_extra = extra;
    gemma3_session *s = NULL;
    CHECK_MSG(gemma3_session_init(m, &sp, &s) == GEMMA3_OK, "%s", gemma3_last_error());
    return s;
}

/* Cut s back to n and refeed toks[n..40): the last logits must be ref's, bit for bit. */
static void cut_and_refeed(gemma3_session *s, const int32_t *toks, int n, const float *ref, int V, const char *label) {
    CHECK_MSG(gemma3_session_truncate(s, n) == GEMMA3_OK, "%s: truncate %d: %s", label, n, gemma3_last_error());
    CHECK(gemma3_session_forward(s, toks + n, 40 - n, NULL) == GEMMA3_OK);
    CHECK_MSG(memcmp(gemma3_session_logits(s), ref + (size_t)39 * V, (size_t)V * sizeof(float)) == 0,
              "%s: logits after cutting back to %d", label, n);
}

static void test_swa_extra(void) {
    gemma3_model *m = load_model(GOLDEN "/tiny-knobs", GEMMA3_WEIGHTS_AS_STORED); /* W = 6 */
    if (!m) return;
    const int V = vocab_of(m);
    int32_t toks[40];
    make_tokens(toks, 40, V, 13);
    float *ref = malloc((size_t)40 * V * sizeof(float));
    gemma3_session *a = extra_session(m, 5), *a0 = extra_session(m, 0);
    CHECK(gemma3_session_forward(a, toks, 40, ref) == GEMMA3_OK);
    CHECK(gemma3_session_forward(a0, toks, 40, NULL) == GEMMA3_OK);
    CHECK(memcmp(gemma3_session_logits(a), gemma3_session_logits(a0), (size_t)V * sizeof(float)) == 0);
    CHECK_EQ_INT(gemma3_session_truncate_min(a), 34);  /* rings of 11 hold 29..39; 34 needs 29.. */
    CHECK_EQ_INT(gemma3_session_truncate_min(a0), 39);
    CHECK_EQ_INT(gemma3_session_truncate(a, 33), GEMMA3_ERR_UNSUPPORTED);
    size_t n, n0;
    unsigned char *st = snapshot(a, &n), *st0 = snapshot(a0, &n0);
    CHECK(n > n0); /* 5 more rows per sliding layer */
    cut_and_refeed(a, toks, 34, ref, V, "extra 5");

    /* the state of rings of 11 into rings of 6 (extra 0) and of 16 (extra 10) */
    gemma3_session *b = extra_session(m, 0), *c = extra_session(m, 10), *d = extra_session(m, 10);
    CHECK(st && gemma3_session_load_buffer(b, st, n) == GEMMA3_OK);
    CHECK(st && gemma3_session_load_buffer(c, st, n) == GEMMA3_OK);
    CHECK(st0 && gemma3_session_load_buffer(d, st0, n0) == GEMMA3_OK);
    CHECK_EQ_INT(gemma3_session_truncate_min(b), 39);
    CHECK_EQ_INT(gemma3_session_truncate_min(c), 34); /* the file's 11 rows, not the ring's 16 */
    CHECK_EQ_INT(gemma3_session_truncate_min(d), 39);
    CHECK_EQ_INT(gemma3_session_truncate(c, 33), GEMMA3_ERR_UNSUPPORTED);
    CHECK_EQ_INT(gemma3_session_truncate(d, 38), GEMMA3_ERR_UNSUPPORTED);
    cut_and_refeed(b, toks, 39, ref, V, "loaded into extra 0");
    cut_and_refeed(c, toks, 34, ref, V, "loaded into extra 10");
    cut_and_refeed(d, toks, 39, ref, V, "extra 0 state into extra 10");
    /* fed on after the cut, c's rings fill again: 40 + 10 more tokens, then a cut 15 back */
    int32_t more[10];
    make_tokens(more, 10, V, 17);
    CHECK(gemma3_session_forward(c, more, 10, NULL) == GEMMA3_OK);
    CHECK_EQ_INT(gemma3_session_truncate_min(c), 39); /* rings of 16 hold 34..49 */
    free(st);
    free(st0);
    free(ref);
    gemma3_session_free(a);
    gemma3_session_free(a0);
    gemma3_session_free(b);
    gemma3_session_free(c);
    gemma3_session_free(d);
    gemma3_model_free(m);
}

/* ---- refusals ------------------------------------------------------------------------------- */

/* Loads bytes (via a file) into s, which must refuse with a message containing `want` and stay
 * byte for byte as it was. */
static void expect_refused(gemma3_session *s, const void *bytes, size_t n, const char *want, const char *label) {
    char path[512];
    path_in(path, sizeof path, "bad.state");
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n);
    if (f) fclose(f);
    size_t n0, n1;
    unsigned char *before = snapshot(s, &n0);
    int pos = gemma3_session_pos(s);
    int rc = gemma3_session_load(s, path);
    CHECK_MSG(rc != GEMMA3_OK, "%s: accepted", label);
    CHECK_MSG(strstr(gemma3_last_error(), want) != NULL, "%s: message '%s' lacks '%s'", label,
              gemma3_last_error(), want);
    CHECK_MSG(strchr(gemma3_last_error(), '\n') == NULL, "%s: not one line", label);
    CHECK_MSG(strstr(gemma3_last_error(), path) != NULL, "%s: message '%s' does not name the file", label,
              gemma3_last_error());
    rc = gemma3_session_load_buffer(s, bytes, n);
    CHECK_MSG(rc != GEMMA3_OK && strstr(gemma3_last_error(), want), "%s (buffer): %s", label, gemma3_last_error());
    unsigned char *after = snapshot(s, &n1);
    CHECK_EQ_INT(gemma3_session_pos(s), pos);
    CHECK_MSG(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "%s: session changed", label);
    free(before);
    free(after);
}

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static void rehash_header(unsigned char *b) {
    put64(b + G3_STATE_HEADER_BYTES - 8, g3_hash64(b, G3_STATE_HEADER_BYTES - 8, 0));
}

static void rehash_payload(unsigned char *b, size_t n) {
    put64(b + n - 8, g3_hash64(b + G3_STATE_HEADER_BYTES, n - 8 - G3_STATE_HEADER_BYTES, 0));
}

static void test_refusals(void) {
    gemma3_model *knobs = load_model(GOLDEN "/tiny-knobs", GEMMA3_WEIGHTS_AS_STORED);
    gemma3_model *causal = load_model(GOLDEN "/tiny-causal", GEMMA3_WEIGHTS_AS_STORED);
    gemma3_model *causal_q8 = load_model(GOLDEN "/tiny-causal", GEMMA3_WEIGHTS_Q8_0);
    if (!knobs || !causal || !causal_q8) goto done;
    const int V = vocab_of(knobs);
    int32_t toks[32];
    make_tokens(toks, 32, V, 3);

    /* the state under test: 20 tokens of tiny-knobs, default mode */
    gemma3_session *src = new_session(knobs, &modes[1], 64, 1, 512);
    CHECK(gemma3_session_forward(src, toks, 20, NULL) == GEMMA3_OK);
    size_t n;
    unsigned char *good = snapshot(src, &n), *bad = malloc(n + 16);
    /* the victim: another state of the same model and mode */
    gemma3_session *s = new_session(knobs, &modes[1], 64, 1, 512);
    CHECK(gemma3_session_forward(s, toks + 5, 9, NULL) == GEMMA3_OK);
    CHECK(gemma3_session_load_buffer(s, good, n) == GEMMA3_OK); /* the good file loads ... */
    gemma3_session_reset(s);
    CHECK(gemma3_session_forward(s, toks + 5, 9, NULL) == GEMMA3_OK); /* ... back to the victim */

    /* other models: another config; the same model as Q8_0 */
    gemma3_session *other = new_session(causal, &modes[1], 64, 1, 512);
    CHECK(gemma3_session_forward(other, toks, 3, NULL) == GEMMA3_OK);
    expect_refused(other, good, n, "saved from another model: vocab_size 4099 in the file, 4096 in this one",
                   "other config");
    gemma3_session *cs = new_session(causal, &modes[1], 64, 1, 512);
    CHECK(gemma3_session_forward(cs, toks, 12, NULL) == GEMMA3_OK);
    size_t nc;
    unsigned char *causal_state = snapshot(cs, &nc);
    gemma3_session *q8 = new_session(causal_q8, &modes[1], 64, 1, 512);
    CHECK(gemma3_session_forward(q8, toks, 2, NULL) == GEMMA3_OK);
    expect_refused(q8, causal_state, nc, "weight type bf16 in the file, q8_0 in this one", "weight type");

    /* session settings: KV type, exact mode, a context smaller than the saved position */
    gemma3_session *f32 = new_session(knobs, &modes[2], 64, 1, 512);
    expect_refused(f32, good, n, "KV cache type bf16 in the file, f32 in this session", "kv type");
    gemma3_session *ex = new_session(knobs, &modes[0], 64, 1, 512);
    expect_refused(ex, good, n, "exact mode 0 in the file, 1 in this session", "exact");
    gemma3_session *small = new_session(knobs, &modes[1], 19, 1, 512);
    CHECK(gemma3_session_forward(small, toks, 4, NULL) == GEMMA3_OK);
    expect_refused(small, good, n, "holds 20 tokens, more than this session's context of 19", "n_ctx");

    /* truncated anywhere: empty, in the magic, in the header, in the payload, one byte short */
    const size_t cuts[] = {0, 5, 100, G3_STATE_HEADER_BYTES + 3, n / 2, n - 1};
    const char *cut_msgs[] = {"not a gemma3 state file", "not a gemma3 state file", "truncated",
                              "truncated", "truncated", "truncated"};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "cut at %zu", cuts[i]);
        expect_refused(s, good, cuts[i], cut_msgs[i], label);
    }
    memcpy(bad, good, n);
    bad[n] = 0;
    expect_refused(s, bad, n + 1, "extra bytes", "one byte appended");

    /* a flipped bit: in the magic, the version, a header field, and across the payload */
    memcpy(bad, good, n);
    bad[3] ^= 1;
    expect_refused(s, bad, n, "not a gemma3 state file", "magic");
    memcpy(bad, good, n);
    bad[8] = 2;
    expect_refused(s, bad, n, "state format version 2; this build reads version 1", "version");
    const size_t header_flips[] = {12, 16, 16 + 8 * 11 + 2, G3_STATE_HEADER_BYTES - 1};
    for (size_t i = 0; i < sizeof header_flips / sizeof header_flips[0]; i++) {
        memcpy(bad, good, n);
        bad[header_flips[i]] ^= 0x10;
        expect_refused(s, bad, n, "header checksum mismatch", "header byte");
    }
    const size_t payload_flips[] = {G3_STATE_HEADER_BYTES, G3_STATE_HEADER_BYTES + 20 * 4 + 1, n / 2, n - 9, n - 1};
    for (size_t i = 0; i < sizeof payload_flips / sizeof payload_flips[0]; i++) {
        memcpy(bad, good, n);
        bad[payload_flips[i]] ^= 0x01;
        char label[64];
        snprintf(label, sizeof label, "payload byte %zu of %zu", payload_flips[i], n);
        expect_refused(s, bad, n, "payload checksum mismatch", label);
    }

    /* past the checksums (a file made to pass them): each fingerprint field is still compared,
     * and token ids are range-checked */
    memcpy(bad, good, n);
    put64(bad + 16 + 8 * 1, 61); /* hidden_size */
    rehash_header(bad);
    expect_refused(s, bad, n, "hidden_size 61 in the file, 60 in this one", "hidden_size field");
    memcpy(bad, good, n);
    put64(bad + 16 + 8 * 11, 0x1234); /* weights hash */
    rehash_header(bad);
    expect_refused(s, bad, n, "weights hash 0000000000001234 in the file", "weights hash field");
    memcpy(bad, good, n);
    put64(bad + 16 + 8 * 15, 30); /* position 30: the payload of 20 tokens is then short */
    rehash_header(bad);
    expect_refused(s, bad, n, "truncated", "position field");
    memcpy(bad, good, n);
    int32_t big = V + 5;
    memcpy(bad + G3_STATE_HEADER_BYTES + 4, &big, 4);
    rehash_payload(bad, n);
    expect_refused(s, bad, n, "out of range", "token id");

    /* load of a missing file */
    char path[512];
    path_in(path, sizeof path, "missing.state");
    CHECK(gemma3_session_load(s, path) == GEMMA3_ERR_IO && strstr(gemma3_last_error(), "cannot open"));

    free(causal_state);
    free(good);
    free(bad);
    gemma3_session_free(src);
    gemma3_session_free(s);
    gemma3_session_free(other);
    gemma3_session_free(cs);
    gemma3_session_free(q8);
    gemma3_session_free(f32);
    gemma3_session_free(ex);
    gemma3_session_free(small);
done:
    gemma3_model_free(knobs);
    gemma3_model_free(causal);
    gemma3_model_free(causal_q8);
}

/* Two checkpoints of one config that differ only in their random weights. */
static void test_other_weights(void) {
    const char *b = getenv("G3_BUILD");
    char d1[512], d2[512], cmd[1600];
    path_in(d1, sizeof d1, "seed1");
    path_in(d2, sizeof d2, "seed2");
    for (int i = 1; i <= 2; i++) {
        snprintf(cmd, sizeof cmd, "%s/tools/gen-checkpoint tiny '%s' --seed %d --vocab 512 >/dev/null",
                 b ? b : "build", i == 1 ? d1 : d2, i);
        if (system(cmd) != 0) {
            CHECK_MSG(0, "%s failed", cmd);
            return;
        }
    }
    gemma3_model *m1 = load_model(d1, GEMMA3_WEIGHTS_AS_STORED), *m2 = load_model(d2, GEMMA3_WEIGHTS_AS_STORED);
    if (m1 && m2) {
        int32_t toks[12];
        make_tokens(toks, 12, 512, 5);
        gemma3_session *s1 = new_session(m1, &modes[1], 32, 1, 512), *s2 = new_session(m2, &modes[1], 32, 1, 512);
        CHECK(gemma3_session_forward(s1, toks, 12, NULL) == GEMMA3_OK);
        size_t n;
        unsigned char *st = snapshot(s1, &n);
        if (st) expect_refused(s2, st, n, "saved from another model: weights hash", "other weights");
        free(st);
        gemma3_session_free(s1);
        gemma3_session_free(s2);
    }
    gemma3_model_free(m1);
    gemma3_model_free(m2);
}

/* ---- the file: atomic replace, nothing left behind ------------------------------------------ */

static void test_file(void) {
    gemma3_model *m = load_model(GOLDEN "/tiny-knobs", GEMMA3_WEIGHTS_AS_STORED);
    if (!m) return;
    int32_t toks[10];
    make_tokens(toks, 10, vocab_of(m), 11);
    gemma3_session *s = new_session(m, &modes[1], 32, 1, 512);
    char dir[512], path[600];
    path_in(dir, sizeof dir, "files");
    snprintf(path, sizeof path, "%s/x.state", dir);
    CHECK(mkdir(dir, 0755) == 0);
    CHECK(gemma3_session_forward(s, toks, 4, NULL) == GEMMA3_OK);
    CHECK(gemma3_session_save(s, path) == GEMMA3_OK);
    CHECK(gemma3_session_forward(s, toks + 4, 6, NULL) == GEMMA3_OK);
    CHECK(gemma3_session_save(s, path) == GEMMA3_OK); /* replaces it */
    DIR *d = opendir(dir);
    int n_entries = 0;
    for (struct dirent *e; d && (e = readdir(d));) n_entries += e->d_name[0] != '.';
    if (d) closedir(d);
    CHECK_EQ_INT(n_entries, 1); /* no temporary file left */
    gemma3_session_reset(s);
    CHECK(gemma3_session_load(s, path) == GEMMA3_OK);
    CHECK_EQ_INT(gemma3_session_pos(s), 10);
    /* a directory that does not exist: an error naming the path, the old file untouched */
    char nowhere[700];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-dir/x.state", dir);
    CHECK(gemma3_session_save(s, nowhere) == GEMMA3_ERR_IO && strstr(gemma3_last_error(), nowhere));
    gemma3_session_free(s);
    gemma3_model_free(m);
}

/* ---- XXH64 against the reference values ----------------------------------------------------- */

static void test_hash(void) {
    CHECK(g3_hash64("", 0, 0) == 0xEF46DB3751D8E999ull);
    CHECK(g3_hash64("abc", 3, 0) == 0x44BC2CF5AD770999ull);
    const char *s = "Nobody inspects the spammish repetition";
    CHECK(g3_hash64(s, strlen(s), 0) == 0xFBCEA83C8A378BF1ull);
    /* fed in pieces of every size: the same digest */
    unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 37 + 11);
    uint64_t whole = g3_hash64(buf, sizeof buf, 5);
    for (size_t piece = 1; piece <= 70; piece++) {
        g3_hasher h;
        g3_hash64_init(&h, 5);
        for (size_t at = 0; at < sizeof buf; at += piece)
            g3_hash64_update(&h, buf + at, at + piece <= sizeof buf ? piece : sizeof buf - at);
        CHECK_MSG(g3_hash64_digest(&h) == whole, "pieces of %zu", piece);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/g3-test-state-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK_SKIP("mkdtemp failed");
        return check_report();
    }
    test_hash();
    test_continuation("tiny-knobs", 6);
    test_continuation("tiny-causal", 8);
    test_truncate();
    test_swa_extra();
    test_refusals();
    test_other_weights();
    test_file();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_report();
}
