/* quant-load - loads a checkpoint with a weight type (quantizing at load if asked) and prints
 * what it cost; or writes a quantized directory. For measuring time and peak RSS:
 *
 *   quant-load DIR as-stored|bf16|q8_0|q4_0 [N_THREADS] [N_CTX]   load, info, one 4-token forward
 *                                          (N_CTX 0: load only; [--no-forward]: load + session)
 *   quant-load --write SRC DST q8_0|q4_0 [N_THREADS]               gemma3_quantize
 * A last argument --repack=none|x8 sets the quantized layout (default auto). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"
#include "util.h"

static int type_of(const char *s) {
    return strcmp(s, "as-stored") == 0 ? GEMMA3_WEIGHTS_AS_STORED : gemma3_weight_type_parse(s);
}

int main(int argc, char **argv) {
    enum gemma3_repack repack = GEMMA3_REPACK_AUTO;
    if (argc > 1 && strncmp(argv[argc - 1], "--repack=", 9) == 0) {
        const char *mode = argv[--argc] + 9;
        repack = strcmp(mode, "x8") == 0 ? GEMMA3_REPACK_X8 : strcmp(mode, "none") == 0 ? GEMMA3_REPACK_NONE : GEMMA3_REPACK_AUTO;
    }
    if (argc >= 5 && strcmp(argv[1], "--write") == 0) {
        int type = type_of(argv[4]);
        double t0 = g3_now();
        int rc = type < 0 ? type
                          : gemma3_quantize(argv[2], argv[3], (enum gemma3_weight_type)type,
                                            argc > 5 ? atoi(argv[5]) : 0);
        if (rc != GEMMA3_OK) {
            fprintf(stderr, "%s\n", gemma3_last_error());
            return 1;
        }
        printf("quantized %s -> %s (%s) in %.2f s\n", argv[2], argv[3], argv[4], g3_now() - t0);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: quant-load DIR as-stored|bf16|q8_0|q4_0 [N_THREADS] [N_CTX] [--no-forward]\n"
                        "       quant-load --write SRC DST q8_0|q4_0 [N_THREADS]\n");
        return 2;
    }
    int type = type_of(argv[2]);
    if (type < 0) {
        fprintf(stderr, "%s\n", gemma3_last_error());
        return 1;
    }
    gemma3_model_params mp = {0};
    mp.weight_type = (enum gemma3_weight_type)type;
    mp.n_threads = argc > 3 ? atoi(argv[3]) : 0;
    mp.repack = repack;
    double t0 = g3_now();
    gemma3_model *m;
    if (gemma3_model_load_ex(argv[1], &mp, &m) != GEMMA3_OK) {
        fprintf(stderr, "%s\n", gemma3_last_error());
        return 1;
    }
    double t_load = g3_now() - t0;
    gemma3_model_info info;
    gemma3_model_get_info(m, &info);
    printf("%s: %s (%s layout), %lld params, weights %.3f GiB, load %.3f s (quantize %.3f s, repack %.3f s)\n",
           argv[1], info.weight_type, info.weight_layout, (long long)info.n_params,
           (double)info.weight_bytes / (1024.0 * 1024 * 1024), t_load, info.quantize_seconds,
           info.repack_seconds);
    if (argc > 4 && atoi(argv[4]) == 0) { /* N_CTX 0: load only */
        gemma3_model_free(m);
        return 0;
    }
    gemma3_session_params sp = gemma3_session_default_params();
    sp.n_threads = mp.n_threads;
    sp.n_ctx = argc > 4 ? atoi(argv[4]) : 256;
    sp.n_batch = 4;
    gemma3_session *s;
    if (gemma3_session_init(m, &sp, &s) != GEMMA3_OK) {
        fprintf(stderr, "%s\n", gemma3_last_error());
        return 1;
    }
    printf("session: n_ctx %d\n", gemma3_session_n_ctx(s));
    if (argc > 5 && strcmp(argv[5], "--no-forward") == 0) {
        gemma3_session_free(s);
        gemma3_model_free(m);
        return 0;
    }
    int32_t tok[4] = {2, 100, 200, 300};
    t0 = g3_now();
    if (gemma3_session_forward(s, tok, 4, NULL) != GEMMA3_OK) {
        fprintf(stderr, "%s\n", gemma3_last_error());
        return 1;
    }
    const float *lg = gemma3_session_logits(s);
    int best = 0;
    for (int i = 1; i < info.vocab_size; i++)
        if (lg[i] > lg[best]) best = i;
    printf("4-token forward %.3f s, argmax %d\n", g3_now() - t0, best);
    gemma3_session_free(s);
    gemma3_model_free(m);
    return 0;
}
