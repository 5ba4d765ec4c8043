/* cli/options.c - flag parsing and error printing shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vprint_error(const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* keep the contract of one line even if a message embeds a newline */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fprintf(stderr, "gemma3: %s\n", msg);
}

int cli_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint_error(fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint_error(fmt, ap);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

const char *cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_usage_error("%s: missing value", argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

int cli_parse_int(const char *flag, const char *val, long min, long max, int *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end != '\0' || v < min || v > max || v < INT_MIN || v > INT_MAX)
        return cli_usage_error("%s: '%s' is not an integer in [%ld, %ld]", flag, val, min, max);
    *out = (int)v;
    return 0;
}

int cli_parse_float(const char *flag, const char *val, double min, double max, float *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end != '\0' || isnan(v) || v < min || v > max)
        return cli_usage_error("%s: '%s' is not a number in [%g, %g]", flag, val, min, max);
    *out = (float)v;
    return 0;
}

int cli_parse_ids(const char *flag, const char *val, int max_id, int32_t **ids, int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    size_t cap = 1;
    for (const char *p = val; *p; p++) cap += (*p == ',');
    int32_t *out = malloc(cap * sizeof *out);
    if (!out) return cli_fail("%s: out of memory", flag);
    int n = 0;
    const char *p = val;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > max_id || (*end != ',' && *end != '\0')) {
            free(out);
            return cli_usage_error("%s: '%s' is not a comma-separated list of ids in [0, %d]", flag,
                                   val, max_id);
        }
        out[n++] = (int32_t)v;
        if (*end == '\0') break;
        p = end + 1;
    }
    *ids = out;
    *n_ids = n;
    return 0;
}

const char cli_model_help[] =
    "  -m, --model DIR        Gemma 3 checkpoint directory (config.json, *.safetensors, tokenizer.model)\n"
    "  -t, --threads N        threads (default: all CPUs)\n"
    "  -c, --ctx-size N       context length in tokens (default: min(model max, 4096))\n"
    "  -b, --batch-size N     prompt tokens per forward chunk (default 512)\n"
    "      --exact            FP32 activations and FP32 KV cache (the reference mode)\n"
    "      --kv-type T        KV cache type: f32 or bf16 (default bf16; f32 with --exact)\n"
    "      --isa NAME         kernels: scalar, avx2 or avx512 (default: best the CPU has)\n"
    "      --mmap             use the weights in place from the page cache (no copy at load)\n"
    "      --no-mmap          read the weights into memory (faster decode on VMs where mapped\n"
    "                         files read slowly); default: read if the model fits in 60% of\n"
    "                         the available memory, else map\n"
    "  -v, --verbose          print the kernels, threads and timings to stderr\n";

void cli_model_opts_init(cli_model_opts *o) {
    memset(o, 0, sizeof *o);
    o->sp = gemma3_session_default_params();
}

int cli_model_flag(int argc, char **argv, int *i, cli_model_opts *o) {
    const char *flag = argv[*i];
    const char *v;
#define IS(a, b) (strcmp(flag, a) == 0 || strcmp(flag, b) == 0)
    if (IS("-m", "--model")) {
        if (!(v = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        o->model_dir = v;
        return 0;
    }
    if (IS("-t", "--threads")) {
        if (!(v = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        return cli_parse_int(flag, v, 1, 1024, &o->sp.n_threads);
    }
    if (IS("-c", "--ctx-size") || IS("--ctx", "--ctx")) {
        if (!(v = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        return cli_parse_int(flag, v, 1, 1 << 24, &o->sp.n_ctx);
    }
    if (IS("-b", "--batch-size")) {
        if (!(v = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        return cli_parse_int(flag, v, 1, 1 << 16, &o->sp.n_batch);
    }
    if (IS("--exact", "--exact")) {
        if (o->kv_set && o->sp.kv_type == GEMMA3_KV_BF16)
            return cli_usage_error("--exact: conflicts with --kv-type bf16 (exact keeps an f32 cache)");
        o->sp.exact = 1;
        o->sp.kv_type = GEMMA3_KV_F32;
        return 0;
    }
    if (IS("--kv-type", "-ctk")) {
        if (!(v = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        if (strcmp(v, "f32") == 0) o->sp.kv_type = GEMMA3_KV_F32;
        else if (strcmp(v, "bf16") == 0) o->sp.kv_type = GEMMA3_KV_BF16;
        else return cli_usage_error("%s: '%s' is not one of f32, bf16", flag, v);
        if (o->sp.exact && o->sp.kv_type == GEMMA3_KV_BF16)
            return cli_usage_error("%s: bf16 conflicts with --exact (which keeps an f32 cache)", flag);
        o->kv_set = 1;
        return 0;
    }
    if (IS("--isa", "--isa")) {
        if (!(v = cli_value(argc, argv, i))) return CLI_EXIT_USAGE;
        if (strcmp(v, "scalar") && strcmp(v, "avx2") && strcmp(v, "avx512"))
            return cli_usage_error("%s: '%s' is not one of scalar, avx2, avx512", flag, v);
        o->sp.isa = v;
        return 0;
    }
    if (IS("--mmap", "--mmap")) {
        o->mp.load_mode = GEMMA3_LOAD_MMAP;
        return 0;
    }
    if (IS("--no-mmap", "--no-mmap")) {
        o->mp.load_mode = GEMMA3_LOAD_READ;
        return 0;
    }
    if (IS("-v", "--verbose")) {
        o->verbose = 1;
        return 0;
    }
#undef IS
    return CLI_NOT_MINE;
}

int cli_check_ctx(const cli_model_opts *o, const gemma3_model_info *info) {
    if (o->sp.n_ctx > info->max_position_embeddings)
        return cli_usage_error("-c: %d exceeds the model's max_position_embeddings %d", o->sp.n_ctx,
                               info->max_position_embeddings);
    return 0;
}
