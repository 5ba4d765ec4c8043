/* cli/compat-options.c - llama.cpp's flags for GPUs and NUMA: accepted, each with a one-line
 * note on stderr saying it changes nothing here, so that scripts written for llama.cpp run
 * unchanged; and --mlock, which does what it says. */
#include <stddef.h>
#include <stdio.h>

#include "cli.h"

static int note_no_gpu(const char *flag, const char *value, void *group) {
    fprintf(stderr, "gemma3: note: %s ignored: gemma3 runs on the CPU only\n", flag);
    return 0;
}

static int note_numa(const char *flag, const char *value, void *group) {
    fprintf(stderr, "gemma3: note: %s ignored: threads are not placed on NUMA nodes\n", flag);
    return 0;
}

static const cli_option compat_options[] = {
    {"-ngl, --gpu-layers, --n-gpu-layers", "N", CLI_CUSTOM, .parse = note_no_gpu,
     .help = "accepted and ignored (no GPU), with a note"},
    {"-fa, --flash-attn", "MODE", CLI_CUSTOM, .parse = note_no_gpu, .optional_value = 1,
     .help = "accepted and ignored, with or without on|off|auto, with a note"},
    {"-mg, --main-gpu", "N", CLI_CUSTOM, .parse = note_no_gpu,
     .help = "accepted and ignored, with a note"},
    {"-sm, --split-mode", "MODE", CLI_CUSTOM, .parse = note_no_gpu,
     .help = "accepted and ignored, with a note"},
    {"-ts, --tensor-split", "LIST", CLI_CUSTOM, .parse = note_no_gpu,
     .help = "accepted and ignored, with a note"},
    {"-dev, --device", "LIST", CLI_CUSTOM, .parse = note_no_gpu,
     .help = "accepted and ignored, with a note"},
    {"-nkvo, --no-kv-offload", NULL, CLI_CUSTOM, .parse = note_no_gpu,
     .help = "accepted and ignored, with a note"},
    {"--numa", "TYPE", CLI_CUSTOM, .parse = note_numa,
     .help = "accepted and ignored, with a note"},
    {"--mlock", NULL, CLI_SWITCH, offsetof(cli_model_opts, mlock), .value = 1,
     .help = "keep the weights and the cache in RAM, never swapped (a warning if the "
             "system refuses: ulimit -l)"},
};

const cli_group cli_compat_group = CLI_GROUP("accepted for llama.cpp's scripts", compat_options);
