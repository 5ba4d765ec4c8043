/* quant-mix.h - llama-quantize's per-tensor choices for its K-quant mixes (Q4_K_M, Q5_K_M,
 * Q4_K_S, Q5_K_S) without an importance matrix, for a dense model with one attn_v and one
 * ffn_down per layer (Gemma 3). Knows the roles of a transformer's matrices, not Gemma's names.
 *
 * The recipes are values of the public weight-type enum past the types (gemma3.h:
 * GEMMA3_WEIGHTS_Q4_K_M ...): a recipe is a base type (Q4_K or Q5_K) plus rules. Every matrix not
 * named by a rule takes the base type; then any type whose block does not divide the row falls
 * back as llama-quantize's tensor_type_fallback does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0). */
#ifndef G3_QUANT_MIX_H
#define G3_QUANT_MIX_H

#include <stdint.h>

#include "quant.h"

typedef enum g3_role {
    G3_ROLE_OTHER = 0, /* q, k, gate, up */
    G3_ROLE_ATTN_V,
    G3_ROLE_ATTN_OUTPUT,
    G3_ROLE_FFN_DOWN,
    G3_ROLE_TOKEN_EMBD, /* the embedding (also the LM head when tied) */
    G3_ROLE_OUTPUT,     /* an untied LM head */
} g3_role;

/* 1 if t (a public enum value) is a recipe. */
int g3_mix_is_recipe(int t);
/* The recipe's base type (GEMMA3_WEIGHTS_Q4_K / Q5_K); t itself for a type. */
int g3_mix_base(int t);
/* "q4_k_m", ...; NULL if not a recipe. */
const char *g3_mix_name(int t);
/* llama-bench's file type name ("Q4_K - Medium") and llama.cpp's general.file_type (15) of a
 * recipe; of a plain type where llama.cpp names one (Q6_K: "Q6_K", 18). NULL / 0 otherwise. */
const char *g3_mix_ftype_name(int t);
uint32_t g3_mix_ftype(int t);
/* The recipe whose general.file_type is ftype; -1 if none. */
int g3_mix_from_ftype(uint32_t ftype);
/* The recipe named name; -1 if none. */
int g3_mix_parse(const char *name);
/* ", q4_k_m, q5_k_m, q4_k_s, q5_k_s" (the recipes, for lists of type names). */
const char *g3_mix_list(void);

/* The type recipe (or plain type) t gives the matrix of role `role` in layer `layer` of
 * n_layers, with n_cols columns (the fallback applied); tied: the embedding is also the head.
 * -1 where the fallback type is not one of ours. */
int g3_mix_choose(int t, g3_role role, int layer, int n_layers, int64_t n_cols, int tied);

#endif
