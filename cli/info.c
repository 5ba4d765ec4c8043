/* cli/info.c - gemma3 info: what a checkpoint is and what running it will cost.
 *
 * Loads config.json and binds every weight (so a bad checkpoint fails here exactly as it would
 * at inference), then prints the parsed configuration, the per-layer attention types, the
 * parameter count, the weight bytes and the KV cache size for a context length. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "gguf-model.h"
#include "util.h"
#include "quant.h"
#include "weights.h"

typedef struct info_args {
    const char *dir;
    int ctx;
    int kv_type; /* -1: both */
    int json, speed;
} info_args;

static int parse_kv_type(const char *flag, const char *value, void *args) {
    int *kv_type = &((info_args *)args)->kv_type;
    if (strcmp(value, "f32") == 0) *kv_type = 0;
    else if (strcmp(value, "bf16") == 0) *kv_type = 1;
    else return cli_usage_error("%s: '%s' is not f32 or bf16", flag, value);
    return 0;
}

#define A(field) offsetof(info_args, field)
static const cli_option info_options[] = {
    {"-m, --model", "DIR", CLI_TEXT, A(dir), .help = "checkpoint directory (required)"},
    {"-c, --ctx", "CTX", CLI_INT, A(ctx), 1, 1 << 30, .help = "context length for the KV cache size",
     .default_text = "min(model max, 4096)"},
    {"--kv-type", "TYPE", CLI_CUSTOM, .parse = parse_kv_type,
     .help = "print only that KV cache size", .default_text = "both"},
    {"--json", NULL, CLI_SWITCH, A(json), .value = 1, .help = "print one JSON object instead of text"},
    {"--speed", NULL, CLI_SWITCH, A(speed), .value = 1,
     .help = "then measure prefill and decode tokens/s (gemma3 bench -p 64 -n 16 -r 1)"},
};
#undef A

static const cli_group info_group = CLI_GROUP("info", info_options);

static const cli_command info_command = {
    "usage: gemma3 info -m DIR [-c CTX] [--kv-type f32|bf16] [--json] [--speed]\n"
    "\n"
    "Loads the checkpoint in DIR (config.json + safetensors) and prints its configuration,\n"
    "layer types (S = sliding window, F = full attention), parameter count, weight bytes\n"
    "and the KV cache the context needs.\n",
    "info: unknown option '%s' (try gemma3 info --help)",
    {&info_group, NULL},
};

/* K and V for every layer, as the session lays them out (g3_kv_bytes: the one formula). */
static int64_t kv_cache_bytes(const g3_config *c, int ctx, int elem_bytes) {
    return (int64_t)g3_kv_bytes(c, ctx, 0, (size_t)elem_bytes);
}

/* "SSSSSF SSSSSF S": groups of six for readability. */
static void layer_string(const g3_config *c, char *buf, size_t n) {
    size_t w = 0;
    for (int l = 0; l < c->n_layers && w + 2 < n; l++) {
        if (l && l % 6 == 0) buf[w++] = ' ';
        buf[w++] = c->layer_types[l] == G3_LAYER_FULL ? 'F' : 'S';
    }
    buf[w] = '\0';
}

static void eos_string(const g3_config *c, char *buf, size_t n) {
    size_t w = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->n_eos && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, i ? ", %d" : "%d", c->eos_ids[i]);
}

static void print_text(const char *dir, const g3_config *c, const g3_weights *w, int ctx,
                       int kv_type) {
    char layers[G3_MAX_LAYERS * 2], eos[128];
    layer_string(c, layers, sizeof layers);
    eos_string(c, eos, sizeof eos);
    printf("model:                %s\n", dir);
    printf("architecture:         %s\n", c->architecture);
    printf("layout:               %s (tensor prefix %s)\n",
           c->multimodal ? "multimodal, text_config" : "text-only", w->prefix);
    printf("vocab_size:           %d\n", c->vocab_size);
    printf("hidden_size:          %d\n", c->hidden_size);
    printf("intermediate_size:    %d\n", c->intermediate_size);
    printf("num_hidden_layers:    %d\n", c->n_layers);
    printf("num_attention_heads:  %d\n", c->n_heads);
    printf("num_key_value_heads:  %d\n", c->n_kv_heads);
    printf("head_dim:             %d\n", c->head_dim);
    printf("query_pre_attn_scalar: %g\n", (double)c->query_pre_attn_scalar);
    printf("sliding_window:       %d\n", c->sliding_window);
    printf("max_position:         %d\n", c->max_position_embeddings);
    printf("rms_norm_eps:         %g\n", (double)c->rms_norm_eps);
    printf("rope full:            theta %g, linear factor %g\n", (double)c->rope_theta_full,
           (double)c->rope_factor_full);
    printf("rope sliding:         theta %g, linear factor %g\n", (double)c->rope_theta_sliding,
           (double)c->rope_factor_sliding);
    if (c->attn_softcap > 0) printf("attn softcap:         %g\n", (double)c->attn_softcap);
    else printf("attn softcap:         none\n");
    if (c->final_softcap > 0) printf("final softcap:        %g\n", (double)c->final_softcap);
    else printf("final softcap:        none\n");
    printf("tied lm_head:         %s\n", w->lm_head.data == w->embed.data ? "yes" : "no");
    printf("bos / pad / eos:      %d / %d / [%s]\n", c->bos_id, c->pad_id, eos);
    printf("layer types:          %s\n", layers);
    printf("parameters:           %lld (%.3f B)\n", (long long)w->n_params, (double)w->n_params / 1e9);
    printf("weight type:          %s\n", g3_wtype_name(w->wtype));
    const g3_st_load_info *li = &w->load_info;
    size_t files = li->bytes_read + li->bytes_mapped;
    /* what the default (AUTO) load would choose now: the rule of g3_st_open_dir_as */
    printf("load mode (default):  %s (files %.2f GB, memory available %.2f GB, fits up to 3/4)\n",
           files <= li->mem_available / 4 * 3
               ? "read, or mmap where the page cache holds the files in 2 MiB folios"
               : "mmap, the files do not fit",
           (double)files / 1e9, (double)li->mem_available / 1e9);
    printf("weight bytes:         %lld (%.2f GiB)\n", (long long)w->n_bytes,
           (double)w->n_bytes / (1024.0 * 1024 * 1024));
    for (int t = 0; t < 2; t++) {
        if (kv_type >= 0 && kv_type != t) continue;
        int64_t kv = kv_cache_bytes(c, ctx, t == 0 ? 4 : 2);
        printf("kv cache %-4s ctx %-6d %lld (%.1f MiB)\n", t == 0 ? "f32" : "bf16", ctx,
               (long long)kv, (double)kv / (1024.0 * 1024));
    }
}

/* JSON string escaping for the one free-form value (the directory). */
static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

static void print_json(const char *dir, const g3_config *c, const g3_weights *w, int ctx,
                       int kv_type) {
    char layers[G3_MAX_LAYERS * 2], eos[128];
    layer_string(c, layers, sizeof layers);
    eos_string(c, eos, sizeof eos);
    printf("{\"model\": ");
    json_string(dir);
    printf(", \"architecture\": \"%s\", \"multimodal\": %s, \"prefix\": \"%s\",\n", c->architecture,
           c->multimodal ? "true" : "false", w->prefix);
    printf(" \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
           "\"num_hidden_layers\": %d,\n",
           c->vocab_size, c->hidden_size, c->intermediate_size, c->n_layers);
    printf(" \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
           "\"query_pre_attn_scalar\": %g,\n",
           c->n_heads, c->n_kv_heads, c->head_dim, (double)c->query_pre_attn_scalar);
    printf(" \"sliding_window\": %d, \"max_position_embeddings\": %d, \"rms_norm_eps\": %g,\n",
           c->sliding_window, c->max_position_embeddings, (double)c->rms_norm_eps);
    printf(" \"rope_theta_full\": %g, \"rope_factor_full\": %g, \"rope_theta_sliding\": %g, "
           "\"rope_factor_sliding\": %g,\n",
           (double)c->rope_theta_full, (double)c->rope_factor_full, (double)c->rope_theta_sliding,
           (double)c->rope_factor_sliding);
    printf(" \"attn_logit_softcapping\": ");
    if (c->attn_softcap > 0) printf("%g", (double)c->attn_softcap); else printf("null");
    printf(", \"final_logit_softcapping\": ");
    if (c->final_softcap > 0) printf("%g", (double)c->final_softcap); else printf("null");
    printf(", \"tied_lm_head\": %s,\n", w->lm_head.data == w->embed.data ? "true" : "false");
    printf(" \"bos_token_id\": %d, \"pad_token_id\": %d, \"eos_token_id\": [%s],\n", c->bos_id,
           c->pad_id, eos);
    printf(" \"layer_types\": \"%s\", \"n_params\": %lld, \"weight_type\": \"%s\", "
           "\"weight_bytes\": %lld, \"ctx\": %d,\n",
           layers, (long long)w->n_params, g3_wtype_name(w->wtype), (long long)w->n_bytes, ctx);
    const g3_st_load_info *li = &w->load_info;
    size_t files = li->bytes_read + li->bytes_mapped;
    /* fits: the default load reads it, or keeps it mapped where the cache has 2 MiB folios */
    printf(" \"fits_in_memory\": %s, \"file_bytes\": %zu, \"mem_available\": %zu",
           files <= li->mem_available / 4 * 3 ? "true" : "false", files, li->mem_available);
    if (kv_type < 0 || kv_type == 0) printf(", \"kv_bytes_f32\": %lld", (long long)kv_cache_bytes(c, ctx, 4));
    if (kv_type < 0 || kv_type == 1) printf(", \"kv_bytes_bf16\": %lld", (long long)kv_cache_bytes(c, ctx, 2));
    printf("}\n");
}

int cmd_info(int argc, char **argv) {
    info_args args = {.kv_type = -1};
    void *const dst[] = {&args};
    int status;
    if (cli_parse(&info_command, argc, argv, dst, &status)) return status;
    const char *dir = args.dir;
    int ctx = args.ctx, kv_type = args.kv_type, json = args.json, speed = args.speed;
    if (!dir) return cli_usage_error("info: -m DIR is required (try gemma3 info --help)");
    if (!*dir) return cli_usage_error("-m: the model directory name is empty");
    if (speed && json) return cli_usage_error("--speed: not with --json (gemma3 bench -o json measures for scripts)");

    g3_config cfg;
    if (g3_model_config_load(dir, &cfg) != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    if (g3_model_is_gguf(dir) && !json && g3_gguf_model_describe(dir, stdout) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    if (ctx == 0) ctx = cfg.max_position_embeddings < 4096 ? cfg.max_position_embeddings : 4096;
    else if (ctx > cfg.max_position_embeddings)
        return cli_usage_error("-c: %d exceeds the model's max_position_embeddings %d", ctx,
                               cfg.max_position_embeddings);
    g3_weights *w = g3_alloc_aligned(sizeof *w); /* ~30 KB of layer pointers: not on the stack */
    if (!w) return cli_fail("out of memory");
    if (g3_weights_load(dir, &cfg, G3_ST_LOAD_MMAP, w) != GEMMA3_OK) {
        g3_free_aligned(w);
        return cli_fail("%s", gemma3_last_error());
    }
    if (json) print_json(dir, &cfg, w, ctx, kv_type);
    else print_text(dir, &cfg, w, ctx, kv_type);
    g3_weights_free(w);
    g3_free_aligned(w);
    if (speed) {
        char *bench_argv[] = {"bench", "-m", (char *)dir, "-p", "64", "-n", "16", "-r", "1", NULL};
        fflush(stdout);
        return cmd_bench(9, bench_argv);
    }
    return 0;
}
