/* bench-state - saved session state on the 1b shape (issue 17's targets):
 *   reuse      time to first token of a 2,000-token document + a 20-token question, without a
 *              cache (prefill all 2,020) and with a warm cache file of the document (load it,
 *              prefill the 20): target >= 20x;
 *   save/load  a 4,096-token BF16 state, to and from a file on the disk in $BUILD (the save
 *              includes its fsync): target < 0.5 s each.
 *
 *   build/tools/bench-state [-m DIR] [-t N] [-r N]
 *
 * Without -m it uses $BUILD/bench-models/1b (BUILD defaults to build), the checkpoint tools/
 * bench-model.sh uses, and writes it there first with gen-checkpoint (next to this binary) if it
 * is missing. Sessions run as `gemma3 --prompt-cache` runs them: default mode, BF16 KV cache,
 * sliding rings keeping 512 positions beyond the window. Times are the best of -r repetitions
 * (default 3) except the no-cache prefill (one run: it is the slow one). Prints a markdown table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gemma3.h"
#include "util.h"

#define N_DOC 2000
#define N_QUESTION 20
#define N_LONG 4096
#define SWA_EXTRA 512 /* as cli/generate.c's PROMPT_CACHE_SWA_EXTRA */

static int fail(const char *what) {
    fprintf(stderr, "bench-state: %s: %s\n", what, gemma3_last_error());
    return 1;
}

static gemma3_session *new_session(const gemma3_model *m, int n_threads, int swa_extra) {
    gemma3_session_params sp = gemma3_session_default_params();
    sp.n_ctx = N_LONG;
    sp.n_threads = n_threads;
    sp.n_swa_extra = swa_extra;
    gemma3_session *s = NULL;
    return gemma3_session_init(m, &sp, &s) == GEMMA3_OK ? s : NULL;
}

static long file_bytes(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Best of reps: save s to path, or load path into s. */
static double time_save(gemma3_session *s, const char *path, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = g3_now();
        if (gemma3_session_save(s, path) != GEMMA3_OK) return -1;
        double dt = g3_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static double time_load(gemma3_session *s, const char *path, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        gemma3_session_reset(s);
        double t0 = g3_now();
        if (gemma3_session_load(s, path) != GEMMA3_OK) return -1;
        double dt = g3_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int n_threads = 2, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench-state [-m DIR] [-t N] [-r N]\n");
            return 2;
        }
    }
    if (n_threads < 1 || reps < 1) {
        fprintf(stderr, "bench-state: need -t >= 1 and -r >= 1\n");
        return 2;
    }
    char def[1024], cmd[4096];
    if (!dir) {
        const char *b = getenv("BUILD");
        snprintf(def, sizeof def, "%s/bench-models/1b", b && *b ? b : "build");
        dir = def;
        snprintf(cmd, sizeof cmd, "%s/config.json", dir);
        if (access(cmd, F_OK) != 0) {
            const char *slash = strrchr(argv[0], '/');
            int len = slash ? (int)(slash - argv[0]) : 1;
            printf("writing a synthetic 1b checkpoint to %s (once)\n", dir);
            snprintf(cmd, sizeof cmd, "'%.*s/gen-checkpoint' 1b '%s' --seed 1 --tokenizer models/tokenizer.model >/dev/null",
                     len, slash ? argv[0] : ".", dir);
            if (system(cmd) != 0) {
                fprintf(stderr, "bench-state: %s failed\n", cmd);
                return 1;
            }
        }
    }

    gemma3_model *m = NULL;
    if (gemma3_model_load(dir, &m) != GEMMA3_OK) return fail(dir);
    gemma3_model_info info;
    gemma3_model_get_info(m, &info);
    int32_t *ids = malloc(N_LONG * sizeof *ids);
    for (int i = 0; i < N_LONG; i++) ids[i] = (int32_t)(2 + (i * 7919) % (info.vocab_size - 2));
    /* on the disk, in the build directory (never beside a checkpoint that may be read-only) */
    const char *b = getenv("BUILD");
    char path[1200], path0[1200];
    snprintf(path, sizeof path, "%s/bench-state.tmp", b && *b ? b : "build");
    snprintf(path0, sizeof path0, "%s/bench-state-0.tmp", b && *b ? b : "build");
    gemma3_session *s = new_session(m, n_threads, SWA_EXTRA), *s0 = new_session(m, n_threads, 0);
    int status = 1;
    if (!s || !s0) {
        fail("session");
        goto done;
    }
    printf("model %s (%s, %d layers, window %d), %d threads, isa %s\n", dir, info.weight_type,
           info.n_layers, info.sliding_window, n_threads, gemma3_session_isa(s));
    fflush(stdout);

    /* no cache: the whole document and question */
    double t0 = g3_now();
    if (gemma3_session_forward(s, ids, N_DOC + N_QUESTION, NULL) != GEMMA3_OK) {
        fail("prefill");
        goto done;
    }
    double cold = g3_now() - t0;

    /* the cache file of the document, then: load it, prefill the question */
    gemma3_session_reset(s);
    if (gemma3_session_forward(s, ids, N_DOC, NULL) != GEMMA3_OK || gemma3_session_save(s, path) != GEMMA3_OK) {
        fail("document cache");
        goto done;
    }
    long doc_bytes = file_bytes(path);
    double warm = 1e30, warm_load = 0;
    for (int r = 0; r < reps; r++) {
        gemma3_session_reset(s);
        double t_start = g3_now();
        if (gemma3_session_load(s, path) != GEMMA3_OK) {
            fail("load");
            goto done;
        }
        double t_loaded = g3_now();
        if (gemma3_session_forward(s, ids + N_DOC, N_QUESTION, NULL) != GEMMA3_OK) {
            fail("question");
            goto done;
        }
        double t_end = g3_now();
        if (t_end - t_start < warm) warm = t_end - t_start, warm_load = t_loaded - t_start;
    }

    /* a 4,096-token state: the document, then on to the end of the context */
    gemma3_session_reset(s);
    if (gemma3_session_load(s, path) != GEMMA3_OK ||
        gemma3_session_forward(s, ids + N_DOC, N_LONG - N_DOC, NULL) != GEMMA3_OK) {
        fail("4k prefill");
        goto done;
    }
    double save = time_save(s, path, reps);
    long long_bytes = file_bytes(path);
    double load0 = time_load(s0, path, reps); /* into rings of W: the extra rows skipped */
    double save0 = s0 && load0 >= 0 ? time_save(s0, path0, reps) : -1;
    long plain_bytes = file_bytes(path0);
    double load = time_load(s, path, reps);
    if (save < 0 || load < 0 || load0 < 0 || save0 < 0) {
        fail("4k save/load");
        goto done;
    }

    printf("| test | seconds | notes |\n| --- | ---: | --- |\n");
    printf("| time to first token, %d + %d tokens, no cache | %.3f | prefill of %d tokens |\n", N_DOC,
           N_QUESTION, cold, N_DOC + N_QUESTION);
    printf("| time to first token, %d + %d tokens, warm cache file | %.4f | load %.4f s (%.1f MB) + prefill of %d |\n",
           N_DOC, N_QUESTION, warm, warm_load, doc_bytes / 1e6, N_QUESTION);
    printf("| reuse speedup (target >= 20x) | %.1fx | |\n", cold / warm);
    printf("| save %d tokens, BF16, swa extra %d | %.4f | %.1f MB, temporary file + fsync + rename |\n",
           N_LONG, SWA_EXTRA, save, long_bytes / 1e6);
    printf("| load %d tokens, BF16, swa extra %d | %.4f | checksums, fingerprint, copy |\n", N_LONG,
           SWA_EXTRA, load);
    printf("| save %d tokens, BF16, plain session | %.4f | %.1f MB |\n", N_LONG, save0, plain_bytes / 1e6);
    printf("| load %d tokens, BF16, into a plain session | %.4f | from the %.1f MB file |\n", N_LONG, load0,
           long_bytes / 1e6);
    status = 0;
done:
    unlink(path);
    unlink(path0);
    free(ids);
    gemma3_session_free(s);
    gemma3_session_free(s0);
    gemma3_model_free(m);
    return status;
}
