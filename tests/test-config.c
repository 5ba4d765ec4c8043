/* test-config.c - config.json parsing: the golden checkpoints, defaults, both RoPE formats, the
 * layer-type rules, eos forms, and every refusal with its key and value in the message. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "util.h"

static int parse(const char *json, g3_config *c) {
    return g3_config_parse(json, strlen(json), "dir/config.json", c);
}

static void expect_refused(const char *json, int code, const char *want) {
    g3_config c;
    int rc = parse(json, &c);
    CHECK_MSG(rc == code, "rc %d want %d for %s (%s)", rc, code, json, gemma3_last_error());
    CHECK_MSG(strstr(gemma3_last_error(), want) != NULL, "'%s' lacks '%s'", gemma3_last_error(),
              want);
    CHECK_MSG(strncmp(gemma3_last_error(), "dir/config.json: ", 17) == 0, "'%s' lacks the path",
              gemma3_last_error());
}

/* Layer types as a string: S sliding, F full. */
static const char *types(const g3_config *c) {
    static char buf[G3_MAX_LAYERS + 1];
    for (int i = 0; i < c->n_layers; i++) buf[i] = c->layer_types[i] == G3_LAYER_FULL ? 'F' : 'S';
    buf[c->n_layers] = '\0';
    return buf;
}

static void test_golden(void) {
    g3_config c;
    int rc = g3_config_load("tests/data/golden/tiny-causal/config.json", &c);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK(strcmp(c.architecture, "Gemma3ForCausalLM") == 0);
    CHECK_EQ_INT(c.multimodal, 0);
    CHECK_EQ_INT(c.vocab_size, 4096);
    CHECK_EQ_INT(c.hidden_size, 64);
    CHECK_EQ_INT(c.intermediate_size, 192);
    CHECK_EQ_INT(c.n_layers, 7);
    CHECK_EQ_INT(c.n_heads, 4);
    CHECK_EQ_INT(c.n_kv_heads, 1);
    CHECK_EQ_INT(c.head_dim, 16);
    CHECK_NEAR(c.query_pre_attn_scalar, 16, 0);
    CHECK_EQ_INT(c.sliding_window, 8);
    CHECK_EQ_INT(c.max_position_embeddings, 32768);
    CHECK_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
    CHECK_NEAR(c.rope_theta_full, 1e6, 0);
    CHECK_NEAR(c.rope_factor_full, 1, 0);
    CHECK_NEAR(c.rope_theta_sliding, 1e4, 0);
    CHECK_NEAR(c.rope_factor_sliding, 1, 0);
    CHECK_NEAR(c.attn_softcap, 0, 0);
    CHECK_NEAR(c.final_softcap, 0, 0);
    CHECK_EQ_INT(c.tie_word_embeddings, 1);
    CHECK_EQ_INT(c.bos_id, 2);
    CHECK_EQ_INT(c.n_eos, 2);
    CHECK(c.eos_ids[0] == 1 && c.eos_ids[1] == 106);
    CHECK(strcmp(types(&c), "SSSSSFS") == 0);

    rc = g3_config_load("tests/data/golden/tiny-mm/config.json", &c);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK(strcmp(c.architecture, "Gemma3ForConditionalGeneration") == 0);
    CHECK_EQ_INT(c.multimodal, 1);
    CHECK_EQ_INT(c.vocab_size, 4160);
    CHECK_EQ_INT(c.n_kv_heads, 2);
    CHECK_NEAR(c.rope_theta_full, 1e6, 0);
    CHECK_NEAR(c.rope_factor_full, 8, 0); /* linear 8 on full layers only */
    CHECK_NEAR(c.rope_theta_sliding, 1e4, 0);
    CHECK_NEAR(c.rope_factor_sliding, 1, 0);
    CHECK(strcmp(types(&c), "SSSSSFS") == 0);
    CHECK_EQ_INT(c.n_eos, 2);

    CHECK_EQ_INT(g3_config_load("tests/data/golden/nope/config.json", &c), GEMMA3_ERR_IO);
    CHECK(strstr(gemma3_last_error(), "nope/config.json: cannot open"));
}

static void test_defaults(void) {
    g3_config c;
    int rc = parse("{\"model_type\":\"gemma3_text\",\"hidden_size\":64,\"intermediate_size\":128,"
                   "\"num_hidden_layers\":14}",
                   &c);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK(strcmp(c.architecture, "Gemma3ForCausalLM") == 0);
    CHECK_EQ_INT(c.vocab_size, 262208);
    CHECK_EQ_INT(c.n_heads, 8);
    CHECK_EQ_INT(c.n_kv_heads, 4);
    CHECK_EQ_INT(c.head_dim, 256);
    CHECK_NEAR(c.query_pre_attn_scalar, 256, 0);
    CHECK_EQ_INT(c.sliding_window, 4096);
    CHECK_EQ_INT(c.max_position_embeddings, 131072);
    CHECK_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
    CHECK_NEAR(c.rope_theta_full, 1e6, 0);
    CHECK_NEAR(c.rope_theta_sliding, 1e4, 0);
    CHECK_NEAR(c.rope_factor_full, 1, 0);
    CHECK_EQ_INT(c.tie_word_embeddings, 1);
    CHECK_EQ_INT(c.bos_id, 2);
    CHECK_EQ_INT(c.pad_id, 0);
    CHECK_EQ_INT(c.n_eos, 1);
    CHECK_EQ_INT(c.eos_ids[0], 1);
    CHECK(strcmp(types(&c), "SSSSSFSSSSSFSS") == 0); /* last layers stay sliding */

    /* the 4B hub config: five keys in text_config, eos at the top level */
    rc = parse("{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"model_type\":\"gemma3\","
               "\"eos_token_id\":[1,106],\"image_token_index\":262144,"
               "\"text_config\":{\"hidden_size\":2560,\"intermediate_size\":10240,"
               "\"model_type\":\"gemma3_text\",\"num_hidden_layers\":34,"
               "\"rope_scaling\":{\"factor\":8.0,\"rope_type\":\"linear\"},\"sliding_window\":1024}}",
               &c);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK_EQ_INT(c.multimodal, 1);
    CHECK_EQ_INT(c.vocab_size, 262208);
    CHECK_EQ_INT(c.n_heads, 8);
    CHECK_EQ_INT(c.n_kv_heads, 4);
    CHECK_EQ_INT(c.sliding_window, 1024);
    CHECK_NEAR(c.rope_factor_full, 8, 0);
    CHECK_EQ_INT(c.n_eos, 2);
    CHECK_EQ_INT(c.eos_ids[1], 106);
    CHECK_EQ_INT(c.layer_types[5], G3_LAYER_FULL);
    CHECK_EQ_INT(c.layer_types[33], G3_LAYER_SLIDING);

    /* layout from architectures alone, and from text_config alone */
    rc = parse("{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"text_config\":"
               "{\"hidden_size\":8,\"intermediate_size\":8,\"num_hidden_layers\":1}}",
               &c);
    CHECK(rc == GEMMA3_OK && c.multimodal == 1 && c.hidden_size == 8);
    rc = parse("{\"text_config\":{\"hidden_size\":8,\"intermediate_size\":8,\"num_hidden_layers\":1}}",
               &c);
    CHECK(rc == GEMMA3_OK && c.multimodal == 1 &&
          strcmp(c.architecture, "Gemma3ForConditionalGeneration") == 0);
    /* nulls count as absent */
    rc = parse("{\"hidden_size\":8,\"intermediate_size\":8,\"num_hidden_layers\":1,"
               "\"vocab_size\":null,\"sliding_window\":null,\"rope_scaling\":null}",
               &c);
    CHECK(rc == GEMMA3_OK && c.vocab_size == 262208 && c.sliding_window == 4096);
}

#define BASE "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":6"

static void test_layer_types(void) {
    g3_config c;
    CHECK_EQ_INT(parse("{" BASE ",\"sliding_window_pattern\":3}", &c), GEMMA3_OK);
    CHECK(strcmp(types(&c), "SSFSSF") == 0);
    CHECK_EQ_INT(parse("{" BASE ",\"_sliding_window_pattern\":2}", &c), GEMMA3_OK);
    CHECK(strcmp(types(&c), "SFSFSF") == 0);
    CHECK_EQ_INT(parse("{" BASE ",\"sliding_window_pattern\":1}", &c), GEMMA3_OK);
    CHECK(strcmp(types(&c), "FFFFFF") == 0);
    /* layer_types wins over the pattern */
    CHECK_EQ_INT(parse("{" BASE ",\"sliding_window_pattern\":6,\"layer_types\":[\"full_attention\","
                       "\"sliding_attention\",\"full_attention\",\"sliding_attention\","
                       "\"sliding_attention\",\"sliding_attention\"]}",
                       &c),
                 GEMMA3_OK);
    CHECK(strcmp(types(&c), "FSFSSS") == 0);
    expect_refused("{" BASE ",\"layer_types\":[\"full_attention\"]}", GEMMA3_ERR_FORMAT,
                   "layer_types: 1 entries but num_hidden_layers is 6");
    expect_refused("{" BASE ",\"layer_types\":[\"full_attention\",\"sliding_attention\",\"chunked\","
                   "\"full_attention\",\"full_attention\",\"full_attention\"]}",
                   GEMMA3_ERR_UNSUPPORTED, "layer_types[2]: 'chunked' is not");
    expect_refused("{" BASE ",\"layer_types\":\"full\"}", GEMMA3_ERR_FORMAT,
                   "layer_types: expected a list, got a string");
    expect_refused("{" BASE ",\"sliding_window_pattern\":0}", GEMMA3_ERR_FORMAT,
                   "sliding_window_pattern: 0 is not in [1,");
}

static void test_rope(void) {
    g3_config c;
    /* new format */
    int rc = parse("{" BASE ",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"linear\","
                   "\"factor\":8.0,\"rope_theta\":1000000.0},\"sliding_attention\":"
                   "{\"rope_type\":\"default\",\"rope_theta\":10000.0}}}",
                   &c);
    CHECK_MSG(rc == GEMMA3_OK, "%s", gemma3_last_error());
    CHECK_NEAR(c.rope_theta_full, 1e6, 0);
    CHECK_NEAR(c.rope_factor_full, 8, 0);
    CHECK_NEAR(c.rope_theta_sliding, 1e4, 0);
    CHECK_NEAR(c.rope_factor_sliding, 1, 0);
    rc = parse("{" BASE ",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\","
               "\"rope_theta\":500000.0},\"sliding_attention\":{\"rope_type\":\"linear\","
               "\"factor\":2,\"rope_theta\":20000.0}}}",
               &c);
    CHECK(rc == GEMMA3_OK && c.rope_theta_full == 5e5f && c.rope_factor_full == 1.0f &&
          c.rope_theta_sliding == 2e4f && c.rope_factor_sliding == 2.0f);
    expect_refused("{" BASE ",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"yarn\","
                   "\"factor\":8.0,\"rope_theta\":1e6}}}",
                   GEMMA3_ERR_UNSUPPORTED,
                   "rope_parameters.full_attention.rope_type: 'yarn' is not supported");
    expect_refused("{" BASE ",\"rope_parameters\":{\"sliding_attention\":{\"rope_theta\":\"x\"}}}",
                   GEMMA3_ERR_FORMAT,
                   "rope_parameters.sliding_attention.rope_theta: expected a number, got a string");
    /* old format */
    rc = parse("{" BASE ",\"rope_theta\":20000.0,\"rope_local_base_freq\":500.0,"
               "\"rope_scaling\":{\"type\":\"linear\",\"factor\":4}}",
               &c);
    CHECK(rc == GEMMA3_OK && c.rope_theta_full == 2e4f && c.rope_theta_sliding == 500.0f &&
          c.rope_factor_full == 4.0f && c.rope_factor_sliding == 1.0f);
    rc = parse("{" BASE ",\"rope_scaling\":{\"rope_type\":\"default\"}}", &c);
    CHECK(rc == GEMMA3_OK && c.rope_factor_full == 1.0f);
    expect_refused("{" BASE ",\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2}}",
                   GEMMA3_ERR_UNSUPPORTED,
                   "rope_scaling.rope_type: 'dynamic' is not supported (only default and linear)");
    expect_refused("{" BASE ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2}}",
                   GEMMA3_ERR_UNSUPPORTED, "rope_scaling.type: 'yarn' is not supported");
    expect_refused("{" BASE ",\"rope_scaling\":{\"rope_type\":\"linear\"}}", GEMMA3_ERR_FORMAT,
                   "rope_scaling.factor: required for linear");
    expect_refused("{" BASE ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":-1}}",
                   GEMMA3_ERR_FORMAT, "rope_scaling.factor: expected a positive number");
    expect_refused("{" BASE ",\"rope_scaling\":\"linear\"}", GEMMA3_ERR_FORMAT,
                   "rope_scaling: expected an object or null, got a string");
    expect_refused("{" BASE ",\"rope_theta\":0}", GEMMA3_ERR_FORMAT,
                   "rope_theta: 0 is not a positive number");
    expect_refused("{\"model_type\":\"gemma3\",\"text_config\":{" BASE
                   ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}}}",
                   GEMMA3_ERR_UNSUPPORTED, "text_config.rope_scaling.rope_type: 'llama3'");
}

static void test_eos_softcap(void) {
    g3_config c;
    CHECK_EQ_INT(parse("{" BASE ",\"eos_token_id\":7}", &c), GEMMA3_OK);
    CHECK(c.n_eos == 1 && c.eos_ids[0] == 7);
    CHECK_EQ_INT(parse("{" BASE ",\"eos_token_id\":[1,106,5]}", &c), GEMMA3_OK);
    CHECK(c.n_eos == 3 && c.eos_ids[0] == 1 && c.eos_ids[1] == 106 && c.eos_ids[2] == 5);
    /* multimodal: the top-level eos overrides text_config's */
    CHECK_EQ_INT(parse("{\"model_type\":\"gemma3\",\"eos_token_id\":[1,106],\"text_config\":{" BASE
                       ",\"eos_token_id\":1,\"bos_token_id\":9}}",
                       &c),
                 GEMMA3_OK);
    CHECK(c.n_eos == 2 && c.eos_ids[1] == 106 && c.bos_id == 9);
    CHECK_EQ_INT(parse("{\"model_type\":\"gemma3\",\"text_config\":{" BASE ",\"eos_token_id\":3}}", &c),
                 GEMMA3_OK);
    CHECK(c.n_eos == 1 && c.eos_ids[0] == 3);
    expect_refused("{" BASE ",\"eos_token_id\":\"1\"}", GEMMA3_ERR_FORMAT,
                   "eos_token_id: expected an integer or a list, got a string");
    expect_refused("{" BASE ",\"eos_token_id\":[1,-2]}", GEMMA3_ERR_FORMAT,
                   "eos_token_id[1]: expected a non-negative integer");
    expect_refused("{" BASE ",\"eos_token_id\":[]}", GEMMA3_ERR_FORMAT, "eos_token_id: empty list");
    expect_refused("{" BASE ",\"eos_token_id\":[1,2,3,4,5,6,7,8,9]}", GEMMA3_ERR_UNSUPPORTED,
                   "eos_token_id: more than 8 ids");

    CHECK_EQ_INT(parse("{" BASE ",\"attn_logit_softcapping\":null,\"final_logit_softcapping\":30.0}",
                       &c),
                 GEMMA3_OK);
    CHECK(c.attn_softcap == 0.0f && c.final_softcap == 30.0f);
    CHECK_EQ_INT(parse("{" BASE ",\"attn_logit_softcapping\":50}", &c), GEMMA3_OK);
    CHECK(c.attn_softcap == 50.0f && c.final_softcap == 0.0f);
    expect_refused("{" BASE ",\"final_logit_softcapping\":-3}", GEMMA3_ERR_FORMAT,
                   "final_logit_softcapping: -3 is not a positive number");
    expect_refused("{" BASE ",\"attn_logit_softcapping\":\"50\"}", GEMMA3_ERR_FORMAT,
                   "attn_logit_softcapping: expected a number, got a string");
}

static void test_refusals(void) {
    expect_refused("{" BASE ",\"hidden_activation\":\"gelu\"}", GEMMA3_ERR_UNSUPPORTED,
                   "hidden_activation: 'gelu' is not supported (only gelu_pytorch_tanh)");
    expect_refused("{" BASE ",\"hidden_act\":\"silu\"}", GEMMA3_ERR_UNSUPPORTED,
                   "hidden_act: 'silu' is not supported");
    expect_refused("{" BASE ",\"attention_bias\":true}", GEMMA3_ERR_UNSUPPORTED,
                   "attention_bias: true is not supported");
    expect_refused("{" BASE ",\"use_bidirectional_attention\":true}", GEMMA3_ERR_UNSUPPORTED,
                   "use_bidirectional_attention: true is not supported");
    expect_refused("{" BASE ",\"num_attention_heads\":8,\"num_key_value_heads\":3}",
                   GEMMA3_ERR_UNSUPPORTED,
                   "num_attention_heads: 8 is not a multiple of num_key_value_heads 3");
    expect_refused("{" BASE ",\"head_dim\":15}", GEMMA3_ERR_UNSUPPORTED, "head_dim: 15 is odd");
    expect_refused("{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":300}",
                   GEMMA3_ERR_UNSUPPORTED, "num_hidden_layers: 300 exceeds 256");
    expect_refused("{\"hidden_size\":0,\"intermediate_size\":128,\"num_hidden_layers\":3}",
                   GEMMA3_ERR_FORMAT, "hidden_size: 0 is not in [1,");
    expect_refused("{\"hidden_size\":64,\"intermediate_size\":-128,\"num_hidden_layers\":3}",
                   GEMMA3_ERR_FORMAT, "intermediate_size: -128 is not in [1,");
    expect_refused("{" BASE ",\"num_key_value_heads\":0}", GEMMA3_ERR_FORMAT,
                   "num_key_value_heads: 0 is not in [1,");
    expect_refused("{" BASE ",\"vocab_size\":-1}", GEMMA3_ERR_FORMAT, "vocab_size: -1 is not in");
    expect_refused("{" BASE ",\"sliding_window\":0}", GEMMA3_ERR_FORMAT, "sliding_window: 0 is not");
    expect_refused("{" BASE ",\"rms_norm_eps\":0}", GEMMA3_ERR_FORMAT, "rms_norm_eps: 0 is not a positive");
    expect_refused("{" BASE ",\"query_pre_attn_scalar\":-1}", GEMMA3_ERR_FORMAT,
                   "query_pre_attn_scalar: -1 is not a positive");
    /* wrong JSON types */
    expect_refused("{\"hidden_size\":\"64\",\"intermediate_size\":128,\"num_hidden_layers\":3}",
                   GEMMA3_ERR_FORMAT, "config.json: hidden_size: expected an integer, got a string");
    expect_refused("{\"hidden_size\":64.5,\"intermediate_size\":128,\"num_hidden_layers\":3}",
                   GEMMA3_ERR_FORMAT, "hidden_size: expected an integer, got 64.5");
    expect_refused("{" BASE ",\"num_attention_heads\":[4]}", GEMMA3_ERR_FORMAT,
                   "num_attention_heads: expected an integer, got an array");
    expect_refused("{" BASE ",\"tie_word_embeddings\":\"yes\"}", GEMMA3_ERR_FORMAT,
                   "tie_word_embeddings: expected a boolean, got a string");
    expect_refused("{" BASE ",\"attention_bias\":1}", GEMMA3_ERR_FORMAT,
                   "attention_bias: expected a boolean, got a number");
    expect_refused("{" BASE ",\"hidden_activation\":3}", GEMMA3_ERR_FORMAT,
                   "hidden_activation: expected a string, got a number");
    expect_refused("{\"model_type\":\"gemma3\",\"text_config\":{\"hidden_size\":\"64\"}}",
                   GEMMA3_ERR_FORMAT, "text_config.hidden_size: expected an integer, got a string");
    /* required keys */
    expect_refused("{\"intermediate_size\":128,\"num_hidden_layers\":3}", GEMMA3_ERR_FORMAT,
                   "hidden_size: required key missing");
    expect_refused("{\"hidden_size\":64,\"num_hidden_layers\":3}", GEMMA3_ERR_FORMAT,
                   "intermediate_size: required key missing");
    expect_refused("{\"hidden_size\":64,\"intermediate_size\":3}", GEMMA3_ERR_FORMAT,
                   "num_hidden_layers: required key missing");
    expect_refused("{\"model_type\":\"gemma3\",\"text_config\":{\"hidden_size\":64,"
                   "\"num_hidden_layers\":3}}",
                   GEMMA3_ERR_FORMAT, "text_config.intermediate_size: required key missing");
    /* layout */
    expect_refused("{\"model_type\":\"gemma3\"}", GEMMA3_ERR_FORMAT, "text_config: required key missing");
    expect_refused("{\"model_type\":\"gemma3\",\"text_config\":\"x\"}", GEMMA3_ERR_FORMAT,
                   "text_config: expected an object, got a string");
    expect_refused("{\"model_type\":\"llama\"," BASE "}", GEMMA3_ERR_UNSUPPORTED,
                   "model_type: 'llama' is not supported");
    expect_refused("{\"architectures\":[\"Gemma2ForCausalLM\"]," BASE "}", GEMMA3_ERR_UNSUPPORTED,
                   "architectures: 'Gemma2ForCausalLM' is not supported");
    expect_refused("{\"architectures\":\"Gemma3ForCausalLM\"," BASE "}", GEMMA3_ERR_FORMAT,
                   "architectures: expected a list of strings");
    expect_refused("[1]", GEMMA3_ERR_FORMAT, "expected a JSON object, got an array");
    expect_refused("{\"hidden_size\":", GEMMA3_ERR_FORMAT, "not valid JSON");
}

/* The whole file is read strictly: a key given twice (anywhere) or bytes after the value. */
static void test_strict_json(void) {
    expect_refused("{" BASE ",\"vocab_size\":100,\"vocab_size\":200}", GEMMA3_ERR_FORMAT,
                   "key 'vocab_size' appears twice");
    expect_refused("{" BASE ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2,\"factor\":8}}",
                   GEMMA3_ERR_FORMAT, "key 'rope_scaling.factor' appears twice");
    expect_refused("{" BASE "} {}", GEMMA3_ERR_FORMAT, "bytes after the end of the JSON value (at byte");
    expect_refused("{" BASE "}x", GEMMA3_ERR_FORMAT, "bytes after the end");
    g3_config c;
    CHECK_MSG(parse("{" BASE "}  \n\t", &c) == GEMMA3_OK, "%s", gemma3_last_error());
}

/* Values that parse as doubles but break the float constants the forward pass derives. */
static void test_derived_constants(void) {
    /* 1e-300 is a positive double but 0 as a float: the frequency would be infinite */
    expect_refused("{" BASE ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":1e-300}}",
                   GEMMA3_ERR_FORMAT, "RoPE scaling factor 0 is not a positive finite float");
    /* a denormal factor: 1 / 1e-40 overflows the float frequency */
    expect_refused("{" BASE ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":1e-40}}",
                   GEMMA3_ERR_FORMAT, "RoPE frequency 0 is inf");
    /* a finite frequency whose angle at the last position overflows */
    expect_refused("{" BASE ",\"max_position_embeddings\":2000000000,\"rope_parameters\":"
                   "{\"full_attention\":{\"rope_type\":\"linear\",\"rope_theta\":10000,"
                   "\"factor\":1e-30}}}",
                   GEMMA3_ERR_FORMAT, "(angle inf at position 1999999999)");
    expect_refused("{" BASE ",\"query_pre_attn_scalar\":1e-50}", GEMMA3_ERR_FORMAT,
                   "query_pre_attn_scalar: 1e-50 is not a positive number");
    expect_refused("{" BASE ",\"rope_theta\":1e39}", GEMMA3_ERR_FORMAT,
                   "rope_theta: 1e+39 is not a positive number");
    /* ids must be rows of the embedding */
    expect_refused("{" BASE ",\"vocab_size\":100,\"eos_token_id\":[1,106]}", GEMMA3_ERR_FORMAT,
                   "eos_token_id: 106 is not in [0, vocab_size 100)");
    expect_refused("{" BASE ",\"vocab_size\":100,\"bos_token_id\":100,\"eos_token_id\":1}",
                   GEMMA3_ERR_FORMAT, "bos_token_id: 100 is not in [0, vocab_size 100)");
}

int main(void) {
    test_strict_json();
    test_derived_constants();
    test_golden();
    test_defaults();
    test_layer_types();
    test_rope();
    test_eos_softcap();
    test_refusals();
    return check_report();
}
