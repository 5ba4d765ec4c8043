/* cli/eval.c - gemma3 eval: runs the model over token ids and dumps raw float32 logits, the hook
 * every correctness check uses.
 *
 *   gemma3 eval -m DIR --tokens 2,17,... --dump-logits FILE [--all-logits] [--step N]
 *               [the model flags: -t, -c, -b, --exact, --kv-type, --isa, --mmap, -v]
 *
 * The file gets [n_tokens][vocab] floats (row-major, little-endian as the host) with
 * --all-logits, else the [vocab] logits of the last token. --step N feeds the tokens N per
 * forward call (the logits are the same whatever N is). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gemma3.h"
#include "threads.h"
#include "util.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: gemma3 eval -m DIR --tokens ID,ID,... --dump-logits FILE [options]\n"
            "  --tokens LIST          comma-separated token ids\n"
            "  --dump-logits FILE     write raw float32 logits ([vocab] of the last token)\n"
            "  --all-logits           write [n_tokens][vocab] instead\n"
            "  --step N               tokens per forward call (default: all at once); the logits\n"
            "                         are the same whatever N is\n"
            "%s", cli_model_help);
}

static int write_floats(const char *path, const float *x, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return cli_fail("--dump-logits: cannot open '%s' for writing", path);
    size_t wrote = fwrite(x, sizeof *x, n, f);
    if (fclose(f) != 0 || wrote != n) return cli_fail("--dump-logits: cannot write '%s'", path);
    return 0;
}

int cmd_eval(int argc, char **argv) {
    const char *tokens_arg = NULL, *dump = NULL;
    int all_logits = 0, step = 0, rc;
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tokens")) {
            if (!(tokens_arg = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--dump-logits")) {
            if (!(dump = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--all-logits")) {
            all_logits = 1;
        } else if (!strcmp(a, "--step")) {
            if (!(v = cli_value(argc, argv, &i))) return CLI_EXIT_USAGE;
            if ((rc = cli_parse_int(a, v, 1, 1 << 30, &step))) return rc;
        } else if ((rc = cli_model_flag(argc, argv, &i, &mo)) != CLI_NOT_MINE) {
            if (rc) return rc;
        } else {
            return cli_usage_error("eval: unknown option '%s' (try gemma3 eval --help)", a);
        }
    }
    if (!mo.model_dir) return cli_usage_error("eval: -m DIR is required");
    if (!tokens_arg) return cli_usage_error("eval: --tokens is required");
    if (!dump) return cli_usage_error("eval: --dump-logits FILE is required");

    int32_t *ids = NULL;
    int n_ids = 0;
    if ((rc = cli_parse_ids("--tokens", tokens_arg, INT32_MAX, &ids, &n_ids))) return rc;

    gemma3_model *model = NULL;
    gemma3_session *s = NULL;
    float *logits = NULL;
    double t0 = g3_now();
    if (gemma3_model_load_ex(mo.model_dir, &mo.mp, &model) != GEMMA3_OK) {
        rc = cli_fail("%s", gemma3_last_error());
        goto done;
    }
    double t_load = g3_now() - t0;
    gemma3_model_info info;
    gemma3_model_get_info(model, &info);
    for (int i = 0; i < n_ids; i++)
        if (ids[i] >= info.vocab_size) {
            rc = cli_usage_error("--tokens: id %d is out of range [0, %d]", ids[i], info.vocab_size - 1);
            goto done;
        }
    if ((rc = cli_check_ctx(&mo, &info))) goto done;
    gemma3_session_params sp = mo.sp;
    if (gemma3_session_init(model, &sp, &s) != GEMMA3_OK) {
        rc = cli_fail("%s", gemma3_last_error());
        goto done;
    }
    size_t V = (size_t)info.vocab_size;
    if (all_logits && !(logits = malloc((size_t)n_ids * V * sizeof *logits))) {
        rc = cli_fail("eval: out of memory for %d x %zu logits", n_ids, V);
        goto done;
    }

    /* Timing: the first call is the prefill; with -b, later calls of one token count as decode. */
    if (!step) step = n_ids;
    double t_prefill = 0, t_decode = 0;
    int n_prefill = 0, n_decode = 0;
    for (int done = 0; done < n_ids;) {
        int n = n_ids - done < step ? n_ids - done : step;
        double ts = g3_now();
        if (gemma3_session_forward(s, ids + done, n, logits ? logits + (size_t)done * V : NULL) !=
            GEMMA3_OK) {
            rc = cli_fail("%s", gemma3_last_error());
            goto done;
        }
        double dt = g3_now() - ts;
        if (done == 0 || n > 1) {
            t_prefill += dt;
            n_prefill += n;
        } else {
            t_decode += dt;
            n_decode += n;
        }
        done += n;
    }
    rc = all_logits ? write_floats(dump, logits, (size_t)n_ids * V)
                    : write_floats(dump, gemma3_session_logits(s), V);
    if (mo.verbose) {
        fprintf(stderr, "eval: isa %s, threads %d, mode %s, kv %s, ctx %d, load %.3f s\n",
                gemma3_session_isa(s), gemma3_session_n_threads(s), sp.exact ? "exact" : "default",
                sp.exact || sp.kv_type == GEMMA3_KV_F32 ? "f32" : "bf16", gemma3_session_n_ctx(s), t_load);
        fprintf(stderr, "eval: prefill %d tokens in %.3f s (%.2f tok/s)\n", n_prefill, t_prefill,
                t_prefill > 0 ? n_prefill / t_prefill : 0.0);
        if (n_decode)
            fprintf(stderr, "eval: decode %d tokens in %.3f s (%.2f tok/s)\n", n_decode, t_decode,
                    t_decode > 0 ? n_decode / t_decode : 0.0);
    }
done:
    free(logits);
    free(ids);
    gemma3_session_free(s);
    gemma3_model_free(model);
    return rc;
}
