/* fuzz-config.c - libFuzzer target for config.json parsing: the strict JSON reader
 * (g3_json_parse: duplicate keys at any depth, bytes after the value) and everything
 * g3_config_parse checks after it (types, ranges, RoPE frequencies and angles in float, token
 * ids against vocab_size). A parse that succeeds must describe a model the forward pass can run:
 * the invariants below are what gemma3_session_init and the forward pass rely on. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g3_config c;
    if (g3_config_parse((const char *)data, size, "fuzz/config.json", &c) != GEMMA3_OK) return 0;
    if (c.hidden_size <= 0 || c.intermediate_size <= 0 || c.n_layers <= 0 ||
        c.n_layers > G3_MAX_LAYERS || c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads ||
        c.head_dim <= 0 || c.head_dim % 2 || c.vocab_size <= 0 || c.sliding_window <= 0 ||
        c.max_position_embeddings <= 0)
        abort();
    if (c.bos_id < 0 || c.bos_id >= c.vocab_size || c.pad_id < 0 || c.pad_id >= c.vocab_size) abort();
    for (int i = 0; i < c.n_eos; i++)
        if (c.eos_ids[i] < 0 || c.eos_ids[i] >= c.vocab_size) abort();
    for (int full = 0; full < 2; full++)
        for (int i = 0; i < c.head_dim / 2; i++) {
            float f = g3_rope_inv_freq(&c, full, i);
            if (!isfinite(f) || !isfinite((float)(c.max_position_embeddings - 1) * f)) abort();
        }
    if (!isfinite(1.0f / sqrtf(c.query_pre_attn_scalar)) || !(c.rms_norm_eps > 0.0f)) abort();
    (void)g3_kv_bytes(&c, c.max_position_embeddings, 0, 2);
    return 0;
}
