/* quant-mix.c - llama-quantize's K-quant mixes (the rules of llama_tensor_get_type_impl and
 * tensor_type_fallback in llama.cpp's src/llama-quant.cpp, for a dense model without an
 * importance matrix; quant-mix.h). */
#include "quant-mix.h"

#include <string.h>

static const struct recipe {
    int value;         /* gemma3.h */
    const char *name;  /* as users type it */
    int base;          /* the type of the matrices no rule names */
    int medium;        /* _M: attn_v and ffn_down of some layers in Q6_K; _S: Q5_K early */
    const char *ftype_name;
    uint32_t ftype;    /* llama.cpp's LLAMA_FTYPE_MOSTLY_* */
} recipes[] = {
    {GEMMA3_WEIGHTS_Q4_K_M, "q4_k_m", GEMMA3_WEIGHTS_Q4_K, 1, "Q4_K - Medium", 15},
    {GEMMA3_WEIGHTS_Q5_K_M, "q5_k_m", GEMMA3_WEIGHTS_Q5_K, 1, "Q5_K - Medium", 17},
    {GEMMA3_WEIGHTS_Q4_K_S, "q4_k_s", GEMMA3_WEIGHTS_Q4_K, 0, "Q4_K - Small", 14},
    {GEMMA3_WEIGHTS_Q5_K_S, "q5_k_s", GEMMA3_WEIGHTS_Q5_K, 0, "Q5_K - Small", 16},
};
#define N_RECIPES (int)(sizeof recipes / sizeof recipes[0])

static const struct recipe *find(int t) {
    for (int i = 0; i < N_RECIPES; i++)
        if (recipes[i].value == t) return &recipes[i];
    return NULL;
}

int g3_mix_is_recipe(int t) { return find(t) != NULL; }
int g3_mix_base(int t) { return find(t) ? find(t)->base : t; }
const char *g3_mix_name(int t) { return find(t) ? find(t)->name : NULL; }

const char *g3_mix_ftype_name(int t) {
    if (find(t)) return find(t)->ftype_name;
    return t == GEMMA3_WEIGHTS_Q6_K ? "Q6_K" : NULL;
}

uint32_t g3_mix_ftype(int t) { return find(t) ? find(t)->ftype : 0; }

int g3_mix_from_ftype(uint32_t ftype) {
    for (int i = 0; i < N_RECIPES; i++)
        if (recipes[i].ftype == ftype) return recipes[i].value;
    return -1;
}

int g3_mix_parse(const char *name) {
    for (int i = 0; name && i < N_RECIPES; i++)
        if (strcmp(name, recipes[i].name) == 0) return recipes[i].value;
    return -1;
}

const char *g3_mix_list(void) { return ", q4_k_m, q5_k_m, q4_k_s, q5_k_s"; }

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between. */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* llama-quantize's fallback for a row its block does not divide (by ggml ids: K -> 32-blocks). */
static int fallback(int t, int64_t n_cols) {
    const g3_wtype_traits *tr = g3_wtype_get(t);
    if (!tr || n_cols % tr->block == 0) return t;
    static const uint32_t to[][2] = {{12, 6}, {13, 7}, {14, 8}}; /* Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0 */
    for (size_t i = 0; i < sizeof to / sizeof to[0]; i++)
        if (tr->ggml_type == to[i][0]) return g3_wtype_from_ggml(to[i][1]);
    return -1;
}

int g3_mix_choose(int t, g3_role role, int layer, int n_layers, int64_t n_cols, int tied) {
    const struct recipe *r = find(t);
    if (!r) return fallback(t, n_cols); /* a plain type: every matrix (llama-quantize --pure) */
    int type = r->base;
    if (role == G3_ROLE_OUTPUT || (role == G3_ROLE_TOKEN_EMBD && tied)) {
        /* the head (and a tied embedding): Q8_0 where the row is not whole super-blocks, else Q6_K */
        type = n_cols % 256 ? GEMMA3_WEIGHTS_Q8_0 : GEMMA3_WEIGHTS_Q6_K;
    } else if (role == G3_ROLE_ATTN_V) {
        if (r->medium && more_bits(layer, n_layers)) type = GEMMA3_WEIGHTS_Q6_K;
        else if (!r->medium && r->base == GEMMA3_WEIGHTS_Q4_K && layer < 4) type = GEMMA3_WEIGHTS_Q5_K;
    } else if (role == G3_ROLE_FFN_DOWN) {
        if (r->medium && more_bits(layer, n_layers)) type = GEMMA3_WEIGHTS_Q6_K;
        else if (!r->medium && r->base == GEMMA3_WEIGHTS_Q4_K && layer < n_layers / 8) type = GEMMA3_WEIGHTS_Q5_K;
    }
    return fallback(type, n_cols);
}
