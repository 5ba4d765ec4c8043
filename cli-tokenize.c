/* cli-tokenize.c - gemma3 tokenize (being written). */
#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("tokenize: not available in this build yet");
}
