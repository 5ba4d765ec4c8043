/* cli/eval.c - gemma3 eval: runs the model over token ids and dumps raw float32 logits, the hook
 * every correctness check uses.
 *
 *   gemma3 eval -m DIR --tokens 2,17,... --dump-logits FILE [--all-logits] [--step N]
 *               [the model flags: -t, -c, -b, --exact, --kv-type, --isa, --mmap, -v]
 *
 * The file gets [n_tokens][vocab] floats (row-major, little-endian as the host) with
 * --all-logits, else the [vocab] logits of the last token. --step N feeds the tokens N per
 * forward call (the logits are the same whatever N is). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gemma3.h"

typedef struct eval_args {
    const char *tokens, *dump;
    int all_logits, step;
} eval_args;

#define A(field) offsetof(eval_args, field)
static const cli_option eval_options[] = {
    {"--tokens", "LIST", CLI_TEXT, A(tokens), .help = "comma-separated token ids"},
    {"--dump-logits", "FILE", CLI_TEXT, A(dump),
     .help = "write raw float32 logits ([vocab] of the last token)"},
    {"--all-logits", NULL, CLI_SWITCH, A(all_logits), .value = 1,
     .help = "write [n_tokens][vocab] instead"},
    {"--step", "N", CLI_INT, A(step), 1, 1 << 30,
     .help = "tokens per forward call; the logits are the same whatever N is",
     .default_text = "all at once"},
};
#undef A

static const cli_group eval_group = CLI_GROUP("eval", eval_options);

static const cli_command eval_command = {
    "usage: gemma3 eval -m DIR --tokens ID,ID,... --dump-logits FILE [options]\n"
    "Runs the model over token ids and writes raw float32 logits.\n",
    "eval: unknown option '%s' (try gemma3 eval --help)",
    {&eval_group, &cli_model_group, &cli_compat_group, NULL},
};

/* Through gemma3_outfile: a regular FILE is written to a temporary and renamed (never
 * half-written); a device or FIFO (/dev/stdout) gets the bytes directly. */
static int write_floats(const char *path, const float *x, size_t n) {
    gemma3_outfile *o;
    if (gemma3_outfile_open(path, &o) != GEMMA3_OK) return cli_fail("--dump-logits: %s", gemma3_last_error());
    fwrite(x, sizeof *x, n, gemma3_outfile_stream(o)); /* a short write shows in the commit */
    if (gemma3_outfile_commit(o) != GEMMA3_OK) return cli_fail("--dump-logits: %s", gemma3_last_error());
    return 0;
}

typedef struct eval_timing {
    double prefill_s, decode_s;
    int n_prefill, n_decode;
} eval_timing;

/* Feeds ids step per forward call, keeping every row of logits when all_logits is given. The
 * first call counts as the prefill; later one-token calls as decode. */
static int run_eval(gemma3_session *s, const int32_t *ids, int n_ids, int step, float *all_logits,
                    size_t vocab, eval_timing *t) {
    memset(t, 0, sizeof *t);
    for (int done = 0; done < n_ids;) {
        int n = n_ids - done < step ? n_ids - done : step;
        double t0 = cli_now();
        float *rows = all_logits ? all_logits + (size_t)done * vocab : NULL;
        if (gemma3_session_forward(s, ids + done, n, rows) != GEMMA3_OK)
            return cli_fail("%s", gemma3_last_error());
        double dt = cli_now() - t0;
        if (done == 0 || n > 1) {
            t->prefill_s += dt;
            t->n_prefill += n;
        } else {
            t->decode_s += dt;
            t->n_decode += n;
        }
        done += n;
    }
    return 0;
}

static void print_verbose(const gemma3_session *s, const gemma3_session_params *sp, double t_load,
                          const eval_timing *t) {
    fprintf(stderr, "eval: isa %s, threads %d, mode %s, kv %s, ctx %d, load %.3f s\n",
            gemma3_session_isa(s), gemma3_session_n_threads(s), sp->exact ? "exact" : "default",
            sp->exact || sp->kv_type == GEMMA3_KV_F32 ? "f32" : "bf16", gemma3_session_n_ctx(s),
            t_load);
    fprintf(stderr, "eval: prefill %d tokens in %.3f s (%.2f tok/s)\n", t->n_prefill, t->prefill_s,
            t->prefill_s > 0 ? t->n_prefill / t->prefill_s : 0.0);
    if (t->n_decode)
        fprintf(stderr, "eval: decode %d tokens in %.3f s (%.2f tok/s)\n", t->n_decode, t->decode_s,
                t->decode_s > 0 ? t->n_decode / t->decode_s : 0.0);
}

static int check_ids(const int32_t *ids, int n_ids, int vocab_size) {
    for (int i = 0; i < n_ids; i++)
        if (ids[i] >= vocab_size)
            return cli_usage_error("--tokens: id %d is out of range [0, %d]", ids[i], vocab_size - 1);
    return 0;
}

int cmd_eval(int argc, char **argv) {
    eval_args args = {0};
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    void *const dst[] = {&args, &mo, &mo};
    int rc;
    if (cli_parse(&eval_command, argc, argv, dst, &rc)) return rc;
    if (!mo.model_dir) return cli_usage_error("eval: -m DIR is required");
    if (!args.tokens) return cli_usage_error("eval: --tokens is required");
    if (!args.dump) return cli_usage_error("eval: --dump-logits FILE is required");

    int32_t *ids = NULL;
    int n_ids = 0;
    if ((rc = cli_parse_ids("--tokens", args.tokens, INT32_MAX, &ids, &n_ids))) return rc;
    gemma3_model *model = NULL;
    gemma3_session *s = NULL;
    float *logits = NULL;
    gemma3_model_info info;
    double t0 = cli_now();
    if ((rc = cli_model_load(&mo, &model))) goto done;
    double t_load = cli_now() - t0;
    gemma3_model_get_info(model, &info);
    if ((rc = check_ids(ids, n_ids, info.vocab_size)) || (rc = cli_check_ctx(&mo, &info))) goto done;
    if (gemma3_session_init(model, &mo.sp, &s) != GEMMA3_OK) {
        rc = cli_fail("%s", gemma3_last_error());
        goto done;
    }
    size_t V = (size_t)info.vocab_size;
    if (args.all_logits && !(logits = malloc((size_t)n_ids * V * sizeof *logits))) {
        rc = cli_fail("eval: out of memory for %d x %zu logits", n_ids, V);
        goto done;
    }
    eval_timing timing;
    if ((rc = run_eval(s, ids, n_ids, args.step ? args.step : n_ids, logits, V, &timing))) goto done;
    rc = logits ? write_floats(args.dump, logits, (size_t)n_ids * V)
                : write_floats(args.dump, gemma3_session_logits(s), V);
    if (mo.verbose) print_verbose(s, &mo.sp, t_load, &timing);
done:
    free(logits);
    free(ids);
    gemma3_session_free(s);
    gemma3_model_free(model);
    return rc;
}
