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
#include <stdio.h>

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
    GEMMA3_ERR_NUMERIC = -8,     /* the model produced a NaN or an infinity (bad weights) */
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

/* How weights are brought into memory. MMAP uses the files' pages in place (no copy, shared
 * page cache, and the only way to run a model larger than memory); they are faulted in at load
 * on n_threads threads when they fit. READ reads them into anonymous huge-page memory once, on
 * n_threads threads: a copy at load, but on the virtual machines this engine is measured on,
 * reading a file mapping is several times slower than reading anonymous memory, and decode
 * speed is bound by that read. AUTO (the default) reads when the checkpoint fits in 3/4 of the
 * memory that can be had (MemAvailable, which counts the reclaimable page cache, capped by the
 * memory cgroup's limit; the environment variable GEMMA3_MEM_AVAILABLE, in bytes, overrides it)
 * and maps otherwise; a checkpoint that fits and that the page cache already holds in 2 MiB
 * folios is kept mapped (populated: no copy, the same page-table reach as the read copy).
 * gemma3_model_info says what was chosen. */
enum gemma3_load_mode { GEMMA3_LOAD_AUTO = 0, GEMMA3_LOAD_MMAP = 1, GEMMA3_LOAD_READ = 2 };

/* Weight types. BF16 is how Gemma ships. Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 are llama.cpp's block
 * formats, byte for byte: per block of 32 weights an fp16 scale d and 32 int8 q (w = d*q, 34
 * bytes), or 16 bytes of 4-bit q (Q4_0: w = d*(q - 8), 18 bytes; Q4_1: with an fp16 minimum m,
 * w = d*q + m, 20 bytes), or 5-bit q, their fifth bits in 4 more bytes (Q5_0: w = d*(q - 16),
 * 22 bytes; Q5_1: w = d*q + m, 24 bytes). Every matrix is quantized (q/k/v/o, gate/up/down, the
 * embedding and LM head); norms stay as stored. With quantized weights the default mode
 * quantizes each matmul input to 8 bits per token (int8 dot products); `exact` multiplies the
 * fp32 activations with the dequantized blocks. */
enum gemma3_weight_type {
    GEMMA3_WEIGHTS_AS_STORED = 0, /* the checkpoint's own: BF16 (F16/F32 converted) or its blocks */
    GEMMA3_WEIGHTS_BF16 = 1,
    GEMMA3_WEIGHTS_Q8_0 = 2,
    GEMMA3_WEIGHTS_Q4_0 = 3,
    GEMMA3_WEIGHTS_Q4_1 = 4,
    GEMMA3_WEIGHTS_Q5_0 = 5,
    GEMMA3_WEIGHTS_Q5_1 = 6,
    /* llama.cpp's K-quants: super-blocks of 256 weights with 6-bit (Q4_K, Q5_K) or 8-bit (Q6_K)
     * sub-block scales */
    GEMMA3_WEIGHTS_Q4_K = 7,
    GEMMA3_WEIGHTS_Q5_K = 8,
    GEMMA3_WEIGHTS_Q6_K = 9,
    GEMMA3_WEIGHTS_COUNT, /* one past the last type (the library's type table has a row per value) */
    /* llama-quantize's K-quant mixes: recipes, not types. Each matrix gets one of the types above,
     * chosen as llama-quantize chooses without an importance matrix (quant-mix.h); accepted where
     * a weight type is (quantize --type, -q); a model reports the type most of its matrices have
     * (gemma3_model_info.weight_type) and the recipe (weight_mix). */
    GEMMA3_WEIGHTS_Q4_K_M = 64,
    GEMMA3_WEIGHTS_Q5_K_M = 65,
    GEMMA3_WEIGHTS_Q4_K_S = 66,
    GEMMA3_WEIGHTS_Q5_K_S = 67,
};
/* "bf16", "q8_0", "q4_0" ("as-stored" for GEMMA3_WEIGHTS_AS_STORED, "?" if invalid). */
const char *gemma3_weight_type_name(enum gemma3_weight_type type);
/* The type named "bf16", "q8_0" or "q4_0"; GEMMA3_ERR_ARG (negative) for any other name. */
int gemma3_weight_type_parse(const char *name);
/* 1 for a block-quantized type (what gemma3_quantize writes: Q8_0, Q4_0), else 0. */
int gemma3_weight_type_is_quantized(enum gemma3_weight_type type);
/* The names of every type ("bf16, q8_0, q4_0"), or of the quantized ones alone ("q8_0, q4_0"),
 * in enum order, as a front end lists them. */
const char *gemma3_weight_type_list(int quantized_only);

enum gemma3_repack { GEMMA3_REPACK_AUTO = 0, GEMMA3_REPACK_NONE = 1, GEMMA3_REPACK_X8 = 2 };

typedef struct gemma3_model_params {
    enum gemma3_load_mode load_mode;
    /* Q8_0 / Q4_0 on a BF16 (or F16/F32) checkpoint quantizes every matrix at load, on n_threads
     * threads, from the mapped files tensor by tensor (load_mode is then ignored for the source:
     * the peak is the quantized weights plus about one source tensor). On a directory written by
     * gemma3_quantize the blocks are used in place (or copied into the x8 layout: repack below);
     * asking for another type than its own is GEMMA3_ERR_UNSUPPORTED (no requantization). BF16
     * on a quantized directory likewise. */
    enum gemma3_weight_type weight_type;
    int n_threads; /* threads for reading, populating or quantizing at load, including the
                      caller; 0 = all online CPUs */
    /* 1: scan every weight at load (BF16 values, the fp16 scales of Q8_0/Q4_0 blocks) on
     * n_threads threads, and refuse a NaN or an infinity with the tensor and the element named
     * (GEMMA3_ERR_FORMAT; as llama.cpp's --check-tensors). The norms are always checked, and
     * the config's derived constants (RoPE frequencies, the attention scale) always validated. */
    int check_tensors;
    /* How Q8_0/Q4_0 matrices lie in memory. AUTO (0): interleaved in groups of 8 rows where this
     * CPU's quantized kernels read that fastest (AVX2 without AVX-512): quantizing at load writes
     * them so directly; a quantized directory is then copied into that layout on n_threads
     * threads instead of being used in place (as llama.cpp repacks Q4_0). NONE: the files' row
     * layout (a quantized directory used in place). X8: the groups on any CPU. The layout
     * changes the order of a few float additions (logits within rounding), never the blocks. */
    enum gemma3_repack repack;
    /* The kernels the sessions will use ("scalar", "avx2", "avx512"; NULL = gemma3_set_isa's
     * level): AUTO lays quantized matrices out for them. */
    const char *isa;
} gemma3_model_params;
/* The instruction set of every table this process chooses from now on when a caller names
 * none: the sessions' kernels, the quantizers at load and the sampler's passes (chosen at
 * gemma3_sampler_init). "scalar", "avx2" or "avx512"; NULL: the environment's GEMMA3_ISA if
 * set, else the best the CPU has (the default). GEMMA3_ERR_ARG for an unknown name,
 * GEMMA3_ERR_UNSUPPORTED for one this CPU lacks (nothing changed). Every level gives the
 * sampler the same bits; the kernels' differ by rounding. */
int gemma3_set_isa(const char *isa);

/* gemma3_model_load with params (NULL = defaults). */
int gemma3_model_load_ex(const char *dir, const gemma3_model_params *params, gemma3_model **out);
void gemma3_model_free(gemma3_model *model);

/* The checkpoint's tokenizer, or NULL when the directory has no tokenizer.model. Owned by the model. */
const gemma3_tokenizer *gemma3_model_tokenizer(const gemma3_model *model);

#define GEMMA3_MAX_EOS 8 /* most end-of-sequence ids a model reports */
#define GEMMA3_MAX_LAYERS 256

typedef struct gemma3_model_info {
    const char *architecture;   /* "Gemma3ForCausalLM" or "Gemma3ForConditionalGeneration" */
    int vocab_size;             /* rows of the embedding = length of a logits vector */
    int hidden_size, intermediate_size;
    int n_layers, n_heads, n_kv_heads, head_dim;
    int sliding_window;
    int max_position_embeddings;
    int bos_id;
    int n_eos;
    int eos_ids[GEMMA3_MAX_EOS];
    int64_t n_params;           /* text-model parameters (tied head counted once) */
    int64_t weight_bytes;       /* bytes of the text-model weights as used: bf16 or quantized
                                   blocks, plus the norms as stored */
    const char *weight_type;    /* the matrices' type in use: "bf16", "q8_0" or "q4_0" */
    double quantize_seconds;    /* wall time spent quantizing at load; 0 when nothing was */
    /* How the weights were brought in (added after the fields above; read them from here). */
    const char *load_mode;      /* "read" (anonymous memory), "mmap" (the files' pages in place)
                                   "read+mmap" (AUTO with shards, some beyond the budget),
                                   "quantized from mmap" (-q: the source mapped tensor by tensor)
                                   or "repacked from mmap" (a quantized directory copied into the
                                   x8 layout, mapped tensor by tensor) */
    int load_auto;              /* 1 when AUTO chose load_mode */
    int load_from_disk;         /* 1 when mapped files did not fit in memory: their pages are
                                   read from the disk as they are used (slow) */
    int64_t mem_available;      /* bytes of memory that could be had at load (what AUTO compared
                                   the checkpoint with) */
    int64_t load_bytes;         /* bytes of the checkpoint's files brought in */
    int64_t load_huge_bytes;    /* of those mapped, bytes mapped with 2 MiB page-table entries */
    double load_seconds;        /* wall time reading, or mapping and faulting in, those files */
    const char *weight_layout;  /* "rows" (as in the files), "x8" (groups of 8 rows, repacked) or
                                   "mixed" (a mix: the types with x8 kernels in x8, the others in rows) */
    double repack_seconds;      /* wall time copying a quantized directory into "x8"; 0 if none */
    /* The rest of the configuration (added after the fields above). */
    int multimodal;             /* the text settings came from text_config */
    float query_pre_attn_scalar, rms_norm_eps;
    float rope_theta_full, rope_factor_full, rope_theta_sliding, rope_factor_sliding;
    float attn_softcap, final_softcap; /* 0 = none */
    int pad_id;
    int tied_lm_head;           /* the LM head is the embedding */
    const char *tensor_prefix;  /* of the text model's tensors ("model.", ...); "" from a peek */
    char layer_types[GEMMA3_MAX_LAYERS + 1]; /* per layer: 'S' sliding window, 'F' full */
    int64_t stored_bytes;       /* the text-model weights in the files' own types (F32 4 bytes) */
    /* llama-quantize's recipe the matrices follow ("q4_k_m" ...) and llama-bench's name of it
     * ("Q4_K - Medium"); NULL when they are one type */
    const char *weight_mix, *weight_mix_label;
} gemma3_model_info;
void gemma3_model_get_info(const gemma3_model *model, gemma3_model_info *info);
/* The configuration fields of gemma3_model_info from DIR/config.json alone, checked as a load
 * checks them, with no weight read (the weight and load fields are 0; mem_available is set;
 * architecture stays valid until the next peek on this thread). */
int gemma3_model_peek(const char *dir, gemma3_model_info *info);
/* Bytes of the KV cache a session of n_ctx tokens allocates for this configuration. */
int64_t gemma3_kv_cache_bytes(const gemma3_model_info *info, int n_ctx, int kv_type); /* gemma3_kv_type */

/* Writes a quantized copy of the checkpoint in src_dir (BF16, F16 or F32; one file or shards)
 * to dst_dir (created if absent), type GEMMA3_WEIGHTS_Q8_0 or GEMMA3_WEIGHTS_Q4_0, quantizing on
 * n_threads threads (0 = all online CPUs). dst_dir then loads with no quantizing (in place, or
 * copied into the x8 layout where the CPU's kernels read that: gemma3_model_params.repack):
 *   model.safetensors  the text model's tensors under their Hugging Face names; each matrix as
 *                      dtype U8, shape [rows, bytes per row], each row its blocks in order in
 *                      llama.cpp's byte layout; norms copied as stored; contiguous offsets;
 *                      __metadata__ {"format": "pt", "gemma3.quant": "q8_0" | "q4_0"}.
 *                      (Vision-tower tensors are not copied.)
 *   config.json, generation_config.json, tokenizer.model, tokenizer.json,
 *   tokenizer_config.json, special_tokens_map.json, chat_template.jinja: copied when present.
 * It streams (tensor by tensor, bounded buffers: a model larger than memory can be quantized),
 * writes every file under a temporary name in dst_dir and renames them at the end; on any error
 * the temporaries are removed (and dst_dir too if this call created it). Refuses a source that
 * is already quantized, dst_dir == src_dir, and a dst_dir that is not empty (see
 * gemma3_quantize_ex). */
int gemma3_quantize(const char *src_dir, const char *dst_dir, enum gemma3_weight_type type,
                    int n_threads);
/* dst_dir must be absent or empty: the output directory holds exactly what was written (a stale
 * generation_config.json or a foreign tokenizer.model beside new weights would be read with
 * them). gemma3_quantize_ex with GEMMA3_QUANTIZE_REPLACE accepts a dst_dir holding files and,
 * once every new file is complete, removes all that it did not write (a subdirectory is refused,
 * never removed). */
enum { GEMMA3_QUANTIZE_REPLACE = 1 };
int gemma3_quantize_ex(const char *src_dir, const char *dst_dir, enum gemma3_weight_type type,
                       int n_threads, int flags);

/* The same model (a checkpoint directory or a GGUF) as one GGUF file at path that llama.cpp
 * loads (architecture gemma3, its metadata keys and tensor names; type bf16, q8_0 or q4_0 for
 * every matrix, the blocks byte-identical to llama-quantize --pure's), written under a temporary
 * name and renamed when complete (docs/gguf.md). */
int gemma3_quantize_gguf(const char *src, const char *path, enum gemma3_weight_type type,
                         int n_threads);
/* 1 if path names a GGUF file (rather than a checkpoint directory), else 0. */
int gemma3_model_is_gguf(const char *path);
/* Writes what a user needs to know of a GGUF to out: architecture, name, context length, size
 * and the tensors per type. */
int gemma3_gguf_describe(const char *path, FILE *out);
/* The tokenizer a GGUF carries (tokenizer.ggml.*); *out NULL for a GGUF without one. */
int gemma3_gguf_tokenizer(const char *path, gemma3_tokenizer **out);

/* KV cache element type. The default is BF16: it halves the cache's memory and bandwidth (the
 * cache is the one structure that grows with the context, and decode reads all of it for every
 * token), and Hugging Face itself stores K and V in the model dtype (bf16). Its rounding error is
 * of the same order as the BF16 activations of the default mode (logits within ~5e-2 of the FP32
 * reference on the golden checkpoints). `exact` forces F32. */
enum gemma3_kv_type { GEMMA3_KV_F32 = 0, GEMMA3_KV_BF16 = 1 };

typedef struct gemma3_session_params {
    int n_ctx;          /* context length in tokens; 0 = 4096; capped at max_position_embeddings */
    int n_threads;      /* worker threads including the caller; 0 = all online CPUs */
    enum gemma3_kv_type kv_type;
    int exact;          /* 1 = FP32 activations and FP32 KV cache everywhere (reference mode);
                         * 0 = matmul inputs rounded to BF16 (vdpbf16ps), kv_type cache */
    const char *isa;    /* "scalar", "avx2", "avx512" or NULL for gemma3_set_isa's level */
    int n_batch;        /* most tokens per prefill chunk (bounds the scratch); 0 = 512 */
    int n_swa_extra;    /* positions a sliding-window layer keeps beyond its window W (0): its
                         * ring has min(W + n_swa_extra, n_ctx) slots, so the cache can be cut
                         * back up to n_swa_extra + 1 tokens (gemma3_session_truncate), as a
                         * prompt cache wants; attention still sees only the window */
} gemma3_session_params;
gemma3_session_params gemma3_session_default_params(void);
/* Threads beyond a few per CPU only wait for a core while their buffers (attention scores sized
 * to the context, LM-head strips) take memory: a session or a load asked for more than
 * GEMMA3_THREADS_PER_CPU x the online CPUs gets that many. gemma3_threads_cap(n) is the number
 * used for n (0: the online CPUs). */
#define GEMMA3_THREADS_PER_CPU 4
int gemma3_threads_cap(int n_threads);

/* The KV cache is reserved address space for the whole n_ctx (no memory committed, nothing
 * zero-filled): its pages fault in as tokens are written, so a session's memory follows the
 * tokens it holds. A cache larger than the memory that can be had (MemAvailable capped by the
 * cgroup, or GEMMA3_MEM_AVAILABLE) is refused with GEMMA3_ERR_NOMEM naming both sizes. */
int gemma3_session_init(const gemma3_model *model, const gemma3_session_params *params,
                        gemma3_session **out);
void gemma3_session_free(gemma3_session *s);

/* Appends n_tokens at the session's position and runs the model over them. Afterwards
 * gemma3_session_logits() holds the last token's logits. If all_logits is not NULL it receives
 * [n_tokens][vocab_size] floats, row-major. GEMMA3_ERR_CONTEXT if the tokens do not fit (the
 * session is then unchanged). GEMMA3_ERR_NUMERIC ("logits are not finite at position N", N the
 * position of the token whose logits they are) the moment a step yields a NaN or an infinity in
 * the logits or in the final norm's output that feeds them: the tokens stay in the cache, so
 * reset the session before reusing it. Every returned logit is finite. */
int gemma3_session_forward(gemma3_session *s, const int32_t *tokens, int n_tokens, float *all_logits);
/* The same, with the logits of the last n_logits tokens only ([n_logits][vocab_size] floats
 * into logits): what a KL-divergence pass over a chunk's scored half needs, in one call. */
int gemma3_session_forward_last(gemma3_session *s, const int32_t *tokens, int n_tokens,
                                int n_logits, float *logits);
/* Scoring a text: appends the tokens as above and, for each of the last n_scored tokens, gives
 * the log-probability of the token that follows it, logprob[i] = log softmax(logits)[next[i]]
 * (next[i] in [0, vocab_size)), without holding the logits: the LM head runs in cache-sized
 * strips of the vocabulary, each reduced to its log-sum-exp while in cache, which makes a
 * perplexity pass about as fast as a prefill. The strips are fixed (1,024 rows), so the numbers
 * do not depend on the thread count or batch split. Errors as gemma3_session_forward (a
 * non-finite logit or norm output: GEMMA3_ERR_NUMERIC); gemma3_session_logits() is not updated. */
int gemma3_session_forward_logprob(gemma3_session *s, const int32_t *tokens, int n_tokens,
                                   int n_scored, const int32_t *next, double *logprob);
/* A way to stop a long forward call (a prefill, a perplexity chunk) from another context (a
 * signal handler sets a flag that fn reads): fn(ctx) is asked before each chunk of n_batch
 * tokens and between the layers of a chunk, and a non-zero answer ends the call with
 * GEMMA3_ERR_ABORTED. Stopped before a chunk, the session holds the chunks that were done
 * (gemma3_session_pos); stopped inside one, it is reset (empty), since a sliding-window layer
 * may already have given the chunk ring slots that older positions needed. fn = NULL: never. */
void gemma3_session_set_abort(gemma3_session *s, int (*fn)(void *ctx), void *ctx);
const float *gemma3_session_logits(const gemma3_session *s);
int gemma3_session_pos(const gemma3_session *s);   /* tokens in the cache */
int gemma3_session_n_ctx(const gemma3_session *s);
int gemma3_session_n_threads(const gemma3_session *s);
int gemma3_session_n_vocab(const gemma3_session *s);  /* length of a logits vector */
void gemma3_session_reset(gemma3_session *s);      /* empties the cache (its pages given back);
                                                      position 0 */
const char *gemma3_session_isa(const gemma3_session *s); /* the kernel set in use */
/* The ids of the tokens in the cache, [gemma3_session_pos]. Owned by the session. */
const int32_t *gemma3_session_tokens(const gemma3_session *s);
/* Keeps the first n_tokens of the cache (the next forward continues at position n_tokens; the
 * logits are stale until then). A sliding-window layer keeps a ring of the last W +
 * n_swa_extra positions (fewer after a load of a state that holds fewer), and the position cut
 * back to needs the W - 1 before it: n_tokens below gemma3_session_truncate_min() is
 * GEMMA3_ERR_UNSUPPORTED (session unchanged). 0 always works. */
int gemma3_session_truncate(gemma3_session *s, int n_tokens);
int gemma3_session_truncate_min(const gemma3_session *s);
/* gemma3_session_truncate, then the session's last logits (gemma3_session_logits, saved state)
 * become logits[vocab_size] (NULL: left as they are): the row a gemma3_session_forward_last gave
 * after token n_tokens - 1, so the session reads as if the tokens after it had never been fed
 * (speculative decoding drops rejected drafts so). */
int gemma3_session_rewind(gemma3_session *s, int n_tokens, const float *logits);

/* ---- saved state ------------------------------------------------------------------------- */
/* A session's state (token ids, position, the last logits and every layer's KV cache, the
 * sliding layers' rings included) saved so that a session of the same model, weight type, KV
 * type and mode continues bit-identically: logits after load + N tokens equal those of an
 * uninterrupted run. The file starts with a magic, a format version and a fingerprint of the
 * model (config, weight type, and a hash of the weights' types, sizes and sampled bytes) and of
 * the session settings (KV type, exact); a load refuses any difference with one line naming it,
 * as well as a file that is truncated or fails its checksums, and leaves the session as it was.
 * n_ctx may differ as long as the saved tokens fit. Saving writes a temporary file and renames
 * it over path, so an interrupted save never destroys the previous file. */
int gemma3_session_save(gemma3_session *s, const char *path);
int gemma3_session_load(gemma3_session *s, const char *path);
/* The same as bytes in memory: the size the state takes now, the state written into buf
 * (GEMMA3_ERR_ARG if cap is less than that size), and a state read back from size bytes. */
size_t gemma3_session_state_size(gemma3_session *s);
int gemma3_session_save_buffer(gemma3_session *s, void *buf, size_t cap);
int gemma3_session_load_buffer(gemma3_session *s, const void *buf, size_t size);

/* ---- tokenizer --------------------------------------------------------------------------- */

enum gemma3_tok_flags {
    GEMMA3_TOK_BOS = 1,           /* prepend <bos> (gemma3_tokenizer_add_bos: whether the model wants it) */
    GEMMA3_TOK_PARSE_SPECIAL = 2, /* text of control/unknown pieces (<bos>, <eos>, <pad>, <unk>)
                                     becomes their id, as HF tokenizers do; off for user text.
                                     User-defined pieces (<start_of_turn>...) always match. */
    GEMMA3_TOK_MARKERS_AS_TEXT = 4, /* the turn markers <start_of_turn> and <end_of_turn> in the
                                     text are encoded as plain text (their first byte and the
                                     rest as two runs of BPE, so never as the marker ids), for
                                     untrusted text that must not open or close a turn */
};

/* Loads a SentencePiece tokenizer.model (BPE, with or without byte fallback). Other model
 * types (unigram, word, char) and non-identity normalizers give GEMMA3_ERR_UNSUPPORTED. */
int gemma3_tokenizer_load(const char *path, gemma3_tokenizer **out);
void gemma3_tokenizer_free(gemma3_tokenizer *tok);
int gemma3_tokenizer_vocab_size(const gemma3_tokenizer *tok);

/* 1 if a prompt for this model starts with <bos>: a GGUF's tokenizer.ggml.add_bos_token (true when
 * absent), and always for a tokenizer.model (Gemma's convention). The front end adds
 * GEMMA3_TOK_BOS, and a chat's leading <bos>, only when this says so. */
int gemma3_tokenizer_add_bos(const gemma3_tokenizer *tok);
/* Encodes len bytes of UTF-8 text. Writes at most max_ids ids and returns the total count
 * (which may exceed max_ids: call again with a larger buffer), or a negative error. ids may be
 * NULL when max_ids is 0. Invalid UTF-8 bytes become byte pieces (or <unk>). */
int gemma3_tokenizer_encode(const gemma3_tokenizer *tok, const char *text, size_t len, int flags,
                            int32_t *ids, int max_ids);

/* The piece text of an id as stored in the model (U+2581 for spaces), or NULL if out of range. */
const char *gemma3_tokenizer_piece(const gemma3_tokenizer *tok, int32_t id);

/* The bytes id adds to decoded text in the middle of a text (U+2581 as a space, a byte piece as
 * its byte), snprintf-style into buf[cap] (not NUL-terminated); -1 for ids that decode to no
 * text of their own (control pieces, <unk>) or out of range. */
int gemma3_tokenizer_token_bytes(const gemma3_tokenizer *tok, int32_t id, char *buf, size_t cap);

/* Decodes ids to text (U+2581 -> space, byte pieces reassembled), snprintf-style: writes at most
 * cap bytes including a NUL and returns the full length, or a negative error. Control pieces
 * decode to nothing, <unk> to the model's unk_surface (" \u2047 "), byte sequences that are not
 * valid UTF-8 to U+FFFD. buf may be NULL when cap is 0. */
int gemma3_tokenizer_decode(const gemma3_tokenizer *tok, const int32_t *ids, int n_ids, char *buf,
                            size_t cap);

/* Streaming decode for token-by-token output: push one id, get only complete UTF-8 sequences.
 * Zero-initialise before first use. */
typedef struct gemma3_decoder {
    unsigned char pending[8];
    int n_pending;
    int started; /* some text was decoded (a dummy-prefix space is dropped only before that) */
} gemma3_decoder;
/* Writes the newly complete text of id to out (cap bytes, NUL-terminated) and returns the bytes
 * written, or GEMMA3_ERR_ARG (decoder unchanged) if they do not fit. Concatenating every push and
 * the flush gives exactly gemma3_tokenizer_decode's text. */
int gemma3_decoder_push(const gemma3_tokenizer *tok, gemma3_decoder *dec, int32_t id, char *out,
                        size_t cap);
/* Emits whatever is pending (an incomplete sequence as one U+FFFD; cap >= 4) and resets the
 * decoder. */
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
 * As chat_template.jinja: contents are trimmed, the system text is not; roles after the system
 * message must alternate user/model starting with user (else GEMMA3_ERR_ARG). Message text is
 * encoded without GEMMA3_TOK_PARSE_SPECIAL. Count/return convention as gemma3_tokenizer_encode. */
int gemma3_chat_encode(const gemma3_tokenizer *tok, const gemma3_chat_msg *msgs, int n_msgs,
                       int add_bos, int add_generation_prompt, int32_t *ids, int max_ids);
/* The same with tokenizer flags for the message text: 0 (gemma3_chat_encode: turn markers typed
 * in a message become the marker ids, as SentencePiece and Hugging Face encode them) or
 * GEMMA3_TOK_MARKERS_AS_TEXT (they stay text). */
int gemma3_chat_encode_ex(const gemma3_tokenizer *tok, const gemma3_chat_msg *msgs, int n_msgs,
                          int add_bos, int add_generation_prompt, int flags, int32_t *ids,
                          int max_ids);

/* ---- sampling ---------------------------------------------------------------------------- */
/* A sampler turns a logits vector into a token id. It knows nothing of the model: logits
 * [n_vocab], the recent token history (gemma3_sampler_accept) and parameters in, a token out.
 *
 *   gemma3_sampler_params sp = gemma3_sampler_default_params();  // Gemma: T 1, top-k 64, top-p 0.95
 *   gemma3_sampler *smp;
 *   gemma3_sampler_init(&sp, info.vocab_size, &smp);
 *   int32_t tok = gemma3_sampler_sample(smp, gemma3_session_logits(s), gemma3_session_pos(s));
 *   gemma3_sampler_accept(smp, tok);
 *
 * Chain. Logit bias (and --ignore-eos) always runs first; then the samplers of `samplers[]` in
 * order (llama.cpp's names and --sampling-seq letters, below); then the final draw: a CDF walk
 * (mode CDF) or argmax(logit + Gumbel noise) (mode GUMBEL), both exact draws from the softmax of
 * the surviving logits. The default chain is "edtskymcnpx": penalties, DRY, temperature,
 * top-n-sigma, top-k, typical, min-p, epsilon, eta, top-p, XTC (temperature BEFORE the filters,
 * as HF transformers does);
 * GEMMA3_SAMPLER_SEQ_LLAMA gives llama.cpp's order exactly (temperature last). Samplers whose
 * parameters say "off" do nothing. Mirostat 1/2 replaces the chain by bias -> temperature ->
 * mirostat, as llama.cpp does.
 *
 * Greedy. temperature == 0 returns the argmax (lowest id on ties) of the logits after bias,
 * penalties and DRY; the truncation samplers and XTC are skipped and no random number is used.
 *
 * Randomness is a pure function of (seed, position, purpose, token id): the same seed and
 * position give the same draw, whatever happened before (re-running a step reproduces it).
 * Mirostat's mu is the only state that sampling itself updates (gemma3_sampler_reset restores it).
 *
 * Non-finite logits, documented rules: NaN counts as -inf. If any logit (after bias) is +inf,
 * the +inf tokens share all the mass uniformly (the limit of the softmax) and the others get
 * none. -inf tokens (bans) are never drawn. If nothing finite is left (all -inf or NaN), the
 * sampler returns the argmax of the caller's raw logits ignoring NaN and bias (lowest id), or 0
 * when every logit is NaN. A finite logit that overflows under temperature or penalties becomes
 * FLT_MAX, not +inf. top_k > n_vocab keeps everything; top_p 0 keeps the top token, 1 is off;
 * min_p > 1 keeps the top token. The result is always in [0, n_vocab). */
typedef struct gemma3_sampler gemma3_sampler;

enum gemma3_sampler_type {       /* --samplers name, --sampling-seq letter */
    GEMMA3_SAMPLER_PENALTIES,    /* penalties     e: repeat, frequency, presence */
    GEMMA3_SAMPLER_DRY,          /* dry           d */
    GEMMA3_SAMPLER_TOP_N_SIGMA,  /* top_n_sigma   s */
    GEMMA3_SAMPLER_TOP_K,        /* top_k         k */
    GEMMA3_SAMPLER_TYPICAL_P,    /* typ_p         y */
    GEMMA3_SAMPLER_TOP_P,        /* top_p         p */
    GEMMA3_SAMPLER_MIN_P,        /* min_p         m */
    GEMMA3_SAMPLER_XTC,          /* xtc           x */
    GEMMA3_SAMPLER_TEMPERATURE,  /* temperature   t (with dynamic temperature) */
    GEMMA3_SAMPLER_EPSILON,      /* epsilon_cutoff c: Hugging Face's epsilon sampling */
    GEMMA3_SAMPLER_ETA,          /* eta_cutoff    n: Hugging Face's eta sampling */
    GEMMA3_SAMPLER_N_TYPES
};
#define GEMMA3_SAMPLER_SEQ_DEFAULT "edtskymcnpx"
#define GEMMA3_SAMPLER_SEQ_LLAMA "edskypmxt"

enum gemma3_sampler_mode { GEMMA3_SAMPLER_MODE_CDF = 0, GEMMA3_SAMPLER_MODE_GUMBEL = 1 };

#define GEMMA3_SEED_RANDOM 0xFFFFFFFFu   /* seed value meaning "pick one" (llama.cpp's default) */
#define GEMMA3_SAMPLER_MAX_CHAIN 16
#define GEMMA3_SAMPLER_MAX_BIAS 256
#define GEMMA3_SAMPLER_MAX_BREAKERS 16
#define GEMMA3_SAMPLER_MAX_BREAKER_LEN 20
#define GEMMA3_SAMPLER_MAX_EOS 8

typedef struct gemma3_logit_bias {
    int32_t token;
    float bias;                  /* -INFINITY bans the token */
} gemma3_logit_bias;

/* Every field has llama.cpp's meaning; "off" values in brackets. A plain struct: fill it, pass it
 * to gemma3_sampler_init (which copies it). */
typedef struct gemma3_sampler_params {
    uint32_t seed;               /* GEMMA3_SEED_RANDOM: from /dev/urandom; read the result back
                                    with gemma3_sampler_seed */
    enum gemma3_sampler_mode mode;
    float temperature;           /* 1.0; 0 = greedy */
    int top_k;                   /* 64 [0] */
    float top_p;                 /* 0.95 [>= 1] */
    float min_p;                 /* 0 [<= 0] */
    float typical_p;             /* 1 [>= 1] */
    float top_n_sigma;           /* -1 [<= 0] */
    int min_keep;                /* 0: floor on what top-p, min-p, typical and XTC keep */
    float repeat_penalty;        /* 1 [== 1] */
    int repeat_last_n;           /* 64; 0 = off, -1 = n_ctx */
    float frequency_penalty;     /* 0 */
    float presence_penalty;      /* 0 */
    float dry_multiplier;        /* 0 [== 0] */
    float dry_base;              /* 1.75 [< 1 disables DRY] */
    int dry_allowed_length;      /* 2 */
    int dry_penalty_last_n;      /* -1 = n_ctx; 0 = off */
    /* DRY sequence breakers as token-id sequences (sampling knows no tokenizer: the CLI encodes
     * llama.cpp's default strings "\n" ":" "\"" "*" or the user's). A match never extends back
     * across a breaker, and a token that is a one-token breaker is never penalised. */
    int n_dry_breakers;
    int dry_breaker_len[GEMMA3_SAMPLER_MAX_BREAKERS];
    int32_t dry_breakers[GEMMA3_SAMPLER_MAX_BREAKERS][GEMMA3_SAMPLER_MAX_BREAKER_LEN];
    float xtc_probability;       /* 0 [<= 0] */
    float xtc_threshold;         /* 0.1 [> 0.5] */
    float dynatemp_range;        /* 0 [<= 0] */
    float dynatemp_exponent;     /* 1 */
    int mirostat;                /* 0 = off, 1 = v1, 2 = v2 */
    float mirostat_tau;          /* 5 (target surprise, bits) */
    float mirostat_eta;          /* 0.1 (learning rate) */
    float epsilon_cutoff;        /* 0 [<= 0]: drop p < epsilon (HF's EpsilonLogitsWarper) */
    float eta_cutoff;            /* 0 [<= 0]: drop p < min(eta, sqrt(eta) e^-H) (HF's
                                    EtaLogitsWarper) */
    int n_ctx;                   /* window for last_n == -1; 0 = 4096 */
    int n_logit_bias;
    gemma3_logit_bias logit_bias[GEMMA3_SAMPLER_MAX_BIAS];
    int ignore_eos;              /* 1: every eos_ids[] token gets a -inf bias */
    int n_eos;
    int32_t eos_ids[GEMMA3_SAMPLER_MAX_EOS];
    int n_samplers;              /* the chain, enum gemma3_sampler_type values, in order */
    enum gemma3_sampler_type samplers[GEMMA3_SAMPLER_MAX_CHAIN];
} gemma3_sampler_params;

gemma3_sampler_params gemma3_sampler_default_params(void);

/* The accepted range of each numeric sampler parameter: the one source of truth.
 * gemma3_sampler_init refuses a value outside it (or NaN), and a front end checks and prints the
 * same bounds (the gemma3 command does). */
typedef struct gemma3_param_range {
    const char *name;            /* the field's name, "temperature" */
    size_t offset;               /* offsetof(gemma3_sampler_params, field) */
    int is_int;                  /* an int field, else a float */
    double min, max;             /* inclusive */
    double def;                  /* its value in gemma3_sampler_default_params */
    const char *hf_key;          /* its key in Hugging Face's generation_config.json, or NULL */
    const char *flags;           /* the gemma3 command's spellings, "--temp, --temperature", or
                                    NULL (llama.cpp's flags) */
    const char *help;            /* one line for --help */
} gemma3_param_range;
/* The range of the field at `offset` in gemma3_sampler_params; NULL for a field without one. */
const gemma3_param_range *gemma3_sampler_param_range(size_t offset);

/* Validates params (GEMMA3_ERR_ARG naming the field and its range) and allocates every buffer,
 * sized to n_vocab, once: sampling itself never allocates. */
int gemma3_sampler_init(const gemma3_sampler_params *params, int n_vocab, gemma3_sampler **out);
void gemma3_sampler_free(gemma3_sampler *s);

/* Appends a token to the history the penalties and DRY look at (prompt tokens too, if the caller
 * wants them counted, as llama.cpp's --repeat-last-n does). GEMMA3_ERR_ARG if out of range. */
int gemma3_sampler_accept(gemma3_sampler *s, int32_t token);

/* Draws the token at absolute position `position` (the RNG counter) from logits [n_vocab],
 * which are not modified. Returns a token id in [0, n_vocab), or GEMMA3_ERR_ARG for NULL args.
 * It does not add the token to the history: call gemma3_sampler_accept. No allocation. */
int32_t gemma3_sampler_sample(gemma3_sampler *s, const float *logits, int64_t position);

/* The n_vocab the sampler was made for. */
int gemma3_sampler_n_vocab(const gemma3_sampler *s);

/* gemma3_sampler_sample restricted to the ids whose bit is set in `allowed` ((n_vocab + 31) / 32
 * words, bit id & 31 of word id >> 5; NULL = no restriction): forbidden ids get -inf right after the logit bias, before
 * every other sampler, so the draw (CDF, Gumbel or greedy) is the chain's distribution
 * renormalised over the allowed ids. When nothing finite survives, the fallback is the argmax of
 * the raw logits over the allowed ids that no -inf bias (or ignore_eos) bans. GEMMA3_ERR_ARG if
 * no id is left (`allowed` has no bit set in range, or every allowed id is banned). */
int32_t gemma3_sampler_sample_masked(gemma3_sampler *s, const float *logits, int64_t position,
                                     const uint32_t *allowed);

/* 1 when a masked draw equals the unmasked draw whenever the unmasked token is allowed, for any
 * mask (greedy: the argmax of a subset that holds the overall argmax is that argmax). A caller
 * can then draw unmasked first and build the mask only when that token is forbidden. */
int gemma3_sampler_mask_commutes(const gemma3_sampler *s);

/* Forgets the history and restores mirostat's mu (2 * tau). The seed is kept. */
void gemma3_sampler_reset(gemma3_sampler *s);

/* The seed in use (resolved when params.seed was GEMMA3_SEED_RANDOM), so a run can be replayed. */
uint32_t gemma3_sampler_seed(const gemma3_sampler *s);

/* Set params->samplers from --sampling-seq letters ("edskypmxt") or from --samplers names
 * separated by ';' (llama.cpp's names and aliases: "top_k;top-p;temperature"). The single words
 * "llama.cpp" / "default" select the presets. GEMMA3_ERR_ARG names the unknown letter or name. */
int gemma3_sampler_chain_from_seq(const char *letters, gemma3_sampler_params *params);
int gemma3_sampler_chain_from_names(const char *names, gemma3_sampler_params *params);
/* llama.cpp's canonical name of a sampler type ("top_k"), or "?" */
const char *gemma3_sampler_type_name(int type);

/* A sampler of the chain as users name and set it (the public part of the library's one
 * descriptor per sampler): the names and letter the functions above accept, its parameters with
 * their ranges, defaults and generation_config.json keys. */
typedef struct gemma3_sampler_info {
    int type;                         /* enum gemma3_sampler_type */
    char letter;                      /* --sampling-seq */
    const char *name;                 /* --samplers: llama.cpp's canonical name */
    const char *const *aliases;       /* the other names --samplers accepts, NULL-terminated */
    const char *summary;              /* one line */
    int n_params;
    const gemma3_param_range *params; /* [n_params] */
} gemma3_sampler_info;
/* The sampler of enum value `type`, NULL outside [0, GEMMA3_SAMPLER_N_TYPES). */
const gemma3_sampler_info *gemma3_sampler_info_get(int type);

/* Reads Hugging Face's generation_config.json at `path` into params: every key a sampler
 * parameter names (gemma3_param_range.hf_key, "repetition_penalty" for repeat_penalty) and
 * eos_token_id (an id or a list of ids), each checked as gemma3_sampler_init checks its field.
 * A field for which keep(offsetof(gemma3_sampler_params, field), ctx) returns 1 is left as it
 * is (keep may be NULL); eos_token_id's field is eos_ids. GEMMA3_OK without a change when the
 * file does not exist; GEMMA3_ERR_IO / GEMMA3_ERR_FORMAT naming the file and the key, and
 * params untouched, when it cannot be read or a value is malformed or out of range. */
int gemma3_sampler_params_load_hf(const char *path, gemma3_sampler_params *params,
                                  int (*keep)(size_t offset, void *ctx), void *ctx);

/* ---- grammars (constrained output) ---------------------------------------------------------
 * A grammar in llama.cpp's GBNF restricts what the model may write: rules `name ::= ...` with
 * alternatives |, groups ( ), repetitions * + ? {m} {m,} {m,n} {,n}, "literals", [character
 * classes] with ranges and ^ negation, . (any character), escapes \x.. \u.... \U........ \t \n
 * \r, # comments; `root` is the start rule. It is matched over Unicode characters while tokens
 * bring bytes, so a token may end or begin inside a character.
 *
 *   gemma3_grammar *gr;
 *   gemma3_grammar_init_tokenizer(text, strlen(text), tok, stop_ids, n_stop, n_vocab, &gr);
 *   for (;;) {
 *       int32_t t = gemma3_grammar_sample(gr, smp, gemma3_session_logits(s), pos);
 *       gemma3_grammar_accept(gr, t);        // before stopping on a stop id: it checks it
 *       if (is_stop(t)) break;
 *       ...
 *   }
 *
 * The grammar gives the sampler a mask over ids (gemma3_sampler_sample_masked): a token is
 * allowed when its bytes continue the text towards a match, and an end id (the vocabulary's
 * end_ids) exactly when the text so far is a complete match. Masks are computed by walking a
 * trie of the pieces with the grammar's stacks and are cached per grammar state. A grammar object
 * holds the state of one reply and its caches: one per session, used from one thread at a time. */
typedef struct gemma3_grammar gemma3_grammar;

/* The vocabulary a grammar constrains: the bytes each id adds to the text. */
typedef struct gemma3_grammar_vocab {
    int32_t n_vocab;
    const char *const *piece;    /* [n_vocab]; NULL (or length 0): the id is never allowed */
    const int32_t *piece_len;    /* [n_vocab] */
    int n_end;                   /* end-of-generation ids, allowed exactly when the text matches */
    const int32_t *end_ids;
} gemma3_grammar_vocab;

/* Parses and checks the grammar (GEMMA3_ERR_FORMAT, message "grammar:LINE:COLUMN: expected ..."
 * for a syntax error; also for an undefined rule, no root, left recursion, a grammar that can
 * never finish, or one no token can start; GEMMA3_ERR_UNSUPPORTED, in the same form, for one whose
 * repetitions expand past the engine's 2^20 elements) and prepares the masks for vocab (copied). */
int gemma3_grammar_init(const char *text, size_t len, const gemma3_grammar_vocab *vocab,
                        gemma3_grammar **out);
/* The same with a tokenizer's pieces as they decode (gemma3_tokenizer_token_bytes); control
 * pieces, <unk> and <start_of_turn> are never allowed. end_ids: the ids that end a reply.
 * n_vocab: the length of the logits the masks apply to (the model's vocab_size, which may exceed
 * the tokenizer's: ids past it are never allowed); 0 = the tokenizer's size. */
int gemma3_grammar_init_tokenizer(const char *text, size_t len, const gemma3_tokenizer *tok,
                                  const int32_t *end_ids, int n_end, int32_t n_vocab,
                                  gemma3_grammar **out);
/* Syntax and semantic checks only, no vocabulary (a front end's early refusal). */
int gemma3_grammar_check(const char *text, size_t len);
void gemma3_grammar_free(gemma3_grammar *g);
/* Back to the start (the next reply). */
void gemma3_grammar_reset(gemma3_grammar *g);
/* The ids allowed next, [ (n_vocab + 31) / 32 ] words; valid until the next call on g. NULL on
 * error (a limit on the grammar's states; message in gemma3_last_error). */
const uint32_t *gemma3_grammar_mask(gemma3_grammar *g);
/* 1 if id may come next, 0 if not, < 0 on error. */
int gemma3_grammar_allows(gemma3_grammar *g, int32_t id);
/* Advances over id (an end id finishes the grammar); GEMMA3_ERR_ARG if it is not allowed. */
int gemma3_grammar_accept(gemma3_grammar *g, int32_t id);
/* 1 when the text so far is a complete match (an end id is allowed). */
int gemma3_grammar_can_end(const gemma3_grammar *g);
/* 1 after an end id was accepted. */
int gemma3_grammar_finished(const gemma3_grammar *g);
/* Draws the next token under the grammar: gemma3_sampler_sample_masked with its mask; when the
 * sampler's draw commutes with masks (greedy) the unmasked draw is tried first and the mask is
 * only built when that token is forbidden. The token is not accepted (call
 * gemma3_grammar_accept and gemma3_sampler_accept). */
int32_t gemma3_grammar_sample(gemma3_grammar *g, gemma3_sampler *s, const float *logits,
                              int64_t position);

/* A JSON schema (text) as a GBNF grammar whose root matches the JSON documents it describes:
 * type (one or a list), properties with required/optional (in the schema's order),
 * additionalProperties, enum, const, items, prefixItems, minItems/maxItems,
 * minLength/maxLength, integer minimum/maximum/exclusiveMinimum/exclusiveMaximum, format date,
 * time, date-time and uuid, anyOf/oneOf, $ref to #/$defs or #/definitions, and the annotations
 * (title, description, ...). A keyword it cannot honour is refused
 * (GEMMA3_ERR_UNSUPPORTED naming it and where); malformed JSON is GEMMA3_ERR_FORMAT with
 * "json-schema:LINE:COLUMN: ...". *gbnf is malloc'd (caller frees). */
int gemma3_json_schema_to_grammar(const char *schema, size_t len, char **gbnf);

/* ---- build and machine ------------------------------------------------------------------- */
#define GEMMA3_VERSION "0.9.0"
/* The names of the kernel tables this CPU can run ("scalar" first, then "avx2", "avx512", ...),
 * into names[0..max); returns how many there are (which may exceed max). */
int gemma3_kernel_tables(const char **names, int max);
/* Reads an input file whole, as the library reads its own (config.json, tokenizer.model): "-" is
 * standard input, a pipe or FIFO is read to its end; a directory, a device other than a
 * terminal, or more than 1 GiB is refused by name. *data is malloc'd with a NUL after the last
 * byte (caller frees); *len counts every byte, NUL bytes included. */
int gemma3_read_file(const char *path, char **data, size_t *len);
/* A JSON file read so and parsed strictly (a key given twice or bytes after the value are
 * refused, the message naming path, line and column). *out: free with cJSON_Delete. */
struct cJSON;
int gemma3_read_json(const char *path, struct cJSON **out);

/* Runs fn(ctx, ith, nth) for ith in [0, nth) on the session's threads (nth of them, the caller
 * included) and returns when all are done: for work beside the model's that is to use the same
 * threads (a perplexity run's log-softmax over many rows). */
void gemma3_session_parallel(gemma3_session *s, void (*fn)(void *ctx, int ith, int nth), void *ctx);
/* log(sum(exp(x[i]))) over n values, in the library's order (strips of 1,024, merged in double):
 * the normaliser the library's own log-probabilities use, on the kernels of the chosen level
 * (gemma3_set_isa, GEMMA3_ISA, else the best this CPU has). */
double gemma3_log_sum_exp(const float *x, int n);
/* ---- writing files ------------------------------------------------------------------------ */
/* The one way the library and the gemma3 command write a file (saved states, logits dumps, KL
 * base files, transcripts). A regular file, a symbolic link to one, or a path that does not
 * exist yet is written to a temporary (TARGET.tmp.PID beside the file) that is flushed to the
 * disk and renamed over the file by gemma3_outfile_commit: an error or a crash leaves the
 * previous file whole, and a link stays a link. A character device (/dev/null, /dev/full, a
 * terminal), a FIFO, a socket or a link to a file descriptor (/dev/stdout, /dev/fd/N) is written
 * directly, as what it is. A directory or a block device is refused. Temporaries of a process
 * that no longer exists, beside the same file, are removed when it is next opened. Every error
 * names path. */
typedef struct gemma3_outfile gemma3_outfile;
int gemma3_outfile_open(const char *path, gemma3_outfile **out);
FILE *gemma3_outfile_stream(gemma3_outfile *o);
/* Flushes, syncs, closes and renames; any failed write, flush or close is an error (the
 * temporary is then removed). Frees o either way. */
int gemma3_outfile_commit(gemma3_outfile *o);
/* Closes and removes the temporary (what was written directly stays written). Frees o. */
void gemma3_outfile_discard(gemma3_outfile *o);

#ifdef __cplusplus
}
#endif
#endif
