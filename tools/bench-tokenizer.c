/* bench-tokenizer.c - tokenizer load time and single-thread encode throughput (make bench).
 *
 * The text is >= 10 MB built in memory from the public reference cases (~50 languages, code,
 * whitespace runs, emoji, byte-fallback characters), concatenated in a deterministic shuffled
 * order with newlines between them, and encoded in one call. Best of 3 runs (wall clock; the
 * process CPU time is printed too, since the build machine may be shared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemma3.h"
#include "cli/jsonl.h"
#include "util.h"

#define MODEL_PATH "models/tokenizer.model"
#define CASES_PATH "tests/data/tokenizer/public-cases.jsonl"
#define TARGET_BYTES (10u << 20)

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The case texts, in file order. */
static int load_texts(char ***texts, size_t **lens) {
    char *data;
    size_t size;
    if (g3_read_file(CASES_PATH, &data, &size) != GEMMA3_OK) return -1;
    int n = 0, cap = 2048;
    *texts = malloc(cap * sizeof **texts);
    *lens = malloc(cap * sizeof **lens);
    for (char *line = data; line < data + size;) {
        char *nl = memchr(line, '\n', (size_t)(data + size - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(data + size - line);
        char *t;
        size_t len;
        if (ll && jsonl_get_string(line, ll, "text", &t, &len) == 0) {
            if (n == cap) {
                cap *= 2;
                *texts = realloc(*texts, cap * sizeof **texts);
                *lens = realloc(*lens, cap * sizeof **lens);
            }
            (*texts)[n] = t;
            (*lens)[n] = len;
            n++;
        }
        line += ll + 1;
    }
    free(data);
    return n;
}

int main(void) {
    gemma3_tokenizer *tok = NULL;
    double best_load = 1e9;
    for (int r = 0; r < 3; r++) {
        gemma3_tokenizer_free(tok);
        double t0 = g3_now();
        if (gemma3_tokenizer_load(MODEL_PATH, &tok) != GEMMA3_OK) {
            fprintf(stderr, "bench-tokenizer: %s\n", gemma3_last_error());
            return 1;
        }
        double t = g3_now() - t0;
        if (t < best_load) best_load = t;
    }

    char **texts;
    size_t *lens;
    int n = load_texts(&texts, &lens);
    if (n <= 0) {
        fprintf(stderr, "bench-tokenizer: cannot read %s\n", CASES_PATH);
        return 1;
    }
    char *buf = malloc(TARGET_BYTES + (1u << 20));
    size_t size = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    while (size < TARGET_BYTES) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((rng >> 33) % (uint64_t)n);
        if (size + lens[k] + 1 > TARGET_BYTES + (1u << 20)) break;
        memcpy(buf + size, texts[k], lens[k]);
        size += lens[k];
        buf[size++] = '\n';
    }

    int n_ids = gemma3_tokenizer_encode(tok, buf, size, 0, NULL, 0);
    if (n_ids < 0) {
        fprintf(stderr, "bench-tokenizer: %s\n", gemma3_last_error());
        return 1;
    }
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids);
    double best = 1e9, best_cpu = 1e9;
    for (int r = 0; r < 3; r++) {
        double c0 = cpu_now(), t0 = g3_now();
        int got = gemma3_tokenizer_encode(tok, buf, size, 0, ids, n_ids);
        double t = g3_now() - t0, c = cpu_now() - c0;
        if (got != n_ids) {
            fprintf(stderr, "bench-tokenizer: run %d gave %d ids, expected %d\n", r, got, n_ids);
            return 1;
        }
        if (t < best) best = t;
        if (c < best_cpu) best_cpu = c;
    }
    /* Each case text on its own (1,333 calls, 0.4 MB): no repetition across texts, so this is the
     * speed of the BPE itself on short inputs plus the per-call overhead. */
    size_t case_bytes = 0;
    int case_ids = 0;
    for (int i = 0; i < n; i++) case_bytes += lens[i];
    double best_cases = 1e9, best_cases_cpu = 1e9;
    for (int r = 0; r < 3; r++) {
        double c0 = cpu_now(), t0 = g3_now();
        int total = 0;
        for (int pass = 0; pass < 5; pass++)
            for (int i = 0; i < n; i++)
                total += gemma3_tokenizer_encode(tok, texts[i], lens[i], 0, ids, n_ids);
        double t = (g3_now() - t0) / 5, c = (cpu_now() - c0) / 5;
        case_ids = total / 5;
        if (t < best_cases) best_cases = t;
        if (c < best_cases_cpu) best_cases_cpu = c;
    }

    printf("tokenizer load: %.1f ms (%d pieces, best of 3)\n", best_load * 1e3,
           gemma3_tokenizer_vocab_size(tok));
    printf("tokenizer encode: %.2f MB/s (%zu bytes, %d tokens, %.3f s; CPU time %.3f s = %.2f MB/s)\n",
           (double)size / best / 1e6, size, n_ids, best, best_cpu, (double)size / best_cpu / 1e6);
    printf("tokenizer encode per text: %.2f MB/s (%d texts, %zu bytes, %d tokens, %.4f s; "
           "CPU time %.4f s = %.2f MB/s)\n",
           (double)case_bytes / best_cases / 1e6, n, case_bytes, case_ids, best_cases,
           best_cases_cpu, (double)case_bytes / best_cases_cpu / 1e6);
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(lens);
    free(ids);
    free(buf);
    gemma3_tokenizer_free(tok);
    return 0;
}
