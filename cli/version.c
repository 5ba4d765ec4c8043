/* cli/version.c - what --version prints and bench's build fields: the version, the commit and
 * build number the binary was made from (the Makefile passes them), the compiler, and the
 * kernel tables this CPU runs. */
#include <stdio.h>

#include "cli.h"

#ifndef G3_BUILD_COMMIT
#define G3_BUILD_COMMIT "unknown"
#endif
#ifndef G3_BUILD_NUMBER
#define G3_BUILD_NUMBER 0
#endif

const char *cli_build_commit(void) { return G3_BUILD_COMMIT; }
int cli_build_number(void) { return G3_BUILD_NUMBER; }

const char *cli_compiler(void) {
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "an unknown C compiler";
#endif
}

void cli_print_version(FILE *f) {
    fprintf(f, "gemma3 version %s (build %d, commit %s)\n", GEMMA3_VERSION, cli_build_number(),
            cli_build_commit());
    fprintf(f, "built with %s\n", cli_compiler());
    const char *names[16];
    int n = gemma3_kernel_tables(names, 16);
    fprintf(f, "kernel tables this CPU runs:");
    for (int i = 0; i < n && i < 16; i++) fprintf(f, " %s", names[i]);
    fputc('\n', f);
}
