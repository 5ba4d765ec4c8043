/* cli/perplexity.c - gemma3 perplexity: llama-perplexity's measure of how well the model predicts
 * a text, and its KL-divergence comparison of a run with a saved base run.
 *
 *   gemma3 perplexity -m DIR -f TEXT [-c N] [--chunks N] [-b N] [model flags]
 *   gemma3 perplexity -m DIR -f TEXT --kl-divergence-base FILE          (save the base)
 *   gemma3 perplexity -m DIR [-f TEXT] --kl-divergence-base FILE --kl-divergence  (compare)
 *
 * The method is llama.cpp's: the text is tokenized once with <bos> in front and cut into
 * len / c chunks of c tokens; each chunk's first token becomes <bos>; the chunk runs through the
 * model from an empty cache (split by -b inside the session) and positions c/2 .. c-2 are
 * scored on the token that follows them, the first half being context. The estimate after each
 * chunk prints as "[1]12.3456,[2]..."; the final line is "Final estimate: PPL = P +/- E",
 * E = P * the standard error of the mean negative log-likelihood. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gemma3.h"
#include "kld.h"

#define PPL_DEFAULT_CTX 512 /* llama-perplexity's default -c */

typedef struct ppl_args {
    const char *file, *tokens, *kld_base;
    int chunks, kl_divergence;
    int n_ctx; /* -c here: this command's own default */
} ppl_args;

#define A(field) offsetof(ppl_args, field)
static const cli_option ppl_options[] = {
    {"-f, --file", "FILE", CLI_TEXT, A(file),
     .help = "the text to score (tokenized with <bos> in front)"},
    {"--tokens", "LIST", CLI_TEXT, A(tokens),
     .help = "comma-separated token ids instead of a text, <bos> first (a checkpoint with no "
             "tokenizer.model)"},
    {"-c, --ctx-size, --ctx", "N", CLI_INT, A(n_ctx), 1, 1 << 24,
     .help = "tokens per chunk (the model group's -c, with llama-perplexity's default)",
     .default_text = "512"},
    {"--chunks", "N", CLI_INT, A(chunks), 1, 1 << 30, .help = "score at most N chunks",
     .default_text = "all"},
    {"--kl-divergence-base", "FILE", CLI_TEXT, A(kld_base),
     .help = "save the scored positions' log-probabilities to FILE (read it with --kl-divergence)"},
    {"--kl-divergence", NULL, CLI_SWITCH, A(kl_divergence), .value = 1,
     .help = "compare this run with the --kl-divergence-base FILE (its tokens unless -f/--tokens)"},
};
#undef A

static const cli_group ppl_group = CLI_GROUP("perplexity", ppl_options);

static const cli_command ppl_command = {
    "usage: gemma3 perplexity -m DIR -f TEXT [-c N] [--chunks N] [options]\n"
    "Perplexity of a text in chunks of -c tokens (default 512), scored on each chunk's second\n"
    "half, as llama-perplexity does; with --kl-divergence-base, save or compare full\n"
    "distributions.\n",
    "perplexity: unknown option '%s' (try gemma3 perplexity --help)",
    {&ppl_group, &cli_model_group, &cli_compat_group, NULL},
};

/* What one run works on: the tokens, the chunking, the model's facts. */
typedef struct ppl_plan {
    int32_t *tokens;
    int n_tokens, n_ctx, n_chunks, vocab, bos;
    const char *source; /* the file or flag the tokens came from, for errors */
} ppl_plan;

/* ---- parsing --------------------------------------------------------------------------------- */

static int check_args(const ppl_args *a, const cli_model_opts *mo) {
    if (!mo->model_dir) return cli_usage_error("perplexity: -m DIR is required");
    if (a->file && a->tokens) return cli_usage_error("perplexity: give -f or --tokens, not both");
    if (a->kl_divergence && !a->kld_base)
        return cli_usage_error("--kl-divergence: needs --kl-divergence-base FILE to compare with");
    if (!a->file && !a->tokens && !a->kl_divergence)
        return cli_usage_error("perplexity: -f FILE (or --tokens) is required");
    return 0;
}

/* -c: the base file's in a comparison, else the flag's or 512; at least 4 so every chunk scores
 * one position (c/2 .. c-2). */
static int choose_ctx(cli_model_opts *mo, const kld_reader *base) {
    if (base && base->f) {
        if (mo->sp.n_ctx && mo->sp.n_ctx != (int)base->h.n_ctx)
            return cli_usage_error("-c: %d differs from the %u the base file '%s' was made with",
                                   mo->sp.n_ctx, base->h.n_ctx, base->path);
        mo->sp.n_ctx = (int)base->h.n_ctx;
    }
    if (!mo->sp.n_ctx) mo->sp.n_ctx = PPL_DEFAULT_CTX;
    if (mo->sp.n_ctx < 4)
        return cli_usage_error("-c: %d is too small for perplexity (at least 4: the first half of "
                               "each chunk is context)", mo->sp.n_ctx);
    return 0;
}

/* ---- the tokens ------------------------------------------------------------------------------ */

static int tokenize_file(const gemma3_model *model, const char *path, const char *dir,
                         int32_t **ids, int *n) {
    const gemma3_tokenizer *tok = gemma3_model_tokenizer(model);
    if (!tok) return cli_fail("-f: '%s' has no tokenizer.model (give --tokens instead)", dir);
    char *text = NULL;
    size_t len = 0;
    if (gemma3_read_file(path, &text, &len) != GEMMA3_OK)
        return cli_fail("-f: %s", gemma3_last_error());
    int rc = 0;
    const int flags = gemma3_tokenizer_add_bos(tok) ? GEMMA3_TOK_BOS : 0;
    int need = gemma3_tokenizer_encode(tok, text, len, flags, NULL, 0);
    if (need < 0) rc = cli_fail("-f: '%s': %s", path, gemma3_last_error());
    else if (!(*ids = malloc(((size_t)need + 1) * sizeof **ids)))
        rc = cli_fail("-f: out of memory for %d tokens", need);
    else
        *n = gemma3_tokenizer_encode(tok, text, len, flags, *ids, need);
    free(text);
    return rc;
}

static int read_tokens(const ppl_args *a, const gemma3_model *model, const char *dir,
                       ppl_plan *p) {
    int rc;
    if (a->file) {
        p->source = a->file;
        return tokenize_file(model, a->file, dir, &p->tokens, &p->n_tokens);
    }
    p->source = "--tokens";
    if ((rc = cli_parse_ids("--tokens", a->tokens, INT32_MAX, &p->tokens, &p->n_tokens))) return rc;
    for (int i = 0; i < p->n_tokens; i++)
        if (p->tokens[i] >= p->vocab)
            return cli_usage_error("--tokens: id %d is out of range [0, %d]", p->tokens[i],
                                   p->vocab - 1);
    return 0;
}

/* len / c chunks, at most --chunks; an empty or one-token text, or one shorter than a chunk,
 * scores nothing. */
static int plan_chunks(ppl_plan *p, int max_chunks) {
    if (p->n_tokens < 2)
        return cli_fail("perplexity: '%s' gives %d token%s (with <bos>); perplexity needs a text",
                        p->source, p->n_tokens, p->n_tokens == 1 ? "" : "s");
    if (p->n_tokens < p->n_ctx)
        return cli_fail("perplexity: '%s' gives %d tokens, fewer than one chunk of -c %d",
                        p->source, p->n_tokens, p->n_ctx);
    p->n_chunks = p->n_tokens / p->n_ctx;
    if (max_chunks && max_chunks < p->n_chunks) p->n_chunks = max_chunks;
    return 0;
}

/* A comparison scores the base file's chunks (at most --chunks) on its tokens; a text given too
 * must be the one the base was made from. */
static int match_base(ppl_plan *p, const kld_reader *base, int32_t *base_tokens, int max_chunks,
                      const gemma3_model_info *info) {
    if ((int)base->h.vocab != p->vocab)
        return cli_fail("--kl-divergence-base: '%s' was made with a vocabulary of %u, this model "
                        "has %d", base->path, base->h.vocab, p->vocab);
    if (base->h.fingerprint != kld_fingerprint(info))
        fprintf(stderr, "gemma3: note: '%s' was made with a model of another shape\n", base->path);
    int n_chunks = (int)base->h.n_chunks;
    if (max_chunks && max_chunks < n_chunks) n_chunks = max_chunks;
    size_t n = (size_t)n_chunks * (size_t)p->n_ctx;
    if (p->tokens) {
        size_t i = 0;
        while (i < n && i < (size_t)p->n_tokens && p->tokens[i] == base_tokens[i]) i++;
        if (i < n)
            return cli_fail("--kl-divergence-base: '%s' was made from other tokens than '%s' "
                            "(they differ at token %zu)", base->path, p->source, i);
        free(p->tokens);
    }
    p->tokens = base_tokens;
    p->n_tokens = (int)n;
    p->n_chunks = n_chunks;
    return 0;
}

/* ---- the run --------------------------------------------------------------------------------- */

typedef struct ppl_run {
    gemma3_session *s;
    int full_rows;     /* a KL-divergence run: the scored half's whole distributions */
    float *logits;     /* [n_ctx - n_ctx/2][vocab]: the logits of a chunk's scored half */
    float *rows;       /* [rows per chunk][vocab]: the log-probs saved or read */
    double *nll_rows;  /* [rows per chunk]: each scored position's negative log-likelihood */
    double nll, nll2;  /* sums over the scored positions */
    long count;
    int chunks_done;   /* all of them, or those before a Ctrl-C */
    double t_forward, t_score;
} ppl_run;

static int alloc_run(ppl_run *r, const ppl_plan *p) {
    size_t V = (size_t)p->vocab, per = (size_t)kld_rows_per_chunk(p->n_ctx);
    r->nll_rows = malloc(per * sizeof *r->nll_rows);
    if (r->full_rows) {
        r->logits = malloc((size_t)(p->n_ctx - p->n_ctx / 2) * V * sizeof *r->logits);
        r->rows = malloc(per * V * sizeof *r->rows);
    }
    if (r->nll_rows && (!r->full_rows || (r->logits && r->rows))) return 0;
    return cli_fail("perplexity: out of memory for %d x %d logits", p->n_ctx, p->vocab);
}

/* One chunk through the model in one call: a fresh cache, <bos> first. The LM head runs only
 * for the scored half, as llama-perplexity asks only for those outputs; the outputs are the same bytes whatever the batch split. A plain run
 * asks the session for the scored tokens' log-probabilities alone (the logits never leave the
 * cache), which also spares the last token: nothing is scored on what follows it. */
static int forward_chunk(ppl_run *r, const ppl_plan *p, int chunk, int32_t *buf) {
    int first = p->n_ctx / 2, n_rows = p->n_ctx - 1 - first;
    memcpy(buf, p->tokens + (size_t)chunk * p->n_ctx, (size_t)p->n_ctx * sizeof *buf);
    buf[0] = p->bos;
    gemma3_session_reset(r->s);
    double t0 = cli_now();
    int rc = r->full_rows
                 ? gemma3_session_forward_last(r->s, buf, p->n_ctx, p->n_ctx - first, r->logits)
                 : gemma3_session_forward_logprob(r->s, buf, p->n_ctx - 1, n_rows, buf + first + 1,
                                                  r->nll_rows);
    if (rc == GEMMA3_ERR_ABORTED && cli_interrupted()) return CLI_EXIT_INTERRUPTED;
    if (rc != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    if (!r->full_rows)
        for (int i = 0; i < n_rows; i++) r->nll_rows[i] = -r->nll_rows[i];
    r->t_forward += cli_now() - t0;
    return 0;
}

/* Rows of a chunk's scored half, shared out on the pool: each thread takes every nth row, so a
 * row's numbers do not depend on the thread count; the sums over rows are then taken in order. */
typedef struct score_job {
    float *logits;       /* [rows][V]; replaced by the log-probs in place when `in_place` */
    float *out;          /* [rows][V] log-probs to keep (a base file's rows), or NULL */
    const int32_t *next; /* [rows] the token each row is scored on */
    double *nll;         /* [rows] out */
    size_t V;
    int n_rows, in_place;
} score_job;

static void score_rows(void *ctx, int ith, int nth) {
    const score_job *j = ctx;
    for (int i = ith; i < j->n_rows; i += nth) {
        float *row = j->logits + (size_t)i * j->V;
        float target = row[j->next[i]]; /* read before an in-place log-softmax */
        float *out = j->out ? j->out + (size_t)i * j->V : j->in_place ? row : NULL;
        j->nll[i] = kld_log_softmax(row, (int)j->V, out) - target;
    }
}

/* Scores positions c/2 .. c-2 of the chunk: each one's negative log-likelihood of the token that
 * follows; with `save`, the full log-prob rows go to r->rows; with `base`, this run's log-probs
 * (made in place of the logits) are compared with the base's rows (already in r->rows). */
static void score_chunk(ppl_run *r, const ppl_plan *p, int chunk, int save, kld_stats *base) {
    const int32_t *t = p->tokens + (size_t)chunk * p->n_ctx;
    size_t V = (size_t)p->vocab;
    int first = p->n_ctx / 2, n_rows = p->n_ctx - 1 - first;
    double t0 = cli_now();
    score_job job = {.logits = r->logits, .out = save ? r->rows : NULL, .next = t + first + 1,
                     .nll = r->nll_rows, .V = V, .n_rows = n_rows, .in_place = base != NULL};
    if (r->full_rows) gemma3_session_parallel(r->s, score_rows, &job);
    for (int i = 0; i < n_rows; i++) {
        r->nll += r->nll_rows[i];
        r->nll2 += r->nll_rows[i] * r->nll_rows[i];
        r->count++;
        if (base) kld_stats_add(base, r->logits + (size_t)i * V, r->rows + (size_t)i * V,
                                p->vocab, job.next[i]);
    }
    r->t_score += cli_now() - t0;
}

/* llama.cpp's final line: PPL = exp(mean nll), +/- PPL times the standard error of that mean;
 * what = "Final estimate", or what the estimate covers when a Ctrl-C cut the run short. */
static void print_final(const ppl_run *r, const char *what) {
    double mean = r->nll / (double)r->count, ppl = exp(mean);
    double var = r->nll2 / (double)r->count - mean * mean;
    if (r->count > 1 && var > 0)
        printf("%s: PPL = %.4f +/- %.5f\n", what, ppl, ppl * sqrt(var / (double)(r->count - 1)));
    else
        printf("%s: PPL = %.4f +/- nan (too few positions for an error)\n", what, ppl);
}

static void print_progress(const ppl_plan *p, int chunk, double t_chunk) {
    if (chunk == 0)
        fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, %d scored positions each; "
                        "%.2f seconds per pass - ETA %.2f minutes\n",
                p->n_tokens, p->n_chunks, p->n_ctx, kld_rows_per_chunk(p->n_ctx), t_chunk,
                t_chunk * (p->n_chunks - 1) / 60.0);
}

static int run_chunks(ppl_run *r, const ppl_plan *p, kld_writer *save, kld_reader *base,
                      kld_stats *stats) {
    size_t row_floats = (size_t)kld_rows_per_chunk(p->n_ctx) * (size_t)p->vocab;
    int32_t *buf = malloc((size_t)p->n_ctx * sizeof *buf);
    if (!buf) return cli_fail("perplexity: out of memory");
    int rc = 0;
    if (stats) kld_stats_print_chunk_header(stdout);
    for (int c = 0; c < p->n_chunks && !rc; c++) {
        double t0 = cli_now();
        if (cli_interrupted()) rc = CLI_EXIT_INTERRUPTED;
        if (rc || (rc = forward_chunk(r, p, c, buf))) break;
        if (base && (rc = kld_read_rows(base, r->rows, row_floats))) break;
        score_chunk(r, p, c, save != NULL, stats);
        if (save && (rc = kld_write_rows(save, r->rows, row_floats))) break;
        if (stats) kld_stats_print_chunk(stats, c + 1, stdout);
        else printf("[%d]%.4f,", c + 1, exp(r->nll / (double)r->count));
        fflush(stdout);
        r->chunks_done = c + 1;
        print_progress(p, c, cli_now() - t0);
    }
    if (!stats && (!rc || (rc == CLI_EXIT_INTERRUPTED && r->chunks_done))) printf("\n");
    free(buf);
    return rc;
}

/* ---- the command ----------------------------------------------------------------------------- */

static int open_session(const gemma3_model *model, const cli_model_opts *mo, ppl_run *r) {
    if (gemma3_session_init(model, &mo->sp, &r->s) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    return 0;
}

/* After a Ctrl-C: what the numbers printed cover, and that a base file was not written. */
static void report_interrupt(const ppl_run *r, const ppl_plan *p, const ppl_args *a) {
    char note[600] = "";
    if (a->kld_base && !a->kl_divergence)
        snprintf(note, sizeof note, "; '%s' not written (a base file holds every chunk)", a->kld_base);
    fprintf(stderr, "gemma3: perplexity: interrupted after %d of %d chunks%s%s\n", r->chunks_done,
            p->n_chunks, r->chunks_done ? ", the figures above cover those" : "", note);
}

/* The estimate so far: the whole text's, or the chunks scored before a Ctrl-C. */
static void print_estimate(const ppl_run *r, const ppl_plan *p, int rc) {
    char what[96];
    snprintf(what, sizeof what, "Estimate over the first %d of %d chunks (interrupted)", r->chunks_done,
             p->n_chunks);
    if (!rc) print_final(r, "Final estimate");
    else if (rc == CLI_EXIT_INTERRUPTED && r->chunks_done) print_final(r, what);
}

/* Saves (or compares with) the base file around the chunk loop. */
static int run_and_report(ppl_run *r, const ppl_plan *p, const ppl_args *a, kld_reader *base,
                          const gemma3_model_info *info) {
    int rc;
    if (a->kl_divergence) {
        kld_stats stats;
        if (kld_stats_init(&stats, (size_t)p->n_chunks * kld_rows_per_chunk(p->n_ctx)))
            return cli_fail("perplexity: out of memory");
        rc = run_chunks(r, p, NULL, base, &stats);
        if (!rc || (rc == CLI_EXIT_INTERRUPTED && r->chunks_done)) {
            printf("\n");
            kld_stats_print(&stats, stdout);
        }
        kld_stats_free(&stats);
        if (rc == CLI_EXIT_INTERRUPTED) report_interrupt(r, p, a);
        return rc;
    }
    kld_writer w = {0};
    if (a->kld_base) {
        kld_header h = {KLD_VERSION, (uint32_t)p->vocab, (uint32_t)p->n_ctx, (uint32_t)p->n_chunks,
                        (uint64_t)p->n_ctx * (uint64_t)p->n_chunks, kld_fingerprint(info)};
        if ((rc = kld_write_open(&w, a->kld_base, &h, p->tokens))) return rc;
    }
    rc = run_chunks(r, p, a->kld_base ? &w : NULL, NULL, NULL);
    if (a->kld_base) {
        int rc2 = kld_write_close(&w, rc == 0); /* interrupted: discarded, nothing left behind */
        if (!rc) rc = rc2;
    }
    print_estimate(r, p, rc);
    if (rc == CLI_EXIT_INTERRUPTED) report_interrupt(r, p, a);
    return rc;
}

static void print_verbose(const ppl_run *r, const cli_model_opts *mo) {
    fprintf(stderr,
            "perplexity: isa %s, threads %d, mode %s, kv %s, forward %.3f s, scoring %.3f s\n",
            gemma3_session_isa(r->s), gemma3_session_n_threads(r->s),
            mo->sp.exact ? "exact" : "default",
            mo->sp.exact || mo->sp.kv_type == GEMMA3_KV_F32 ? "f32" : "bf16", r->t_forward,
            r->t_score);
}

int cmd_perplexity(int argc, char **argv) {
    ppl_args a = {0};
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    void *const dst[] = {&a, &mo, &mo};
    int rc;
    if (cli_parse(&ppl_command, argc, argv, dst, &rc)) return rc;
    mo.sp.n_ctx = a.n_ctx;
    if ((rc = check_args(&a, &mo))) return rc;

    kld_reader base = {0};
    int32_t *base_tokens = NULL;
    gemma3_model *model = NULL;
    ppl_plan p = {0};
    ppl_run r = {0};
    gemma3_model_info info;
    if (a.kl_divergence && (rc = kld_read_open(&base, a.kld_base, &base_tokens))) return rc;
    if ((rc = choose_ctx(&mo, a.kl_divergence ? &base : NULL))) goto done;
    if ((rc = cli_model_load(&mo, &model))) goto done;
    gemma3_model_get_info(model, &info);
    if ((rc = cli_check_ctx(&mo, &info))) goto done;
    p.n_ctx = mo.sp.n_ctx;
    p.vocab = info.vocab_size;
    p.bos = info.bos_id;
    if ((a.file || a.tokens) && (rc = read_tokens(&a, model, mo.model_dir, &p))) goto done;
    if (a.kl_divergence) {
        if ((rc = match_base(&p, &base, base_tokens, a.chunks, &info))) goto done;
        base_tokens = NULL; /* owned by p now */
    } else if ((rc = plan_chunks(&p, a.chunks))) {
        goto done;
    }
    r.full_rows = a.kld_base != NULL;
    if ((rc = alloc_run(&r, &p)) || (rc = open_session(model, &mo, &r))) goto done;
    cli_interrupt_catch(); /* Ctrl-C: stop at the next chunk or layer, report what was scored */
    cli_interrupt_watch(r.s);
    rc = run_and_report(&r, &p, &a, &base, &info);
    if (!rc && mo.verbose) print_verbose(&r, &mo);
done:
    kld_read_close(&base);
    free(base_tokens);
    free(p.tokens);
    free(r.logits);
    free(r.rows);
    free(r.nll_rows);
    gemma3_session_free(r.s);
    gemma3_model_free(model);
    return rc;
}
