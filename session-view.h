/* session-view.h - what the saved-state module (state.c) may see of a session, without reaching
 * into its struct: each layer's K and V buffers and ring size, the token history, the position
 * and the last logits, plus the model's config and weights for the fingerprint. gemma3.c owns
 * the session and fills the view; only it and state.c include this header. */
#ifndef G3_SESSION_VIEW_H
#define G3_SESSION_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "gemma3.h"
#include "weights.h"

/* One layer's cache: position p lives in slot p % n_slots (a full layer has n_slots = n_ctx, a
 * sliding layer a ring of min(sliding_window + n_swa_extra, n_ctx) slots). */
typedef struct g3_kv_view {
    void *k, *v;                  /* [n_slots][row_bytes] */
    int n_slots;
} g3_kv_view;

typedef struct g3_session_view {
    const g3_config *cfg;
    const g3_weights *w;
    int n_ctx, pos;               /* capacity; tokens in the cache */
    int ring_first;               /* the sliding rings hold no position before this (nor before
                                   * pos - n_slots) */
    int exact, kv_bf16;           /* the session's mode and the cache's element type */
    size_t row_bytes;             /* one position of one layer's K (or V): nKV*hd elements */
    int32_t *tokens;              /* [n_ctx]: the first pos are the cached tokens' ids */
    float *logits;                /* [vocab_size]: the last fed token's */
    g3_kv_view kv[G3_MAX_LAYERS]; /* [cfg->n_layers] */
} g3_session_view;

void g3_session_get_view(gemma3_session *s, g3_session_view *v);
/* After the view's buffers were filled: the cache now holds pos tokens, the sliding rings the
 * positions from ring_first on. */
void g3_session_set_pos(gemma3_session *s, int pos, int ring_first);

#endif
