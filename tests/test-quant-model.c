/* test-quant-model.c - quantized weights end to end: quantize at load, gemma3_quantize's files,
 * loading them, the forward pass over them, and every way a quantized file can be wrong.
 *
 *   - a gemma3_quantize'd directory is valid SafeTensors with exactly the promised header
 *     (U8 [rows, bytes per row] matrices, norms as stored, contiguous offsets, metadata), and its
 *     blocks are g3_quantize_row of the source rows, byte for byte;
 *   - loading it gives bit-identical logits to quantizing at load, in every mode and ISA table;
 *   - logits are bit-identical for 1, 2, 3 threads and any split into forward calls / chunks;
 *   - quantized logits stay close to Hugging Face's fp32 reference (bounds below);
 *   - malformed quantized files each fail with one line naming the file, tensor or value;
 *   - a failed gemma3_quantize leaves no file behind. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "logits-util.h"
#include "config.h"
#include "gemma3.h"
#include "kernels.h"
#include "quant.h"
#include "quant-rows.h"
#include "safetensors.h"
#include "util.h"
#include "weights.h"

#define GOLDEN "tests/data/golden"
#define N_TOK 40

static char tmpdir[] = "/tmp/g3-test-quant-XXXXXX";

static const char *path_in(const char *dir, const char *name) {
    static char buf[4][640];
    static int k;
    char *b = buf[k++ & 3];
    if ((size_t)snprintf(b, sizeof buf[0], "%.300s/%.300s", dir, name) >= sizeof buf[0]) b[0] = '\0';
    return b;
}

static const char *tmp(const char *name) { return path_in(tmpdir, name); }

/* ---- golden data -------------------------------------------------------------------------- */

typedef struct golden {
    const char *name;
    int n_vocab;
    int32_t tokens[N_TOK];
    float *logits; /* [N_TOK][n_vocab] HF fp32 */
} golden;

static int load_golden(const char *name, golden *g) {
    memset(g, 0, sizeof *g);
    g->name = name;
    char *text;
    size_t len;
    char p[256];
    snprintf(p, sizeof p, GOLDEN "/%s.json", name);
    if (g3_read_file(p, &text, &len) != GEMMA3_OK) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return -1;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tokens"), *it;
    int n = 0;
    cJSON_ArrayForEach(it, arr) if (n < N_TOK) g->tokens[n++] = (int32_t)it->valuedouble;
    g->n_vocab = cJSON_GetObjectItemCaseSensitive(root, "n_vocab")->valueint;
    cJSON_Delete(root);
    snprintf(p, sizeof p, GOLDEN "/%s.logits.f32", name);
    if (n != N_TOK || g3_read_file(p, &text, &len) != GEMMA3_OK) return -1;
    g->logits = (float *)text;
    return len == (size_t)N_TOK * g->n_vocab * sizeof(float) ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static gemma3_model *load_model(const char *dir, enum gemma3_weight_type type, int n_threads) {
    gemma3_model_params mp = {0};
    mp.weight_type = type;
    mp.n_threads = n_threads;
    gemma3_model *m = NULL;
    int rc = gemma3_model_load_ex(dir, &mp, &m);
    CHECK_MSG(rc == GEMMA3_OK, "%s as %s: %s", dir, gemma3_weight_type_name(type), gemma3_last_error());
    return m;
}

static gemma3_session *new_session(const gemma3_model *m, int exact, const char *isa, int n_threads,
                                   int n_batch) {
    gemma3_session_params sp = gemma3_session_default_params();
    sp.exact = exact;
    sp.isa = isa;
    sp.n_threads = n_threads;
    sp.n_batch = n_batch;
    gemma3_session *s = NULL;
    int rc = gemma3_session_init(m, &sp, &s);
    CHECK_MSG(rc == GEMMA3_OK, "session_init: %s", gemma3_last_error());
    return s;
}

/* The N_TOK tokens in calls of the given sizes; every position's logits into out. */
static void run_split(gemma3_session *s, const int32_t *tokens, const int *sizes, int n_sizes,
                      float *out, int V) {
    gemma3_session_reset(s);
    for (int i = 0, done = 0; done < N_TOK; i++) {
        int step = sizes[i < n_sizes ? i : n_sizes - 1];
        if (step > N_TOK - done) step = N_TOK - done;
        int rc = gemma3_session_forward(s, tokens + done, step, out + (size_t)done * V);
        CHECK_MSG(rc == GEMMA3_OK, "forward: %s", gemma3_last_error());
        if (rc != GEMMA3_OK) return;
        done += step;
    }
}

static void all_logits(const gemma3_model *m, int exact, const char *isa, const int32_t *tokens,
                       float *out, int V) {
    static const int all[] = {N_TOK};
    gemma3_session *s = new_session(m, exact, isa, 2, 0);
    if (s) run_split(s, tokens, all, 1, out, V);
    gemma3_session_free(s);
}


static int one_line(const char *msg) { return *msg && !strchr(msg, '\n'); }

/* ---- the file gemma3_quantize writes ------------------------------------------------------ */

static int cmp_ptr(const void *a, const void *b) {
    const g3_tensor *x = *(const g3_tensor *const *)a, *y = *(const g3_tensor *const *)b;
    return (const char *)x->data < (const char *)y->data ? -1 : (const char *)x->data > (const char *)y->data;
}

/* The header fields, the contiguity, and every block against the reference quantizer. */
static void check_written_file(const char *src_dir, const char *dst_dir, g3_wtype type) {
    g3_st *src = NULL, *dst = NULL;
    int rc = g3_st_open_dir(src_dir, &src);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    rc = g3_st_open_file(path_in(dst_dir, "model.safetensors"), &dst);
    CHECK_MSG(rc == GEMMA3_OK, "written file is not valid safetensors: %s", gemma3_last_error());
    if (!src || !dst) goto done;
    CHECK(g3_st_metadata(dst, "gemma3.quant") && strcmp(g3_st_metadata(dst, "gemma3.quant"), g3_wtype_name(type)) == 0);
    CHECK(g3_st_metadata(dst, "format") && strcmp(g3_st_metadata(dst, "format"), "pt") == 0);

    /* raw layout: 8-byte length, header padded so that data starts on 64 bytes, no gaps */
    char *img;
    size_t size;
    if (g3_read_file(path_in(dst_dir, "model.safetensors"), &img, &size) != GEMMA3_OK) goto done;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (uint8_t)img[i];
    CHECK_EQ_INT((8 + hlen) % 64, 0);
    free(img);
    int n = g3_st_count(dst);
    const g3_tensor **by_off = malloc((size_t)n * sizeof *by_off);
    for (int i = 0; i < n; i++) by_off[i] = g3_st_at(dst, i);
    qsort(by_off, (size_t)n, sizeof *by_off, cmp_ptr);
    int gaps = 0;
    for (int i = 1; i < n; i++)
        gaps += (const char *)by_off[i]->data != (const char *)by_off[i - 1]->data + by_off[i - 1]->n_bytes;
    CHECK_EQ_INT(gaps, 0);
    CHECK_EQ_INT((const char *)by_off[n - 1]->data + by_off[n - 1]->n_bytes - (const char *)by_off[0]->data,
                 (int64_t)size - 8 - (int64_t)hlen);
    free(by_off);

    /* every tensor: quantized matrices == g3_quantize_row of the source rows; the rest as stored */
    int n_matrix = 0, n_norm = 0, bad_blocks = 0, bad_norms = 0, bad_header = 0;
    for (int i = 0; i < n; i++) {
        const g3_tensor *q = g3_st_at(dst, i), *t = g3_st_find(src, q->name);
        if (!t) {
            bad_header++;
            continue;
        }
        if (t->n_dims == 1) {
            n_norm++;
            bad_norms += q->dtype != t->dtype || q->n_dims != 1 || q->shape[0] != t->shape[0] ||
                         memcmp(q->data, t->data, t->n_bytes) != 0;
            continue;
        }
        n_matrix++;
        int64_t rows = t->shape[0], cols = t->shape[1];
        size_t rb = g3_wtype_row_bytes(type, cols);
        if (q->dtype != G3_DTYPE_U8 || q->n_dims != 2 || q->shape[0] != rows || q->shape[1] != (int64_t)rb) {
            bad_header++;
            continue;
        }
        float *x = malloc((size_t)cols * sizeof *x);
        uint8_t *blk = malloc(rb);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t k = 0; k < cols; k++) {
                uint16_t h;
                memcpy(&h, (const uint8_t *)t->data + 2 * (r * cols + k), 2);
                x[k] = g3_bf16_to_f32(h);
            }
            g3_quantize_row(type, x, blk, cols);
            bad_blocks += memcmp(blk, (const uint8_t *)q->data + (size_t)r * rb, rb) != 0;
        }
        free(x);
        free(blk);
    }
    CHECK_EQ_INT(bad_header, 0);
    CHECK_EQ_INT(bad_blocks, 0);
    CHECK_EQ_INT(bad_norms, 0);
    CHECK_EQ_INT(n_matrix, 1 + 7 * 7); /* embedding + 7 per layer, tied head */
    CHECK_EQ_INT(n_norm, 1 + 6 * 7);
    CHECK_EQ_INT(n, n_matrix + n_norm);
done:
    g3_st_close(src);
    g3_st_close(dst);
}

/* ---- quantize at load == load the quantized files; determinism; accuracy ------------------ */

/* Distance to Hugging Face's fp32 logits (std ~1.0, max |logit| ~4-5 on these checkpoints).
 * Measured over 40 positions x ~4100 logits, default / exact mode:
 *   q8_0  max 0.28 / 0.21, rms 0.045 / 0.034, top-1 equal 39-40/40
 *   q4_0  max 3.3 / 3.3,   rms 0.54 / 0.54,   top-1 equal 10-11/40
 * Weight rounding dominates and scales with the block step: amax/127 for Q8_0, amax/8 for Q4_0
 * (16x coarser; the measured rms ratio is ~12). These are random models with hidden size 64,
 * where a logit sums only 64 products and nothing averages out, and their top-2 gaps are
 * small (often < 0.1), so Q4_0's top-1 cannot match the reference everywhere; what a broken
 * layout or scale would give is uncorrelated logits, rms ~1.4 and top-1 at chance (1/4096).
 * Bounds: ~2x the measured max (q8_0 0.5, q4_0 6), rms under ~1.5x measured (q8_0 0.1, q4_0
 * 0.75, half of "uncorrelated"); top-1 equal wherever the reference gap exceeds 0.5 (q8_0) and
 * at >= 38/40 positions for q8_0, >= 6/40 for q4_0. */
static const double tol_max[GEMMA3_WEIGHTS_COUNT] = {[GEMMA3_WEIGHTS_Q8_0] = 0.5, [GEMMA3_WEIGHTS_Q4_0] = 6.0};
static const double tol_rms[GEMMA3_WEIGHTS_COUNT] = {[GEMMA3_WEIGHTS_Q8_0] = 0.1, [GEMMA3_WEIGHTS_Q4_0] = 0.75};
static const double gap_clear[GEMMA3_WEIGHTS_COUNT] = {[GEMMA3_WEIGHTS_Q8_0] = 0.5, [GEMMA3_WEIGHTS_Q4_0] = 1e9};
static const int min_top1[GEMMA3_WEIGHTS_COUNT] = {[GEMMA3_WEIGHTS_Q8_0] = 38, [GEMMA3_WEIGHTS_Q4_0] = 6};

/* A plain F32 checkpoint holding the dequantized weights of a quantized directory (norms as
 * stored): the same model as the blocks, up to the loader's rounding of F32 matrices to bf16. */
static void write_dequantized(const char *qdir, const char *out, g3_wtype type) {
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%.700s' && cp '%.700s/config.json' '%.700s/'", out, qdir, out);
    CHECK(system(cmd) == 0);
    g3_st *st = NULL;
    if (g3_st_open_file(path_in(qdir, "model.safetensors"), &st) != GEMMA3_OK) return;
    int n = g3_st_count(st);
    g3_st_entry *ent = calloc((size_t)n, sizeof *ent);
    for (int i = 0; i < n; i++) {
        const g3_tensor *t = g3_st_at(st, i);
        ent[i].name = t->name;
        ent[i].dtype = t->dtype == G3_DTYPE_U8 ? G3_DTYPE_F32 : t->dtype;
        ent[i].n_dims = t->n_dims;
        memcpy(ent[i].shape, t->shape, sizeof ent[i].shape);
        if (t->dtype == G3_DTYPE_U8)
            ent[i].shape[1] = t->shape[1] / (int64_t)g3_wtype_row_bytes(type, G3_QK) * G3_QK;
    }
    g3_st_writer *w = NULL;
    int rc = g3_st_writer_create(path_in(out, "model.safetensors"), ent, n, NULL, 0, &w);
    for (int i = 0; i < n && rc == GEMMA3_OK; i++) {
        const g3_tensor *t = g3_st_at(st, i);
        if (t->dtype != G3_DTYPE_U8) {
            rc = g3_st_writer_append(w, t->data, t->n_bytes);
            continue;
        }
        float *row = malloc((size_t)ent[i].shape[1] * sizeof *row);
        for (int64_t r = 0; r < t->shape[0] && rc == GEMMA3_OK; r++) {
            g3_dequantize_row(type, (const uint8_t *)t->data + r * t->shape[1], row, ent[i].shape[1]);
            rc = g3_st_writer_append(w, row, (size_t)ent[i].shape[1] * sizeof *row);
        }
        free(row);
    }
    if (rc == GEMMA3_OK) rc = g3_st_writer_finish(w);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    free(ent);
    g3_st_close(st);
}

static void test_model(const golden *g, g3_wtype type) {
    const enum gemma3_weight_type api = type == GEMMA3_WEIGHTS_Q8_0 ? GEMMA3_WEIGHTS_Q8_0 : GEMMA3_WEIGHTS_Q4_0;
    const char *src_dir = path_in(GOLDEN, g->name);
    char dst_dir[700];
    snprintf(dst_dir, sizeof dst_dir, "%s/%s-%s", tmpdir, g->name, g3_wtype_name(type));
    const int V = g->n_vocab;
    const size_t bytes = (size_t)N_TOK * V * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);

    /* quantize at load: info */
    gemma3_model *mq = load_model(src_dir, api, 2);
    if (!mq) goto out;
    gemma3_model_info info;
    gemma3_model_get_info(mq, &info);
    CHECK(strcmp(info.weight_type, g3_wtype_name(type)) == 0);
    CHECK(info.quantize_seconds > 0.0 && info.quantize_seconds < 10.0);
    int64_t per_row = (int64_t)g3_wtype_row_bytes(type, 64), per_row_i = (int64_t)g3_wtype_row_bytes(type, 192);
    const int kvd = g->n_vocab == 4096 ? 16 : 32;
    int64_t mat = (int64_t)V * per_row +
                  7 * ((64 + 2 * kvd + 64 + 2 * 192) * per_row + 64 * per_row_i);
    CHECK_EQ_INT(info.weight_bytes, mat + 2 * (64 + 7 * (4 * 64 + 2 * 16)));
    CHECK_EQ_INT(info.n_params, (int64_t)V * 64 + 7 * ((64 + 2 * kvd + 64) * 64 + 3 * 64 * 192) +
                                    64 + 7 * (4 * 64 + 2 * 16));

    /* the written directory */
    int rc = gemma3_quantize(src_dir, dst_dir, api, 2);
    CHECK_MSG(rc == GEMMA3_OK, "quantize: %s", gemma3_last_error());
    if (rc != GEMMA3_OK) goto out;
    struct stat sb;
    CHECK(stat(path_in(dst_dir, "config.json"), &sb) == 0);
    CHECK(stat(path_in(dst_dir, "model.safetensors.gemma3-tmp"), &sb) != 0);
    check_written_file(src_dir, dst_dir, type);
    gemma3_model *mf = load_model(dst_dir, GEMMA3_WEIGHTS_AS_STORED, 0);
    if (!mf) goto out_q;
    gemma3_model_info info2;
    gemma3_model_get_info(mf, &info2);
    CHECK(strcmp(info2.weight_type, g3_wtype_name(type)) == 0);
    CHECK(info2.quantize_seconds == 0.0);
    CHECK_EQ_INT(info2.weight_bytes, info.weight_bytes);
    CHECK_EQ_INT(info2.n_params, info.n_params);
    gemma3_model_free(mf);
    /* asking for its own type, read into memory: fine; bf16 or the other type: refused */
    gemma3_model_params mp = {0};
    mp.load_mode = GEMMA3_LOAD_READ;
    mp.weight_type = api;
    mf = NULL;
    CHECK_EQ_INT(gemma3_model_load_ex(dst_dir, &mp, &mf), GEMMA3_OK);
    gemma3_model *bad = NULL;
    mp.weight_type = GEMMA3_WEIGHTS_BF16;
    CHECK_EQ_INT(gemma3_model_load_ex(dst_dir, &mp, &bad), GEMMA3_ERR_UNSUPPORTED);
    CHECK(strstr(gemma3_last_error(), g3_wtype_name(type)) && strstr(gemma3_last_error(), "bf16"));
    mp.weight_type = type == GEMMA3_WEIGHTS_Q8_0 ? GEMMA3_WEIGHTS_Q4_0 : GEMMA3_WEIGHTS_Q8_0;
    CHECK_EQ_INT(gemma3_model_load_ex(dst_dir, &mp, &bad), GEMMA3_ERR_UNSUPPORTED);
    CHECK(one_line(gemma3_last_error()) && strstr(gemma3_last_error(), "requantization"));
    CHECK(bad == NULL);
    /* quantizing a quantized directory is refused too */
    CHECK_EQ_INT(gemma3_quantize(dst_dir, tmp("requant"), api, 1), GEMMA3_ERR_UNSUPPORTED);
    CHECK(stat(tmp("requant"), &sb) != 0);

    /* exact mode over the blocks == the dequantized weights run as a plain model, up to that
     * model's bf16 rounding of its matrices (the golden BF16 runs land within 5e-2 of fp32) */
    char deq_dir[760];
    snprintf(deq_dir, sizeof deq_dir, "%s-dequantized", dst_dir);
    write_dequantized(dst_dir, deq_dir, type);
    gemma3_model *md = load_model(deq_dir, GEMMA3_WEIGHTS_AS_STORED, 0);
    if (md) {
        all_logits(mq, 1, NULL, g->tokens, a, V);
        all_logits(md, 1, NULL, g->tokens, b, V);
        double err = 0;
        for (size_t i = 0; i < (size_t)N_TOK * V; i++)
            if (!(fabs((double)a[i] - b[i]) <= err)) err = fabs((double)a[i] - b[i]);
        CHECK_MSG(err <= 0.1, "%s %s: exact logits vs the dequantized model: max diff %.3g", g->name,
                  g3_wtype_name(type), err);
        printf("%-34s exact vs dequantized weights as a bf16 model: max diff %.3e\n", g->name, err);
        gemma3_model_free(md);
    }

    static const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int ii = 0; ii < 3 && mf; ii++) {
        if (!g3_kernels_get((g3_isa)ii)) {
            CHECK_SKIP("isa %s (this CPU lacks it): %s %s", isas[ii], g->name, g3_wtype_name(type));
            continue;
        }
        for (int exact = 0; exact <= 1; exact++) {
            char what[128];
            snprintf(what, sizeof what, "%s %s %s %s", g->name, g3_wtype_name(type), isas[ii],
                     exact ? "exact" : "default");
            /* quantize at load == the written files, bit for bit */
            all_logits(mq, exact, isas[ii], g->tokens, a, V);
            all_logits(mf, exact, isas[ii], g->tokens, b, V);
            CHECK_MSG(memcmp(a, b, bytes) == 0, "%s: quantized at load != loaded from file", what);

            /* threads and splits */
            static const int ones[] = {1}, twelve[] = {12, 1}, uneven[] = {5, 3, 9, 1, 14}, all[] = {N_TOK};
            for (int nt = 1; nt <= 3; nt++) {
                gemma3_session *s = new_session(mq, exact, isas[ii], nt, 0);
                if (!s) continue;
                run_split(s, g->tokens, all, 1, b, V);
                CHECK_MSG(memcmp(a, b, bytes) == 0, "%s: %d threads, prefill differs", what, nt);
                run_split(s, g->tokens, nt == 1 ? ones : nt == 2 ? twelve : uneven,
                          nt == 3 ? 5 : nt, b, V);
                CHECK_MSG(memcmp(a, b, bytes) == 0, "%s: %d threads, split calls differ", what, nt);
                gemma3_session_free(s);
            }
            gemma3_session *s = new_session(mf, exact, isas[ii], 3, 7);
            if (s) {
                run_split(s, g->tokens, all, 1, b, V);
                CHECK_MSG(memcmp(a, b, bytes) == 0, "%s: n_batch 7 differs", what);
                gemma3_session_free(s);
            }
            /* 5 threads: row splits of I = 192 that 16-row grains would cut inside a block */
            s = new_session(mq, exact, isas[ii], 5, 0);
            if (s) {
                run_split(s, g->tokens, all, 1, b, V);
                CHECK_MSG(memcmp(a, b, bytes) == 0, "%s: 5 threads differ", what);
                gemma3_session_free(s);
            }

            /* close to the fp32 reference */
            double err = 0, sq = 0, tol = tol_max[type];
            int flips = 0, clear = 0, same = 0;
            for (int t = 0; t < N_TOK; t++) {
                const float *ref = g->logits + (size_t)t * V, *x = a + (size_t)t * V;
                for (int i = 0; i < V; i++) {
                    double e = fabs((double)x[i] - (double)ref[i]);
                    sq += e * e;
                    if (!(e <= err)) err = e;
                }
                same += argmax(x, V) == argmax(ref, V);
                if (top2_gap(ref, V) > gap_clear[type]) {
                    clear++;
                    flips += argmax(x, V) != argmax(ref, V);
                }
            }
            double rms = sqrt(sq / ((double)N_TOK * V));
            CHECK_MSG(err <= tol, "%s: max |logit - HF fp32| %.3g > %.3g", what, err, tol);
            CHECK_MSG(rms <= tol_rms[type], "%s: rms |logit - HF fp32| %.3g > %.3g", what, rms, tol_rms[type]);
            CHECK_MSG(flips == 0, "%s: argmax differs at %d of %d clear positions", what, flips, clear);
            CHECK_MSG(same >= min_top1[type], "%s: top-1 equal at %d/%d positions", what, same, N_TOK);
            printf("%-34s |logit - HF fp32| max %.3f rms %.3f (tol %.2g); top-1 equal %d/%d (clear %d/%d)\n",
                   what, err, rms, tol, same, N_TOK, clear - flips, clear);
        }
    }
    gemma3_model_free(mf);
out_q:
    gemma3_model_free(mq);
out:
    free(a);
    free(b);
}

/* The internal view: quantizing at load owns every matrix and closes the source files. */
static void test_weights_internal(void) {
    g3_config c;
    static g3_weights w;
    if (g3_config_load(GOLDEN "/tiny-causal/config.json", &c) != GEMMA3_OK) return;
    int rc = g3_weights_load_ex(GOLDEN "/tiny-causal", &c, G3_ST_LOAD_READ, GEMMA3_WEIGHTS_Q4_0, G3_LAYOUT_ROWS, 1, &w);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    if (rc != GEMMA3_OK) return;
    CHECK(w.st == NULL);
    CHECK(w.wtype == GEMMA3_WEIGHTS_Q4_0 && w.layers[3].w_up.type == GEMMA3_WEIGHTS_Q4_0 && w.embed.type == GEMMA3_WEIGHTS_Q4_0);
    CHECK(w.lm_head.data == w.embed.data);
    CHECK(((uintptr_t)w.layers[2].wq.data & 63u) == 0);
    g3_weights_free(&w);
    CHECK_EQ_INT(g3_weights_load_ex(GOLDEN "/tiny-causal", &c, G3_ST_LOAD_MMAP, GEMMA3_WEIGHTS_COUNT, G3_LAYOUT_ROWS, 1, &w), GEMMA3_ERR_ARG);
}

/* ---- other layouts: untied head, sharded multimodal source, F32 source ----------------------- */

/* Quantizing at load and loading gemma3_quantize's directory give the same logits; the file
 * holds the text model only, under the source's names, the head quantized too. */
static void test_layouts(void) {
    const char *b = getenv("G3_BUILD");
    static const struct {
        const char *name, *args, *head;
    } cases[] = {
        {"untied", "--seed 3 --untied", "lm_head.weight"},
        {"mm-shards", "--seed 4 --layout mm --shards 3 --vocab 1024", NULL},
        {"f32", "--seed 5 --dtype f32 --vocab 512", NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char src[700], dst[700], cmd[2000];
        snprintf(src, sizeof src, "%s/%s", tmpdir, cases[k].name);
        snprintf(dst, sizeof dst, "%s/%s-q", tmpdir, cases[k].name);
        snprintf(cmd, sizeof cmd, "%s/tools/gen-checkpoint tiny '%s' %s >/dev/null", b ? b : "build", src,
                 cases[k].args);
        if (system(cmd) != 0) {
            CHECK_MSG(0, "%s failed", cmd);
            continue;
        }
        CHECK_MSG(gemma3_quantize(src, dst, GEMMA3_WEIGHTS_Q8_0, 2) == GEMMA3_OK, "%s: %s", cases[k].name,
                  gemma3_last_error());
        gemma3_model *mq = load_model(src, GEMMA3_WEIGHTS_Q8_0, 2), *mf = load_model(dst, GEMMA3_WEIGHTS_AS_STORED, 1);
        g3_st *st = NULL;
        if (g3_st_open_file(path_in(dst, "model.safetensors"), &st) == GEMMA3_OK) {
            if (cases[k].head) {
                const g3_tensor *h = g3_st_find(st, cases[k].head);
                CHECK(h && h->dtype == G3_DTYPE_U8);
            }
            int text = 0;
            for (int i = 0; i < g3_st_count(st); i++) text += strstr(g3_st_at(st, i)->name, "vision") == NULL;
            CHECK_EQ_INT(text, g3_st_count(st));
            g3_st_close(st);
        }
        if (mq && mf) {
            gemma3_model_info info;
            gemma3_model_get_info(mq, &info);
            int V = info.vocab_size;
            size_t bytes = (size_t)N_TOK * V * sizeof(float);
            float *x = malloc(bytes), *y = malloc(bytes);
            int32_t tok[N_TOK];
            for (int i = 0; i < N_TOK; i++) tok[i] = (int32_t)((i * 7919 + 2) % V);
            for (int exact = 0; exact <= 1; exact++) {
                all_logits(mq, exact, NULL, tok, x, V);
                all_logits(mf, exact, NULL, tok, y, V);
                CHECK_MSG(memcmp(x, y, bytes) == 0, "%s exact %d: at load != from file", cases[k].name, exact);
            }
            free(x);
            free(y);
        }
        gemma3_model_free(mq);
        gemma3_model_free(mf);
    }
}

/* ---- the x8 layout against the row layout ------------------------------------------------ */

static gemma3_model *load_layout(const char *dir, enum gemma3_weight_type type, enum gemma3_repack repack) {
    gemma3_model_params mp = {0};
    mp.weight_type = type;
    mp.n_threads = 2;
    mp.repack = repack;
    gemma3_model *m = NULL;
    int rc = gemma3_model_load_ex(dir, &mp, &m);
    CHECK_MSG(rc == GEMMA3_OK, "%s repack %d: %s", dir, (int)repack, gemma3_last_error());
    return m;
}

/* A synthetic checkpoint of the tiny preset with args into dir; 0 (a failed check) if none. */
static int gen_tiny(const char *dir, const char *args) {
    const char *bdir = getenv("G3_BUILD");
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s/tools/gen-checkpoint tiny '%s' %s >/dev/null", bdir ? bdir : "build", dir, args);
    const int ok = system(cmd) == 0;
    CHECK_MSG(ok, "%s failed", cmd);
    return ok;
}

/* The models' logits on every ISA table the CPU has, in both modes: a model quantized at load
 * into x8 == its file repacked into x8, bit for bit, on 1 and 3 threads and any split; both
 * within rounding of the row layout (the same bits in exact mode where the fp32 kernels read the
 * same blocks in the same order). */
static void compare_layouts(const char *tname, const gemma3_model *rows, const gemma3_model *at_load,
                            const gemma3_model *from_file, int V) {
    static const char *isas[] = {"scalar", "avx2", "avx512"};
    const size_t bytes = (size_t)N_TOK * V * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *r = malloc(bytes);
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = (int32_t)((i * 7919 + 5) % V);
    for (int ii = 0; ii < 3; ii++) {
        if (!g3_kernels_get((g3_isa)ii)) {
            CHECK_SKIP("isa %s (this CPU lacks it): x8 %s", isas[ii], tname);
            continue;
        }
        for (int exact = 0; exact <= 1; exact++) {
            char what[96];
            snprintf(what, sizeof what, "x8 %s %s%s", tname, isas[ii], exact ? " exact" : "");
            all_logits(at_load, exact, isas[ii], tok, a, V);
            all_logits(from_file, exact, isas[ii], tok, b, V);
            CHECK_MSG(memcmp(a, b, bytes) == 0, "%s: quantized at load != repacked file", what);
            static const int ones[] = {1}, uneven[] = {5, 3, 9, 1, 14};
            for (int nt = 1; nt <= 3; nt += 2) {
                gemma3_session *s = new_session(from_file, exact, isas[ii], nt, 0);
                if (!s) continue;
                run_split(s, tok, nt == 1 ? ones : uneven, nt == 1 ? 1 : 5, b, V);
                CHECK_MSG(memcmp(a, b, bytes) == 0, "%s: %d threads, split calls differ", what, nt);
                gemma3_session_free(s);
            }
            all_logits(rows, exact, isas[ii], tok, r, V);
            double diff = 0, sq = 0, ref_sq = 0;
            for (size_t i = 0; i < (size_t)N_TOK * V; i++) {
                const double e = fabs((double)a[i] - r[i]);
                if (!(e <= diff)) diff = e;
                sq += e * e;
                ref_sq += (double)r[i] * r[i];
            }
            const double rms = sqrt(sq / ((double)N_TOK * V)), ref_rms = sqrt(ref_sq / ((double)N_TOK * V));
            /* exact mode reads the same blocks in the same order: the same bits, except
             * with the AVX-512 tables, whose fp32 x8 kernels are the AVX2 ones. The default mode
             * sums the blocks in another order, and a last-bit change of an activation
             * can move its 8-bit rounding by a step, so layers apart the logits differ as
             * much as two kernel tables' do (rows scalar vs avx2 Q4_0: max 0.065 here), far
             * inside Q4_0's own error (rms 0.75 allowed against HF fp32 above) */
            CHECK_MSG(exact && ii < 2 ? diff == 0 : rms <= 0.05 * ref_rms && diff <= 0.5 * ref_rms,
                      "%s: |x8 - rows| max %.3g rms %.3g (logits rms %.3g)", what, diff, rms, ref_rms);
            printf("%-28s |x8 - rows| max %.3g rms %.3g (logits rms %.3g)\n", what, diff, rms, ref_rms);
        }
    }
    free(a), free(b), free(r);
}

/* On a vocabulary of 1001 rows (the LM head's last group of 8 holds one row): quantizing at load
 * into x8 == the quantized directory repacked into x8, bit for bit, on every thread count and
 * split, with every kernel table; both within rounding of the row layout. */
static void test_x8_models(void) {
    char src[700];
    snprintf(src, sizeof src, "%s/x8-src", tmpdir);
    if (!gen_tiny(src, "--seed 6 --vocab 1001")) return;
    static const enum gemma3_weight_type types[] = {GEMMA3_WEIGHTS_Q8_0, GEMMA3_WEIGHTS_Q4_0};
    for (int ti = 0; ti < 2; ti++) {
        const char *tname = gemma3_weight_type_name(types[ti]);
        char dst[760];
        snprintf(dst, sizeof dst, "%s/x8-%s", tmpdir, tname);
        CHECK_MSG(gemma3_quantize(src, dst, types[ti], 2) == GEMMA3_OK, "%s", gemma3_last_error());
        gemma3_model *rows = load_layout(src, types[ti], GEMMA3_REPACK_NONE);
        gemma3_model *at_load = load_layout(src, types[ti], GEMMA3_REPACK_X8);
        gemma3_model *from_file = load_layout(dst, GEMMA3_WEIGHTS_AS_STORED, GEMMA3_REPACK_X8);
        if (!rows || !at_load || !from_file) goto next;
        gemma3_model_info ir, il, ifl;
        gemma3_model_get_info(rows, &ir);
        gemma3_model_get_info(at_load, &il);
        gemma3_model_get_info(from_file, &ifl);
        CHECK(strcmp(ir.weight_layout, "rows") == 0 && strcmp(il.weight_layout, "x8") == 0 &&
              strcmp(ifl.weight_layout, "x8") == 0);
        CHECK(ifl.repack_seconds > 0 && il.repack_seconds == 0 && ir.repack_seconds == 0);
        CHECK(il.quantize_seconds > 0 && ifl.quantize_seconds == 0);
        const int V = il.vocab_size;
        CHECK_EQ_INT(V, 1001);
        /* the padding of the last group is memory, not weights */
        CHECK_EQ_INT(il.weight_bytes, ir.weight_bytes + 7 * (int64_t)g3_wtype_row_bytes(
                                          types[ti] == GEMMA3_WEIGHTS_Q8_0 ? GEMMA3_WEIGHTS_Q8_0 : GEMMA3_WEIGHTS_Q4_0, il.hidden_size));
        compare_layouts(tname, rows, at_load, from_file, V);
    next:
        gemma3_model_free(rows);
        gemma3_model_free(at_load);
        gemma3_model_free(from_file);
    }
}

/* Each matrix of w in x8 where its type has x8 kernels and x8 was asked for, else in rows; counts
 * the x8 ones and those of K-quant types into *n_x8, *n_k. */
static int layouts_per_type(const g3_weights *w, const g3_config *c, g3_layout asked, int *n_x8, int *n_k) {
    int bad = 0;
    *n_x8 = *n_k = 0;
    for (int l = 0; l <= c->n_layers; l++) {
        const g3_layer_weights *lw = &w->layers[l < c->n_layers ? l : 0];
        const g3_matrix m[] = {lw->wq, lw->wk, lw->wv, lw->wo, lw->w_gate, lw->w_up, lw->w_down};
        const g3_matrix *list = l < c->n_layers ? m : &w->embed;
        for (int i = 0; i < (l < c->n_layers ? 7 : 1); i++) {
            const int x8 = asked == G3_LAYOUT_X8 && g3_wtype_has_x8(list[i].type);
            bad += list[i].layout != (x8 ? G3_LAYOUT_X8 : G3_LAYOUT_ROWS);
            *n_x8 += list[i].layout == G3_LAYOUT_X8;
            *n_k += g3_wtype_get((int)list[i].type)->act_k;
        }
    }
    return bad;
}

/* A mix whose main type has no x8 kernels (Q4_K_M of rows whose widths are not all multiples of
 * 256: Q4_K and Q6_K beside the fallbacks Q5_0 and Q8_0): each matrix takes the x8 layout where
 * its own type has x8 kernels, the K-quants stay in the file's rows (so the file stays mapped);
 * quantized at load the same; the logits as test_x8_models asks. */
static void test_mixed_layout(void) {
    char src[700], dst[760];
    snprintf(src, sizeof src, "%s/mix-src", tmpdir);
    snprintf(dst, sizeof dst, "%s/mix-q4_k_m", tmpdir);
    if (!gen_tiny(src, "--seed 9 --vocab 777 --hidden 256 --intermediate 1152")) return;
    CHECK_MSG(gemma3_quantize(src, dst, GEMMA3_WEIGHTS_Q4_K_M, 2) == GEMMA3_OK, "%s", gemma3_last_error());
    g3_config c;
    static g3_weights w;
    if (g3_config_load(path_in(dst, "config.json"), &c) != GEMMA3_OK) return;
    static const g3_layout asked[] = {G3_LAYOUT_X8, G3_LAYOUT_ROWS};
    for (int i = 0; i < 4; i++) {
        const int from_file = i < 2;
        const int rc = g3_weights_load_ex(from_file ? dst : src, &c, G3_ST_LOAD_MMAP,
                                          from_file ? GEMMA3_WEIGHTS_AS_STORED : GEMMA3_WEIGHTS_Q4_K_M, asked[i % 2], 2, &w);
        CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
        if (rc != GEMMA3_OK) continue;
        int n_x8, n_k;
        CHECK_EQ_INT(layouts_per_type(&w, &c, asked[i % 2], &n_x8, &n_k), 0);
        CHECK(n_k > 0 && (asked[i % 2] == G3_LAYOUT_X8) == (n_x8 > 0));
        CHECK_EQ_INT(w.layout_mixed, asked[i % 2] == G3_LAYOUT_X8);
        CHECK(from_file ? w.st != NULL : w.st == NULL); /* the K-quants read in place from the file */
        CHECK(from_file && asked[i % 2] == G3_LAYOUT_X8 ? w.repack_seconds > 0 : w.repack_seconds == 0);
        g3_weights_free(&w);
    }
    gemma3_model *rows = load_layout(dst, GEMMA3_WEIGHTS_AS_STORED, GEMMA3_REPACK_NONE);
    gemma3_model *at_load = load_layout(src, GEMMA3_WEIGHTS_Q4_K_M, GEMMA3_REPACK_X8);
    gemma3_model *from_file = load_layout(dst, GEMMA3_WEIGHTS_AS_STORED, GEMMA3_REPACK_X8);
    if (rows && at_load && from_file) {
        gemma3_model_info ir, ifl;
        gemma3_model_get_info(rows, &ir);
        gemma3_model_get_info(from_file, &ifl);
        CHECK(strcmp(ir.weight_layout, "rows") == 0 && strcmp(ifl.weight_layout, "mixed") == 0);
        compare_layouts("q4_k_m", rows, at_load, from_file, ifl.vocab_size);
    }
    gemma3_model_free(rows);
    gemma3_model_free(at_load);
    gemma3_model_free(from_file);
}

/* ---- the fast row quantizer == the reference, byte for byte ---------------------------------- */

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* Rows built to hit every rounding edge: exact halves of the step (x * id = k + 0.5), ties of
 * the largest magnitude with both signs, all-zero and -0.0 blocks, one nonzero value, subnormal
 * and huge scales, and plain random bf16 values; from fp32 and from bf16 storage; through every
 * instruction set's quantizer. 37 blocks a row: two of the AVX-512 groups of 16 and a tail. */
static void test_fast_quantizer(void) {
    enum { N = 37 * 32 };
    static float x[N], xb[N];
    static uint16_t h[N];
    static uint8_t a[N * 2], b[N * 2];
    int bad = 0, rows = 0, refused = 0, isas = 0;
    for (int isa = G3_ISA_SCALAR; isa <= G3_ISA_AVX512; isa++) {
        g3_quantize_row_fn fast = g3_quantize_row_get((g3_isa)isa);
        if (!fast) continue;
        isas++;
        rng_state = 12345;
        for (int iter = 0; iter < 2000; iter++) {
            int kind = iter % 8;
            float scale = ldexpf(1.0f, (int)(rnd() % 60) - 40);
            for (int i = 0; i < N; i++) {
                float r = ((float)(rnd() % 2001) - 1000.0f) / 1000.0f;
                switch (kind) {
                case 0: x[i] = r * scale; break;
                case 1: x[i] = ((float)(rnd() % 255) - 127.0f + 0.5f) * scale / 127.0f; break; /* halves */
                case 2: x[i] = (i % 32 == 5 || i % 32 == 20) ? (rnd() & 1 ? scale : -scale) : r * scale; break;
                case 3: x[i] = (rnd() & 1) ? -0.0f : 0.0f; break;
                case 4: x[i] = i % 32 == (int)(rnd() % 32) ? -scale : 0.0f; break;
                case 5: x[i] = ((float)(rnd() % 17) - 8.0f) * scale / 8.0f; break; /* Q4 grid points */
                case 6: x[i] = r * 1e-39f; break;                                  /* subnormal */
                default: x[i] = r * 6.0e4f; break;                                 /* near fp16 max */
                }
                h[i] = g3_f32_to_bf16(x[i]);
                xb[i] = g3_bf16_to_f32(h[i]);
            }
            for (int t = GEMMA3_WEIGHTS_Q8_0; t <= GEMMA3_WEIGHTS_Q4_0; t++) {
                size_t rb = g3_wtype_row_bytes((g3_wtype)t, N);
                g3_quantize_row((g3_wtype)t, x, a, N);
                int ok = fast((g3_wtype)t, x, 0, b, N);
                if (memcmp(a, b, rb) != 0 && !bad)
                    for (size_t i = 0; i < rb; i++)
                        if (a[i] != b[i]) {
                            fprintf(stderr, "isa %d kind %d %s byte %zu: %02x vs %02x\n", isa, kind,
                                    g3_wtype_name((g3_wtype)t), i, a[i], b[i]);
                            break;
                        }
                bad += memcmp(a, b, rb) != 0 || ok != 1;
                g3_quantize_row((g3_wtype)t, xb, a, N);
                ok = fast((g3_wtype)t, (const uint8_t *)h, 1, b, N);
                bad += memcmp(a, b, rb) != 0 || ok != 1;
                rows += 2;
                /* one NaN or infinity anywhere: refused, from either storage */
                int at = (int)(rnd() % N);
                static const uint16_t nonfinite[] = {0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81};
                uint16_t v = nonfinite[rnd() % 5];
                uint16_t keep_h = h[at];
                float keep_x = x[at];
                h[at] = v;
                x[at] = g3_bf16_to_f32(v);
                refused += fast((g3_wtype)t, (const uint8_t *)h, 1, b, N) == 0;
                refused += fast((g3_wtype)t, x, 0, b, N) == 0;
                h[at] = keep_h;
                x[at] = keep_x;
            }
        }
    }
    CHECK_MSG(bad == 0, "a row quantizer differs from g3_quantize_row on %d of %d rows", bad, rows);
    CHECK_MSG(refused == rows, "a NaN or infinity went unnoticed in %d of %d rows", rows - refused, rows);
    CHECK(isas >= 1);
    /* unaligned bf16 source */
    static uint8_t raw[2 * N + 1];
    for (int i = 0; i < N; i++) memcpy(raw + 1 + 2 * i, &h[i], 2);
    g3_quantize_row_fn best = g3_quantize_row_best();
    best(GEMMA3_WEIGHTS_Q4_0, h, 1, a, N);
    best(GEMMA3_WEIGHTS_Q4_0, raw + 1, 1, b, N);
    CHECK(memcmp(a, b, g3_wtype_row_bytes(GEMMA3_WEIGHTS_Q4_0, N)) == 0);
}

/* ---- malformed quantized files ------------------------------------------------------------ */

typedef struct edit {
    const char *meta_quant;  /* gemma3.quant value, or NULL for no metadata */
    const char *tensor;      /* a tensor whose row bytes change by `delta` (NULL: none) */
    int delta;
} edit;

/* Rewrites DIR/model.safetensors of a good quantized dir into tmp(name) with an edit. */
static const char *rewrite(const char *good_dir, const char *name, const edit *e) {
    const char *dir = tmp(name);
    static char out[700];
    snprintf(out, sizeof out, "%s", dir);
    mkdir(out, 0755);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/'", good_dir, out);
    CHECK(system(cmd) == 0);
    g3_st *st = NULL;
    if (g3_st_open_file(path_in(good_dir, "model.safetensors"), &st) != GEMMA3_OK) {
        CHECK_MSG(0, "%s", gemma3_last_error());
        return out;
    }
    int n = g3_st_count(st);
    g3_st_entry *ent = calloc((size_t)n, sizeof *ent);
    for (int i = 0; i < n; i++) {
        const g3_tensor *t = g3_st_at(st, i);
        ent[i].name = t->name;
        ent[i].dtype = t->dtype;
        ent[i].n_dims = t->n_dims;
        memcpy(ent[i].shape, t->shape, sizeof ent[i].shape);
        if (e->tensor && strcmp(t->name, e->tensor) == 0) ent[i].shape[1] += e->delta;
    }
    const char *meta[4] = {"format", "pt", "gemma3.quant", e->meta_quant};
    g3_st_writer *w = NULL;
    int rc = g3_st_writer_create(path_in(out, "model.safetensors"), ent, n, meta, e->meta_quant ? 2 : 1, &w);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    static uint8_t zeros[4096];
    for (int i = 0; i < n && rc == GEMMA3_OK; i++) {
        const g3_tensor *t = g3_st_at(st, i);
        size_t want = (size_t)ent[i].shape[0] * (size_t)(ent[i].n_dims == 2 ? ent[i].shape[1] : 1) *
                      g3_dtype_size(ent[i].dtype);
        size_t take = want < t->n_bytes ? want : t->n_bytes;
        rc = g3_st_writer_append(w, t->data, take);
        for (size_t k = take; k < want && rc == GEMMA3_OK; k += sizeof zeros)
            rc = g3_st_writer_append(w, zeros, want - k < sizeof zeros ? want - k : sizeof zeros);
    }
    if (rc == GEMMA3_OK) rc = g3_st_writer_finish(w);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    free(ent);
    g3_st_close(st);
    return out;
}

static void expect_load_error(const char *dir, int code, const char *want1, const char *want2) {
    gemma3_model *m = NULL;
    int rc = gemma3_model_load(dir, &m);
    const char *msg = gemma3_last_error();
    CHECK_MSG(rc == code, "%s: rc %d, want %d (%s)", dir, rc, code, msg);
    CHECK(m == NULL);
    CHECK_MSG(one_line(msg), "%s: message is not one line: %s", dir, msg);
    CHECK_MSG(strstr(msg, want1) != NULL, "%s: '%s' lacks '%s'", dir, msg, want1);
    if (want2) CHECK_MSG(strstr(msg, want2) != NULL, "%s: '%s' lacks '%s'", dir, msg, want2);
    gemma3_model_free(m);
}

static void test_malformed(void) {
    char good[700];
    snprintf(good, sizeof good, "%s/tiny-causal-q8_0", tmpdir); /* written by test_model */
    struct stat sb;
    if (stat(path_in(good, "model.safetensors"), &sb) != 0) {
        CHECK_MSG(0, "%s missing", good);
        return;
    }
    /* the rewrite itself is faithful */
    const edit same = {"q8_0", NULL, 0};
    gemma3_model *m = load_model(rewrite(good, "same", &same), GEMMA3_WEIGHTS_AS_STORED, 0);
    CHECK(m != NULL);
    gemma3_model_free(m);

    const edit unknown = {"q9_9", NULL, 0};
    expect_load_error(rewrite(good, "unknown", &unknown), GEMMA3_ERR_FORMAT, "gemma3.quant", "'q9_9'");
    const edit bf16 = {"bf16", NULL, 0};
    expect_load_error(rewrite(good, "bf16meta", &bf16), GEMMA3_ERR_FORMAT, "gemma3.quant", "'bf16'");
    const edit no_meta = {NULL, NULL, 0};
    expect_load_error(rewrite(good, "nometa", &no_meta), GEMMA3_ERR_FORMAT,
                      "model.embed_tokens.weight: dtype U8", "gemma3.quant");
    /* metadata says q4_0, sizes are q8_0's: [4096, 68] (q8_0 of 64) is not [4096, 36] */
    const edit disagree = {"q4_0", NULL, 0};
    expect_load_error(rewrite(good, "disagree", &disagree), GEMMA3_ERR_FORMAT,
                      "tensor model.embed_tokens.weight: expected q4_0", "as U8 [4096, 36], got U8 [4096, 68]");
    const edit wrong = {"q8_0", "model.layers.2.mlp.down_proj.weight", 34};
    expect_load_error(rewrite(good, "wrongsize", &wrong), GEMMA3_ERR_FORMAT,
                      "model.layers.2.mlp.down_proj.weight", "as U8 [64, 204], got U8 [64, 238]");

    /* truncated: the last tensor's data no longer fits */
    const char *trunc = rewrite(good, "truncated", &same);
    char *img;
    size_t size;
    if (g3_read_file(path_in(trunc, "model.safetensors"), &img, &size) == GEMMA3_OK) {
        FILE *f = fopen(path_in(trunc, "model.safetensors"), "wb");
        fwrite(img, 1, size - 100, f);
        fclose(f);
        free(img);
        expect_load_error(trunc, GEMMA3_ERR_FORMAT, "model.safetensors: tensor", "past the end");
    }
}

/* ---- gemma3_quantize: arguments and atomicity --------------------------------------------- */

static int count_entries(const char *dir) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 0", dir);
    return system(cmd) == 0 ? 0 : 1;
}

static void test_quantize_errors(void) {
    const char *src = GOLDEN "/tiny-causal";
    struct stat sb;
    CHECK_EQ_INT(gemma3_quantize(src, tmp("x"), GEMMA3_WEIGHTS_BF16, 1), GEMMA3_ERR_ARG);
    CHECK_EQ_INT(gemma3_quantize(src, tmp("x"), GEMMA3_WEIGHTS_COUNT, 1), GEMMA3_ERR_ARG);
    CHECK(stat(tmp("x"), &sb) != 0);
    CHECK_EQ_INT(gemma3_quantize(src, src, GEMMA3_WEIGHTS_Q8_0, 1), GEMMA3_ERR_ARG);
    CHECK(strstr(gemma3_last_error(), "source"));
    CHECK(stat(GOLDEN "/tiny-causal/model.safetensors.gemma3-tmp", &sb) != 0);
    CHECK_EQ_INT(gemma3_quantize(tmp("no-such"), tmp("y"), GEMMA3_WEIGHTS_Q8_0, 1), GEMMA3_ERR_IO);
    CHECK(stat(tmp("y"), &sb) != 0);

    /* a failure after model.safetensors was written (a side file that cannot be read): no file
     * is left, in a directory this call created or in one that existed */
    char bad[640], olddst[640], narrow[640];
    snprintf(bad, sizeof bad, "%s", tmp("badsrc"));
    snprintf(olddst, sizeof olddst, "%s", tmp("olddst"));
    snprintf(narrow, sizeof narrow, "%s", tmp("narrow"));
    char cmd[4000];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/tokenizer.json' && cp '%s/config.json' '%s/model.safetensors' '%s/'",
             bad, src, src, bad);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(gemma3_quantize(bad, tmp("newdst"), GEMMA3_WEIGHTS_Q4_0, 2), GEMMA3_ERR_IO);
    CHECK_MSG(one_line(gemma3_last_error()) && strstr(gemma3_last_error(), "tokenizer.json"), "%s",
              gemma3_last_error());
    CHECK(stat(tmp("newdst"), &sb) != 0);
    mkdir(olddst, 0755);
    CHECK_EQ_INT(gemma3_quantize(bad, olddst, GEMMA3_WEIGHTS_Q4_0, 2), GEMMA3_ERR_IO);
    CHECK_EQ_INT(count_entries(olddst), 0);
    /* a source the loader refuses (a missing tensor): nothing written either */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/config.json' '%s/model.safetensors' '%s/' && sed -i 's/\"intermediate_size\": 192/\"intermediate_size\": 160/' '%s/config.json'",
             narrow, src, src, narrow, narrow);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(gemma3_quantize(narrow, olddst, GEMMA3_WEIGHTS_Q8_0, 2), GEMMA3_ERR_FORMAT);
    CHECK_MSG(strstr(gemma3_last_error(), "model.layers.0.mlp.gate_proj.weight: expected shape [160, 64], got [192, 64]") != NULL,
              "%s", gemma3_last_error());
    CHECK_EQ_INT(count_entries(olddst), 0);
    /* a stale index in the destination would shadow the new file */
    snprintf(cmd, sizeof cmd, "echo '{}' > '%s/model.safetensors.index.json'", olddst);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(gemma3_quantize(src, olddst, GEMMA3_WEIGHTS_Q8_0, 2), GEMMA3_ERR_ARG);
    CHECK(strstr(gemma3_last_error(), "index.json") != NULL);
    CHECK_EQ_INT(count_entries(olddst), 1);
}

int main(void) {
    if (!mkdtemp(tmpdir)) { /* no scratch space: the suite cannot run here (77 = skipped) */
        printf("SKIP mkdtemp %s failed\n", tmpdir);
        return 77;
    }
    static const char *names[] = {"tiny-causal", "tiny-mm"};
    for (int i = 0; i < 2; i++) {
        golden g;
        if (load_golden(names[i], &g) != 0) {
            CHECK_MSG(0, "cannot read the golden data of %s", names[i]);
            continue;
        }
        test_model(&g, GEMMA3_WEIGHTS_Q8_0);
        test_model(&g, GEMMA3_WEIGHTS_Q4_0);
        free(g.logits);
    }
    test_weights_internal();
    test_layouts();
    test_x8_models();
    test_mixed_layout();
    test_fast_quantizer();
    test_malformed();
    test_quantize_errors();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return check_report();
}
