/* cli/main.c - the gemma3 command: dispatches to a subcommand. */
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* A standard descriptor the shell closed (>&-) is held by the root directory, so that the first
 * file the program opens does not become "standard output" (and receive the text), while reads
 * and writes on it still fail as on a closed one, and /dev/fd/1 names no file to write. */
static void hold_closed_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int got = open("/", O_RDONLY | O_DIRECTORY);
            if (got >= 0 && got != fd) close(got); /* not the lowest free: leave it closed */
        }
}

/* Every command ends here: output that could not be written (a full disk, /dev/full, a closed
 * stdout) is an error, with one line unless the command already printed its own. A reader that
 * went away (| head) ends the program by SIGPIPE before this, quietly, as it should. */
static int finish_stdout(int status) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return status;
    int err = errno ? errno : EIO;
    if (!status) fprintf(stderr, "gemma3: standard output: %s\n", strerror(err));
    return status ? status : CLI_EXIT_FAIL;
}

static int run(int argc, char **argv) {
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

int main(int argc, char **argv) {
    hold_closed_std_fds();
    use_utf8_input();
    return cli_interrupt_finish(finish_stdout(run(argc, argv)));
}
