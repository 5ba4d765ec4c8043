/* speculative.h - speculative decoding that changes no token.
 *
 * A drafter (n-gram lookup over the text so far, or a smaller draft model with the same
 * vocabulary) proposes the next k tokens; the target model runs them as one batch
 * (gemma3_session_forward_last: the weights are read once for all k) and the caller draws each
 * position from those logits with its own sampler, exactly as it would have without drafts.
 * Logits are bit-identical for any split of a batch and a draw is a pure function of (seed,
 * position, logits, the sampler's history), so while the caller's draw equals the draft the
 * next logits are already computed; at the first difference the rejected tokens are dropped from
 * the cache and the drawn token goes on. The output is token for token the plain run's.
 *
 * The caller's loop stays the plain one, with gemma3_spec_feed in place of the one-token forward:
 *
 *   const float *logits = gemma3_session_logits(s);         // after the prompt
 *   for (;;) {
 *       int64_t pos = gemma3_spec_pos(sp);
 *       int32_t t = gemma3_sampler_sample(smp, logits, pos); // or under a grammar
 *       if (is_stop(t)) break;
 *       gemma3_spec_feed(sp, t, &logits);                   // t into the cache, next logits
 *       gemma3_sampler_accept(smp, t);
 *   }
 *   gemma3_spec_sync(sp);    // the cache holds exactly the tokens fed, its logits those after them
 *
 * The sampler sees only the tokens fed, in order, so penalties, DRY, mirostat's mu and a grammar
 * follow the accepted tokens alone: nothing is ever drawn at a position the plain run does not
 * draw. Sessions are made with n_swa_extra >= draft_max + 1 (gemma3_spec_n_swa_extra) so that a
 * rejected token never overwrote a sliding-window entry that the next token needs. */
#ifndef G3_SPECULATIVE_H
#define G3_SPECULATIVE_H

#include <stdint.h>

#include "gemma3.h"

enum gemma3_spec_type {
    GEMMA3_SPEC_NONE = 0,
    GEMMA3_SPEC_NGRAM = 1,  /* n-gram lookup over the prompt and the generated text */
    GEMMA3_SPEC_DRAFT = 2,  /* a draft model's session */
};

typedef struct gemma3_spec_params {
    enum gemma3_spec_type type;
    int draft_max;          /* most tokens drafted per step (llama.cpp's --draft-max); 16 */
    int draft_min;          /* fewer drafted tokens are not verified (--draft-min); 0 */
    float draft_p_min;      /* a draft model stops drafting below this probability of its
                             * greedy token (--draft-p-min); 0 */
    int ngram_min, ngram_max; /* n-gram lookup: longest match first, down to ngram_min; 2, 4 */
    int adaptive;           /* 1: draft less after rejections and pause a drafter that keeps
                             * failing, so a useless one costs little */
} gemma3_spec_params;

typedef struct gemma3_spec_stats {
    int64_t n_steps;        /* verification batches run */
    int64_t n_drafted;      /* tokens proposed and verified */
    int64_t n_accepted;     /* of those, equal to the model's draw */
    int64_t n_fed;          /* tokens fed through gemma3_spec_feed */
} gemma3_spec_stats;

typedef struct gemma3_spec gemma3_spec;

gemma3_spec_params gemma3_spec_default_params(void);

/* The n_swa_extra a session needs for draft_max (the target's and the draft's). */
int gemma3_spec_n_swa_extra(int draft_max);

/* A speculator for target (and draft, the draft model's own session, for GEMMA3_SPEC_DRAFT;
 * NULL otherwise). Neither session is owned; both must be made with n_swa_extra >=
 * gemma3_spec_n_swa_extra(draft_max), else dropping a rejected batch fails midway
 * (GEMMA3_ERR_UNSUPPORTED from gemma3_session_truncate). GEMMA3_ERR_ARG for a parameter out of
 * range (draft_max in [1, 256]) or a draft whose vocabulary differs in size from the target's. */
int gemma3_spec_init(gemma3_session *target, gemma3_session *draft, const gemma3_spec_params *p,
                     gemma3_spec **out);
void gemma3_spec_free(gemma3_spec *sp);

/* The position of the next token to draw: the tokens fed so far (the cache may hold more,
 * unverified). */
int gemma3_spec_pos(const gemma3_spec *sp);

/* Feeds token (drawn at gemma3_spec_pos) and points *logits at the logits after it (valid until
 * the next call). When token equals the next drafted one, nothing runs; otherwise the drafts
 * left are dropped, new ones are drafted after token and [token, drafts...] run as one batch.
 * Errors as gemma3_session_forward (GEMMA3_ERR_CONTEXT when the cache is full). */
int gemma3_spec_feed(gemma3_spec *sp, int32_t token, const float **logits);

/* Drops the unverified drafts: afterwards the target session holds exactly the tokens fed and its
 * logits (gemma3_session_logits, saved state) are those after the last one. Call it before using
 * the session directly (another forward, save, truncate). */
int gemma3_spec_sync(gemma3_spec *sp);

/* A draft model proposes, instead of its greedy token, its own draw under params (the target's
 * sampler parameters) at the position the target will draw: the same seed and position give the
 * same noise (a uniform for the CDF walk, Gumbel noise per token), so wherever the two
 * distributions are close the draws agree, which is what makes sampled speculation pay. The
 * stages that need the history (penalties, DRY, mirostat) are left out of the draft's chain.
 * At temperature 0 the draw is the argmax after the logit bias (--ignore-eos included). NULL:
 * the draft's raw argmax. The output never depends on this, only acceptance. */
int gemma3_spec_set_draft_sampling(gemma3_spec *sp, const gemma3_sampler_params *params);

void gemma3_spec_get_stats(const gemma3_spec *sp, gemma3_spec_stats *stats);

/* The most tokens an n-gram lookup proposes after hist[0..n_hist): the continuation of the latest
 * earlier occurrence of the longest suffix of n_min..n_max tokens (the continuation may run into
 * the proposal itself, so a repeating loop is proposed whole). Returns the count written to out
 * (at most max_out); 0 when no suffix recurs. */
int gemma3_spec_ngram_lookup(const int32_t *hist, int n_hist, int n_min, int n_max, int32_t *out,
                             int max_out);

#endif
