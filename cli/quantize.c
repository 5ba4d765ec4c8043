/* cli/quantize.c - gemma3 quantize: writes a Q8_0 or Q4_0 copy of a checkpoint directory that
 * later loads in place with no work (so a 27B model is quantized once, not at every start). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct quantize_args {
    const char *src, *dst;
    int type; /* enum gemma3_weight_type */
    int n_threads;
    int force;
} quantize_args;

static int parse_type(const char *flag, const char *value, void *args) {
    int type = gemma3_weight_type_parse(value);
    if (type < 0 || (!gemma3_weight_type_is_quantized((enum gemma3_weight_type)type) &&
                     type != GEMMA3_WEIGHTS_BF16))
        return cli_usage_error("%s: '%s' is not one of %s (bf16 for a .gguf output)", flag, value,
                               gemma3_weight_type_list(1));
    ((quantize_args *)args)->type = type;
    return 0;
}

#define A(field) offsetof(quantize_args, field)
static const cli_option quantize_options[] = {
    {"-m, --model", "DIR", CLI_TEXT, A(src), .help = "the BF16 (or F16/F32) checkpoint directory (or a GGUF file)"},
    {"-o, --output", "OUTDIR", CLI_TEXT, A(dst),
     .help = "where the quantized checkpoint goes (created; config and tokenizer copied); a name "
             "ending in .gguf writes one GGUF file that llama.cpp loads"},
    {"--type", "TYPE", CLI_CUSTOM, .parse = parse_type,
     .help = "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, or llama-quantize's mixes q4_k_m, q5_k_m, q4_k_s, q5_k_s (or bf16 for a .gguf)"},
    {"-t, --threads", "N", CLI_INT, A(n_threads), 1, 1024, .help = "threads",
     .default_text = "all CPUs"},
    {"--force", NULL, CLI_SWITCH, A(force), .value = 1,
     .help = "OUTDIR may hold files: they are replaced, and what is not written is removed"},
};
#undef A

static const cli_group quantize_group = CLI_GROUP("quantize", quantize_options);

static const cli_command quantize_command = {
    "usage: gemma3 quantize -m DIR -o OUTDIR|FILE.gguf --type TYPE [-t N]\n"
    "Writes every matrix of the checkpoint in DIR as llama.cpp's blocks of TYPE (q8_0, q4_0, q4_1,\n"
    "q5_0, q5_1, q4_k, q5_k, q6_k), or as llama-quantize's mix of them (q4_k_m, q5_k_m, q4_k_s,\n"
    "q5_k_s: per tensor, as llama-quantize chooses without an importance matrix): safetensors,\n"
    "U8 [rows, bytes per row], metadata \"gemma3.quant\" (and \"gemma3.quant.NAME\" per tensor of\n"
    "another type); norms stay as stored.\n",
    "quantize: unknown option '%s' (try gemma3 quantize --help)",
    {&quantize_group, NULL},
};

int cmd_quantize(int argc, char **argv) {
    quantize_args args = {0};
    void *const dst[] = {&args};
    int status;
    if (cli_parse(&quantize_command, argc, argv, dst, &status)) return status;
    if (!args.src) return cli_usage_error("quantize: -m DIR is required");
    if (!args.dst) return cli_usage_error("quantize: -o OUTDIR is required");
    if (!args.type) return cli_usage_error("quantize: --type %s is required", gemma3_weight_type_list(1));
    double t0 = cli_now();
    const size_t n = strlen(args.dst);
    const int gguf = n > 5 && strcmp(args.dst + n - 5, ".gguf") == 0;
    if (!gguf && args.type == GEMMA3_WEIGHTS_BF16)
        return cli_usage_error("--type bf16: only for a .gguf output");
    const enum gemma3_weight_type type = (enum gemma3_weight_type)args.type;
    if ((gguf ? gemma3_quantize_gguf(args.src, args.dst, type, args.n_threads)
              : gemma3_quantize_ex(args.src, args.dst, type, args.n_threads,
                                   args.force ? GEMMA3_QUANTIZE_REPLACE : 0)) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    fprintf(stderr, "gemma3: wrote %s (%s) in %.2f s\n", args.dst,
            gemma3_weight_type_name((enum gemma3_weight_type)args.type), cli_now() - t0);
    return 0;
}
