/* cli/kld.c - the --kl-divergence-base file (format in kld.h) and the statistics that compare a
 * run with it: the same quantities and uncertainty formulas as llama-perplexity. */
#include "kld.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define FLAG "--kl-divergence-base"

/* ---- fingerprint ----------------------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

uint64_t kld_fingerprint(const gemma3_model_info *info) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, info->architecture, strlen(info->architecture));
    const int32_t shape[] = {info->vocab_size,  info->hidden_size, info->intermediate_size,
                             info->n_layers,    info->n_heads,     info->n_kv_heads,
                             info->head_dim,    info->sliding_window,
                             info->max_position_embeddings};
    return fnv1a(h, shape, sizeof shape);
}

/* ---- writing --------------------------------------------------------------------------------- */

static void put_header(unsigned char *b, const kld_header *h) {
    memcpy(b, KLD_MAGIC, 8);
    memcpy(b + 8, &h->version, 4);
    memcpy(b + 12, &h->vocab, 4);
    memcpy(b + 16, &h->n_ctx, 4);
    memcpy(b + 20, &h->n_chunks, 4);
    memcpy(b + 24, &h->n_tokens, 8);
    memcpy(b + 32, &h->fingerprint, 8);
}

int kld_write_open(kld_writer *w, const char *path, const kld_header *h, const int32_t *tokens) {
    w->path = path;
    w->f = NULL;
    if (gemma3_outfile_open(path, &w->out) != GEMMA3_OK) return cli_fail(FLAG ": %s", gemma3_last_error());
    w->f = gemma3_outfile_stream(w->out);
    unsigned char b[KLD_HEADER_BYTES];
    put_header(b, h);
    if (fwrite(b, 1, sizeof b, w->f) != sizeof b ||
        fwrite(tokens, sizeof *tokens, h->n_tokens, w->f) != h->n_tokens) {
        kld_write_close(w, 0);
        return cli_fail(FLAG ": cannot write '%s': %s", path, strerror(errno));
    }
    return 0;
}

int kld_write_rows(kld_writer *w, const float *rows, size_t n_floats) {
    if (fwrite(rows, sizeof *rows, n_floats, w->f) == n_floats) return 0;
    int err = errno;
    kld_write_close(w, 0);
    return cli_fail(FLAG ": cannot write '%s': %s", w->path, strerror(err));
}

int kld_write_close(kld_writer *w, int keep) {
    if (!w->f) return 0;
    w->f = NULL;
    if (!keep) {
        gemma3_outfile_discard(w->out);
        return 0;
    }
    return gemma3_outfile_commit(w->out) == GEMMA3_OK ? 0 : cli_fail(FLAG ": %s", gemma3_last_error());
}

/* ---- reading --------------------------------------------------------------------------------- */

static void get_header(const unsigned char *b, kld_header *h) {
    memcpy(&h->version, b + 8, 4);
    memcpy(&h->vocab, b + 12, 4);
    memcpy(&h->n_ctx, b + 16, 4);
    memcpy(&h->n_chunks, b + 20, 4);
    memcpy(&h->n_tokens, b + 24, 8);
    memcpy(&h->fingerprint, b + 32, 8);
}

/* The exact size the header describes, or 0 when its fields are inconsistent or overflow. */
static uint64_t expected_size(const kld_header *h) {
    if (h->vocab == 0 || h->n_ctx < 4 || h->n_chunks == 0 || h->n_ctx > (1u << 24) ||
        h->n_tokens != (uint64_t)h->n_ctx * h->n_chunks)
        return 0;
    uint64_t rows = (uint64_t)h->n_chunks * (uint64_t)kld_rows_per_chunk((int)h->n_ctx);
    if (rows > UINT64_MAX / 4 / h->vocab) return 0;
    uint64_t row_bytes = rows * h->vocab * 4, tok_bytes = h->n_tokens * 4;
    if (row_bytes > UINT64_MAX - KLD_HEADER_BYTES - tok_bytes) return 0;
    return KLD_HEADER_BYTES + tok_bytes + row_bytes;
}

static int check_header(const kld_reader *r, const unsigned char *b, uint64_t size) {
    if (memcmp(b, KLD_MAGIC, 8) != 0)
        return cli_fail(FLAG ": '%s' is not a gemma3 KL-divergence base file (no " KLD_MAGIC
                        " magic)", r->path);
    if (r->h.version != KLD_VERSION)
        return cli_fail(FLAG ": '%s' has format version %u; this gemma3 reads version %u", r->path,
                        r->h.version, KLD_VERSION);
    uint64_t want = expected_size(&r->h);
    if (want == 0)
        return cli_fail(FLAG ": '%s' has an inconsistent header (vocab %u, n_ctx %u, chunks %u, "
                        "tokens %llu)", r->path, r->h.vocab, r->h.n_ctx, r->h.n_chunks,
                        (unsigned long long)r->h.n_tokens);
    if (size != want)
        return cli_fail(FLAG ": '%s' is %s: %llu bytes, its header describes %llu", r->path,
                        size < want ? "truncated" : "longer than its header says",
                        (unsigned long long)size, (unsigned long long)want);
    return 0;
}

int kld_read_open(kld_reader *r, const char *path, int32_t **tokens) {
    memset(r, 0, sizeof *r);
    r->path = path;
    *tokens = NULL;
    struct stat st;
    /* O_NONBLOCK: a FIFO is refused below, not waited on in open() for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0 && !(r->f = fdopen(fd, "rb"))) close(fd);
    if (!r->f || fstat(fileno(r->f), &st) != 0) {
        int rc = cli_fail(FLAG ": cannot open '%s': %s", path, strerror(errno));
        kld_read_close(r);
        return rc;
    }
    unsigned char b[KLD_HEADER_BYTES];
    int rc = 0;
    /* read by its size, checked against the header: a directory or a stream cannot be */
    if (!S_ISREG(st.st_mode))
        rc = cli_fail(FLAG ": '%s' is %s, not a file written by --kl-divergence-base", path,
                      S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    else if ((uint64_t)st.st_size < KLD_HEADER_BYTES || fread(b, 1, sizeof b, r->f) != sizeof b)
        rc = cli_fail(FLAG ": '%s' is truncated: %lld bytes, shorter than the %d-byte header",
                      path, (long long)st.st_size, KLD_HEADER_BYTES);
    if (!rc) {
        get_header(b, &r->h);
        rc = check_header(r, b, (uint64_t)st.st_size);
    }
    if (!rc && !(*tokens = malloc(r->h.n_tokens * sizeof **tokens)))
        rc = cli_fail(FLAG ": out of memory for %llu tokens", (unsigned long long)r->h.n_tokens);
    if (!rc && fread(*tokens, sizeof **tokens, r->h.n_tokens, r->f) != r->h.n_tokens)
        rc = cli_fail(FLAG ": cannot read the tokens of '%s'", path);
    if (rc) {
        free(*tokens);
        *tokens = NULL;
        kld_read_close(r);
    }
    return rc;
}

/* Whether a row of log-probabilities is one: every value finite and <= 0 (a log-softmax rounded
 * to float never exceeds 0), and the probabilities summing to 1 within rounding (float
 * log-probabilities are good to ~1e-7 relative; a row scaled or edited by hand is far off).
 * Returns 0 or the exit status after the error line naming the row. */
#define KLD_ROW_SUM_TOL 1e-3
static int check_row(const kld_reader *r, const float *row, size_t index) {
    double sum = 0.0;
    for (uint32_t i = 0; i < r->h.vocab; i++) {
        if (!(row[i] <= 0.0f) || isinf(row[i]))
            return cli_fail(FLAG ": '%s' row %zu entry %u is %g: not a log-probability", r->path,
                            index, i, (double)row[i]);
        sum += exp((double)row[i]);
    }
    if (fabs(sum - 1.0) > KLD_ROW_SUM_TOL)
        return cli_fail(FLAG ": '%s' row %zu is not a distribution: its probabilities sum to %.6g",
                        r->path, index, sum);
    return 0;
}

int kld_read_rows(kld_reader *r, float *rows, size_t n_floats) {
    if (fread(rows, sizeof *rows, n_floats, r->f) != n_floats)
        return cli_fail(FLAG ": cannot read the log-probabilities of '%s'", r->path);
    for (size_t at = 0; at + r->h.vocab <= n_floats; at += r->h.vocab) {
        int rc = check_row(r, rows + at, r->rows_read++);
        if (rc) return rc;
    }
    return 0;
}

void kld_read_close(kld_reader *r) {
    if (r->f) fclose(r->f);
    r->f = NULL;
}

/* ---- log-softmax ----------------------------------------------------------------------------- */

double kld_log_softmax(const float *logits, int n_vocab, float *out) {
    /* the table of --isa / GEMMA3_ISA (the sum in double whichever), as the session's own
     * scoring: a plain run and one saving its base file give the same bytes at every level */
    double lse = gemma3_log_sum_exp(logits, n_vocab);
    if (out)
        for (int i = 0; i < n_vocab; i++) out[i] = (float)((double)logits[i] - lse);
    return lse;
}

/* ---- statistics ------------------------------------------------------------------------------ */

int kld_stats_init(kld_stats *s, size_t cap) {
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->kld = malloc((cap ? cap : 1) * sizeof *s->kld);
    s->dp = malloc((cap ? cap : 1) * sizeof *s->dp);
    if (s->kld && s->dp) return 0;
    kld_stats_free(s);
    return -1;
}

void kld_stats_free(kld_stats *s) {
    free(s->kld);
    free(s->dp);
    s->kld = s->dp = NULL;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void kld_stats_add(kld_stats *s, const float *lq, const float *lp, int n_vocab, int tok) {
    double kl = 0;
    for (int i = 0; i < n_vocab; i++) kl += exp((double)lp[i]) * ((double)lp[i] - lq[i]);
    double nll = -(double)lq[tok], nll_base = -(double)lp[tok];
    double dp = exp(-nll) - exp(-nll_base);
    s->sum_nll += nll;
    s->sum_nll2 += nll * nll;
    s->sum_nll_base += nll_base;
    s->sum_nll_base2 += nll_base * nll_base;
    s->sum_nll_nll_base += nll * nll_base;
    s->sum_kld += kl;
    s->sum_kld2 += kl * kl;
    s->sum_dp += dp;
    s->sum_dp2 += dp * dp;
    s->sum_dp4 += dp * dp * dp * dp;
    s->n_same_top += argmax(lq, n_vocab) == argmax(lp, n_vocab);
    if (s->count < s->cap) {
        s->kld[s->count] = (float)kl;
        s->dp[s->count] = (float)dp;
    }
    s->count++;
}

/* A mean and its standard error; the error is left 0 with 10 values or fewer (llama.cpp's rule:
 * too few to estimate a spread). */
typedef struct mean_err {
    double mean, err;
} mean_err;

static mean_err mean_and_error(double sum, double sum2, size_t n) {
    mean_err m = {0, 0};
    if (n < 1) return m;
    m.mean = sum / (double)n;
    double var = sum2 / (double)n - m.mean * m.mean;
    m.err = var > 0 && n > 10 ? sqrt(var / (double)(n - 1)) : 0;
    return m;
}

static double covariance(double a, double b, double ab, size_t n) {
    if (n < 10) return 0;
    return (ab / (double)n - (a / (double)n) * (b / (double)n)) / (double)(n - 1);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Linear interpolation between the two nearest ranks of sorted v. */
static double percentile(const float *v, size_t n, double fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    double p = fraction * (double)(n - 1);
    size_t i = (size_t)p;
    p -= (double)i;
    return (1 - p) * v[i] + p * v[i + 1 < n ? i + 1 : n - 1];
}

static double median(const float *v, size_t n) {
    return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2] + v[n / 2 - 1]);
}

/* ln(PPL(Q)/PPL(base)) with its error, the covariance of the two log-perplexities counted. */
static mean_err log_ppl_ratio(mean_err q, mean_err base, double cov) {
    mean_err r = {q.mean - base.mean, 0};
    double var = q.err * q.err + base.err * base.err - 2 * cov;
    r.err = var > 0 ? sqrt(var) : 0;
    return r;
}

static mean_err rms_dp(const kld_stats *s) {
    mean_err mse = mean_and_error(s->sum_dp2, s->sum_dp4, s->count);
    mean_err r = {sqrt(mse.mean), 0};
    r.err = r.mean > 0 ? 0.5 / r.mean * mse.err : 0;
    return r;
}

static mean_err same_top(const kld_stats *s) {
    mean_err r = {(double)s->n_same_top / (double)s->count, 0};
    r.err = s->count > 1 ? sqrt(r.mean * (1 - r.mean) / (double)(s->count - 1)) : 0;
    return r;
}

void kld_stats_print_chunk_header(FILE *f) {
    fprintf(f, "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence  "
               "            Δp RMS            Same top p\n");
}

void kld_stats_print_chunk(const kld_stats *s, int chunk, FILE *f) {
    mean_err q = mean_and_error(s->sum_nll, s->sum_nll2, s->count);
    mean_err b = mean_and_error(s->sum_nll_base, s->sum_nll_base2, s->count);
    double cov = covariance(s->sum_nll, s->sum_nll_base, s->sum_nll_nll_base, s->count);
    mean_err ratio = log_ppl_ratio(q, b, cov);
    mean_err kl = mean_and_error(s->sum_kld, s->sum_kld2, s->count);
    mean_err rms = rms_dp(s), top = same_top(s);
    fprintf(f, "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%"
               "    %6.3f ± %6.3f %%\n",
            chunk, exp(q.mean), exp(q.mean) * q.err, ratio.mean, ratio.err, kl.mean, kl.err,
            100 * rms.mean, 100 * rms.err, 100 * top.mean, 100 * top.err);
}

static void print_ppl_stats(const kld_stats *s, FILE *f) {
    mean_err q = mean_and_error(s->sum_nll, s->sum_nll2, s->count);
    mean_err b = mean_and_error(s->sum_nll_base, s->sum_nll_base2, s->count);
    double cov = covariance(s->sum_nll, s->sum_nll_base, s->sum_nll_nll_base, s->count);
    double ppl = exp(q.mean), ppl_base = exp(b.mean);
    double ppl_err = ppl * q.err, base_err = ppl_base * b.err;
    mean_err ratio = log_ppl_ratio(q, b, cov);
    double cor = q.err > 0 && b.err > 0 ? cov / (q.err * b.err) : 0;
    double diff_var = ppl_err * ppl_err + base_err * base_err - 2 * ppl * ppl_base * cov;
    fprintf(f, "====== Perplexity statistics ======\n");
    fprintf(f, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl_err);
    fprintf(f, "Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_base, base_err);
    fprintf(f, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * cor);
    fprintf(f, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", ratio.mean, ratio.err);
    fprintf(f, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(ratio.mean),
            exp(ratio.mean) * ratio.err);
    fprintf(f, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", ppl - ppl_base,
            diff_var > 0 ? sqrt(diff_var) : 0);
}

static void print_kld_stats(const kld_stats *s, const float *v, size_t n, FILE *f) {
    mean_err kl = mean_and_error(s->sum_kld, s->sum_kld2, s->count);
    fprintf(f, "====== KL divergence statistics ======\n");
    fprintf(f, "Mean    KLD: %10.6f ± %10.6f\n", kl.mean, kl.err);
    fprintf(f, "Maximum KLD: %10.6f\n", v[n - 1]);
    fprintf(f, "99.9%%   KLD: %10.6f\n", percentile(v, n, 0.999));
    fprintf(f, "99.0%%   KLD: %10.6f\n", percentile(v, n, 0.990));
    fprintf(f, "95.0%%   KLD: %10.6f\n", percentile(v, n, 0.950));
    fprintf(f, "90.0%%   KLD: %10.6f\n", percentile(v, n, 0.900));
    fprintf(f, "Median  KLD: %10.6f\n", median(v, n));
    fprintf(f, "10.0%%   KLD: %10.6f\n", percentile(v, n, 0.100));
    fprintf(f, " 5.0%%   KLD: %10.6f\n", percentile(v, n, 0.050));
    fprintf(f, " 1.0%%   KLD: %10.6f\n", percentile(v, n, 0.010));
    fprintf(f, " 0.1%%   KLD: %10.6f\n", percentile(v, n, 0.001));
    fprintf(f, "Minimum KLD: %10.6f\n\n", v[0]);
}

static void print_dp_stats(const kld_stats *s, const float *v, size_t n, FILE *f) {
    static const struct {
        const char *label;
        double q;
    } rows[] = {{"99.9%   Δp", 0.999}, {"99.0%   Δp", 0.990}, {"95.0%   Δp", 0.950},
                {"90.0%   Δp", 0.900}, {"75.0%   Δp", 0.750}, {"Median  Δp", -1},
                {"25.0%   Δp", 0.250}, {"10.0%   Δp", 0.100}, {" 5.0%   Δp", 0.050},
                {" 1.0%   Δp", 0.010}, {" 0.1%   Δp", 0.001}};
    mean_err dp = mean_and_error(s->sum_dp, s->sum_dp2, s->count);
    fprintf(f, "====== Token probability statistics ======\n");
    fprintf(f, "Mean    Δp: %6.3f ± %5.3f %%\n", 100 * dp.mean, 100 * dp.err);
    fprintf(f, "Maximum Δp: %6.3f%%\n", 100.0 * v[n - 1]);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        fprintf(f, "%s: %6.3f%%\n", rows[i].label,
                100 * (rows[i].q < 0 ? median(v, n) : percentile(v, n, rows[i].q)));
    fprintf(f, "Minimum Δp: %6.3f%%\n", 100.0 * v[0]);
    mean_err rms = rms_dp(s), top = same_top(s);
    fprintf(f, "RMS Δp    : %6.3f ± %5.3f %%\n", 100 * rms.mean, 100 * rms.err);
    fprintf(f, "Same top p: %6.3f ± %5.3f %%\n", 100 * top.mean, 100 * top.err);
}

void kld_stats_print(kld_stats *s, FILE *f) {
    size_t n = s->count < s->cap ? s->count : s->cap;
    if (n == 0) return;
    qsort(s->kld, n, sizeof *s->kld, cmp_float);
    qsort(s->dp, n, sizeof *s->dp, cmp_float);
    print_ppl_stats(s, f);
    print_kld_stats(s, s->kld, n, f);
    print_dp_stats(s, s->dp, n, f);
}
