/* config.h - the Gemma 3 text configuration, parsed from a Hugging Face config.json (both the
 * Gemma3ForCausalLM layout and Gemma3ForConditionalGeneration's nested text_config), with
 * transformers' Gemma3TextConfig defaults for absent keys. Also generation_config.json. */
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
int g3_config_load(const char *path, g3_config *cfg);

/* Sampling defaults from generation_config.json; fields absent from the file keep has_* = 0. */
typedef struct g3_gen_config {
    int has_temperature, has_top_k, has_top_p, has_min_p, has_repetition_penalty;
    float temperature;
    int top_k;
    float top_p, min_p, repetition_penalty;
    int n_eos;
    int eos_ids[G3_MAX_EOS];
} g3_gen_config;
/* GEMMA3_OK with everything unset if the file does not exist; an error if it is malformed. */
int g3_gen_config_load(const char *path, g3_gen_config *gc);

#endif
