/* cli/info.c - gemma3 info: what a checkpoint is and what running it will cost.
 *
 * Loads the model with its weights mapped (so a bad checkpoint fails here exactly as it would
 * at inference), then prints the parsed configuration, the per-layer attention types, the
 * parameter count, the weight bytes and the KV cache size for a context length. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

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

/* "SSSSSF SSSSSF S": groups of six for readability. */
static void layer_string(const gemma3_model_info *m, char *buf, size_t n) {
    size_t w = 0;
    for (int l = 0; l < m->n_layers && w + 2 < n; l++) {
        if (l && l % 6 == 0) buf[w++] = ' ';
        buf[w++] = m->layer_types[l];
    }
    buf[w] = '\0';
}

static void eos_string(const gemma3_model_info *m, char *buf, size_t n) {
    size_t w = 0;
    buf[0] = '\0';
    for (int i = 0; i < m->n_eos && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, i ? ", %d" : "%d", m->eos_ids[i]);
}

/* What the default (AUTO) load would choose now: read what fits in 3/4 of the memory. */
static int fits_in_memory(const gemma3_model_info *m) { return m->load_bytes <= m->mem_available / 4 * 3; }

static void print_text(const char *dir, const gemma3_model_info *m, int ctx, int kv_type) {
    char eos[128], layers[GEMMA3_MAX_LAYERS * 2];
    eos_string(m, eos, sizeof eos);
    layer_string(m, layers, sizeof layers);
    printf("model:                %s\n", dir);
    printf("architecture:         %s\n", m->architecture);
    printf("layout:               %s (tensor prefix %s)\n",
           m->multimodal ? "multimodal, text_config" : "text-only", m->tensor_prefix);
    printf("vocab_size:           %d\n", m->vocab_size);
    printf("hidden_size:          %d\n", m->hidden_size);
    printf("intermediate_size:    %d\n", m->intermediate_size);
    printf("num_hidden_layers:    %d\n", m->n_layers);
    printf("num_attention_heads:  %d\n", m->n_heads);
    printf("num_key_value_heads:  %d\n", m->n_kv_heads);
    printf("head_dim:             %d\n", m->head_dim);
    printf("query_pre_attn_scalar: %g\n", (double)m->query_pre_attn_scalar);
    printf("sliding_window:       %d\n", m->sliding_window);
    printf("max_position:         %d\n", m->max_position_embeddings);
    printf("rms_norm_eps:         %g\n", (double)m->rms_norm_eps);
    printf("rope full:            theta %g, linear factor %g\n", (double)m->rope_theta_full,
           (double)m->rope_factor_full);
    printf("rope sliding:         theta %g, linear factor %g\n", (double)m->rope_theta_sliding,
           (double)m->rope_factor_sliding);
    if (m->attn_softcap > 0) printf("attn softcap:         %g\n", (double)m->attn_softcap);
    else printf("attn softcap:         none\n");
    if (m->final_softcap > 0) printf("final softcap:        %g\n", (double)m->final_softcap);
    else printf("final softcap:        none\n");
    printf("tied lm_head:         %s\n", m->tied_lm_head ? "yes" : "no");
    printf("bos / pad / eos:      %d / %d / [%s]\n", m->bos_id, m->pad_id, eos);
    printf("layer types:          %s\n", layers);
    printf("parameters:           %lld (%.3f B)\n", (long long)m->n_params, (double)m->n_params / 1e9);
    printf("weight type:          %s%s%s%s\n", m->weight_type, m->weight_mix ? " (mix: " : "",
           m->weight_mix ? m->weight_mix : "", m->weight_mix ? ")" : "");
    printf("load mode (default):  %s (files %.2f GB, memory available %.2f GB, fits up to 3/4)\n",
           fits_in_memory(m) ? "read, or mmap where the page cache holds the files in 2 MiB folios"
                             : "mmap, the files do not fit",
           (double)m->load_bytes / 1e9, (double)m->mem_available / 1e9);
    printf("weight bytes:         %lld (%.2f GiB)\n", (long long)m->stored_bytes,
           (double)m->stored_bytes / (1024.0 * 1024 * 1024));
    for (int t = 0; t < 2; t++) {
        if (kv_type >= 0 && kv_type != t) continue;
        int64_t kv = gemma3_kv_cache_bytes(m, ctx, t);
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

static void print_json(const char *dir, const gemma3_model_info *m, int ctx, int kv_type) {
    char eos[128], layers[GEMMA3_MAX_LAYERS * 2];
    eos_string(m, eos, sizeof eos);
    layer_string(m, layers, sizeof layers);
    printf("{\"model\": ");
    json_string(dir);
    printf(", \"architecture\": \"%s\", \"multimodal\": %s, \"prefix\": \"%s\",\n", m->architecture,
           m->multimodal ? "true" : "false", m->tensor_prefix);
    printf(" \"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
           "\"num_hidden_layers\": %d,\n",
           m->vocab_size, m->hidden_size, m->intermediate_size, m->n_layers);
    printf(" \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
           "\"query_pre_attn_scalar\": %g,\n",
           m->n_heads, m->n_kv_heads, m->head_dim, (double)m->query_pre_attn_scalar);
    printf(" \"sliding_window\": %d, \"max_position_embeddings\": %d, \"rms_norm_eps\": %g,\n",
           m->sliding_window, m->max_position_embeddings, (double)m->rms_norm_eps);
    printf(" \"rope_theta_full\": %g, \"rope_factor_full\": %g, \"rope_theta_sliding\": %g, "
           "\"rope_factor_sliding\": %g,\n",
           (double)m->rope_theta_full, (double)m->rope_factor_full, (double)m->rope_theta_sliding,
           (double)m->rope_factor_sliding);
    printf(" \"attn_logit_softcapping\": ");
    if (m->attn_softcap > 0) printf("%g", (double)m->attn_softcap); else printf("null");
    printf(", \"final_logit_softcapping\": ");
    if (m->final_softcap > 0) printf("%g", (double)m->final_softcap); else printf("null");
    printf(", \"tied_lm_head\": %s,\n", m->tied_lm_head ? "true" : "false");
    printf(" \"bos_token_id\": %d, \"pad_token_id\": %d, \"eos_token_id\": [%s],\n", m->bos_id,
           m->pad_id, eos);
    printf(" \"layer_types\": \"%s\", \"n_params\": %lld, \"weight_type\": \"%s\", "
           "\"weight_bytes\": %lld, \"ctx\": %d,\n",
           layers, (long long)m->n_params, m->weight_type, (long long)m->stored_bytes, ctx);
    printf(" \"fits_in_memory\": %s, \"file_bytes\": %lld, \"mem_available\": %lld",
           fits_in_memory(m) ? "true" : "false", (long long)m->load_bytes, (long long)m->mem_available);
    if (kv_type < 0 || kv_type == 0) printf(", \"kv_bytes_f32\": %lld", (long long)gemma3_kv_cache_bytes(m, ctx, 0));
    if (kv_type < 0 || kv_type == 1) printf(", \"kv_bytes_bf16\": %lld", (long long)gemma3_kv_cache_bytes(m, ctx, 1));
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

    gemma3_model_info m;
    if (gemma3_model_peek(dir, &m) != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    if (gemma3_model_is_gguf(dir) && !json && gemma3_gguf_describe(dir, stdout) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    if (ctx == 0) ctx = m.max_position_embeddings < 4096 ? m.max_position_embeddings : 4096;
    else if (ctx > m.max_position_embeddings)
        return cli_usage_error("-c: %d exceeds the model's max_position_embeddings %d", ctx,
                               m.max_position_embeddings);
    gemma3_model_params mp = {.load_mode = GEMMA3_LOAD_MMAP, .repack = GEMMA3_REPACK_NONE};
    gemma3_model *model = NULL;
    if (gemma3_model_load_ex(dir, &mp, &model) != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    gemma3_model_get_info(model, &m);
    if (json) print_json(dir, &m, ctx, kv_type);
    else print_text(dir, &m, ctx, kv_type);
    gemma3_model_free(model);
    if (speed) {
        char *bench_argv[] = {"bench", "-m", (char *)dir, "-p", "64", "-n", "16", "-r", "1", NULL};
        fflush(stdout);
        return cmd_bench(9, bench_argv);
    }
    return 0;
}
