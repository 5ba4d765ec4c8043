/* gen-checkpoint - writes a synthetic Gemma 3 checkpoint: config.json, generation_config.json and
 * safetensors (one file, or an index + shards) with the real tensor names, shapes and configs of
 * Gemma 3 270M / 1B / 4B / 12B / 27B, or small test shapes, filled with seeded random weights.
 *
 *   gen-checkpoint PRESET DIR [--layout causal|mm|mm-new] [--seed S] [--shards N]
 *                  [--dtype bf16|f32] [--fill random|zero] [--tokenizer PATH] [overrides]
 *
 * Determinism: element e of tensor t is a pure function of (seed, t, e) (splitmix64 used as a
 * counter-based generator), so the same arguments give the same bytes whatever the buffering.
 *
 * --fill zero writes only the headers and extends each file with ftruncate: the data is a hole,
 * reads back as zeros, and costs neither disk nor time, so tests can load even the 27B preset.
 *
 * Scales, chosen so that random weights give non-degenerate logits (not just "the input token"):
 * Gemma's sandwich norms normalise every attention and MLP output to RMS ~1 before it is added to
 * the residual, so after L layers the residual has RMS^2 ~ c^2 + 2L, where c = sigma_e*sqrt(H) is
 * the RMS of the scaled embedding sqrt(H)*e (sigma_e the embedding's std). With the tied head, the
 * input token's own logit is ~ H*sigma_e / sqrt(c^2 + 2L) noise-standard-deviations above the
 * others (every other logit ~ N(0, c^2)); the max of ~262k Gaussians sits ~5 sd up. Taking
 * c = min(1, 2*sqrt(2L/H)) puts the input token ~2 sd up in every preset (tiny: 1.9, 1B: 2.0,
 * 27B: 2.0), so it rarely wins the argmax while the logits keep a spread of ~c.
 *   - embedding: uniform with std sigma_e = c / sqrt(H)
 *   - every projection [out, in]: std 1/sqrt(in) (keeps q, k, v, gate, up at unit scale)
 *   - norm weights (stored as scale - 1): std 0.05 around 0, so 1 + w ~ 1
 *   - vision tensors (mm layouts, ignored by the engine): std 0.02 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rng.h"
#include "util.h"

typedef struct spec {
    const char *name;
    int vocab, hidden, inter, layers, heads, kv_heads, head_dim, window, max_pos;
    double qpas, rope_factor; /* rope_factor 1 = no scaling */
    int layout;               /* default layout */
    int explicit_layer_types; /* 270M's hub config lists layer_types */
} spec;

enum { LAYOUT_CAUSAL, LAYOUT_MM, LAYOUT_MM_NEW };
static const char *const layout_names[] = {"causal", "mm", "mm-new"};

static const spec presets[] = {
    {"270m", 262144, 640, 2048, 18, 4, 1, 256, 512, 32768, 256, 1, LAYOUT_CAUSAL, 1},
    {"1b", 262144, 1152, 6912, 26, 4, 1, 256, 512, 32768, 256, 1, LAYOUT_CAUSAL, 0},
    {"4b", 262208, 2560, 10240, 34, 8, 4, 256, 1024, 131072, 256, 8, LAYOUT_MM, 0},
    {"12b", 262208, 3840, 15360, 48, 16, 8, 256, 1024, 131072, 256, 8, LAYOUT_MM, 0},
    {"27b", 262208, 5376, 21504, 62, 32, 16, 128, 1024, 131072, 168, 8, LAYOUT_MM, 0},
    {"tiny", 262144, 64, 192, 7, 4, 1, 16, 8, 32768, 16, 1, LAYOUT_CAUSAL, 1},
    {"tiny-gqa", 262208, 64, 128, 7, 4, 2, 16, 8, 32768, 16, 8, LAYOUT_MM, 0},
};

typedef struct options {
    spec s;
    int layout, shards, f32, zero, untied, rope_new, pattern;
    double attn_softcap, final_softcap; /* 0 = null */
    uint64_t seed;
    const char *dir, *tokenizer;
} options;

enum kind { K_EMBED, K_MATRIX, K_NORM, K_VISION };

typedef struct tensor {
    char name[128];
    int n_dims;
    int64_t shape[4];
    enum kind kind;
    double std;
    uint64_t n_el, offset; /* offset within its shard's data region */
    int shard;
} tensor;

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gen-checkpoint: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* ---- random numbers ------------------------------------------------------------------------ */

/* Uniform in [-sqrt(3), sqrt(3)): unit variance. Element e of the stream `key`. */
static double unit_uniform(uint64_t key, uint64_t e) {
    uint64_t r = g3_splitmix64(key ^ g3_splitmix64(e));
    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    return (2.0 * u - 1.0) * 1.7320508075688772;
}

/* ---- the tensor list ----------------------------------------------------------------------- */

static tensor *add(tensor *ts, int *n, const char *prefix, const char *name, enum kind kind,
                   double std, int n_dims, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    tensor *t = &ts[(*n)++];
    memset(t, 0, sizeof *t);
    if (snprintf(t->name, sizeof t->name, "%s%s", prefix, name) >= (int)sizeof t->name) abort();
    t->kind = kind;
    t->std = std;
    t->n_dims = n_dims;
    int64_t d[4] = {d0, d1, d2, d3};
    t->n_el = 1;
    for (int i = 0; i < n_dims; i++) {
        t->shape[i] = d[i];
        t->n_el *= (uint64_t)d[i];
    }
    return t;
}

static int build_tensors(const options *o, tensor *ts) {
    const spec *s = &o->s;
    const char *prefix = o->layout == LAYOUT_CAUSAL ? "model."
                         : o->layout == LAYOUT_MM   ? "language_model.model."
                                                    : "model.language_model.";
    int64_t H = s->hidden, I = s->inter, q = (int64_t)s->heads * s->head_dim;
    int64_t kv = (int64_t)s->kv_heads * s->head_dim, hd = s->head_dim;
    double c = fmin(1.0, 2.0 * sqrt(2.0 * s->layers / (double)H));
    double norm_std = 0.05;
    int n = 0;
    add(ts, &n, prefix, "embed_tokens.weight", K_EMBED, c / sqrt((double)H), 2, s->vocab, H, 0, 0);
    for (int l = 0; l < s->layers; l++) {
        char p[96];
        snprintf(p, sizeof p, "%slayers.%d.", prefix, l);
        add(ts, &n, p, "input_layernorm.weight", K_NORM, norm_std, 1, H, 0, 0, 0);
        add(ts, &n, p, "self_attn.q_proj.weight", K_MATRIX, 1 / sqrt((double)H), 2, q, H, 0, 0);
        add(ts, &n, p, "self_attn.k_proj.weight", K_MATRIX, 1 / sqrt((double)H), 2, kv, H, 0, 0);
        add(ts, &n, p, "self_attn.v_proj.weight", K_MATRIX, 1 / sqrt((double)H), 2, kv, H, 0, 0);
        add(ts, &n, p, "self_attn.q_norm.weight", K_NORM, norm_std, 1, hd, 0, 0, 0);
        add(ts, &n, p, "self_attn.k_norm.weight", K_NORM, norm_std, 1, hd, 0, 0, 0);
        add(ts, &n, p, "self_attn.o_proj.weight", K_MATRIX, 1 / sqrt((double)q), 2, H, q, 0, 0);
        add(ts, &n, p, "post_attention_layernorm.weight", K_NORM, norm_std, 1, H, 0, 0, 0);
        add(ts, &n, p, "pre_feedforward_layernorm.weight", K_NORM, norm_std, 1, H, 0, 0, 0);
        add(ts, &n, p, "mlp.gate_proj.weight", K_MATRIX, 1 / sqrt((double)H), 2, I, H, 0, 0);
        add(ts, &n, p, "mlp.up_proj.weight", K_MATRIX, 1 / sqrt((double)H), 2, I, H, 0, 0);
        add(ts, &n, p, "mlp.down_proj.weight", K_MATRIX, 1 / sqrt((double)I), 2, H, I, 0, 0);
        add(ts, &n, p, "post_feedforward_layernorm.weight", K_NORM, norm_std, 1, H, 0, 0, 0);
    }
    add(ts, &n, prefix, "norm.weight", K_NORM, norm_std, 1, H, 0, 0, 0);
    if (o->untied)
        add(ts, &n, o->layout == LAYOUT_MM ? "language_model." : "", "lm_head.weight", K_MATRIX,
            1 / sqrt((double)H), 2, s->vocab, H, 0, 0);
    if (o->layout != LAYOUT_CAUSAL) { /* a few SigLIP / projector tensors, for "ignored" */
        const char *vp = o->layout == LAYOUT_MM ? "" : "model.";
        int64_t vw = H >= 1024 ? 1152 : 32;
        char p[64];
        snprintf(p, sizeof p, "%svision_tower.vision_model.", vp);
        add(ts, &n, p, "embeddings.patch_embedding.weight", K_VISION, 0.02, 4, vw, 3, 14, 14);
        add(ts, &n, p, "post_layernorm.weight", K_VISION, 0.02, 1, vw, 0, 0, 0);
        snprintf(p, sizeof p, "%smulti_modal_projector.", vp);
        add(ts, &n, p, "mm_input_projection_weight", K_VISION, 0.02, 2, vw, H, 0, 0);
        add(ts, &n, p, "mm_soft_emb_norm.weight", K_VISION, 0.02, 1, vw, 0, 0, 0);
    }
    return n;
}

/* ---- files --------------------------------------------------------------------------------- */

static int mkdirs(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return (mkdir(buf, 0755) != 0 && errno != EEXIST) ? -1 : 0;
}

static FILE *open_out(const options *o, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o->dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) fail("%s: cannot create: %s", path, strerror(errno));
    return f;
}

static void shard_name(char *buf, size_t n, int k, int shards) {
    if (shards == 1) snprintf(buf, n, "model.safetensors");
    else snprintf(buf, n, "model-%05d-of-%05d.safetensors", k + 1, shards);
}

/* Writes the tensor's elements in chunks: never the whole tensor in memory. */
static int write_data(FILE *f, const options *o, const tensor *t, int index) {
    enum { CHUNK = 1 << 16 };
    static uint8_t buf[CHUNK * 4];
    uint64_t key =
        g3_splitmix64(o->seed * G3_SPLITMIX64_GAMMA ^ g3_splitmix64((uint64_t)index + 1));
    size_t esize = o->f32 ? 4 : 2;
    for (uint64_t e0 = 0; e0 < t->n_el; e0 += CHUNK) {
        size_t m = (size_t)(t->n_el - e0 < CHUNK ? t->n_el - e0 : CHUNK);
        for (size_t i = 0; i < m; i++) {
            float v = (float)(t->std * unit_uniform(key, e0 + i));
            if (o->f32) memcpy(buf + 4 * i, &v, 4);
            else {
                uint16_t h = g3_f32_to_bf16(v);
                memcpy(buf + 2 * i, &h, 2);
            }
        }
        if (fwrite(buf, esize, m, f) != m) return -1;
    }
    return 0;
}

/* One safetensors file with the tensors of shard k. The header is space-padded so the data
 * region starts 8-byte aligned, as the reference writer does. */
static int write_shard(const options *o, tensor *ts, int n, int k) {
    char name[64];
    shard_name(name, sizeof name, k, o->shards);
    const char *dt = o->f32 ? "F32" : "BF16";
    size_t esize = o->f32 ? 4 : 2;
    size_t cap = 4096 + (size_t)n * 256, len = 0;
    char *hdr = malloc(cap);
    if (!hdr) return fail("out of memory");
    uint64_t off = 0;
    len += (size_t)snprintf(hdr + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        tensor *t = &ts[i];
        if (t->shard != k) continue;
        t->offset = off;
        len += (size_t)snprintf(hdr + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, dt);
        for (int d = 0; d < t->n_dims; d++)
            len += (size_t)snprintf(hdr + len, cap - len, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%llu,%llu]}",
                                (unsigned long long)off, (unsigned long long)(off + t->n_el * esize));
        off += t->n_el * esize;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while ((8 + len) % 8) hdr[len++] = ' ';
    FILE *f = open_out(o, name);
    if (!f) {
        free(hdr);
        return 1;
    }
    static char iobuf[1 << 20];
    setvbuf(f, iobuf, _IOFBF, sizeof iobuf);
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)((uint64_t)len >> (8 * i));
    int bad = fwrite(lenb, 1, 8, f) != 8 || fwrite(hdr, 1, len, f) != len;
    free(hdr);
    if (o->zero) {
        bad = bad || fflush(f) != 0 || ftruncate(fileno(f), (off_t)(8 + len + off)) != 0;
    } else {
        for (int i = 0; i < n && !bad; i++)
            if (ts[i].shard == k) bad = write_data(f, o, &ts[i], i) != 0;
    }
    bad = fclose(f) != 0 || bad;
    return bad ? fail("%s/%s: write failed: %s", o->dir, name, strerror(errno)) : 0;
}

static int write_index(const options *o, const tensor *ts, int n) {
    FILE *f = open_out(o, "model.safetensors.index.json");
    if (!f) return 1;
    size_t esize = o->f32 ? 4 : 2;
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += ts[i].n_el * esize;
    fprintf(f, "{\n  \"metadata\": {\"total_size\": %llu},\n  \"weight_map\": {\n",
            (unsigned long long)total);
    for (int i = 0; i < n; i++) {
        char name[64];
        shard_name(name, sizeof name, ts[i].shard, o->shards);
        fprintf(f, "    \"%s\": \"%s\"%s\n", ts[i].name, name, i + 1 < n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    return fclose(f) != 0 ? fail("index: write failed") : 0;
}

/* Balanced by bytes, in tensor order; every shard gets at least one tensor. */
static void assign_shards(const options *o, tensor *ts, int n) {
    uint64_t total = 0, cum = 0;
    for (int i = 0; i < n; i++) total += ts[i].n_el;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && k + 1 < o->shards) {
            int must = n - i <= o->shards - 1 - k; /* one tensor left per remaining shard */
            int full = cum >= total * (uint64_t)(k + 1) / (uint64_t)o->shards;
            if (must || full) k++;
        }
        ts[i].shard = k;
        cum += ts[i].n_el;
    }
}

/* ---- config files -------------------------------------------------------------------------- */

/* The text config. The causal layout writes every key, as the 1B hub config does; the
 * multimodal layouts write only the keys that differ from Gemma3TextConfig's defaults, as the 4B
 * hub config does, so loaders must apply those defaults to get the right model. */
static void write_text_config(FILE *f, const options *o, const char *ind) {
    const spec *s = &o->s;
    int all = o->layout == LAYOUT_CAUSAL;
    fprintf(f, "%s\"architectures\": [\"Gemma3ForCausalLM\"],\n", ind);
    fprintf(f, "%s\"model_type\": \"gemma3_text\",\n", ind);
    fprintf(f, "%s\"hidden_size\": %d,\n", ind, s->hidden);
    fprintf(f, "%s\"intermediate_size\": %d,\n", ind, s->inter);
    fprintf(f, "%s\"num_hidden_layers\": %d,\n", ind, s->layers);
    if (all || s->vocab != 262208) fprintf(f, "%s\"vocab_size\": %d,\n", ind, s->vocab);
    if (all || s->heads != 8) fprintf(f, "%s\"num_attention_heads\": %d,\n", ind, s->heads);
    if (all || s->kv_heads != 4) fprintf(f, "%s\"num_key_value_heads\": %d,\n", ind, s->kv_heads);
    if (all || s->head_dim != 256) fprintf(f, "%s\"head_dim\": %d,\n", ind, s->head_dim);
    if (all || s->qpas != 256) fprintf(f, "%s\"query_pre_attn_scalar\": %g,\n", ind, s->qpas);
    if (all || s->max_pos != 131072)
        fprintf(f, "%s\"max_position_embeddings\": %d,\n", ind, s->max_pos);
    if (all) {
        fprintf(f, "%s\"hidden_activation\": \"gelu_pytorch_tanh\",\n", ind);
        fprintf(f, "%s\"attention_bias\": false,\n%s\"attention_dropout\": 0.0,\n", ind, ind);
        fprintf(f, "%s\"rms_norm_eps\": 1e-06,\n", ind);
        fprintf(f, "%s\"bos_token_id\": 2,\n%s\"pad_token_id\": 0,\n", ind, ind);
        fprintf(f, "%s\"eos_token_id\": [1, 106],\n", ind);
        fprintf(f, "%s\"torch_dtype\": \"bfloat16\",\n", ind);
    }
    if (all || o->untied)
        fprintf(f, "%s\"tie_word_embeddings\": %s,\n", ind, o->untied ? "false" : "true");
    /* Softcaps are floats in transformers' strict config classes: "30.0", never "30". */
    if (o->attn_softcap > 0) fprintf(f, "%s\"attn_logit_softcapping\": %#g,\n", ind, o->attn_softcap);
    else if (all) fprintf(f, "%s\"attn_logit_softcapping\": null,\n", ind);
    if (o->final_softcap > 0) fprintf(f, "%s\"final_logit_softcapping\": %#g,\n", ind, o->final_softcap);
    else if (all) fprintf(f, "%s\"final_logit_softcapping\": null,\n", ind);
    if (o->rope_new) {
        fprintf(f, "%s\"rope_parameters\": {\n", ind);
        if (s->rope_factor != 1)
            fprintf(f, "%s  \"full_attention\": {\"rope_type\": \"linear\", \"factor\": %.1f, "
                       "\"rope_theta\": 1000000.0},\n", ind, s->rope_factor);
        else
            fprintf(f, "%s  \"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0},\n", ind);
        fprintf(f, "%s  \"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}\n", ind);
        fprintf(f, "%s},\n", ind);
    } else {
        if (all) {
            fprintf(f, "%s\"rope_theta\": 1000000.0,\n", ind);
            fprintf(f, "%s\"rope_local_base_freq\": 10000.0,\n", ind);
        }
        if (s->rope_factor != 1)
            fprintf(f, "%s\"rope_scaling\": {\"factor\": %.1f, \"rope_type\": \"linear\"},\n", ind,
                    s->rope_factor);
        else if (all)
            fprintf(f, "%s\"rope_scaling\": null,\n", ind);
    }
    if (s->explicit_layer_types) {
        fprintf(f, "%s\"_sliding_window_pattern\": %d,\n", ind, o->pattern);
        fprintf(f, "%s\"layer_types\": [", ind);
        for (int l = 0; l < s->layers; l++)
            fprintf(f, "%s\"%s\"", l ? ", " : "",
                    (l + 1) % o->pattern == 0 ? "full_attention" : "sliding_attention");
        fprintf(f, "],\n");
    } else if (all || o->pattern != 6) {
        fprintf(f, "%s\"sliding_window_pattern\": %d,\n", ind, o->pattern);
    }
    fprintf(f, "%s\"sliding_window\": %d\n", ind, s->window);
}

static int write_configs(const options *o) {
    FILE *f = open_out(o, "config.json");
    if (!f) return 1;
    fprintf(f, "{\n");
    if (o->layout == LAYOUT_CAUSAL) {
        write_text_config(f, o, "  ");
    } else {
        fprintf(f, "  \"architectures\": [\"Gemma3ForConditionalGeneration\"],\n");
        fprintf(f, "  \"model_type\": \"gemma3\",\n");
        fprintf(f, "  \"boi_token_index\": 255999,\n  \"eoi_token_index\": 256000,\n");
        fprintf(f, "  \"image_token_index\": 262144,\n  \"mm_tokens_per_image\": 256,\n");
        fprintf(f, "  \"eos_token_id\": [1, 106],\n");
        fprintf(f, "  \"initializer_range\": 0.02,\n  \"torch_dtype\": \"bfloat16\",\n");
        fprintf(f, "  \"vision_config\": {\"hidden_size\": 1152, \"image_size\": 896, "
                   "\"model_type\": \"siglip_vision_model\", \"patch_size\": 14},\n");
        fprintf(f, "  \"text_config\": {\n");
        write_text_config(f, o, "    ");
        fprintf(f, "  }\n");
    }
    fprintf(f, "}\n");
    if (fclose(f) != 0) return fail("config.json: write failed");
    f = open_out(o, "generation_config.json");
    if (!f) return 1;
    fprintf(f, "{\n  \"bos_token_id\": 2,\n  \"cache_implementation\": \"hybrid\",\n"
               "  \"do_sample\": true,\n  \"eos_token_id\": [1, 106],\n  \"pad_token_id\": 0,\n"
               "  \"temperature\": 1.0,\n  \"top_k\": 64,\n  \"top_p\": 0.95\n}\n");
    return fclose(f) != 0 ? fail("generation_config.json: write failed") : 0;
}

static int copy_file(const char *src, const options *o, const char *name) {
    FILE *in = fopen(src, "rb");
    if (!in) return fail("%s: cannot open: %s", src, strerror(errno));
    FILE *out = open_out(o, name);
    if (!out) {
        fclose(in);
        return 1;
    }
    char buf[1 << 16];
    size_t m;
    int bad = 0;
    while ((m = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, m, out) != m) bad = 1;
    bad = ferror(in) || bad;
    fclose(in);
    bad = fclose(out) != 0 || bad;
    return bad ? fail("%s: copy failed", src) : 0;
}

/* ---- command line -------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: gen-checkpoint PRESET DIR [options]\n"
            "presets: 270m 1b 4b 12b 27b (real shapes and configs), tiny, tiny-gqa (test shapes)\n"
            "  --layout causal|mm|mm-new  tensor names model.* | language_model.model.* |\n"
            "                             model.language_model.* (default: causal for 270m, 1b,\n"
            "                             tiny; mm for 4b, 12b, 27b, tiny-gqa)\n"
            "  --seed S                   random seed (default 1); same seed, same bytes\n"
            "  --shards N                 write model.safetensors.index.json + N shards\n"
            "  --dtype bf16|f32           stored dtype (default bf16)\n"
            "  --fill random|zero         zero: sparse files (holes), no disk, no time\n"
            "  --tokenizer PATH           copy PATH into DIR/tokenizer.model\n"
            "  --rope old|new             rope_theta/rope_scaling (default) or rope_parameters\n"
            "  --untied                   write an lm_head (tie_word_embeddings false)\n"
            "  --attn-softcap X, --final-softcap X\n"
            "  overrides: --vocab --hidden --intermediate --layers --heads --kv-heads --head-dim\n"
            "             --window --max-pos --qpas --rope-factor --pattern N\n");
}

static int parse_num(const char *flag, const char *v, double min, double max, double *out) {
    char *end;
    errno = 0;
    double d = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(d >= min && d <= max)) {
        fail("%s: '%s' is not a number in [%g, %g]", flag, v ? v : "", min, max);
        return -1;
    }
    *out = d;
    return 0;
}

static int parse_args(int argc, char **argv, options *o) {
    if (argc < 3) {
        usage(stderr);
        return -1;
    }
    memset(o, 0, sizeof *o);
    const spec *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(argv[1], presets[i].name) == 0) p = &presets[i];
    if (!p) return fail("unknown preset '%s'", argv[1]), -1;
    o->s = *p;
    o->layout = p->layout;
    o->dir = argv[2];
    o->shards = 1;
    o->seed = 1;
    o->pattern = 6;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        struct { const char *flag; int *dst; double min, max; } ints[] = {
            {"--vocab", &o->s.vocab, 1, 1 << 24}, {"--hidden", &o->s.hidden, 1, 1 << 16},
            {"--intermediate", &o->s.inter, 1, 1 << 18}, {"--layers", &o->s.layers, 1, 256},
            {"--heads", &o->s.heads, 1, 256}, {"--kv-heads", &o->s.kv_heads, 1, 256},
            {"--head-dim", &o->s.head_dim, 1, 4096}, {"--window", &o->s.window, 1, 1 << 24},
            {"--max-pos", &o->s.max_pos, 1, 1 << 30}, {"--shards", &o->shards, 1, 1000},
            {"--pattern", &o->pattern, 1, 1000},
        };
        int matched = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !matched; k++)
            if (strcmp(a, ints[k].flag) == 0) {
                if (parse_num(a, v, ints[k].min, ints[k].max, &d) || d != floor(d))
                    return fail("%s: expected an integer", a), -1;
                *ints[k].dst = (int)d;
                matched = 1;
                i++;
            }
        if (matched) continue;
        if (strcmp(a, "--layout") == 0 && v) {
            int l = -1;
            for (int k = 0; k < 3; k++)
                if (strcmp(v, layout_names[k]) == 0) l = k;
            if (l < 0) return fail("--layout: '%s' is not causal, mm or mm-new", v), -1;
            o->layout = l;
            i++;
        } else if (strcmp(a, "--seed") == 0) {
            if (parse_num(a, v, 0, 9007199254740992.0, &d)) return -1;
            o->seed = (uint64_t)d;
            i++;
        } else if (strcmp(a, "--dtype") == 0 && v && (!strcmp(v, "bf16") || !strcmp(v, "f32"))) {
            o->f32 = strcmp(v, "f32") == 0;
            i++;
        } else if (strcmp(a, "--fill") == 0 && v && (!strcmp(v, "random") || !strcmp(v, "zero"))) {
            o->zero = strcmp(v, "zero") == 0;
            i++;
        } else if (strcmp(a, "--rope") == 0 && v && (!strcmp(v, "old") || !strcmp(v, "new"))) {
            o->rope_new = strcmp(v, "new") == 0;
            i++;
        } else if (strcmp(a, "--tokenizer") == 0 && v) {
            o->tokenizer = v;
            i++;
        } else if (strcmp(a, "--untied") == 0) {
            o->untied = 1;
        } else if (strcmp(a, "--attn-softcap") == 0 || strcmp(a, "--final-softcap") == 0) {
            if (parse_num(a, v, 0, 1e6, &d)) return -1;
            *(a[2] == 'a' ? &o->attn_softcap : &o->final_softcap) = d;
            i++;
        } else if (strcmp(a, "--qpas") == 0 || strcmp(a, "--rope-factor") == 0) {
            if (parse_num(a, v, 1e-3, 1e6, &d)) return -1;
            *(a[2] == 'q' ? &o->s.qpas : &o->s.rope_factor) = d;
            i++;
        } else {
            return fail("bad option '%s'%s (see gen-checkpoint --help)", a, v ? "" : " or missing value"), -1;
        }
    }
    if (o->s.heads % o->s.kv_heads) return fail("--heads must be a multiple of --kv-heads"), -1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    options o;
    if (parse_args(argc, argv, &o) != 0) return 2;
    int max_tensors = 13 * o.s.layers + 8;
    tensor *ts = calloc((size_t)max_tensors, sizeof *ts);
    if (!ts) return fail("out of memory");
    int n = build_tensors(&o, ts);
    if (o.shards > n) {
        free(ts);
        return fail("--shards %d: only %d tensors", o.shards, n);
    }
    int rc = mkdirs(o.dir) != 0 ? fail("%s: cannot create: %s", o.dir, strerror(errno)) : 0;
    if (!rc) rc = write_configs(&o);
    if (!rc) {
        assign_shards(&o, ts, n);
        for (int k = 0; k < o.shards && !rc; k++) rc = write_shard(&o, ts, n, k);
    }
    if (!rc && o.shards > 1) rc = write_index(&o, ts, n);
    if (!rc && o.tokenizer) rc = copy_file(o.tokenizer, &o, "tokenizer.model");
    free(ts);
    return rc;
}
