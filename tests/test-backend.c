/* test-backend.c - the backend's one CPU probe and its level, and the weight-type table:
 * --isa (gemma3_set_isa) and GEMMA3_ISA choose the level of every table (the BF16 and
 * quantized kernels, the row quantizers, the sampler's passes); every type row is consistent
 * with the public names and with the kernels' slots. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "gguf.h"
#include "kernels.h"
#include "quant-rows.h"
#include "quant.h"
#include "sampling/passes.h"

/* The level every chooser reports: the session-less ones agree with g3_isa_choose. */
static void check_level(int want) {
    CHECK_EQ_INT(g3_isa_choose(NULL), want);
    CHECK_EQ_INT(g3_sampling_isa(), want);
    CHECK(g3_quantize_row_best() == g3_quantize_row_get((g3_isa)want));
    CHECK(g3_kernels_chosen() == g3_kernels_get((g3_isa)want));
}

static void test_levels(void) {
    unsetenv("GEMMA3_ISA");
    const int best = (int)g3_isa_detect();
    CHECK(g3_isa_supported(G3_ISA_SCALAR));
    for (int isa = 0; isa < G3_ISA_COUNT; isa++) {
        CHECK_EQ_INT(g3_isa_parse(g3_isa_name((g3_isa)isa)), isa);
        CHECK_EQ_INT(!!g3_isa_supported((g3_isa)isa), isa <= best);
        CHECK_EQ_INT(g3_kernels_get((g3_isa)isa) != NULL, isa <= best);
        CHECK_EQ_INT(g3_quant_kernels_get((g3_isa)isa) != NULL, isa <= best);
        CHECK_EQ_INT(g3_quantize_row_get((g3_isa)isa) != NULL, isa <= best);
        CHECK_EQ_INT(g3_gumbel_screen_n_get(isa) != NULL, isa <= best);
    }
    check_level(best);
    /* the process's level (what --isa sets) governs every table, the sampler's included */
    CHECK_EQ_INT(gemma3_set_isa("scalar"), GEMMA3_OK);
    check_level(G3_ISA_SCALAR);
    CHECK_EQ_INT(gemma3_set_isa("bogus"), GEMMA3_ERR_ARG);
    check_level(G3_ISA_SCALAR); /* unchanged on error */
    if (best < G3_ISA_AVX512) {
        CHECK_EQ_INT(gemma3_set_isa("avx512"), GEMMA3_ERR_UNSUPPORTED);
        CHECK(strstr(gemma3_last_error(), "not supported by this CPU") != NULL);
    }
    /* the environment's, under the process's */
    setenv("GEMMA3_ISA", "scalar", 1);
    CHECK_EQ_INT(gemma3_set_isa(NULL), GEMMA3_OK);
    check_level(G3_ISA_SCALAR);
    setenv("GEMMA3_ISA", "nonsense", 1);
    CHECK_EQ_INT(g3_isa_choose(NULL), GEMMA3_ERR_ARG);
    CHECK(strstr(gemma3_last_error(), "GEMMA3_ISA") != NULL);
    CHECK_EQ_INT(g3_sampling_isa(), G3_ISA_SCALAR); /* refused: the session reports it */
    CHECK_EQ_INT(g3_isa_choose("scalar"), G3_ISA_SCALAR); /* a caller's own name wins */
    unsetenv("GEMMA3_ISA");
    check_level(best);
}

/* Every row against the public names, the GGUF ids and the kernel tables: the public enum's
 * values index the table, 0 (as stored) and COUNT are no type, and every table this CPU runs has
 * (or falls back to the scalar table for) each block type's kernels. */
static void test_types(void) {
    const g3_quant_kernels *q = g3_quant_kernels_get(G3_ISA_SCALAR);
    const g3_quant_kernels *all[8];
    const int n_all = g3_quant_kernels_all(all, 8);
    int n_types = 0, n_block = 0;
    for (int t = 1; t < GEMMA3_WEIGHTS_COUNT; t++) {
        const g3_wtype_traits *tr = g3_wtype_get(t);
        CHECK(tr != NULL);
        if (!tr) continue;
        n_types++;
        CHECK_EQ_INT(g3_wtype_parse(tr->name), t);
        CHECK_EQ_INT(gemma3_weight_type_parse(tr->name), t);
        CHECK(strcmp(gemma3_weight_type_name((enum gemma3_weight_type)t), tr->name) == 0);
        CHECK_EQ_INT(g3_wtype_row_bytes((g3_wtype)t, 256), 256 / tr->block * tr->block_bytes);
        /* the GGUF id names a ggml type of the same block shape */
        CHECK_EQ_INT(g3_wtype_from_ggml(tr->ggml_type), t);
        CHECK(strcmp(g3_ggml_type_name(tr->ggml_type), tr->name_upper) == 0);
        CHECK_EQ_INT(g3_ggml_block_elems(tr->ggml_type), tr->block);
        CHECK_EQ_INT(g3_ggml_block_bytes(tr->ggml_type), (int)tr->block_bytes);
        const int block = g3_wtype_is_block(t);
        CHECK_EQ_INT(gemma3_weight_type_is_quantized((enum gemma3_weight_type)t), block);
        CHECK_EQ_INT(block, tr->quantize_row != NULL);
        if (block) {
            n_block++;
            CHECK(q->matmul_q[t] && q->matmul_q_f32[t]);
            CHECK_EQ_INT(q->matmul_q_x8[t] != NULL, tr->x8); /* the x8 layout where the row says */
            CHECK_EQ_INT(q->matmul_q_f32_x8[t] != NULL, tr->x8);
            CHECK(strstr(gemma3_weight_type_list(1), tr->name) != NULL);
        }
        for (int i = 0; i < n_all; i++) /* BF16's matmuls are g3_kernels', never these */
            CHECK(block || (!all[i]->matmul_q[t] && !all[i]->matmul_q_x8[t]));
        CHECK(strstr(gemma3_weight_type_list(0), tr->name) != NULL);
    }
    CHECK_EQ_INT(n_types, GEMMA3_WEIGHTS_COUNT - 1);
    CHECK_EQ_INT(n_block, n_types - 1);
    CHECK(g3_wtype_get(-1) == NULL && g3_wtype_get(GEMMA3_WEIGHTS_AS_STORED) == NULL &&
          g3_wtype_get(GEMMA3_WEIGHTS_COUNT) == NULL);
    CHECK_EQ_INT(g3_wtype_from_ggml(0), -1); /* F32: converted at load, not a weight type */
    CHECK_EQ_INT(gemma3_weight_type_parse("q3_k"), GEMMA3_ERR_ARG);
    CHECK(strcmp(gemma3_weight_type_name(GEMMA3_WEIGHTS_AS_STORED), "as-stored") == 0);
    CHECK(strcmp(gemma3_weight_type_list(0), "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m, q4_k_s, q5_k_s") == 0);
    CHECK(strcmp(gemma3_weight_type_list(1), "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m, q4_k_s, q5_k_s") == 0);
    CHECK(strcmp(g3_wtype_list(1), "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k") == 0);
    /* the recipes: names, parsing, quantized, never a row of the type table */
    CHECK_EQ_INT(gemma3_weight_type_parse("q4_k_m"), GEMMA3_WEIGHTS_Q4_K_M);
    CHECK(strcmp(gemma3_weight_type_name(GEMMA3_WEIGHTS_Q5_K_S), "q5_k_s") == 0);
    CHECK(gemma3_weight_type_is_quantized(GEMMA3_WEIGHTS_Q5_K_M) && !g3_wtype_get(GEMMA3_WEIGHTS_Q4_K_M));
}

/* g3_matmul runs the scalar table's kernel for an entry a table leaves NULL (a type that lands
 * with its reference kernels first), in both precisions: the same bits as the scalar table. */
static void test_null_entry_fallback(void) {
    enum { ROWS = 5, N_IN = 64 };
    const g3_quant_kernels *sc = g3_quant_kernels_get(G3_ISA_SCALAR);
    g3_quant_kernels empty = {.name = "empty", .quantize_act = sc->quantize_act};
    float w[ROWS * N_IN], x[N_IN], y_ref[ROWS], y[ROWS];
    for (int i = 0; i < ROWS * N_IN; i++) w[i] = (float)((i * 37) % 23) - 11.0f;
    for (int i = 0; i < N_IN; i++) x[i] = (float)((i * 13) % 7) * 0.25f - 0.5f;
    for (int t = 1; t < GEMMA3_WEIGHTS_COUNT; t++) {
        /* blocks of 32 (the K-quants' rows are 256 long: tests/test-quant-k.c runs their fallback) */
        if (!g3_wtype_is_block(t) || g3_wtype_get(t)->block != G3_QK) continue;
        const size_t rb = g3_wtype_row_bytes((g3_wtype)t, N_IN);
        unsigned char *m = malloc(rb * ROWS), xq[2 * N_IN];
        for (int r = 0; r < ROWS; r++) g3_quantize_row((g3_wtype)t, w + r * N_IN, m + r * rb, N_IN);
        sc->quantize_act(xq, N_IN, x, 0, N_IN);
        const g3_matmul_in in = {.f32 = x, .ld_f32 = N_IN, .q = xq, .n_tok = 1, .n_in = N_IN};
        const g3_matrix W = {m, (g3_wtype)t, G3_LAYOUT_ROWS};
        for (int exact = 0; exact < 2; exact++) {
            const g3_backend ref = {g3_kernels_get(G3_ISA_SCALAR), sc, exact}, be = {ref.k, &empty, exact};
            g3_matmul(&ref, y_ref, 1, W, &in, 0, ROWS);
            memset(y, 0, sizeof y);
            g3_matmul(&be, y, 1, W, &in, 0, ROWS);
            CHECK_MSG(memcmp(y, y_ref, sizeof y) == 0, "%s exact %d: a NULL entry did not run the scalar kernel",
                      g3_wtype_name((g3_wtype)t), exact);
        }
        free(m);
    }
}

int main(void) {
    test_levels();
    test_types();
    test_null_entry_fallback();
    return check_report();
}
