/* speculative.c - drafting, one batched verification forward, and dropping what was rejected.
 * See speculative.h for the contract and docs/speculative.md for the measurements. */
#include "speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define SPEC_MAX_SKIP 64 /* most tokens decoded without drafting after repeated rejections */

struct gemma3_spec {
    gemma3_spec_params p;
    gemma3_session *target, *draft;
    gemma3_sampler *draft_sampler; /* NULL: the draft proposes its greedy token */
    int n_vocab, n_ctx;
    float *rows;      /* [draft_max + 1][n_vocab]: the logits after each token of the batch */
    int32_t *batch;   /* [draft_max + 1]: the token fed, then the drafts */
    int32_t *hist;    /* [n_ctx + 1]: the context, for n-gram lookup and the draft's catch-up */
    int n_batch;      /* tokens of the last batch still in the cache; 0: the cache is in sync */
    int row;          /* batch[0..row] were fed: rows[row] are the current logits */
    int base;         /* position of batch[0] */
    int k_cur;        /* adaptive: most tokens the next step drafts */
    int n_skip, n_fail; /* adaptive: tokens left to decode without drafting; failures in a row */
    gemma3_spec_stats stats;
};

gemma3_spec_params gemma3_spec_default_params(void) {
    return (gemma3_spec_params){.type = GEMMA3_SPEC_NGRAM, .draft_max = 16, .draft_min = 0,
                                .draft_p_min = 0.0f, .ngram_min = 2, .ngram_max = 4, .adaptive = 1};
}

/* A batch of draft_max + 1 tokens may be cut back to its first token: the rings must still hold
 * the window before it (gemma3_session_truncate). */
int gemma3_spec_n_swa_extra(int draft_max) { return draft_max + 1; }

static int check_params(const gemma3_spec_params *p, const gemma3_session *draft) {
    if (p->draft_max < 1 || p->draft_max > 256)
        return g3_error(GEMMA3_ERR_ARG, "speculative: draft_max %d is out of range [1, 256]", p->draft_max);
    if (p->draft_min < 0 || p->draft_min > p->draft_max)
        return g3_error(GEMMA3_ERR_ARG, "speculative: draft_min %d is out of range [0, draft_max %d]",
                        p->draft_min, p->draft_max);
    if (!(p->draft_p_min >= 0.0f && p->draft_p_min <= 1.0f))
        return g3_error(GEMMA3_ERR_ARG, "speculative: draft_p_min %g is out of range [0, 1]",
                        (double)p->draft_p_min);
    if (p->ngram_min < 1 || p->ngram_max < p->ngram_min || p->ngram_max > 64)
        return g3_error(GEMMA3_ERR_ARG, "speculative: n-gram sizes %d..%d are not within 1..64",
                        p->ngram_min, p->ngram_max);
    if ((p->type == GEMMA3_SPEC_DRAFT) != (draft != NULL))
        return g3_error(GEMMA3_ERR_ARG, "speculative: a draft session %s",
                        draft ? "is given but the type is not GEMMA3_SPEC_DRAFT" : "is needed");
    if (p->type != GEMMA3_SPEC_NGRAM && p->type != GEMMA3_SPEC_DRAFT)
        return g3_error(GEMMA3_ERR_ARG, "speculative: type %d is not n-gram or draft", (int)p->type);
    return GEMMA3_OK;
}

int gemma3_spec_init(gemma3_session *target, gemma3_session *draft, const gemma3_spec_params *p,
                     gemma3_spec **out) {
    *out = NULL;
    int rc = check_params(p, draft);
    if (rc != GEMMA3_OK) return rc;
    if (draft && gemma3_session_n_vocab(draft) != gemma3_session_n_vocab(target))
        return g3_error(GEMMA3_ERR_ARG, "speculative: the draft's vocabulary has %d ids, the model's %d",
                        gemma3_session_n_vocab(draft), gemma3_session_n_vocab(target));
    gemma3_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return g3_error(GEMMA3_ERR_NOMEM, "speculative: out of memory");
    sp->p = *p;
    sp->target = target;
    sp->draft = draft;
    sp->n_vocab = gemma3_session_n_vocab(target);
    sp->n_ctx = gemma3_session_n_ctx(target);
    sp->rows = malloc((size_t)(p->draft_max + 1) * (size_t)sp->n_vocab * sizeof *sp->rows);
    sp->batch = malloc((size_t)(p->draft_max + 1) * sizeof *sp->batch);
    sp->hist = malloc((size_t)(sp->n_ctx + 1) * sizeof *sp->hist);
    if (!sp->rows || !sp->batch || !sp->hist) {
        gemma3_spec_free(sp);
        return g3_error(GEMMA3_ERR_NOMEM, "speculative: out of memory for %d rows of logits",
                        p->draft_max + 1);
    }
    sp->k_cur = p->draft_max;
    *out = sp;
    return GEMMA3_OK;
}

void gemma3_spec_free(gemma3_spec *sp) {
    if (!sp) return;
    free(sp->rows);
    free(sp->batch);
    free(sp->hist);
    gemma3_sampler_free(sp->draft_sampler);
    free(sp);
}

int gemma3_spec_pos(const gemma3_spec *sp) {
    return sp->n_batch ? sp->base + sp->row + 1 : gemma3_session_pos(sp->target);
}

void gemma3_spec_get_stats(const gemma3_spec *sp, gemma3_spec_stats *stats) { *stats = sp->stats; }

int gemma3_spec_ngram_lookup(const int32_t *hist, int n_hist, int n_min, int n_max, int32_t *out,
                             int max_out) {
    for (int n = n_max; n >= n_min; n--) {
        if (n >= n_hist) continue;
        const int32_t *suffix = hist + n_hist - n;
        for (int j = n_hist - n - 1; j >= 0; j--) {
            if (memcmp(hist + j, suffix, (size_t)n * sizeof *hist) != 0) continue;
            /* hist[j + n + i] lies before index n_hist + i: already known or just proposed */
            for (int i = 0; i < max_out; i++)
                out[i] = j + n + i < n_hist ? hist[j + n + i] : out[j + n + i - n_hist];
            return max_out;
        }
    }
    return 0;
}

/* The context: the tokens in the cache (cut back to pos) and the token being fed. */
static void load_history(gemma3_spec *sp, int pos, int32_t token) {
    memcpy(sp->hist, gemma3_session_tokens(sp->target), (size_t)pos * sizeof *sp->hist);
    sp->hist[pos] = token;
}

static int argmax_p(const float *x, int n, float *p) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    double z = 0;
    for (int i = 0; i < n; i++) z += exp((double)x[i] - (double)x[best]);
    *p = (float)(1.0 / z);
    return best;
}

int gemma3_spec_set_draft_sampling(gemma3_spec *sp, const gemma3_sampler_params *params) {
    gemma3_sampler_free(sp->draft_sampler);
    sp->draft_sampler = NULL;
    if (!params) return GEMMA3_OK;
    gemma3_sampler_params p = *params;
    p.repeat_penalty = 1.0f; /* what needs the history is left to the target's own draw */
    p.frequency_penalty = p.presence_penalty = 0.0f;
    p.dry_multiplier = 0.0f;
    p.mirostat = 0;
    return gemma3_sampler_init(&p, sp->n_vocab, &sp->draft_sampler);
}

/* Brings the draft session to hist[0..n_hist): keeps what it shares, feeds the rest as a batch. */
static int draft_catch_up(gemma3_spec *sp, int n_hist) {
    gemma3_session *d = sp->draft;
    const int32_t *have = gemma3_session_tokens(d);
    int n_have = gemma3_session_pos(d), common = 0;
    while (common < n_have && common < n_hist && have[common] == sp->hist[common]) common++;
    if (common == n_hist) common--; /* the last token is fed again for its logits */
    if (common < n_have && gemma3_session_truncate(d, common) != GEMMA3_OK) {
        gemma3_session_reset(d); /* cut back past the rings: start over */
        common = 0;
    }
    return gemma3_session_forward(d, sp->hist + common, n_hist - common, NULL);
}

/* The draft model's greedy continuation of hist[0..n_hist), stopping below draft_p_min. */
static int draft_model(gemma3_spec *sp, int n_hist, int32_t *out, int max_out) {
    int rc = draft_catch_up(sp, n_hist);
    if (rc != GEMMA3_OK) return rc;
    int n = 0;
    while (n < max_out) {
        float p;
        const float *logits = gemma3_session_logits(sp->draft);
        int32_t t = argmax_p(logits, sp->n_vocab, &p);
        if (p < sp->p.draft_p_min) break;
        if (sp->draft_sampler) t = gemma3_sampler_sample(sp->draft_sampler, logits, n_hist + n);
        if (t < 0) return t;
        out[n++] = t;
        if (n < max_out && (rc = gemma3_session_forward(sp->draft, &t, 1, NULL)) != GEMMA3_OK) return rc;
    }
    return n;
}

/* How many tokens to draft now: the adaptive cap, the context left, draft_min. */
static int draft_budget(const gemma3_spec *sp, int pos) {
    int k = sp->p.adaptive ? sp->k_cur : sp->p.draft_max;
    if (sp->p.adaptive && sp->n_skip > 0) k = 0;
    if (k > sp->n_ctx - pos - 1) k = sp->n_ctx - pos - 1;
    return k > 0 ? k : 0;
}

/* Learns from the batch being left: a full acceptance widens the next draft, a partial one
 * narrows it to what was accepted plus one, and a batch with nothing accepted pauses drafting
 * for 2, 4, ... SPEC_MAX_SKIP tokens. */
static void adapt(gemma3_spec *sp) {
    if (sp->n_skip > 0) sp->n_skip--;
    const int drafted = sp->n_batch - 1, accepted = sp->row;
    if (drafted <= 0) return;
    sp->stats.n_accepted += accepted;
    if (accepted == drafted) {
        sp->k_cur = sp->k_cur * 2 < sp->p.draft_max ? sp->k_cur * 2 : sp->p.draft_max;
        sp->n_fail = 0;
    } else {
        sp->k_cur = accepted + 1;
        sp->n_fail = accepted ? 0 : sp->n_fail + 1;
        if (sp->n_fail) sp->n_skip = 1 << (sp->n_fail < 6 ? sp->n_fail : 6);
        if (sp->n_skip > SPEC_MAX_SKIP) sp->n_skip = SPEC_MAX_SKIP;
    }
}

/* Drops batch[row + 1 ..] from the cache. */
static int drop_rest(gemma3_spec *sp) {
    if (!sp->n_batch) return GEMMA3_OK;
    adapt(sp);
    const int pos = sp->base + sp->row + 1;
    int rc = gemma3_session_rewind(sp->target, pos, sp->rows + (size_t)sp->row * sp->n_vocab);
    sp->n_batch = 0;
    return rc;
}

int gemma3_spec_sync(gemma3_spec *sp) { return drop_rest(sp); }

int gemma3_spec_feed(gemma3_spec *sp, int32_t token, const float **logits) {
    sp->stats.n_fed++;
    if (sp->n_batch && sp->row + 1 < sp->n_batch && sp->batch[sp->row + 1] == token) {
        *logits = sp->rows + (size_t)++sp->row * sp->n_vocab;
        return GEMMA3_OK;
    }
    int rc = drop_rest(sp);
    if (rc != GEMMA3_OK) return rc;
    const int pos = gemma3_session_pos(sp->target);
    int n_draft = draft_budget(sp, pos);
    if (n_draft > 0) {
        load_history(sp, pos, token);
        n_draft = sp->draft ? draft_model(sp, pos + 1, sp->batch + 1, n_draft)
                            : gemma3_spec_ngram_lookup(sp->hist, pos + 1, sp->p.ngram_min,
                                                       sp->p.ngram_max, sp->batch + 1, n_draft);
        if (n_draft < 0) return n_draft;
        if (n_draft < sp->p.draft_min) n_draft = 0;
    }
    sp->batch[0] = token;
    rc = gemma3_session_forward_last(sp->target, sp->batch, n_draft + 1, n_draft + 1, sp->rows);
    if (rc != GEMMA3_OK) return rc;
    sp->n_batch = n_draft + 1;
    sp->row = 0;
    sp->base = pos;
    sp->stats.n_steps += n_draft > 0;
    sp->stats.n_drafted += n_draft;
    *logits = sp->rows;
    return GEMMA3_OK;
}
