/* bench-forward - prefill and decode throughput of the whole forward pass, llama-bench style.
 *
 *   build/tools/bench-forward [-m DIR] [--pp N] [--tg N] [-r N] [--scalar]
 *
 * Without -m it generates the real 270m shape (random weights, 512 MB) with gen-checkpoint (found
 * next to this binary) in a temporary directory and removes it afterwards. For each SIMD kernel
 * table the CPU has (and scalar with --scalar), each mode (default, exact) and 1 and 2 threads it
 * prints one row per test: ppN = one N-token prefill, tgN = N single-token decode steps after it.
 * Each figure is the best of -r repetitions (default 3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemma3.h"
#include "kernels.h"
#include "util.h"

static double best_of(gemma3_session *s, const int32_t *ids, int pp, int tg, int reps, double *tg_best) {
    double pp_best = 1e30;
    *tg_best = 1e30;
    for (int r = 0; r < reps; r++) {
        gemma3_session_reset(s);
        double t0 = g3_now();
        if (gemma3_session_forward(s, ids, pp, NULL) != GEMMA3_OK) return -1;
        double t1 = g3_now();
        for (int i = 0; i < tg; i++)
            if (gemma3_session_forward(s, ids + pp + i, 1, NULL) != GEMMA3_OK) return -1;
        double t2 = g3_now();
        if (t1 - t0 < pp_best) pp_best = t1 - t0;
        if (t2 - t1 < *tg_best) *tg_best = t2 - t1;
    }
    return pp_best;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int pp = 128, tg = 32, reps = 3, with_scalar = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--pp") && i + 1 < argc) pp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tg") && i + 1 < argc) tg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scalar")) with_scalar = 1;
        else {
            fprintf(stderr, "usage: bench-forward [-m DIR] [--pp N] [--tg N] [-r N] [--scalar]\n");
            return 2;
        }
    }
    if (pp < 1 || tg < 0 || reps < 1 || pp + tg > 4096) {
        fprintf(stderr, "bench-forward: need pp >= 1, tg >= 0, pp + tg <= 4096, r >= 1\n");
        return 2;
    }

    char tmp[] = "/tmp/bench-forward-XXXXXX", cmd[8192];
    int generated = 0;
    if (!dir) {
        if (!mkdtemp(tmp)) {
            perror("bench-forward: mkdtemp");
            return 1;
        }
        const char *slash = strrchr(argv[0], '/');
        int len = slash ? (int)(slash - argv[0]) : 1;
        snprintf(cmd, sizeof cmd, "'%.*s/gen-checkpoint' 270m '%s/270m' >/dev/null", len,
                 slash ? argv[0] : ".", tmp);
        if (system(cmd) != 0) {
            fprintf(stderr, "bench-forward: %s failed\n", cmd);
            rmdir(tmp);
            return 1;
        }
        snprintf(cmd, sizeof cmd, "%s/270m", tmp);
        dir = cmd;
        generated = 1;
    }

    int status = 0;
    gemma3_model *m = NULL;
    if (gemma3_model_load(dir, &m) != GEMMA3_OK) {
        fprintf(stderr, "bench-forward: %s\n", gemma3_last_error());
        status = 1;
        goto done;
    }
    gemma3_model_info info;
    gemma3_model_get_info(m, &info);
    int32_t *ids = malloc((size_t)(pp + tg) * sizeof *ids);
    for (int i = 0; i < pp + tg; i++) ids[i] = (int32_t)(2 + (i * 7919) % (info.vocab_size - 2));

    printf("model %s: %d layers, hidden %d, %.0f M params\n", dir, info.n_layers, info.hidden_size,
           info.n_params / 1e6);
    printf("| isa    | mode    | threads | test  |      t/s |\n|--------|---------|---------|-------|----------|\n");
    static const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int ii = with_scalar ? 0 : 1; ii < 3; ii++) {
        if (!g3_kernels_get((g3_isa)ii)) continue;
        for (int exact = 0; exact < 2; exact++)
            for (int nt = 1; nt <= 2; nt++) {
                gemma3_session_params sp = gemma3_session_default_params();
                sp.isa = isas[ii];
                sp.exact = exact;
                sp.n_threads = nt;
                sp.n_ctx = pp + tg;
                gemma3_session *s;
                if (gemma3_session_init(m, &sp, &s) != GEMMA3_OK) {
                    fprintf(stderr, "bench-forward: %s\n", gemma3_last_error());
                    status = 1;
                    continue;
                }
                double t_tg, t_pp = best_of(s, ids, pp, tg, reps, &t_tg);
                const char *mode = exact ? "exact" : "default";
                if (t_pp < 0) {
                    fprintf(stderr, "bench-forward: %s\n", gemma3_last_error());
                    status = 1;
                } else {
                    printf("| %-6s | %-7s | %7d | pp%-3d | %8.2f |\n", isas[ii], mode, nt, pp, pp / t_pp);
                    if (tg) printf("| %-6s | %-7s | %7d | tg%-3d | %8.2f |\n", isas[ii], mode, nt, tg, tg / t_tg);
                }
                fflush(stdout);
                gemma3_session_free(s);
            }
    }
    free(ids);
done:
    gemma3_model_free(m);
    if (generated) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) status = 1;
    }
    return status;
}
