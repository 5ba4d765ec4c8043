/* weights.h - binds a checkpoint's tensors to the Gemma 3 text model, by name, with exact shape
 * and dtype checks. Matrices are used in place from the mapping when stored as BF16; F32/F16
 * matrices are converted once to BF16 (owned). Norm weights become FP32 with the Gemma "+1"
 * baked in (1 + w, computed in fp32 exactly as HF's (1 + w.float())). */
#ifndef G3_WEIGHTS_H
#define G3_WEIGHTS_H

#include <stdint.h>

#include "config.h"
#include "safetensors.h"

typedef struct g3_layer_weights {
    const uint16_t *wq;       /* bf16 [nH*hd][H] */
    const uint16_t *wk;       /* bf16 [nKV*hd][H] */
    const uint16_t *wv;       /* bf16 [nKV*hd][H] */
    const uint16_t *wo;       /* bf16 [H][nH*hd] */
    const uint16_t *w_gate;   /* bf16 [I][H] */
    const uint16_t *w_up;     /* bf16 [I][H] */
    const uint16_t *w_down;   /* bf16 [H][I] */
    const float *attn_norm;      /* [H]  1 + input_layernorm */
    const float *q_norm;         /* [hd] 1 + q_norm */
    const float *k_norm;         /* [hd] 1 + k_norm */
    const float *post_attn_norm; /* [H]  1 + post_attention_layernorm */
    const float *pre_ffn_norm;   /* [H]  1 + pre_feedforward_layernorm */
    const float *post_ffn_norm;  /* [H]  1 + post_feedforward_layernorm */
} g3_layer_weights;

typedef struct g3_weights {
    const uint16_t *embed;    /* bf16 [V][H] */
    const uint16_t *lm_head;  /* bf16 [V][H]; == embed when tied */
    const float *final_norm;  /* [H] 1 + model.norm */
    g3_layer_weights layers[G3_MAX_LAYERS];
    int64_t n_params;         /* text-model parameters bound (tied head counted once) */
    int64_t n_bytes;          /* their bytes as stored in the files */
    const char *prefix;       /* tensor-name prefix found: "model.", "language_model.model." ... */
    g3_st *st;                /* owned */
    void *owned;              /* one arena for fp32 norms and converted matrices */
} g3_weights;

/* Opens the safetensors in dir and binds every tensor the config calls for. A missing tensor,
 * a wrong shape or an unsupported dtype is an error naming the tensor, the expected and the
 * actual shape. Vision tensors are ignored. */
int g3_weights_load(const char *dir, const g3_config *cfg, g3_st_load load, g3_weights *w);
void g3_weights_free(g3_weights *w);

#endif
