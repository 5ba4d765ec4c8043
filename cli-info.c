/* cli-info.c - gemma3 info (being written). */
#include "cli.h"

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("info: not available in this build yet");
}
