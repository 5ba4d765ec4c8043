/* weights.h - binds a checkpoint's tensors to the Gemma 3 text model, by name, with exact shape
 * and dtype checks. Matrices are used in place from the mapping when stored as BF16 or as
 * quantized blocks (a directory written by g3_weights_write_quantized); F32/F16 matrices are
 * converted once to BF16 (owned), or every matrix is quantized at load (owned). Norm weights
 * become FP32 with the Gemma "+1" baked in (1 + w, computed in fp32 exactly as HF's
 * (1 + w.float())). */
#ifndef G3_WEIGHTS_H
#define G3_WEIGHTS_H

#include <stdint.h>

#include "config.h"
#include "quant.h"
#include "safetensors.h"

typedef struct g3_layer_weights {
    g3_matrix wq;             /* [nH*hd][H] */
    g3_matrix wk;             /* [nKV*hd][H] */
    g3_matrix wv;             /* [nKV*hd][H] */
    g3_matrix wo;             /* [H][nH*hd] */
    g3_matrix w_gate;         /* [I][H] */
    g3_matrix w_up;           /* [I][H] */
    g3_matrix w_down;         /* [H][I] */
    const float *attn_norm;      /* [H]  1 + input_layernorm */
    const float *q_norm;         /* [hd] 1 + q_norm */
    const float *k_norm;         /* [hd] 1 + k_norm */
    const float *post_attn_norm; /* [H]  1 + post_attention_layernorm */
    const float *pre_ffn_norm;   /* [H]  1 + pre_feedforward_layernorm */
    const float *post_ffn_norm;  /* [H]  1 + post_feedforward_layernorm */
} g3_layer_weights;

typedef struct g3_weights {
    g3_wtype wtype;           /* the type of every matrix, the embedding and the head included
                               * (a mix: the type most matrices have, each matrix its own) */
    int mix;                  /* llama-quantize's recipe the mix follows (quant-mix.h), or 0 */
    g3_matrix embed;          /* [V][H] */
    g3_matrix lm_head;        /* [V][H]; the embedding's view when tied (same data) */
    const float *final_norm;  /* [H] 1 + model.norm */
    g3_layer_weights layers[G3_MAX_LAYERS];
    int64_t n_params;         /* text-model parameters bound (tied head counted once) */
    int64_t n_bytes;          /* their bytes as stored in the files */
    int64_t n_bytes_used;     /* the matrices' bytes as used (bf16 or blocks) plus the norms' */
    double quantize_seconds;  /* wall time of quantizing at load (0 when none) */
    double repack_seconds;    /* wall time of copying a quantized checkpoint into the x8 layout */
    g3_layout layout;         /* of the quantized matrices: x8 if any is (each its own: g3_matrix) */
    int layout_mixed;         /* 1: some in x8, others in rows (a mix: its types without x8 kernels) */
    g3_st_load_info load_info; /* how the checkpoint's files were brought in */
    const char *prefix;       /* tensor-name prefix found: "model.", "language_model.model." ... */
    g3_st *st;                /* owned; NULL after quantizing at load (nothing points into it) */
    void *owned;              /* one arena for fp32 norms and converted or quantized matrices */
    size_t owned_bytes;
} g3_weights;

/* Opens the safetensors in dir and binds every tensor the config calls for. A missing tensor,
 * a wrong shape or an unsupported dtype is an error naming the tensor, the expected and the
 * actual shape. Vision tensors are ignored. As g3_weights_load_ex(..., as stored), but mapped
 * files are not faulted in (for inspecting a checkpoint). */
int g3_weights_load(const char *dir, const g3_config *cfg, g3_st_load load, g3_weights *w);

/* want: GEMMA3_WEIGHTS_AS_STORED, or the g3_wtype every matrix must have; layout: how quantized
 * matrices lie in memory (BF16 ones always in rows).
 *   - a plain (BF16/F16/F32) checkpoint: as stored or BF16 binds BF16 as g3_weights_load does;
 *     Q8_0/Q4_0 quantizes every matrix at load, on n_threads threads (0 = all CPUs), from the
 *     mapped files tensor by tensor, dropping each source tensor's pages once it is quantized
 *     (so the peak is the quantized weights plus about one source tensor);
 *     (in the x8 layout: written there directly, a group of rows at a time);
 *   - a quantized checkpoint (__metadata__ "gemma3.quant"): its U8 matrices are used in place,
 *     or in the x8 layout copied there from the mapped files on n_threads threads (source pages
 *     dropped as they are copied); asking for another type is refused (no requantization). */
int g3_weights_load_ex(const char *dir, const g3_config *cfg, g3_st_load load, int want,
                       g3_layout layout, int n_threads, g3_weights *w);
/* n_threads (0 = all CPUs) also reads the files (READ) or faults in the mappings (MMAP) when the
 * matrices are used in place. */
void g3_weights_free(g3_weights *w);

/* Refuses a NaN or an infinity in the weights as bound (GEMMA3_ERR_FORMAT naming the tensor
 * and the element): the norms always (a few KB), and with `matrices` every matrix too, the
 * embedding and head included, on n_threads threads (0 = all CPUs): BF16 values, or the fp16
 * scale of every Q8_0/Q4_0 block (their integer values are always finite). */
int g3_weights_check(const char *dir, const g3_config *cfg, const g3_weights *w, int matrices,
                     int n_threads);

/* Writes the text model of the plain checkpoint in src_dir, every matrix quantized to type, as
 * one SafeTensors file at path: quantized matrices as U8 [rows, g3_wtype_row_bytes(type, cols)]
 * (each row its blocks in llama.cpp's byte layout), norms copied as stored, HF names kept,
 * __metadata__ {"format": "pt", "gemma3.quant": "q8_0" | "q4_0"}. Streams: tensor by tensor,
 * in bounded pieces, dropping source pages as it goes. On error path is removed. */
int g3_weights_write_quantized(const char *src_dir, const g3_config *cfg, g3_wtype type,
                               int n_threads, const char *path);

#endif
