/* fuzz-sampling.c - libFuzzer target: arbitrary parameters, history and logits (NaN, +-inf,
 * subnormals, huge values, ties) must never crash, hang or return an out-of-range id, and the
 * CDF and Gumbel paths must keep identical sets. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"
#include "sampling/test-hooks.h"

static uint32_t take(const uint8_t **p, size_t *n) {
    uint32_t v = 0;
    size_t k = *n < 4 ? *n : 4;
    memcpy(&v, *p, k);
    *p += k;
    *n -= k;
    return v;
}

static float take_float(const uint8_t **p, size_t *n) {
    uint32_t u = take(p, n);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A float in [lo, hi] from 16 bits (parameters must pass validation to reach the sampler). */
static float take_range(const uint8_t **p, size_t *n, float lo, float hi) {
    return lo + (hi - lo) * (float)(take(p, n) & 0xffff) / 65535.0f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data;
    size_t n = size;
    int vocab = 1 + (int)(take(&p, &n) % 300);
    gemma3_sampler_params sp = gemma3_sampler_default_params();
    sp.seed = take(&p, &n);
    if (sp.seed == GEMMA3_SEED_RANDOM) sp.seed = 0; /* both paths must share the seed (XTC coin) */
    sp.temperature = take_range(&p, &n, 0, 3);
    sp.top_k = (int)(take(&p, &n) % 400) - 20;
    sp.top_p = take_range(&p, &n, 0, 1);
    sp.min_p = take_range(&p, &n, 0, 1.5f);
    sp.typical_p = take_range(&p, &n, 0, 1.2f);
    sp.top_n_sigma = take_range(&p, &n, -1, 4);
    sp.min_keep = (int)(take(&p, &n) % 5);
    sp.repeat_penalty = take_range(&p, &n, 0.1f, 3);
    sp.repeat_last_n = (int)(take(&p, &n) % 70) - 1;
    sp.frequency_penalty = take_range(&p, &n, -2, 2);
    sp.presence_penalty = take_range(&p, &n, -2, 2);
    sp.dry_multiplier = take_range(&p, &n, 0, 3);
    sp.dry_base = take_range(&p, &n, 0, 5);
    sp.dry_allowed_length = (int)(take(&p, &n) % 5);
    sp.dry_penalty_last_n = (int)(take(&p, &n) % 70) - 1;
    sp.xtc_probability = take_range(&p, &n, 0, 1);
    sp.xtc_threshold = take_range(&p, &n, 0, 0.6f);
    sp.dynatemp_range = take_range(&p, &n, 0, 2);
    sp.dynatemp_exponent = take_range(&p, &n, 0, 3);
    sp.mirostat = (int)(take(&p, &n) % 3);
    sp.n_ctx = 64;
    sp.n_dry_breakers = 1;
    sp.dry_breaker_len[0] = 1;
    sp.dry_breakers[0][0] = (int32_t)(take(&p, &n) % (uint32_t)vocab);
    sp.n_logit_bias = (int)(take(&p, &n) % 4);
    for (int i = 0; i < sp.n_logit_bias; i++) {
        sp.logit_bias[i].token = (int32_t)(take(&p, &n) % (uint32_t)vocab);
        sp.logit_bias[i].bias = take_float(&p, &n);
        if (sp.logit_bias[i].bias != sp.logit_bias[i].bias) sp.logit_bias[i].bias = -INFINITY;
    }
    sp.ignore_eos = (int)(take(&p, &n) & 1);
    sp.n_eos = 1;
    sp.eos_ids[0] = (int32_t)(take(&p, &n) % (uint32_t)vocab);
    sp.epsilon_cutoff = take_range(&p, &n, 0, 0.2f);
    sp.eta_cutoff = take_range(&p, &n, 0, 0.2f);
    char seq[10];
    int nseq = (int)(take(&p, &n) % 10);
    for (int i = 0; i < nseq; i++)
        seq[i] = gemma3_sampler_info_get((int)(take(&p, &n) % GEMMA3_SAMPLER_N_TYPES))->letter;
    seq[nseq] = '\0';
    if (nseq > 0) gemma3_sampler_chain_from_seq(seq, &sp);

    float *logits = malloc((size_t)vocab * sizeof *logits);
    int32_t *ids = malloc((size_t)vocab * sizeof *ids),
            *ids2 = malloc((size_t)vocab * sizeof *ids2);
    gemma3_sampler *a = NULL, *b = NULL;
    if (!logits || !ids || !ids2) goto done;
    for (int i = 0; i < vocab; i++) logits[i] = n >= 4 ? take_float(&p, &n) : (float)(i % 7);
    sp.mode = GEMMA3_SAMPLER_MODE_CDF;
    if (gemma3_sampler_init(&sp, vocab, &a) != GEMMA3_OK) goto done;
    sp.mode = GEMMA3_SAMPLER_MODE_GUMBEL;
    if (gemma3_sampler_init(&sp, vocab, &b) != GEMMA3_OK) abort(); /* same params, must succeed */
    for (int t = 0; t < 80; t++) {
        gemma3_sampler_accept(a, (int32_t)((t * 7) % vocab));
        gemma3_sampler_accept(b, (int32_t)((t * 7) % vocab));
    }
    for (int pos = 0; pos < 4; pos++) {
        int32_t ta = gemma3_sampler_sample(a, logits, pos),
                tb = gemma3_sampler_sample(b, logits, pos);
        if (ta < 0 || ta >= vocab || tb < 0 || tb >= vocab) abort();
    }
    if (sp.temperature > 0 && !sp.mirostat) {
        int na = g3_sampler_kept(a, logits, 9, ids), nb = g3_sampler_kept(b, logits, 9, ids2);
        if (na != nb || memcmp(ids, ids2, (size_t)na * sizeof *ids) != 0) abort();
    }
done:
    gemma3_sampler_free(a);
    gemma3_sampler_free(b);
    free(logits);
    free(ids);
    free(ids2);
    return 0;
}
