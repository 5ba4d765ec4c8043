/* cli/model-options.c - the flags of every command that runs the model: which checkpoint, how it
 * is loaded, and the session (threads, context, batch, precision, kernels). */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include <unistd.h>

#include "cli.h"

#define M(field) offsetof(cli_model_opts, field)

/* --exact keeps an f32 cache, so an explicit --kv-type bf16 contradicts it (either order). */
static int parse_exact(const char *flag, const char *value, void *group) {
    cli_model_opts *o = group;
    if (o->kv_set && o->sp.kv_type == GEMMA3_KV_BF16)
        return cli_usage_error("%s: conflicts with --kv-type bf16 (exact keeps an f32 cache)", flag);
    o->sp.exact = 1;
    o->sp.kv_type = GEMMA3_KV_F32;
    return 0;
}

static int parse_kv_type(const char *flag, const char *value, void *group) {
    cli_model_opts *o = group;
    if (strcmp(value, "f32") == 0) o->sp.kv_type = GEMMA3_KV_F32;
    else if (strcmp(value, "bf16") == 0) o->sp.kv_type = GEMMA3_KV_BF16;
    else return cli_usage_error("%s: '%s' is not one of f32, bf16", flag, value);
    if (o->sp.exact && o->sp.kv_type == GEMMA3_KV_BF16)
        return cli_usage_error("%s: bf16 conflicts with --exact (which keeps an f32 cache)", flag);
    o->kv_set = 1;
    return 0;
}

static int parse_isa(const char *flag, const char *value, void *group) {
    if (strcmp(value, "scalar") && strcmp(value, "avx2") && strcmp(value, "avx512"))
        return cli_usage_error("%s: '%s' is not one of scalar, avx2, avx512", flag, value);
    ((cli_model_opts *)group)->sp.isa = value;
    /* the sampler's passes and the quantizers too; a level this CPU lacks is refused by the
     * session, with its message */
    (void)gemma3_set_isa(value);
    return 0;
}

static int parse_quant(const char *flag, const char *value, void *group) {
    int type = gemma3_weight_type_parse(value);
    if (type < 0 || type == GEMMA3_WEIGHTS_AS_STORED)
        return cli_usage_error("%s: '%s' is not one of %s", flag, value, gemma3_weight_type_list(0));
    ((cli_model_opts *)group)->mp.weight_type = (enum gemma3_weight_type)type;
    return 0;
}

static int parse_repack(const char *flag, const char *value, void *group) {
    static const char *const names[] = {"auto", "none", "x8"};
    for (int i = 0; i < 3; i++)
        if (strcmp(value, names[i]) == 0) {
            ((cli_model_opts *)group)->mp.repack = (enum gemma3_repack)i;
            return 0;
        }
    return cli_usage_error("%s: '%s' is not one of auto, none, x8", flag, value);
}

static const cli_option model_options[] = {
    {"-m, --model", "DIR", CLI_TEXT, M(model_dir),
     .help = "Gemma 3 checkpoint directory (config.json, *.safetensors, tokenizer.model)"},
    {"-q, --quant", "TYPE", CLI_CUSTOM, .parse = parse_quant,
     .help = "weights as bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, or llama-quantize's mixes q4_k_m, q5_k_m, q4_k_s, q5_k_s (quantized at load from a BF16 checkpoint)",
     .default_text = "as stored"},
    {"-t, --threads", "N", CLI_INT, M(sp.n_threads), 1, 1024, .help = "threads",
     .default_text = "all CPUs"},
    {"-c, --ctx-size, --ctx", "N", CLI_INT, M(sp.n_ctx), 1, 1 << 24,
     .help = "context length in tokens", .default_text = "min(model max, 4096)"},
    {"-b, --batch-size", "N", CLI_INT, M(sp.n_batch), 1, 1 << 16,
     .help = "prompt tokens per forward chunk", .default_text = "512"},
    {"--exact", NULL, CLI_CUSTOM, .parse = parse_exact,
     .help = "FP32 activations and FP32 KV cache (the reference mode)"},
    {"--kv-type, -ctk", "T", CLI_CUSTOM, .parse = parse_kv_type,
     .help = "KV cache type: f32 or bf16", .default_text = "bf16; f32 with --exact"},
    {"--isa", "NAME", CLI_CUSTOM, .parse = parse_isa,
     .help = "kernels, quantizers and the sampler's passes: scalar, avx2 or avx512",
     .default_text = "GEMMA3_ISA, else the best the CPU has"},
    {"--mmap", NULL, CLI_SWITCH, M(mp.load_mode), .value = GEMMA3_LOAD_MMAP,
     .help = "use the weights in place from the page cache (no copy at load)"},
    {"--no-mmap", NULL, CLI_SWITCH, M(mp.load_mode), .value = GEMMA3_LOAD_READ,
     .help = "read the weights into memory (by default: read if they fit in 3/4 of the "
             "memory available, else map)"},
    {"--repack", "MODE", CLI_CUSTOM, .parse = parse_repack,
     .help = "Q8_0/Q4_0 in memory: x8 (rows interleaved in groups of 8, what the AVX2 and "
             "AVX-512 kernels read fastest; a quantized directory is copied so), none (the files' "
             "rows, used in place) or auto (x8 where the kernels prefer it)",
     .default_text = "auto"},
    {"-nr, --no-repack", NULL, CLI_SWITCH, M(mp.repack), .value = GEMMA3_REPACK_NONE,
     .help = "the same as --repack none (llama.cpp's flag)"},
    {"--check-tensors", NULL, CLI_SWITCH, M(mp.check_tensors), .value = 1,
     .help = "check every weight for NaN and infinity at load (as llama.cpp; norms always are)"},
    {"-v, --verbose", NULL, CLI_SWITCH, M(verbose), .value = 1,
     .help = "print the kernels, threads and timings to stderr"},
};

const cli_group cli_model_group = CLI_GROUP("model", model_options);

void cli_model_opts_init(cli_model_opts *o) {
    memset(o, 0, sizeof *o);
    o->sp = gemma3_session_default_params();
}

int cli_check_ctx(const cli_model_opts *o, const gemma3_model_info *info) {
    if (o->sp.n_ctx > info->max_position_embeddings)
        return cli_usage_error("-c: %d exceeds the model's max_position_embeddings %d", o->sp.n_ctx,
                               info->max_position_embeddings);
    return 0;
}

void cli_warn_threads(const char *flag, int n_threads) {
    int n_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads > gemma3_threads_cap(n_threads))
        fprintf(stderr, "gemma3: %s %d is more than %d threads per CPU: using %d (the %d CPUs x %d)\n",
                flag, n_threads, GEMMA3_THREADS_PER_CPU, gemma3_threads_cap(n_threads), n_cpus,
                GEMMA3_THREADS_PER_CPU);
    else if (n_threads > n_cpus)
        fprintf(stderr, "gemma3: warning: %s %d is more than the %d CPUs: the extra threads only "
                "wait for a core\n", flag, n_threads, n_cpus);
}

int cli_check_kv(const gemma3_model_info *info, int n_ctx, int kv_f32) {
    int64_t need = gemma3_kv_cache_bytes(info, n_ctx, kv_f32 ? GEMMA3_KV_F32 : GEMMA3_KV_BF16);
    int64_t avail = info->mem_available;
    if (avail && need > avail) /* 0: could not be read */
        return cli_usage_error("-c: %d tokens need a KV cache of %.2f GB (%s), more than the %.2f GB "
                               "of memory available", n_ctx, (double)need / 1e9,
                               kv_f32 ? "f32" : "bf16", (double)avail / 1e9);
    return 0;
}

/* What can be refused from config.json alone is refused before the weights are read: a -c
 * beyond the model's positions, or whose KV cache can never fit in memory. */
static int preflight(const cli_model_opts *o) {
    if (!o->model_dir || !*o->model_dir) return cli_usage_error("-m: the model directory name is empty");
    gemma3_model_info cfg;
    if (gemma3_model_peek(o->model_dir, &cfg) != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    cli_warn_threads("-t", o->sp.n_threads);
    int n_ctx = o->sp.n_ctx ? o->sp.n_ctx : 4096;
    if (o->sp.n_ctx > cfg.max_position_embeddings)
        return cli_usage_error("-c: %d exceeds the model's max_position_embeddings %d", o->sp.n_ctx,
                               cfg.max_position_embeddings);
    if (n_ctx > cfg.max_position_embeddings) n_ctx = cfg.max_position_embeddings;
    return cli_check_kv(&cfg, n_ctx, o->sp.exact || o->sp.kv_type == GEMMA3_KV_F32);
}

const char *cli_load_rate(const gemma3_model_info *info, char *buf, size_t n) {
    buf[0] = '\0'; /* a mapping that is only set up takes no measurable time */
    if (info->load_seconds >= 1e-3)
        snprintf(buf, n, " (%.2f GB/s)", (double)info->load_bytes / 1e9 / info->load_seconds);
    return buf;
}

int cli_model_load(const cli_model_opts *o, gemma3_model **model) {
    int rc = preflight(o);
    if (rc) return rc;
    gemma3_model_params mp = o->mp;
    mp.n_threads = o->sp.n_threads; /* quantizing at load uses the session's threads */
    mp.isa = o->sp.isa;             /* and the layout suits the session's kernels */
    if (gemma3_model_load_ex(o->model_dir, &mp, model) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    if (o->mlock && mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        fprintf(stderr, "gemma3: warning: --mlock: the memory cannot be locked (%s; see ulimit -l)\n",
                strerror(errno));
    gemma3_model_info info;
    gemma3_model_get_info(*model, &info);
    if (o->verbose) {
        char rate[32];
        fprintf(stderr, "gemma3: load mode %s%s: %.2f GB in %.3f s%s, %.2f GB of memory "
                "available, %.2f GB mapped in 2 MiB pages\n", info.load_mode,
                info.load_auto ? " (auto)" : "", (double)info.load_bytes / 1e9, info.load_seconds,
                cli_load_rate(&info, rate, sizeof rate), (double)info.mem_available / 1e9, (double)info.load_huge_bytes / 1e9);
    }
    /* said whatever -v is: a model running this way is several times slower, and it is why */
    if (info.load_from_disk)
        fprintf(stderr, "gemma3: the weights (%.2f GB) do not fit in the memory available "
                "(%.2f GB): they are mapped and read from the disk as they are used, so each token "
                "runs at the disk's speed\n", (double)info.load_bytes / 1e9,
                (double)info.mem_available / 1e9);
    if (o->verbose) {
        if (info.quantize_seconds > 0)
            fprintf(stderr, "gemma3: quantized the weights to %s (%s layout) in %.3f s\n",
                    info.weight_type, info.weight_layout, info.quantize_seconds);
        if (info.repack_seconds > 0 && strcmp(info.weight_layout, "mixed") == 0)
            fprintf(stderr, "gemma3: repacked the matrices whose types have x8 kernels into the x8 layout, "
                    "the others in rows (mixed layout), in %.3f s\n", info.repack_seconds);
        else if (info.repack_seconds > 0)
            fprintf(stderr, "gemma3: repacked the %s weights into the x8 layout in %.3f s\n",
                    info.weight_type, info.repack_seconds);
    }
    return 0;
}
