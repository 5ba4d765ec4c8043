/* gemma3.h - CPU inference for Google's Gemma 3 text models. The only public header.
 *
 *   gemma3_model *model;
 *   if (gemma3_model_load("models/gemma-3-1b-it", &model) != GEMMA3_OK) {
 *       fprintf(stderr, "%s\n", gemma3_last_error());
 *       return 1;
 *   }
 *   gemma3_session_params sp = gemma3_session_default_params();
 *   sp.n_ctx = 4096;
 *   gemma3_session *s;
 *   gemma3_session_init(model, &sp, &s);
 *   const gemma3_tokenizer *tok = gemma3_model_tokenizer(model);
 *   int32_t ids[256];
 *   int n = gemma3_tokenizer_encode(tok, "Hello", 5, GEMMA3_TOK_BOS, ids, 256);
 *   gemma3_session_forward(s, ids, n, NULL);      // prefill; logits of the last token
 *   const float *logits = gemma3_session_logits(s); // [vocab_size]
 *   ...
 *   gemma3_session_free(s);
 *   gemma3_model_free(model);
 *
 * Conventions: fallible calls return GEMMA3_OK (0) or a negative GEMMA3_ERR_* code and record a
 * one-line message readable with gemma3_last_error(); constructors take an out-pointer. Every
 * *_free accepts NULL. The library never prints and never exits. */
#ifndef GEMMA3_H
#define GEMMA3_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ------------------------------------------------------------------------------ */

enum gemma3_status {
    GEMMA3_OK = 0,
    GEMMA3_ERR_IO = -1,          /* a file could not be opened, read or mapped */
    GEMMA3_ERR_FORMAT = -2,      /* a file is malformed (bad header, JSON, shape, protobuf...) */
    GEMMA3_ERR_UNSUPPORTED = -3, /* well-formed but asks for something the engine does not do */
    GEMMA3_ERR_NOMEM = -4,
    GEMMA3_ERR_ARG = -5,         /* a caller passed an invalid value */
    GEMMA3_ERR_CONTEXT = -6,     /* the context window is full */
    GEMMA3_ERR_ABORTED = -7,     /* stopped by the caller's abort callback */
};

/* The message of this thread's last error ("" if none). Valid until the next error. */
const char *gemma3_last_error(void);

/* ---- model and session ------------------------------------------------------------------- */

typedef struct gemma3_model gemma3_model;         /* weights (mmap'd) + config + tokenizer; immutable */
typedef struct gemma3_session gemma3_session;     /* KV cache, scratch, thread pool; one sequence */
typedef struct gemma3_tokenizer gemma3_tokenizer; /* SentencePiece model; immutable */

/* Loads a Hugging Face Gemma 3 checkpoint directory: config.json, model.safetensors or
 * model.safetensors.index.json + shards, and tokenizer.model if present. */
int gemma3_model_load(const char *dir, gemma3_model **out);
void gemma3_model_free(gemma3_model *model);

/* The checkpoint's tokenizer, or NULL when the directory has no tokenizer.model. Owned by the model. */
const gemma3_tokenizer *gemma3_model_tokenizer(const gemma3_model *model);

typedef struct gemma3_model_info {
    const char *architecture;   /* "Gemma3ForCausalLM" or "Gemma3ForConditionalGeneration" */
    int vocab_size;             /* rows of the embedding = length of a logits vector */
    int hidden_size, intermediate_size;
    int n_layers, n_heads, n_kv_heads, head_dim;
    int sliding_window;
    int max_position_embeddings;
    int bos_id;
    int n_eos;
    int eos_ids[8];
    int64_t n_params;           /* text-model parameters (tied head counted once) */
    int64_t weight_bytes;       /* bytes of text-model weights as stored */
} gemma3_model_info;
void gemma3_model_get_info(const gemma3_model *model, gemma3_model_info *info);

/* KV cache element type. The default is BF16: it halves the cache's memory and bandwidth (the
 * cache is the one structure that grows with the context, and decode reads all of it for every
 * token), and Hugging Face itself stores K and V in the model dtype (bf16). Its rounding error is
 * of the same order as the BF16 activations of the default mode (logits within ~5e-2 of the FP32
 * reference on the golden checkpoints). `exact` forces F32. */
enum gemma3_kv_type { GEMMA3_KV_F32 = 0, GEMMA3_KV_BF16 = 1 };

typedef struct gemma3_session_params {
    int n_ctx;          /* context length in tokens; 0 = 4096; capped at max_position_embeddings */
    int n_threads;      /* worker threads including the caller; 0 = all online CPUs */
    int kv_type;        /* enum gemma3_kv_type */
    int exact;          /* 1 = FP32 activations and FP32 KV cache everywhere (reference mode);
                         * 0 = matmul inputs rounded to BF16 (vdpbf16ps), kv_type cache */
    const char *isa;    /* "scalar", "avx2", "avx512" or NULL for the best the CPU has */
    int n_batch;        /* most tokens per prefill chunk (bounds the scratch); 0 = 512 */
} gemma3_session_params;
gemma3_session_params gemma3_session_default_params(void);

int gemma3_session_init(const gemma3_model *model, const gemma3_session_params *params,
                        gemma3_session **out);
void gemma3_session_free(gemma3_session *s);

/* Appends n_tokens at the session's position and runs the model over them. Afterwards
 * gemma3_session_logits() holds the last token's logits. If all_logits is not NULL it receives
 * [n_tokens][vocab_size] floats, row-major. GEMMA3_ERR_CONTEXT if the tokens do not fit. */
int gemma3_session_forward(gemma3_session *s, const int32_t *tokens, int n_tokens, float *all_logits);
const float *gemma3_session_logits(const gemma3_session *s);
int gemma3_session_pos(const gemma3_session *s);   /* tokens in the cache */
int gemma3_session_n_ctx(const gemma3_session *s);
void gemma3_session_reset(gemma3_session *s);      /* empties the cache; position 0 */
const char *gemma3_session_isa(const gemma3_session *s); /* the kernel set in use */

/* ---- tokenizer --------------------------------------------------------------------------- */

enum gemma3_tok_flags {
    GEMMA3_TOK_BOS = 1,           /* prepend <bos> */
    GEMMA3_TOK_PARSE_SPECIAL = 2, /* text of control pieces (<bos>, <eos>, <pad>...) becomes their id */
};

/* Loads a SentencePiece tokenizer.model (BPE with byte fallback). */
int gemma3_tokenizer_load(const char *path, gemma3_tokenizer **out);
void gemma3_tokenizer_free(gemma3_tokenizer *tok);
int gemma3_tokenizer_vocab_size(const gemma3_tokenizer *tok);

/* Encodes len bytes of UTF-8 text. Writes at most max_ids ids and returns the total count
 * (which may exceed max_ids: call again with a larger buffer), or a negative error. */
int gemma3_tokenizer_encode(const gemma3_tokenizer *tok, const char *text, size_t len, int flags,
                            int32_t *ids, int max_ids);

/* The piece text of an id as stored in the model (U+2581 for spaces), or NULL if out of range. */
const char *gemma3_tokenizer_piece(const gemma3_tokenizer *tok, int32_t id);

/* Decodes ids to text (U+2581 -> space, byte pieces reassembled), snprintf-style: writes at most
 * cap bytes including a NUL and returns the full length, or a negative error. */
int gemma3_tokenizer_decode(const gemma3_tokenizer *tok, const int32_t *ids, int n_ids, char *buf,
                            size_t cap);

/* Streaming decode for token-by-token output: push one id, get only complete UTF-8 sequences.
 * Zero-initialise before first use. */
typedef struct gemma3_decoder {
    unsigned char pending[8];
    int n_pending;
} gemma3_decoder;
/* Appends the text of id to out (cap bytes, NUL-terminated) and returns the bytes written. */
int gemma3_decoder_push(const gemma3_tokenizer *tok, gemma3_decoder *dec, int32_t id, char *out,
                        size_t cap);
/* Emits whatever is pending (invalid bytes as U+FFFD) and resets the decoder. */
int gemma3_decoder_flush(gemma3_decoder *dec, char *out, size_t cap);

enum gemma3_special {
    GEMMA3_SPECIAL_PAD, GEMMA3_SPECIAL_EOS, GEMMA3_SPECIAL_BOS, GEMMA3_SPECIAL_UNK,
    GEMMA3_SPECIAL_START_OF_TURN, GEMMA3_SPECIAL_END_OF_TURN,
};
/* Id of a special piece from the model's own vocabulary, or -1 if absent. */
int32_t gemma3_tokenizer_special(const gemma3_tokenizer *tok, enum gemma3_special which);

/* Gemma 3 chat format. role: "system" (first message only), "user", "model" or "assistant". */
typedef struct gemma3_chat_msg {
    const char *role;
    const char *content;
} gemma3_chat_msg;
/* Renders messages as ids: <bos><start_of_turn>user\n...<end_of_turn>\n..., with the system text
 * folded into the first user turn and, if add_generation_prompt, a trailing
 * <start_of_turn>model\n. add_bos = 0 omits the leading <bos> (continuing a cached conversation).
 * Count/return convention as gemma3_tokenizer_encode. */
int gemma3_chat_encode(const gemma3_tokenizer *tok, const gemma3_chat_msg *msgs, int n_msgs,
                       int add_bos, int add_generation_prompt, int32_t *ids, int max_ids);

/* ---- sampling ---------------------------------------------------------------------------- */
/* (section owned by sampling.c) */

#ifdef __cplusplus
}
#endif
#endif
