/* cli/main.c - the gemma3 command: dispatches to a subcommand. */
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", cmd_info, "print a checkpoint's configuration, parameters and memory needs"},
    {"tokenize", cmd_tokenize, "text to token ids or pieces (like llama-tokenize)"},
    {"eval", cmd_eval, "run the model over token ids and dump raw float32 logits"},
    {"generate", cmd_generate, "one-shot generation (the default: gemma3 -m DIR -p PROMPT)"},
    {"chat", cmd_chat, "interactive chat (also: gemma3 -i / -cnv -m DIR)"},
    {"bench", cmd_bench, "prompt and generation speed, like llama-bench"},
    {"perplexity", cmd_perplexity, "perplexity of a text and KL divergence from a base run"},
    {"quantize", cmd_quantize, "write a Q8_0 / Q4_0 copy of a checkpoint that loads in place"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: gemma3 <command> [options]   (gemma3 <command> --help for its options)\n");
    fprintf(f, "       gemma3 -m DIR -p PROMPT [options]   (generate)\n");
    fprintf(f, "       gemma3 --version                    (version, commit, compiler, kernels)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* The line editor reads multibyte input only in a UTF-8 character type (Gemma's text is UTF-8
 * whatever the user's locale says); only LC_CTYPE changes, so numbers print with a '.'. */
static void use_utf8_input(void) {
    setlocale(LC_CTYPE, "");
    if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0) setlocale(LC_CTYPE, "C.UTF-8");
}

int main(int argc, char **argv) {
    use_utf8_input();
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        cli_print_version(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    /* llama-cli style: flags without a subcommand generate, or chat with -i / -cnv */
    if (argv[1][0] == '-') {
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], "-i") || !strcmp(argv[i], "-cnv") || !strcmp(argv[i], "--interactive") ||
                !strcmp(argv[i], "--conversation"))
                return cmd_chat(argc, argv);
        return cmd_generate(argc, argv);
    }
    return cli_usage_error("unknown command '%s' (try gemma3 --help)", argv[1]);
}
