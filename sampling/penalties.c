/* sampling/penalties.c - the samplers that read the history of accepted tokens: repetition,
 * frequency and presence penalties, and DRY. Both rewrite logits (g3_writable_logits). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "sampling/candidates.h"
#include "sampling/samplers.h"

/* The last n accepted tokens, oldest first, into dst. */
static int history_tail(const gemma3_sampler *s, int n, int32_t *dst) {
    if (n > s->hist_len) n = s->hist_len;
    int start = (s->hist_head - n + s->hist_cap) % s->hist_cap;
    for (int j = 0; j < n; j++) dst[j] = s->hist[(start + j) % s->hist_cap];
    return n;
}

/* Repetition (sign-split, once per token), frequency and presence penalties over the last
 * repeat_last_n accepted tokens. */
void g3_apply_penalties(gemma3_sampler *s, const struct g3_chain_step *at) {
    const gemma3_sampler_params *p = &s->p;
    int n = g3_resolve_last_n(p, p->repeat_last_n);
    if (n == 0 ||
        (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f))
        return;
    n = history_tail(s, n, s->dry_ctx);
    int nt = 0;
    for (int j = 0; j < n; j++)
        if (s->counts[s->dry_ctx[j]]++ == 0) s->touched[nt++] = s->dry_ctx[j];
    float *own = nt > 0 ? g3_writable_logits(s) : NULL;
    for (int j = 0; j < nt; j++) {
        int32_t id = s->touched[j];
        float l = own[id];
        l = l <= 0 ? l * p->repeat_penalty : l / p->repeat_penalty;
        l -= (float)s->counts[id] * p->frequency_penalty + p->presence_penalty;
        own[id] = g3_clamp_overflow(l);
        s->counts[id] = 0;
    }
    if (nt > 0) s->sorted = 0;
}

static int is_single_breaker(const gemma3_sampler_params *p, int32_t id) {
    for (int b = 0; b < p->n_dry_breakers; b++)
        if (p->dry_breaker_len[b] == 1 && p->dry_breakers[b][0] == id) return 1;
    return 0;
}

/* DRY: for each token t, L = the longest suffix of the history that, followed by t, occurred
 * before (matches found at once for every position by the Z-algorithm on the reversed history,
 * and never extending back across a sequence breaker). If L >= allowed_length, the logit of t
 * loses multiplier * base^(L - allowed_length), capped at FLT_MAX. */
void g3_apply_dry(gemma3_sampler *s, const struct g3_chain_step *at) {
    const gemma3_sampler_params *p = &s->p;
    int n = g3_resolve_last_n(p, p->dry_penalty_last_n);
    if (p->dry_multiplier == 0.0f || p->dry_base < 1.0f || n == 0) return;
    int32_t *c = s->dry_ctx;
    n = history_tail(s, n, c);
    if (n < 2) return;
    /* the match may not reach back past the newest breaker occurrence (its last token tried
     * first: most positions end no breaker, and a call per breaker and position was a twentieth
     * of a DRY draw over 262,144 logits) */
    int limit = n;
    for (int e = n - 1; e >= 0 && limit == n; e--)
        for (int b = 0; b < p->n_dry_breakers; b++) {
            int len = p->dry_breaker_len[b];
            if (len > e + 1 || c[e] != p->dry_breakers[b][len - 1]) continue;
            if (memcmp(c + e - len + 1, p->dry_breakers[b], (size_t)len * sizeof *c) == 0) {
                limit = n - 1 - e;
                break;
            }
        }
    /* z[k] = longest common prefix of r and r[k..], r = the history reversed */
    int32_t *z = s->dry_z;
#define R(k) c[n - 1 - (k)]
    z[0] = n;
    for (int k = 1, lo = 0, hi = 0; k < n; k++) {
        int v = 0;
        if (k < hi) v = z[k - lo] < hi - k ? z[k - lo] : hi - k;
        while (k + v < n && R(v) == R(k + v)) v++;
        z[k] = v;
        if (k + v > hi) {
            lo = k;
            hi = k + v;
        }
    }
#undef R
    int nt = 0;
    for (int i = 1; i < n; i++) {
        int m = z[n - i]; /* the suffix ending at c[i-1] matches the history's suffix */
        if (m > limit) m = limit;
        if (m < p->dry_allowed_length || m == 0) continue;
        int32_t t = c[i];
        if (is_single_breaker(p, t)) continue;
        if (s->counts[t] == 0) s->touched[nt++] = t;
        if (m > s->counts[t]) s->counts[t] = m;
    }
    float *own = nt > 0 ? g3_writable_logits(s) : NULL;
    for (int j = 0; j < nt; j++) {
        int32_t t = s->touched[j];
        double pen = (double)p->dry_multiplier *
                     pow((double)p->dry_base, (double)(s->counts[t] - p->dry_allowed_length));
        if (pen > FLT_MAX) pen = FLT_MAX;
        own[t] -= (float)pen;
        s->counts[t] = 0;
    }
    if (nt > 0) s->sorted = 0;
}
