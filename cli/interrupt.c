/* cli/interrupt.c - Ctrl-C for perplexity and bench: a flag that the session's abort callback
 * reads, and the process's end by SIGINT once the command has reported (cli.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* A SIGINT the parent ignores (a background job of a script) stays ignored. */
void cli_interrupt_catch(void) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, &old) == 0 && old.sa_handler == SIG_IGN) sigaction(SIGINT, &old, NULL);
}

int cli_interrupted(void) { return interrupted != 0; }

static int interrupt_set(void *ctx) {
    (void)ctx;
    return interrupted != 0;
}

void cli_interrupt_watch(gemma3_session *s) { gemma3_session_set_abort(s, interrupt_set, NULL); }

int cli_interrupt_finish(int status) {
    if (status != CLI_EXIT_INTERRUPTED || !interrupted) return status;
    fflush(stdout);
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return status; /* SIGINT blocked or ignored by the parent's choice: exit 130 */
}
