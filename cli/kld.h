/* cli/kld.h - what gemma3 perplexity needs beyond the model: the base file of
 * --kl-divergence-base and the statistics that compare a run with it (llama-perplexity's method).
 *
 * Base file, version 1 (integers and floats little-endian as the host writes them):
 *
 *   offset  size        field
 *        0  8           magic "G3KLBASE"
 *        8  u32         version (1)
 *       12  u32         vocab_size V
 *       16  u32         n_ctx c (tokens per chunk)
 *       20  u32         n_chunks
 *       24  u64         n_tokens = n_ctx * n_chunks (the token count, checked against both)
 *       32  u64         model fingerprint (FNV-1a of the model's shape: see kld_fingerprint)
 *       40  i32[n_tokens]  the evaluated token ids as tokenized (chunk heads not yet <bos>)
 *      ...  f32[n_chunks * (c - 1 - c/2)][V]  the natural-log probabilities of every vocabulary
 *                    entry at each scored position (c/2 .. c-2 of each chunk), in order
 *
 * Full float32 rows, not llama.cpp's 16-bit quantized ones nor top-k logits: a row is 1 MiB at
 * Gemma's 262,144 entries, which is fine for the few hundred positions a quantization check
 * needs (-c 512 --chunks 4: 1020 rows, 1 GiB), and it keeps the divergence exact: a run compared
 * with its own file gives KL exactly 0 rather than a rounding floor. The reader checks the file
 * size against the header before reading anything past it. */
#ifndef G3_CLI_KLD_H
#define G3_CLI_KLD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gemma3.h"

#define KLD_MAGIC "G3KLBASE"
#define KLD_VERSION 1u
#define KLD_HEADER_BYTES 40

typedef struct kld_header {
    uint32_t version, vocab, n_ctx, n_chunks;
    uint64_t n_tokens, fingerprint;
} kld_header;

/* Scored positions per chunk of c tokens: c/2 .. c-2. */
static inline int kld_rows_per_chunk(int n_ctx) { return n_ctx - 1 - n_ctx / 2; }

/* FNV-1a over the model's shape (architecture, vocabulary, sizes, layers, heads, window, context):
 * the same for a checkpoint and its quantized copies, different for another model. */
uint64_t kld_fingerprint(const gemma3_model_info *info);

/* Writing (through gemma3_outfile: a temporary renamed over a regular PATH, a device or FIFO
 * written directly): kld_write_open writes the header and tokens; rows are appended with
 * kld_write_rows; kld_write_close commits (keep = 1) or discards the file. Each
 * returns 0 or the exit status after printing one line naming the flag and file. */
typedef struct kld_writer {
    gemma3_outfile *out;
    FILE *f; /* its stream */
    const char *path;
} kld_writer;
int kld_write_open(kld_writer *w, const char *path, const kld_header *h, const int32_t *tokens);
int kld_write_rows(kld_writer *w, const float *rows, size_t n_floats);
int kld_write_close(kld_writer *w, int keep);

/* Reading: kld_read_open checks the magic, version, header consistency and that the file size is
 * exactly what the header describes, then reads the tokens (*tokens malloc'd, caller frees).
 * kld_read_rows reads the next n_floats floats (whole rows), each checked to be a row of
 * log-probabilities (finite, <= 0, summing to 1 within rounding): a damaged file is an error
 * naming the row, never a NaN or a wrong divergence. */
typedef struct kld_reader {
    FILE *f;
    const char *path;
    kld_header h;
    size_t rows_read; /* for messages */
} kld_reader;
int kld_read_open(kld_reader *r, const char *path, int32_t **tokens);
int kld_read_rows(kld_reader *r, float *rows, size_t n_floats);
void kld_read_close(kld_reader *r);

/* The natural-log softmax of one logits row, in double, rounded to float into out; returns
 * log(sum(exp(logits))) (so a token's negative log-likelihood is the return minus its logit). */
double kld_log_softmax(const float *logits, int n_vocab, float *out);

/* The comparison's running sums and per-position values (llama-perplexity's set). */
typedef struct kld_stats {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_dp, sum_dp2, sum_dp4;
    size_t n_same_top, count, cap;
    float *kld, *dp; /* [cap]: KL divergence and p - p_base of the correct token, per position */
} kld_stats;
/* cap: the number of positions that will be added. Returns 0 or -1 (out of memory). */
int kld_stats_init(kld_stats *s, size_t cap);
void kld_stats_free(kld_stats *s);
/* One scored position: the run's log-probs lq and the base's lp over n_vocab entries, the
 * correct next token tok. */
void kld_stats_add(kld_stats *s, const float *lq, const float *lp, int n_vocab, int tok);
/* One line per chunk: PPL, ln(PPL(Q)/PPL(base)), KL divergence, RMS of dp, same top, so far. */
void kld_stats_print_chunk_header(FILE *f);
void kld_stats_print_chunk(const kld_stats *s, int chunk, FILE *f);
/* The final perplexity, KL divergence and token probability statistics, in llama.cpp's words. */
void kld_stats_print(kld_stats *s, FILE *f);

#endif
