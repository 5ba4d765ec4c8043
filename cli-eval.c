/* cli-eval.c - gemma3 eval (being written). */
#include "cli.h"

int cmd_eval(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("eval: not available in this build yet");
}
