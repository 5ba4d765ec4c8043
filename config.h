/* config.h - the Gemma 3 text configuration, parsed from a Hugging Face config.json (both the
 * Gemma3ForCausalLM layout and Gemma3ForConditionalGeneration's nested text_config), with
 * transformers' Gemma3TextConfig defaults for absent keys. (generation_config.json: the sampler's,
 * gemma3_sampler_params_load_hf.) */
#ifndef G3_CONFIG_H
#define G3_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define G3_MAX_LAYERS 256
#define G3_MAX_EOS 8

typedef enum g3_layer_type { G3_LAYER_SLIDING = 0, G3_LAYER_FULL = 1 } g3_layer_type;

typedef struct g3_config {
    char architecture[64];      /* "Gemma3ForCausalLM" / "Gemma3ForConditionalGeneration" */
    int multimodal;             /* 1 if text settings came from text_config */
    int vocab_size;             /* embedding rows (262144 text-only, 262208 multimodal) */
    int hidden_size;            /* H */
    int intermediate_size;      /* I */
    int n_layers;               /* L */
    int n_heads;                /* nH */
    int n_kv_heads;             /* nKV; nH % nKV == 0 */
    int head_dim;               /* hd, even */
    float query_pre_attn_scalar;/* attention scale = qpas^-0.5 */
    int sliding_window;         /* W: key u visible from query p iff p - u < W */
    int max_position_embeddings;
    float rms_norm_eps;
    /* RoPE per layer type: inv_freq[i] = 1 / theta^(2i/hd) / factor */
    float rope_theta_full, rope_factor_full;
    float rope_theta_sliding, rope_factor_sliding;
    float attn_softcap;         /* 0 = none; else s <- c*tanh(s/c) */
    float final_softcap;        /* 0 = none */
    int tie_word_embeddings;
    int bos_id, pad_id;
    int n_eos;
    int eos_ids[G3_MAX_EOS];
    uint8_t layer_types[G3_MAX_LAYERS]; /* g3_layer_type per layer */
} g3_config;

/* Parses config.json text. `path` names the file in messages. Refuses (with the key and value in
 * the message) what the engine does not implement: hidden_activation other than
 * gelu_pytorch_tanh, rope types other than default/linear, attention_bias, bidirectional attention. */
int g3_config_parse(const char *json, size_t len, const char *path, g3_config *cfg);
/* The config is read strictly (g3_json_parse: a key given twice or bytes after the closing
 * brace are refused, naming the key), its token ids must be below vocab_size, and the constants
 * the forward pass derives from it (RoPE frequencies and angles, the attention scale) must be
 * finite floats: all checked here, so a config that parses is one the forward pass can run. */
int g3_config_load(const char *path, g3_config *cfg);

/* The checks g3_config_load makes after parsing (layer count, heads, ids, derived constants),
 * for a config built from another source (a GGUF's metadata); path names it in messages. */
int g3_config_check(const g3_config *cfg, const char *path);

/* RoPE frequency i of a layer type: 1 / theta^(2i/hd) / factor, in fp32 as HF computes it (the
 * exponent an fp32 division; linear rope_scaling divides the frequency). */
float g3_rope_inv_freq(const g3_config *c, int full, int i);

/* KV cache slots of a layer for a context of n_ctx tokens: a sliding layer keeps a ring of
 * min(sliding_window + n_swa_extra, n_ctx) (the extra positions let a cache be cut back), a
 * full layer n_ctx. */
int g3_kv_slots(const g3_config *c, int layer, int n_ctx, int n_swa_extra);
/* Bytes of the whole KV cache (K and V of every layer, each buffer rounded up to 64 bytes as
 * the session lays them out) for n_ctx tokens of elem_bytes each (2 bf16, 4 f32). */
uint64_t g3_kv_bytes(const g3_config *c, int n_ctx, int n_swa_extra, size_t elem_bytes);

#endif
